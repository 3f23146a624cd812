-- fence_raise: KEYS[1] fence counter; ARGV[1] a token granted on a quorum, ARGV[2] ms to keep
-- Redlock: raise this master's counter to the token, so it mints a larger one next time. The
-- token is the whole one, a member's epoch in bits 63..42 included (< 2^53: exact as a Lua
-- number), so a master without an epoch also mints above it (src/lock.c, src/topology.c).
-- 1: raised; 0: already at or above it
local cur = tonumber(redis.call('GET', KEYS[1])) or 0
if cur >= tonumber(ARGV[1]) then return 0 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
return 1
