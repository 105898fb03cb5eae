"""Both backends provide every method of the `StateStore` protocol, with the same parameters."""

from __future__ import annotations

import inspect

import pytest

from batchor.state import DuckDBStore, PostgresStore
from batchor.state.base import StateStore

METHODS = [name for name, value in vars(StateStore).items() if callable(value) and not name.startswith("_")]


@pytest.mark.parametrize("backend", [DuckDBStore, PostgresStore])
@pytest.mark.parametrize("name", METHODS)
def test_backend_provides_the_method(backend, name):
    wanted = inspect.signature(getattr(StateStore, name))
    method = getattr(backend, name, None)
    assert method is not None, f"{backend.__name__} lacks {name}"
    assert list(inspect.signature(method).parameters) == list(wanted.parameters), name


def test_the_protocol_names_the_contract():
    assert {"record_results", "cached_key_array", "job_results", "execute", "connection"} <= set(METHODS)
