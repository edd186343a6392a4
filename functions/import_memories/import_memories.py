"""POST .../{store}/import/memories: keep exported memories under their own ids, times,
links and vectors."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Body

from agent_memory.edge.http_errors import WRITE_RESPONSES
from agent_memory.edge.idempotency import IdempotencyKeyHeader
from agent_memory.edge.resolver import Api
from agent_memory.edge.routes import CREATE_STORE_FIRST, STORE_ROUTE, InstancePath, StorePath
from agent_memory.flows.transfer import import_memory_batch
from agent_memory.memories.transfer_models import MemoryImportBatch, MemoryImportResult

app = Api(store_not_found_step=CREATE_STORE_FIRST, idempotent_writes=True)


@app.post(
    STORE_ROUTE + "/import/memories",
    summary="Import memories",
    tags=["export and import"],
    responses=WRITE_RESPONSES,
)
def import_memories(
    instance_id: InstancePath,
    store: StorePath,
    body: Annotated[MemoryImportBatch, Body()],
    idempotency_key: IdempotencyKeyHeader = None,
) -> MemoryImportResult:
    """Keep each memory (1 to 100) as exported: id, times, chain links, versions and vector;
    a memory imported again is written again, the same. Checked as added memories are, its
    times in order, and its supersede links against the batch and the store (chains the API
    could have made: one actor, named back, no fork, no cycle), all before anything is written
    (422 naming ``memories.<i>.<field>``, an id given twice too); those whose time is up are
    left out and named in ``expired``. 409 when an id is a live memory of another actor in
    this store (nothing is written)."""
    return import_memory_batch(app.store(instance_id, store), body)


lambda_handler = app.lambda_handler
