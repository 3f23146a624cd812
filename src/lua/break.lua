-- SPDX-License-Identifier: BSD-3-Clause
-- break: an operator removes a stuck holder (src/lock/break.c, hilock break): only what it was
-- shown (hilock_inspect, moments before), compared here in the same step as the removal, and
-- the holder's aux records with it; waiters are woken as a release would wake them. The fence
-- counter is read (to report it) and never written: tokens keep growing.
-- KEYS[1] the key, KEYS[2] fence counter, KEYS[3] the plain lock's waiters marker, KEYS[4] its
--   signal list (also a semaphore's), KEYS[5] holder record (acquire.lua), KEYS[6] holder
--   records of the zset kinds (hash), KEYS[7] their waiters (zset), KEYS[8] fair queue (list),
--   KEYS[9] its beats (zset). Every key is in the key's slot.
-- ARGV[1] 'string' | 'zset': what was shown; ARGV[2] the string's whole value, or the zset's
--   kind marker ('hilock:sem', 'hilock:rw'); ARGV[3] one holder's token to remove ('' = all);
--   ARGV[4] zset, all: the live holders shown, '\n'-joined ('' = none); ARGV[5] the aux keys'
--   base (hl_aux_key(key, "")): BASE:xsignal, BASE:ssignal (rw), BASE:fs:TOKEN (a fair
--   waiter's own list); ARGV[6] ms a fair head's wake-up lives unclaimed
-- {1, removed, left, records, woken, fence}: removed (holders removed, live holders left,
--   aux records deleted, wake-ups sent; the fence counter's value or false)
-- {0, 0, 0, 0, 0, fence}: the key changed since it was shown: nothing removed
-- Every check (the comparison, the aux keys' types) runs before the first write: Redis does
-- not roll back a script.
if redis.replicate_commands then redis.replicate_commands() end   -- (3.2, 4.0: TIME, then writes)
local key, base = KEYS[1], ARGV[5]
local xsig, ssig = base .. ':xsignal', base .. ':ssignal'
local f = false
if redis.call('TYPE', KEYS[2])['ok'] == 'string' then f = redis.call('GET', KEYS[2]) end
local function changed() return {0, 0, 0, 0, 0, f} end

-- an aux key of another type was not written by hilock: refuse before any write
local want = { [3] = 'string', [4] = 'list', [5] = 'string', [6] = 'hash', [7] = 'zset', [8] = 'list', [9] = 'zset' }
for i = 3, 9 do
  local t = redis.call('TYPE', KEYS[i])['ok']
  if t ~= 'none' and t ~= want[i] then
    return redis.error_reply('ERR ' .. KEYS[i] .. ' holds a ' .. t .. ', not what hilock writes there: nothing removed')
  end
end
for _, k in ipairs({xsig, ssig}) do
  local t = redis.call('TYPE', k)['ok']
  if t ~= 'none' and t ~= 'list' then
    return redis.error_reply('ERR ' .. k .. ' holds a ' .. t .. ', not what hilock writes there: nothing removed')
  end
end

-- n elements on a wake-up list that keeps at most cap (permits.lua's push): each wakes one
-- blocked waiter; unclaimed, they lapse
local function push(list, n, cap)
  if n <= 0 or cap <= 0 then return 0 end
  for _ = 1, n do redis.call('RPUSH', list, '1') end
  redis.call('LTRIM', list, -cap, -1)
  redis.call('PEXPIRE', list, 1000)
  return math.min(n, cap)
end

if ARGV[1] == 'string' then
  if redis.call('TYPE', key)['ok'] ~= 'string' then return changed() end
  local cur = redis.call('GET', key)
  if cur ~= ARGV[2] then return changed() end
  local records, woken = 0, 0
  redis.call('DEL', key)
  -- the holder record, if it names this value: by its token (an older client's) or by its
  -- client's tag, the value's last 12 digits (acquire.lua); pcall: another type is not one
  local rec = redis.pcall('GET', KEYS[5])
  if type(rec) == 'string' and (string.sub(rec, 1, #cur + 1) == cur .. '\n' or
      (#cur == 32 and string.sub(rec, 1, 13) == string.sub(cur, 21) .. '\n')) then
    records = records + redis.call('DEL', KEYS[5])
  end
  -- a plain lock's waiters: release.lua's signal
  if redis.call('EXISTS', KEYS[3]) == 1 then
    redis.call('RPUSH', KEYS[4], '1')
    redis.call('LTRIM', KEYS[4], -1, -1)
    redis.call('PEXPIRE', KEYS[4], 1000)
    woken = woken + 1
  end
  -- a fair lock: the holder's own queue entry, if any, goes; the live head is called (fair.lua)
  records = records + redis.call('LREM', KEYS[8], 0, cur) + redis.call('ZREM', KEYS[9], cur)
  local head = redis.call('LINDEX', KEYS[8], 0)
  if head and redis.call('ZSCORE', KEYS[9], head) then
    local s = base .. ':fs:' .. head
    local st = redis.call('TYPE', s)['ok']
    if st == 'none' or st == 'list' then
      if st == 'none' then redis.call('RPUSH', s, '1') end
      redis.call('PEXPIRE', s, ARGV[6])
      woken = woken + 1
    end
  end
  return {1, 1, 0, records, woken, f}
end

-- the zset kinds (permits.lua): a semaphore's permits, a shared/exclusive lock's grants
local marker = ARGV[2]
if redis.call('TYPE', key)['ok'] ~= 'zset' or not redis.call('ZSCORE', key, marker) then return changed() end
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local live = {}
for _, m in ipairs(redis.call('ZRANGEBYSCORE', key, '(' .. now, '+inf')) do
  if m ~= marker then live[#live + 1] = m end
end
local records, removed, left = 0, 0, 0
if ARGV[3] ~= '' then
  local s = redis.call('ZSCORE', key, ARGV[3])
  if ARGV[3] == marker or not s or tonumber(s) <= now then return changed() end
  redis.call('ZREM', key, ARGV[3])
  records = redis.call('HDEL', KEYS[6], ARGV[3])
  removed = 1
  -- the expired go too, with their records (permits.lua's prune); the key with the last
  local gone = redis.call('ZRANGEBYSCORE', key, '-inf', now)
  if #gone > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', now)
    redis.call('HDEL', KEYS[6], unpack(gone))
  end
  left = redis.call('ZCARD', key) - 1
  if left <= 0 then
    left = 0
    redis.call('DEL', key, KEYS[6])
  else   -- the key and records last as long as the latest holder (permits.lua's keep_latest)
    local last = redis.call('ZREVRANGEBYSCORE', key, '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    local k = math.max(1, tonumber(last[2]) - now)
    redis.call('PEXPIRE', key, k)
    redis.call('PEXPIRE', KEYS[6], k)
  end
else
  local shown, n = {}, 0
  for m in string.gmatch(ARGV[4], '[^\n]+') do
    shown[m] = true
    n = n + 1
  end
  if n ~= #live then return changed() end
  for _, m in ipairs(live) do
    if not shown[m] then return changed() end
  end
  removed = #live
  if redis.call('EXISTS', KEYS[6]) == 1 then records = redis.call('HLEN', KEYS[6]) end
  redis.call('DEL', key, KEYS[6])
end

-- wake as permits.lua's release does: a semaphore one waiter per freed permit; an rw key that
-- no one holds any more one writer (its own, else a plain lock's), or with none every reader
local xw, sw = 0, 0
for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], '(' .. now, '+inf')) do
  if string.sub(w, 1, 2) == 'x:' then xw = xw + 1 else sw = sw + 1 end
end
local woken = 0
if marker == 'hilock:sem' then
  woken = push(KEYS[4], math.max(removed, 1), xw + sw)
elseif left == 0 then
  if xw > 0 then woken = push(xsig, 1, 1)
  elseif redis.call('EXISTS', KEYS[3]) == 1 then woken = push(KEYS[4], 1, 1)
  else woken = push(ssig, sw, sw) end
end
return {1, removed, left, records, woken, f}
