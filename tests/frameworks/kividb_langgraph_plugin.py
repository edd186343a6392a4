"""A pytest plugin that points LangGraph's own store tests at ``KiviDBStore``.

Loaded with ``-p kividb_langgraph_plugin`` by ``tests/e2e/test_framework_suites.py`` into a
pytest run inside ``langgraph-checkpoint-sqlite``'s source distribution
(``tools.framework_tests``): its ``tests/test_store.py`` and ``tests/test_async_store.py`` make
every store through ``SqliteStore.from_conn_string`` / ``AsyncSqliteStore.from_conn_string``
(their ``store`` fixtures, ``create_vector_store`` and the tests that open one themselves). This
plugin replaces those two names in each test module, after collection, with stand-ins whose
``from_conn_string`` gives a ``KiviDBStore`` on a new store of the local stack that
``KIVIDB_API_URL`` and ``KIVIDB_API_KEY`` name (instance ``KIVIDB_INSTANCE``), deleted after
the test; the SQLite connection string is ignored. SQLite's index config
(``text_fields``) is LangGraph's ``IndexConfig`` (``fields``). The tests themselves run
unchanged; those that check SQLite itself are deselected (docs/integrations.md).
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

import pytest

from kividb_memory import AsyncMemoryClient, MemoryClient
from kividb_memory.integrations.langgraph import KiviDBStore


def _index(index: dict[str, Any] | None) -> Any:
    if index is None:
        return None
    return {**index, "fields": index.get("fields") or index.get("text_fields")}


def _dimensions(index: dict[str, Any] | None) -> int:
    return int(index["dims"]) if index else 3


class _SyncStore(KiviDBStore):
    def setup(self) -> None:
        """SQLite's migrations; a KiviDB store needs none."""


class _AsyncStore(KiviDBStore):
    async def setup(self) -> None:
        """SQLite's migrations; a KiviDB store needs none."""


class SqliteStoreStandIn:
    """``SqliteStore`` as the test modules use it: ``from_conn_string`` only."""

    @staticmethod
    @contextmanager
    def from_conn_string(
        conn_string: str, *, index: dict[str, Any] | None = None, ttl: Any = None, **_: Any
    ) -> Iterator[KiviDBStore]:
        memory = MemoryClient()
        instance, name = os.environ["KIVIDB_INSTANCE"], f"lg-{uuid.uuid4().hex[:12]}"
        memory.put_store(instance, name, dimensions=_dimensions(index))
        try:
            yield _SyncStore(memory.store(instance, name), index=_index(index), ttl=ttl)
        finally:
            memory.delete_store(instance, name)
            memory.close()


class AsyncSqliteStoreStandIn:
    """``AsyncSqliteStore`` as the test modules use it: ``from_conn_string`` only."""

    @staticmethod
    @asynccontextmanager
    async def from_conn_string(
        conn_string: str, *, index: dict[str, Any] | None = None, ttl: Any = None, **_: Any
    ) -> AsyncIterator[KiviDBStore]:
        memory = AsyncMemoryClient()
        instance, name = os.environ["KIVIDB_INSTANCE"], f"lg-{uuid.uuid4().hex[:12]}"
        await memory.put_store(instance, name, dimensions=_dimensions(index))
        try:
            yield _AsyncStore(memory.store(instance, name), index=_index(index), ttl=ttl)
        finally:
            await memory.delete_store(instance, name)
            await memory.aclose()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "SqliteStore"):
            module.SqliteStore = SqliteStoreStandIn
        if module is not None and hasattr(module, "AsyncSqliteStore"):
            module.AsyncSqliteStore = AsyncSqliteStoreStandIn
