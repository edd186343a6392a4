"""One store as a use case holds it: ``StoreHandle``, its parts (sessions, memories, their
transfer, keyed memories, the language model, a background run), each built on first use, and
the ``Effects`` (usage and webhook events) its use cases gather.

A handle is made by a lookup that checked the caller reaches the store (``flows.access``);
what the caller may do inside it (which actors, reads or writes) the use cases check
(``flows.reach``).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cached_property
from typing import TYPE_CHECKING, TypeVar

from agent_memory.errors import AgentMemoryError
from agent_memory.flows.effects import Effects
from agent_memory.stores.freshness import CONFIRMED, SettingsCheck, StaleSettings

if TYPE_CHECKING:
    from agent_memory.background.scheduler import ExtractionTarget
    from agent_memory.background.work import SessionWork
    from agent_memory.consolidation.runs import ConsolidationRuns
    from agent_memory.control.models import Instance
    from agent_memory.flows.container import Container
    from agent_memory.keyed.service import KeyedMemories
    from agent_memory.memories.profiles import Profiles
    from agent_memory.memories.service import Memories
    from agent_memory.memories.transfer import MemoryTransfer
    from agent_memory.providers.client import ProviderClient
    from agent_memory.providers.embeddings import Embedder
    from agent_memory.providers.language_models import LanguageModel
    from agent_memory.providers.rerankers import Reranker
    from agent_memory.providers.setting import Outbound
    from agent_memory.scopes import KeyScope
    from agent_memory.sessions.service import Sessions
    from agent_memory.sessions.transfer import SessionTransfer
    from agent_memory.stores.database import StoreDatabase
    from agent_memory.stores.idempotency import IdempotencyRecords
    from agent_memory.stores.models import StoreConfig
    from agent_memory.stores.registry import Stores

T = TypeVar("T")


class StoreHandle:
    """Store ``config`` of ``instance``, registered in ``stores``, served by ``container``,
    for a caller of ``scope`` with key ``key_id`` (both None for a background run). Its parts
    are built when first read; errors are those of the parts.

    ``check``: whether ``config`` is still the store's (``stores.freshness``). A handle opened
    from the settings this container read last has it pending: a use case that reads through
    ``read`` lets its first round trip carry the check; any other use of ``config`` confirms it
    first with a read of its own, so nothing but ``read`` ever runs on settings not
    confirmed."""

    def __init__(
        self,
        container: Container,
        instance: Instance,
        config: StoreConfig,
        stores: Stores,
        scope: KeyScope | None = None,
        key_id: str | None = None,
        check: SettingsCheck = CONFIRMED,
    ) -> None:
        self.container = container
        self.instance = instance
        self._config = config
        self._check = check
        self._reading = False
        self.stores = stores
        self.scope = scope
        """The calling key's scope (None: the admin key, or a background run)."""
        self.key_id = key_id
        """The calling key (None: a background run), whose quota the model tokens spent count
        towards."""
        self.effects = Effects(container, instance, config)

    @property
    def config(self) -> StoreConfig:
        """The store's settings: confirmed to be the store's (a read of its registry entry
        when they were taken from this container's last read), except inside ``read``.
        ``StoreNotFound`` when the store is gone."""
        if self._check.pending and not self._reading and not self._still_current():
            self._reopen()
        return self._config

    def read(self, work: Callable[[StoreHandle], T]) -> T:
        """``work(self)``, a use case that only reads, run on the settings this handle was
        opened with, confirmed in its first round trip (``stores.freshness``); when they turn
        out to have changed (in that round trip, or in a read of their own after ``work``
        answered or raised an API error without one), the answer is thrown away and
        ``work`` runs again on the settings read now (``StoreNotFound`` when the store is
        gone). With settings read in this request, just ``work(self)``."""
        if not self._check.pending:
            return work(self)
        self._reading = True
        try:
            result = work(self)
        except StaleSettings:
            pass
        except AgentMemoryError:
            if self._still_current():
                raise
        else:
            if self._still_current():
                return result
        finally:
            self._reading = False
        self._reopen()
        return work(self)

    def _still_current(self) -> bool:
        """Settle the check (a read of its own when no round trip carried it); whether the
        settings were still the store's."""
        try:
            self._check.confirm_now(self.stores.client)
        except StaleSettings:
            return False
        return True

    def _reopen(self) -> None:
        """The store's settings read now (``StoreNotFound`` when it is gone), and the parts
        built on the old ones dropped."""
        self._config = self.stores.get(self._config.name)
        self._check = CONFIRMED
        for part in _parts():
            self.__dict__.pop(part, None)
        self.effects.rebind(self._config)

    @property
    def instance_id(self) -> str:
        """The instance the store is on."""
        return self.instance.instance_id

    @property
    def actors(self) -> tuple[str, ...] | None:
        """The actors the calling key is limited to, or None for a key without that limit."""
        return self.scope.actors if self.scope is not None else None

    def flush(self) -> None:
        """``Effects.flush`` of what this handle's use cases gathered."""
        self.effects.flush(self.stores.client, self.key_id)

    # --- parts -------------------------------------------------------------------------------

    @cached_property
    def db(self) -> StoreDatabase:
        """The store's database, as every part reads it."""
        from agent_memory.database.client import redis_client
        from agent_memory.stores.database import StoreDatabase

        binary = redis_client(self.instance.url, binary=True, guard=self.instance.guard)
        return StoreDatabase(
            self.stores.client, binary, self.config, self.container.clock, self._check
        )

    @cached_property
    def sessions(self) -> Sessions:
        """The store's working memory."""
        from agent_memory.sessions.service import Sessions

        return Sessions(self.db)

    @cached_property
    def memories(self) -> Memories:
        """The store's long-term memories, embedding through the request's provider client,
        reranking searches and recalls with the store's reranker."""
        return self._memories(self.container.provider_client, self._reranker())

    @cached_property
    def profiles(self) -> Profiles:
        """The profiles of the store's actors."""
        from agent_memory.memories.profiles import Profiles

        return Profiles(self.db)

    @cached_property
    def session_transfer(self) -> SessionTransfer:
        """The export and import of the store's sessions."""
        from agent_memory.sessions.transfer import SessionTransfer

        return SessionTransfer(self.db)

    @cached_property
    def memory_transfer(self) -> MemoryTransfer:
        """The export and import of the store's memories."""
        from agent_memory.memories.transfer import MemoryTransfer

        return MemoryTransfer(self.db)

    @cached_property
    def idempotency(self) -> IdempotencyRecords:
        """The store's records of idempotent writes (``Idempotency-Key``)."""
        from agent_memory.stores.idempotency import IdempotencyRecords

        return IdempotencyRecords(self.stores.client, self.config.keys())

    @cached_property
    def keyed(self) -> KeyedMemories:
        """The store's keyed memories, embedding through the request's provider client."""
        from agent_memory.keyed.service import KeyedMemories

        return KeyedMemories(self.db, self._embedder(self.container.provider_client))

    def language_model(self, client: ProviderClient | None = None) -> LanguageModel | None:
        """The store's language model, or None without one, calling through ``client`` (the
        background provider client by default), checking the organization's daily model-token
        quota before each call. Its key is unsealed at its first call, so a key that cannot be
        read fails the run that needs it (and is recorded there) rather than the function."""
        from agent_memory.providers.factory import lazy_language_model

        container, org_id = self.container, self.instance.org_id
        outbound = self._outbound(client or container.background_provider_client)
        return lazy_language_model(
            self.config.provider_setting("llm"),
            outbound,
            lambda: container.limits.check_model_tokens(org_id),
        )

    def session_work(self, target: ExtractionTarget) -> SessionWork:
        """The background run for ``target`` (a session of this store), embedding through the
        background provider client."""
        from agent_memory.background.work import SessionWork

        memories = self._memories(self.container.background_provider_client)
        return SessionWork(
            self.db, memories, self.language_model(), self.container.scheduler, target
        )

    def consolidation(self, background: bool = False) -> ConsolidationRuns:
        """The consolidation runs of the store's actors: embedding and asking the language model
        through the background provider client for a run (``background``), else through the
        request's."""
        from agent_memory.consolidation.runs import ConsolidationRuns

        container = self.container
        client = container.background_provider_client if background else container.provider_client
        return ConsolidationRuns(
            self._memories(client),
            self.language_model(client),
            container.scheduler,
            self.instance_id,
        )

    def target(self, session_id: str) -> ExtractionTarget:
        """What the background function is invoked with for ``session_id`` of this store."""
        from agent_memory.background.scheduler import ExtractionTarget

        return ExtractionTarget(self.instance_id, self.config.name, session_id)

    # --- the providers -----------------------------------------------------------------------

    def _outbound(self, client: ProviderClient) -> Outbound:
        """Calls through ``client``, a stored key unsealed for this store's place
        (``stores.registry.key_place``) when a provider is first built."""
        from agent_memory.providers.secrets import unseal
        from agent_memory.providers.setting import Outbound
        from agent_memory.stores.registry import key_place

        cipher = self.container.cipher
        place = key_place(self.instance.org_id, self.instance_id, self.config)
        return Outbound(
            client,
            self.container.allow_private_endpoints,
            lambda sealed, field: unseal(cipher, sealed, place, field),
        )

    def _embedder(self, client: ProviderClient) -> Embedder:
        """The store's embedder calling through ``client``, built when something is first
        embedded; its tokens join the handle's usage."""
        from agent_memory.providers.factory import lazy_embedder

        lazy = lazy_embedder(
            self.config.provider_setting("embed"), self.config.dimensions, self._outbound(client)
        )
        self.effects.embedders.append(lazy)
        return lazy

    def _reranker(self) -> Reranker | None:
        """The store's reranker (``rerank_provider``) calling through the rerank client, built
        at its first call; None without one. ``llm`` scores with the store's language model
        (``providers.llm_reranker``), its tokens counted in the handle's usage and checked
        against the daily quota before each call."""
        from agent_memory.providers.factory import lazy_reranker

        rerank_client = self.container.rerank_provider_client

        def llm_scorer() -> Reranker:
            from agent_memory.providers.llm_reranker import LlmReranker

            model = self.language_model(rerank_client)
            assert model is not None  # the settings refuse 'llm' without a language model
            scorer = LlmReranker(model)
            self.effects.scorers.append(scorer)
            return scorer

        lazy = lazy_reranker(
            self.config.provider_setting("rerank"), self._outbound(rerank_client), llm_scorer
        )
        if lazy is not None:
            self.effects.rerankers.append(lazy)
        return lazy

    def _memories(self, client: ProviderClient, reranker: Reranker | None = None) -> Memories:
        """The store's ``Memories``, embedding through ``client``, reranked by ``reranker``."""
        from agent_memory.memories.service import Memories

        container = self.container
        return Memories(
            self.db,
            self._embedder(client),
            container.index_cache,
            self.instance_id,
            reranker=reranker,
        )


def _parts() -> tuple[str, ...]:
    """The handle's parts built from its settings (its ``cached_property`` names): built again
    after the settings are read again (``StoreHandle._reopen``)."""
    return tuple(
        name for name, value in vars(StoreHandle).items() if isinstance(value, cached_property)
    )
