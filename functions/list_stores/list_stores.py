"""GET /agent-memory: every store of the caller's organization, with its instance; the
instances that could not be read are listed apart (``agent_memory.listing``)."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.stores.listing import list_organization_stores
from agent_memory.stores.models import OrganizationStoreList

app = Api()


@app.get("/agent-memory", summary="List every store", tags=["stores"], responses=ERROR_RESPONSES)
def list_stores() -> OrganizationStoreList:
    """Every store of the caller's organization, on every instance that answered within 5 s;
    the others in ``unreachable`` with the reason. 503 only when the control database cannot
    be reached."""
    runtime, principal = app.runtime, app.principal
    return list_organization_stores(
        runtime.control.instances(principal.org_id),
        lambda instance: runtime.stores(principal, instance.instance_id),
    )


lambda_handler = app.lambda_handler
