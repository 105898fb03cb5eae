"""PDFs sent as their extracted text (`pdf: text`): the real SDKs against the fake, which sees the
text in the prompt and no file part; the plan counts the text's tokens and keys its content."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from batchor import api
from batchor.plan.model import req_column
from tests.conftest import write_csv
from tests.engine.batch_helpers import FAST
from tests.fakes.answers import prompt_key
from tests.media_files import pdf_bytes, text_pdf_bytes, write
from tests.providers.test_providers_http import query

PAGES = ["Invoice 42 total 99 EUR", "Paid by card on day two"]
SENT = "Describe item r1\n\n--- PDF 1: doc.pdf (2 pages) ---\n" + "\n\n".join(PAGES)


def pdf_job(
    folder: Path,
    *,
    provider: str = "openai",
    model: str = "gpt-4.1-mini",
    pdf: str = "text",
    block: dict[str, Any] | None = None,
    limits: dict[str, Any] | None = None,
    files: dict[str, bytes] | None = None,
) -> Path:
    for name, data in (files or {"doc.pdf": text_pdf_bytes(PAGES)}).items():
        write(folder / "media" / name, data)
    write_csv(folder / "rows.csv", [{"id": "r1", "doc": "media/doc.pdf"}])
    spec = {
        "version": 1,
        "name": "pdftext",
        "input": {"path": "rows.csv", "key": "id"},
        "model": {"provider": provider, "name": model, "params": {"max_tokens": 40}, **(block or {})},
        "steps": {"read": {"prompt": "Describe item {{ row.id }}", "attachments": ["row.doc"], "pdf": pdf}},
        "output": {"path": "out/results.csv"},
        "limits": {"concurrency": 2, "max_attempts": 2, "request_timeout_s": 10, **(limits or {})},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path


def apply(folder: Path, spec: Path):
    return api.apply(spec, state=str(folder / "state.duckdb"), handle_signals=False, progress=False)


@pytest.mark.parametrize(
    "provider, model, block",
    [
        ("openai", "gpt-4.1-mini", {}),
        ("anthropic", "claude-haiku-4-5", {}),
        ("vllm", "any-model", {"base_url": "FAKE"}),  # a server that reads no PDF files at all
    ],
)
def test_the_pdf_text_follows_the_prompt_and_no_file_is_sent(fake, workdir, provider, model, block):
    block = {k: fake.openai_base_url if v == "FAKE" else v for k, v in block.items()}
    outcome = apply(workdir, pdf_job(workdir, provider=provider, model=model, block=block))
    assert outcome.status == "succeeded", outcome.stop_reason
    stats = fake.stats()
    assert stats["media"] == [] and stats["by_prompt"] == {prompt_key(SENT): 1}


def test_openai_batch_lines_carry_the_text(fake, workdir):
    outcome = apply(workdir, pdf_job(workdir, limits=FAST))
    assert outcome.status == "succeeded" and fake.stats()["batches_created"] == 1
    assert fake.stats()["by_prompt"] == {prompt_key(SENT): 1}


def test_the_plan_counts_the_text_and_keys_its_content(workdir):
    as_text = api.plan(pdf_job(workdir), state=str(workdir / "s.duckdb"), save=False).header.steps[0]
    native = api.plan(pdf_job(workdir / "n", pdf="native"), state=str(workdir / "s.duckdb"), save=False)
    assert as_text.counts.input_tokens < native.header.steps[0].counts.input_tokens  # text, not 2 page images
    assert keys(pdf_job(workdir)) != keys(pdf_job(workdir / "n", pdf="native"))
    (workdir / "media").rename(workdir / "moved")
    write_csv(workdir / "rows.csv", [{"id": "r1", "doc": "moved/doc.pdf"}])
    first = keys(pdf_job(workdir / "n2"))
    assert keys(workdir / "spec.yaml") == first  # the content is keyed, not the path


def keys(spec: Path) -> list[str]:
    plan = api.plan(spec, state=str(spec.parent / "s.duckdb"), save=False)
    return [k for b in plan.iter_batches([req_column("read", "key")]) for k in b.column(0).to_pylist()]


def test_a_pdf_without_text_fails_its_row_before_any_call(fake, workdir):
    outcome = apply(workdir, pdf_job(workdir, files={"doc.pdf": pdf_bytes(2)}))
    assert (outcome.succeeded, outcome.failed) == (0, 1) and fake.stats()["requests"] == 0
    code, message = query(workdir, "SELECT error_code, error FROM results")[0]
    assert code == "attachment_unsupported" and "pdf: native" in message
