-- SPDX-License-Identifier: BSD-3-Clause
-- failover: which master answers, and its record (the failover guard, a Cluster slot's epoch)
-- (see src/topology.c). The slow path: a call runs it, one round trip after its lock script,
-- only when the plain INFO replication + HMGET of its pipeline cannot settle it (a new
-- history, a guard that may run, a ttl above maxttl, a slot without an epoch).
-- KEYS[1] the record (a hash, one per master and db; per slot on a Cluster), KEYS[2] the lock
-- ARGV[1] 'acquire' | 'extend' | 'id' (release, check), ARGV[2] our value, ARGV[3] ttl ms,
-- ARGV[4] the guard's floor in ms (options.failover_guard_ms), ARGV[5] '1' = keep the record
-- and obey its guard, '2' = the slot's epoch only (a Cluster client with the guard off: it
-- starts no guard, so a guard-on client's floor and ttl still decide one), '0' = no record,
-- ARGV[6] '1' = a Cluster node: the record holds the slot's fencing epoch as
-- "<replid>:<epoch>" (CLUSTER INFO's cluster_my_epoch, read when the record has none for this
-- history; see topology.c for why per slot, not per call), ARGV[7] (a Cluster node) the epoch
-- the client's slot map gives this server: a record's epoch below it is read again
-- {role, replid, offset, replid2, second_offset, guard_ms_left[, config_epoch]}
-- The offset INFO gives here already counts the lock script's writes: an upper bound of where
-- our write ends in the stream.
-- Redis 4.0 lets a script write after TIME only once it asked for effects replication (5.0+
-- does by default; the call is still there, a no-op, up to 7.x and Valkey 8)
if redis.replicate_commands then redis.replicate_commands() end
local info = redis.call('INFO', 'replication')
local role = string.match(info, 'role:(%a+)') or ''
local id = string.match(info, 'master_replid:(%x+)') or ''
local off = tonumber(string.match(info, 'master_repl_offset:(%d+)')) or -1
local id2 = string.match(info, 'master_replid2:(%x+)') or ''
local off2 = tonumber(string.match(info, 'second_repl_offset:(%-?%d+)')) or -1
local left, ep = 0, nil
local rec = {}
local function my_epoch()
  local ci = redis.pcall('CLUSTER', 'INFO')
  return type(ci) == 'string' and tonumber(string.match(ci, 'cluster_my_epoch:(%d+)')) or 0
end
if ARGV[5] ~= '0' and role == 'master' then
  rec = redis.call('HMGET', KEYS[1], 'replid', 'maxttl', 'until', 'epoch')
end
if ARGV[5] == '1' and role == 'master' then
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local ttl = tonumber(ARGV[3])
  local maxttl = tonumber(rec[2]) or 0
  local untl = tonumber(rec[3]) or 0
  local at = now   -- when the call's grant was made: its key's ttl tells, a round trip ago
  if rec[1] ~= id then
    -- The first call under this master's history. A promoted replica (second_offset set)
    -- may lack grants its predecessor made: refuse new ones until the longest ttl granted
    -- there (recorded here while replication ran), our own, or the configured floor has
    -- passed. The record carries no expiry: one small hash, overwritten at each failover.
    if off2 ~= -1 then
      untl = math.max(untl, now + math.max(maxttl, ttl, tonumber(ARGV[4])))
    end
    maxttl = 0
    redis.call('HMSET', KEYS[1], 'replid', id, 'maxttl', 0, 'until', untl, 'since', now)   -- (HSET of several fields: 4.0)
  end
  -- our value: a plain lock's, or a member of a sorted-set kind (permits.lua: its score is
  -- its expiry by this clock)
  local kt = ARGV[1] == 'acquire' and redis.call('TYPE', KEYS[2])['ok']
  local p = false
  if kt == 'zset' then
    local s = tonumber(redis.call('ZSCORE', KEYS[2], ARGV[2]))
    if s then p = s - now end
  elseif kt == 'string' and redis.call('GET', KEYS[2]) == ARGV[2] then
    p = redis.call('PTTL', KEYS[2])
  end
  if p then
    if p > 0 and p <= ttl then at = now - (ttl - p) end
    if untl > at then   -- granted while the guard ran: undone
      if kt ~= 'zset' then redis.call('DEL', KEYS[2])
      else
        redis.call('ZREM', KEYS[2], ARGV[2])
        if redis.call('ZCARD', KEYS[2]) <= 1 then redis.call('DEL', KEYS[2])
        else   -- the key expires with its latest holder still (undo.lua)
          local last = redis.call('ZREVRANGEBYSCORE', KEYS[2], '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
          redis.call('PEXPIREAT', KEYS[2], last[2])
        end
      end
      left = math.max(untl - now, 1)
    end
  end
  if untl <= now then
    -- a passed guard reads 0, so that the pipeline's HMGET alone says "no guard"
    if untl ~= 0 then redis.call('HSET', KEYS[1], 'until', 0) end
    if left == 0 and ARGV[1] ~= 'id' and ttl > maxttl then redis.call('HSET', KEYS[1], 'maxttl', ttl) end
  elseif left == 0 and ARGV[1] == 'acquire' then
    left = untl - now   -- (our value was not there: nothing to undo, still no grant)
  end
end
if ARGV[6] == '1' and ARGV[5] ~= '0' and role == 'master' then
  -- the slot's epoch: never below the record's (it moved here with the slot); one below the
  -- map's (read during an import, through ASK) is read again
  local eid, e = string.match(rec[4] or '', '^(%x+):(%d+)$')
  e = tonumber(e) or 0
  if eid == id and e >= (tonumber(ARGV[7]) or 0) then
    ep = e
  else
    ep = math.max(my_epoch(), e)
    redis.call('HSET', KEYS[1], 'epoch', id .. ':' .. ep)
  end
end
if ARGV[6] == '1' then return {role, id, off, id2, off2, left, ep or 0} end
return {role, id, off, id2, off2, left}
