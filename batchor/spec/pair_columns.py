"""The columns a `resolve:` job's step sees: one row per candidate pair (batchor/resolve/).

Known from the input's columns alone, so `validate` checks a judge's template without pairing.
"""

from __future__ import annotations

import pyarrow as pa

PAIR_KEY = "pair"  # `<a row key> ~ <b row key>`


def pair_schema(schema: pa.Schema) -> pa.Schema:
    """`pair`, `a_key`, `b_key`, then `a_<column>` and `b_<column>` for each input column."""
    fields = [pa.field(PAIR_KEY, pa.string()), pa.field("a_key", pa.string()), pa.field("b_key", pa.string())]
    for side in ("a", "b"):
        fields += [pa.field(f"{side}_{f.name}", f.type) for f in schema if not f.name.startswith("_")]
    return pa.schema(fields)
