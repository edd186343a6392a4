"""GET .../actors/{actor_id}/profile/history?field=: one profile field's versions."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import PROFILE_ROUTE, ActorPath, InstancePath, StorePath
from agent_memory.flows.profiles import profile_history
from agent_memory.memories.profile_models import ProfileHistory
from agent_memory.models import SESSION_ID_PATTERN

app = Api()


@app.get(
    PROFILE_ROUTE + "/history",
    summary="A profile field's history",
    tags=["profiles"],
    responses=ERROR_RESPONSES,
)
def get_profile_history(
    instance_id: InstancePath,
    store: StorePath,
    actor_id: ActorPath,
    field: Annotated[
        str, Query(pattern=SESSION_ID_PATTERN, max_length=64, description="The profile field.")
    ],
) -> ProfileHistory:
    """The field's versions for the actor, newest first (a cleared value's version has
    ``value`` null); 422 naming ``query.field`` for a field the store does not declare."""
    return profile_history(app.store(instance_id, store), actor_id, field)


lambda_handler = app.lambda_handler
