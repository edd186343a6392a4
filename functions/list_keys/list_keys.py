"""GET /keys: the API keys of the caller's organization, never their secrets; the
organization's admin key only."""

from typing import Annotated

from aws_lambda_powertools.event_handler.openapi.params import Query

from agent_memory.control.key_models import KEY_CURSOR_PATTERN, MAX_KEY_PAGE, KeyList
from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.flows.keys import key_list

app = Api(admin_only="manages API keys")


@app.get("/keys", summary="List API keys", tags=["keys"], responses=ERROR_RESPONSES)
def list_keys(
    cursor: Annotated[str | None, Query(pattern=KEY_CURSOR_PATTERN)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_KEY_PAGE)] = MAX_KEY_PAGE,
) -> KeyList:
    """A page of the organization's keys that have not expired, oldest first, with their
    scopes (``access: "admin"`` for an unscoped one): at most ``limit``, fewer when more would
    pass the answer's byte budget; ``next_cursor`` for the next page. Keys expired more than a
    day ago are purged."""
    return key_list(app.caller, cursor, limit)


lambda_handler = app.lambda_handler
