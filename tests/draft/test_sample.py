"""What the drafter is shown of the data: columns, types, a few rows cut short, and which id-like
column can be the key (checked over the whole file)."""

from __future__ import annotations

import pytest
from conftest import write_csv

from batchor.draft.sample import LONGEST_VALUE, read_sample
from batchor.errors import InputEmptyError


def test_columns_rows_and_keys(tmp_path):
    rows = [{"ticket_id": f"t{i}", "user_id": f"u{i % 2}", "body": "x" * (LONGEST_VALUE + 50)} for i in range(6)]
    sample = read_sample(write_csv(tmp_path / "t.csv", rows), 2)
    assert [str(c) for c in sample.columns] == [
        "ticket_id: text (unique: can be the key)",
        "user_id: text",
        "body: text",
    ]
    assert sample.rows_total == 6 and len(sample.rows) == 2
    assert sample.rows[0]["body"].endswith("...") and len(sample.rows[0]["body"]) == LONGEST_VALUE + 3
    assert read_sample(tmp_path / "t.csv", 0).rows == []


def test_an_empty_file_is_refused(tmp_path):
    (tmp_path / "e.csv").write_text("id,text\n")
    with pytest.raises(InputEmptyError):
        read_sample(tmp_path / "e.csv", 3)
