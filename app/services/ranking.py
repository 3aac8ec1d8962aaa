"""Hybrid search's one scoring function: a few named features, weighed by a fitted model.

Each candidate of a hybrid search (app.services.search) is described by the FEATURES
below, each computed from the query, the candidate and the reader's other candidates
only. Its score is s = sum(weight * feature). From it:

- the page's order: best score first;
- its chance, 1 / (1 + exp(-(intercept + scale * s))): the estimate that it answers the
  question (the `relevance` a result shows).

The page holds the candidates whose chance reaches the floor, best first: what neither
half supports (a starter fact beside the one fact that answers, a nonsense query's
nearest facts) stays off it, and a question none reaches gets an empty page.

The weights, the calibration and the floor are data, not code: `python -m
bench.fit_ranking` fits them on the dev parts of the quality bench's three shapes of
memory (bench/datasets.py) and writes ranking.json beside this module, committed. Nobody
sets them by hand.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from app.embeddings import catalog

MODEL_FILE = Path(__file__).with_name("ranking.json")

# Every feature a candidate can be described by; a model uses some of them.
FEATURES: dict[str, str] = {
    "cosine": "cosine similarity of the fact's embedding to the query's",
    "keyword": (
        "its keyword score (BM25 over the facts you can see that hold a query word) over "
        "the best one's, times its cosine: a keyword match counts as far as it is also "
        "near in meaning (0 for a fact that holds no query word)"
    ),
    "neighbourhood": (
        "cosine of the fact to the mean of the query's ten nearest candidates: what they "
        "all share rather than what the query asks"
    ),
    "neighbourhood_squared": (
        "the neighbourhood squared: with it the neighbourhood weighs as a curve, so that a "
        "fact very like all of the nearest candidates is pushed down more than one only "
        "somewhat like them"
    ),
    "in_span": "1 when the query names a time span and the fact was created in it",
    "crowd": (
        "the mean cosine of the fact to the five candidates most like it, less that mean's "
        "average over the candidates: a fact with close kin among them (one of many turns "
        "on the topic, a restatement) says less of its own than one that stands apart"
    ),
}


@dataclass(frozen=True)
class Model:
    """What bench.fit_ranking fitted: feature weights, the calibration of their score into
    a chance, the floor on that chance, semantic search's cosine floor,
    the embedding model it was all fitted with, and on what."""

    weights: Mapping[str, float]
    intercept: float
    scale: float
    floor: float
    min_cosine: float = -1.0
    embedding: str = ""
    fitted_on: str = ""

    @property
    def features(self) -> tuple[str, ...]:
        return tuple(self.weights)

    def scores(self, features: Mapping[str, np.ndarray]) -> np.ndarray:
        """The score of each candidate (arrays aligned by candidate)."""
        total = np.zeros(len(next(iter(features.values()), ())))
        for name, weight in self.weights.items():
            total = total + weight * features[name]
        return total

    def chances(self, scores: np.ndarray) -> np.ndarray:
        return 1.0 / (1.0 + np.exp(-(self.intercept + self.scale * scores)))

    def page(self, features: Mapping[str, np.ndarray], limit: int) -> list[tuple[int, float]]:
        """(candidate's index, its chance) of the page: the candidates whose chance
        reaches the floor, best first."""
        s = self.scores(features)
        chance = self.chances(s)
        kept = np.flatnonzero(chance >= self.floor)
        order = kept[np.argsort(-s[kept], kind="stable")][:limit]
        return [(int(i), float(chance[i])) for i in order]

    def to_json(self) -> str:
        data = {
            "embedding": self.embedding,
            "features": {name: round(w, 6) for name, w in self.weights.items()},
            "calibration": {"intercept": round(self.intercept, 6), "scale": round(self.scale, 6)},
            "floor": round(self.floor, 6),
            "min_cosine": round(self.min_cosine, 6),
            "fitted_on": self.fitted_on,
        }
        return json.dumps(data, indent=2) + "\n"

    @classmethod
    def from_json(cls, text: str) -> Model:
        data = json.loads(text)
        weights = {str(k): float(v) for k, v in data["features"].items()}
        unknown = set(weights) - set(FEATURES)
        if unknown:
            raise ValueError(f"ranking model names unknown features: {sorted(unknown)}")
        calibration = data["calibration"]
        numbers = [
            calibration["intercept"],
            calibration["scale"],
            data["floor"],
            data["min_cosine"],
        ]
        if not all(math.isfinite(float(v)) for v in (*weights.values(), *numbers)):
            raise ValueError("ranking model holds a value that is not finite")
        intercept, scale, floor, min_cosine = (float(v) for v in numbers)
        return cls(
            weights, intercept, scale, floor, min_cosine, data["embedding"], data["fitted_on"]
        )


@cache
def shipped() -> Model:
    """The committed model (ranking.json), read once."""
    return Model.from_json(MODEL_FILE.read_text(encoding="utf-8"))


def cosine_floor(embedding: str) -> float:
    """The cosine under which semantic search finds no match with this embedding model:
    the fitted one for the model the ranking was fitted with, else the catalog's."""
    model = shipped()
    return model.min_cosine if model.embedding == embedding else catalog.min_cosine(embedding)


def rarity(df: Mapping[str, int], pool: int) -> dict[str, float]:
    """How rare each query word is among the reader's matches: BM25's idf with the pool
    (the reader's visible facts holding any of the words) as the collection."""
    return {w: math.log(1.0 + (pool - n + 0.5) / (n + 0.5)) for w, n in df.items()}


def bm25(
    held: Mapping[int, Sequence[str]],
    idf: Mapping[str, float],
    lengths: Mapping[int, int],
    *,
    k1: float = 1.2,
    b: float = 0.75,
) -> dict[int, float]:
    """BM25 of each fact from the words it holds (a fact is a sentence: each word counts
    once), its length and the reader-local idf; k1 and b are BM25's usual values."""
    if not held:
        return {}
    mean = sum(lengths[f] for f in held) / len(held) or 1.0
    out = {}
    for fid, words in held.items():
        norm = k1 * (1.0 - b + b * lengths[fid] / mean)
        out[fid] = math.fsum(idf[w] * (k1 + 1.0) / (1.0 + norm) for w in words)
    return out


def words_held(held: Sequence[str], idf: Mapping[str, float]) -> float:
    """The idf-weighted share of the query's words a fact holds (0 to 1). The sums are
    fsum's, exact whatever order the words come in, so equal shares are equal."""
    return words_held_each({0: held}, idf)[0]


def words_held_each(
    held: Mapping[int, Sequence[str]], idf: Mapping[str, float]
) -> dict[int, float]:
    """words_held() of each fact, by id, from the words each holds."""
    total = math.fsum(idf.values())
    if total <= 0:
        return dict.fromkeys(held, 0.0)
    return {fid: math.fsum(idf[w] for w in words) / total for fid, words in held.items()}
