"""The use cases of actors' profiles: reading one, changing its fields (a caller's ``PATCH``),
reading a field's history. The actor is one the calling key may name (``flows.reach.actor``);
a change is told to the store's webhooks (``profile.updated``) and counted
(``profile_updates``)."""

from __future__ import annotations

from typing import Any

from agent_memory.errors import ValidationFailed
from agent_memory.flows import reach
from agent_memory.flows.handle import StoreHandle
from agent_memory.memories.profile_models import (
    ProfileHistory,
    ProfilePatch,
    ProfileSource,
    ProfileValue,
    ProfileView,
    checked_value,
)
from agent_memory.stores.models import StoreConfig


def profile_view(store: StoreHandle, actor_id: str) -> ProfileView:
    """The actor's profile: each of the store's ``profile_fields`` that holds a value."""
    reach.actor(store, actor_id)
    return store.profiles.view(actor_id)


def change_profile(store: StoreHandle, actor_id: str, patch: ProfilePatch) -> ProfileView:
    """Set or clear (null) the fields of ``patch`` in one atomic step, each change kept as a
    version by ``caller``; the profile after. ``ValidationFailed`` naming ``fields.<name>`` for
    a field the store does not declare or a value not of the field's type, with nothing
    changed. Fields set to the value they hold change nothing and are not told."""
    reach.actor(store, actor_id)
    values = checked_fields(store.config, patch.fields)
    changed = store.profiles.change(actor_id, values, ProfileSource(by="caller"))
    tell_profile_change(store, actor_id, changed, "caller")
    return store.profiles.view(actor_id)


def profile_history(store: StoreHandle, actor_id: str, field: str) -> ProfileHistory:
    """The versions of one of the store's profile fields for the actor, newest first;
    ``ValidationFailed`` naming ``query.field`` for a field the store does not declare."""
    reach.actor(store, actor_id)
    declared = [f.name for f in store.config.profile_fields]
    if field not in declared:
        raise ValidationFailed(
            f"'{field}' is not one of this store's profile fields"
            + (f" ({', '.join(declared)})." if declared else " (it declares none)."),
            details=[{"field": "query.field", "problem": "not a profile field of this store"}],
        )
    return store.profiles.history(actor_id, field)


def checked_fields(config: StoreConfig, given: dict[str, Any]) -> dict[str, ProfileValue | None]:
    """``given`` with each value as its declared field holds it (``checked_value``; None
    clears); ``ValidationFailed`` naming every ``fields.<name>`` that is not declared or not of
    its type."""
    declared = {f.name: f for f in config.profile_fields}
    problems: list[dict[str, str]] = []
    values: dict[str, ProfileValue | None] = {}
    for name, value in given.items():
        field = declared.get(name)
        if field is None:
            problems.append(
                {"field": f"fields.{name}", "problem": "not a profile field of this store"}
            )
            continue
        if value is None:
            values[name] = None
            continue
        try:
            values[name] = checked_value(field, value)
        except ValueError as exc:
            problems.append({"field": f"fields.{name}", "problem": f"{field.type}: {exc}"})
    if problems:
        raise ValidationFailed("Some profile fields are not valid; see details.", details=problems)
    return values


def tell_profile_change(store: StoreHandle, actor_id: str, changed: list[str], by: str) -> None:
    """Count the fields ``changed`` (``profile_updates``) and tell them (``profile.updated``
    with the actor, the field names and who changed them), when any changed."""
    if not changed:
        return
    store.effects.count({"profile_updates": len(changed)})
    store.effects.tell("profile.updated", {"actor_id": actor_id, "fields": changed, "by": by})
