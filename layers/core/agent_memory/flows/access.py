"""Finding what a caller asks for, as far as its key reaches: an instance, the stores of an
instance, one store (``open_store``, a ``StoreHandle``), the stores a key may manage, and the
store a background run is for.

Outside its scope a key gets a stranger's answer: the same 404 as for a thing that does not
exist (``InstanceNotFound``, ``StoreNotFound``), checked here, where the ids are looked up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent_memory.errors import Forbidden, InstanceNotFound, StoreNotFound
from agent_memory.flows.handle import StoreHandle
from agent_memory.stores.freshness import CONFIRMED

if TYPE_CHECKING:
    from agent_memory.background.scheduler import Target
    from agent_memory.control.models import Instance
    from agent_memory.flows.container import Caller, Container
    from agent_memory.stores.database import StoreDatabase
    from agent_memory.stores.models import StoreConfig
    from agent_memory.stores.registry import Stores


def instance_of(caller: Caller, instance_id: str) -> Instance:
    """The caller's instance ``instance_id``; ``InstanceNotFound`` unless it is theirs and
    within the key's scope (the same answer as for an instance that does not exist)."""
    scope = caller.principal.scope
    if scope is not None and not scope.allows_instance(instance_id):
        raise InstanceNotFound(instance_id)
    return caller.container.control.instance(caller.principal.org_id, instance_id)


def stores_of(container: Container, instance: Instance) -> Stores:
    """The stores of ``instance``'s database, through a client that checks the database's
    ownership marker on every new connection (``Instance.guard``): a database that is not
    this registration's answers ``InstanceNotFound``, as a stranger's instance does."""
    from agent_memory.database.client import redis_client
    from agent_memory.stores.registry import Stores

    return Stores(
        redis_client(instance.url, guard=instance.guard),
        instance.instance_id,
        container.cipher,
        container.clock,
        allow_private_endpoints=container.allow_private_endpoints,
        org_id=instance.org_id,
        in_use=_InUse(container, instance),
    )


class _InUse:
    """``stores.registry.InUse`` of ``instance``'s database: the memories that use custom types
    (``memories.type_usage``) and the actors that hold profile fields
    (``memories.profiles``)."""

    def __init__(self, container: Container, instance: Instance) -> None:
        self._container = container
        self._instance = instance

    def _db(self, store: StoreConfig) -> StoreDatabase:
        from agent_memory.database.client import redis_client
        from agent_memory.stores.database import StoreDatabase

        instance = self._instance
        client = redis_client(instance.url, guard=instance.guard)
        binary = redis_client(instance.url, binary=True, guard=instance.guard)
        return StoreDatabase(client, binary, store, self._container.clock)

    def types(self, store: StoreConfig, names: frozenset[str]) -> dict[str, int]:
        """``memories.type_usage.types_in_use``."""
        from agent_memory.memories.type_usage import types_in_use

        db = self._db(store)
        return types_in_use(db.binary, store, names, db.clock)

    def profile_fields(self, store: StoreConfig, names: frozenset[str]) -> dict[str, int]:
        """``memories.profiles.Profiles.holding``."""
        from agent_memory.memories.profiles import Profiles

        return Profiles(self._db(store)).holding(sorted(names))


def instance_stores(caller: Caller, instance_id: str) -> Stores:
    """The stores of ``instance_id``; ``InstanceNotFound`` unless it is the caller's."""
    return stores_of(caller.container, instance_of(caller, instance_id))


def _check_store_scope(caller: Caller, instance_id: str, store: str) -> None:
    """A stranger's 404 when the caller's key does not reach ``store`` of ``instance_id``:
    ``InstanceNotFound`` for an instance it does not reach, else ``StoreNotFound``."""
    scope = caller.principal.scope
    if scope is not None and not scope.allows_store(instance_id, store):
        instance_of(caller, instance_id)
        raise StoreNotFound(store)


def open_store(
    caller: Caller, instance_id: str, store: str, *, last_read: bool = False
) -> StoreHandle:
    """The caller's store ``store`` of ``instance_id`` (an instance and a store lookup);
    ``InstanceNotFound`` / ``StoreNotFound`` when it does not exist or the key does not reach
    it. With ``last_read`` (a route whose use case reads through ``StoreHandle.read``), the
    store's settings as this container read them last, when it has, confirmed by that use
    case's first round trip instead of a read of their own (``stores.freshness``)."""
    _check_store_scope(caller, instance_id, store)
    instance = instance_of(caller, instance_id)
    stores = stores_of(caller.container, instance)
    principal = caller.principal
    remembered = stores.last_read(store) if last_read else None
    config, check = remembered or (stores.get(store), CONFIRMED)
    return StoreHandle(
        caller.container, instance, config, stores, principal.scope, principal.key_id, check
    )


def managed_stores(caller: Caller, instance_id: str, store: str) -> Stores:
    """The stores of ``instance_id`` for creating, changing or deleting ``store``: a store
    outside the key's scope is the stranger's 404; a key limited to some stores or actors
    (or a read-only one) is 403 ``forbidden``."""
    scope = caller.principal.scope
    if scope is not None:
        _check_store_scope(caller, instance_id, store)
        if not scope.manages_stores:
            raise Forbidden(
                "This API key is limited to some stores or actors (or to reading): it "
                "cannot create, change or delete stores."
            )
    return instance_stores(caller, instance_id)


def store_for_run(container: Container, target: Target) -> StoreHandle | None:
    """The store a background run is for, or None when its instance or store is gone. The
    background function is invoked only by the scheduler and our own functions, so the
    instance is looked up by id alone."""
    try:
        instance = container.control.instance_by_id(target.instance_id)
        stores = stores_of(container, instance)
        return StoreHandle(container, instance, stores.get(target.store), stores)
    except (InstanceNotFound, StoreNotFound):
        return None
