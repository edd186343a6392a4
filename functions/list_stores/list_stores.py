"""GET /agent-memory: every store of the caller's organization, with its instance."""

from agent_memory.api import ERROR_RESPONSES, Api
from agent_memory.models import StoreList, StoreView

app = Api()


@app.get("/agent-memory", summary="List every store", tags=["stores"], responses=ERROR_RESPONSES)
def list_stores() -> StoreList:
    views: list[StoreView] = []
    for instance in app.runtime.control.instances(app.principal.org_id):
        stores = app.runtime.stores(app.principal, instance.instance_id)
        views.extend(stores.view(config) for config in stores.all())
    return StoreList(stores=views)


lambda_handler = app.lambda_handler
