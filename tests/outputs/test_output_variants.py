"""A partial run (`--limit`, `--sample`, a `--model` override, a `--mock` rehearsal, data handed to the Python API)
never overwrites the spec's real output file: it writes beside it under a name that says what it
is, unless `--output` says where, and the command prints the path (docs/get-started/concepts.md)."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from typer.testing import CliRunner

import batchor
from batchor.cli.main import app
from batchor.outputs.written import remember
from batchor.plan.variants import variant_path, variant_tags
from tests.conftest import make_spec

SENTINEL = "id,sentiment\nkept,from the last full run\n"


@pytest.fixture
def spec(workdir) -> Path:
    path = make_spec(workdir, rows=6)
    real = workdir / "out" / "results.csv"
    real.parent.mkdir(parents=True, exist_ok=True)
    real.write_text(SENTINEL, encoding="utf-8")
    remember(real, str(workdir / ".batchor" / "state.duckdb"))  # as the last full run did
    return path


def apply_cli(*args: str) -> str:
    result = CliRunner().invoke(app, ["apply", *args, "--yes"])
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize(
    ("flags", "name", "rows"),
    [
        (["--limit", "3"], "results.limit-3.csv", 3),
        (["--sample", "4"], "results.sample-4.csv", 4),
        (["--model", "openai:gpt-4.1-nano"], "results.model-gpt-4.1-nano.csv", 6),
        (["--limit", "5", "--model", "openai:gpt-4.1-nano"], "results.limit-5.model-gpt-4.1-nano.csv", 5),
    ],
)
def test_a_partial_run_writes_beside_the_spec_output(fake, workdir, spec, flags, name, rows):
    printed = apply_cli(str(spec), *flags)
    written = workdir / "out" / name
    assert written.exists() and str(written) in printed
    assert len(written.read_text(encoding="utf-8").splitlines()) == rows + 1
    assert (workdir / "out" / "results.csv").read_text(encoding="utf-8") == SENTINEL


def test_model_naming_the_spec_own_model_is_a_full_run(fake, workdir, spec):
    plan = batchor.plan(spec, model="openai:gpt-4.1-mini", save=False)  # the spec's model
    assert plan.header.output.variant == [] and plan.header.output.path == str(workdir / "out" / "results.csv")
    assert batchor.plan(spec, model="openai:gpt-4.1-nano", save=False).header.output.variant == ["model-gpt-4.1-nano"]


def test_the_plan_says_where_a_partial_run_writes(workdir, spec):
    result = CliRunner().invoke(app, ["plan", str(spec), "--limit", "2", "--mock"])
    assert result.exit_code == 0, result.output
    assert "results.limit-2.mock.csv (--limit, --mock: the spec's" in result.output
    assert "results.csv is left as it is" in result.output
    plan = batchor.plan(spec, limit=2, save=False)
    assert plan.header.output.variant == ["limit-2"]
    assert plan.header.output.spec_path == str(workdir / "out" / "results.csv")


def test_output_says_where_even_for_a_partial_run(fake, workdir, spec):
    target = workdir / "elsewhere.csv"
    printed = apply_cli(str(spec), "--limit", "2", "--output", str(target))
    assert target.exists() and str(target) in printed
    assert f"output      {target} (--output)" in printed  # the plan says so too, not the variant's name
    assert "results.limit-2.csv" not in printed and not (workdir / "out" / "results.limit-2.csv").exists()
    assert (workdir / "out" / "results.csv").read_text(encoding="utf-8") == SENTINEL


def test_a_mock_rehearsal_writes_beside_the_spec_output(fake, workdir, spec):
    printed = apply_cli(str(spec), "--mock")
    rehearsal = workdir / "out" / "results.mock.csv"
    assert str(rehearsal) in printed and len(rehearsal.read_text(encoding="utf-8").splitlines()) == 7
    assert (workdir / "out" / "results.csv").read_text(encoding="utf-8") == SENTINEL
    assert fake.stats()["requests"] == 0


def test_a_spec_whose_provider_is_the_mock_writes_its_own_output_under_mock(workdir, spec):
    make_spec(workdir, rows=6, provider="mock", model="any")
    assert batchor.plan(spec, mock=True, save=False).header.output.variant == []


def test_the_docs_quickstart_names_the_file_it_writes(workdir):
    root = Path(__file__).resolve().parents[2]
    plan = batchor.plan(root / "specs" / "reviews.yaml", mock=True, save=False, state=str(workdir / "s.duckdb"))
    written = Path(plan.header.output.path)
    assert written == root / "out" / "reviews.mock.csv"
    install = (root / "docs" / "get-started" / "install.md").read_text(encoding="utf-8")
    assert "writes `out/reviews.mock.csv`" in install


def test_a_full_run_still_writes_the_spec_output(fake, workdir, spec):
    printed = apply_cli(str(spec))
    real = workdir / "out" / "results.csv"
    assert str(real) in printed and real.read_text(encoding="utf-8") != SENTINEL


def test_data_given_to_the_python_api_writes_beside_the_spec_output(fake, workdir, spec):
    frame = pa.table({"id": ["a", "b"], "text": ["first review", "second review"]})
    result = batchor.apply(spec, frame, handle_signals=False)
    assert result.output_path == str(workdir / "out" / "results.data.csv")
    assert result.succeeded == 2 and result.to_arrow().num_rows == 2
    assert (workdir / "out" / "results.csv").read_text(encoding="utf-8") == SENTINEL


def test_a_saved_partial_plan_applies_to_its_own_file(fake, workdir, spec):
    plan = batchor.plan(spec, sample=3, save=workdir / "p.plan")
    result = batchor.apply(str(plan.saved_path), handle_signals=False)
    assert result.output_path == str(workdir / "out" / "results.sample-3.csv")
    assert (workdir / "out" / "results.csv").read_text(encoding="utf-8") == SENTINEL


def test_variant_names():
    assert variant_tags() == ()
    assert variant_tags(pilot=50, sample=7) == ("pilot", "sample-7")
    assert variant_tags(model="anthropic:claude/odd name") == ("model-claude-odd-name",)
    assert variant_path(Path("out/x.parquet"), ("limit-100",)) == Path("out/x.limit-100.parquet")


@pytest.mark.parametrize("name", ["results.xlsx", "results.txt", "results"])
def test_an_output_flag_whose_format_is_unknown_is_refused_not_written_in_another_format(fake, workdir, spec, name):
    """`apply -o results.xlsx` and `export -o results.xlsx` wrote the spec's CSV (or Parquet) under
    the name the user chose; both now refuse before anything is sent or written."""
    target = workdir / "out" / name
    applied = CliRunner().invoke(app, ["apply", str(spec), "--yes", "-o", str(target)])
    assert getattr(applied.exception, "code", None) == "usage" and name in str(applied.exception), applied.output
    assert fake.stats()["requests"] == 0 and not target.exists()

    apply_cli(str(spec))
    exported = CliRunner().invoke(app, ["export", "-o", str(target)])
    assert getattr(exported.exception, "code", None) == "usage", exported.output
    assert ".csv" in exported.exception.hint
    assert not target.exists()
    assert CliRunner().invoke(app, ["export", "-o", str(workdir / "out" / "copy.jsonl")]).exit_code == 0
