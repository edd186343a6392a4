"""POST .../{store}/keyed-memories/namespaces: the namespaces that hold keyed memories."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import KEYED_ROUTE, InstancePath, StorePath
from agent_memory.flows.keyed import keyed_namespaces
from agent_memory.keyed.models import NamespaceList, NamespacesRequest

app = Api(reads=True)


@app.post(
    KEYED_ROUTE + "/namespaces",
    summary="List keyed namespaces",
    tags=["keyed memories"],
    responses=ERROR_RESPONSES,
)
def list_keyed_namespaces(
    instance_id: InstancePath, store: StorePath, body: Annotated[NamespacesRequest, Body()]
) -> NamespaceList:
    """The namespaces that hold keyed memories, in label order, by ``prefix`` / ``suffix``
    (``*`` any one label), cut to ``max_depth``."""
    return keyed_namespaces(app.store(instance_id, store), body)


lambda_handler = app.lambda_handler
