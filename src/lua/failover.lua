-- failover: which master answers, and its record (the failover guard, a Cluster slot's epoch)
-- (see src/topology.c). The slow path: an acquire or extend runs it only when the plain INFO
-- replication + HMGET of its pipeline cannot settle the call alone (a new history, a guard that may run,
-- a ttl above maxttl, a record without an epoch).
-- KEYS[1] the record (a hash, one per master and db; per slot on a Cluster), KEYS[2] the lock
-- ARGV[1] 'acquire' | 'extend' | 'id' (release, check), ARGV[2] our value, ARGV[3] ttl ms,
-- ARGV[4] the guard's floor in ms (options.failover_guard_ms), ARGV[5] '1' = keep the record
-- and obey its guard, '2' = keep the record only (a Cluster client with the guard off: the
-- record carries the slot's epoch), '0' = no record, ARGV[6] '1' = a Cluster node: the record
-- holds the slot's fencing epoch as "<replid>:<epoch>" (CLUSTER INFO's cluster_my_epoch, read
-- when the record meets a history it has no epoch for; see topology.c for why per slot and
-- history, not per call; the replid keeps an epoch from being taken for a later history's),
-- ARGV[7] (a Cluster node) the epoch the client's slot map gives this server: a record's
-- epoch below it was read before this server owned the slot (during an import) and is read
-- again
-- {role, replid, offset, replid2, second_offset, guard_ms_left[, config_epoch]}
-- INFO runs here, after the lock script of the same pipeline: the offset it reads already
-- counts that script's writes (an upper bound of where our write ends in the stream).
local info = redis.call('INFO', 'replication')
local role = string.match(info, 'role:(%a+)') or ''
local id = string.match(info, 'master_replid:(%x+)') or ''
local off = tonumber(string.match(info, 'master_repl_offset:(%d+)')) or -1
local id2 = string.match(info, 'master_replid2:(%x+)') or ''
local off2 = tonumber(string.match(info, 'second_repl_offset:(%-?%d+)')) or -1
local left, ep = 0, nil
local function my_epoch()
  local ci = redis.pcall('CLUSTER', 'INFO')
  return type(ci) == 'string' and tonumber(string.match(ci, 'cluster_my_epoch:(%d+)')) or 0
end
if ARGV[5] ~= '0' and role == 'master' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ttl = tonumber(ARGV[3])
  local rec = redis.call('HMGET', KEYS[1], 'replid', 'maxttl', 'until', 'epoch')
  local maxttl = tonumber(rec[2]) or 0
  local untl = tonumber(rec[3]) or 0
  local eid, e = string.match(rec[4] or '', '^(%x+):(%d+)$')
  if eid == id then ep = tonumber(e) end
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
  if ARGV[6] == '1' and (not ep or ep < (tonumber(ARGV[7]) or 0)) then
    ep = my_epoch()
    redis.call('HSET', KEYS[1], 'epoch', id .. ':' .. ep)
  end
  left = untl - now
  if left > 0 then
    if ARGV[5] == '1' and ARGV[1] == 'acquire' and redis.call('GET', KEYS[2]) == ARGV[2] then
      redis.call('DEL', KEYS[2])   -- granted by the lock script just before: not during the guard
    end
  else
    left = 0
    -- a passed guard reads 0, so that the pipeline's HMGET alone says "no guard"
    if untl ~= 0 then redis.call('HSET', KEYS[1], 'until', 0) end
    if ARGV[1] ~= 'id' and ttl > maxttl then redis.call('HSET', KEYS[1], 'maxttl', ttl) end
  end
  if ARGV[5] ~= '1' then left = 0 end
end
if ARGV[6] == '1' then return {role, id, off, id2, off2, left, ep or 0} end
return {role, id, off, id2, off2, left}
