-- SPDX-License-Identifier: BSD-3-Clause
-- permits: the sorted-set kinds (src/kinds/permits.c, docs/semaphore.md, docs/rwlock.md): a
-- semaphore's permits and a shared/exclusive lock's grants. Every key is in the lock key's slot.
-- KEYS[1] the key: a sorted set of the holders' tokens, each scored with its expiry in ms by
--   this server's clock, and one marker naming the kind ('hilock:sem' or 'hilock:rw'), scored
--   +inf; it expires with its latest holder and is deleted when its last holder leaves
-- KEYS[2] holder records (hash: token -> "since\nlimit\nhost\npid\nprogram", for inspect)
-- KEYS[3] waiters (sorted set: token -> when its registration lapses; rw tokens carry their
--   mode: "x:..." exclusive, "s:..." shared)
-- KEYS[4] fence counter (the modern lock's: tokens grow across every kind of the key)
-- KEYS[5] the plain lock's waiters marker (acquire.lua: a plain-lock writer waits on an rw key)
-- release and leave only: KEYS[6] the wake-up list of permits (sem) or of writers (rw), KEYS[7] readers'
--   (rw), KEYS[8] the plain lock's signal list (rw); acquire only: KEYS[6] the wake-up list this
--   waiter blocks on (permits', writers' or readers'), KEYS[7] the watch (a string: "<token>
--   <lease end, this server's ms> <full lease ms>", wait.c), KEYS[8] (a writer's) the readers'
--   wake-up list
-- ARGV[1] 'acquire' | 'release' | 'extend' | 'check' | 'leave', ARGV[2] 'sem' | 'x' | 's',
-- ARGV[3] our token (the member)
-- acquire: ARGV[4] ttl ms, ARGV[5] limit (shared: the most holders at once), ARGV[6] ms a
--   waiter stays registered (0: no wait follows), ARGV[7] ms to keep the counter, ARGV[8] ms to
--   keep a counter that holds an epoch (at or above 2^42), ARGV[9] "host\npid\nprogram",
--   ARGV[10] '1' = an earlier attempt may have registered us as a waiter, '2' = that, and no
--   release signal ended the wait before this attempt (our own poll); with ARGV[6] 0 (the
--   wait's last attempt) a busy answer is also our leave (below), ARGV[11] > 0 (one
--   master, a waiter that blocks): the watch's lease in ms, of which ARGV[12] is the full
--   lease (3 x poll_ms; ARGV[11] may be less: what is left of the wait)
--   {1, fence}: granted (also when the token is already a holder: a retry after a lost reply)
--   an error naming the fence counter: it is at or above 2^53 - 1 (nothing written)
--   {0, pttl, {why, held, limit}}: busy; pttl: until the first holder expires (the hint);
--   why: 0 permits all held, 1 held exclusive, 2 held shared, 3 held shared and a writer
--   waits, 4 a plain lock's writer waits (held: the shared holders, -1 when none), 5 a plain
--   lock holds the key; with ARGV[11] > 0, {0, pttl, {why, held, limit}, left}: left 0, this
--   waiter keeps the watch (it polls every poll_ms), else the ms left of the one that keeps it
-- extend: ARGV[4] the new ttl ms; 1 extended, 0 not a holder (expired, released), -1 the key
--   holds another kind now
-- release: 1 released (waiters woken), 0 not a holder, -1 the key holds another kind now
-- check: {1, pttl} a holder, {0, -2} not one, {-1, pttl} the key holds another kind now
-- leave: 1 (our registration as a waiter, if any, is gone; a writer's wakes the readers it
--   held off)
-- The key expires with its latest holder (a grant, an extend and a release set it again). Waiters count while their registration lives;
-- lapsed ones are removed when a waiter registers.
-- Time is the server's (TIME), never a client's clock. The commands that can fail on the key
-- and the fence counter (WRONGTYPE) run before the first write: Redis does not roll back a
-- script. (The aux keys are assumed to be ours: one of another type under {KEY}:holders,
-- :wq, :watch or a signal list makes a later command fail after a write.) A key of another
-- kind is refused with WRONGTYPE (src/lock/lock.c names what it holds: types.lua), except
-- that a shared/exclusive request treats a plain lock (a string) as an exclusive holder.
-- Redis 3.2 and 4.0 let a script write after TIME only once it asked for effects replication
-- (5.0+ does by default; the call is still there, a no-op, up to 7.x and Valkey 8)
if redis.replicate_commands then redis.replicate_commands() end
local key, holders, wq, fence = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local op, mode, tok = ARGV[1], ARGV[2], ARGV[3]
local marker = mode == 'sem' and 'hilock:sem' or 'hilock:rw'
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local wrongtype = 'WRONGTYPE Operation against a key holding the wrong kind of value'

-- what the key holds: 'ours' (this kind), 'none', 'lock' (a string), 'other'; one command
-- on the usual path (an acquire most often finds no key, the others their own kind)
local found
local function by_type()
  local kt = redis.call('TYPE', key)['ok']
  if kt == 'zset' then return redis.call('ZSCORE', key, marker) and 'ours' or 'other' end
  return (kt == 'none' and 'none') or (kt == 'string' and 'lock') or 'other'
end
if op == 'acquire' then found = by_type()
elseif type(redis.pcall('ZSCORE', key, marker)) == 'string' then found = 'ours'
else found = by_type() end

if op == 'check' then   -- reads only: an expired holder is not one, pruned or not
  if found == 'none' then return {0, -2} end
  if found ~= 'ours' then return {-1, redis.call('PTTL', key)} end
  local s = tonumber(redis.call('ZSCORE', key, tok))
  if s and s > now then return {1, s - now} end
  return {0, -2}
end

-- holders whose expiry has passed leave, with their records
local function prune()
  local gone = redis.call('ZRANGEBYSCORE', key, '-inf', now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    redis.call('HDEL', holders, unpack(gone))
  end
end

-- how many holders are left (the marker excluded); the key goes with the last
local function left()
  local n = redis.call('ZCARD', key) - 1
  if n <= 0 then redis.call('DEL', key, holders) end
  return n
end

-- the key and the records last as long as the latest holder (ms from now: its keep). A
-- whole number below 2^53 goes to Redis as its digits (a number argument is written %.17g),
-- cheaper than string.format.
local function keep(ms)
  local k = math.max(1, ms)
  redis.call('PEXPIRE', key, k)
  redis.call('PEXPIRE', holders, k)
end

-- ... set after the latest holder left, extended or was given back: a key that outlived its
-- holders would hold a plain lock off (acquire.lua takes an rw key as held) with no one in it
local function keep_latest()
  local last = redis.call('ZREVRANGEBYSCORE', key, '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
  keep(tonumber(last[2]) - now)
end

-- live waiters: all of them (a semaphore's), or writers and readers (rw: "x:", "s:")
local function waiting()
  if mode == 'sem' then return redis.call('ZCOUNT', wq, '(' .. now, '+inf') end
  local x, s = 0, 0
  for _, w in ipairs(redis.call('ZRANGEBYSCORE', wq, '(' .. now, '+inf')) do
    if string.sub(w, 1, 2) == 'x:' then x = x + 1 else s = s + 1 end
  end
  return x, s
end

-- n elements on a wake-up list, which keeps at most cap (the live waiters): each element wakes
-- one blocked waiter; unclaimed, they lapse. RPUSH then LTRIM, not DEL then RPUSH (release.lua)
local function push(list, n, cap)
  if n <= 0 or cap <= 0 then return end
  for _ = 1, n do redis.call('RPUSH', list, '1') end
  redis.call('LTRIM', list, -cap, -1)
  redis.call('PEXPIRE', list, 1000)
end

-- a release: a semaphore wakes one waiter per freed permit; an rw key that no one holds any
-- more wakes one writer (ours, else a plain lock's), or, with no writer waiting, every reader
local function wake(left)
  if mode == 'sem' then return push(KEYS[6], 1, waiting()) end
  if left > 0 then return end
  local x, s = waiting()
  if x > 0 then return push(KEYS[6], 1, 1) end
  if redis.call('EXISTS', KEYS[5]) == 1 then return push(KEYS[8], 1, 1) end
  push(KEYS[7], s, s)
end

-- a waiter leaves (registered: ARGV[10] ~= '0'). A writer that gives up held new readers off:
-- with no writer left waiting (ours or a plain lock's) and no exclusive holder, the readers it
-- kept waiting are woken (on the list `readers`), not left to poll
local function leave(readers)
  redis.call('ZREM', wq, tok)
  if mode == 'x' and found == 'ours' and readers then
    local first = redis.call('ZRANGE', key, 0, 0)[1] or ''
    local x, s = waiting()
    if x == 0 and string.sub(first, 1, 2) ~= 'x:' and redis.call('EXISTS', KEYS[5]) == 0 then
      push(readers, s, s)
    end
  end
end

if op == 'leave' then
  leave(KEYS[7])
  return 1
end
if op == 'release' or op == 'extend' then
  if found == 'none' then return 0 end
  if found ~= 'ours' then return -1 end
  prune()
  if op == 'extend' then
    if not redis.call('ZSCORE', key, tok) then
      left()
      return 0
    end
    redis.call('ZADD', key, 'XX', now + tonumber(ARGV[4]), tok)
    keep_latest()
    return 1
  end
  local mine = redis.call('ZREM', key, tok) == 1
  local held = left()
  if not mine then return 0 end
  if held > 0 then
    redis.call('HDEL', holders, tok)
    keep_latest()
  end
  wake(held)
  return 1
end

-- acquire
if found == 'other' or (found == 'lock' and mode == 'sem') then
  return redis.error_reply(wrongtype)
end
local c = redis.call('GET', fence)   -- (WRONGTYPE here: before any write)
local last = tonumber(c) or 0
if last ~= last then last = 0 end   -- NaN: not a number, replaced by the clock as one
-- a counter at or above 2^53 - 1 is refused, before any write: the token after it would not
-- be exact as a Lua number (acquire.lua, docs/fencing.md). tonumber rounds a larger value,
-- but monotonically, and 2^53 - 1 is exact: the compare is exact.
if last >= 9007199254740991 then
  if #c > 40 then c = string.sub(c, 1, 40) .. '...' end
  return redis.error_reply('ERR fence counter ' .. fence .. ' holds ' .. c ..
                           ', at or above 2^53 - 1: no exact token after it; refused')
end
local ttl, limit, mark = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6]) or 0
local held = 0
if found == 'ours' then
  prune()
  held = left()
end
local first = held > 0 and redis.call('ZRANGE', key, 0, 0, 'WITHSCORES') or {}
local pttl = held > 0 and math.max(1, tonumber(first[2]) - now) or 0
local again = held > 0 and redis.call('ZSCORE', key, tok)
local why = nil
if again then why = nil
elseif found == 'lock' then why, held, pttl = 5, 1, redis.call('PTTL', key)
elseif mode == 'sem' then if held >= limit then why = 0 end
elseif held > 0 and string.sub(first[1], 1, 2) == 'x:' then why = 1
elseif mode == 'x' then if held > 0 then why = 2 end
elseif held >= limit then why = 2
elseif waiting() > 0 then why = 3   -- (the writers)
elseif redis.call('EXISTS', KEYS[5]) == 1 then
  why = 4
  if held == 0 then held, pttl = -1, math.max(1, redis.call('PTTL', KEYS[5])) end
end
-- the watch (wait.c; acquire.lua's, with this server's clock): one waiter polls, the rest block
-- through its lease. The record is ours if it names us, if its lease ran out (it expires with
-- it), if our full lease is shorter (a waiter that polls more often keeps it), or, as long,
-- if we ask exclusive and a reader keeps it (a free key goes to a writer first: a reader that
-- watched would find it free and still be refused). Returns the ms another keeps it, or 0.
local function watch(lease)
  local full = tonumber(ARGV[12])
  local who, till, len = string.match(redis.call('GET', KEYS[7]) or '', '^(%S+) (%d+) (%d+)$')
  till, len = tonumber(till) or 0, tonumber(len) or 0
  if who == tok or till <= now or full < len or
     (mode == 'x' and full == len and string.sub(who, 1, 2) == 's:') then
    redis.call('SET', KEYS[7], tok .. ' ' .. (now + lease) .. ' ' .. full, 'PX', lease)
    return 0
  end
  return till - now
end

if why then
  local lease, left = tonumber(ARGV[11]) or 0, nil
  if mark > 0 then
    if lease > 0 then left = watch(lease) end
    -- (a waiter behind another's watch blocks up to its lease more: registered that much longer)
    redis.call('ZREMRANGEBYSCORE', wq, '-inf', now)
    redis.call('ZADD', wq, now + mark + ((left or 0) > 0 and lease or 0), tok)
    local lapse = redis.call('ZRANGE', wq, -1, -1, 'WITHSCORES')
    redis.call('PEXPIRE', wq, math.max(1, tonumber(lapse[2]) - now))
  elseif ARGV[10] ~= '0' then   -- the wait's last attempt: we leave with it (no leave call)
    leave(KEYS[8])
  end
  if left then return {0, pttl, {why, held, limit}, left} end
  return {0, pttl, {why, held, limit}}
end

-- granted (or already ours: a retry after a lost reply); the marker with the first holder
if held <= 0 then redis.call('ZADD', key, '+inf', marker, now + ttl, tok)
else redis.call('ZADD', key, now + ttl, tok) end
if ARGV[10] ~= '0' then redis.call('ZREM', wq, tok) end
-- a grant by our own poll (ARGV[10] '2'): whatever freed the key signalled no one (a plain
-- lock's release knows no readers; an operator's DEL), and the other waiters block through
-- the watch's lease. Those that can hold beside us are woken now: readers when no writer
-- (ours or a plain lock's) waits, a semaphore's waiters up to the permits left.
if ARGV[10] == '2' and not again then
  if mode == 'sem' then
    local n = math.min(limit - held - 1, waiting())
    push(KEYS[6], n, n)
  elseif mode == 's' then
    local x, s = waiting()
    if x == 0 and redis.call('EXISTS', KEYS[5]) == 0 then push(KEYS[6], s, s) end
  end
end
redis.call('HSET', holders, tok, now .. '\n' .. (mode == 'sem' and limit or 0) .. '\n' .. ARGV[9])   -- (13 digits)
if held <= 0 or redis.call('PTTL', key) < ttl then keep(ttl) end
-- the fencing token never goes back: counter + 1, but at least the server clock in ms, with
-- acquire.lua's rules for its expiry: a counter at or behind the clock is set to it; one with
-- an epoch in it lives far longer, never shortened; one ahead of the clock keeps its expiry
-- across INCR, renewed every 1024th grant for ttl + 1 hour plus its lead
local f = last + 1
if f <= now then
  f = now
  redis.call('SET', fence, string.format('%.0f', f), 'PX', tonumber(ARGV[7]))
else
  if type(redis.pcall('INCR', fence)) ~= 'number' then   -- (a number INCR cannot take)
    redis.call('SET', fence, string.format('%.0f', f), 'PX', tonumber(ARGV[7]))
  elseif f >= 4398046511104 then   -- 2^42
    redis.call('PEXPIRE', fence, math.max(tonumber(ARGV[8]), redis.call('PTTL', fence)))
  elseif f % 1024 == 0 then
    redis.call('PEXPIRE', fence, tonumber(ARGV[7]) + f - now)
  end
end
return {1, f}
