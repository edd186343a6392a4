"""The Python client without a network: what it sends, when it retries, what it raises.

httpx's MockTransport stands in for the API (the end-to-end tests use the real local stack)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime

import httpx
import pydantic
import pytest

from kividb_memory import (
    UNSET,
    ApiConnectionError,
    AsyncMemoryClient,
    AuthenticationError,
    BadGatewayError,
    ConflictError,
    EventIn,
    MemoryClient,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitedError,
    ServerError,
    StorePut,
    UnavailableError,
    UnexpectedResponseError,
    ValidationError,
    _http,
)

KEY = "kvm_secret_key_0123456789abcdefghijklmnop"
NOW = "2026-01-01T00:00:00Z"
EVENTS = {"session_id": "chat-1", "added": 1, "message_count": 1}
MEMORY = {
    "id": "mem_00000000000000000000",
    "text": "t",
    "type": "semantic",
    "actor_id": None,
    "topics": [],
    "metadata": {},
    "importance": None,
    "confidence": None,
    "created_at": NOW,
    "updated_at": NOW,
    "expires_at": NOW,
    "source": None,
    "valid_from": NOW,
}


class Api:
    """A scripted API: answers in order (the last one again), recording every request."""

    def __init__(self, *answers: httpx.Response | Exception) -> None:
        self.answers = list(answers)
        self.requests: list[httpx.Request] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        answer = self.answers.pop(0) if len(self.answers) > 1 else self.answers[0]
        if isinstance(answer, Exception):
            raise answer
        return answer

    def client(self, **options) -> MemoryClient:
        options.setdefault("max_retry_wait", 5.0)
        http = httpx.Client(transport=httpx.MockTransport(self))
        return MemoryClient("https://api.test/", KEY, http_client=http, **options)

    def bodies(self) -> list[object]:
        return [json.loads(r.content) if r.content else None for r in self.requests]


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Waits are recorded, not slept."""
    waits: list[float] = []
    monkeypatch.setattr("kividb_memory.client.time.sleep", waits.append)

    async def asleep(seconds: float) -> None:
        waits.append(seconds)

    monkeypatch.setattr("kividb_memory.async_client.asyncio.sleep", asleep)
    return waits


def error(status: int, code: str, message: str, **headers: str) -> httpx.Response:
    return httpx.Response(status, json={"error": code, "message": message}, headers=headers)


# --- settings ----------------------------------------------------------------------------------


def test_base_url_and_key_come_from_the_environment_when_not_given(monkeypatch):
    monkeypatch.setenv("KIVIDB_API_URL", "http://127.0.0.1:3000/")
    monkeypatch.setenv("KIVIDB_API_KEY", KEY)
    api = Api(httpx.Response(200, json={"stores": [], "unreachable": []}))
    client = MemoryClient(http_client=httpx.Client(transport=httpx.MockTransport(api)))
    assert client.base_url == "http://127.0.0.1:3000"
    client.list_stores()
    assert str(api.requests[0].url) == "http://127.0.0.1:3000/agent-memory"
    assert api.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_arguments_win_over_the_environment(monkeypatch):
    monkeypatch.setenv("KIVIDB_API_URL", "http://env.test")
    monkeypatch.setenv("KIVIDB_API_KEY", "env-key")
    assert MemoryClient("https://arg.test", "arg-key").base_url == "https://arg.test"


@pytest.mark.parametrize(
    ("url", "key", "problem"),
    [
        (None, KEY, "no API URL: pass base_url= or set KIVIDB_API_URL"),
        ("https://api.test", None, "no API key: pass api_key= or set KIVIDB_API_KEY"),
        (
            "ftp://api.test",
            KEY,
            "base_url must be an http:// or https:// URL, not 'ftp://api.test'",
        ),
    ],
)
def test_a_missing_or_wrong_setting_is_a_value_error_naming_it(monkeypatch, url, key, problem):
    monkeypatch.delenv("KIVIDB_API_URL", raising=False)
    monkeypatch.delenv("KIVIDB_API_KEY", raising=False)
    with pytest.raises(ValueError) as raised:
        MemoryClient(url, key)
    assert str(raised.value) == problem


def test_no_repr_shows_the_api_key_or_a_provider_key():
    client = MemoryClient("https://api.test", KEY)
    store = client.store("local", "s")
    settings = StorePut(llm_api_key="sk-provider-secret", embed_api_key="sk-embed-secret")
    shown = " ".join(
        [
            repr(client),
            str(client),
            repr(store),
            repr(client._config),
            repr(settings),
            str(settings),
        ]
    )
    assert KEY not in shown and "sk-provider-secret" not in shown and "sk-embed" not in shown
    assert repr(client) == "MemoryClient(base_url='https://api.test', api_key='***')"
    with pytest.raises(pydantic.ValidationError) as raised:
        StorePut(llm_api_key=12345678)  # type: ignore[arg-type]
    assert "12345678" not in str(raised.value)


def test_an_api_error_shows_status_code_message_and_details_but_no_key():
    api = Api(
        httpx.Response(
            422,
            json={
                "error": "validation_error",
                "message": "The request is not valid; see details.",
                "details": [{"field": "events.0.role", "problem": "Input should be 'user'"}],
            },
        )
    )
    with pytest.raises(ValidationError) as raised:
        api.client().store("local", "s").add_events("c", [{"role": "user", "content": "x"}])
    err = raised.value
    assert (err.status, err.code, err.details[0].field) == (
        422,
        "validation_error",
        "events.0.role",
    )
    assert str(err) == (
        "422 validation_error: The request is not valid; see details. "
        "(events.0.role: Input should be 'user')"
    )
    assert KEY not in repr(err) and KEY not in str(err) and KEY not in str(vars(err))


# --- requests ----------------------------------------------------------------------------------


def test_path_parameters_are_percent_encoded_whole():
    api = Api(httpx.Response(200, json=EVENTS))
    api.client().store("local", "s").add_events("a/b:c@d e", [{"role": "user", "content": "x"}])
    assert api.requests[0].url.raw_path == (
        b"/instances/local/agent-memory/s/sessions/a%2Fb%3Ac%40d%20e/events"
    )


def test_an_empty_id_is_refused_before_any_request():
    api = Api(httpx.Response(200, json=EVENTS))
    with pytest.raises(ValueError, match="session_id must be a non-empty string"):
        api.client().store("local", "s").get_session("")
    assert api.requests == []


@pytest.mark.parametrize("dots", [".", ".."])
def test_a_dot_segment_id_is_refused_before_any_request(dots):
    # httpx (like every HTTP client, RFC 3986 section 5.2.4) removes a dot segment with the
    # segment before it: DELETE .../memories/.. would be DELETE of the store itself.
    api = Api(httpx.Response(204))
    store = api.client().store("local", "s")
    for call in (store.delete_memory, store.delete_session, store.get_memory, store.get_session):
        with pytest.raises(ValueError, match=r"cannot be '\.{1,2}'"):
            call(dots)
    with pytest.raises(ValueError, match="store cannot be"):
        api.client().delete_store("local", dots)
    assert api.requests == []


def test_events_may_be_dicts_or_models_and_only_given_fields_are_sent():
    api = Api(httpx.Response(200, json=EVENTS))
    store = api.client().store("local", "s")
    created = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    store.add_events(
        "c",
        [
            {"role": "user", "content": "hi", "name": "Ann"},
            EventIn(role="assistant", content="hello", created_at=created),
        ],
        actor_id="user-7",
    )
    assert api.bodies() == [
        {
            "actor_id": "user-7",
            "events": [
                {"role": "user", "content": "hi", "name": "Ann"},
                {"role": "assistant", "content": "hello", "created_at": "2026-01-02T03:04:05Z"},
            ],
        }
    ]


def test_a_misspelt_event_field_or_setting_fails_here_and_sends_nothing():
    api = Api(httpx.Response(200, json=EVENTS))
    client = api.client()
    with pytest.raises(pydantic.ValidationError, match="contnet"):
        client.store("local", "s").add_events("c", [{"role": "user", "contnet": "x"}])
    with pytest.raises(pydantic.ValidationError, match="sumarize_after"):
        client.put_store("local", "s", sumarize_after=3)
    with pytest.raises(TypeError, match="events must be a list"):
        client.store("local", "s").add_events("c", {"role": "user", "content": "x"})  # type: ignore[arg-type]
    assert api.requests == []


def test_put_store_sends_the_settings_given_and_an_explicit_none_as_null():
    store = {"name": "s", "instance_id": "local"}  # not a full StoreView: the answer is refused
    api = Api(httpx.Response(200, json=store))
    with pytest.raises(UnexpectedResponseError, match="not StoreView"):
        api.client().put_store("local", "s", summarize_after=30, llm_api_key=None)
    assert api.bodies() == [{"summarize_after": 30, "llm_api_key": None}]


def test_update_memory_sends_only_the_fields_given_and_none_clears_importance():
    api = Api(httpx.Response(200, json=MEMORY))
    store = api.client().store("local", "s")
    store.update_memory("mem_1", importance=None, topics=("a", "b"))
    store.update_memory("mem_1", text="new", type=UNSET)
    assert api.bodies() == [{"importance": None, "topics": ["a", "b"]}, {"text": "new"}]


def test_optional_arguments_not_given_are_left_out():
    api = Api(httpx.Response(200, json={"memories": [MEMORY]}))
    store = api.client().store("local", "s")
    store.search("deploys")
    store.search("deploys", mode="keyword", actor_id="u", types=["semantic"], limit=3)
    assert api.bodies() == [
        {"query": "deploys", "mode": "hybrid"},
        {"query": "deploys", "mode": "keyword", "actor_id": "u", "types": ["semantic"], "limit": 3},
    ]


# --- answers and errors --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, AuthenticationError),
        (403, PermissionDeniedError),
        (404, NotFoundError),
        (409, ConflictError),
        (413, PayloadTooLargeError),
        (422, ValidationError),
        (429, RateLimitedError),
        (500, ServerError),
        (502, BadGatewayError),
        (503, UnavailableError),
        (504, ServerError),
    ],
)
def test_each_error_status_raises_its_exception(status, cls):
    api = Api(error(status, f"code_{status}", "it failed"))
    with pytest.raises(cls) as raised:
        api.client(max_retries=0).get_store("local", "s")
    assert type(raised.value) is cls
    assert (raised.value.status, raised.value.code, raised.value.message) == (
        status,
        f"code_{status}",
        "it failed",
    )
    assert raised.value.url == "https://api.test/instances/local/agent-memory/s"


def test_api_gateways_own_error_body_has_a_code_of_its_status():
    api = Api(httpx.Response(404, json={"message": "Not Found"}))
    with pytest.raises(NotFoundError) as raised:
        api.client().get_store("local", "s")
    assert (raised.value.code, raised.value.message) == ("http_404", "Not Found")


def test_an_error_without_json_keeps_the_start_of_its_text():
    api = Api(httpx.Response(502, text="<html>Bad Gateway</html>"))
    with pytest.raises(BadGatewayError) as raised:
        api.client().get_store("local", "s")
    assert (raised.value.code, raised.value.message) == (
        "http_502",
        "Bad Gateway: <html>Bad Gateway</html>",
    )


def test_answers_ignore_fields_a_newer_server_adds():
    api = Api(httpx.Response(200, json={**EVENTS, "shiny": [1, 2]}))
    result = api.client().store("l", "s").add_events("c", [{"role": "user", "content": "x"}])
    assert result.model_dump() == EVENTS


def test_a_204_answer_returns_none():
    api = Api(httpx.Response(204))
    assert api.client().store("l", "s").delete_memory("mem_1") is None
    assert api.requests[0].method == "DELETE"


# --- retries -------------------------------------------------------------------------------------


def test_a_503_with_retry_after_is_retried_after_that_wait_for_a_read(no_sleep):
    api = Api(
        error(503, "database_unavailable", "down", **{"Retry-After": "1"}),
        httpx.Response(200, json={"stores": [], "unreachable": []}),
    )
    api.client().list_stores()
    assert len(api.requests) == 2 and no_sleep == [1.0]


def test_retry_after_as_an_http_date_is_honoured():
    later = datetime.now(UTC) + timedelta(seconds=3)
    wait = _http.retry_after_seconds(format_datetime(later, usegmt=True))
    assert wait is not None and 1.5 < wait <= 3.0
    assert _http.retry_after_seconds("soon") is None
    assert _http.retry_after_seconds("Mon, 01 Jan 2001 00:00:00 GMT") == 0.0


@pytest.mark.parametrize("value", ["²", "1²", "٣", "１", "-1", "1.5", "0x10", ""])
def test_retry_after_reads_ascii_delay_seconds_only(value):
    # "²".isdigit() is True and float("²") raises: such a header once crashed the retry loop
    assert _http.retry_after_seconds(value) is None


def test_a_retry_after_of_many_digits_is_no_retry(no_sleep):
    api = Api(error(503, "database_unavailable", "down", **{"Retry-After": "9" * 400}))
    with pytest.raises(UnavailableError):
        api.client().list_stores()
    assert len(api.requests) == 1 and no_sleep == []
    assert _http.retry_after_seconds("7" * 15) == 777_777_777_777_777.0


def test_retries_stop_after_max_retries_and_the_last_error_is_raised(no_sleep):
    api = Api(error(503, "database_unavailable", "down", **{"Retry-After": "0"}))
    with pytest.raises(UnavailableError) as raised:
        api.client(max_retries=3).get_store("local", "s")
    assert len(api.requests) == 4 and no_sleep == [0.0, 0.0, 0.0]
    assert raised.value.retry_after == 0.0


def test_a_retry_after_beyond_max_retry_wait_is_not_waited_for(no_sleep):
    api = Api(error(503, "database_unavailable", "down", **{"Retry-After": "60"}))
    with pytest.raises(UnavailableError) as raised:
        api.client(max_retry_wait=20).get_store("local", "s")
    assert len(api.requests) == 1 and no_sleep == [] and raised.value.retry_after == 60.0


WRITES = {
    "add_events": lambda store: store.add_events("c", [{"role": "user", "content": "x"}]),
    "add_memory": lambda store: store.add_memory("fact", vector=[1.0]),
    "update_memory": lambda store: store.update_memory("mem_1", text="x"),
    "extract": lambda store: store.extract("c"),
}


@pytest.mark.parametrize("write", ["add_events", "add_memory", "update_memory", "extract"])
def test_a_write_is_retried_after_a_503_with_the_same_idempotency_key(no_sleep, write):
    api = Api(error(503, "database_unavailable", "down", **{"Retry-After": "1"}))
    with pytest.raises(UnavailableError):
        WRITES[write](api.client(max_retries=2).store("l", "s"))
    keys = [r.headers.get("idempotency-key") for r in api.requests]
    assert len(keys) == 3 and keys[0] is not None and len(set(keys)) == 1
    assert len({r.content for r in api.requests}) == 1 and no_sleep == [1.0, 1.0]


def test_each_write_gets_a_new_key_unless_one_is_given(no_sleep):
    api = Api(httpx.Response(200, json=EVENTS))
    store = api.client().store("l", "s")
    for _ in range(2):
        store.add_events("c", [{"role": "user", "content": "x"}])
    store.add_events("c", [{"role": "user", "content": "x"}], idempotency_key="run-7:0-1")
    keys = [r.headers["idempotency-key"] for r in api.requests]
    assert keys[0] != keys[1] and keys[2] == "run-7:0-1"
    assert all(len(k) == 36 for k in keys[:2])  # UUIDs


@pytest.mark.parametrize("bad", ["", "has space", "x" * 256, "caf\u00e9", "tab\t"])
def test_a_key_that_is_not_1_to_255_visible_ascii_is_refused_before_any_request(bad):
    api = Api(httpx.Response(200, json=EVENTS))
    with pytest.raises(ValueError, match="idempotency_key"):
        api.client().store("l", "s").add_events(
            "c", [{"role": "user", "content": "x"}], idempotency_key=bad
        )
    assert api.requests == []


def test_reads_carry_no_idempotency_key():
    api = Api(httpx.Response(200, json={"stores": [], "unreachable": []}))
    api.client().list_stores()
    assert "idempotency-key" not in api.requests[0].headers


def test_a_409_in_progress_is_retried_after_its_retry_after_for_the_first_answer(no_sleep):
    api = Api(
        error(409, "idempotency_key_in_progress", "running", **{"Retry-After": "1"}),
        httpx.Response(200, json=EVENTS),
    )
    result = api.client().store("l", "s").add_events("c", [{"role": "user", "content": "x"}])
    assert result.added == 1 and no_sleep == [1.0] and len(api.requests) == 2


def test_a_409_without_retry_after_is_not_retried(no_sleep):
    api = Api(error(409, "actor_mismatch", "another actor"))
    with pytest.raises(ConflictError):
        api.client().store("l", "s").add_events("c", [{"role": "user", "content": "x"}])
    assert len(api.requests) == 1 and no_sleep == []


def test_a_429_is_retried_for_every_call_it_was_refused_before_any_work(no_sleep):
    api = Api(
        httpx.Response(429, json={"message": "Too Many Requests"}), httpx.Response(200, json=EVENTS)
    )
    api.client().store("l", "s").add_events("c", [{"role": "user", "content": "x"}])
    assert len(api.requests) == 2 and len(no_sleep) == 1 and 0 <= no_sleep[0] <= 0.5


def test_a_connection_that_could_not_be_made_is_retried_for_every_call(no_sleep):
    api = Api(httpx.ConnectError("refused"), httpx.Response(200, json=EVENTS))
    result = api.client().store("l", "s").add_events("c", [{"role": "user", "content": "x"}])
    assert result.added == 1 and len(api.requests) == 2


FAILURES_AFTER_SENDING = [
    httpx.ReadTimeout("slow"),
    httpx.RemoteProtocolError("cut"),
    httpx.ReadError("x"),
]


@pytest.mark.parametrize("failure", FAILURES_AFTER_SENDING)
def test_a_write_cut_after_it_was_sent_is_sent_again_with_its_key(no_sleep, failure):
    api = Api(failure, httpx.Response(200, json=EVENTS))
    result = api.client().store("l", "s").add_events("c", [{"role": "user", "content": "x"}])
    assert result.added == 1 and len(api.requests) == 2
    assert api.requests[0].headers["idempotency-key"] == api.requests[1].headers["idempotency-key"]


@pytest.mark.parametrize("failure", FAILURES_AFTER_SENDING)
def test_a_failure_after_sending_is_raised_once_the_retries_are_spent(no_sleep, failure):
    api = Api(failure)
    with pytest.raises(ApiConnectionError) as raised:
        api.client(max_retries=1).store("l", "s").add_events(
            "c", [{"role": "user", "content": "x"}]
        )
    assert raised.value.connected is True and len(api.requests) == 2
    assert isinstance(raised.value.__cause__, httpx.TransportError)


def test_an_api_that_cannot_be_reached_is_a_connection_error_after_the_retries(no_sleep):
    api = Api(httpx.ConnectError("refused"))
    with pytest.raises(ApiConnectionError) as raised:
        api.client(max_retries=2).list_stores()
    assert raised.value.connected is False and len(api.requests) == 3
    assert raised.value.message.startswith("GET https://api.test/agent-memory: could not connect")


# --- the async client -----------------------------------------------------------------------------


def _async(api: Api) -> AsyncMemoryClient:
    http = httpx.AsyncClient(transport=httpx.MockTransport(api))
    return AsyncMemoryClient("https://api.test", KEY, http_client=http, max_retry_wait=5)


def run(make: Callable[[], object]) -> object:
    return asyncio.run(make())  # type: ignore[arg-type]


def test_the_async_client_sends_the_same_requests_and_retries_the_same_way(no_sleep):
    api = Api(
        error(503, "database_unavailable", "down", **{"Retry-After": "2"}),
        httpx.Response(
            200,
            json={
                "session_id": "c",
                "actor_id": None,
                "summary": None,
                "messages": [],
                "memories": [MEMORY],
                "context": "ctx",
            },
        ),
    )

    async def go():
        async with _async(api) as client:
            return await client.store("local", "s").recall("c", query="q", limit=3)

    recalled = run(go)
    assert recalled.context == "ctx" and no_sleep == [2.0]  # type: ignore[attr-defined]
    assert api.bodies() == [{"session_id": "c", "query": "q", "limit": 3}] * 2


def test_the_async_client_retries_a_503_after_adding_messages_with_the_same_key(no_sleep):
    api = Api(
        error(503, "database_unavailable", "down", **{"Retry-After": "1"}),
        httpx.Response(200, json=EVENTS),
    )

    async def go():
        async with _async(api) as client:
            await client.store("l", "s").add_events("c", [{"role": "user", "content": "x"}])

    run(go)
    keys = [r.headers["idempotency-key"] for r in api.requests]
    assert len(keys) == 2 and keys[0] == keys[1]


def test_a_client_closes_its_own_pool_but_not_one_it_was_given():
    given = httpx.Client()
    with MemoryClient("https://api.test", KEY, http_client=given):
        pass
    assert not given.is_closed
    own = MemoryClient("https://api.test", KEY)
    with own:
        pass
    assert own._http.is_closed
    given.close()


def test_query_booleans_and_times_are_sent_as_the_api_reads_them():
    api = Api(httpx.Response(200, json={"memories": [], "next_offset": None, "total": 0}))
    moment = datetime(2026, 5, 1, 12, 30, tzinfo=UTC)
    api.client().store("l", "s").list_memories(include_superseded=True, as_of=moment)
    api.client().store("l", "s").list_memories(include_superseded=False)
    assert [dict(r.url.params) for r in api.requests] == [
        {"include_superseded": "true", "as_of": "2026-05-01T12:30:00+00:00"},
        {"include_superseded": "false"},
    ]
    assert b"as_of=2026-05-01T12%3A30%3A00%2B00%3A00" in api.requests[0].url.raw_path


def test_listing_filters_are_sent_as_the_api_reads_them_and_a_comma_topic_is_refused():
    api = Api(httpx.Response(200, json={"memories": [], "next_offset": None, "total": 0}))
    store = api.client().store("l", "s")
    store.list_memories(topics=["ops", "on-call"], metadata={"team": "ops", "n": 1})
    assert dict(api.requests[0].url.params) == {
        "topics": "ops,on-call",
        "metadata": '{"team":"ops","n":1}',
    }
    with pytest.raises(ValueError, match="without commas"):
        store.list_memories(topics=["a,b"])
    assert len(api.requests) == 1


def test_search_filters_and_recall_types_go_in_the_body():
    api = Api(httpx.Response(200, json={"memories": []}))
    store = api.client().store("l", "s")
    store.search(
        "q", topics=("ops",), metadata={"team": "ops"}, created_after="2026-01-01T00:00:00Z"
    )
    assert api.bodies() == [
        {
            "query": "q",
            "mode": "hybrid",
            "topics": ["ops"],
            "metadata": {"team": "ops"},
            "created_after": "2026-01-01T00:00:00Z",
        }
    ]
    empty = {
        "session_id": "c",
        "actor_id": None,
        "summary": None,
        "messages": [],
        "memories": [],
        "context": "",
    }
    recall = Api(httpx.Response(200, json=empty))
    recall.client().store("l", "s").recall("c", types=["episodic"])
    assert recall.bodies() == [{"session_id": "c", "types": ["episodic"]}]
