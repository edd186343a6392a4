"""DELETE .../memories/{memory_id}: forget one memory."""

from aws_lambda_powertools.event_handler import Response

from agent_memory.edge.http_errors import responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    MEMORY_ROUTE,
    NOTHING_DELETED,
    InstancePath,
    MemoryPath,
    StorePath,
    no_content,
)
from agent_memory.flows.memories import forget_memory

app = Api(store_not_found_step=NOTHING_DELETED)


@app.delete(
    MEMORY_ROUTE,
    summary="Forget a memory",
    tags=["memories"],
    responses=responses({204: "Deleted"}),
)
def delete_memory(
    instance_id: InstancePath, store: StorePath, memory_id: MemoryPath
) -> Response[None]:
    """Forget one memory (204); 404 ``memory_not_found``."""
    forget_memory(app.store(instance_id, store), memory_id)
    return no_content()


lambda_handler = app.lambda_handler
