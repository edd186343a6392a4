"""Shared fixtures: a real Redis server, and an organization + instance of the test's own.

With ``REDIS_URL`` unset, the suite starts its own ``redis-server`` on a free port (data in a
temporary folder, nothing saved). With ``REDIS_URL`` set it uses that server but never flushes
it: every test works under names of its own (random organization, instance and store names).

With ``KIVIDB_TEST_CLUSTER=1`` (and ``REDIS_URL`` unset) the database is a Redis Cluster of
three primaries that the suite starts (``local.bootstrap.start_redis_cluster``), and each other
"database number" a test asks for (``tests.support.databases.on_database``) is another such
cluster, started when first asked for: a cluster has only database 0, and a database is one
organization's. Clients of the tests come from ``tests.support.databases.database_client``, a
``RedisCluster`` there. docs/testing.md names the tests ``make test`` runs this way.

The helpers that these fixtures and the tests share are in ``tests.support``.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

import pytest
import redis
from cryptography.fernet import Fernet

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from agent_memory.errors import NotFound
from local.bootstrap import start_redis_server
from tests.support.common import unique
from tests.support.databases import (
    CLUSTERS,
    ON_CLUSTER,
    Clusters,
    Tenant,
    database_client,
    on_database,
)


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    if ON_CLUSTER:
        clusters = Clusters(tmp_path_factory.mktemp("clusters"))
        CLUSTERS.append(clusters)
        try:
            yield clusters.url(0)
        finally:
            clusters.stop()
            CLUSTERS.remove(clusters)
        return
    database = start_redis_server(tmp_path_factory.mktemp("redis"), persist=False)
    try:
        yield database.url
    finally:
        database.stop()


@pytest.fixture(scope="session")
def secret_key() -> str:
    return Fernet.generate_key().decode("ascii")


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return database_client(redis_url)


TENANT_DB = 1
"""A database belongs to one organization (``ControlPlane.register_instance`` refuses another
one's), and database 0 of the test server is the local stack's (organization ``local``, for the
e2e tests and the bootstrap tests). Each test's tenant has database 1, one tenant at a time:
its organization is deleted after the test. Other databases in use: 2 (e2e test_http), 3 to 9
(integration test_control), 10 to 12 (e2e test_instances_http), 13 (e2e test_fuzz), 14 and 15
(e2e test_isolation)."""


@pytest.fixture
def tenant(redis_url: str) -> Iterator[Tenant]:
    # No hold on release: the next test's tenant registers the same database at once.
    control = ControlPlane(database_client(redis_url), SystemClock(), release_hold_seconds=0)
    org_id, instance_id = unique("org"), unique("db")
    url = on_database(redis_url, TENANT_DB)
    control.create_organization(org_id)
    control.register_instance(org_id, instance_id, url, allow_unreachable=True)
    key_id, api_key = control.issue_api_key(org_id)
    yield Tenant(org_id, instance_id, api_key, key_id, control, url)
    with contextlib.suppress(NotFound):
        control.delete_organization(org_id)


@pytest.fixture
def function_env(monkeypatch: pytest.MonkeyPatch, redis_url: str, secret_key: str) -> None:
    """The environment template.yaml gives every function, pointing at the test server."""
    monkeypatch.setenv("KIVIDB_CONTROL_URL", redis_url)
    monkeypatch.setenv("KIVIDB_SECRET_KEY", secret_key)
    monkeypatch.setenv("POWERTOOLS_SERVICE_NAME", "agent-memory")
    monkeypatch.setenv("POWERTOOLS_METRICS_NAMESPACE", "KiviDB/AgentMemory")
    monkeypatch.setenv("POWERTOOLS_METRICS_DISABLED", "true")
    # These tests re-point instances and expect the next request to see it at once.
    monkeypatch.setenv("KIVIDB_INSTANCE_CACHE_SECONDS", "0")
