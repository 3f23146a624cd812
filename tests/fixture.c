/* SPDX-License-Identifier: BSD-3-Clause */
/* fixture.c -- see fixture.h */
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/time.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"

long long hlt_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void hlt_sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
        ;
}

int hlt_reap(pid_t pid, long limit_ms)
{
    long long end = hlt_now_ms() + limit_ms;
    int st;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (hlt_now_ms() > end) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return -1;
        }
        hlt_sleep_ms(5);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int hlt_built_bin(char *buf, size_t cap, const char *name)
{
    ssize_t n = readlink("/proc/self/exe", buf, cap - 1);
    char *slash;
    if (n <= 0) return -1;
    buf[n] = '\0';
    for (int up = 0; up < 2; up++) {   /* drop the test's name, then tests/ */
        if (!(slash = strrchr(buf, '/'))) return -1;
        *slash = '\0';
    }
    if (strlen(buf) + 1 + strlen(name) + 1 > cap) return -1;
    strcat(buf, "/");
    strcat(buf, name);
    return access(buf, X_OK);
}

/* Where scripts/deps.sh is: dir, copied to out. */
static int srcdir_at(const char *dir, char *out, size_t n)
{
    char probe[PATH_MAX + 32];
    if (snprintf(probe, sizeof probe, "%s/scripts/deps.sh", dir) >= (int)sizeof probe || access(probe, R_OK))
        return -1;
    return snprintf(out, n, "%s", dir) < (int)n ? 0 : -1;
}

int hlt_srcdir(char *out, size_t n)
{
    char path[PATH_MAX];
    const char *env = getenv("HILOCK_SRCDIR");
    ssize_t len;
    if (env && !srcdir_at(env, out, n)) return 0;
    if (getcwd(path, sizeof path) && !srcdir_at(path, out, n)) return 0;   /* make test runs there */
    if ((len = readlink("/proc/self/exe", path, sizeof path - 1)) < 0) return -1;
    path[len] = '\0';
    for (int up = 0; up < 5 && strcmp(path, "/"); up++) {
        const char *d = dirname(path);   /* in place, or a static "/" or "." */
        memmove(path, d, strlen(d) + 1);
        if (!srcdir_at(path, out, n)) return 0;
    }
    return -1;
}

static int  server_ver = -1, server_valkey;
static char server_name[64];

/* `redis-server --version`: "Redis server v=7.0.15 sha=..." or "Valkey server v=8.0.1 ...";
 * Valkey 7.2 says only "Server v=7.2.7 ..." */
static void read_server_version(void)
{
    char line[256] = "";
    unsigned a = 0, b = 0, c = 0;
    const char *v;
    FILE *f = popen("redis-server --version 2>/dev/null", "r");
    server_ver = 0;
    if (!f) return;
    if (!fgets(line, sizeof line, f)) line[0] = '\0';
    pclose(f);
    if (!(v = strstr(line, "v=")) || sscanf(v + 2, "%u.%u.%u", &a, &b, &c) != 3) return;
    server_valkey = !strncmp(line, "Valkey", 6) || !strncmp(line, "Server", 6);
    server_ver = (int)(a * 10000 + b * 100 + c);
    snprintf(server_name, sizeof server_name, "%s %u.%u.%u", server_valkey ? "Valkey" : "Redis", a, b, c);
}

int hlt_server_version(void)
{
    if (server_ver < 0) read_server_version();
    return server_ver;
}

int hlt_server_is_valkey(void)
{
    if (server_ver < 0) read_server_version();
    return server_valkey;
}

const char *hlt_server_name(void)
{
    if (server_ver < 0) read_server_version();
    return server_name[0] ? server_name : "an unknown redis-server";
}

int hlt_free_port(void)
{
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM, 0), port = -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0 &&
        getsockname(s, (struct sockaddr *)&a, &l) == 0)
        port = ntohs(a.sin_port);
    if (s >= 0) close(s);
    return port;
}

int hlt_dead_port(void)
{
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    int s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);   /* (held: never closed) */
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof a) != 0 ||
        getsockname(s, (struct sockaddr *)&a, &l) != 0) {
        if (s >= 0) close(s);
        return hlt_free_port();
    }
    return ntohs(a.sin_port);
}

int hlt_listen(int backlog, int *port, char *url, char *name, size_t cap)
{
    struct sockaddr_in a;
    socklen_t l = sizeof a;
    int one = 1, ls = socket(AF_INET, SOCK_STREAM, 0);
    if (ls < 0) return -1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(ls, (struct sockaddr *)&a, sizeof a) != 0 || listen(ls, backlog) != 0 ||
        getsockname(ls, (struct sockaddr *)&a, &l) != 0) {
        close(ls);
        return -1;
    }
    *port = ntohs(a.sin_port);
    snprintf(url, cap, "redis://127.0.0.1:%d", *port);
    snprintf(name, cap, "127.0.0.1:%d", *port);
    return ls;
}

const char *hlt_server_option(const char *opt, char *buf, size_t cap)
{
    const char *rep = strstr(opt, "replica");
    if (!strcmp(opt, "--protected-mode") && hlt_server_version() < 30200) return NULL;
    if (!rep || hlt_server_version() >= 50000 || strncmp(opt, "--", 2)) return opt;
    snprintf(buf, cap, "%.*sslave%s", (int)(rep - opt), opt, rep + 7);
    return buf;
}

int hlt_server_args(const char *args, char *out, size_t cap)
{
    char word[256], buf[256];
    size_t len = 0;
    int n, skip = 0;
    out[0] = '\0';
    while (sscanf(args, " %255s%n", word, &n) == 1) {
        const char *w = word[0] == '-' ? hlt_server_option(word, buf, sizeof buf) : word;
        args += n;
        if (!w) skip = 1;   /* the option and its value */
        else if (skip) skip = 0;
        else len += (size_t)snprintf(out + len, len < cap ? cap - len : 0, "%s%s", len ? " " : "", w);
        if (len >= cap) return -1;
    }
    return 0;
}

redisReply *hlt_addslots(redisContext *c, int from, int to)
{
    int n = to - from + 1;
    char (*num)[8] = malloc((size_t)(n > 0 ? n : 1) * sizeof *num);
    const char **argv = malloc((size_t)(n + 2) * sizeof *argv);
    redisReply *r = NULL;
    if (num && argv && n > 0) {
        argv[0] = "CLUSTER";
        argv[1] = "ADDSLOTS";
        for (int i = 0; i < n; i++) {
            snprintf(num[i], sizeof num[i], "%d", from + i);
            argv[i + 2] = num[i];
        }
        r = redisCommandArgv(c, n + 2, argv, NULL);
    }
    free(num);
    free(argv);
    return r;
}

redisReply *hlt_acl_setuser(hlt_redis *r, const char *rules)
{
    char buf[512], *w, *save = NULL;
    const char *argv[32] = { "ACL", "SETUSER" };
    int n = 2;
    snprintf(buf, sizeof buf, "%s", rules);
    for (w = strtok_r(buf, " ", &save); w && n < 32; w = strtok_r(NULL, " ", &save))
        if (strcmp(w, "&*") || hlt_server_version() >= 60200) argv[n++] = w;
    return hlt_cli(r) ? redisCommandArgv(r->cli, n, argv, NULL) : NULL;
}

const char *hlt_replicaof(void) { return hlt_server_version() >= 50000 ? "REPLICAOF" : "SLAVEOF"; }

static pid_t spawn(hlt_redis *r)
{
    char args[2048], own[2048], cmd[2048 + 32];
    pid_t pid;
    snprintf(args, sizeof args,
             "--port %d --bind 127.0.0.1 --unixsocket %s --unixsocketperm 700 "
             "--save '' --appendonly no --dir %s --logfile %s/redis.log --daemonize no "
             "--protected-mode no %s",
             r->port, r->sock, r->dir, r->dir, r->extra);
    if (hlt_server_args(args, own, sizeof own) < 0) return -1;
    snprintf(cmd, sizeof cmd, "exec redis-server %s", own);
    pid = fork();
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);   /* dies with the test, even on a crash */
        execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_ready(hlt_redis *r)
{
    long long end = hlt_now_ms() + 10000;
    while (hlt_now_ms() < end) {
        int st;
        if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
            r->pid = 0;
            return -1;
        }
        redisContext *c = redisConnectUnix(r->sock);
        if (c && !c->err) {
            redisReply *rep = redisCommand(c, "PING");
            int ok = rep && rep->type == REDIS_REPLY_STATUS;
            int auth = rep && rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "NOAUTH", 6);
            if (rep) freeReplyObject(rep);
            redisFree(c);
            if (ok || auth) return 0;
        } else if (c) {
            redisFree(c);
        }
        hlt_sleep_ms(10);
    }
    return -1;
}

/* A free port; with --cluster-enabled also a free bus port (hlt_free_cluster_port). */
static int free_port_for(const char *extra)
{
    return strstr(extra, "cluster-enabled yes") ? hlt_free_cluster_port() : hlt_free_port();
}

int hlt_free_cluster_port(void)
{
    int port = hlt_free_port();
    for (int k = 0; k < 50; k++) {
        struct sockaddr_in a;
        int s = socket(AF_INET, SOCK_STREAM, 0), ok;
        memset(&a, 0, sizeof a);
        a.sin_family = AF_INET;
        a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        a.sin_port = htons((uint16_t)(port + 10000));
        ok = port > 0 && port + 10000 < 65536 && s >= 0 && bind(s, (struct sockaddr *)&a, sizeof a) == 0;
        if (s >= 0) close(s);
        if (ok) break;
        port = hlt_free_port();
    }
    return port;
}

void hlt_sigpipe_ignore(struct sigaction *old)
{
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigaction(SIGPIPE, &ign, old);
}

void hlt_sigpipe_restore(const struct sigaction *old) { sigaction(SIGPIPE, old, NULL); }

/* wait_ready with SIGPIPE ignored (hlt_sigpipe_ignore) */
static int ready_without_sigpipe(hlt_redis *r)
{
    struct sigaction old;
    int rc;
    hlt_sigpipe_ignore(&old);
    rc = wait_ready(r);
    hlt_sigpipe_restore(&old);
    return rc;
}

hlt_redis *hlt_redis_start(const char *extra)
{
    hlt_redis *r = calloc(1, sizeof *r);
    if (!r) return NULL;
    snprintf(r->dir, sizeof r->dir, "/tmp/hilock-test-XXXXXX");
    if (!mkdtemp(r->dir)) {
        perror("mkdtemp");
        free(r);
        return NULL;
    }
    snprintf(r->sock, sizeof r->sock, "%s/redis.sock", r->dir);
    snprintf(r->extra, sizeof r->extra, "%s", extra ? extra : "");
    for (int tries = 0; tries < 5; tries++) {
        r->port = free_port_for(r->extra);
        r->pid = spawn(r);
        if (r->pid > 0 && ready_without_sigpipe(r) == 0) {
            snprintf(r->url, sizeof r->url, "redis://127.0.0.1:%d", r->port);
            snprintf(r->unix_url, sizeof r->unix_url, "unix://%s", r->sock);
            return r;
        }
        hlt_redis_kill(r);   /* port taken in between, most likely: try another */
    }
    fprintf(stderr, "fixture: redis-server did not start (see %s/redis.log)\n", r->dir);
    hlt_redis_stop(r);
    return NULL;
}

void hlt_redis_kill(hlt_redis *r)
{
    if (r && r->pid > 0) {
        kill(r->pid, SIGCONT);
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        r->pid = 0;
    }
    if (r && r->cli) {
        redisFree(r->cli);
        r->cli = NULL;
    }
}

int hlt_redis_restart(hlt_redis *r)
{
    hlt_redis_kill(r);
    unlink(r->sock);
    for (int tries = 0; tries < 50; tries++) {   /* the port may linger briefly */
        r->pid = spawn(r);
        if (r->pid > 0 && wait_ready(r) == 0) return 0;
        hlt_redis_kill(r);
        hlt_sleep_ms(50);
    }
    return -1;
}

void hlt_redis_freeze(hlt_redis *r) { if (r && r->pid > 0) kill(r->pid, SIGSTOP); }
void hlt_redis_thaw(hlt_redis *r) { if (r && r->pid > 0) kill(r->pid, SIGCONT); }

void hlt_redis_stop(hlt_redis *r)
{
    char cmd[256];
    if (!r) return;
    hlt_redis_kill(r);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", r->dir);
    if (r->dir[0] && system(cmd) != 0) fprintf(stderr, "fixture: could not remove %s\n", r->dir);
    free(r);
}

redisContext *hlt_cli(hlt_redis *r)
{
    if (r->cli && r->cli->err) {
        redisFree(r->cli);
        r->cli = NULL;
    }
    if (!r->cli) {
        struct timeval tv = { 2, 0 };
        r->cli = redisConnectUnixWithTimeout(r->sock, tv);
        if (!r->cli || r->cli->err) return NULL;
        redisSetTimeout(r->cli, tv);
        /* a password given to the server applies to this connection too */
        const char *p = strstr(r->extra, "--requirepass ");
        if (p) {
            char pw[128];
            if (sscanf(p + 14, "%127s", pw) == 1) {
                redisReply *a = redisCommand(r->cli, "AUTH %s", pw);
                if (a) freeReplyObject(a);
            }
        }
    }
    return r->cli;
}

redisReply *hlt_cmd(hlt_redis *r, const char *fmt, ...)
{
    va_list ap;
    redisReply *rep;
    if (!hlt_cli(r)) return NULL;
    va_start(ap, fmt);
    rep = redisvCommand(r->cli, fmt, ap);
    va_end(ap);
    return rep;
}

char *hlt_get(hlt_redis *r, const char *key)
{
    redisReply *rep = hlt_cmd(r, "GET %s", key);
    char *v = NULL;
    if (rep && rep->type == REDIS_REPLY_STRING) v = strdup(rep->str);
    if (rep) freeReplyObject(rep);
    return v;
}

static long long int_cmd(hlt_redis *r, const char *cmd, const char *key)
{
    redisReply *rep = key ? hlt_cmd(r, "%s %s", cmd, key) : hlt_cmd(r, "%s", cmd);
    long long v = rep && rep->type == REDIS_REPLY_INTEGER ? rep->integer : -99;
    if (rep) freeReplyObject(rep);
    return v;
}

long long hlt_pttl(hlt_redis *r, const char *key) { return int_cmd(r, "PTTL", key); }
long long hlt_exists(hlt_redis *r, const char *key) { return int_cmd(r, "EXISTS", key); }
long long hlt_dbsize(hlt_redis *r) { return int_cmd(r, "DBSIZE", NULL); }

/* A fresh connection's PING gets no reply within 30 ms, or -BUSY: the server is inside a
 * script (or another long command). Polled every 5 ms up to limit_ms: the condition a test
 * waits for, where a fixed sleep would guess how long the server takes to start the script.
 * Returns how many connections it made (for a test that counts them), 0 if never busy. */
int hlt_redis_wait_busy(hlt_redis *r, long limit_ms)
{
    long long end = hlt_now_ms() + limit_ms;
    struct timeval tv = { 0, 30000 };
    int made = 0;
    do {
        redisContext *k = redisConnectUnixWithTimeout(r->sock, tv);
        redisReply *rep = NULL;
        int up = k && !k->err && redisSetTimeout(k, tv) == REDIS_OK, busy;
        made += k && !k->err;
        if (up) rep = redisCommand(k, "PING");   /* NULL: no reply in 30 ms */
        busy = up && (!rep || (rep->type == REDIS_REPLY_ERROR && !strncmp(rep->str, "BUSY", 4)));
        if (rep) freeReplyObject(rep);
        if (k) redisFree(k);
        if (busy) return made;
        hlt_sleep_ms(5);
    } while (hlt_now_ms() < end);
    return 0;
}

long long hlt_info_int(hlt_redis *r, const char *section, const char *field)
{
    redisReply *rep = hlt_cmd(r, "INFO %s", section);
    long long v = -1;
    char pat[64];
    const char *p;
    snprintf(pat, sizeof pat, "\n%s", field);
    if (rep && rep->type == REDIS_REPLY_STRING && (p = strstr(rep->str, pat))) v = atoll(p + strlen(pat));
    if (rep) freeReplyObject(rep);
    return v;
}

int hlt_redis_wait_blocked(hlt_redis *r, long long n, long limit_ms)
{
    long long end = hlt_now_ms() + limit_ms;
    for (;;) {
        long long b = hlt_info_int(r, "clients", "blocked_clients:");
        if (b >= n) return 1;
        if (hlt_now_ms() >= end) return 0;
        hlt_sleep_ms(5);
    }
}
