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

``RawHTTPServer`` answers with bytes written as a test scripts them, for what a well-behaved
server never does: a status line or a body trickled a byte at a time, an endless body, a
``Content-Length`` that lies, a compressed answer nobody asked for, a request body read slowly,
or silence. It counts what it accepted and what it managed to send.
"""

from __future__ import annotations

import itertools
import json
import socket
import socketserver
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Literal, Self

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
    reason: str | None
    finish: str
    input_tokens: int
    output_tokens: int
    delay: float


class LoopbackJsonServer:
    """A JSON-over-HTTP server on ``127.0.0.1`` (port 0) serving from a daemon thread while
    the ``with`` block runs, at ``url`` (``http://127.0.0.1:PORT/v1``). Every POST is recorded
    in ``requests``; a subclass answers it in ``_answer(path, body)`` with ``(status, headers,
    JSON bytes, delay seconds, reason phrase or None)``."""

    def __init__(self) -> None:
        self.url = ""
        self.requests: list[Recorded] = []
        self._lock = threading.Lock()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    def _answer(self, path: str, body: Any) -> tuple[int, dict[str, str], bytes, float, str | None]:
        raise NotImplementedError

    def _record(self, recorded: Recorded) -> None:
        with self._lock:
            self.requests.append(recorded)

    def __enter__(self) -> Self:
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


class ScriptedChatServer(LoopbackJsonServer):
    """A loopback chat-model server with scripted answers (see the module docstring)."""

    def __init__(self, shape: Shape) -> None:
        if shape not in ("openai", "anthropic"):
            raise ValueError(f"unknown shape {shape!r}")
        super().__init__()
        self.shape: Shape = shape
        self.responder: Callable[[dict[str, Any]], str] | None = None
        self._queue: list[_Scripted] = []
        self._ids = itertools.count(1)

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
        self._push(_Scripted(200, {}, None, text, None, finish, input_tokens, output_tokens, delay))

    def reply_raw(self, body: dict[str, Any], *, delay: float = 0.0) -> None:
        """Queue a 200 with exactly ``body`` as its JSON (for answers without usage, several
        content blocks, a missing ``choices`` list...)."""
        payload = json.dumps(body).encode()
        self._push(_Scripted(200, {}, payload, "", None, "", 0, 0, delay))

    def fail(
        self,
        status: int,
        *,
        headers: dict[str, str] | None = None,
        body: dict[str, Any] | str | None = None,
        reason: str | None = None,
    ) -> None:
        """Queue an error answer: ``status`` with ``headers``; ``body`` as JSON (a dict), as
        raw text (a str), or by default the shape's own error body with the message
        ``"scripted HTTP <status>"`` (OpenAI ``{"error": {"message", "type", "code"}}``,
        Anthropic ``{"type": "error", "error": {"type", "message"}}``); ``reason`` replaces the
        status line's reason phrase ("Unauthorized")."""
        if body is None:
            body = self._error_body(status, f"scripted HTTP {status}")
        payload = body.encode() if isinstance(body, str) else json.dumps(body).encode()
        self._push(_Scripted(status, dict(headers or {}), payload, "", reason, "", 0, 0, 0.0))

    def _push(self, scripted: _Scripted) -> None:
        with self._lock:
            self._queue.append(scripted)

    def _error_body(self, status: int, message: str) -> dict[str, Any]:
        if self.shape == "anthropic":
            kind = "rate_limit_error" if status == 429 else "api_error"
            return {"type": "error", "error": {"type": kind, "message": message}}
        return {"error": {"message": message, "type": "scripted", "code": None}}

    # ---- answering -----------------------------------------------------------------------

    def _answer(self, path: str, body: Any) -> tuple[int, dict[str, str], bytes, float, str | None]:
        if path.split("?", 1)[0] != self.path:
            missing = json.dumps(self._error_body(404, f"no route {path}")).encode()
            return 404, {}, missing, 0.0, None
        with self._lock:
            scripted = self._queue.pop(0) if self._queue else None
        if scripted is None:
            text = DEFAULT_TEXT
            if self.responder is not None:
                text = self.responder(body if isinstance(body, dict) else {})
            scripted = _Scripted(200, {}, None, text, None, "stop", 10, 5, 0.0)
        payload = scripted.payload
        if payload is None:
            payload = json.dumps(self._completion(scripted, body)).encode()
        return scripted.status, scripted.headers, payload, scripted.delay, scripted.reason

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
        status, extra, payload, delay, reason = scripted._answer(self.path, body)
        if delay > 0:
            time.sleep(delay)
        try:
            self.send_response(status, reason)
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

    def __init__(self, scripted: LoopbackJsonServer) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scripted = scripted


# --------------------------------------------------------------------------------------------
# Raw answers: trickles, floods, lies and silence
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RawRequest:
    """A request ``RawHTTPServer`` read: path, lower-case headers, body, arrival time."""

    path: str
    headers: dict[str, str]
    body: bytes
    at: float


class RawConnection:
    """What a raw answer writes to: ``send`` returns False (and ``gone`` is set) once the client
    has gone away; ``sent`` counts the bytes written."""

    def __init__(self, sock: socket.socket, request: RawRequest) -> None:
        self.sock = sock
        self.request = request
        self.sent = 0
        self.gone = False

    def send(self, data: bytes) -> bool:
        try:
            self.sock.sendall(data)
        except OSError:
            self.gone = True
            return False
        self.sent += len(data)
        return True


RawAnswer = Callable[[RawConnection], None]


def response_bytes(
    status: int,
    body: bytes,
    *,
    reason: str = "OK",
    headers: dict[str, str] | None = None,
    content_length: int | None = -1,
) -> bytes:
    """An HTTP/1.1 response: the status line, ``headers``, ``Content-Type: application/json``,
    ``Connection: close``, a ``Content-Length`` (the body's own by default, the given number
    when it should lie, none for ``None``), then ``body``."""
    lines = [f"HTTP/1.1 {status} {reason}", "Content-Type: application/json", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in (headers or {}).items()]
    if content_length is not None:
        lines.append(f"Content-Length: {len(body) if content_length < 0 else content_length}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


def in_turn(*answers: RawAnswer) -> RawAnswer:
    """Each of ``answers`` on the same connection, one after the other."""

    def answer(connection: RawConnection) -> None:
        for part in answers:
            if connection.gone:
                return
            part(connection)

    return answer


def send(data: bytes) -> RawAnswer:
    """Write ``data`` at once, then close."""

    def answer(connection: RawConnection) -> None:
        connection.send(data)

    return answer


def trickle(data: bytes, *, every: float, step: int = 1) -> RawAnswer:
    """Write ``data`` ``step`` bytes at a time, ``every`` seconds apart."""

    def answer(connection: RawConnection) -> None:
        for start in range(0, len(data), step):
            if start and not _pause(connection, every):
                return
            if not connection.send(data[start : start + step]):
                return

    return answer


def then_wait(data: bytes, seconds: float) -> RawAnswer:
    """Write ``data`` at once, then keep the connection open for ``seconds`` without a byte."""

    def answer(connection: RawConnection) -> None:
        if connection.send(data):
            _pause(connection, seconds)

    return answer


def flood(head: bytes, total: int, *, chunk: int = 64 * 1024) -> RawAnswer:
    """Write ``head``, then ``total`` bytes of spaces as fast as the client takes them."""

    def answer(connection: RawConnection) -> None:
        if not connection.send(head):
            return
        filler = b" " * chunk
        left = total
        while left > 0 and connection.send(filler[: min(chunk, left)]):
            left -= chunk

    return answer


def _pause(connection: RawConnection, seconds: float) -> bool:
    """Sleep ``seconds``, or less when the client closes first; False when it has."""
    if isinstance(connection.sock, ssl.SSLSocket):  # no peeking through TLS: just wait
        time.sleep(seconds)
        return True
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0:
        connection.sock.settimeout(min(left, 0.05))
        try:
            if connection.sock.recv(1, socket.MSG_PEEK) == b"":
                connection.gone = True
                return False
        except TimeoutError:
            continue
        except OSError:
            connection.gone = True
            return False
        time.sleep(min(left, 0.05))
    connection.sock.settimeout(30)
    return True


class RawHTTPServer:
    """A loopback HTTP/1.1 server that writes scripted raw answers (see the module docstring).

    ``url`` is ``http://127.0.0.1:PORT/v1`` (``https://`` with ``tls``, a server-side SSL
    context every connection is wrapped in first). Answers are taken from a queue in order
    (``push``); when it is empty, ``default`` answers (a 200 with ``{}`` unless given). Every
    request is read whole (at ``body_pace`` = ``(bytes, seconds)`` per read when given) and
    recorded in ``requests``; ``connections`` counts the connections accepted, ``sent`` the
    bytes each answer managed to write before the client went away. One answer per connection
    (``Connection: close``).
    """

    def __init__(
        self,
        default: RawAnswer | None = None,
        *,
        body_pace: tuple[int, float] | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.default = default or send(response_bytes(200, b"{}"))
        self.body_pace = body_pace
        self.tls = tls
        self.url = ""
        self.port = 0
        self.requests: list[RawRequest] = []
        self.sent: list[int] = []
        self.connections = 0
        self._queue: list[RawAnswer] = []
        self._lock = threading.Lock()
        self._server: _RawServer | None = None
        self._thread: threading.Thread | None = None

    def push(self, *answers: RawAnswer) -> None:
        """Queue answers for the next requests, in order."""
        with self._lock:
            self._queue.extend(answers)

    def _next(self) -> RawAnswer:
        with self._lock:
            return self._queue.pop(0) if self._queue else self.default

    def _serve(self, sock: socket.socket) -> None:
        with self._lock:
            self.connections += 1
        if self.tls is not None:
            sock.settimeout(30)
            try:
                sock = self.tls.wrap_socket(sock, server_side=True)
            except OSError:
                return
        request = self._read(sock)
        if request is None:
            return
        with self._lock:
            self.requests.append(request)
        connection = RawConnection(sock, request)
        try:
            self._next()(connection)
        finally:
            with self._lock:
                self.sent.append(connection.sent)

    def _read(self, sock: socket.socket) -> RawRequest | None:
        sock.settimeout(30)
        data = b""
        try:
            while b"\r\n\r\n" not in data:
                piece = sock.recv(65536)
                if not piece:
                    return None
                data += piece
            arrived = time.monotonic()
            head, _, body = data.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            headers = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip().lower()] = value.strip()
            length = int(headers.get("content-length", "0"))
            while len(body) < length:
                size, wait = self.body_pace or (65536, 0.0)
                if wait:
                    time.sleep(wait)
                piece = sock.recv(min(size, length - len(body)))
                if not piece:
                    return None
                body += piece
        except (OSError, ValueError, IndexError):
            return None
        return RawRequest(path, headers, body, arrived)

    def __enter__(self) -> RawHTTPServer:
        server = _RawServer(self)
        self._server = server
        self.port = server.server_address[1]
        scheme = "https" if self.tls is not None else "http"
        self.url = f"{scheme}://127.0.0.1:{self.port}/v1"
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


class _RawHandler(socketserver.BaseRequestHandler):
    server: _RawServer

    def handle(self) -> None:
        self.request.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.server.raw._serve(self.request)


class _RawServer(socketserver.ThreadingTCPServer):
    daemon_threads = True
    block_on_close = False
    allow_reuse_address = True

    def __init__(self, raw: RawHTTPServer) -> None:
        super().__init__(("127.0.0.1", 0), _RawHandler)
        self.raw = raw
