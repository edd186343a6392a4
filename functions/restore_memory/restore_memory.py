"""POST .../memories/{memory_id}/restore: make a superseded or retired version current again."""

from http import HTTPStatus

from aws_lambda_powertools.event_handler import Response

from agent_memory.edge.http_errors import responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import MEMORY_ROUTE, InstancePath, MemoryPath, StorePath, created
from agent_memory.flows.consolidation import restore_version
from agent_memory.memories.models import MemoryView

app = Api(idempotent_writes=True)


@app.post(
    MEMORY_ROUTE + "/restore",
    summary="Restore a memory's version",
    tags=["memories"],
    responses=responses({201: "Restored"}, errors=(HTTPStatus.CONFLICT,)),
)
def restore_memory(
    instance_id: InstancePath,
    store: StorePath,
    memory_id: MemoryPath,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[MemoryView]:
    """A new current memory with the version's text and fields, superseding whatever of its
    chain is current (201); 409 when the version is current."""
    return created(restore_version(app.store(instance_id, store), memory_id))


lambda_handler = app.lambda_handler
