"""What kind of work a planned step is: the one place that knows how a plan file writes it.

SQL and split steps run locally in DuckDB; the plan file has always written them as the
pseudo-provider `sql` (a split step also says `kind: split`), and an embed, reduce or plain LLM
step by its `kind`. Plans keep that wire form (their hashes and saved files stay valid); code asks
`StepPlan.step_kind` or `StepPlan.local` instead of comparing provider names.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

SQL_PROVIDER = "sql"  # the provider a plan file gives a step computed locally in DuckDB


class StepKind(StrEnum):
    LLM = "llm"  # one request per row to a model
    EMBED = "embed"  # one vector per row (plan/embed_step.py)
    REDUCE = "reduce"  # one request per group of rows (plan/reduce.py)
    SPLIT = "split"  # text cut into element rows, locally (plan/split.py)
    RESOLVE = "resolve"  # one request per candidate pair, then per cluster (plan/resolve_walk.py)
    SQL = "sql"  # a DuckDB query over the rows and earlier answers, locally (plan/sql_step.py)

    @property
    def local(self) -> bool:
        """Computed in DuckDB: no provider, no request, no cost."""
        return self in (StepKind.SQL, StepKind.SPLIT)


PER_GROUP = frozenset({StepKind.REDUCE.value, StepKind.RESOLVE.value})  # requests span rows: run in rounds


def kind_of(provider: str, kind: str) -> StepKind:
    """A plan step's kind from how the plan file writes it (`provider`, `kind`)."""
    if provider == SQL_PROVIDER:
        return StepKind.SPLIT if kind == StepKind.SPLIT else StepKind.SQL
    return StepKind(kind)


def local_price(model: str) -> dict[str, Any]:
    """The price a local step's plan carries: nothing, known exactly."""
    return {"provider": SQL_PROVIDER, "model": model, "input_per_mtok": 0.0, "output_per_mtok": 0.0, "source": "local"}
