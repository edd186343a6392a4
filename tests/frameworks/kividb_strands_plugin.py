"""A pytest plugin that points Strands' own memory-injection test at ``KiviDBMemoryStore``.

Loaded with ``-p kividb_strands_plugin`` by ``tests/e2e/test_framework_suites.py`` into a pytest
run inside the strands-agents source distribution (``tools.framework_tests``): the SDK's
``tests/strands/memory/test_injection_integration.py`` builds its store as ``_FakeStore()``, a
read-only store whose search finds "user prefers dark mode". This plugin replaces ``_FakeStore``
in that module with a ``KiviDBMemoryStore`` of the same name and settings on the store that
``KIVIDB_API_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE`` name, where
that memory is kept first (for the actor ``KIVIDB_ACTOR``). The test itself runs unchanged.
"""

from __future__ import annotations

import os

import pytest

from kividb_memory import MemoryClient
from kividb_memory.integrations.strands import KiviDBMemoryStore

MEMORY = "user prefers dark mode"


def _store() -> KiviDBMemoryStore:
    return KiviDBMemoryStore(
        actor_id=os.environ["KIVIDB_ACTOR"], name="kb", description="knowledge base", writable=False
    )


def pytest_sessionstart(session: pytest.Session) -> None:
    with MemoryClient() as client:
        store = client.store(os.environ["KIVIDB_INSTANCE"], os.environ["KIVIDB_STORE"])
        store.add_memory(MEMORY, actor_id=os.environ["KIVIDB_ACTOR"])


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "_FakeStore"):
            module._FakeStore = _store
