"""What the ledger says about providers' prompt caches: per run that sent a step's shared prefix
with cache controls (its `run_steps.cache_key`, see plan/prompt_cache.py), how many billed
attempts read it from the cache and how many tokens they read and wrote. Portable SQL over
`store.execute`, so DuckDB and PostgreSQL answer alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from batchor.state.base import StateStore

# An attempt that counts: billed, with usage reported by the provider.
_BILLED = "coalesce(a.output_tokens, 0) > 0 AND NOT coalesce(a.estimated, false)"


@dataclass(frozen=True)
class CacheRun:
    """One run's attempts of one cache key."""

    requests: int  # billed attempts
    hits: int  # of those, attempts that read the prefix from the cache
    read_tokens: int
    write_tokens: int
    writes: int = 0  # attempts that wrote it


def prompt_cache_runs(store: StateStore, cache_keys: list[str]) -> dict[str, list[CacheRun]]:
    """Per cache key, the runs that sent it and what their attempts read and wrote."""
    if not cache_keys:
        return {}
    marks = ", ".join("?" * len(cache_keys))
    rows = store.execute(
        "SELECT s.cache_key, a.run_id, count(*), count(*) FILTER (WHERE coalesce(a.cache_read_tokens, 0) > 0), "
        "coalesce(sum(a.cache_read_tokens), 0), coalesce(sum(a.cache_write_tokens), 0), "
        "count(*) FILTER (WHERE coalesce(a.cache_write_tokens, 0) > 0) "
        "FROM attempts a JOIN run_steps s ON s.run_id = a.run_id AND s.step = a.step "
        f"WHERE s.cache_key IN ({marks}) AND {_BILLED} GROUP BY 1, 2 ORDER BY 1, 2",
        list(cache_keys),
    )
    found: dict[str, list[CacheRun]] = {}
    for key, _run, requests, hits, read, write, writes in rows:
        found.setdefault(str(key), []).append(CacheRun(int(requests), int(hits), int(read), int(write), int(writes)))
    return found
