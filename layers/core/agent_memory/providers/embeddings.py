"""The embeddings port: text in, unit-free float32 vectors out (DESIGN section 5).

Providers: ``openai`` (OpenAI's ``POST /v1/embeddings``), ``custom`` (any server with the same
wire shape at ``{base_url}/embeddings``) and ``none`` (clients send their own vectors, checked
by ``validate_vector``).

Wire shape (OpenAI API reference, "Embeddings", https://platform.openai.com/docs/api-reference/
embeddings/create): request ``{"model": str, "input": [str, ...], "encoding_format": "float",
"dimensions": int (text-embedding-3 and later only)}``; answer ``{"object": "list", "data":
[{"object": "embedding", "index": int, "embedding": [float, ...]}, ...], "model": str,
"usage": {...}}``. An input array holds at most 2048 items, none of them empty, and all
embedding models take at most 300,000 tokens summed over one request's inputs.

Each request goes through ``providers.client.ProviderClient`` (one deadline per call, retries) and
reads at most ``max_answer_bytes(batch, dimensions)`` bytes of answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol
from urllib.parse import urlsplit

import numpy as np
import numpy.typing as npt

from agent_memory.errors import (
    EmbeddingMismatch,
    EmbeddingRequired,
    ValidationFailed,
    VectorInvalid,
)
from agent_memory.providers.client import ProviderClient, bearer_headers, endpoint
from agent_memory.providers.token_counts import bounded, embed_token_bound

OPENAI_BASE_URL = "https://api.openai.com/v1"
MAX_BATCH_INPUTS = 2048
"""OpenAI's limit on the ``input`` array of one embeddings request (API reference)."""
MAX_BATCH_BYTES = 300_000
"""Bytes of UTF-8 text per request. OpenAI caps a request at 300,000 tokens summed over its
inputs; a token of its byte-level BPE encodings covers at least one byte, so this many bytes is
never more than this many tokens."""
ANSWER_ENVELOPE_BYTES = 64 * 1024
"""Room in an answer for everything but the vectors: ``object``, ``model``, ``usage``."""
BYTES_PER_ITEM = 256
"""Room for one item's ``{"object": "embedding", "index": n, "embedding": [...]}`` around its
values, indented as OpenAI indents its answers."""
BYTES_PER_VALUE = 48
"""The most one value takes: a float32 printed as the shortest float64 that reads back
(``-1.2345678901234567e-05``, 23 characters), its separator and up to 20 characters of
indentation on its own line."""

Vectors = npt.NDArray[np.float32]


def max_answer_bytes(count: int, dimensions: int) -> int:
    """The most bytes an embeddings answer for ``count`` texts of ``dimensions`` values may
    hold: ``ANSWER_ENVELOPE_BYTES + count * (BYTES_PER_ITEM + dimensions * BYTES_PER_VALUE)``
    (136 KiB for one text of 1,536 dimensions); a larger answer is refused
    (``ProviderRejected``) without being read."""
    return ANSWER_ENVELOPE_BYTES + count * (BYTES_PER_ITEM + dimensions * BYTES_PER_VALUE)


EmbedPurpose = Literal["document", "query"]
"""What texts are embedded for: to be kept and found (``document``), or to search with
(``query``). Providers whose models embed the two differently are told (Cohere Embed's
``input_type`` ``search_document`` / ``search_query``, https://docs.cohere.com/reference/embed);
the others embed both alike."""


class Embedder(Protocol):
    """Turns texts into vectors of ``dimensions`` float32 values; ``tokens`` counts the input
    tokens its provider reported for every call so far (0 when it reports none)."""

    dimensions: int

    @property
    def tokens(self) -> int:
        """Input tokens the provider reported for every call so far."""
        ...

    def embed(self, texts: Sequence[str], purpose: EmbedPurpose = "document") -> Vectors:
        """Shape ``(len(texts), dimensions)``, dtype float32, row ``i`` for ``texts[i]``;
        ``purpose`` says whether they are memories or a query (``EmbedPurpose``).

        Raises ``ProviderUnavailable`` / ``ProviderRejected`` / ``EmbeddingMismatch`` when the
        provider fails, ``EmbeddingRequired`` when there is no embedding model.
        """
        ...


@dataclass(frozen=True)
class RequestShape:
    """How requests to an OpenAI-shaped embeddings server are made: at most ``batch_size``
    texts (and ``max_batch_bytes`` bytes of UTF-8 text, None: no byte limit) in one request,
    and the ``dimensions`` field only with ``send_dimensions`` (many servers refuse it)."""

    batch_size: int = MAX_BATCH_INPUTS
    max_batch_bytes: int | None = None
    send_dimensions: bool = False


class _OpenAIShaped:
    """Shared by the OpenAI and custom embedders: batching, the request, the answer's checks."""

    def __init__(
        self,
        *,
        url: str,
        model: str,
        dimensions: int,
        api_key: str | None,
        client: ProviderClient,
        shape: RequestShape,
    ) -> None:
        batch_size, max_batch_bytes = shape.batch_size, shape.max_batch_bytes
        send_dimensions = shape.send_dimensions
        if dimensions < 1:
            raise ValueError("dimensions must be >= 1")
        if not 1 <= batch_size <= MAX_BATCH_INPUTS:
            raise ValueError(f"batch_size must be between 1 and {MAX_BATCH_INPUTS}")
        self.dimensions = dimensions
        self.model = model
        self.batch_size = batch_size
        self.max_batch_bytes = max_batch_bytes
        self._url = url
        self._api_key = api_key
        self._send_dimensions = send_dimensions
        self._client = client
        self._host = urlsplit(url).hostname or "?"
        self._custom = False
        self.allow_private = False
        self.tokens = 0

    def __repr__(self) -> str:  # never shows the key
        return f"{type(self).__name__}(model={self.model!r}, dimensions={self.dimensions})"

    def embed(self, texts: Sequence[str], purpose: EmbedPurpose = "document") -> Vectors:
        """See ``Embedder.embed`` (OpenAI's shape embeds documents and queries alike). Sends
        ``ceil(len(texts) / batch_size)`` requests or more (a batch also closes at
        ``max_batch_bytes`` of UTF-8 text). Empty ``texts`` sends nothing. Raises
        ``ValidationFailed`` when a text is empty (the provider refuses them)."""
        items = texts_to_embed(texts)
        result = np.empty((len(items), self.dimensions), dtype=np.float32)
        for start, stop in _batches(items, self.batch_size, self.max_batch_bytes):
            result[start:stop] = self._embed_batch(items[start:stop])
        return result

    def _embed_batch(self, batch: list[str]) -> Vectors:
        payload: dict[str, Any] = {
            "model": self.model,
            "input": batch,
            "encoding_format": "float",
        }
        if self._send_dimensions:
            payload["dimensions"] = self.dimensions
        answer = self._client.post_json(
            self._url,
            payload,
            headers=bearer_headers(self._api_key),
            max_bytes=max_answer_bytes(len(batch), self.dimensions),
            custom=self._custom,
            allow_private=self.allow_private,
        )
        vectors = _read_answer(answer, len(batch), self.dimensions, self.model, self._host)
        self.tokens += bounded(
            reported_tokens(answer),
            embed_token_bound(batch),
            what="embedding_tokens",
            host=self._host,
        )
        return vectors


def texts_to_embed(texts: Sequence[str]) -> list[str]:
    """``texts`` as a list, checked: ``TypeError`` for one string (a common slip: it would be
    embedded a character at a time), ``ValidationFailed`` naming the first empty text (every
    provider refuses them)."""
    if isinstance(texts, str):
        raise TypeError("embed() takes a sequence of texts, not one string")
    items = list(texts)
    for position, text in enumerate(items):
        if not text:
            raise ValidationFailed(
                f"Text number {position} to embed is empty; embedding models refuse empty input."
            )
    return items


def reported_tokens(answer: object) -> int:
    """The input tokens an embeddings answer reports: ``usage.prompt_tokens`` (OpenAI's API
    reference, "The embedding object"; ``usage.total_tokens`` when only that is given), or 0
    for an answer without a usable count (a custom server may send none). The caller bounds
    it by what the batch could use (``providers.token_counts.embed_token_bound``)."""
    usage = answer.get("usage") if isinstance(answer, dict) else None
    if not isinstance(usage, dict):
        return 0
    for field in ("prompt_tokens", "total_tokens"):
        value = usage.get(field)
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
    return 0


class OpenAIEmbedder(_OpenAIShaped):
    """OpenAI's embeddings endpoint, ``POST {base_url}/embeddings`` with a bearer key.

    ``dimensions`` is sent only for models named ``text-embedding-3*`` (the API reference:
    "Only supported in text-embedding-3 and later models"); for others (``text-embedding-ada-002``
    gives 1536) the answer must simply have ``dimensions`` values.

    Batches hold at most ``batch_size`` inputs (default and maximum 2048, OpenAI's limit) and
    at most ``max_batch_bytes`` UTF-8 bytes (default 300,000, under OpenAI's 300,000-token cap
    per request; ``None`` for no byte limit); results come back in input order whatever the
    order of the answer's ``index`` fields.

    Raises from ``embed``: ``ProviderUnavailable``, ``ProviderRejected`` (bad key, unknown
    model, text too long...), ``EmbeddingMismatch`` (a vector of the wrong length, a value that
    is not a finite number, missing or repeated ``index``).
    """

    def __init__(
        self,
        api_key: str,
        model: str,
        dimensions: int,
        base_url: str = OPENAI_BASE_URL,
        *,
        client: ProviderClient,
        batch_size: int = MAX_BATCH_INPUTS,
        max_batch_bytes: int | None = MAX_BATCH_BYTES,
    ) -> None:
        super().__init__(
            url=endpoint(base_url, "embeddings"),
            model=model,
            dimensions=dimensions,
            api_key=api_key,
            client=client,
            shape=RequestShape(
                batch_size, max_batch_bytes, send_dimensions=model.startswith("text-embedding-3")
            ),
        )


class CustomEmbedder(_OpenAIShaped):
    """An OpenAI-compatible server: ``POST {base_url}/embeddings``, same request and answer.

    ``check_endpoint(base_url, allow_private=allow_private)`` runs at every request, inside the
    client's deadline (so a name that now resolves to a private address is refused), and the
    addresses the connection uses are checked too (see its DNS-rebinding note).
    ``shape`` says how requests are made (``RequestShape``: ``dimensions`` is sent only with
    ``send_dimensions``; no byte limit per batch by default: the server's limits are unknown);
    the ``Authorization: Bearer`` header only when ``api_key`` is given. Batching and errors as
    ``OpenAIEmbedder``, plus ``EndpointRefused`` (and ``ProviderUnavailable`` when the host does
    not resolve).
    """

    def __init__(
        self,
        base_url: str,
        model: str,
        dimensions: int,
        api_key: str | None = None,
        *,
        allow_private: bool,
        client: ProviderClient,
        shape: RequestShape = RequestShape(),
    ) -> None:
        super().__init__(
            url=endpoint(base_url, "embeddings"),
            model=model,
            dimensions=dimensions,
            api_key=api_key,
            client=client,
            shape=shape,
        )
        self.base_url = base_url
        self.allow_private = allow_private
        self._custom = True


class NoEmbedder:
    """The ``none`` provider: the store has no embedding model, clients send vectors.

    ``embed`` returns an empty ``(0, dimensions)`` array for no texts and otherwise raises
    ``EmbeddingRequired`` (code ``vector_required``).
    """

    def __init__(self, dimensions: int) -> None:
        self.dimensions = dimensions
        self.tokens = 0

    def __repr__(self) -> str:
        return f"NoEmbedder(dimensions={self.dimensions})"

    def embed(self, texts: Sequence[str], purpose: EmbedPurpose = "document") -> Vectors:
        """See the class docstring."""
        if len(texts) == 0:
            return np.empty((0, self.dimensions), dtype=np.float32)
        raise EmbeddingRequired()


def validate_vector(values: Sequence[float], dimensions: int, field: str) -> Vectors:
    """A client's vector as a float32 array of shape ``(dimensions,)``.

    Raises ``VectorInvalid`` (a ``ValidationFailed``, ``details=[{"field": field, "problem":
    ...}]``) when ``values`` is not a flat list of numbers, its length is not ``dimensions``
    ("expected 1536 dimensions, got 384"), a value is NaN or infinite or too large for float32
    (the first such index and value are named), or every value is zero (cosine similarity is
    undefined for a zero vector).
    """

    def invalid(problem: str) -> VectorInvalid:
        return VectorInvalid(f"{field}: {problem}", details=[{"field": field, "problem": problem}])

    if isinstance(values, (str, bytes)):
        raise invalid("must be a list of numbers")
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError):  # ragged nesting
        raise invalid("must be a flat list of numbers") from None
    if raw.ndim != 1 or (raw.size and raw.dtype.kind not in "iuf"):
        raise invalid("must be a flat list of numbers")
    if raw.shape[0] != dimensions:
        raise invalid(f"expected {dimensions} dimensions, got {raw.shape[0]}")
    wide = raw.astype(np.float64)
    bad = np.flatnonzero(~np.isfinite(wide))
    if bad.size:
        index = int(bad[0])
        raise invalid(
            f"value at index {index} is {float(wide[index])!r}; values must be finite numbers"
        )
    with np.errstate(over="ignore"):
        vector = wide.astype(np.float32)
    bad = np.flatnonzero(~np.isfinite(vector))
    if bad.size:
        index = int(bad[0])
        raise invalid(
            f"value at index {index} ({float(wide[index])!r}) is too large for a 32-bit float"
        )
    if not vector.any():
        raise invalid("is all zeros; cosine similarity is undefined for a zero vector")
    return vector


def _batches(items: list[str], batch_size: int, max_bytes: int | None) -> Iterator[tuple[int, int]]:
    """``(start, stop)`` slices of at most ``batch_size`` items and ``max_bytes`` UTF-8 bytes
    (a single larger item goes alone)."""
    start, size = 0, 0
    for position, text in enumerate(items):
        length = len(text.encode("utf-8")) if max_bytes is not None else 0
        full = position - start >= batch_size
        too_big = max_bytes is not None and position > start and size + length > max_bytes
        if full or too_big:
            yield start, position
            start, size = position, 0
        size += length
    if start < len(items):
        yield start, len(items)


def _read_answer(answer: object, count: int, dimensions: int, model: str, host: str) -> Vectors:
    """The ``(count, dimensions)`` float32 array in input order from an embeddings answer."""

    def mismatch(problem: str) -> EmbeddingMismatch:
        return EmbeddingMismatch(f"The embedding provider at {host} ({model}) {problem}.")

    data = answer.get("data") if isinstance(answer, dict) else None
    if not isinstance(data, list):
        raise mismatch("answered without a 'data' list")
    if len(data) != count:
        raise mismatch(f"returned {_count(len(data))} embeddings for {count} inputs")
    result = np.empty((count, dimensions), dtype=np.float32)
    seen = np.zeros(count, dtype=bool)
    for item in data:
        index = item.get("index") if isinstance(item, dict) else None
        if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < count:
            raise mismatch(f"returned an item without a valid 'index' (0 to {count - 1})")
        if seen[index]:
            raise mismatch(f"returned index {index} twice")
        seen[index] = True
        values = item.get("embedding")
        if not isinstance(values, list):
            raise mismatch(f"returned no 'embedding' list for index {index}")
        if len(values) != dimensions:
            raise mismatch(
                f"returned vectors of the wrong size: expected {dimensions} dimensions, "
                f"got {_count(len(values))}"
            )
        try:
            raw = np.asarray(values)
        except (TypeError, ValueError):
            raw = np.asarray([None])
        if raw.ndim != 1 or raw.dtype.kind not in "iuf":
            raise mismatch(f"returned a value that is not a number in the vector for index {index}")
        with np.errstate(over="ignore", invalid="ignore"):
            vector = raw.astype(np.float32)
        bad = np.flatnonzero(~np.isfinite(vector))
        if bad.size:
            # the position only: the value is the provider's to choose (and could carry text)
            raise mismatch(
                f"returned a value that is not a finite 32-bit float at position {int(bad[0])} "
                f"in the vector for index {index}"
            )
        result[index] = vector
    return result


_COUNT_SHOWN = 100_000


def _count(n: int) -> str:
    """A count from a provider's answer as a message shows it: the number up to 100,000 (far
    above any store's dimensions), else "more than 100,000"."""
    return f"{n:,}" if n <= _COUNT_SHOWN else f"more than {_COUNT_SHOWN:,}"
