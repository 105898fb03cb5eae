"""What planning a dependent step counts (plan/dependent.py): its rows cached, to run, skipped or
projected, and the markers a row's upstream answer can be instead of an answer. Kept apart so
the tally's arithmetic (shares, distinct projected requests) reads without the planning walk.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from batchor.plan.fanout_rows import Row


@dataclass
class DependentTally:
    rows: int = 0
    skipped: int = 0
    cached: int = 0
    to_run: int = 0  # requests rendered now (upstream answers known), unique
    input_tokens: int = 0
    projected: int = 0  # rows whose upstream answers do not exist yet (below a fan-out: at its bound)
    projected_expected: float = 0.0  # how many of those rows are expected
    unbounded: bool = False  # some projected rows lie below a fan-out without a bound
    elements: int = 0  # fan-out steps: element rows of the rows evaluated now
    evaluated: int = 0  # rows where `when` could be evaluated
    skipped_by_when: int = 0  # of those, rows its `when:` left out
    skipped_upstream: int = 0  # rows left out because an upstream answer never comes
    failed_earlier: int = 0  # rows whose request failed for good earlier: not sent again
    when_decided: bool = False  # `when:` reads only the row: projected rows already passed it
    projected_ids: set[Any] = field(default_factory=set)  # what decides each projected request (hashed)
    identified: int = 0  # projected rows whose request identity is known
    checked: int = 0  # of those, rows whose identity went into projected_ids
    projected_tokens_per_row: int = 200  # mean over sample renders: the expected cost
    projected_tokens_max: int = 200  # the longest sample render: the upper bound
    projected_rows: list[dict[str, Any]] = field(default_factory=list)  # input rows of projected rows (a sample)
    known_upstream: list[dict[str, Any]] = field(default_factory=list)  # upstream answers seen now (a sample)
    projected_upstream: list[dict[str, Any]] = field(default_factory=list)  # what they read, known so far (None: not)
    run_keys: set[str] = field(default_factory=set)
    unanswered: list[pa.Table] = field(default_factory=list)  # (row_key, request_key) rendered, no answer
    projected_keys: list[pa.Array] = field(default_factory=list)  # row keys of projected rows

    def rendered_unanswered(self) -> pa.Table:
        """Rendered requests without a stored answer, per row (plan/changes.py splits them by cause)."""
        empty = pa.table({"row_key": pa.array([], pa.string()), "request_key": pa.array([], pa.string())})
        return pa.concat_tables([empty, *self.unanswered])

    def projected_row_keys(self) -> pa.ChunkedArray:
        return pa.chunked_array(self.projected_keys, pa.string())

    @property
    def upstream_share(self) -> float:
        """Share of the rows whose upstream steps are settled that got every answer they read."""
        settled = self.evaluated + self.skipped_upstream
        return self.evaluated / settled if settled else 1.0

    @property
    def distinct_share(self) -> float:
        """Share of projected rows expected to be requests of their own: rows that will render the
        same request (same columns read, same upstream requests) are sent once. Identities are kept
        for the first IDENTITIES rows; later rows are assumed to repeat at their rate."""
        if not self.projected or not self.checked:
            return 1.0
        distinct = self.identified * len(self.projected_ids) / self.checked
        return (self.projected - self.identified + distinct) / self.projected

    def identify(self, identity: Any) -> None:
        if identity is None:  # not known (below a fan-out, after a SQL step): its own request
            return
        self.identified += 1
        if self.checked < IDENTITIES:
            self.checked += 1
            self.projected_ids.add(identity)

    def project(self, row: Row) -> None:
        self.projected += row.weight
        self.projected_expected += row.expected
        self.unbounded |= row.unbounded


class _Skipped:
    """Marks a row a step will never answer (skipped by `when` or left out by a SQL step)."""

    def __repr__(self) -> str:
        return "SKIPPED"


SKIPPED = _Skipped()
FAILED = object()  # a request that failed earlier with a deterministic error: not sent again
PROJECTED = object()  # a row whose request cannot be rendered yet
IDENTITIES = 1_000_000  # projected request identities kept to count duplicates (a set of ints)
