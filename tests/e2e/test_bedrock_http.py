"""Amazon Bedrock end to end: a store whose language model, embeddings and reranker are all
``bedrock`` runs the README's session (messages, extraction, search, recall) against the
loopback stand-in (``tools.bedrock_standin``), the stack signing every call with the AWS
credentials in its environment (``tests.support.stack.STANDIN_AWS``, as a function's role gives
them) and the stand-in checking each signature. Bad Bedrock settings are refused and change
nothing; a reranker that refuses leaves the fused order."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

import pytest

from kividb_memory import MemoryClient, NotFoundError, ValidationError
from tests.support.common import unique
from tests.support.stack import STANDIN_AWS
from tools.bedrock_standin import BedrockStandIn, serving
from tools.sigv4_check import AwsCredentials

REGION = "eu-central-1"
CHAT = "amazon.nova-lite-v1:0"
TITAN = "amazon.titan-embed-text-v2:0"
RERANK = "cohere.rerank-v3-5:0"
SAID = [
    "I adopted a cat named Miso last week.",
    "My favourite drink is green tea.",
    "We moved to Lisbon in May.",
]


@pytest.fixture
def bedrock() -> Iterator[tuple[BedrockStandIn, str]]:
    credentials = AwsCredentials(
        STANDIN_AWS["AWS_ACCESS_KEY_ID"],
        STANDIN_AWS["AWS_SECRET_ACCESS_KEY"],
        STANDIN_AWS["AWS_SESSION_TOKEN"],
    )
    with serving(credentials, REGION) as server:
        yield server.standin, server.url


@pytest.fixture
def api(open_stack) -> Iterator[MemoryClient]:
    with open_stack.memory() as client:
        yield client


@pytest.fixture
def store_name(api, bedrock) -> Iterator[str]:
    _, url = bedrock
    name = unique("bedrock")
    view = api.put_store(
        "local",
        name,
        llm_provider="bedrock",
        llm_model=CHAT,
        llm_base_url=url,
        embed_provider="bedrock",
        embed_model=TITAN,
        embed_base_url=url,
        dimensions=256,
        rerank_provider="bedrock",
        rerank_model=RERANK,
        rerank_base_url=url,
        aws_region=REGION,
        extraction_delay_seconds=30,
    )
    assert view.llm_provider == view.embed_provider == view.rerank_provider == "bedrock"
    assert view.aws_region == REGION
    assert not (view.has_llm_api_key or view.has_embed_api_key or view.has_rerank_api_key)
    yield name
    with contextlib.suppress(NotFoundError):
        api.delete_store("local", name)


def wait_for(check, timeout: float, what: str):
    deadline = time.monotonic() + timeout
    while (value := check()) is None:
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.25)
    return value


def test_the_readme_session_runs_on_bedrock_extraction_included(api, bedrock, store_name):
    standin, _ = bedrock
    store = api.store("local", store_name)
    messages = [{"role": "user", "content": text, "name": "Alice"} for text in SAID]
    assert store.add_events("s1", messages, actor_id="alice").added == 3
    store.extract("s1")

    def kept():
        found = store.list_memories(actor_id="alice").memories
        return found if len(found) == 3 else None

    memories = wait_for(kept, 30, "three memories extracted through Converse")
    assert {m.text.split(": ", 1)[1] for m in memories} == set(SAID)

    found = store.search("cat named Miso", actor_id="alice", limit=2)
    assert found.reranked is True
    assert "Miso" in found.memories[0].text and 0.0 <= found.memories[0].score <= 1.0
    recalled = store.recall("s1", query="What is Alice's cat called?", actor_id="alice", limit=1)
    assert recalled.reranked is True and "Miso" in recalled.context

    actions = {seen.action for seen in standin.requests}
    assert actions == {"converse", "invoke", "rerank"}
    assert all(seen.signed for seen in standin.requests)
    assert all(
        seen.headers["x-amz-security-token"] == STANDIN_AWS["AWS_SESSION_TOKEN"]
        for seen in standin.requests
    )
    sizes = {seen.body["dimensions"] for seen in standin.requests if seen.action == "invoke"}
    assert sizes == {256}
    today = store.usage().days[-1]
    assert today.llm_input_tokens > 0 and today.llm_output_tokens > 0
    assert today.embedding_tokens > 0  # Titan's inputTextTokenCount


def test_cohere_embed_is_told_memories_from_queries(api, bedrock, store_name):
    standin, _ = bedrock
    api.put_store("local", store_name, embed_model="cohere.embed-v4:0")
    store = api.store("local", store_name)
    store.add_memory("My favourite drink is green tea.", actor_id="ann")
    assert [r.body["input_type"] for r in standin.requests] == ["search_document"]
    found = store.search("what does ann drink?", mode="semantic", actor_id="ann")
    assert [m.text for m in found.memories] == ["My favourite drink is green tea."]
    store.recall("s1", query="tea", actor_id="ann")
    embeds = [r.body for r in standin.requests if r.action == "invoke"]
    assert [b["input_type"] for b in embeds] == ["search_document", "search_query", "search_query"]
    assert [b["texts"] for b in embeds[1:]] == [["what does ann drink?"], ["tea"]]


def test_a_refusing_reranker_leaves_the_fused_order(api, bedrock, store_name):
    standin, _ = bedrock
    store = api.store("local", store_name)
    store.add_memory("Alice drinks green tea", actor_id="alice")
    store.add_memory("Alice has a cat named Miso", actor_id="alice")
    standin.fail(403, "AccessDeniedException", action="rerank")
    found = store.search("cat Miso", actor_id="alice", limit=2)
    assert found.reranked is False and len(found.memories) == 2


def test_bedrock_settings_that_cannot_work_are_refused_and_change_nothing(api, store_name):
    before = api.get_store("local", store_name)
    cases = [
        ({"llm_api_key": "sk-not-used-by-bedrock-0123"}, "llm_api_key"),
        ({"aws_region": None}, "aws_region is required"),
        ({"dimensions": 1536}, "256, 512 or 1024 dimensions"),
        ({"embed_model": "amazon.nova-lite-v1:0"}, "Titan Text Embeddings"),
    ]
    for change, problem in cases:
        with pytest.raises(ValidationError) as refused:
            api.put_store("local", store_name, **change)
        assert refused.value.status == 422 and problem in str(refused.value.details)
    after = api.get_store("local", store_name)
    assert after.model_dump(exclude={"counts"}) == before.model_dump(exclude={"counts"})
