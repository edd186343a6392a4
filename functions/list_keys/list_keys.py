"""GET /keys: the API keys of the caller's organization, never their secrets; the
organization's admin key only."""

from agent_memory.control.key_models import KeyList
from agent_memory.edge.http_errors import ERROR_RESPONSES
from agent_memory.edge.resolver import Api
from agent_memory.flows.keys import key_list

app = Api(admin_only="manages API keys")


@app.get("/keys", summary="List API keys", tags=["keys"], responses=ERROR_RESPONSES)
def list_keys() -> KeyList:
    """Every key of the organization, oldest first, with its scope (``access: "admin"`` for
    an unscoped one)."""
    return key_list(app.caller)


lambda_handler = app.lambda_handler
