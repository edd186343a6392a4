"""A store's language model, embedder and reranker built at their first call, so that a request
or a run that calls none of them never decrypts a provider key nor fails on a provider's
settings.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from agent_memory.providers.embeddings import Embedder, EmbedPurpose, Vectors
from agent_memory.providers.language_models import Completion, LanguageModel
from agent_memory.providers.rerankers import Relevance, Reranker


class LazyLanguageModel:
    """Builds the store's language model (and decrypts its key) at its first call."""

    def __init__(
        self,
        build: Callable[[], LanguageModel],
        before_call: Callable[[], None] | None = None,
    ) -> None:
        self._build = build
        self._before_call = before_call
        self._model: LanguageModel | None = None

    def complete_json(self, system: str, user: str, *, max_tokens: int = 4096) -> Completion:
        """``LanguageModel.complete_json`` of the model built (and its key decrypted) now if
        not yet, after ``before_call`` (the daily model-token quota, which raises
        ``QuotaExceeded`` when it is used up); errors as those and as
        ``providers.secrets.unseal``."""
        if self._before_call is not None:
            self._before_call()
        if self._model is None:
            self._model = self._build()
        return self._model.complete_json(system, user, max_tokens=max_tokens)


class LazyEmbedder:
    """Builds the store's embedder (and decrypts its key) only when something is embedded, so
    reads that need no embedding never fail on a provider's settings."""

    def __init__(self, dimensions: int, build: Callable[[], Embedder]) -> None:
        self.dimensions = dimensions
        self._build = build
        self._embedder: Embedder | None = None

    @property
    def tokens(self) -> int:
        """``Embedder.tokens`` of the embedder built; 0 when none was."""
        return self._embedder.tokens if self._embedder is not None else 0

    def embed(self, texts: Sequence[str], purpose: EmbedPurpose = "document") -> Vectors:
        """``Embedder.embed`` of the embedder built (and its key decrypted) now if not yet."""
        if self._embedder is None:
            self._embedder = self._build()
        return self._embedder.embed(texts, purpose)


class LazyReranker:
    """Builds the store's reranker (and decrypts its key) at its first call, so that a search
    whose reranker cannot be built (a key that cannot be read, a setting missing) fails in the
    rerank stage, which keeps the fused order, rather than before it."""

    def __init__(self, build: Callable[[], Reranker]) -> None:
        self._build = build
        self._built: Reranker | None = None
        self.calls = 0
        """Calls that answered (what a hosted reranker bills), since ``take_counts``."""
        self.documents = 0
        """The candidates those calls were sent."""

    def rerank(self, query: str, documents: Sequence[str], top_n: int) -> list[Relevance]:
        """``Reranker.rerank`` of the reranker built now if not yet; errors as those and as
        the build's."""
        if self._built is None:
            self._built = self._build()
        found = self._built.rerank(query, documents, top_n)
        self.calls += 1
        self.documents += len(documents)
        return found

    def take_counts(self) -> tuple[int, int]:
        """``(calls, documents)`` since the last take, then 0 and 0."""
        counts = (self.calls, self.documents)
        self.calls = self.documents = 0
        return counts
