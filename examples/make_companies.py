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
    """Rows `id`, `name`, `city`, `entity` (the true company) and `truth` (its name), shuffled."""
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
                    "truth": name,
                }
            )
    rng.shuffle(rows)
    return [{"id": f"c{i:04d}", **row} for i, row in enumerate(rows)]


LEADS = ["Invoice from", "Payment to", "Order by", "Credit note from", "Delivery note from"]
DETAILS = ["3 pallets", "March retainer", "rush order", "damaged crates", "Q2 services", "late fee"]


def notes(entities: int, seed: int = 7) -> list[dict[str, str]]:
    """The same companies mentioned in ledger notes (`Invoice from <name> — <detail>`): rows `id`,
    `note`, `city`, `entity` and `truth` (the company's name), for specs/company_mentions.yaml."""
    rng = random.Random(seed + 1)
    rows = []
    for row in companies(entities, seed):
        note = f"{rng.choice(LEADS)} {row['name']} — {rng.choice(DETAILS)}"
        rows.append({"id": "n" + row["id"][1:], "note": note, **{k: row[k] for k in ("city", "entity", "truth")}})
    return rows


def _write(out: Path, rows: list[dict[str, str]], columns: list[str]) -> None:
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=columns)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: row[k] for k in columns})


def main() -> None:
    data = Path(__file__).parent / "data"
    _write(data / "companies.csv", companies(40), ["id", "name", "city"])
    _write(data / "company_notes.csv", notes(40), ["id", "note", "city"])


if __name__ == "__main__":
    main()
