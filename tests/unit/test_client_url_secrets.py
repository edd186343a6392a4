"""The client never shows the credentials or the query string of a URL: not in an error's
message, its ``url``, nor a repr (an MCP tool result shows error messages to a model and a
user); and a base URL with a query string, which could never work, is refused."""

from __future__ import annotations

import socket
import string

import pytest
from hypothesis import given, settings, strategies as st

from kividb_memory import ApiConnectionError, MemoryClient
from kividb_memory._http import shown_url

SECRET = st.text(
    string.ascii_letters + string.digits + "-._~!$&'()*+,;=%:@/?#", min_size=6, max_size=20
).filter(lambda s: any(c.isalnum() for c in s))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        ("https://api.example.com/v1", "https://api.example.com/v1"),
        ("https://u:hunter2@api.example.com/v1", "https://***@api.example.com/v1"),
        ("https://hunter2@api.example.com", "https://***@api.example.com"),
        ("https://api.example.com/v1?token=hunter2", "https://api.example.com/v1?***"),
        ("https://api.example.com/v1#hunter2", "https://api.example.com/v1#***"),
        ("https://u:hun#ter2@api.example.com/", "https://***"),
        ("https://u:hun?ter2@api.example.com/", "https://***"),
        ("https://u:hun/ter2@api.example.com/", "https://***"),
        ("https://user:@0000/@api.example.com/v1", "https://***"),
    ],
)
def test_shown_urls(url, shown):
    assert shown_url(url) == shown


@settings(max_examples=1000)
@given(SECRET, st.sampled_from(["user:{}@", "{}@", ":{}@"]), st.sampled_from(["", "?t={}"]))
def test_no_secret_is_shown(secret, userinfo, query):
    url = f"https://{userinfo.format(secret)}api.example.com/v1{query.format(secret)}"
    assert secret not in shown_url(url)


def test_connection_errors_and_reprs_show_no_credentials():
    port = _free_port()
    client = MemoryClient(f"http://app:hunter2@127.0.0.1:{port}/prefix", "key-123", max_retries=0)
    with pytest.raises(ApiConnectionError) as failed:
        client.list_stores()
    shown = [
        str(failed.value),
        failed.value.message,
        failed.value.url,
        repr(failed.value),
        repr(client),
    ]
    for text in shown:
        assert "hunter2" not in text and "key-123" not in text and "app:" not in text, text
    assert f"http://***@127.0.0.1:{port}/prefix" in str(failed.value)
    client.close()


@pytest.mark.parametrize(
    "url",
    [
        "https://api.example.com/v1?token=hunter2",
        "https://api.example.com/v1#hunter2",
        "https://api.example.com/v1?",
    ],
)
def test_a_base_url_with_a_query_or_fragment_is_refused_without_showing_it(url):
    with pytest.raises(ValueError, match="query string or fragment") as refused:
        MemoryClient(url, "key")
    assert "hunter2" not in str(refused.value)
