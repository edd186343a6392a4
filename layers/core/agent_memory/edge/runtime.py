"""Per-container wiring: the services one container uses, built on first use.

``current_runtime`` reads the settings (``settings.FunctionSettings``) when an invocation
starts and returns the container's ``Runtime`` for them. Every service is built lazily, and its
module imported only then, so that a function loads only what it uses: the authorizer loads the
API keys of the control plane and a database client, never the search index, numpy or the Lua
of memories (``tests/unit/test_wiring.py`` counts the modules each function loads).

``Runtime`` is the ``flows.container.Container`` of the use cases (``flows``): they ask it for
services and never import it. It also keeps the stores a request opened (``store``), so a
request looks a store up once, and writes what their use cases gathered when the request ends
(``end_request``).

The domain modules receive plain values and never read ``os.environ``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property, lru_cache
from typing import TYPE_CHECKING

from agent_memory.clock import Clock, SystemClock
from agent_memory.edge import snapstart
from agent_memory.edge.settings import FunctionSettings

if TYPE_CHECKING:
    from agent_memory.background.scheduler import Scheduler
    from agent_memory.control.api_keys import ApiKeys
    from agent_memory.control.limits import LimitStore
    from agent_memory.control.plane import ControlPlane
    from agent_memory.control.usage import UsageStore
    from agent_memory.flows.handle import StoreHandle
    from agent_memory.models import Principal
    from agent_memory.providers.client import ProviderClient
    from agent_memory.providers.secrets import Cipher
    from agent_memory.search.cache import IndexCache
    from agent_memory.webhooks.delivery import Sender
    from agent_memory.webhooks.models import Delivery
    from agent_memory.webhooks.outbox import Outbox


class Runtime:
    """The services one container uses, built lazily from one ``FunctionSettings``."""

    def __init__(self, settings: FunctionSettings, clock: Clock | None = None) -> None:
        self.settings = settings
        self.clock = clock or SystemClock()
        self._request_stores: dict[tuple[str, str, str], StoreHandle] = {}

    def begin_request(self) -> None:
        """Forget the store handles of the previous request: a request looks a store up once
        (``store``), however many steps ask for it (a middleware, then the route)."""
        self._request_stores.clear()

    def end_request(self) -> None:
        """Count what the request's stores used and queue the webhook deliveries they made
        (``flows.effects.Effects.flush_after_answer``: a round trip each, only for a request
        that has any), then forget its store handles."""
        handles = list(self._request_stores.values())
        self._request_stores.clear()
        for handle in handles:
            handle.effects.flush_after_answer(handle.stores.client, handle.key_id)

    @property
    def answer_budget_bytes(self) -> int:
        """``FunctionSettings.answer_budget_bytes``."""
        return self.settings.answer_budget_bytes

    @property
    def allow_private_endpoints(self) -> bool:
        """``FunctionSettings.allow_private_endpoints``."""
        return self.settings.allow_private_endpoints

    # --- the control plane -------------------------------------------------------------------

    @cached_property
    def control(self) -> ControlPlane:
        """The control plane (organizations, API keys, instances) on ``control_url``."""
        from agent_memory.control.plane import ControlPlane
        from agent_memory.database.client import redis_client

        return ControlPlane(
            redis_client(self.settings.control_url),
            self.clock,
            instance_cache_seconds=self.settings.instance_cache_seconds,
        )

    @cached_property
    def api_keys(self) -> ApiKeys:
        """The API keys of the control plane, alone: what the authorizer uses (the whole
        ``control`` when it is built already)."""
        if "control" in self.__dict__:
            return self.control.api_keys
        from agent_memory.control.api_keys import ApiKeys
        from agent_memory.control.database import ControlDatabase
        from agent_memory.database.client import redis_client

        return ApiKeys(ControlDatabase(redis_client(self.settings.control_url)), self.clock)

    @cached_property
    def limits(self) -> LimitStore:
        """The organizations' limits and counters, in the control database
        (``control.limits``): the authorizer takes the request bucket, the routes that add
        reserve their daily quota."""
        from agent_memory.control.limits import LimitStore
        from agent_memory.database.client import redis_client

        return LimitStore(redis_client(self.settings.control_url), self.clock)

    @cached_property
    def usage(self) -> UsageStore:
        """The organizations' usage counters, in the control database (``control.usage``)."""
        from agent_memory.control.usage import UsageStore
        from agent_memory.database.client import redis_client

        return UsageStore(redis_client(self.settings.control_url), self.clock)

    @cached_property
    def outbox(self) -> Outbox:
        """The webhook deliveries waiting in the control database (``webhooks.outbox``)."""
        from agent_memory.database.client import redis_client
        from agent_memory.webhooks.outbox import Outbox

        return Outbox(redis_client(self.settings.control_url), self.clock)

    # --- container-wide services ---------------------------------------------------------------

    @cached_property
    def cipher(self) -> Cipher:
        """Encrypts with KMS when ``kms_key_id`` is set, else with the Fernet key; reads both
        formats (``MultiFormatCipher``). Building it calls nothing: the KMS client is made at the
        first encrypt or decrypt that needs it. ``RuntimeError`` when no key is configured."""
        from agent_memory.providers.secrets import (
            FernetCipher,
            KmsEnvelopeCipher,
            MultiFormatCipher,
            kms_client,
            load_key_file,
        )

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

    @cached_property
    def index_cache(self) -> IndexCache:
        """The container's search index cache, bounded by ``index_cache_mb`` (MB); building it
        sets the search threads too (``search_threads``)."""
        from agent_memory.search.cache import IndexCache
        from agent_memory.search.quantize import configure_search_threads

        configure_search_threads(self.settings.search_threads)
        return IndexCache(self.settings.index_cache_mb * 1024 * 1024)

    @cached_property
    def provider_client(self) -> ProviderClient:
        """The provider client of calls an API request waits for (embedding a text or a
        query). A call ends within its 6 s deadline (name lookup, connect, send, every read,
        one retry and its wait, a ``Retry-After`` of up to 1.5 s honoured), which leaves 4 s of
        the function's 10 s timeout (template.yaml ``Globals``; API Gateway's own limit for an
        HTTP API integration is 30 s) to the database and the key service."""
        from agent_memory.providers.client import ProviderClient
        from agent_memory.providers.network import CallPolicy

        return ProviderClient(
            CallPolicy(
                deadline=6.0,
                connect_timeout=1.5,
                read_timeout=2.5,
                max_retries=1,
                max_retry_after=1.5,
            )
        )

    @cached_property
    def rerank_provider_client(self) -> ProviderClient:
        """The provider client of the rerank stage of a search or recall
        (``memories.reranking``), which keeps the fused order when the call fails: a call ends
        within 2.5 s (one retry, a ``Retry-After`` of up to 1 s honoured), so that with the
        query's embedding (``provider_client``, 6 s) a search still answers inside the
        function's 10 s."""
        from agent_memory.providers.client import ProviderClient
        from agent_memory.providers.network import CallPolicy

        return ProviderClient(
            CallPolicy(
                deadline=2.5,
                connect_timeout=1.0,
                read_timeout=2.5,
                max_retries=1,
                max_retry_after=1.0,
            )
        )

    @cached_property
    def background_provider_client(self) -> ProviderClient:
        """The provider client of background runs, which no client waits for: a longer deadline
        (a model writing a summary answers only when it is done) and more retries. Each call
        ends within 45 s, all attempts and waits included; a run starts no new step once its
        budget is spent (``background.runs.RunBudget``: the function's remaining time less
        ``STEP_RESERVE_SECONDS``, four calls of 45 s and the database writes), so a run ends
        inside the function's 300 s."""
        from agent_memory.providers.client import ProviderClient
        from agent_memory.providers.network import CallPolicy

        return ProviderClient(
            CallPolicy(
                deadline=45.0,
                connect_timeout=3.0,
                read_timeout=45.0,
                max_retries=3,
                max_retry_after=20.0,
            )
        )

    @cached_property
    def webhook_sender(self) -> Sender:
        """Sends the webhook deliveries that are due (``webhooks.delivery``), to public
        addresses only unless the stack allows private endpoints."""
        from agent_memory.webhooks.delivery import Sender

        return Sender(
            self.outbox,
            self.cipher,
            self.clock,
            self._webhook_body,
            allow_private=self.settings.allow_private_endpoints,
        )

    def _webhook_body(self, delivery: Delivery) -> str:
        """The body of ``delivery``'s event in its store's keyspace (``webhooks.bodies``).
        ``EventGone`` when its instance or store is gone, or the store no longer sends that
        event to that endpoint (a delivery goes only where the store still asks for it)."""
        from agent_memory.database.client import redis_client
        from agent_memory.errors import InstanceNotFound, StoreNotFound
        from agent_memory.flows.access import stores_of
        from agent_memory.webhooks.bodies import EventGone, read_body

        gone = "not sent: the store (and the event's data) was deleted"
        try:
            instance = self.control.instance_by_id(delivery.instance_id)
            config = stores_of(self, instance).get(delivery.store)
        except (InstanceNotFound, StoreNotFound):
            raise EventGone(gone) from None
        if config.incarnation != delivery.incarnation:
            raise EventGone(gone)
        if not any(w.url == delivery.url and delivery.event in w.events for w in config.webhooks):
            raise EventGone("not sent: the store no longer sends this event to this endpoint")
        body = read_body(redis_client(instance.url, guard=instance.guard), delivery)
        if body is None:
            raise EventGone("not sent: the event's data expired")
        return body

    @cached_property
    def scheduler(self) -> Scheduler:
        """EventBridge Scheduler in AWS; the Redis-backed local one when the local stack sets
        ``KIVIDB_SCHEDULER=local`` (``background.scheduler.make_scheduler``)."""
        from agent_memory.background.scheduler import make_scheduler
        from agent_memory.database.client import redis_client

        return make_scheduler(self.settings.scheduler_settings(), redis_client, self.clock)

    # --- the stores a request opened --------------------------------------------------------

    def store(
        self, principal: Principal, instance_id: str, store: str, *, last_read: bool = False
    ) -> StoreHandle:
        """The caller's store ``store`` of ``instance_id`` (``flows.access.open_store``: one
        instance and one store lookup, with a stranger's 404 outside the key's scope; with
        ``last_read``, from the settings this container read last), once per request
        (``begin_request``) however many steps ask for it (a middleware, then the use
        case)."""
        from agent_memory.flows.access import open_store
        from agent_memory.flows.container import Caller

        key = (principal.org_id, instance_id, store)
        handle = self._request_stores.get(key)
        if handle is None:
            handle = open_store(Caller(principal, self), instance_id, store, last_read=last_read)
            self._request_stores[key] = handle
        return handle


@lru_cache(maxsize=4)
def runtime_for(settings: FunctionSettings) -> Runtime:
    """One ``Runtime`` per distinct settings, kept for the container's life."""
    return Runtime(settings)


_VARIABLES = tuple(
    (name, ("KIVIDB_" + name.upper()).encode()) for name in FunctionSettings.model_fields
)
"""Each setting's field name and its variable, as ``os.environb`` names it."""
_NAMES = [variable for _, variable in _VARIABLES]
_ENVIRON: Mapping[bytes, bytes] = getattr(os.environ, "_data", os.environb)
"""The variables as bytes: the dict behind ``os.environ`` and ``os.environb`` on POSIX (every
change through either lands in it), read directly: 18 lookups in it take about 2 us, through
``os.environ`` or ``os.environb`` about 30 (each name encoded, each value decoded)."""


def current_runtime() -> Runtime:
    """Read the settings now (start of an invocation) and return the matching runtime. The
    variables are read on every call (a test or the local stack may change them), as bytes
    (``_ENVIRON``); validating them is done once per distinct set (about 0.1 ms a call
    before)."""
    return _runtime_of(tuple(map(_ENVIRON.get, _NAMES)))


@lru_cache(maxsize=4)
def _runtime_of(values: tuple[bytes | None, ...]) -> Runtime:
    found = {
        name: os.fsdecode(value)
        for (name, _), value in zip(_VARIABLES, values, strict=True)
        if value is not None
    }
    return runtime_for(FunctionSettings.model_validate(found))


def forget_runtimes() -> None:
    """Forget every ``Runtime`` of this container, and with them their clients, settings and
    caches: the next invocation reads its settings and builds its services anew
    (``edge.snapstart``, around a SnapStart snapshot)."""
    _runtime_of.cache_clear()
    runtime_for.cache_clear()


snapstart.register()  # every function that reads a setting gets the SnapStart hooks
