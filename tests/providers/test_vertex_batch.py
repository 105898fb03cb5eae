"""Gemini batch prediction on Vertex AI: google-genai's Vertex path and google-cloud-storage against
the fake's batchPredictionJobs, Cloud Storage JSON API and token endpoint (tests/fakes/vertex_batch_routes.py)."""

from __future__ import annotations

import json
import urllib.parse
import urllib.request

import pytest
import yaml

from batchor import api
from tests.engine.batch_helpers import FAST, submitted
from tests.providers.helpers import VERTEX_BATCH, point_vertex_at, provider_spec

SECRETS = ("ya29.vertex-test-token",)


@pytest.fixture(autouse=True)
def vertex_at_the_fake(fake, workdir, monkeypatch):
    point_vertex_at(fake.url, monkeypatch, workdir)
    fake.reset(config=True, batches=True)


def vertex_spec(folder, rows=4, **options):
    path = provider_spec(folder, "gemini", "gemini-2.5-flash", rows=rows, options={**VERTEX_BATCH, **options})
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["limits"].update(FAST)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


def gcs_files(fake):
    return {name for name in fake.stats()["files"] if name.startswith("gs://")}


def test_a_vertex_batch_runs_through_cloud_storage_and_leaves_no_files(fake, workdir):
    result = api.apply(str(vertex_spec(workdir)))
    assert result.succeeded == 4
    stats = fake.stats()
    assert stats["endpoint_calls"]["vertex.batches.create"] == 1 and set(submitted(fake).values()) == {1}
    assert stats["endpoint_calls"]["gcs.objects.insert"] == 1 and not gcs_files(fake)  # input and results deleted
    leaked = [s for s in SECRETS if any(s in p.read_text("utf-8", "replace") for p in _written(workdir))]
    assert not leaked


def test_files_stay_when_kept(fake, workdir):
    assert api.apply(str(vertex_spec(workdir, keep_provider_files=True))).succeeded == 4
    names = gcs_files(fake)
    assert any(n.endswith("/input.jsonl") for n in names) and any(n.endswith("/predictions.jsonl") for n in names)
    lines = [json.loads(x) for n in names if n.endswith("input.jsonl") for x in _object(fake, n).splitlines()]
    assert all(set(line) == {"request"} and line["request"]["labels"]["batchor_key"] for line in lines)


def _written(folder):
    return [p for p in folder.rglob("*") if p.is_file()]


def _object(fake, uri):
    bucket, name = uri.removeprefix("gs://").split("/", 1)
    with urllib.request.urlopen(
        f"{fake.url}/download/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}"
    ) as got:
        return got.read()
