"""A results table (RESULT_SCHEMA) as a store records it, from (request_key, status, error_code)."""

from __future__ import annotations

import pyarrow as pa

from batchor.state.base import RESULT_SCHEMA


def stored_results(items: list[tuple[str, str, str | None]]) -> pa.Table:
    n = len(items)
    return pa.table(
        {
            "request_key": [k for k, _, _ in items],
            "step": ["s"] * n,
            "status": [s for _, s, _ in items],
            "output": ["{}"] * n,
            "error_code": [c for _, _, c in items],
            "error": [None] * n,
            "attempts": [1] * n,
            "input_tokens": [1] * n,
            "output_tokens": [1] * n,
            "cost_usd": [0.0] * n,
            "run_id": ["r1"] * n,
        },
        schema=RESULT_SCHEMA,
    )
