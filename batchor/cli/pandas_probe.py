"""Keep pandas out of the CLI process: the CLI never uses it, yet pyarrow imports it (~0.4 s of
CPU and ~40 MB resident, on every `apply`) the first time it builds an array from a Python list,
only to ask whether that list is a pandas object.

Right after pyarrow is imported, its first such check is answered "no pandas" by refusing that one
import. pyarrow asks only once, so no later array build imports pandas; an explicit use
(`to_pandas`, `from_pandas`) still imports it normally, as pyarrow retries there. Installed by the
CLI only: a library user's process keeps pyarrow's usual behaviour.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import sys
from types import ModuleType
from typing import Any, Sequence


def install() -> None:
    """Answer pyarrow's first pandas check without importing pandas, once pyarrow loads."""
    if "pyarrow" not in sys.modules and "pandas" not in sys.modules:
        sys.meta_path.insert(0, _WhenPyarrowLoads())


class _WhenPyarrowLoads(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if name != "pyarrow":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        load = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            load(module)
            _check_without_pandas(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


class _RefusePandas(importlib.abc.MetaPathFinder):
    def find_spec(self, name: str, path: Sequence[str] | None, target: ModuleType | None = None) -> Any:
        if name == "pandas":
            raise ImportError("pandas is not used by the batchor CLI")
        return None


def _check_without_pandas(pyarrow: ModuleType) -> None:
    if "pandas" in sys.modules:
        return
    refuse = _RefusePandas()
    sys.meta_path.insert(0, refuse)
    try:
        pyarrow.array([])  # pyarrow's one check for pandas objects
    finally:
        sys.meta_path.remove(refuse)
