"""The stdio server answers malformed input as the remote server does: a line that is not
strict JSON is a parse error (-32700), one that is not one JSON-RPC 2.0 message (a batch, a
request with a null ``id``...) an invalid request (-32600), each with ``id`` null, the same
error object the remote server answers for the same body. The SDK's stdio transport alone
answered none of them, and its client waited for ever.

``python -m kividb_memory.mcp`` as a child process, one line in, one line out; its API is
never called (malformed input reaches no tool)."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from kividb_memory.mcp.jsonrpc import MAX_MESSAGE_BYTES, TOO_LARGE
from tests.support.common import ROOT
from tests.support.mcp import FUNCTION, sample

WAIT = 20.0


class StdioServer:
    """The stdio server as a child process, read line by line from a thread."""

    def __init__(self) -> None:
        env = {
            "KIVIDB_API_URL": "http://127.0.0.1:9",
            "KIVIDB_API_KEY": "kvm_stdio_test_key",
            "PATH": "/usr/bin:/bin",
        }
        self.process = subprocess.Popen(
            [sys.executable, "-m", "kividb_memory.mcp"],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def send(self, line: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line)
        self.process.stdin.flush()

    def answer(self) -> dict[str, Any]:
        """The next line the server writes, as JSON (fails after WAIT seconds of silence)."""
        try:
            return json.loads(self.lines.get(timeout=WAIT))
        except queue.Empty:
            raise AssertionError(f"no answer within {WAIT} s") from None

    def ask(self, line: bytes) -> dict[str, Any]:
        self.send(line + b"\n")
        return self.answer()

    def close(self) -> None:
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout=WAIT)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


@pytest.fixture(scope="module")
def server() -> Iterator[StdioServer]:
    child = StdioServer()
    yield child
    child.close()


@pytest.fixture(scope="module")
def handler():
    return FUNCTION.load()


def remote_answer(handler, body: bytes) -> dict[str, Any]:
    answer = handler(sample(body=body.decode("utf-8", "replace")), None)
    assert answer["statusCode"] == 400
    return json.loads(answer["body"])


PING = b'{"jsonrpc": "2.0", "id": 1, "method": "ping"}'


def test_a_well_formed_request_is_answered(server):
    assert server.ask(PING) == {"jsonrpc": "2.0", "id": 1, "result": {}}


@pytest.mark.parametrize(
    ("line", "code"),
    [
        (b"not json", -32700),
        (b"{", -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "id": 2, "method": "ping"}', -32700),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": NaN}}', -32700),
        (b"[]", -32600),
        (b'[{"jsonrpc": "2.0", "id": 1, "method": "ping"}]', -32600),
        (b'{"jsonrpc": "2.0", "id": null, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1.5, "method": "ping"}', -32600),
        (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": 5}', -32600),
        (b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": []}', -32600),
        (b'{"id": 1, "method": "ping"}', -32600),
        (b'"ping"', -32600),
        (b"null", -32600),
    ],
)
def test_malformed_input_is_answered_as_the_remote_server_answers_it(server, handler, line, code):
    answer = server.ask(line)
    assert answer["id"] is None and answer["error"]["code"] == code
    assert answer == remote_answer(handler, line)
    # and the server goes on serving
    assert server.ask(PING) == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_a_line_that_is_not_utf8_is_a_parse_error(server):
    answer = server.ask(b'{"jsonrpc": "2.0", "id": 1, "method": "p\xffing"}')
    assert answer["id"] is None and answer["error"]["code"] == -32700
    assert server.ask(PING)["id"] == 1


def test_a_line_over_the_limit_is_refused_as_the_remote_server_refuses_a_body(server):
    pad = b"x" * MAX_MESSAGE_BYTES
    answer = server.ask(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "pad": "' + pad + b'"}')
    assert answer == {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": TOO_LARGE}}
    assert server.ask(PING) == {"jsonrpc": "2.0", "id": 1, "result": {}}


def test_a_blank_line_is_no_message(server):
    server.send(b"\n  \n")
    assert server.ask(b'{"jsonrpc": "2.0", "id": "after-blank", "method": "ping"}') == {
        "jsonrpc": "2.0",
        "id": "after-blank",
        "result": {},
    }
