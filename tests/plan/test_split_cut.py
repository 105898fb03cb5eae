"""Split steps: how a text is cut (tokens, delimiter, overlap) and the neighbours each chunk carries."""

from __future__ import annotations

import pytest

from batchor.plan.model import SplitPlan
from batchor.plan.split import cut, elements
from batchor.plan.tokens import get_counter
from batchor.plan.vocab import load_encoding

COUNTER = get_counter("openai", "gpt-4.1-mini")
O200K = load_encoding("o200k_base")


def _settings(**changes) -> SplitPlan:
    return SplitPlan(**{"chunk_tokens": 20, "tokenizer": ("openai", "gpt-4.1-mini"), **changes})


def test_token_windows_fit_and_overlap_and_cover_the_text():
    text = " ".join(f"word{i}" for i in range(200))
    chunks = cut(text, _settings(chunk_tokens=30, overlap_tokens=5), COUNTER)
    assert len(chunks) > 3 and all(COUNTER.count(c) <= 30 for c in chunks)
    tokens = [O200K.encode_ordinary(c) for c in chunks]
    assert all(a[-5:] == b[:5] for a, b in zip(tokens, tokens[1:]))  # each repeats the end of the one before
    assert "".join(O200K.decode(t[5:] if i else t) for i, t in enumerate(tokens)) == text


def test_delimiter_packs_whole_pieces_and_cuts_only_an_oversized_one():
    pieces = [f"paragraph {i} " + "short words here " * 2 for i in range(6)]
    long_piece = "x " * 200
    text = "\n\n".join([*pieces, long_piece])
    chunks = cut(text, _settings(chunk_tokens=25, delimiter="\n\n"), COUNTER)
    packed = [c for c in chunks if c.startswith("paragraph")]
    assert "\n\n".join(packed) == "\n\n".join(pieces)  # whole pieces, in order, none cut
    assert all(COUNTER.count(c) <= 25 for c in chunks)
    assert len(chunks) > len(packed)  # the long piece became several chunks


def test_delimiter_overlap_carries_the_last_whole_pieces():
    text = "\n\n".join(f"p{i} alpha beta gamma" for i in range(8))
    chunks = cut(text, _settings(chunk_tokens=20, overlap_tokens=6, delimiter="\n\n"), COUNTER)
    for before, chunk in zip(chunks, chunks[1:]):
        assert chunk.split("\n\n")[0] == before.split("\n\n")[-1]


@pytest.mark.parametrize("text", ["", "   \n\n  "])
def test_an_empty_text_has_no_chunks(text):
    assert cut(text, _settings(), COUNTER) == []


def test_gather_gives_each_chunk_its_neighbours():
    found = elements(["a", "b", "c", "d"], _settings(before=2, after=1))
    assert [(e["n"], e["of"], e["before"], e["after"]) for e in found] == [
        (1, 4, [], ["b"]),
        (2, 4, ["a"], ["c"]),
        (3, 4, ["a", "b"], ["d"]),
        (4, 4, ["b", "c"], []),
    ]
