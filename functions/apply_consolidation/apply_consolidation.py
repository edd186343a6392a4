"""POST .../consolidations/{consolidation_id}/apply:
apply a proposed run: the steps that still hold (409 when none does).
"""

from http import HTTPStatus

from agent_memory.consolidation.models import Consolidation
from agent_memory.edge.http_errors import responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import CONSOLIDATION_ROUTE, ConsolidationPath, InstancePath, StorePath
from agent_memory.flows.consolidation import apply_proposal

app = Api(idempotent_writes=True)


@app.post(
    CONSOLIDATION_ROUTE + "/apply",
    summary="Apply a proposed consolidation",
    tags=["consolidation"],
    responses=responses({200: "The run"}, errors=(HTTPStatus.CONFLICT,)),
)
def apply_consolidation(
    instance_id: InstancePath,
    store: StorePath,
    consolidation_id: ConsolidationPath,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Consolidation:
    """Apply a proposed run: the steps that still hold (409 when none does)."""
    return apply_proposal(app.store(instance_id, store), consolidation_id)


lambda_handler = app.lambda_handler
