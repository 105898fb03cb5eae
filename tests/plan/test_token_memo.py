"""Token counts are remembered across processes: planning the same texts again does not build the
tokenizer (about 0.3 s of CPU per process), the counts stay tiktoken's, and a damaged memo only
costs a recount, never a wrong count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from conftest import make_spec

from batchor.plan import token_memo, vocab

ROOT = Path(__file__).resolve().parents[2]

PLAN_IN_A_NEW_PROCESS = """
import json, sys
from batchor import api
plan = api.plan(sys.argv[1], save=False)
step = plan.header.steps[0]
print(json.dumps({"built": "tiktoken" in sys.modules, "tokens": plan.header.totals.input_tokens,
                  "exact": step.token_count_exact}))
"""


def plan_in_a_new_process(spec, cache) -> dict:
    path = os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))  # this checkout's batchor
    env = {**os.environ, "BATCHOR_CACHE_DIR": str(cache), "PYTHONPATH": path}
    done = subprocess.run(
        [sys.executable, "-c", PLAN_IN_A_NEW_PROCESS, str(spec)], capture_output=True, text=True, env=env, check=True
    )
    return json.loads(done.stdout.splitlines()[-1])


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
