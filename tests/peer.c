/* SPDX-License-Identifier: BSD-3-Clause */
/* peer.c -- see peer.h */
#include <criterion/criterion.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "fixture.h"
#include "peer.h"

static int is_file(const char *p)
{
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* make runs from the top; a binary run by hand is <top>/<build>/tests/test_X */
const char *hlt_peer_dir(const char *sub, const char *file, const char *env_name)
{
    static char dir[PATH_MAX];
    char exe[PATH_MAX], probe[PATH_MAX + 64];
    const char *env = getenv(env_name);
    ssize_t n;
    if (env && *env) return env;
    snprintf(dir, sizeof dir, "tests/interop/%s", sub);
    snprintf(probe, sizeof probe, "%s/%s", dir, file);
    if (is_file(probe)) return dir;
    n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = '\0';
        for (int up = 0; up < 3; up++) {
            char *s = strrchr(exe, '/');
            if (s) *s = '\0';
        }
        snprintf(dir, sizeof dir, "%.*s/tests/interop/%s", PATH_MAX - 64, exe, sub);
        snprintf(probe, sizeof probe, "%s/%s", dir, file);
        if (is_file(probe)) return dir;
    }
    cr_assert_fail("interop: cannot find tests/interop/%s/%s (set %s)", sub, file, env_name);
    return NULL;
}

void hlt_peer_start(hlt_peer *p, const char *const *argv, int with_stdin)
{
    int fds[2], ins[2] = { -1, -1 };
    memset(p, 0, sizeof *p);
    p->in = -1;
    cr_assert_eq(pipe(fds), 0);
    if (with_stdin) cr_assert_eq(pipe(ins), 0);
    p->pid = fork();
    cr_assert(p->pid >= 0);
    if (p->pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        dup2(fds[1], 1);
        close(fds[0]);
        close(fds[1]);
        if (with_stdin) {
            dup2(ins[0], 0);
            close(ins[0]);
            close(ins[1]);
        }
        execv("/bin/sh", (char *const *)argv);
        _exit(127);
    }
    close(fds[1]);
    p->fd = fds[0];
    if (with_stdin) {
        close(ins[0]);
        p->in = ins[1];
    }
}

void hlt_peer_say(hlt_peer *p, const char *line)
{
    size_t n = strlen(line);
    cr_assert_neq(p->in, -1, "the peer has no stdin pipe");
    signal(SIGPIPE, SIG_IGN);   /* a dead peer: a failed write, not a dead test */
    cr_assert(write(p->in, line, n) == (ssize_t)n && write(p->in, "\n", 1) == 1,
              "the peer stopped reading its stdin");
}

const char *hlt_peer_line(hlt_peer *p, long timeout_ms)
{
    long long end = hlt_now_ms() + timeout_ms;
    for (;;) {
        char *nl = memchr(p->out, '\n', p->len);
        struct pollfd pf = { p->fd, POLLIN, 0 };
        ssize_t r;
        long long left = end - hlt_now_ms();
        if (nl) {
            *nl = '\0';
            return p->out;
        }
        if (left <= 0 || poll(&pf, 1, (int)left) <= 0) return NULL;
        r = read(p->fd, p->out + p->len, sizeof p->out - 1 - p->len);
        if (r <= 0) return NULL;
        p->len += (size_t)r;
        p->out[p->len] = '\0';
    }
}

void hlt_peer_next(hlt_peer *p)
{
    size_t used = strlen(p->out) + 1;
    memmove(p->out, p->out + used, p->len - used);
    p->len -= used;
    p->out[p->len] = '\0';
}

int hlt_peer_end(hlt_peer *p, long timeout_ms)
{
    long long end = hlt_now_ms() + timeout_ms;
    int st = 0;
    if (p->in != -1) close(p->in);   /* EOF on its stdin: a serving peer ends */
    p->in = -1;
    close(p->fd);
    for (;;) {
        pid_t w = waitpid(p->pid, &st, WNOHANG);
        if (w == p->pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
        if (hlt_now_ms() > end) {
            kill(p->pid, SIGKILL);
            waitpid(p->pid, &st, 0);
            return -1;
        }
        hlt_sleep_ms(10);
    }
}

long long hlt_jnum(const char *line, const char *name)
{
    char pat[64];
    const char *s;
    snprintf(pat, sizeof pat, "\"%s\":", name);
    s = line ? strstr(line, pat) : NULL;
    cr_assert_not_null(s, "no \"%s\" in the peer's output: %s", name, line ? line : "(nothing)");
    s += strlen(pat);
    if (*s == '"') s++;
    return atoll(s);
}

long long hlt_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int hlt_doc_peer_try(redisContext *rc, const char *key, long long timeout_ms, char *mine)
{
    redisReply *a;
    int won;
    snprintf(mine, 32, "%lld", hlt_wall_ms() + timeout_ms + 1);
    a = redisCommand(rc, "SETNX %s %s", key, mine);
    won = a && a->type == REDIS_REPLY_INTEGER && a->integer == 1;
    if (a) freeReplyObject(a);
    if (won) return 1;
    a = redisCommand(rc, "GET %s", key);
    if (a && a->type == REDIS_REPLY_STRING && atoll(a->str) < hlt_wall_ms()) {
        redisReply *g;
        snprintf(mine, 32, "%lld", hlt_wall_ms() + timeout_ms + 1);
        g = redisCommand(rc, "GETSET %s %s", key, mine);
        won = g && (g->type == REDIS_REPLY_NIL || (g->type == REDIS_REPLY_STRING && atoll(g->str) < hlt_wall_ms()));
        if (g) freeReplyObject(g);
    }
    if (a) freeReplyObject(a);
    return won;
}
