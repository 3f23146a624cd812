-- SPDX-License-Identifier: BSD-3-Clause
-- check: KEYS[1] lock; ARGV[1] our value
-- {1, pttl}: ours (pttl -1: no expiry); {0, -2}: no such key; {-1, pttl}: held by another value
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then return {1, redis.call('PTTL', KEYS[1])} end
if cur then return {-1, redis.call('PTTL', KEYS[1])} end
return {0, -2}
