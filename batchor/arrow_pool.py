"""Arrow's memory pool: jemalloc where the pyarrow build has it.

pyarrow's default pool (mimalloc) keeps the memory of freed batches, so reading a plan's rows in
batches grew the process by the size of every batch read; jemalloc gives it back. Measured on a
100,000-row plan (`benchmarks/run.py --quick --only reapply`, the re-apply's peak RSS): 356 MB
with mimalloc, 316 MB with jemalloc; reading the plan's rows alone grew the process by 129 MB with
mimalloc, 71 MB with jemalloc. A pool chosen by the user (ARROW_DEFAULT_MEMORY_POOL) is kept.
Imported for its effect by the modules that read and write Arrow data in bulk.
"""

from __future__ import annotations

import os

import pyarrow as pa


def use_returning_pool() -> None:
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a build without jemalloc (Windows): keep the default
        pass


use_returning_pool()
