#!lua flags=no-writes,allow-cross-slot-keys
-- SPDX-License-Identifier: BSD-3-Clause
-- inspect_scan: one SCAN page and what each key holds (src/inspect.c). The flags above make
-- the server itself refuse any write from this script (Redis >= 7.0), and let it read a cluster
-- node's keys of every slot (7.0+ refuses undeclared keys of two slots without it).
-- ARGV[1] cursor, ARGV[2] MATCH pattern, ARGV[3] COUNT, ARGV[4] value bytes to return (>= 1)
-- {next cursor, then per key: key, type, pttl, first bytes of a string (else the kind marker
--  of a semaphore or shared/exclusive lock, as inspect_key.lua returns it; else nil), strlen or -1}
local r = redis.call('SCAN', ARGV[1], 'MATCH', ARGV[2], 'COUNT', ARGV[3])
local out, max = {r[1]}, tonumber(ARGV[4])
for _, k in ipairs(r[2]) do
  local t = redis.call('TYPE', k)['ok']
  local v, n = false, -1
  if t == 'string' then
    n = redis.call('STRLEN', k)
    v = redis.call('GETRANGE', k, 0, max - 1)
  elseif t == 'zset' then
    for _, m in ipairs({'hilock:sem', 'hilock:rw'}) do
      if redis.call('ZSCORE', k, m) then v = m end
    end
  end
  out[#out + 1] = k
  out[#out + 1] = t
  out[#out + 1] = redis.call('PTTL', k)
  out[#out + 1] = v
  out[#out + 1] = n
end
return out
