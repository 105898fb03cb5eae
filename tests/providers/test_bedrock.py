"""Amazon Bedrock through boto3's `bedrock-runtime` client (the Converse API) against the fake's
Converse route: structured output both ways, usage priced from the price table's Bedrock models,
AWS credentials and region from the environment, errors as batchor's classes, and no secret in
any file the run writes."""

from __future__ import annotations

import asyncio
import json

import pytest
import yaml

from batchor import api
from batchor.errors import (
    AuthenticationError,
    BaseUrlMissingError,
    CloudPathMissingError,
    ContentRefusedError,
    InvalidRequestError,
    NoApiKeyError,
    ProviderUnreachableError,
    QuotaExhaustedError,
    RateLimitedError,
    TransientProviderError,
)
from batchor.plan.prices import lookup_price
from batchor.providers import create_provider
from batchor.providers.base import Attachment, LLMRequest, ProviderConfig
from batchor.providers.bedrock.realtime import parse_result, structured_mode, to_body
from tests.providers.helpers import AWS_KEY_ID, AWS_SECRET, SCHEMA, point_aws_at, provider_spec, request

KEY_ID, SECRET = AWS_KEY_ID, AWS_SECRET
HAIKU_45 = "us.anthropic.claude-haiku-4-5-20251001-v1:0"  # structured outputs: outputConfig
HAIKU_3 = "anthropic.claude-3-haiku-20240307-v1:0"  # older Claude: a forced tool
NOVA = "amazon.nova-micro-v1:0"  # another family: a forced tool
PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 24


@pytest.fixture
def aws(fake, monkeypatch):
    """Dummy AWS credentials and region; boto3's bedrock-runtime endpoint is the fake."""
    point_aws_at(fake.url, monkeypatch)
    return fake


def bedrock_spec(folder, model=HAIKU_45, rows=4, **options):
    return provider_spec(folder, "bedrock", model, rows=rows, **({"options": options} if options else {}))


def secrets_left(folder, *secrets):
    return [p for p in folder.rglob("*") if p.is_file() and any(s.encode() in p.read_bytes() for s in secrets)]


def call(request_: LLMRequest, **options):
    async def go():
        provider = create_provider(ProviderConfig(provider="bedrock", timeout_s=5.0, options=options))
        try:
            return await provider.complete(request_)
        finally:
            await provider.aclose()

    return asyncio.run(go())


def test_realtime_apply_signs_with_the_environments_credentials_and_region(aws, workdir):
    outcome = api.apply(str(bedrock_spec(workdir)))
    assert outcome.succeeded == 4 and outcome.failed == 0
    stats = aws.stats()
    assert stats["bedrock"] == {f"{KEY_ID}|us-west-2": 4}
    body = stats["bodies"][0]
    assert body["outputConfig"]["textFormat"]["type"] == "json_schema" and "toolConfig" not in body
    assert body["system"] == [{"text": "Classify."}] and body["inferenceConfig"] == {"maxTokens": 50, "temperature": 0}
    rows = (workdir / "out" / "results.csv").read_text()
    assert "sentiment" in rows
    assert secrets_left(workdir, SECRET) == []


def test_usage_is_priced_at_the_tables_bedrock_rate(aws, workdir):
    spec = bedrock_spec(workdir, model=HAIKU_3)
    plan = api.plan(spec, save=False)
    price = lookup_price("bedrock", HAIKU_3)
    assert price is not None and price.input_per_mtok > 0
    assert plan.header.steps[0].price["input_per_mtok"] == price.input_per_mtok
    outcome = api.apply(str(spec))
    stats = aws.stats()
    expected = price.cost(stats["input_tokens"], stats["output_tokens"])
    assert outcome.input_tokens == stats["input_tokens"] and outcome.output_tokens == stats["output_tokens"]
    assert outcome.cost_usd == pytest.approx(expected) and outcome.estimated_usd == 0


def test_older_claude_and_other_families_answer_through_a_forced_tool(aws, workdir):
    outcome = api.apply(str(bedrock_spec(workdir, model=NOVA)))
    assert outcome.succeeded == 4
    body = aws.stats()["bodies"][0]
    assert body["toolConfig"]["toolChoice"] == {"tool": {"name": "classify"}} and "outputConfig" not in body
    assert structured_mode(HAIKU_3) == "tool" and structured_mode(HAIKU_45) == "output_config"
    assert structured_mode(HAIKU_45, option="tool") == "tool"


def test_options_region_overrides_the_environments(aws, workdir):
    assert api.apply(str(bedrock_spec(workdir, region="eu-central-1"))).succeeded == 4
    assert aws.stats()["bedrock"] == {f"{KEY_ID}|eu-central-1": 4}


def test_without_credentials_the_error_names_the_aws_sources(aws, monkeypatch):
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    monkeypatch.delenv("AWS_SECRET_ACCESS_KEY")
    with pytest.raises(NoApiKeyError) as caught:
        call(request())
    assert "AWS_PROFILE" in (caught.value.hint or "") and "AWS_BEARER_TOKEN_BEDROCK" in (caught.value.hint or "")


def test_without_a_region_the_error_says_where_to_set_one(aws, monkeypatch):
    monkeypatch.delenv("AWS_REGION")
    monkeypatch.delenv("AWS_DEFAULT_REGION", raising=False)
    with pytest.raises(BaseUrlMissingError, match="region"):
        call(request())


@pytest.mark.parametrize(
    ("action", "error"),
    [
        (429, RateLimitedError),
        (500, TransientProviderError),
        (503, TransientProviderError),
        (400, InvalidRequestError),
        (403, AuthenticationError),
        ("quota", QuotaExhaustedError),
        ("blocked", ContentRefusedError),
    ],
)
def test_converse_errors_are_batchors_classes(aws, action, error):
    aws.configure(fail_matching={"great": action})
    with pytest.raises(error) as caught:
        call(request(SCHEMA), structured="tool")
    assert SECRET not in str(caught.value)
    assert aws.stats()["requests"] == 1  # botocore retries nothing: the engine owns retries
    if action == "blocked":  # still billed: the error carries the usage
        assert caught.value.completion.input_tokens > 0


def test_throttled_rows_are_retried_and_answered(aws, workdir):
    aws.configure(error_429=0.3, seed=3)
    outcome = api.apply(str(bedrock_spec(workdir, rows=6)))
    assert outcome.succeeded == 6 and aws.stats()["by_status"].get("429", 0) > 0


def test_an_endpoint_that_refuses_connections_is_unreachable(aws, monkeypatch):
    monkeypatch.setenv("AWS_ENDPOINT_URL_BEDROCK_RUNTIME", "http://127.0.0.1:9")
    with pytest.raises(ProviderUnreachableError, match="127.0.0.1:9"):
        call(request())


def test_batch_mode_without_its_s3_location_is_refused_at_validate_naming_it(aws, workdir):
    spec = bedrock_spec(workdir)
    data = yaml.safe_load(spec.read_text())
    data["limits"]["mode"] = "batch"
    spec.write_text(yaml.safe_dump(data))
    with pytest.raises(CloudPathMissingError, match="batch_s3"):
        api.validate(spec)
    data["model"]["options"] = {"batch_s3": "s3://jobs/x"}
    spec.write_text(yaml.safe_dump(data))
    with pytest.raises(CloudPathMissingError, match="role_arn"):
        api.validate(spec)
    data["limits"]["mode"] = "auto"
    spec.write_text(yaml.safe_dump(data))
    assert api.plan(spec, save=False).header.steps[0].mode == "realtime"


def test_the_body_carries_attachments_as_bytes_and_openai_names_translated():
    sent = to_body(
        LLMRequest(
            "k",
            NOVA,
            ({"role": "user", "content": "Describe."},),
            {"max_completion_tokens": 30, "stop": "END", "top_k": 5, "seed": 1},
            attachments=(Attachment("image/png", data=PNG), Attachment("application/pdf", url="s3://b/doc.pdf")),
        )
    )
    assert sent["inferenceConfig"] == {"maxTokens": 30, "stopSequences": ["END"]}
    assert sent["additionalModelRequestFields"] == {"top_k": 5}
    image, document = sent["messages"][0]["content"][1:]
    assert image == {"image": {"format": "png", "source": {"bytes": PNG}}}
    assert document["document"]["source"] == {"s3Location": {"uri": "s3://b/doc.pdf"}}


def test_an_image_reaches_the_fake_as_its_bytes(aws):
    reply = call(
        LLMRequest(
            "k", NOVA, ({"role": "user", "content": "Describe."},), {}, attachments=(Attachment("image/png", data=PNG),)
        )
    )
    assert reply.text and aws.stats()["media"][0]["bytes"] == len(PNG)


def test_parse_counts_cache_reads_and_writes_as_input():
    answer = parse_result(
        {
            "output": {"message": {"role": "assistant", "content": [{"text": '{"a": 1}'}]}},
            "stopReason": "end_turn",
            "usage": {"inputTokens": 10, "outputTokens": 4, "cacheReadInputTokens": 100, "cacheWriteInputTokens": 5},
            "ResponseMetadata": {"RequestId": "r"},
        }
    )
    assert (answer.input_tokens, answer.cached_input_tokens, answer.cache_write_tokens) == (115, 100, 5)
    assert answer.raw is not None and "ResponseMetadata" not in answer.raw and json.loads(answer.text) == {"a": 1}


def test_a_key_variable_is_refused_and_the_plan_names_the_aws_credentials(aws, workdir):
    from batchor.errors import KeyEnvNotAllowedError
    from batchor.plan.trust import powers

    plan = api.plan(bedrock_spec(workdir), save=False)
    assert powers(plan.header)["calls"][0]["key_env"] == "AWS credentials"
    spec = provider_spec(workdir, "bedrock", HAIKU_45, api_key_env="AWS_SECRET_ACCESS_KEY", allow_key_env=True)
    with pytest.raises(KeyEnvNotAllowedError, match="AWS credentials"):
        api.validate(spec)


def test_show_prompts_previews_the_converse_arguments(aws, workdir):
    from batchor.providers.preview import body_kind, sent_body

    sent = sent_body(
        "bedrock",
        LLMRequest(
            "k", NOVA, ({"role": "user", "content": "Hi"},), {}, attachments=(Attachment("image/png", data=PNG),)
        ),
        api=None,
        strict=True,
        options={},
    )
    assert json.loads(json.dumps(sent))["modelId"] == NOVA and "converse" in body_kind("bedrock", None)
