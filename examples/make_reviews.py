"""Regenerate examples/data/reviews.csv: synthetic product reviews (deterministic, seeded)."""

import csv
import random
from pathlib import Path

PRODUCTS = [
    "kettle",
    "headphones",
    "desk lamp",
    "backpack",
    "coffee grinder",
    "running shoes",
    "phone case",
    "blender",
    "office chair",
    "water bottle",
    "e-reader",
    "yoga mat",
]
GOOD = [
    "works perfectly",
    "arrived early and well packed",
    "great value for the price",
    "feels solid",
    "battery lasts for days",
    "my kids love it",
    "exactly as described",
    "quiet and fast",
]
BAD = [
    "broke after two weeks",
    "arrived damaged",
    "customer service never answered",
    "smells of plastic",
    "much smaller than the photos",
    "stopped charging",
    "the zipper jammed on day one",
    "too loud",
]
MIXED = [
    "good but overpriced",
    "nice design, weak battery",
    "comfortable, though the color faded",
    "fast shipping but the manual is useless",
]
COUNTRIES = ["US", "DE", "FR", "GB", "ES", "IT", "NL", "SE", "PL", "JP"]


def review(rng: random.Random, product: str) -> tuple[str, int]:
    kind = rng.choices(["good", "bad", "mixed"], weights=[5, 3, 2])[0]
    if kind == "good":
        parts, stars = rng.sample(GOOD, 2), rng.choice([4, 5])
    elif kind == "bad":
        parts, stars = rng.sample(BAD, 2), rng.choice([1, 2])
    else:
        parts, stars = [rng.choice(MIXED), rng.choice(GOOD + BAD)], 3
    text = f"The {product} {parts[0]}. Also, {parts[1]}."
    return text, stars


def main() -> None:
    rng = random.Random(7)
    out = Path(__file__).parent / "data" / "reviews.csv"
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["review_id", "product", "country", "stars", "text"])
        for i in range(1, 301):
            product = rng.choice(PRODUCTS)
            text, stars = review(rng, product)
            writer.writerow([f"R{i:04d}", product, rng.choice(COUNTRIES), stars, text])


if __name__ == "__main__":
    main()
