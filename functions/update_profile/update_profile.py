"""PATCH .../actors/{actor_id}/profile: set or clear fields of an actor's profile."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import WRITE_RESPONSES
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import PROFILE_ROUTE, ActorPath, InstancePath, StorePath
from agent_memory.flows.profiles import change_profile
from agent_memory.memories.profile_models import ProfilePatch, ProfileView

app = Api(idempotent_writes=True)


@app.patch(
    PROFILE_ROUTE, summary="Change an actor's profile", tags=["profiles"], responses=WRITE_RESPONSES
)
def update_profile(
    instance_id: InstancePath,
    store: StorePath,
    actor_id: ActorPath,
    body: Annotated[ProfilePatch, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> ProfileView:
    """Set the fields given (``null`` clears one) in one step, each change kept as a version;
    the profile after. 422 naming ``fields.<name>`` for a field the store does not declare or a
    value not of its type, with nothing changed."""
    return change_profile(app.store(instance_id, store), actor_id, body)


lambda_handler = app.lambda_handler
