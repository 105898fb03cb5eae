"""Regenerate examples/data/companies.csv: company names with planted duplicates (seeded).

Each company appears one to four times, written the ways people write company names: another
legal suffix (Inc, Inc., LLC, Corporation), other case, `&` for `and`, and now and then a typo.
Some different companies share their first words ("Blue Harbor Logistics" and "Blue Harbor
Capital"), so a blocking rule on the name's start pairs them and the judge must tell them apart.
`companies(n, seed)` also returns each row's true company (`entity`), for benchmarks/resolve.py.
"""

from __future__ import annotations

import csv
import random
from pathlib import Path

FIRST = ["Blue", "North", "Silver", "Granite", "Cedar", "Harbor", "Summit", "Iron", "Maple", "Bright", "Red", "Atlas"]
SECOND = ["Harbor", "Wind", "Peak", "Field", "Stone", "River", "Ridge", "Oak", "Bay", "Star", "Lake", "Crest"]
KIND = ["Logistics", "Capital", "Analytics", "Foods", "Health", "Energy", "Software", "Labs", "Partners", "Textiles"]
SUFFIXES = ["", " Inc", " Inc.", ", LLC", " Corporation", " Corp.", " Ltd"]
CITIES = ["Berlin", "Lyon", "Austin", "Osaka", "Porto", "Leeds", "Denver", "Graz"]


def _variant(name: str, rng: random.Random) -> str:
    """Another way to write `name`: a suffix, a case, `&` for `and`, sometimes a typo."""
    text = name + rng.choice(SUFFIXES)
    if rng.random() < 0.25:
        text = text.upper() if rng.random() < 0.5 else text.lower()
    if " and " in text and rng.random() < 0.5:
        text = text.replace(" and ", " & ")
    if rng.random() < 0.12:  # a typo: two letters swapped inside the last word
        head, _, last = text.rpartition(" ")
        if len(last) > 4:
            i = rng.randrange(1, len(last) - 2)
            last = last[:i] + last[i + 1] + last[i] + last[i + 2 :]
        text = f"{head} {last}".strip()
    return text


def companies(entities: int, seed: int = 7) -> list[dict[str, str]]:
    """Rows `id`, `name`, `city`, `entity` (the true company), shuffled."""
    rng = random.Random(seed)
    names: list[str] = []
    while len(names) < entities:
        base = f"{rng.choice(FIRST)} {rng.choice(SECOND)}"
        name = f"{base} {rng.choice(KIND)}" if rng.random() < 0.85 else f"{base} and {rng.choice(SECOND)}"
        if name not in names:
            names.append(name)
    rows = []
    for number, name in enumerate(names):
        city = rng.choice(CITIES)
        copies = rng.choice([1, 1, 2, 2, 3, 4])
        for copy in range(copies):
            rows.append(
                {
                    "name": name + rng.choice(SUFFIXES) if copy == 0 else _variant(name, rng),
                    "city": city,
                    "entity": f"e{number}",
                }
            )
    rng.shuffle(rows)
    return [{"id": f"c{i:04d}", **row} for i, row in enumerate(rows)]


def main() -> None:
    out = Path(__file__).parent / "data" / "companies.csv"
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=["id", "name", "city"])
        writer.writeheader()
        for row in companies(40):
            writer.writerow({k: row[k] for k in ("id", "name", "city")})


if __name__ == "__main__":
    main()
