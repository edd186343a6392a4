"""Amazon Bedrock as a store's language model, embedder and reranker, authenticated by the
function's IAM role (DESIGN section 5): no API key, the store names the region (``aws_region``).

Each call is one JSON POST through ``providers.client.ProviderClient`` (the deadline for the
whole call, the size cap, retries of 429 and 5xx, no provider text in logs or errors), signed
with AWS Signature Version 4 by botocore (``SigV4Auth``, service name ``bedrock``) with the
credentials of botocore's default chain: the function's role in Lambda (its environment
variables), ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN`` or a
profile elsewhere. The wire shapes (Amazon Bedrock API reference):

- language model: ``Converse``, ``POST https://bedrock-runtime.{region}.amazonaws.com/model/
  {modelId}/converse`` with ``{"messages": [{"role": "user", "content": [{"text"}]}],
  "system": [{"text"}], "inferenceConfig": {"maxTokens"}}``; the answer's
  ``output.message.content[].text``, ``stopReason`` (``max_tokens`` or
  ``model_context_window_exceeded`` when cut off) and ``usage.inputTokens`` /
  ``usage.outputTokens``. Any model the account may call: Anthropic, Amazon Nova, Meta,
  Mistral..., or an inference profile id (``us.anthropic...``) or ARN.
- embeddings: ``InvokeModel``, ``POST .../model/{modelId}/invoke`` with the model's own body:
  Amazon Titan Text Embeddings V2 (``amazon.titan-embed-text-v2:0``: one text per call,
  ``{"inputText", "dimensions": 256 | 512 | 1024, "normalize": true}`` -> ``{"embedding",
  "inputTextTokenCount"}``), Titan V1 (``amazon.titan-embed-text-v1``: 1,536 values, no
  ``dimensions``) and Cohere Embed (``cohere.embed-*``: up to 96 texts per call, ``{"texts",
  "input_type": "search_document", "truncate": "END", "embedding_types": ["float"]}`` ->
  ``{"embeddings": {"float": [[...]]}}``; ``output_dimension`` for Embed v4).
- reranker: the Bedrock Agent Runtime ``Rerank`` action, ``POST https://bedrock-agent-runtime.
  {region}.amazonaws.com/rerank`` with ``{"queries": [{"type": "TEXT", "textQuery": {"text"}}],
  "sources": [{"type": "INLINE", "inlineDocumentSource": {"type": "TEXT", "textDocument":
  {"text"}}}], "rerankingConfiguration": {"type": "BEDROCK_RERANKING_MODEL",
  "bedrockRerankingConfiguration": {"modelConfiguration": {"modelArn"}, "numberOfResults"}}}``
  -> ``{"results": [{"index", "relevanceScore"}]}`` (``amazon.rerank-v1:0``,
  ``cohere.rerank-v3-5:0``).

``base_url`` replaces the service's address (a loopback stand-in in tests and in a local stack
started with ``KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1``, the only place a store may set it); it is
then checked at every call like a custom endpoint. botocore is imported at the first call
(importing it costs about 0.2 s of a cold start).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np

from agent_memory.errors import EmbeddingMismatch, ProviderRejected, ValidationFailed
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.embeddings import (
    EmbedPurpose,
    Vectors,
    max_answer_bytes as embed_answer_bytes,
    texts_to_embed,
)
from agent_memory.providers.language_models import (
    ChatModel,
    ModelAnswer,
    max_answer_bytes,
    unusable_answer,
)
from agent_memory.providers.rerankers import (
    Relevance,
    max_answer_bytes as rerank_answer_bytes,
    read_results,
)
from agent_memory.providers.token_counts import bounded, embed_token_bound, token_count

SIGNING_NAME = "bedrock"
"""The SigV4 service name of both ``bedrock-runtime`` and ``bedrock-agent-runtime`` (their
service models' ``signingName``)."""
TITAN_V2_DIMENSIONS = (256, 512, 1024)
"""The sizes Titan Text Embeddings V2 answers in (its ``dimensions`` request field)."""
TITAN_V1_DIMENSIONS = 1536
TITAN_MAX_CHARS = 50_000
"""Titan V2 takes at most 50,000 characters (and 8,192 tokens) per text; longer is cut here."""
COHERE_MAX_TEXTS = 96
COHERE_MAX_CHARS = 2048
"""Cohere Embed on Bedrock: at most 96 texts per call, each at most 2,048 characters."""
COHERE_V4_DIMENSIONS = (256, 512, 1024, 1536)
COHERE_V3_DIMENSIONS = 1024
_TRUNCATED = frozenset({"max_tokens", "model_context_window_exceeded"})

Credentials = Callable[[], Any]
"""Returns botocore's current credentials (``botocore.credentials.Credentials``) or None."""


def is_titan_v2(model: str) -> bool:
    """Whether ``model`` is Titan Text Embeddings V2 (which takes ``dimensions``)."""
    return model.startswith("amazon.titan-embed-text-v2")


def embed_model_problem(model: str, dimensions: int) -> str | None:
    """Why a store cannot embed with Bedrock model ``model`` at ``dimensions``, or None: the
    models this module speaks to (Titan Text Embeddings V1 and V2, Cohere Embed v3 and v4) and
    the sizes each answers in."""
    if is_titan_v2(model):
        if dimensions not in TITAN_V2_DIMENSIONS:
            return f"{model} answers in 256, 512 or 1024 dimensions, not {dimensions}"
    elif model.startswith("amazon.titan-embed-text-v1"):
        if dimensions != TITAN_V1_DIMENSIONS:
            return f"{model} answers in {TITAN_V1_DIMENSIONS} dimensions, not {dimensions}"
    elif model.startswith("cohere.embed-v4"):
        if dimensions not in COHERE_V4_DIMENSIONS:
            return f"{model} answers in 256, 512, 1024 or 1536 dimensions, not {dimensions}"
    elif model.startswith("cohere.embed-"):
        if dimensions != COHERE_V3_DIMENSIONS:
            return f"{model} answers in {COHERE_V3_DIMENSIONS} dimensions, not {dimensions}"
    else:
        return (
            "use a Titan Text Embeddings model (amazon.titan-embed-text-v2:0) or a Cohere "
            "Embed model (cohere.embed-english-v3, cohere.embed-multilingual-v3, "
            "cohere.embed-v4:0)"
        )
    return None


def _dns_suffix(region: str) -> str:
    return "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"


def partition(region: str) -> str:
    """The ARN partition of ``region``: ``aws-cn`` (China), ``aws-us-gov`` (GovCloud), else
    ``aws``."""
    if region.startswith("cn-"):
        return "aws-cn"
    if region.startswith("us-gov-"):
        return "aws-us-gov"
    return "aws"


def runtime_url(region: str) -> str:
    """The Bedrock Runtime endpoint of ``region`` (Converse, InvokeModel)."""
    return f"https://bedrock-runtime.{region}.{_dns_suffix(region)}"


def agent_runtime_url(region: str) -> str:
    """The Bedrock Agent Runtime endpoint of ``region`` (Rerank)."""
    return f"https://bedrock-agent-runtime.{region}.{_dns_suffix(region)}"


def model_path(model: str, action: str) -> str:
    """``/model/{modelId}/{action}`` with the id percent-encoded as boto3 encodes a URI label
    (everything but ``-._~``: ``amazon.titan-embed-text-v2%3A0``, an ARN's ``/`` too)."""
    return f"/model/{quote(model, safe='-._~')}/{action}"


@lru_cache(maxsize=1)
def default_credentials() -> Any:
    """botocore's credential chain (environment, shared files, container and instance roles),
    resolved once per container; its result refreshes itself when it is a role's. None when
    no credentials are found."""
    import botocore.session  # type: ignore[import-untyped, unused-ignore]

    return botocore.session.get_session().get_credentials()


class SigV4Signer:
    """Signs one request for ``region`` (``providers.client.Signer``): AWS Signature Version 4
    over the method, the path, the ``host``, ``content-type`` and ``x-amz-date`` headers and
    the SHA-256 of the body (botocore's ``SigV4Auth``), adding ``X-Amz-Security-Token`` for a
    role's temporary credentials.

    Raises ``ProviderRejected`` when there are no credentials to sign with."""

    def __init__(self, region: str, credentials: Credentials = default_credentials) -> None:
        self.region = region
        self._credentials = credentials

    def __call__(self, url: str, body: bytes) -> Mapping[str, str]:
        from botocore.auth import SigV4Auth  # type: ignore[import-untyped, unused-ignore]
        from botocore.awsrequest import AWSRequest  # type: ignore[import-untyped, unused-ignore]

        credentials = self._credentials()
        if credentials is None:
            raise ProviderRejected(
                "No AWS credentials were found to call Amazon Bedrock: in AWS the function's "
                "role gives them; elsewhere set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY "
                "(or a profile)."
            )
        frozen = credentials.get_frozen_credentials()
        request = AWSRequest(
            method="POST", url=url, data=body, headers={"Content-Type": "application/json"}
        )
        SigV4Auth(frozen, SIGNING_NAME, self.region).add_auth(request)
        return {
            name: value
            for name, value in request.headers.items()
            if name.lower() in ("authorization", "x-amz-date", "x-amz-security-token")
        }


class _Endpoint:
    """Where a Bedrock model is called and how: base URL, signer, guard."""

    def __init__(
        self,
        base_url: str,
        signer: SigV4Signer,
        client: ProviderClient,
        *,
        checked: bool,
        allow_private: bool,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.signer = signer
        self.client = client
        self.checked = checked
        self.allow_private = allow_private
        self.host = urlsplit(base_url).hostname or "?"

    def post(self, path: str, payload: Mapping[str, Any], max_bytes: int) -> object:
        return self.client.post_json(
            self.base_url + path,
            payload,
            headers={"Accept": "application/json"},
            max_bytes=max_bytes,
            custom=self.checked,
            allow_private=self.allow_private,
            sign=self.signer,
        )


class BedrockChatModel(ChatModel):
    """A Bedrock model through the Converse API (see the module docstring for the shape).

    Converse has no JSON mode: the messages ask for JSON (``JSON_REMINDER``) and the answer is
    parsed leniently, as for Anthropic. Errors as ``LanguageModel.complete_json``; the provider
    code of a refusal is AWS's error type in snake case (``access_denied_exception`` when the
    role may not invoke the model, ``validation_exception`` for an unknown model id)."""

    def __init__(self, model: str, endpoint: _Endpoint) -> None:
        super().__init__(
            url=endpoint.base_url + model_path(model, "converse"),
            model=model,
            api_key=None,
            client=endpoint.client,
        )
        self._endpoint = endpoint
        self._path = model_path(model, "converse")

    def _call(self, system: str, user: str, max_tokens: int) -> ModelAnswer:
        payload: dict[str, Any] = {
            "messages": [{"role": "user", "content": [{"text": user or " "}]}],
            "inferenceConfig": {"maxTokens": max_tokens},
        }
        if system:
            payload["system"] = [{"text": system}]
        answer = self._endpoint.post(self._path, payload, max_answer_bytes(max_tokens))
        return read_converse(answer, self.model, self.host)


def read_converse(answer: object, model: str, host: str) -> ModelAnswer:
    """The text, stop reason and usage of a Converse answer."""
    output = answer.get("output") if isinstance(answer, dict) else None
    message = output.get("message") if isinstance(output, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if not isinstance(answer, dict) or not isinstance(content, list):
        raise unusable_answer(model, host, "answered without an 'output.message.content' list")
    text = "".join(
        block["text"]
        for block in content
        if isinstance(block, dict) and isinstance(block.get("text"), str)
    )
    stop = answer.get("stopReason")
    stop = stop if isinstance(stop, str) else None
    usage = answer.get("usage")
    return ModelAnswer(
        text=text,
        truncated=stop in _TRUNCATED,
        stop_reason=stop,
        input_tokens=token_count(usage, "inputTokens"),
        output_tokens=token_count(usage, "outputTokens"),
    )


class BedrockEmbedder:
    """Titan Text Embeddings (one text per call) or Cohere Embed (96 per call) through
    InvokeModel; see the module docstring for the bodies. Vectors come back in input order,
    ``dimensions`` values each; ``tokens`` sums Titan's ``inputTextTokenCount`` (Cohere's
    answer on Bedrock reports none). Texts longer than the model takes are cut to its limit
    (``TITAN_MAX_CHARS``, ``COHERE_MAX_CHARS``) rather than refused, as OpenAI-shaped servers
    with truncation do.

    Raises from ``embed``: ``ProviderUnavailable``, ``ProviderRejected``, ``EmbeddingMismatch``
    (a vector of the wrong size or with a value that is not a finite number), ``ValidationFailed``
    for an empty text."""

    def __init__(self, model: str, dimensions: int, endpoint: _Endpoint) -> None:
        problem = embed_model_problem(model, dimensions)
        if problem is not None:
            raise ValidationFailed(
                f"embed_model: {problem}.", details=[{"field": "embed_model", "problem": problem}]
            )
        self.model = model
        self.dimensions = dimensions
        self.tokens = 0
        self._endpoint = endpoint
        self._path = model_path(model, "invoke")
        self._cohere = model.startswith("cohere.")

    def __repr__(self) -> str:
        return f"BedrockEmbedder(model={self.model!r}, dimensions={self.dimensions})"

    def embed(self, texts: Sequence[str], purpose: EmbedPurpose = "document") -> Vectors:
        """See ``providers.embeddings.Embedder.embed``: Cohere Embed is told the ``purpose``
        (``input_type`` ``search_query`` for a query, ``search_document`` otherwise); Titan
        embeds both alike."""
        items = texts_to_embed(texts)
        result = np.empty((len(items), self.dimensions), dtype=np.float32)
        if self._cohere:
            kind = "search_query" if purpose == "query" else "search_document"
            for start in range(0, len(items), COHERE_MAX_TEXTS):
                batch = items[start : start + COHERE_MAX_TEXTS]
                result[start : start + len(batch)] = self._cohere_batch(batch, kind)
        else:
            for position, text in enumerate(items):
                result[position] = self._titan(text)
        return result

    def _max_bytes(self, count: int) -> int:
        return embed_answer_bytes(count, self.dimensions)

    def _titan(self, text: str) -> Vectors:
        payload: dict[str, Any] = {"inputText": text[:TITAN_MAX_CHARS]}
        if is_titan_v2(self.model):
            payload |= {"dimensions": self.dimensions, "normalize": True}
        answer = self._endpoint.post(self._path, payload, self._max_bytes(1))
        values = answer.get("embedding") if isinstance(answer, dict) else None
        vector = self._vector(values, 0)
        count = token_count(answer, "inputTextTokenCount")
        sent = payload["inputText"]
        self.tokens += bounded(
            count, embed_token_bound([sent]), what="embedding_tokens", host=self._endpoint.host
        )
        return vector

    def _cohere_batch(self, batch: list[str], input_type: str) -> Vectors:
        payload: dict[str, Any] = {
            "texts": [text[:COHERE_MAX_CHARS] for text in batch],
            "input_type": input_type,
            "truncate": "END",
            "embedding_types": ["float"],
        }
        if self.model.startswith("cohere.embed-v4"):
            payload["output_dimension"] = self.dimensions
        answer = self._endpoint.post(self._path, payload, self._max_bytes(len(batch)))
        embeddings = answer.get("embeddings") if isinstance(answer, dict) else None
        if isinstance(embeddings, dict):  # embedding_types answers {"float": [...]}
            embeddings = embeddings.get("float")
        if not isinstance(embeddings, list) or len(embeddings) != len(batch):
            raise self._mismatch(f"answered without {len(batch)} vectors in 'embeddings'")
        return np.stack([self._vector(values, i) for i, values in enumerate(embeddings)])

    def _vector(self, values: object, index: int) -> Vectors:
        if not isinstance(values, list):
            raise self._mismatch(f"returned no vector for text {index}")
        if len(values) != self.dimensions:
            raise self._mismatch(
                f"returned vectors of the wrong size: expected {self.dimensions} dimensions, "
                f"got {min(len(values), 100_000):,}"
            )
        if not all(
            isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v)
            for v in values
        ):
            raise self._mismatch(f"returned a value that is not a finite number for text {index}")
        with np.errstate(over="ignore"):
            vector = np.asarray(values, dtype=np.float32)
        if not np.isfinite(vector).all():
            raise self._mismatch(f"returned a value too large for a 32-bit float for text {index}")
        return vector

    def _mismatch(self, problem: str) -> EmbeddingMismatch:
        return EmbeddingMismatch(
            f"The embedding provider at {self._endpoint.host} ({self.model}) {problem}."
        )


def model_arn(model: str, region: str) -> str:
    """A rerank model's ARN as the Rerank API wants it: ``model`` when it is one already, else
    ``arn:{partition}:bedrock:{region}::foundation-model/{model}``."""
    if model.startswith("arn:"):
        return model
    return f"arn:{partition(region)}:bedrock:{region}::foundation-model/{model}"


class BedrockReranker:
    """Bedrock's Rerank action (see the module docstring): the candidates go as inline text
    sources, the answer's ``relevanceScore`` (already in [0, 1]) orders them. Errors as
    ``providers.rerankers.Reranker.rerank``."""

    def __init__(self, model: str, endpoint: _Endpoint) -> None:
        self.model = model
        self._arn = model_arn(model, endpoint.signer.region)  # the region it signs for
        self._endpoint = endpoint

    def __repr__(self) -> str:
        return f"BedrockReranker(model={self.model!r}, host={self._endpoint.host!r})"

    def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[Relevance]:
        """See ``Reranker.rerank``; no documents sends nothing."""
        if not documents or top_n < 1:
            return []
        wanted = min(top_n, len(documents))
        payload = {
            "queries": [{"type": "TEXT", "textQuery": {"text": query}}],
            "sources": [
                {
                    "type": "INLINE",
                    "inlineDocumentSource": {"type": "TEXT", "textDocument": {"text": text}},
                }
                for text in documents
            ],
            "rerankingConfiguration": {
                "type": "BEDROCK_RERANKING_MODEL",
                "bedrockRerankingConfiguration": {
                    "modelConfiguration": {"modelArn": self._arn},
                    "numberOfResults": wanted,
                },
            },
        }
        answer = self._endpoint.post("/rerank", payload, rerank_answer_bytes(len(documents)))
        results = answer.get("results") if isinstance(answer, dict) else None
        return read_results(
            results,
            len(documents),
            top_n,
            index_field="index",
            score_field="relevanceScore",
            what=f"at {self._endpoint.host} ({self.model})",
        )


def _endpoint(
    kind: str,
    region: str | None,
    base_url: str | None,
    default_url: Callable[[str], str],
    *,
    allow_private: bool,
    client: ProviderClient,
    credentials: Credentials,
) -> _Endpoint:
    """Where a ``kind`` provider calls: ``base_url`` (a local stand-in) or Bedrock's regional
    address, signed for ``region``. ``ValidationFailed`` as ``make_bedrock_model`` says."""
    if not region:
        raise ValidationFailed(
            f"aws_region is required when {kind}_provider is 'bedrock'.",
            details=[{"field": "aws_region", "problem": "required"}],
        )
    if base_url is not None and not allow_private:
        raise ValidationFailed(
            f"{kind}_base_url is used with {kind}_provider 'bedrock' only by a local stack "
            "started with KIVIDB_ALLOW_PRIVATE_ENDPOINTS=1.",
            details=[{"field": f"{kind}_base_url", "problem": "not allowed"}],
        )
    return _Endpoint(
        base_url or default_url(region),
        SigV4Signer(region, credentials),
        client,
        checked=base_url is not None,
        allow_private=allow_private,
    )


def make_bedrock_model(
    model: str,
    region: str | None,
    base_url: str | None,
    *,
    allow_private: bool,
    client: ProviderClient,
    credentials: Credentials = default_credentials,
) -> BedrockChatModel:
    """The ``bedrock`` language model of a store's settings. ``ValidationFailed`` without
    ``aws_region``, or for a ``base_url`` outside a stack that allows private endpoints."""
    endpoint = _endpoint(
        "llm",
        region,
        base_url,
        runtime_url,
        allow_private=allow_private,
        client=client,
        credentials=credentials,
    )
    return BedrockChatModel(model, endpoint)


def make_bedrock_embedder(
    model: str,
    dimensions: int,
    region: str | None,
    base_url: str | None,
    *,
    allow_private: bool,
    client: ProviderClient,
    credentials: Credentials = default_credentials,
) -> BedrockEmbedder:
    """The ``bedrock`` embedder of a store's settings; ``ValidationFailed`` as
    ``make_bedrock_model``, and for a model or size ``embed_model_problem`` refuses."""
    endpoint = _endpoint(
        "embed",
        region,
        base_url,
        runtime_url,
        allow_private=allow_private,
        client=client,
        credentials=credentials,
    )
    return BedrockEmbedder(model, dimensions, endpoint)


def make_bedrock_reranker(
    model: str,
    region: str | None,
    base_url: str | None,
    *,
    allow_private: bool,
    client: ProviderClient,
    credentials: Credentials = default_credentials,
) -> BedrockReranker:
    """The ``bedrock`` reranker of a store's settings; ``ValidationFailed`` as
    ``make_bedrock_model``."""
    endpoint = _endpoint(
        "rerank",
        region,
        base_url,
        agent_runtime_url,
        allow_private=allow_private,
        client=client,
        credentials=credentials,
    )
    return BedrockReranker(model, endpoint)
