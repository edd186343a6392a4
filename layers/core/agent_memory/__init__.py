"""KiviDB agent memory: the domain core shared by every function through the Lambda layer.

The packages, each with one concern, from the bottom up (a package imports only those below
it; docs/design.md draws the graph, and ``make lint`` checks it with import-linter):

- ``database``: connections to Redis-protocol databases, Lua scripts, every key, partitions;
- ``providers``: language models, embeddings, the network guard, provider keys at rest;
- ``control``: organizations, API keys, database instances and their ownership;
- ``stores``: a store's settings and its registry in one database;
- ``sessions``: working memory (messages, summaries) and its export and import;
- ``search``: the in-memory index of an actor's memories (vectors, BM25, filters, fusion);
- ``memories``: long-term memory (write path, reads, records, scripts, transfer, recall);
- ``background``: extraction and summarization, and their scheduling;
- ``edge``: the resolver every handler uses, error mapping, authorization, wiring.

The top-level modules are what every package shares: ``errors``, ``clock``, ``models``
(pydantic bases, identifiers, limits), ``render`` (the one quoting rule of text from callers),
``answers`` (what an answer may weigh) and ``observability`` (logger, metrics, tracer).
"""
