"""Bad input found by trying to break the API: each is a clear 4xx and changes nothing.

Plain httpx, not the Python client: the inputs are ones the client would refuse to build or
would encode differently (raw bytes, bad JSON, wrong types, odd query strings and paths)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from local.bootstrap import start_redis_server
from local.launch import running_stack
from tests.support.common import unique
from tests.support.http import BASE, assert_error
from tests.support.stack import API_KEY

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
def test_custom_endpoints_must_be_clean_public_https(strict_api, url):
    store = f"{BASE}/{unique('strict')}"
    assert strict_api.put(store, json={}).status_code == 201
    body = {"llm_provider": "custom", "llm_model": "m", "llm_base_url": url}
    error = assert_error(strict_api.put(store, json=body), 422, "validation_error")
    assert "llm_base_url" in error["details"][0]["problem"]
    assert "user:pass" not in str(error)
    assert strict_api.get(store).json()["llm_provider"] == "none"


@pytest.fixture(scope="module")
def strict_api(tmp_path_factory) -> Iterator[httpx.Client]:
    """A stack as `make run` starts it, refusing loopback and private model endpoints, on a
    database of its own (the session's stack allows them, for the scripted model; two stacks on
    one database would take each other's background runs)."""
    database = start_redis_server(tmp_path_factory.mktemp("strict-redis"), persist=False)
    env = {
        "REDIS_URL": database.url,
        "KIVIDB_API_KEY": API_KEY,
        "KIVIDB_LOCAL_DIR": str(tmp_path_factory.mktemp("strict-local")),
        "KIVIDB_WORKERS": "1",
    }
    try:
        log = tmp_path_factory.mktemp("strict-logs") / "stack.log"
        with running_stack(env, log=log, timeout=120) as (url, _):
            headers = {"Authorization": f"Bearer {API_KEY}"}
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
                yield client
    finally:
        database.stop()


def test_unauthenticated_big_body_is_401_not_413(stack):
    import httpx

    response = httpx.post(
        stack.url + f"{BASE}/s/recall", content=b"{" + b" " * 2_000_000 + b"}", timeout=30
    )
    assert_error(response, 401, "unauthorized")


# --- integer query parameters: plain digits only --------------------------------------------

DIGITS_ONLY = {
    "error": "validation_error",
    "message": "The request is not valid; see details.",
}
DIGITS_PROBLEM = (
    "must be a whole number written with the digits 0-9 only (no sign, decimal point, "
    "exponent, spaces or other characters), given once"
)


@pytest.mark.parametrize(
    ("path", "name"),
    [
        ("/sessions/s", "recent"),
        ("/sessions", "offset"),
        ("/sessions", "limit"),
        ("/memories", "offset"),
        ("/memories", "limit"),
    ],
)
@pytest.mark.parametrize(
    "raw", ["5.0", "+5", "%2B5", "%205", "5%20", "-5", "5e0", "1e1", "5_0", "0x5", "%D9%A5", ""]
)
def test_an_integer_query_parameter_must_be_plain_digits(api, store, path, name, raw):
    """``raw`` is sent as it is in the URL (``%2B5`` is ``+5``; a bare ``+`` means a space)."""
    api.post(f"{store}/sessions/s/events", json={"events": [EVENT]})
    response = api.get(f"{store}{path}?{name}={raw}")
    assert response.status_code == 422
    assert response.json() == {
        **DIGITS_ONLY,
        "details": [{"field": f"query.{name}", "problem": DIGITS_PROBLEM}],
    }


def test_an_integer_query_parameter_given_twice_is_422(api, store):
    api.post(f"{store}/sessions/s/events", json={"events": [EVENT]})
    response = api.get(f"{store}/sessions/s?recent=1&recent=2")
    assert response.status_code == 422
    assert response.json()["details"] == [{"field": "query.recent", "problem": DIGITS_PROBLEM}]


def test_an_unknown_query_parameter_is_422_and_a_write_with_one_changes_nothing(api, store):
    api.post(f"{store}/sessions/s/events", json={"events": [EVENT]})
    response = api.get(f"{store}/sessions/s?recnt=5")
    assert response.status_code == 422
    assert response.json()["details"] == [
        {
            "field": "query.recnt",
            "problem": "is not a parameter of this route; it takes before_seq, recent",
        }
    ]
    response = api.post(f"{store}/sessions/t/events?actor=u", json={"events": [EVENT]})
    assert response.status_code == 422
    assert response.json()["details"][0]["field"] == "query.actor"
    assert [s["session_id"] for s in _sessions(api, store)] == ["s"]


@pytest.mark.parametrize("raw", ["1", "yes", "True", "on", ""])
def test_a_boolean_query_parameter_is_exactly_true_or_false(api, store, raw):
    response = api.get(f"{store}/memories?include_superseded={raw}")
    assert response.status_code == 422
    assert response.json()["details"] == [
        {
            "field": "query.include_superseded",
            "problem": "must be true or false, in lower case, given once",
        }
    ]
    assert api.get(f"{store}/memories?include_superseded=true").status_code == 200


def test_a_string_query_parameter_given_twice_is_422(api, store):
    response = api.get(f"{store}/memories?actor_id=a&actor_id=b")
    assert response.status_code == 422
    assert response.json()["details"] == [
        {"field": "query.actor_id", "problem": "must be given once"}
    ]


def test_plain_digits_still_work_leading_zeros_included_and_the_range_still_binds(api, store):
    api.post(f"{store}/sessions/s/events", json={"events": [EVENT, EVENT, EVENT]})
    messages = api.get(f"{store}/sessions/s", params={"recent": "02"}).json()["messages"]
    assert [m["seq"] for m in messages] == [2, 3]
    response = api.get(f"{store}/sessions/s", params={"recent": "1001"})
    assert response.status_code == 422
    assert response.json()["details"] == [
        {"field": "query.recent", "problem": "Input should be less than or equal to 1000"}
    ]


# --- JSON bodies: a name given twice is refused, at any depth ---------------------------------


def _duplicate(where: str) -> dict:
    return {
        "error": "validation_error",
        "message": "The request is not valid; see details.",
        "details": [
            {"field": "body", "problem": f"The body is not valid JSON: Detected duplicate {where}"}
        ],
    }


def _post_raw(api, url, text):
    return api.post(url, content=text.encode(), headers={"content-type": "application/json"})


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            '{"events": [{"role": "user", "content": "x"}], "events": []}',
            'key "events" at line 1 column 57',
        ),
        (
            '{"events": [{"role": "user", "content": "x", "content": "y"}]}',
            'key "content" at line 1 column 56',
        ),
        (
            '{"events": [{"role": "user", "content": "x"}, {"role": "tool", "role": "user", '
            '"content": "x"}]}',
            'key "role" at line 1 column 71',
        ),
        (
            '{"actor_id": "u1", "actor_id": "u2", "events": [{"role": "user", "content": "x"}]}',
            'key "actor_id" at line 1 column 31',
        ),
    ],
)
def test_events_with_a_name_given_twice_are_422_and_nothing_is_stored(api, store, text, where):
    """The answer names the repeated name and the column just after its colon."""
    response = _post_raw(api, f"{store}/sessions/s/events", text)
    assert (response.status_code, response.json()) == (422, _duplicate(where))
    assert _sessions(api, store) == []
    assert api.get(f"{store}/sessions/s").status_code == 404


@pytest.mark.parametrize(
    ("text", "where"),
    [
        (
            '{"text": "t", "vector": [1, 0, 0], "metadata": {"k": 1, "k": 2}}',
            'key "k" at line 1 column 61',
        ),
        (
            '{"text": "t", "vector": [1, 0, 0], "metadata": {"a": {"b": [{"c": 1, "c": 1}]}}}',
            'key "c" at line 1 column 74',
        ),
        ('{"text": "t", "text": "u", "vector": [1, 0, 0]}', 'key "text" at line 1 column 22'),
    ],
)
def test_a_memory_with_a_name_given_twice_is_422_and_nothing_is_stored(api, store, text, where):
    assert api.put(store, json={"dimensions": 3}).status_code == 200
    response = _post_raw(api, f"{store}/memories", text)
    assert (response.status_code, response.json()) == (422, _duplicate(where))
    assert api.get(f"{store}/memories").json()["memories"] == []
    assert api.get(store).json()["counts"]["memories"] == 0


def test_store_settings_with_a_name_given_twice_are_422_and_unchanged(api, store):
    response = api.put(
        store,
        content=b'{"summarize_after": 7, "summarize_after": 30}',
        headers={"content-type": "application/json"},
    )
    where = 'key "summarize_after" at line 1 column 42'
    assert (response.status_code, response.json()) == (422, _duplicate(where))
    assert api.get(store).json()["summarize_after"] == 40
