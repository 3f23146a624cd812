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
-- an error (nothing written): the counter is at or above 2^53 - 1 (the rule of every script
-- that mints, docs/fencing.md: here, a write since this grant), or the token is 2^53
-- or more (the client never sends one). Both are read as Lua numbers: tonumber rounds a
-- larger value, but monotonically, and 2^53 - 1 and 2^53 are exact, so the compares with
-- them are exact, and so is cur >= f once both passed them.
local c = redis.call('GET', KEYS[1])
local cur = tonumber(c) or 0
local f = tonumber(ARGV[1])
if cur ~= cur then cur = 0 end   -- NaN: not a number, overwritten as one
if cur >= 9007199254740991 then
  if #c > 40 then c = string.sub(c, 1, 40) .. '...' end
  return redis.error_reply('ERR fence counter ' .. KEYS[1] .. ' holds ' .. c ..
                           ', at or above 2^53 - 1: no exact token after it; refused')
end
if not (f and f < 9007199254740992) then   -- (NaN too)
  return redis.error_reply('ERR fence token ' .. string.sub(ARGV[1], 1, 40) .. ' for ' .. KEYS[1] ..
                           ' is not a number below 2^53: not exact; refused')
end
if cur >= f then return 0 end
-- a token ahead of this master's clock (another master's clock or counter made it) is kept
-- its lead too, as acquire.lua keeps a hot key's: it expires only once the clock has passed it
local keep = string.format('%.0f', tonumber(ARGV[2]) + math.max(0, f - tonumber(ARGV[4])))
if f >= 4398046511104 then   -- 2^42
  keep = string.format('%.0f', math.max(tonumber(ARGV[3]), redis.call('PTTL', KEYS[1])))
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', keep)
return 1
