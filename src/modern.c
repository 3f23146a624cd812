/* modern.c -- the modern lock kind (hl_kind_modern, see kind.h): SET NX PX of a random token
 * with a fencing token minted in the same script (acquire.lua), compare-and-pexpire extend.
 * Owns only its commands and the reading of its busy answer; the quorum, undo, fencing and
 * validity rules that run them are lock.c's. May call the engine (commands) only. */
#include "kind.h"

static hilock_status acquire_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t mark_ms)
{
    hl_cmd_init(cmd, &hl_lua_acquire, 3);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->fence_key, (size_t)-1);
    hl_cmd_arg(cmd, l->waiters_key, (size_t)-1);   /* a waiter marks the lock (wait.c) */
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_argi(cmd, b->num[0], l->ttl_ms);
    hl_cmd_argi(cmd, b->num[1], l->ttl_ms + HL_FENCE_KEEP_MS);
    hl_cmd_arg(cmd, "0", 1);
    hl_cmd_argi(cmd, b->num[2], mark_ms);
    return HILOCK_OK;
}

/* The holder's PTTL (in the reply) is the hint the quorum code takes. */
static int64_t busy(hilock *l, const hl_reply *r)
{
    (void)r;
    hl_fail(l->c, HILOCK_BUSY, "%s: held by another owner", l->key);
    return 0;
}

static int64_t valid_until(const hilock *l, int64_t ttl_ms, int64_t t0_us)
{
    return hl_valid_until(l->c, ttl_ms, t0_us);
}

static hilock_status extend_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b, int64_t ttl_ms)
{
    hl_cmd_init(cmd, &hl_lua_extend, 1);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
    hl_cmd_argi(cmd, b->num[0], ttl_ms);
    return HILOCK_OK;
}

const hl_kind_ops hl_kind_modern = {
    .name = "modern",
    .acquire_cmd = acquire_cmd,
    .busy = busy,
    .valid_until = valid_until,
    .usable = NULL,
    .extend_cmd = extend_cmd,
    .extend_end = NULL,
    .taken = "now held by another owner",
    .undo_unknown = 1,   /* a random token is ours alone: deleting it by value is safe */
    .failover = 1,
    .wake = 1,
    .keepalive = 1,
};
