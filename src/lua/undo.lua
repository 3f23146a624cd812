-- SPDX-License-Identifier: BSD-3-Clause
-- undo: KEYS[1] a lock key; ARGV[1] a value of ours whose write's fate was unknown (engine.c:
-- sent first on the next contact). A plain lock's value is deleted as release.lua would; a
-- member of a sorted-set kind (permits.lua: a permit, a shared/exclusive grant) is removed,
-- and the key with it once only its marker is left. The holder record lapses by itself.
-- Rare (a lost reply), so release.lua's hot path stays as it is.
-- A plain value deleted calls the head of a fair queue on the key, as fair.lua's release does
-- (its waiter blocks for poll_ms on its own signal list: without the call it would wait that
-- long for a free key). The queue's names are fair.c's (hl_aux_key): not declared in KEYS, as
-- the engine's undo knows only the key; they share its slot.
-- 1: undone; 0: not there; -1: held by another value

-- hl_aux_key's name for key .. suffix: a key with a {tag} gets it appended, one with no '}'
-- is wrapped ({key}suffix); nil for the rest (a '}' but no tag: the name needs the slot's
-- tag; that queue's head is called by its own poll)
local function aux(suffix)
  local k = KEYS[1]
  local o = string.find(k, '{', 1, true)
  local c = o and string.find(k, '}', o + 1, true)
  if o and c and c > o + 1 then return k .. suffix end
  if not string.find(k, '}', 1, true) then return '{' .. k .. '}' .. suffix end
  return nil
end

-- fair.lua's call_head, without its clock: the head's entry is taken as live (a lapsed one is
-- pruned by the next fair.lua call); the signal lives as long as the queue, 1 s at least
local function call_head()
  local queue, beats, prefix = aux(':fq'), aux(':fb'), aux(':fs:')
  if not queue or redis.call('TYPE', queue)['ok'] ~= 'list' or
     redis.call('TYPE', beats)['ok'] ~= 'zset' then return end
  local head = redis.call('LINDEX', queue, 0)
  if not head or not redis.call('ZSCORE', beats, head) then return end
  local s = prefix .. head
  local t = redis.call('TYPE', s)['ok']
  if t ~= 'none' and t ~= 'list' then return end
  if t == 'none' then redis.call('RPUSH', s, '1') end
  redis.call('PEXPIRE', s, math.max(1000, redis.call('PTTL', queue)))
end

local t = redis.call('TYPE', KEYS[1])['ok']
if t == 'zset' then
  if redis.call('ZREM', KEYS[1], ARGV[1]) == 0 then return 0 end
  if redis.call('ZCARD', KEYS[1]) <= 1 then redis.call('DEL', KEYS[1])
  else   -- the key expires with its latest holder still (a score is that server's time in ms)
    local last = redis.call('ZREVRANGEBYSCORE', KEYS[1], '(+inf', '-inf', 'WITHSCORES', 'LIMIT', 0, 1)
    redis.call('PEXPIREAT', KEYS[1], last[2])
  end
  return 1
end
if t ~= 'string' then return 0 end
local cur = redis.call('GET', KEYS[1])
if cur == ARGV[1] then
  redis.call('DEL', KEYS[1])
  call_head()
  return 1
end
return -1
