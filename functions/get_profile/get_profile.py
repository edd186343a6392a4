"""GET .../actors/{actor_id}/profile: an actor's profile, each field with its value, time and
source."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import PROFILE_ROUTE, ActorPath, InstancePath, StorePath
from agent_memory.flows.profiles import profile_view
from agent_memory.memories.profile_models import ProfileView

app = Api()


@app.get(
    PROFILE_ROUTE, summary="Get an actor's profile", tags=["profiles"], responses=ERROR_RESPONSES
)
def get_profile(instance_id: InstancePath, store: StorePath, actor_id: ActorPath) -> ProfileView:
    """The fields of the store's ``profile_fields`` that hold a value for the actor (none yet:
    an empty ``fields``), read in one round trip."""
    return profile_view(app.store(instance_id, store), actor_id)


lambda_handler = app.lambda_handler
