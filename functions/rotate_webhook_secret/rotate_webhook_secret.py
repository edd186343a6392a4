"""POST /instances/{instance_id}/agent-memory/{store}/webhooks/secret: a new signing secret."""

from aws_lambda_powertools.event_handler import Response

from agent_memory.edge.http_errors import JSON, responses
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
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
    secret = app.runtime.rotate_webhook_secret(app.principal, instance_id, store)
    return Response(status_code=201, content_type=JSON, body=secret)


lambda_handler = app.lambda_handler
