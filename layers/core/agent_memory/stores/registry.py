"""Stores: their settings, provider configuration and encrypted API keys, in one database.

A store's document lives in the hash ``kividb:mem:@stores`` of the instance it belongs to.
Deleting a store removes that entry first (so new writes answer 404), then every key under
``kividb:mem:<store>:<incarnation>:``, on every primary when the database is a cluster.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any, Protocol, cast

import redis
from pydantic import ValidationError

from agent_memory.clock import Clock, to_ms
from agent_memory.database.client import (
    TRANSACTION_ATTEMPTS,
    TRANSACTION_REDIRECTS,
    database_errors,
    is_cluster,
)
from agent_memory.database.keys import MEMORY_PARTITIONS, StoreKeys, new_incarnation
from agent_memory.database.partitions import live_count
from agent_memory.errors import Conflict, StoreNotFound, ValidationFailed
from agent_memory.models import problem_in_words
from agent_memory.providers.secrets import Cipher, KeyPlace, seal
from agent_memory.stores import freshness
from agent_memory.stores.freshness import SettingsCheck
from agent_memory.stores.models import (
    ProviderSettings,
    StoreConfig,
    StoreCounts,
    StoreList,
    StorePut,
    StoreSettings,
    StoreView,
)

_SECRET_FIELDS = {
    "llm_api_key": "llm_api_key_ciphertext",
    "embed_api_key": "embed_api_key_ciphertext",
    "rerank_api_key": "rerank_api_key_ciphertext",
    "webhook_secret": "webhook_secret_ciphertext",
}
_DEFAULTABLE = set(StoreSettings.model_fields) | {
    "llm_provider",
    "embed_provider",
    "rerank_provider",
    "rerank_candidates",
    "dimensions",
}
_SCAN_BATCH = 1000
_CLUSTER_DELETE_PASSES = 3
STORED = {"stored": True}  # validation context: read back what was validated when saved
STORED_CONFIGS = 64
"""How many parsed store documents a container keeps (``stored_config``)."""


@lru_cache(maxsize=STORED_CONFIGS)
def stored_config(raw: str) -> StoreConfig:
    """The ``StoreConfig`` of a store's registry entry ``raw`` (its JSON text), parsed once per
    container for each distinct text (about 0.1 ms a parse of a 1 KB entry; a recall or a
    keyword search takes about 1 ms in all).

    Keyed by the whole entry, never by the store's name: the entry is read on every request
    (``Stores.get``), and any change of the store changes its text, a delete and re-create
    above all, which draws a new ``incarnation`` (``database.keys.new_incarnation``). So a
    container that parsed a store's settings before it was deleted and created again never
    serves a request of the new store with the old settings or writes under the old
    incarnation's keys (``tests/integration/test_request_path.py``). The object is shared by
    the requests that read the same text: read-only (nothing assigns to a ``StoreConfig``)."""
    return StoreConfig.model_validate_json(raw, context=STORED)


class InUse(Protocol):
    """What a store's data holds of the settings a change may remove: how many live memories
    use each of some custom types (``memories.type_usage.types_in_use``), and how many actors
    hold a value of each of some profile fields (``memories.profiles.Profiles.holding``); each
    leaves out the names nothing uses."""

    def types(self, store: StoreConfig, names: frozenset[str]) -> dict[str, int]:
        """``{type: live memories using it}``."""
        ...

    def profile_fields(self, store: StoreConfig, names: frozenset[str]) -> dict[str, int]:
        """``{field: actors holding a value of it}``."""
        ...


def validation_details(exc: ValidationError) -> list[dict[str, Any]]:
    """pydantic errors as ``[{"field": "a.b", "problem": "..."}]`` (the API's ``details``)."""
    details = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "body"
        problem = problem_in_words(error)
        details.append({"field": field, "problem": problem})
    return details


def key_place(org_id: str, instance_id: str, config: StoreConfig) -> KeyPlace:
    """Where ``config``'s provider API keys belong: their encryption is bound to it
    (``providers.secrets.KeyPlace``), so they open only for this organization, instance and store
    incarnation."""
    return KeyPlace(org_id, instance_id, config.name, config.incarnation)


def current_entry(raw: str | bytes | None, store: StoreConfig) -> dict[str, Any] | None:
    """The registry entry ``raw`` (as read from ``StoreKeys.registry`` under ``store``'s name)
    as a dict, when it still is ``store``'s incarnation; None when the store was deleted, or
    deleted and created again, since ``store`` was read (a write made meanwhile must not stay)."""
    if raw is None:
        return None
    entry: dict[str, Any] = json.loads(raw)
    return entry if entry.get("incarnation", "0") == store.incarnation else None


class Stores:
    """The stores of one instance (``instance_id``) of organization ``org_id``, which the
    provider API keys they store are bound to (``key_place``). ``in_use`` says which custom
    types memories use and which profile fields actors hold, so that ``put`` can refuse to
    remove one of them; without it (tools and tests that build a store by hand), removing a
    custom type is refused while the store holds any live memory, and removing a profile field
    while any actor holds a profile. Errors: ``StoreNotFound``, ``ValidationFailed``,
    ``Conflict``, ``DatabaseUnavailable``."""

    def __init__(
        self,
        client: redis.Redis,
        instance_id: str,
        cipher: Cipher,
        clock: Clock,
        *,
        allow_private_endpoints: bool = False,
        org_id: str = "",
        in_use: InUse | None = None,
    ) -> None:
        self._allow_private = allow_private_endpoints
        self._in_use = in_use
        self.client = client
        """The instance's database (text replies)."""
        self._redis = client
        self.org_id = org_id
        self.instance_id = instance_id
        self._cipher = cipher
        self.clock = clock
        self._clock = clock

    def get(self, name: str) -> StoreConfig:
        """The store's settings as they are now (one read of its entry, every call);
        ``StoreNotFound`` when there is no store of that name. The parsed settings are kept
        per container by the entry's text (``stored_config``), and the text as the store's
        last read entry (``last_read``)."""
        with database_errors():
            raw = cast(str | None, self._redis.hget(StoreKeys.registry, name))
        if raw is None:
            freshness.forget_entry(name)
            raise StoreNotFound(name)
        freshness.remember(self.org_id, self.instance_id, name, raw)
        return stored_config(raw)

    def last_read(self, name: str) -> tuple[StoreConfig, SettingsCheck] | None:
        """The store's settings as this container last read them (``get``), with the pending
        check that they still are (``stores.freshness``), without a round trip; None when
        this container has not read them."""
        raw = freshness.remembered(self.org_id, self.instance_id, name)
        if raw is None:
            return None
        return stored_config(raw), SettingsCheck(name, raw)

    def all(self) -> list[StoreConfig]:
        """Every store of this instance, by name."""
        with database_errors():
            raw = self._redis.hgetall(StoreKeys.registry)
        return [stored_config(raw[name]) for name in sorted(raw)]

    def put(self, name: str, change: StorePut) -> tuple[StoreConfig, bool]:
        """Create ``name`` or change it; returns ``(config, created)``.

        Omitted fields keep their value (or take the default on create); a setting sent as
        ``null`` returns to its default; ``llm_api_key``/``embed_api_key`` as ``null`` removes
        the stored key. The merged whole is validated before anything is written
        (``ValidationFailed`` with ``details``). A change that would leave memories out of
        reach is ``Conflict``: other ``dimensions`` or ``embed_model`` in a store that holds
        memories, or removing a custom type memories use (``details``: one entry per type, with
        how many). A WATCH transaction makes concurrent PUTs of the
        same store apply one after the other; on a cluster, one that met a redirect (the
        registry's slot moved) is made again.
        """
        return self._write(name, change.model_dump(exclude_unset=True), create=True)

    def rotate_webhook_secret(self, name: str) -> tuple[str, StoreConfig]:
        """A new webhook signing secret for the store (``webhooks.signing.new_secret``), kept
        sealed in place of the old one; returns it (the only time it is shown) and the store.
        ``StoreNotFound`` without the store."""
        from agent_memory.webhooks.signing import new_secret

        secret = new_secret()
        config, _ = self._write(name, {"webhook_secret": secret}, create=False)
        return secret, config

    def _write(self, name: str, given: dict[str, Any], *, create: bool) -> tuple[StoreConfig, bool]:
        """``put``'s transaction: merge ``given`` into the store (``StoreNotFound`` when there
        is none and not ``create``)."""
        redirected = 0
        with database_errors(), self._redis.pipeline(transaction=True) as pipe:
            while True:
                try:
                    pipe.watch(StoreKeys.registry)  # type: ignore[no-untyped-call]
                    raw = cast(str | None, pipe.hget(StoreKeys.registry, name))
                    if raw is None and not create:
                        raise StoreNotFound(name)
                    config = self._merge(name, raw, given)
                    if raw is not None:
                        before = StoreConfig.model_validate_json(raw, context=STORED)
                        self._check_dimensions(before, config)
                        self._check_types(before, config)
                        self._check_profile_fields(before, config)
                    text = config.model_dump_json()
                    pipe.multi()
                    pipe.hset(StoreKeys.registry, name, text)
                    pipe.execute()
                    freshness.remember(self.org_id, self.instance_id, name, text)
                    return config, raw is None
                except redis.WatchError:
                    continue
                except TRANSACTION_REDIRECTS:
                    redirected += 1
                    if redirected >= TRANSACTION_ATTEMPTS:
                        raise
                    pipe.reset()

    def _check_dimensions(self, before: StoreConfig, after: StoreConfig) -> None:
        """Vectors of another length cannot be compared: ``dimensions`` (or the embedding model)
        may only change while the store holds no memories (``Conflict`` otherwise)."""
        if (before.dimensions, before.embed_model) == (after.dimensions, after.embed_model):
            return
        held = live_count(self._redis, before.keys(), to_ms(self._clock.now()))
        if held:
            raise Conflict(
                f"The store holds {held} memories embedded with {before.dimensions} dimensions"
                f" ({before.embed_model or 'client vectors'}); dimensions and embed_model can "
                "only change in an empty store. Create a new store for the new model."
            )

    def _check_types(self, before: StoreConfig, after: StoreConfig) -> None:
        """A custom type may only go while no live memory uses it, as its type or the type of
        an earlier version (``Conflict`` naming each type and how many memories use it)."""
        removed = frozenset(t.name for t in before.custom_types) - {
            t.name for t in after.custom_types
        }
        if not removed:
            return
        if self._in_use is None:
            held = live_count(self._redis, before.keys(), to_ms(self._clock.now()))
            if held:
                raise Conflict(
                    f"The store holds {held} memories, which may use the custom types "
                    f"{', '.join(sorted(removed))}; they cannot be removed here."
                )
            return
        used = self._in_use.types(before, removed)
        if not used:
            return
        total = sum(used.values())
        named = ", ".join(f"'{name}' ({count})" for name, count in sorted(used.items()))
        raise Conflict(
            f"{total} memories use custom types this change removes: {named}. A memory keeps "
            "its type, so removing the type would leave it outside every type filter and make "
            "the store's export refuse to import. Keep the type, or forget those memories "
            "first (a memory changed to another type keeps the old one in its history).",
            details=[
                {"field": "custom_types", "problem": f"{count} memories use the type '{name}'"}
                for name, count in sorted(used.items())
            ],
        )

    def _check_profile_fields(self, before: StoreConfig, after: StoreConfig) -> None:
        """A profile field may only go while no actor holds a value of it (``Conflict`` naming
        each field and how many actors hold it; the ``PATCH .../profile`` of those actors
        clears it first). Changing a field's description or type keeps the values held."""
        removed = frozenset(f.name for f in before.profile_fields) - {
            f.name for f in after.profile_fields
        }
        if not removed:
            return
        if self._in_use is None:
            with database_errors():
                holders = int(self._redis.scard(before.keys().profile_actors))
            used = dict.fromkeys(removed, holders) if holders else {}
        else:
            used = self._in_use.profile_fields(before, removed)
        if not used:
            return
        total = sum(used.values())
        named = ", ".join(f"'{name}' ({count})" for name, count in sorted(used.items()))
        raise Conflict(
            f"Actors hold values of profile fields this change removes: {named}. Clear them "
            "first (PATCH .../actors/{actor}/profile with the field set to null), or keep the "
            f"fields ({total} values in all).",
            details=[
                {"field": "profile_fields", "problem": f"{count} actors hold a value of '{name}'"}
                for name, count in sorted(used.items())
            ],
        )

    def _merge(self, name: str, raw: str | None, given: dict[str, Any]) -> StoreConfig:
        now = self._clock.now()
        if raw is None:
            current: dict[str, Any] = {
                "name": name,
                "incarnation": new_incarnation(),
                "memory_partitions": MEMORY_PARTITIONS,
                "created_at": now,
            }
        else:
            current = StoreConfig.model_validate_json(raw, context=STORED).model_dump()
        for kind in ("llm", "embed", "rerank"):
            # A key belongs to the provider and endpoint it was given for: a change of either
            # without a new key drops the stored one, so that it is never sent to another
            # server (the client sends the key again, or none for a keyless endpoint).
            moved = any(
                f"{kind}_{part}" in given
                and given[f"{kind}_{part}"] != current.get(f"{kind}_{part}")
                for part in ("provider", "base_url")
            )
            if moved and f"{kind}_api_key" not in given:
                current[f"{kind}_api_key_ciphertext"] = None
            provider = given.get(f"{kind}_provider") or current.get(f"{kind}_provider")
            if provider == "bedrock" and given.get(f"{kind}_api_key") is not None:
                # Bedrock is called with the function's role: a key would be kept and never used.
                raise ValidationFailed(
                    f"{kind}_provider 'bedrock' takes no {kind}_api_key: the function's IAM role "
                    "signs its calls.",
                    details=[{"field": f"{kind}_api_key", "problem": "not used by bedrock"}],
                )
        place = KeyPlace(self.org_id, self.instance_id, name, current["incarnation"])
        for field, value in given.items():
            if field in _SECRET_FIELDS:
                target = _SECRET_FIELDS[field]
                current[target] = None if value is None else seal(self._cipher, value, place, field)
            elif value is None and field in _DEFAULTABLE:
                current.pop(field, None)
            else:
                current[field] = value
        if current.get("webhooks") and current.get("webhook_secret_ciphertext") is None:
            # Every delivery is signed: a store given endpoints before a secret gets one now
            # (POST .../webhooks/secret shows a new one).
            from agent_memory.webhooks.signing import new_secret

            current["webhook_secret_ciphertext"] = seal(
                self._cipher, new_secret(), place, "webhook_secret"
            )
            current["webhook_secret_created_at"] = now
        if "webhook_secret" in given:
            current["webhook_secret_created_at"] = now
        current["updated_at"] = now
        settings = {k: v for k, v in current.items() if k in StoreSettings.model_fields}
        providers = {k: v for k, v in current.items() if k in ProviderSettings.model_fields}
        try:
            StoreSettings.model_validate(
                settings, context={"allow_private_endpoints": self._allow_private}
            )
            ProviderSettings.model_validate(
                providers, context={"allow_private_endpoints": self._allow_private}
            )
        except ValidationError as exc:
            raise ValidationFailed(
                "The store's settings are not valid; see details.",
                details=validation_details(exc),
            ) from exc
        _check_hosted_reranker_key(current)
        return StoreConfig.model_validate(current, context=STORED)

    def delete(self, name: str) -> None:
        """Delete the store and every key it owns; ``StoreNotFound`` if there is none.

        The registry entry goes first, so the store answers 404 at once; the keys of its
        incarnation are removed after. A store created again under the same name meanwhile has
        another incarnation, so its keys are neither hidden nor removed by this delete.
        """
        config = self.get(name)
        keys = config.keys()
        redirected = 0
        with database_errors():
            with self._redis.pipeline(transaction=True) as pipe:
                while True:
                    try:
                        pipe.watch(StoreKeys.registry)  # type: ignore[no-untyped-call]
                        raw = cast(str | None, pipe.hget(StoreKeys.registry, name))
                        if raw is None or StoreConfig.model_validate_json(
                            raw, context=STORED
                        ).incarnation != (config.incarnation):
                            raise StoreNotFound(name)
                        pipe.multi()
                        pipe.hdel(StoreKeys.registry, name)
                        pipe.execute()
                        freshness.forget_entry(name)
                        break
                    except redis.WatchError:
                        continue
                    except TRANSACTION_REDIRECTS:
                        redirected += 1
                        if redirected >= TRANSACTION_ATTEMPTS:
                            raise
                        pipe.reset()
            passes = _CLUSTER_DELETE_PASSES if is_cluster(self._redis) else 1
            for _ in range(passes):
                if not self._unlink_matching(keys.all_pattern):
                    break

    def _unlink_matching(self, pattern: str) -> int:
        """UNLINK every key that SCAN MATCH ``pattern`` finds, in batches; returns how many.

        On a cluster, redis-py's ``scan_iter`` scans every primary in turn and ``unlink``
        sends one UNLINK per slot of a batch (pipelined, each node its own). A key that a
        resharding moves from a node not scanned yet to one already scanned is missed by one
        pass, so ``delete`` scans again until a pass finds nothing (at most
        ``_CLUSTER_DELETE_PASSES``); on a single node one SCAN finds every key that exists for
        its whole duration, and the store's keys can no longer be created (its registry entry
        is gone, and a write racing the delete takes itself back)."""
        found = 0
        batch: list[str] = []
        for key in self._redis.scan_iter(match=pattern, count=_SCAN_BATCH):
            batch.append(key)
            if len(batch) >= _SCAN_BATCH:
                found += len(batch)
                self._redis.unlink(*batch)
                batch.clear()
        if batch:
            found += len(batch)
            self._redis.unlink(*batch)
        return found

    def views(self) -> StoreList:
        """Every store of this instance as ``view`` shows it, by name."""
        return StoreList(stores=[self.view(config) for config in self.all()])

    def view(self, config: StoreConfig, counts: StoreCounts | None = None) -> StoreView:
        """The client-facing view: settings, ``has_*_api_key`` flags, never a key."""
        secret_fields = {
            "llm_api_key_ciphertext",
            "embed_api_key_ciphertext",
            "rerank_api_key_ciphertext",
        }
        data = config.model_dump(exclude=secret_fields | {"webhook_secret_ciphertext", "webhooks"})
        return StoreView(
            **data,
            # The endpoints as validated when saved (model instances are not validated again).
            webhooks=config.webhooks,
            instance_id=self.instance_id,
            has_llm_api_key=config.llm_api_key_ciphertext is not None,
            has_embed_api_key=config.embed_api_key_ciphertext is not None,
            has_rerank_api_key=config.rerank_api_key_ciphertext is not None,
            has_webhook_secret=config.webhook_secret_ciphertext is not None,
            counts=counts,
        )


KEYED_RERANKERS = ("cohere", "voyage", "jina")
"""Rerank providers that refuse every call without a key (their hosted APIs)."""


def _check_hosted_reranker_key(merged: dict[str, Any]) -> None:
    """``ValidationFailed`` naming ``rerank_api_key`` when the merged settings name a hosted
    reranker (``KEYED_RERANKERS``) and hold no key for it: each search would call it, be refused
    and fall back to the fused order (``"reranked": false``) without saying why. A change of
    provider or base URL drops the stored key (``_merge``), so such a change must bring one."""
    provider = merged.get("rerank_provider")
    if provider in KEYED_RERANKERS and merged.get("rerank_api_key_ciphertext") is None:
        raise ValidationFailed(
            f"rerank_provider '{provider}' needs rerank_api_key: its API refuses calls without "
            "one (a change of rerank provider or base URL drops the stored key; send it again).",
            details=[{"field": "rerank_api_key", "problem": f"required by '{provider}'"}],
        )
