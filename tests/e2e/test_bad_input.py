"""Bad input found by trying to break the API: each is a clear 4xx and changes nothing."""

from __future__ import annotations

import pytest

from tests.e2e.test_http import BASE, assert_error

EVENT = {"role": "user", "content": "x"}


def _sessions(api, store):
    return api.get(f"{store}/sessions").json()["sessions"]


@pytest.mark.parametrize(
    ("path", "body"),
    [
        ("/sessions/s/events", [{"events": [EVENT]}, {"events": [EVENT]}]),
        ("/recall", [{"session_id": "s"}]),
        ("", [{"summarize_after": 7, "keep_recent": 1}]),
        ("/sessions/s/events", "a string"),
        ("/sessions/s/events", 42),
    ],
)
def test_a_body_that_is_not_an_object_is_422(api, store, path, body):
    method = api.put if path == "" else api.post
    response = method(store + path, json=body)
    body_error = assert_error(response, 422, "validation_error")
    assert "object" in body_error["details"][0]["problem"]
    assert _sessions(api, store) == []
    assert api.get(store).json()["summarize_after"] == 40


@pytest.mark.parametrize(
    "created_at",
    [
        "0001-01-01T00:00:00+01:00",
        "9999-12-31T23:59:59-01:00",
        "1899-12-31T23:59:59Z",
        "2023-02-30T00:00:00Z",
        "yesterday",
        1683554160,
        "1683554160",
        "1683554160.5",
        -62135596800,
        True,
    ],
)
def test_out_of_range_or_non_text_created_at_is_422(api, store, created_at):
    response = api.post(
        f"{store}/sessions/s/events", json={"events": [{**EVENT, "created_at": created_at}]}
    )
    body = assert_error(response, 422, "validation_error")
    assert body["details"][0]["field"].startswith("events.0.created_at")
    assert _sessions(api, store) == []


def test_created_at_in_range_reads_back_in_utc(api, store):
    events = [
        {**EVENT, "created_at": "1900-01-01T00:30:00+00:30"},
        {**EVENT, "created_at": "2023-05-08T15:56:00+02:00"},
    ]
    api.post(f"{store}/sessions/s/events", json={"events": events})
    messages = api.get(f"{store}/sessions/s").json()["messages"]
    assert [m["created_at"] for m in messages] == ["1900-01-01T00:00:00Z", "2023-05-08T13:56:00Z"]


@pytest.mark.parametrize("offset", ["9223372036854775806", "99999999999999999999", "1000000001"])
def test_huge_offsets_are_422(api, store, offset):
    assert_error(api.get(f"{store}/sessions", params={"offset": offset}), 422, "validation_error")


@pytest.mark.parametrize(
    ("content_type", "raw"),
    [
        ("application/octet-stream", b'\xff\xfe{"events": []}'),
        ("application/gzip", b"\x1f\x8b\x08\x00\x00\x00\x00\x00"),
        ("application/json", b'{"events": [{"role": "user", "content": "h\xffi"}]}'),
        ("text/plain", '{"events": [{"role": "user", "content": "é"}]}'.encode("utf-16")),
    ],
)
def test_bodies_that_are_not_utf8_are_422_and_never_altered(api, store, content_type, raw):
    response = api.post(
        f"{store}/sessions/s/events", content=raw, headers={"content-type": content_type}
    )
    assert_error(response, 422, "validation_error")
    assert _sessions(api, store) == []


def test_a_provider_key_that_is_not_utf8_is_refused_not_mangled(api, store):
    raw = b'{"llm_provider": "openai", "llm_model": "m", "llm_api_key": "sk-\xff\xfe"}'
    response = api.put(store, content=raw, headers={"content-type": "application/json"})
    assert_error(response, 422, "validation_error")
    assert api.get(store).json()["has_llm_api_key"] is False


def test_an_encoded_slash_cannot_reach_another_route(api, store):
    api.post(f"{store}/sessions/victim/events", json={"events": [EVENT]})
    name = store.rsplit("/", 1)[1]
    response = api.delete(f"{BASE}/{name}%2Fsessions%2Fvictim")
    assert response.status_code in (404, 422)
    assert api.get(f"{store}/sessions/victim").status_code == 200


@pytest.mark.parametrize("segment", ["a%3Fb", "a%23b", "a%00b", "a%2Fb", "%2e", "%2e%2e"])
def test_ids_with_encoded_specials_are_422(api, store, segment):
    assert_error(api.get(f"{store}/sessions/{segment}"), 422, "validation_error")
    assert_error(api.put(f"{BASE}/{segment}", json={}), 422, "validation_error")


@pytest.mark.parametrize(
    "url",
    [
        "https://127.0.0.1/v1",
        "https://10.0.0.1/v1",
        "https://169.254.169.254/latest",
        "https://[::1]/v1",
        "https://localhost/v1",
        "https://exa mple.com/v1",
        "https://example.com:99999/v1",
        "https://example.com/v1\n",
        "https://user:pass@example.com/v1",
        "https://127.1/v1",
        "https://2130706433/v1",
        "https://0x7f000001/v1",
        "https://127.0.0.1./v1",
        "https://169.254.169.254./latest",
        "https://example.com:0/v1",
        "http://example.com/v1",
        "javascript:alert(1)",
    ],
)
def test_custom_endpoints_must_be_clean_public_https(api, store, url):
    body = {"llm_provider": "custom", "llm_model": "m", "llm_base_url": url}
    error = assert_error(api.put(store, json=body), 422, "validation_error")
    assert "llm_base_url" in error["details"][0]["problem"]
    assert "user:pass" not in str(error)
    assert api.get(store).json()["llm_provider"] == "none"


def test_unauthenticated_big_body_is_401_not_413(stack):
    import httpx

    response = httpx.post(
        stack.url + f"{BASE}/s/recall", content=b"{" + b" " * 2_000_000 + b"}", timeout=30
    )
    assert_error(response, 401, "unauthorized")
