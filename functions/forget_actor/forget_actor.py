"""DELETE .../actors/{actor_id}/memories: forget everything one actor has (data protection)."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import (
    NOTHING_DELETED,
    STORE_ROUTE,
    ActorPath,
    InstancePath,
    StorePath,
)
from agent_memory.flows.memories import forget_actor_memories
from agent_memory.memories.models import ActorForgotten

app = Api(store_not_found_step=NOTHING_DELETED)


@app.delete(
    STORE_ROUTE + "/actors/<actor_id>/memories",
    summary="Forget every memory of an actor",
    tags=["memories"],
    responses=ERROR_RESPONSES,
)
def forget_actor(
    instance_id: InstancePath, store: StorePath, actor_id: ActorPath
) -> ActorForgotten:
    """Forget every memory of one actor (200 with how many)."""
    return forget_actor_memories(app.store(instance_id, store), actor_id)


lambda_handler = app.lambda_handler
