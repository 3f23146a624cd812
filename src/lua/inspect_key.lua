#!lua flags=no-writes
-- SPDX-License-Identifier: BSD-3-Clause
-- inspect_key: a lock key and its aux keys (src/inspect.c); the flag refuses any write.
-- KEYS[1] lock, KEYS[2] fence counter, KEYS[3] waiters marker, KEYS[4] signal list
-- KEYS[5] holder record (acquire.lua); ARGV[1] value bytes to return (>= 1)
-- {type, pttl, first bytes of a string (else nil), strlen or -1,
--  fence counter (else nil), its pttl, the waiters marker's pttl, elements in the signal list,
--  the holder record without its token: only if that token is the lock's whole value now
--  (else nil: a record of an earlier grant, or none)}
local max = tonumber(ARGV[1])
local t = redis.call('TYPE', KEYS[1])['ok']
local v, n = false, -1
if t == 'string' then
  n = redis.call('STRLEN', KEYS[1])
  v = redis.call('GETRANGE', KEYS[1], 0, max - 1)
end
local f = false
if redis.call('TYPE', KEYS[2])['ok'] == 'string' then f = redis.call('GETRANGE', KEYS[2], 0, 31) end
local s = 0
if redis.call('TYPE', KEYS[4])['ok'] == 'list' then s = redis.call('LLEN', KEYS[4]) end
local h = false
if t == 'string' and redis.call('TYPE', KEYS[5])['ok'] == 'string' then
  local cur, rec = redis.call('GET', KEYS[1]), redis.call('GET', KEYS[5])
  if string.sub(rec, 1, #cur + 1) == cur .. '\n' then h = string.sub(rec, #cur + 2) end
end
return {t, redis.call('PTTL', KEYS[1]), v, n, f, redis.call('PTTL', KEYS[2]),
        redis.call('PTTL', KEYS[3]), s, h}
