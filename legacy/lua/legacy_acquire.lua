-- SPDX-License-Identifier: BSD-3-Clause
-- legacy_acquire: the SETNX / GET / GETSET recipe decided in one step; also bridge acquire.
-- KEYS[1] lock, KEYS[2] fence counter (same hash slot)
-- ARGV[1] our stamp, ARGV[2] PX ms ('0' = no expiry, as the recipe), ARGV[3] ms to keep
-- the counter, ARGV[4] a value the client judged expired ('' = none), ARGV[5] ms to keep a
-- counter that holds an epoch (at or above 2^42: a Redlock's token), ARGV[6] the token's
-- clock floor: this server's clock in ms as the client reckons it (as acquire.lua: no TIME
-- before a write, which servers before 5.0 refuse)
-- {1, fence}:        granted (the key was absent, or held exactly ARGV[4] with no TTL)
-- {0, pttl, value}:  held; the client parses the value (one parser, in C)
-- an error naming the fence counter: it is at or above 2^53 - 1 (nothing written; below)
local cur = redis.call('GET', KEYS[1])
if cur then
  -- take over only the very value judged expired, and never a key that has a TTL: that one
  -- expires by the server's clock, which beats any client's
  if ARGV[4] == '' or cur ~= ARGV[4] or redis.call('PTTL', KEYS[1]) >= 0 then
    return {0, redis.call('PTTL', KEYS[1]), cur}
  end
end
-- the fencing token, as acquire.lua: counter + 1, but at least the server clock in ms. A
-- counter at or above 2^53 - 1 is refused before anything is written, as in acquire.lua: the
-- token after it would not be exact as a Lua number (docs/fencing.md). tonumber rounds a
-- larger value, but monotonically, and 2^53 - 1 is exact: the compare is exact. (Not a
-- number, or NaN: replaced by the clock, as before.)
local c = redis.call('GET', KEYS[2])
local last = tonumber(c) or 0
if last ~= last then last = 0 end
if last >= 9007199254740991 then
  if #c > 40 then c = string.sub(c, 1, 40) .. '...' end
  return redis.error_reply('ERR fence counter ' .. KEYS[2] .. ' holds ' .. c ..
                           ', at or above 2^53 - 1: no exact token after it; refused')
end
if ARGV[2] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
local f = math.max(last + 1, tonumber(ARGV[6]))
-- as acquire.lua: a counter with an epoch in it lives far longer, and no grant shortens it
-- (a PTTL of -1 or -2 loses to ARGV[5])
-- kept ttl + 1 hour plus any lead over the clock (acquire.lua: a hot key's counter runs ahead)
local keep = string.format('%.0f', tonumber(ARGV[3]) + f - math.min(f, tonumber(ARGV[6])))
if f >= 4398046511104 then   -- 2^42
  keep = string.format('%.0f', math.max(tonumber(ARGV[5]), redis.call('PTTL', KEYS[2])))
end
redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', keep)
return {1, f}
