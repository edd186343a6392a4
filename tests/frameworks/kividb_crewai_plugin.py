"""A pytest plugin that points CrewAI's own memory tests at ``KiviDBStorage``.

Loaded with ``-p kividb_crewai_plugin`` by ``tests/e2e/test_framework_suites.py`` into a pytest
run inside the crewai source distribution (``tools.framework_tests``), in the CrewAI
virtualenv. CrewAI's memory tests make their storage as ``LanceDBStorage(path=...,
vector_dim=...)``, directly or through ``Memory(storage="<path>")``; this plugin replaces that
class, before any test module imports it, with a factory that makes a ``KiviDBStorage`` on a
new store of the stack (``KIVIDB_API_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE``) whose
``dimensions`` are the test's ``vector_dim`` (1,536, the size of the tests' mock embedder, when
none is given), and registers the same factory through CrewAI's own seam,
``set_memory_storage_factory``. The tests themselves run unchanged; the stores are deleted at
the end of the run.
"""

from __future__ import annotations

import os
import uuid
from typing import Any

import crewai.memory.storage.factory as storage_factory
import crewai.memory.storage.lancedb_storage as lancedb_storage
import pytest

from kividb_memory import MemoryClient
from kividb_memory.integrations.crewai import KiviDBStorage

DEFAULT_DIMENSIONS = 1536
_client: MemoryClient | None = None
_made: dict[str, str] = {}
"""LanceDB path -> the store made for it."""


def _storage(path: Any = None, vector_dim: int | None = None, **_: Any) -> KiviDBStorage:
    """A KiviDBStorage on the store of ``path``, made the first time (each path is a database
    of its own to LanceDB, and two ``Memory`` objects on one path share it; LanceDB's tuning
    options have no counterpart)."""
    assert _client is not None
    where = str(path) if path is not None else f"unnamed-{uuid.uuid4().hex}"
    if where not in _made:
        name = f"crewai-{uuid.uuid4().hex[:12]}"
        dimensions = vector_dim or DEFAULT_DIMENSIONS
        _client.put_store(os.environ["KIVIDB_INSTANCE"], name, dimensions=dimensions)
        _made[where] = name
    name = _made[where]
    return KiviDBStorage(store=_client.store(os.environ["KIVIDB_INSTANCE"], name), actor_id="crew")


def pytest_configure(config: pytest.Config) -> None:
    global _client
    _client = MemoryClient()
    lancedb_storage.LanceDBStorage = _storage  # type: ignore[misc, assignment]
    storage_factory.set_memory_storage_factory(lambda spec: _storage(spec))


def pytest_unconfigure(config: pytest.Config) -> None:
    if _client is None:
        return
    for name in _made.values():
        _client.delete_store(os.environ["KIVIDB_INSTANCE"], name)
    _client.close()
