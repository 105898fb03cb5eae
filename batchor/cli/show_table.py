"""`batchor show`'s step table (rich): one line per step with its model, counts, tokens and cost,
money as money and `-` where there is nothing, above the per-step details. `--json` skips it."""

from __future__ import annotations

from typing import Any

from rich import box
from rich.markup import escape
from rich.table import Table

from batchor.humanize import NOTHING, count, money

# skipped, changed and projected rows are in each step's `counts` line below the table (so it fits
# 100 columns; narrower, the model's name is cut first)
_RIGHT = ("rows", "to run", "cached", "in", "out", "expected", "at most")


def steps_table(view: dict[str, Any]) -> Table:
    """The plan's steps, in run order, and the totals under them."""
    table = Table(
        title=f"steps: {len(view['steps'])} (tokens in and out expected)",
        title_justify="left",
        box=box.SIMPLE_HEAD,
        show_footer=True,
        pad_edge=False,
        collapse_padding=True,
    )
    for name in ("step", "model", "mode", *_RIGHT):
        table.add_column(
            name,
            justify="right" if name in _RIGHT else "left",
            no_wrap=name != "model",
            overflow="ellipsis",
            min_width=len(name),
        )
    for step in view["steps"]:
        table.add_row(*_cells(step))
    t = view["totals"]
    approx = "" if all(s.get("token_count_exact", True) for s in view["steps"]) else "~"
    footer = [
        "total",
        "",
        "",
        count(view["input"]["rows"]),
        count(t["to_run"]),
        count(t["cached"]),
        approx + count(t["input_tokens"]),
        "~" + count(t["output_tokens_expected"]),
        money(t["cost_expected"]),
        money(t["cost_upper"]),
    ]
    for column, text in zip(table.columns, footer, strict=True):
        column.footer = text
    return table


def _cells(step: dict[str, Any]) -> list[str]:
    c = step["counts"]
    if step["kind"] == "sql":
        shape = "fan-out" if step["fan_out"] else NOTHING
        return [
            escape(step["name"]),
            "SQL",
            shape,
            count(c["rows"]),
            NOTHING,
            NOTHING,
            NOTHING,
            NOTHING,
            NOTHING,
            NOTHING,
        ]
    approx = "" if step["token_count_exact"] else "~"
    priced = step["price"] is not None
    return [
        escape(step["name"]),
        escape(f"{step['provider']}:{step['model']}"),
        step["mode"] or NOTHING,
        count(c["rows"]),
        count(c["to_run"]),
        count(c["cached"]),
        approx + count(c["input_tokens"]),
        "~" + count(c["output_tokens_expected"]),
        money(c["cost_expected"]) if priced else "no price",
        money(c["cost_upper"]) if priced else NOTHING,
    ]
