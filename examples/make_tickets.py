"""Regenerate examples/data/tickets.csv: synthetic support tickets (deterministic, seeded)."""

import csv
import random
from pathlib import Path

TEMPLATES = {
    "billing": [
        "I was charged twice for my {plan} plan this month.",
        "My invoice shows the wrong VAT number.",
        "Refund for the {plan} upgrade never arrived.",
    ],
    "bug": [
        "The export button crashes the app when the table has more than {n} rows.",
        "Login fails with error {code} since the last update.",
        "Charts render blank in dark mode.",
    ],
    "feature": [
        "Please add SSO with {idp}.",
        "Could you support exporting to Parquet?",
        "A keyboard shortcut for search would be great.",
    ],
    "spam": ["Buy cheap followers now!!!", "You won a prize, click here."],
}


def main() -> None:
    rng = random.Random(11)
    out = Path(__file__).parent / "data" / "tickets.csv"
    with out.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["ticket_id", "customer", "channel", "text"])
        for i in range(1, 121):
            kind = rng.choices(list(TEMPLATES), weights=[3, 4, 2, 1])[0]
            text = rng.choice(TEMPLATES[kind]).format(
                plan=rng.choice(["Pro", "Team", "Basic"]),
                n=rng.choice([500, 1000, 5000]),
                code=rng.choice(["E401", "E503", "E42"]),
                idp=rng.choice(["Okta", "Azure AD", "Google"]),
            )
            writer.writerow([f"T{i:04d}", f"customer{rng.randint(1, 40)}", rng.choice(["email", "chat", "web"]), text])


if __name__ == "__main__":
    main()
