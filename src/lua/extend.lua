-- SPDX-License-Identifier: BSD-3-Clause
-- extend: KEYS[1] lock; ARGV[1] our value, ARGV[2] new ttl ms
-- Optional KEYS[2]: the holder record (acquire.lua), ARGV[3] ms to keep it: lengthened only
-- when it would lapse before the lock (no other client was granted the key while we held it,
-- so it is ours if it is there).
-- 1: extended; 0: no such key; -1: held by another value
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  if KEYS[2] then
    local p = redis.call('PTTL', KEYS[2])
    if p ~= -2 and p < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[3]) end
  end
  return 1
end
if cur then return -1 end
return 0
