"""Actors' profiles, as one store keeps them: ``Profiles``.

A profile is the fields a store declares (``profile_fields``), one value each, set by
extraction or by a caller. It lives in two hashes of the actor's slot (``ActorKeys.profile``:
field -> the current ``ProfileEntry`` as JSON; ``ActorKeys.profile_history``: field -> its
versions, newest first, one JSON per line), so that a change of several fields with their
versions is one script (``CHANGE``), and forgetting the actor one ``DEL``. The store's
``profile_actors`` set (its slot) says which actors hold one, for the count that refuses to
remove a field some actor still holds. Both hashes expire ``memory_ttl_seconds`` after the
profile's last change, as a memory does after it is kept.

The entry's stored names are ``ProfileEntryFields``, which the Lua reads by name too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Final, cast

from redis.client import Pipeline

from agent_memory.answers import largest_fitting
from agent_memory.clock import from_ms, to_ms
from agent_memory.database.client import database_errors
from agent_memory.database.cursors import scan_cursor
from agent_memory.database.keys import actor_bucket
from agent_memory.database.scripts import WRITES, load_script
from agent_memory.errors import ValidationFailed
from agent_memory.memories.profile_models import (
    MAX_PROFILE_VERSIONS,
    ExportedProfile,
    ImportedProfile,
    ImportedProfileEntry,
    ProfileEntry,
    ProfileExportPage,
    ProfileHistory,
    ProfileSource,
    ProfileValue,
    ProfileView,
)
from agent_memory.memories.redaction import redact
from agent_memory.models import SESSION_ID_PATTERN
from agent_memory.stores.database import StoreDatabase


class ProfileEntryFields:
    """The stored name of each part of a profile entry (the Lua reads ``value``)."""

    value: Final = "value"
    updated_at: Final = "updated_at"
    source: Final = "source"


P = ProfileEntryFields
_ACTOR = re.compile(SESSION_ID_PATTERN)

CHANGE = (
    WRITES
    + f"""
-- KEYS: the actor's profile, its history. ARGV[1]: versions kept per field; ARGV[2]: the
-- profile's life (ms); then per field: its name, its new value as JSON ('null' clears it), its
-- entry as JSON. Sets each field whose value differs from its current one (clearing a field
-- without a value changes nothing), puts its entry first in its history (one JSON a line, at
-- most ARGV[1]), and returns the names changed.
local function same(a, b)
  if type(a) ~= type(b) then return false end
  if type(a) ~= 'table' then return a == b end
  if #a ~= #b then return false end
  for i = 1, #a do
    if a[i] ~= b[i] then return false end
  end
  return true
end
local keep = tonumber(ARGV[1])
local changed = {{}}
for i = 3, #ARGV, 3 do
  local name, value, entry = ARGV[i], ARGV[i + 1], ARGV[i + 2]
  local current = redis.call('HGET', KEYS[1], name)
  local differs
  if value == 'null' then
    differs = current ~= false
  else
    differs = current == false or not same(cjson.decode(current)['{P.value}'], cjson.decode(value))
  end
  if differs then
    if value == 'null' then
      redis.call('HDEL', KEYS[1], name)
    else
      redis.call('HSET', KEYS[1], name, entry)
    end
    local lines = entry
    local past = redis.call('HGET', KEYS[2], name)
    if past then
      lines = entry .. '\\n' .. past
    end
    local count, at = 0, 0
    while true do
      at = string.find(lines, '\\n', at + 1, true)
      if not at then break end
      count = count + 1
      if count >= keep then
        lines = string.sub(lines, 1, at - 1)
        break
      end
    end
    redis.call('HSET', KEYS[2], name, lines)
    table.insert(changed, name)
  end
end
if #changed > 0 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
end
return changed
"""
)


def entry_json(value: ProfileValue | None, at_ms: int, source: ProfileSource) -> str:
    """A field's entry as stored: compact JSON (never a raw line feed)."""
    entry = {
        P.value: value,
        P.updated_at: at_ms,
        P.source: source.model_dump(exclude_none=True),
    }
    return json.dumps(entry, separators=(",", ":"), ensure_ascii=False)


def read_entry(raw: str | bytes) -> ProfileEntry:
    """A stored entry as the API shows it (``updated_at`` a time)."""
    data = json.loads(raw)
    return ProfileEntry.model_construct(
        value=data.get(P.value),
        updated_at=from_ms(int(data[P.updated_at])),
        source=ProfileSource.model_validate(data.get(P.source) or {"by": "caller"}),
    )


class Profiles:
    """The profiles of one store's actors. Errors: ``DatabaseUnavailable``."""

    def __init__(self, db: StoreDatabase) -> None:
        self._db = db
        self._redis = db.client
        self._keys = db.keys
        self._change = load_script(db.client, CHANGE)

    @property
    def declared(self) -> list[str]:
        """The field names the store declares, in its order."""
        return [f.name for f in self._db.config.profile_fields]

    def view(self, actor_id: str) -> ProfileView:
        """The actor's profile: each declared field that holds a value."""
        return ProfileView(actor_id=actor_id, fields=self.read(actor_id))

    def read(self, actor_id: str) -> dict[str, ProfileEntry]:
        """The actor's profile entries (``view``'s ``fields``), in one round trip."""
        with database_errors():
            raw = self._redis.hgetall(self._keys.actor(actor_bucket(actor_id)).profile)
        return self.entries_of(raw)

    def queue_read(self, pipe: Pipeline, actor_id: str) -> None:
        """Queue the read of the actor's profile on ``pipe`` (a recall's round trip); its
        reply is read by ``entries_of``."""
        pipe.hgetall(self._keys.actor(actor_bucket(actor_id)).profile)

    def entries_of(self, raw: Mapping[Any, Any]) -> dict[str, ProfileEntry]:
        """The declared fields of a profile hash as read, in the store's order."""
        held = {k.decode() if isinstance(k, bytes) else str(k): v for k, v in raw.items()}
        return {name: read_entry(held[name]) for name in self.declared if name in held}

    def history(self, actor_id: str, field: str) -> ProfileHistory:
        """The versions of ``field`` of the actor, newest first (none when it never held a
        value)."""
        with database_errors():
            raw = self._redis.hget(self._keys.actor(actor_bucket(actor_id)).profile_history, field)
        lines = str(raw).split("\n") if raw else []
        versions = [read_entry(line) for line in lines if line]
        return ProfileHistory(actor_id=actor_id, field=field, versions=versions)

    def change(
        self,
        actor_id: str,
        values: Mapping[str, ProfileValue | None],
        source: ProfileSource,
    ) -> list[str]:
        """Set ``values`` (checked values of declared fields; None clears a field) in one
        atomic step, each changed field's entry put first in its history; the names that
        changed (a field set to the value it holds changes nothing). Texts are redacted first
        when the store's ``redact_pii`` is on (``redacted``)."""
        if not values:
            return []
        config, now_ms = self._db.config, to_ms(self._db.clock.now())
        actor = self._keys.actor(actor_bucket(actor_id))
        args: list[str | int] = [MAX_PROFILE_VERSIONS, config.memory_ttl_seconds * 1000]
        for name, value in values.items():
            kept = self.redacted(value)
            args += [name, json.dumps(kept), entry_json(kept, now_ms, source)]
        with database_errors():
            changed = self._change(keys=[actor.profile, actor.profile_history], args=args)
            if changed:
                self._redis.sadd(self._keys.profile_actors, actor.bucket)
        return [str(name) for name in cast(list[Any], changed)]

    def redacted(self, value: ProfileValue | None) -> ProfileValue | None:
        """``value`` with the personal identifiers of its texts replaced (``redaction``), when
        the store's ``redact_pii`` is on."""
        config = self._db.config
        if not config.redact_pii:
            return value
        runs = config.redact_card_digit_runs
        if isinstance(value, str):
            return redact(value, card_digit_runs=runs).text
        if isinstance(value, list):
            return [redact(item, card_digit_runs=runs).text for item in value]
        return value

    def forget(self, actor_id: str) -> int:
        """Forget the actor's profile and its history; how many fields it held."""
        actor = self._keys.actor(actor_bucket(actor_id))
        with database_errors():
            pipe = self._redis.pipeline(transaction=False)
            pipe.hlen(actor.profile)
            pipe.delete(actor.profile)  # one key a command: a cluster pipeline takes no more
            pipe.delete(actor.profile_history)
            held, _, _ = pipe.execute()
            self._redis.srem(self._keys.profile_actors, actor.bucket)
        return int(held)

    def holding(self, fields: Sequence[str]) -> dict[str, int]:
        """How many actors hold a value of each of ``fields`` (leaving out those none holds)."""
        with database_errors():
            buckets = [str(b) for b in self._redis.smembers(self._keys.profile_actors)]
            pipe = self._redis.pipeline(transaction=False)
            for bucket in buckets:
                pipe.hkeys(self._keys.actor(bucket).profile)
            held = pipe.execute() if buckets else []
        counts: dict[str, int] = {}
        for names in held:
            for name in {str(n) for n in names} & set(fields):
                counts[name] = counts.get(name, 0) + 1
        return counts

    # --- export and import ---------------------------------------------------------------------

    def export_page(self, cursor: str | None, limit: int, budget: int) -> ProfileExportPage:
        """About ``limit`` actors' profiles from ``cursor`` on (None for the first page), within
        ``budget`` bytes (``answers.wire_bytes``). The cursor is the store's actor set's
        ``SSCAN`` cursor, and when a page was cut for its size, ``|`` and the last actor of the
        page: the next page reads that batch again from the actor after it (a batch read in
        sorted order), so a profile held for the whole export is on some page.
        ``ValidationFailed`` for a cursor that is not one of ours."""
        scan, after = _cursor(cursor)
        with database_errors():
            next_scan, members = self._redis.sscan(self._keys.profile_actors, scan, count=limit)
            buckets = sorted(str(m) for m in members if after is None or str(m) > after)
            pipe = self._redis.pipeline(transaction=False)
            for bucket in buckets:
                actor = self._keys.actor(bucket)
                pipe.hgetall(actor.profile)
                pipe.hgetall(actor.profile_history)
            read = pipe.execute() if buckets else []
        profiles = []
        for at, bucket in enumerate(buckets):
            current, history = read[2 * at], read[2 * at + 1]
            if current or history:
                profiles.append(_exported(bucket, current, history))
        ended = str(next_scan) if int(next_scan) else None

        def build(kept: int) -> ProfileExportPage:
            if kept == len(profiles):
                return ProfileExportPage(profiles=profiles, next_cursor=ended)
            resume = f"{scan}|{profiles[kept - 1].actor_id}" if kept else cursor
            return ProfileExportPage(profiles=profiles[:kept], next_cursor=resume)

        return largest_fitting(build, len(profiles), budget)[0]

    def import_profile(self, profile: ImportedProfile) -> None:
        """Write ``profile`` as exported: each of its fields' current entry and history
        replaces what the actor holds of that field (fields it does not name stay), in one
        step (``MULTI`` on the actor's slot). The caller has checked it
        (``flows.transfer.import_profile_batch``)."""
        actor = self._keys.actor(actor_bucket(profile.actor_id))
        life_ms = self._db.config.memory_ttl_seconds * 1000
        names = set(profile.fields) | set(profile.history)
        with database_errors():
            pipe = self._redis.pipeline(transaction=True)
            for name in sorted(names):
                entry = profile.fields.get(name)
                if entry is None:
                    pipe.hdel(actor.profile, name)
                else:
                    pipe.hset(actor.profile, name, _imported_json(entry))
                versions = profile.history.get(name) or []
                if versions:
                    lines = "\n".join(_imported_json(v) for v in versions)
                    pipe.hset(actor.profile_history, name, lines)
                else:
                    pipe.hdel(actor.profile_history, name)
            pipe.pexpire(actor.profile, life_ms)
            pipe.pexpire(actor.profile_history, life_ms)
            pipe.execute()
            self._redis.sadd(self._keys.profile_actors, actor.bucket)


def _cursor(cursor: str | None) -> tuple[int, str | None]:
    """``(SSCAN cursor, last actor exported of that batch or None)`` of an export cursor:
    ``<digits>`` or ``<digits>|<actor id>``; ``ValidationFailed`` for anything else."""
    if cursor is None:
        return 0, None
    scan, cut, after = cursor.partition("|")
    number = scan_cursor(scan)
    if number is None or (cut and not _ACTOR.fullmatch(after)):
        raise ValidationFailed(
            "The cursor is not one this export gave.",
            details=[{"field": "query.cursor", "problem": "not a cursor of this export"}],
        )
    return number, after or None


def _exported(
    bucket: str, current: Mapping[Any, Any], history: Mapping[Any, Any]
) -> ExportedProfile:
    fields = {str(name): read_entry(raw) for name, raw in current.items()}
    versions = {
        str(name): [read_entry(line) for line in str(raw).split("\n") if line]
        for name, raw in history.items()
    }
    return ExportedProfile(actor_id=bucket, fields=fields, history=versions)


def _imported_json(entry: ImportedProfileEntry) -> str:
    source = ProfileSource.model_validate(entry.source.model_dump(exclude_none=True))
    return entry_json(entry.value, to_ms(entry.updated_at), source)
