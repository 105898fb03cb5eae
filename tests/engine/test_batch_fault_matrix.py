"""The fault matrix: each provider x each Batch API call besides generation x each fault, one run
per cell, through the real CLI (in process) and each provider's real SDK against the fake.

A cell injects its fault on the first call of one endpoint (`fault_plan`, tests/fakes/faults.py),
applies, then applies again with the fault gone (a user running the same command again). Checked
after each apply: the exit code matches the status, the status matches the rows (`succeeded` only
when no row is pending; a pending row is explained by the run's reason), every failed row says
why. At the end: no row was submitted twice (counted by the fake), no row is lost (each answered
or failed with a reason), and the recorded spend covers every token the fake billed. Backoff and
polling sleeps are injected, so only the `timeout` cells wait on real time (marked slow).
"""

from __future__ import annotations

import json
import time
import traceback
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from batchor.cli.main import app
from batchor.engine import batch_calls
from batchor.engine import run as engine_run
from batchor.engine.batch import BatchExecutor
from batchor.plan.prices import lookup_price
from tests.engine.batch_helpers import results, state_rows, submitted
from tests.engine.test_batch_providers import MODELS, aws_at_the_fake, spec_for  # noqa: F401 - autouse fixture

pytestmark = [pytest.mark.timeout(120), pytest.mark.slow]  # kills, restarts, every fault: CI's full tier

# The calls of each provider's batch path, by the fake's endpoint names (None: not in its API).
CALLS: dict[str, dict[str, str | None]] = {
    "openai": {
        "upload": "openai.files.create",
        "create": "openai.batches.create",
        "get": "openai.batches.retrieve",
        "list": "openai.batches.list",
        "download": "openai.files.content",
        "cancel": "openai.batches.cancel",
        "delete": "openai.files.delete",
    },
    "anthropic": {
        "upload": None,
        "create": "anthropic.batches.create",
        "get": "anthropic.batches.retrieve",
        "list": "anthropic.batches.list",
        "download": "anthropic.batches.results",
        "cancel": "anthropic.batches.cancel",
        "delete": None,
    },
    "azure": {
        "upload": "azure.files.create",
        "create": "azure.batches.create",
        "get": "azure.batches.retrieve",
        "list": "azure.batches.list",
        "download": "azure.files.content",
        "cancel": "azure.batches.cancel",
        "delete": "azure.files.delete",
    },
    "gemini": {
        "upload": "gemini.files.upload",
        "create": "gemini.batches.create",
        "get": "gemini.batches.get",
        "list": "gemini.batches.list",
        "download": "gemini.files.download",
        "cancel": "gemini.batches.cancel",
        "delete": "gemini.files.delete",
    },
    "bedrock": {
        "upload": "s3.objects.put",
        "create": "bedrock.batches.create",
        "get": "bedrock.batches.retrieve",
        "list": "bedrock.batches.list",
        "download": "s3.objects.get",
        "cancel": "bedrock.batches.cancel",
        "delete": "s3.objects.delete",
    },
    "vertex": {
        "upload": "gcs.objects.insert",
        "create": "vertex.batches.create",
        "get": "vertex.batches.get",
        "list": "vertex.batches.list",
        "download": "gcs.objects.get",
        "cancel": "vertex.batches.cancel",
        "delete": "gcs.objects.delete",
    },
}
# Each provider's real quota shape: OpenAI's insufficient_quota 429, Anthropic's "credit balance is
# too low" 400, Gemini's "You exceeded your current quota" RESOURCE_EXHAUSTED without details.
QUOTA = {
    "openai": "quota",
    "anthropic": "quota:credit_balance",
    "gemini": "quota:no_details",
    "azure": "quota",
    "bedrock": "quota",
    "vertex": "quota:no_details",
}
FAULTS = ("429", "500", "503", "timeout", "disconnect", "cut", "quota")
GONE = ("404", "410")  # meaningful on a results download: the results expired
EXIT = {"succeeded": 0, "partial": 3, "failed": 3, "paused": 10, "in_flight": 7, "budget": 4}
ROWS = 4


def cells() -> list[Any]:
    found = []
    for provider, calls in CALLS.items():
        for call, endpoint in calls.items():
            if endpoint is None:
                continue
            for fault in FAULTS + (GONE if call == "download" else ()):
                marks = [pytest.mark.slow] if fault == "timeout" else []
                found.append(pytest.param(provider, call, fault, marks=marks, id=f"{provider}-{call}-{fault}"))
    return found


class _SkippingClock:
    """`time` for the engine's run module whose epoch clock (`time.time`, the batch engine's clock)
    runs ahead by every sleep skipped: a wait for a due time ends at once instead of spinning."""

    def __init__(self) -> None:
        self.skipped = 0.0

    def skip(self, delay: float) -> None:
        self.skipped += max(0.0, delay)

    def time(self) -> float:
        return time.time() + self.skipped

    def __getattr__(self, name: str) -> Any:
        return getattr(time, name)


@pytest.fixture
def no_waiting(monkeypatch):
    """Polling, backoff and the wait before an unknown create is looked up again take no real time
    (the engine's sleep, and `cancel`'s own): each sleep moves the engine's clock instead."""
    clock = _SkippingClock()

    async def no_wait(self, delay):
        clock.skip(delay)

    async def instant(delay):
        clock.skip(delay)

    monkeypatch.setattr(BatchExecutor, "_sleep", no_wait)
    monkeypatch.setattr(batch_calls, "default_sleep", instant)
    monkeypatch.setattr(engine_run, "time", clock)


@pytest.mark.parametrize(("provider", "call", "fault"), cells())
def test_fault_cell(fake, workdir, no_waiting, provider, call, fault):
    endpoint = CALLS[provider][call]
    action = QUOTA[provider] if fault == "quota" else fault
    fake.reset(config=True, batches=True)  # another cell's batch must not pass for this one's
    fake.configure(retry_after_s=0.01, timeout_hold_s=2.0, batch_polls=2, fault_plan=_plan(provider, endpoint, action))
    options = {"batch_inline_max_bytes": 100} if provider == "gemini" else {}  # the file path: upload, download
    spec = spec_for(workdir, provider, rows=ROWS, request_timeout_s=1.0)
    _set_model_options(spec, options)
    files_before = set(fake.stats()["files"])
    if call == "cancel":
        _check(apply(workdir, spec, "--no-wait"))
        cancelled = CliRunner().invoke(app, ["cancel", "--state", str(_state(workdir))])
        assert cancelled.exit_code == 0, cancelled.output
    first = apply(workdir, spec)
    _check(first)
    fake.configure(fault_plan={})
    final = apply(workdir, spec) if first["status"] != "succeeded" and fault not in GONE else first
    _check(final)
    rows = results(workdir)
    assert len(rows) == ROWS, "a row was lost"
    assert set(submitted(fake).values()) == {1}, f"rows submitted twice: {submitted(fake)}"
    if fault in GONE:  # billed, results expired: failed with that reason, never sent again
        assert {r[1] for r in rows.values()} == {"batch_results_gone"}
        assert final["status"] == "failed" and final["exit"] == 3
    else:  # (results that are gone carry no usage: their spend is unknown, the budget keeps the reservation)
        assert final["status"] == "succeeded", final
        _check_spend(fake, workdir, provider)
    if call == "delete" and fault != "quota":  # each file is deleted (once the fault is retried)
        assert not set(fake.stats()["files"]) - files_before


def _plan(provider: str, endpoint: str | None, action: str) -> dict[str, list[str]]:
    plan = {endpoint: [action]}
    if endpoint is not None and endpoint.endswith(".list"):  # a list is called to reconcile an unknown create
        plan[CALLS[provider]["create"]] = ["timeout"]
    return plan


def apply(folder: Path, spec: Path, *args: str) -> dict[str, Any]:
    """`batchor apply --json` in process: its exit code, and the status and reason it finished with."""
    result = CliRunner().invoke(
        app,
        [
            "apply",
            str(spec),
            "--yes",
            "--json",
            "--state",
            str(_state(folder)),
            "--output",
            str(folder / "out.csv"),
            *args,
        ],
    )
    events = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    finished = [e for e in events if e.get("event") == "run_finished"]
    crash = "".join(traceback.format_exception(result.exception)) if result.exception else ""  # where it broke
    assert finished, f"no run_finished event (exit {result.exit_code}): {result.output[-2000:]}{crash[-3000:]}"
    assert "Traceback" not in result.output
    return {
        "exit": result.exit_code,
        "status": finished[-1]["status"],
        "reason": finished[-1].get("reason"),
        "folder": folder,
        "events": events,
    }


def _check(outcome: dict[str, Any]) -> None:
    """The exit code matches the status; the status matches the rows; failed rows say why."""
    status, rows = outcome["status"], results(outcome["folder"])
    assert outcome["exit"] == EXIT[status], outcome
    pending = ROWS - len(rows)
    if status == "succeeded":
        assert pending == 0 and {r[0] for r in rows.values()} == {"succeeded"}, outcome
    if pending or status != "succeeded":
        assert outcome["reason"] or any(r[0] == "failed" for r in rows.values()), outcome
    for status_, code, _ in rows.values():
        assert status_ == "succeeded" or code, rows


def _check_spend(fake: Any, folder: Path, provider: str) -> None:
    """Recorded spend covers what the fake billed (every answered row, at the batch price)."""
    stats = fake.stats()
    price = lookup_price("gemini" if provider == "vertex" else provider, MODELS[provider])
    assert price is not None
    billed = price.cost(stats["input_tokens"], stats["output_tokens"], batch=True)
    recorded = state_rows(folder, "SELECT coalesce(sum(cost_usd), 0) FROM results")[0][0]
    assert recorded >= billed * 0.999 - 1e-9, (recorded, billed)


def _set_model_options(spec: Path, options: dict[str, Any]) -> None:
    import yaml

    data = yaml.safe_load(spec.read_text(encoding="utf-8"))
    data["model"]["options"] = {**(data["model"].get("options") or {}), **options}
    spec.write_text(yaml.safe_dump(data, sort_keys=False), encoding="utf-8")


def _state(folder: Path) -> Path:
    return folder / ".batchor" / "state.duckdb"


@pytest.mark.parametrize("provider", ["openai", "gemini", "azure"])
def test_provider_files_are_kept_when_the_spec_says_so(fake, workdir, no_waiting, provider):
    fake.reset(config=True, batches=True)
    spec = spec_for(workdir, provider, rows=ROWS)
    _set_model_options(
        spec, {"keep_provider_files": True, **({"batch_inline_max_bytes": 100} if provider == "gemini" else {})}
    )
    assert apply(workdir, spec)["status"] == "succeeded"
    assert len(fake.stats()["files"]) == 2  # the input and the results file stay


def test_a_delete_that_keeps_failing_is_reported_and_never_fails_the_run(fake, workdir, no_waiting):
    fake.reset(config=True, batches=True)
    # The two deletes run side by side: whichever call comes first gets the 404 (not tried again),
    # the other the six 500s (every try).
    fake.configure(fault_plan={"openai.files.delete": ["404"] + ["500"] * 6})
    spec = spec_for(workdir, "openai", rows=ROWS)
    outcome = apply(workdir, spec)
    assert outcome["status"] == "succeeded" and outcome["exit"] == 0
    kept = [e for e in outcome["events"] if e.get("event") == "batch_file_kept"]
    assert len(kept) == 2 and all("openai.files.delete" in e["error"] for e in kept)
    assert len(fake.stats()["files"]) == 2  # input and output (a 404, six 500s) are still there
    assert fake.stats()["endpoint_calls"]["openai.files.delete"] == 7
