/* SPDX-License-Identifier: BSD-3-Clause */
/* cluster_fixture.c -- see cluster_fixture.h. */
#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cluster_fixture.h"
#include "fixture.h"

#define ENV_NAME "HLT_CLUSTER"   /* "runner-pid dir port0,...,port5[ crt key ca]" */

/* The fixture's own commands go to node i's unix socket: plain RESP whatever the cluster's
 * ports speak (hiredis 0.14 has no TLS), so every helper serves both kinds of cluster. */
static redisContext *dial(hlt_cluster *f, int i)
{
    struct timeval tv = { 2, 0 };
    char sock[180];
    redisContext *c;
    snprintf(sock, sizeof sock, "%s/n%d/sock", f->dir, i);
    c = redisConnectUnixWithTimeout(sock, tv);
    if (c && !c->err) {
        redisSetTimeout(c, tv);
        return c;
    }
    if (c) redisFree(c);
    return NULL;
}

redisReply *hlt_cluster_cmd(hlt_cluster *f, int i, const char *fmt, ...)
{
    va_list ap;
    redisReply *r;
    redisContext *c = dial(f, i);
    if (!c) return NULL;
    va_start(ap, fmt);
    r = redisvCommand(c, fmt, ap);
    va_end(ap);
    redisFree(c);
    return r;
}

/* The options of argv (NULL-terminated) in the server's own words (fixture.h,
 * hlt_server_option): renamed in place, or left out with their value. */
static void own_words(const char **argv)
{
    static char buf[8][64];
    size_t to = 0, k = 0;
    for (size_t i = 0; argv[i]; i++) {
        const char *w = argv[i][0] == '-' && k < 8 ? hlt_server_option(argv[i], buf[k], sizeof buf[k]) : argv[i];
        if (w == buf[k]) k++;
        if (!w) i += argv[i + 1] != NULL;   /* and its value */
        else argv[to++] = w;
    }
    argv[to] = NULL;
}

/* Plain: the port takes RESP. TLS: the port is the TLS port (--port 0: no plain one) and the
 * cluster bus and replication speak TLS too; a node presents its certificate to the nodes it
 * dials (the bus requires one) and trusts the CA for both directions. */
static void exec_server(hlt_cluster *f, int i)
{
    char port[16], dir[160], pidf[180], logf[180], sock[180];
    const char *argv[64] = {"redis-server", "--bind", "127.0.0.1", "--protected-mode", "no",
        "--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
        "--cluster-replica-validity-factor", "0", "--save", "", "--appendonly", "no",
        "--repl-diskless-sync-delay", "0", "--daemonize", "no", "--unixsocket", sock, "--unixsocketperm", "700",
        "--dir", dir, "--pidfile", pidf, "--logfile", logf};
    size_t n = 0;
    snprintf(port, sizeof port, "%d", f->port[i]);
    snprintf(dir, sizeof dir, "%s/n%d", f->dir, i);
    snprintf(pidf, sizeof pidf, "%s/pid", dir);
    snprintf(logf, sizeof logf, "%s/log", dir);
    snprintf(sock, sizeof sock, "%s/sock", dir);
    while (argv[n]) n++;
    if (f->tls_ca[0]) {
        const char *tls[] = {"--port", "0", "--tls-port", port, "--tls-cluster", "yes", "--tls-replication", "yes",
                             "--tls-cert-file", f->tls_crt, "--tls-key-file", f->tls_key, "--tls-ca-cert-file",
                             f->tls_ca, "--tls-auth-clients", "no"};
        memcpy(argv + n, tls, sizeof tls);
        n += sizeof tls / sizeof *tls;
    } else {
        argv[n++] = "--port";
        argv[n++] = port;
    }
    argv[n] = NULL;
    own_words(argv);
    execvp("redis-server", (char *const *)argv);
    _exit(127);
}

/* Owned: a child of ours that dies with us. */
static pid_t spawn_owned(hlt_cluster *f, int i)
{
    pid_t pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        exec_server(f, i);
    }
    return pid;
}

/* pid runs: it exists and is not a zombie (a runner that died unreaped -- its parent reads
 * its output until EOF, and the watchdog and the server hold that pipe -- still answers
 * kill(pid, 0): waiting for that would wait for ever). */
static int alive(pid_t pid)
{
    char path[64], buf[256], *close_paren;
    FILE *fp;
    size_t n;
    if (kill(pid, 0) != 0) return 0;
    snprintf(path, sizeof path, "/proc/%ld/stat", (long)pid);
    if (!(fp = fopen(path, "r"))) return 1;   /* no /proc: kill's answer stands */
    n = fread(buf, 1, sizeof buf - 1, fp);
    fclose(fp);
    buf[n] = '\0';
    close_paren = strrchr(buf, ')');   /* "pid (comm) S ...": comm may hold spaces */
    return !(close_paren && close_paren[1] == ' ' && (close_paren[2] == 'Z' || close_paren[2] == 'X'));
}

/* Shared: the server is nobody's child among the test processes (Criterion's runner reaps
 * its workers with waitid(P_ALL, WNOWAIT) and spins on any other child that dies -- a server
 * a test killed), but a watchdog's, which ends when the runner does (the server with it). */
static void spawn_watched(hlt_cluster *f, int i, pid_t runner)
{
    pid_t a = fork();
    if (a == 0) {
        if (fork() == 0) {   /* the watchdog: orphaned at once, reaped by init */
            pid_t s;
            if (f->lockfd >= 0) close(f->lockfd);   /* (the flock is the test's, not ours) */
            setsid();
            if ((s = fork()) == 0) {
                prctl(PR_SET_PDEATHSIG, SIGKILL);
                exec_server(f, i);
            }
            while (s > 0 && alive(runner) && waitpid(s, NULL, WNOHANG) == 0) usleep(100000);
            if (s > 0) kill(s, SIGKILL);
            _exit(0);
        }
        _exit(0);
    }
    if (a > 0) waitpid(a, NULL, 0);
}

static void spawn(hlt_cluster *f, int i)
{
    if (f->runner) spawn_watched(f, i, f->runner);
    else f->pid[i] = spawn_owned(f, i);
}

static int pong(hlt_cluster *f, int i)
{
    redisReply *r = hlt_cluster_cmd(f, i, "PING");
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r) freeReplyObject(r);
    return ok;
}

static int wait_pong(hlt_cluster *f, int i, long ms)
{
    long long end = hlt_now_ms() + ms;
    struct sigaction old;
    int rc = -1;
    hlt_sigpipe_ignore(&old);   /* a node that lost its port to another process exits */
    while (rc < 0 && hlt_now_ms() < end) {
        if (pong(f, i)) rc = 0;
        else hlt_sleep_ms(20);
    }
    hlt_sigpipe_restore(&old);
    return rc;
}

static pid_t node_pid(hlt_cluster *f, int i);
static pid_t node_pid(hlt_cluster *f, int i)
{
    char path[180];
    FILE *fp;
    long pid = 0;
    snprintf(path, sizeof path, "%s/n%d/pid", f->dir, i);
    if ((fp = fopen(path, "r"))) {
        if (fscanf(fp, "%ld", &pid) != 1) pid = 0;
        fclose(fp);
    }
    return (pid_t)pid;
}

static int info_has(hlt_cluster *f, int i, const char *section, const char *text)
{
    redisReply *r = hlt_cluster_cmd(f, i, section ? "INFO %s" : "CLUSTER INFO", section);
    int ok = r && r->type == REDIS_REPLY_STRING && strstr(r->str, text);
    if (r) freeReplyObject(r);
    return ok;
}

static int node_id(hlt_cluster *f, int i, char id[41]);

/* The master of slot as node i sees it (CLUSTER SLOTS); -1 if it does not answer. Matched by
 * port, else by node id: over our plain unix socket, Valkey 7.2 names a TLS-only node's plain
 * port (0). */
static int slot_master_by(hlt_cluster *f, int i, int slot)
{
    redisReply *r = hlt_cluster_cmd(f, i, "CLUSTER SLOTS");
    int port = 0;
    char id[41] = "", other[41];
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements; k++) {
        redisReply *e = r->element[k], *m;
        if (e->elements < 3 || slot < e->element[0]->integer || slot > e->element[1]->integer) continue;
        m = e->element[2];
        port = (int)m->element[1]->integer;
        if (m->elements >= 3 && m->element[2]->type == REDIS_REPLY_STRING)
            snprintf(id, sizeof id, "%s", m->element[2]->str);
    }
    if (r) freeReplyObject(r);
    for (int j = 0; port && j < f->nnodes; j++)
        if (f->port[j] == port) return j;
    for (int j = 0; id[0] && j < f->nnodes; j++)
        if (node_id(f, j, other) == 0 && !strcmp(other, id)) return j;
    return -1;
}

int hlt_cluster_slot_master(hlt_cluster *f, int slot)
{
    for (int i = 0; i < f->nnodes; i++) {
        int m = slot_master_by(f, i, slot);
        if (m >= 0) return m;
    }
    return -1;
}

int hlt_cluster_keyslot(hlt_cluster *f, const char *key)
{
    for (int i = 0; i < f->nnodes; i++) {
        redisReply *r = hlt_cluster_cmd(f, i, "CLUSTER KEYSLOT %s", key);
        int s = r && r->type == REDIS_REPLY_INTEGER ? (int)r->integer : -1;
        if (r) freeReplyObject(r);
        if (s >= 0) return s;
    }
    return -1;
}

int hlt_cluster_key_master(hlt_cluster *f, const char *key)
{
    int s = hlt_cluster_keyslot(f, key);
    return s < 0 ? -1 : hlt_cluster_slot_master(f, s);
}

int hlt_cluster_masters(hlt_cluster *f, int m[3])
{
    int n = 0;
    for (int s = 0; s < 16384 && n < 3; s += 128) {
        int k = hlt_cluster_slot_master(f, s), seen = 0;
        for (int j = 0; j < n; j++) seen |= m[j] == k;
        if (k >= 0 && !seen) m[n++] = k;
    }
    return n;
}

int hlt_cluster_key_on(hlt_cluster *f, int m, const char *prefix, int *from, char *buf, size_t cap)
{
    int k = from ? *from : 0;
    for (int tries = 0; tries < 100000; tries++, k++) {
        snprintf(buf, cap, "%s%d", prefix, k);
        if (hlt_cluster_key_master(f, buf) == m) {
            if (from) *from = k + 1;
            return 0;
        }
    }
    return -1;
}

int hlt_cluster_replica_of(hlt_cluster *f, int m)
{
    for (int i = 0; i < f->nnodes; i++) {
        redisReply *r = hlt_cluster_cmd(f, i, "ROLE");
        int yes = r && r->type == REDIS_REPLY_ARRAY && r->elements >= 3 && !strcmp(r->element[0]->str, "slave") &&
                  r->element[2]->integer == f->port[m];
        if (r) freeReplyObject(r);
        if (yes) return i;
    }
    return -1;
}

/* ASKING first: a node importing the key's slot answers for it (else: MOVED). */
static redisReply *asking_cmd(hlt_cluster *f, int i, const char *cmd, const char *key)
{
    redisContext *c = dial(f, i);
    redisReply *r = NULL;
    if (!c) return NULL;
    if ((r = redisCommand(c, "ASKING"))) freeReplyObject(r);
    r = redisCommand(c, "%s %s", cmd, key);
    redisFree(c);
    return r;
}

char *hlt_cluster_get(hlt_cluster *f, int i, const char *key)
{
    redisReply *r = asking_cmd(f, i, "GET", key);
    char *v = r && r->type == REDIS_REPLY_STRING ? strdup(r->str) : NULL;
    if (r) freeReplyObject(r);
    return v;
}

long long hlt_cluster_exists(hlt_cluster *f, int i, const char *key)
{
    redisReply *r = asking_cmd(f, i, "EXISTS", key);
    long long v = r && r->type == REDIS_REPLY_INTEGER ? r->integer : -99;
    if (r && r->type == REDIS_REPLY_ERROR && !strncmp(r->str, "ASK ", 4)) v = 0;
    if (r) freeReplyObject(r);
    return v;
}

/* What node i says: "<port of the master of each shard>" sorted, for agreement. */
static int shard_view(hlt_cluster *f, int i, int out[3])
{
    int n = 0;
    for (int s = 0; s < 3; s++) out[s] = 0;
    redisReply *r = hlt_cluster_cmd(f, i, "CLUSTER SLOTS");
    for (size_t k = 0; r && r->type == REDIS_REPLY_ARRAY && k < r->elements && n < 3; k++)
        out[n++] = (int)r->element[k]->element[2]->element[1]->integer;
    if (r) freeReplyObject(r);
    for (int a = 0; a < 3; a++)
        for (int b = a + 1; b < 3; b++)
            if (out[b] < out[a]) { int t = out[a]; out[a] = out[b]; out[b] = t; }
    return n;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* What node i says of each node's role ("<id> master" or "<id> slave <its master>", sorted,
 * one line each, in out): nodes learn a role change by gossip, so right after a restart or a
 * failover one node may still call a replica a master. 0, or -1: no answer. */
static int role_view(hlt_cluster *f, int i, char *out, size_t cap)
{
    redisReply *r = hlt_cluster_cmd(f, i, "CLUSTER NODES");
    char *lines[HLT_CLUSTER_NODES + 8], *save = NULL, *text;
    int n = 0;
    size_t off = 0;
    out[0] = '\0';
    if (!r || r->type != REDIS_REPLY_STRING || !(text = strdup(r->str))) {
        if (r) freeReplyObject(r);
        return -1;
    }
    freeReplyObject(r);
    for (char *l = strtok_r(text, "\n", &save); l && n < HLT_CLUSTER_NODES + 8; l = strtok_r(NULL, "\n", &save)) {
        char id[41], addr[128], flags[128], of[41];
        if (sscanf(l, "%40s %127s %127s %40s", id, addr, flags, of) != 4) continue;
        lines[n] = malloc(128);
        if (!lines[n]) break;
        snprintf(lines[n++], 128, strstr(flags, "slave") ? "%s slave %s" : "%s master", id, of);
    }
    qsort(lines, (size_t)n, sizeof *lines, cmp_str);
    for (int k = 0; k < n; k++) {
        off += (size_t)snprintf(out + off, off < cap ? cap - off : 0, "%s\n", lines[k]);
        free(lines[k]);
    }
    free(text);
    return 0;
}

/* Every node says the same of every node's role. */
static int roles_agree(hlt_cluster *f)
{
    char ref[2048], v[2048];
    if (role_view(f, 0, ref, sizeof ref) < 0) return 0;
    for (int i = 1; i < f->nnodes; i++)
        if (role_view(f, i, v, sizeof v) < 0 || strcmp(v, ref)) return 0;
    return 1;
}

int hlt_cluster_heal_all(hlt_cluster *f, long timeout_ms)
{
    long long end = hlt_now_ms() + timeout_ms;
    while (hlt_now_ms() < end) {
        int ok = 1, ref[3], v[3], masters = 0;
        for (int i = 0; ok && i < f->nnodes; i++) ok = info_has(f, i, NULL, "cluster_state:ok");
        if (ok && shard_view(f, 0, ref) != 3) ok = 0;
        for (int i = 1; ok && i < f->nnodes; i++)
            ok = shard_view(f, i, v) == 3 && !memcmp(v, ref, sizeof v);
        for (int i = 0; ok && i < f->nnodes; i++) {
            if (!info_has(f, i, "replication", "role:master")) continue;
            masters++;
            ok = f->nnodes == 3 || info_has(f, i, "replication", ",state=online,");   /* its replica */
        }
        if (ok && masters == 3 && roles_agree(f)) return 0;
        hlt_sleep_ms(50);
    }
    fprintf(stderr, "cluster fixture: not healthy after %ld ms (%s)\n", timeout_ms, f->dir);
    return -1;
}

void hlt_cluster_kill(hlt_cluster *f, int i);

/* For TLS, the certificate files (tls NULL: plain). -1: a path too long. */
static int take_tls(hlt_cluster *f, const hlt_cluster_tls *tls)
{
    if (!tls) return 0;
    if (strlen(tls->crt) >= HLT_CLUSTER_PATH || strlen(tls->key) >= HLT_CLUSTER_PATH ||
        strlen(tls->ca) >= HLT_CLUSTER_PATH)
        return -1;
    strcpy(f->tls_crt, tls->crt);
    strcpy(f->tls_key, tls->key);
    strcpy(f->tls_ca, tls->ca);
    return 0;
}

/* The URL of the seeds: every node. */
static void make_url(hlt_cluster *f)
{
    size_t off = (size_t)snprintf(f->url, sizeof f->url, "%s://", f->tls_ca[0] ? "rediss-cluster" : "redis-cluster");
    for (int i = 0; i < f->nnodes; i++)
        off += (size_t)snprintf(f->url + off, sizeof f->url - off, "%s127.0.0.1:%d", i ? "," : "", f->port[i]);
}

static int status_ok(redisReply *r);

/* Node i knows all the others (CLUSTER NODES: one line each, none in handshake). */
static int knows_all(hlt_cluster *f, int i)
{
    redisReply *r = hlt_cluster_cmd(f, i, "CLUSTER NODES");
    int lines = 0;
    const char *p = r && r->type == REDIS_REPLY_STRING ? r->str : NULL;
    for (; p && *p; p = strchr(p, '\n') ? strchr(p, '\n') + 1 : "") lines++;
    lines = r && r->type == REDIS_REPLY_STRING && !strstr(r->str, "handshake") ? lines : 0;
    if (r) freeReplyObject(r);
    return lines == f->nnodes;
}

/* redis-cli --cluster create by hand, for servers whose redis-cli has no --cluster (before
 * 5.0): a config epoch each, every node meets node 0, masters 0..2 take a third of the slots
 * each (ADDSLOTS: ADDSLOTSRANGE is 7.0's), and once every node knows every other, node 3 + m
 * replicates master m. 0, or -1 (why in create.log's place: stderr). */
static int create_by_hand(hlt_cluster *f)
{
    int masters = f->nnodes == HLT_CLUSTER_NODES ? 3 : f->nnodes;
    long long end = hlt_now_ms() + 20000;
    char id[41];
    for (int i = 0; i < f->nnodes; i++) {
        if (!status_ok(hlt_cluster_cmd(f, i, "CLUSTER SET-CONFIG-EPOCH %d", i + 1))) return -1;
        if (i && !status_ok(hlt_cluster_cmd(f, i, "CLUSTER MEET 127.0.0.1 %d", f->port[0]))) return -1;
    }
    for (int m = 0; m < masters; m++) {
        redisContext *c = dial(f, m);
        int ok = c && status_ok(hlt_addslots(c, m * 16384 / masters, (m + 1) * 16384 / masters - 1));
        if (c) redisFree(c);
        if (!ok) return -1;
    }
    for (int i = 0; i < f->nnodes; i++)
        while (!knows_all(f, i))
            if (hlt_now_ms() > end) return -1;
            else hlt_sleep_ms(50);
    for (int r = masters; r < f->nnodes; r++)
        if (node_id(f, r - masters, id) < 0 || !status_ok(hlt_cluster_cmd(f, r, "CLUSTER REPLICATE %s", id)))
            return -1;
    return 0;
}

/* Why the cluster did not start, on stderr, before its directory goes: the end of
 * redis-cli's create.log and of each node's log (CI keeps no directory to look in). */
static void tell_why(hlt_cluster *f, const char *what)
{
    char cmd[400];
    fprintf(stderr, "cluster fixture: %s (%s)\n", what, f->dir);
    snprintf(cmd, sizeof cmd, "cd '%s' && for l in create.log n*/log; do [ -f \"$l\" ] && "
             "{ echo \"--- $l\"; tail -n 8 \"$l\"; }; done >&2", f->dir);
    if (system(cmd) != 0) fprintf(stderr, "cluster fixture: no logs\n");
}

static hlt_cluster *start(pid_t runner, const hlt_cluster_tls *tls, int nnodes)
{
    hlt_cluster *f = calloc(1, sizeof *f);
    char cmd[1600], sub[200];
    int rc, tries;
    if (!f) return NULL;
    f->nnodes = nnodes;
    f->owned = 1;
    f->runner = runner;
    f->lockfd = -1;
    snprintf(f->dir, sizeof f->dir, "/tmp/hilock-cluster-XXXXXX");
    if (!mkdtemp(f->dir)) {
        free(f);
        return NULL;
    }
    if (take_tls(f, tls) < 0) goto fail;
    snprintf(cmd, sizeof cmd, "redis-cli%s%s --cluster create", tls ? " --tls --cacert " : "", tls ? tls->ca : "");
    for (int i = 0; i < f->nnodes; i++) {
        snprintf(sub, sizeof sub, "%s/n%d", f->dir, i);
        mkdir(sub, 0700);
        for (tries = 0; tries < 5; tries++) {
            f->port[i] = hlt_free_cluster_port();
            spawn(f, i);
            if (wait_pong(f, i, 5000) == 0) break;
            hlt_cluster_kill(f, i);
        }
        if (tries == 5) {
            tell_why(f, "a node did not start in 5 tries");
            goto fail;
        }
        snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " 127.0.0.1:%d", f->port[i]);
    }
    snprintf(cmd + strlen(cmd), sizeof cmd - strlen(cmd), " --cluster-replicas %d --cluster-yes >%s/create.log 2>&1",
             nnodes == HLT_CLUSTER_NODES, f->dir);
    rc = hlt_server_version() >= 50000 ? system(cmd) : create_by_hand(f);
    make_url(f);
    if (rc != 0 || hlt_cluster_heal_all(f, 60000) < 0) {   /* (generous: two matrix cells at once) */
        tell_why(f, rc != 0 ? "redis-cli --cluster create failed" : "created, but not healthy");
        goto fail;
    }
    return f;
fail:
    hlt_cluster_stop(f);
    return NULL;
}

hlt_cluster *hlt_cluster_start(void) { return start(0, NULL, HLT_CLUSTER_NODES); }
hlt_cluster *hlt_cluster_start_tls(const hlt_cluster_tls *tls) { return start(0, tls, HLT_CLUSTER_NODES); }
hlt_cluster *hlt_cluster_start_masters(void) { return start(0, NULL, 3); }

void hlt_cluster_stop(hlt_cluster *f)
{
    char cmd[200];
    if (!f) return;
    if (f->lockfd >= 0) close(f->lockfd);
    if (f->owned) {
        for (int i = 0; i < f->nnodes; i++) {
            pid_t p = node_pid(f, i);   /* a server restarted by a worker too */
            if (p > 0 && p != f->pid[i]) {
                kill(p, SIGCONT);
                kill(p, SIGKILL);
            }
            if (f->pid[i] > 0) {
                kill(f->pid[i], SIGCONT);
                kill(f->pid[i], SIGKILL);
                waitpid(f->pid[i], NULL, 0);
            }
        }
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", f->dir);
        if (system(cmd) != 0) fprintf(stderr, "cluster fixture: could not remove %s\n", f->dir);
    }
    free(f);
}

static hlt_cluster *shared;

int hlt_cluster_share_tls(const hlt_cluster_tls *tls)
{
    char env[1024];
    size_t off;
    if (!(shared = start(getpid(), tls, HLT_CLUSTER_NODES))) return -1;
    off = (size_t)snprintf(env, sizeof env, "%ld %s ", (long)getpid(), shared->dir);
    for (int i = 0; i < shared->nnodes; i++)
        off += (size_t)snprintf(env + off, sizeof env - off, "%s%d", i ? "," : "", shared->port[i]);
    if (tls) snprintf(env + off, sizeof env - off, " %s %s %s", tls->crt, tls->key, tls->ca);
    setenv(ENV_NAME, env, 1);
    return 0;
}

int hlt_cluster_share(void) { return hlt_cluster_share_tls(NULL); }

void hlt_cluster_unshare(void)
{
    hlt_cluster_stop(shared);
    shared = NULL;
}

static pid_t runner_pid(void)
{
    const char *e = getenv(ENV_NAME);
    return e ? (pid_t)atol(e) : 0;
}

hlt_cluster *hlt_cluster_attach(void)
{
    const char *e = getenv(ENV_NAME);
    char ports[128], crt[HLT_CLUSTER_PATH], key[HLT_CLUSTER_PATH], ca[HLT_CLUSTER_PATH];
    hlt_cluster_tls tls = {crt, key, ca};
    hlt_cluster *f;
    const char *p = ports;
    int n;
    if (!e || !(f = calloc(1, sizeof *f))) return NULL;
    f->lockfd = -1;
    f->nnodes = HLT_CLUSTER_NODES;
    n = sscanf(e, "%*d %127s %127s %191s %191s %191s", f->dir, ports, crt, key, ca);
    for (int i = 0; n >= 2 && p && i < f->nnodes; i++, p = strchr(p, ',')) {
        if (i) p++;
        f->port[i] = atoi(p);
    }
    if ((n != 2 && n != 5) || !f->port[HLT_CLUSTER_NODES - 1] || take_tls(f, n == 5 ? &tls : NULL) < 0) {
        free(f);
        return NULL;
    }
    make_url(f);
    return f;
}

static void take(hlt_cluster *f, int how)
{
    char path[200];
    snprintf(path, sizeof path, "%s/tests.lock", f->dir);
    if (f->lockfd < 0) f->lockfd = open(path, O_CREAT | O_RDWR | O_CLOEXEC, 0600);
    while (f->lockfd >= 0 && flock(f->lockfd, how) < 0 && errno == EINTR) {}
}

void hlt_cluster_exclusive(hlt_cluster *f) { take(f, LOCK_EX); }
void hlt_cluster_shared_use(hlt_cluster *f) { take(f, LOCK_SH); }

void hlt_cluster_kill(hlt_cluster *f, int i)
{
    pid_t p = node_pid(f, i);
    if (p > 0) {
        kill(p, SIGCONT);
        kill(p, SIGKILL);
    }
    for (int k = 0; k < 100 && pong(f, i); k++) hlt_sleep_ms(10);
    if (f->owned && f->pid[i] > 0 && f->pid[i] == p) {
        waitpid(p, NULL, 0);
        f->pid[i] = 0;
    }
}

int hlt_cluster_restart(hlt_cluster *f, int i)
{
    char path[180];
    snprintf(path, sizeof path, "%s/n%d/pid", f->dir, i);
    unlink(path);
    for (int tries = 0; tries < 50; tries++) {
        if (f->owned) spawn(f, i);
        else spawn_watched(f, i, runner_pid());
        if (wait_pong(f, i, 3000) == 0) return 0;
        hlt_sleep_ms(50);
    }
    return -1;
}

void hlt_cluster_freeze(hlt_cluster *f, int i)
{
    pid_t p = node_pid(f, i);
    if (p > 0) kill(p, SIGSTOP);
}

void hlt_cluster_thaw(hlt_cluster *f, int i)
{
    pid_t p = node_pid(f, i);
    if (p > 0) kill(p, SIGCONT);
}

int hlt_cluster_wait_master(hlt_cluster *f, int r, long timeout_ms)
{
    long long end = hlt_now_ms() + timeout_ms;
    while (hlt_now_ms() < end) {
        if (info_has(f, r, "replication", "role:master")) {
            for (int s = 0; s < 16384; s += 64)   /* it serves slots, in its own view (asked of it
                                                     alone: a frozen node would cost each
                                                     question 2 s, 256 of them per pass) */
                if (slot_master_by(f, r, s) == r) return 0;
        }
        hlt_sleep_ms(50);
    }
    return -1;
}

int hlt_cluster_failover(hlt_cluster *f, int r, int force)
{
    redisReply *rep = hlt_cluster_cmd(f, r, "ROLE");
    int old = -1, ok;
    long long end = hlt_now_ms() + 30000;
    for (int i = 0; rep && rep->type == REDIS_REPLY_ARRAY && rep->elements >= 3 && i < f->nnodes; i++)
        if (f->port[i] == rep->element[2]->integer) old = i;
    if (rep) freeReplyObject(rep);
    rep = hlt_cluster_cmd(f, r, force ? "CLUSTER FAILOVER FORCE" : "CLUSTER FAILOVER");
    ok = rep && rep->type == REDIS_REPLY_STATUS;
    if (rep) freeReplyObject(rep);
    if (!ok || hlt_cluster_wait_master(f, r, 20000) < 0) return -1;
    /* and the old master knows it (a forced failover: it learns by gossip, a moment later) */
    while (old >= 0 && !info_has(f, old, "replication", "role:slave"))
        if (hlt_now_ms() > end) return -1;
        else hlt_sleep_ms(20);
    return 0;
}

int hlt_cluster_cut(hlt_cluster *f, int r)
{
    redisReply *a = hlt_cluster_cmd(f, r, "CONFIG SET masterauth bogus-for-the-test");
    redisReply *b = hlt_cluster_cmd(f, r, "CLIENT KILL TYPE master");
    int ok = a && b && a->type == REDIS_REPLY_STATUS;
    if (a) freeReplyObject(a);
    if (b) freeReplyObject(b);
    for (int k = 0; ok && k < 100 && info_has(f, r, "replication", "master_link_status:up"); k++)
        hlt_sleep_ms(10);
    return ok ? 0 : -1;
}

int hlt_cluster_heal(hlt_cluster *f, int r)
{
    redisReply *a = hlt_cluster_cmd(f, r, "CONFIG SET masterauth %s", "");
    int ok = a && a->type == REDIS_REPLY_STATUS;
    if (a) freeReplyObject(a);
    return ok ? 0 : -1;
}

static int node_id(hlt_cluster *f, int i, char id[41])
{
    redisReply *r = hlt_cluster_cmd(f, i, "CLUSTER MYID");
    int ok = r && r->type == REDIS_REPLY_STRING && r->len == 40;
    if (ok) memcpy(id, r->str, 41);
    if (r) freeReplyObject(r);
    return ok ? 0 : -1;
}

static int status_ok(redisReply *r)
{
    int ok = r && r->type == REDIS_REPLY_STATUS;
    if (r && !ok) fprintf(stderr, "cluster fixture: %s\n", r->str ? r->str : "?");
    if (r) freeReplyObject(r);
    return ok;
}

int hlt_cluster_migrate_begin(hlt_cluster *f, int slot, int to)
{
    int from = hlt_cluster_slot_master(f, slot);
    char fid[41], tid[41];
    if (from < 0 || from == to || node_id(f, from, fid) || node_id(f, to, tid)) return -1;
    if (!status_ok(hlt_cluster_cmd(f, to, "CLUSTER SETSLOT %d IMPORTING %s", slot, fid))) return -1;
    return status_ok(hlt_cluster_cmd(f, from, "CLUSTER SETSLOT %d MIGRATING %s", slot, tid)) ? 0 : -1;
}

int hlt_cluster_migrate_keys(hlt_cluster *f, int slot, int to)
{
    int from = hlt_cluster_slot_master(f, slot);
    redisReply *keys = from < 0 ? NULL : hlt_cluster_cmd(f, from, "CLUSTER GETKEYSINSLOT %d 1000", slot);
    int ok = keys && keys->type == REDIS_REPLY_ARRAY;
    for (size_t k = 0; ok && k < keys->elements; k++)
        ok = status_ok(hlt_cluster_cmd(f, from, "MIGRATE 127.0.0.1 %d %s 0 5000", f->port[to], keys->element[k]->str));
    if (keys) freeReplyObject(keys);
    return ok ? 0 : -1;
}

int hlt_cluster_migrate_end(hlt_cluster *f, int slot, int to)
{
    int from = hlt_cluster_slot_master(f, slot);
    char tid[41];
    if (from < 0 || node_id(f, to, tid)) return -1;
    if (!status_ok(hlt_cluster_cmd(f, to, "CLUSTER SETSLOT %d NODE %s", slot, tid))) return -1;
    if (from != to && !status_ok(hlt_cluster_cmd(f, from, "CLUSTER SETSLOT %d NODE %s", slot, tid))) return -1;
    for (int i = 0; i < f->nnodes; i++) {
        redisReply *r;
        if (i == to || i == from || !info_has(f, i, "replication", "role:master")) continue;
        r = hlt_cluster_cmd(f, i, "CLUSTER SETSLOT %d NODE %s", slot, tid);
        if (r) freeReplyObject(r);
    }
    /* the replicas learn it by gossip: wait until every node names the new owner (before 7.0
     * that may take a second, and a next step asking a replica would see the old owner) */
    /* A replica takes a slot's new owner only from a node whose config epoch beats the old
     * owner's; SETSLOT NODE bumps it only on a node that was importing, so a slot moved back
     * without IMPORTING stayed with the old owner on every replica (CI, 4.0 and 5.0: masters
     * said 2, replicas 0, for 30 s). And the new owner itself may take the slot back from the
     * old owner's gossip (its epoch higher) before that one hears of the move, leaving no node
     * that claims it (CI, 6.0, loaded: the old owner and two others said 2, the new owner and
     * the rest 0, for 30 s). So after 2 s, and every 5 s after, the new owner claims the slot
     * again and bumps its epoch: its claim then beats every other. */
    for (long long t0 = hlt_now_ms(), next = t0 + 2000; hlt_now_ms() < t0 + 30000; hlt_sleep_ms(20)) {
        int all = 1;
        for (int i = 0; all && i < f->nnodes; i++) all = slot_master_by(f, i, slot) == to;
        if (all) return 0;
        if (hlt_now_ms() > next) {
            redisReply *r = hlt_cluster_cmd(f, to, "CLUSTER SETSLOT %d NODE %s", slot, tid);
            if (r) freeReplyObject(r);
            r = hlt_cluster_cmd(f, to, "CLUSTER BUMPEPOCH");
            if (r) freeReplyObject(r);
            next = hlt_now_ms() + 5000;
        }
    }
    fprintf(stderr, "cluster fixture: the nodes do not agree on slot %d's new master (node %d) in 30 s:", slot, to);
    for (int i = 0; i < f->nnodes; i++) fprintf(stderr, " node %d says %d;", i, slot_master_by(f, i, slot));
    fputc('\n', stderr);
    return -1;
}

int hlt_cluster_heal_every(hlt_cluster *f, long timeout_ms)
{
    for (int i = 0; i < f->nnodes; i++) {
        redisReply *r = hlt_cluster_cmd(f, i, "PING");
        if (r) freeReplyObject(r);
        else if (hlt_cluster_restart(f, i) != 0) {
            fprintf(stderr, "cluster fixture: node %d did not restart\n", i);
            return -1;
        }
        hlt_cluster_heal(f, i);
    }
    if (hlt_cluster_heal_all(f, timeout_ms) == 0) return 0;
    fprintf(stderr, "cluster fixture: the cluster did not heal in %ld ms\n", timeout_ms);
    return -1;
}
