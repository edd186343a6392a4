"""POST .../{store}/memories: keep a memory (201), or return the one it duplicates (200)."""

from http import HTTPStatus
from typing import Annotated

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    CREATE_STORE_FIRST,
    STORE_ROUTE,
    InstancePath,
    StorePath,
    created,
)
from agent_memory.flows.memories import keep_memory
from agent_memory.memories.models import MemoryIn, MemoryView

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
    return created(*keep_memory(app.store(instance_id, store), body))


lambda_handler = app.lambda_handler
