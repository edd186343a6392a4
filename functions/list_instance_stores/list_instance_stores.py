"""GET /instances/{instance_id}/agent-memory: the stores of one instance."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import InstancePath
from agent_memory.flows.stores import instance_store_list
from agent_memory.stores.models import StoreList

app = Api()


@app.get(
    "/instances/<instance_id>/agent-memory",
    summary="List an instance's stores",
    tags=["stores"],
    responses=ERROR_RESPONSES,
)
def list_instance_stores(instance_id: InstancePath) -> StoreList:
    """The stores of the instance that the caller's key reaches."""
    return instance_store_list(app.caller, instance_id)


lambda_handler = app.lambda_handler
