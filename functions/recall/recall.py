"""POST .../{store}/recall: summary, recent messages, relevant memories and a context string."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import PROVIDER_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.recall import recall_view
from agent_memory.memories.models import RecallRequest, RecallView

app = Api(reads=True, last_read_settings=True)


@app.post(
    STORE_ROUTE + "/recall",
    summary="Recall what an agent needs before its next model call",
    tags=["recall"],
    responses=PROVIDER_RESPONSES,
)
def recall(
    instance_id: InstancePath, store: StorePath, body: Annotated[RecallRequest, Body()]
) -> RecallView:
    """Summary, recent messages, relevant memories and a context string for the session."""
    return recall_view(app.store(instance_id, store), body)


lambda_handler = app.lambda_handler
