"""POST .../consolidations/{consolidation_id}/revert:
undo an applied run (409 naming the memories that changed since).
"""

from http import HTTPStatus

from agent_memory.consolidation.models import Consolidation
from agent_memory.edge.http_errors import responses
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import CONSOLIDATION_ROUTE, ConsolidationPath, InstancePath, StorePath
from agent_memory.flows.consolidation import revert_run

app = Api(idempotent_writes=True)


@app.post(
    CONSOLIDATION_ROUTE + "/revert",
    summary="Revert an applied consolidation",
    tags=["consolidation"],
    responses=responses({200: "The run"}, errors=(HTTPStatus.CONFLICT,)),
)
def revert_consolidation(
    instance_id: InstancePath,
    store: StorePath,
    consolidation_id: ConsolidationPath,
    idempotency_key: IdempotencyKeyHeader = None,
) -> Consolidation:
    """Undo an applied run (409 naming the memories that changed since)."""
    return revert_run(app.store(instance_id, store), consolidation_id)


lambda_handler = app.lambda_handler
