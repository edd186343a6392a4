"""POST /mcp (and GET, DELETE /mcp: 405): the remote MCP server, stateless Streamable HTTP.

The tools are ``kividb_memory.mcp.tools`` (the client package, ``client/``), the same ones
``python -m kividb_memory.mcp`` serves over stdio; each calls this API over HTTP with the
caller's own key (``docs/mcp.md`` says why), at ``KIVIDB_MCP_API_URL`` (``template.yaml``; the
local stack sets it to itself), never at an address taken from the request. Not ``mcp.py``: in
the function's package that name would be the MCP SDK's own ``mcp`` package.
"""

from kividb_memory.mcp.remote import LambdaAdapter, RemoteServer

lambda_handler = LambdaAdapter(RemoteServer())
