"""The report on a golden-label job: metrics per step and field (rounded), per-class figures, the
confusion matrix as a table, answer values per enum field as bars, steps in pipeline order with
what the cache saved, seeded samples with the prompt as sent, flagged empty answers; the same
metrics in markdown; the page opened in headless Chromium (slow tier)."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from batchor import api
from batchor.cli.main import app
from batchor.report import gather, render_html, render_markdown
from tests.conftest import make_spec, write_csv
from tests.report.test_report import _chromium, _console, _open

LABELS = ["positive", "negative", "mixed"]


def golden_job(workdir, fake, rows: int = 30):
    """A classify step with golden labels (`expected: {sentiment: label}`) and a text step after it."""
    data = [{"id": f"r{i:02d}", "text": f"review number {i}", "label": LABELS[i % 3]} for i in range(rows)]
    write_csv(workdir / "data.csv", data)
    steps = {
        "classify": {
            "prompt": "Review: {{ row.text }}",
            "output": {"schema": make_schema()},
            "expected": {"sentiment": "label"},
        },
        "explain": {"prompt": "Why {{ classify.sentiment }}? {{ row.text }}", "allow_empty": True},
    }
    spec = make_spec(workdir, rows=rows, steps=steps)
    write_csv(workdir / "data.csv", data)
    fake.configure(fail_matching={"? review number 4": "empty"})
    outcome = api.apply(spec, handle_signals=False)
    assert outcome.failed == 0
    return spec, outcome.run_id


def make_schema() -> dict:
    from tests.conftest import SENTIMENT_SCHEMA

    return SENTIMENT_SCHEMA


def test_the_report_shows_quality_at_a_glance(workdir, fake, monkeypatch):
    monkeypatch.chdir(workdir)
    spec, first = golden_job(workdir, fake)
    assert "attempts</text>" in render_html(gather(first, None))  # the latency histogram's axis titles
    api.apply(spec, handle_signals=False)  # a second run: every row cached
    report = gather(None, None)
    assert [s["step"] for s in report["steps"]] == ["classify", "explain"]  # pipeline order, not alphabetical
    classify = report["steps"][0]
    assert classify["cached"] == 30 and classify["saved_usd"] > 0
    (metric,) = report["checks"]["metrics"]
    page = render_html(report)
    accuracy = metric["metrics"]["accuracy"]
    assert f"accuracy {accuracy:.3f}" in page and repr(accuracy) not in page  # rounded, not 17 digits
    assert "<table class=confusion>" in page and "label \\ answer" in page
    counts = next(d for d in report["profile"]["distributions"] if d["field"] == "sentiment")["counts"]
    assert sum(c["rows"] for c in counts) == 30 and "data-field='sentiment'" in page
    assert "prompt as sent" in page and "<dl class=kv>" in page
    (flagged,) = report["profile"]["flagged"]
    assert flagged["step"] == "explain" and flagged["rows"] == 1 and flagged["examples"][0]["reason"] == "empty"
    assert "times in" in page and str(workdir / "out" / "results.csv") in page
    markdown = render_markdown(report)
    assert f"| classify.sentiment | accuracy | {accuracy:.3f} | 30 |" in markdown
    assert "| precision | recall | F1 | support |" in markdown


@pytest.mark.slow
def test_the_quality_report_renders_in_headless_chromium(workdir, fake, monkeypatch, tmp_path):
    browser = _chromium()
    monkeypatch.chdir(workdir)
    golden_job(workdir, fake)
    page = workdir / "report.html"
    assert CliRunner().invoke(app, ["report", "-o", str(page), "--seed", "3"]).exit_code == 0
    dom = _open(browser, page, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert _console(dom.stderr) == []
    assert '<table class="metrics">' in dom.stdout and '<table class="confusion">' in dom.stdout
    assert 'class="chart" data-field="sentiment"' in dom.stdout
    text = re.sub(r"<[^>]+>", " ", dom.stdout)
    assert re.search(r"classify\.sentiment\s+label\s+enum\s+accuracy 0\.\d{3}", text)
    shot = tmp_path / "quality-report.png"
    taken = _open(browser, page, f"--screenshot={shot}", "--window-size=1200,3000", "--hide-scrollbars")
    assert taken.returncode == 0 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "latency per attempt" in text  # the histogram's axis title
