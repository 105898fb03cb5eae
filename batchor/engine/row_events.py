"""Finished rows as they are stored: the streamed output file and the `row_finished` event.

The run asks for a `RowStream` (outputs/stream.py) when its output streams or someone listens
for rows (`apply --json`, `batchor.apply(on_row=...)`); its result sinks hand it each flush
before the state stores it, and each wave resyncs it with the state.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from batchor.engine.events import Event, EventSink
from batchor.outputs.export import format_for
from batchor.outputs.stream import RowStream
from batchor.plan.plan_file import CompiledPlan
from batchor.state.base import StateStore


def row_stream(
    plan: CompiledPlan, store: StateStore, output_path: Path | None, emit: EventSink, row_events: bool
) -> RowStream | None:
    """The run's row stream, or None when its output does not stream and nobody listens. A shared
    (PostgreSQL) run does not stream: its workers would each append to their own host's file."""
    target = output_path or Path(plan.header.output.path)
    fmt = format_for(target) if output_path else plan.header.output.format
    streamed = plan.header.output.stream and fmt == "jsonl" and not getattr(store, "shared", False)
    if not streamed and not row_events:
        return None
    found = _emitter(emit) if row_events else None
    return RowStream(plan, store, target if streamed else None, found, remembered=output_path is None)


def _emitter(emit: EventSink) -> Any:
    def found(rows: list[dict[str, Any]], from_state: bool) -> None:
        for row in rows:
            data = {"row_key": row.get("_row_key"), "status": row.get("_status"), "cached": from_state, "row": row}
            emit(Event("row_finished", data))

    return found
