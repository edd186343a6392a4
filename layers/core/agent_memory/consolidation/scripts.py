"""The Lua of consolidation: one step (a merge, update, drop, restore or revert) is one script
on the actor's slot, and the store-level step that brings a memory back into the listing.
"""

from __future__ import annotations

from agent_memory.database.keys import ActorKeys
from agent_memory.database.scripts import FINISHES_WRITE, WRITES
from agent_memory.memories.scripts import ACTOR_HELPERS, lua


def switch_keys(actor: ActorKeys) -> list[str]:
    """KEYS of ``SWITCH``: the actor's memories, vectors, log, meta and consolidation state."""
    return [actor.memories, actor.vectors, actor.log, actor.meta, actor.consolidation]


# KEYS: switch_keys. ARGV: log_keep, marker ('' for none), n, then n triples (id, expected,
# value). An expected '' means the id must not be kept yet (a new memory: value is the whole
# stored memory); otherwise the stored memory must be byte for byte the expected one (value is
# its new JSON alone: the vector after it is kept). Every check is made before any write, so
# either every memory of the step changes or none does. Returns {1, gen} when written, {2, gen}
# when the marker was already set (the step was applied before), {-1, i} when memory i changed
# since it was read, {-2, i} when new id i is already kept, {-3, i} when memory i is gone.
SWITCH = lua(
    WRITES,
    ACTOR_HELPERS
    + """
local gen = tonumber(redis.call('HGET', KEYS[4], 'gen') or '0')
if ARGV[2] ~= '' and redis.call('HEXISTS', KEYS[5], ARGV[2]) == 1 then return {2, gen} end
local n = tonumber(ARGV[3])
local raws = {}
for i = 1, n do
  local at = 4 + (i - 1) * 3
  local raw = redis.call('HGET', KEYS[1], ARGV[at])
  if ARGV[at + 1] == '' then
    if raw then return {-2, i} end
    raws[i] = ''
  else
    if not raw then return {-3, i} end
    if raw ~= ARGV[at + 1] then return {-1, i} end
    raws[i] = raw
  end
end
for i = 1, n do
  local at = 4 + (i - 1) * 3
  local id, value = ARGV[at], ARGV[at + 2]
  if raws[i] ~= '' then
    local tail = vector_tail(raws[i])
    if tail == '' then  -- a record of before: its vector moves in from the vectors hash
      local apart = redis.call('HGET', KEYS[2], id)
      if apart then tail = '\\n' .. apart end
    end
    value = value .. tail
  end
  redis.call('HSET', KEYS[1], id, value)
  redis.call('HDEL', KEYS[2], id)
  gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
  redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':+:' .. id)
end
if ARGV[2] ~= '' then redis.call('HSET', KEYS[5], ARGV[2], '1') end
trim_log(ARGV[1])
return {1, gen}
""",
)

# KEYS: a partition's listing, expiry and superseded indexes. ARGV: id, created (ms). A memory
# made current again (a revert) comes back into the listing of current memories and leaves the
# superseded count, if it is still kept (a forget racing it keeps it out of both).
REOPEN = lua(
    FINISHES_WRITE,
    """
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
if expiry then
  redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
  redis.call('ZREM', KEYS[3], ARGV[1])
end
return 0
""",
)
