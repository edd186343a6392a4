"""Keyed memories: JSON values a caller keeps under a ``(namespace, key)`` of its own choosing
(the model of LangGraph's ``BaseStore``), with atomic upserts, reads and deletes by that key,
search by namespace prefix, value filters and meaning, and the listing of namespaces.

Apart from the memories the service extracts: a keyed value is kept exactly as given (no
redaction, no dedupe, never merged or superseded), so a framework reads back what it wrote.
"""
