"""`batchor apply` on a real pseudo-terminal: the budget approves without a question, and
without one the terminal asks (and "n" sends nothing)."""

from __future__ import annotations

import signal

import pytest
from cli_helpers import Terminal
from conftest import make_spec


@pytest.mark.slow  # a real process on a pseudo-terminal; the one below stays in the default tier
def test_max_cost_approves_on_a_terminal_without_asking(workdir, fake):
    spec = make_spec(workdir, rows=3)
    terminal = Terminal(workdir, "apply", spec, "--max-cost", "5")
    code = terminal.finish()
    assert code == 0, terminal.screen
    assert "Run this plan?" not in terminal.screen
    assert "succeeded: 3 rows: 3 requests" in terminal.screen
    assert fake.stats()["requests"] == 3


def test_without_budget_or_yes_a_terminal_asks_and_no_sends_nothing(workdir, fake):
    spec = make_spec(workdir, rows=3)
    terminal = Terminal(workdir, "apply", spec)
    assert "Run this plan? [y/N]" in terminal.read_until("Run this plan?")
    terminal.type("n\n")
    code = terminal.finish()
    assert code == 6, terminal.screen
    assert "not approved; nothing was sent" in terminal.screen
    assert fake.stats()["requests"] == 0


@pytest.mark.slow  # a real process on a pseudo-terminal
@pytest.mark.skipif(
    signal.getsignal(signal.SIGINT) == signal.SIG_IGN,
    reason="this test run was started in the background (Ctrl+C ignored): its pseudo-terminal "
    "children did not get a shell's Ctrl+C reliably",
)
def test_ctrl_c_at_the_question_says_interrupted_and_sends_nothing(workdir, fake):
    """Ctrl+C inside click's own code (its prompt) reaches us as click's Abort: the same word and
    exit code as a Ctrl+C anywhere else, not a silent exit."""
    spec = make_spec(workdir, rows=3)
    terminal = Terminal(workdir, "apply", spec)
    terminal.read_until("Run this plan?")
    terminal.type("\x03")
    code = terminal.finish()
    assert code == 130, terminal.screen
    assert "interrupted" in terminal.screen.split("Run this plan?")[-1]
    assert fake.stats()["requests"] == 0
