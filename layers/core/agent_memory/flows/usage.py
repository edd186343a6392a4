"""The use cases of usage: a store's day by day, the organization's over every store, and what
the stores hold now."""

from __future__ import annotations

from datetime import date

from agent_memory.control.usage import day_range
from agent_memory.flows import reach
from agent_memory.flows.access import open_store
from agent_memory.flows.container import Caller
from agent_memory.flows.handle import StoreHandle
from agent_memory.flows.stores import organization_stores
from agent_memory.scopes import require_admin
from agent_memory.stores.holding import Holding, UsageReport, store_holding


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


def organization_usage(caller: Caller, first: date | None, last: date | None) -> UsageReport:
    """The organization's usage from ``first`` to ``last`` over every store (deleted ones
    included), and what the stores of every instance that answers hold now; the admin key's
    only (``Forbidden`` otherwise)."""
    require_admin(caller.principal.scope, "reads the whole organization's usage")
    container = caller.container
    days = day_range(first, last, container.clock.now().date())
    used = container.usage.days(caller.principal.org_id, days)
    total = Holding(sessions=0, messages=0, memories=0, bytes=0)
    listing = organization_stores(caller)
    for view in listing.stores:
        held = holding(open_store(caller, view.instance_id, view.name))
        total = Holding(
            sessions=total.sessions + held.sessions,
            messages=total.messages + held.messages,
            memories=total.memories + held.memories,
            bytes=total.bytes + held.bytes,
        )
    return UsageReport(days=used, now=total, unreachable=listing.unreachable)
