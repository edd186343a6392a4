"""The local stack the e2e tests run against: its bootstrap key, its handle, stores on it."""

from __future__ import annotations

from dataclasses import dataclass

import httpx

from kividb_memory import MemoryClient
from tests.support.common import unique
from tools.scripted_model import ScriptedServer

API_KEY = "kvm_e2e_test_key_0123456789abcdefghijklmnop"
STANDIN_AWS = {
    "AWS_ACCESS_KEY_ID": "AKIDE2ESTANDIN000001",
    "AWS_SECRET_ACCESS_KEY": "e2eStandInSecretKey/0123456789abcdefABCD",
    "AWS_SESSION_TOKEN": "e2eStandInSessionTokenIQoJb3JpZ2luX2Vj",
}
"""The AWS credentials the session's stack signs Bedrock calls with (as a Lambda function's
role would give them) and the loopback Bedrock stand-in (``tools.bedrock_standin``) expects."""


@dataclass
class Stack:
    url: str
    api_key: str
    redis_url: str

    def client(self, api_key: str | None = None) -> httpx.Client:
        """Plain httpx, for tests of raw HTTP (statuses, headers, malformed requests)."""
        key = self.api_key if api_key is None else api_key
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=30)

    def memory(self, api_key: str | None = None) -> MemoryClient:
        """The Python client, without retries: each call is one request, as a test expects."""
        key = self.api_key if api_key is None else api_key
        return MemoryClient(self.url, key, timeout=30, max_retries=0)


def model_store(
    api: MemoryClient | httpx.Client, provider: ScriptedServer, made=None, **settings
) -> str:
    """A new store on the scripted provider (extraction after 30 s); its path. ``api`` is the
    Python client (an httpx client still works, for the console's tests)."""
    name = unique("bg")
    path = f"/instances/local/agent-memory/{name}"
    if made is not None:
        made.append(path)
    body = {
        "llm_provider": "custom",
        "llm_model": "scripted",
        "llm_base_url": provider.url,
        "embed_provider": "custom",
        "embed_model": "scripted",
        "embed_base_url": provider.url,
        "dimensions": 384,
        "extraction_delay_seconds": 30,
        **settings,
    }
    if isinstance(api, MemoryClient):
        api.put_store("local", name, **body)
        return path
    answer = api.put(path, json=body)
    assert answer.status_code == 201, answer.text
    return path
