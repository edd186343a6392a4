"""Scripted language-model servers on loopback for tests: real HTTP, scripted answers.

``ScriptedChatServer("openai")`` speaks OpenAI's chat-completions shape at
``POST {url}/chat/completions``; ``ScriptedChatServer("anthropic")`` speaks Anthropic's Messages
shape at ``POST {url}/messages``. ``url`` is ``http://127.0.0.1:PORT/v1``. Each is a stdlib
``ThreadingHTTPServer`` on port 0 serving from a daemon thread while the ``with`` block runs::

    with ScriptedChatServer("openai") as server:
        server.reply('{"summary": "..."}', input_tokens=120, output_tokens=30)
        server.fail(429, headers={"Retry-After": "1"})   # answered first: queue order
        ...
        server.requests[0].body["messages"]

Answers are taken from a queue in order (``reply``, ``reply_raw``, ``fail``); when it is empty
the server answers 200 with the text ``responder(body)`` builds, or ``{"memories": []}`` when
``responder`` is None. Every request to any path is recorded in ``requests`` (path, lower-case
headers, parsed JSON body, ``time.monotonic()`` on arrival); a path other than the shape's own
answers 404 without consuming the queue.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal

Shape = Literal["openai", "anthropic"]

DEFAULT_TEXT = '{"memories": []}'

# The finish value each shape uses for "cut off at the token limit" and "finished".
_TRUNCATED = {"openai": "length", "anthropic": "max_tokens"}
_FINISHED = {"openai": "stop", "anthropic": "end_turn"}


@dataclass(frozen=True)
class Recorded:
    """One request the server received: ``path`` (with any query), ``headers`` (lower-case
    names), ``body`` (the parsed JSON, or the raw text when it was not JSON) and ``at``
    (``time.monotonic()`` when the request line arrived)."""

    path: str
    headers: dict[str, str]
    body: Any
    at: float


@dataclass(frozen=True)
class _Scripted:
    status: int
    headers: dict[str, str]
    payload: bytes | None  # None: build the 200 answer from ``text``
    text: str
    finish: str
    input_tokens: int
    output_tokens: int
    delay: float


class ScriptedChatServer:
    """A loopback chat-model server with scripted answers (see the module docstring)."""

    def __init__(self, shape: Shape) -> None:
        if shape not in ("openai", "anthropic"):
            raise ValueError(f"unknown shape {shape!r}")
        self.shape: Shape = shape
        self.url = ""
        self.requests: list[Recorded] = []
        self.responder: Callable[[dict[str, Any]], str] | None = None
        self._queue: list[_Scripted] = []
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    @property
    def path(self) -> str:
        """The path this shape answers: ``/v1/chat/completions`` or ``/v1/messages``."""
        return "/v1/chat/completions" if self.shape == "openai" else "/v1/messages"

    # ---- scripting -----------------------------------------------------------------------

    def reply(
        self,
        text: str,
        *,
        finish: str = "stop",
        input_tokens: int = 10,
        output_tokens: int = 5,
        delay: float = 0.0,
    ) -> None:
        """Queue a 200 whose assistant text is ``text``.

        ``finish`` goes in ``choices[0].finish_reason`` (openai) or ``stop_reason``
        (anthropic); ``"length"`` and ``"max_tokens"`` both mean "cut off" and are written as
        the shape spells it, as are ``"stop"`` and ``"end_turn"`` (finished). ``delay`` seconds
        pass before the answer is sent.
        """
        self._push(_Scripted(200, {}, None, text, finish, input_tokens, output_tokens, delay))

    def reply_raw(self, body: dict[str, Any], *, delay: float = 0.0) -> None:
        """Queue a 200 with exactly ``body`` as its JSON (for answers without usage, several
        content blocks, a missing ``choices`` list...)."""
        payload = json.dumps(body).encode()
        self._push(_Scripted(200, {}, payload, "", "", 0, 0, delay))

    def fail(
        self,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | str | None = None,
    ) -> None:
        """Queue an error answer: ``status`` with ``headers``; ``body`` as JSON (a dict), as
        raw text (a str), or by default the shape's own error body with the message
        ``"scripted HTTP <status>"`` (OpenAI ``{"error": {"message", "type", "code"}}``,
        Anthropic ``{"type": "error", "error": {"type", "message"}}``)."""
        if body is None:
            body = self._error_body(status, f"scripted HTTP {status}")
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self._push(_Scripted(status, dict(headers or {}), payload, "", "", 0, 0, 0.0))

    def _push(self, scripted: _Scripted) -> None:
        with self._lock:
            self._queue.append(scripted)

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        if self.shape == "anthropic":
            kind = "rate_limit_error" if status == 429 else "api_error"
            return {"type": "error", "error": {"type": kind, "message": message}}
        return {"error": {"message": message, "type": "scripted", "code": None}}

    # ---- answering -----------------------------------------------------------------------

    def _answer(self, path: str, body: Any) -> tuple[int, dict[str, str], bytes, float]:
        if path.split("?", 1)[0] != self.path:
            missing = json.dumps(self._error_body(404, f"no route {path}")).encode()
            return 404, {}, missing, 0.0
        with self._lock:
            scripted = self._queue.pop(0) if self._queue else None
        if scripted is None:
            text = DEFAULT_TEXT
            if self.responder is not None:
                text = self.responder(body if isinstance(body, dict) else {})
            scripted = _Scripted(200, {}, None, text, "stop", 10, 5, 0.0)
        payload = scripted.payload
        if payload is None:
            payload = json.dumps(self._completion(scripted, body)).encode()
        return scripted.status, scripted.headers, payload, scripted.delay

    def _completion(self, scripted: _Scripted, body: Any) -> dict[str, Any]:
        finish = scripted.finish
        if finish in ("length", "max_tokens"):
            finish = _TRUNCATED[self.shape]
        elif finish in ("stop", "end_turn"):
            finish = _FINISHED[self.shape]
        model = body.get("model") if isinstance(body, dict) else None
        number = next(self._ids)
        if self.shape == "anthropic":
            return {
                "id": f"msg_scripted_{number}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": scripted.text}],
                "stop_reason": finish,
                "stop_sequence": None,
                "usage": {
                    "input_tokens": scripted.input_tokens,
                    "output_tokens": scripted.output_tokens,
                },
            }
        return {
            "id": f"chatcmpl-scripted-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": scripted.text},
                    "finish_reason": finish,
                }
            ],
            "usage": {
                "prompt_tokens": scripted.input_tokens,
                "completion_tokens": scripted.output_tokens,
                "total_tokens": scripted.input_tokens + scripted.output_tokens,
            },
        }

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    # ---- lifetime ------------------------------------------------------------------------

    def __enter__(self) -> ScriptedChatServer:
        server = _Server(self)
        self._server = server
        self.url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        self._thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
        if self._thread is not None:
            self._thread.join(5)
        self._server = None
        self._thread = None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    server: _Server

    def do_POST(self) -> None:
        arrived = time.monotonic()
        scripted = self.server.scripted
        raw = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        body: Any
        try:
            body = json.loads(raw)
        except ValueError:
            body = raw.decode("utf-8", "replace")
        headers = {name.lower(): value for name, value in self.headers.items()}
        scripted._record(Recorded(self.path, headers, body, arrived))
        status, extra, payload, delay = scripted._answer(self.path, body)
        if delay > 0:
            time.sleep(delay)
        try:
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except OSError:  # the client gave up (a timeout test)
            pass

    def log_message(self, format: str, *args: Any) -> None:
        pass


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, scripted: ScriptedChatServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scripted = scripted
