"""Helpers for provider tests: JSON cases, requests, and specs pointed at one provider."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from batchor.providers.base import LLMRequest
from tests.conftest import make_spec

CASES = Path(__file__).resolve().parents[1] / "cases" / "providers"
SCHEMA = {
    "type": "object",
    "properties": {"sentiment": {"type": "string"}, "score": {"type": "integer"}},
    "required": ["sentiment", "score"],
    "additionalProperties": False,
}


def case(name: str) -> dict[str, Any]:
    return json.loads((CASES / name).read_text(encoding="utf-8"))


def request(schema: dict[str, Any] | None = None, *, system: str | None = "Classify.", **params: Any) -> LLMRequest:
    messages = ([{"role": "system", "content": system}] if system else []) + [
        {"role": "user", "content": "Review: great"}
    ]
    return LLMRequest("k1", "some-model", tuple(messages), {"max_tokens": 50, **params}, schema, "classify")


def provider_spec(
    folder: Path, provider: str, model: str, *, rows: int = 6, schema: Any = "default", **model_block: Any
) -> Path:
    """make_spec() with the model block set to `provider`/`model` (plus e.g. api, base_url)."""
    kwargs = {} if schema == "default" else {"schema": schema}
    path = make_spec(folder, rows=rows, **kwargs)
    data = yaml.safe_load(path.read_text(encoding="utf-8"))
    data["model"].update(provider=provider, name=model, **model_block)
    path.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")
    return path


AWS_KEY_ID, AWS_SECRET = "AKIABEDROCKTEST0001", "bedrock-test-secret-556677"
# A job of any size (Bedrock's default minimum is 100 records: the tests' few rows would run realtime).
BEDROCK_BATCH = {
    "batch_s3": "s3://batchor-jobs/runs",
    "role_arn": "arn:aws:iam::123456789012:role/bedrock-batch",
    "batch_min_records": 1,
}


def point_aws_at(url: str, monkeypatch: Any) -> None:
    """Dummy AWS credentials and region, nothing read from this machine's AWS setup; boto3's
    bedrock-runtime, bedrock and S3 endpoints are the fake at `url` (S3 path-style under /s3)."""
    for name in ("AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_BEARER_TOKEN_BEDROCK", "AWS_ENDPOINT_URL"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {
        "AWS_ACCESS_KEY_ID": AWS_KEY_ID,
        "AWS_SECRET_ACCESS_KEY": AWS_SECRET,
        "AWS_REGION": "us-west-2",
        "AWS_CONFIG_FILE": "/nonexistent/aws-config",
        "AWS_SHARED_CREDENTIALS_FILE": "/nonexistent/aws-credentials",
        "AWS_EC2_METADATA_DISABLED": "true",
        "AWS_ENDPOINT_URL_BEDROCK_RUNTIME": url,
        "AWS_ENDPOINT_URL_BEDROCK": url,
        "AWS_ENDPOINT_URL_S3": f"{url}/s3",
    }.items():
        monkeypatch.setenv(name, value)


VERTEX_BATCH = {
    "vertexai": True,
    "project": "batchor-test",
    "location": "us-central1",
    "batch_gcs": "gs://batchor-jobs/runs",
}


def point_vertex_at(url: str, monkeypatch: Any, folder: Path) -> None:
    """google-genai's Vertex path, Cloud Storage and the sign-in go to the fake at `url`: Google's
    credentials are a Compute Engine workload's (the fake is its metadata server; nothing is read
    from this machine's Google setup), Vertex's base URL and the storage emulator are the fake."""
    host = url.removeprefix("http://")
    monkeypatch.setenv("GCE_METADATA_HOST", host)
    monkeypatch.setenv("GCE_METADATA_IP", host)
    monkeypatch.setenv("CLOUDSDK_CONFIG", str(folder / "no-gcloud"))
    monkeypatch.setenv("GOOGLE_VERTEX_BASE_URL", url)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
    for name in (
        "GOOGLE_APPLICATION_CREDENTIALS",
        "GOOGLE_CLOUD_PROJECT",
        "GOOGLE_CLOUD_LOCATION",
        "GOOGLE_GENAI_USE_VERTEXAI",
    ):
        monkeypatch.delenv(name, raising=False)
