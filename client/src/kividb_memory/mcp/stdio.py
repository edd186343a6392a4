"""The stdio transport, reading its input as strictly as the remote server reads a body.

The SDK's stdio server (``mcp.server.stdio.stdio_server``) parses each line of stdin and, when
a line is not a JSON-RPC message (not JSON, a JSON array) or is a request with a null ``id``
(which it reads as a notification), answers nothing: its client waits for ever. Here each line
is checked first by :func:`kividb_memory.mcp.jsonrpc.refusal`, the remote server's own check,
and a line that fails is answered on stdout with JSON-RPC's error object (``id`` null): a parse
error (-32700) for a line that is not strict JSON (a name given twice, ``NaN``, invalid UTF-8
included), an invalid request (-32600) for one that is not one JSON-RPC 2.0 message, and -32600
with the remote server's 413 message for a line over ``MAX_MESSAGE_BYTES`` (read in bounded
pieces and dropped, never held whole). Those answers go through the SDK's own writer, so a line
on stdout is always one whole message. A blank line is no message and is skipped. The lines
that pass go to the SDK's stdio transport unchanged.
"""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, BinaryIO, cast

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.stdio import stdio_server
from mcp.shared.message import SessionMessage
from mcp.types import ErrorData, JSONRPCError

from kividb_memory.mcp.jsonrpc import INVALID_REQUEST, MAX_MESSAGE_BYTES, TOO_LARGE, refusal

Answer = Callable[[int, str], Awaitable[None]]
"""Answers a refused line: ``await answer(code, message)``."""


class CheckedLines:
    """The lines of ``source`` (stdin's bytes) that are each one JSON-RPC message, as text, for
    the SDK's stdio reader (which only iterates over it); every other line is answered with
    ``answer(code, message)`` and never reaches the SDK."""

    def __init__(self, source: BinaryIO, answer: Answer) -> None:
        self._source = source
        self._answer = answer

    def __aiter__(self) -> AsyncIterator[str]:
        return self._lines()

    async def _read(self) -> bytes:
        # At most one byte over the limit (a line of the limit and its newline fits).
        return await anyio.to_thread.run_sync(
            self._source.readline, MAX_MESSAGE_BYTES + 1, abandon_on_cancel=True
        )

    async def _lines(self) -> AsyncIterator[str]:
        while True:
            line = await self._read()
            if not line:
                return
            if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
                while line and not line.endswith(b"\n"):  # drop the rest of the line
                    line = await self._read()
                await self._answer(INVALID_REQUEST, TOO_LARGE)
                continue
            message = line.rstrip(b"\r\n")  # the line's end is not the message's
            if not message.strip():
                continue
            refused = refusal(message)
            if refused is not None:
                await self._answer(*refused)
                continue
            yield message.decode("utf-8")  # strict JSON is UTF-8 (jiter refused anything else)


async def serve(server: MCPServer[Any], source: BinaryIO | None = None) -> None:
    """Serve ``server`` over this process's stdout, reading ``source`` (default: stdin), until
    the input ends. The SDK's transport still owns stdout (it points file descriptor 1 at stderr
    meanwhile, so that stray output cannot corrupt the stream)."""
    writer: list[Any] = []
    writing = anyio.Event()

    async def answer(code: int, message: str) -> None:
        await writing.wait()
        error = JSONRPCError(jsonrpc="2.0", id=None, error=ErrorData(code=code, message=message))
        await writer[0].send(SessionMessage(error))

    lines = CheckedLines(source if source is not None else sys.stdin.buffer, answer)
    # The SDK's reader only iterates over its stdin (``async for line in stdin``).
    async with stdio_server(stdin=cast("anyio.AsyncFile[str]", lines)) as (reading, writing_to):
        writer.append(writing_to)
        writing.set()
        # MCPServer.run_stdio_async, with this stdin: the SDK (pinned, mcp==2.3.0) has no
        # public way to give its stdio transport another input.
        lowlevel = server._lowlevel_server
        await lowlevel.run(reading, writing_to, lowlevel.create_initialization_options())
