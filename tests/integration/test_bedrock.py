"""Amazon Bedrock providers against the loopback stand-in (``tools.bedrock_standin``), which
checks every request's SigV4 signature independently of botocore (``tools.sigv4_check``):
Converse, Titan and Cohere embeddings through InvokeModel, and Rerank; each shape, then what goes
wrong (bad credentials, 429s, 5xx, time-outs, garbage), then what a store's settings allow."""

import contextlib
import logging
import time

import numpy as np
import pytest
from botocore.credentials import Credentials
from hypothesis import HealthCheck, given, settings, strategies as st

from agent_memory.errors import (
    EmbeddingMismatch,
    EndpointRefused,
    ModelAnswerInvalid,
    ProviderRejected,
    ProviderUnavailable,
    ValidationFailed,
)
from agent_memory.memories.reranking import apply_reranker
from agent_memory.providers.bedrock import (
    SigV4Signer,
    agent_runtime_url,
    default_credentials,
    make_bedrock_embedder,
    make_bedrock_model,
    make_bedrock_reranker,
    model_arn,
    model_path,
    runtime_url,
)
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.factory import make_embedder, make_language_model
from agent_memory.providers.network import CallPolicy
from agent_memory.providers.setting import Outbound, ProviderSetting, in_the_clear
from agent_memory.stores.models import ProviderSettings
from tests.support.rerank_servers import views
from tools.bedrock_standin import serving
from tools.scripted_model import embed
from tools.sigv4_check import AwsCredentials

REGION = "eu-west-1"
ACCESS = "AKIDSTANDINEXAMPLE01"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY"
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLESESSIONTOKEN"
CHAT = "anthropic.claude-3-haiku-20240307-v1:0"
TITAN = "amazon.titan-embed-text-v2:0"
RERANK = "amazon.rerank-v1:0"
DOCS = ["Alice moved to Lisbon in May", "Alice likes green tea", "Alice adopted a cat named Miso"]


def role() -> Credentials:
    return Credentials(ACCESS, SECRET, TOKEN)


def client(**overrides) -> ProviderClient:
    base = {
        "deadline": 3.0,
        "connect_timeout": 0.5,
        "read_timeout": 3.0,
        "max_retries": 1,
        "max_retry_after": 1.0,
    }
    return ProviderClient(CallPolicy(**{**base, **overrides}), sleep=lambda _s: None)


@pytest.fixture
def bedrock():
    with serving(AwsCredentials(ACCESS, SECRET, TOKEN), REGION) as server:
        yield server.standin, server.url


def chat(url, credentials=role, **client_settings):
    built = client(**client_settings)
    return make_bedrock_model(
        CHAT, REGION, url, allow_private=True, client=built, credentials=credentials
    )


def embedder(url, model=TITAN, dimensions=256, **client_settings):
    return make_bedrock_embedder(
        model,
        dimensions,
        REGION,
        url,
        allow_private=True,
        client=client(**client_settings),
        credentials=role,
    )


def reranker(url, model=RERANK, **client_settings):
    return make_bedrock_reranker(
        model, REGION, url, allow_private=True, client=client(**client_settings), credentials=role
    )


# --- the shapes ----------------------------------------------------------------------------


def test_converse_is_asked_in_its_shape_signed_and_its_answer_and_usage_read(bedrock):
    standin, url = bedrock
    standin.reply('{"summary": "Alice moved"}')
    answer = chat(url).complete_json(
        "Summarize as JSON.", "Alice: I moved to Lisbon", max_tokens=300
    )
    assert answer.data == {"summary": "Alice moved"} and answer.input_tokens == 10
    seen = standin.requests[-1]
    assert seen.signed and seen.path == "/model/anthropic.claude-3-haiku-20240307-v1%3A0/converse"
    assert seen.body == {
        "messages": [{"role": "user", "content": [{"text": "Alice: I moved to Lisbon"}]}],
        "inferenceConfig": {"maxTokens": 300},
        "system": [{"text": "Summarize as JSON."}],
    }
    assert seen.headers["x-amz-security-token"] == TOKEN
    assert (
        seen.headers["authorization"].startswith(f"AWS4-HMAC-SHA256 Credential={ACCESS}/")
        and f"/{REGION}/bedrock/aws4_request" in seen.headers["authorization"]
    )


def test_converse_answers_cut_off_twice_are_model_answer_invalid(bedrock):
    standin, url = bedrock
    standin.reply('{"summary": "Al', stop_reason="max_tokens")
    standin.reply('{"summary": "Al', stop_reason="max_tokens")
    with pytest.raises(ModelAnswerInvalid, match="cut off at its token limit"):
        chat(url).complete_json("JSON please", "x", max_tokens=5)
    assert len(standin.requests) == 2


def test_the_scripted_rule_answers_extraction_through_converse(bedrock):
    _, url = bedrock
    prompt = '[1] user "Alice", 2023-05-08 10:00:00 UTC: "I adopted a cat named Miso."'
    answer = chat(url).complete_json("Extract memories as JSON.", prompt)
    assert [m["text"] for m in answer.data["memories"]] == [
        "Alice said on 2023-05-08: I adopted a cat named Miso."
    ]


def test_titan_v2_is_asked_one_text_at_a_time_at_its_size_normalized(bedrock):
    standin, url = bedrock
    model = embedder(url)
    vectors = model.embed(["a cat named Miso", "green tea"])
    assert vectors.shape == (2, 256) and vectors.dtype == np.float32
    np.testing.assert_allclose(vectors[1], embed("green tea", 256), rtol=1e-6)
    bodies = [r.body for r in standin.requests]
    assert bodies == [
        {"inputText": "a cat named Miso", "dimensions": 256, "normalize": True},
        {"inputText": "green tea", "dimensions": 256, "normalize": True},
    ]
    assert model.tokens == 6 and all(r.signed for r in standin.requests)
    assert standin.requests[0].path == "/model/amazon.titan-embed-text-v2%3A0/invoke"


def test_cohere_embed_is_asked_96_texts_at_a_time_as_documents(bedrock):
    standin, url = bedrock
    texts = [f"memory number {i}" for i in range(100)]
    vectors = embedder(url, "cohere.embed-english-v3", 1024).embed(texts)
    assert vectors.shape == (100, 1024)
    np.testing.assert_allclose(vectors[99], embed(texts[99], 1024), rtol=1e-6)
    sent = [r.body for r in standin.requests]
    assert [len(b["texts"]) for b in sent] == [96, 4]
    assert sent[0]["input_type"] == "search_document" and sent[0]["embedding_types"] == ["float"]
    assert "output_dimension" not in sent[0]


def test_cohere_embed_is_asked_for_a_query_as_a_query_and_titan_alike(bedrock):
    standin, url = bedrock
    cohere = embedder(url, "cohere.embed-english-v3", 1024)
    cohere.embed(["green tea"], "query")
    cohere.embed(["green tea"])
    assert [r.body["input_type"] for r in standin.requests] == ["search_query", "search_document"]
    titan = embedder(url)
    np.testing.assert_array_equal(titan.embed(["tea"], "query"), titan.embed(["tea"]))
    assert standin.requests[-1].body == standin.requests[-2].body


def test_cohere_embed_v4_is_asked_for_the_stores_size(bedrock):
    standin, url = bedrock
    assert embedder(url, "cohere.embed-v4:0", 512).embed(["tea"]).shape == (1, 512)
    assert standin.requests[0].body["output_dimension"] == 512


def test_a_text_longer_than_titan_takes_is_cut_to_its_limit(bedrock):
    standin, url = bedrock
    embedder(url).embed(["x" * 60_000])
    assert len(standin.requests[0].body["inputText"]) == 50_000


def test_rerank_is_asked_in_its_shape_with_the_models_arn(bedrock):
    standin, url = bedrock
    found = reranker(url).rerank("cat Miso", DOCS, 2)
    assert [r.index for r in found] == [2, 0] and found[0].relevance == pytest.approx(1.0)
    seen = standin.requests[-1]
    assert seen.signed and seen.path == "/rerank"
    assert seen.body["queries"] == [{"type": "TEXT", "textQuery": {"text": "cat Miso"}}]
    assert seen.body["sources"][2] == {
        "type": "INLINE",
        "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": DOCS[2]}},
    }
    assert seen.body["rerankingConfiguration"] == {
        "type": "BEDROCK_RERANKING_MODEL",
        "bedrockRerankingConfiguration": {
            "modelConfiguration": {
                "modelArn": f"arn:aws:bedrock:{REGION}::foundation-model/{RERANK}"
            },
            "numberOfResults": 2,
        },
    }


def test_addresses_arns_and_paths_follow_the_region_and_partition():
    assert runtime_url("us-east-1") == "https://bedrock-runtime.us-east-1.amazonaws.com"
    assert (
        agent_runtime_url("cn-north-1")
        == "https://bedrock-agent-runtime.cn-north-1.amazonaws.com.cn"
    )
    assert model_arn("cohere.rerank-v3-5:0", "us-gov-west-1") == (
        "arn:aws-us-gov:bedrock:us-gov-west-1::foundation-model/cohere.rerank-v3-5:0"
    )
    arn = "arn:aws:bedrock:us-east-1:123456789012:inference-profile/us.amazon.nova-lite-v1:0"
    assert model_arn(arn, "us-east-1") == arn
    assert model_path(arn, "converse") == (
        "/model/arn%3Aaws%3Abedrock%3Aus-east-1%3A123456789012%3Ainference-profile%2F"
        "us.amazon.nova-lite-v1%3A0/converse"
    )


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(st.text(min_size=1, max_size=60), st.text(min_size=1, max_size=200))
def test_any_model_id_and_any_text_are_signed_as_bedrock_checks_them(bedrock, model, text):
    standin, url = bedrock
    standin.requests.clear()
    embed_model = "amazon.titan-embed-text-v1" + model  # any id after a known prefix
    # the stand-in may refuse the model id; the signature is what is checked here
    with contextlib.suppress(ProviderRejected):
        make_bedrock_embedder(
            embed_model, 1536, REGION, url, allow_private=True, client=client(), credentials=role
        ).embed([text])
    assert standin.requests and all(r.signed for r in standin.requests)


# --- what goes wrong -----------------------------------------------------------------------


def test_calls_signed_with_other_credentials_are_refused_with_awss_error_type(bedrock, caplog):
    standin, url = bedrock
    stranger = lambda: Credentials("AKIDSOMEONEELSE00001", SECRET, TOKEN)  # noqa: E731
    with pytest.raises(ProviderRejected) as refused:
        chat(url, credentials=stranger).complete_json("JSON", "x")
    assert (
        refused.value.status == 403
        and refused.value.provider_code == "unrecognized_client_exception"
    )
    forged = lambda: Credentials(ACCESS, "not-the-secret", TOKEN)  # noqa: E731
    with pytest.raises(ProviderRejected) as refused:
        chat(url, credentials=forged).complete_json("JSON", "x")
    assert refused.value.provider_code == "invalid_signature_exception"
    assert not any(r.signed for r in standin.requests)
    for text in (str(refused.value), caplog.text):
        assert SECRET not in text and TOKEN not in text and "should-never" not in text


def test_no_credentials_is_a_clear_rejection_before_any_call(bedrock):
    standin, url = bedrock
    with pytest.raises(ProviderRejected, match="No AWS credentials"):
        chat(url, credentials=lambda: None).complete_json("JSON", "x")
    assert standin.requests == []


def test_throttling_is_retried_each_attempt_signed_anew(bedrock):
    standin, url = bedrock
    standin.fail(429, "ThrottlingException")
    found = reranker(url).rerank("tea", DOCS, 1)
    assert [r.index for r in found] == [1]
    assert len(standin.requests) == 2 and all(r.signed for r in standin.requests)


def test_throttling_until_the_retries_run_out_is_unavailable_naming_the_aws_code(bedrock):
    standin, url = bedrock
    standin.fail(429, "ThrottlingException")
    standin.fail(503, "ServiceUnavailableException")
    with pytest.raises(ProviderUnavailable, match="service_unavailable_exception"):
        embedder(url).embed(["tea"])


def test_a_long_retry_after_is_not_waited_for(bedrock):
    standin, url = bedrock
    standin.fail(429, "ThrottlingException", retry_after="30")
    with pytest.raises(ProviderUnavailable, match="asked to wait 30 s"):
        reranker(url).rerank("tea", DOCS, 1)
    assert len(standin.requests) == 1


def test_a_slow_bedrock_is_cut_off_at_the_calls_deadline(bedrock):
    standin, url = bedrock
    standin.delay = 2.0
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable):
        reranker(url, deadline=0.8, read_timeout=5.0).rerank("tea", DOCS, 1)
    assert time.monotonic() - started < 1.5


def test_an_unknown_model_is_rejected_with_awss_code_and_not_retried(bedrock):
    standin, url = bedrock
    make_bedrock_embedder(
        "cohere.embed-v4:0", 256, REGION, url, allow_private=True, client=client(), credentials=role
    ).embed(["x"])
    standin.fail(400, "ValidationException")
    with pytest.raises(ProviderRejected) as refused:
        chat(url).complete_json("JSON", "x")
    assert refused.value.status == 400 and refused.value.provider_code == "validation_exception"
    assert len(standin.requests) == 2  # the embedding, then one refused Converse call


@pytest.mark.parametrize(
    ("answer", "problem"),
    [
        ({"output": {}}, "output.message.content"),
        ([1, 2], "output.message.content"),
    ],
)
def test_converse_garbage_is_rejected_without_quoting_it(bedrock, answer, problem):
    standin, url = bedrock
    standin.garbage(answer)
    with pytest.raises(ProviderRejected, match=problem):
        chat(url).complete_json("JSON", "x")


@pytest.mark.parametrize(
    ("answer", "error", "problem"),
    [
        ({"embedding": [0.1] * 255}, EmbeddingMismatch, "expected 256 dimensions, got 255"),
        ({"embedding": [0.1] * 255 + ["x"]}, EmbeddingMismatch, "not a finite number"),
        ({"embedding": [0.1] * 255 + [1e39]}, EmbeddingMismatch, "too large for a 32-bit float"),
        ({"vector": []}, EmbeddingMismatch, "no vector"),
    ],
)
def test_embedding_garbage_is_a_mismatch_saying_what_was_wrong(bedrock, answer, error, problem):
    standin, url = bedrock
    standin.garbage(answer)
    with pytest.raises(error, match=problem):
        embedder(url).embed(["tea"])


@pytest.mark.parametrize(
    "answer",
    [
        {"results": [{"index": 7, "relevanceScore": 0.5}]},
        {"results": [{"index": 0, "relevanceScore": "high"}]},
        {"results": []},
        {"nothing": True},
    ],
)
def test_rerank_garbage_leaves_the_fused_order(bedrock, answer, caplog):
    standin, url = bedrock
    standin.garbage(answer)
    candidates = views(*DOCS)
    with caplog.at_level(logging.WARNING):
        found = apply_reranker(reranker(url), "cat", candidates, 2)
    assert found.reranked is False and found.memories == candidates[:2]


# --- settings --------------------------------------------------------------------------------


@pytest.fixture
def environment_role(monkeypatch):
    """The credentials in the environment, as Lambda gives a function its role's."""
    for name, value in (
        ("AWS_ACCESS_KEY_ID", ACCESS),
        ("AWS_SECRET_ACCESS_KEY", SECRET),
        ("AWS_SESSION_TOKEN", TOKEN),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ):
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_PROFILE", raising=False)
    default_credentials.cache_clear()
    yield
    default_credentials.cache_clear()


def test_the_factories_build_bedrock_signed_by_the_default_chain(bedrock, environment_role):
    standin, url = bedrock
    model = make_language_model(
        ProviderSetting("llm", "bedrock", CHAT, url, REGION, None),
        Outbound(client(), True, in_the_clear),
    )
    assert model is not None and model.complete_json("JSON", "x").data == {"memories": []}
    embedder_ = make_embedder(
        ProviderSetting("embed", "bedrock", TITAN, url, REGION, None),
        512,
        Outbound(client(), True, in_the_clear),
    )
    assert embedder_.embed(["tea"]).shape == (1, 512)
    assert [r.signed for r in standin.requests] == [True, True]


def test_the_factories_refuse_bedrock_without_a_region_or_with_a_base_url_in_aws():
    with pytest.raises(ValidationFailed) as missing:
        make_language_model(
            ProviderSetting("llm", "bedrock", CHAT, None, None, None),
            Outbound(client(), False, in_the_clear),
        )
    assert missing.value.details == [{"field": "aws_region", "problem": "required"}]
    with pytest.raises(ValidationFailed) as refused:
        make_bedrock_reranker(
            RERANK, REGION, "https://example.com", allow_private=False, client=client()
        )
    assert refused.value.details == [{"field": "rerank_base_url", "problem": "not allowed"}]


def test_a_base_url_to_a_private_address_is_checked_at_the_call(bedrock):
    _, url = bedrock
    model = make_bedrock_model(
        CHAT, REGION, url, allow_private=True, client=client(), credentials=role
    )
    model._endpoint.allow_private = False  # as if the stack no longer allowed private endpoints
    with pytest.raises(EndpointRefused):
        model.complete_json("JSON", "x")


@pytest.mark.parametrize(
    ("settings_", "problem"),
    [
        ({"llm_provider": "bedrock", "llm_model": CHAT}, "aws_region is required"),
        (
            {
                "embed_provider": "bedrock",
                "embed_model": TITAN,
                "dimensions": 1536,
                "aws_region": REGION,
            },
            "answers in 256, 512 or 1024 dimensions, not 1536",
        ),
        (
            {
                "embed_provider": "bedrock",
                "embed_model": "openai.text-embedding",
                "dimensions": 8,
                "aws_region": REGION,
            },
            "use a Titan Text Embeddings model",
        ),
        ({"rerank_provider": "bedrock", "aws_region": REGION}, "rerank_model is required"),
        (
            {"rerank_provider": "bedrock", "rerank_model": RERANK, "aws_region": "Europe"},
            "should match pattern",
        ),
        (
            {
                "llm_provider": "bedrock",
                "llm_model": CHAT,
                "aws_region": REGION,
                "llm_base_url": "https://bedrock.example.com",
            },
            "KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1",
        ),
    ],
)
def test_bad_bedrock_settings_are_refused_naming_the_problem(settings_, problem):
    with pytest.raises(ValueError, match=problem):
        ProviderSettings.model_validate(settings_)


def test_a_local_stack_may_point_bedrock_at_a_loopback_stand_in():
    allowed = ProviderSettings.model_validate(
        {
            "llm_provider": "bedrock",
            "llm_model": CHAT,
            "aws_region": REGION,
            "llm_base_url": "http://127.0.0.1:8766",
        },
        context={"allow_private_endpoints": True},
    )
    assert allowed.llm_base_url == "http://127.0.0.1:8766"


def test_the_signer_adds_only_the_signature_headers():
    headers = SigV4Signer(REGION, role)("https://bedrock-runtime.eu-west-1.amazonaws.com/x", b"{}")
    assert set(headers) == {"Authorization", "X-Amz-Date", "X-Amz-Security-Token"}
