"""`batchor report`: the run's figures, failures, samples and plan in one self-contained HTML page
(opened in headless Chromium), markdown for a PR, JSON; model and row text escaped; sizes bounded."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

from batchor.cli.main import app
from batchor.quality.profile import FAILED_SAMPLES
from batchor.report import gather, render_html, render_markdown
from batchor.report.data import EXAMPLES, SAMPLES
from tests.conftest import make_spec, shared_run_folder, write_csv

NASTY = "<script>window.pwned=1</script><img src=x onerror=alert(1)> & 'quotes'"


def _run(workdir: Path, fake, rows: int = 12, failing: str = "review number 3") -> dict:
    fake.configure(fail_matching={failing: 400})
    spec = make_spec(workdir, rows=rows)
    data = [{"id": f"r{i}", "text": f"review number {i}"} for i in range(rows)]
    data[0]["text"] = NASTY
    write_csv(workdir / "data.csv", data)
    done = CliRunner().invoke(app, ["apply", str(spec), "--yes"])
    assert done.exit_code == 3, done.output
    return json.loads(CliRunner().invoke(app, ["status", "--json"]).stdout)


@pytest.fixture(scope="module")
def reported_folder(fake_server_session, tmp_path_factory):
    """One run (12 rows, one failing) for the tests that only report on it."""
    folder = tmp_path_factory.mktemp("reported")
    with shared_run_folder(fake_server_session, folder) as fake:
        return folder, _run(folder, fake)


@pytest.fixture
def reported(reported_folder, monkeypatch):
    """The shared run's `status --json`, with its folder as the working folder."""
    folder, status = reported_folder
    monkeypatch.chdir(folder)
    monkeypatch.delenv("BATCHOR_STATE", raising=False)
    return status


def test_report_data_is_the_runs_figures(reported):
    status = reported
    report = gather(None, None)
    (step,) = report["steps"]
    assert (step["step"], step["rows"], step["succeeded"], step["failed"]) == ("classify", 12, 11, 1)
    assert step["attempts"] == 12 and step["cost_usd"] == pytest.approx(status["spend"]["total_usd"])
    assert step["input_tokens"] == status["input_tokens"]
    assert sum(b["attempts"] for b in step["latency_histogram"]) == 12
    (failure,) = report["failures"]
    assert (failure["reason"], failure["rows"], failure["examples"][0]["row_key"]) == ("invalid_request", 1, "r3")
    drawn = [s for s in report["samples"] if s["why"] == "random"]
    assert len(drawn) == SAMPLES and len({s["row_key"] for s in report["samples"]}) == len(report["samples"])
    (failed,) = [s for s in report["samples"] if s["why"] == "failed"]  # the failed row, with its error
    assert (failed["row_key"], failed["error_code"], failed["answer"]) == ("r3", "invalid_request", None)
    assert failed["error"] == failure["examples"][0]["error"] and failed["error"]
    for sample in report["samples"]:  # the input beside its answer, from the plan; the prompt as sent
        text = NASTY if sample["row_key"] == "r0" else f"review number {sample['row_key'][1:]}"
        assert sample["input"]["text"] == text and f"Review: {text}" in sample["prompt"]
    assert [s["row_key"] for s in gather(None, None, seed=1)["samples"]] != [s["row_key"] for s in drawn]
    assert report["plan"]["totals"]["rows"] == 12 and "classify" in report["plan"]["spec_text"]


def _with_nasty_sample() -> dict:
    """A report whose random sample shows row r0 (its text is NASTY): the first seed that draws it."""
    reports = (gather(None, None, seed) for seed in range(20))
    return next(r for r in reports if any(s["row_key"] == "r0" for s in r["samples"]))


def test_html_is_self_contained_and_escapes_untrusted_text(reported):
    status = reported
    page = render_html(_with_nasty_sample())
    assert status["run_id"] in page and "invalid_request" in page
    assert re.search(r"<code>r3</code>.*?failed: <code>invalid_request</code>", page, re.S)  # a failed sample
    assert "&lt;script&gt;window.pwned=1&lt;/script&gt;" in page
    assert "<script" not in page and "<img" not in page  # the row text is text, never markup
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing fetched from anywhere
    assert "<link" not in page and "@import" not in page


def test_sizes_stay_bounded_however_many_rows_fail(workdir, fake):
    _run(workdir, fake, rows=60, failing="review number")  # every row but the nasty one fails
    report = gather(None, None)
    (failure,) = report["failures"]
    assert failure["rows"] == 59 and len(failure["examples"]) == EXAMPLES
    assert [s["why"] for s in report["samples"]] == ["random"] + ["failed"] * FAILED_SAMPLES
    assert len(render_html(report)) < 60_000


def test_markdown_for_a_pull_request(reported):
    status = reported
    text = render_markdown(gather(None, None))
    assert f"`{status['run_id']}`" in text
    assert "partial: 11 of 12 rows succeeded, 1 failed" in text
    ratio = status["spend"]["total_usd"] / sum(s["expected_usd"] for s in status["steps"])  # every row settled
    assert f"; {ratio:.2f}x the plan's expected $" in text  # the estimate against the spend, as `status` says
    assert re.search(r"\| classify \| 12 \| 11 \| 1 \| 8\.3 % \|", text)
    assert "invalid_request: 1 row(s)" in text and "<script>" not in text.split("| step |")[0]


def test_report_command_writes_html_and_prints_markdown_and_json(reported, batchor_cli):
    status, workdir = reported, Path.cwd()
    done = batchor_cli(workdir, "report", "-o", "out/report.html")
    assert done.returncode == 0 and "wrote out/report.html" in done.stderr, done.stderr
    assert status["run_id"] in (workdir / "out" / "report.html").read_text(encoding="utf-8")
    markdown = CliRunner().invoke(app, ["report", status["run_id"], "--format", "markdown"])
    assert markdown.exit_code == 0 and markdown.stdout.startswith("### batchor run")
    data = json.loads(CliRunner().invoke(app, ["report", "--json"]).stdout)
    assert data["run"]["run_id"] == status["run_id"]
    bad = CliRunner().invoke(app, ["report", "--format", "pdf"])
    assert bad.exit_code == 2 and "--format" in bad.output
    missing = batchor_cli(workdir, "report", "nope")
    assert missing.returncode == 1 and "run_not_found" in missing.stderr


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("no chromium on this machine (`apt-get install chromium`; .ci/run installs it when it can)")
    return found


def _open(browser: str, page: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """Headless Chromium on a file: the rendered DOM on stdout, console messages on stderr."""
    profile = page.parent / "chromium-profile"
    return subprocess.run(
        [
            browser,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--enable-logging=stderr",
            "--v=0",
            *flags,
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "HOME": str(page.parent)},
    )


def _console(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if ":CONSOLE" in line]


@pytest.mark.slow
def test_report_renders_in_headless_chromium_without_console_errors(workdir, fake):
    browser = _chromium()
    status = _run(workdir, fake)
    page = workdir / "report.html"
    CliRunner().invoke(app, ["report", "-o", str(page)])
    # the console check can fail: a page that logs is seen
    control = workdir / "control.html"
    control.write_text("<html><body><script>console.error('control-message')</script></body></html>")
    assert any("control-message" in line for line in _console(_open(browser, control, "--dump-dom").stderr))

    dom = _open(browser, page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _console(dom.stderr) == []
    text = re.sub(r"<[^>]+>", " ", dom.stdout)
    assert status["run_id"] in text and "invalid_request" in text
    assert re.search(r"rows succeeded\s+11 of 12", text)
    assert re.search(r"spend\s+\$0\.\d{4}", text)
    assert "window.pwned" not in dom.stdout.replace("&lt;script&gt;window.pwned", "")
    shot = workdir / "report.png"
    taken = _open(browser, page, f"--screenshot={shot}", "--window-size=1200,2000", "--hide-scrollbars")
    assert taken.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    if os.environ.get("BATCHOR_REPORT_SCREENSHOT"):  # keep it to look at (CI artifacts, notes)
        shutil.copy(shot, os.environ["BATCHOR_REPORT_SCREENSHOT"])


@pytest.mark.postgres
def test_report_on_postgresql_state(workdir, fake, pg_url):
    """The same aggregates in PostgreSQL (percentile_cont, FILTER, windows are portable SQL)."""
    fake.configure(fail_matching={"review number 3": 400})
    spec = make_spec(workdir, rows=8)
    done = CliRunner().invoke(app, ["apply", str(spec), "--yes", "--state", pg_url])
    assert done.exit_code == 3, done.output
    report = gather(None, pg_url)
    (step,) = report["steps"]
    assert (step["rows"], step["succeeded"], step["failed"], step["attempts"]) == (8, 7, 1, 8)
    assert step["latency_p50_ms"] is not None and report["failures"][0]["reason"] == "invalid_request"
    assert report["run"]["run_id"] in render_html(report)
