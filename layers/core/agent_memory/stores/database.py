"""One store's database as the services of a store use it: ``StoreDatabase``.

Every service of a store (sessions, their transfer, memories and their indexes, keyed memories,
a background run) reads and writes the same things: the store's database through a client
answering text and one answering bytes (vectors are raw float32 bytes), the store's settings,
the clock, and the store's key names. ``StoreDatabase`` carries them as one value, so a service
takes one argument where it took four and recomputed the keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import redis

from agent_memory.clock import Clock
from agent_memory.database.keys import StoreKeys
from agent_memory.stores.freshness import CONFIRMED, SettingsCheck
from agent_memory.stores.models import StoreConfig


@dataclass(frozen=True)
class StoreDatabase:
    """Store ``config`` in the database that ``client`` (``str`` replies) and ``binary``
    (``bytes`` replies) reach, read with ``clock``; ``keys`` are the store's key names
    (``StoreConfig.keys``: one object per incarnation in the process). Making one does no
    I/O: the clients are ``database.client.redis_client``'s, which connect at first use."""

    client: redis.Redis
    binary: redis.Redis
    config: StoreConfig
    clock: Clock
    check: SettingsCheck = field(default=CONFIRMED, repr=False, compare=False)
    """Whether ``config`` is still the store's (``stores.freshness``): pending for a read route
    that started from the settings this container read last, whose first round trip carries
    the registry entry's read (``queue``/``confirm``); ``CONFIRMED`` otherwise."""
    keys: StoreKeys = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "keys", self.config.keys())
