"""GET /agent-memory: every store of the caller's organization, with its instance."""

from agent_memory.api import ERROR_RESPONSES, Api
from agent_memory.errors import DatabaseUnavailable
from agent_memory.models import StoreList, StoreView

app = Api()


@app.get("/agent-memory", summary="List every store", tags=["stores"], responses=ERROR_RESPONSES)
def list_stores() -> StoreList:
    """Every store of the caller's organization, on every instance."""
    views: list[StoreView] = []
    for instance in app.runtime.control.instances(app.principal.org_id):
        stores = app.runtime.stores(app.principal, instance.instance_id)
        try:
            views.extend(stores.view(config) for config in stores.all())
        except DatabaseUnavailable as exc:
            raise DatabaseUnavailable(
                f"Instance '{instance.instance_id}' cannot be reached, so the list would be "
                "incomplete; retry, or list other instances one by one."
            ) from exc
    return StoreList(stores=views)


lambda_handler = app.lambda_handler
