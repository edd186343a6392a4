"""POST .../{store}/import/profiles: write exported actors' profiles with their histories."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import WRITE_RESPONSES
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import CREATE_STORE_FIRST, STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.transfer import import_profile_batch
from agent_memory.memories.profile_models import ProfileImportBatch, ProfileImportResult

app = Api(store_not_found_step=CREATE_STORE_FIRST, idempotent_writes=True)


@app.post(
    STORE_ROUTE + "/import/profiles",
    summary="Import profiles",
    tags=["export and import"],
    responses=WRITE_RESPONSES,
)
def import_profiles(
    instance_id: InstancePath,
    store: StorePath,
    body: Annotated[ProfileImportBatch, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> ProfileImportResult:
    """Write each profile (1 to 100) as exported: its fields' current values and histories
    replace what the actor holds of those fields; imported again, the same. Every field must be
    one of the store's ``profile_fields`` and every value of its type, all checked before
    anything is written (422 naming ``profiles.<i>.fields.<name>``)."""
    return import_profile_batch(app.store(instance_id, store), body)


lambda_handler = app.lambda_handler
