"""One store as a handler uses it: ``StoreHandle``, its config and its parts (sessions,
memories, transfer, language model), each built on first use, and the use cases that take
several steps across them (a store's overview, adding events and scheduling what they call for,
extraction now, a session's import), so that every handler calls one function.
"""

from __future__ import annotations

from datetime import date
from functools import cached_property
from typing import TYPE_CHECKING, Any

from agent_memory.stores.models import StoreConfig, StoreCounts, StoreView

if TYPE_CHECKING:
    from agent_memory.background.runs import RunBudget, RunReport
    from agent_memory.background.scheduler import ExtractionTarget
    from agent_memory.background.work import SessionWork
    from agent_memory.control.models import Instance
    from agent_memory.edge.runtime import Runtime
    from agent_memory.keyed.service import KeyedMemories
    from agent_memory.memories.models import MemoryIn, MemoryView
    from agent_memory.memories.service import Memories
    from agent_memory.memories.transfer import MemoryTransfer
    from agent_memory.memories.writes import Kept
    from agent_memory.providers.client import ProviderClient
    from agent_memory.providers.embeddings import Embedder
    from agent_memory.providers.language_models import LanguageModel
    from agent_memory.providers.lazy import LazyEmbedder, LazyReranker
    from agent_memory.providers.llm_reranker import LlmReranker
    from agent_memory.providers.rerankers import Reranker
    from agent_memory.providers.secrets import KeyPlace
    from agent_memory.scopes import KeyScope
    from agent_memory.sessions.models import EventsRequest, EventsResult, ExtractionQueued
    from agent_memory.sessions.service import Sessions
    from agent_memory.sessions.transfer import SessionImport, SessionImported, SessionTransfer
    from agent_memory.stores.holding import Holding, UsageReport
    from agent_memory.stores.idempotency import IdempotencyRecords, OnceKey
    from agent_memory.stores.registry import Stores
    from agent_memory.webhooks.events import Event
    from agent_memory.webhooks.models import DeliveryList


class StoreHandle:
    """Store ``config`` of the instance ``stores`` is on, with the container's ``runtime``.
    Its parts are built when first read; errors are those of the parts."""

    def __init__(
        self,
        runtime: Runtime,
        instance: Instance,
        config: StoreConfig,
        stores: Stores,
        scope: KeyScope | None = None,
        key_id: str | None = None,
    ) -> None:
        self.runtime = runtime
        self.instance = instance
        self.config = config
        self.stores = stores
        self.scope = scope
        """The calling key's scope (None: the admin key, or a background run)."""
        self.key_id = key_id
        """The calling key (None: a background run), whose quota the model tokens spent count
        towards."""
        self._embedders: list[LazyEmbedder] = []
        self._scorers: list[LlmReranker] = []
        self._rerankers: list[LazyReranker] = []
        self._usage: dict[str, int] = {}
        self._events: list[Event] = []

    def count_usage(self, counts: dict[str, int]) -> None:
        """Add ``counts`` (``control.usage.COUNTERS``) to what ``flush`` will count."""
        for counter, n in counts.items():
            self._usage[counter] = self._usage.get(counter, 0) + n

    def notify(self, event: str, data: dict[str, Any]) -> None:
        """Make ``event`` (``webhooks.models.EVENT_TYPES``) with ``data`` for the store's
        endpoints that asked for it, queued by ``flush``; nothing for a store without them."""
        if not self.config.webhooks:
            return
        from agent_memory.webhooks.events import event_for

        made = event_for(
            self.config,
            self.instance.org_id,
            self.instance_id,
            event,
            data,
            self.runtime.clock.now(),
        )
        if made is not None:
            self._events.append(made)

    def flush(self) -> None:
        """Count what ``count_usage`` gathered and the embedding tokens this handle's calls
        spent (as the provider reported them) in the store's usage of today, and queue the
        events ``notify`` made: their bodies in the store's keyspace, then their deliveries in
        the outbox; a round trip each, only when there is any. Then forget them, so that
        nothing is counted or sent twice. Counting never raises (``UsageStore.add``); queueing
        raises ``DatabaseUnavailable``."""
        tokens = sum(embedder.tokens for embedder in self._embedders)
        if tokens:
            self.count_usage({"embedding_tokens": tokens})
            self._embedders.clear()
        for reranker in self._rerankers:  # the calls a hosted reranker bills
            names = ("rerank_calls", "rerank_documents")
            self.count_usage(dict(zip(names, reranker.take_counts(), strict=True)))
        for scorer in self._scorers:  # the ``llm`` reranker's model calls
            names = ("llm_input_tokens", "llm_output_tokens")
            self.count_usage(dict(zip(names, scorer.take_tokens(), strict=True)))
        counts, self._usage = self._usage, {}
        events, self._events = self._events, []
        if any(counts.values()):
            self.runtime.usage.add(
                self.instance.org_id, self.instance_id, self.config.name, counts, self.key_id
            )
        if events:
            from agent_memory.webhooks.bodies import keep_bodies

            keep_bodies(
                self.stores.client,
                self.config.keys(),
                [(e.id, e.body) for e in events if e.in_store],
            )
            self.runtime.outbox.enqueue([d for e in events for d in e.deliveries])

    @property
    def instance_id(self) -> str:
        """The instance the store is on."""
        return self.instance.instance_id

    # --- parts -------------------------------------------------------------------------------

    @cached_property
    def sessions(self) -> Sessions:
        """The store's working memory."""
        from agent_memory.sessions.service import Sessions

        return Sessions(self.stores.client, self.config, self.runtime.clock)

    @cached_property
    def memories(self) -> Memories:
        """The store's long-term memories, embedding through the in-request provider client,
        reranking searches and recalls with the store's reranker (``_reranker``)."""
        return self._memories(self.runtime.provider_client, self._reranker())

    @cached_property
    def session_transfer(self) -> SessionTransfer:
        """The export and import of the store's sessions."""
        from agent_memory.sessions.transfer import SessionTransfer

        return SessionTransfer(self.stores.client, self.config, self.runtime.clock)

    @cached_property
    def memory_transfer(self) -> MemoryTransfer:
        """The export and import of the store's memories."""
        from agent_memory.database.client import redis_client
        from agent_memory.memories.transfer import MemoryTransfer

        binary = redis_client(self.instance.url, binary=True, guard=self.instance.guard)
        return MemoryTransfer(self.stores.client, binary, self.config, self.runtime.clock)

    @cached_property
    def idempotency(self) -> IdempotencyRecords:
        """The store's records of idempotent writes (``Idempotency-Key``)."""
        from agent_memory.stores.idempotency import IdempotencyRecords

        return IdempotencyRecords(self.stores.client, self.config.keys())

    @cached_property
    def keyed(self) -> KeyedMemories:
        """The store's keyed memories, embedding through the in-request provider client."""
        from agent_memory.database.client import redis_client
        from agent_memory.keyed.service import KeyedMemories

        binary = redis_client(self.instance.url, binary=True, guard=self.instance.guard)
        return KeyedMemories(
            binary, self.config, self.runtime.clock, self._embedder(self.runtime.provider_client)
        )

    def _key_place(self) -> KeyPlace:
        from agent_memory.stores.registry import key_place

        return key_place(self.instance.org_id, self.instance_id, self.config)

    def _embedder(self, client: ProviderClient) -> LazyEmbedder:
        """The store's embedder, calling through ``client``, with the embedding key as stored
        for the instance's organization (``stores.registry.key_place``), decrypted only when
        something is embedded."""
        from agent_memory.providers.embeddings import make_embedder
        from agent_memory.providers.lazy import LazyEmbedder
        from agent_memory.providers.secrets import unseal

        config, runtime = self.config, self.runtime

        def embedder() -> Embedder:
            api_key = None
            if config.embed_api_key_ciphertext is not None:
                api_key = unseal(
                    runtime.cipher,
                    config.embed_api_key_ciphertext,
                    self._key_place(),
                    "embed_api_key",
                )
            return make_embedder(
                config.embed_provider,
                config.embed_model,
                config.dimensions,
                config.embed_base_url,
                api_key,
                allow_private=runtime.settings.allow_private_endpoints,
                client=client,
                aws_region=config.aws_region,
            )

        lazy = LazyEmbedder(config.dimensions, embedder)
        self._embedders.append(lazy)
        return lazy

    def _reranker(self) -> Reranker | None:
        """The store's reranker (``rerank_provider``), built and its key decrypted at its first
        call (``LazyReranker``), calling through the runtime's rerank client; None without
        one. ``llm`` scores with the store's language model (``providers.llm_reranker``), its
        tokens counted in the store's usage by ``flush`` and checked against the daily quota
        before each call."""
        config, runtime = self.config, self.runtime
        if config.rerank_provider == "none":
            return None
        from agent_memory.providers.lazy import LazyReranker

        def build() -> Reranker:
            from agent_memory.providers.secrets import unseal

            if config.rerank_provider == "llm":
                from agent_memory.providers.llm_reranker import LlmReranker

                model = self.language_model(runtime.rerank_provider_client)
                assert model is not None  # the settings refuse 'llm' without a language model
                scorer = LlmReranker(model)
                self._scorers.append(scorer)
                return scorer
            if config.rerank_provider == "bedrock":
                from agent_memory.providers.bedrock import make_bedrock_reranker

                assert config.rerank_model is not None  # the settings require it
                return make_bedrock_reranker(
                    config.rerank_model,
                    config.aws_region,
                    config.rerank_base_url,
                    allow_private=runtime.settings.allow_private_endpoints,
                    client=runtime.rerank_provider_client,
                )
            from agent_memory.providers.rerankers import make_http_reranker

            api_key = None
            if config.rerank_api_key_ciphertext is not None:
                api_key = unseal(
                    runtime.cipher,
                    config.rerank_api_key_ciphertext,
                    self._key_place(),
                    "rerank_api_key",
                )
            return make_http_reranker(
                config.rerank_provider,
                config.rerank_model,
                config.rerank_base_url,
                api_key,
                allow_private=runtime.settings.allow_private_endpoints,
                client=runtime.rerank_provider_client,
            )

        lazy = LazyReranker(build)
        self._rerankers.append(lazy)
        return lazy

    def _memories(self, client: ProviderClient, reranker: Reranker | None = None) -> Memories:
        """The ``Memories`` of the store; its embeddings go through ``client``
        (``_embedder``), its searches are reranked by ``reranker``."""
        from agent_memory.database.client import redis_client
        from agent_memory.memories.service import Memories

        return Memories(
            self.stores.client,
            redis_client(self.instance.url, binary=True, guard=self.instance.guard),
            self.config,
            self.runtime.clock,
            self._embedder(client),
            self.runtime.index_cache,
            self.instance_id,
            reranker=reranker,
        )

    def language_model(self, client: ProviderClient | None = None) -> LanguageModel | None:
        """The store's language model, or None without one, calling through ``client`` (the
        background provider client by default). Its key (as stored for the instance's
        organization) is decrypted when it is first called, so a key that cannot be read
        fails the run that needs it (and is recorded there) rather than the function."""
        if self.config.llm_provider == "none":
            return None
        from agent_memory.providers.language_models import make_language_model
        from agent_memory.providers.lazy import LazyLanguageModel
        from agent_memory.providers.secrets import unseal

        config, runtime = self.config, self.runtime

        def build() -> LanguageModel:
            api_key = None
            if config.llm_api_key_ciphertext is not None:
                api_key = unseal(
                    runtime.cipher,
                    config.llm_api_key_ciphertext,
                    self._key_place(),
                    "llm_api_key",
                )
            model = make_language_model(
                config.llm_provider,
                config.llm_model,
                config.llm_base_url,
                api_key,
                allow_private=runtime.settings.allow_private_endpoints,
                client=client or runtime.background_provider_client,
                aws_region=config.aws_region,
            )
            assert model is not None  # llm_provider is not "none" here
            return model

        org_id = self.instance.org_id
        return LazyLanguageModel(build, lambda: runtime.limits.check_model_tokens(org_id))

    def target(self, session_id: str) -> ExtractionTarget:
        """What the background function is invoked with for ``session_id`` of this store."""
        from agent_memory.background.scheduler import ExtractionTarget

        return ExtractionTarget(self.instance_id, self.config.name, session_id)

    # --- what the calling key reaches (agent_memory.scopes) -----------------------------------

    def actor(self, actor_id: str | None, field: str = "actor_id") -> str | None:
        """``scopes.actor_for`` with the calling key's scope."""
        from agent_memory.scopes import actor_for

        return actor_for(self.scope, actor_id, field)

    def whole_store(self, what: str) -> None:
        """``scopes.require_whole_store`` with the calling key's scope."""
        from agent_memory.scopes import require_whole_store

        require_whole_store(self.scope, what)

    @property
    def actors(self) -> tuple[str, ...] | None:
        """The actors the calling key is limited to, or None for a key without that limit."""
        return self.scope.actors if self.scope is not None else None

    def writes(self, what: str) -> None:
        """``scopes.require_write``: ``Forbidden`` for a read-only key asking a read to change
        something (``what``)."""
        from agent_memory.scopes import require_write

        require_write(self.scope, what)

    def reachable_session(self, session_id: str) -> None:
        """``SessionNotFound`` (a stranger's answer) when the calling key is limited to actors
        and the session's actor is not one of them; one more read, for such keys only."""
        if self.actors is not None and self.sessions.owner(session_id) not in self.actors:
            from agent_memory.errors import SessionNotFound

            raise SessionNotFound(session_id)

    def reachable_superseded(self, memory_id: str) -> None:
        """``SupersededNotFound`` (the answer for a memory that does not exist) when the calling
        key is limited to actors and the memory ``supersedes`` names is not one of theirs."""
        from agent_memory.errors import MemoryNotFound, SupersededNotFound

        try:
            self.reachable_memory(memory_id)
        except MemoryNotFound as exc:
            raise SupersededNotFound(memory_id) from exc

    def claim_session(self, session_id: str, actor_id: str | None) -> str | None:
        """The ``actor_id`` an append of the calling key carries (``actor``); for a key limited
        to actors, an existing session must be one of its actors' (else ``ActorMismatch``
        without naming the owner), so that such a key never adds to another's session."""
        actor_id = self.actor(actor_id)
        if self.actors is None:
            return actor_id
        from agent_memory.errors import ActorMismatch, SessionNotFound

        try:
            owner = self.sessions.owner(session_id)
        except SessionNotFound:
            return actor_id
        if owner != actor_id:
            raise ActorMismatch(session_id, None, str(actor_id))
        return actor_id

    def reachable_memory(self, memory_id: str) -> None:
        """``MemoryNotFound`` (a stranger's answer) when the calling key is limited to actors
        and the memory's actor is not one of them."""
        if self.actors is not None and self.memories.reader.owner(memory_id) not in self.actors:
            from agent_memory.errors import MemoryNotFound

            raise MemoryNotFound(memory_id)

    # --- use cases ---------------------------------------------------------------------------

    def overview(self) -> StoreView:
        """The store's settings, its counts and its last extraction (``GET`` of a store). A key
        limited to actors gets the settings alone: the counts and the last extraction are of
        every actor."""
        from agent_memory.edge.runtime import shown_to

        if self.actors is not None:
            return shown_to(self.scope, self.stores.view(self.config))
        sessions = self.sessions
        counts = StoreCounts(
            sessions=sessions.count(),
            memories=self.memories.count(),
            # A store whose language model was removed extracts nothing: nothing is waiting.
            waiting_for_extraction=sessions.waiting_for_extraction() if sessions.has_model else 0,
        )
        last_at, last_error = sessions.extraction_record()
        view = self.stores.view(self.config, counts).model_copy(
            update={"last_extraction_at": last_at, "last_extraction_error": last_error}
        )
        return shown_to(self.scope, view)

    def add_events(
        self, session_id: str, request: EventsRequest, once: OnceKey | None = None
    ) -> EventsResult:
        """Append ``request``'s messages to the session (once per key with ``once``), then arm
        its extraction schedule or ask for summarization when the append calls for it
        (``background.work``)."""
        from agent_memory.background.triggers import schedule_background

        appended = self.sessions.append_events(session_id, request, once)
        if appended.arm_due is not None or appended.fold:
            schedule_background(
                self.runtime.scheduler, self.sessions, self.target(session_id), appended
            )
        return appended.result

    def extract_now(self, session_id: str) -> ExtractionQueued:
        """Queue the session's extraction now; ``Conflict`` without a language model,
        ``SessionNotFound`` without the session."""
        from agent_memory.background.triggers import request_extraction
        from agent_memory.errors import Conflict, SessionNotFound
        from agent_memory.sessions.models import ExtractionQueued

        if self.config.llm_provider == "none":
            raise Conflict(
                "This store has no language model (llm_provider is 'none'), so it extracts "
                "nothing; set llm_provider and llm_model (and llm_api_key or llm_base_url, as "
                "the provider needs) on the store first."
            )
        if not request_extraction(self.stores.client, self.config, session_id, self.runtime.clock):
            raise SessionNotFound(session_id)
        # An asynchronous invoke of the background function in AWS; due now locally.
        self.runtime.scheduler.run_now(self.target(session_id))
        return ExtractionQueued(session_id=session_id)

    def import_session(self, session_id: str, body: SessionImport) -> SessionImported:
        """Write a page of an exported session; when its messages are not all read and the
        store has a language model, arm its extraction as an append does
        (``background.triggers.arm_reserved``)."""
        from agent_memory.background.triggers import arm_reserved

        outcome = self.session_transfer.import_page(session_id, body)
        if outcome.arm_due is not None:
            arm_reserved(
                self.runtime.scheduler, self.sessions, self.target(session_id), outcome.arm_due
            )
        return outcome.result

    def holding(self) -> Holding:
        """What the store holds now (``stores.holding.store_holding``)."""
        from agent_memory.stores.holding import store_holding

        return store_holding(
            self.stores.client, self.config, self.runtime.clock, self.memories.count
        )

    def usage(self, first: date | None, last: date | None) -> UsageReport:
        """The store's usage from ``first`` to ``last`` (``control.usage.day_range``) and what
        it holds now; ``Forbidden`` for a key limited to actors (usage is every actor's)."""
        from agent_memory.control.usage import day_range
        from agent_memory.stores.holding import UsageReport

        self.whole_store("read the store's usage")
        days = day_range(first, last, self.runtime.clock.now().date())
        used = self.runtime.usage.days(
            self.instance.org_id, days, (self.instance_id, self.config.name)
        )
        return UsageReport(days=used, now=self.holding())

    def deliveries(self) -> DeliveryList:
        """The store's last webhook deliveries (``webhooks.outbox.Outbox.log``); ``Forbidden``
        for a key limited to actors (they are every actor's events)."""
        self.whole_store("read the store's webhook deliveries")
        listed = self.runtime.outbox.log(self.instance.org_id, self.instance_id, self.config.name)
        if self.scope is None or self.scope.manages_stores:
            return listed
        from agent_memory.webhooks.models import redacted_url

        shown = [d.model_copy(update={"url": redacted_url(d.url)}) for d in listed.deliveries]
        return listed.model_copy(update={"deliveries": shown})

    def add_memory(self, body: MemoryIn) -> Kept:
        """Keep a memory (``Memories.add``); a new one is counted in the usage when it replaced
        another and told to the store's webhooks (``memory.created``, ``memory.superseded``)."""
        kept = self.memories.add(body)
        if not kept.duplicate:
            self._kept(kept.memory, kept.superseded)
        return kept

    def _kept(self, memory: MemoryView, superseded: str | None) -> None:
        from agent_memory.webhooks.events import kept_events

        if superseded is not None:
            self.count_usage({"memories_superseded": 1})
        for event, data in kept_events(memory, superseded):
            self.notify(event, data)

    def delete_memory(self, memory_id: str) -> None:
        """Forget a memory and its chain (``Memories.delete``), counted and told
        (``memory.deleted``)."""
        self.memories.delete(memory_id)
        self.count_usage({"memories_deleted": 1})
        self.notify("memory.deleted", {"memory_id": memory_id})

    def forget_actor(self, actor_id: str) -> int:
        """Forget every memory of ``actor_id`` (``Memories.delete_actor``); how many, counted
        and told as one ``memory.deleted`` naming the actor and how many."""
        deleted = self.memories.delete_actor(actor_id)
        if deleted:
            self.count_usage({"memories_deleted": deleted})
            self.notify("memory.deleted", {"actor_id": actor_id, "deleted": deleted})
        return deleted

    def delete_session(self, session_id: str) -> None:
        """Forget a session's working memory (``Sessions.delete``), told
        (``session.deleted``)."""
        self.sessions.delete(session_id)
        self.notify("session.deleted", {"session_id": session_id})

    def run_background(self, target: ExtractionTarget, budget: RunBudget) -> RunReport:
        """One background run of ``target`` (``session_work``); what it did is counted in the
        store's usage and told to its webhooks (``memory.created``, ``memory.superseded``,
        ``extraction.completed`` or ``extraction.failed``), then both are sent (``flush``)."""
        report = self.session_work(target).run(budget)
        extracted = report.extraction_runs or (report.outcome == "failed")
        self.count_usage(
            {
                "memories_added": report.kept,
                "memories_superseded": report.superseded,
                "extraction_runs": int(extracted),
                "summarization_runs": report.summarization_runs,
                "llm_input_tokens": report.input_tokens,
                "llm_output_tokens": report.output_tokens,
            }
        )
        for event, data in report.events:
            self.notify(event, {**data, "session_id": target.session_id})
        if report.outcome == "failed":
            self.notify(
                "extraction.failed", {"session_id": target.session_id, "error": report.error}
            )
        elif report.extraction_runs:
            self.notify(
                "extraction.completed",
                {
                    "session_id": target.session_id,
                    "messages_read": report.read_messages,
                    "memories_kept": report.kept,
                    "memories_deduplicated": report.deduplicated,
                    "memories_superseded": report.superseded,
                },
            )
        self.flush()
        return report

    def session_work(self, target: ExtractionTarget) -> SessionWork:
        """The background run for ``target`` (a session of this store), embedding through the
        background provider client."""
        from agent_memory.background.work import SessionWork

        return SessionWork(
            self.stores.client,
            self.config,
            self._memories(self.runtime.background_provider_client),
            self.language_model(),
            self.runtime.scheduler,
            self.runtime.clock,
            target,
        )
