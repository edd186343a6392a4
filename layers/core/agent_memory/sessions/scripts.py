"""The Lua scripts of working memory, templated with the stored field names.

A script that reads or writes a field of a session's meta hash (or of the store's extraction
record) names it ``$field`` in its source; ``lua`` replaces each with the quoted stored name from
``records.SessionRecord`` / ``records.ExtractionFields`` and fails (``KeyError``, at import) on a
name they do not have, so a renamed field cannot leave a script behind (``$$`` is a literal
``$``). The numbers the scripts use are templated the same way from the constants below.

Every append is one script on the session's slot (``APPEND``): it takes the next sequence
numbers with HINCRBY and writes the messages in the same atomic step, so concurrent writers can
neither lose, duplicate nor reorder messages. The store's session indexes (another slot) follow
(``TOUCH``). The background scripts (``ADVANCE``, ``FOLD``, ``IF_LIVE``) take the session's
life (its ``created_at`` when the run began) and do nothing when the session now is another
one: deleted (only a tombstone left), expired, or deleted and started again under the same id.
"""

from __future__ import annotations

from string import Template

from agent_memory.database.scripts import FINISHES_WRITE, READ_ONLY, WRITES
from agent_memory.sessions.records import EXTRACTION_MAX_FAILURES, session_field_names

FOLD_REQUEST_STALE_MS = 600_000
"""A summarization asked for this long ago (ms) without finishing is asked for again."""
ARM_STALE_MS = 900_000
ONCE_MS = 86_400_000
"""How long a keyed append or pop keeps its outcome in the session's slot (the 24 hours of
``stores.idempotency.RECORD_SECONDS``)."""
"""A reserved schedule whose due time passed this long ago (ms) counts as never armed."""


def lua(flags: str, source: str) -> str:
    """``flags`` (``database.scripts.READ_ONLY``, ``WRITES``, ``FINISHES_WRITE`` or '') and
    ``source`` with every ``$field`` replaced by the stored field name as a Lua string literal
    (``'read_seq'``) and ``$arm_stale_ms``, ``$fold_stale_ms``, ``$max_failures`` by their
    numbers. ``KeyError`` for a name the records do not have."""
    quoted: dict[str, object] = {
        name: f"'{stored}'" for name, stored in session_field_names().items()
    }
    quoted.update(
        arm_stale_ms=ARM_STALE_MS,
        fold_stale_ms=FOLD_REQUEST_STALE_MS,
        max_failures=EXTRACTION_MAX_FAILURES,
        once_ms=ONCE_MS,
    )
    return flags + Template(source).substitute(quoted)


# The store's three indexes (one slot): sessions (by recency), sessions:expiry and
# sessions:deleted (tombstones: a deleted session's last expiry). Every script on them first
# drops up to ARGV[2] expired ids and the tombstones that have run out. ARGV[1] is now (ms).
# A listing prunes on its way unless the database refuses writes (full, or a replica): then it
# lists without pruning (it skips expired ids anyway).
PRUNE_EXPIRED = """
local expired = redis.call('ZRANGEBYSCORE', KEYS[2], '-inf', ARGV[1], 'LIMIT', 0, ARGV[2])
for _, id in ipairs(expired) do
  redis.call('ZREM', KEYS[1], id)
  redis.call('ZREM', KEYS[2], id)
end
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[4], '-inf', ARGV[1])
"""


# KEYS: meta, messages, and the once key of a keyed append (SessionKeys.once) when it has one.
# ARGV: actor ('' for none), now_ms, expires_ms, arm delay in ms ('' when the store has no
# language model), summarize_after ('' likewise), the request's fingerprint ('' without a
# once key), payload... With a once key that holds an outcome, nothing is written: {-1} when
# that outcome is another request's, else the first append's {last_seq, owner, expires, 0, 0};
# a new append keeps its outcome there for ONCE_MS.
# Returns {last_seq, owner, expires_ms, arm_due_ms, fold}; last_seq 0 means the session belongs
# to another actor. arm_due_ms is non-zero when this append is the first of a quiet period (no
# schedule armed, or one reserved more than ARM_STALE ms before its due time passed: the
# function that reserved it died before arming it, since a schedule fires within a minute and a
# run re-arms or clears it): the caller arms one for that time. New messages also give a
# session whose extraction failed EXTRACTION_MAX_FAILURES times in a row a fresh start. fold is
# 1 when the session now holds more than summarize_after verbatim messages and no summarization
# was asked for yet (one asked for more than FOLD_REQUEST_STALE_MS ago counts as lost).
# A session's expiry only ever grows, across deletes too (a deleted session leaves its last
# expiry in `deleted_expires`), so every append of one session id has a distinct expiry: the
# index scripts below tell appends apart by it.
APPEND = lua(
    WRITES,
    """
local meta, messages, once = KEYS[1], KEYS[2], KEYS[3]
if once then
  local done = redis.call('GET', once)
  if done then
    local fp, last, owner, stamp = string.match(done, '^([^\\n]*)\\n([^,]*),([^,]*),([^,]*)$$')
    if fp ~= ARGV[6] then return {-1, '', 0, 0, 0} end
    return {tonumber(last), owner, stamp, 0, 0}
  end
end
local actor, now, expires = ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3])
local old_expiry = redis.call('HGET', meta, $expires_at)
if old_expiry and tonumber(old_expiry) <= now then
  redis.call('DEL', meta, messages)
  old_expiry = false
end
if not old_expiry then
  -- A new session, maybe on the tombstone of a deleted one: nothing of an earlier life stays.
  redis.call('HDEL', meta, $seq, $created_at, $actor_id, $summary, $read_seq,
    $folded_seq, $pending, $armed_due, $fold_requested, $requested_at, $failures,
    $last_run_at, $last_error)
end
local floor = old_expiry or redis.call('HGET', meta, $deleted_expires)
if floor and expires <= tonumber(floor) then expires = tonumber(floor) + 1 end
local owner = redis.call('HGET', meta, $actor_id)
if actor ~= '' then
  if owner and owner ~= actor then return {0, owner, 0, 0, 0} end
  if not owner then
    redis.call('HSET', meta, $actor_id, actor)
    owner = actor
  end
end
local n = #ARGV - 6
local last = redis.call('HINCRBY', meta, $seq, n)
for i = 1, n do
  local seq = last - n + i
  redis.call('ZADD', messages, seq, string.format('%d', seq) .. ':' .. ARGV[6 + i])
end
local stamp = string.format('%d', expires)
redis.call('HDEL', meta, $deleted_expires)
redis.call('HSETNX', meta, $created_at, ARGV[2])
redis.call('HSET', meta, $last_event_at, ARGV[2], $expires_at, stamp)
local arm = 0
if ARGV[4] ~= '' then
  local armed = redis.call('HGET', meta, $armed_due)
  if not armed or tonumber(armed) < now - $arm_stale_ms then
    arm = now + tonumber(ARGV[4])
    redis.call('HSET', meta, $armed_due, string.format('%d', arm))
  end
  if tonumber(redis.call('HGET', meta, $failures) or '0') >= $max_failures then
    redis.call('HSET', meta, $failures, '0')
  end
end
local fold = 0
if ARGV[5] ~= '' then
  local verbatim = last - tonumber(redis.call('HGET', meta, $folded_seq) or '0')
  local asked = redis.call('HGET', meta, $fold_requested)
  if verbatim > tonumber(ARGV[5]) and (not asked or tonumber(asked) < now - $fold_stale_ms) then
    redis.call('HSET', meta, $fold_requested, ARGV[2])
    fold = 1
  end
end
redis.call('PEXPIREAT', meta, stamp)
redis.call('PEXPIREAT', messages, stamp)
if once then
  redis.call('SET', once, ARGV[6] .. '\\n' .. string.format('%d', last) .. ',' .. (owner or '')
    .. ',' .. stamp, 'PX', $once_ms)
end
return {last, owner or '', stamp, arm, fold}
""",
)


PRUNE = lua(WRITES, PRUNE_EXPIRED + "return #expired\n")


# After an append: record the session's activity (ARGV[3] id, ARGV[4] its new expiry), unless
# a delete already covered that append (tombstone at or after this expiry). GT keeps a late
# touch of an older append from moving the session back in time. ARGV[5] '1': the session now
# has messages extraction has not read (the store has a language model). It completes the append,
# so it runs even when that append filled the database (FINISHES_WRITE).
TOUCH = lua(
    FINISHES_WRITE,
    PRUNE_EXPIRED
    + """
local tomb = redis.call('ZSCORE', KEYS[3], ARGV[3])
if tomb and tonumber(tomb) >= tonumber(ARGV[4]) then return #expired end
redis.call('ZADD', KEYS[1], 'GT', ARGV[1], ARGV[3])
redis.call('ZADD', KEYS[2], 'GT', ARGV[4], ARGV[3])
if ARGV[5] == '1' then redis.call('ZADD', KEYS[4], 'GT', ARGV[4], ARGV[3]) end
if tomb then redis.call('ZREM', KEYS[3], ARGV[3]) end
return #expired
""",
)


# After a delete of a session whose expiry was ARGV[4]: drop it from the indexes unless a
# newer incarnation of the session was indexed meanwhile, and leave a tombstone so that a
# touch of an append the delete removed cannot bring the entry back. It completes the delete.
FORGET = lua(
    FINISHES_WRITE,
    PRUNE_EXPIRED
    + """
local score = redis.call('ZSCORE', KEYS[2], ARGV[3])
if score and tonumber(score) <= tonumber(ARGV[4]) then
  redis.call('ZREM', KEYS[1], ARGV[3])
  redis.call('ZREM', KEYS[2], ARGV[3])
end
local unread = redis.call('ZSCORE', KEYS[4], ARGV[3])
if unread and tonumber(unread) <= tonumber(ARGV[4]) then redis.call('ZREM', KEYS[4], ARGV[3]) end
redis.call('ZADD', KEYS[3], 'GT', ARGV[4], ARGV[3])
return #expired
""",
)


# KEYS: meta, messages. Deletes both, keeping the expiry the session had as `deleted_expires`
# in a meta hash that lives until then (the floor for the next append's expiry); returns it.
DELETE = lua(
    WRITES,
    """
local expires = redis.call('HGET', KEYS[1], $expires_at)
if not expires then return '' end
redis.call('DEL', KEYS[1], KEYS[2])
redis.call('HSET', KEYS[1], $deleted_expires, expires)
redis.call('PEXPIREAT', KEYS[1], expires)
return expires
""",
)


# KEYS: meta. ARGV: field, value ('' = any). Deletes the field if it holds the value. It takes
# back a reservation of an append already made (FINISHES_WRITE).
RELEASE = lua(
    FINISHES_WRITE,
    """
local held = redis.call('HGET', KEYS[1], ARGV[1])
if held and (ARGV[2] == '' or held == ARGV[2]) then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 0
""",
)


# KEYS: meta, messages, lock. ARGV: recent, before ('' none). A session as one consistent read
# (an append between the metadata and the messages would show a count the messages disagree
# with): {the meta hash as a field, value list, its newest `recent` messages (of those whose seq
# is below `before`, when given) oldest first, 1 when a run holds the lock}.
READ = lua(
    READ_ONLY,
    """
local messages
if ARGV[2] == '' then
  messages = redis.call('ZRANGE', KEYS[2], -tonumber(ARGV[1]), -1)
else
  local newest = redis.call('ZREVRANGEBYSCORE', KEYS[2], '(' .. ARGV[2], '-inf', 'LIMIT', 0,
    tonumber(ARGV[1]))
  messages = {}
  for i = #newest, 1, -1 do messages[#messages + 1] = newest[i] end
end
return {redis.call('HGETALL', KEYS[1]), messages, redis.call('EXISTS', KEYS[3])}
""",
)


# KEYS: meta, messages. ARGV: after_seq, limit, most bytes. The session's meta hash (field,
# value list), its messages after after_seq (at most limit + 1, oldest first) and 1 when they
# were cut short, as one consistent read. They are cut before their stored bytes pass the most
# (at least one is given): a page carries more than that (escaped, with more fields), so the
# answer, cut to the same budget, never holds those past it.
EXPORT = lua(
    READ_ONLY,
    """
local found = redis.call('ZRANGEBYSCORE', KEYS[2], '(' .. ARGV[1], '+inf', 'LIMIT', 0,
  tonumber(ARGV[2]) + 1)
local most, total, kept = tonumber(ARGV[3]), 0, {}
for i, member in ipairs(found) do
  total = total + #member
  if i > 1 and total > most then return {redis.call('HGETALL', KEYS[1]), kept, 1} end
  kept[i] = member
end
return {redis.call('HGETALL', KEYS[1]), kept, 0}
""",
)


# KEYS: meta, messages. ARGV: now, created_at, actor ('' none), message_count, read_seq,
# folded_seq, last_event_at, expires_at, summary ('' none), failures, last_run_at ('' none),
# last_error ('' none), pending ('' none), arm delay ('' when the store has no language model),
# then seq, member pairs. Returns {1, message_count, expires_at, arm_due (0: none), added},
# {-1} when another live session holds the id, {-2, seq} when seq holds another message,
# {-3, actor} when the live session belongs to another actor.
IMPORT = lua(
    WRITES,
    """
local meta, messages = KEYS[1], KEYS[2]
local now = tonumber(ARGV[1])
local expiry = redis.call('HGET', meta, $expires_at)
if expiry and tonumber(expiry) > now and redis.call('HGET', meta, $seq) then
  if redis.call('HGET', meta, $created_at) ~= ARGV[2] then return {-1} end
  local held = redis.call('HGET', meta, $actor_id)
  if ARGV[3] ~= '' and held and held ~= ARGV[3] then return {-3, held} end
else
  local floor = redis.call('HGET', meta, $deleted_expires)
  if expiry and tonumber(expiry) > now then floor = expiry end
  redis.call('DEL', meta, messages)
  if floor and tonumber(ARGV[8]) <= tonumber(floor) then
    ARGV[8] = string.format('%d', tonumber(floor) + 1)
  end
end
for i = 15, #ARGV, 2 do
  local found = redis.call('ZRANGEBYSCORE', messages, ARGV[i], ARGV[i])
  if #found > 0 and found[1] ~= ARGV[i + 1] then return {-2, tonumber(ARGV[i])} end
end
local function grow(field, value)
  local kept = tonumber(redis.call('HGET', meta, field) or '0')
  if tonumber(value) > kept then redis.call('HSET', meta, field, value) end
  return math.max(kept, tonumber(value))
end
local read_before = tonumber(redis.call('HGET', meta, $read_seq) or '-1')
local folded_before = tonumber(redis.call('HGET', meta, $folded_seq) or '-1')
redis.call('HSET', meta, $created_at, ARGV[2])
if ARGV[3] ~= '' then redis.call('HSETNX', meta, $actor_id, ARGV[3]) end
local seq = grow($seq, ARGV[4])
local read = grow($read_seq, ARGV[5])
local folded = grow($folded_seq, ARGV[6])
grow($last_event_at, ARGV[7])
local expires = grow($expires_at, ARGV[8])
if tonumber(ARGV[6]) >= folded_before then
  if ARGV[9] ~= '' then redis.call('HSET', meta, $summary, ARGV[9])
  else redis.call('HDEL', meta, $summary) end
end
if tonumber(ARGV[5]) >= read_before then
  redis.call('HSET', meta, $failures, ARGV[10])
  for i, field in ipairs({$last_run_at, $last_error, $pending}) do
    if ARGV[10 + i] ~= '' then redis.call('HSET', meta, field, ARGV[10 + i])
    else redis.call('HDEL', meta, field) end
  end
end
local added = 0
for i = 15, #ARGV, 2 do
  if tonumber(ARGV[i]) > folded then
    added = added + redis.call('ZADD', messages, ARGV[i], ARGV[i + 1])
  end
end
redis.call('ZREMRANGEBYSCORE', messages, '-inf', folded)
redis.call('HDEL', meta, $deleted_expires)
local stamp = string.format('%d', expires)
redis.call('PEXPIREAT', meta, stamp)
if redis.call('EXISTS', messages) == 1 then redis.call('PEXPIREAT', messages, stamp) end
local arm = 0
if ARGV[14] ~= '' and read < seq then
  local armed = redis.call('HGET', meta, $armed_due)
  if not armed or tonumber(armed) < now - $arm_stale_ms then
    arm = now + tonumber(ARGV[14])
    redis.call('HSET', meta, $armed_due, string.format('%d', arm))
  end
end
return {1, seq, stamp, arm, added}
""",
)


# KEYS: meta, messages, lock, and the once key of a keyed pop when it has one. ARGV: now_ms, the
# request's fingerprint ('' without). With a once key that holds an outcome, nothing changes:
# {-2} when it is another request's, else the first pop's answer again. Takes back the
# session's newest message: returns
# {0} when there is no live session, {-1} while a background run holds the lock (it may be
# reading that message: its cursor would then pass over the message that takes the number),
# else {1, member ('' when no message is kept), message_count}. The number is given again: when
# the message was the last numbered one, the count goes back by one and the extraction cursor
# with it if it had read the message (what the background already drew from it stays); an
# answer pending for it is dropped (the run asks again). Expiry and last_event_at are kept.
POP = lua(
    WRITES,
    """
local meta, messages, once = KEYS[1], KEYS[2], KEYS[4]
if once then
  local done = redis.call('GET', once)
  if done then
    local fp, count, member = string.match(done, '^([^\\n]*)\\n([^\\n]*)\\n(.*)$$')
    if fp ~= ARGV[2] then return {-2} end
    return {1, member, tonumber(count)}
  end
end
local function answer(member, count)
  if once then
    redis.call('SET', once, ARGV[2] .. '\\n' .. string.format('%d', count) .. '\\n' .. member,
      'PX', $once_ms)
  end
  return {1, member, count}
end
local expiry = redis.call('HGET', meta, $expires_at)
local last = redis.call('HGET', meta, $seq)
if not last or not expiry or tonumber(expiry) <= tonumber(ARGV[1]) then return {0} end
if redis.call('EXISTS', KEYS[3]) == 1 then return {-1} end
last = tonumber(last)
local newest = redis.call('ZRANGE', messages, -1, -1, 'WITHSCORES')
if #newest == 0 then return answer('', last) end
local seq = tonumber(newest[2])
redis.call('ZREM', messages, newest[1])
local read = tonumber(redis.call('HGET', meta, $read_seq) or '0')
if read < seq then redis.call('HDEL', meta, $pending) end
if seq == last then
  last = seq - 1
  redis.call('HSET', meta, $seq, string.format('%d', last))
  if read > last then redis.call('HSET', meta, $read_seq, string.format('%d', last)) end
end
return answer(newest[1], last)
""",
)


# KEYS: meta. ARGV: expected read_seq, new read_seq, now_ms, life. Moves the extraction cursor
# and clears the pending answer; returns {moved (1/0), caught_up (1/0), expires_at}.
ADVANCE = lua(
    "",
    """
local read = tonumber(redis.call('HGET', KEYS[1], $read_seq) or '0')
if read ~= tonumber(ARGV[1]) or redis.call('HGET', KEYS[1], $created_at) ~= ARGV[4] then
  return {0, 0, 0}
end
redis.call('HSET', KEYS[1], $read_seq, ARGV[2])
redis.call('HDEL', KEYS[1], $pending)
local seq = tonumber(redis.call('HGET', KEYS[1], $seq) or '0')
local caught_up = 0
if seq <= tonumber(ARGV[2]) then caught_up = 1 end
return {1, caught_up, redis.call('HGET', KEYS[1], $expires_at) or '0'}
""",
)


# KEYS: meta, messages. ARGV: expected folded_seq, fold_to, summary, life. Replaces the summary
# and removes the folded messages in one step, if nothing else folded meanwhile and extraction
# has read them; returns 1 when done.
FOLD = lua(
    "",
    """
local folded = tonumber(redis.call('HGET', KEYS[1], $folded_seq) or '0')
local read = tonumber(redis.call('HGET', KEYS[1], $read_seq) or '0')
local to = tonumber(ARGV[2])
if folded ~= tonumber(ARGV[1]) or read < to then return 0 end
if redis.call('HGET', KEYS[1], $created_at) ~= ARGV[4] then return 0 end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', to)
redis.call('HSET', KEYS[1], $summary, ARGV[3], $folded_seq, ARGV[2])
return 1
""",
)


# KEYS: the store's unread set. ARGV: session id, the expiry the session had when extraction
# caught up. An append after that raised the score (expiries only grow), so it stays.
CAUGHT_UP = lua(
    "",
    """
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if score and tonumber(score) <= tonumber(ARGV[2]) then redis.call('ZREM', KEYS[1], ARGV[1]) end
return 0
""",
)


# KEYS: lock. ARGV: token. Releases the lock only if it is still ours.
UNLOCK = lua(
    "",
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
""",
)


# KEYS: meta. ARGV: life, 'set' or 'del', then field, value, ... ('set') or fields ('del').
# Changes the session's fields only while it is the same session (see above).
IF_LIVE = lua(
    "",
    """
if redis.call('HGET', KEYS[1], $created_at) ~= ARGV[1] then return 0 end
local rest = {}
for i = 3, #ARGV do rest[#rest + 1] = ARGV[i] end
if ARGV[2] == 'set' then redis.call('HSET', KEYS[1], unpack(rest))
else redis.call('HDEL', KEYS[1], unpack(rest)) end
return 1
""",
)
