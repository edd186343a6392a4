"""The local stack (`python -m local`, what `make run` starts) on a free port, for HTTP tests.

Tests call the API through the Python client (``Stack.memory()``, the ``memory`` and
``memory_store`` fixtures); ``Stack.client()`` and the ``api`` fixture are plain httpx, for the
tests that check raw HTTP: exact statuses and headers, malformed bodies, wrong methods."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kividb_memory import MemoryClient, StoreClient
from local.launch import running_stack
from tests.support.browser import Console, build_console, chromium
from tests.support.common import unique
from tests.support.stack import API_KEY, STANDIN_AWS, Stack
from tools.scripted_model import ScriptedServer


@pytest.fixture(scope="session")
def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {
        "REDIS_URL": redis_url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(tmp_path_factory.mktemp("local")),
        "KIVIDB_WORKERS": "2",
        # Stores of the background tests use loopback model servers (tools.scripted_model).
        "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": "1",
        # Bedrock calls are signed with these, as with a function's role in AWS; the loopback
        # stand-in checks them. No instance-metadata lookups for credentials on this machine.
        **STANDIN_AWS,
        "AWS_EC2_METADATA_DISABLED": "true",
    }
    log = tmp_path_factory.mktemp("logs") / "stack.log"
    # A deadline, not a wait: the stack answers in about 3 s on a quiet machine, but its two
    # workers' imports took 26-46 s at a load average of 20 (two suites side by side).
    with running_stack(env, log=log, timeout=120) as (url, _):
        yield Stack(url, API_KEY, redis_url)


@pytest.fixture
def api(stack: Stack) -> Iterator[httpx.Client]:
    """A client of the local stack with the bootstrap key."""
    with stack.client() as client:
        yield client


@pytest.fixture
def memory(stack: Stack) -> Iterator[MemoryClient]:
    """The Python client of the local stack with the bootstrap key."""
    with stack.memory() as client:
        yield client


@pytest.fixture
def memory_store(memory: MemoryClient) -> Iterator[StoreClient]:
    """A new store on instance ``local`` with default settings (3 dimensions, no models), as a
    client handle. Deleted after."""
    name = unique("store")
    memory.put_store("local", name, dimensions=3)
    yield memory.store("local", name)
    memory.delete_store("local", name)


@pytest.fixture
def store(memory: MemoryClient) -> Iterator[str]:
    """A new store on instance ``local`` with default settings; its path, for raw HTTP tests.
    Deleted after."""
    name = unique("store")
    memory.put_store("local", name)
    yield f"/instances/local/agent-memory/{name}"
    memory.delete_store("local", name)


@pytest.fixture(scope="module")
def provider() -> Iterator[ScriptedServer]:
    server = ScriptedServer()
    server.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture(scope="module")
def open_stack(stack: Stack) -> Stack:
    """The local stack that lets stores use loopback providers: the session's one. Every stack
    on a database runs a scheduler loop over that database's schedule entries, so a second stack
    with other settings would take (and fail) runs armed through the first one."""
    return stack


# --- the console's browser tests (tests/support/browser.py) ----------------------------------


@pytest.fixture(scope="module")
def console_built() -> None:
    """The console's files, built from console/src when missing or older (`make console`)."""
    build_console()


@pytest.fixture(scope="module")
def browser_context(console_built: None) -> Iterator[Any]:
    """One headless Chromium for the module: Debian's binary, a fresh profile, no network."""
    with chromium() as context:
        yield context


@pytest.fixture
def console(browser_context: Any, stack: Stack) -> Iterator[Console]:
    """A tab on the console of the local stack; on teardown it checks that the page logged no
    unexpected error, that no request left 127.0.0.1 and that the key was in no URL."""
    tab = Console(browser_context, stack)
    yield tab
    tab.close()
