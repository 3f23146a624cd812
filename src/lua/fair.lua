-- SPDX-License-Identifier: BSD-3-Clause
-- fair: the fair lock's queue (src/fair.c, docs/fairness.md). Every key is in the lock key's slot.
-- KEYS[1] lock, KEYS[2] queue (list of waiters' tokens, oldest first), KEYS[3] beats (zset:
-- token -> server ms when its entry lapses), KEYS[4] fence counter, KEYS[5] our signal list
-- ARGV[1] 'acquire' | 'release' | 'leave', ARGV[2] our token, ARGV[3] ms an entry lives after
-- its waiter's last call, ARGV[4] the signal lists' prefix (a waiter's list: prefix .. token)
-- acquire: ARGV[5] ttl ms, ARGV[6] ms to keep the counter, ARGV[7] '1' = we will wait,
--   ARGV[8] ms to keep a counter that holds an epoch (at or above 2^42: a Redlock's token),
--   ARGV[9] '1' = the server has LPOS (6.0.6+), '0' = find our place by LRANGE
--   an error naming the fence counter: it is at or above 2^53 - 1 (nothing written)
--   {1, fence}: granted; {0, pttl, ahead}: busy (pttl: the holder's, or while the key is free
--   for the head, how long the head's entry lives; ahead: waiters before us, or when we are
--   not queued, -1 - the queue's length)
-- release: 1 deleted (the head is called), 0 no such key, -1 another value
-- leave: 1 (our entry, if any, is gone)
-- Time is the server's (TIME), never a client's clock. Every command that can fail (WRONGTYPE)
-- runs before the first write: Redis does not roll back a script.
local lock, queue, beats, fence, mine = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5]
local op, tok, life, prefix = ARGV[1], ARGV[2], tonumber(ARGV[3]), ARGV[4]
-- Redis 3.2 and 4.0 let a script write after TIME only once it asked for effects replication
-- (5.0+ does by default; the call is still there, a no-op, up to 7.x and Valkey 8)
if redis.replicate_commands then redis.replicate_commands() end
local cur = redis.call('GET', lock)
local c = redis.call('GET', fence)
local last = tonumber(c) or 0
if last ~= last then last = 0 end   -- NaN: not a number, replaced by the clock as one
-- an acquire on a counter at or above 2^53 - 1 is refused before anything is written (pruning
-- included): the token after it would not be exact as a Lua number (acquire.lua,
-- docs/fencing.md). tonumber rounds a larger value, but monotonically, and 2^53 - 1 is exact.
if op == 'acquire' and last >= 9007199254740991 then
  if #c > 40 then c = string.sub(c, 1, 40) .. '...' end
  return redis.error_reply('ERR fence counter ' .. fence .. ' holds ' .. c ..
                           ', at or above 2^53 - 1: no exact token after it; refused')
end
local qlen = redis.call('LLEN', queue) + redis.call('ZCARD', beats) + redis.call('LLEN', mine)
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- entries whose waiter went silent (died, froze, gave up) leave; so does a head without one
for _, d in ipairs(redis.call('ZRANGEBYSCORE', beats, '-inf', now)) do
  redis.call('LREM', queue, 0, d)
  redis.call('ZREM', beats, d)
end
local head = redis.call('LINDEX', queue, 0)
while head and not redis.call('ZSCORE', beats, head) do
  redis.call('LPOP', queue)
  head = redis.call('LINDEX', queue, 0)
end

-- where who stands in the queue (0: the head), false if not in it
local function place(who)
  if ARGV[9] ~= '0' then return redis.call('LPOS', queue, who) end
  for i, x in ipairs(redis.call('LRANGE', queue, 0, -1)) do
    if x == who then return i - 1 end
  end
  return false
end

local function drop(who)
  redis.call('LREM', queue, 0, who)
  redis.call('ZREM', beats, who)
  head = redis.call('LINDEX', queue, 0)
end

-- wake who: one element at most on its own list; it lapses
local function wake(who)
  local s = prefix .. who
  if redis.call('LLEN', s) == 0 then redis.call('RPUSH', s, '1') end
  redis.call('PEXPIRE', s, life)
end

-- the key is free and a waiter heads the queue: wake it
local function call_head()
  if head and head ~= tok and redis.call('EXISTS', lock) == 0 then wake(head) end
end

if op == 'release' then
  if cur ~= tok then return cur and -1 or 0 end
  redis.call('DEL', lock)
  call_head()
  return 1
end
if op == 'leave' then
  redis.call('DEL', mine)
  drop(tok)
  call_head()
  return 1
end

if cur ~= tok and (cur or (head and head ~= tok)) then
  local queued = redis.call('ZSCORE', beats, tok)
  if ARGV[7] == '1' then
    if not queued then redis.call('RPUSH', queue, tok) end
    redis.call('ZADD', beats, now + life, tok)
    -- the keys last as long as the longest-lived entry, not the last writer's (waiters' options,
    -- hence lives, may differ)
    local keep = math.max(1, tonumber(redis.call('ZRANGE', beats, -1, -1, 'WITHSCORES')[2]) - now)
    redis.call('PEXPIRE', queue, keep)
    redis.call('PEXPIRE', beats, keep)
  elseif queued then   -- our wait is over: leave now rather than lapse
    redis.call('DEL', mine)
    drop(tok)
  end
  local ahead = place(tok) or (-1 - redis.call('LLEN', queue))
  if cur then return {0, redis.call('PTTL', lock), ahead} end
  call_head()
  return {0, math.max(1, tonumber(redis.call('ZSCORE', beats, head)) - now), ahead}
end

-- ours: free with nobody ahead, or already ours (a retry after a lost reply)
if cur == tok then redis.call('PEXPIRE', lock, ARGV[5])
else redis.call('SET', lock, tok, 'PX', ARGV[5]) end
if qlen > 0 then
  redis.call('DEL', mine)
  drop(tok)
  -- the next waiter heads the queue now. It may be in a long pause (a waiter behind the head
  -- beats once per lease, fair.c) that ends after this grant expires, if the holder never
  -- releases: then it is woken now, and its next attempt learns our expiry (a ttl longer than
  -- its entry's life, which outlasts its pause, needs no call)
  local lapse = head and tonumber(redis.call('ZSCORE', beats, head))
  if lapse and lapse - now > tonumber(ARGV[5]) then wake(head) end
end
-- the fencing token never goes back: counter + 1, but at least the server clock in ms
local f = math.max(last + 1, now)
-- as acquire.lua: a counter with an epoch in it lives far longer, and no grant shortens it
-- (a PTTL of -1 or -2 loses to ARGV[8])
local keep = string.format('%.0f', tonumber(ARGV[6]) + f - now)   -- + its lead over the clock (acquire.lua)
if f >= 4398046511104 then   -- 2^42
  keep = string.format('%.0f', math.max(tonumber(ARGV[8]), redis.call('PTTL', fence)))
end
redis.call('SET', fence, string.format('%.0f', f), 'PX', keep)
return {1, f}
