"""POST /instances/{instance_id}/agent-memory/{store}/webhooks/secret: a new signing secret."""

from aws_lambda_powertools.event_handler import Response

from agent_memory.edge.http_errors import responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath, created
from agent_memory.flows.stores import new_webhook_secret
from agent_memory.webhooks.models import WebhookSecret

app = Api()


@app.post(
    STORE_ROUTE + "/webhooks/secret",
    summary="Make a new webhook signing secret",
    tags=["webhooks"],
    responses=responses({201: "The new secret, shown only here"}),
)
def rotate_webhook_secret(instance_id: InstancePath, store: StorePath) -> Response[WebhookSecret]:
    """A new secret (201, ``whsec_`` and base64), the only time it is shown; deliveries of
    events from now on are signed with it (those already queued keep the previous one). Only
    a key that manages the store's settings may (403 otherwise)."""
    return created(new_webhook_secret(app.caller, instance_id, store))


lambda_handler = app.lambda_handler
