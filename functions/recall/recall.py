"""POST .../{store}/recall: summary, recent messages, relevant memories and a context string."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import PROVIDER_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import STORE_ROUTE, InstancePath, StorePath
from agent_memory.memories.models import RecallRequest, RecallView
from agent_memory.memories.recall import recall as recall_memory

app = Api(reads=True)


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
    handle = app.runtime.store(app.principal, instance_id, store)
    budget = app.runtime.settings.answer_budget_bytes
    body = body.model_copy(update={"actor_id": handle.actor(body.actor_id)})
    actors = handle.scope.actors if handle.scope is not None else None
    return recall_memory(handle.sessions, handle.memories, handle.config, body, budget, actors)


lambda_handler = app.lambda_handler
