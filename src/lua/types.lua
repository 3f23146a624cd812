#!lua flags=no-writes
-- SPDX-License-Identifier: BSD-3-Clause
-- types: the Redis types of a lock key and its fence counter (KEYS[1], KEYS[2]), read only
-- after a script answered WRONGTYPE, so that the message can say which key holds what
-- (src/lock.c: name_wrong_types) instead of the script's SHA and line.
return {redis.call('TYPE', KEYS[1])['ok'], redis.call('TYPE', KEYS[2])['ok']}
