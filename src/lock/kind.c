/* SPDX-License-Identifier: BSD-3-Clause */
/* kind.c -- the kind seam's defaults (kind.h): each optional entry of a kind's table, called
 * through one function here that runs the table's entry or, where the table leaves it NULL,
 * what every kind does by default. lock.c calls these and never tests a table member for
 * NULL, so a default lives in one place and a new kind's table says only what differs. */
#include "kind.h"

hilock_status hl_kind_refused(const hl_kind_ops *k, hilock_client *c, int limit)
{
    return k->refused ? k->refused(c, limit) : HILOCK_OK;
}

hl_verdict (*hl_kind_verdict(const hilock *l))(const hl_reply *r, uint64_t *fence, long long *pttl_ms)
{
    return l->kind->acquire_verdict ? l->kind->acquire_verdict : hl_acquire_verdict;
}

/* What the key must hold, as WRONGTYPE's message says it: a string, by default. */
const char *hl_kind_what(const hilock *l)
{
    return l->kind->what ? l->kind->what : "a lock";
}

hilock_status hl_kind_usable(hilock *l, const char *op)
{
    return l->kind->usable ? l->kind->usable(l, op) : HILOCK_OK;
}

void hl_kind_extend_end(hilock *l, const hl_kind_buf *b, int ours)
{
    if (l->kind->extend_end) l->kind->extend_end(l, b, ours);
}

hilock_status hl_kind_init(hilock *l)
{
    return l->kind->init ? l->kind->init(l) : HILOCK_OK;
}

void hl_kind_give_up(hilock *l, hl_deadline dl)
{
    if (l->kind->give_up) l->kind->give_up(l, dl);
}

void hl_kind_granted(hilock *l, uint64_t count, int64_t kept_ms, int64_t t0_us)
{
    if (l->kind->granted) l->kind->granted(l, count, kept_ms, t0_us);
}

/* release.lua (with the wake-up keys for kinds whose release wakes a waiter, wait.c) or
 * check.lua: the same compare of our exact value for every kind. */
static void value_cmd(hilock *l, hl_cmd *cmd, const hl_script *s)
{
    int wake = s == &hl_lua_release && l->kind->wake;
    hl_cmd_init(cmd, s, wake ? 3 : 1);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    if (wake) {
        hl_cmd_arg(cmd, l->signal_key, (size_t)-1);
        hl_cmd_arg(cmd, l->waiters_key, (size_t)-1);
    }
    hl_cmd_arg(cmd, l->token, (size_t)-1);
}

void hl_kind_release_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    if (l->kind->release_cmd) l->kind->release_cmd(l, cmd, b);
    else value_cmd(l, cmd, &hl_lua_release);
}

void hl_kind_check_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    if (l->kind->check_cmd) l->kind->check_cmd(l, cmd, b);
    else value_cmd(l, cmd, &hl_lua_check);
}

/* A grant given back at once: release.lua by our value (an undo wakes no one). The holder
 * record stays: it names the client, not the grant (acquire.lua), and lapses by itself. */
void hl_kind_undo_cmd(hilock *l, hl_cmd *cmd, hl_kind_buf *b)
{
    if (l->kind->undo_cmd) {
        l->kind->undo_cmd(l, cmd, b);
        return;
    }
    hl_cmd_init(cmd, &hl_lua_release, 1);
    hl_cmd_arg(cmd, l->key, (size_t)-1);
    hl_cmd_arg(cmd, l->token, (size_t)-1);
}
