"""POST .../consolidations/{consolidation_id}/discard: discard a proposed run; no memory changes."""

from http import HTTPStatus

from agent_memory.consolidation.models import Consolidation
from agent_memory.edge.http_errors import responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import CONSOLIDATION_ROUTE, ConsolidationPath, InstancePath, StorePath
from agent_memory.flows.consolidation import discard_proposal

app = Api(idempotent_writes=True)


@app.post(
    CONSOLIDATION_ROUTE + "/discard",
    summary="Discard a proposed consolidation",
    tags=["consolidation"],
    responses=responses({200: "The run"}, errors=(HTTPStatus.CONFLICT,)),
)
def discard_consolidation(
    instance_id: InstancePath,
    store: StorePath,
    consolidation_id: ConsolidationPath,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Consolidation:
    """Discard a proposed run; no memory changes."""
    return discard_proposal(app.store(instance_id, store), consolidation_id)


lambda_handler = app.lambda_handler
