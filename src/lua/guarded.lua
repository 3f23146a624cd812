-- SPDX-License-Identifier: BSD-3-Clause
-- guarded: run one command only while the lock holds (hilock_guarded_command, src/lock/guarded.c):
-- the compare of the lock's value and the command in one script, so nothing comes between them.
-- KEYS[1] the lock's key; KEYS[2..] the command's own keys (Cluster routing and ACL: the
--   server's key specs said which, src/lock/guarded.c; they also appear in the command)
-- ARGV[1] our token; ARGV[2] 'v' = the key's string value is the token (the modern and fair
--   locks), 'z' = the token is a member of the key's sorted set scored with its expiry in ms by
--   this server's clock (a semaphore's permit, a shared/exclusive grant: permits.lua)
-- ARGV[3..7] the client's reply limits for the command's reply, this script's wrapper already
--   taken off (src/resp/resp.h): bytes of one string, elements of one array, elements of all
--   arrays, arrays inside arrays, bytes of the whole reply
-- ARGV[8..] the command and its arguments
-- {1, reply}: it ran; reply is its reply (an error reply when the server refused it)
-- {2, why}: it ran, but its reply is past the client's limits (not sent: the connection stays)
-- {0}: the lock is not ours here (no key, or our value expired); {-1}: another value holds it
local key, tok = KEYS[1], ARGV[1]

local function ours()
  if ARGV[2] == 'v' then
    local cur = redis.pcall('GET', key)
    if cur == tok then return 1 end
    if cur then return -1 end   -- a value, or WRONGTYPE: another kind holds the key
    return 0
  end
  local s = redis.pcall('ZSCORE', key, tok)
  if type(s) == 'string' then
    -- a write after TIME needs effects replication before 5.0 (3.2 and 4.0 have it on
    -- request; the sorted-set kinds need 3.2); the modern lock's compare reads no clock, so
    -- its script replicates as it was sent there, as on 2.8
    if redis.replicate_commands then redis.replicate_commands() end
    local t = redis.call('TIME')
    local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
    if tonumber(s) > now then return 1 end
    return 0   -- expired, not pruned yet
  end
  if type(s) == 'table' then return -1 end   -- WRONGTYPE: a plain lock holds the key
  return redis.call('EXISTS', key) == 1 and -1 or 0
end

local verdict = ours()
if verdict ~= 1 then return {verdict} end

local r = redis.pcall(unpack(ARGV, 8))

-- the usual replies (a status, an integer, a short string, an error) at once; an array is
-- measured: the size of r as the client's limits count it (an estimate at or above its RESP
-- bytes)
local max_bulk, t = tonumber(ARGV[3]), type(r)
if t == 'number' or t == 'boolean' then return {1, r} end
if t == 'string' and #r <= max_bulk then return {1, r} end
local line = t == 'table' and (r.ok or r.err)
if line and #line <= max_bulk then return {1, r} end
local max_elems, max_total = tonumber(ARGV[4]), tonumber(ARGV[5])
local max_depth, max_bytes = tonumber(ARGV[6]), tonumber(ARGV[7])
local bytes, total = 0, 0
local function over(v, depth)
  local t = type(v)
  if t == 'string' then
    if #v > max_bulk then return 'a string of ' .. #v .. ' bytes' end
    bytes = bytes + #v + 16
  elseif t == 'table' then
    local line = v.err or v.ok
    if line then
      if #line > max_bulk then return 'a line of ' .. #line .. ' bytes' end
      bytes = bytes + #line + 3
    else
      if depth >= max_depth then return 'arrays nested ' .. (depth + 1) .. ' deep' end
      if #v > max_elems then return 'an array of ' .. #v .. ' elements' end
      total = total + #v
      if total > max_total then return 'more than ' .. max_total .. ' elements' end
      bytes = bytes + 16
      for i = 1, #v do
        local why = over(v[i], depth + 1)
        if why then return why end
      end
    end
  else
    bytes = bytes + 24
  end
  if bytes > max_bytes then return 'more than ' .. max_bytes .. ' bytes' end
  return nil
end
local why = over(r, 0)
if why then return {2, 'reply too large: ' .. why} end
return {1, r}
