"""GET /instances/{instance_id}/agent-memory/{store}: settings and counts of one store."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.stores import store_overview
from agent_memory.stores.models import StoreView

app = Api()


@app.get(STORE_ROUTE, summary="Get a store", tags=["stores"], responses=ERROR_RESPONSES)
def get_store(instance_id: InstancePath, store: StorePath) -> StoreView:
    """The store's settings, counts and last extraction."""
    return store_overview(app.store(instance_id, store))


lambda_handler = app.lambda_handler
