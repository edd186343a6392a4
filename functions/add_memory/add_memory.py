"""POST .../{store}/memories: keep a memory (201), or return the one it duplicates (200)."""

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body
from aws_lambda_powertools.metrics import MetricUnit

from agent_memory.edge.http_errors import JSON, responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import CREATE_STORE_FIRST, STORE_ROUTE, InstancePath, StorePath
from agent_memory.memories.models import MemoryIn, MemoryView
from agent_memory.observability import metrics

app = Api(store_not_found_step=CREATE_STORE_FIRST, idempotent_writes=True)


@app.post(
    STORE_ROUTE + "/memories",
    summary="Add a memory",
    tags=["memories"],
    responses=responses(
        {201: "Kept", 200: "A duplicate of a memory the actor already has"},
        errors=(HTTPStatus.CONFLICT, HTTPStatus.BAD_GATEWAY),
    ),
)
def add_memory(
    instance_id: InstancePath,
    store: StorePath,
    body: Annotated[MemoryIn, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[MemoryView]:
    """Keep a memory (201), or answer the one it duplicates (200, ``duplicate`` true)."""
    handle = app.runtime.store(app.principal, instance_id, store)
    body = body.model_copy(update={"actor_id": handle.actor(body.actor_id)})
    if body.supersedes is not None:
        handle.reachable_superseded(body.supersedes)
    app.runtime.reserve(app.principal, handle, "memories", 1, embeds=body.vector is None)
    kept = handle.add_memory(body)
    metrics.add_metric(
        name="MemoriesDeduplicated" if kept.duplicate else "MemoriesKept",
        unit=MetricUnit.Count,
        value=1,
    )
    for _, count in kept.redactions.items():
        metrics.add_metric(name="Redactions", unit=MetricUnit.Count, value=count)
    view = kept.memory.model_copy(update={"duplicate": kept.duplicate})
    return Response(status_code=200 if kept.duplicate else 201, content_type=JSON, body=view)


lambda_handler = app.lambda_handler
