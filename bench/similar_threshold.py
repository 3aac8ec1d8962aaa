"""Where `search.similar_threshold` comes from: cosine of paraphrases vs merely related facts.

    python -m bench.similar_threshold [--model minilm-l6]

A store returns the facts it is near (`similar`) so that an agent supersedes instead
of storing the same statement again. The threshold must keep the same statement in
other words above it (PARAPHRASES: the second would be a duplicate of the first) and
two different statements about the same topic below it (RELATED: both belong in the
memory). Each pair is embedded as documents, as a store embeds them, with the real
model; the script prints both distributions and the threshold that separates them
best (the most pairs on the right side; ties: the midpoint of the widest gap).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import tempfile
from pathlib import Path

import numpy as np

from app.dirs import Dirs
from app.embeddings.loader import load_embedder
from app.settings import Settings

# The same statement, said twice: what an agent repeating itself writes.
PARAPHRASES = [
    (
        "The staging database is backed up every night at 2am.",
        "Every night at 2 am the staging DB gets backed up.",
    ),
    (
        "Alice prefers tea over coffee in the morning.",
        "In the mornings Alice would rather have tea than coffee.",
    ),
    (
        "The API rate limit is 100 requests per minute per token.",
        "Each token may make at most 100 API requests a minute.",
    ),
    (
        "Our deploys go out on Tuesdays and Thursdays.",
        "We ship deployments every Tuesday and Thursday.",
    ),
    (
        "The office wifi password is stored in the team vault.",
        "You can find the office Wi-Fi password in the team's vault.",
    ),
    ("Bob is allergic to peanuts.", "Bob has a peanut allergy."),
    (
        "The build fails when Node is older than version 18.",
        "Builds break on Node versions below 18.",
    ),
    ("The project uses PostgreSQL 16 in production.", "Production runs on PostgreSQL version 16."),
    (
        "Carol leads the mobile team since March.",
        "Since March, Carol has been the lead of the mobile team.",
    ),
    (
        "The cat sleeps on the printer every afternoon.",
        "Every afternoon the cat naps on top of the printer.",
    ),
    (
        "Invoices must be sent before the fifth of each month.",
        "Each month, invoices have to go out by the 5th.",
    ),
    ("The user wants answers in French.", "The user prefers to be answered in French."),
    (
        "Logs are kept for 30 days and then deleted.",
        "We delete logs after keeping them for thirty days.",
    ),
    (
        "The main branch is protected and needs two reviews.",
        "Merging into main requires two approving reviews; the branch is protected.",
    ),
    ("Dana's birthday is on July 14.", "Dana was born on the 14th of July."),
    ("The CI pipeline takes about twelve minutes.", "A CI run lasts roughly 12 minutes."),
    (
        "The customer asked to be contacted only by email.",
        "The client wants to be reached by email only.",
    ),
    ("Our on-call rotation changes every Monday.", "The on-call shift rotates each Monday."),
    (
        "The garden gets watered automatically at 6pm.",
        "At six in the evening the sprinklers water the garden.",
    ),
    (
        "The laptop's battery lasts about four hours.",
        "On battery the laptop runs for roughly 4 hours.",
    ),
    (
        "Use the staging cluster for load tests, never production.",
        "Load tests belong on the staging cluster and must never hit production.",
    ),
    (
        "The meeting with the landlord moved to Friday.",
        "We rescheduled the landlord meeting to Friday.",
    ),
    (
        "Emails to the support address open a ticket automatically.",
        "Writing to the support email address creates a ticket on its own.",
    ),
    ("The recipe needs two cups of flour.", "You need 2 cups of flour for the recipe."),
    ("Eve moved to Berlin last year.", "Last year Eve relocated to Berlin."),
    ("The service listens on port 8420 by default.", "By default the service's port is 8420."),
    (
        "Passwords must be at least twelve characters long.",
        "A password needs a minimum of 12 characters.",
    ),
    ("The user is vegetarian.", "The user does not eat meat."),
    ("The car is due for an oil change in October.", "In October the car needs its oil changed."),
    (
        "Tests must pass before a pull request can be merged.",
        "A pull request can only be merged once its tests pass.",
    ),
]

# Two statements about the same topic, both worth keeping.
RELATED = [
    (
        "The staging database is backed up every night at 2am.",
        "The staging database runs on a smaller instance than production.",
    ),
    ("Alice prefers tea over coffee in the morning.", "Alice starts work at eight in the morning."),
    (
        "The API rate limit is 100 requests per minute per token.",
        "API tokens expire after thirty days.",
    ),
    (
        "Our deploys go out on Tuesdays and Thursdays.",
        "A deploy is rolled back automatically when error rates spike.",
    ),
    (
        "The office wifi password is stored in the team vault.",
        "The office wifi is slow in the meeting rooms.",
    ),
    ("Bob is allergic to peanuts.", "Bob brings his own lunch on Fridays."),
    (
        "The build fails when Node is older than version 18.",
        "The build produces a single bundle of about 2 MB.",
    ),
    (
        "The project uses PostgreSQL 16 in production.",
        "The project's database migrations are written with Alembic.",
    ),
    (
        "Carol leads the mobile team since March.",
        "The mobile team releases a new app version every two weeks.",
    ),
    (
        "The cat sleeps on the printer every afternoon.",
        "The cat is fed twice a day, at seven and at six.",
    ),
    (
        "Invoices must be sent before the fifth of each month.",
        "Invoices are generated from the accounting system.",
    ),
    ("The user wants answers in French.", "The user is learning Spanish on weekends."),
    (
        "Logs are kept for 30 days and then deleted.",
        "Logs are shipped to the central collector over TLS.",
    ),
    (
        "The main branch is protected and needs two reviews.",
        "Feature branches are named after their ticket.",
    ),
    ("Dana's birthday is on July 14.", "Dana likes chocolate cake."),
    (
        "The CI pipeline takes about twelve minutes.",
        "The CI pipeline runs the linter before the tests.",
    ),
    (
        "The customer asked to be contacted only by email.",
        "The customer's contract renews in January.",
    ),
    (
        "Our on-call rotation changes every Monday.",
        "The on-call engineer gets paged for errors above 5%.",
    ),
    ("The garden gets watered automatically at 6pm.", "The tomatoes in the garden need more sun."),
    ("The laptop's battery lasts about four hours.", "The laptop has 16 GB of memory."),
    (
        "Use the staging cluster for load tests, never production.",
        "The staging cluster has three nodes.",
    ),
    (
        "The meeting with the landlord moved to Friday.",
        "The landlord wants to raise the rent next year.",
    ),
    (
        "Emails to the support address open a ticket automatically.",
        "Support tickets are answered within one business day.",
    ),
    ("The recipe needs two cups of flour.", "The recipe bakes for forty minutes at 180 degrees."),
    ("Eve moved to Berlin last year.", "Eve works as a nurse."),
    (
        "The service listens on port 8420 by default.",
        "The service writes its data to a single SQLite file.",
    ),
    ("Passwords must be at least twelve characters long.", "Passwords are hashed with argon2."),
    ("The user is vegetarian.", "The user cooks dinner at home most evenings."),
    ("The car is due for an oil change in October.", "The car's winter tyres are in the garage."),
    (
        "Tests must pass before a pull request can be merged.",
        "Pull requests should stay under four hundred lines.",
    ),
]


def cosines(embedder: object, pairs: list[tuple[str, str]]) -> list[float]:
    left = np.asarray(embedder.embed_documents([a for a, _ in pairs]), dtype=np.float32)  # type: ignore[attr-defined]
    right = np.asarray(embedder.embed_documents([b for _, b in pairs]), dtype=np.float32)  # type: ignore[attr-defined]
    return [float(x) for x in np.sum(left * right, axis=1)]


def best_threshold(same: list[float], related: list[float]) -> tuple[float, int]:
    """The cut with the most pairs on their side (same >= cut > related); among those,
    the middle of the widest gap between neighbouring values."""
    values = sorted(set(same + related))
    cuts = [(a + b) / 2 for a, b in itertools.pairwise(values)]
    scored = []
    for index, cut in enumerate(cuts):
        right = sum(c >= cut for c in same) + sum(c < cut for c in related)
        gap = values[index + 1] - values[index]
        scored.append((right, gap, cut))
    right, _gap, cut = max(scored)
    return round(cut, 2), right


def describe(name: str, values: list[float]) -> str:
    ordered = sorted(values)
    tenth = ordered[len(ordered) // 10]
    ninetieth = ordered[(9 * len(ordered)) // 10]
    return (
        f"{name:<12} n={len(values):>3}  min {ordered[0]:.3f}  p10 {tenth:.3f}  "
        f"median {statistics.median(ordered):.3f}  p90 {ninetieth:.3f}  max {ordered[-1]:.3f}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", default="minilm-l6")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        settings = Settings(
            dirs=Dirs(home, home, home), embedding={"model": args.model, "download": False}
        )
        embedder = load_embedder(settings)
    assert embedder is not None, f"model {args.model} is not available"
    same, related = cosines(embedder, PARAPHRASES), cosines(embedder, RELATED)
    print(f"model {args.model}: cosine of each pair, embedded as documents\n")
    print(describe("paraphrases", same))
    print(describe("related", related))
    cut, right = best_threshold(same, related)
    total = len(same) + len(related)
    print(f"\nthreshold {cut:.2f}: {right}/{total} pairs on their side")
    print(f"  paraphrases below it: {sum(c < cut for c in same)}")
    print(f"  related at or above it: {sum(c >= cut for c in related)}")
    print("\nhistogram (0.05 buckets): paraphrases | related")
    for low in np.arange(0.0, 1.0, 0.05):
        high = low + 0.05
        p = sum(low <= c < high for c in same)
        r = sum(low <= c < high for c in related)
        if p or r:
            print(f"  {low:.2f}-{high:.2f}  {'#' * p:<16}| {'#' * r}")


if __name__ == "__main__":
    main()
