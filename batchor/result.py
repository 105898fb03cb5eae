"""`Result`: what `batchor.apply` returns: status, counts, spend, and the data itself."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from batchor.frames import as_kind, read_output
from batchor.humanize import money

if TYPE_CHECKING:
    from batchor.pilot import PilotResult
    from batchor.quality.checks import CheckReport


@dataclass
class Result:
    run_id: str
    status: str  # succeeded | partial | failed | interrupted | budget | paused | in_flight
    # Requests this run answered and failed (one answers every row with the same text); then, per
    # step, rows whose answer was cached and rows it skipped (`when:`, left out by a SQL step).
    succeeded: int
    failed: int
    cached: int
    skipped: int
    input_tokens: int
    output_tokens: int
    cost_usd: float
    duration_s: float
    output_path: str | None
    stop_reason: str | None = None
    wasted_usd: float = 0.0  # of cost_usd: attempts whose answer was rejected (invalid, truncated, refused)
    estimated_usd: float = 0.0  # of cost_usd: priced without usage from the provider (an estimate)
    answer_columns: list[str] = field(default_factory=list)
    checks: CheckReport | None = None  # the spec's quality gates over this run (None: it has none)
    # Per LLM step: the plan's estimate (expected_usd, upper_usd, output_source, input_source), what the
    # run's attempts cost (actual_usd) and actual / expected of the requests it settled (ratio, against
    # settled_expected_usd; None when nothing was expected).
    steps: list[dict[str, Any]] = field(default_factory=list)
    # The output's rows by `_status` (succeeded, failed, pending, skipped): what `data` holds.
    rows: dict[str, int] = field(default_factory=dict)
    # `apply(spec, pilot=...)`: the pilot that ran first (batchor.pilot.PilotResult), else None.
    pilot: PilotResult | None = None
    _kind: str = "path"
    _original: Any = None
    _table: pa.Table | None = None

    @property
    def counts(self) -> dict[str, int]:
        return {"succeeded": self.succeeded, "failed": self.failed, "cached": self.cached, "skipped": self.skipped}

    @property
    def accepted_usd(self) -> float:
        """Spend on answers that were accepted (cost_usd = accepted_usd + wasted_usd)."""
        return self.cost_usd - self.wasted_usd

    @property
    def spend(self) -> dict[str, float | bool]:
        return {
            "total_usd": self.cost_usd,
            "accepted_usd": self.accepted_usd,
            "wasted_usd": self.wasted_usd,
            "estimated_usd": self.estimated_usd,
            "estimated": self.estimated_usd > 0,
        }

    @property
    def estimate(self) -> dict[str, float | None]:
        """The whole run: what the plan expected and allowed at most, what was spent, and actual /
        expected of the requests the run settled (all of them unless it stopped early)."""
        from batchor.state.answer_stats import report_totals

        return report_totals(self.steps)

    @property
    def tokens(self) -> dict[str, int]:
        return {"input": self.input_tokens, "output": self.output_tokens}

    def to_arrow(self) -> pa.Table:
        if self._table is None:
            if self.output_path is None:
                raise ValueError("this run wrote no output file")
            self._table = read_output(self.output_path)
        return self._table

    def to_pandas(self) -> Any:
        return as_kind(
            self.to_arrow(), "pandas", self._original if self._kind == "pandas" else None, self.answer_columns
        )

    def to_polars(self) -> Any:
        return as_kind(self.to_arrow(), "polars")

    @property
    def data(self) -> Any:
        """The results in the type of the input given (`data=`), else an Arrow table."""
        if self._kind == "pandas":
            return self.to_pandas()
        if self._kind == "polars":
            return self.to_polars()
        return self.to_arrow()

    def errors(self) -> Any:
        """Rows that failed: row key, status, error; in the type of the input given (`data=`: a
        pandas or polars frame), else an Arrow table."""
        table = self.to_arrow()
        mask = pc.equal(table.column("_status"), "failed")
        failed = table.filter(mask).select(["_row_key", "_status", "_error"])
        return as_kind(failed, self._kind) if self._kind in ("pandas", "polars") else failed

    def __repr__(self) -> str:
        rows = ", ".join(f"{n} {status}" for status, n in self.rows.items() if n) or "none"
        cost = money(self.cost_usd, estimated=bool(self.estimated_usd))
        return (
            f"<Result {self.run_id} {self.status}: rows {rows}; requests {self.succeeded} answered, "
            f"{self.failed} failed, {self.cached} cached; {cost}"
            f"{f' ({money(self.wasted_usd)} wasted)' if self.wasted_usd else ''}>"
        )
