"""Reviewed labels: a person's value for one answer field of one row, imported from a review file
(`batchor review import`, see batchor/review/). They live apart from the answers, keyed by the
job's name, step, row key and field, so no apply, `--refresh` or re-plan ever writes over them;
the output file and the golden-label metrics read them back. Portable SQL over
`store.connection()`: DuckDB and PostgreSQL alike; an import is one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from batchor.state.base import StateStore

REVIEWS_TABLE = """CREATE TABLE IF NOT EXISTS reviews (
    job_name VARCHAR, step VARCHAR, row_key VARCHAR, field VARCHAR, value VARCHAR,
    model_value VARCHAR, reviewer VARCHAR, reviewed_at TIMESTAMP, source_file VARCHAR, source_sha256 VARCHAR,
    PRIMARY KEY (job_name, step, row_key, field))"""


@dataclass(frozen=True, slots=True)
class ReviewedLabel:
    """One correction: `value` is the field's JSON (the whole text of a text step, `field` "text")."""

    step: str
    row_key: str
    field: str
    value: str
    model_value: str | None = None  # the model's answer when it was exported, for the record


@dataclass(frozen=True, slots=True)
class ReviewSource:
    """Who reviewed, and from which file (its SHA-256: the same name may hold another review)."""

    reviewer: str
    file: str
    sha256: str


def save_reviews(store: StateStore, job_name: str, labels: Sequence[ReviewedLabel], source: ReviewSource) -> int:
    """Store `labels` (a later review of the same field replaces the earlier one) in one
    transaction: all of them or, on any error, none."""
    with store.connection() as db:
        db.execute("BEGIN TRANSACTION")
        try:
            for label in labels:
                db.execute(
                    "DELETE FROM reviews WHERE job_name = ? AND step = ? AND row_key = ? AND field = ?",
                    [job_name, label.step, label.row_key, label.field],
                )
                db.execute(
                    "INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?, ?, CURRENT_TIMESTAMP, ?, ?)",
                    [job_name, label.step, label.row_key, label.field, label.value, label.model_value]
                    + [source.reviewer, source.file, source.sha256],
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
    return len(labels)


def reviewed_labels(store: StateStore, job_name: str) -> list[dict[str, Any]]:
    """Every reviewed label of a job: step, row_key, field, value (JSON), reviewer, when, file."""
    rows = store.execute(
        "SELECT step, row_key, field, value, reviewer, reviewed_at, source_file, source_sha256 FROM reviews "
        "WHERE job_name = ? ORDER BY step, row_key, field",
        [job_name],
    )
    names = ("step", "row_key", "field", "value", "reviewer", "reviewed_at", "source_file", "source_sha256")
    return [dict(zip(names, row)) for row in rows]
