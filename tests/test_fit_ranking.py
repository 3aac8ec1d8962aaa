"""bench.fit_ranking's choice of floors, on questions made up to tie."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from app.services.ranking import Model
from bench import fit_ranking as fr


def asked(cosines: list[float], labels: list[float]) -> fr.Asked:
    n = len(cosines)
    return fr.Asked(
        view="notes",
        kind="made up",
        answers=int(sum(labels)),
        features={"cosine": np.array(cosines)},
        nearest=np.ones(n, dtype=bool),
        bm25=np.zeros(n),
        label=np.array(labels),
    )


# The chance is the logistic of the cosine: the answer's 0.88 stays on the page under any
# floor tried (at most 0.5); the no-answer question's one candidate, 0.27, leaves it
# under any floor above that. Every floor above 0.27 gives the most per question.
QUESTIONS = [asked([2.0, -3.0], [1.0, 0.0]), asked([-1.0], [0.0])]
MODEL = Model({"cosine": 1.0}, intercept=0.0, scale=1.0, floor=0.0)


def test_of_hybrid_floors_that_tie_the_highest_is_chosen() -> None:
    """The floor keeps facts nothing supports off a page: of floors that cost nothing,
    the one that keeps the most off."""
    tied = [f for f in fr.FLOORS if f > 1 / (1 + np.exp(1.0))]
    assert len(tied) > 1
    chosen = fr.choose_floor(QUESTIONS, MODEL)
    assert chosen == max(tied)
    empty = fr.figures(QUESTIONS, replace(MODEL, floor=chosen))
    assert (empty.recall5, empty.empty) == (1.0, 1.0)


def test_of_cuts_that_tie_the_lowest_is_chosen_unless_asked_for_the_highest() -> None:
    """Semantic search's cosine floor keeps the lowest of those that tie."""
    page = lambda floor: fr.hybrid_page(replace(MODEL, floor=floor))  # noqa: E731
    tied = [f for f in fr.FLOORS if f > 1 / (1 + np.exp(1.0))]
    assert fr.best_cut(QUESTIONS, fr.FLOORS, page) == min(tied)
    assert fr.best_cut(QUESTIONS, fr.FLOORS, page, highest=True) == max(tied)


def test_a_refit_reproduces_the_kept_file_to_within_the_tolerance() -> None:
    """--check: numbers a rounding edge apart reproduce the file; a moved weight, a
    feature more or less, or another model's name do not."""
    kept = MODEL.to_json()
    assert fr.differences(kept, kept) == []
    assert fr.differences(kept, replace(MODEL, weights={"cosine": 1.000001}).to_json()) == []
    moved = fr.differences(kept, replace(MODEL, weights={"cosine": 1.001}).to_json())
    assert moved == ["features.cosine 1.0 -> 1.001"]
    more = replace(MODEL, weights={"cosine": 1.0, "keyword": 0.0}).to_json()
    assert fr.differences(kept, more) == ["features.keyword None -> 0.0"]
    assert fr.differences(kept, replace(MODEL, embedding="other").to_json()) != []
