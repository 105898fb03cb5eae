"""Modules loaded on first use, so `batchor --help` and `import batchor` stay fast: the engine,
the state (DuckDB, pyarrow) and the provider SDKs are imported only by the commands that use them."""

from __future__ import annotations

import importlib
from typing import Any


class Deferred:
    """Stands for the module `name`, imported by a plain import when an attribute is first read
    (nothing is put in sys.modules early, so import order and cycles stay as they were)."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)

    def __repr__(self) -> str:
        return f"<deferred module {self._name}>"
