-- failover: which master answers, and the failover guard (see src/topology.c)
-- KEYS[1] the guard record (a hash, one per master and db), KEYS[2] the lock
-- ARGV[1] 'acquire' | 'extend' | 'id' (release, check), ARGV[2] our value, ARGV[3] ttl ms,
-- ARGV[4] the guard's floor in ms (options.failover_guard_ms), ARGV[5] '1' = guard on,
-- ARGV[6] '1' = a Cluster node: add its config epoch (CLUSTER INFO's cluster_my_epoch, read in
-- the same script as the grant, so a client with an old slot map cannot mint a lower fence)
-- {role, replid, offset, replid2, second_offset, guard_ms_left[, config_epoch]}
-- INFO runs here, after the lock script of the same pipeline: the offset it reads already
-- counts that script's writes (an upper bound of where our write ends in the stream).
local info = redis.call('INFO', 'replication')
local role = string.match(info, 'role:(%a+)') or ''
local id = string.match(info, 'master_replid:(%x+)') or ''
local off = tonumber(string.match(info, 'master_repl_offset:(%d+)')) or -1
local id2 = string.match(info, 'master_replid2:(%x+)') or ''
local off2 = tonumber(string.match(info, 'second_repl_offset:(%-?%d+)')) or -1
local left = 0
if ARGV[5] == '1' and role == 'master' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ttl = tonumber(ARGV[3])
  local rec = redis.call('HMGET', KEYS[1], 'replid', 'maxttl', 'until')
  local maxttl = tonumber(rec[2]) or 0
  local untl = tonumber(rec[3]) or 0
  if rec[1] ~= id then
    -- The first call under this master's history. A promoted replica (second_offset set)
    -- may lack grants its predecessor made: refuse new ones until the longest ttl granted
    -- there (recorded here while replication ran), our own, or the configured floor has
    -- passed. The record carries no expiry: one small hash, overwritten at each failover.
    if off2 ~= -1 then
      untl = math.max(untl, now + math.max(maxttl, ttl, tonumber(ARGV[4])))
    end
    maxttl = 0
    redis.call('HSET', KEYS[1], 'replid', id, 'maxttl', 0, 'until', untl, 'since', now)
  end
  left = untl - now
  if left > 0 then
    if ARGV[1] == 'acquire' and redis.call('GET', KEYS[2]) == ARGV[2] then
      redis.call('DEL', KEYS[2])   -- granted by the lock script just before: not during the guard
    end
  else
    left = 0
    if ARGV[1] ~= 'id' and ttl > maxttl then redis.call('HSET', KEYS[1], 'maxttl', ttl) end
  end
end
if ARGV[6] == '1' then
  local ci = redis.pcall('CLUSTER', 'INFO')
  local ep = type(ci) == 'string' and tonumber(string.match(ci, 'cluster_my_epoch:(%d+)')) or 0
  return {role, id, off, id2, off2, left, ep}
end
return {role, id, off, id2, off2, left}
