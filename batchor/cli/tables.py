"""Human tables for `status`, `runs` and `prices` (rich): money as money, times as durations, no
`None`. `--json` bypasses all of this and prints the data unchanged.

On a terminal rich fits the width and colours; into a pipe or a file it prints plain text, wide
enough that ids and paths are never cut.
"""

from __future__ import annotations

import shutil
import sys
from typing import Any

from rich import box
from rich.console import Console
from rich.markup import escape as markup_escape
from rich.table import Table

from batchor.cli.colour import terminal_safe
from batchor.cli.estimate_lines import estimate_table, run_ratio
from batchor.humanize import (
    NOTHING,
    ago,
    cache_fees,
    cache_saving,
    cell,
    count,
    duration,
    elapsed,
    models_worth_showing,
    moment,
    money,
    per_mtok,
    short_moment,
)

PIPE_WIDTH = 200


def escape(text: str) -> str:
    """A value for a table cell: rich markup escaped, control characters made visible."""
    return markup_escape(terminal_safe(text))


STATUS_STYLE = {
    "succeeded": "green",
    "partial": "yellow",
    "failed": "red",
    "died": "red",
    "budget": "yellow",
    "paused": "yellow",
    "interrupted": "yellow",
    "in_flight": "cyan",
    "running": "cyan",
}
# `status` keys shown in their own lines below; any other key (added later) is listed as it is.
_STATUS_SHOWN = {
    "run_id",
    "job_id",
    "plan_id",
    "name",
    "status",
    "mocked",
    "requests",
    "succeeded",
    "failed",
    "cached",
    "skipped",
    "input_tokens",
    "output_tokens",
    "cost_usd",
    "paused_reason",
    "output_path",
    "plan_path",
    "started_at",
    "finished_at",
    "failures_by_reason",
    "spend",
    "failed_rows_cost",
    "batches",
    "workers",
    "steps",
    "models",
    "rows",
}


def console() -> Console:
    """stdout as rich sees it: the terminal's width, or a wide plain page into a pipe."""
    if sys.stdout.isatty():
        return Console(highlight=False)
    width = max(shutil.get_terminal_size((PIPE_WIDTH, 24)).columns, PIPE_WIDTH)
    return Console(width=width, no_color=True, highlight=False, soft_wrap=False)


def styled_status(status: str | None) -> str:
    text = status or NOTHING
    style = STATUS_STYLE.get(text)
    return f"[{style}]{text}[/{style}]" if style else text


def _grid() -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold", no_wrap=True)
    grid.add_column(overflow="fold")
    return grid


def status_view(data: dict[str, Any]) -> list[Any]:
    """`batchor status` as renderables: a summary grid, then failures, batches and workers tables."""
    spend = data.get("spend") or {}
    grid = _grid()
    grid.add_row(
        "run",
        f"{data['run_id']}  {data.get('name') or ''}  {styled_status(data.get('status'))}"
        + ("  (mock)" if data.get("mocked") else ""),
    )
    grid.add_row("rows", _rows_line(data))
    grid.add_row("requests", _requests_line(data))
    grid.add_row("tokens", _tokens_line(data, spend))
    grid.add_row("spend", _spend_line(data, spend))
    grid.add_row("time", _time_line(data))
    if data.get("paused_reason"):
        grid.add_row("reason", escape(str(data["paused_reason"])))
    for key in ("output_path", "plan_path"):
        grid.add_row(key.split("_")[0], escape(cell(data.get(key))))
    for key, value in data.items():
        if key not in _STATUS_SHOWN:
            grid.add_row(key.replace("_", " "), escape(cell(value)))
    parts: list[Any] = [grid]
    if data.get("failures_by_reason") is None:
        grid.add_row("failures", "by reason: not kept for this run (see rows); later runs have changed its job since")
    failures = failures_table(data.get("failures_by_reason") or {}, data.get("failed_rows_cost") or {})
    if failures is not None:
        parts.append(failures)
    estimate = estimate_table(data.get("steps") or [])
    if estimate is not None:
        parts.append(estimate)
    models = models_table(data.get("models") or [])
    if models is not None:
        parts.append(models)
    if data.get("batches"):
        parts.append(batches_table(data["batches"]))
    if data.get("workers"):
        parts.append(workers_table(data["workers"]))
    return parts


def _rows_line(data: dict[str, Any]) -> str:
    """The output's rows by `_status` when the run ended: the unit of the output file and of the
    failures table below."""
    rows = data.get("rows")
    if rows is None:
        return (
            "counted when the run ends"
            if data.get("status") in ("running", "in_flight")
            else "not kept for this run: it did not reach its end (killed, or stopped by an error) or was "
            "recorded by an older batchor"
        )
    return (
        f"{count(rows['succeeded'])} succeeded, {count(rows['failed'])} failed, {count(rows['pending'])} "
        f"pending, {count(rows['skipped'])} skipped, of {count(sum(rows.values()))} output rows when it ended"
    )


def _requests_line(data: dict[str, Any]) -> str:
    """The model requests this run sent (a request may serve several rows; SQL steps send none)."""
    return (
        f"{count(data.get('succeeded'))} answered, {count(data.get('failed'))} failed, of "
        f"{count(data.get('requests'))} to send; {count(data.get('cached'))} rows' answers were cached"
    )  # per step


def _tokens_line(data: dict[str, Any], spend: dict[str, Any]) -> str:
    approx = "~" if spend.get("estimated_usd") else ""
    return f"{approx}{count(data.get('input_tokens'))} in, {approx}{count(data.get('output_tokens'))} out"


def _spend_line(data: dict[str, Any], spend: dict[str, Any]) -> str:
    if not spend:
        return money(data.get("cost_usd"))
    total = spend.get("total_usd") or data.get("cost_usd") or 0.0
    line = (
        f"{money(total, estimated=bool(spend.get('estimated_usd')))}: {money(spend.get('accepted_usd'))} "
        f"accepted, {money(spend.get('wasted_usd'))} wasted on {count(spend.get('attempts_rejected'))} "
        f"rejected attempt(s) ({count(spend.get('attempts_billed'))} billed)"
    )
    if spend.get("estimated_usd"):
        line += f"; {money(spend['estimated_usd'])} estimated (no usage from the provider)"
    return line + cache_fees(spend) + cache_saving(spend.get("cache_saved_usd"), "; ")


def _time_line(data: dict[str, Any]) -> str:
    started, finished = data.get("started_at"), data.get("finished_at")
    if finished:
        return f"started {moment(started)}, took {duration(elapsed(started, finished))}, ended {ago(finished)}"
    return f"started {moment(started)} ({ago(started)}), not finished"


def failures_table(by_reason: dict[str, int], costs: dict[str, dict[str, Any]]) -> Table | None:
    if not by_reason:
        return None
    table = Table(title="failed rows by reason", title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("reason", no_wrap=True)
    table.add_column("rows", justify="right")
    table.add_column("cost", justify="right")
    for reason, rows in by_reason.items():
        table.add_row(escape(reason), count(rows), money((costs.get(reason) or {}).get("cost_usd")))
    return table


def models_table(models: list[dict[str, Any]]) -> Table | None:
    """Calls and spend per model of each step; shown when a step was answered by more than one
    model (a fallback or an escalation), where the run's spend alone hides whose it was."""
    models = models_worth_showing(models)
    if not models:
        return None
    table = Table(title="by model", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("step", "model", "answered", "failed", "cost"):
        table.add_column(name, justify="right" if name in ("answered", "failed", "cost") else "left", no_wrap=True)
    for entry in models:
        table.add_row(
            escape(str(entry["step"])),
            escape(str(entry["model"] or "(not recorded)")),
            count(entry["answered"]),
            count(entry["failed"]),
            money(entry["cost_usd"]),
        )
    return table


def batches_table(batches: list[dict[str, Any]]) -> Table:
    """One row per provider batch (`status`, `cancel`)."""
    table = Table(title=f"batches: {len(batches)}", title_justify="left", box=box.SIMPLE_HEAD)
    for name in (
        "batch",
        "step",
        "provider",
        "state",
        "remote",
        "rows",
        "ok",
        "failed",
        "requeued",
        "created",
        "remote id",
    ):
        table.add_column(
            name,
            justify="right" if name in ("rows", "ok", "failed", "requeued") else "left",
            no_wrap=name in ("batch", "remote id"),
        )
    for b in batches:
        table.add_row(
            b["batch_id"],
            f"{b['step']}#{b['chunk']}",
            b["provider"],
            b["state"],
            b.get("remote_status") or NOTHING,
            count(b.get("requests")),
            count(b.get("succeeded") or 0),
            count(b.get("failed") or 0),
            count(b.get("requeued") or 0),
            ago(b.get("created_at")),
            b.get("remote_id") or NOTHING,
        )
        if b.get("error"):
            table.add_row("", f"[red]error: {escape(str(b['error']))}[/red]", *[""] * 9)
    return table


def workers_table(workers: list[dict[str, Any]]) -> Table:
    table = Table(title=f"workers: {len(workers)}", title_justify="left", box=box.SIMPLE_HEAD)
    for name in ("worker", "status", "pid", "heartbeat", "leases", "ok", "failed", "rate"):
        table.add_column(name, justify="left" if name in ("worker", "status") else "right", no_wrap=name == "worker")
    for w in workers:
        table.add_row(
            w["worker_id"],
            w["status"],
            str(w["pid"]),
            duration(w.get("heartbeat_age_s")) + " ago",
            count(w.get("leases")),
            count(w.get("succeeded")),
            count(w.get("failed")),
            NOTHING if w.get("per_s") is None else f"{w['per_s']}/s",
        )
    return table


def runs_table(rows: list[dict[str, Any]]) -> Table:
    """`batchor runs`: newest first, one line per run, fitting an 80-column terminal. `ok` and
    `failed` count the output's rows when the run ended; a run that never reached its end (killed,
    running) shows the requests it answered and failed instead, in parentheses: another unit, said
    in the caption, but what a user asks of a dead run is what it did before it died."""
    from batchor.operations import OUTPUT_NOT_WRITTEN

    unwritten = [r["run_id"] for r in rows if OUTPUT_NOT_WRITTEN in (r.get("paused_reason") or "")]
    notes = ["*: its output file was not written (`batchor status RUN` says why and how)"] if unwritten else []
    table = Table(
        box=box.SIMPLE_HEAD,
        padding=(0, 0),
        pad_edge=False,
        caption_justify="left",
        caption="\n".join(["ok, failed: output rows at the end ((n): requests, if it never ended)", *notes]),
    )
    for name in ("run", "name", "status", "ok", "failed", "cost", "vs plan", "started", "took"):
        table.add_column(
            name,
            justify="right" if name in ("ok", "failed", "cost", "vs plan", "took") else "left",
            no_wrap=name in ("run", "status", "started"),
            min_width=len(name),
        )
    for r in rows:
        spend = r.get("spend") or {}
        total = spend.get("total_usd") or r.get("cost_usd") or 0.0  # runs before the ledger: their own figure
        cost = money(total, estimated=bool(spend.get("estimated_usd")))
        if spend.get("wasted_usd"):
            cost += f" ({money(spend['wasted_usd'])} wasted)"
        cost += cache_saving(spend.get("cache_saved_usd"), ", ")
        took = elapsed(r.get("started_at"), r.get("finished_at"))
        ok, failed = _ok_failed(r)
        shown = styled_status(r.get("status")) + ("*" if r["run_id"] in unwritten else "")
        table.add_row(
            r["run_id"],
            r.get("name") or NOTHING,
            shown,
            ok,
            failed,
            cost,
            run_ratio(r.get("steps") or []),
            short_moment(r.get("started_at")),
            duration(took) if took is not None else _unfinished(r.get("status")),
        )
    return table


def _ok_failed(run: dict[str, Any]) -> tuple[str, str]:
    """A run's `ok` and `failed` cells: rows when it ended, else its requests in parentheses."""
    ended = run.get("rows")
    if ended:
        return count(ended.get("succeeded")), count(ended.get("failed"))
    return f"({count(run.get('succeeded'))})", f"({count(run.get('failed'))})"


def no_runs_yet(state: str | None) -> str:
    """What `runs` prints when there is none: where it looked (and why there) when there is no
    state at all, and how to reach one (a state found below this folder, `--state`)."""
    from batchor import operations

    return operations.no_runs_note(state)


def _unfinished(status: str | None) -> str:
    return {"running": "running", "in_flight": "in flight"}.get(status or "", NOTHING)


def prices_view(data: dict[str, Any]) -> list[Any]:
    """`batchor prices`: the table's version and dates, then one line per model found."""
    info = _grid()
    for key, value in data["table"].items():
        if not isinstance(value, (list, dict)):
            info.add_row(key.replace("_", " "), escape(cell(value)))
    if not data["models"]:
        return [info]
    table = Table(box=box.SIMPLE_HEAD, caption="$ per million tokens", caption_justify="left")
    for name in ("provider", "model", "input", "output", "batch input", "batch output", "as of"):
        table.add_column(
            name, justify="left" if name in ("provider", "model", "as of") else "right", no_wrap=name == "model"
        )
    for p in data["models"]:
        prices = [per_mtok(p.get(f"{kind}_per_mtok")) for kind in ("input", "output", "batch_input", "batch_output")]
        table.add_row(p["provider"], escape(p["model"]), *prices, cell(p.get("as_of")))
    return [info, table]


def show(parts: list[Any] | Any) -> None:
    """Print renderables to stdout, a blank line between them, without rich's trailing padding."""
    out = console()
    items = parts if isinstance(parts, list) else [parts]
    with out.capture() as captured:
        for index, part in enumerate(items):
            if index:
                out.print()
            out.print(part)
    text = "\n".join(line.rstrip() for line in captured.get().splitlines())
    sys.stdout.write(text.strip("\n") + "\n")
