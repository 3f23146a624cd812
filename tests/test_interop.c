/* SPDX-License-Identifier: BSD-3-Clause */
/* test_interop.c -- hilock against a real legacy client that nobody here wrote: the npm
 * package redis-lock@0.0.9 (SETNX/GETSET, integer millisecond stamps + 1, expired iff
 * stamp <= Date.now(), key "lock.<name>", no TTL) on redis@3.1.2, driven by
 * tests/interop/node/peer.js. Both sides contend on the same key and count overlaps.
 *
 * Needs node and npm: the packages are installed from the lockfile if missing (npm ci, under
 * a file lock). Without node or npm every test FAILS, loudly: this suite never skips. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"
#include "peer.h"

/* SETNX calls so far on r: the node client's attempts (redis-lock 0.0.9 starts each with one). */
static long long setnx_calls(hlt_redis *r)
{
    long long n = hlt_info_int(r, "commandstats", "cmdstat_setnx:calls=");
    return n > 0 ? n : 0;
}

/* tests/interop/node: $HILOCK_NODE_DIR, else found from the working directory or the binary. */
static const char *node_dir(void) { return hlt_peer_dir("node", "peer.js", "HILOCK_NODE_DIR"); }

/* node and npm present, packages installed from the lockfile (scripts/deps-node.sh, the
 * step `make test` runs too): or fail the test, loudly. */
static void need_node(void)
{
    char cmd[PATH_MAX + 64];
    snprintf(cmd, sizeof cmd, "sh '%s/../../../scripts/deps-node.sh'", node_dir());
    if (system(cmd) != 0)
        cr_assert_fail("interop: node and npm are required, with the pinned packages installed "
                       "(scripts/deps-node.sh failed: see above); this suite does not skip");
}

/* Start `node peer.js args...`; stdout is read through a pipe (tests/peer.h). The peer dies
 * with us. Through `sh -c 'exec node ...'`: under `make test-valgrind` the runner follows exec
 * into Criterion's workers but skips shells, so node (V8 under memcheck: minutes per start) is
 * not traced. */
static void peer_start(hlt_peer *p, const char *const *args)
{
    char script[PATH_MAX + 16];
    const char *argv[14];
    int n = 0;
    snprintf(script, sizeof script, "%s/peer.js", node_dir());
    argv[n++] = "sh";
    argv[n++] = "-c";
    argv[n++] = "exec node \"$@\"";
    argv[n++] = "node";   /* $0 */
    argv[n++] = script;
    for (int i = 0; args[i] && n < 13; i++) argv[n++] = args[i];
    argv[n] = NULL;
    hlt_peer_start(p, argv, 0);
}

static long long get_num(hlt_redis *r, const char *key)
{
    char *v = hlt_get(r, key);
    long long n = v ? atoll(v) : 0;
    free(v);
    return n;
}

static void port_arg(hlt_redis *r, char *buf) { snprintf(buf, 16, "%d", r->port); }

Test(interop, the_pinned_legacy_client_is_installed)
{
    hlt_peer p;
    need_node();
    const char *args[] = { "versions", NULL };
    peer_start(&p, args);
    const char *line = hlt_peer_line(&p, 20000);
    cr_assert_not_null(line, "node peer.js versions printed nothing");
    cr_assert(strstr(line, "\"redisLock\":\"0.0.9\"") && strstr(line, "\"redis\":\"3.1.2\""), "%s", line);
    cr_log_info("interop peer: %s", line);
    cr_assert_eq(hlt_peer_end(&p, 10000), 0);
}

/* Both sides take the lock in turns for a bounded time; each counts, in its critical
 * section, whether the other was inside, and does a read-modify-write of a shared counter. */
static void contend(int bridge, const char *name)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", bridge);
    char port[16], key[64], inside[80], counter[80];
    long ours = 0, overlaps = 0, releases_ok = 0;
    hlt_peer p;
    need_node();
    port_arg(r, port);
    snprintf(key, sizeof key, "lock.%s", name);
    snprintf(inside, sizeof inside, "%s:inside", key);
    snprintf(counter, sizeof counter, "%s:counter", key);
    const char *args[] = { "contend", port, name, "3000", "2000", "10", NULL };
    peer_start(&p, args);
    long long end = hlt_now_ms() + 3000;
    unsigned seed = (unsigned)getpid();
    while (hlt_now_ms() < end) {
        hilock *l = NULL;
        hilock_status st = bridge ? hilock_acquire(c, key, 2000, 3000, &l)
                                  : hilock_legacy_acquire(c, key, 2000, 3000, &l);
        if (st == HILOCK_BUSY) continue;
        cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(c));
        redisReply *in = hlt_cmd(r, "INCR %s", inside);
        if (!in || in->integer != 1) overlaps++;
        if (in) freeReplyObject(in);
        long long v = get_num(r, counter);
        hlt_sleep_ms(1 + (long)(rand_r(&seed) % 2));
        freeReplyObject(hlt_cmd(r, "SET %s %lld", counter, v + 1));
        freeReplyObject(hlt_cmd(r, "DECR %s", inside));
        cr_assert_gt(hilock_validity_ms(l), 0, "the critical section outlived the lock");
        if (hilock_release(l) == HILOCK_OK) releases_ok++;
        hilock_free(l);
        ours++;
        hlt_sleep_ms(2 + (long)(rand_r(&seed) % 10));   /* let the other side in */
    }
    const char *line = hlt_peer_line(&p, 20000);
    cr_assert_not_null(line, "the node peer did not report");
    long long theirs = hlt_jnum(line, "acquired"), their_overlaps = hlt_jnum(line, "overlaps");
    cr_assert_eq(hlt_peer_end(&p, 10000), 0);
    long long total = get_num(r, counter);
    cr_log_info("interop %s vs redis-lock@0.0.9: hilock %ld, node %lld, counter %lld, overlaps %ld + %lld",
                bridge ? "bridge" : "legacy", ours, theirs, total, overlaps, their_overlaps);
    fprintf(stderr, "interop %s vs redis-lock@0.0.9: hilock %ld, node %lld, counter %lld, overlaps %ld + %lld\n",
            bridge ? "bridge" : "legacy", ours, theirs, total, overlaps, their_overlaps);
    cr_assert_eq(overlaps, 0);
    cr_assert_eq(their_overlaps, 0);
    cr_assert_eq(total, ours + theirs, "lost updates: counter %lld, grants %ld + %lld", total, ours, theirs);
    cr_assert_eq(releases_ok, ours, "a release found another value");
    cr_assert_gt(ours, 10);
    cr_assert_gt(theirs, 10);
    cr_assert_eq(get_num(r, inside), 0);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(interop, legacy_lock_and_node_client_take_turns_without_overlap, .timeout = 60)
{
    contend(0, "ctr_legacy");
}

Test(interop, bridge_lock_and_node_client_take_turns_without_overlap, .timeout = 60)
{
    contend(1, "ctr_bridge");
}

Test(interop, the_node_client_never_steals_a_live_bridge_lock, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", 1);
    hilock *l;
    char port[16];
    hlt_peer p;
    need_node();
    port_arg(r, port);
    /* (a ttl far past the 1.5 s of checks below: on a loaded machine they may take longer) */
    cr_assert_eq(hilock_acquire(c, "lock.live", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    const char *args[] = { "once", port, "live", "2000", "10", NULL };
    peer_start(&p, args);
    /* node polls every 10 ms: through 100 of its attempts (its SETNX calls), value and PX must stay ours */
    long long setnx0 = setnx_calls(r);
    for (long long end = hlt_now_ms() + 20000; setnx_calls(r) < setnx0 + 100;) {
        cr_assert_lt(hlt_now_ms(), end, "node made %lld attempts in 20 s", setnx_calls(r) - setnx0);
        hlt_sleep_ms(10);
        char *v = hlt_get(r, "lock.live");
        cr_assert(v && !strcmp(v, hilock_token(l)), "the bridge lock was overwritten: %s", v ? v : "(gone)");
        free(v);
        cr_assert_gt(hlt_pttl(r, "lock.live"), 0, "the PX was stripped");
        cr_assert_eq(hilock_check(l), HILOCK_OK);
    }
    long long released = hlt_wall_ms();
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    const char *line = hlt_peer_line(&p, 10000);
    cr_assert_not_null(line, "node never acquired after the release");
    long long at = hlt_jnum(line, "acquired_at");
    cr_assert_geq(at, released, "node acquired %lld ms before the release", released - at);
    cr_log_info("interop: node acquired %lld ms after the bridge release", at - released);
    cr_assert_eq(hlt_peer_end(&p, 10000), 0);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(interop, a_crashed_bridge_holder_frees_the_key_by_its_px, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", 1);
    hilock *l;
    char port[16];
    hlt_peer p;
    need_node();
    port_arg(r, port);
    long long t0 = hlt_wall_ms();
    cr_assert_eq(hilock_acquire(c, "lock.gone", 1500, 0, &l), HILOCK_OK);
    hilock_free(l);   /* we die holding it */
    const char *args[] = { "once", port, "gone", "2000", "10", NULL };
    peer_start(&p, args);
    const char *line = hlt_peer_line(&p, 15000);
    cr_assert_not_null(line, "node never acquired");
    long long at = hlt_jnum(line, "acquired_at");
    cr_assert_geq(at, t0 + 1400, "node acquired %lld ms after our grant, before our PX ended", at - t0);
    cr_assert_eq(hlt_peer_end(&p, 10000), 0);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

static void crashed_node_holder(int bridge)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", bridge);
    hilock *l = NULL;
    char port[16], name[32], key[48];
    hlt_peer p;
    need_node();
    port_arg(r, port);
    snprintf(name, sizeof name, "crash%d", bridge);
    snprintf(key, sizeof key, "lock.%s", name);
    const char *args[] = { "hold", port, name, "1200", NULL };
    peer_start(&p, args);
    const char *line = hlt_peer_line(&p, 15000);
    cr_assert_not_null(line, "node did not acquire");
    long long stamp = hlt_jnum(line, "value");
    cr_assert_eq(hlt_peer_end(&p, 10000), 0);   /* it exited holding the lock */
    cr_assert_eq(hlt_pttl(r, key), -1);
    hilock_status st = bridge ? hilock_acquire(c, key, 1000, 0, &l) : hilock_legacy_acquire(c, key, 1000, 0, &l);
    cr_assert_eq(st, HILOCK_BUSY, "took a live node lock");
    st = bridge ? hilock_acquire(c, key, 3000, 8000, &l) : hilock_legacy_acquire(c, key, 3000, 8000, &l);
    long long at = hlt_wall_ms();
    cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_geq(at, stamp, "taken over %lld ms before node's stamp passed", stamp - at);
    cr_assert_lt(at, stamp + 3000, "took %lld ms after the stamp passed", at - stamp);
    char *v = hlt_get(r, key);
    cr_assert_str_eq(v, hilock_token(l));
    free(v);
    if (bridge) cr_assert_gt(hlt_pttl(r, key), 0);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}

Test(interop, a_crashed_node_holder_is_taken_over_when_its_stamp_passes, .timeout = 60)
{
    crashed_node_holder(0);
}

Test(interop, a_crashed_node_holder_is_taken_over_by_a_bridge_lock, .timeout = 60)
{
    crashed_node_holder(1);
}

Test(interop, a_late_node_release_deletes_nothing_of_ours, .timeout = 60)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *c = hlt_codec_client(r->url, "node-redis-lock", 0);
    hilock *l = NULL;
    char port[16];
    hlt_peer p;
    need_node();
    port_arg(r, port);
    const char *args[] = { "hold-late", port, "late", "800", "1800", NULL };
    peer_start(&p, args);
    const char *line = hlt_peer_line(&p, 15000);
    cr_assert_not_null(line, "node did not acquire");
    long long stamp = hlt_jnum(line, "value");
    hlt_peer_next(&p);
    /* node pauses past its stamp; we take over, then node wakes up and "releases" */
    cr_assert_eq(hilock_legacy_acquire(c, "lock.late", 5000, 8000, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_geq(hlt_wall_ms(), stamp);
    line = hlt_peer_line(&p, 15000);
    cr_assert_not_null(line, "node did not release");
    (void)hlt_jnum(line, "released_at");
    cr_assert_eq(hlt_peer_end(&p, 10000), 0);
    char *v = hlt_get(r, "lock.late");
    cr_assert(v && !strcmp(v, hilock_token(l)), "node's late release deleted our lock");
    free(v);
    cr_assert_eq(hilock_check(l), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(r);
}
