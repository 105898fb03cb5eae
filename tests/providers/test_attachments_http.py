"""Attachments end to end: each adapter's real SDK over HTTP against the fake, which decodes the
image and document parts and records what arrived (type, byte length, SHA-256), realtime and in
each provider's Batch API, and with --mock."""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import pytest
import yaml

from batchor import api
from batchor.plan.summary import plan_text
from tests.conftest import write_csv
from tests.engine.batch_helpers import FAST
from tests.media_files import image_bytes, pdf_bytes, write
from tests.providers.test_providers_http import query

TARGETS = {
    "openai-chat": ("openai", "gpt-4.1-mini", {}),
    "openai-responses": ("openai", "gpt-4.1-mini", {"api": "responses"}),
    "anthropic": ("anthropic", "claude-haiku-4-5", {}),
    "gemini": ("gemini", "gemini-2.5-flash", {}),
}
BATCH = ("openai-chat", "anthropic", "gemini")


def media_job(
    folder: Path, target: str, *, limits: dict[str, Any] | None = None, rows: list[dict[str, str]] | None = None
) -> tuple[Path, dict[str, bytes]]:
    """Three rows: a PNG, a JPEG, and a PNG with a two-page PDF; files in `folder/media`."""
    files = {
        "a.png": image_bytes(1024, 1024),
        "b.jpg": image_bytes(300, 200, "JPEG"),
        "c.png": image_bytes(64, 64, colour=(1, 2, 3)),
        "doc.pdf": pdf_bytes(2),
    }
    for name, data in files.items():
        write(folder / "media" / name, data)
    write_csv(
        folder / "rows.csv",
        rows
        or [
            {"id": "r1", "photo": "media/a.png", "doc": ""},
            {"id": "r2", "photo": "media/b.jpg", "doc": ""},
            {"id": "r3", "photo": "media/c.png", "doc": "media/doc.pdf"},
        ],
    )
    provider, model, block = TARGETS[target]
    spec = {
        "version": 1,
        "name": "media",
        "input": {"path": "rows.csv", "key": "id"},
        "model": {"provider": provider, "name": model, "params": {"max_tokens": 40}, **block},
        "steps": {"look": {"prompt": "Describe item {{ row.id }}", "attachments": ["row.photo", "row.doc"]}},
        "output": {"path": "out/results.csv"},
        "limits": {"concurrency": 4, "max_attempts": 2, "request_timeout_s": 10, **(limits or {})},
    }
    path = folder / "spec.yaml"
    path.write_text(yaml.safe_dump(spec, sort_keys=False), encoding="utf-8")
    return path, files


def received(fake) -> dict[str, list[tuple[str, int, str]]]:
    """prompt -> [(media type, bytes, sha256)] of what the fake decoded."""
    out: dict[str, list[tuple[str, int, str]]] = {}
    for item in fake.stats()["media"]:
        out.setdefault(item["prompt"], []).append((item["media_type"], item["bytes"], item["sha256"]))
    return out


def expected(files: dict[str, bytes]) -> dict[str, list[tuple[str, int, str]]]:
    def one(name: str, kind: str) -> tuple[str, int, str]:
        return kind, len(files[name]), hashlib.sha256(files[name]).hexdigest()

    return {
        "Describe item r1": [one("a.png", "image/png")],
        "Describe item r2": [one("b.jpg", "image/jpeg")],
        "Describe item r3": [one("c.png", "image/png"), one("doc.pdf", "application/pdf")],
    }


def apply(folder: Path, spec: Path, **kwargs: Any):
    return api.apply(spec, state=str(folder / "state.duckdb"), handle_signals=False, **kwargs)


@pytest.mark.parametrize("target", sorted(TARGETS))
def test_images_and_pdfs_arrive_realtime(fake, workdir, target):
    spec, files = media_job(workdir, target)
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded", outcome.stop_reason
    assert received(fake) == expected(files)


@pytest.mark.parametrize("target", BATCH)
def test_images_and_pdfs_arrive_in_batch_files(fake, workdir, target):
    spec, files = media_job(workdir, target, limits=FAST)
    outcome = apply(workdir, spec)
    assert outcome.status == "succeeded", outcome.stop_reason
    stats = fake.stats()
    assert stats["batches_created"] == 1 and stats["by_endpoint"] == {}  # no realtime call
    assert received(fake) == expected(files)


def test_a_missing_file_fails_its_row_alone_before_any_call(fake, workdir):
    rows = [{"id": "r1", "photo": "media/a.png", "doc": ""}, {"id": "r2", "photo": "media/gone.png", "doc": ""}]
    spec, _ = media_job(workdir, "anthropic", rows=rows)
    outcome = apply(workdir, spec)
    assert outcome.status == "partial" and (outcome.succeeded, outcome.failed) == (1, 1)
    assert fake.stats()["by_endpoint"] == {"anthropic.messages": 1}
    failed = query(workdir, "SELECT error_code, error, attempts, cost_usd FROM results WHERE status = 'failed'")
    code, message, attempts, cost = failed[0]
    assert (code, attempts, cost) == ("attachment_missing", 0, 0)
    assert "row r2" in message and "gone.png" in message


def test_moving_files_does_not_rerun_rows_and_changing_one_does(fake, workdir):
    spec, _ = media_job(workdir, "gemini")
    assert apply(workdir, spec).succeeded == 3
    (workdir / "media").rename(workdir / "moved")
    rows = [
        {"id": "r1", "photo": str(workdir / "moved" / "a.png"), "doc": ""},
        {"id": "r2", "photo": "moved/b.jpg", "doc": ""},
        {"id": "r3", "photo": "moved/c.png", "doc": "moved/doc.pdf"},
    ]
    write_csv(workdir / "rows.csv", rows)
    plan = api.plan(spec, state=str(workdir / "state.duckdb"), save=False)
    assert (plan.header.totals.to_run, plan.header.totals.cached) == (0, 3)
    write(workdir / "moved" / "b.jpg", image_bytes(300, 200, "JPEG", colour=(9, 9, 9)))
    plan = api.plan(spec, state=str(workdir / "state.duckdb"), save=False)
    assert (plan.header.totals.to_run, plan.header.totals.cached) == (1, 2)


@pytest.mark.parametrize(
    "target, image_tokens",
    [
        ("openai-chat", 765 + 255 + 255 + 2 * 1000),
        ("anthropic", 1399 + 80 + 6 + 2 * 3000),
        ("gemini", 4 * 258 + 258 + 258 + 2 * 258),
    ],
)
def test_plan_prices_attachments_by_the_provider_rule(workdir, target, image_tokens):
    spec, _ = media_job(workdir, target)
    plan = api.plan(spec, state=str(workdir / "state.duckdb"), save=False)
    step = plan.header.steps[0]
    text_only, _ = media_job(
        workdir / "text", target, rows=[{"id": f"r{i}", "photo": "", "doc": ""} for i in (1, 2, 3)]
    )
    text_tokens = api.plan(text_only, state=str(workdir / "state.duckdb"), save=False).header.steps[0].counts
    assert step.counts.input_tokens - text_tokens.input_tokens == image_tokens
    assert step.counts.estimated and plan.header.totals.estimates


def test_mock_rehearsal_reads_the_files_too(fake, workdir):
    spec, _ = media_job(
        workdir,
        "openai-chat",
        rows=[{"id": "r1", "photo": "media/a.png", "doc": ""}, {"id": "r2", "photo": "", "doc": "media/missing.pdf"}],
    )
    outcome = apply(workdir, spec, mock=True)
    assert (outcome.succeeded, outcome.failed) == (1, 1)
    assert fake.stats()["requests"] == 0


def test_the_plan_names_rows_whose_files_cannot_be_sent(workdir):
    rows = [
        {"id": "r1", "photo": "media/a.png", "doc": ""},
        {"id": "r2", "photo": "media/gone.png", "doc": ""},
        {"id": "r3", "photo": "https://example.org/x.png", "doc": ""},
    ]
    spec, _ = media_job(workdir, "gemini", rows=rows)
    plan = api.plan(spec, state=str(workdir / "state.duckdb"), save=False)
    counts = plan.header.steps[0].counts
    assert counts.attachment_problems == 2
    assert "row r2" in counts.attachment_examples[0] and "gone.png" in counts.attachment_examples[0]
    assert "row r3" in counts.attachment_examples[1] and "URL" in counts.attachment_examples[1]
    assert "2 row(s) have attachments that cannot be sent" in plan_text(plan)


def test_projected_rows_of_a_later_step_count_their_attachments(workdir):
    spec, _ = media_job(workdir, "openai-chat")
    document = yaml.safe_load(spec.read_text())
    document["steps"] = {
        "first": {"prompt": "Name item {{ row.id }}"},
        "look": {"prompt": "Is {{ first }} in the photo?", "attachments": ["row.photo"]},
    }
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    with_files = api.plan(spec, state=str(workdir / "state.duckdb"), save=False).header.step("look").counts
    document["steps"]["look"].pop("attachments")
    spec.write_text(yaml.safe_dump(document, sort_keys=False))
    without = api.plan(spec, state=str(workdir / "state.duckdb"), save=False).header.step("look").counts
    assert with_files.projected == without.projected == 3
    price = api.plan(spec, state=str(workdir / "state.duckdb"), save=False).header.step("look").price
    extra = (with_files.cost_upper - without.cost_upper) * 1e6 / price["input_per_mtok"]
    assert round(extra) == 3 * 765 * 1.0  # the sample row's 1024x1024 PNG, for each projected row


def test_a_batch_reask_sends_its_files_again(fake, workdir):
    """A re-ask waits for the next batch without its files' bytes (memory bounded by what is in
    flight) and reads them again when its line is built: the fake receives each file twice."""
    fake.configure(malformed_until_feedback=True)
    spec, files = media_job(workdir, "openai-chat", limits=FAST)
    document = yaml.safe_load(spec.read_text(encoding="utf-8"))
    schema = {"type": "object", "properties": {"sentiment": {"type": "string"}}, "required": ["sentiment"]}
    document["steps"]["look"]["output"] = {"schema": {**schema, "additionalProperties": False}}
    spec.write_text(yaml.safe_dump(document, sort_keys=False), encoding="utf-8")
    outcome = apply(workdir, spec)
    assert (outcome.status, outcome.succeeded) == ("succeeded", 3), outcome.stop_reason
    assert fake.stats()["batches_created"] == 2 and len(fake.stats()["reasks"]) == 3
    sent = sorted((m["media_type"], m["bytes"], m["sha256"]) for m in fake.stats()["media"])
    assert sent == sorted([media for each in expected(files).values() for media in each] * 2)
