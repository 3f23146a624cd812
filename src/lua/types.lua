#!lua flags=no-writes
-- SPDX-License-Identifier: BSD-3-Clause
-- types: the Redis types of a lock key and its fence counter (KEYS[1], KEYS[2]), read only
-- after a script answered WRONGTYPE, so that the message can say which key holds what
-- (src/lock.c: name_wrong_types) instead of the script's SHA and line; and for a sorted set,
-- the kind its marker names (permits.lua): 'sem', 'rw', else false.
local t = redis.call('TYPE', KEYS[1])['ok']
local m = false
if t == 'zset' then
  if redis.call('ZSCORE', KEYS[1], 'hilock:sem') then m = 'sem'
  elseif redis.call('ZSCORE', KEYS[1], 'hilock:rw') then m = 'rw' end
end
return {t, redis.call('TYPE', KEYS[2])['ok'], m}
