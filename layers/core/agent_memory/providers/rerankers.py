"""The rerank port: a query and candidate texts in, their relevance out (DESIGN section 5).

A search or a recall fetches ``rerank_candidates`` fused candidates, asks the store's reranker to
order them, and returns the best ``limit`` (``memories.reranking``). Providers, each a
cross-encoder behind one HTTP call:

- ``cohere``: Cohere's Rerank v2, ``POST https://api.cohere.com/v2/rerank`` (API reference,
  "Rerank V2", https://docs.cohere.com/reference/rerank): request ``{"model", "query",
  "documents": [str], "top_n"}``, answer ``{"id", "results": [{"index", "relevance_score"}],
  "meta"}``;
- ``voyage``: Voyage AI's ``POST https://api.voyageai.com/v1/rerank`` (https://docs.voyageai.com/
  reference/reranker-api): request ``{"model", "query", "documents", "top_k", "truncation":
  true}``, answer ``{"object": "list", "data": [{"index", "relevance_score"}], "model",
  "usage"}``;
- ``jina``: Jina AI's ``POST https://api.jina.ai/v1/rerank`` (https://jina.ai/reranker): request
  ``{"model", "query", "documents", "top_n", "return_documents": false}``, answer ``{"model",
  "usage", "results": [{"index", "relevance_score"}]}``;
- ``custom``: any server with Cohere's shape at ``{rerank_base_url}/rerank`` (vLLM, Infinity,
  TEI, LiteLLM...), checked with ``providers.network.check_endpoint`` at every call;
- ``llm`` (``providers.llm_reranker``) and ``bedrock`` (``providers.bedrock``) have modules of
  their own.

Every call goes through ``providers.client.ProviderClient`` (one deadline for the whole call,
retries of 429 and 5xx honouring ``Retry-After``, an answer of at most ``max_answer_bytes``), so
provider text never reaches a log line or an error. An answer that does not fit the request (an
index out of range or repeated, a score that is not a finite number, fewer results than asked)
is ``ProviderRejected``; the caller then keeps the fused order (``"reranked": false``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol
from urllib.parse import urlsplit

from agent_memory.errors import ProviderRejected
from agent_memory.providers.client import ProviderClient, bearer_headers

COHERE_BASE_URL = "https://api.cohere.com/v2"
VOYAGE_BASE_URL = "https://api.voyageai.com/v1"
JINA_BASE_URL = "https://api.jina.ai/v1"
ANSWER_ENVELOPE_BYTES = 64 * 1024
"""Room in an answer for everything but its results: ids, model, usage, billing metadata."""
BYTES_PER_RESULT = 512
"""Room for one ``{"index": n, "relevance_score": x}`` result, indented (a document's text is
never asked for: Jina's ``return_documents`` is false; Cohere v2 and Voyage send none by
default)."""


def max_answer_bytes(count: int) -> int:
    """The most bytes a rerank answer for ``count`` documents may hold (``ANSWER_ENVELOPE_BYTES +
    count * BYTES_PER_RESULT``: 89 KiB for 50); a larger answer is refused unread."""
    return ANSWER_ENVELOPE_BYTES + count * BYTES_PER_RESULT


@dataclass(frozen=True)
class Relevance:
    """One candidate as the reranker placed it: its position in the documents sent (``index``)
    and its relevance to the query in [0, 1] (higher is more relevant)."""

    index: int
    relevance: float


class Reranker(Protocol):
    """Orders candidate texts by their relevance to a query."""

    def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[Relevance]:
        """The ``min(top_n, len(documents))`` most relevant of ``documents``, most relevant
        first, each index once. Raises ``ProviderUnavailable`` (unreachable, out of time, 429
        or 5xx until the retries ran out), ``ProviderRejected`` (refused, or an answer that does
        not fit the request), ``EndpointRefused`` (a custom endpoint not allowed)."""
        ...


def relevance_scale(scores: Sequence[float]) -> list[float]:
    """``scores`` on [0, 1]: kept when all of them already are (Cohere, Voyage and Jina answer
    probabilities); otherwise read as logits, as some self-hosted cross-encoders answer (TEI
    with ``raw_scores``, vLLM), and passed through the logistic function, which keeps their
    order."""
    if all(0.0 <= s <= 1.0 for s in scores):
        return list(scores)
    return [_logistic(s) for s in scores]


def _logistic(x: float) -> float:
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


def read_results(
    results: object, count: int, top_n: int, *, index_field: str, score_field: str, what: str
) -> list[Relevance]:
    """The ``Relevance`` list of a rerank answer's results (a list of objects with
    ``index_field`` and ``score_field``), most relevant first. ``ProviderRejected`` (naming
    ``what``, never quoting the answer) unless there are ``min(top_n, count)`` results or more,
    each with an index in ``range(count)`` seen once and a finite number as score. More results
    than asked are cut; the order is by score (ties by index), whatever the answer's order."""
    wanted = min(top_n, count)

    def unusable(problem: str) -> ProviderRejected:
        return ProviderRejected(f"The reranker {what} {problem}; its order was not used.")

    if not isinstance(results, list):
        raise unusable("answered without a list of results")
    seen: set[int] = set()
    placed: list[tuple[int, float]] = []
    for item in results:
        index = item.get(index_field) if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise unusable(f"returned a result without a valid '{index_field}' (0 to {count - 1})")
        if index in seen:
            raise unusable(f"returned index {index} twice")
        seen.add(index)
        score = item.get(score_field)
        if isinstance(score, bool) or not isinstance(score, int | float):
            raise unusable(f"returned a result without a numeric '{score_field}'")
        if not math.isfinite(score):
            raise unusable(f"returned a '{score_field}' that is not a finite number")
        placed.append((index, float(score)))
    if len(placed) < wanted:
        raise unusable(f"returned {len(placed)} results for {wanted} asked")
    scaled = relevance_scale([score for _, score in placed])
    ranked = sorted(zip((i for i, _ in placed), scaled, strict=True), key=lambda p: (-p[1], p[0]))
    return [Relevance(index, score) for index, score in ranked[:wanted]]


@dataclass(frozen=True)
class RerankShape:
    """The wire shape of a reranker's request and answer (the module's docstring has each):
    ``results_field`` names the answer's list and ``top_field`` the request's count
    (``results``/``top_n`` for Cohere and Jina, ``data``/``top_k`` for Voyage); ``extra`` is sent
    as well."""

    results_field: str = "results"
    top_field: str = "top_n"
    extra: tuple[tuple[str, Any], ...] = ()


COHERE_SHAPE = RerankShape()
VOYAGE_SHAPE = RerankShape("data", "top_k", (("truncation", True),))
JINA_SHAPE = RerankShape(extra=(("return_documents", False),))


class HttpReranker:
    """A cross-encoder behind one JSON POST: Cohere v2, Voyage, Jina, or a custom server of
    Cohere's shape (``custom``: its endpoint is checked at every call, private addresses only
    with ``allow_private``), speaking ``shape`` (``RerankShape``)."""

    def __init__(
        self,
        *,
        url: str,
        model: str,
        api_key: str | None,
        client: ProviderClient,
        shape: RerankShape = COHERE_SHAPE,
        custom: bool = False,
        allow_private: bool = False,
    ) -> None:
        results_field, top_field, extra = shape.results_field, shape.top_field, dict(shape.extra)
        self.model = model
        self._url = url
        self._api_key = api_key
        self._client = client
        self._results_field = results_field
        self._top_field = top_field
        self._extra = extra or {}
        self._custom = custom
        self._allow_private = allow_private
        self._host = urlsplit(url).hostname or "?"

    def __repr__(self) -> str:  # never shows the key
        return f"HttpReranker(model={self.model!r}, host={self._host!r})"

    def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[Relevance]:
        """See ``Reranker.rerank``; no documents sends nothing."""
        if not documents or top_n < 1:
            return []
        payload = {
            "model": self.model,
            "query": query,
            "documents": list(documents),
            self._top_field: min(top_n, len(documents)),
            **self._extra,
        }
        answer = self._client.post_json(
            self._url,
            payload,
            headers=bearer_headers(self._api_key),
            max_bytes=max_answer_bytes(len(documents)),
            custom=self._custom,
            allow_private=self._allow_private,
        )
        results = answer.get(self._results_field) if isinstance(answer, dict) else None
        return read_results(
            results,
            len(documents),
            top_n,
            index_field="index",
            score_field="relevance_score",
            what=f"at {self._host} ({self.model})",
        )
