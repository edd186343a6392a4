"""The remote MCP server's Lambda function and its events/mcp_handler*.json samples."""

from __future__ import annotations

import json
from typing import Any

from local.template import Function
from tests.support.common import ROOT

FUNCTION = Function("McpFunction", ROOT / "functions" / "mcp", "mcp_handler.lambda_handler")


def sample(name: str = "mcp_handler", **changes: Any) -> dict[str, Any]:
    event = json.loads((ROOT / "events" / f"{name}.json").read_text())
    event.update(changes)
    return event
