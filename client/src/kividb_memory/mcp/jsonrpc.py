"""What both transports check before the SDK reads a message: one JSON-RPC 2.0 message, in
strict JSON, of at most ``MAX_MESSAGE_BYTES``; anything else is answered here with JSON-RPC's
error object (``id`` null), never with silence.

The remote server (:mod:`.remote`) answers a refused body with HTTP 400 (413 when too large);
the stdio server (:mod:`.stdio`) writes the same error object as a line of its own. The SDK
alone answered neither a line that is not JSON, nor a batch, nor a request with a null ``id``
(it read that as a notification), so its client waited for ever.
"""

from __future__ import annotations

import json
from typing import Any

import jiter

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
"""JSON-RPC 2.0 error codes (https://www.jsonrpc.org/specification#error_object)."""

MAX_MESSAGE_BYTES = 2 * 1024 * 1024
"""A tool call's API request is at most 1 MiB (the API's body limit); JSON-RPC adds a little."""

TOO_LARGE = f"Request body too large: at most {MAX_MESSAGE_BYTES} bytes"


def rpc_error(code: int, message: str) -> bytes:
    """A JSON-RPC error object answering no request id (the request could not be read)."""
    error = {"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}}
    return json.dumps(error, separators=(",", ":")).encode("utf-8")


def strict_json_problem(body: bytes) -> str | None:
    """Why ``body`` is not strict JSON, or None when it is: the rules of the API's request bodies
    (``agent_memory.edge.requests.strict_json_loads``, RFC 8259 with I-JSON, RFC 7493): no name
    given twice in one object at any depth (the SDK's parser keeps the last, dropping data without a
    word), no ``NaN`` or ``Infinity``, no lone surrogate, UTF-8 only; one pass of jiter. The
    problem is jiter's message (``Detected duplicate key "id" at line 1 column 20``), which names a
    position, never the request's content."""
    try:
        jiter.from_json(body, allow_inf_nan=False, catch_duplicate_keys=True)
    except ValueError as exc:
        return str(exc)
    return None


def envelope_problem(message: Any) -> str | None:
    """Why ``message`` (a strict JSON body, parsed) is not one JSON-RPC 2.0 message this server
    answers, or None when it is: an object whose ``jsonrpc`` is ``"2.0"``; a request or
    notification (one with ``method``) has a string ``method``, an ``id`` (when it has one)
    that is a string or an integer (MCP: never null; JSON-RPC: no fractional part) and
    ``params`` (when given) that are an object. A batch (an array) is refused: MCP 2025-06-18
    took batching out, and the SDK answers none of it. The SDK alone read a request with a
    null, fractional or object ``id`` as a notification and answered nothing, so its client
    waited for an answer that never came; and it answered a batch or a scalar with a pydantic
    error that repeated the body's content. The problem names the rule only."""
    if isinstance(message, list):
        return "a batch (a JSON array) is not supported: send one JSON-RPC message per request"
    if not isinstance(message, dict):
        return "the body must be one JSON-RPC message, a JSON object"
    if message.get("jsonrpc") != "2.0":
        return 'the message must have "jsonrpc": "2.0"'
    if "method" not in message:
        return None  # a response or an error of the client's: the SDK takes it
    if not isinstance(message["method"], str):
        return '"method" must be a string'
    if "id" in message:
        ident = message["id"]
        if isinstance(ident, bool) or not isinstance(ident, str | int):
            return '"id" must be a string or an integer (not null, a fraction or a structure)'
    if "params" in message and not isinstance(message["params"], dict):
        return '"params" must be an object'
    return None


def refusal(body: bytes) -> tuple[int, str] | None:
    """The JSON-RPC error (code, message) that answers ``body``, or None when it is one JSON-RPC
    message the SDK may read: a parse error (-32700) when it is not strict JSON, an invalid
    request (-32600) when it is not one JSON-RPC 2.0 message."""
    problem = strict_json_problem(body)
    if problem is not None:
        return PARSE_ERROR, f"Parse error: {problem}"
    problem = envelope_problem(jiter.from_json(body))
    if problem is not None:
        return INVALID_REQUEST, f"Invalid Request: {problem}"
    return None
