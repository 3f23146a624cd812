-- acquire: KEYS[1] lock, KEYS[2] fence counter (same hash slot)
-- ARGV[1] token, ARGV[2] ttl ms, ARGV[3] ms to keep the counter, ARGV[4] fence floor
-- {1, fence}: granted (also when the value is already ours: a retry after a lost reply)
-- {0, pttl}:  held by another value (pttl -1: no expiry, e.g. a legacy key)
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  if redis.call('GET', KEYS[1]) ~= ARGV[1] then
    return {0, redis.call('PTTL', KEYS[1])}
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
-- the token never goes back: counter + 1, but at least the server clock in ms
local t = redis.call('TIME')
local f = math.max((tonumber(redis.call('GET', KEYS[2])) or 0) + 1,
                   tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000),
                   tonumber(ARGV[4]))
redis.call('SET', KEYS[2], string.format('%.0f', f), 'PX', ARGV[3])
return {1, f}
