"""The use cases of usage: a store's day by day, the organization's over every store, and what
the stores hold now."""

from __future__ import annotations

from datetime import date

from agent_memory.control.usage import day_range
from agent_memory.flows import reach
from agent_memory.flows.access import stores_of
from agent_memory.flows.container import Caller
from agent_memory.flows.handle import StoreHandle
from agent_memory.scopes import require_admin
from agent_memory.stores.holding import Holding, UsageReport, instance_holding, store_holding
from agent_memory.stores.listing import read_instances
from agent_memory.stores.registry import Stores


def holding(store: StoreHandle) -> Holding:
    """What the store holds now (``stores.holding.store_holding``)."""
    container = store.container
    return store_holding(store.stores.client, store.config, container.clock, store.memories.count)


def store_usage(store: StoreHandle, first: date | None, last: date | None) -> UsageReport:
    """The store's usage from ``first`` to ``last`` (``control.usage.day_range``) and what it
    holds now; ``Forbidden`` for a key limited to actors (usage is every actor's)."""
    reach.whole_store(store, "read the store's usage")
    container = store.container
    days = day_range(first, last, container.clock.now().date())
    used = container.usage.days(store.instance.org_id, days, (store.instance_id, store.config.name))
    return UsageReport(days=used, now=holding(store))


WAIT_SECONDS = 7.0
"""How long the organization's usage waits for its instances, all together: the function has
10 s (template.yaml), the control database's reads and the answer take the rest."""


def organization_usage(caller: Caller, first: date | None, last: date | None) -> UsageReport:
    """The organization's usage from ``first`` to ``last`` over every store (deleted ones
    included), and what the stores of every instance that answers within ``WAIT_SECONDS``
    hold now, the instances read concurrently, each in one pass
    (``stores.holding.instance_holding``); the admin key's only (``Forbidden`` otherwise)."""
    require_admin(caller.principal.scope, "reads the whole organization's usage")
    container = caller.container
    days = day_range(first, last, container.clock.now().date())
    used = container.usage.days(caller.principal.org_id, days)
    instances = container.control.instances(caller.principal.org_id)

    def held(stores: Stores) -> Holding:
        return instance_holding(stores.client, stores.all(), container.clock)

    read, unreachable = read_instances(
        instances, lambda i: stores_of(container, i), held, wait_seconds=WAIT_SECONDS
    )
    total = Holding(
        sessions=sum(h.sessions for _, h in read),
        messages=sum(h.messages for _, h in read),
        memories=sum(h.memories for _, h in read),
        bytes=sum(h.bytes for _, h in read),
    )
    return UsageReport(days=used, now=total, unreachable=unreachable)
