"""The Lua scripts of long-term memory, templated with the stored field names.

Every write of an actor's memories is one script on the actor's hash slot
(``database.keys.ActorKeys``: the keys of one actor share a hash tag), which also bumps the actor's
generation and appends to its change log, so a warm index anywhere can catch up (``indexes``). The
store-level indexes (listing, expiry, owner) live on the store's slot and follow in a second step.

A script that reads a field of a stored record names it ``$field`` in its source; ``lua``
replaces each with the quoted stored name from ``memories.records.MemoryRecord`` and fails
(``KeyError``, at import) on a name the record does not have, so a renamed field cannot leave a
script behind (``$$`` is a literal ``$``).
"""

from __future__ import annotations

from string import Template

from agent_memory.database.scripts import FINISHES_WRITE, READ_ONLY, WRITES
from agent_memory.memories.records import field_names

LOG_KEEP = 128
"""Change-log entries kept per actor at least; a cache further behind than what is kept
reloads the actor. An entry costs about 118 bytes of Redis memory (a sorted-set member), so
the log keeps at most ``LOG_KEEP`` or one entry per ``LOG_SHARE`` memories of the actor,
whichever is more: under 8 bytes per memory of a large actor (a cache of an actor of 100,000
memories can fall 6,250 changes behind before it reloads), where the 10,000 entries kept
before cost 118 bytes per memory of an actor of 1,000 (docs/design.md, "What a memory
costs")."""
LOG_SHARE = 16
"""One change-log entry kept per this many memories of the actor, beyond ``LOG_KEEP``."""


def log_kept(memories: int) -> int:
    """Change-log entries the scripts keep for an actor of ``memories`` memories."""
    return max(LOG_KEEP, memories // LOG_SHARE)


SCRIPT_IDS = 1000
"""Ids per call of a script taking a list of them (Lua's ``unpack`` stops near 8,000)."""


def lua(flags: str, source: str) -> str:
    """``flags`` (``database.scripts.READ_ONLY``, ``WRITES`` or ``FINISHES_WRITE``) and ``source``
    with every ``$field`` replaced by the stored field name as a Lua string literal
    (``'valid_until'``). ``KeyError`` for a name ``MemoryRecord`` does not have."""
    quoted = {name: f"'{stored}'" for name, stored in field_names().items()}
    return flags + Template(source).substitute(quoted)


KEPT_GEN = "kept_gen"
"""The actor ``meta`` field holding the generation of the actor's kept index."""
KEPT_FLOOR = "kept_floor"
"""The actor ``meta`` field holding the generation from which a kept index may be written: a
removal (or a change of a memory's text) drops the kept index and sets it, so that a kept
index dumped before that change, by a reader racing it, is never written after it."""


# The helpers of the actor scripts (KEYS: ActorKeys.all()). ``record_json``: the JSON of a
# stored memory, which ends at its first line feed (records.encode_memory; a record kept
# before vectors moved into it is JSON alone). ``vector_tail``: what follows the JSON (the line
# feed and the vector's bytes), '' for such an older record. ``trim_log``: keep the last
# max(least, memories / LOG_SHARE) change-log entries. ``drop_kept``: remove the actor's kept
# index (what a removal or a change of text must not leave behind: it holds the texts' words,
# topics and metadata) and set the floor of the next one to the generation now.
ACTOR_HELPERS = f"""
local function record_json(raw)
  local at = string.find(raw, '\\n', 1, true)
  if at then return string.sub(raw, 1, at - 1) end
  return raw
end
local function vector_tail(raw)
  local at = string.find(raw, '\\n', 1, true)
  if at then return string.sub(raw, at) end
  return ''
end
local function trim_log(least)
  local keep = math.max(tonumber(least), math.floor(redis.call('HLEN', KEYS[1]) / {LOG_SHARE}))
  redis.call('ZREMRANGEBYRANK', KEYS[3], 0, -(keep + 1))
end
local function drop_kept()
  redis.call('DEL', unpack(KEYS, 5))
  redis.call('HDEL', KEYS[4], '{KEPT_GEN}')
  redis.call('HSET', KEYS[4], '{KEPT_FLOOR}', redis.call('HGET', KEYS[4], 'gen') or '0')
end
"""


# KEYS: ActorKeys.all(). ARGV: id, stored memory (records.encode_memory), expected gen ('' =
# any), log_keep, 'update' (the memory must still exist), 'new', or 'once' (a chosen id that
# must not exist yet). Returns {1, gen} when written, {0, gen} when the generation had moved,
# {-1, gen} when an update found no memory (deleted), {-2, gen} when a 'once' id is already
# kept. A vector the memory kept in the ``vectors`` hash (written before vectors moved into
# the record) is dropped: the new entry holds it.
PUT = lua(
    WRITES,
    ACTOR_HELPERS
    + """
local gen = tonumber(redis.call('HGET', KEYS[4], 'gen') or '0')
if ARGV[3] ~= '' and tonumber(ARGV[3]) ~= gen then return {0, gen} end
if ARGV[5] == 'update' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return {-1, gen} end
if ARGV[5] == 'once' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return {-2, gen} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[1])
gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':+:' .. ARGV[1])
trim_log(ARGV[4])
if ARGV[5] == 'update' then drop_kept() end
return {1, gen}
""",
)

# KEYS: ActorKeys.all(). ARGV: log_keep, id... Returns how many of the ids existed.
REMOVE = lua(
    WRITES,
    ACTOR_HELPERS
    + """
local removed = 0
for i = 2, #ARGV do
  if redis.call('HDEL', KEYS[1], ARGV[i]) == 1 then
    removed = removed + 1
    redis.call('HDEL', KEYS[2], ARGV[i])
    local gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
    redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':-:' .. ARGV[i])
  end
end
trim_log(ARGV[1])
if removed > 0 then drop_kept() end
return removed
""",
)

# KEYS: ActorKeys.all(). ARGV: new id, new stored memory, old id, the old stored memory as the
# caller read it, the old record closed (valid_until, superseded_by; its JSON alone: the script
# keeps the vector that follows it), log_keep, 'new' or 'once'. Keeps the new memory and
# closes the old one in one step, so there is never a moment with neither or both current.
# Returns {1, gen} when done; {-1, gen} when the old record is no longer what the caller read
# (changed meanwhile: read it again); {-2, gen} when a 'once' id is already kept; {-3, gen}
# when the old memory is gone; {-4, gen} when it is not current.
SUPERSEDE = lua(
    WRITES,
    ACTOR_HELPERS
    + """
local gen = tonumber(redis.call('HGET', KEYS[4], 'gen') or '0')
if ARGV[7] == 'once' and redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return {-2, gen} end
local raw = redis.call('HGET', KEYS[1], ARGV[3])
if not raw then return {-3, gen} end
local until_ = cjson.decode(record_json(raw))[$valid_until]
if until_ ~= nil and until_ ~= cjson.null then return {-4, gen} end
if raw ~= ARGV[4] then return {-1, gen} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[2], ARGV[1])
local tail = vector_tail(raw)
if tail == '' then  -- a record of before: its vector moves in from the vectors hash
  local apart = redis.call('HGET', KEYS[2], ARGV[3])
  if apart then tail = '\\n' .. apart end
  redis.call('HDEL', KEYS[2], ARGV[3])
end
redis.call('HSET', KEYS[1], ARGV[3], ARGV[5] .. tail)
gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':+:' .. ARGV[1])
gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':+:' .. ARGV[3])
trim_log(ARGV[6])
return {1, gen}
""",
)

# The chain of a memory: the ids of the memories it replaced ($supersedes, followed back) and
# of those that replaced it ($superseded_by, followed on), oldest first, itself included; at
# most ARGV[2] on each side (0: all). A link to a memory that is no longer kept ends that side.
_CHAIN = (
    ACTOR_HELPERS
    + """
local function link(raw, name)
  local value = cjson.decode(record_json(raw))[name]
  if value == cjson.null then return nil end
  return value
end
local function chain(start, most)
  local first = redis.call('HGET', KEYS[1], start)
  if not first then return {}, {} end
  local older, newer, seen = {}, {}, {[start] = true}
  local id, raw = link(first, $supersedes), nil
  while id and not seen[id] and (most == 0 or #older < most) do
    raw = redis.call('HGET', KEYS[1], id)
    if not raw then break end
    seen[id] = true
    older[#older + 1] = {id, raw}
    id = link(raw, $supersedes)
  end
  id = link(first, $superseded_by)
  while id and not seen[id] and (most == 0 or #newer < most) do
    raw = redis.call('HGET', KEYS[1], id)
    if not raw then break end
    seen[id] = true
    newer[#newer + 1] = {id, raw}
    id = link(raw, $superseded_by)
  end
  local ids, raws = {}, {}
  for i = #older, 1, -1 do ids[#ids + 1] = older[i][1]; raws[#raws + 1] = older[i][2] end
  ids[#ids + 1] = start; raws[#raws + 1] = first
  for i = 1, #newer do ids[#ids + 1] = newer[i][1]; raws[#raws + 1] = newer[i][2] end
  return ids, raws
end
"""
)

# KEYS: ActorKeys.all(). ARGV: id, most per side. {ids, records} of the memory's chain, oldest
# first, as one consistent read.
LOAD_CHAIN = lua(
    READ_ONLY,
    _CHAIN
    + """
local ids, raws = chain(ARGV[1], tonumber(ARGV[2]))
return {ids, raws}
""",
)

# KEYS: ActorKeys.all(). ARGV: log_keep, id. Removes the memory and its whole chain (every
# memory it replaced and every one that replaced it) in one step; returns the removed ids.
REMOVE_CHAIN = lua(
    WRITES,
    _CHAIN
    + """
local ids = chain(ARGV[2], 0)
for _, id in ipairs(ids) do
  redis.call('HDEL', KEYS[1], id)
  redis.call('HDEL', KEYS[2], id)
  local gen = redis.call('HINCRBY', KEYS[4], 'gen', 1)
  redis.call('ZADD', KEYS[3], gen, string.format('%d', gen) .. ':-:' .. id)
end
trim_log(ARGV[1])
if #ids > 0 then drop_kept() end
return ids
""",
)

# KEYS: ActorKeys.all(). ARGV: id. {gen, stored memory, vector in the ``vectors`` hash (a
# record kept before vectors moved into it; else false)} of one memory as one consistent read
# (a change made from it is written only if the generation is still this one).
READ_ONE = lua(
    READ_ONLY,
    """
return {redis.call('HGET', KEYS[4], 'gen') or '0', redis.call('HGET', KEYS[1], ARGV[1]),
        redis.call('HGET', KEYS[2], ARGV[1])}
""",
)

# KEYS: the store's listing, expiry, owner and superseded indexes. ARGV: id... Takes the ids
# out of them: the second step of a removal (after REMOVE), or the undo of an add's first step,
# so it runs even when the database is full (FINISHES_WRITE), and the indexes agree at every
# moment (one atomic step).
UNINDEX = lua(
    FINISHES_WRITE,
    """
redis.call('ZREM', KEYS[1], unpack(ARGV))
redis.call('ZREM', KEYS[2], unpack(ARGV))
redis.call('HDEL', KEYS[3], unpack(ARGV))
redis.call('ZREM', KEYS[4], unpack(ARGV))
return 0
""",
)

# KEYS: the store's listing, expiry and superseded indexes. ARGV: id. The second step of a
# supersede: the replaced memory leaves the listing of current memories and is counted as
# superseded, if it is still kept (a forget racing this step removed it from the expiry index,
# and then it stays out of both). Runs when the database is full (FINISHES_WRITE): it completes
# a write already made.
RETIRE = lua(
    FINISHES_WRITE,
    """
local expiry = redis.call('ZSCORE', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
if expiry then redis.call('ZADD', KEYS[3], expiry, ARGV[1]) end
return 0
""",
)

# KEYS: ActorKeys.all(). ARGV: a generation. What changed since it, as one consistent read:
# {gen, entries, ids, records, vectors}: the actor's generation now, the change-log entries
# after the given generation up to it (oldest first; the first tells whether the log still
# reaches back), and, for each id whose last entry is an upsert, its record and vector as they
# are at that generation (false where there is none; the vectors are those kept apart, in the
# ``vectors`` hash, by records of before vectors moved into them). A warm index applying these
# is exactly the actor's state at ``gen``, never a mix of two moments (which could show a
# memory closed by a supersede without the memory that replaced it).
CATCH_UP = lua(
    READ_ONLY,
    """
local gen = tonumber(redis.call('HGET', KEYS[4], 'gen') or '0')
local entries = redis.call('ZRANGEBYSCORE', KEYS[3], '(' .. ARGV[1], gen)
local last, order = {}, {}
for _, entry in ipairs(entries) do
  local op, id = string.match(entry, '^%d+:(.):(.*)$$')
  if last[id] == nil then order[#order + 1] = id end
  last[id] = op
end
local ids = {}
for _, id in ipairs(order) do
  if last[id] == '+' then ids[#ids + 1] = id end
end
local function hmget(key)
  local out = {}
  for i = 1, #ids, 1000 do
    local part = {}
    for j = i, math.min(i + 999, #ids) do part[#part + 1] = ids[j] end
    local got = redis.call('HMGET', key, unpack(part))
    for k = 1, #part do out[#out + 1] = got[k] end
  end
  return out
end
return {gen, entries, ids, hmget(KEYS[1]), hmget(KEYS[2])}
""",
)

# KEYS: the actor's meta, then its index parts (``ActorKeys.index_parts``). ARGV: the generation
# the kept index reflects, '1' to replace a kept index whatever its generation (the one there
# could not be read) or '', then the parts (``search.snapshot.dump``). Keeps the parts (and
# removes parts beyond them) unless a kept index of that generation or later is there already;
# returns the generation kept now, -2 when the given one is ahead of the actor's, or -3 when it
# is older than the last removal (``KEPT_FLOOR``; neither is kept).
KEEP_INDEX = lua(
    WRITES,
    f"""
local kept = tonumber(redis.call('HGET', KEYS[1], '{KEPT_GEN}') or '-1')
local gen = tonumber(ARGV[1])
if ARGV[2] ~= '1' and kept >= gen then return kept end
if gen > tonumber(redis.call('HGET', KEYS[1], 'gen') or '0') then return -2 end
if gen < tonumber(redis.call('HGET', KEYS[1], '{KEPT_FLOOR}') or '0') then return -3 end
for i = 2, #KEYS do
  if ARGV[i + 1] then redis.call('SET', KEYS[i], ARGV[i + 1]) else redis.call('DEL', KEYS[i]) end
end
redis.call('HSET', KEYS[1], '{KEPT_GEN}', gen)
return gen
""".replace("$", "$$"),
)

# KEYS: the parts of an actor's kept form, in order; ARGV[1]: the length of its header; then,
# per range of codes, its part (1-based, into KEYS) and its first and last byte. Returns the
# header as it is now, then each range's bytes: one step, so the ranges are of that header's
# form (``memories.kept_codes``).
KEPT_CODES = lua(
    READ_ONLY,
    """
local found = {redis.call('GETRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)}
for i = 2, #ARGV, 3 do
  found[#found + 1] = redis.call('GETRANGE', KEYS[tonumber(ARGV[i])], ARGV[i + 1], ARGV[i + 2])
end
return found
""",
)
