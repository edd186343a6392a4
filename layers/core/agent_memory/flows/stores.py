"""The use cases of stores: one store's settings and counts, creating or changing one,
deleting one (told to its webhooks), a new webhook signing secret, and the stores an
organization or an instance holds, as far as the calling key reaches.
"""

from __future__ import annotations

from typing import TypeVar

from agent_memory.answers import page_within
from agent_memory.flows.access import instance_stores, managed_stores, stores_of
from agent_memory.flows.container import Caller
from agent_memory.flows.handle import StoreHandle
from agent_memory.scopes import KeyScope
from agent_memory.stores.models import (
    MAX_STORE_PAGE,
    OrganizationStoreList,
    StoreCounts,
    StoreList,
    StorePut,
    StoreView,
)
from agent_memory.webhooks.models import WebhookSecret

Listing = TypeVar("Listing", bound=StoreList)


def shown_to(scope: KeyScope | None, view: StoreView) -> StoreView:
    """``view`` as a key of ``scope`` sees it: a key that cannot change stores' settings sees
    the webhook URLs without their query strings (a receiver's token may be there)."""
    if scope is None or scope.manages_stores or not view.webhooks:
        return view
    return view.model_copy(update={"webhooks": [w.redacted() for w in view.webhooks]})


def store_overview(store: StoreHandle) -> StoreView:
    """The store's settings, its counts and its last extraction (``GET`` of a store). A key
    limited to actors gets the settings alone: the counts and the last extraction are of every
    actor."""
    if store.actors is not None:
        return shown_to(store.scope, store.stores.view(store.config))
    sessions = store.sessions
    counts = StoreCounts(
        sessions=sessions.count(),
        memories=store.memories.count(),
        # A store whose language model was removed extracts nothing: nothing is waiting.
        waiting_for_extraction=sessions.waiting_for_extraction() if sessions.has_model else 0,
    )
    last_at, last_error = sessions.extraction_record()
    view = store.stores.view(store.config, counts).model_copy(
        update={"last_extraction_at": last_at, "last_extraction_error": last_error}
    )
    return shown_to(store.scope, view)


def create_or_change_store(
    caller: Caller, instance_id: str, name: str, change: StorePut
) -> tuple[StoreView, bool]:
    """Create store ``name`` (True) or change its settings (False), under ``managed_stores``'
    rules (a key limited to stores or actors, or a read-only one, cannot: 403)."""
    stores = managed_stores(caller, instance_id, name)
    config, created = stores.put(name, change)
    return stores.view(config), created


def remove_store(caller: Caller, instance_id: str, name: str) -> None:
    """Delete store ``name`` and everything it keeps (``Stores.delete``, under
    ``managed_stores``' rules), then tell its webhooks (``store.deleted``), signed with the
    secret it had: the event's body rides in its deliveries, the store's keys being gone."""
    from agent_memory.webhooks.events import event_for

    container = caller.container
    stores = managed_stores(caller, instance_id, name)
    config = stores.get(name)
    stores.delete(name)
    now = container.clock.now()
    data = {"deleted_at": now.isoformat()}
    made = event_for(config, caller.principal.org_id, instance_id, "store.deleted", data, now)
    if made is not None:
        container.outbox.enqueue(made.deliveries)


def new_webhook_secret(caller: Caller, instance_id: str, name: str) -> WebhookSecret:
    """A new webhook signing secret for store ``name`` (``Stores.rotate_webhook_secret``),
    under ``managed_stores``' rules: shown here only."""
    stores = managed_stores(caller, instance_id, name)
    secret, config = stores.rotate_webhook_secret(name)
    return WebhookSecret(secret=secret, created_at=config.updated_at)


def organization_stores(
    caller: Caller, cursor: str | None = None, limit: int = MAX_STORE_PAGE
) -> OrganizationStoreList:
    """A page of the stores of the caller's organization the key reaches, on every instance
    that answers in time (``stores.listing.list_organization_stores``), from after ``cursor``
    (``<instance id>/<store>``, the ``next_cursor`` of the page before; the instances before
    its instance are not read): see ``store_page``."""
    from agent_memory.stores.listing import list_organization_stores

    scope, container = caller.principal.scope, caller.container
    first = cursor.partition("/")[0] if cursor is not None else ""
    instances = [
        i
        for i in container.control.instances(caller.principal.org_id)
        if (scope is None or scope.allows_instance(i.instance_id)) and i.instance_id >= first
    ]
    opened = list_organization_stores(instances, lambda i: stores_of(container, i))
    return store_page(_reached(scope, opened), cursor, limit, container.answer_budget_bytes)


def instance_store_list(
    caller: Caller, instance_id: str, cursor: str | None = None, limit: int = MAX_STORE_PAGE
) -> StoreList:
    """A page of the stores of ``instance_id`` the caller's key reaches (``store_page``)."""
    listing = _reached(caller.principal.scope, instance_stores(caller, instance_id).views())
    return store_page(listing, cursor, limit, caller.container.answer_budget_bytes)


def store_page(listing: Listing, cursor: str | None, limit: int, budget: int) -> Listing:
    """``listing`` cut to the stores after ``cursor`` (``<instance id>/<store>``) by instance
    then name: at most ``limit``, fewer when more would pass ``budget`` bytes as Lambda carries
    the answer (``answers.page_within``), with the ``next_cursor`` of the rest."""
    ordered = sorted(listing.stores, key=lambda s: (s.instance_id, s.name))
    if cursor is not None:
        instance_id, _, name = cursor.partition("/")
        ordered = [s for s in ordered if (s.instance_id, s.name) > (instance_id, name)]
    page = ordered[:limit]

    def build(count: int) -> Listing:
        last = page[count - 1] if count else None
        more = count < len(ordered) and last is not None
        next_cursor = f"{last.instance_id}/{last.name}" if more and last else None
        return listing.model_copy(update={"stores": page[:count], "next_cursor": next_cursor})

    return page_within(build, len(page), budget)


def _reached(scope: KeyScope | None, listing: Listing) -> Listing:
    """``listing`` with only the stores ``scope`` reaches (all of them for the admin key), as
    it may see them (``shown_to``)."""
    if scope is None:
        return listing
    kept = [shown_to(scope, s) for s in listing.stores if scope.allows_store(s.instance_id, s.name)]
    return listing.model_copy(update={"stores": kept})
