"""``python -m kividb_memory.mcp``: the MCP server over stdio, for an assistant on this machine.

Environment: ``KIVIDB_API_URL`` (the API, e.g. ``http://127.0.0.1:3000`` for ``make run``) and
``KIVIDB_API_KEY`` (required), ``KIVIDB_INSTANCE`` and ``KIVIDB_STORE`` (optional: the instance
and store a tool uses when the call names none). A missing setting is one line on stderr and
exit status 2, before the server reads anything from stdin. Each line of stdin is checked as
the remote server checks a body (:mod:`kividb_memory.mcp.stdio`): one that is not one JSON-RPC
message is answered with JSON-RPC's parse error or invalid request error, never with silence.
"""

from __future__ import annotations

import os
import sys


def main() -> None:
    """Serve the tools over stdin/stdout until stdin closes."""
    try:
        from kividb_memory.mcp.stdio import serve
        from kividb_memory.mcp.tools import (
            INSTANCE_ENV,
            STORE_ENV,
            Connection,
            Defaults,
            build_server,
        )
    except ModuleNotFoundError as exc:
        if exc.name != "mcp" and not (exc.name or "").startswith("mcp."):
            raise
        print(
            "kividb_memory.mcp: the MCP SDK is not installed; pip install 'kividb-memory[mcp]'",
            file=sys.stderr,
        )
        raise SystemExit(2) from None
    import anyio  # the SDK's own dependency

    from kividb_memory.client import MemoryClient

    try:
        client = MemoryClient()
    except ValueError as exc:
        print(f"kividb_memory.mcp: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    defaults = Defaults(os.environ.get(INSTANCE_ENV) or None, os.environ.get(STORE_ENV) or None)
    connection = Connection(client, defaults)
    server = build_server(lambda ctx: connection, defaults)
    try:
        anyio.run(serve, server)
    finally:
        client.close()


if __name__ == "__main__":
    main()
