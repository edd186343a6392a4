"""GET /keys: the API keys of the caller's organization, never their secrets; the
organization's admin key only."""

from agent_memory.control.key_models import KeyList, scope_view
from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api

app = Api(admin_only="manages API keys")


@app.get("/keys", summary="List API keys", tags=["keys"], responses=ERROR_RESPONSES)
def list_keys() -> KeyList:
    """Every key of the organization, oldest first, with its scope (``access: "admin"`` for
    an unscoped one)."""
    infos = app.runtime.control.api_keys.of(app.principal.org_id)
    return KeyList(keys=[scope_view(i.key_id, i.created_at, i.name, i.scope) for i in infos])


lambda_handler = app.lambda_handler
