-- SPDX-License-Identifier: BSD-3-Clause
-- legacy_extend: KEYS[1] lock; ARGV[1] our value, ARGV[2] the new stamp, ARGV[3] PX ms
-- ('0' = none). Stamp and expiry move together: extending only the PX would let legacy
-- peers read the old stamp as expired and GETSET-steal the key.
-- 1: extended; 0: no such key; -1: held by another value
local cur = redis.call('GET', KEYS[1])
if cur ~= ARGV[1] then
  if cur then return -1 end
  return 0
end
if ARGV[3] ~= '0' then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
else
  redis.call('SET', KEYS[1], ARGV[2])
end
return 1
