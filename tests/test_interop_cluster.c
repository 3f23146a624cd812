/* SPDX-License-Identifier: BSD-3-Clause */
/* test_interop_cluster.c -- hilock and a cluster lock nobody here wrote, on the same keys of a
 * real Redis Cluster (3 masters + 3 replicas, cluster_fixture.h): redis-py's
 * RedisCluster(...).lock(...) (Debian's python3-redis 4.3.4), driven by
 * tests/interop/python/peer.py. redis-py's Lock is `SET name token NX PX` (token: uuid1 hex)
 * and Lua release/extend that GET and compare the token of KEYS[1] only; hilock's modern lock
 * writes its token there too (SET NX PX) and its aux keys ({key}:fence, :holder, ...) in the
 * key's slot (hl_aux_key). So each excludes the other on every key shape, both ways, and
 * neither touches the other's value.
 *
 * The python peer is /usr/bin/python3 (Debian's python3-redis lives in the system python's
 * dist-packages, which a pyenv or venv python3 earlier on PATH does not see) or
 * $HILOCK_PYTHON. Without redis-py every test is skipped, saying so (scripts/deps.sh and CI
 * install it). Needs Redis 4.0+ (hilock's cluster support). */
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "peer.h"

#define NEED_CLUSTER() HLT_NEEDS(40000, "hilock's Redis Cluster support needs replication ids (4.0+)")

HLT_CLUSTER_SHARE_HOOK("test_interop_cluster", 40000)   /* (before 4.0 every test says n/a) */
HLT_CLUSTER_UNSHARE_HOOK()

static hlt_cluster *F;

static void fini(void)
{
    hlt_cluster_stop(F);   /* a view: frees only */
    F = NULL;
}

TestSuite(interop_cluster, .fini = fini, .timeout = 120);

/* Every brace shape (the cluster's rule: the tag is between the first '{' and the first '}'
 * after it, if not empty; else the whole key hashes), as formats of a word of the test's own
 * (%s), so that no key of one test is part of another's name: a key found on a master that
 * contains the lock's name is the lock or one of its aux keys. */
static const char *const SHAPES[] = {
    "%s-plain",                            /* no braces: whole key */
    "{%s-tag}k",                           /* a tag first */
    "a{%s-b}c",                            /* a tag inside */
    "{}%s-x",                              /* empty tag: whole key */
    "{%s-a}{b}",                           /* two tags: the first counts */
    "%s-x{",                               /* '{' and no '}': whole key */
    "%s-}{y}",                             /* '}' first, then a tag */
    "%s-\xd0\xba\xd0\xbb\xd1\x8e\xd1\x87",    /* unicode (UTF-8), no braces */
    "{\xe9\x94\x81%s}\xc3\xbc",              /* a unicode tag */
};
#define NSHAPES (sizeof SHAPES / sizeof SHAPES[0])

static const char *python(void)
{
    const char *env = getenv("HILOCK_PYTHON");
    if (env && *env) return env;
    return access("/usr/bin/python3", X_OK) == 0 ? "/usr/bin/python3" : "python3";
}

/* Start `python3 peer.py ARGS...` (with a stdin pipe for serve). */
static void py_start(hlt_peer *p, const char *mode, const char *a1, const char *a2)
{
    char script[512];
    const char *argv[] = { "sh", "-c", "exec \"$0\" \"$@\"", python(), script, mode, a1, a2, NULL };
    snprintf(script, sizeof script, "%s/peer.py",
             hlt_peer_dir("python", "peer.py", "HILOCK_PYTHON_PEER_DIR"));
    hlt_peer_start(p, argv, a1 != NULL);
}

/* redis-py with RedisCluster, or skip the test saying what is missing. */
static void need_redis_py(char *version, size_t cap)
{
    hlt_peer p;
    const char *line;
    int rc;
    py_start(&p, "versions", NULL, NULL);
    line = hlt_peer_line(&p, 20000);
    snprintf(version, cap, "%s", line ? line : "(nothing)");
    rc = hlt_peer_end(&p, 10000);
    if (rc != 0)
        cr_skip_test("redis-py is missing for %s (Debian: apt-get install python3-redis; "
                     "scripts/deps.sh installs it): %s", python(), version);
}

static hlt_cluster *fx(void)
{
    NEED_CLUSTER();
    F = hlt_cluster_attach();
    cr_assert_not_null(F, "no cluster (the fixture did not start)");
    hlt_cluster_shared_use(F);
    return F;
}

/* The python peer serving commands on the cluster. */
typedef struct py {
    hlt_peer p;
    char     hex[256];   /* the last key, in hex */
} py;

static void py_serve(py *s, hlt_cluster *f)
{
    char port[16];
    snprintf(port, sizeof port, "%d", f->port[0]);
    py_start(&s->p, "serve", "127.0.0.1", port);
}

/* Send "CMD KEY-in-hex [arg]", return the answer line (asserted). */
static const char *py_ask(py *s, const char *cmd, const char *key, const char *arg)
{
    char line[400];
    const char *ans;
    size_t n = strlen(key);
    cr_assert_lt(n * 2, sizeof s->hex);
    for (size_t i = 0; i < n; i++) snprintf(s->hex + 2 * i, 3, "%02x", (unsigned char)key[i]);
    snprintf(line, sizeof line, "%s %s %s", cmd, n ? s->hex : "-", arg ? arg : "");
    hlt_peer_say(&s->p, line);
    ans = hlt_peer_line(&s->p, 20000);
    cr_assert_not_null(ans, "the python peer did not answer '%s %s'", cmd, key);
    cr_assert_null(strstr(ans, "\"error\""), "python peer, '%s %s': %s", cmd, key, ans);
    return ans;
}

static void py_done(py *s)
{
    hlt_peer_say(&s->p, "quit");
    cr_assert_eq(hlt_peer_end(&s->p, 10000), 0, "the python peer did not end cleanly");
}

/* redis-py's token from an acquire answer (32 hex digits), into tok. */
static void py_token(const char *ans, char tok[64])
{
    const char *t = strstr(ans, "\"token\":\"");
    cr_assert_not_null(t, "%s", ans);
    t += 9;
    size_t n = strcspn(t, "\"");
    cr_assert_eq(n, 32, "redis-py's token is not a uuid hex: %s", ans);
    memcpy(tok, t, n);
    tok[n] = '\0';
}

/* What the owning master holds for the key, read with a connection of our own. */
typedef struct state {
    char     *value;
    long long pttl;
} state;

static state read_state(hlt_cluster *f, int m, const char *key)
{
    state st = { hlt_cluster_get(f, m, key), -3 };
    redisReply *r = hlt_cluster_cmd(f, m, "PTTL %s", key);
    cr_assert(r && r->type == REDIS_REPLY_INTEGER, "PTTL on master %d", m);
    st.pttl = r->integer;
    freeReplyObject(r);
    return st;
}

static void assert_held_by(hlt_cluster *f, int m, const char *key, const char *token, long long ttl)
{
    state st = read_state(f, m, key);
    cr_assert(st.value && !strcmp(st.value, token), "master %d holds '%s' for %s, not '%s'", m,
              st.value ? st.value : "(nothing)", key, token);
    cr_assert(st.pttl > 0 && st.pttl <= ttl, "PTTL of %s: %lld (ttl %lld)", key, st.pttl, ttl);
    free(st.value);
}

/* Every key of the cluster whose name contains `key` (the lock and its aux keys) lives on
 * master m, in the key's slot: else a script naming them would fail CROSSSLOT. Returns how
 * many there are. */
static int keys_in_slot(hlt_cluster *f, int m, const char *key, int slot)
{
    int found = 0;
    for (int i = 0; i < f->nnodes; i++) {
        redisReply *r = hlt_cluster_cmd(f, i, "KEYS *");
        if (!r) continue;   /* (a replica that does not answer holds nothing of ours) */
        cr_assert_eq(r->type, REDIS_REPLY_ARRAY);
        for (size_t j = 0; j < r->elements; j++) {
            const char *k = r->element[j]->str;
            if (!strstr(k, key)) continue;
            int ks = hlt_cluster_keyslot(f, k);
            redisReply *role = hlt_cluster_cmd(f, i, "ROLE");
            int master = role && role->type == REDIS_REPLY_ARRAY && !strcmp(role->element[0]->str, "master");
            if (role) freeReplyObject(role);
            cr_assert_eq(ks, slot, "'%s' (of lock '%s') is in slot %d, the lock in %d", k, key, ks, slot);
            if (master) {
                cr_assert_eq(i, m, "'%s' is on master %d, the lock's master is %d", k, i, m);
                found++;
            }
        }
        freeReplyObject(r);
    }
    return found;
}

Test(interop_cluster, the_python_cluster_client_is_installed)
{
    char v[256];
    NEED_CLUSTER();
    need_redis_py(v, sizeof v);
    cr_log_info("interop python peer: %s", v);
    fprintf(stderr, "interop python peer (%s): %s\n", python(), v);
    cr_assert_gt(hlt_jnum(v, "redis"), 0, "%s", v);   /* (4.1+: RedisCluster imported) */
}

Test(interop_cluster, redis_py_and_hilock_hash_every_key_shape_to_the_servers_slot)
{
    char v[256];
    hlt_cluster *f = fx();
    py s;
    need_redis_py(v, sizeof v);
    py_serve(&s, f);
    for (size_t i = 0; i < NSHAPES; i++) {
        char key[128];
        snprintf(key, sizeof key, SHAPES[i], "slot");
        int slot = hlt_cluster_keyslot(f, key);
        cr_assert_geq(slot, 0);
        long long theirs = hlt_jnum(py_ask(&s, "slot", key, NULL), "slot");
        cr_assert_eq(theirs, slot, "redis-py puts '%s' in slot %lld, the server in %d", key, theirs, slot);
        hlt_peer_next(&s.p);
    }
    py_done(&s);
}

/* redis-py holds: hilock is BUSY at once and changes nothing; redis-py releases (its own
 * token compare), hilock then gets the key, its aux keys in the key's slot. */
static void python_holds_first(hlt_cluster *f, py *s, hilock_client *c, const char *key)
{
    char tok[64];
    hilock *l = NULL;
    int slot = hlt_cluster_keyslot(f, key), m = hlt_cluster_key_master(f, key);
    cr_assert_geq(m, 0, "no master for '%s'", key);
    py_token(py_ask(s, "acquire", key, "20000"), tok);
    hlt_peer_next(&s->p);
    assert_held_by(f, m, key, tok, 20000);
    int before = keys_in_slot(f, m, key, slot);
    cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_BUSY, "'%s': %s", key, hilock_client_errmsg(c));
    cr_assert_null(l);
    assert_held_by(f, m, key, tok, 20000);   /* value and expiry untouched */
    cr_assert_eq(keys_in_slot(f, m, key, slot), before, "a BUSY acquire of '%s' wrote keys", key);
    cr_assert_eq(hlt_jnum(py_ask(s, "release", key, NULL), "released"), 1, "'%s'", key);
    hlt_peer_next(&s->p);
    cr_assert_eq(hlt_cluster_exists(f, m, key), 0);
    cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_OK, "'%s': %s", key, hilock_client_errmsg(c));
    assert_held_by(f, m, key, hilock_token(l), 10000);
    cr_assert_geq(keys_in_slot(f, m, key, slot), 2, "'%s': no aux key (fence) next to the lock", key);
    cr_assert_eq(hilock_release(l), HILOCK_OK, "'%s': %s", key, hilock_client_errmsg(c));
    cr_assert_eq(hlt_cluster_exists(f, m, key), 0);
    hilock_free(l);
}

/* hilock holds: redis-py's non-blocking acquire is False and changes nothing; hilock
 * releases, redis-py then gets the key, and its release deletes it. */
static void hilock_holds_first(hlt_cluster *f, py *s, hilock_client *c, const char *key)
{
    char tok[64];
    hilock *l = NULL;
    int slot = hlt_cluster_keyslot(f, key), m = hlt_cluster_key_master(f, key);
    cr_assert_geq(m, 0, "no master for '%s'", key);
    cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_OK, "'%s': %s", key, hilock_client_errmsg(c));
    assert_held_by(f, m, key, hilock_token(l), 10000);
    int aux = keys_in_slot(f, m, key, slot);
    cr_assert_geq(aux, 2, "'%s': no aux key (fence) next to the lock", key);
    cr_assert_eq(hlt_jnum(py_ask(s, "acquire", key, "20000"), "acquired"), 0, "redis-py took '%s' from hilock", key);
    hlt_peer_next(&s->p);
    assert_held_by(f, m, key, hilock_token(l), 10000);
    cr_assert_eq(keys_in_slot(f, m, key, slot), aux);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "'%s': %s", key, hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK, "'%s': %s", key, hilock_client_errmsg(c));
    hilock_free(l);
    cr_assert_eq(hlt_cluster_exists(f, m, key), 0);
    py_token(py_ask(s, "acquire", key, "20000"), tok);
    hlt_peer_next(&s->p);
    assert_held_by(f, m, key, tok, 20000);
    cr_assert_eq(hlt_jnum(py_ask(s, "release", key, NULL), "released"), 1, "'%s'", key);
    hlt_peer_next(&s->p);
    cr_assert_eq(hlt_cluster_exists(f, m, key), 0);
}

Test(interop_cluster, a_redis_py_cluster_lock_makes_hilock_busy_on_every_key_shape)
{
    char v[256];
    hlt_cluster *f = fx();
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;   /* (no test here fails a shard over) */
    hilock_client *c = hlt_client_new(&o);
    py s;
    need_redis_py(v, sizeof v);
    py_serve(&s, f);
    for (size_t i = 0; i < NSHAPES; i++) {
        char key[128];
        snprintf(key, sizeof key, SHAPES[i], "py-first");
        python_holds_first(f, &s, c, key);
    }
    py_done(&s);
    hilock_client_free(c);
}

Test(interop_cluster, a_hilock_lock_makes_redis_py_fail_on_every_key_shape)
{
    char v[256];
    hlt_cluster *f = fx();
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;   /* (no test here fails a shard over) */
    hilock_client *c = hlt_client_new(&o);
    py s;
    need_redis_py(v, sizeof v);
    py_serve(&s, f);
    for (size_t i = 0; i < NSHAPES; i++) {
        char key[128];
        snprintf(key, sizeof key, SHAPES[i], "hl-first");
        hilock_holds_first(f, &s, c, key);
    }
    py_done(&s);
    hilock_client_free(c);
}

/* Found by torture's cluster mode (migrate-slot), not an interop matter: kept here, with the
 * cluster at hand. release.lua, on a key someone waits for (the waiters marker set, an unclaimed
 * wake-up in the signal list), DELs the signal list and then RPUSHes to it: once the slot is
 * MIGRATING, the script's keys all being there, the server runs it, but the RPUSH names a key
 * that is no longer on this node, which the server refuses in a script ("non local key") after
 * the DEL of the lock: the lock is gone and the caller is told EREPLY. */
Test(interop_cluster, a_release_in_a_migrating_slot_with_a_waiter_says_ok, .timeout = 120)
{
    hlt_cluster *f;
    hilock_client *c;
    hilock *l = NULL;
    redisReply *r;
    const char *key = "{mig-rel}k";
    char waiters[64], signal_[64];
    NEED_CLUSTER();
    F = f = hlt_cluster_attach();
    cr_assert_not_null(f, "no cluster (the fixture did not start)");
    hlt_cluster_exclusive(f);   /* a slot in migration: no other test meanwhile */
    hilock_options o = hlt_options((const char *[]){ f->url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;   /* (no test here fails a shard over) */
    c = hlt_client_new(&o);
    int slot = hlt_cluster_keyslot(f, key), m = hlt_cluster_key_master(f, key), to = -1;
    for (int i = 0; i < f->nnodes && to < 0; i++) {
        r = i == m ? NULL : hlt_cluster_cmd(f, i, "ROLE");
        if (r && r->type == REDIS_REPLY_ARRAY && !strcmp(r->element[0]->str, "master")) to = i;
        if (r) freeReplyObject(r);
    }
    cr_assert(m >= 0 && to >= 0);
    snprintf(waiters, sizeof waiters, "%s:waiters", key);   /* (hl_aux_key: a tag, appended) */
    snprintf(signal_, sizeof signal_, "%s:signal", key);
    cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    /* a waiter's marker, and a wake-up nobody claimed yet (as a busy acquire and a release leave them) */
    freeReplyObject(hlt_cluster_cmd(f, m, "SET %s 1 PX 10000", waiters));
    freeReplyObject(hlt_cluster_cmd(f, m, "RPUSH %s 1", signal_));
    freeReplyObject(hlt_cluster_cmd(f, m, "PEXPIRE %s 10000", signal_));
    cr_assert_eq(hlt_cluster_migrate_begin(f, slot, to), 0);
    hilock_status st = hilock_release(l);
    const char *msg = hilock_client_errmsg(c);
    char why[300];
    snprintf(why, sizeof why, "%s", msg ? msg : "");
    long long left = hlt_cluster_exists(f, m, key);
    /* call the move off (no key moved), so the cluster is whole whatever the verdict */
    for (int i = 0; i < f->nnodes; i++) {
        r = hlt_cluster_cmd(f, i, "CLUSTER SETSLOT %d STABLE", slot);
        if (r) freeReplyObject(r);
    }
    cr_assert_eq(hlt_cluster_heal_all(f, 30000), 0);
    hilock_free(l);
    hilock_client_free(c);
    cr_assert_eq(left, 0, "the lock is still there after its release");
    cr_assert_eq(st, HILOCK_OK, "the release deleted the lock but said %d: %s", (int)st, why);
}
