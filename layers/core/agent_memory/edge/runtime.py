"""Per-container wiring: settings read from the environment, and cached factories.

This is the only module of the layer that reads the environment (``FunctionSettings.from_environ``),
and it does so when an invocation starts, not at import. The domain modules below it receive
plain values and never read ``os.environ``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from functools import cached_property, lru_cache

from agent_memory.background.scheduler import ExtractionTarget, Scheduler, make_scheduler
from agent_memory.background.work import SessionWork
from agent_memory.clock import Clock, SystemClock
from agent_memory.control.api_keys import Principal
from agent_memory.control.models import Instance
from agent_memory.control.plane import ControlPlane
from agent_memory.database.client import redis_client
from agent_memory.edge.settings import FunctionSettings
from agent_memory.errors import InstanceNotFound, StoreNotFound
from agent_memory.memories.transfer import MemoryTransfer
from agent_memory.memories.writes import Memories
from agent_memory.providers.client import ProviderClient
from agent_memory.providers.embeddings import Embedder, make_embedder
from agent_memory.providers.language_models import LanguageModel, make_language_model
from agent_memory.providers.lazy import LazyEmbedder, LazyLanguageModel
from agent_memory.providers.secrets import (
    Cipher,
    FernetCipher,
    KeyPlace,
    KmsEnvelopeCipher,
    MultiFormatCipher,
    kms_client,
    load_key_file,
    unseal,
)
from agent_memory.search.cache import IndexCache
from agent_memory.sessions.service import Sessions
from agent_memory.sessions.transfer import SessionTransfer
from agent_memory.stores.models import StoreConfig
from agent_memory.stores.registry import Stores, key_place


class Runtime:
    """The services one container uses, built lazily from one ``FunctionSettings``."""

    def __init__(self, settings: FunctionSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()

    @cached_property
    def control(self) -> ControlPlane:
        """The control plane (organizations, API keys, instances) on ``control_url``."""
        return ControlPlane(
            redis_client(self.settings.control_url),
            self.clock,
            instance_cache_seconds=self.settings.instance_cache_seconds,
        )

    @cached_property
    def cipher(self) -> Cipher:
        """Encrypts with KMS when ``kms_key_id`` is set, else with the Fernet key; reads both
        formats (``MultiFormatCipher``). Building it calls nothing: the KMS client is made at the
        first encrypt or decrypt that needs it. ``RuntimeError`` when no key is configured."""
        settings = self.settings
        fernet = None
        if settings.secret_key is not None:
            fernet = FernetCipher(settings.secret_key.get_secret_value().encode("ascii"))
        elif settings.secret_key_file is not None:
            fernet = FernetCipher(load_key_file(settings.secret_key_file))
        kms = KmsEnvelopeCipher(settings.kms_key_id, kms_client) if settings.kms_key_id else None
        if kms is None and fernet is None:
            raise RuntimeError(
                "Set KIVIDB_KMS_KEY_ID (AWS), or KIVIDB_SECRET_KEY_FILE or KIVIDB_SECRET_KEY, "
                "to store API keys."
            )
        return MultiFormatCipher(kms=kms, fernet=fernet)

    def _stores(self, instance: Instance) -> Stores:
        return Stores(
            redis_client(instance.url),
            instance.instance_id,
            self.cipher,
            self.clock,
            allow_private_endpoints=self.settings.allow_private_endpoints,
            org_id=instance.org_id,
        )

    def stores(self, principal: Principal, instance_id: str) -> Stores:
        """The stores of ``instance_id``; ``InstanceNotFound`` unless it is the caller's."""
        return self._stores(self.control.instance(principal.org_id, instance_id))

    @cached_property
    def index_cache(self) -> IndexCache:
        """The container's search index cache, bounded by ``index_cache_mb`` (MB)."""
        return IndexCache(self.settings.index_cache_mb * 1024 * 1024)

    @cached_property
    def provider_client(self) -> ProviderClient:
        """The provider client of calls an API request waits for (embedding a text or a
        query). A call ends within its 6 s deadline (name lookup, connect, send, every read,
        one retry and its wait, a ``Retry-After`` of up to 1.5 s honoured), which leaves 4 s of
        the function's 10 s timeout (template.yaml ``Globals``; API Gateway's own limit for an
        HTTP API integration is 30 s) to the database and the key service."""
        return ProviderClient(
            deadline=6.0,
            connect_timeout=1.5,
            read_timeout=2.5,
            max_retries=1,
            max_retry_after=1.5,
        )

    def memories(
        self, principal: Principal, instance_id: str, store: str
    ) -> tuple[StoreConfig, Memories]:
        """A store's config and its long-term memories; ``InstanceNotFound`` /
        ``StoreNotFound``. The embedding key is decrypted only when something is embedded."""
        config, _, memories = self.store(principal, instance_id, store)
        return config, memories

    def store(
        self, principal: Principal, instance_id: str, store: str
    ) -> tuple[StoreConfig, Sessions, Memories]:
        """A store's config, sessions and memories (one instance and one store lookup)."""
        instance = self.control.instance(principal.org_id, instance_id)
        stores = self._stores(instance)
        config = stores.get(store)
        memories = self.memories_of(instance, config)
        return config, stores.sessions(config), memories

    def memories_of(
        self,
        instance: Instance,
        config: StoreConfig,
        client: ProviderClient | None = None,
    ) -> Memories:
        """The ``Memories`` of ``config`` on ``instance``'s database; its embeddings go through
        ``client`` (default: the in-request ``provider_client``), with the embedding key as
        stored for that instance's organization (``stores.key_place``)."""
        url, instance_id = instance.url, instance.instance_id

        def embedder() -> Embedder:
            api_key = None
            if config.embed_api_key_ciphertext is not None:
                place = key_place(instance.org_id, instance_id, config)
                api_key = unseal(
                    self.cipher, config.embed_api_key_ciphertext, place, "embed_api_key"
                )
            return make_embedder(
                config.embed_provider,
                config.embed_model,
                config.dimensions,
                config.embed_base_url,
                api_key,
                allow_private=self.settings.allow_private_endpoints,
                client=client or self.provider_client,
            )

        return Memories(
            redis_client(url),
            redis_client(url, binary=True),
            config,
            self.clock,
            LazyEmbedder(config.dimensions, embedder),
            self.index_cache,
            instance_id,
        )

    def transfer(self, principal: Principal, instance_id: str, store: str) -> Transfer:
        """A store's export and import (``session_transfer``, ``memory_transfer``), with its
        config and its ``Sessions``; ``InstanceNotFound`` / ``StoreNotFound``."""
        instance = self.control.instance(principal.org_id, instance_id)
        stores = self._stores(instance)
        config = stores.get(store)
        client = redis_client(instance.url)
        return Transfer(
            config,
            stores.sessions(config),
            SessionTransfer(client, config, self.clock),
            MemoryTransfer(client, redis_client(instance.url, binary=True), config, self.clock),
        )

    def sessions(
        self, principal: Principal, instance_id: str, store: str
    ) -> tuple[StoreConfig, Sessions]:
        """A store's config and its sessions; ``InstanceNotFound`` / ``StoreNotFound``."""
        stores = self.stores(principal, instance_id)
        config = stores.get(store)
        return config, stores.sessions(config)

    # --- background work ---------------------------------------------------------------------

    @cached_property
    def scheduler(self) -> Scheduler:
        """EventBridge Scheduler in AWS; the Redis-backed local one when the local stack sets
        ``KIVIDB_SCHEDULER=local`` (``agent_memory.scheduler.make_scheduler``)."""
        return make_scheduler(os.environ, redis_client, self.clock)

    @cached_property
    def background_provider_client(self) -> ProviderClient:
        """The provider client of background runs, which no client waits for: a longer deadline
        (a model writing a summary answers only when it is done) and more retries. Each call
        ends within 45 s, all attempts and waits included; a run starts no new step after
        ``background_steps.RUN_BUDGET_SECONDS`` (110 s), and a step makes at most four calls (one
        embedding batch to find the related memories, a model answer asked for twice, then one
        embedding batch), so a run ends by 110 + 4 x 45 = 290 s plus its database writes, inside
        the function's 300 s."""
        return ProviderClient(
            deadline=45.0,
            connect_timeout=3.0,
            read_timeout=45.0,
            max_retries=3,
            max_retry_after=20.0,
        )

    def language_model(self, instance: Instance, config: StoreConfig) -> LanguageModel | None:
        """The language model of store ``config`` of ``instance``, or None without one. Its key
        (as stored for that instance's organization, ``stores.key_place``) is decrypted when it
        is first called, so a key that cannot be read fails the run that needs it (and is
        recorded there) rather than the function."""
        if config.llm_provider == "none":
            return None
        place = key_place(instance.org_id, instance.instance_id, config)
        return LazyLanguageModel(lambda: self._language_model(config, place))

    def _language_model(self, config: StoreConfig, place: KeyPlace) -> LanguageModel:
        api_key = None
        if config.llm_api_key_ciphertext is not None:
            api_key = unseal(self.cipher, config.llm_api_key_ciphertext, place, "llm_api_key")
        model = make_language_model(
            config.llm_provider,
            config.llm_model,
            config.llm_base_url,
            api_key,
            allow_private=self.settings.allow_private_endpoints,
            client=self.background_provider_client,
        )
        assert model is not None  # llm_provider is not "none" here
        return model

    def session_work(self, target: ExtractionTarget) -> SessionWork | None:
        """The background run for ``target``, or None when its instance or store is gone.
        The background function is invoked only by the scheduler and our own functions, so
        the instance is looked up by id alone."""
        try:
            instance = self.control.instance_by_id(target.instance_id)
            stores = self._stores(instance)
            config = stores.get(target.store)
        except (InstanceNotFound, StoreNotFound):
            return None
        # The background run embeds in batches and may take its time: its own provider client.
        memories = self.memories_of(instance, config, self.background_provider_client)
        return SessionWork(
            redis_client(instance.url),
            config,
            memories,
            self.language_model(instance, config),
            self.scheduler,
            self.clock,
            target,
        )


@dataclass(frozen=True)
class Transfer:
    """What the export and import routes use: the store's ``config``, its ``sessions`` (to
    release a reservation), and the ``SessionTransfer`` and ``MemoryTransfer`` of the store."""

    config: StoreConfig
    sessions: Sessions
    session_transfer: SessionTransfer
    memory_transfer: MemoryTransfer


@lru_cache(maxsize=4)
def runtime_for(settings: FunctionSettings) -> Runtime:
    """One ``Runtime`` per distinct settings, kept for the container's life."""
    return Runtime(settings)


def current_runtime() -> Runtime:
    """Read the settings now (start of an invocation) and return the matching runtime."""
    return runtime_for(FunctionSettings.from_environ(os.environ))
