"""GET /instances/{instance_id}/agent-memory/{store}/webhooks/deliveries: the last 100."""

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.webhooks import delivery_log
from agent_memory.webhooks.models import DeliveryList

app = Api()


@app.get(
    STORE_ROUTE + "/webhooks/deliveries",
    summary="The store's last webhook deliveries",
    tags=["webhooks"],
    responses=ERROR_RESPONSES,
)
def list_webhook_deliveries(instance_id: InstancePath, store: StorePath) -> DeliveryList:
    """The store's last 100 deliveries, newest first: event, URL, status (``pending``,
    ``delivered``, ``failed``), attempts, the last HTTP status and error. A key limited to
    actors cannot (403): deliveries are of every actor's events."""
    return delivery_log(app.store(instance_id, store))


lambda_handler = app.lambda_handler
