"""What every route shares: its path parameters (validated the same way everywhere), the route
prefixes, and the 204 answer of a DELETE.
"""

from __future__ import annotations

from http import HTTPStatus
from typing import Annotated, TypeVar

from aws_lambda_powertools.event_handler import Response
from aws_lambda_powertools.event_handler.openapi.params import Path, Query

from agent_memory.consolidation.models import CONSOLIDATION_ID_PATTERN
from agent_memory.edge.http_errors import JSON
from agent_memory.models import (
    DAY_PATTERN,
    INSTANCE_ID_PATTERN,
    MEMORY_ID_PATTERN,
    SESSION_ID_PATTERN,
    STORE_NAME_PATTERN,
)

V = TypeVar("V")
"""The view an answer carries."""

# Path parameters, validated the same way on every route.
InstancePath = Annotated[str, Path(pattern=INSTANCE_ID_PATTERN, description="Database instance id")]
StorePath = Annotated[str, Path(pattern=STORE_NAME_PATTERN, description="Store name")]
SessionPath = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description="Session id")]

MemoryPath = Annotated[str, Path(pattern=MEMORY_ID_PATTERN, description="Memory id")]
ActorPath = Annotated[str, Path(pattern=SESSION_ID_PATTERN, description="Actor id")]
ConsolidationPath = Annotated[
    str, Path(pattern=CONSOLIDATION_ID_PATTERN, description="Consolidation run id")
]

# The days of the usage routes (``control.usage.parse_day`` reads them).
FromDay = Annotated[
    str | None,
    Query(
        alias="from",
        pattern=DAY_PATTERN,
        description="First day (UTC), YYYY-MM-DD; by default 30 days before 'to'.",
    ),
]
ToDay = Annotated[
    str | None,
    Query(pattern=DAY_PATTERN, description="Last day (UTC), YYYY-MM-DD, included; today."),
]

STORE_ROUTE = "/instances/<instance_id>/agent-memory/<store>"

# What a 404 store_not_found tells the caller to do, on the routes where something fits: the
# routes that write into a store (a store is made with PUT on its own URL), and the deletes.
CREATE_STORE_FIRST = "create it with PUT first"
NOTHING_DELETED = "nothing was deleted"
SESSION_ROUTE = STORE_ROUTE + "/sessions/<session_id>"
MEMORY_ROUTE = STORE_ROUTE + "/memories/<memory_id>"
PROFILE_ROUTE = STORE_ROUTE + "/actors/<actor_id>/profile"
CONSOLIDATION_ROUTE = STORE_ROUTE + "/consolidations/<consolidation_id>"


def no_content() -> Response[None]:
    """The 204 answer of a DELETE."""
    return Response(status_code=HTTPStatus.NO_CONTENT, body=None)


def created(view: V, new: bool = True) -> Response[V]:
    """``view`` as the answer of a write that made something (201), or found it made already
    (200, ``new`` false: a store that existed, a memory the actor already had)."""
    status = HTTPStatus.CREATED if new else HTTPStatus.OK
    return Response(status_code=status, content_type=JSON, body=view)


def accepted(view: V) -> Response[V]:
    """``view`` as the answer of a request queued to run later (202)."""
    return Response(status_code=HTTPStatus.ACCEPTED, content_type=JSON, body=view)


KEYED_ROUTE = STORE_ROUTE + "/keyed-memories"
