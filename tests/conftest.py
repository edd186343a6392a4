"""Shared fixtures: a real Redis server, and an organization + instance of the test's own.

With ``REDIS_URL`` unset, the suite starts its own ``redis-server`` on a free port (data in a
temporary folder, nothing saved). With ``REDIS_URL`` set it uses that server but never flushes
it: every test works under names of its own (random organization, instance and store names).

With ``KIVIDB_TEST_CLUSTER=1`` (and ``REDIS_URL`` unset) the database is a Redis Cluster of
three primaries that the suite starts (``local.bootstrap.start_redis_cluster``), and each other
"database number" a test asks for (:func:`on_database`) is another such cluster, started when
first asked for: a cluster has only database 0, and a database is one organization's. Clients
of the tests come from :func:`database_client`, a ``RedisCluster`` there. docs/testing.md
names the tests ``make test`` runs this way.
"""

from __future__ import annotations

import contextlib
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit, urlunsplit

import pytest
import redis
from cryptography.fernet import Fernet
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import cluster_mode, split_cluster_option
from agent_memory.errors import NotFound
from local.bootstrap import Cluster, start_redis_cluster, start_redis_server

ON_CLUSTER = os.environ.get("KIVIDB_TEST_CLUSTER", "").lower() in ("1", "yes", "true", "on")
"""The suite runs on Redis Clusters it starts (``KIVIDB_TEST_CLUSTER=1``)."""


class Clusters:
    """The clusters of a cluster run, one per database number a test uses (0 first)."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.by_number: dict[int, Cluster] = {}

    def url(self, number: int) -> str:
        if number not in self.by_number:
            self.by_number[number] = start_redis_cluster(self.data_dir / f"cluster-{number}")
        return self.by_number[number].url

    def number_of(self, url: str) -> int | None:
        base = urlsplit(split_cluster_option(url)[0])
        for number, cluster in self.by_number.items():
            if urlsplit(cluster.url).netloc == base.netloc.rsplit("@", 1)[-1]:
                return number
        return None

    def stop(self) -> None:
        for cluster in self.by_number.values():
            cluster.stop()


_CLUSTERS: list[Clusters] = []


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    url = os.environ.get("REDIS_URL")
    if url:
        yield url
        return
    if ON_CLUSTER:
        clusters = Clusters(tmp_path_factory.mktemp("clusters"))
        _CLUSTERS.append(clusters)
        try:
            yield clusters.url(0)
        finally:
            clusters.stop()
            _CLUSTERS.remove(clusters)
        return
    database = start_redis_server(tmp_path_factory.mktemp("redis"), persist=False)
    try:
        yield database.url
    finally:
        database.stop()


def database_client(url: str, *, binary: bool = False, **options: object) -> redis.Redis:
    """A new client of the database at ``url`` (answers ``str``, or ``bytes`` with
    ``binary``): a ``RedisCluster`` when it is a cluster (typed as ``redis.Redis``, as
    ``agent_memory.db.redis_client`` does), else ``redis.Redis``. Not cached: a test may close
    it or point it at a server it stops."""
    plain, _ = split_cluster_option(url)
    if cluster_mode(url):
        cluster = RedisCluster.from_url(
            plain, decode_responses=not binary, retry=Retry(NoBackoff(), retries=0), **options
        )
        return cast(redis.Redis, cluster)
    return redis.Redis.from_url(plain, decode_responses=not binary, **options)


@pytest.fixture(scope="session")
def secret_key() -> str:
    return Fernet.generate_key().decode("ascii")


@pytest.fixture
def client(redis_url: str) -> redis.Redis:
    return database_client(redis_url)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


@dataclass
class Tenant:
    """An organization with one instance (on the test server) and one API key."""

    org_id: str
    instance_id: str
    api_key: str
    key_id: str
    control: ControlPlane
    url: str


def on_database(url: str, db: int) -> str:
    """``url`` with its database number set to ``db`` (the path; a query is dropped). In a
    cluster run, the URL of the cluster that stands for database ``db``."""
    for clusters in _CLUSTERS:
        if clusters.number_of(url) is not None:
            return clusters.url(db)
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}", query=""))


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
    control.register_instance(org_id, instance_id, url)
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


ROOT = Path(__file__).resolve().parent.parent
from tools.replay import DEFAULT_FILES  # noqa: E402  (after ROOT, which it does not need)

needs_data = pytest.mark.skipif(
    not all(path.is_file() for path in DEFAULT_FILES.values()),
    reason="the LoCoMo / MemoryBank files are not in $KIVIDB_DATA_DIR (default ../shared/data)",
)
"""For tests that replay the real datasets, which are never copied into the project."""
