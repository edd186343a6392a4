"""What a provider chooses and we pass on only through narrow channels: a ``Retry-After`` of any
size or form becomes a bounded number of seconds (never echoed in a message), and a vector
value that is not a float32 is named by its position only; a count from the answer is printed
bounded. Against raw loopback servers, through the provider client, the embedder, a route and
the logs.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator

import pytest

from agent_memory.errors import EmbeddingMismatch, ProviderUnavailable
from agent_memory.providers.client import RETRY_AFTER_MAX_SECONDS, ProviderClient
from agent_memory.providers.embeddings import CustomEmbedder
from agent_memory.providers.network import CallPolicy
from tests.support.common import unique
from tests.support.handlers import build, invoke
from tests.support.model_servers import RawHTTPServer, response_bytes, send

DIMS = 4

ABSURD = {
    "10^56 seconds": "1" + "0" * 56,
    "400 digits": "9" * 400,
    "a date in the year 9999": "Fri, 31 Dec 9999 23:59:59 GMT",
    "two hours": "7200",
}


def refusing(retry_after: str) -> bytes:
    return response_bytes(503, b"{}", headers={"Retry-After": retry_after})


def embedding(values: list[object]) -> bytes:
    body = json.dumps({"data": [{"index": 0, "embedding": values}]}).encode()
    return response_bytes(200, body)


@pytest.fixture
def server() -> Iterator[RawHTTPServer]:
    with RawHTTPServer() as raw:
        yield raw


@pytest.mark.parametrize("given", sorted(ABSURD))
def test_a_providers_long_retry_after_is_passed_on_bounded_and_never_shown(server, given):
    server.default = send(refusing(ABSURD[given]))
    client = ProviderClient(CallPolicy(max_retry_after=1.5), sleep=lambda _: None)
    with pytest.raises(ProviderUnavailable) as caught:
        client.post_json(server.url, {}, max_bytes=10_000)
    assert caught.value.retry_after_seconds == RETRY_AFTER_MAX_SECONDS == 3600
    assert str(caught.value) == (
        "The provider at 127.0.0.1 answered HTTP 503 and asked to wait 3600 s or more; try "
        "again later."
    )
    assert len(server.requests) == 1


def test_a_short_retry_after_is_passed_on_as_it_is(server):
    server.default = send(refusing("3"))
    client = ProviderClient(CallPolicy(max_retry_after=1.5), sleep=lambda _: None)
    with pytest.raises(ProviderUnavailable) as caught:
        client.post_json(server.url, {}, max_bytes=10_000)
    assert caught.value.retry_after_seconds == 3
    assert str(caught.value).endswith("asked to wait 3 s; try again later.")


@pytest.fixture
def store(tenant, function_env, monkeypatch, server) -> Iterator[str]:
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    name = unique("chosen")
    settings = {
        "embed_provider": "custom",
        "embed_model": "m",
        "embed_base_url": server.url,
        "dimensions": DIMS,
    }
    assert invoke("put_store", build("put_store", tenant, name, body=settings))[0] == 201
    yield name
    invoke("delete_store", build("delete_store", tenant, name))


MEMORY = {"text": "Alice plays chess", "actor_id": "alice"}


def test_a_route_answers_a_bounded_retry_after_for_a_400_digit_one(tenant, store, server):
    server.default = send(refusing("9" * 400))
    status, body, headers = invoke("add_memory", build("add_memory", tenant, store, body=MEMORY))
    assert (status, body["error"], headers["Retry-After"]) == (503, "provider_unavailable", "3600")
    assert "999" not in body["message"]


def test_a_vector_value_is_named_by_its_position_only(tenant, store, server, caplog):
    caplog.set_level(logging.DEBUG)
    embedder = CustomEmbedder(server.url, "m", DIMS, allow_private=True, client=ProviderClient())
    server.push(send(embedding([9.57e300, 0.1, 0.2, 0.3])))
    with pytest.raises(EmbeddingMismatch) as caught:
        embedder.embed(["a"])
    assert str(caught.value) == (
        "The embedding provider at 127.0.0.1 (m) returned a value that is not a finite 32-bit "
        "float at position 0 in the vector for index 0."
    )
    server.push(send(embedding([0.1, 0.2, 0.3, 1e39])))
    status, body, _ = invoke("add_memory", build("add_memory", tenant, store, body=MEMORY))
    assert (status, body["error"]) == (502, "embedding_mismatch")
    assert "at position 3" in body["message"] and "e+39" not in body["message"]
    assert "9.57" not in caplog.text and "e+39" not in caplog.text


def test_a_count_from_the_answer_is_printed_bounded(server):
    embedder = CustomEmbedder(server.url, "m", DIMS, allow_private=True, client=ProviderClient())
    server.push(send(embedding([0.5] * 1237)))
    with pytest.raises(EmbeddingMismatch, match="expected 4 dimensions, got 1,237"):
        embedder.embed(["a"])
