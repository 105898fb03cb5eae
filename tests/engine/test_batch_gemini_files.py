"""Gemini batch jobs through an uploaded JSONL file, end to end with google-genai against the fake:
`model.options.batch_inline_max_bytes` is set low, so every chunk goes as a file."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml

from batchor import api
from tests.engine.batch_helpers import (
    FAST,
    batches,
    cli,
    key_of,
    results,
    submitted,
    switch_after_first_collect,
)
from tests.providers.helpers import provider_spec

pytestmark = pytest.mark.timeout(180)
MODEL = "gemini-2.5-flash"


def file_spec(folder: Path, rows: int, **limits) -> Path:
    path = provider_spec(folder, "gemini", MODEL, rows=rows, options={"batch_inline_max_bytes": 1024})
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["limits"].update(FAST, **limits)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def file_jobs(fake, folder: Path) -> list[bool]:
    """Per batch created remotely: did its job read its requests from a file (results in a file)?"""
    from google import genai

    client = genai.Client(api_key="x", http_options={"base_url": fake.gemini_base_url})
    return [bool(client.batches.get(name=remote_id).dest.file_name) for *_, remote_id in batches(folder) if remote_id]


def test_row_errors_in_the_results_file_are_judged_like_realtime_ones(fake, workdir):
    fake.configure(fail_matching={"review number 1": 400, "review number 2": 429, "review number 3": 500})
    spec = file_spec(workdir, rows=10)
    result = api.apply(str(spec), on_event=switch_after_first_collect(fake, fail_matching={}))
    assert (result.succeeded, result.failed) == (9, 1)
    counts, stored = submitted(fake), results(workdir)
    k1, k2, k3, k4 = (key_of(workdir, f"r{i}") for i in (1, 2, 3, 4))
    assert (counts[k1], counts[k2], counts[k3], counts[k4]) == (1, 2, 2, 1)  # 429 and 500 came back once
    assert stored[k1] == ("failed", "invalid_request", 1)
    assert stored[k2][:2] == stored[k3][:2] == ("succeeded", None)
    assert file_jobs(fake, workdir) == [True, True]


def test_an_expired_file_job_keeps_its_answers_and_resubmits_only_the_rest(fake, workdir):
    fake.configure(batch_end="expired", batch_done_fraction=0.5)
    spec = file_spec(workdir, rows=10)
    result = api.apply(str(spec), on_event=switch_after_first_collect(fake, batch_end="completed"))
    assert (result.status, result.succeeded) == ("succeeded", 10)
    assert sorted(submitted(fake).values()) == [1] * 5 + [2] * 5
    assert batches(workdir)[0][2:5] == (5, 0, 5)  # succeeded, failed, requeued
    assert file_jobs(fake, workdir) == [True, True]


@pytest.mark.slow  # kills a real apply (as the other providers' kill tests)
@pytest.mark.parametrize("point", ["after_upload", "after_create"])
def test_kill_around_the_create_then_resume_sends_each_row_once(fake, workdir, point, batchor_cli):
    spec = file_spec(workdir, rows=9, batch_max_requests=5)
    killed = cli(workdir, "apply", spec, "--yes", crash_at=point)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert [b[0] for b in batches(workdir)] == ["intent"]  # uploaded (and maybe created), never recorded
    done = batchor_cli(workdir, "apply", spec, "--yes")  # the resume: a fresh run, in this process
    assert done.returncode == 0, done.stderr
    assert len(results(workdir)) == 9 and set(submitted(fake).values()) == {1}
    assert fake.stats()["batches_created"] == 2 and all(file_jobs(fake, workdir))


def test_a_create_answered_after_the_timeout_is_found_by_its_display_name_not_repeated(fake, workdir):
    fake.configure(batch_create_delay_s=1.5)
    spec = file_spec(workdir, rows=5, request_timeout_s=0.5)
    seen = []
    result = api.apply(str(spec), on_event=lambda e: seen.append(e.type))
    assert result.succeeded == 5 and "batch_create_failed" in seen and "batch_reattached" in seen
    assert fake.stats()["batches_created"] == 1 and set(submitted(fake).values()) == {1}
