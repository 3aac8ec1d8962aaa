"""Text embeddings: the model catalog, fetching weights, loading, and the embedders.

Import each part from its module: this package imports nothing, so that the
catalog (and `embornal model info`) does not pull in numpy or onnxruntime.
"""
