"""An ASGI app that plays API Gateway (HTTP API, payload 2.0) in front of the template's functions.

For each request: find the route in ``template.yaml``, build the 2.0 event, call the declared
authorizer unless the route says ``Authorizer: NONE`` (a denial is API Gateway's 403), put its
context in
``requestContext.authorizer.lambda``, call the function's ``lambda_handler`` and turn its answer
into the HTTP response (or, as Lambda would, fail a response over its 6 MB payload limit:
API Gateway's 500). Each worker process is one warm "container" per function and, like
Lambda, runs one invocation at a time; ``--workers`` gives concurrency across processes. The
exception is a handler with an ``invoke_async`` coroutine (the MCP function's ASGI adapter),
which is awaited on the worker's event loop, so that the API calls it makes back to this stack
are served while it waits.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
import uuid
from collections.abc import Awaitable, Callable, MutableMapping
from pathlib import Path
from typing import Any

from agent_memory.answers import LAMBDA_PAYLOAD_LIMIT
from local.events import authorizer_event, http_event, http_response
from local.template import HttpApi, read_http_api

ROOT = Path(__file__).resolve().parent.parent
MAX_BODY_BYTES = 10 * 1024 * 1024  # API Gateway HTTP API payload limit
PARAMETERS_ENV = "KIVIDB_LOCAL_PARAMETERS"
LAZY_INIT_ENV = "KIVIDB_LAZY_INIT"
# "0": skip the SnapStart hooks after loading the functions (template.yaml's SnapStart
# parameter set to None); by default they run, as Lambda runs them around its snapshot.
SNAPSTART_ENV = "KIVIDB_SNAPSTART"
# The functions' scheduler (agent_memory.background.scheduler.make_scheduler): "local" serves
# the port from the stack's database, where the launcher's scheduler loop (local/scheduler.py)
# takes it up.
SCHEDULER_ENV = "KIVIDB_SCHEDULER"
# The API the MCP function's tool calls go to (template.yaml sets it for McpFunction in AWS):
# here, this stack itself, on the loopback address and port the launcher serves
# (local/__main__.py), never an address taken from a request.
MCP_API_URL_ENV = "KIVIDB_MCP_API_URL"

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]


class LambdaContext:
    """The attributes of Lambda's context object that handlers and Powertools read."""

    def __init__(
        self, function_name: str, timeout_seconds: float = 30.0, memory_limit_in_mb: int = 512
    ) -> None:
        self.function_name = function_name
        self.function_version = "$LATEST"
        self.memory_limit_in_mb = memory_limit_in_mb
        self.invoked_function_arn = f"arn:aws:lambda:local:000000000000:function:{function_name}"
        self.aws_request_id = str(uuid.uuid4())
        self.log_group_name = f"/aws/lambda/{function_name}"
        self.log_stream_name = "local"
        self._deadline = time.monotonic() + timeout_seconds

    def get_remaining_time_in_millis(self) -> int:
        """Milliseconds left before the function's timeout (0 once it has passed)."""
        return max(0, int((self._deadline - time.monotonic()) * 1000))


def _gateway_error(status: int, message: str) -> tuple[int, list[tuple[str, str]], bytes]:
    # API Gateway's own answers (not the functions'): {"message": "..."}.
    return status, [("content-type", "application/json")], json.dumps({"message": message}).encode()


class Gateway:
    """The ASGI application."""

    def __init__(self, api: HttpApi) -> None:
        self.api = api

    async def invoke(
        self,
        method: str,
        raw_path: str,
        raw_query: str,
        headers: list[tuple[str, str]],
        body: bytes,
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        """One request as API Gateway would serve it: ``(status, headers, body)`` of the
        function's answer, or of API Gateway's own 404, 403 or 500."""
        # Match on the raw path, segment by segment, so that an encoded "/" (%2F) stays inside
        # its parameter instead of reaching another route; parameters are decoded afterwards.
        found = self.api.find(method, raw_path)
        if found is None:
            return _gateway_error(404, "Not Found")
        route, params = found
        event = http_event(
            method=method,
            raw_path=raw_path,
            raw_query=raw_query,
            headers=headers,
            body=body,
            route_key=route.route_key,
            path_parameters=params,
        )
        try:
            if self.api.authorizer is not None and route.authorized:
                authorizer = self.api.authorizer
                answer = authorizer.load()(
                    authorizer_event(event), LambdaContext(authorizer.logical_id)
                )
                if not answer.get("isAuthorized"):
                    return _gateway_error(403, "Forbidden")
                event["requestContext"]["authorizer"] = {"lambda": answer.get("context") or {}}
            handler = route.function.load()
            context = LambdaContext(route.function.logical_id)
            # A handler with an ``invoke_async`` twin (the MCP function's ASGI adapter, which
            # calls this API back over HTTP) is awaited here, so that this worker serves those
            # calls meanwhile instead of every worker waiting on another (in AWS they reach other
            # containers). Every other function runs as in Lambda, one invocation at a time.
            run = getattr(handler, "invoke_async", None)
            result = await run(event, context) if run is not None else handler(event, context)
        except Exception:  # noqa: BLE001 - a crashed function is API Gateway's 500, as in AWS
            traceback.print_exc()
            return _gateway_error(500, "Internal Server Error")
        carried = len(json.dumps(result, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        if carried > LAMBDA_PAYLOAD_LIMIT:
            # Lambda fails an invocation whose response is over its payload quota, and API
            # Gateway answers that failure with its own 500, as for a crash.
            print(
                f"{route.function.logical_id}: response payload of {carried} bytes is over "
                f"Lambda's limit of {LAMBDA_PAYLOAD_LIMIT}; the invocation fails",
                file=sys.stderr,
            )
            return _gateway_error(500, "Internal Server Error")
        return http_response(result)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        chunks, size = [], 0
        more = True
        while more:
            message = await receive()
            chunk = message.get("body", b"")
            size += len(chunk)
            if size <= MAX_BODY_BYTES:
                chunks.append(chunk)
            more = message.get("more_body", False)
        if size > MAX_BODY_BYTES:
            status, headers, body = _gateway_error(413, "Request Entity Too Large")
        else:
            raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
            status, headers, body = await self.invoke(
                scope["method"],
                raw_path.split("?", 1)[0],
                scope.get("query_string", b"").decode("latin-1"),
                [(k.decode("latin-1"), v.decode("latin-1")) for k, v in scope["headers"]],
                b"".join(chunks),
            )
        await send(
            {
                "type": "http.response.start",
                "status": status,
                "headers": [(k.lower().encode(), v.encode()) for k, v in headers]
                + [(b"content-length", str(len(body)).encode())],
            }
        )
        await send({"type": "http.response.body", "body": body})


def create_app() -> Gateway:
    """uvicorn factory: read the template with the parameters the launcher chose, set the
    functions' environment (with ``KIVIDB_SCHEDULER=local``: the local scheduler instead of
    EventBridge Scheduler; ``KIVIDB_MCP_API_URL``: this stack, for the MCP function). The layer
    is on the import path as Lambda mounts it: the virtualenv's ``kividb-layer.pth`` names
    ``layers/core`` (Makefile)."""
    parameters = json.loads(os.environ.get(PARAMETERS_ENV, "{}"))
    api = read_http_api(ROOT / "template.yaml", parameters)
    os.environ.update(api.environment)
    os.environ[SCHEDULER_ENV] = "local"
    os.environ[MCP_API_URL_ENV] = f"http://127.0.0.1:{int(os.environ.get('PORT', '3000'))}"
    if os.environ.get(LAZY_INIT_ENV) != "1":
        # Lambda's INIT phase (imports, module-level set-up) runs before a container's first
        # invocation; here every worker runs it at start, as provisioned concurrency does, so
        # that no request waits for it. KIVIDB_LAZY_INIT=1 defers it to the first request.
        for function in api.functions():
            function.module()
        if os.environ.get(SNAPSTART_ENV) != "0":
            # SnapStart's hooks as Lambda runs them around a snapshot, with none in between
            # (agent_memory.edge.snapstart): the first-use work of what the functions loaded
            # is done now, and every per-container cache is forgotten before any request.
            from agent_memory.edge.snapstart import run_hooks

            run_hooks()
    return Gateway(api)
