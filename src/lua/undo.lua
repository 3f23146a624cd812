-- SPDX-License-Identifier: BSD-3-Clause
-- undo: KEYS[1] a lock key; ARGV[1] a value of ours whose write's fate was unknown (engine.c:
-- sent first on the next contact). A plain lock's value is deleted as release.lua would; a
-- member of a sorted-set kind (permits.lua: a permit, a shared/exclusive grant) is removed,
-- and the key with it once only its marker is left. Its holder record lapses with the key.
-- Rare (a lost reply), so release.lua's hot path stays as it is.
-- 1: undone; 0: not there; -1: held by another value
local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'zset' then
  if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
  if redis.call('ZCARD', KEYS[1]) <= 1 then redis.call('DEL', KEYS[1])
  else   -- the key expires with its latest holder still (a score is that server's time in ms)
    local last = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    redis.call('PEXPIREAT', KEYS[1], last[2])
  end
  return 1
end
if t ~= 'string' then return 0 end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
return -1
