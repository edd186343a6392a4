"""Provider text never reaches an answer, a stored error or a log line: loopback providers echo
the API key they were sent, raw and encoded (lower and upper case, spaced, reversed, base64,
base32, hex, URL-encoded, rot13, with zero-width spaces, as JSON escapes), in every place an
error can carry text (``error.message``, ``error.code``, ``error.type``, a top-level ``message``
or ``detail``, a plain-text body, the status line's reason phrase, headers, ``Retry-After``)
and in 200 answers that are unusable (the answer text, ``finish_reason``, ``index``, vector
values).

Checked: the exception a port raises, the HTTP body a route answers, the ``last_error`` a
background run stores on the session and the store, and every log record (every logger at
DEBUG, ours, httpx's and httpcore's) and everything printed (Powertools logs to stdout). A leak
is any of the encodings, or any 12 characters in a row of the key, found in the text after
lower-casing it, URL- and HTML-decoding it and dropping everything but letters and digits.
"""

from __future__ import annotations

import base64
import codecs
import html
import json
import logging
from collections.abc import Callable, Iterator
from typing import Any
from urllib.parse import unquote

import pytest

from agent_memory.errors import AgentMemoryError
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.embeddings import CustomEmbedder, OpenAIEmbedder
from agent_memory.providers.factory import make_language_model
from agent_memory.providers.language_models import (
    AnthropicModel,
    CustomChatModel,
    OpenAIChatModel,
)
from agent_memory.providers.network import CallPolicy
from agent_memory.providers.setting import Outbound, ProviderSetting, in_the_clear
from tests.support.background import World
from tests.support.common import unique
from tests.support.databases import database_client
from tests.support.handlers import build, invoke
from tests.support.model_servers import RawHTTPServer, ScriptedChatServer, response_bytes, send

KEY = "sk-Echo_Test-0123456789abcdefGHIJklmnOPQR"
DIMS = 8


def key_forms(key: str) -> dict[str, str]:
    """The key as a provider might echo it."""
    raw = key.encode()
    return {
        "raw": key,
        "lower case": key.lower(),
        "upper case": key.upper(),
        "swapped case": key.swapcase(),
        "spaced": " ".join(key),
        "reversed": key[::-1],
        "base64": base64.b64encode(raw).decode(),
        "base64url": base64.urlsafe_b64encode(raw).decode().rstrip("="),
        "base32": base64.b32encode(raw).decode(),
        "base32 lower case": base64.b32encode(raw).decode().lower(),
        "hex": raw.hex(),
        "hex upper case": raw.hex().upper(),
        "url-encoded": "".join(f"%{byte:02X}" for byte in raw),
        "rot13": codecs.encode(key, "rot13"),
        "zero-width spaced": "\u200b".join(key),
        "json escapes": "".join(f"\\u{ord(char):04x}" for char in key),
    }


FORMS = key_forms(KEY)
ASCII_FORMS = {name: form for name, form in FORMS.items() if form.isascii() and "\\" not in form}


def _squash(text: str) -> str:
    return "".join(char for char in text.lower() if char.isascii() and char.isalnum())


_NEEDLES = {name: _squash(form) for name, form in FORMS.items()}
_KEY = _squash(KEY)
_NEEDLES |= {f"12 characters of the key at {i}": _KEY[i : i + 12] for i in range(len(_KEY) - 11)}


def leaks(text: str) -> list[str]:
    """The forms of the key found in ``text`` (see the module docstring)."""
    views = {_squash(text), _squash(unquote(text)), _squash(html.unescape(text))}
    return sorted(name for name, needle in _NEEDLES.items() if any(needle in v for v in views))


def test_the_leak_detector_finds_every_form():
    for name, form in FORMS.items():
        assert leaks(f"The provider said: {form}."), name
    assert leaks("The provider at 127.0.0.1 rejected the request with HTTP 401.") == []


@pytest.fixture
def logs(caplog, capfd) -> Callable[[], str]:
    """Every log record (every logger at DEBUG) and everything printed so far, as one text."""
    caplog.set_level(logging.DEBUG)

    def text() -> str:
        out, err = capfd.readouterr()
        records = [f"{r.getMessage()} {r.args!r} {r.__dict__!r}" for r in caplog.records]
        return "\n".join([*records, caplog.text, out, err])

    return text


def no_retries() -> ProviderClient:
    return ProviderClient(CallPolicy(max_retries=1, deadline=10.0), sleep=lambda _: None)


# --------------------------------------------------------------------------------------------
# Hostile answers
# --------------------------------------------------------------------------------------------

Scripter = Callable[[ScriptedChatServer, str, str], None]


def error_everywhere(server: ScriptedChatServer, name: str, form: str) -> None:
    reason = form if name in ASCII_FORMS else "Unauthorized"
    error = {"message": f"Incorrect API key provided: {form}", "type": form, "code": form}
    server.fail(
        401,
        body={"type": "error", "error": {**error, "param": form}, "message": form},
        reason=reason,
        headers={"X-Echo": reason, "WWW-Authenticate": f'Bearer error="{reason}"'},
    )


def other_shapes(server: ScriptedChatServer, name: str, form: str) -> None:
    server.fail(400, body={"message": form, "detail": [{"loc": ["body"], "msg": form}]})


def plain_text(server: ScriptedChatServer, name: str, form: str) -> None:
    server.fail(403, body=f"<html><body>forbidden for key {form}</body></html>")


def retried_then_exhausted(server: ScriptedChatServer, name: str, form: str) -> None:
    retry_after = form if name in ASCII_FORMS else "soon"
    server.fail(429, headers={"Retry-After": retry_after}, body={"error": {"message": form}})
    server.fail(503, body={"error": {"message": form, "type": "overloaded_error"}})


def unusable_text(server: ScriptedChatServer, name: str, form: str) -> None:
    for text in (f"Sorry, your key {form} cannot be used.", '{"key": "' + form + '",}'):
        if server.shape == "anthropic":
            body: dict[str, Any] = {
                "content": [{"type": "text", "text": text}],
                "stop_reason": form,
            }
        else:
            body = {"choices": [{"message": {"content": text}, "finish_reason": form}]}
        server.reply_raw(body)


def not_json(server: ScriptedChatServer, name: str, form: str) -> None:
    server.fail(200, body=f"<html>gateway error for {form}</html>")


def wrong_shape(server: ScriptedChatServer, name: str, form: str) -> None:
    server.reply_raw({"id": form, "object": form, "error": {"message": form}})


CHAT_SCRIPTS: list[Scripter] = [
    error_everywhere,
    other_shapes,
    plain_text,
    retried_then_exhausted,
    unusable_text,
    not_json,
    wrong_shape,
]


@pytest.mark.parametrize("script", CHAT_SCRIPTS, ids=lambda s: s.__name__)
@pytest.mark.parametrize("provider", ["openai", "anthropic", "custom"])
def test_language_models_never_repeat_an_echoed_key(provider, script, logs):
    shape = "anthropic" if provider == "anthropic" else "openai"
    with ScriptedChatServer(shape) as server:
        client = no_retries()
        model: OpenAIChatModel | AnthropicModel | CustomChatModel
        if provider == "openai":
            model = OpenAIChatModel(KEY, "gpt-4o-mini", base_url=server.url, client=client)
        elif provider == "anthropic":
            model = AnthropicModel(KEY, "claude", base_url=server.url, client=client)
        else:
            model = CustomChatModel(server.url, "m", KEY, allow_private=True, client=client)
        for name, form in FORMS.items():
            script(server, name, form)
            with pytest.raises(AgentMemoryError) as error:
                model.complete_json("Answer in JSON.", "hello")
            said = f"{error.value} {error.value!r} {error.value.details} {error.value.__dict__}"
            assert leaks(said) == [], (name, said)
        assert leaks(logs()) == []
        assert all(KEY in str(r.headers) for r in server.requests)  # the key was sent each time


EMBEDDING_ANSWERS: list[Callable[[str, str], bytes]] = [
    lambda name, form: response_bytes(
        401,
        json.dumps({"error": {"message": form, "type": form, "code": form}}).encode(),
        reason=form if name in ASCII_FORMS else "Unauthorized",
    ),
    lambda name, form: response_bytes(
        200, json.dumps({"data": [{"index": form, "embedding": [1.0] * DIMS}]}).encode()
    ),
    lambda name, form: response_bytes(
        200, json.dumps({"data": [{"index": 0, "embedding": [form] * DIMS}]}).encode()
    ),
    lambda name, form: response_bytes(200, json.dumps({"data": form}).encode()),
    lambda name, form: response_bytes(200, f"not json: {form}".encode()),
]


@pytest.mark.parametrize("answer", range(len(EMBEDDING_ANSWERS)))
@pytest.mark.parametrize("provider", ["openai", "custom"])
def test_embedders_never_repeat_an_echoed_key(provider, answer, logs):
    with RawHTTPServer() as server:
        client = no_retries()
        embedder: OpenAIEmbedder | CustomEmbedder
        if provider == "openai":
            embedder = OpenAIEmbedder(KEY, "m", DIMS, base_url=server.url, client=client)
        else:
            embedder = CustomEmbedder(server.url, "m", DIMS, KEY, allow_private=True, client=client)
        for name, form in FORMS.items():
            server.push(send(EMBEDDING_ANSWERS[answer](name, form)))
            with pytest.raises(AgentMemoryError) as error:
                embedder.embed(["a memory"])
            said = f"{error.value} {error.value!r} {error.value.__dict__}"
            assert leaks(said) == [], (name, said)
        assert leaks(logs()) == []


# --------------------------------------------------------------------------------------------
# Through the routes and the background run
# --------------------------------------------------------------------------------------------


@pytest.fixture
def hostile_embeddings() -> Iterator[RawHTTPServer]:
    with RawHTTPServer() as server:
        yield server


@pytest.fixture
def echo_store(tenant, function_env, monkeypatch, hostile_embeddings):
    """A store whose embedding model is the hostile server, holding ``KEY``."""
    monkeypatch.setenv("KIVIDB_ALLOW_PRIVATE_ENDPOINTS", "1")
    name = unique("echo")
    body = {
        "embed_provider": "custom",
        "embed_model": "m",
        "embed_base_url": hostile_embeddings.url,
        "embed_api_key": KEY,
        "dimensions": DIMS,
    }
    status, answer, _ = invoke("put_store", build("put_store", tenant, name, body=body))
    assert status == 201, answer
    yield name
    invoke("delete_store", build("delete_store", tenant, name))


ROUTES = [
    ("add_memory", {"text": "Alice plays chess", "actor_id": "alice"}),
    ("search_memories", {"query": "chess", "mode": "semantic", "actor_id": "alice"}),
]


@pytest.mark.parametrize("answer", range(len(EMBEDDING_ANSWERS)))
def test_routes_never_answer_or_log_an_echoed_key(
    tenant, echo_store, hostile_embeddings, logs, answer
):
    for name, form in FORMS.items():
        for route, body in ROUTES:
            hostile_embeddings.push(send(EMBEDDING_ANSWERS[answer](name, form)))
            status, answered, headers = invoke(route, build(route, tenant, echo_store, body=body))
            assert status == 502, answered
            text = json.dumps(answered) + json.dumps(headers)
            assert leaks(text) == [], (route, name, text)
    assert leaks(logs()) == []
    assert hostile_embeddings.requests  # the routes did call the provider
    assert all(r.headers["authorization"] == f"Bearer {KEY}" for r in hostile_embeddings.requests)


@pytest.fixture
def world(client, redis_url):
    with ScriptedChatServer("openai") as model_server, RawHTTPServer() as embed_server:
        made = World(client, database_client(redis_url, binary=True), model_server, embed_server)
        made.model = make_language_model(
            ProviderSetting("llm", "custom", "scripted", model_server.url, None, KEY),
            Outbound(no_retries(), True, in_the_clear),
        )
        yield made
        made.close()


@pytest.mark.parametrize("script", CHAT_SCRIPTS, ids=lambda s: s.__name__)
def test_background_runs_never_store_or_log_an_echoed_key(world, script, logs):
    for number, (name, form) in enumerate(FORMS.items()):
        session = f"s{number}"
        world.say(session, "I play chess on Sundays")
        world.quiet()
        script(world.model_server, name, form)
        report = world.run(session)
        assert report.outcome == "failed", (name, report)
        error = world.meta(session).extraction.last_error
        _, store_error = world.sessions.extraction_record()
        assert error and store_error
        said = f"{error} {store_error} {report}"
        assert leaks(said) == [], (name, said)
    assert leaks(logs()) == []
