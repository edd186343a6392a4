"""The local stack (`python -m local`, what `make run` starts) on a free port, for HTTP tests."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest

from local.bootstrap import free_port
from tests.conftest import ROOT

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
    port = free_port()
    env = {
        **os.environ,
        "PORT": str(port),
        "REDIS_URL": redis_url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(tmp_path_factory.mktemp("local")),
        "KIVIDB_WORKERS": "2",
    }
    log = tmp_path_factory.mktemp("logs") / "stack.log"
    with log.open("w") as output:
        process = subprocess.Popen(
            [sys.executable, "-m", "local"], cwd=ROOT, env=env, stdout=output, stderr=output
        )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            httpx.get(url + "/agent-memory", timeout=1)
            break
        except httpx.TransportError:
            if process.poll() is not None or time.monotonic() > deadline:
                process.kill()
                raise RuntimeError("local stack did not start:\n" + log.read_text()) from None
            time.sleep(0.1)
    try:
        yield Stack(url, API_KEY, redis_url)
    finally:
        process.terminate()
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            process.kill()
