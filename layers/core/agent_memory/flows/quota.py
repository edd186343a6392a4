"""The daily quotas a use case reserves before it adds (``control.limits``)."""

from __future__ import annotations

from agent_memory.flows.handle import StoreHandle


def reserve(store: StoreHandle, kind: str, count: int, *, embeds: bool = False) -> None:
    """``LimitStore.reserve`` for the caller adding ``count`` ``kind`` (``messages`` or
    ``memories``) to ``store``: counted in the store's ``<kind>_added`` usage, or
    ``QuotaExceeded`` (nothing counted) past a daily quota of the organization or the key; with
    ``embeds``, also when the store embeds what is added and no model token is left today.
    Counted before the write: a write that then fails still counts. A background run (no key)
    reserves nothing."""
    key_id = store.key_id
    if key_id is None:
        return
    store.container.limits.reserve(
        store.instance.org_id,
        key_id,
        kind,
        count,
        (store.instance_id, store.config.name),
        embeds=embeds and store.config.embed_provider != "none",
    )
