"""Rerankers against real HTTP servers on loopback: Cohere v2, Voyage and Jina shapes, a custom
server of Cohere's shape, and the ``llm`` scorer with a scripted chat model. Each provider's
request and answer shape, then what goes wrong (time-outs, 429s, 5xx, garbage), then the stage
of a search that keeps the fused order when the reranker fails."""

import json
import logging
import math
import time

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

from agent_memory.errors import EndpointRefused, ProviderRejected, ProviderUnavailable
from agent_memory.memories.reranking import apply_reranker
from agent_memory.observability import logger
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.factory import make_reranker
from agent_memory.providers.language_models import CustomChatModel
from agent_memory.providers.llm_reranker import LlmReranker, read_scores, rerank_prompt
from agent_memory.providers.network import CallPolicy
from agent_memory.providers.rerankers import (
    HttpReranker,
    Relevance,
    relevance_scale,
)
from agent_memory.providers.setting import Outbound, ProviderSetting, in_the_clear
from tests.support.model_servers import ScriptedChatServer
from tests.support.rerank_servers import RerankServer, views

KEY = "rk-test-0123456789abcdefSECRET"
DOCS = [
    "Alice moved to Lisbon in May",
    "Alice likes green tea",
    "Bob plays chess on Sundays",
    "Alice adopted a cat named Miso",
]


def client(**overrides) -> ProviderClient:
    """A quick client: no real waits between retries."""
    base = {
        "deadline": 2.0,
        "connect_timeout": 0.5,
        "read_timeout": 2.0,
        "max_retries": 1,
        "max_retry_after": 1.0,
    }
    return ProviderClient(CallPolicy(**{**base, **overrides}), sleep=lambda _s: None)


def reranker(shape: str, server: RerankServer, **client_settings) -> HttpReranker:
    return make_reranker(
        ProviderSetting("rerank", shape, "rerank-test", server.url, None, KEY),
        Outbound(client(**client_settings), True, in_the_clear),
    )


# --- each provider's shapes -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("shape", "count_field", "extra"),
    [
        ("cohere", "top_n", {}),
        ("voyage", "top_k", {"truncation": True}),
        ("jina", "top_n", {"return_documents": False}),
    ],
)
def test_each_provider_is_asked_in_its_shape_and_its_order_is_read(shape, count_field, extra):
    with RerankServer(shape) as server:
        placed = reranker(shape, server).rerank("Alice Lisbon May", DOCS, 2)
    sent = server.requests[0]
    assert sent.path == "/v1/rerank"
    assert sent.headers["authorization"] == f"Bearer {KEY}"
    assert sent.body == {
        "model": "rerank-test",
        "query": "Alice Lisbon May",
        "documents": DOCS,
        count_field: 2,
        **extra,
    }
    assert [p.index for p in placed] == [0, 1]  # every word, then "alice" alone (first of 3)
    assert placed[0].relevance == pytest.approx(1.0) and placed[1].relevance == pytest.approx(1 / 3)


def test_a_custom_reranker_speaks_cohere_at_its_base_url_with_an_optional_key():
    with RerankServer("cohere") as server:
        custom = make_reranker(
            ProviderSetting("rerank", "custom", "bge-reranker", server.url, None, None),
            Outbound(client(), True, in_the_clear),
        )
        placed = custom.rerank("chess Sundays", DOCS, 1)
    assert [p.index for p in placed] == [2]
    assert "authorization" not in server.requests[0].headers


def test_a_custom_reranker_on_a_private_address_is_refused_unless_allowed():
    with RerankServer("cohere") as server:
        custom = make_reranker(
            ProviderSetting("rerank", "custom", "m", server.url, None, None),
            Outbound(client(), False, in_the_clear),
        )
        with pytest.raises(EndpointRefused):
            custom.rerank("q", DOCS, 2)
    assert server.requests == []


def test_the_hosted_providers_need_a_key_and_custom_needs_a_base_url():
    for shape in ("cohere", "voyage", "jina"):
        with pytest.raises(Exception, match="rerank_api_key is required"):
            make_reranker(
                ProviderSetting("rerank", shape, "m", None, None, None),
                Outbound(client(), False, in_the_clear),
            )
    with pytest.raises(Exception, match="rerank_base_url is required"):
        make_reranker(
            ProviderSetting("rerank", "custom", "m", None, None, None),
            Outbound(client(), False, in_the_clear),
        )


def test_a_key_never_appears_in_the_rerankers_repr():
    made = make_reranker(
        ProviderSetting("rerank", "cohere", "m", None, None, KEY),
        Outbound(client(), False, in_the_clear),
    )
    assert KEY not in repr(made) and "api.cohere.com" in repr(made)


# --- what goes wrong --------------------------------------------------------------------------


def test_a_429_is_retried_and_then_answered():
    with RerankServer("cohere") as server:
        server.fail(429, {"Retry-After": "0"})
        placed = reranker("cohere", server).rerank("Alice cat", DOCS, 1)
    assert [p.index for p in placed] == [3] and len(server.requests) == 2


def test_429s_until_the_retries_run_out_and_a_long_retry_after_are_unavailable():
    with RerankServer("cohere") as server:
        server.fail(429)
        server.fail(503)
        with pytest.raises(ProviderUnavailable):
            reranker("cohere", server).rerank("q", DOCS, 2)
        server.fail(429, {"Retry-After": "30"})
        with pytest.raises(ProviderUnavailable):
            reranker("cohere", server).rerank("q", DOCS, 2)


def test_a_slow_reranker_is_cut_off_at_the_deadline():
    with RerankServer("jina") as server:
        server.delay = 3.0
        started = time.monotonic()
        with pytest.raises(ProviderUnavailable):
            reranker("jina", server, deadline=0.6, read_timeout=0.6).rerank("q", DOCS, 2)
        assert time.monotonic() - started < 1.5


def test_a_refusal_is_rejected_without_the_providers_text():
    with RerankServer("voyage") as server:
        server.fail(401)
        with pytest.raises(ProviderRejected) as caught:
            reranker("voyage", server).rerank("q", DOCS, 2)
    assert "sk-should-never" not in str(caught.value) and "scripted" not in str(caught.value)


GARBAGE = [
    ({"results": "nope"}, "without a list of results"),
    ({}, "without a list of results"),
    ({"results": [{"index": 9, "relevance_score": 0.5}]}, "valid 'index'"),
    ({"results": [{"index": True, "relevance_score": 0.5}]}, "valid 'index'"),
    ({"results": [{"index": 0, "relevance_score": 0.5}] * 2}, "index 0 twice"),
    ({"results": [{"index": 0, "relevance_score": "high"}]}, "numeric"),
    ({"results": [{"index": 0, "relevance_score": None}]}, "numeric"),
    ({"results": [{"index": 0, "relevance_score": 1e400}]}, "finite"),
    ({"results": [{"index": 0, "relevance_score": 0.5}]}, "1 results for 2 asked"),
    ([1, 2], "without a list of results"),
]


@pytest.mark.parametrize(("answer", "problem"), GARBAGE)
def test_garbage_answers_are_rejected_and_say_what_was_wrong(answer, problem):
    with RerankServer("cohere") as server:
        server.garbage(answer)
        with pytest.raises(ProviderRejected, match=problem):
            reranker("cohere", server).rerank("q", DOCS, 2)


def test_an_answer_of_logits_is_scaled_onto_zero_to_one_keeping_its_order():
    with RerankServer("cohere") as server:
        server.garbage(
            {
                "results": [
                    {"index": 1, "relevance_score": -2.5},
                    {"index": 0, "relevance_score": 4.0},
                ]
            }
        )
        placed = reranker("cohere", server).rerank("q", DOCS, 2)
    assert [p.index for p in placed] == [0, 1]
    assert placed[0].relevance == pytest.approx(1 / (1 + math.exp(-4.0)))
    assert 0 < placed[1].relevance < 0.5


@given(st.lists(st.floats(allow_nan=False, allow_infinity=False), min_size=1, max_size=30))
def test_relevance_is_always_on_zero_to_one_and_keeps_the_order(scores):
    scaled = relevance_scale(scores)
    assert all(0.0 <= s <= 1.0 for s in scaled)
    for a, b in zip(scores, scaled, strict=True):
        for c, d in zip(scores, scaled, strict=True):
            if a < c:
                assert b <= d


# --- the llm scorer ---------------------------------------------------------------------------


def scorer(server: ScriptedChatServer) -> LlmReranker:
    model = CustomChatModel(server.url, "tiny", None, allow_private=True, client=client())
    return LlmReranker(model)


def test_the_llm_scorer_asks_for_scores_and_orders_by_them():
    with ScriptedChatServer("openai") as server:
        server.reply(
            json.dumps(
                {
                    "scores": [
                        {"n": 1, "score": 0.2},
                        {"n": 2, "score": 0.1},
                        {"n": 3, "score": 0.9},
                        {"n": 4, "score": 1.7},
                    ]
                }
            ),
            input_tokens=300,
            output_tokens=40,
        )
        llm = scorer(server)
        placed = llm.rerank("Where did Alice move?", DOCS, 3)
    assert placed == [Relevance(3, 1.0), Relevance(2, 0.9), Relevance(0, 0.2)]
    assert (llm.input_tokens, llm.output_tokens) == (300, 40)
    user = server.requests[0].body["messages"][-1]["content"]
    assert '[1] "Alice moved to Lisbon in May"' in user and 'Query: "Where did Alice move?"' in user


def test_the_llm_scorer_keeps_the_sent_order_for_what_it_did_not_score():
    with ScriptedChatServer("openai") as server:
        scores = [
            {"n": 4, "score": 0.6},
            {"n": 2, "score": 0.7},
            {"n": 99, "score": 1},
            {"n": 2, "score": 0},
        ]
        server.reply(json.dumps({"scores": scores}))
        placed = scorer(server).rerank("q", DOCS, 4)
    assert [p.index for p in placed] == [1, 3, 0, 2]


@pytest.mark.parametrize(
    "answer",
    ['{"scores": [{"n": 1, "score": 0.5}]}', '{"scores": "all good"}', '{"ranking": [1, 2]}'],
)
def test_an_llm_answer_scoring_under_half_the_candidates_is_rejected(answer):
    with ScriptedChatServer("openai") as server:
        server.reply(answer)
        with pytest.raises(ProviderRejected):
            scorer(server).rerank("q", DOCS, 2)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=60), st.lists(st.text(max_size=60), min_size=1, max_size=5))
def test_no_query_or_candidate_text_adds_a_line_or_a_candidate_to_the_prompt(query, documents):
    _, user = rerank_prompt(query, documents)
    lines = user.splitlines()
    assert lines[0].startswith('Query: "') and lines[1] == "" and lines[2] == "Memories:"
    assert len(lines) == 3 + len(documents)
    for n, line in enumerate(lines[3:], start=1):
        assert line.startswith(f'[{n}] "')
    assert len(user.splitlines()) == len(user.split("\n"))


@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner),
    )
)
def test_reading_any_answer_never_raises_and_keeps_scores_on_zero_to_one(answer):
    scores = read_scores({"scores": answer}, 5)
    assert all(0 <= i < 5 and 0.0 <= s <= 1.0 for i, s in scores.items())


# --- the stage of a search --------------------------------------------------------------------


def test_the_stage_orders_by_the_reranker_and_scores_by_its_relevance():
    with RerankServer("cohere") as server:
        found = apply_reranker(reranker("cohere", server), "Alice cat Miso", views(*DOCS), 2)
    assert found.reranked is True
    assert [m.text for m in found.memories] == [DOCS[3], DOCS[0]]
    assert found.memories[0].score == pytest.approx(1.0)


@pytest.mark.parametrize("fault", ["timeout", "429", "500", "garbage", "refused"])
def test_the_stage_keeps_the_fused_order_when_the_reranker_fails(fault, caplog):
    with RerankServer("cohere") as server:
        if fault == "timeout":
            server.delay = 2.0
        elif fault == "429":
            server.fail(429)
            server.fail(429)
        elif fault == "500":
            server.fail(500)
            server.fail(502)
        elif fault == "garbage":
            server.garbage({"results": [{"index": 7, "relevance_score": 1}]})
        else:
            server.fail(400)
        quick = reranker("cohere", server, deadline=0.5, read_timeout=0.5)
        candidates = views(*DOCS)
        with caplog.at_level(logging.WARNING, logger=logger.name):
            found = apply_reranker(quick, "Alice cat Miso", candidates, 3)
    assert found.reranked is False
    assert found.memories == candidates[:3]
    assert all("Alice" not in r.getMessage() for r in caplog.records)
