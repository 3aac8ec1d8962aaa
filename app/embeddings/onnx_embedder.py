"""An embedder that runs a BERT-style ONNX model with its Hugging Face tokenizer."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

from app.embeddings.base import Vectors, l2_normalize
from app.embeddings.catalog import ModelSpec

MODEL_FILE = "model.onnx"
TOKENIZER_FILE = "tokenizer.json"
_FEEDS = ("input_ids", "attention_mask", "token_type_ids")


def _load_tokenizer(path: Path, max_tokens: int) -> Tokenizer:
    tokenizer = Tokenizer.from_file(str(path))
    # A tokenizer.json may fix padding/truncation (minilm's pads everything to 128):
    # truncate at the model's limit, pad only to the longest text of a batch.
    pad = tokenizer.padding or {}
    pad_token = pad.get("pad_token") or "[PAD]"
    pad_id = pad.get("pad_id")
    if pad_id is None:
        pad_id = tokenizer.token_to_id(pad_token) or 0
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.enable_padding(pad_id=pad_id, pad_token=pad_token)
    return tokenizer


class OnnxEmbedder:
    """Tokenize, run the model, pool (CLS or masked mean), L2-normalize."""

    def __init__(
        self,
        spec: ModelSpec,
        model_dir: Path,
        threads: int = 0,
        batch_size: int = 32,
        *,
        yield_cores: bool = False,
    ):
        self.name = spec.name
        self.spec = spec
        self.batch_size = max(1, batch_size)
        options = ort.SessionOptions()
        if threads > 0:
            options.intra_op_num_threads = threads
        # Requests arrive one batch at a time; parallelism inside an op is what pays.
        options.inter_op_num_threads = 1
        if yield_cores:
            # onnxruntime's threads spin on a core for a while after each run, waiting for
            # more work; with `yield_cores` they stop as the run returns (they still spin
            # inside a run, so the model is as fast). For a database server on this
            # machine, whose processes want those cores next: PostgreSQL's hybrid search
            # at 100k facts 42.6 -> 36.8 ms p50 with its halves side by side, the
            # embedding level (3.58 / 3.62 ms). In-process SQLite searches were 0.6-0.8
            # ms slower with it, so SQLite keeps the spinning (docs/postgresql.md).
            options.add_session_config_entry("session.force_spinning_stop", "1")
        self._session = ort.InferenceSession(
            str(model_dir / MODEL_FILE), sess_options=options, providers=["CPUExecutionProvider"]
        )
        declared = {i.name for i in self._session.get_inputs()}
        self._feeds = [name for name in _FEEDS if name in declared]
        unknown = declared - set(_FEEDS)
        if "input_ids" not in declared or unknown:
            raise ValueError(
                f"{MODEL_FILE} wants inputs {sorted(declared)}; "
                f"only {', '.join(_FEEDS)} can be given (input_ids required)"
            )
        outputs = [o.name for o in self._session.get_outputs()]
        self._output = "last_hidden_state" if "last_hidden_state" in outputs else outputs[0]
        self._tokenizer = _load_tokenizer(model_dir / TOKENIZER_FILE, spec.max_tokens)
        # The width is what the model really emits, not what the catalog says.
        self.width = int(self._embed(["width probe"]).shape[1])

    def embed_documents(self, texts: Sequence[str]) -> Vectors:
        prefix = self.spec.document_prefix
        return self._embed([prefix + t for t in texts])

    def embed_query(self, text: str) -> Vectors:
        return self._embed([self.spec.query_prefix + text])[0]

    def _embed(self, texts: list[str]) -> Vectors:
        if not texts:
            return np.zeros((0, getattr(self, "width", 0)), dtype=np.float32)
        # Batching texts of like length wastes less compute on padding.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        parts: list[Vectors] = []
        for start in range(0, len(order), self.batch_size):
            batch = [texts[i] for i in order[start : start + self.batch_size]]
            parts.append(self._run(batch))
        stacked = np.concatenate(parts, axis=0)
        result = np.empty_like(stacked)
        result[np.asarray(order)] = stacked
        return result

    def _run(self, batch: list[str]) -> Vectors:
        encodings = self._tokenizer.encode_batch(batch)
        ids = np.asarray([e.ids for e in encodings], dtype=np.int64)
        mask = np.asarray([e.attention_mask for e in encodings], dtype=np.int64)
        available = {
            "input_ids": ids,
            "attention_mask": mask,
            "token_type_ids": np.asarray([e.type_ids for e in encodings], dtype=np.int64),
        }
        feed = {name: available[name] for name in self._feeds}
        (hidden,) = self._session.run([self._output], feed)
        hidden = np.asarray(hidden, dtype=np.float32)
        if hidden.ndim == 2:
            pooled = hidden  # the model pools by itself
        elif self.spec.pooling == "cls":
            pooled = hidden[:, 0, :]
        else:
            weights = mask[:, :, None].astype(np.float32)
            pooled = (hidden * weights).sum(axis=1) / np.maximum(weights.sum(axis=1), 1e-9)
        return l2_normalize(pooled)
