"""GET .../{store}/keyed-memories?namespace=a.b&key=k: one keyed memory."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import KEYED_ROUTE, InstancePath, StorePath
from agent_memory.flows.keyed import keyed_view
from agent_memory.keyed.models import MAX_KEY_CHARS, KeyedMemoryView, namespace_from_query

app = Api()


@app.get(
    KEYED_ROUTE, summary="Get a keyed memory", tags=["keyed memories"], responses=ERROR_RESPONSES
)
def get_keyed_memory(
    instance_id: InstancePath,
    store: StorePath,
    namespace: Annotated[
        str, Query(min_length=1, max_length=6000, description="The labels joined by '.'.")
    ],
    key: Annotated[str, Query(min_length=1, max_length=MAX_KEY_CHARS)],
    refresh_ttl: Annotated[bool, Query(description="Start its expiry again from now.")] = False,
) -> KeyedMemoryView:
    """The keyed memory under ``namespace`` and ``key``; 404 ``keyed_memory_not_found``."""
    return keyed_view(
        app.store(instance_id, store), namespace_from_query(namespace), key, refresh_ttl
    )


lambda_handler = app.lambda_handler
