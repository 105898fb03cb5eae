"""Input rows: files read by DuckDB and streamed as Arrow batches, each row with a stable key.

Rows are never materialised as Python objects here: DuckDB parses the file, applies the spec's
`sql` and `limit`, and computes row keys vectorised; callers pull Arrow record batches.
CSV/TSV cells are read as text, exactly as written ("012" stays "012").
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterator, TypeVar

import pyarrow as pa

from batchor.duck import SMALL_BYTES, confined_db, duckdb
from batchor.errors import (
    DuplicateKeyError,
    InputEmptyError,
    InputError,
)
from batchor.spec.input_errors import check_readable, input_error
from batchor.spec.input_source import InputSource as InputSource
from batchor.spec.input_source import input_source as input_source
from batchor.spec.input_source import resolve_input as resolve_input
from batchor.spec.sql_guard import project_root

ROW_KEY = "_row_key"
RESERVED_COLUMNS = (ROW_KEY, "_status", "_error")  # the bookkeeping columns every output file ends with
_T = TypeVar("_T")
_READERS = {
    # Quotes as RFC 4180, Excel and Python's csv write them: `""` inside a quoted cell is one `"`
    # (DuckDB's sniffer would otherwise settle on no escape and keep both quotes).
    "csv": "read_csv({files}, all_varchar=true, header=true, auto_detect=true, strict_mode=false, "
    "quote='\"', escape='\"', {lines})",
    "tsv": "read_csv({files}, all_varchar=true, header=true, delim='\\t', quote='', auto_detect=true, {lines})",
    "jsonl": "read_json({files}, format='newline_delimited')",
    "parquet": "read_parquet({files})",
}
# A CSV/TSV is first read with lines of up to 2 MB through 8 MB buffers. DuckDB's buffer is at
# least the longest line allowed, so allowing 256 MB lines from the start buffered a whole 125 MB
# file (+110 MB RSS at 1M rows, and a quarter of a GB per thread beyond). A longer line switches
# the reader to `_WIDE_LINES` and the query is run again (`InputReader._widen`).
_NARROW_LINES = "max_line_size=2097152, buffer_size=8388608"
_WIDE_LINES = "max_line_size=268435456"


class InputReader:
    """Runs the input query in an in-memory DuckDB and streams keyed rows."""

    def __init__(self, source: InputSource) -> None:
        self.source = source
        # A small input is read through a cursor of a kept instance (see `batchor.duck`): its
        # views are TEMP, so they are the cursor's own. A big one gets its own instances. Both
        # are confined: `input.sql` is spec SQL (batchor/spec/sql_guard.py).
        self.small = source.format != "xlsx" and _total_bytes(source.files) <= SMALL_BYTES
        self.db = self._connect(self.small)
        self.lines = _WIDE_LINES if self.small else _NARROW_LINES  # a small file's buffer is the file
        self._setup: list[str] = []  # statements that define the views, replayed by `_scratch`
        self._table: pa.Table | None = None  # xlsx rows, registered as `input`
        try:
            self._widening(self._define_views)
            self.columns = self._widening(self._describe)
        except BaseException:
            self.db.close()
            raise

    def close(self) -> None:
        self.db.close()

    def _connect(self, small: bool) -> duckdb.DuckDBPyConnection:
        """A confined connection reading the input's own files and, for `input.sql`, the project."""
        files = [str(p) for p in self.source.files]
        folders = [project_root(self.source.files[0].parent)] if self.source.sql and self.source.files else []
        return confined_db(folders, files, small=small)

    def query(self, sql: str) -> duckdb.DuckDBPyConnection:
        """Run `sql` over the input's views (`input`, `source`); a bad input raises InputError."""
        return self._widening(lambda: self._run(sql))

    def table(self, sql: str) -> pa.Table:
        """The rows of `sql` over the input's views as an Arrow table (no extra copy)."""

        def run() -> pa.Table:
            try:
                return self.db.sql(sql).to_arrow_table()
            except duckdb.Error as exc:
                if self.lines == _NARROW_LINES and "Maximum line size" in str(exc):
                    raise _LongLine() from None
                raise input_error(exc, self.source) from None

        return self._widening(run)

    def _define_views(self) -> None:
        src = self.source
        self._setup = []
        for path in src.files:
            check_readable(path)
        if src.format == "xlsx":
            if self._table is None:
                self._table = _read_xlsx(src.files)
                self.db.register("input", self._table)
            base = "SELECT * FROM input"
        else:
            files = "[" + ", ".join(sql_str(str(p)) for p in src.files) + "]"
            base = f"SELECT * FROM {self._reader_sql(files)}"
            self._setup.append(f"CREATE OR REPLACE TEMP VIEW input AS {base}")
            self._run(self._setup[-1])
        query = src.sql or "SELECT * FROM input"
        limit = f" LIMIT {int(src.limit)}" if src.limit else ""
        # the sample is drawn from the rows the limit keeps (a pilot's rows are the job's rows)
        kept = f"SELECT * FROM ({query}){limit}" if limit else query
        self._setup.append(f"CREATE OR REPLACE TEMP VIEW source AS {_sampled(kept, src)}")
        self._run(self._setup[-1])

    def _widening(self, work: Callable[[], _T]) -> _T:
        """`work()`; when it finds a line longer than the narrow reader takes, the views are
        defined again with `_WIDE_LINES` and `work()` runs once more."""
        try:
            return work()
        except _LongLine:
            self.lines = _WIDE_LINES
            self._define_views()
            return work()

    @contextmanager
    def _scratch(self) -> Iterator[duckdb.DuckDBPyConnection]:
        """A second in-memory DuckDB with the same views, closed after use: memory a big
        aggregate takes (the key checks) goes back to the OS instead of staying cached. A small
        input's aggregate is small: its own cursor serves."""
        if self.small:
            yield self.db
            return
        db = self._connect(False)
        try:
            if self._table is not None:
                db.register("input", self._table)
            for sql in self._setup:
                db.execute(sql)
            yield db
        finally:
            db.close()

    def _reader_sql(self, files: str) -> str:
        """The reader call; for CSV/TSV with the dialect sniffed once and spelled out.

        DuckDB sniffs a CSV every time a query over `auto_detect=true` is bound, and on a large
        file that costs about a full scan; the input is queried several times (columns, key
        checks, rows), so the options are sniffed once here (`sniff_csv` returns the equivalent
        explicit call) and the auto-detecting call remains the fallback.
        """
        auto = _READERS[self.source.format].format(files=files, lines=self.lines)
        if self.source.format not in ("csv", "tsv"):
            return auto
        first = sql_str(str(self.source.files[0]))
        options = auto.split(f"{files}, ", 1)[1].removesuffix(")")
        sniffer = (
            self.db if self.small else self._connect(False)
        )  # an own one is closed at once: sniffing's memory is freed
        try:
            (prompt,) = sniffer.execute(f"SELECT Prompt FROM sniff_csv({first}, {options})").fetchall()[0]
        except (duckdb.Error, IndexError, ValueError):
            return auto  # the auto-detecting reader reports the problem as before
        finally:
            if sniffer is not self.db:
                sniffer.close()
        head = f"FROM read_csv({first}, "
        if not (isinstance(prompt, str) and prompt.startswith(head) and prompt.endswith(");")):
            return auto
        return f"read_csv({files}, {prompt[len(head) : -2]})"

    def _run(self, sql: str, db: duckdb.DuckDBPyConnection | None = None) -> duckdb.DuckDBPyConnection:
        try:
            return (db or self.db).execute(sql)
        except duckdb.Error as exc:
            if self.lines == _NARROW_LINES and "Maximum line size" in str(exc):
                raise _LongLine() from None
            raise input_error(exc, self.source) from None

    def _describe(self) -> list[str]:
        columns = [row[0] for row in self._run("DESCRIBE source").fetchall()]
        reserved = [c for c in columns if c in RESERVED_COLUMNS]
        if reserved:
            raise InputError(
                f"input: column name(s) {', '.join(reserved)} are reserved: batchor adds "
                f"{', '.join(RESERVED_COLUMNS)} to every output",
                hint=f"rename in input.sql, e.g. `SELECT * RENAME ({reserved[0]} AS source{reserved[0]}) FROM input`",
            )
        for key in self.source.key_columns:
            if key not in columns:
                raise InputError(
                    f"input.key: column '{key}' not in the input (columns: {', '.join(columns)})", hint="fix input.key"
                )
        return columns

    def schema(self) -> pa.Schema:
        """The rows' columns and their types (no row is read)."""
        try:
            return self.db.sql("SELECT * FROM source LIMIT 0").to_arrow_table().schema
        except duckdb.Error as exc:
            raise input_error(exc, self.source) from None

    def count(self) -> int:
        (n,) = self.query("SELECT count(*) FROM source").fetchall()[0]
        return int(n)

    def key_expression(self) -> str:
        return row_key_sql(self.source.key_columns)

    def check_keys(self) -> set[str]:
        """Raise on duplicate or empty explicit keys; return duplicated content hashes."""
        expr = self.key_expression()
        keys = self.source.key_columns
        empty_key = "OR k = '' OR k IS NULL" if keys else ""  # one scan finds both problems
        found = self._widening(
            lambda: self._scratch_rows(
                f"SELECT k, count(*) c FROM (SELECT {expr} AS k FROM source s) GROUP BY k "
                f"HAVING count(*) > 1 {empty_key} ORDER BY c DESC LIMIT 10002"
            )
        )
        dups = [(k, c) for k, c in found if c > 1][:10000]
        if keys and dups:
            sample = ", ".join(f"'{k}' ({c}x)" for k, c in dups[:5])
            raise DuplicateKeyError(
                f"input.key: duplicate row keys in {', '.join(keys)}: {sample}",
                hint="make the key unique, add columns to input.key, or drop input.key to key rows by content",
            )
        if keys:
            empty = sum(c for k, c in found if k == "" or k is None)
            if empty:
                raise DuplicateKeyError(
                    f"input.key: {empty} row(s) have an empty key in {', '.join(keys)}",
                    hint="fill the key column, or choose another key",
                )
        return {k for k, _ in dups}

    def _scratch_rows(self, sql: str) -> list[tuple[Any, ...]]:
        with self._scratch() as db:
            return self._run(sql, db).fetchall()

    def batches(self, batch_size: int = 65536) -> Iterator[pa.RecordBatch]:
        """Rows with their key first, streamed in order; duplicate content gets `~2`, `~3`..."""
        dup_hashes = self.check_keys()
        seen: dict[str, int] = {}
        try:
            reader = self.db.sql(f"SELECT {self.key_expression()} AS {ROW_KEY}, s.* FROM source s").to_arrow_reader(
                batch_size
            )
        except duckdb.Error as exc:
            raise input_error(exc, self.source) from None
        total = 0
        for batch in _rebatched(reader, batch_size):
            total += batch.num_rows
            if dup_hashes and not self.source.key_columns:
                batch = _disambiguate(batch, dup_hashes, seen)
            yield batch
        if total == 0:
            raise InputEmptyError(
                f"input: no rows in {', '.join(p.name for p in self.source.files)}"
                + (" after input.sql/limit" if self.source.sql else ""),
                hint="check the file has a header and data rows",
            )


def _rebatched(batches: Iterator[pa.RecordBatch], size: int) -> Iterator[pa.RecordBatch]:
    """The rows of `batches` in batches of exactly `size` (the last one shorter). DuckDB's follow
    its read buffers; the plan data's row groups (so its bytes and hash) follow only the rows."""
    held: list[pa.RecordBatch] = []
    rows = 0
    for batch in batches:
        held.append(batch)
        rows += batch.num_rows
        while rows >= size:
            table = pa.Table.from_batches(held)
            yield _single(table.slice(0, size))
            held, rows = table.slice(size).to_batches(), rows - size
    if rows:
        yield _single(pa.Table.from_batches(held))


def _single(table: pa.Table) -> pa.RecordBatch:
    return table.combine_chunks().to_batches()[0]


class _LongLine(Exception):
    """A CSV/TSV line is longer than the narrow reader takes (see `_NARROW_LINES`)."""


def row_key_sql(key_columns: tuple[str, ...] | list[str]) -> str:
    """A row's key in SQL over a row `s` of the source: its key columns, or a hash of its content."""
    if key_columns:
        return " || '|' || ".join(f"coalesce(CAST({sql_ident(k)} AS VARCHAR), '')" for k in key_columns)
    return "md5(to_json(s))"


def rows_only_sql(query: str | None, key_columns: tuple[str, ...] | list[str], keys: list[str]) -> str:
    """`query` (the input's `sql:`, else the whole input) kept to the rows whose key is one of `keys`
    (a pilot's stratified top-up draws its rows by key). A content key's `~2` suffix (a repeated
    row) is the same content: its rows are kept alike."""
    wanted = sorted({k if key_columns else re.sub(r"~\d+$", "", k) for k in keys})
    listed = ", ".join(sql_str(k) for k in wanted) or "NULL"
    return f"SELECT s.* FROM ({query or 'SELECT * FROM input'}) s WHERE {row_key_sql(key_columns)} IN ({listed})"


def _sampled(query: str, src: InputSource) -> str:
    """`query`, or a seeded random sample of it (the same rows every time) in the seeded order it
    was drawn in: a run cut short (a pilot's call allowance, a budget) leaves a random part of the
    sample unasked, not the input's last rows, and a larger sample of the same seed starts with the
    smaller one's rows. Keys are unchanged: a content key's `~2` goes to one of identical rows."""
    if not src.sample:
        return f"SELECT * FROM ({query})"
    numbered = f"SELECT *, row_number() OVER () AS __rn FROM ({query})"
    # The seed and the row number hashed as one string: hash(__rn + seed) made seed s+1's sample
    # seed s's moved by one row, and DuckDB's hash(__rn, seed) orders rows alike for seeds 6 and 7.
    drawn = f"hash('{int(src.seed)}:' || __rn), __rn"
    picked = f"SELECT * FROM ({numbered}) ORDER BY {drawn} LIMIT {int(src.sample)}"
    return f"SELECT * EXCLUDE (__rn) FROM ({picked}) ORDER BY {drawn}"


def _disambiguate(batch: pa.RecordBatch, dups: set[str], seen: dict[str, int]) -> pa.RecordBatch:
    keys = batch.column(0).to_pylist()
    for i, key in enumerate(keys):
        if key in dups:
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:
                keys[i] = f"{key}~{seen[key]}"
    return batch.set_column(0, ROW_KEY, pa.array(keys, pa.string()))


def _total_bytes(files: tuple[Path, ...]) -> int:
    """The input files' size (an unreadable one counts as big: its error comes later, as before)."""
    try:
        return sum(path.stat().st_size for path in files)
    except OSError:
        return SMALL_BYTES + 1


def _read_xlsx(files: tuple[Path, ...]) -> pa.Table:
    try:
        import openpyxl
    except ImportError:
        raise InputError("input: reading .xlsx needs openpyxl", hint="pip install 'batchor[excel]'") from None
    tables = []
    for path in files:
        sheet = openpyxl.load_workbook(path, read_only=True, data_only=True).active
        rows = sheet.iter_rows(values_only=True)
        header = [str(h) if h is not None else f"column{i + 1}" for i, h in enumerate(next(rows, []))]
        data = [dict(zip(header, row)) for row in rows if any(v is not None for v in row)]
        tables.append(pa.Table.from_pylist(data) if data else pa.table({h: pa.array([], pa.string()) for h in header}))
    return pa.concat_tables(tables, promote_options="permissive")


def sql_str(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sql_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'
