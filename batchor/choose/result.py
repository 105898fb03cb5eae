"""What `batchor compare` found per model, and its verdict: the cheapest model passing every check."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class ModelResult:
    """One model on the sample: what it cost, what the whole job would cost, how well it answered."""

    model: str
    rows: int  # input rows of the sample
    status: str  # the pilot run's status
    sample_cost: float  # what its answers on the sample cost (the ledger's: cached answers count)
    spent_now: float  # what this compare paid for them (0 when every answer was cached)
    projected: float  # the whole job's expected cost on this model (the pilot estimator)
    projected_low: float
    projected_high: float
    checks_passed: int
    checks_total: int
    failed_checks: list[str] = field(default_factory=list)
    metrics: dict[str, float] = field(default_factory=dict)  # `step.field.metric` -> value (golden labels)
    agreement: float | None = None  # share of compared answers equal to the reference's (None: it is the reference)
    compared: int = 0  # answers compared with the reference's
    latency_p50_ms: float | None = None
    plan_file: str | None = None  # the calibrated full plan on this model

    @property
    def passed(self) -> bool:
        """Every check held on the sample and the run settled its rows."""
        return self.status in ("succeeded", "partial") and self.checks_passed == self.checks_total

    def to_dict(self) -> dict[str, Any]:
        return {
            "model": self.model,
            "rows": self.rows,
            "status": self.status,
            "sample_cost_usd": self.sample_cost,
            "spent_now_usd": self.spent_now,
            "projected_usd": self.projected,
            "projected_interval_usd": [self.projected_low, self.projected_high],
            "checks_passed": self.checks_passed,
            "checks_total": self.checks_total,
            "failed_checks": self.failed_checks,
            "passed": self.passed,
            "metrics": self.metrics,
            "agreement": self.agreement,
            "compared": self.compared,
            "latency_p50_ms": self.latency_p50_ms,
            "plan_file": self.plan_file,
        }


@dataclass
class Comparison:
    """The same seeded sample on each model, and which is the cheapest that passes every check."""

    spec: str
    sample: int
    seed: int
    reference: str
    results: list[ModelResult]
    rehearsal: bool = False  # --mock: the figures rehearse the flow, they say nothing of the models

    @property
    def spent(self) -> float:
        return sum(r.spent_now for r in self.results)

    @property
    def cheapest_passing(self) -> ModelResult | None:
        """The model with the lowest projected full-job cost among those passing every check."""
        passing = [r for r in self.results if r.passed]
        return min(passing, key=lambda r: r.projected) if passing else None

    def verdict(self) -> str:
        best = self.cheapest_passing
        if best is None:
            return "cheapest model that passes every check: none"
        return f"cheapest model that passes every check: {best.model} (full job ~${best.projected:.4f})"

    def to_dict(self) -> dict[str, Any]:
        best = self.cheapest_passing
        return {
            "spec": self.spec,
            "sample": self.sample,
            "seed": self.seed,
            "reference": self.reference,
            "rehearsal": self.rehearsal,
            "spent_usd": self.spent,
            "models": [r.to_dict() for r in self.results],
            "cheapest_passing": best.model if best else None,
            "verdict": self.verdict(),
        }

    def __str__(self) -> str:
        from batchor.choose.render import comparison_text

        return comparison_text(self)
