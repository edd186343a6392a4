"""Where a warm request's time goes, by part of the path: exclusive wall time of patched calls.

``Spans`` replaces a few callables of the request path with timing wrappers. Each wrapper
charges the time spent inside it, less the time of any wrapped call it makes, to its part
(exclusive time, a stack of open spans), so the parts add up to the whole request:

- ``gateway``: API Gateway's work in the local stack (route matching, the 2.0 event, the
  payload-size check of the function's answer; ``local.server.Gateway.invoke``);
- ``authorizer``: the REQUEST authorizer function, its round trip included;
- ``routing``: the function's entry (Powertools' logger and metrics decorators,
  ``edge.resolver.Api._answer``: the caller from the authorizer's context, the body checks),
  Powertools' routing and middlewares, the route function itself;
- ``validation``: Powertools' request validation (path, query, headers, the body parsed
  and validated into the route's model; ``edge.requests.StrictQueryValidation``);
- ``settings read``: the store lookup (``Runtime.store``: instance, store settings);
- ``own work``: the route's use case (``flows``), what the core does in-process;
- ``answer encoding``: the answer model to JSON text (Powertools' response validation
  middleware and its response builder);
- ``effects``: what the request writes after its answer (``Runtime.end_request``: usage,
  webhook events).

Time is ``time.perf_counter``; one wrapper costs about a microsecond, charged to its caller.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from types import ModuleType
from typing import Any

PARTS = (
    "gateway",
    "authorizer",
    "routing",
    "validation",
    "settings read",
    "own work",
    "answer encoding",
    "effects",
)
"""The parts of a request, in the order a request passes them."""
OUTSIDE = tuple(part for part in PARTS if part != "own work")

FLOWS = {
    "add events": "append_events",
    "recall": "recall_view",
    "keyword search": "memory_search",
    "semantic search": "memory_search",
    "get session": "session_view",
}
"""Per route: the name, in its function's module, of the use case its handler calls."""


class Spans:
    """Exclusive wall time per part (seconds), over every request made while patched."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = dict.fromkeys(PARTS, 0.0)
        self._stack: list[list[Any]] = []  # [part, started] of the open spans
        self._undo: list[Callable[[], None]] = []

    def wrap(self, part: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """``call``, charging its exclusive time to ``part``."""
        stack, seconds = self._stack, self.seconds

        def timed(*args: Any, **kwargs: Any) -> Any:
            now = time.perf_counter()
            if stack:
                top = stack[-1]
                seconds[top[0]] += now - top[1]
            stack.append([part, now])
            try:
                return call(*args, **kwargs)
            finally:
                end = time.perf_counter()
                seconds[part] += end - stack.pop()[1]
                if stack:
                    stack[-1][1] = end

        return timed

    def wrap_async(self, part: str, call: Callable[..., Any]) -> Callable[..., Any]:
        """An ``async`` ``call`` (the outermost one only: nothing else runs meanwhile)."""
        stack, seconds = self._stack, self.seconds

        async def timed(*args: Any, **kwargs: Any) -> Any:
            stack.append([part, time.perf_counter()])
            try:
                return await call(*args, **kwargs)
            finally:
                seconds[part] += time.perf_counter() - stack.pop()[1]

        return timed

    def patch(self, owner: Any, name: str, part: str, *, is_async: bool = False) -> None:
        """Replace ``owner.name`` (a class's method or a module's function) until ``undo``."""
        original = owner.__dict__[name] if isinstance(owner, type) else getattr(owner, name)
        wrapped = (self.wrap_async if is_async else self.wrap)(part, original)
        setattr(owner, name, wrapped)
        self._undo.append(lambda: setattr(owner, name, original))

    def undo(self) -> None:
        """Put every patched callable back."""
        while self._undo:
            self._undo.pop()()

    def shares(self) -> dict[str, float]:
        """Each part's share of the total (0 to 1)."""
        total = sum(self.seconds.values()) or 1.0
        return {part: value / total for part, value in self.seconds.items()}


@contextmanager
def spans_of(
    gateway_class: type, authorizer: ModuleType, function: ModuleType, flow: str
) -> Iterator[Spans]:
    """``Spans`` of requests through ``gateway_class`` (``local.server.Gateway``) whose route
    is served by ``function`` (its handler module) calling its use case ``flow``, authorized
    by ``authorizer`` (the authorizer's handler module)."""
    from aws_lambda_powertools.event_handler.api_gateway import ResponseBuilder
    from aws_lambda_powertools.event_handler.middlewares.openapi_validation import (
        OpenAPIResponseValidationMiddleware,
    )

    from agent_memory.edge.requests import StrictQueryValidation
    from agent_memory.edge.runtime import Runtime

    spans = Spans()
    try:
        spans.patch(gateway_class, "invoke", "gateway", is_async=True)
        spans.patch(authorizer, "lambda_handler", "authorizer")
        spans.patch(function, "lambda_handler", "routing")
        spans.patch(StrictQueryValidation, "handler", "validation")
        spans.patch(OpenAPIResponseValidationMiddleware, "handler", "routing")
        spans.patch(OpenAPIResponseValidationMiddleware, "_handle_response", "answer encoding")
        for middleware in OpenAPIResponseValidationMiddleware.__subclasses__():  # edge.resolver's
            if "_handle_response" in middleware.__dict__:
                spans.patch(middleware, "_handle_response", "answer encoding")
        spans.patch(ResponseBuilder, "build", "answer encoding")
        spans.patch(Runtime, "store", "settings read")
        spans.patch(Runtime, "end_request", "effects")
        spans.patch(function, flow, "own work")
        yield spans
    finally:
        spans.undo()
