"""The remote MCP server: stateless Streamable HTTP at ``POST /mcp``, as an ASGI app and as a
Lambda handler for API Gateway HTTP APIs (payload format 2.0).

Stateless: every POST is served on its own (no ``Mcp-Session-Id``, nothing kept between
requests), so any Lambda container, or any worker of the local stack, answers any request.
Answers are JSON, never SSE streams: API Gateway HTTP APIs buffer a Lambda's answer whole.
``GET /mcp`` (a server-to-client SSE stream) and ``DELETE /mcp`` (ending a session) answer 405
with ``Allow: POST``, as the Streamable HTTP transport specifies for a server that offers
neither (https://modelcontextprotocol.io/specification/2025-06-18/basic/transports).

Each tool call uses the caller's own API key (``Authorization: Bearer <key>`` of the MCP
request) against the API this server is part of, at the address configured for the function:
``KIVIDB_MCP_API_URL`` (``template.yaml`` sets it for ``McpFunction``, the local stack to
itself). Nothing of the request (its ``Host`` header, its URL) chooses where a tool call goes:
that would send the caller's key, and show part of the answer, to a server the caller names.
``X-KiviDB-Instance`` and ``X-KiviDB-Store`` request headers give the tools a default instance
and store, as ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE`` do for stdio. Why HTTP and not the
domain core directly: ``docs/mcp.md``.
"""

from __future__ import annotations

import asyncio
import base64
import os
import re
import threading
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

import httpx
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from kividb_memory.client import MemoryClient
from kividb_memory.mcp.jsonrpc import (
    INVALID_REQUEST,
    MAX_MESSAGE_BYTES,
    TOO_LARGE,
    refusal,
    rpc_error,
)
from kividb_memory.mcp.tools import Connection, Defaults, build_server

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

MCP_PATH = "/mcp"
API_URL_ENV = "KIVIDB_MCP_API_URL"
"""The API this server's tool calls go to. ``{api_id}`` in it stands for the id of the API
Gateway API that invoked the function (``requestContext.apiId`` of the event, API Gateway's own
record, never the caller's): the template cannot name its own API in the function's environment
(the API's definition names the function, a circular dependency)."""
API_ID_PLACEHOLDER = "{api_id}"
_API_ID = re.compile(r"[A-Za-z0-9]{1,64}")
_KEY = re.compile(r"[\x21-\x7e]+")
INSTANCE_HEADER = "x-kividb-instance"
STORE_HEADER = "x-kividb-store"
MAX_BODY_BYTES = MAX_MESSAGE_BYTES
# Within the function's 30 s: one attempt of at most 12 s, one retry after at most 2 s.
API_TIMEOUT = httpx.Timeout(12.0, connect=3.0)
API_RETRIES = 1
API_RETRY_WAIT = 2.0

_NOT_ALLOWED = (
    b'{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Method Not Allowed: this '
    b'stateless server takes POST only (no SSE stream, no session to end)"}}'
)


def configured_api_url(configured: str | None, scope: Scope) -> str:
    """The API a tool call of the request ``scope`` goes to: ``configured`` (the server's
    ``api_url``, else ``KIVIDB_MCP_API_URL``), its ``{api_id}`` replaced with the id of the API
    Gateway API whose event this is. ``ToolError`` when there is none: nothing of the request
    is ever used instead."""
    url = configured or os.environ.get(API_URL_ENV, "")
    if not url:
        raise ToolError(
            f"this MCP server has no API to call: {API_URL_ENV} is not set in its environment "
            "(template.yaml sets it for McpFunction, the local stack for itself)"
        )
    if API_ID_PLACEHOLDER in url:
        event = scope.get("aws.event") or {}
        api_id = str((event.get("requestContext") or {}).get("apiId") or "")
        if not _API_ID.fullmatch(api_id):
            raise ToolError(
                f"this MCP server has no API to call: {API_URL_ENV} names {API_ID_PLACEHOLDER}, "
                "and the request did not come from API Gateway with its API id"
            )
        url = url.replace(API_ID_PLACEHOLDER, api_id)
    return url.rstrip("/")


class RemoteServer:
    """The remote server's ASGI app (``await server(scope, receive, send)``).

    One ``httpx.Client`` (connection pool) per process serves every tool call, each with the
    caller's key; it is made at the first call, not at import. ``api_url``: the API the tools
    call (default: ``KIVIDB_MCP_API_URL``, read at each call)."""

    def __init__(self, api_url: str | None = None) -> None:
        self.api_url = api_url
        self.mcp = build_server(self._connect)
        self._pool: httpx.Client | None = None
        self._lock = threading.Lock()

    def _http(self) -> httpx.Client:
        with self._lock:
            if self._pool is None:
                self._pool = httpx.Client(limits=httpx.Limits(max_keepalive_connections=8))
            return self._pool

    def _connect(self, ctx: Context[Any, Any]) -> Connection:
        request = ctx.request_context.request
        if request is None:  # pragma: no cover - this server is only served over HTTP
            raise ToolError("this server answers HTTP requests only")
        scheme, _, key = request.headers.get("authorization", "").partition(" ")
        if scheme.lower() != "bearer" or not key.strip():
            raise ToolError(
                "KiviDB API error 401 unauthorized: send your API key as the MCP request's "
                "header 'Authorization: Bearer <key>'"
            )
        if not _KEY.fullmatch(key.strip()):
            raise ToolError(
                "KiviDB API error 401 unauthorized: the API key of the MCP request's header "
                "'Authorization: Bearer <key>' must be printable ASCII without spaces"
            )
        base = configured_api_url(self.api_url, request.scope)
        try:
            client = MemoryClient(
                base,
                key.strip(),
                timeout=API_TIMEOUT,
                max_retries=API_RETRIES,
                max_retry_wait=API_RETRY_WAIT,
                http_client=self._http(),
            )
        except ValueError as exc:  # a configured URL that is not http(s)://
            raise ToolError(f"this MCP server's {API_URL_ENV} is not usable: {exc}") from exc
        defaults = Defaults(
            request.headers.get(INSTANCE_HEADER) or None, request.headers.get(STORE_HEADER) or None
        )
        return Connection(client, defaults)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":  # pragma: no cover - websockets are not routed here
            return
        if scope["method"] != "POST":
            await _answer(send, 405, [(b"allow", b"POST")], _NOT_ALLOWED)
            return
        limited = rate_limited(scope)
        if limited is not None:  # the authorizer found the key over its request rate
            message, retry_after = limited
            headers = [(b"retry-after", str(retry_after).encode("ascii"))]
            await _answer(send, 429, headers, rpc_error(-32000, message))
            return
        body = await _body(scope, receive)
        if body is None:
            await _answer(send, 413, [], rpc_error(INVALID_REQUEST, TOO_LARGE))
            return
        refused = refusal(body)
        if refused is not None:
            await _answer(send, 400, [], rpc_error(*refused))
            return
        receive = _replay(body, receive)
        # A session manager per request: stateless, so nothing outlives the request, and the
        # SDK's manager runs once per instance.
        self.mcp.streamable_http_app(
            stateless_http=True,
            json_response=True,
            max_request_body_size=MAX_BODY_BYTES,
            # The key in the Authorization header protects this endpoint; a browser cannot send
            # one cross-site without a CORS preflight, which nothing here answers.
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        manager = self.mcp.session_manager
        async with manager.run():
            await manager.handle_request(scope, receive, send)


async def _body(scope: Scope, receive: Receive) -> bytes | None:
    """The whole request body, read here so it can be checked before the SDK sees it; None
    when it is larger than ``MAX_BODY_BYTES`` (by its ``Content-Length``, or as it arrives)."""
    for name, value in scope.get("headers") or []:
        declared = value.strip()
        if (
            name.lower() == b"content-length"
            and declared.isdigit()
            and int(declared) > MAX_BODY_BYTES
        ):
            return None
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return bytes(body)  # the client went away: an empty or partial body, refused
        body += message.get("body", b"")
        if len(body) > MAX_BODY_BYTES:
            return None
        if not message.get("more_body", False):
            return bytes(body)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A ``receive`` that gives ``body`` whole, then what ``receive`` gives (a disconnect)."""
    given = False

    async def again() -> Message:
        nonlocal given
        if given:
            return await receive()
        given = True
        return {"type": "http.request", "body": body, "more_body": False}

    return again


async def _lifespan(receive: Receive, send: Send) -> None:
    while True:
        message = await receive()
        if message["type"] == "lifespan.startup":
            await send({"type": "lifespan.startup.complete"})
        elif message["type"] == "lifespan.shutdown":
            await send({"type": "lifespan.shutdown.complete"})
            return


async def _answer(send: Send, status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), *headers],
        }
    )
    await send({"type": "http.response.body", "body": body})


# --- API Gateway HTTP API (payload 2.0) -> ASGI ------------------------------------------------

_TEXT_TYPES = ("json", "text/", "xml", "javascript")


def rate_limited(scope: Scope) -> tuple[str, int] | None:
    """``(message, Retry-After seconds)`` when the API's authorizer refused the request's key
    for its request rate or a quota (its context's ``error``), as the API's routes answer
    429; None otherwise (and outside Lambda)."""
    event = scope.get("aws.event") or {}
    context = ((event.get("requestContext") or {}).get("authorizer") or {}).get("lambda") or {}
    if context.get("error") not in ("rate_limited", "quota_exceeded"):
        return None
    retry_after = str(context.get("retry_after") or "1")
    seconds = int(retry_after) if retry_after.isdigit() else 1
    return f"KiviDB API error 429 {context['error']}: {context.get('message', '')}", max(1, seconds)


def scope_of(event: dict[str, Any]) -> Scope:
    """The ASGI HTTP scope of a payload 2.0 request event, with the event as ``aws.event``.

    The host is the event's ``domainName`` (API Gateway's own record of the domain the request
    came to), never the request's ``Host`` header, which the caller writes: nothing here uses
    the host to reach anything, and a malformed one (``[abc]``) cannot fail the request. The
    scheme is the last ``X-Forwarded-Proto`` value, ``https`` when there is none (API Gateway
    serves only HTTPS; the local stack sets ``http``). ``cookies`` become one ``cookie``
    header. Shapes: https://docs.aws.amazon.com/apigateway/latest/developerguide/http-api-develop-integrations-lambda.html
    """
    context = event.get("requestContext") or {}
    http = context.get("http") or {}
    headers = {str(k).lower(): str(v) for k, v in (event.get("headers") or {}).items()}
    domain = str(context.get("domainName") or "").lower()
    headers.pop("host", None)
    if domain:
        headers["host"] = domain
    proto = headers.get("x-forwarded-proto", "https").split(",")[-1].strip().lower()
    scheme = "http" if proto == "http" else "https"
    if event.get("cookies"):
        headers["cookie"] = "; ".join(event["cookies"])
    raw_path = str(event.get("rawPath") or "/")
    return {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": str(http.get("method", "GET")).upper(),
        "scheme": scheme,
        "path": unquote(raw_path),
        "raw_path": raw_path.encode("latin-1", "replace"),
        "root_path": "",
        "query_string": str(event.get("rawQueryString") or "").encode("latin-1", "replace"),
        "headers": [
            (k.encode("latin-1", "replace"), v.encode("latin-1", "replace"))
            for k, v in headers.items()
        ],
        "server": (domain, 443 if scheme == "https" else 80),
        "client": (str(http.get("sourceIp", "")), 0),
        "aws.event": event,
    }


def body_of(event: dict[str, Any]) -> bytes:
    """The request body's bytes (base64-decoded when ``isBase64Encoded``)."""
    body = event.get("body") or ""
    if event.get("isBase64Encoded"):
        return base64.b64decode(body)
    return str(body).encode("utf-8")


class LambdaAdapter:
    """A Lambda handler serving an ASGI app to API Gateway HTTP API events (payload 2.0).

    ``adapter(event, context)`` runs the app on a new event loop (Lambda runs one invocation at
    a time per container); ``await adapter.invoke_async(event, context)`` runs it on the
    caller's loop (the local stack does this, so that the requests a tool makes back to the
    same stack are served while this one waits). Each invocation is one request: a body in,
    the status, headers and body out, as the 2.0 response format (a text body when its
    content type is textual and it is UTF-8, base64 otherwise)."""

    def __init__(self, app: Callable[[Scope, Receive, Send], Awaitable[None]]) -> None:
        self.app = app

    def __call__(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        return asyncio.run(self.invoke_async(event, context))

    async def invoke_async(self, event: dict[str, Any], context: Any) -> dict[str, Any]:
        """One invocation on the running event loop: the 2.0 response for ``event``."""
        body = body_of(event)
        sent = False
        status = 500
        headers: list[tuple[bytes, bytes]] = []
        chunks: list[bytes] = []

        async def receive() -> Message:
            nonlocal sent
            if sent:
                return {"type": "http.disconnect"}
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: Message) -> None:
            nonlocal status, headers
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = list(message.get("headers") or [])
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))

        await self.app(scope_of(event), receive, send)
        return response_of(status, headers, b"".join(chunks))


def response_of(status: int, headers: list[tuple[bytes, bytes]], body: bytes) -> dict[str, Any]:
    """A payload 2.0 response: repeated headers joined with commas, ``set-cookie`` in
    ``cookies``, the body as text or base64."""
    merged: dict[str, str] = {}
    cookies: list[str] = []
    for raw_name, raw_value in headers:
        name, value = raw_name.decode("latin-1").lower(), raw_value.decode("latin-1")
        if name == "set-cookie":
            cookies.append(value)
        elif name != "content-length":
            merged[name] = f"{merged[name]},{value}" if name in merged else value
    content_type = merged.get("content-type", "")
    try:
        text = body.decode("utf-8") if any(t in content_type for t in _TEXT_TYPES) else None
    except UnicodeDecodeError:
        text = None
    answer: dict[str, Any] = {
        "statusCode": status,
        "headers": merged,
        "body": text if text is not None else base64.b64encode(body).decode("ascii"),
        "isBase64Encoded": text is None,
    }
    if cookies:
        answer["cookies"] = cookies
    return answer
