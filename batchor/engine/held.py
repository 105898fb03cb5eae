"""The DuckDB state kept attached through a small job's series of calls.

Alone, each state call attaches the file and checkpoints it as it detaches (a few ms of CPU): a
small job's apply holds it once instead. A big job's scans and export leave the file free for other
processes between calls, and PostgreSQL connections are pooled anyway.
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext
from typing import Any

from batchor.engine.sink import KEEP_ATTACHED_S
from batchor.outputs.export import is_small
from batchor.plan.plan_file import CompiledPlan
from batchor.state.base import StateStore
from batchor.state.postgres_store import PostgresStore


def kept_attached_if_small(plan: CompiledPlan, store: StateStore) -> AbstractContextManager[Any]:
    """A small job's DuckDB state stays attached across the whole apply (closing dead runs, the
    run's start, its scans, flushes and end), up to KEEP_ATTACHED_S at a time: one attach and
    checkpoint instead of eight (~40 ms of CPU an apply). Unlike `held_if_small` it never holds
    the process's state lock between calls, so the flushes' worker threads use the file meanwhile;
    the file is detached when the block ends. Big jobs' units leave the file (and the host's
    memory) free between calls, and PostgreSQL connections are pooled anyway."""
    if isinstance(store, PostgresStore) or not is_small(plan):
        return nullcontext()
    return store.kept_attached(KEEP_ATTACHED_S)


def held_if_small(plan: CompiledPlan, store: StateStore) -> AbstractContextManager[Any]:
    """The DuckDB state attached once for a small job's series of calls (alone, each attaches the
    file and checkpoints it as it detaches: ~4 ms of CPU); a big job's scan and export leave the
    file free for other processes between calls, and PostgreSQL connections are pooled anyway."""
    if isinstance(store, PostgresStore) or not is_small(plan):
        return nullcontext()
    return store.session()
