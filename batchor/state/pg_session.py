"""DuckDB's calling convention on a PostgreSQL connection, for SQL written in the portable subset.

`DuckDBStore.connection()` hands out a DuckDB connection; code above the store (operator commands,
the batch ledger) uses it as `db.execute(sql, [args]).fetchall()` with `?` placeholders, explicit
BEGIN/COMMIT, and `db.register(name, arrow_table)` to join against Arrow data. `PgSession` offers
the same calls on a psycopg connection, so that code runs unchanged on either backend: `?` becomes
`%s`, registered tables become temp tables filled by COPY.
"""

from __future__ import annotations

from typing import Any, Iterator

import pyarrow as pa

_PG_TYPES = (
    (pa.types.is_boolean, "BOOLEAN"),
    (pa.types.is_integer, "BIGINT"),
    (pa.types.is_floating, "DOUBLE PRECISION"),
    (pa.types.is_binary, "BYTEA"),
    (pa.types.is_large_binary, "BYTEA"),
    (pa.types.is_timestamp, "TIMESTAMP"),
    (pa.types.is_date, "DATE"),
)


def pg_type(arrow_type: pa.DataType) -> str:
    for test, name in _PG_TYPES:
        if test(arrow_type):
            return name
    return "TEXT"


def qmark_to_pyformat(sql: str) -> str:
    """`?` placeholders (outside quotes) to psycopg's `%s`; literal `%` doubled."""
    out: list[str] = []
    quote: str | None = None
    for ch in sql:
        if quote:
            if ch == quote:
                quote = None
        elif ch in ("'", '"'):
            quote = ch
        elif ch == "?":
            out.append("%s")
            continue
        out.append("%%" if ch == "%" else ch)
    return "".join(out)


def arrow_rows(table: pa.Table | pa.RecordBatch) -> Iterator[tuple[Any, ...]]:
    return zip(*(column.to_pylist() for column in table.columns))


def copy_rows(conn: Any, table: str, columns: list[str], rows: Iterator[tuple[Any, ...]]) -> None:
    names = ", ".join(f'"{c}"' for c in columns)
    with conn.cursor() as cur, cur.copy(f"COPY {table} ({names}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


class PgSession:
    """A psycopg connection (autocommit) answering DuckDB-style calls."""

    def __init__(self, conn: Any) -> None:
        self.conn = conn
        self._cursor: Any = None

    def execute(self, sql: str, params: list[Any] | tuple[Any, ...] | None = None) -> "PgSession":
        if sql.strip().rstrip(";").upper() == "CHECKPOINT":
            # DuckDB compacts its file here; PostgreSQL's autovacuum does that job (and its
            # CHECKPOINT needs superuser), so this is a no-op.
            self._cursor = None
            return self
        if params:
            self._cursor = self.conn.execute(qmark_to_pyformat(sql), list(params))
        else:
            self._cursor = self.conn.execute(sql)
        return self

    def fetchall(self) -> list[tuple[Any, ...]]:
        if self._cursor is None:
            return []
        if self._cursor.description is None:  # like DuckDB: DML answers its row count, DDL nothing
            return [(self._cursor.rowcount,)] if self._cursor.rowcount >= 0 else []
        rows: list[tuple[Any, ...]] = self._cursor.fetchall()
        return rows

    def fetchone(self) -> tuple[Any, ...] | None:
        rows = self.fetchall() if self._cursor is not None and self._cursor.description is None else None
        if rows is not None:
            return rows[0] if rows else None
        return self._cursor.fetchone() if self._cursor is not None else None

    def register(self, name: str, data: pa.Table | pa.RecordBatchReader) -> "PgSession":
        """Make an Arrow table queryable as `name` (a temp table on this connection)."""
        table = data.read_all() if isinstance(data, pa.RecordBatchReader) else data
        columns = ", ".join(f'"{f.name}" {pg_type(f.type)}' for f in table.schema)
        self.conn.execute(f'DROP TABLE IF EXISTS pg_temp."{name}"')
        self.conn.execute(f'CREATE TEMP TABLE "{name}" ({columns})')
        copy_rows(self.conn, f'"{name}"', table.schema.names, arrow_rows(table))
        return self

    def unregister(self, name: str) -> "PgSession":
        self.conn.execute(f'DROP TABLE IF EXISTS pg_temp."{name}"')
        return self

    def close(self) -> None:
        """The store owns the connection; closing the session only forgets the last result."""
        self._cursor = None
