"""Instances whose database answers, but not as a usable Redis: a database number the server
does not have (a real ``redis-server --databases 4`` asked for database 99), a wrong password
(the same server), a server that refuses redis-py's connection handshake (``HELLO 3``, as
Redis 5 does), one that sends a reply nested deeper than the client reads, an HTTP server on
the port, and one that answers ``+PONG`` to everything. Each is the instance's problem, never
a 500: every route answers 503 ``database_unavailable`` with Retry-After and a message naming
the reason (never the password), the organization's listing names the instance under
``unreachable``, and ``tools.admin`` refuses to register such a database (exit 1, no
traceback; one that refuses the credentials is registered without a marker, as one that cannot
be reached) and removes an instance whose database became one.

The instances are registered while nothing listens on their port (a database that cannot be
reached is registered without an ownership marker), then the misbehaving server starts there.
"""

from __future__ import annotations

import contextlib
import dataclasses
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
import redis

from agent_memory.clock import SystemClock
from agent_memory.control.models import Instance
from agent_memory.database.client import redis_client
from agent_memory.providers.secrets import FernetCipher
from agent_memory.stores.listing import list_organization_stores
from agent_memory.stores.registry import Stores
from local.bootstrap import Cluster, low_free_port, start_redis_cluster
from tests.support.common import unique
from tests.support.databases import Tenant
from tests.support.handlers import HANDLERS, build, invoke
from tools import admin

DB_NUMBER = (
    "The database refused the database number of its URL (SELECT: the server has no such "
    "database, or it is a cluster, which has only database 0); an administrator must fix the "
    "URL."
)
HANDSHAKE = (
    "The database refused the connection handshake (HELLO 3: Redis 6 or later, or Valkey, is "
    "needed); an administrator must upgrade or replace it."
)
CREDENTIALS = (
    "The database refused the credentials of its URL (AUTH); an administrator must fix the URL."
)
PROTOCOL = (
    "The database does not answer in the Redis protocol (RESP); an administrator must check "
    "what listens at its address."
)

Reply = Callable[[bytes], bytes]
"""What a fake server sends back for each chunk of bytes it receives."""

FAKES: dict[str, tuple[Reply, str]] = {
    "refuses_hello": (lambda _: b"-ERR unknown command 'HELLO'\r\n", HANDSHAKE),
    "nested_reply": (lambda _: b"*1\r\n" * 5000 + b":1\r\n", PROTOCOL),
    "http_server": (
        lambda _: b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        PROTOCOL,
    ),
    "pong_to_everything": (lambda _: b"+PONG\r\n", HANDSHAKE),
}


class FakeServer:
    """A loopback TCP server on ``port`` answering every chunk it reads with ``reply``."""

    def __init__(self, port: int, reply: Reply) -> None:
        self.listener = socket.create_server(("127.0.0.1", port))
        self.reply = reply
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        with connection, contextlib.suppress(OSError):
            while data := connection.recv(65536):
                connection.sendall(self.reply(data))

    def stop(self) -> None:
        self.listener.close()


PASSWORD = "s3cret-pass"


@contextlib.contextmanager
def real_server(port: int, tmp_path: Path) -> Iterator[None]:
    """A real ``redis-server`` on ``port`` with 4 databases and a password, stopped by pid."""
    binary = shutil.which("redis-server")
    assert binary is not None
    process = subprocess.Popen(
        [
            binary,
            "--port",
            str(port),
            "--bind",
            "127.0.0.1",
            "--databases",
            "4",
            "--requirepass",
            PASSWORD,
            "--save",
            "",
            "--appendonly",
            "no",
            "--dir",
            str(tmp_path),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        probe = redis.Redis(port=port, password=PASSWORD, socket_connect_timeout=0.2)
        deadline = time.monotonic() + 10
        while True:
            try:
                probe.ping()
                break
            except redis.ConnectionError:
                assert time.monotonic() < deadline
                time.sleep(0.05)
        yield
    finally:
        process.terminate()
        process.wait(timeout=30)


@dataclasses.dataclass
class Unusable:
    """An instance of the tenant's organization whose database answers but cannot be used."""

    tenant: Tenant  # the tenant, pointed at this instance
    url: str
    message: str


REAL: dict[str, tuple[str, str]] = {
    "database_out_of_range": (f":{PASSWORD}@", DB_NUMBER),
    "wrong_password": (":wrong-pass@", CREDENTIALS),
}


@pytest.fixture(params=[*REAL, *FAKES])
def unusable(request, tenant, function_env, tmp_path) -> Iterator[Unusable]:
    port = low_free_port()
    number = 99 if request.param == "database_out_of_range" else 0
    credentials, message = REAL.get(request.param, ("", ""))
    url = f"redis://{credentials}127.0.0.1:{port}/{number}"
    instance_id = unique("bad")
    registration = tenant.control.register_instance(
        tenant.org_id, instance_id, url, allow_unreachable=True
    )
    assert not registration.marked  # nothing listened yet
    redis_client.cache_clear()  # the clients of other tests' databases are not involved
    pointed = dataclasses.replace(tenant, instance_id=instance_id)
    if request.param in REAL:
        with real_server(port, tmp_path):
            yield Unusable(pointed, url, message)
        return
    reply, message = FAKES[request.param]
    server = FakeServer(port, reply)
    try:
        yield Unusable(pointed, url, message)
    finally:
        server.stop()


ROUTES = sorted(
    set(HANDLERS)
    # the listings of the organization: an instance that cannot be read is named, not a 503
    - {"mcp_handler", "console", "list_stores", "get_org_usage"}
    # the organization's keys, in the control database: no instance's database is reached
    - {"create_key", "list_keys", "delete_key"}
)


def test_every_route_answers_503_naming_the_reason(unusable):
    answers = {}
    for name in ROUTES:
        status, body, headers = invoke(name, build(name, unusable.tenant))
        answers[name] = (status, body, headers.get("Retry-After"))
    expected = (503, {"error": "database_unavailable", "message": unusable.message}, "1")
    assert answers == dict.fromkeys(ROUTES, expected)
    assert not any(PASSWORD in str(answer) or "wrong-pass" in str(answer) for answer in answers)


def test_the_organizations_usage_names_the_instance_under_unreachable(unusable):
    status, body, _ = invoke("get_org_usage", build("get_org_usage", unusable.tenant))
    # the organization's other instance is the tenant database the tests before share: what
    # it holds is counted (any number), the unusable one adds nothing and is named
    assert status == 200 and body["now"]["sessions"] >= 0
    assert body["unreachable"] == [
        {"instance_id": unusable.tenant.instance_id, "message": unusable.message}
    ]


def test_the_listing_names_the_instance_under_unreachable(unusable):
    status, body, _ = invoke("list_stores", build("list_stores", unusable.tenant))
    assert status == 200
    assert body["unreachable"] == [
        {"instance_id": unusable.tenant.instance_id, "message": unusable.message}
    ]


def test_the_admin_tool_refuses_to_register_it_and_removes_it_without_a_traceback(
    unusable, redis_url, capsys
):
    org = unusable.tenant.org_id
    argv = ["--control-url", redis_url, "--release-hold", "0"]
    fresh, another_number = unique("again"), unusable.url.rsplit("/", 1)[0] + "/98"
    status = admin.main([*argv, "register-instance", org, fresh, another_number])
    out, err = capsys.readouterr()
    registered = [i.instance_id for i in unusable.tenant.control.instances(org)]
    if unusable.message == CREDENTIALS:  # as unreachable: refused unless --allow-unreachable
        assert (status, out) == (1, "")
        assert err.startswith("database_unavailable: Database ") and "--allow-unreachable" in err
        assert "or refused the URL's credentials" in err and fresh not in registered
        assert PASSWORD not in err and "wrong-pass" not in err
    else:
        assert (status, out) == (1, "")
        assert err == f"validation_error: {unusable.message} Nothing was registered.\n"
        assert fresh not in registered
    assert admin.main([*argv, "remove-instance", org, unusable.tenant.instance_id]) == 0
    out, err = capsys.readouterr()
    assert out.startswith(f"instance {unusable.tenant.instance_id} removed from {org}")
    assert "an ownership marker of this instance (kividb:mem:@owner) may still be in it" in out
    assert err == ""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_redis_cluster(tmp_path_factory.mktemp("cluster"))
    try:
        yield started
    finally:
        started.stop()


def test_a_cluster_asked_for_another_database_is_listed_as_unreachable(cluster, secret_key):
    numbered = cluster.url.removesuffix("/0") + "/3"
    instances = [
        Instance("numbered", "org", numbered, datetime.now(UTC)),  # known to be a cluster
        Instance("told-plain", "org", numbered + "?cluster=0", datetime.now(UTC)),  # SELECT 3
        Instance("fine", "org", cluster.url, datetime.now(UTC)),
    ]
    cipher = FernetCipher(secret_key.encode("ascii"))
    listing = list_organization_stores(
        instances, lambda i: Stores(redis_client(i.url), i.instance_id, cipher, SystemClock())
    )
    assert [u.model_dump() for u in listing.unreachable] == [
        {
            "instance_id": "numbered",
            "message": "The instance's database is a cluster, and a cluster has only database "
            "0: register it with a URL without a database number.",
        },
        {"instance_id": "told-plain", "message": DB_NUMBER},
    ]
