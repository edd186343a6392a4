"""The Lua of keyed memories. Each script touches the two keys of one namespace
(``KEYS[1]`` its ``items`` hash, ``KEYS[2]`` its ``expiry`` sorted set: one slot), or the
store's registry of namespaces alone; entries as ``keyed.records`` lays them out.

Every write to a namespace also drops up to 100 of its expired entries and sets both keys to
expire with the latest of the entries left (``_TIDY``), so a namespace whose memories all
expired leaves nothing behind.
"""

from __future__ import annotations

from agent_memory.database.scripts import FINISHES_WRITE, WRITES
from agent_memory.keyed.records import ENTRY_TIMES

_TIDY = """
local gone = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', now, 'LIMIT', 0, 100)
for _, k in ipairs(gone) do
  redis.call('HDEL', KEYS[1], k)
  redis.call('ZREM', KEYS[2], k)
end
local top = redis.call('ZRANGE', KEYS[2], -1, -1, 'WITHSCORES')
if top[2] then
  redis.call('PEXPIREAT', KEYS[1], top[2])
  redis.call('PEXPIREAT', KEYS[2], top[2])
end
"""

PUT = (
    WRITES
    + f"""
-- ARGV: key, now (ms), expiry (ms), ttl (ms), entry without its numbers. Returns created (ms).
local now = tonumber(ARGV[2])
local created = ARGV[2]
local old = redis.call('HGET', KEYS[1], ARGV[1])
if old then
  local expiry = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
  if expiry > now then
    created = string.match(old, '{ENTRY_TIMES}') or created
  end
end
redis.call('HSET', KEYS[1], ARGV[1], created .. ':' .. ARGV[4] .. ':' .. ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
{_TIDY}
return created
"""
)

DELETE = (
    WRITES
    + f"""
-- ARGV: key, now (ms). Returns 1 when a live entry was removed, else 0.
local now = tonumber(ARGV[2])
local expiry = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[1]) or '0')
local removed = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
{_TIDY}
if removed == 1 and expiry > now then return 1 end
return 0
"""
)

REFRESH = (
    FINISHES_WRITE
    + f"""
-- ARGV: now (ms), then keys. Each live entry expires its ttl after now. Returns the new
-- expiry of each key (0 for one not live).
local now = tonumber(ARGV[1])
local out = {{}}
for i = 2, #ARGV do
  local k = ARGV[i]
  local expiry = tonumber(redis.call('ZSCORE', KEYS[2], k) or '0')
  local entry = redis.call('HGET', KEYS[1], k)
  local fresh = 0
  if entry and expiry > now then
    local _, ttl = string.match(entry, '{ENTRY_TIMES}')
    fresh = now + tonumber(ttl)
    if fresh < expiry then fresh = expiry end
    redis.call('ZADD', KEYS[2], fresh, k)
  end
  out[#out + 1] = tostring(fresh)
end
{_TIDY}
return out
"""
)

REGISTER = (
    FINISHES_WRITE
    + """
-- KEYS[1]: the store's registry of namespaces. ARGV: namespace JSON, expiry (ms), now (ms).
-- Keeps the later of the two expiries and now as when the namespace was last written.
local old = redis.call('HGET', KEYS[1], ARGV[1])
local expiry = ARGV[2]
if old then
  local was = string.match(old, '^(%d+):')
  if was and tonumber(was) > tonumber(expiry) then expiry = was end
end
redis.call('HSET', KEYS[1], ARGV[1], expiry .. ':' .. ARGV[3])
return 1
"""
)

UNREGISTER = (
    FINISHES_WRITE
    + """
-- KEYS[1]: the registry. ARGV: namespace JSON, the value read when it was found empty.
-- Removes the entry only if nothing registered it since.
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then
  return redis.call('HDEL', KEYS[1], ARGV[1])
end
return 0
"""
)
