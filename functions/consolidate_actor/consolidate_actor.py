"""POST .../actors/{actor_id}/consolidate: queue a consolidation run of the actor (202)."""

from http import HTTPStatus

from aws_lambda_powertools.event_handler import Response

from agent_memory.consolidation.models import ConsolidationQueued
from agent_memory.edge.http_errors import responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, ActorPath, InstancePath, StorePath, accepted
from agent_memory.flows.consolidation import queue_consolidation

app = Api(idempotent_writes=True)


@app.post(
    STORE_ROUTE + "/actors/<actor_id>/consolidate",
    summary="Consolidate an actor's memories",
    tags=["consolidation"],
    responses=responses({202: "Queued"}, errors=(HTTPStatus.CONFLICT,)),
)
def consolidate_actor(
    instance_id: InstancePath,
    store: StorePath,
    actor_id: ActorPath,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Response[ConsolidationQueued]:
    """Queue a run that merges, corrects and retires the actor's memories (202), or answer
    the one already queued or running; 409 without a language model."""
    return accepted(queue_consolidation(app.store(instance_id, store), actor_id))


lambda_handler = app.lambda_handler
