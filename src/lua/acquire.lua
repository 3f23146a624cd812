-- SPDX-License-Identifier: BSD-3-Clause
-- acquire: KEYS[1] lock, KEYS[2] fence counter (same hash slot)
-- ARGV[1] token, ARGV[2] ttl ms, ARGV[3] ms to keep the counter, ARGV[4] the token's clock
-- floor: this server's clock in ms as the client reckons it (engine.c hl_cmd_argclock: TIME
-- read at connect plus the client's monotonic time since, counted slow), so that no TIME
-- comes before a write (refused before Redis 5.0) and the floor costs no command here,
-- ARGV[6] ms to keep a counter that holds an epoch (at or above 2^42: a Redlock's token)
-- {1, fence}: granted (also when the value is already ours: a retry after a lost reply)
-- {0, pttl}:  held by another value (pttl -1: no expiry, e.g. a legacy key)
-- Optional wake-up (src/wait.c): KEYS[3] the waiters marker, ARGV[5] ms a waiter may block:
-- a busy attempt that will wait marks the lock awaited, so its release signals a waiter.
-- ARGV[9] > 0 (blocking waiters; each master of a Redlock keeps its own): the watch's lease in
-- ms (ARGV[10]: the full lease, 3 x poll_ms, of which ARGV[9] may be less: what is left of the
-- wait); the busy answer
-- is then {0, pttl, 'watch', left}: left 0, this waiter keeps the watch (it polls every poll_ms);
-- else the ms left of the waiter that keeps it (this one may block that long). Not with a
-- shared/exclusive lock's busy answer (its waiters all poll: their mark holds readers off).
-- Optional holder record (src/inspect.c): KEYS[4] the key's ":holder" aux key, ARGV[7] the
-- client's record "tag\nhost\npid\nprogram" (its tokens end with the tag: src/base/base.h),
-- ARGV[11] ms to keep it (2 x ttl). One record per key names the client of its latest grant:
-- a grant writes it only when it names another client (or none), and lengthens it only when
-- it would lapse within 1.5 x ttl (kind.h: HL_RECORD_RENEW), so a client granted the key again
-- and again reads it and writes once per half a ttl or so. Release leaves it to lapse.
-- Informative only; inspect shows it while the lock's value ends with its tag. Needs KEYS[3].
-- ARGV[12] (optional): the counter's value after this client's last grant of the key, sent
-- while the record that grant left lives 1.5 x ttl more (src/kinds/modern.c). If the counter
-- still holds it (INCR gives it + 1), no grant of this script came between -- the only writer
-- of a record, and it moves the counter -- so the record is still ours and long enough: it is
-- not even read. A granted answer that read it is {1, fence, kept}: kept, the ms the record
-- lives from now on.
-- Redis does not roll back a script, so a failure must leave nothing behind: the one command
-- that can fail after the lock's write (INCR of a counter of another type) is undone, as is
-- the grant on a counter at or above 2^53 - 1 (refused: below).
-- A shared/exclusive lock on the key (a sorted set marked 'hilock:rw', permits.lua) holds it
-- as another owner would (looked at on this busy path only); another sorted set (a semaphore)
-- is WRONGTYPE at the GET, before any write. The busy answer on such a key is {0, pttl, n}:
-- n its live shared grants, or -1 when an exclusive grant holds it (live: scored after the
-- client's reckoning of this server's clock, ARGV[4], counted slow: read-only, no TIME), for
-- the busy message (modern.c).
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  local rw = redis.call('TYPE', KEYS[1])['ok'] == 'zset' and redis.call('ZSCORE', KEYS[1], 'hilock:rw')
  if rw or redis.call('GET', KEYS[1]) ~= ARGV[1] then
    local w, lease, left = tonumber(ARGV[5]) or 0, tonumber(ARGV[9]) or 0
    if KEYS[3] and w > 0 and lease > 0 and not rw then
      -- the watch: one waiter polls, the rest block for a whole lease (wait.c). The mark
      -- names it, "<token> <lease end on ARGV[4]'s clock> <its full lease, ARGV[10]>"; it is
      -- ours if it named us, if its lease ran out ('1', an older client's mark, names nobody)
      -- or if our full lease is shorter (a waiter that polls more often keeps it: each sees a
      -- free key within its own poll_ms). The mark outlives the longest block that can follow
      -- it: w + lease
      local p, now = redis.call('PTTL', KEYS[3]), tonumber(ARGV[4])
      local who, till, len = string.match(redis.call('GET', KEYS[3]) or '', '^(%x+) (%d+) (%d+)$')
      till = tonumber(till) or 0
      if who == ARGV[1] or till <= now or tonumber(ARGV[10]) < tonumber(len) then
        redis.call('SET', KEYS[3], ARGV[1] .. ' ' .. string.format('%.0f', now + lease) .. ' ' .. ARGV[10],
                   'PX', string.format('%.0f', math.max(p, w + lease)))
        left = 0
      else
        left = till - now
        if p < w + lease then redis.call('PEXPIRE', KEYS[3], string.format('%.0f', w + lease)) end
      end
    elseif KEYS[3] and w > 0 and redis.call('PTTL', KEYS[3]) < w then
      redis.call('SET', KEYS[3], '1', 'PX', w)
    end
    if rw then
      local live = '(' .. ARGV[4]
      local first = redis.call('ZRANGEBYSCORE', KEYS[1], live, '+inf', 'LIMIT', 0, 1)[1]
      local n = redis.call('ZCOUNT', KEYS[1], live, '+inf') - 1
      if first and string.sub(first, 1, 2) == 'x:' then n = -1 end
      return {0, redis.call('PTTL', KEYS[1]), n}
    end
    if left then return {0, redis.call('PTTL', KEYS[1]), 'watch', left} end
    return {0, redis.call('PTTL', KEYS[1])}
  end
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
-- the token never goes back: counter + 1, but at least the server clock in ms. INCR reads
-- and writes the counter in one command; a counter at or behind the clock (a key granted
-- less than once a millisecond, or a new one) is then set to the clock, with its keep.
-- A counter at or above 2^53 - 1 is refused (docs/fencing.md: the largest token is 2^53 - 1):
-- Lua numbers are doubles, so the token after it would be rounded (2^53 + 1 reads as 2^53, a
-- token given twice), and one at 2^63 - 1 or past it cannot be counted at all (INCR fails: it
-- must not fall back to the clock). The lock written above is deleted and the counter left
-- as it was; the error names the counter and its value (HILOCK_EREPLY). INCR's reply c + 1 is
-- rounded to a double, which is monotone and exact at 2^53: it reads >= 2^53 exactly when
-- c >= 2^53 - 1, and below that it is exact.
local floor = tonumber(ARGV[4])
local f = redis.pcall('INCR', KEYS[2])
local same = type(f) == 'number' and tonumber(ARGV[12]) == f - 1   -- no grant since ours
local past   -- the counter's value, when refused
if type(f) ~= 'number' then
  if string.find(f.err, 'WRONGTYPE', 1, true) then
    redis.call('DEL', KEYS[1])
    return f
  end
  -- 2^63 - 1 ("would overflow"), digits past it, or not an integer (nothing of ours writes
  -- one): a value Lua reads as 2^53 - 1 or more is refused, anything else is replaced, as a
  -- counter at 0 (monotone again: tonumber(c) >= 2^53 - 1 exactly when c is)
  local c = redis.call('GET', KEYS[2]) or ''
  if (tonumber(c) or 0) >= 9007199254740991 then past = c else f = floor end
elseif f >= 9007199254740992 then   -- 2^53
  redis.call('DECR', KEYS[2])   -- back as it was (INCR and DECR keep its expiry)
  past = redis.call('GET', KEYS[2])
end
if past then
  redis.call('DEL', KEYS[1])
  if #past > 40 then past = string.sub(past, 1, 40) .. '...' end
  return redis.error_reply('ERR fence counter ' .. KEYS[2] .. ' holds ' .. past ..
                           ', at or above 2^53 - 1: no exact token after it; refused')
end
if f <= floor then
  f = floor
  redis.call('SET', KEYS[2], ARGV[4], 'PX', ARGV[3])   -- (ARGV[4]: the floor's digits)
elseif f >= 4398046511104 then   -- 2^42
  -- a counter with an epoch in it (fence_raise.lua) is the only floor above the clock for a
  -- quorum without the epoch member: it lives far longer, and no grant shortens it
  redis.call('PEXPIRE', KEYS[2],
             string.format('%.0f', math.max(tonumber(ARGV[6]), redis.call('PTTL', KEYS[2]))))
elseif f % 1024 == 0 then
  -- a counter ahead of the clock (more than a grant a millisecond) keeps its expiry across
  -- INCR: renewed every 1024th grant, for ttl + 1 hour plus its lead over the clock, so once
  -- it expires the clock has passed every token it gave (a key granted 5,000 times a second
  -- for an hour is 4 hours ahead: kept 1 hour, it would hand out smaller tokens again)
  redis.call('PEXPIRE', KEYS[2], string.format('%.0f', tonumber(ARGV[3]) + f - floor))
end
-- ARGV[8] > 0: we waited behind a shared/exclusive lock (its busy answer above said so), and
-- our mark stops new readers (permits.lua) for as long as it lives: our turn has come, so it
-- is cut to ARGV[8] ms (one pause: other plain waiters renew it on their next attempt, and
-- their release signal stays), not left for a second after our release
local cut = tonumber(ARGV[8]) or 0
if cut > 0 and redis.call('PTTL', KEYS[3]) > cut then redis.call('PEXPIRE', KEYS[3], cut) end
if KEYS[4] and not same then
  -- pcall: a key of another type there is no record of ours (SET replaces it), not an error
  -- after the grant's writes
  local kept = tonumber(ARGV[11])
  if redis.pcall('GET', KEYS[4]) ~= ARGV[7] then
    redis.call('SET', KEYS[4], ARGV[7], 'PX', ARGV[11])
  else
    local p = redis.call('PTTL', KEYS[4])
    if p < 1.5 * tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[4], ARGV[11]) else kept = p end
  end
  return {1, f, kept}
end
return {1, f}
