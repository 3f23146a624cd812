-- SPDX-License-Identifier: BSD-3-Clause
-- release: KEYS[1] lock; ARGV[1] our value
-- Optional wake-up (src/wait.c): KEYS[2] the signal list waiters block on (BLPOP), KEYS[3]
-- the marker a busy acquire sets while someone waits. Without them: a plain release.
-- ARGV[2] 'pass' (with the wake-up keys): a waiter giving up without the lock (src/kinds/
-- modern.c, give_up). The key may hold anything then (a shared/exclusive lock's sorted set
-- too). ARGV[3] > 0: it met readers, so its marker, which holds new readers off, is cut to
-- that many ms (the others' next attempts mark again), as its grant would have cut it. With
-- no holder, one element goes back to an awaited lock's list (the signal it took, if it was
-- woken); our own value (a grant whose answer was lost) is released as below.
-- 1: deleted; 0: no such key; -1: held by another value (or another kind)
local function signal()
  if KEYS[3] and redis.call('EXISTS', KEYS[3]) == 1 then
    -- one element wakes one waiter (the longest blocked); unclaimed, it expires. RPUSH then
    -- LTRIM (only when an unclaimed one was there), not DEL then RPUSH: in a slot being
    -- migrated away a key the script deleted is no longer local, and the server refuses the
    -- RPUSH after the lock is already gone
    if redis.call('RPUSH', KEYS[2], '1') > 1 then redis.call('LTRIM', KEYS[2], -1, -1) end
    redis.call('PEXPIRE', KEYS[2], 1000)
  end
end
if ARGV[2] == 'pass' then
  local cut = tonumber(ARGV[3]) or 0
  if cut > 0 and redis.call('PTTL', KEYS[3]) > cut then redis.call('PEXPIRE', KEYS[3], cut) end
  local t = redis.call('TYPE', KEYS[1])['ok']
  if t == 'none' then
    signal()
    return 0
  end
  if t ~= 'string' or redis.call('GET', KEYS[1]) ~= ARGV[1] then return -1 end
end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1])   -- (the holder record lapses by itself: acquire.lua)
  signal()
  return 1
end
if cur then return -1 end
return 0
