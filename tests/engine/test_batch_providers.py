"""Batch mode with each provider's real SDK against the fake: crash-and-resume, an uncertain
create, an expiry, and the example spec (`specs/reviews.yaml --mode batch --model ...`)."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from batchor import api
from batchor.cli.main import app
from batchor.engine.batch import BatchExecutor
from tests.engine.batch_helpers import FAST, batches, cli, results, submitted
from tests.providers.helpers import BEDROCK_BATCH, VERTEX_BATCH, point_aws_at, point_vertex_at, provider_spec

pytestmark = pytest.mark.timeout(180)
ROOT = Path(__file__).resolve().parents[2]
MODELS = {
    "openai": "gpt-4.1-mini",
    "anthropic": "claude-haiku-4-5",
    "gemini": "gemini-2.5-flash",
    "azure": "gpt-4.1-mini",  # a deployment named after its model
    "bedrock": "amazon.nova-micro-v1:0",
    "vertex": "gemini-2.5-flash",  # Gemini on Vertex AI: batch prediction with Cloud Storage files
}
CLOUD_OPTIONS = {"bedrock": BEDROCK_BATCH, "vertex": VERTEX_BATCH}  # where each cloud's job files go


@pytest.fixture(autouse=True)
def aws_at_the_fake(fake, monkeypatch, tmp_path):
    """boto3's Bedrock and S3 endpoints, and Vertex AI, Cloud Storage and Google's sign-in, are the
    fake (a killed CLI inherits this environment)."""
    point_aws_at(fake.url, monkeypatch)
    point_vertex_at(fake.url, monkeypatch, tmp_path)


def spec_for(folder: Path, provider: str, rows: int, **limits) -> Path:
    options = {"options": dict(CLOUD_OPTIONS[provider])} if provider in CLOUD_OPTIONS else {}
    path = provider_spec(folder, "gemini" if provider == "vertex" else provider, MODELS[provider], rows=rows, **options)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["limits"].update(FAST, **limits)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


@pytest.mark.slow  # a killed process per provider
@pytest.mark.parametrize("provider", list(MODELS))
def test_kill_after_create_then_resume_reconciles_instead_of_resubmitting(fake, workdir, provider):
    spec = spec_for(workdir, provider, rows=9, batch_max_requests=4)
    assert cli(workdir, "apply", spec, "--yes", crash_at="after_create").returncode == -signal.SIGKILL
    assert [b[0] for b in batches(workdir)] == ["intent"]  # created remotely, never recorded as such
    done = cli(workdir, "apply", spec, "--yes")
    assert done.returncode == 0, done.stderr
    assert len(results(workdir)) == 9 and set(submitted(fake).values()) == {1}


@pytest.mark.parametrize("provider", list(MODELS))
def test_create_answered_after_the_timeout_is_not_repeated(fake, workdir, provider):
    fake.configure(batch_create_delay_s=1.5)
    spec = spec_for(workdir, provider, rows=5, request_timeout_s=0.5)
    result = api.apply(str(spec))
    assert result.succeeded == 5
    assert fake.stats()["batches_created"] == 1 and set(submitted(fake).values()) == {1}


@pytest.mark.parametrize("provider", list(MODELS))
def test_expired_batch_resubmits_only_rows_without_a_result(fake, workdir, provider):
    fake.configure(batch_end="expired", batch_done_fraction=0.5)
    spec = spec_for(workdir, provider, rows=6)
    switched = []

    def on_event(event):
        if event.type == "batch_collected" and not switched:
            switched.append(1)
            fake.configure(batch_end="completed")

    result = api.apply(str(spec), on_event=on_event)
    assert result.succeeded == 6
    assert sorted(submitted(fake).values()) == [1, 1, 1, 2, 2, 2]


@pytest.mark.parametrize("provider", [p for p in MODELS if p not in CLOUD_OPTIONS])  # clouds: need their options
def test_example_spec_runs_in_batch_mode(fake, workdir, provider, monkeypatch):
    async def no_wait(self, delay):
        return None

    monkeypatch.setattr(BatchExecutor, "_sleep", no_wait)  # the spec keeps its real 5 s poll interval
    out = workdir / "reviews.csv"
    result = CliRunner().invoke(
        app,
        [
            "apply",
            str(ROOT / "specs" / "reviews.yaml"),
            "--mode",
            "batch",
            "--model",
            f"{provider}:{MODELS[provider]}",
            "--yes",
            "--state",
            str(workdir / "state.duckdb"),
            "--output",
            str(out),
            "--limit",
            "40",
        ],
    )
    assert result.exit_code == 0, result.output
    rows = out.read_text(encoding="utf-8").splitlines()
    assert len(rows) > 1 and fake.stats()["batches_created"] >= 1
    assert set(submitted(fake).values()) == {1}
