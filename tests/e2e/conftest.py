"""The local stack (`python -m local`, what `make run` starts) on a free port, for HTTP tests."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from local.launch import running_stack
from tests.conftest import unique
from tools.scripted_model import ScriptedServer

API_KEY = "kvm_e2e_test_key_0123456789abcdefghijklmnop"


@dataclass
class Stack:
    url: str
    api_key: str
    redis_url: str

    def client(self, api_key: str | None = None) -> httpx.Client:
        key = self.api_key if api_key is None else api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)


@pytest.fixture(scope="session")
def stack(redis_url: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    env = {
        "REDIS_URL": redis_url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(tmp_path_factory.mktemp("local")),
        "KIVIDB_WORKERS": "2",
        # Stores of the background tests use loopback model servers (tools.scripted_model).
        "KIVIDB_ALLOW_PRIVATE_ENDPOINTS": "1",
    }
    log = tmp_path_factory.mktemp("logs") / "stack.log"
    with running_stack(env, log=log, timeout=30) as (url, _):
        yield Stack(url, API_KEY, redis_url)


@pytest.fixture
def api(stack: Stack) -> Iterator[httpx.Client]:
    """A client of the local stack with the bootstrap key."""
    with stack.client() as client:
        yield client


@pytest.fixture
def store(api: httpx.Client) -> Iterator[str]:
    """A new store on instance ``local`` with default settings; its path. Deleted after."""
    base = f"/instances/local/agent-memory/{unique('store')}"
    assert api.put(base, json={}).status_code == 201
    yield base
    api.delete(base)


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


def model_store(api, provider, made=None, **settings) -> str:
    """A new store on the scripted provider (extraction after 30 s); its path."""
    path = f"/instances/local/agent-memory/{unique('bg')}"
    if made is not None:
        made.append(path)
    body = {
        "llm_provider": "custom", "llm_model": "scripted", "llm_base_url": provider.url,
        "embed_provider": "custom", "embed_model": "scripted", "embed_base_url": provider.url,
        "dimensions": 384, "extraction_delay_seconds": 30, **settings,
    }  # fmt: skip
    answer = api.put(path, json=body)
    assert answer.status_code == 201, answer.text
    return path
