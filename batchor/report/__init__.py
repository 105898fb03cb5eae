"""Run reports: a self-contained HTML page (checked in headless Chromium by the tests) or markdown
for a pull-request comment, built from aggregates and samples the state computes in SQL."""

from __future__ import annotations

from pathlib import Path

from batchor.report.data import gather
from batchor.report.html import render_html
from batchor.report.markdown import render_markdown

FORMATS = ("html", "markdown", "json")


def report(run_id: str | None = None, *, state: str | None = None, fmt: str = "html", seed: int = 0) -> str:
    """The report of a run (default: the latest) as text in `fmt`: html, markdown or json; `seed`
    draws the sample answers."""
    import json

    data = gather(run_id, state, seed)
    if fmt == "json":
        return json.dumps(data, indent=2, default=str, ensure_ascii=False) + "\n"
    return render_markdown(data) if fmt == "markdown" else render_html(data)


def write_report(path: Path, text: str) -> Path:
    """Write atomically (temp file, then rename), like every other output."""
    path.parent.mkdir(parents=True, exist_ok=True)
    temp = path.with_name(f".{path.name}.tmp")
    temp.write_text(text, encoding="utf-8")
    temp.replace(path)
    return path


__all__ = ["FORMATS", "gather", "render_html", "render_markdown", "report", "write_report"]
