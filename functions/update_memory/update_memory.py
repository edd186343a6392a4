"""PATCH .../memories/{memory_id}: change a memory; the previous state becomes a version."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import PROVIDER_RESPONSES
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import MEMORY_ROUTE, InstancePath, MemoryPath, StorePath
from agent_memory.flows.memories import change_memory
from agent_memory.memories.models import MemoryPatch, MemoryView

app = Api(idempotent_writes=True)


@app.patch(MEMORY_ROUTE, summary="Change a memory", tags=["memories"], responses=PROVIDER_RESPONSES)
def update_memory(
    instance_id: InstancePath,
    store: StorePath,
    memory_id: MemoryPath,
    body: Annotated[MemoryPatch, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> MemoryView:
    """Change a memory, keeping its previous state as a version."""
    return change_memory(app.store(instance_id, store), memory_id, body)


lambda_handler = app.lambda_handler
