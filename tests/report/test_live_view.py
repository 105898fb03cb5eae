"""The live view: driven by the engine's events, one line per step with a stable total from the
plan, batches with their provider state, notices; the last frame stays as the summary. On a
terminal in the CLI, and in the Python API unless `progress=False`."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

import batchor
from batchor.engine.events import Event
from batchor.report.live import LiveView
from tests.cli.cli_helpers import Terminal
from tests.conftest import make_spec


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def _view(plan=None, max_cost=None):
    screen = io.StringIO()
    clock = Clock()
    view = LiveView(plan, max_cost, console=Console(file=screen, width=140, force_terminal=False), clock=clock)
    return view, screen, clock


def _text(view) -> str:
    screen = io.StringIO()
    Console(file=screen, width=140).print(view.render())
    return screen.getvalue()


def test_steps_batches_and_notices_come_from_events():
    view, _, clock = _view(max_cost=2.0)
    view(Event("step_started", {"step": "classify", "pending": 400}))
    clock.now += 10
    view(
        Event(
            "progress",
            {
                "cost_usd": 0.5,
                "in_flight": 3,
                "rate_limited": 2,
                "steps": {"classify": {"done": 100, "failed": 4, "cost_usd": 0.5}},
            },
        )
    )
    view(
        Event("batch_submitted", {"step": "classify", "batch_id": "b-1", "remote_id": "r", "requests": 300, "chunk": 1})
    )
    clock.now += 30
    view(
        Event("batch_polled", {"step": "classify", "batch_id": "b-1", "remote_status": "in_progress", "requests": 300})
    )
    view(Event("batch_waiting", {"live": 1, "next_poll_s": 20}))
    view(Event("provider_call_retry", {"endpoint": "poll", "attempt": 2}))
    text = _text(view)
    assert "classify" in text and "100 / 400" in text and "$0.5000" in text
    assert "2.5/s" in text and "2m 00s" in text  # 100 rows in 40 s; 300 left
    assert "b-1" in text and "in_progress" in text and "30s" in text
    assert "spend $0.5000 of budget $2.00" in text and "next poll in 20s" in text
    assert "paused by rate limits 2 time(s)" in text and "provider call retry: endpoint poll" in text
    view.close()


def test_the_total_comes_from_the_plan_and_the_summary_stays(workdir):
    spec = make_spec(workdir, rows=5, provider="mock")
    plan = batchor.plan(spec)
    view, screen, _ = _view(plan)
    assert "0 / 5" in _text(view)  # before any event: the plan's count, not a growing one
    result = batchor.apply(plan, on_event=view, progress=False)
    assert result.status == "succeeded"
    assert "run finished: succeeded" in screen.getvalue() and "5 / 5" in screen.getvalue()


def test_api_progress_stays_quiet_off_a_terminal(workdir, capsys):
    spec = make_spec(workdir, rows=3, provider="mock")
    batchor.apply(spec, max_cost=1)  # progress=True by default, but stderr is not a terminal here
    assert capsys.readouterr().err == ""


@pytest.mark.slow  # a real pseudo-terminal and a subprocess
def test_cli_live_view_on_a_terminal(workdir, fake):
    spec = make_spec(workdir, rows=6)
    terminal = Terminal(workdir, "apply", spec, "--max-cost", "1")
    assert terminal.finish() == 0, terminal.screen
    assert "run finished: succeeded" in terminal.screen
    assert "6 / 6" in terminal.screen and "of budget $1.00" in terminal.screen
