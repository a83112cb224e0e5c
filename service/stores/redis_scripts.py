"""Lua scripts of the Redis stores (the bounded map, the job board's admission): each runs
atomically inside Redis."""

from __future__ import annotations

# KEYS: lru (zset id -> use tick), exp (zset id -> deadline ms), size (hash id -> bytes),
#       meta (hash: bytes, evictions, tick).
# ARGV[1]: the prefix of value keys, ARGV[2]: now in ms (the callers' wall clock).
# Values live under prefix..id (a string, or a list for transcripts) with a Redis expiry of the
# same TTL, so Redis frees an abandoned entry by itself; the exp zset mirrors those deadlines
# so that the byte and entry accounting is corrected (`purge`) before every operation.
PRELUDE = """
local lru, exp, size, meta = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local prefix = ARGV[1]
local now = tonumber(ARGV[2])

local function present(id)
  return redis.call('ZSCORE', lru, id) ~= false
end

local function drop(id)
  redis.call('DEL', prefix .. id)
  local n = tonumber(redis.call('HGET', size, id) or '0')
  redis.call('HDEL', size, id)
  redis.call('ZREM', lru, id)
  redis.call('ZREM', exp, id)
  redis.call('HINCRBY', meta, 'bytes', -n)
end

local function evicted(id)
  drop(id)
  redis.call('HINCRBY', meta, 'evictions', 1)
end

local function purge()
  for _, id in ipairs(redis.call('ZRANGEBYSCORE', exp, '-inf', now)) do
    evicted(id)
  end
end

local function touch(id)
  redis.call('ZADD', lru, redis.call('HINCRBY', meta, 'tick', 1), id)
end

local function shrink(max_entries, max_bytes)
  while redis.call('ZCARD', lru) > max_entries
      or tonumber(redis.call('HGET', meta, 'bytes') or '0') > max_bytes do
    local oldest = redis.call('ZRANGE', lru, 0, 0)[1]
    if oldest == nil then break end
    evicted(oldest)
  end
end

local function expire_at(id, ttl)
  if ttl > 0 then
    redis.call('PEXPIRE', prefix .. id, ttl)
    redis.call('ZADD', exp, now + ttl, id)
  else
    redis.call('PERSIST', prefix .. id)
    redis.call('ZREM', exp, id)
  end
end
"""

# ARGV[3] id, [4] value, [5] nbytes, [6] ttl ms, [7] max entries, [8] max bytes -> 1 kept, 0 not.
PUT = (
    PRELUDE
    + """
local id, value, nbytes = ARGV[3], ARGV[4], tonumber(ARGV[5])
local ttl, max_entries, max_bytes = tonumber(ARGV[6]), tonumber(ARGV[7]), tonumber(ARGV[8])
if present(id) then drop(id) end
purge()
if nbytes > max_bytes then
  redis.call('HINCRBY', meta, 'evictions', 1)
  return 0
end
redis.call('SET', prefix .. id, value)
expire_at(id, ttl)
redis.call('HSET', size, id, nbytes)
redis.call('HINCRBY', meta, 'bytes', nbytes)
touch(id)
shrink(max_entries, max_bytes)
if present(id) then return 1 end
return 0
"""
)

# ARGV[3] id, [4] added bytes, [5] ttl ms, [6] max entries, [7] max bytes, [8] header ('' for
# none; pushed first, and counted, only when the list is new), [9...] items.
# The transcript grows in place (RPUSH); its TTL restarts at every append.
APPEND = (
    PRELUDE
    + """
local id, added = ARGV[3], tonumber(ARGV[4])
local ttl, max_entries, max_bytes = tonumber(ARGV[5]), tonumber(ARGV[6]), tonumber(ARGV[7])
local header = ARGV[8]
purge()
local old = 0
local new = not present(id)
if not new then old = tonumber(redis.call('HGET', size, id) or '0') end
if new and header ~= '' then added = added + #header end
if old + added > max_bytes then
  -- As in memory: the transcript that no longer fits is dropped whole.
  if present(id) then drop(id) end
  redis.call('HINCRBY', meta, 'evictions', 1)
  return 0
end
if new and header ~= '' then redis.call('RPUSH', prefix .. id, header) end
for i = 9, #ARGV, 1000 do
  redis.call('RPUSH', prefix .. id, unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
expire_at(id, ttl)
redis.call('HSET', size, id, old + added)
redis.call('HINCRBY', meta, 'bytes', added)
touch(id)
shrink(max_entries, max_bytes)
if present(id) then return 1 end
return 0
"""
)

# ARGV[3] id, [4] mode: 'string' (the value), 'list' ({'', items...}), 'head' ({'', first
# item} or {''}), 'tail' ({'', items from index ARGV[5] on}) or 'exists' (1).
# A hit refreshes the entry as most recently used; a miss is false.
GET = (
    PRELUDE
    + """
local id, mode = ARGV[3], ARGV[4]
purge()
if not present(id) then return false end
local key = prefix .. id
if mode == 'string' then
  local value = redis.call('GET', key)
  if value == false then
    -- Redis expired the value a moment before our deadline did.
    evicted(id)
    return false
  end
  touch(id)
  return value
end
touch(id)
if mode == 'exists' then return 1 end
local first, last = 0, -1
if mode == 'head' then last = 0 end
if mode == 'tail' then first = tonumber(ARGV[5]) end
local items = redis.call('LRANGE', key, first, last)
table.insert(items, 1, '')
return items
"""
)

# ARGV[3] id, [4] new head, [5] max entries, [6] max bytes -> 1 set, 0 absent.
# Replaces the list's first entry if it is a header (a leading zero byte), else pushes the head.
SET_HEAD = (
    PRELUDE
    + """
local id, head = ARGV[3], ARGV[4]
local max_entries, max_bytes = tonumber(ARGV[5]), tonumber(ARGV[6])
purge()
if not present(id) then return 0 end
local key = prefix .. id
local first = redis.call('LINDEX', key, 0)
local delta = #head
if first and string.byte(first, 1) == 0 then
  redis.call('LSET', key, 0, head)
  delta = delta - #first
else
  redis.call('LPUSH', key, head)
end
redis.call('HINCRBY', size, id, delta)
redis.call('HINCRBY', meta, 'bytes', delta)
touch(id)
shrink(max_entries, max_bytes)
if present(id) then return 1 end
return 0
"""
)

# ARGV[3] id, [4] the entry -> 1 removed, 0 absent (no such list, or no such entry).
REMOVE_ENTRY = (
    PRELUDE
    + """
local id, entry = ARGV[3], ARGV[4]
purge()
if not present(id) then return 0 end
if redis.call('LREM', prefix .. id, 1, entry) == 0 then return 0 end
redis.call('HINCRBY', size, id, -#entry)
redis.call('HINCRBY', meta, 'bytes', -#entry)
touch(id)
return 1
"""
)

# ARGV[3] id -> 1 removed, 0 absent.
DELETE = (
    PRELUDE
    + """
purge()
if not present(ARGV[3]) then return 0 end
drop(ARGV[3])
return 1
"""
)

# -> {entries, bytes, evictions}
OCCUPANCY = (
    PRELUDE
    + """
purge()
return {
  redis.call('ZCARD', lru),
  tonumber(redis.call('HGET', meta, 'bytes') or '0'),
  tonumber(redis.call('HGET', meta, 'evictions') or '0'),
}
"""
)

# The job board. KEYS: index (zset id -> lease deadline ms), sizes (hash id -> bytes), the job's
# view key. ARGV[1]: now in ms. Jobs whose lease ran out (their core died) leave the index first;
# their view keys expire by themselves (PX).
JOBS_PRELUDE = """
local index, sizes, view_key = KEYS[1], KEYS[2], KEYS[3]
local now = tonumber(ARGV[1])
for _, dead in ipairs(redis.call('ZRANGEBYSCORE', index, '-inf', now)) do
  redis.call('ZREM', index, dead)
  redis.call('HDEL', sizes, dead)
end
"""

# ARGV[2] id, [3] view, [4] nbytes, [5] lease ms, [6] max jobs, [7] max bytes
# -> 0 admitted, 1 too many jobs, 2 over the byte budget.
ADMIT_JOB = (
    JOBS_PRELUDE
    + """
local id, view, nbytes, lease = ARGV[2], ARGV[3], tonumber(ARGV[4]), tonumber(ARGV[5])
local max_jobs, max_bytes = tonumber(ARGV[6]), tonumber(ARGV[7])
if redis.call('ZCARD', index) >= max_jobs then return 1 end
local total = nbytes
for _, n in ipairs(redis.call('HVALS', sizes)) do total = total + tonumber(n) end
if total > max_bytes then return 2 end
redis.call('SET', view_key, view, 'PX', lease)
redis.call('ZADD', index, now + lease, id)
redis.call('HSET', sizes, id, nbytes)
return 0
"""
)

# ARGV[2] id, [3] view, [4] lease ms -> 1 updated, 0 not admitted (or its lease ran out).
POST_JOB = (
    JOBS_PRELUDE
    + """
local id, view, lease = ARGV[2], ARGV[3], tonumber(ARGV[4])
if redis.call('ZSCORE', index, id) == false then return 0 end
redis.call('SET', view_key, view, 'PX', lease)
redis.call('ZADD', index, now + lease, id)
return 1
"""
)
