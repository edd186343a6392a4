"""Custom endpoint base URLs: refused when the store is saved unless they are a plain base
(scheme, host, port, path: no query, no fragment) whose host the HTTP client can build a
request for, also on a local stack that allows private endpoints; and a stored URL the client
cannot build a request for is a clear ``EndpointRefused`` at the call, never a 500."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from agent_memory.errors import EndpointRefused
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.network import CallPolicy
from agent_memory.stores.models import ProviderSettings

PRIVATE = {"allow_private_endpoints": True}


def settings(url: str, context: dict | None = None) -> ProviderSettings:
    return ProviderSettings.model_validate(
        {"embed_provider": "custom", "embed_model": "m", "embed_base_url": url}, context=context
    )


def problem(url: str, context: dict | None = None) -> str:
    with pytest.raises(ValidationError) as caught:
        settings(url, context)
    (error,) = caught.value.errors()
    return str(error["msg"]).removeprefix("Value error, ")


QUERY = "embed_base_url must not have a query or a fragment ('?' or '#'); give the base URL only"
HOST = (
    "embed_base_url has a host name the HTTP client cannot send a request to (an invalid "
    "internationalized name: IDNA)"
)


@pytest.mark.parametrize("context", [None, PRIVATE], ids=["public", "private allowed"])
@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("https://example.com#@127.0.0.1/v1", QUERY),
        ("https://example.com/v1?x=1", QUERY),
        ("https://example.com/v1?", QUERY),
        ("https://example.com/v1#", QUERY),
        ("https://example.com/v1#frag", QUERY),
        ("https://xn--ls8h.la/v1", HOST),  # punycode of an emoji: IDNA refuses to decode it
        ("https://XN--LS8H.la/v1", HOST),
    ],
)
def test_a_base_url_that_is_not_a_plain_base_is_refused_in_both_modes(url, expected, context):
    assert problem(url, context) == expected


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("http://127.0.0.1:8080/v1?key=1", QUERY),
        ("http://localhost/v1#x", QUERY),
        ("http://xn--ls8h.la/v1", HOST),
        (
            "http://user:pw@127.0.0.1/v1",
            "embed_base_url must not hold credentials; send the key as the api_key field",
        ),
        ("http://loc al/v1", "embed_base_url must not contain spaces or control characters"),
        ("http://127.0.0.1:99999/v1", "embed_base_url has an invalid port"),
    ],
)
def test_a_local_stack_allowing_private_endpoints_still_refuses_malformed_urls(url, expected):
    assert problem(url, PRIVATE) == expected


@pytest.mark.parametrize(
    ("url", "context"),
    [
        ("https://api.example.com/v1", None),
        ("https://xn--bcher-kva.example/v1", None),  # bücher.example: valid punycode
        ("https://api.example.com:8443/v1/", None),
        ("http://127.0.0.1:8080/v1", PRIVATE),
        ("http://localhost:8080", PRIVATE),
        ("https://[::1]:8443/v1", PRIVATE),
    ],
)
def test_plain_base_urls_are_kept(url, context):
    assert settings(url, context).embed_base_url == url


def test_a_stored_url_the_client_cannot_build_a_request_for_is_refused_at_the_call():
    client = ProviderClient(CallPolicy(max_retries=0))
    for url, allow_private in (
        ("http://xn--ls8h.la/v1/embeddings", True),
        ("https://xn--ls8h.la/v1/embeddings", True),
        ("https://xn--ls8h.la/v1/embeddings", False),  # refused before any name lookup
    ):
        with pytest.raises(EndpointRefused) as caught:
            client.post_json(url, {}, max_bytes=1000, custom=True, allow_private=allow_private)
        assert str(caught.value) == (
            "The custom endpoint for host 'xn--ls8h.la' is not a URL the HTTP client can send "
            "a request to (an invalid internationalized name: IDNA); save the store with "
            "another base URL."
        )
