-- SPDX-License-Identifier: BSD-3-Clause
-- fence_raise: KEYS[1] fence counter; ARGV[1] a token granted on a quorum, ARGV[2] ms to keep,
-- ARGV[3] ms to keep a token that holds an epoch (at or above 2^42), ARGV[4] this server's
-- clock in ms as the client reckons it (the token's floor in acquire.lua)
-- Redlock: raise this master's counter to the token, so it mints a larger one next time. The
-- token is the whole one, a member's epoch in bits 63..42 included (< 2^53: exact as a Lua
-- number), so a master without an epoch also mints above it (src/lock.c, src/topology.c).
-- Such a counter is kept longer, never shortened (as in acquire.lua): once it expires, a
-- master without the epoch falls back to its clock, which is below it.
-- 1: raised; 0: already at or above it
local cur = tonumber(redis.call('GET', KEYS[1])) or 0
local f = tonumber(ARGV[1])
if cur >= f then return 0 end
-- a token ahead of this master's clock (another master's clock or counter made it) is kept
-- its lead too, as acquire.lua keeps a hot key's: it expires only once the clock has passed it
local keep = string.format('%.0f', tonumber(ARGV[2]) + math.max(0, f - tonumber(ARGV[4])))
if f >= 4398046511104 then   -- 2^42
  keep = string.format('%.0f', math.max(tonumber(ARGV[3]), redis.call('PTTL', KEYS[1])))
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', keep)
return 1
