"""The KiviDB agent memory MCP server (``pip install 'kividb-memory[mcp]'``).

- stdio: ``python -m kividb_memory.mcp`` (:mod:`kividb_memory.mcp.__main__`), configured by
  ``KIVIDB_API_URL``, ``KIVIDB_API_KEY`` and the optional ``KIVIDB_INSTANCE``, ``KIVIDB_STORE``.
- remote: stateless Streamable HTTP (:mod:`kividb_memory.mcp.remote`), served at ``POST /mcp``
  by the API's own ``McpFunction``.

Both serve the tools of :mod:`kividb_memory.mcp.tools`.
"""
