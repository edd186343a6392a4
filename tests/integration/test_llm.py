"""Language models against real HTTP servers on loopback (``tests/support/model_servers.py``)
that speak OpenAI's chat-completions shape and Anthropic's Messages shape with scripted answers.

Retries sleep through an injected recorder, except the one test that checks a real
``Retry-After: 2`` is honoured (measured from the server's own arrival times).
"""

import json
import logging
from http import HTTPStatus

import pytest

from agent_memory.edge.http_errors import error_body, status_of
from agent_memory.errors import (
    EndpointRefused,
    ModelAnswerInvalid,
    ProviderRejected,
    ProviderUnavailable,
    ValidationFailed,
)
from agent_memory.observability import logger
from agent_memory.providers import client as providers
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.factory import make_language_model
from agent_memory.providers.language_models import (
    JSON_REMINDER,
    AnthropicModel,
    Completion,
    CustomChatModel,
    OpenAIChatModel,
)
from agent_memory.providers.setting import Outbound, ProviderSetting, in_the_clear
from tests.support.model_servers import ScriptedChatServer

KEY = "sk-test-llm-0123456789abcdefSECRET"
SYSTEM = 'Extract memories. Answer with a JSON object {"memories": [...]}.'
USER = "user: I moved to Lisbon last spring and I drink my coffee black."
ANSWER = '{"memories": [{"text": "Lives in Lisbon", "type": "fact", "topics": ["home"]}]}'
DATA = json.loads(ANSWER)


@pytest.fixture
def openai_server():
    with ScriptedChatServer("openai") as server:
        yield server


@pytest.fixture
def anthropic_server():
    with ScriptedChatServer("anthropic") as server:
        yield server


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def client(sleeps):
    """Retries record their wait instead of sleeping; jitter at its maximum (rand = 1)."""
    return ProviderClient(sleep=sleeps.append, rand=lambda: 1.0)


def openai(server: ScriptedChatServer, client: ProviderClient) -> OpenAIChatModel:
    return OpenAIChatModel(KEY, "gpt-4o-mini", base_url=server.url, client=client)


def anthropic(server: ScriptedChatServer, client: ProviderClient) -> AnthropicModel:
    return AnthropicModel(KEY, "claude-sonnet-4-5", base_url=server.url, client=client)


def custom(server: ScriptedChatServer, client: ProviderClient, **kw) -> CustomChatModel:
    kw.setdefault("allow_private", True)
    return CustomChatModel(server.url, "llama3.1:8b", client=client, **kw)


@pytest.fixture(params=["openai", "anthropic", "custom"])
def any_model(request, client):
    """Each provider against a server of its shape: ``(model, server)``; all hold ``KEY``."""
    shape = "anthropic" if request.param == "anthropic" else "openai"
    with ScriptedChatServer(shape) as server:
        if request.param == "custom":
            yield custom(server, client, api_key=KEY), server
        else:
            yield (openai if shape == "openai" else anthropic)(server, client), server


# --------------------------------------------------------------------------------------------
# Request shapes
# --------------------------------------------------------------------------------------------


def test_openai_request_has_the_chat_completions_shape(openai_server, client):
    openai_server.reply(ANSWER)
    completion = openai(openai_server, client).complete_json(SYSTEM, USER, max_tokens=300)
    assert completion == Completion(DATA, 10, 5)
    [seen] = openai_server.requests
    assert seen.path == "/v1/chat/completions"
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.headers["content-type"] == "application/json"
    assert seen.body == {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER},
        ],
        "max_completion_tokens": 300,
        "response_format": {"type": "json_object"},
    }
    assert KEY not in json.dumps(seen.body) and KEY not in seen.path


def test_anthropic_request_has_the_messages_shape(anthropic_server, client):
    anthropic_server.reply(ANSWER)
    completion = anthropic(anthropic_server, client).complete_json(SYSTEM, USER)
    assert completion.data == DATA
    [seen] = anthropic_server.requests
    assert seen.path == "/v1/messages"
    assert seen.headers["x-api-key"] == KEY
    assert seen.headers["anthropic-version"] == "2023-06-01"
    assert seen.headers["content-type"] == "application/json"
    assert "authorization" not in seen.headers
    assert seen.body == {
        "model": "claude-sonnet-4-5",
        "max_tokens": 4096,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": USER}],
    }
    assert KEY not in json.dumps(seen.body) and KEY not in seen.path


def test_custom_request_has_openais_shape_with_max_tokens_and_an_optional_key(
    openai_server, client
):
    custom(openai_server, client).complete_json(SYSTEM, USER, max_tokens=512)
    custom(openai_server, client, api_key=KEY).complete_json(SYSTEM, USER)
    first, second = openai_server.requests
    assert first.path == second.path == "/v1/chat/completions"
    assert "authorization" not in first.headers
    assert first.body == {
        "model": "llama3.1:8b",
        "messages": [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": USER},
        ],
        "max_tokens": 512,
        "response_format": {"type": "json_object"},
    }
    assert second.headers["authorization"] == f"Bearer {KEY}"
    assert KEY not in json.dumps(second.body)


def test_json_is_asked_for_when_no_message_mentions_it(any_model):
    model, server = any_model
    model.complete_json("Summarize the conversation.", "user: hello")
    body = server.requests[0].body
    user = body["messages"][-1]["content"]
    assert user == f"user: hello\n\n{JSON_REMINDER}"
    model.complete_json(SYSTEM, "user: hello")
    assert server.requests[1].body["messages"][-1]["content"] == "user: hello"


def test_the_servers_default_answer_is_built_by_the_responder(openai_server, client):
    openai_server.responder = lambda body: json.dumps({"echo": body["model"]})
    assert openai(openai_server, client).complete_json(SYSTEM, USER).data == {"echo": "gpt-4o-mini"}
    openai_server.responder = None
    assert openai(openai_server, client).complete_json(SYSTEM, USER).data == {"memories": []}


def test_repr_never_shows_the_key(openai_server, anthropic_server, client):
    for model in (
        openai(openai_server, client),
        anthropic(anthropic_server, client),
        custom(openai_server, client, api_key=KEY),
    ):
        assert KEY not in repr(model) and "127.0.0.1" in repr(model)


# --------------------------------------------------------------------------------------------
# Answers: usage, text, JSON
# --------------------------------------------------------------------------------------------


def test_usage_tokens_are_read_from_each_shape(any_model):
    model, server = any_model
    server.reply(ANSWER, input_tokens=234, output_tokens=56)
    completion = model.complete_json(SYSTEM, USER)
    assert (completion.input_tokens, completion.output_tokens) == (234, 56)


@pytest.mark.parametrize(
    "reported",
    [9_200_000_000_000_000_000, 2**63 + 5, 2**64 * 10**6, 1_131],
)
def test_a_count_over_what_the_request_could_use_counts_as_the_most_it_could(any_model, reported):
    """Issue 32: a custom model answering ``usage.prompt_tokens`` 9.2e18 used up its
    organization's daily tokens in one call, and one above 2^63 broke the run's counting. Input
    tokens count at most one per byte sent plus 1,000, output tokens at most ``max_tokens``
    (``providers.token_counts``), for every shape, summed over both attempts."""
    model, server = any_model
    server.reply(ANSWER, input_tokens=reported, output_tokens=reported)
    completion = model.complete_json(SYSTEM, USER, max_tokens=300)
    sent = (
        len(SYSTEM.encode())
        + len(USER.encode())
        + len("\n\n" + JSON_REMINDER) * ("json" not in (SYSTEM + USER).lower())
    )
    assert completion.input_tokens == min(reported, sent + 1_000)
    assert completion.output_tokens == 300
    server.reply("not json", input_tokens=reported, output_tokens=reported)
    server.reply(ANSWER, input_tokens=reported, output_tokens=reported)
    twice = model.complete_json(SYSTEM, USER, max_tokens=300)
    assert (twice.input_tokens, twice.output_tokens) == (2 * completion.input_tokens, 600)


def test_a_count_that_is_not_a_whole_number_counts_zero(openai_server, client):
    for bad in (9.2e18, "9200000000000000000", -5, True, None, [1]):
        openai_server.reply_raw(
            {
                "choices": [{"message": {"content": ANSWER}, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": bad, "completion_tokens": bad},
            }
        )
        assert openai(openai_server, client).complete_json(SYSTEM, USER) == Completion(DATA, 0, 0)


def test_missing_usage_counts_zero(openai_server, anthropic_server, client):
    openai_server.reply_raw(
        {"choices": [{"index": 0, "message": {"content": ANSWER}, "finish_reason": "stop"}]}
    )
    anthropic_server.reply_raw(
        {"content": [{"type": "text", "text": ANSWER}], "stop_reason": "end_turn", "usage": None}
    )
    assert openai(openai_server, client).complete_json(SYSTEM, USER) == Completion(DATA, 0, 0)
    assert anthropic(anthropic_server, client).complete_json(SYSTEM, USER) == Completion(DATA, 0, 0)


def test_anthropic_text_is_the_text_blocks_joined(anthropic_server, client):
    anthropic_server.reply_raw(
        {
            "type": "message",
            "content": [
                {"type": "thinking", "thinking": '{"draft": true}', "signature": "x"},
                {"type": "text", "text": '{"summary": "The user '},
                {"type": "text", "text": 'lives in Lisbon."}'},
            ],
            "stop_reason": "end_turn",
            "usage": {"input_tokens": 7, "output_tokens": 3},
        }
    )
    completion = anthropic(anthropic_server, client).complete_json(SYSTEM, USER)
    assert completion == Completion({"summary": "The user lives in Lisbon."}, 7, 3)


@pytest.mark.parametrize(
    "text",
    [
        f"```json\n{ANSWER}\n```",
        f"Here you go:\n\n{ANSWER}\n\nHope this helps!",
        f"Sure.\n```\n{ANSWER}\n```",
    ],
    ids=["json-fence", "prose", "prose-and-plain-fence"],
)
def test_fenced_and_prose_wrapped_answers_are_parsed(any_model, text):
    model, server = any_model
    server.reply(text)
    assert model.complete_json(SYSTEM, USER).data == DATA
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("first", "finish"),
    [
        ('{"memories": [{"text": "Lives in', "length"),  # cut off at the token limit
        ("", "stop"),  # empty
        ("No memories worth keeping here.", "stop"),  # prose only
        ("{'memories': []}", "stop"),  # invalid JSON
    ],
    ids=["truncated", "empty", "prose-only", "invalid"],
)
def test_a_bad_answer_is_asked_for_once_more(any_model, first, finish):
    model, server = any_model
    server.reply(first, finish=finish, input_tokens=100, output_tokens=20)
    server.reply(ANSWER, input_tokens=100, output_tokens=30)
    completion = model.complete_json(SYSTEM, USER)
    assert completion == Completion(DATA, 200, 50)  # both attempts were billed
    first_request, second_request = server.requests
    assert first_request.body == second_request.body  # the same request, asked again


def test_an_answer_marked_truncated_is_retried_even_if_it_parses(any_model):
    model, server = any_model
    server.reply('{"memories": []}', finish="length")
    server.reply(ANSWER)
    assert model.complete_json(SYSTEM, USER).data == DATA
    assert len(server.requests) == 2


@pytest.mark.parametrize(
    ("text", "finish", "problem"),
    [
        ('{"memories": [{"text": "Lives in', "length", "cut off at its token limit"),
        ("", "stop", "an empty answer"),
        ("Nothing to extract from 4111 1111 1111 1111.", "stop", "no JSON object"),
        ('{"memories": [{"text": "4111 1111 1111 1111",}]}', "stop", "invalid JSON"),
        ('{"memories": [{"text": "4111 1111 1111 1111"', "stop", "a truncated JSON object"),
        ('[{"text": "4111 1111 1111 1111"}]', "stop", "a JSON array"),
    ],
)
def test_two_bad_answers_raise_model_answer_invalid(any_model, caplog, text, finish, problem):
    model, server = any_model
    server.reply(text, finish=finish)
    server.reply(text, finish=finish)
    server.reply(ANSWER)  # never asked for
    caplog.set_level(logging.WARNING, logger=logger.name)
    with pytest.raises(ModelAnswerInvalid) as error:
        model.complete_json(SYSTEM, USER, max_tokens=64)
    message = str(error.value)
    assert problem in message and "answered twice" in message
    assert "4111" not in message and "4111" not in caplog.text  # the answer is never quoted
    assert error.value.code == "model_answer_invalid"
    assert len(server.requests) == 2
    [warning] = [r for r in caplog.records if r.name == logger.name]
    assert "asking once more" in warning.getMessage() and problem in warning.getMessage()


def test_truncation_is_read_from_each_shapes_own_field(openai_server, anthropic_server, client):
    openai_server.reply_raw(
        {"choices": [{"message": {"content": ANSWER}, "finish_reason": "max_tokens"}]}
    )
    anthropic_server.reply_raw(
        {"content": [{"type": "text", "text": ANSWER}], "stop_reason": "length"}
    )
    # Each shape's truncation word in the other's field means nothing: both are accepted.
    assert openai(openai_server, client).complete_json(SYSTEM, USER).data == DATA
    assert anthropic(anthropic_server, client).complete_json(SYSTEM, USER).data == DATA
    anthropic_server.reply(ANSWER, finish="max_tokens")
    anthropic_server.reply(ANSWER, finish="max_tokens")
    with pytest.raises(ModelAnswerInvalid, match="stop reason 'max_tokens'"):
        anthropic(anthropic_server, client).complete_json(SYSTEM, USER)


def test_an_answer_without_the_providers_shape_is_rejected_at_once(any_model):
    model, server = any_model
    server.reply_raw({"id": "x", "object": "unexpected"})
    with pytest.raises(ProviderRejected, match=r"answered without a '(choices|content)' list"):
        model.complete_json(SYSTEM, USER)
    assert len(server.requests) == 1


# --------------------------------------------------------------------------------------------
# Retries and errors
# --------------------------------------------------------------------------------------------


def test_retry_after_is_honoured_for_real(any_model, caplog):
    model, server = any_model
    model._client = ProviderClient(rand=lambda: 0.0)  # no jitter: only Retry-After waits
    server.fail(429, headers={"Retry-After": "2"})
    caplog.set_level(logging.WARNING)
    assert model.complete_json(SYSTEM, USER).data == {"memories": []}
    first, second = server.requests
    assert second.at - first.at >= 2.0
    assert second.at - first.at < 4.0
    assert "HTTP 429" in caplog.text and "retry 1 of 3 in 2.00 s" in caplog.text


@pytest.mark.parametrize("status", [500, 502, 503, 529])
def test_server_errors_are_retried(any_model, sleeps, status):
    model, server = any_model
    server.fail(status)
    server.fail(status)
    server.reply(ANSWER)
    assert model.complete_json(SYSTEM, USER).data == DATA
    assert len(server.requests) == 3
    assert sleeps == [0.5, 1.0]


def test_retries_run_out_as_provider_unavailable(any_model, sleeps):
    model, server = any_model
    for _ in range(4):
        server.fail(503)
    with pytest.raises(ProviderUnavailable, match=r"HTTP 503 (\(api_error\) )?after 4 attempts"):
        model.complete_json(SYSTEM, USER)
    assert len(server.requests) == 4 and len(sleeps) == 3


def test_a_bad_key_is_rejected_with_its_code_and_no_provider_text(any_model, sleeps, caplog):
    model, server = any_model
    message = f"Incorrect API key provided: {KEY}."
    if server.shape == "anthropic":
        body = {"type": "error", "error": {"type": "authentication_error", "message": message}}
        code = "authentication_error"
    else:
        body = {
            "error": {
                "message": message,
                "type": "invalid_request_error",
                "code": "invalid_api_key",
            }
        }
        code = "invalid_api_key"
    server.fail(401, body=body)
    caplog.set_level(logging.DEBUG)
    with pytest.raises(ProviderRejected) as error:
        model.complete_json(SYSTEM, USER)
    assert not isinstance(error.value, ModelAnswerInvalid)
    assert (
        str(error.value)
        == f"The provider at 127.0.0.1 rejected the request with HTTP 401 ({code})."
    )
    assert error.value.status == 401 and error.value.provider_code == code
    assert "Incorrect" not in caplog.text and KEY not in caplog.text
    assert len(server.requests) == 1 and sleeps == []


def test_no_log_line_and_no_error_holds_the_key(any_model, caplog):
    """Every logger at DEBUG (ours, httpx, httpcore) through retries, a bad answer and a
    rejection: the key is in no record and in no exception message."""
    model, server = any_model
    model._client = ProviderClient(sleep=lambda _: None)
    caplog.set_level(logging.DEBUG)
    server.fail(429, headers={"Retry-After": "0"})
    server.fail(500, body=f"upstream said {KEY}")
    server.reply("not json")
    server.reply(ANSWER)
    assert model.complete_json(SYSTEM, USER).data == DATA
    server.fail(403, body={"error": {"message": f"key {KEY} has no access"}})
    with pytest.raises(ProviderRejected) as error:
        model.complete_json(SYSTEM, USER)
    assert KEY not in str(error.value)
    assert len(caplog.records) >= 3  # the retries and the second ask were logged
    for record in caplog.records:
        assert KEY not in record.getMessage()
        assert KEY not in str(record.args)
    assert KEY not in caplog.text
    assert all(
        KEY in r.headers.get("authorization", r.headers.get("x-api-key", ""))
        for r in server.requests
    )


# --------------------------------------------------------------------------------------------
# The custom endpoint: JSON mode fallback and the endpoint guard
# --------------------------------------------------------------------------------------------

REFUSED_FORMAT = {
    "error": {
        "message": "Unrecognized request argument supplied: response_format",
        "type": "invalid_request_error",
        "code": None,
    }
}


def test_custom_endpoint_refusing_response_format_is_asked_again_without_it(
    openai_server, client, caplog
):
    model = custom(openai_server, client, api_key=KEY)
    openai_server.fail(400, body=REFUSED_FORMAT)
    openai_server.reply(ANSWER)
    caplog.set_level(logging.WARNING, logger=logger.name)
    assert model.complete_json("Summarize.", "user: hi").data == DATA
    first, second = openai_server.requests
    assert first.body["response_format"] == {"type": "json_object"}
    assert "response_format" not in second.body
    assert {k: v for k, v in first.body.items() if k != "response_format"} == second.body
    assert JSON_REMINDER in second.body["messages"][1]["content"]  # JSON still asked for
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    text = warning.getMessage()
    assert "127.0.0.1" in text and "response_format" in text and "without it" in text
    assert openai_server.url not in text and KEY not in text
    assert model.json_mode is False
    # For the rest of its life: the next call goes without it at once.
    model.complete_json(SYSTEM, USER)
    assert "response_format" not in openai_server.requests[2].body
    assert len(openai_server.requests) == 3 and len(caplog.records) == 1


def test_a_refusal_of_response_format_in_another_error_shape_is_recognised(openai_server, client):
    model = custom(openai_server, client)
    openai_server.fail(
        400,
        body={
            "object": "error",
            "message": "1 validation error: response_format: Extra inputs are not permitted",
            "type": "BadRequestError",
            "code": 400,
        },
    )  # older vLLM's shape: no "error" object
    openai_server.reply(ANSWER)
    assert model.complete_json(SYSTEM, USER).data == DATA
    assert model.json_mode is False
    assert "response_format" not in openai_server.requests[1].body


def test_custom_endpoint_other_400s_are_rejected_without_dropping_json_mode(openai_server, client):
    model = custom(openai_server, client)
    openai_server.fail(400, body={"error": {"message": "model 'llama3.1:8b' not found"}})
    with pytest.raises(ProviderRejected) as error:
        model.complete_json(SYSTEM, USER)
    assert str(error.value) == "The provider at 127.0.0.1 rejected the request with HTTP 400."
    assert error.value.mentions == {"model"}  # the body names our "model" field, not ours to read
    assert len(openai_server.requests) == 1 and model.json_mode is True
    model.complete_json(SYSTEM, USER)
    assert openai_server.requests[1].body["response_format"] == {"type": "json_object"}


def test_openai_never_drops_json_mode(openai_server, client):
    openai_server.fail(400, body=REFUSED_FORMAT)
    with pytest.raises(ProviderRejected) as error:
        openai(openai_server, client).complete_json(SYSTEM, USER)
    assert error.value.status == 400 and "response_format" in error.value.mentions
    assert "Unrecognized" not in str(error.value)
    assert len(openai_server.requests) == 1


def test_custom_on_http_or_loopback_is_refused_unless_private_is_allowed(openai_server, client):
    with pytest.raises(EndpointRefused, match="must use https://"):
        custom(openai_server, client, allow_private=False).complete_json(SYSTEM, USER)
    https_loopback = openai_server.url.replace("http://", "https://")
    model = CustomChatModel(https_loopback, "m", allow_private=False, client=client)
    with pytest.raises(EndpointRefused, match="loopback"):
        model.complete_json(SYSTEM, USER)
    assert openai_server.requests == []
    assert custom(openai_server, client, allow_private=True).complete_json(SYSTEM, USER)
    assert len(openai_server.requests) == 1


def test_custom_checks_the_endpoint_before_every_request(openai_server, client, monkeypatch):
    checked: list[tuple[str, bool]] = []

    def check(url: str, *, allow_private: bool, timeout: float) -> None:
        assert 0 < timeout <= client.connect_timeout
        checked.append((url, allow_private))

    monkeypatch.setattr(providers, "check_endpoint", check)
    openai_server.fail(400, body=REFUSED_FORMAT)  # then sent again without response_format
    openai_server.reply("no json here")  # then asked once more
    openai_server.reply(ANSWER)
    custom(openai_server, client).complete_json(SYSTEM, USER)
    assert len(openai_server.requests) == 3
    assert checked == [(f"{openai_server.url}/chat/completions", True)] * 3


# --------------------------------------------------------------------------------------------
# make_language_model and the error's HTTP mapping
# --------------------------------------------------------------------------------------------


def _make(provider, model, base_url, key, *, allow_private=False, client):
    setting = ProviderSetting("llm", provider, model, base_url, None, key)
    return make_language_model(setting, Outbound(client, allow_private, in_the_clear))


def test_make_language_model_picks_the_provider(client):
    def make(*args, allow_private: bool = False):
        return _make(*args, allow_private=allow_private, client=client)

    assert make("none", None, None, None) is None
    assert isinstance(make("openai", "gpt-4o-mini", None, KEY), OpenAIChatModel)
    assert isinstance(make("anthropic", "claude-sonnet-4-5", None, KEY), AnthropicModel)
    made = make("custom", "m", "https://llm.example/v1", None, allow_private=True)
    assert isinstance(made, CustomChatModel) and made.allow_private
    assert made._api_key is None
    assert make("custom", "m", "https://llm.example/v1", "")._api_key is None


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("openai", None, None, KEY), "llm_model"),
        (("anthropic", "", None, KEY), "llm_model"),
        (("openai", "m", None, None), "llm_api_key"),
        (("anthropic", "m", None, ""), "llm_api_key"),
        (("anthropic", "m", "https://llm.example/v1", KEY), "llm_base_url"),
        (("custom", "m", None, None), "llm_base_url"),
        (("cohere", "m", None, KEY), "llm_provider"),
    ],
)
def test_make_language_model_refuses_incomplete_settings(client, args, field):
    with pytest.raises(ValidationFailed) as error:
        _make(*args, allow_private=False, client=client)
    assert error.value.details and error.value.details[0]["field"] == field
    assert field in str(error.value)
    assert KEY not in str(error.value)


def test_model_answer_invalid_is_a_502_with_its_own_code():
    exc = ModelAnswerInvalid("The language model m at h answered twice with no JSON object.")
    assert status_of(exc) == HTTPStatus.BAD_GATEWAY
    assert json.loads(error_body(exc.code, exc.message))["error"] == "model_answer_invalid"
