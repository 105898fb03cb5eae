"""An output schema the metaschema accepted once is not validated again; a refused one, or the
same one changed, is still refused each time with its message."""

from __future__ import annotations

import datetime as dt

import pytest

from batchor.errors import SchemaError
from batchor.schema.core import check_schema


def _schema(kind: str = "string") -> dict:
    return {
        "type": "object",
        "properties": {"label": {"type": kind}},
        "required": ["label"],
        "additionalProperties": False,
    }


def test_a_schema_changed_after_passing_is_checked_again():
    check_schema(_schema(), where="steps.a.output.schema")
    check_schema(_schema(), where="steps.a.output.schema")  # remembered
    for _ in range(2):
        with pytest.raises(SchemaError, match=r"steps\.b\.output\.schema.*not a valid JSON Schema"):
            check_schema(_schema("strang"), where="steps.b.output.schema")


def test_a_schema_that_is_not_json_data_is_checked_every_time():
    schema = {**_schema(), "examples": [dt.date(2024, 1, 1)], "minProperties": -1}
    for _ in range(2):
        with pytest.raises(SchemaError, match="not a valid JSON Schema"):
            check_schema(schema, where="steps.c.output.schema")
