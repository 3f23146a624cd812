/* SPDX-License-Identifier: BSD-3-Clause */
/* test_cluster_scale.c -- a cluster at real size, for the cost of a few servers: a fake seed
 * (a forked child on 127.0.0.1 that answers CLUSTER NODES with a map the test writes: 70
 * masters, a thousand nodes, masters moving to new addresses at every answer, or no answer at
 * all after the first) in front of real redis-servers, each a cluster of its own that owns the
 * slots the map gives it (CLUSTER ADDSLOTS, cluster-require-full-coverage no), so every lock is
 * really granted where the map says and read back there. The other masters of a map sit on
 * ports bound by the test and never listened on (a connect is refused at once). And one real
 * cluster of 30 masters, for routing across many real shards.
 *
 * The real servers' CLUSTER command is renamed: asked for the map as a known master, a
 * one-node cluster would answer with its own slots only; renamed, it answers an error and the
 * fake seed's map is the one in use (the lock scripts read CLUSTER INFO with pcall: an epoch
 * of 0; these clients run without the failover guard). */
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "checks.h"
#include "clients.h"
#include "fakes.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_inspect.h"
#include "lock.h"   /* hl_slot_tag, HL_RESP_MAX_TOPOLOGY */

TestSuite(cluster_scale, .timeout = 120);

#define RENAMED "hlt-cluster-cmd"
#define MAX_REAL 3

/* ---- the map a fake seed serves ---- */
typedef struct spec {
    int masters, replicas;
    int fragmented;            /* slot s -> master s % masters; else contiguous ranges */
    int nreal;
    int real[MAX_REAL];        /* master index of each real server ... */
    int real_port[MAX_REAL];   /* ... and its port */
    int moved_at;              /* > 0: from this answer on, real[0]'s slots are real_port[1]'s */
    int churn;                 /* each answer puts the other masters on new ports */
    int *dead;                 /* ports bound, not listening: the other masters */
    int ndead;
    int hang_after;            /* > 0: answers that many maps, then never again */
    int replica_pad;           /* bytes of padding per replica line (a map past a bound) */
    int hostile;               /* 1: after real[0]'s line, ~2 MiB of master lines each giving
                                  "0-16383" again and again, at the dead ports; 2: at real[0]'s */
    int shrink_at;             /* > 0: from this answer on, real_port[1] alone serves every slot */
    int ask_slot;              /* > 0: not a seed but a master in migration, but for its lock
                                  scripts (held by another): every command is answered "ASK
                                  <ask_slot> <itself>" (CLUSTER: an error) */
} spec;

static volatile int *asked;    /* CLUSTER NODES requests the fake has seen (shared memory) */

static int owns(const spec *sp, int m, int slot)
{
    if (sp->fragmented) return slot % sp->masters == m;
    return slot >= m * 16384 / sp->masters && slot < (m + 1) * 16384 / sp->masters;
}

static int port_of(const spec *sp, int m, int gen)
{
    for (int k = 0; k < sp->nreal; k++)
        if (sp->real[k] == m) return k == 0 && sp->moved_at > 0 && gen >= sp->moved_at ? sp->real_port[1] : sp->real_port[k];
    return sp->dead[((sp->churn ? gen * sp->masters : 0) + m) % sp->ndead];
}

/* A hostile map (sp->hostile): real[0] serves every slot, then master lines, each ~2 KiB of
 * " 0-16383" repeated, up to just under HL_RESP_MAX_TOPOLOGY: 4 billion slots given in all. */
static char *hostile_text(const spec *sp, size_t *len)
{
    size_t cap = HL_RESP_MAX_TOPOLOGY, o = 0;
    char *t = malloc(cap);
    int p = sp->real_port[0];
    if (!t) return NULL;
    o += (size_t)snprintf(t, cap, "%040d 127.0.0.1:%d@%d master - 0 0 1 connected 0-16383\n", 1, p, p + 1);
    for (int i = 0; o + 2200 < cap - 1024; i++) {
        p = sp->hostile == 1 ? sp->dead[i % sp->ndead] : sp->real_port[0];
        o += (size_t)snprintf(t + o, cap - o, "%040d 127.0.0.1:%d@%d master - 0 0 %d connected", i + 2, p, p + 1, i + 2);
        for (int k = 0; k < 256; k++) o += (size_t)snprintf(t + o, cap - o, " 0-16383");
        t[o++] = '\n';
    }
    *len = o;
    return t;
}

/* The CLUSTER NODES text of answer number gen (malloc'd, *len). */
static char *map_text(const spec *sp, int gen, size_t *len)
{
    size_t cap = (size_t)(sp->masters + sp->replicas) * (200 + (size_t)sp->replica_pad) + 16384 * 12 + 4096, o = 0;
    char *t;
    if (sp->hostile) return hostile_text(sp, len);
    if (sp->shrink_at > 0 && gen >= sp->shrink_at) {
        int p = sp->real_port[1];
        if (!(t = malloc(200))) return NULL;
        *len = (size_t)snprintf(t, 200, "%040d 127.0.0.1:%d@%d master - 0 0 1 connected 0-16383\n", 1, p, p + 1);
        return t;
    }
    if (!(t = malloc(cap))) return NULL;
    for (int m = 0; m < sp->masters; m++) {
        int p = port_of(sp, m, gen), lo = -1;
        o += (size_t)snprintf(t + o, cap - o, "%040d 127.0.0.1:%d@%d master - 0 0 %d connected", m + 1, p,
                              p + 10000 > 65535 ? p - 10000 : p + 10000, m + 1);
        for (int s = 0; s <= 16384; s++) {   /* ranges of consecutive slots */
            int in = s < 16384 && owns(sp, m, s);
            if (in && lo < 0) lo = s;
            if (!in && lo >= 0) {
                o += (size_t)(lo == s - 1 ? snprintf(t + o, cap - o, " %d", lo)
                                          : snprintf(t + o, cap - o, " %d-%d", lo, s - 1));
                lo = -1;
            }
        }
        t[o++] = '\n';
    }
    for (int r = 0; r < sp->replicas; r++) {
        o += (size_t)snprintf(t + o, cap - o, "%040d 127.0.0.1:%d@%d slave %040d 0 0 %d connected", 100000 + r,
                              20000 + r % 40000, 30000 + r % 30000, r % sp->masters + 1, r % sp->masters + 1);
        for (int k = 0; k < sp->replica_pad; k++) t[o++] = ' ';
        t[o++] = '\n';
    }
    *len = o;
    return t;
}

/* One command of buf[0..have) ("*N" of "$len" bulks): bytes used (0: not complete yet), its
 * first two words in a and b. */
static size_t parse_cmd(const char *buf, size_t have, char *a, char *b)
{
    const char *p = buf, *end = buf + have;
    long n;
    a[0] = b[0] = '\0';
    if (have < 4 || *p != '*') return have ? have : 0;   /* (not RESP: dropped) */
    n = strtol(p + 1, NULL, 10);
    if (!(p = memchr(p, '\n', (size_t)(end - p)))) return 0;
    p++;
    for (long i = 0; i < n; i++) {
        long l;
        if (p >= end || *p != '$') return 0;
        l = strtol(p + 1, NULL, 10);
        if (!(p = memchr(p, '\n', (size_t)(end - p)))) return 0;
        p++;
        if (end - p < l + 2) return 0;
        if (i < 2) snprintf(i ? b : a, 32, "%.*s", (int)(l < 31 ? l : 31), p);
        p += l + 2;
    }
    return (size_t)(p - buf);
}

static void serve(int fd, void *arg)
{
    const spec *sp = arg;
    static char buf[16384];
    size_t have = 0;
    for (;;) {
        ssize_t r = recv(fd, buf + have, sizeof buf - have, 0);
        size_t used;
        char a[32], b[32];
        if (r <= 0) return;
        have += (size_t)r;
        while ((used = parse_cmd(buf, have, a, b)) > 0) {
            memmove(buf, buf + used, have - used);
            have -= used;
            if (sp->ask_slot > 0 && strcasecmp(a, "PING") && strcasecmp(a, "ASKING")) {
                char ask[96];
                struct sockaddr_in me;
                socklen_t ml = sizeof me;
                char info[] = "$21\r\nredis_version:7.0.0\r\n\r\n";
                struct timeval tv;
                if (getsockname(fd, (struct sockaddr *)&me, &ml) || gettimeofday(&tv, NULL)) return;
                if (!strcasecmp(a, "INFO") && !strcasecmp(b, "server")) {   /* (the handshake's) */
                    hlt_send_all(fd, info, strlen(info));
                    continue;
                }
                if (!strncasecmp(a, "EVAL", 4)) {   /* the lock's: held by another, 5 s left */
                    hlt_send_all(fd, "*2\r\n:0\r\n:5000\r\n", 15);
                    continue;
                }
                if (!strcasecmp(a, "TIME"))
                    snprintf(ask, sizeof ask, "*2\r\n$10\r\n%010ld\r\n$6\r\n%06ld\r\n", (long)tv.tv_sec, (long)tv.tv_usec);
                else if (!strcasecmp(a, "CLUSTER")) snprintf(ask, sizeof ask, "-ERR unknown command\r\n");
                else snprintf(ask, sizeof ask, "-ASK %d 127.0.0.1:%d\r\n", sp->ask_slot, ntohs(me.sin_port));
                hlt_send_all(fd, ask, strlen(ask));
            } else if (!strcasecmp(a, "ASKING")) {
                hlt_send_all(fd, "+OK\r\n", 5);
            } else if (!strcasecmp(a, "CLUSTER") && !strcasecmp(b, "NODES")) {
                int gen = __sync_fetch_and_add(asked, 1);
                size_t len;
                char hdr[32], *t;
                if (sp->hang_after > 0 && gen >= sp->hang_after) pause();   /* a frozen seed */
                if (!(t = map_text(sp, gen, &len))) return;
                snprintf(hdr, sizeof hdr, "$%zu\r\n", len);
                if (hlt_send_all(fd, hdr, strlen(hdr)) || hlt_send_all(fd, t, len) || hlt_send_all(fd, "\r\n", 2)) {
                    free(t);
                    return;
                }
                free(t);
            } else if (!strcasecmp(a, "PING")) {
                hlt_send_all(fd, "+PONG\r\n", 7);
            } else {
                hlt_send_all(fd, "-ERR unknown command\r\n", 22);
            }
        }
    }
}

typedef struct fake {
    pid_t pid;
    int   port;
    char  url[96];
} fake;

/* A fake seed for sp: each connection served by a child of its own (a hung one holds no
 * other), all killed with the fake (PDEATHSIG) and by alarm() at the latest. */
static fake fake_seed(const spec *sp)
{
    fake f;
    char url[64], name[64];
    int ls = hlt_listen(64, &f.port, url, name, sizeof url);
    cr_assert(ls >= 0);
    if (!asked) {   /* (one per test: each runs in a process of its own) */
        asked = mmap(NULL, sizeof *asked, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        cr_assert(asked != MAP_FAILED);
    }
    *asked = 0;
    snprintf(f.url, sizeof f.url, "redis-cluster://127.0.0.1:%d", f.port);
    f.pid = hlt_serve_fork(ls, 110, serve, (void *)sp);
    return f;
}

static void fake_stop(fake *f) { hlt_serve_stop(f->pid); }

/* n ports bound on 127.0.0.1 and not listened on (fds kept in fds): a connect is refused. */
static int *dead_ports(int n, int *fds)
{
    int *p = calloc((size_t)n, sizeof *p);
    cr_assert_not_null(p);
    for (int i = 0; i < n; i++) {
        struct sockaddr_in a;
        socklen_t l = sizeof a;
        fds[i] = socket(AF_INET, SOCK_STREAM, 0);
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        cr_assert(fds[i] >= 0 && bind(fds[i], (struct sockaddr *)&a, sizeof a) == 0 &&
                  getsockname(fds[i], (struct sockaddr *)&a, &l) == 0);
        p[i] = ntohs(a.sin_port);
    }
    return p;
}

static void dead_close(int *ports, int *fds, int n)
{
    for (int i = 0; i < n; i++) close(fds[i]);
    free(ports);
}

/* ---- real masters ---- */

/* A redis-server that is a cluster of its own, owning the slots master m of sp owns. */
static hlt_redis *real_master(const spec *sp, int m)
{
    hlt_redis *r = hlt_redis_start("--cluster-enabled yes --cluster-config-file nodes.conf "
                                   "--cluster-require-full-coverage no --rename-command CLUSTER " RENAMED);
    static const char *argv[2 + 16384];
    static char nums[16384][12];
    static size_t lens[2 + 16384];
    int argc = 2, ok = 0;
    long long end;
    redisReply *x;
    cr_assert_not_null(r, "redis-server did not start");
    argv[0] = RENAMED;
    argv[1] = "ADDSLOTS";
    for (int s = 0; s < 16384 && argc < (int)(sizeof argv / sizeof *argv); s++)
        if (owns(sp, m, s)) {
            snprintf(nums[argc - 2], sizeof nums[0], "%d", s);
            argv[argc] = nums[argc - 2];
            argc++;
        }
    for (int i = 0; i < argc; i++) lens[i] = strlen(argv[i]);
    x = redisCommandArgv(hlt_cli(r), argc, argv, lens);
    cr_assert(x && x->type == REDIS_REPLY_STATUS, "ADDSLOTS: %s", x && x->str ? x->str : "no reply");
    freeReplyObject(x);
    for (end = hlt_now_ms() + 10000; !ok && hlt_now_ms() < end; hlt_sleep_ms(20)) {
        x = hlt_cmd(r, RENAMED " INFO");
        ok = x && x->str && strstr(x->str, "cluster_state:ok");
        if (x) freeReplyObject(x);
    }
    cr_assert(ok, "the real master is not ok");
    return r;
}

/* A key whose slot is `slot`. */
static void key_at(int slot, const char *name, char *buf, size_t cap)
{
    char tag[32];
    hl_slot_tag((unsigned)slot, tag);
    snprintf(buf, cap, "{%s}%s", tag, name);
    cr_assert_eq(hl_key_slot(buf, strlen(buf)), (unsigned)slot);
}

/* Clients here: hlt_options's (tests/clients.h) with each test's io timeout, and
 * failover_guard 0 (off; the default, -1, is on for a cluster). */

/* A lock on key, granted on r (read back there), released (gone there). */
static void lock_on(hilock_client *c, hlt_redis *r, const char *key)
{
    hilock *l;
    char *v;
    cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_OK, "%s: %s", key, hilock_client_errmsg(c));
    v = hlt_get(r, key);
    cr_assert(v && !strcmp(v, hilock_token(l)), "%s is not held on port %d", key, r->port);
    free(v);
    cr_assert_eq(hilock_check(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_release_gone(r, c, l, key);
}

/* The table held 64 servers: with 70 masters, the last six were left out of the map and their
 * slots (16203 among them) were "not served". */
Test(cluster_scale, seventy_masters_are_all_in_the_map)
{
    spec sp = {.masters = 70, .nreal = 2, .real = {0, 69}};
    int fds[70];
    hlt_redis *r[2];
    hilock_client *c;
    char key[64];
    fake f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(70, fds);
    sp.ndead = 70;
    for (int k = 0; k < 2; k++) sp.real_port[k] = (r[k] = real_master(&sp, sp.real[k]))->port;
    f = fake_seed(&sp);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    key_at(16203, "seventy", key, sizeof key);
    lock_on(c, r[1], key);
    key_at(5, "seventy", key, sizeof key);
    lock_on(c, r[0], key);
    key_at(16383, "seventy", key, sizeof key);
    lock_on(c, r[1], key);
    hilock_client_free(c);
    fake_stop(&f);
    for (int k = 0; k < 2; k++) hlt_redis_stop(r[k]);
    dead_close(sp.dead, fds, 70);
}

/* A map of a thousand nodes is well over 64 KiB (the reply limit of every other reply): it was
 * refused "reply too large", so no call could run at all. Two shapes: a thousand masters whose
 * slots are dealt out one by one (every slot a range of its own), and three masters with 997
 * replicas. */
Test(cluster_scale, a_thousand_node_map_is_read)
{
    static int fds[1000];
    spec a = {.masters = 1000, .fragmented = 1, .nreal = 2, .real = {0, 999}};
    spec b = {.masters = 3, .replicas = 997, .nreal = 1, .real = {1}};
    hlt_redis *r[2], *rb;
    hilock_client *c;
    char key[64], *text;
    size_t len;
    fake f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    a.dead = b.dead = dead_ports(1000, fds);
    a.ndead = b.ndead = 1000;
    for (int k = 0; k < 2; k++) a.real_port[k] = (r[k] = real_master(&a, a.real[k]))->port;
    text = map_text(&a, 0, &len);
    cr_assert(len > 65536, "the map is %zu bytes", len);
    fprintf(stderr, "test_cluster_scale: 1000 masters, slots dealt one by one: %zu bytes\n", len);
    free(text);
    f = fake_seed(&a);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    key_at(999 + 1000 * 15, "thousand", key, sizeof key);
    lock_on(c, r[1], key);
    key_at(2000, "thousand", key, sizeof key);
    lock_on(c, r[0], key);
    hilock_client_free(c);
    fake_stop(&f);
    for (int k = 0; k < 2; k++) hlt_redis_stop(r[k]);

    b.real_port[0] = (rb = real_master(&b, 1))->port;
    text = map_text(&b, 0, &len);
    cr_assert(len > 65536, "the map is %zu bytes", len);
    fprintf(stderr, "test_cluster_scale: 3 masters + 997 replicas: %zu bytes\n", len);
    free(text);
    f = fake_seed(&b);
    o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    key_at(8000, "replicas", key, sizeof key);
    lock_on(c, rb, key);
    hilock_client_free(c);
    fake_stop(&f);
    hlt_redis_stop(rb);
    dead_close(a.dead, fds, 1000);
}

/* Past HL_RESP_MAX_TOPOLOGY the map is refused, bounded, with the limit in the message. */
Test(cluster_scale, a_map_past_the_topology_bound_is_refused)
{
    int fds[3];
    spec sp = {.masters = 3, .replicas = 4000, .replica_pad = 600};
    hilock_client *c;
    hilock *l;
    char *text;
    size_t len;
    long long t0;
    fake f;
    sp.dead = dead_ports(3, fds);
    sp.ndead = 3;
    text = map_text(&sp, 0, &len);
    cr_assert(len > HL_RESP_MAX_TOPOLOGY, "the map is %zu bytes", len);
    free(text);
    f = fake_seed(&sp);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    t0 = hlt_now_ms();
    cr_assert_eq(hilock_acquire(c, "past", 10000, 0, &l), HILOCK_EREPLY, "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t0, 5000);
    cr_assert(strstr(hilock_client_errmsg(c), "no seed gave the slot map") &&
              strstr(hilock_client_errmsg(c), "reply too large"), "%s", hilock_client_errmsg(c));
    hilock_client_free(c);
    fake_stop(&f);
    dead_close(sp.dead, fds, 3);
}

/* Masters move to new addresses at every map (pods rescheduled): 60 masters, 8 maps, 480
 * addresses; then the key's slot moves to a server never seen before. The table held the first
 * 64 addresses it saw and no more: the new server was never added ("no master serves slot").
 * Now each map replaces the table: the new server is used, and the connection to the one that
 * left the map is closed. */
Test(cluster_scale, masters_at_new_addresses_in_every_map_are_followed)
{
    enum { GENS = 8, POOL = 150 };
    int fds[POOL], gen = 0;
    spec sp = {.masters = 60, .churn = 1, .nreal = 2, .real = {30, -1}, .moved_at = GENS};
    hlt_redis *r[2];
    hilock_client *c;
    char key[64], dead_key[64];
    fake f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(POOL, fds);
    sp.ndead = POOL;
    for (int k = 0; k < 2; k++) sp.real_port[k] = (r[k] = real_master(&sp, 30))->port;
    f = fake_seed(&sp);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    key_at(30 * 16384 / 60 + 7, "churn", key, sizeof key);
    key_at(3, "dead", dead_key, sizeof dead_key);   /* master 0's: never listening */
    for (long long end = hlt_now_ms() + 30000; hlt_now_ms() < end;) {
        hilock *l;
        hlt_redis *on;
        char *v;
        cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_OK, "map %d: %s", *asked, hilock_client_errmsg(c));
        gen = *asked;   /* the maps served so far: the last one is in use (GENS on: r[1]) */
        on = gen > GENS ? r[1] : r[0];
        v = hlt_get(on, key);
        cr_assert(v && !strcmp(v, hilock_token(l)), "map %d: the lock is not on port %d", gen - 1, on->port);
        free(v);
        hlt_release_gone(on, c, l, key);
        if (gen > GENS) break;
        /* a call on a master that is not there: EIO, and the map is stale: the next call
         * after the interval asks for a new one */
        cr_assert_eq(hilock_acquire(c, dead_key, 10000, 0, &l), HILOCK_EIO, "%s", hilock_client_errmsg(c));
        hlt_sleep_ms(300);
    }
    cr_assert_gt(gen, GENS, "only %d maps asked", gen);
    /* r[0] left the map: its parked connection is closed (only the fixture's own is left) */
    for (long long end = hlt_now_ms() + 5000; hlt_now_ms() < end && hlt_info_int(r[0], "clients", "connected_clients:") > 1;)
        hlt_sleep_ms(20);
    cr_assert_eq(hlt_info_int(r[0], "clients", "connected_clients:"), 1, "the connection to the server that left is open");
    hilock_client_free(c);
    fake_stop(&f);
    for (int k = 0; k < 2; k++) hlt_redis_stop(r[k]);
    dead_close(sp.dead, fds, POOL);
}

/* The only seed answers once, then hangs; the map goes stale (the master stalls a call) and no
 * one else gives a map (the master's CLUSTER is renamed). Every call then asked the seed first,
 * within the call's connect bound, and the round trip found its own bound spent: ETIMEDOUT
 * after ~1 s each. Now a failed refresh routes with the map in hand, the refresh is bounded,
 * tried at most once per interval, and the round trip's bound starts after it. */
Test(cluster_scale, a_hung_seed_leaves_calls_to_the_map_in_hand)
{
    int fds[1];
    spec sp = {.masters = 1, .nreal = 1, .real = {0}, .hang_after = 1};
    hlt_redis *r;
    hilock_client *c;
    hilock *l;
    char key[64], *v;
    long long t0, worst = 0;
    int asks;
    fake f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(1, fds);
    sp.ndead = 1;
    sp.real_port[0] = (r = real_master(&sp, 0))->port;
    f = fake_seed(&sp);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 300;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    key_at(1234, "hung", key, sizeof key);
    cr_assert_eq(hilock_acquire(c, key, 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_redis_freeze(r);   /* a stall: the call times out, the map is stale */
    cr_assert_eq(hilock_extend(l, 30000), HILOCK_ETIMEDOUT, "%s", hilock_client_errmsg(c));
    hlt_redis_thaw(r);
    t0 = hlt_now_ms();
    for (int i = 0; i < 20; i++) {
        long long t = hlt_now_ms(), d;
        cr_assert_eq(hilock_extend(l, 30000), HILOCK_OK, "call %d: %s", i, hilock_client_errmsg(c));
        cr_assert_eq(hilock_check(l), HILOCK_OK, "call %d: %s", i, hilock_client_errmsg(c));
        if ((d = hlt_now_ms() - t) > worst) worst = d;
    }
    asks = *asked;
    fprintf(stderr, "test_cluster_scale: hung seed: 20 extend+check in %lld ms, worst %lld ms, %d map requests\n",
            hlt_now_ms() - t0, worst, asks);
    cr_assert_lt(worst, 1500, "a call took %lld ms", worst);
    /* at most one refresh per 250 ms while stale (and the first map) */
    cr_assert_leq(asks, 2 + (hlt_now_ms() - t0) / 250 + 1, "%d map requests", asks);
    v = hlt_get(r, key);
    cr_assert(v && !strcmp(v, hilock_token(l)), "the lock is not on the master");
    free(v);
    cr_assert_gt(hlt_pttl(r, key), 20000);
    hlt_release_gone(r, c, l, key);
    hilock_client_free(c);
    fake_stop(&f);
    hlt_redis_stop(r);
    dead_close(sp.dead, fds, 1);
}

/* An acquire times out on master A (its write may have landed: an undo is kept for A); then the
 * map moves the slot to B (a failover: B has A's data) and A leaves the map. The undo stayed
 * with A's entry, never contacted again, so the value held the key on B until its ttl; now it
 * goes to the slot's new owner and is sent on the next call there: the key is freed at once. */
Test(cluster_scale, an_undo_of_a_master_that_left_the_map_goes_to_the_slots_new_owner)
{
    int fds[1];
    spec sp = {.masters = 1, .nreal = 2, .real = {0, -1}, .moved_at = 1};
    hlt_redis *r[2];
    hilock_client *c;
    hilock *l;
    char key[64], key2[64], *v;
    redisReply *x;
    fake f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(1, fds);
    sp.ndead = 1;
    for (int k = 0; k < 2; k++) sp.real_port[k] = (r[k] = real_master(&sp, 0))->port;
    f = fake_seed(&sp);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 300;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    key_at(777, "undo", key, sizeof key);
    key_at(777, "undo2", key2, sizeof key2);
    lock_on(c, r[0], key2);   /* the map (A owns every slot), a connection to A */
    hlt_redis_freeze(r[0]);
    cr_assert_eq(hilock_acquire(c, key, 30000, 0, &l), HILOCK_ETIMEDOUT, "%s", hilock_client_errmsg(c));
    hlt_redis_thaw(r[0]);
    /* A ran the write once thawed; B gets A's data, as a promoted replica has it */
    for (long long end = hlt_now_ms() + 5000; !(v = hlt_get(r[0], key)) && hlt_now_ms() < end;) hlt_sleep_ms(10);
    cr_assert_not_null(v, "A never ran the acquire");
    x = hlt_cmd(r[1], "SET %s %s PX 30000", key, v);
    cr_assert(x && x->type == REDIS_REPLY_STATUS);
    freeReplyObject(x);
    hlt_sleep_ms(300);   /* past the refresh interval: the next call takes the new map */
    lock_on(c, r[1], key2);
    cr_assert_eq(*asked, 2, "%d maps asked", *asked);
    cr_assert_eq(hlt_exists(r[1], key), 0, "the undo did not reach the slot's new owner");
    free(v);
    hilock_client_free(c);
    fake_stop(&f);
    for (int k = 0; k < 2; k++) hlt_redis_stop(r[k]);
    dead_close(sp.dead, fds, 1);
}

/* A release meets CLUSTERDOWN (its slot served by no one for a moment, as during a failover):
 * retried after short pauses within the call's bound, and the map is asked for again; once
 * the slot is served again the release goes through.
 * The slot comes back once the release has asked for the map again (the fake seed's count),
 * and no sooner than 300 ms after it went: a child that slept a fixed 300 ms could, on a
 * loaded machine, add the slot back before the release ran at all (nothing was retried, no
 * map asked for). The retries' bound is the first round trip's io_timeout_ms (2 s) and at
 * most HL_MAX_REDIRECTS pauses (10 ms doubling to 160 ms: ~2 s), so a longer io_timeout_ms
 * would not leave the child more time; it does nothing slow in the ~1.7 s it has. */
Test(cluster_scale, a_release_during_clusterdown_is_retried_within_the_bound)
{
    int fds[1];
    spec sp = {.masters = 1, .nreal = 1, .real = {0}};
    hlt_redis *r;
    hilock_client *c;
    hilock *l;
    char key[64], slot[8];
    redisReply *x;
    long long t0, took;
    pid_t kid;
    int maps, kid_rc;
    hilock_status st;
    fake f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(1, fds);
    sp.ndead = 1;
    sp.real_port[0] = (r = real_master(&sp, 0))->port;
    f = fake_seed(&sp);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    key_at(4242, "down", key, sizeof key);
    snprintf(slot, sizeof slot, "%d", 4242);
    cr_assert_eq(hilock_acquire(c, key, 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_sleep_ms(300);   /* past the refresh interval (250 ms): the first CLUSTERDOWN may ask */
    maps = *asked;
    x = hlt_cmd(r, RENAMED " DELSLOTS %s", slot);
    cr_assert(x && x->type == REDIS_REPLY_STATUS, "DELSLOTS");
    freeReplyObject(x);
    t0 = hlt_now_ms();
    if ((kid = fork()) == 0) {   /* the slot is served again once the release asked for a map */
        redisContext *k;
        long long end = t0 + 10000;
        while ((*asked <= maps || hlt_now_ms() < t0 + 300) && hlt_now_ms() < end) hlt_sleep_ms(1);
        if (*asked <= maps) _exit(2);
        k = redisConnect("127.0.0.1", r->port);
        x = k && !k->err ? redisCommand(k, RENAMED " ADDSLOTS %s", slot) : NULL;
        _exit(x && x->type == REDIS_REPLY_STATUS ? 0 : 1);
    }
    st = hilock_release(l);
    took = hlt_now_ms() - t0;
    kid_rc = hlt_reap(kid, 15000);
    fprintf(stderr, "test_cluster_scale: CLUSTERDOWN: release %s after %lld ms, %d map requests\n",
            hilock_strerror(st), took, *asked - maps);
    cr_assert_neq(kid_rc, 2, "the map was not asked for again after CLUSTERDOWN (release: %s: %s)",
                  hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_eq(kid_rc, 0, "the slot was not added back (%d)", kid_rc);
    cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_lt(took, 4000, "the release took %lld ms", took);
    cr_assert_eq(hlt_exists(r, key), 0);
    cr_assert_gt(*asked, maps, "the map was not asked for again after CLUSTERDOWN");
    hilock_free(l);
    hilock_client_free(c);
    fake_stop(&f);
    hlt_redis_stop(r);
    dead_close(sp.dead, fds, 1);
}

/* A hostile (or broken) map: after the line of the master that serves every slot, ~2 MiB of
 * master lines each giving "0-16383" over and over (4 billion slots in all), at other
 * addresses or at the same one. Each slot was written again for every range: the first call
 * took seconds of CPU reading the map (and the last line's master got every slot). Now a map
 * gives at most 16,384 slots, the rest is ignored: the first call is quick and the lock is
 * granted by the master that served every slot first. */
Test(cluster_scale, a_map_giving_every_slot_again_and_again_is_read_in_linear_time)
{
    int fds[64];
    spec sp = {.masters = 1, .nreal = 1, .real = {0}};
    hlt_redis *r;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(64, fds);
    sp.ndead = 64;
    sp.real_port[0] = (r = real_master(&sp, 0))->port;
    for (sp.hostile = 1; sp.hostile <= 2; sp.hostile++) {
        hilock_client *c;
        hilock *l = NULL;
        hilock_status st;
        char key[64], *text;
        size_t len;
        long long t0, took;
        fake f;
        text = map_text(&sp, 0, &len);
        cr_assert(len > (2 << 20) - 8192 && len <= HL_RESP_MAX_TOPOLOGY, "the map is %zu bytes", len);
        free(text);
        f = fake_seed(&sp);
        hilock_options o = hlt_options((const char *[]){ f.url }, 1);
        o.io_timeout_ms = 10000;
        o.failover_guard = 0;
        c = hlt_client_new(&o);
        key_at(9999, "hostile", key, sizeof key);
        t0 = hlt_now_ms();
        st = hilock_acquire(c, key, 10000, 0, &l);
        took = hlt_now_ms() - t0;
        fprintf(stderr, "test_cluster_scale: hostile map (%s addresses, %zu bytes): the first acquire: %s in %lld ms\n",
                sp.hostile == 1 ? "other" : "the same", len, hilock_strerror(st), took);
        cr_assert_lt(took, 5000, "the first call took %lld ms", took);
        cr_assert_eq(st, HILOCK_OK, "%s", hilock_client_errmsg(c));
        cr_assert_eq(*asked, 1, "%d maps asked", *asked);
        cr_assert_eq(hilock_release(l), HILOCK_OK, "%s", hilock_client_errmsg(c));
        hilock_free(l);
        lock_on(c, r, key);   /* (granted on r, read back there) */
        hilock_client_free(c);
        fake_stop(&f);
    }
    hlt_redis_stop(r);
    dead_close(sp.dead, fds, 64);
}

/* The operator tools with a map in hand, then no seed and no master answers: the tools showed
 * the old map as the cluster (OK). Now they ask for the map now and fail, saying why. */
static void count_node(size_t master, const hilock_cluster_node *n, void *arg)
{
    (void)master;
    if (!n->replica) ++*(int *)arg;
}

Test(cluster_scale, the_operator_tools_fail_when_no_one_gives_the_map_now)
{
    int fds[1], masters = 0;
    spec sp = {.masters = 1, .nreal = 1, .real = {0}};
    hlt_redis *r;
    hilock_client *c;
    hilock_status st;
    long long t0;
    fake f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(1, fds);
    sp.ndead = 1;
    sp.real_port[0] = (r = real_master(&sp, 0))->port;
    f = fake_seed(&sp);
    hilock_options o = hlt_options((const char *[]){ f.url }, 1);
    o.io_timeout_ms = 500;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_cluster_nodes(c, 0, NULL, count_node, &masters), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(masters, 1);
    fake_stop(&f);      /* the seed is gone ... */
    hlt_redis_stop(r);  /* ... and so is the master (the map's only one) */
    masters = 0;
    t0 = hlt_now_ms();
    st = hilock_cluster_nodes(c, 0, NULL, count_node, &masters);
    fprintf(stderr, "test_cluster_scale: operator tools, no one answers: %s in %lld ms: %s\n",
            hilock_strerror(st), hlt_now_ms() - t0, hilock_client_errmsg(c));
    cr_assert_eq(st, HILOCK_EIO, "%s: %s", hilock_strerror(st), hilock_client_errmsg(c));
    cr_assert_eq(masters, 0, "the old map was shown");
    cr_assert(strstr(hilock_client_errmsg(c), "no seed gave the slot map"), "%s", hilock_client_errmsg(c));
    cr_assert_lt(hlt_now_ms() - t0, 3000);
    hilock_client_free(c);
    dead_close(sp.dead, fds, 1);
}

static void no_key(size_t master, const hilock_key_view *k, void *arg)
{
    (void)master;
    (void)k;
    (void)arg;
}

/* An ASK whose retry ran out of time stays pending for its slot, as an index of the table.
 * A lock on three masters: this cluster, a plain server, and one that is frozen (the round
 * trip waits for it to its deadline). The slot's master (the first map's last, of 100) says
 * the lock is held by another and answers ASK to the round trip's INFO: when the round trip
 * ends the time is spent, so the ASK is not followed (and no undo goes there). Then the
 * operator tools rebuilt the table for a map of one master. The next call on the slot went
 * to that index of the new table, past its end (ASan: heap-buffer-overflow in unpark; else
 * some other server). Now a rebuilt table forgets the ASK: the call goes to the slot's
 * master. */
Test(cluster_scale, an_ask_left_pending_is_forgotten_when_the_map_is_rebuilt)
{
    int fds[100], masters = 0;
    spec sp = {.masters = 100, .nreal = 2, .real = {99, -1}, .shrink_at = 1};
    spec one = {.masters = 1};
    spec ask = {.masters = 1};
    hlt_redis *r, *plain, *slow;
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l = NULL;
    hilock_status st;
    const char *urls[3];
    char key[64], plain_url[64], slow_url[64], *v;
    uint64_t cursor = 0;
    fake a, f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(100, fds);
    sp.ndead = 100;
    sp.real_port[1] = (r = real_master(&one, 0))->port;
    plain = hlt_redis_started(NULL);
    slow = hlt_redis_started(NULL);
    key_at(99 * 16384 / 100 + 5, "ask", key, sizeof key);
    ask.ask_slot = 99 * 16384 / 100 + 5;
    a = fake_seed(&ask);   /* master 99 of the first map (past the end of the next table) */
    sp.real_port[0] = a.port;
    f = fake_seed(&sp);
    snprintf(plain_url, sizeof plain_url, "redis://127.0.0.1:%d", plain->port);
    urls[0] = f.url;
    urls[1] = plain_url;
    snprintf(slow_url, sizeof slow_url, "redis://127.0.0.1:%d", slow->port);
    urls[2] = slow_url;
    hilock_options_init(&o);
    o.servers = urls;
    o.nservers = 3;
    o.io_timeout_ms = 300;
    o.failover_guard = 0;
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    /* connected to the plain server (a scan of it alone), which then stalls: the lock's
     * round trip waits for it to the deadline, long after the ASK came back */
    cr_assert_eq(hilock_scan(c, 2, NULL, 10, &cursor, no_key, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hlt_redis_freeze(slow);
    st = hilock_acquire(c, key, 10000, 0, &l);
    cr_assert_neq(st, HILOCK_OK);
    cr_assert_eq(*asked, 1, "%d maps asked", *asked);
    cr_assert_eq(hilock_cluster_nodes(c, 0, NULL, count_node, &masters), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(masters, 1, "the map now: %d masters", masters);
    hlt_redis_thaw(slow);
    cr_assert_eq(hilock_acquire(c, key, 10000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    v = hlt_get(r, key);
    cr_assert(v && !strcmp(v, hilock_token(l)), "the lock is not on the slot's master");
    free(v);
    hlt_release_gone(r, c, l, key);
    hilock_client_free(c);
    fake_stop(&f);
    fake_stop(&a);
    hlt_redis_stop(plain);
    hlt_redis_stop(slow);
    hlt_redis_stop(r);
    dead_close(sp.dead, fds, 100);
}

/* An acquire whose grant is undone (min_replicas: no replica acknowledged) sends the undo at
 * once, a round trip with no command of its own (no key to route by). When the map was
 * stale, that round trip asked for it again first, and the rebuilt table had forgotten which
 * server was in use: the undo went to the first master of the map (a dead one here) and our
 * value stayed on the slot's master until its ttl (or the next call there). Now the rebuilt
 * table keeps the server in use: the value is gone when the call returns. */
Test(cluster_scale, an_undo_after_a_refresh_goes_to_the_master_in_use)
{
    int fds[2];
    spec sp = {.masters = 2, .nreal = 1, .real = {1}};
    hlt_redis *r;
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l = NULL;
    char key[64], dead_key[64];
    fake f;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    sp.dead = dead_ports(2, fds);
    sp.ndead = 2;
    sp.real_port[0] = (r = real_master(&sp, 1))->port;
    f = fake_seed(&sp);
    hilock_options_init(&o);
    o.servers = (const char *[]){f.url};
    o.nservers = 1;
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    o.min_replicas = 1;
    o.replicas_timeout_ms = 400;   /* (longer than the pace of refreshes, 250 ms) */
    cr_assert_eq(hilock_client_new(&o, &c), HILOCK_OK, "%s", hilock_last_config_error());
    key_at(12000, "undo", key, sizeof key);   /* the real master's */
    key_at(5, "undo", dead_key, sizeof dead_key);   /* master 0's (first in the map): not there */
    cr_assert_eq(hilock_acquire(c, key, 30000, 0, &l), HILOCK_EREPLICAS, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_exists(r, key), 0);
    /* a call on the dead master makes the map stale; the next one, past the pace, asks for
     * the map, then fails too: the map is stale again ... */
    for (int i = 0; i < 2; i++)
        cr_assert_eq(hilock_acquire(c, dead_key, 30000, 0, &l), HILOCK_EIO, "%s", hilock_client_errmsg(c));
    cr_assert_eq(*asked, 2, "%d maps asked", *asked);
    /* ... and the next one, within the pace, routes by it; its undo comes after the pace */
    cr_assert_eq(hilock_acquire(c, key, 30000, 0, &l), HILOCK_EREPLICAS, "%s", hilock_client_errmsg(c));
    cr_assert(strstr(hilock_client_errmsg(c), "the lock was undone"), "%s", hilock_client_errmsg(c));
    cr_assert_geq(*asked, 3, "%d maps asked: no refresh before the undo", *asked);
    cr_assert_eq(hlt_exists(r, key), 0, "the undo did not reach the master in use");
    hilock_client_free(c);
    fake_stop(&f);
    hlt_redis_stop(r);
    dead_close(sp.dead, fds, 2);
}

/* A real cluster of 30 masters (no replicas; --maxmemory 16mb each, no persistence): made by
 * hand as redis-cli does it (slots, a config epoch each, MEET), ready in a few seconds. The
 * URL names one seed; a lock on a key of every master is granted there and read back there. */
Test(cluster_scale, thirty_real_masters_each_grant_the_keys_of_their_slots, .timeout = 180)
{
    enum { N = 30 };
    hlt_redis *r[N];
    hilock_client *c;
    char url[64];
    long long t0 = hlt_now_ms(), end;
    int ready = 0;
    HLT_NEEDS(40000, "Cluster needs replication ids (PSYNC2, Redis 4.0+)");
    for (int i = 0; i < N; i++) {
        redisReply *x;
        r[i] = hlt_redis_start("--cluster-enabled yes --cluster-config-file nodes.conf "
                               "--cluster-node-timeout 5000 --maxmemory 16mb");
        cr_assert_not_null(r[i], "server %d did not start", i);
        x = hlt_addslots(hlt_cli(r[i]), i * 16384 / N, (i + 1) * 16384 / N - 1);
        cr_assert(x && x->type == REDIS_REPLY_STATUS, "ADDSLOTS on %d", i);
        freeReplyObject(x);
        x = hlt_cmd(r[i], "CLUSTER SET-CONFIG-EPOCH %d", i + 1);
        cr_assert(x && x->type == REDIS_REPLY_STATUS, "SET-CONFIG-EPOCH on %d", i);
        freeReplyObject(x);
    }
    for (int i = 1; i < N; i++) {
        redisReply *x = hlt_cmd(r[i], "CLUSTER MEET 127.0.0.1 %d", r[0]->port);
        cr_assert(x && x->type == REDIS_REPLY_STATUS, "MEET from %d", i);
        freeReplyObject(x);
    }
    for (end = hlt_now_ms() + 60000; ready < N && hlt_now_ms() < end; hlt_sleep_ms(ready < N ? 50 : 0)) {
        char want[40];
        snprintf(want, sizeof want, "cluster_known_nodes:%d\r", N);
        for (ready = 0; ready < N; ready++) {
            redisReply *x = hlt_cmd(r[ready], "CLUSTER INFO");
            int ok = x && x->str && strstr(x->str, "cluster_state:ok") && strstr(x->str, want);
            if (x) freeReplyObject(x);
            if (!ok) break;
        }
    }
    cr_assert_eq(ready, N, "the cluster of %d masters was not ready in 60 s", N);
    fprintf(stderr, "test_cluster_scale: %d real masters ready in %lld ms\n", N, hlt_now_ms() - t0);
    snprintf(url, sizeof url, "redis-cluster://127.0.0.1:%d", r[N / 2]->port);
    hilock_options o = hlt_options((const char *[]){ url }, 1);
    o.io_timeout_ms = 2000;
    o.failover_guard = 0;
    c = hlt_client_new(&o);
    for (int i = 0; i < N; i++) {
        char key[64];
        key_at(i * 16384 / N + 3, "thirty", key, sizeof key);
        lock_on(c, r[i], key);
    }
    hilock_client_free(c);
    for (int i = 0; i < N; i++) hlt_redis_stop(r[i]);
}
