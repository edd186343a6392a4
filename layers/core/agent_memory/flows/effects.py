"""What a use case leaves behind besides its answer: the usage it counts and the webhook events
it tells, gathered while it runs (``Effects``) and written once at the end of the request or
run (``Effects.flush``), a round trip each and only when there is any.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from agent_memory.errors import AgentMemoryError
from agent_memory.observability import logger

if TYPE_CHECKING:
    import redis

    from agent_memory.control.models import Instance
    from agent_memory.flows.container import Container
    from agent_memory.providers.lazy import LazyEmbedder, LazyReranker
    from agent_memory.providers.llm_reranker import LlmReranker
    from agent_memory.stores.models import StoreConfig
    from agent_memory.webhooks.events import Event


class Effects:
    """The usage counts and events of one store (``config`` on ``instance``) made by one
    request or run, and the providers whose own counts (tokens, rerank calls) join them."""

    def __init__(self, container: Container, instance: Instance, config: StoreConfig) -> None:
        self._container = container
        self._instance = instance
        self._config = config
        self._usage: dict[str, int] = {}
        self._events: list[Event] = []
        self.embedders: list[LazyEmbedder] = []
        """Embedders whose tokens (as the provider reported them) count as ``embedding_tokens``."""
        self.rerankers: list[LazyReranker] = []
        """Rerankers whose calls and candidates count as ``rerank_calls`` and
        ``rerank_documents`` (what hosted rerankers bill)."""
        self.scorers: list[LlmReranker] = []
        """The ``llm`` reranker's model calls, counted as ``llm_*_tokens``."""

    def rebind(self, config: StoreConfig) -> None:
        """Make what is still to come for ``config``: the store's settings read again (a read
        route ran under settings that had changed: ``flows.handle.StoreHandle.read``); what was
        counted stays, the providers having been called."""
        self._config = config

    def count(self, counts: dict[str, int]) -> None:
        """Add ``counts`` (``control.usage.COUNTERS``) to what ``flush`` will count."""
        for counter, n in counts.items():
            self._usage[counter] = self._usage.get(counter, 0) + n

    def tell(self, event: str, data: dict[str, Any]) -> None:
        """Make ``event`` (``webhooks.models.EVENT_TYPES``) with ``data`` for the store's
        endpoints that asked for it, queued by ``flush``; nothing for a store without them."""
        if not self._config.webhooks:
            return
        from agent_memory.webhooks.events import event_for

        instance = self._instance
        moment = self._container.clock.now()
        made = event_for(self._config, instance.org_id, instance.instance_id, event, data, moment)
        if made is not None:
            self._events.append(made)

    def flush(self, client: redis.Redis, key_id: str | None) -> None:
        """Count what ``count`` gathered and what the providers report in the store's usage of
        today (towards the quota of ``key_id``, the calling key; None for a background run),
        and queue the events ``tell`` made: their bodies in the store's keyspace (``client``),
        then their deliveries in the outbox. Then forget them, so that nothing is counted or
        sent twice. Counting never raises (``UsageStore.add``); queueing raises
        ``DatabaseUnavailable``."""
        events, self._events = self._events, []
        try:
            self._count(key_id)
        finally:  # a failure of counting (a bug: it never raises) never drops the events
            self._queue(client, events)

    def _count(self, key_id: str | None) -> None:
        self._take_provider_counts()
        counts, self._usage = self._usage, {}
        instance = self._instance
        if any(counts.values()):
            self._container.usage.add(
                instance.org_id, instance.instance_id, self._config.name, counts, key_id
            )

    def _queue(self, client: redis.Redis, events: list[Event]) -> None:
        if events:
            from agent_memory.webhooks.bodies import keep_bodies

            keep_bodies(client, self._config.keys(), [(e.id, e.body) for e in events if e.in_store])
            self._container.outbox.enqueue([d for e in events for d in e.deliveries])

    def flush_after_answer(self, client: redis.Redis, key_id: str | None) -> None:
        """``flush`` once the request's answer is decided: a failure to queue the events is
        logged, not raised, because the write they tell of is done and answered (its events
        are lost, not the write: docs/webhooks.md, "Delivery")."""
        try:
            self.flush(client, key_id)
        except AgentMemoryError as exc:
            logger.error(
                "webhook deliveries not queued",
                extra={"error": exc.code, "store": self._config.name},
            )

    def _take_provider_counts(self) -> None:
        tokens = sum(embedder.tokens for embedder in self.embedders)
        if tokens:
            self.count({"embedding_tokens": tokens})
            self.embedders.clear()
        for reranker in self.rerankers:
            names = ("rerank_calls", "rerank_documents")
            self.count(dict(zip(names, reranker.take_counts(), strict=True)))
        for scorer in self.scorers:
            names = ("llm_input_tokens", "llm_output_tokens")
            self.count(dict(zip(names, scorer.take_tokens(), strict=True)))
