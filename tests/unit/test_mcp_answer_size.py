"""The MCP tools' answers stay under Lambda's limit: a tool result carries an answer twice (as
text and as structured content), so search results are cut to ``TOOL_ANSWER_BYTES`` (best
first, the count of the others said) and recall asks the API for no more than that."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from kividb_memory import models as m
from kividb_memory.mcp.tools import TOOL_ANSWER_BYTES, carried_bytes, fitted_search

WHEN = datetime(2026, 12, 1, tzinfo=UTC)


def _memory(n: int, text: str) -> m.MemoryView:
    return m.MemoryView(
        id=f"mem_{n:020x}",
        text=text,
        type="semantic",
        actor_id="a",
        topics=[],
        metadata={},
        importance=None,
        confidence=None,
        created_at=WHEN,
        updated_at=WHEN,
        expires_at=WHEN,
        source=None,
        valid_from=WHEN,
        score=1 - n / 1000,
    )


def test_a_search_answer_over_the_tools_budget_keeps_the_best_and_counts_the_rest():
    found = m.SearchResult(
        memories=[_memory(n, "\u0001" * 8000) for n in range(100)], memories_omitted=2
    )
    assert carried_bytes(found) > TOOL_ANSWER_BYTES
    cut = fitted_search(found, TOOL_ANSWER_BYTES)
    assert carried_bytes(cut) <= TOOL_ANSWER_BYTES
    assert cut.memories == found.memories[: len(cut.memories)] and cut.memories
    assert cut.memories_omitted == 2 + 100 - len(cut.memories)
    # The tool result: the answer as text and as structured content, in one JSON-RPC answer,
    # written once more as the Lambda response's body.
    result = {
        "content": [{"type": "text", "text": cut.model_dump_json()}],
        "structuredContent": cut.model_dump(mode="json"),
    }
    rpc = json.dumps({"jsonrpc": "2.0", "id": 1, "result": result}, ensure_ascii=False)
    assert len(json.dumps(rpc, ensure_ascii=False).encode()) < 6_291_456


def test_a_search_answer_that_fits_is_passed_on_as_it_is():
    found = m.SearchResult(memories=[_memory(n, "tea") for n in range(100)])
    assert fitted_search(found, TOOL_ANSWER_BYTES) is found
