-- SPDX-License-Identifier: BSD-3-Clause
-- acquire_busy: after a plain SET NX PX found the lock taken (options.fencing = 0, src/modern.c),
-- sent only then, to the masters that answered nil.
-- KEYS[1] lock, KEYS[2] the waiters marker (src/wait.c); ARGV[1] our token, ARGV[2] ms a waiter
-- may block (0 = this caller will not wait)
-- pttl of the holder (-1: no expiry), after marking the lock awaited, as acquire.lua does;
-- -2: no holder any more (released since, or a stale write of ours, deleted here): try again
-- GET first: a key that is not a string is WRONGTYPE here, before any write, as in acquire.lua.
-- A shared/exclusive lock (a sorted set marked 'hilock:rw', permits.lua) is a holder too.
local rw = redis.call('TYPE', KEYS[1])['ok'] == 'zset' and redis.call('ZSCORE', KEYS[1], 'hilock:rw')
local cur = rw or redis.call('GET', KEYS[1])
if cur == ARGV[1] then redis.call('DEL', KEYS[1]) end
if not cur or cur == ARGV[1] then return -2 end
local w = tonumber(ARGV[2]) or 0
if w > 0 and redis.call('PTTL', KEYS[2]) < w then
  redis.call('SET', KEYS[2], '1', 'PX', w)
end
return redis.call('PTTL', KEYS[1])
