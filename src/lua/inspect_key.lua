#!lua flags=no-writes
-- SPDX-License-Identifier: BSD-3-Clause
-- inspect_key: a lock key and its aux keys (src/inspect.c); the flag refuses any write.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] waiters marker, KEYS[4] signal list
-- KEYS[5] holder record (acquire.lua), KEYS[6] the holder records of a semaphore's or
-- shared/exclusive lock's holders (a hash), KEYS[7] their waiters (a sorted set)
-- ARGV[1] value bytes to return (>= 1), ARGV[2] holders to return at most
-- {type, pttl, first bytes of a string (else the kind marker of a semaphore or shared/
--  exclusive lock: a sorted set holding 'hilock:sem' or 'hilock:rw'; else nil), strlen or -1,
--  fence counter (else nil), its pttl, the waiters marker's pttl, elements in the signal list,
--  the holder record as "since\nhost\npid\nprogram": only if it names the lock's value now
--  (else nil: a record of an earlier grant or of another client, or none). A record
--  "tag\nhost\npid\nprogram" (acquire.lua) names a value of 32 digits ending with its tag;
--  since is then the fence counter, the holder's token, which is this server's clock in ms
--  at the grant unless the key was granted faster than once a millisecond: '' (unknown)
--  when it is ahead of the clock now. An older client's record "token\nsince\n..." names
--  its token, and says its since,
--  then for a marked sorted set (else 0, 0, 0, {}): its live holders, its live waiters, how
--  many of those ask exclusive ('x:' tokens), and {token, ms left, holder record or nil, ...}
--  of the first ARGV[2] live holders by expiry}
-- Live: scored after now by this server's clock (TIME: read-only here, so every version
-- takes it); the marker, scored +inf, is no holder.
local max = tonumber(ARGV[1])
local t = redis.call('TYPE', KEYS[1])['ok']
local v, n = false, -1
if t == 'string' then
  n = redis.call('STRLEN', KEYS[1])
  v = redis.call('GETRANGE', KEYS[1], 0, max - 1)
elseif t == 'zset' then
  for _, m in ipairs({'hilock:sem', 'hilock:rw'}) do
    if redis.call('ZSCORE', KEYS[1], m) then v = m end
  end
end
local f = false
if redis.call('TYPE', KEYS[2])['ok'] == 'string' then f = redis.call('GETRANGE', KEYS[2], 0, 31) end
local s = 0
if redis.call('TYPE', KEYS[4])['ok'] == 'list' then s = redis.call('LLEN', KEYS[4]) end
local h = false
if t == 'string' and redis.call('TYPE', KEYS[5])['ok'] == 'string' then
  local cur, rec = redis.call('GET', KEYS[1]), redis.call('GET', KEYS[5])
  if string.sub(rec, 1, #cur + 1) == cur .. '\n' then
    h = string.sub(rec, #cur + 2)
  elseif #cur == 32 and string.sub(rec, 1, 13) == string.sub(cur, 21) .. '\n' then
    local tm, since = redis.call('TIME'), tonumber(f or '')
    if not since or since > tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000) then
      since = ''
    end
    h = since .. '\n' .. string.sub(rec, 14)
  end
end
local nh, nw, nx, list = 0, 0, 0, {}
if v and t == 'zset' then
  local tm = redis.call('TIME')
  local now = tonumber(tm[1]) * 1000 + math.floor(tonumber(tm[2]) / 1000)
  local recs = redis.call('TYPE', KEYS[6])['ok'] == 'hash'
  nh = redis.call('ZCOUNT', KEYS[1], '(' .. now, '+inf') - 1
  local live = redis.call('ZRANGEBYSCORE', KEYS[1], '(' .. now, '+inf', 'WITHSCORES', 'LIMIT', 0, tonumber(ARGV[2]) + 1)
  for i = 1, #live, 2 do
    if live[i] ~= v and #list < 3 * tonumber(ARGV[2]) then
      list[#list + 1] = live[i]
      list[#list + 1] = tonumber(live[i + 1]) - now
      list[#list + 1] = recs and redis.call('HGET', KEYS[6], live[i]) or false
    end
  end
  if redis.call('TYPE', KEYS[7])['ok'] == 'zset' then
    for _, w in ipairs(redis.call('ZRANGEBYSCORE', KEYS[7], '(' .. now, '+inf')) do
      nw = nw + 1
      if string.sub(w, 1, 2) == 'x:' then nx = nx + 1 end
    end
  end
end
return {t, redis.call('PTTL', KEYS[1]), v, n, f, redis.call('PTTL', KEYS[2]),
        redis.call('PTTL', KEYS[3]), s, h, nh, nw, nx, list}
