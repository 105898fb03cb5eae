"""Amazon Bedrock batch inference through boto3's `bedrock` and `s3` clients against the fake:
the JSONL input written to S3, CreateModelInvocationJob named after the local batch, results read
from the `.jsonl.out` file by recordId, partial results of a stopped job, files deleted after
collection (or kept), priced at Bedrock's batch rate, no secret in any file the run writes.
(Kill -9 after create, a create answered late, expiry and every call's faults run for Bedrock in
tests/engine/test_batch_providers.py and test_batch_fault_matrix.py.)"""

from __future__ import annotations

import json

import pytest
import yaml

from batchor import api
from batchor.errors import AuthenticationError, InvalidRequestError
from batchor.plan.prices import lookup_price
from batchor.providers.bedrock.batch import BedrockBatchProvider, job_name, parse_line
from tests.providers.batch_cases import collect, requests, round_trip, run, tag, until_ended
from tests.providers.helpers import AWS_SECRET, BEDROCK_BATCH, point_aws_at, provider_spec

NOVA = "amazon.nova-micro-v1:0"
HAIKU_45 = "us.anthropic.claude-haiku-4-5-20251001-v1:0"


@pytest.fixture
def aws(fake, monkeypatch):
    point_aws_at(fake.url, monkeypatch)
    fake.reset(batches=True)
    return fake


def batch_spec(folder, rows=4, **options):
    spec = provider_spec(folder, "bedrock", NOVA, rows=rows, options={**BEDROCK_BATCH, **options})
    data = yaml.safe_load(spec.read_text())
    data["limits"].update(mode="batch", batch_poll_s=0.01, batch_poll_max_s=0.05)
    spec.write_text(yaml.safe_dump(data))
    return spec


def test_a_line_is_a_converse_request_keyed_by_record_id():
    [request] = requests(HAIKU_45, 1)
    provider = BedrockBatchProvider(None, None, location="s3://b/p", role="arn:r", secrets=(), option=None)
    line = json.loads(provider.encode(request))
    assert line["recordId"] == request.key and "modelId" not in line["modelInput"]
    assert line["modelInput"]["outputConfig"]["textFormat"]["type"] == "json_schema"
    assert line["modelInput"]["inferenceConfig"]["maxTokens"] == 40


def test_job_names_follow_bedrocks_pattern():
    assert job_name("batchor-0123abcd") == "batchor-0123abcd"
    assert job_name("a_b c" + "x" * 80) == ("a-b-c" + "x" * 80)[:63]


def test_an_error_line_is_classified_by_its_code():
    row = parse_line({"recordId": "k", "modelInput": {}, "error": {"errorCode": 403, "errorMessage": "denied"}})
    assert row.key == "k" and isinstance(row.error, AuthenticationError)


def test_round_trip_writes_s3_creates_one_named_job_and_reads_its_output(aws):
    async def scenario(client):
        return await round_trip(client, NOVA, 3)

    remote, rows = run("bedrock", scenario, **BEDROCK_BATCH)
    assert remote.state == "completed" and remote.status == "Completed"
    assert len(rows) == 3 and all(r.completion and r.completion.text for r in rows.values())
    stats = aws.stats()
    assert stats["endpoint_calls"]["s3.objects.put"] == 1 and stats["batches_created"] == 1
    assert set(stats["batch_rows_by_id"].values()) == {1}
    assert any(f.startswith("s3://batchor-jobs/runs/batchor-t") and f.endswith("/input.jsonl") for f in stats["files"])


def test_find_adopts_the_job_by_its_name_and_skips_claimed_ones(aws):
    async def scenario(client):
        reqs = requests(NOVA, 2)
        mine = tag("batchor-adopt1", 2)
        created = await client.submit(mine, [client.encode(r) for r in reqs])
        found = await client.find(mine, set())
        claimed = await client.find(mine, {created.remote_id})
        other = await client.find(tag("batchor-adopt", 2), set())  # a name containing another's: not it
        return created, found, claimed, other

    created, found, claimed, other = run("bedrock", scenario, **BEDROCK_BATCH)
    assert found is not None and found.remote_id == created.remote_id and found.tag == "batchor-adopt1"
    assert claimed is None and other is None


def test_a_stopped_job_gives_the_rows_that_ran_and_leaves_the_rest_missing(aws):
    aws.configure(batch_polls=5, batch_done_fraction=0.5)

    async def scenario(client):
        reqs = requests(NOVA, 4)
        remote = await client.submit(tag("batchor-stop1", 4), [client.encode(r) for r in reqs])
        await client.cancel(remote.remote_id)
        remote = await until_ended(client, remote)
        return remote, await collect(client, remote)

    remote, rows = run("bedrock", scenario, **BEDROCK_BATCH)
    assert remote.state == "cancelled" and remote.status == "Stopped" and len(rows) == 2


def test_a_job_stopped_before_any_record_ran_has_no_output_and_no_rows(aws):
    aws.configure(batch_polls=5, batch_done_fraction=0.0)

    async def scenario(client):
        remote = await client.submit(tag("batchor-stop2", 2), [client.encode(r) for r in requests(NOVA, 2)])
        await client.cancel(remote.remote_id)
        remote = await until_ended(client, remote)
        return remote, await collect(client, remote)

    remote, rows = run("bedrock", scenario, **BEDROCK_BATCH)
    assert remote.state == "cancelled" and rows == {}


def test_apply_prices_at_the_batch_rate_deletes_the_files_and_stores_no_secret(aws, workdir):
    plan = api.plan(batch_spec(workdir), save=False)
    step = plan.header.steps[0]
    realtime = lookup_price("bedrock", NOVA)
    assert realtime is not None and step.mode == "batch"
    assert step.price is not None and step.price["batch_input_per_mtok"] == realtime.input_per_mtok / 2
    assert any("batch price assumed 50%" in note for note in step.price["notes"])
    outcome = api.apply(str(batch_spec(workdir)))
    assert outcome.succeeded == 4
    stats = aws.stats()
    assert stats["batches_created"] == 1 and stats["files"] == []
    assert set(stats["bedrock"]) == set()  # no realtime Converse call
    leaked = [p for p in workdir.rglob("*") if p.is_file() and AWS_SECRET.encode() in p.read_bytes()]
    assert leaked == []


@pytest.mark.slow  # a second apply through three boto3 clients
def test_keep_provider_files_leaves_input_and_output_in_s3(aws, workdir):
    outcome = api.apply(str(batch_spec(workdir, keep_provider_files=True)))
    assert outcome.succeeded == 4
    files = aws.stats()["files"]
    assert [f.rsplit("/", 1)[-1] for f in files] == ["input.jsonl", "input.jsonl.out", "manifest.json.out"]


def test_an_unsigned_call_is_refused_by_the_fake(aws):
    """The S3 and job routes answer 403 without a SigV4 signature for their service: the tests
    above prove boto3 signs, this one that the fake would notice if it did not."""
    import urllib.request

    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    for path in ("/model-invocation-jobs", "/s3/batchor-jobs/x"):
        with pytest.raises(urllib.error.HTTPError) as caught:
            opener.open(urllib.request.Request(f"{aws.url}{path}"), timeout=5)
        assert caught.value.code == 403


def test_without_its_options_the_adapter_names_them(aws):
    with pytest.raises(InvalidRequestError, match="batch_s3"):
        run("bedrock", lambda client: None)
