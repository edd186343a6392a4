"""Logs, metrics and traces, made in one place (Powertools ``Logger``, ``Metrics``, ``Tracer``).

Handlers decorate with ``logger`` and ``metrics`` (``edge.resolver.Api`` does it for every
route); a request opens its trace with ``request_trace`` and the core opens subsegments with
``subsegment``: database round trips (``database.client.database_errors``), provider calls
(``providers.client.ProviderClient``) and index builds (``memories.indexes``). Each subsegment
is annotated with the request's organization, store and route (``annotate``), never with a key
or a caller's text.

The tracer is made at its first use, and only where tracing is on: in Lambda (``Tracing:
Active`` in template.yaml) unless ``POWERTOOLS_TRACE_DISABLED`` is true. Its SDK (``aws-xray-sdk``,
with botocore) takes about 0.6 s to import on this machine, so a function that is not traced
never imports it: locally (the local stack, the tests, the tools) tracing is off, without errors,
and ``subsegment`` costs one check. Tests install a tracer with a recorder of their own
(``use_tracer``).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from aws_lambda_powertools import Logger, Metrics

if TYPE_CHECKING:
    from aws_lambda_powertools import Tracer

logger = Logger()
metrics = Metrics()
# Most routes publish no metric of their own; Powertools would warn on every such invocation.
warnings.filterwarnings("ignore", message="No application metrics to publish")

REQUEST_ID_HEADER = "X-Request-Id"
"""The header of every answer that names the request (API Gateway's request id), which every
log line of that request carries too (``correlation_id``)."""

_annotations: ContextVar[dict[str, str] | None] = ContextVar("trace_annotations", default=None)
_tracer: Tracer | None = None
_decided = False


def tracing_on() -> bool:
    """Whether this process traces: in Lambda (``LAMBDA_TASK_ROOT``), outside SAM's local
    emulator, and not disabled (``POWERTOOLS_TRACE_DISABLED``), as Powertools decides; or a
    test installed a tracer."""
    if _tracer is not None:
        return True
    disabled = os.environ.get("POWERTOOLS_TRACE_DISABLED", "false").lower() in ("1", "true")
    in_lambda = bool(os.environ.get("LAMBDA_TASK_ROOT")) and not os.environ.get("AWS_SAM_LOCAL")
    return in_lambda and not disabled


def tracer() -> Tracer | None:
    """The process's tracer, made at first use where tracing is on (``tracing_on``); None
    elsewhere. Nothing is patched: subsegments are ours."""
    global _tracer, _decided
    if not _decided:
        _decided = True
        if _tracer is None and tracing_on():
            from aws_lambda_powertools import Tracer

            _tracer = Tracer(auto_patch=False)
    return _tracer


def use_tracer(installed: Tracer | None) -> None:
    """Install ``installed`` as the process's tracer (tests: a Powertools ``Tracer`` whose
    provider records), or go back to deciding at first use (None)."""
    global _tracer, _decided
    _tracer = installed
    _decided = installed is not None


def annotate(**values: str | None) -> None:
    """Add annotations (``organization``, ``store``, ``route``...) to every subsegment opened
    from now on in this request's context; None values are left out. Ids and names only:
    never a key or a caller's text."""
    _annotations.set({**(_annotations.get() or {}), **{k: v for k, v in values.items() if v}})


def clear_annotations() -> None:
    """Forget the request's annotations (its end)."""
    _annotations.set(None)


@contextmanager
def subsegment(name: str) -> Iterator[None]:
    """A trace subsegment ``name`` around the block, annotated with the request's annotations;
    nothing when the process does not trace."""
    active = tracer()
    if active is None:
        yield
        return
    with active.provider.in_subsegment(name) as segment:
        for key, value in (_annotations.get() or {}).items():
            segment.put_annotation(key, value)
        yield


@contextmanager
def request_trace(name: str, *, cold_start: bool) -> Iterator[None]:
    """The subsegment of one invocation (``## <name>``), annotated with ``ColdStart`` and the
    request's annotations as they are when it ends (routing names the store after it began)."""
    active = tracer()
    if active is None:
        yield
        return
    with active.provider.in_subsegment(f"## {name}") as segment:
        segment.put_annotation("ColdStart", cold_start)
        try:
            yield
        finally:
            for key, value in (_annotations.get() or {}).items():
                segment.put_annotation(key, value)
