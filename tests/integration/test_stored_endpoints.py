"""Custom endpoint base URLs through the routes: ``PUT`` refuses one with a query, a fragment
or a host the HTTP client cannot build a request for (422, nothing stored), on a stack that
allows private endpoints too; a store saved before these checks with such a host answers 422
``endpoint_refused`` at the call, never 500."""

from __future__ import annotations

import json

import pytest

from agent_memory.database.keys import StoreKeys
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.handlers import build, invoke

DIMS = 4


def custom(url: str) -> dict:
    return {
        "embed_provider": "custom",
        "embed_model": "m",
        "embed_base_url": url,
        "dimensions": DIMS,
    }


@pytest.mark.parametrize("private", [False, True], ids=["public", "private allowed"])
@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("https://example.com#@127.0.0.1/v1", "must not have a query or a fragment"),
        ("https://example.com/v1?x=1", "must not have a query or a fragment"),
        ("https://xn--ls8h.la/v1", "has a host name the HTTP client cannot send a request to"),
    ],
)
def test_put_refuses_a_base_url_that_is_not_a_plain_base(
    tenant, function_env, monkeypatch, url, problem, private
):
    if private:
        monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    name = unique("endpoint")
    status, body, _ = invoke("put_store", build("put_store", tenant, name, body=custom(url)))
    assert (status, body["error"]) == (422, "validation_error")
    (detail,) = body["details"]
    # a rule across fields (the provider decides what the URL must be): reported on the body
    assert detail["field"] == "body" and f"embed_base_url {problem}" in detail["problem"]
    assert invoke("get_store", build("get_store", tenant, name))[0] == 404


def test_a_stored_host_the_client_cannot_send_to_is_a_422_at_the_call(
    tenant, function_env, monkeypatch
):
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    name = unique("stored")
    good = custom("http://127.0.0.1:9/v1")
    assert invoke("put_store", build("put_store", tenant, name, body=good))[0] == 201
    # as a store saved before the check: the registry holds the URL as it was given
    database = database_client(tenant.url)
    stored = json.loads(database.hget(StoreKeys.registry, name))
    stored["embed_base_url"] = "http://xn--ls8h.la/v1"
    database.hset(StoreKeys.registry, name, json.dumps(stored))
    memory = {"text": "Alice plays chess", "actor_id": "alice"}
    status, body, _ = invoke("add_memory", build("add_memory", tenant, name, body=memory))
    assert (status, body) == (
        422,
        {
            "error": "endpoint_refused",
            "message": "The custom endpoint for host 'xn--ls8h.la' is not a URL the HTTP client "
            "can send a request to (an invalid internationalized name: IDNA); save the store "
            "with another base URL.",
        },
    )
    invoke("delete_store", build("delete_store", tenant, name))
