"""Answers given by another model (fallback models, escalation; see engine/other_models.py): what
the state holds for a set of request keys, and the link from a request to the request of another
model that answered it (`results.answered_by`). Portable SQL over `store.connection()` and
`store.execute()`: DuckDB and PostgreSQL alike; a set of links is one transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchor.state.base import StateStore

_KEYS_PER_QUERY = 500  # keys per IN list: a big set is asked in parts


@dataclass(frozen=True, slots=True)
class StoredResult:
    """A request's stored result, as far as choosing the row's next model needs it."""

    status: str
    error_code: str | None
    model: str | None
    answered_by: str | None


def stored_results(store: StateStore, keys: Sequence[str]) -> dict[str, StoredResult]:
    """The stored result of each of these keys that has one."""
    found: dict[str, StoredResult] = {}
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), _KEYS_PER_QUERY):
        part = unique[start : start + _KEYS_PER_QUERY]
        rows = store.execute(
            "SELECT request_key, status, error_code, model, answered_by FROM results "
            f"WHERE request_key IN ({', '.join('?' * len(part))})",
            part,
        )
        found.update({key: StoredResult(*rest) for key, *rest in rows})
    return found


def link_answers(store: StateStore, links: Sequence[tuple[str, str]]) -> None:
    """Record, for each (request, answer) pair, that `answer` (another model's request) answered
    `request`: rows mapped to `request` then read that answer (`StateStore.follow_fallbacks`)."""
    if not links:
        return
    with store.connection() as db:
        db.execute("BEGIN TRANSACTION")
        try:
            for request, answer in links:
                db.execute("UPDATE results SET answered_by = ? WHERE request_key = ?", [answer, request])
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise
