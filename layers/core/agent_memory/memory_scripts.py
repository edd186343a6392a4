"""The Lua scripts of long-term memory, templated with the stored field names.

Every write of an actor's memories is one script on the actor's hash slot (``keys.ActorKeys``:
the keys of one actor share a hash tag), which also bumps the actor's generation and appends to
its change log, so a warm index anywhere can catch up (``index_sync``). The store-level indexes
(listing, expiry, owner) live on the store's slot and follow in a second step.

A script that reads a field of a stored record names it ``$field`` in its source; ``lua``
replaces each with the quoted stored name from ``records.MemoryRecord`` and fails (``KeyError``,
at import) on a name the record does not have, so a renamed field cannot leave a script behind.
"""

from __future__ import annotations

from string import Template

from agent_memory.db import FINISHES_WRITE, READ_ONLY, WRITES
from agent_memory.records import field_names

LOG_KEEP = 10_000
"""Change-log entries kept per actor; a cache further behind than this reloads the actor."""
SCRIPT_IDS = 1000
"""Ids per call of a script taking a list of them (Lua's ``unpack`` stops near 8,000)."""


def lua(flags: str, source: str) -> str:
    """``flags`` (``db.READ_ONLY``, ``WRITES`` or ``FINISHES_WRITE``) and ``source`` with every
    ``$field`` replaced by the stored field name as a Lua string literal (``'valid_until'``).
    ``KeyError`` for a name ``MemoryRecord`` does not have."""
    quoted = {name: f"'{stored}'" for name, stored in field_names().items()}
    return flags + Template(source).substitute(quoted)


# KEYS: ActorKeys.all(). ARGV: id, json, vector bytes, expected gen ('' = any), log_keep,
# 'update' (the memory must still exist), 'new', or 'once' (a chosen id that must not exist
# yet). Returns {1, gen} when written, {0, gen} when the generation had moved, {-1, gen} when
# an update found no memory (deleted), {-2, gen} when a 'once' id is already kept.
PUT = lua(
    WRITES,
    """
local gen = tonumber(redis.call('HGET', KEYS[4], 'gen') or '0')
if ARGV[4] ~= '' and tonumber(ARGV[4]) ~= gen then return {0, gen} end
if ARGV[6] == 'update' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {-1, gen} end
if ARGV[6] == 'once' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return {-2, gen} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':+:' .. ARGV[1])
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(tonumber(ARGV[5]) + 1))
return {1, gen}
""",
)

# KEYS: ActorKeys.all(). ARGV: log_keep, id... Returns how many of the ids existed.
REMOVE = lua(
    WRITES,
    """
local removed = 0
for i = 2, #ARGV do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    removed = removed + 1
    redis.call('HDEL', KEYS[2], ARGV[i])
    local gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
    redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':-:' .. ARGV[i])
  end
end
redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(tonumber(ARGV[1]) + 1))
return removed
""",
)

# KEYS: the store's listing, expiry and owner indexes. ARGV: id... Takes the ids out of them:
# the second step of a removal (after REMOVE), or the undo of an add's first step, so it runs
# even when the database is full (FINISHES_WRITE), and the indexes agree at every moment (one
# atomic step).
UNINDEX = lua(
    FINISHES_WRITE,
    """
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('ZREM', KEYS[2], unpack(ARGV))
redis.call('HDEL', KEYS[3], unpack(ARGV))
return 0
""",
)

# KEYS: an actor's memories and vectors hashes. ARGV: id... {records, vectors} of the ids, in
# order (false where there is none), as one consistent read: a record and its vector always
# belong to the same write.
LOAD_ROWS = lua(
    READ_ONLY,
    """
return {redis.call('HMGET', KEYS[1], unpack(ARGV)), redis.call('HMGET', KEYS[2], unpack(ARGV))}
""",
)
