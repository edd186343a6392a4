"""GET /agent-memory: every store of the caller's organization, with its instance; the
instances that could not be read are listed apart (``agent_memory.stores.listing``)."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.flows.stores import organization_stores
from agent_memory.stores.models import OrganizationStoreList

app = Api()


@app.get("/agent-memory", summary="List every store", tags=["stores"], responses=ERROR_RESPONSES)
def list_stores() -> OrganizationStoreList:
    """Every store of the caller's organization, on every instance that answered within 5 s;
    the others in ``unreachable`` with the reason. 503 only when the control database cannot
    be reached."""
    return organization_stores(app.caller)


lambda_handler = app.lambda_handler
