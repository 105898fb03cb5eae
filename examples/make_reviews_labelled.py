"""Regenerate examples/data/reviews_labelled.csv: synthetic reviews with golden labels.

Each review is built from phrases whose sentiment and topic are known, so the labels are right by
construction: `gold_sentiment` (positive | negative | mixed), `gold_topics` (`a; b`) and `stars`.
Every tenth row has no sentiment label, to show that unlabelled rows are left out of the metrics.
Used by specs/reviews_judged.yaml (golden labels, checks and an LLM judge).
"""

import csv
import random
from pathlib import Path

PRODUCTS = ["kettle", "headphones", "desk lamp", "backpack", "coffee grinder", "running shoes", "blender"]
GOOD = {
    "works perfectly": "quality",
    "arrived early and well packed": "shipping",
    "is great value for the price": "price",
    "has a battery that lasts for days": "battery",
    "is quiet and fast": "noise",
}
BAD = {
    "broke after two weeks": "quality",
    "arrived damaged": "shipping",
    "is overpriced for what it does": "price",
    "stopped charging": "battery",
    "is far too loud": "noise",
}


def review(rng: random.Random, product: str) -> tuple[str, str, list[str], int]:
    kind = rng.choices(["positive", "negative", "mixed"], weights=[5, 3, 2])[0]
    if kind == "positive":
        parts, stars = rng.sample(sorted(GOOD), 2), rng.choice([4, 5])
    elif kind == "negative":
        parts, stars = rng.sample(sorted(BAD), 2), rng.choice([1, 2])
    else:
        parts, stars = [rng.choice(sorted(GOOD)), rng.choice(sorted(BAD))], 3
    topics = sorted({GOOD.get(p) or BAD[p] for p in parts})
    return f"The {product} {parts[0]}, and it {parts[1]}.", kind, topics, stars


def main() -> None:
    rng = random.Random(17)
    out = Path(__file__).parent / "data" / "reviews_labelled.csv"
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["review_id", "product", "text", "stars", "gold_sentiment", "gold_topics"])
        for i in range(1, 61):
            product = rng.choice(PRODUCTS)
            text, kind, topics, stars = review(rng, product)
            writer.writerow([f"L{i:03d}", product, text, stars, "" if i % 10 == 0 else kind, "; ".join(topics)])


if __name__ == "__main__":
    main()
