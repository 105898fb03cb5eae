"""gs:// inputs through google-cloud-storage and hf:// inputs through huggingface_hub, against
local fakes of Cloud Storage's JSON API and the Hub's file URLs (object_stores.py): each plans
and applies from a local copy downloaded once per version, a saved plan is stale once the object
changes, offline is `input_unreachable` naming the host, and no credential reaches any file."""

from __future__ import annotations

import pytest

from batchor import api
from batchor.errors import InputError, InputMissingError, InputUnreachableError, StalePlanError
from tests.spec.object_stores import object_stores
from tests.spec.test_remote_inputs import CSV, remote_spec, saved

HF_TOKEN = "hf_test_secret_token_4455"
GCS_URL = "gs://data/in/reviews.csv"
HF_URL = "hf://datasets/acme/reviews@main/data/reviews.csv"


@pytest.fixture
def stores(monkeypatch):
    with object_stores() as (url, found):
        monkeypatch.setenv("STORAGE_EMULATOR_HOST", url)
        monkeypatch.setenv("HF_ENDPOINT", url)
        monkeypatch.setenv("HF_TOKEN", HF_TOKEN)
        found.put_gcs("data", "in/reviews.csv", CSV)
        found.put_hub("acme/reviews", "data/reviews.csv", CSV)
        yield found


def written_with(folder, secret):
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


@pytest.mark.slow  # google-cloud-storage's first import, then three applies
def test_a_gs_input_is_pinned_to_its_generation_and_goes_stale(workdir, stores, fake):
    spec = remote_spec(workdir, GCS_URL)
    plan_file = saved(spec)
    assert api.plan(str(spec), save=False).header.input.remote == [f"{GCS_URL}#generation=1"]
    assert api.apply(plan_file, handle_signals=False).succeeded == 3
    assert stores.gets[GCS_URL] == 1  # one download per version: the apply read the plan's copy
    stores.put_gcs("data", "in/reviews.csv", CSV + b"r3,new row\n")
    with pytest.raises(StalePlanError, match="generation=1 -> generation=2"):
        api.apply(plan_file, handle_signals=False)
    assert fake.stats()["requests"] == 3


def test_a_gs_download_reads_exactly_the_pinned_generation(workdir, stores):
    from batchor.spec.remote import gcs

    stores.put_gcs("data", "in/reviews.csv", b"id,text\nr9,newer\n")
    target = workdir / "copy.csv"
    gcs.download(GCS_URL, "generation=1", target)
    assert target.read_bytes() == CSV


@pytest.mark.slow  # three applies
def test_an_hf_input_is_pinned_to_its_content_hash_and_goes_stale(workdir, stores, fake):
    spec = remote_spec(workdir, HF_URL)
    plan_file = saved(spec)
    [pinned] = api.plan(str(spec), save=False).header.input.remote
    assert pinned.startswith(f"{HF_URL}#") and len(pinned) > len(HF_URL) + 64
    assert api.apply(plan_file, handle_signals=False).succeeded == 3
    assert stores.gets["hf://acme/reviews/data/reviews.csv"] == 1
    assert HF_TOKEN in stores.tokens and written_with(workdir, HF_TOKEN) == []
    stores.put_hub("acme/reviews", "other.csv", b"x\n")  # another file changed: this one did not
    assert api.apply(plan_file, handle_signals=False).succeeded == 0
    stores.put_hub("acme/reviews", "data/reviews.csv", CSV + b"r3,new row\n")
    with pytest.raises(StalePlanError, match="remote input hf://datasets/acme/reviews@main/data/reviews.csv changed"):
        api.apply(plan_file, handle_signals=False)


def test_a_private_dataset_without_a_token_says_how_to_read_it(workdir, stores, monkeypatch):
    stores.private.add("acme/reviews")
    monkeypatch.delenv("HF_TOKEN")
    with pytest.raises(InputMissingError, match="private") as caught:
        api.validate(remote_spec(workdir, HF_URL))
    assert "HF_TOKEN" in (caught.value.hint or "")


@pytest.mark.parametrize(
    ("url", "error", "match"),
    [
        ("gs://data/in/missing.csv", InputMissingError, "does not exist"),
        ("hf://datasets/acme/reviews@main/missing.csv", InputMissingError, "does not exist"),
        ("hf://models/acme/reviews/data.csv", InputError, "not a Hub dataset file"),
    ],
)
def test_missing_objects_and_wrong_forms_are_coded(workdir, stores, url, error, match):
    with pytest.raises(error, match=match):
        api.validate(remote_spec(workdir, url))


@pytest.mark.parametrize("url", [GCS_URL, HF_URL])
def test_offline_the_error_names_the_host(workdir, monkeypatch, url):
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")
    with pytest.raises(InputUnreachableError, match="cannot reach"):
        api.validate(remote_spec(workdir, url))
