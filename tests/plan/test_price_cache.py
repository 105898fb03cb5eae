"""Price-table answers kept on disk (plan/price_cache.py): a later plan gets the same prices and
model checks without loading genai-prices, and a damaged or stale cache is never used."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime

import pytest

from batchor.errors import UnknownModelError
from batchor.plan import known_models, price_cache, prices

_LOOKUP = """
import json, sys
from batchor.plan.known_models import check_model, table_knows
from batchor.plan.prices import lookup_price
check_model("openai", "gpt-4o-mini", custom=False, priced=False, where="spec.yaml:3")
price = lookup_price("openai", "gpt-4o-mini")
print(json.dumps({"price": price.to_dict(), "known": table_knows("openai", "not-a-model"),
                  "table_loaded": "genai_prices" in sys.modules}))
"""


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """An empty cache folder, and no answer remembered in this process."""
    monkeypatch.setenv("BATCHOR_CACHE_DIR", str(tmp_path / "cache"))
    clear = (
        price_cache._answers_path.cache_clear,
        price_cache._answers.cache_clear,
        prices._table_price.cache_clear,
        known_models._matched_id.cache_clear,
    )
    for each in clear:
        each()
    yield tmp_path / "cache"
    for each in clear:
        each()


def _lookup_in_new_process(cache) -> dict:
    env = {**os.environ, "BATCHOR_CACHE_DIR": str(cache)}
    out = subprocess.run([sys.executable, "-c", _LOOKUP], env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def test_second_process_gets_the_same_answers_without_the_table(fresh):
    first = _lookup_in_new_process(fresh)
    second = _lookup_in_new_process(fresh)
    assert first["table_loaded"] and not second["table_loaded"]
    assert second["price"] == first["price"] and second["known"] is first["known"] is False
    assert second["price"]["source"].startswith("genai-prices ")


def test_cached_price_equals_the_tables(fresh):
    day = datetime(2025, 1, 1, tzinfo=UTC)
    computed = prices.lookup_price("openai", "o3", at=day)
    prices._table_price.cache_clear()
    price_cache._answers.cache_clear()
    again = prices.lookup_price("openai", "o3", at=day)
    assert again == computed and again.notes == computed.notes  # notes: a tuple again, not a list
    stored = json.loads(next(fresh.glob("prices/answers-*.json")).read_text())
    assert stored["price|openai|o3|2025-01-01"]["input_per_mtok"] == 10.0
    assert prices.lookup_price("openai", "o3", at=datetime(2025, 7, 1)).input_per_mtok == 2.0  # its own day


def test_unknown_models_are_remembered_as_unknown(fresh):
    with pytest.raises(UnknownModelError, match="did you mean"):
        known_models.check_model("openai", "gpt-4o-minii", custom=False, priced=False, where="x")
    known_models._matched_id.cache_clear()
    price_cache._answers.cache_clear()
    assert not known_models.table_knows("openai", "gpt-4o-minii")
    assert prices.lookup_price("openai", "gpt-4o-minii") is None


def test_a_damaged_cache_file_is_not_used(fresh):
    expected = prices.lookup_price("openai", "gpt-4o-mini")
    path = next(fresh.glob("prices/answers-*.json"))
    path.write_text('{"price|openai|gpt-4o-mini|', encoding="utf-8")
    prices._table_price.cache_clear()
    price_cache._answers.cache_clear()
    assert prices.lookup_price("openai", "gpt-4o-mini") == expected
    assert json.loads(path.read_text())  # rewritten whole


def test_an_unwritable_cache_is_simply_not_kept(fresh):
    fresh.parent.joinpath("cache").write_text("a file where the folder should be")
    assert prices.lookup_price("openai", "gpt-4o-mini").input_per_mtok > 0


def test_key_changes_with_the_files(tmp_path):
    table = tmp_path / "data.py"
    table.write_text("providers = []")
    before = price_cache.files_key([table])
    assert price_cache.files_key([table]) == before
    table.write_text("providers = [1]")  # a new genai-prices: another size (and time)
    assert price_cache.files_key([table]) != before
    assert price_cache.files_key([tmp_path / "gone.py"]) is None
