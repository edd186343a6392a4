"""A pytest plugin that points the OpenAI Agents SDK's own session tests at ``KiviDBSession``.

Loaded with ``-p kividb_agents_plugin`` by ``tests/e2e/test_framework_suites.py`` into a pytest
run inside the SDK's source distribution (``tools.framework_tests``): the SDK's
``tests/extensions/memory/test_redis_session.py`` makes its sessions with two module helpers,
``_create_redis_session`` and ``_create_test_session``; this plugin replaces both in that module,
after collection, with helpers that make a ``KiviDBSession`` on the store that
``KIVIDB_API_URL``, ``KIVIDB_API_KEY``, ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE`` name. The tests
themselves run unchanged. Which of them apply: docs/integrations.md.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kividb_memory.integrations.openai_agents import KiviDBSession


async def _create_redis_session(session_id: str, key_prefix: str = "", ttl: Any = None):
    """A session on the store (the key prefix and TTL are Redis's own settings: a store has
    its session TTL)."""
    return KiviDBSession(session_id)


async def _create_test_session(session_id: str | None = None):
    """A session on the store, emptied first, as the SDK's helper does."""
    session = KiviDBSession(session_id or f"test_session_{uuid.uuid4().hex[:8]}")
    await session.clear_session()
    return session


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        module = getattr(item, "module", None)
        if module is not None and hasattr(module, "_create_test_session"):
            module._create_redis_session = _create_redis_session
            module._create_test_session = _create_test_session
