"""`batchor validate` reports every problem in every file it is given, then exits non-zero."""

from __future__ import annotations

import json
import shutil

from conftest import make_spec


def _bad_spec(workdir):
    """One file, four independent mistakes: YAML 1.1 scalar, wrong type, unknown key, template name."""
    spec = make_spec(workdir, rows=2)
    text = spec.read_text(encoding="utf-8")
    text = text.replace("name: small\n", "name: small\ncolour: blue\n")
    text = text.replace("  concurrency: 8\n", "  concurrency: many\n")
    text = text.replace("    temperature: 0\n", "    temperature: 0\n    stop: off\n")
    bad = workdir / "bad.yaml"
    bad.write_text(text, encoding="utf-8")
    return bad


def test_every_problem_of_every_file_is_reported(workdir, batchor_cli):
    good = make_spec(workdir, rows=2)
    bad = _bad_spec(workdir)
    broken = workdir / "broken.yaml"
    broken.write_text("name: [\n", encoding="utf-8")
    other = workdir / "other.yaml"
    shutil.copy(good, other)
    result = batchor_cli(workdir, "validate", bad, broken, good, other)
    assert result.returncode == 1, result.stderr
    assert f"FAIL {bad}: 3 problem(s)" in result.stderr
    assert f"{bad}:3: colour: unknown key" in result.stderr
    assert "limits.concurrency: Input should be a valid integer" in result.stderr
    assert "model.params.stop: `off` reads as the boolean false" in result.stderr
    assert f"FAIL {broken}: 1 problem(s)" in result.stderr and "malformed YAML" in result.stderr
    assert f"ok  {good}" in result.stdout and f"ok  {other}" in result.stdout  # later files still checked
    assert "2 of 4 spec(s) valid, 2 with problems" in result.stderr


def test_problems_in_several_steps_are_all_reported(workdir, batchor_cli):
    spec = make_spec(workdir, rows=2)
    data = spec.read_text(encoding="utf-8").replace(
        "steps:\n", "steps:\n  first:\n    prompt: '{{ nope }}'\n  second:\n    prompt: '{{ row.text '\n"
    )
    spec.write_text(data, encoding="utf-8")
    result = batchor_cli(workdir, "validate", spec)
    assert result.returncode == 1
    assert f"error [template_undefined]: {spec}:14: steps.first.prompt: template uses 'nope'" in result.stderr
    assert f"error [template_syntax]: {spec}:16: steps.second.prompt" in result.stderr


def test_json_lists_each_file_with_its_problems(workdir, batchor_cli):
    good = make_spec(workdir, rows=2)
    bad = _bad_spec(workdir)
    result = batchor_cli(workdir, "validate", good, bad, "--json")
    assert result.returncode == 1
    reports = json.loads(result.stdout)
    assert [r["ok"] for r in reports] == [True, False]
    assert sorted(p["code"] for p in reports[1]["problems"]) == ["spec_invalid", "spec_invalid", "spec_yaml"]


def test_a_missing_file_does_not_stop_the_others(workdir, batchor_cli):
    good = make_spec(workdir, rows=2)
    result = batchor_cli(workdir, "validate", workdir / "missing.yaml", good)
    assert result.returncode == 1
    assert "spec file not found" in result.stderr and f"ok  {good}" in result.stdout


def test_an_output_path_whose_format_is_unknown_fails_validate_as_it_fails_plan(workdir):
    """`validate` said `ok` for `output.path: out/results.xlsx`, which `plan` then refused."""
    import pytest

    import batchor
    from batchor.errors import SpecError

    spec = make_spec(workdir, rows=2)
    spec.write_text(spec.read_text(encoding="utf-8").replace("results.csv", "results.xlsx"), encoding="utf-8")
    for check in (batchor.validate, batchor.plan):
        with pytest.raises(SpecError, match=r"output.path: cannot tell the format of .*results\.xlsx"):
            check(str(spec))
