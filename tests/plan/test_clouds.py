"""Cloud paths batchor has no adapter for are refused at `validate` with `cloud_unsupported`,
naming what is missing, never an internal error at `apply`; cloud names and Bedrock model ids
get hints that say what to write instead."""

from __future__ import annotations

import pytest
import yaml

from batchor import api
from batchor.errors import CloudPathMissingError, SpecError, SpecProblemsError, UnknownModelError
from tests.conftest import make_spec

VERTEX = {"vertexai": True, "project": "p", "location": "us-central1"}


def vertex_spec(folder, mode):
    spec = make_spec(folder, provider="gemini", model="gemini-2.5-flash", limits={"mode": mode})
    data = yaml.safe_load(spec.read_text())
    data["model"]["options"] = VERTEX
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    return spec


def test_vertex_batch_is_refused_at_validate_naming_what_is_missing(workdir):
    with pytest.raises(CloudPathMissingError, match="Vertex AI.*Cloud Storage") as caught:
        api.validate(vertex_spec(workdir, "batch"))
    assert caught.value.code == "cloud_unsupported" and "mode: realtime" in (caught.value.hint or "")


def test_vertex_batch_is_refused_under_mock_too(workdir):
    with pytest.raises(CloudPathMissingError):
        api.plan(vertex_spec(workdir, "batch"), mock=True, save=False)


def test_vertex_auto_runs_realtime_and_says_why(workdir):
    plan = api.plan(vertex_spec(workdir, "auto"), save=False)
    step = plan.header.steps[0]
    assert step.mode == "realtime" and "Vertex AI" in (step.mode_note or "")


def test_the_developer_api_keeps_its_batch(workdir, monkeypatch):
    monkeypatch.delenv("GOOGLE_GENAI_USE_VERTEXAI", raising=False)
    spec = make_spec(workdir, provider="gemini", model="gemini-2.5-flash", limits={"mode": "batch"})
    assert api.plan(spec, save=False).header.steps[0].mode == "batch"


def test_bedrock_batch_without_its_s3_location_is_refused_at_validate_naming_it(workdir):
    spec = make_spec(
        workdir, provider="bedrock", model="anthropic.claude-3-haiku-20240307-v1:0", limits={"mode": "batch"}
    )
    with pytest.raises(CloudPathMissingError, match="Bedrock batch inference needs an S3 location.*batch_s3") as caught:
        api.validate(spec)
    assert "gemini" not in str(caught.value)  # one problem, not one per check that met the name


BEDROCK_BATCH = {"batch_s3": "s3://jobs/runs", "role_arn": "arn:aws:iam::123456789012:role/bedrock-batch"}


def bedrock_spec(folder, rows, **limits):
    spec = make_spec(folder, rows=rows, provider="bedrock", model="amazon.nova-micro-v1:0", limits=limits)
    data = yaml.safe_load(spec.read_text())
    data["model"]["options"] = BEDROCK_BATCH
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    return spec


@pytest.mark.parametrize("mode", ["batch", "auto"])
def test_a_bedrock_step_under_its_100_record_minimum_runs_realtime_and_says_why(workdir, mode):
    spec = bedrock_spec(workdir, 40, mode=mode, batch_threshold=10)
    step = api.plan(spec, save=False).header.steps[0]
    assert step.mode == "realtime" and "fewer than the 100 records a bedrock batch job takes" in (step.mode_note or "")


def test_a_bedrock_step_of_100_records_runs_batch(workdir):
    assert api.plan(bedrock_spec(workdir, 100, mode="batch"), save=False).header.steps[0].mode == "batch"


@pytest.mark.parametrize(
    ("name", "hint"),
    [("vertex", "provider: gemini"), ("aws", "provider: bedrock"), ("opneai", "did you mean 'openai'")],
)
def test_unknown_provider_hints_say_what_to_write(workdir, name, hint):
    with pytest.raises(SpecError) as caught:
        api.validate(make_spec(workdir, provider=name, model="m"))
    assert caught.value.code == "unknown_provider" and hint in (caught.value.hint or "")
    assert not isinstance(caught.value, SpecProblemsError)


def test_a_bedrock_model_id_is_not_said_to_be_geminis(workdir):
    with pytest.raises(UnknownModelError) as caught:
        api.validate(make_spec(workdir), model="openai:anthropic.claude-3-haiku")
    assert "gemini" not in caught.value.message and "Bedrock model id" in caught.value.message
    assert "provider: bedrock" in caught.value.message
    assert "'claude-3-haiku'" in caught.value.message


@pytest.mark.parametrize("how", ["name", "option"])
def test_anthropic_on_vertex_is_refused_naming_what_is_missing(workdir, how):
    spec = make_spec(workdir, provider="anthropic-vertex" if how == "name" else "anthropic", model="claude-haiku-4-5")
    if how == "option":
        data = yaml.safe_load(spec.read_text())
        data["model"]["options"] = {"vertexai": True}
        spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    with pytest.raises(CloudPathMissingError, match="AnthropicVertex") as caught:
        api.validate(spec)
    assert "ANTHROPIC_API_KEY" in (caught.value.hint or "")
