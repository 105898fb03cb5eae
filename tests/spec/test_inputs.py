"""Input files: every supported format, globs, `sql` and `limit`, cells kept as text, stable
row keys and the errors a user meets with bad input files."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from conftest import make_spec, write_csv

from batchor.errors import BatchorError
from batchor.spec.inputs import ROW_KEY, InputReader, input_source
from batchor.spec.load import load_spec


def read_rows(spec: Path) -> list[dict]:
    reader = InputReader(input_source(load_spec(spec)))
    try:
        return [row for batch in reader.batches() for row in batch.to_pylist()]
    finally:
        reader.close()


def spec_for(folder: Path, path: str, **input_changes) -> Path:
    return make_spec(folder, input={"path": path, **input_changes})


def texts(rows: list[dict]) -> list[str]:
    return [r["text"] for r in rows]


def test_csv_cells_are_kept_as_text(workdir):
    (workdir / "zips.csv").write_text("id,zip,text,flag\n1,012,a,NO\n2,00501,b,1e3\n", encoding="utf-8")
    rows = read_rows(spec_for(workdir, "zips.csv"))
    assert [(r["id"], r["zip"], r["flag"]) for r in rows] == [
        ("1", "012", "NO"),
        ("2", "00501", "1e3"),
    ]


def test_csv_doubled_quotes_are_one_quote_as_excel_and_python_write_them(workdir):
    import csv

    cells = ['a & "quotes" here', 'a "b", c', '5" screen', "plain"]
    with (workdir / "quoted.csv").open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle)
        writer.writerow(["id", "text"])
        writer.writerows([[str(i), cell] for i, cell in enumerate(cells)])
    assert texts(read_rows(spec_for(workdir, "quoted.csv"))) == cells
    (workdir / "stray.csv").write_text('id,text\n1,5" screen\n2,"ok ""x"""\n', encoding="utf-8")
    assert texts(read_rows(spec_for(workdir, "stray.csv"))) == ['5" screen', 'ok "x"']


def test_tsv(workdir):
    (workdir / "in.tsv").write_text('id\tzip\ttext\n1\t012\the said "hi", twice\n', encoding="utf-8")
    rows = read_rows(spec_for(workdir, "in.tsv"))
    assert [(r["id"], r["zip"], r["text"]) for r in rows] == [("1", "012", 'he said "hi", twice')]


def test_jsonl(workdir):
    lines = [{"id": 1, "zip": "012", "text": "x"}, {"id": 2, "zip": "013", "text": "y"}]
    (workdir / "in.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    rows = read_rows(spec_for(workdir, "in.jsonl"))
    assert [(r["id"], r["zip"], r["text"]) for r in rows] == [(1, "012", "x"), (2, "013", "y")]


def test_parquet(workdir):
    pq.write_table(pa.table({"id": [1, 2, 3], "text": ["p", "q", "r"]}), workdir / "in.parquet")
    rows = read_rows(spec_for(workdir, "in.parquet"))
    assert [(r["id"], r["text"]) for r in rows] == [(1, "p"), (2, "q"), (3, "r")]


def test_glob_reads_every_matching_file_in_name_order(workdir):
    write_csv(workdir / "parts" / "b.csv", [{"id": "3", "text": "c"}])
    write_csv(workdir / "parts" / "a.csv", [{"id": "1", "text": "a"}, {"id": "2", "text": "b"}])
    (workdir / "parts" / "notes.txt").write_text("not an input", encoding="utf-8")
    assert texts(read_rows(spec_for(workdir, "parts/*.csv"))) == ["a", "b", "c"]


def test_sql_over_input(workdir):
    write_csv(
        workdir / "in.csv",
        [{"id": str(i), "text": f"t{i}", "lang": "en" if i % 2 else "de"} for i in range(6)],
    )
    spec = spec_for(workdir, "in.csv", sql="SELECT id, upper(text) AS text FROM input WHERE lang = 'en'")
    rows = read_rows(spec)
    assert [(r["id"], r["text"]) for r in rows] == [("1", "T1"), ("3", "T3"), ("5", "T5")]
    assert set(rows[0]) == {ROW_KEY, "id", "text"}


def test_limit_keeps_the_first_rows(workdir):
    write_csv(workdir / "in.csv", [{"id": str(i), "text": f"t{i}"} for i in range(10)])
    assert texts(read_rows(spec_for(workdir, "in.csv", limit=3))) == ["t0", "t1", "t2"]


def test_sql_then_limit(workdir):
    write_csv(workdir / "in.csv", [{"id": str(i), "text": f"t{i}"} for i in range(10)])
    spec = spec_for(workdir, "in.csv", sql="SELECT * FROM input WHERE id::INT >= 5", limit=2)
    assert texts(read_rows(spec)) == ["t5", "t6"]


def test_explicit_key_is_the_row_key(workdir):
    write_csv(workdir / "in.csv", [{"id": "r1", "text": "a"}, {"id": "r2", "text": "b"}])
    assert [r[ROW_KEY] for r in read_rows(spec_for(workdir, "in.csv", key="id"))] == ["r1", "r2"]


def test_content_hash_keys_are_stable_and_duplicates_disambiguated(workdir):
    write_csv(
        workdir / "in.csv",
        [
            {"id": "1", "text": "same"},
            {"id": "1", "text": "same"},
            {"id": "2", "text": "other"},
            {"id": "1", "text": "same"},
        ],
    )
    spec = spec_for(workdir, "in.csv")
    first = [r[ROW_KEY] for r in read_rows(spec)]
    second = [r[ROW_KEY] for r in read_rows(spec)]
    assert first == second
    assert len(set(first)) == 4
    base = first[0]
    assert first[1] == f"{base}~2" and first[3] == f"{base}~3"
    assert not first[2].startswith(base)


def test_content_hash_key_depends_on_the_content_only(workdir):
    write_csv(workdir / "a.csv", [{"id": "1", "text": "x"}, {"id": "2", "text": "y"}])
    write_csv(workdir / "b.csv", [{"id": "2", "text": "y"}, {"id": "9", "text": "new"}])
    keys_a = {r["id"]: r[ROW_KEY] for r in read_rows(spec_for(workdir, "a.csv"))}
    keys_b = {r["id"]: r[ROW_KEY] for r in read_rows(spec_for(workdir, "b.csv"))}
    assert keys_a["2"] == keys_b["2"]
    assert keys_a["1"] != keys_b["9"]


@pytest.mark.parametrize("key", ["id", ["id", "lang"]])
def test_explicit_duplicate_keys_are_refused(workdir, key):
    write_csv(
        workdir / "in.csv",
        [
            {"id": "1", "lang": "en", "text": "a"},
            {"id": "2", "lang": "en", "text": "b"},
            {"id": "1", "lang": "en", "text": "c"},
        ],
    )
    with pytest.raises(BatchorError) as info:
        read_rows(spec_for(workdir, "in.csv", key=key))
    assert info.value.code == "duplicate_key"
    assert "'1" in info.value.message


def test_empty_explicit_key_is_refused(workdir):
    write_csv(workdir / "in.csv", [{"id": "1", "text": "a"}, {"id": "", "text": "b"}])
    with pytest.raises(BatchorError) as info:
        read_rows(spec_for(workdir, "in.csv", key="id"))
    assert info.value.code == "duplicate_key"
    assert "empty key" in info.value.message


def test_unknown_key_column(workdir):
    write_csv(workdir / "in.csv", [{"id": "1", "text": "a"}])
    with pytest.raises(BatchorError, match="input.key: column 'nope' not in the input"):
        read_rows(spec_for(workdir, "in.csv", key="nope"))


@pytest.mark.parametrize("path", ["missing.csv", "nothing/*.csv"])
def test_missing_input(workdir, path):
    with pytest.raises(BatchorError) as info:
        read_rows(spec_for(workdir, path))
    assert info.value.code == "input_missing"
    assert path.split("/")[0] in info.value.message


@pytest.mark.parametrize("content", ["", "id,text\n"])
def test_empty_input(workdir, content):
    (workdir / "empty.csv").write_text(content, encoding="utf-8")
    with pytest.raises(BatchorError) as info:
        read_rows(spec_for(workdir, "empty.csv"))
    assert info.value.code == "input_empty"
    assert "empty.csv" in info.value.message


def test_sql_leaving_no_rows_is_input_empty(workdir):
    write_csv(workdir / "in.csv", [{"id": "1", "text": "a"}])
    with pytest.raises(BatchorError) as info:
        read_rows(spec_for(workdir, "in.csv", sql="SELECT * FROM input WHERE false"))
    assert info.value.code == "input_empty"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("latin.csv", "id,text\n1,café crème\n"),
        ("latin.tsv", "id\ttext\n1\tcafé crème\n"),
        ("latin.jsonl", '{"id": 1, "text": "café"}\n'),
    ],
)
def test_non_utf8_input(workdir, name, content):
    (workdir / name).write_bytes(content.encode("latin-1"))
    with pytest.raises(BatchorError) as info:
        read_rows(spec_for(workdir, name))
    assert info.value.code == "input_encoding"
    assert name in info.value.message and "UTF-8" in info.value.message


def test_bad_sql_names_the_input_table(workdir):
    write_csv(workdir / "in.csv", [{"id": "1", "text": "a"}])
    with pytest.raises(BatchorError, match=r"input\.sql") as info:
        read_rows(spec_for(workdir, "in.csv", sql="SELECT nope FROM input"))
    assert "`input`" in (info.value.hint or "")


@pytest.mark.parametrize("suffix, sep", [("csv", ","), ("tsv", "\t")])
@pytest.mark.parametrize("where", ["first", "late"])
def test_a_big_file_with_a_cell_of_several_megabytes_is_read_whole(workdir, suffix, sep, where):
    # Over 8 MB, so the file takes the big-input path whose reader starts with 2 MB lines
    # (small buffers) and widens when it meets a longer one: in the sniffed head or past it.
    long_text = "word " * 700_000  # 3.5 MB in one cell
    lines = [f"{i}{sep}row number {i} with some padding text to make the file big" for i in range(160_000)]
    at = 1 if where == "first" else 150_000
    lines.insert(at, f"long{sep}{long_text}")
    (workdir / f"big.{suffix}").write_text(f"id{sep}text\n" + "\n".join(lines) + "\n", encoding="utf-8")
    assert (workdir / f"big.{suffix}").stat().st_size > 8 << 20
    reader = InputReader(input_source(load_spec(spec_for(workdir, f"big.{suffix}", key="id"))))
    try:
        assert reader.count() == 160_001
        batches = list(reader.batches(50_000))
        rows = [row for batch in batches for row in batch.to_pylist()]
    finally:
        reader.close()
    assert len(rows) == 160_001
    assert rows[at]["id"] == "long" and rows[at]["text"] == long_text
    assert rows[-1]["text"] == "row number 159999 with some padding text to make the file big"
    assert [b.num_rows for b in batches] == [50_000, 50_000, 50_000, 10_001]


def test_a_big_file_comes_in_batches_of_the_size_asked(workdir):
    """The batches (the plan data's row groups, so its bytes) follow the rows, not the reader's
    8 MB buffers (which cut a batch wherever a buffer ends)."""
    lines = [f"{i},row number {i} " + "x" * 130 for i in range(100_000)]
    (workdir / "big.csv").write_text("id,text\n" + "\n".join(lines) + "\n", encoding="utf-8")
    assert (workdir / "big.csv").stat().st_size > 8 << 20
    reader = InputReader(input_source(load_spec(spec_for(workdir, "big.csv", key="id"))))
    try:
        batches = list(reader.batches(30_000))
    finally:
        reader.close()
    assert [b.num_rows for b in batches] == [30_000, 30_000, 30_000, 10_000]
    assert [k for b in batches for k in b.column(ROW_KEY).to_pylist()] == [str(i) for i in range(100_000)]


@pytest.mark.parametrize("key", ["id", None], ids=["key-column", "content-key"])
def test_rows_only_sql_keeps_the_rows_named_by_their_keys_over_the_inputs_sql(workdir, key):
    """A pilot's stratified top-up plans the rows it drew by key: over the spec's own `sql:`, and
    with content keys (no key column) too; the rows keep the keys they had."""
    from batchor.spec.inputs import rows_only_sql

    write_csv(workdir / "in.csv", [{"id": str(i), "text": f"t{i}", "lang": "en" if i % 2 else "de"} for i in range(10)])
    sql = "SELECT id, upper(text) AS text FROM input WHERE lang = 'en'"
    spec = spec_for(workdir, "in.csv", sql=sql, **({"key": key} if key else {}))
    every = {r[ROW_KEY]: r["text"] for r in read_rows(spec)}
    wanted = [k for k, text in every.items() if text in ("T3", "T7")]
    kept = spec_for(
        workdir,
        "in.csv",
        sql=rows_only_sql(sql, [key] if key else [], [*wanted, "no-such-row"]),
        **({"key": key} if key else {}),
    )
    assert {r[ROW_KEY]: r["text"] for r in read_rows(kept)} == {k: every[k] for k in wanted}


@pytest.mark.parametrize("broken", ['{"id": 2, "text":', '{"id": 2, "text": "b"} trailing', "not json"])
def test_a_broken_jsonl_line_is_named_by_its_own_number(workdir, broken):
    """DuckDB names the line where its parser gave up (for an object cut short, the next one):
    the error names the line that is broken, so the user can find and fix it."""
    lines = ['{"id": 1, "text": "a"}', broken, '{"id": 3, "text": "c"}', '{"id": 4, "text": "d"}']
    (workdir / "in.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(BatchorError) as info:
        read_rows(spec_for(workdir, "in.jsonl"))
    assert info.value.code == "input_invalid"
    assert "in.jsonl line 2 " in info.value.message, info.value.message
