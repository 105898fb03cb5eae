"""`batchor state check`: read every stored value once, so damage anywhere in the file is found now
rather than by the query that happens to touch it later.

DuckDB keeps a checksum per block and verifies it on every read: hashing every column of every
table reads every block. A damaged block raises `state_corrupt` naming the table. PostgreSQL
checks its own pages (with data checksums on); there the check reads each table once.
"""

from __future__ import annotations

from typing import Any

from batchor.errors import StateCorruptError
from batchor.state.base import StateStore

_TABLES = {
    False: "SELECT table_name FROM information_schema.tables WHERE table_catalog = current_database() "
    "AND table_schema = 'main' AND table_type = 'BASE TABLE' ORDER BY 1",
    True: "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
    "AND table_type = 'BASE TABLE' ORDER BY 1",
}


def check_state(store: StateStore) -> dict[str, Any]:
    """Rows per table, after reading every value; raises StateCorruptError at the first damage."""
    shared = bool(getattr(store, "shared", False))
    tables = [name for (name,) in store.execute(_TABLES[shared])]
    rows: dict[str, int] = {}
    for table in tables:
        scan = f'SELECT count(*) FROM "{table}"' if shared else f'SELECT count(*), sum(hash(COLUMNS(*))) FROM "{table}"'
        try:
            rows[table] = int(store.execute(scan)[0][0])
        except StateCorruptError as exc:
            raise StateCorruptError(f"table {table}: {exc.message}", hint=exc.hint) from None
    return {"state": store.location, "ok": True, "tables": rows}
