"""The `batchor` command line: parse, call `batchor.api`, print. One handler maps errors to exit codes."""

from __future__ import annotations

import functools
import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Optional

import typer

try:  # newer Typer vendors Click; its exceptions are not the `click` package's
    from typer._click import exceptions as click_exc
except ImportError:  # pragma: no cover - Typer with an external Click
    from click import exceptions as click_exc  # type: ignore[no-redef]

from batchor import arrow_pool
from batchor.cli import (
    ask,
    basics,
    compare_cmd,
    costdiff_cmd,
    housekeeping,
    pandas_probe,
    pilot_cmd,
    review_cmd,
    runs_cmd,
)
from batchor.cli import quality as quality_cli
from batchor.cli.basics import print_json
from batchor.cli.colour import coloured, terminal_safe
from batchor.cli.ctrl_c import CtrlC, cancelled
from batchor.cli.draft_cmd import draft as draft_command
from batchor.cli.options import (
    ApplyMaxCostOpt,
    FormatOpt,
    JsonOpt,
    LimitOpt,
    MockOpt,
    Mode,
    ModelOpt,
    ModeOpt,
    PlanFormat,
    PlanMaxCostOpt,
    SampleOpt,
    StateOpt,
    choice_value,
)
from batchor.cli.report_cmd import report as report_command
from batchor.cli.results import results as results_command
from batchor.cli.resume import budget_continue, continue_command
from batchor.cli.show import show as show_command
from batchor.errors import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_PENDING,
    EXIT_USAGE,
    ApprovalRequiredError,
    BatchorError,
    exit_code_for_status,
)
from batchor.lazy import Deferred

if TYPE_CHECKING:
    from batchor import api
    from batchor.cli import render, tables
else:  # the engine, the plan model and rich load with the first command that needs them
    api = Deferred("batchor.api")
    render, tables = Deferred("batchor.cli.render"), Deferred("batchor.cli.tables")

app = typer.Typer(
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Run LLM prompts over every row of a dataset, declaratively.",
)
app.callback()(basics.common_options)  # --version, -v/--verbose, -q/--quiet, logging; completion: typer's


@app.command()
def validate(
    specs: list[Path] = typer.Argument(..., help="Spec files"),
    as_json: bool = JsonOpt,
    model: Optional[str] = ModelOpt,
    mock: bool = MockOpt,
) -> None:
    """Check specs offline: YAML, keys, templates, input columns, schemas, prices. Reports every problem
    in every file, then exits non-zero if there was one."""
    from batchor.cli.validate_cmd import validate_all

    raise typer.Exit(validate_all(specs, as_json=as_json, model=model, mock=mock))


RETRY_FAILED_HELP = "Send again the requests that failed for good earlier (invalid request, refusal, context too long)"


@app.command()
def plan(
    spec: Path = typer.Argument(..., help="Spec file"),
    state: Optional[str] = StateOpt,
    as_json: bool = JsonOpt,
    fmt: PlanFormat = FormatOpt,
    model: Optional[str] = ModelOpt,
    mock: bool = MockOpt,
    mode: Optional[Mode] = ModeOpt,
    refresh: list[str] = typer.Option([], "--refresh", help="Force new answers for STEP (repeatable)"),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore all cached answers"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help=RETRY_FAILED_HELP),
    out: Optional[Path] = typer.Option(None, "--out", help="Where to save the plan file"),
    limit: Optional[int] = LimitOpt,
    sample: Optional[int] = SampleOpt,
    max_cost: Optional[float] = PlanMaxCostOpt,
    detailed_exitcode: bool = typer.Option(
        False, "--detailed-exitcode", help="Exit 0 when nothing would run, 2 when work is pending"
    ),
    pilot: Optional[str] = pilot_cmd.PilotOpt,
    pilot_seed: Optional[int] = pilot_cmd.PilotSeedOpt,
    pilot_target: Optional[float] = pilot_cmd.PilotTargetOpt,
    yes: bool = typer.Option(False, "--yes", "-y", help="Approve a pilot's spend without asking"),
    compare_to: Optional[str] = costdiff_cmd.CompareToOpt,
    fail_on_increase: Optional[float] = costdiff_cmd.FailOnIncreaseOpt,
) -> None:
    """Compile SPEC into a priced plan and save it (.batchor/plans/<id>.plan)."""
    pilot_cmd.check_target(pilot, pilot_target)
    costdiff_cmd.check_options(compare_to, fail_on_increase, pilot)
    if pilot is not None:  # spends: approved like apply, then the calibrated plan is printed
        pilot_cmd.pilot(
            spec,
            pilot,
            pilot_seed,
            state=state,
            model=model,
            mock=mock,
            mode=choice_value(mode),
            max_cost=max_cost,
            as_json=as_json,
            approve=lambda: _approve(yes, max_cost),
            target=pilot_target,
        )
        return
    compiled = api.plan(
        spec,
        state=state,
        model=model,
        mock=mock,
        mode=choice_value(mode),
        refresh=set(refresh),
        no_cache=no_cache,
        save=out or True,
        limit=limit,
        sample=sample,
        retry_failed=retry_failed,
    )
    fmt = PlanFormat.json if as_json else fmt
    options = {"state": state, "model": model, "mock": mock, "mode": choice_value(mode)}
    diff = costdiff_cmd.cost_diff(spec, compare_to, options)
    if fmt == PlanFormat.json:
        print_json(render.plan_dict(compiled) | ({"cost_diff": diff.to_dict()} if diff else {}))
    elif fmt == PlanFormat.markdown:
        typer.echo(render.plan_markdown(compiled))
    else:
        typer.echo(coloured(render.plan_text(compiled, max_cost), sys.stdout))
    costdiff_cmd.show(diff, fmt.value)
    if diff is not None:
        diff.gate(fail_on_increase)
    if detailed_exitcode and compiled.header.totals.to_run > 0:
        raise typer.Exit(EXIT_PENDING)


@app.command()
def apply(
    ctx: typer.Context,
    target: Path = typer.Argument(..., help="Spec file, or a saved .plan file"),
    max_cost: Optional[float] = ApplyMaxCostOpt,
    yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation"),
    state: Optional[str] = StateOpt,
    as_json: bool = JsonOpt,
    model: Optional[str] = ModelOpt,
    mock: bool = MockOpt,
    mode: Optional[Mode] = ModeOpt,
    refresh: list[str] = typer.Option([], "--refresh", help="Force new answers for STEP (repeatable)"),
    retry_failed: bool = typer.Option(False, "--retry-failed", help=RETRY_FAILED_HELP),
    no_cache: bool = typer.Option(False, "--no-cache", help="Ignore all cached answers (like plan --no-cache)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write results here instead"),
    limit: Optional[int] = LimitOpt,
    sample: Optional[int] = SampleOpt,
    force: bool = typer.Option(False, "--force", help="Let the spec's output replace a file batchor did not write"),
    trust_plan: bool = typer.Option(
        False,
        "--trust-plan",
        help="Run a saved plan another state made whose spec in the working folder would not give it the same "
        "powers (its hosts, key variables and files are listed: read them; never for a plan from a pull request)",
    ),
    no_wait: bool = typer.Option(
        False, "--no-wait", help="Submit provider batches and exit (code 7); a later apply collects them"
    ),
    pilot: Optional[str] = pilot_cmd.PilotOpt,
    pilot_seed: Optional[int] = pilot_cmd.PilotSeedOpt,
    pilot_target: Optional[float] = pilot_cmd.PilotTargetOpt,
) -> None:
    """Plan SPEC (or load a saved plan) and run it; results go to the state and the output file."""
    api.ensure_unlocked(state, target)
    pilot_cmd.check_target(pilot, pilot_target)
    from_file = api.is_plan_file(target)
    forced = set(refresh) | ({"*"} if no_cache else set())  # "*": every step, as in plan --no-cache
    if pilot is not None:  # the pilot first; then the full plan it calibrated, approved again
        api.check_arguments(limit=limit, sample=sample, pilot=pilot_cmd.pilot_rows(pilot)[0])
        piloted = pilot_cmd.pilot(
            target,
            pilot,
            pilot_seed,
            state=state,
            model=model,
            mock=mock,
            mode=choice_value(mode),
            max_cost=max_cost,
            as_json=as_json,
            approve=lambda: _approve(yes, max_cost),
            target=pilot_target,
        )
        compiled, budget = piloted.plan, pilot_cmd.remaining_budget(max_cost, piloted)
        # the rest: refused when a step got no valid answer, or above what the pilot left
        run = functools.partial(
            pilot_cmd.apply_after_pilot, piloted, max_cost=max_cost, approve=lambda _: _approve(yes, max_cost)
        )
    else:
        compiled = api.load_or_plan(
            target,
            trust_plan=trust_plan,
            state=state,
            model=model,
            mock=mock,
            mode=choice_value(mode),
            refresh=forced,
            limit=limit,
            sample=sample,
            retry_failed=retry_failed,
        )
        if not as_json and not basics.is_quiet():
            typer.echo(coloured(render.plan_text(compiled, max_cost, output), sys.stderr), err=True)
        if not from_file and compiled.header.totals.to_run > 0:
            _approve(yes, max_cost)
        budget, run = max_cost, functools.partial(api.apply_compiled, compiled, max_cost=max_cost, force=force)
    printer = render.EventPrinter(as_json, plan=compiled, max_cost=budget)
    try:
        outcome = run(
            state=state,
            refresh=forced,
            output=output,
            on_event=printer,
            wait=not no_wait,
            retry_failed=retry_failed,
            row_events=as_json,
        )
    finally:
        printer.close()
    checks = quality_cli.after_apply(compiled, outcome, state, as_json)
    _report(outcome, compiled, ctx, as_json)
    quality_cli.gate(checks)


def _approve(yes: bool, max_cost: float | None) -> None:
    """--yes or a budget approve (the budget was checked against the plan's upper bound); else
    a terminal asks, and a script is refused."""
    if yes or max_cost is not None:
        return
    if sys.stdin.isatty() and sys.stderr.isatty():
        if not ask.confirm("Run this plan?", default=False):
            raise ApprovalRequiredError("not approved; nothing was sent")
        return
    raise ApprovalRequiredError(
        "apply needs approval: not on a terminal, and neither --yes nor --max-cost given",
        hint="add --max-cost USD (the budget is the approval) or --yes",
    )


def _report(outcome: Any, compiled: Any, ctx: typer.Context, as_json: bool) -> None:
    command = continue_command(ctx)
    if not as_json and not basics.is_quiet():
        typer.echo(render.run_summary(outcome, compiled), err=True)
    if outcome.status == "in_flight":
        collect = continue_command(ctx, without={"no_wait"})
        typer.echo(f"in flight: {outcome.stop_reason}. See `batchor status`; collect with: {collect}", err=True)
    elif outcome.status == "interrupted":
        typer.echo(f"interrupted: finished work is saved. Resume with: {command}", err=True)
    elif outcome.status == "budget":  # the same command would grant nothing: the budget covers the job
        typer.echo(f"stopped: {outcome.stop_reason}. {budget_continue(outcome.stop_reason, command)}", err=True)
    elif outcome.status == "paused":
        typer.echo(f"stopped: {outcome.stop_reason}. Continue with: {command}", err=True)
    elif outcome.status in ("partial", "failed") and outcome.stop_reason and not as_json:
        typer.echo(f"stopped early: {outcome.stop_reason}", err=True)
    if outcome.status != "succeeded":  # a succeeded run goes on to its checks (quality_cli.gate)
        raise typer.Exit(exit_code_for_status(outcome.status))


runs_cmd.register(app)  # status, cancel, runs, export
compare_cmd.register(app, lambda yes, max_cost: _approve(yes, max_cost))
app.command("results")(results_command)
app.command("report")(report_command)
app.command("show")(show_command)
app.command("draft")(draft_command)


housekeeping.register(app)  # prune, prices, init
quality_cli.register(app)  # check, diff
review_cmd.register(app)  # review export, review import

housekeeping.register_state(app)  # state migrate, state check, spec-schema


def run(argv: list[str] | None = None) -> None:
    """Console entry point: runs the app and turns errors into documented exit codes."""
    try:
        arrow_pool.prefer_before_import()
        _load_dotenv()
        pandas_probe.install()
        with CtrlC() as ctrl_c:
            result = _click_command().main(args=argv, standalone_mode=False)
        code = result if isinstance(result, int) else EXIT_OK
        if code == EXIT_INTERRUPTED and ctrl_c.seen:  # Typer turned it into a bare exit 130
            typer.echo("interrupted", err=True)
    except typer.Exit as exc:
        code = exc.exit_code
    except click_exc.ClickException as exc:
        exc.show()
        code = EXIT_USAGE
    except BatchorError as exc:
        _print_error(exc, "--json" in (argv or sys.argv))
        code = exc.exit_code
    except (KeyboardInterrupt, typer.Abort, cancelled()):  # click turns a Ctrl+C in its own code into Abort
        typer.echo("interrupted", err=True)
        code = EXIT_INTERRUPTED
    except Exception as exc:  # a bug: one line, the traceback only on request (BATCHOR_DEBUG)
        if os.environ.get("BATCHOR_DEBUG"):
            raise
        typer.echo(f"error [internal]: {type(exc).__name__}: {exc}", err=True)
        typer.echo("  fix: this is a batchor bug; set BATCHOR_DEBUG=1 to see the traceback and report it", err=True)
        code = EXIT_ERROR
    sys.exit(code)


@functools.cache
def _click_command() -> Any:
    """The click command typer builds from `app`: built once per process, not on every `run`
    (typer rebuilds it on each call, ~0.1 s of CPU, a fifth of a small in-process apply)."""
    return typer.main.get_command(app)


def _print_error(exc: BatchorError, as_json: bool) -> None:
    if as_json:
        sys.stdout.write(json.dumps({"event": "error", **exc.to_dict()}) + "\n")
    typer.echo(f"error [{exc.code}]: {terminal_safe(exc.message)}", err=True)  # it may quote an answer
    if exc.hint:
        typer.echo(f"  fix: {terminal_safe(exc.hint)}", err=True)


def _load_dotenv() -> None:
    """The CLI (not the library) reads a .env from the working directory."""
    env = Path(".env")
    if env.is_file():
        from dotenv import load_dotenv

        load_dotenv(env, override=False)


def main() -> None:
    """The `batchor` script: `run`, then leave without tearing the interpreter down.

    Once a command has finished (state committed and detached, outputs closed, streams flushed
    below), the interpreter's teardown only frees memory: a last garbage collection over every
    object and the destructors of the libraries (tiktoken's vocabulary, regex automata, TLS
    contexts), about a fifth of the CPU of a small `apply`. `run` itself still raises SystemExit,
    for callers in the same process."""
    try:
        run()
    except SystemExit as exc:
        if not isinstance(exc.code, int | None):
            raise
        code = exc.code or 0
    _leave(code)


def _leave(code: int) -> None:
    import logging

    logging.shutdown()  # flushes and closes the log file handlers
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more can be said on it
            pass
    os._exit(code)


if __name__ == "__main__":
    main()
