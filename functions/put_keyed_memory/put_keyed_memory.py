"""PUT .../{store}/keyed-memories: keep a JSON value under a namespace and key of the caller's
choosing, replacing what was there."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import PROVIDER_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import CREATE_STORE_FIRST, KEYED_ROUTE, InstancePath, StorePath
from agent_memory.flows.keyed import put_keyed
from agent_memory.keyed.models import KeyedMemoryPut, KeyedMemoryView

app = Api(store_not_found_step=CREATE_STORE_FIRST)


@app.put(
    KEYED_ROUTE,
    summary="Keep a keyed memory",
    tags=["keyed memories"],
    responses=PROVIDER_RESPONSES,
)
def put_keyed_memory(
    instance_id: InstancePath, store: StorePath, body: Annotated[KeyedMemoryPut, Body()]
) -> KeyedMemoryView:
    """Keep ``value`` under ``(namespace, key)`` in one atomic step (an upsert: its
    ``created_at`` stays); the memory as kept."""
    return put_keyed(app.store(instance_id, store), body)


lambda_handler = app.lambda_handler
