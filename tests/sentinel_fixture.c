/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel_fixture.c -- see sentinel_fixture.h. The recipe (configs, the waits, the
 * replication cut) is docs/failover-facts.md's "The test beds", in C, on free ports. */
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sentinel_fixture.h"

#define POLL_MS 25

static redisContext *dial_tcp(int port)
{
    struct timeval tv = { 2, 0 };
    redisContext *c = redisConnectWithTimeout("127.0.0.1", port, tv);
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        return c;
    }
    if (c) redisFree(c);
    return NULL;
}

redisReply *hlt_sentinel_cmd(hlt_sentinel *f, int k, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    redisContext *c = f->spid[k] > 0 ? dial_tcp(f->sport[k]) : NULL;
    if (!c) return NULL;
    if (f->spass[0]) {
        redisReply *a = redisCommand(c, "AUTH %s", f->spass);
        if (a) freeReplyObject(a);
    }
    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

redisReply *hlt_data_cmd(hlt_sentinel *f, int i, const char *fmt, ...)
{
    struct timeval tv = { 2, 0 };
    redisReply *r = NULL;
    for (int tries = 0; tries < 2 && !r; tries++) {   /* Sentinel may kill a connection */
        va_list ap;
        redisContext *c = redisConnectUnixWithTimeout(f->data[i]->sock, tv);
        if (!c || c->err) {
            if (c) redisFree(c);
            continue;
        }
        redisSetTimeout(c, tv);
        if (f->pass[0]) {
            redisReply *a = redisCommand(c, "AUTH %s", f->pass);
            if (a) freeReplyObject(a);
        }
        va_start(ap, fmt);
        r = redisvCommand(c, fmt, ap);
        va_end(ap);
        redisFree(c);
    }
    return r;
}

const char *hlt_data_role(hlt_sentinel *f, int i)
{
    static __thread char role[16];
    redisReply *r = hlt_data_cmd(f, i, "ROLE");
    role[0] = '\0';
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements > 0 && r->element[0]->type == REDIS_REPLY_STRING)
        snprintf(role, sizeof role, "%s", r->element[0]->str);
    if (r) freeReplyObject(r);
    return role;
}

/* ROLE of a replica: ["slave", host, port, state, offset]; 1 if its link is "connected". */
static int replica_connected(hlt_sentinel *f, int i)
{
    redisReply *r = hlt_data_cmd(f, i, "ROLE");
    int ok = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 4 &&
             !strcmp(r->element[0]->str, "slave") && r->element[3]->type == REDIS_REPLY_STRING &&
             !strcmp(r->element[3]->str, "connected");
    if (r) freeReplyObject(r);
    return ok;
}

/* Replica i is connected and its master streams to it. After a diskless full sync the master
 * holds the stream back until the replica's first REPLCONF ACK (up to 1 s): until its INFO
 * says state=online, writes do not reach the replica, and a failover would lose them. */
static int replica_online(hlt_sentinel *f, int i)
{
    redisReply *r;
    int ok;
    if (!replica_connected(f, i)) return 0;
    r = hlt_data_cmd(f, 1 - i, "INFO replication");
    ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, ",state=online,");
    if (r) freeReplyObject(r);
    return ok;
}

char *hlt_data_get(hlt_sentinel *f, int i, const char *key)
{
    redisReply *r = hlt_data_cmd(f, i, "GET %s", key);
    char *v = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    if (r) freeReplyObject(r);
    return v;
}

long long hlt_data_exists(hlt_sentinel *f, int i, const char *key)
{
    redisReply *r = hlt_data_cmd(f, i, "EXISTS %s", key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -99;
    if (r) freeReplyObject(r);
    return v;
}

int hlt_data_holds_within(hlt_sentinel *f, int i, const char *key, const char *value, long ms)
{
    long long end = hlt_now_ms() + ms;
    do {
        char *v = hlt_data_get(f, i, key);
        int ok = v && !strcmp(v, value);
        free(v);
        if (ok) return 1;
        hlt_sleep_ms(20);
    } while (hlt_now_ms() < end);
    return 0;
}

/* Port Sentinel k names as the master, 0 if it does not answer. */
static int named_port(hlt_sentinel *f, int k)
{
    redisReply *r = hlt_sentinel_cmd(f, k, "SENTINEL get-master-addr-by-name %s", f->name);
    int port = 0;
    if (r && r->type == REDIS_REPLY_ARRAY && r->elements == 2) port = atoi(r->element[1]->str);
    if (r) freeReplyObject(r);
    return port;
}

int hlt_sentinel_master(hlt_sentinel *f)
{
    for (int k = 0; k < HLT_NSENTINELS; k++) {
        int port = named_port(f, k);
        for (int i = 0; port && i < 2; i++)
            if (f->data[i]->port == port) return i;
    }
    return -1;
}

static int all_name(hlt_sentinel *f, int i)
{
    for (int k = 0; k < HLT_NSENTINELS; k++)
        if (named_port(f, k) != f->data[i]->port) return 0;
    return 1;
}

/* Field `name` of a flat key/value reply (SENTINEL master, one entry of SENTINEL replicas). */
static const char *kv(const redisReply *r, const char *name)
{
    for (size_t j = 0; r && r->type == REDIS_REPLY_ARRAY && j + 1 < r->elements; j += 2)
        if (r->element[j]->type == REDIS_REPLY_STRING && !strcmp(r->element[j]->str, name))
            return r->element[j + 1]->str;
    return "";
}

/* Sentinel k knows the other Sentinels and sees one healthy replica, which has told it that
 * it is a replica. (A Sentinel that has not yet seen a demoted master report "slave" still
 * counts it as a master that must be converted: a failover started then gets its freshly
 * promoted replica demoted again by that Sentinel.) */
static int sentinel_ready(hlt_sentinel *f, int k)
{
    redisReply *m = hlt_sentinel_cmd(f, k, "SENTINEL master %s", f->name);
    /* (SENTINEL replicas is 5.0's name for SENTINEL slaves) */
    redisReply *s = hlt_sentinel_cmd(f, k, "SENTINEL %s %s", hlt_server_version() >= 50000 ? "replicas" : "slaves",
                                     f->name);
    int ok = m && s && atoi(kv(m, "num-other-sentinels")) == HLT_NSENTINELS - 1 &&
             s->type == REDIS_REPLY_ARRAY && s->elements == 1 &&
             !strcmp(kv(s->element[0], "flags"), "slave") &&
             !strcmp(kv(s->element[0], "role-reported"), "slave") &&
             !strcmp(kv(s->element[0], "master-link-status"), "ok");
    if (m) freeReplyObject(m);
    if (s) freeReplyObject(s);
    return ok;
}

static pid_t spawn_sentinel(hlt_sentinel *f, int k)
{
    char conf[256], cmd[512];
    FILE *fp;
    pid_t pid;
    snprintf(conf, sizeof conf, "%s/sentinel-%d.conf", f->dir, f->sport[k]);
    if (!(fp = fopen(conf, "w"))) return -1;
    fprintf(fp,
            "port %d\nbind 127.0.0.1\ndaemonize no\nlogfile %s/sentinel-%d.log\ndir %s\n"
            "sentinel monitor %s 127.0.0.1 %d 2\n"
            "sentinel down-after-milliseconds %s 1000\n"
            "sentinel failover-timeout %s 5000\n"
            "sentinel parallel-syncs %s 1\n",
            f->sport[k], f->dir, f->sport[k], f->dir, f->name, f->data[0]->port, f->name, f->name,
            f->name);
    if (f->pass[0]) fprintf(fp, "sentinel auth-pass %s %s\n", f->name, f->pass);
    /* before 6.2 (no sentinel-pass) a Sentinel AUTHs to the others with its own requirepass */
    if (f->spass[0]) fprintf(fp, "requirepass %s\n", f->spass);
    if (f->spass[0] && hlt_server_version() >= 60200) fprintf(fp, "sentinel sentinel-pass %s\n", f->spass);
    if (f->tls[0][0])
        fprintf(fp, "tls-port %d\ntls-cert-file %s\ntls-key-file %s\ntls-ca-cert-file %s\n"
                "tls-auth-clients no\ntls-replication yes\n", f->stls[k], f->tls[0], f->tls[1], f->tls[2]);
    fclose(fp);
    snprintf(cmd, sizeof cmd, "exec redis-sentinel %s", conf);
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);   /* dies with the test, even on a crash */
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static void kill_pid(pid_t *pid)
{
    if (*pid > 0) {
        kill(*pid, SIGKILL);
        waitpid(*pid, NULL, 0);
        *pid = 0;
    }
}

/* Start Sentinel k on a free port: answers PING within 5 s, or another port is tried. */
static int start_sentinel(hlt_sentinel *f, int k)
{
    struct sigaction old;
    int rc = -1;
    hlt_sigpipe_ignore(&old);   /* one that lost its port to another process exits */
    for (int tries = 0; tries < 5 && rc < 0; tries++) {
        long long end = hlt_now_ms() + 5000;
        f->sport[k] = hlt_free_port();
        if (f->tls[0][0]) f->stls[k] = hlt_free_port();
        f->spid[k] = spawn_sentinel(f, k);
        while (f->spid[k] > 0 && hlt_now_ms() < end) {
            redisReply *r = hlt_sentinel_cmd(f, k, "PING");
            int up = r && r->type == REDIS_REPLY_STATUS;
            if (r) freeReplyObject(r);
            if (up) {
                /* faster hellos and INFO: discovery in ~1 s, old-master demotion in ~2 s
                 * (SENTINEL DEBUG is 7.0's; older Sentinels keep their 2 s and 10 s) */
                r = hlt_server_version() < 70000 ? NULL :
                    hlt_sentinel_cmd(f, k, "SENTINEL DEBUG info-period 500 publish-period 250");
                if (r) freeReplyObject(r);
                rc = 0;
                break;
            }
            if (waitpid(f->spid[k], NULL, WNOHANG) == f->spid[k]) f->spid[k] = 0;   /* port taken */
            hlt_sleep_ms(POLL_MS);
        }
        if (rc < 0) kill_pid(&f->spid[k]);
    }
    hlt_sigpipe_restore(&old);
    return rc;
}

/* Poll cond(f, arg) every POLL_MS until true (0) or timeout_ms (-1). */
static int wait_until(long timeout_ms, int (*cond)(hlt_sentinel *, int), hlt_sentinel *f, int arg)
{
    long long end = hlt_now_ms() + timeout_ms;
    for (;;) {
        if (cond(f, arg)) return 0;
        if (hlt_now_ms() >= end) return -1;
        hlt_sleep_ms(POLL_MS);
    }
}

static int all_ready(hlt_sentinel *f, int unused)
{
    (void)unused;
    for (int k = 0; k < HLT_NSENTINELS; k++)
        if (!sentinel_ready(f, k)) return 0;
    return 1;
}

hlt_sentinel *hlt_sentinel_start(void) { return hlt_sentinel_start_auth(NULL); }

hlt_sentinel *hlt_sentinel_start_auth(const char *password)
{
    return hlt_sentinel_start_opts(password, NULL);
}

/* Data node i with `extra` arguments; over TLS on a TLS port of our picking (if it was taken
 * in between, the server fails to start: try another), its plain port off. */
static hlt_redis *start_data(hlt_sentinel *f, const char *extra)
{
    char args[512];
    if (!f->tls[0][0]) return hlt_redis_start(extra);
    for (int tries = 0; tries < 5; tries++) {
        int port = hlt_free_port();
        hlt_redis *r;
        int n = snprintf(args, sizeof args, "--port 0 --tls-port %d --tls-cert-file %s --tls-key-file %s "
                         "--tls-ca-cert-file %s --tls-auth-clients no --tls-replication yes %s",
                         port, f->tls[0], f->tls[1], f->tls[2], extra);
        if (n < 0 || (size_t)n >= sizeof args) {   /* (hlt_redis keeps 512 bytes of arguments) */
            fprintf(stderr, "sentinel fixture: redis-server arguments too long\n");
            return NULL;
        }
        if ((r = hlt_redis_start(args)) != NULL) {
            r->port = port;
            snprintf(r->url, sizeof r->url, "rediss://127.0.0.1:%d", port);
            return r;
        }
    }
    return NULL;
}

static hlt_sentinel *start(hlt_sentinel *f, const char *password, const char *sentinel_password);

hlt_sentinel *hlt_sentinel_start_opts(const char *password, const char *sentinel_password)
{
    hlt_sentinel *f = calloc(1, sizeof *f);
    return f ? start(f, password, sentinel_password) : NULL;
}

hlt_sentinel *hlt_sentinel_start_tls(const char *crt, const char *key, const char *ca)
{
    hlt_sentinel *f = calloc(1, sizeof *f);
    if (!f) return NULL;
    snprintf(f->tls[0], sizeof f->tls[0], "%s", crt);
    snprintf(f->tls[1], sizeof f->tls[1], "%s", key);
    snprintf(f->tls[2], sizeof f->tls[2], "%s", ca);
    return start(f, NULL, NULL);
}

static hlt_sentinel *start(hlt_sentinel *f, const char *password, const char *sentinel_password)
{
    char extra[256], auth[160] = "", query[96] = "";
    if (sentinel_password) {
        snprintf(f->spass, sizeof f->spass, "%s", sentinel_password);
        snprintf(query, sizeof query, "?sentinel_password=%s", f->spass);
    }
    if (password) {
        snprintf(f->pass, sizeof f->pass, "%s", password);
        snprintf(auth, sizeof auth, " --requirepass %s --masterauth %s", f->pass, f->pass);
    }
    hlt_sigpipe_ignore(&f->sigpipe_old);   /* (the header says why) */
    snprintf(f->dir, sizeof f->dir, "/tmp/hilock-sentinel-XXXXXX");
    if (!mkdtemp(f->dir)) {
        perror("mkdtemp");
        hlt_sigpipe_restore(&f->sigpipe_old);
        free(f);
        return NULL;
    }
    snprintf(f->name, sizeof f->name, "hlmaster");
    /* repl-diskless-sync-delay defaults to 5 s on 7.0 and would delay every (re)sync */
    snprintf(extra, sizeof extra, "--repl-diskless-sync-delay 0%s", auth);
    f->data[0] = start_data(f, extra);
    if (!f->data[0]) goto fail;
    snprintf(extra, sizeof extra, "--repl-diskless-sync-delay 0%s --replicaof 127.0.0.1 %d", auth,
             f->data[0]->port);
    f->data[1] = start_data(f, extra);
    if (!f->data[1] || wait_until(10000, replica_online, f, 1) < 0) {
        fprintf(stderr, "sentinel fixture: the replica did not connect\n");
        goto fail;
    }
    for (int k = 0; k < HLT_NSENTINELS; k++)
        if (start_sentinel(f, k) < 0) {
            fprintf(stderr, "sentinel fixture: redis-sentinel did not start (see %s)\n", f->dir);
            goto fail;
        }
    if (wait_until(20000, all_ready, f, 0) < 0) {
        fprintf(stderr, "sentinel fixture: the Sentinels did not discover each other\n");
        goto fail;
    }
    if (f->tls[0][0])
        snprintf(f->url, sizeof f->url, "rediss-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d#%s",
                 f->stls[0], f->stls[1], f->stls[2], f->name);
    else
        snprintf(f->url, sizeof f->url, "redis-sentinel://127.0.0.1:%d,127.0.0.1:%d,127.0.0.1:%d%s#%s",
                 f->sport[0], f->sport[1], f->sport[2], query, f->name);
    return f;
fail:
    hlt_sentinel_stop(f);
    return NULL;
}

void hlt_sentinel_stop(hlt_sentinel *f)
{
    char cmd[256];
    if (!f) return;
    for (int k = 0; k < HLT_NSENTINELS; k++) kill_pid(&f->spid[k]);
    for (int i = 0; i < 2; i++) hlt_redis_stop(f->data[i]);   /* thaws, kills, removes its dir */
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
    if (f->dir[0] && system(cmd) != 0) fprintf(stderr, "sentinel fixture: could not remove %s\n", f->dir);
    hlt_sigpipe_restore(&f->sigpipe_old);
    free(f);
}

/* A wait timed out: say which, and show the end of Sentinel 0's log. */
static int failed(hlt_sentinel *f, const char *what)
{
    char cmd[300];
    fprintf(stderr, "sentinel fixture: %s; sentinel %d log:\n", what, f->sport[0]);
    snprintf(cmd, sizeof cmd, "tail -n 25 '%s/sentinel-%d.log' >&2", f->dir, f->sport[0]);
    if (system(cmd) != 0) fprintf(stderr, "(no log)\n");
    return -1;
}

static int is_master(hlt_sentinel *f, int i) { return !strcmp(hlt_data_role(f, i), "master"); }

/* The old master is a connected replica and the Sentinels list it as a healthy replica. */
static int demoted(hlt_sentinel *f, int old)
{
    return replica_online(f, old) && all_ready(f, 0);
}

int hlt_sentinel_failover(hlt_sentinel *f, int wait_demotion)
{
    int old = hlt_sentinel_master(f), to = 1 - old;
    long long t0 = hlt_now_ms();
    redisReply *r;
    if (old < 0) return -1;
    f->t_promoted = f->t_switched = f->t_demoted = -1;
    r = hlt_sentinel_cmd(f, 0, "SENTINEL failover %s", f->name);
    if (!r || r->type == REDIS_REPLY_ERROR) {
        fprintf(stderr, "sentinel fixture: SENTINEL failover: %s\n", r ? r->str : "no reply");
        if (r) freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    if (wait_until(10000, is_master, f, to) < 0) return failed(f, "the replica was not promoted");
    f->t_promoted = hlt_now_ms() - t0;
    if (wait_until(10000, all_name, f, to) < 0) return failed(f, "the Sentinels did not switch");
    f->t_switched = hlt_now_ms() - t0;
    if (wait_demotion) {
        if (wait_until(30000, demoted, f, old) < 0) return failed(f, "the old master was not demoted");
        f->t_demoted = hlt_now_ms() - t0;
    }
    return 0;
}

int hlt_sentinel_wait_switch(hlt_sentinel *f, int to, long timeout_ms)
{
    long long t0 = hlt_now_ms();
    f->t_promoted = f->t_demoted = -1;
    if (wait_until(timeout_ms, all_name, f, to) < 0) return -1;
    f->t_switched = hlt_now_ms() - t0;
    return 0;
}

int hlt_sentinel_wait_replica(hlt_sentinel *f, int i, long timeout_ms)
{
    return wait_until(timeout_ms, replica_online, f, i);
}

/* A number field of data node i's INFO replication, -1 if missing. */
static long long repl_field(hlt_sentinel *f, int i, const char *field)
{
    redisReply *r = hlt_data_cmd(f, i, "INFO replication");
    const char *p = r && r->type == REDIS_REPLY_STRING ? strstr(r->str, field) : NULL;
    long long v = p ? atoll(p + strlen(field)) : -1;
    if (r) freeReplyObject(r);
    return v;
}

int hlt_sentinel_wait_synced(hlt_sentinel *f, int i, long timeout_ms)
{
    long long want = repl_field(f, 1 - i, "master_repl_offset:"), end = hlt_now_ms() + timeout_ms;
    while (want < 0 || repl_field(f, i, "slave_repl_offset:") < want) {
        if (hlt_now_ms() >= end) return -1;
        hlt_sleep_ms(POLL_MS);
    }
    return 0;
}

static int not_connected(hlt_sentinel *f, int i) { return !replica_connected(f, i); }

int hlt_sentinel_cut(hlt_sentinel *f, int i)
{
    redisReply *a = hlt_data_cmd(f, i, "CONFIG SET masterauth bogus-%d", getpid());
    redisReply *k = hlt_data_cmd(f, i, "CLIENT KILL TYPE master");
    int ok = a && a->type == REDIS_REPLY_STATUS && k && k->type == REDIS_REPLY_INTEGER;
    if (a) freeReplyObject(a);
    if (k) freeReplyObject(k);
    return ok && wait_until(5000, not_connected, f, i) == 0 ? 0 : -1;
}

int hlt_sentinel_heal(hlt_sentinel *f, int i)
{
    redisReply *a = hlt_data_cmd(f, i, "CONFIG SET masterauth %s", f->pass);
    int ok = a && a->type == REDIS_REPLY_STATUS;
    if (a) freeReplyObject(a);
    return ok ? 0 : -1;
}

void hlt_sentinel_freeze(hlt_sentinel *f, int i) { hlt_redis_freeze(f->data[i]); }
void hlt_sentinel_thaw(hlt_sentinel *f, int i) { hlt_redis_thaw(f->data[i]); }
