"""Arrow's memory pool: jemalloc where the pyarrow build has it.

pyarrow's default pool (mimalloc) keeps the memory of freed batches, so a big job's process grew
by every batch it read and every part it exported; jemalloc hands freed memory back within a
second. Measured: a 100,000-row re-apply peaked at 356 MB with mimalloc, 316 MB with jemalloc
(`benchmarks/run.py --quick --only reapply`); a 1M-row all-cached re-apply at 393 MB against
355 MB (`benchmarks/scale.py --rows 1000000`). A pool the user chose (ARROW_DEFAULT_MEMORY_POOL)
is always kept.

Two switches, because pyarrow offers no single one:
- `prefer_before_import` sets ARROW_DEFAULT_MEMORY_POOL, which Arrow's C++ reads once, when
  pyarrow loads: only then do Arrow's own allocations (Parquet, compute kernels) use jemalloc. The
  CLI calls it first thing, before any command imports pyarrow.
- `use_returning_pool` (called when the modules that move Arrow data in bulk are imported)
  sets pyarrow's Python-level default, which covers a Python-API caller whose pyarrow was
  already loaded.
"""

from __future__ import annotations

import os
import sys

POOL_VARIABLE = "ARROW_DEFAULT_MEMORY_POOL"


def prefer_before_import() -> None:
    """Ask for jemalloc where Arrow's wheels ship it (Linux x86-64), unless the user chose."""
    if sys.platform == "linux" and os.uname().machine == "x86_64":
        os.environ.setdefault(POOL_VARIABLE, "jemalloc")


def use_returning_pool() -> None:
    if os.environ.get(POOL_VARIABLE):
        return
    import pyarrow as pa

    try:
        pa.set_memory_pool(pa.jemalloc_memory_pool())
    except NotImplementedError:  # a build without jemalloc (Windows): keep the default
        pass
