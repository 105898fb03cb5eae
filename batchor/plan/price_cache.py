"""Plan stage: the price table's answers kept on disk, so planning need not load genai-prices.

Importing genai-prices executes its whole bundled table (1.6 MB of constructors): about 0.6 s of
CPU on every `plan`, `validate` and `apply SPEC`, to look up one or two models. What planning asks
the table (does it list this model; what does this model cost on this day) depends only on the
installed genai-prices and on batchor's reading of it (plan/prices.py, plan/known_models.py), so
each answer is stored in batchor's cache (`BATCHOR_CACHE_DIR`, else `~/.cache/batchor`) in a file
whose name is a hash of those files' paths, sizes and modification times: upgrading or reinstalling
either starts a new file. A cache file that cannot be read or written is simply not used.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Callable

from batchor.plan.user_cache import cache_folder, write_atomically

__all__ = ["remembered", "files_key"]

_FORMAT = "1"
_TABLE_FILES = ("__init__.py", "data.py", "data_snapshot.py", "types.py")  # genai-prices' table and its lookup
_OUR_FILES = ("prices.py", "known_models.py", "price_cache.py")  # how batchor reads it


def remembered(question: str, compute: Callable[[], Any]) -> Any:
    """The stored answer to `question`, else `compute()` (JSON data), stored for the next process."""
    path = _answers_path()
    answers = _answers(path) if path is not None else {}
    if question in answers:
        return answers[question]
    answer = compute()
    if path is not None:
        answers[question] = answer
        _write(path, {**_read(path), question: answer})
    return answer


def files_key(paths: list[Path]) -> str | None:
    """A hash of the files' paths, sizes and modification times; None when one is missing."""
    parts = [_FORMAT]
    for path in paths:
        try:
            stat = path.stat()
        except OSError:
            return None
        parts.append(f"{path}\0{stat.st_size}\0{stat.st_mtime_ns}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:24]


@cache
def _answers_path() -> Path | None:
    spec = find_spec("genai_prices")  # finds the installed package without running it
    if spec is None or not spec.submodule_search_locations:
        return None
    table = Path(next(iter(spec.submodule_search_locations)))
    ours = Path(__file__).parent
    providers = ours.parent / "providers"  # the table's provider ids, and each provider's name prefix
    theirs = [providers / "__init__.py", providers / "facts.py", *sorted(providers.glob("*/facts.py"))]
    key = files_key([table / name for name in _TABLE_FILES] + [ours / name for name in _OUR_FILES] + theirs)
    return cache_folder("prices") / f"answers-{key}.json" if key else None


@cache
def _answers(path: Path) -> dict[str, Any]:
    return _read(path)


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write(path: Path, answers: dict[str, Any]) -> None:
    """Two planners at once: the last one's answers are kept (each file is whole)."""
    write_atomically(path, json.dumps(answers, sort_keys=True).encode())
