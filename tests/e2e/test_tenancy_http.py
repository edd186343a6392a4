"""Tenancy checked on every use, through the local stack: another organization never reads a
database it registered under a second name while the database was down.

The story (found by a hostile tester): organization A's database is down for a moment;
organization B registers the same server under another name (here its unix socket, where A
used its TCP port); once the database is back, B's key lists A's store and reads its memories.
The database's own ownership marker, written by A's registration, says whose it is: a container
checks it when it first uses an instance and after every reconnect.

The database is a ``redis-server`` of this module's own, listening on a loopback port and a unix
socket, saving its data when it stops (so it comes back with it)."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from agent_memory.clock import SystemClock
from agent_memory.control.plane import ControlPlane
from agent_memory.errors import NotFound
from local.bootstrap import low_free_port
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.stack import Stack
from tools import admin


class Server:
    """A redis-server on a loopback port and a unix socket, with its data in ``folder``."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.port = low_free_port()
        self.socket = folder / "redis.sock"
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def tcp_url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    @property
    def socket_url(self) -> str:
        return f"unix://{self.socket}?db=0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [
                "redis-server",
                "--bind",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--unixsocket",
                str(self.socket),
                "--unixsocketperm",
                "700",
                "--dir",
                str(self.folder),
                "--save",
                "3600 1",
                "--appendonly",
                "no",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        deadline = time.monotonic() + 10
        while True:
            try:
                if redis.Redis.from_url(self.tcp_url).ping():
                    return
            except redis.ConnectionError:
                pass
            assert time.monotonic() < deadline, "redis-server did not start"
            time.sleep(0.05)

    def stop(self) -> None:
        """Stop it as an outage would end a database: saved, then gone."""
        if self.process is None:
            return
        os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait(30)
        self.process = None


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    made = Server(tmp_path)
    made.start()
    yield made
    made.stop()


def admin_command(stack: Stack, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    status = admin.main(["--control-url", stack.redis_url, "--release-hold", "0", *args])
    captured = capsys.readouterr()
    return status, captured.out + captured.err


def test_a_database_registered_during_its_outage_under_a_second_name_stays_its_owners(
    stack: Stack, server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    control = ControlPlane(database_client(stack.redis_url), SystemClock(), release_hold_seconds=0)
    owner, intruder = unique("org-a"), unique("org-b")
    for org in (owner, intruder):
        assert admin_command(stack, capsys, "create-org", org)[0] == 0
    owner_key = control.issue_api_key(owner)[1]
    intruder_key = control.issue_api_key(intruder)[1]
    mine, theirs, store = unique("db-a"), unique("db-b"), unique("secrets")
    try:
        # A registers the database by its TCP port and keeps a memory in it.
        assert (
            admin_command(stack, capsys, "register-instance", owner, mine, server.tcp_url)[0] == 0
        )
        with stack.client(owner_key) as a:
            path = f"/instances/{mine}/agent-memory/{store}"
            assert a.put(path, json={"dimensions": 3}).status_code == 201
            kept = a.post(
                f"{path}/memories",
                json={"text": "A's secret plan", "actor_id": "u1", "vector": [1, 0, 0]},
            )
            assert kept.status_code == 201, kept.text
        # The database is down; B registers the same server by its unix socket.
        server.stop()
        status, output = admin_command(
            stack, capsys, "register-instance", intruder, theirs, server.socket_url
        )
        assert status == 1, output  # a database that cannot be reached is not registered...
        assert "cannot be reached" in output and "--allow-unreachable" in output
        assert control.instances(intruder) == []
        status, output = admin_command(  # ...unless the operator says so
            stack,
            capsys,
            "register-instance",
            intruder,
            theirs,
            server.socket_url,
            "--allow-unreachable",
        )
        assert status == 0, output
        # The database is back, with A's data and A's ownership marker.
        server.start()
        with stack.client(intruder_key) as b, stack.client(intruder_key) as stranger:
            nowhere = "db-" + "x" * (len(theirs) - 3)
            for suffix in ("", f"/{store}", f"/{store}/memories", f"/{store}/sessions"):
                answer = b.get(f"/instances/{theirs}/agent-memory{suffix}")
                expected = stranger.get(f"/instances/{nowhere}/agent-memory{suffix}")
                assert answer.status_code == 404, answer.text
                assert answer.text.replace(theirs, "<id>") == expected.text.replace(nowhere, "<id>")
            listing = b.get("/agent-memory")
            assert listing.status_code == 200
            assert listing.json()["stores"] == []
            assert "secret" not in listing.text
        # A's data is A's, as before.
        with stack.client(owner_key) as a:
            found = a.get(f"/instances/{mine}/agent-memory/{store}/memories").json()
            assert [m["text"] for m in found["memories"]] == ["A's secret plan"]
    finally:
        for org in (owner, intruder):
            with contextlib.suppress(NotFound):  # the test's own organizations
                control.delete_organization(org)


def test_a_stranger_database_behind_a_known_name_is_refused_after_a_reconnect(
    stack: Stack, server: Server, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    """A name that starts answering for another organization's database (a DNS change, a
    failover to the wrong server) is refused from the next connection on."""
    control = ControlPlane(database_client(stack.redis_url), SystemClock(), release_hold_seconds=0)
    org, other = unique("org-a"), unique("org-c")
    for name in (org, other):
        assert admin_command(stack, capsys, "create-org", name)[0] == 0
    key = control.issue_api_key(org)[1]
    mine, store = unique("db-a"), unique("store")
    try:
        assert admin_command(stack, capsys, "register-instance", org, mine, server.tcp_url)[0] == 0
        with stack.client(key) as a:
            assert a.put(f"/instances/{mine}/agent-memory/{store}", json={}).status_code == 201
            # Another organization's database now answers at the same address.
            server.stop()
            (tmp_path / "dump.rdb").unlink(missing_ok=True)
            server.start()
            foreign = redis.Redis.from_url(server.tcp_url)
            foreign.set("kividb:mem:@owner", f"{other}/elsewhere/0123456789abcdef")
            foreign.hset("kividb:mem:@stores", "theirs", "{}")
            answer = _until_refused(a, f"/instances/{mine}/agent-memory")
            assert answer.status_code == 404
            assert answer.json()["error"] == "instance_not_found"
    finally:
        for name in (org, other):
            with contextlib.suppress(NotFound):  # the test's own organizations
                control.delete_organization(name)


def _until_refused(client: httpx.Client, path: str) -> httpx.Response:
    """The first answer that is not a 503 (a worker's pooled connections to the stopped server
    fail once, then reconnect)."""
    for _ in range(20):
        answer = client.get(path)
        if answer.status_code != 503:
            return answer
        time.sleep(0.1)
    return answer
