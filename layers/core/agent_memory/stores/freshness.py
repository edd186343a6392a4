"""A store's settings as this container last read them, and the check that they still are:
``SettingsCheck``.

Why: every request of a store read its registry entry first (``Stores.get``), a round trip of
its own before the route's first read: on this project's machine 9% of a warm search's time in
one process, and a wake-up of the database more on a loaded one (``bench/results/
request_path.md``). A read route (search, recall: ``flows.handle.StoreHandle.read``) now starts
from the entry this container read last and sends the read of the entry in the same round trip
as its own first read (``queue``, then ``confirm`` its reply); when the entry changed meanwhile
(the settings changed, or the store was deleted, or deleted and created again under a new
``incarnation``) the answer read with the old settings is thrown away and the route runs again
from a fresh read. Nothing is written under settings that were not confirmed first: the one
write a read route may make (``memories.indexes.ActorIndexes.keep``) confirms the entry with a
read of its own before it writes (``confirm_now``), so a store deleted and created again is never
written under its old incarnation's keys.
"""

from __future__ import annotations

from collections import OrderedDict
from threading import Lock
from typing import TYPE_CHECKING, Any

from agent_memory.database.client import database_errors
from agent_memory.database.keys import StoreKeys

if TYPE_CHECKING:
    import redis
    from redis.client import Pipeline

REMEMBERED_ENTRIES = 256
"""How many stores' registry entries a container remembers (``remember``), least recently read
out first: a Lambda container serves one function, and a request names one store."""


class StaleSettings(Exception):
    """The store's registry entry is no longer the one its settings were read from (not an
    API error: ``StoreHandle.read`` runs the route again from a fresh read)."""


class SettingsCheck:
    """Whether store ``name``'s registry entry is still ``raw``, the text its settings were
    parsed from: ``pending`` until a reply of the entry's read says, then ``stale`` or not for
    good. ``CONFIRMED`` is the check of settings read in this request."""

    def __init__(self, name: str, raw: str | None, *, pending: bool = True) -> None:
        self.name = name
        self._raw = raw
        self.pending = pending
        self.stale = False

    def queue(self, pipe: Pipeline) -> bool:
        """Queue the entry's read on ``pipe`` (last: the caller pops its reply) when the check
        is pending; whether it did."""
        if not self.pending:
            return False
        pipe.hget(StoreKeys.registry, self.name)
        return True

    def confirm(self, reply: Any) -> None:
        """Settle the check with the reply of what ``queue`` queued (``bytes`` or ``str``, None
        for no entry); ``StaleSettings`` when the entry is not ``raw`` any more."""
        if not self.pending:
            return
        text = reply.decode("utf-8") if isinstance(reply, bytes) else reply
        self.pending = False
        if text != self._raw:
            self.stale = True
            forget_entry(self.name)
            raise StaleSettings(self.name)

    def confirm_now(self, client: redis.Redis) -> None:
        """Settle a pending check with a read of its own (before a write, or when the route made
        no round trip that carried it); ``StaleSettings`` as ``confirm``, also for a check
        settled stale before. Errors: ``DatabaseUnavailable`` (``database_errors``)."""
        if self.pending:
            with database_errors():
                reply = client.hget(StoreKeys.registry, self.name)
            self.confirm(reply)
        elif self.stale:
            raise StaleSettings(self.name)


CONFIRMED = SettingsCheck("", None, pending=False)
"""The check of settings read in this request: nothing to queue, never stale."""

_entries: OrderedDict[tuple[str, str, str], str] = OrderedDict()
_entries_lock = Lock()


def remember(org_id: str, instance_id: str, name: str, raw: str) -> None:
    """Note ``raw`` as store ``name``'s entry, read now from the registry of ``instance_id``."""
    key = (org_id, instance_id, name)
    with _entries_lock:
        _entries[key] = raw
        _entries.move_to_end(key)
        while len(_entries) > REMEMBERED_ENTRIES:
            _entries.popitem(last=False)


def remembered(org_id: str, instance_id: str, name: str) -> str | None:
    """The entry ``remember`` noted last for the store, or None."""
    with _entries_lock:
        return _entries.get((org_id, instance_id, name))


def forget_entry(name: str) -> None:
    """Drop every remembered entry of a store named ``name`` (one seen to have changed)."""
    with _entries_lock:
        for key in [key for key in _entries if key[2] == name]:
            del _entries[key]


def forget_all() -> None:
    """Drop every remembered entry (SnapStart's ``forget``: a restored container reads them
    again)."""
    with _entries_lock:
        _entries.clear()
