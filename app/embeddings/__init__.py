"""Text embeddings: the model catalog, fetching weights, and the embedders.

Import the heavy parts (onnxruntime) from their modules; this package only
re-exports the light ones, so `embornal model info` starts fast.
"""

from app.embeddings.base import Embedder, ModelUnavailable

__all__ = ["Embedder", "ModelUnavailable"]
