"""Embedders against a real HTTP server on loopback that speaks OpenAI's ``/v1/embeddings``.

The server (``tests.support.embeddings``, a stdlib ``ThreadingHTTPServer`` on port 0) answers
with deterministic vectors derived from a hash of each text, unless a test scripts other answers
first (429 with Retry-After, 5xx, 401 with OpenAI's error body, wrong dimensions, non-finite
values, shuffled ``index``, a slow answer). Retries sleep through an injected recorder, except
the one test that checks a real ``Retry-After: 2`` is honoured. The last section needs no
server: ``validate_vector``, ``NoEmbedder`` and ``make_embedder``.
"""

import json
import logging
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pytest

from agent_memory.errors import (
    EmbeddingMismatch,
    EmbeddingRequired,
    EndpointRefused,
    ProviderRejected,
    ProviderUnavailable,
    ValidationFailed,
    VectorInvalid,
)
from agent_memory.observability import logger
from agent_memory.providers import client as providers
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.embeddings import (
    CustomEmbedder,
    NoEmbedder,
    OpenAIEmbedder,
    RequestShape,
    validate_vector,
)
from agent_memory.providers.factory import make_embedder
from agent_memory.providers.network import CallPolicy
from agent_memory.providers.setting import Outbound, ProviderSetting, in_the_clear
from tests.support.embeddings import DIMS, FakeProvider, fail, ok, serving, slow, vector_for

KEY = "sk-test-0123456789abcdefSECRET"


def expected(texts: list[str], dimensions: int = DIMS) -> np.ndarray:
    return np.array([vector_for(t, dimensions) for t in texts], dtype=np.float32)


@pytest.fixture
def fake():
    with serving(FakeProvider()) as provider:
        yield provider


@pytest.fixture
def sleeps() -> list[float]:
    return []


@pytest.fixture
def provider(sleeps):
    """Retries record their wait instead of sleeping; jitter at its maximum (rand = 1)."""
    return ProviderClient(sleep=sleeps.append, rand=lambda: 1.0)


def openai(fake: FakeProvider, client: ProviderClient, model="text-embedding-3-small", **kw):
    return OpenAIEmbedder(KEY, model, DIMS, base_url=fake.url, client=client, **kw)


def custom(fake: FakeProvider, client: ProviderClient, api_key=None, allow_private=True, **shape):
    return CustomEmbedder(
        fake.url,
        "local-model",
        DIMS,
        api_key,
        allow_private=allow_private,
        client=client,
        shape=RequestShape(**shape),
    )


TEXTS = [f"memory number {i}" for i in range(7)]

# --------------------------------------------------------------------------------------------
# Requests and answers
# --------------------------------------------------------------------------------------------


def test_batches_keep_input_order(fake, provider):
    vectors = openai(fake, provider, batch_size=3).embed(TEXTS)
    assert vectors.dtype == np.float32 and vectors.shape == (7, DIMS)
    np.testing.assert_array_equal(vectors, expected(TEXTS))
    assert [len(seen.body["input"]) for seen in fake.requests] == [3, 3, 1]
    assert [seen.body["input"] for seen in fake.requests][2] == [TEXTS[6]]
    assert all(seen.path == "/v1/embeddings" for seen in fake.requests)


def test_batches_also_close_at_the_byte_budget(fake, provider):
    texts = ["aaaa", "bbbb", "cccc", "é" * 3, "x" * 50]  # 4, 4, 4, 6, 50 bytes
    vectors = openai(fake, provider, max_batch_bytes=10).embed(texts)
    np.testing.assert_array_equal(vectors, expected(texts))
    assert [seen.body["input"] for seen in fake.requests] == [
        ["aaaa", "bbbb"],
        ["cccc", "ééé"],
        ["x" * 50],  # larger than the budget on its own: sent alone
    ]


def test_answers_in_any_index_order_come_back_in_input_order(fake, provider):
    fake.script = [ok(lambda answer: answer["data"].reverse())]
    texts = TEXTS[:5]
    np.testing.assert_array_equal(openai(fake, provider).embed(texts), expected(texts))


def test_the_request_has_openais_shape(fake, provider):
    openai(fake, provider).embed(["hello"])
    seen = fake.requests[0]
    assert seen.body == {
        "model": "text-embedding-3-small",
        "input": ["hello"],
        "encoding_format": "float",
        "dimensions": DIMS,
    }
    assert seen.headers["authorization"] == f"Bearer {KEY}"
    assert seen.headers["content-type"] == "application/json"


def test_dimensions_only_sent_to_text_embedding_3_models(fake, provider):
    openai(fake, provider, model="text-embedding-3-large").embed(["a"])
    openai(fake, provider, model="text-embedding-ada-002").embed(["a"])
    assert fake.requests[0].body["dimensions"] == DIMS
    assert "dimensions" not in fake.requests[1].body


def test_custom_sends_no_authorization_without_a_key_and_dimensions_only_when_asked(fake, provider):
    custom(fake, provider).embed(["a"])
    custom(fake, provider, api_key="local-key", send_dimensions=True).embed(["a"])
    first, second = fake.requests
    assert "authorization" not in first.headers and "dimensions" not in first.body
    assert second.headers["authorization"] == "Bearer local-key"
    assert second.body["dimensions"] == DIMS


def test_no_texts_sends_nothing(fake, provider):
    vectors = openai(fake, provider).embed([])
    assert vectors.shape == (0, DIMS) and vectors.dtype == np.float32
    assert fake.requests == []


def test_empty_text_is_refused_before_calling(fake, provider):
    with pytest.raises(ValidationFailed, match="number 1 to embed is empty"):
        openai(fake, provider).embed(["a", ""])
    assert fake.requests == []


def test_repr_never_shows_the_key(fake, provider):
    assert KEY not in repr(openai(fake, provider))


# --------------------------------------------------------------------------------------------
# Retries, Retry-After, errors
# --------------------------------------------------------------------------------------------


def test_retry_after_is_honoured_for_real(fake, caplog):
    fake.script = [fail(429, "Rate limit reached", {"Retry-After": "2"})]
    client = ProviderClient(rand=lambda: 0.0)  # no jitter: only Retry-After makes it wait
    caplog.set_level(logging.WARNING, logger=logger.name)
    started = time.monotonic()
    vectors = openai(fake, client).embed(["secret text of a user"])
    elapsed = time.monotonic() - started
    assert elapsed >= 2.0
    assert elapsed < 5.0
    np.testing.assert_array_equal(vectors, expected(["secret text of a user"]))
    assert len(fake.requests) == 2
    [record] = [r for r in caplog.records if r.name == logger.name]
    assert "HTTP 429" in record.getMessage() and "retry 1 of 3 in 2.00 s" in record.getMessage()
    assert KEY not in caplog.text and "secret text" not in caplog.text


def test_retry_after_as_http_date(fake, sleeps):
    class Frozen:
        def now(self):
            return datetime(2015, 10, 21, 7, 28, 0, tzinfo=UTC)

    fake.script = [fail(503, None, {"Retry-After": "Wed, 21 Oct 2015 07:28:03 GMT"})]
    client = ProviderClient(sleep=sleeps.append, rand=lambda: 1.0, clock=Frozen())
    openai(fake, client).embed(["a"])
    assert sleeps == [3.0]  # not the 0.5 s backoff: never sooner than the server asked


def test_retry_after_longer_than_the_maximum_gives_up_at_once(fake, provider, sleeps):
    fake.script = [fail(429, "Slow down", {"Retry-After": "60"})]
    with pytest.raises(ProviderUnavailable) as error:
        openai(fake, provider).embed(["a"])
    assert error.value.retry_after_seconds == 60
    assert "60 s" in str(error.value) and "Slow down" not in str(error.value)
    assert len(fake.requests) == 1 and sleeps == []


def test_server_errors_are_retried_with_growing_backoff(fake, provider, sleeps):
    fake.script = [fail(500, "boom"), fail(502)]
    vectors = openai(fake, provider).embed(["a", "b"])
    np.testing.assert_array_equal(vectors, expected(["a", "b"]))
    assert len(fake.requests) == 3
    assert sleeps == [0.5, 1.0]  # full jitter at its top: base 0.5 s doubling


def test_backoff_is_capped():
    client = ProviderClient(rand=lambda: 1.0)
    assert [client.backoff(n) for n in range(6)] == [0.5, 1.0, 2.0, 4.0, 8.0, 8.0]
    assert ProviderClient(rand=lambda: 0.25).backoff(3) == 1.0


def test_retries_run_out(fake, provider, sleeps):
    fake.script = [fail(503, "overloaded")] * 10
    with pytest.raises(ProviderUnavailable) as error:
        openai(fake, provider).embed(["a"])
    assert len(fake.requests) == 4 and len(sleeps) == 3
    assert str(error.value) == (
        "The provider at 127.0.0.1 answered HTTP 503 after 4 attempts; try again later."
    )
    assert error.value.code == "provider_unavailable"


def test_bad_key_is_rejected_with_its_code_and_no_provider_text(fake, provider):
    fake.script = [
        fail(
            401,
            f"Incorrect API key provided: {KEY}. You can find your API key at "
            "https://platform.openai.com/account/api-keys.",
            code="invalid_api_key",
        )
    ]
    with pytest.raises(ProviderRejected) as error:
        openai(fake, provider).embed(["a private memory"])
    text = str(error.value)
    assert text == "The provider at 127.0.0.1 rejected the request with HTTP 401 (invalid_api_key)."
    assert error.value.status == 401 and error.value.code == "provider_rejected"
    assert error.value.provider_code == "invalid_api_key"
    assert len(fake.requests) == 1  # never retried


def test_provider_messages_are_never_repeated(fake, provider):
    fake.script = [fail(400, "Invalid input: " + "x" * 1000, code="Not A Code")]
    with pytest.raises(ProviderRejected) as error:
        openai(fake, provider).embed(["a"])
    assert str(error.value) == "The provider at 127.0.0.1 rejected the request with HTTP 400."
    assert error.value.provider_code is None


def test_exhausted_quota_is_not_retried(fake, provider, sleeps):
    fake.script = [fail(429, "You exceeded your current quota", code="insufficient_quota")]
    with pytest.raises(ProviderRejected, match="quota"):
        openai(fake, provider).embed(["a"])
    assert len(fake.requests) == 1 and sleeps == []


def test_redirects_are_not_followed(fake, provider):
    fake.script = [fail(307, None, {"Location": "http://169.254.169.254/"})]
    with pytest.raises(ProviderRejected, match="redirect"):
        openai(fake, provider).embed(["a"])
    assert len(fake.requests) == 1


def test_a_body_that_is_not_json_is_rejected(fake, provider):
    fake.script = [ok(lambda answer: "<html>gateway</html>", replace=True)]
    with pytest.raises(ProviderRejected, match="not JSON"):
        openai(fake, provider).embed(["a"])


def test_a_read_timeout_is_unavailable_and_not_retried(fake, sleeps):
    fake.script = [slow(1.0)]
    client = ProviderClient(CallPolicy(read_timeout=0.3), sleep=sleeps.append)
    started = time.monotonic()
    with pytest.raises(ProviderUnavailable, match="did not answer in time"):
        openai(fake, client).embed(["a"])
    assert time.monotonic() - started < 0.9
    assert len(fake.requests) == 1 and sleeps == []


def test_connection_refused_is_retried_then_unavailable(provider, sleeps):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    embedder = OpenAIEmbedder(
        KEY, "m", DIMS, base_url=f"http://127.0.0.1:{port}/v1", client=provider
    )
    with pytest.raises(ProviderUnavailable, match="could not be reached after 4 attempts"):
        embedder.embed(["a"])
    assert sleeps == [0.5, 1.0, 2.0]


# --------------------------------------------------------------------------------------------
# Answers that do not fit
# --------------------------------------------------------------------------------------------


def test_wrong_dimensions_name_expected_and_actual(fake, provider):
    fake.dimensions = 5
    with pytest.raises(EmbeddingMismatch) as error:
        openai(fake, provider, model="text-embedding-ada-002").embed(["a"])
    assert "expected 8 dimensions, got 5" in str(error.value)
    assert isinstance(error.value, ProviderRejected)
    assert error.value.code == "embedding_mismatch"


def set_first_value(value: Any) -> Callable[[dict[str, Any]], None]:
    def change(answer: dict[str, Any]) -> None:
        answer["data"][0]["embedding"][3] = value

    return change


def bare_literal(literal: str) -> Callable[[dict[str, Any]], str]:
    """The answer as JSON text with one value replaced by a bare ``NaN`` / ``Infinity`` (not
    JSON, but Python's json module and some servers produce and read them)."""

    def change(answer: dict[str, Any]) -> str:
        answer["data"][0]["embedding"][3] = 12345.0
        return json.dumps(answer).replace("12345.0", literal)

    return change


@pytest.mark.parametrize(
    ("script", "problem"),
    [
        (ok(set_first_value("NaN")), "not a number"),
        (ok(set_first_value(None)), "not a number"),
        (ok(set_first_value([1.0])), "not a number"),
        (ok(set_first_value(1e39)), "not a finite 32-bit float"),
        (ok(bare_literal("NaN"), replace=True), "not a finite 32-bit float at position 3 "),
        (ok(bare_literal("-Infinity"), replace=True), "not a finite 32-bit float at position 3 "),
    ],
)
def test_values_that_are_not_finite_numbers_are_refused(fake, provider, script, problem):
    fake.script = [script]
    with pytest.raises(EmbeddingMismatch, match=problem):
        openai(fake, provider).embed(["a", "b"])


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        (lambda a: a["data"].pop(), "returned 1 embeddings for 2 inputs"),
        (lambda a: a["data"][1].update(index=0), "index 0 twice"),
        (lambda a: a["data"][1].update(index=7), "valid 'index'"),
        (lambda a: a["data"][1].pop("index"), "valid 'index'"),
        (lambda a: a["data"][1].pop("embedding"), "no 'embedding'"),
        (lambda a: a.pop("data"), "without a 'data' list"),
    ],
)
def test_malformed_answers_are_refused(fake, provider, change, problem):
    fake.script = [ok(change)]
    with pytest.raises(EmbeddingMismatch, match=problem):
        openai(fake, provider).embed(["a", "b"])


# --------------------------------------------------------------------------------------------
# The endpoint guard on the custom embedder
# --------------------------------------------------------------------------------------------


def test_custom_on_loopback_is_refused_unless_private_is_allowed(fake, provider):
    with pytest.raises(EndpointRefused, match="must use https://"):
        custom(fake, provider, allow_private=False).embed(["a"])
    https_loopback = fake.url.replace("http://", "https://")
    embedder = CustomEmbedder(https_loopback, "m", DIMS, allow_private=False, client=provider)
    with pytest.raises(EndpointRefused, match="loopback"):
        embedder.embed(["a"])
    assert fake.requests == []
    np.testing.assert_array_equal(custom(fake, provider).embed(["a"]), expected(["a"]))


def test_custom_checks_the_endpoint_before_every_request(fake, provider, monkeypatch):
    checked: list[tuple[str, bool]] = []

    def check(url: str, *, allow_private: bool, timeout: float) -> None:
        checked.append((url, allow_private))

    monkeypatch.setattr(providers, "check_endpoint", check)
    custom(fake, provider, batch_size=2).embed(TEXTS[:5])
    assert checked == [(f"{fake.url}/embeddings", True)] * 3


# --------------------------------------------------------------------------------------------
# No server needed: validate_vector, NoEmbedder, make_embedder
# --------------------------------------------------------------------------------------------


def test_validate_vector_accepts_numbers_of_the_right_length():
    vector = validate_vector([1, 0.5, -2.25], 3, "vector")
    assert vector.dtype == np.float32 and vector.tolist() == [1.0, 0.5, -2.25]


@pytest.mark.parametrize(
    ("values", "problem"),
    [
        ([0.1] * 384, "expected 1536 dimensions, got 384"),
        ([], "expected 1536 dimensions, got 0"),
        ([0.1] * 7 + [float("nan")] + [0.1] * 1528, "index 7 is nan"),
        ([0.1] * 1535 + [float("-inf")], "index 1535 is -inf"),
        ([0.1] * 1535 + [1e39], "index 1535 (1e+39) is too large"),
        ([0.0] * 1536, "all zeros"),
        (["0.1"] * 1536, "list of numbers"),
        ([[0.1]] * 1536, "list of numbers"),
        ("0.1", "list of numbers"),
    ],
)
def test_validate_vector_refusals(values, problem):
    with pytest.raises(VectorInvalid) as error:
        validate_vector(values, 1536, "query_vector")
    assert problem in str(error.value) and "query_vector" in str(error.value)
    [detail] = error.value.details or [{}]
    assert detail["field"] == "query_vector" and problem in detail["problem"]
    assert isinstance(error.value, ValidationFailed) and error.value.code == "vector_invalid"


def test_no_embedder_asks_for_vectors():
    embedder = NoEmbedder(DIMS)
    with pytest.raises(EmbeddingRequired) as error:
        embedder.embed(["a"])
    assert error.value.code == "vector_required" and isinstance(error.value, ValidationFailed)
    assert "'vector'" in str(error.value) and "'query_vector'" in str(error.value)
    assert embedder.embed([]).shape == (0, DIMS)


def _make(provider, model, dims, base_url, key, *, allow_private=False, client):
    setting = ProviderSetting("embed", provider, model, base_url, None, key)
    return make_embedder(setting, dims, Outbound(client, allow_private, in_the_clear))


def test_make_embedder_picks_the_provider(provider):
    def make(*args: Any, allow_private: bool = False) -> object:
        return _make(*args, allow_private=allow_private, client=provider)

    assert isinstance(make("none", None, 4, None, None), NoEmbedder)
    made = make("openai", "text-embedding-3-small", 4, None, KEY)
    assert isinstance(made, OpenAIEmbedder) and made.dimensions == 4
    made = make("custom", "m", 4, "https://e.example/v1", None, allow_private=True)
    assert isinstance(made, CustomEmbedder) and made.allow_private


@pytest.mark.parametrize(
    ("args", "field"),
    [
        (("openai", None, 4, None, KEY), "embed_model"),
        (("openai", "m", 4, None, None), "embed_api_key"),
        (("openai", "m", 4, "https://e.example/v1", KEY), "embed_base_url"),
        (("custom", "m", 4, None, None), "embed_base_url"),
        (("cohere", "m", 4, None, KEY), "embed_provider"),
    ],
)
def test_make_embedder_refuses_incomplete_settings(provider, args, field):
    with pytest.raises(ValidationFailed) as error:
        _make(*args, allow_private=False, client=provider)
    assert error.value.details and error.value.details[0]["field"] == field


@pytest.mark.parametrize("reported", [9_200_000_000_000_000_000, 2**63 + 5, 10**9])
def test_an_embedding_count_over_what_the_batch_could_use_counts_as_the_most_it_could(
    fake, provider, reported
):
    """Issue 32: every provider count is bounded by what the request could use; for embeddings
    one token per UTF-8 byte of the batch plus 8 per text (``providers.token_counts``)."""

    def poisoned(answer: dict[str, Any]) -> None:
        answer["usage"] = {"prompt_tokens": reported, "total_tokens": reported}

    fake.script = [ok(poisoned), ok(poisoned)]
    texts = ["Deploys on Fridays", "Lisboa é linda"]
    embedder = custom(fake, provider)
    embedder.embed(texts)
    most = sum(len(t.encode()) for t in texts) + 8 * len(texts)
    assert embedder.tokens == most
    embedder.embed(texts[:1])
    assert embedder.tokens == most + len(texts[0]) + 8
