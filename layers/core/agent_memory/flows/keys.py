"""The use cases of API keys: creating a scoped key, listing the organization's keys, revoking
one. The organization's admin key's only (``scopes.require_admin``)."""

from __future__ import annotations

from agent_memory.answers import page_within
from agent_memory.clock import to_ms
from agent_memory.control.key_models import (
    MAX_KEY_PAGE,
    KeyCreate,
    KeyCreated,
    KeyList,
    scope_view,
)
from agent_memory.errors import Conflict
from agent_memory.flows.container import Caller
from agent_memory.scopes import require_admin

MANAGES_KEYS = "manages API keys"
"""What only the admin key may do here, as the 403 says it."""


def new_key(caller: Caller, request: KeyCreate) -> KeyCreated:
    """A new key of ``request``'s scope with its secret (``api_key``), shown this once; only
    its hash is kept (``ControlPlane.create_api_key``)."""
    require_admin(caller.principal.scope, MANAGES_KEYS)
    return caller.container.control.create_api_key(caller.principal.org_id, request)


def key_list(caller: Caller, cursor: str | None = None, limit: int = MAX_KEY_PAGE) -> KeyList:
    """A page of the organization's keys that have not expired (``ApiKeys.live``, which purges
    the long expired), oldest first, from after ``cursor`` (the ``next_cursor`` of the page
    before; none for the first): at most ``limit``, fewer when more would pass the answer's
    byte budget (``answers.page_within``). Each with its scope (``access: "admin"`` for an
    unscoped one), never a secret."""
    require_admin(caller.principal.scope, MANAGES_KEYS)
    infos = caller.container.control.api_keys.live(caller.principal.org_id)
    if cursor is not None:
        created, _, key_id = cursor.partition(".")
        after = (int(created), key_id)
        infos = [i for i in infos if (to_ms(i.created_at), i.key_id) > after]
    page = infos[:limit]

    def build(count: int) -> KeyList:
        views = [scope_view(i.key_id, i.created_at, i.name, i.scope) for i in page[:count]]
        last = page[count - 1] if count else None
        more = count < len(infos) and last is not None
        next_cursor = f"{to_ms(last.created_at)}.{last.key_id}" if more and last else None
        return KeyList(keys=views, next_cursor=next_cursor)

    return page_within(build, len(page), caller.container.answer_budget_bytes)


def revoke_key(caller: Caller, key_id: str) -> None:
    """Revoke ``key_id``: its next request is a 401. ``KeyNotFound``; ``Conflict`` for the key
    the request is made with (revoke it with another admin key, so that the organization keeps
    one); ``Unauthorized`` when the request's own key was revoked meanwhile (nothing revoked).
    """
    require_admin(caller.principal.scope, MANAGES_KEYS)
    if key_id == caller.principal.key_id:
        raise Conflict(
            "This is the key the request is made with; revoke it with another admin key, so "
            "that the organization keeps one."
        )
    # In one step with a check that the caller's own key is still there, so two admin keys
    # revoking each other at once leave one.
    caller.container.control.api_keys.revoke(
        caller.principal.org_id, key_id, by=caller.principal.key_id
    )
