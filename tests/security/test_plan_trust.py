"""Plans carry their powers: a plan file this state did not seal is refused before any connection;
keys go only in the provider's own variables; URLs keep no credentials (batchor/plan/trust.py)."""

from __future__ import annotations

import json
import os
import socket
import threading
import zipfile
from pathlib import Path

import pytest

from batchor import api
from batchor.errors import (
    KeyEnvNotAllowedError,
    PlanTooLargeError,
    UntrustedPlanError,
    UrlCredentialsError,
    problems_of,
)
from batchor.plan.model import PlanHeader
from batchor.plan.plan_file import plan_id_for
from batchor.plan.summary import plan_text
from batchor.plan.trust import key_path
from tests.security.hostile import project, write_job  # noqa: F401 - the fixture


class CaptureServer:
    """A TCP listener that only counts the connections made to it (and what they sent first)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.received: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}/v1"

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            with conn:
                conn.settimeout(1)
                try:
                    self.received.append(conn.recv(65536))
                except OSError:
                    self.received.append(b"")

    def close(self) -> None:
        self.stop.set()
        self.thread.join()
        self.sock.close()


@pytest.fixture
def capture():
    server = CaptureServer()
    yield server
    server.close()


def _retarget(plan_path: Path, **step_changes) -> Path:
    """What an attacker does: edit the plan's steps and hash the header again (a valid plan file)."""
    with zipfile.ZipFile(plan_path) as archive:
        header = json.loads(archive.read("plan.json"))
        data = archive.read("data.parquet")
    for step in header["steps"]:
        step.update(step_changes)
    header["plan_id"] = plan_id_for(PlanHeader.model_validate(header))
    crafted = plan_path.with_name("crafted.plan")
    with zipfile.ZipFile(crafted, "w") as archive:
        archive.writestr("plan.json", json.dumps(header))
        archive.writestr("data.parquet", data)
    return crafted


def _openai_job(project: Path) -> Path:
    return write_job(project, model={"provider": "openai", "name": "gpt-4.1-mini"})


def test_a_rehashed_plan_pointing_elsewhere_is_refused_before_any_connection(project, capture, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-key")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-123")
    planned = api.plan(_openai_job(project))
    crafted = _retarget(
        planned.saved_path, base_url=capture.url, endpoint=capture.url, api_key_env="AWS_SECRET_ACCESS_KEY"
    )
    with pytest.raises(UntrustedPlanError) as exc:
        api.apply(str(crafted), max_cost=1)
    assert exc.value.code == "plan_untrusted"
    assert "127.0.0.1" in exc.value.message and "AWS_SECRET_ACCESS_KEY" in exc.value.message  # its powers, shown
    assert capture.received == []


def test_a_plan_this_state_made_replays_without_asking(project):
    planned = api.plan(write_job(project))
    result = api.apply(str(planned.saved_path))
    assert result.status == "succeeded" and result.succeeded == 3


def test_a_plan_from_another_state_needs_trust_plan(project, tmp_path):
    planned = api.plan(write_job(project))
    other = str(tmp_path / "elsewhere" / "state.duckdb")
    with pytest.raises(UntrustedPlanError):
        api.apply(str(planned.saved_path), state=other)
    assert api.apply(str(planned.saved_path), state=other, trust_plan=True).status == "succeeded"


def test_a_key_file_that_others_can_read_seals_nothing(project):
    """A key checked out of a repository (0644) must not make a plan trusted."""
    spec = write_job(project)
    planned = api.plan(spec)
    os.chmod(key_path(planned.header.state_location), 0o644)
    spec.unlink()  # no spec to match the plan's powers with: only the seal could vouch for it
    with pytest.raises(UntrustedPlanError):
        api.apply(str(planned.saved_path))


def test_plan_text_lists_hosts_key_variables_and_files(project, monkeypatch):
    planned = api.plan(_openai_job(project), save=False)
    text = plan_text(planned)
    assert "calls       api.openai.com with OPENAI_API_KEY (classify)" in text
    assert f"reads       {project / 'data.csv'}" in text
    assert f"writes      {project / 'out' / 'results.csv'}" in text


@pytest.mark.parametrize("variable", ["AWS_SECRET_ACCESS_KEY", "GITHUB_TOKEN", "ANTHROPIC_API_KEY"])
def test_api_key_env_is_the_providers_own_unless_the_spec_allows_another(project, variable):
    spec = write_job(project, model={"provider": "openai", "name": "gpt-4.1-mini", "api_key_env": variable})
    with pytest.raises(KeyEnvNotAllowedError) as exc:
        api.validate(spec)
    assert exc.value.code == "api_key_env_not_allowed" and f"{spec}:" in exc.value.message
    allowed = write_job(
        project, model={"provider": "openai", "name": "gpt-4.1-mini", "api_key_env": variable, "allow_key_env": True}
    )
    assert f"with {variable}" in plan_text(api.plan(allowed, save=False))


def test_gemini_may_read_google_api_key(project):
    spec = write_job(project, model={"provider": "gemini", "name": "gemini-2.5-flash", "api_key_env": "GOOGLE_API_KEY"})
    assert api.validate(spec)


@pytest.mark.parametrize("url", ["https://user:hunter2@gw.example.com/v1", "https://tok@gw.example.com/v1"])
def test_base_url_with_credentials_is_refused(project, url):
    spec = write_job(project, model={"provider": "openai-compatible", "name": "m", "custom": True, "base_url": url})
    with pytest.raises(UrlCredentialsError) as exc:
        api.validate(spec)
    assert "hunter2" not in str(exc.value)


def test_a_variable_in_base_url_is_refused_and_never_stored(project, monkeypatch):
    monkeypatch.setenv("GW_TOKEN", "tok-very-secret")
    spec = write_job(
        project,
        model={"provider": "openai-compatible", "name": "m", "custom": True, "base_url": "https://gw/${GW_TOKEN}/v1"},
    )
    with pytest.raises(UrlCredentialsError) as exc:
        api.plan(spec)
    assert [p.code for p in problems_of(exc.value)] == ["url_credentials"]
    assert "tok-very-secret" not in str(exc.value)
    assert not list(project.rglob("*.plan"))


def test_a_plan_whose_header_inflates_to_gigabytes_is_refused_before_reading_it(project):
    """A header of 17 MB of spaces deflates to a few KB: the size is checked before it is inflated."""
    bomb = project / "bomb.plan"
    with zipfile.ZipFile(bomb, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("plan.json", "{" + " " * (17 << 20) + "}")
        archive.writestr("data.parquet", b"")
    assert bomb.stat().st_size < 100_000
    with pytest.raises(PlanTooLargeError) as exc:
        api.apply(str(bomb))
    assert exc.value.code == "plan_too_large"


def test_a_plan_made_elsewhere_runs_when_the_repositorys_spec_gives_it_the_same_powers(project, monkeypatch):
    """Issue 34: a plan another machine made (a CI job's artifact: no seal of this state) runs
    without --trust-plan when the spec it names, in the working folder, plans to the same hosts,
    key variables and files."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    planned = api.plan(write_job(project), mock=True)
    key_path(planned.header.state_location).unlink()  # this state has never seen the plan
    result = api.apply(str(planned.saved_path))
    assert result.status == "succeeded" and result.succeeded == 3


def test_a_plan_with_a_power_its_spec_lacks_is_refused_naming_it(project, capture, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-real-key")
    planned = api.plan(_openai_job(project))
    crafted = _retarget(planned.saved_path, base_url=capture.url, endpoint=capture.url, api_key_env="GITHUB_TOKEN")
    with pytest.raises(UntrustedPlanError) as exc:
        api.apply(str(crafted), max_cost=1)
    host = capture.url.split("/")[2]
    assert f"calls {host} with GITHUB_TOKEN (the spec: api.openai.com with OPENAI_API_KEY)" in exc.value.message
    assert "reads" not in exc.value.message.split("Its powers")[0]  # only what differs is named
    assert capture.received == []


def test_a_plan_writing_elsewhere_than_its_spec_is_refused_naming_the_file(project, tmp_path):
    planned = api.plan(write_job(project))
    with zipfile.ZipFile(planned.saved_path) as archive:
        header = json.loads(archive.read("plan.json"))
        data = archive.read("data.parquet")
    header["output"]["path"] = str(tmp_path / "outside" / "owned.csv")
    header["plan_id"] = plan_id_for(PlanHeader.model_validate(header))
    crafted = project / "crafted.plan"
    with zipfile.ZipFile(crafted, "w") as archive:
        archive.writestr("plan.json", json.dumps(header))
        archive.writestr("data.parquet", data)
    with pytest.raises(UntrustedPlanError) as exc:
        api.apply(str(crafted))
    assert f"writes {tmp_path / 'outside' / 'owned.csv'} (the spec: {project / 'out' / 'results.csv'}" in str(exc.value)
    assert not (tmp_path / "outside" / "owned.csv").exists()
