"""Remote inputs: an https:// object from a local HTTP server and an s3:// object from a local
S3-compatible server (moto) plan and apply from a local copy pinned to the object's version; a
saved plan is stale once the object changes; no credential reaches a plan, the state or a log;
offline, the error names what was unreachable. (gs:// and hf://: test_remote_stores.py.)"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from batchor import api
from batchor.errors import InputUnreachableError, StalePlanError, UrlCredentialsError
from tests.conftest import make_spec

CSV = b"id,text\nr0,great shoes\nr1,bad chair\nr2,fine lamp\n"


class Objects(BaseHTTPRequestHandler):
    """Serves `store` (path -> (bytes, etag)) with HEAD and GET; counts GETs per path."""

    store: dict[str, tuple[bytes, str]] = {}
    gets: dict[str, int] = {}

    def _head(self) -> bytes | None:
        found = self.store.get(self.path)
        if found is None:
            self.send_response(404)
            self.end_headers()
            return None
        self.send_response(200)
        self.send_header("ETag", found[1])
        self.send_header("Content-Length", str(len(found[0])))
        self.end_headers()
        return found[0]

    def do_HEAD(self) -> None:
        self._head()

    def do_GET(self) -> None:
        data = self._head()
        if data is not None:
            self.gets[self.path] = self.gets.get(self.path, 0) + 1
            self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def web():
    Objects.store, Objects.gets = {"/data/reviews.csv": (CSV, '"v1"')}, {}
    server = ThreadingHTTPServer(("127.0.0.1", 0), Objects)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def remote_spec(folder: Path, url: str) -> Path:
    spec = make_spec(folder, model="gpt-4.1-mini")
    data = yaml.safe_load(spec.read_text())
    data["input"]["path"] = url
    spec.write_text(yaml.safe_dump(data), encoding="utf-8")
    return spec


def saved(spec: Path) -> Path:
    plan = api.plan(str(spec))
    assert plan.saved_path is not None
    return spec.parent / plan.saved_path


def test_an_https_input_plans_and_applies_pinned_to_its_etag(workdir, web, fake):
    url = f"{web}/data/reviews.csv"
    plan = api.plan(str(remote_spec(workdir, url)), save=False)
    assert plan.header.input.remote == [f'{url}#"v1"'] and plan.header.input.rows == 3
    outcome = api.apply(str(remote_spec(workdir, url)), handle_signals=False)
    assert outcome.succeeded == 3
    assert Objects.gets == {"/data/reviews.csv": 1}  # one download per version


def test_a_saved_plan_is_stale_once_the_remote_object_changed(workdir, web, fake):
    url = f"{web}/data/reviews.csv"
    plan_file = saved(remote_spec(workdir, url))
    Objects.store["/data/reviews.csv"] = (CSV + b"r3,new row\n", '"v2"')
    with pytest.raises(StalePlanError, match="remote input .* changed"):
        api.apply(plan_file, handle_signals=False)
    assert fake.stats()["requests"] == 0


def test_offline_the_error_names_what_was_unreachable(workdir):
    url = "http://127.0.0.1:9/data/reviews.csv"  # the discard port: nothing listens
    with pytest.raises(InputUnreachableError, match="cannot reach 127.0.0.1:9"):
        api.validate(remote_spec(workdir, url))


@pytest.mark.parametrize(
    ("url", "error"),
    [
        ("https://user:pw@example.com/reviews.csv", UrlCredentialsError),
        ("https://example.com/reviews.csv?X-Amz-Signature=abc", UrlCredentialsError),
    ],
)
def test_refused_remote_inputs_say_why(workdir, url, error):
    with pytest.raises(error):
        api.validate(remote_spec(workdir, url))


@pytest.fixture
def s3(monkeypatch):
    """A local S3-compatible server (moto's), with a bucket holding the CSV; boto3 pointed at it."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    for name, value in {
        "AWS_ENDPOINT_URL": f"http://{host}:{port}",
        "AWS_ACCESS_KEY_ID": "AKIATESTKEY123",
        "AWS_SECRET_ACCESS_KEY": "s3-test-secret-998877",
        "AWS_DEFAULT_REGION": "us-east-1",
    }.items():
        monkeypatch.setenv(name, value)
    import boto3

    client = boto3.client("s3")
    client.create_bucket(Bucket="data")
    client.put_object(Bucket="data", Key="in/reviews.csv", Body=CSV)
    yield client
    server.stop()


@pytest.mark.slow  # the S3 server takes about 4 s to start
def test_an_s3_input_applies_and_goes_stale_without_leaking_credentials(workdir, s3, fake):
    spec = remote_spec(workdir, "s3://data/in/reviews.csv")
    plan_file = saved(spec)
    assert api.apply(plan_file, handle_signals=False).succeeded == 3
    leaked = [p for p in workdir.rglob("*") if p.is_file() and b"s3-test-secret-998877" in p.read_bytes()]
    assert leaked == []
    s3.put_object(Bucket="data", Key="in/reviews.csv", Body=CSV + b"r3,new row\n")
    with pytest.raises(StalePlanError, match="s3://data/in/reviews.csv changed"):
        api.apply(plan_file, handle_signals=False)
