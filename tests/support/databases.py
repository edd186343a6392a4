"""Clients and URLs of the test databases (one Redis server, or Redis Clusters), and tenants."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import cast
from urllib.parse import urlsplit, urlunsplit

import redis
from redis.backoff import NoBackoff
from redis.cluster import RedisCluster
from redis.retry import Retry

from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import cluster_mode, split_cluster_option
from local.bootstrap import Cluster, start_redis_cluster

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


CLUSTERS: list[Clusters] = []
"""The clusters of the running cluster run (the ``redis_url`` fixture adds and removes them),
for :func:`on_database`."""


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
    for clusters in CLUSTERS:
        if clusters.number_of(url) is not None:
            return clusters.url(db)
    return urlunsplit(urlsplit(url)._replace(path=f"/{db}", query=""))
