/* SPDX-License-Identifier: BSD-3-Clause */
/* checks.c -- see checks.h */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checks.h"

void hlt_set(hlt_redis *r, const char *key, const char *v, long long px)
{
    redisReply *rep = px > 0 ? hlt_cmd(r, "SET %s %s PX %lld", key, v, px) : hlt_cmd(r, "SET %s %s", key, v);
    cr_assert(rep && rep->type == REDIS_REPLY_STATUS);
    freeReplyObject(rep);
}

void hlt_holds(hlt_redis *r, const char *key, const char *v)
{
    char *got = hlt_get(r, key);
    if (!v) cr_assert_null(got, "%s holds \"%s\"", key, got);
    else {
        cr_assert_not_null(got, "%s is gone, expected \"%s\"", key, v);
        cr_assert_str_eq(got, v);
    }
    free(got);
}

hlt_redis *hlt_redis_started(const char *extra)
{
    hlt_redis *r = hlt_redis_start(extra);
    cr_assert_not_null(r, "redis-server %s did not start", extra ? extra : "");
    return r;
}

void hlt_release_gone(hlt_redis *r, hilock_client *c, hilock *l, const char *key)
{
    hilock_status st = hilock_release(l);
    cr_assert_eq(st, HILOCK_OK, "release %s: %s (%s)", key, hilock_strerror(st), c ? hilock_client_errmsg(c) : "");
    cr_assert_eq(hlt_exists(r, key), 0, "%s is still there after its release", key);
    hilock_free(l);
}

int hlt_in_child(int (*fn)(void *arg), void *arg, long limit_ms)
{
    pid_t pid = fork();
    cr_assert(pid >= 0, "fork");
    if (pid == 0) _exit(fn(arg));
    return hlt_reap(pid, limit_ms);
}

struct freed { hilock *l; hilock_client *c; };

static int free_both(void *arg)
{
    struct freed *f = arg;
    hilock_free(f->l);
    hilock_client_free(f->c);
    return 0;
}

int hlt_child_frees(hilock *l, hilock_client *c)
{
    struct freed f = { l, c };
    return hlt_in_child(free_both, &f, 5000);
}

int hlt_run_capture(const char *cmd, char *out, size_t n)
{
    FILE *p = popen(cmd, "r");
    size_t got = 0;
    cr_assert_not_null(p, "popen %s", cmd);
    while (got < n - 1) {
        size_t k = fread(out + got, 1, n - 1 - got, p);
        if (k == 0) break;
        got += k;
    }
    out[got] = '\0';
    return pclose(p);
}

const char *hlt_path(hlt_redis *r, const char *name)
{
    static char p[8][320];
    static int i;
    i = (i + 1) % 8;
    snprintf(p[i], sizeof p[i], "%s/%s", r->dir, name);
    return p[i];
}

void hlt_read_file(const char *p, char *buf, size_t cap)
{
    FILE *f = fopen(p, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = '\0';
    if (f) fclose(f);
}

const char *hlt_slurp(hlt_redis *r, const char *name)
{
    static char buf[16384];
    hlt_read_file(hlt_path(r, name), buf, sizeof buf);
    return buf;
}

pid_t hlt_spawn(const char *prog, const char *const *args, int (*in_child)(void *arg), void *arg)
{
    const char *argv[32];
    int n = 0;
    pid_t pid;
    argv[n++] = prog;
    while (*args && n < 31) argv[n++] = *args++;
    argv[n] = NULL;
    pid = fork();
    cr_assert(pid >= 0, "fork");
    if (pid == 0) {
        if (in_child && in_child(arg) != 0) _exit(120);
        execv(prog, (char *const *)argv);
        _exit(121);
    }
    return pid;
}

struct outputs { const char *dir, *out, *err; };

static int redirect(void *arg)
{
    const struct outputs *w = arg;
    int o = open(w->out, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int e = open(w->err, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (o < 0 || e < 0 || (w->dir && chdir(w->dir) < 0)) return -1;
    dup2(o, 1);
    dup2(e, 2);
    return 0;
}

pid_t hlt_spawn_to(const char *prog, const char *const *args, const char *dir, const char *out_path,
                   const char *err_path)
{
    struct outputs w = { dir, out_path, err_path };
    return hlt_spawn(prog, args, redirect, &w);
}

const char *hlt_line_with(const char *out, const char *needle)
{
    static char line[4096];
    const char *p = strstr(out, needle), *b, *e;
    cr_assert_not_null(p, "no line with %s in:\n%.3000s", needle, out);
    for (b = p; b > out && b[-1] != '\n'; b--) {}
    e = strchr(p, '\n');
    snprintf(line, sizeof line, "%.*s", (int)((e ? e : p + strlen(p)) - b), b);
    return line;
}

long long hlt_script_calls(hlt_redis *r)
{
    long long sha = hlt_info_int(r, "commandstats", "cmdstat_evalsha:calls=");
    long long eval = hlt_info_int(r, "commandstats", "cmdstat_eval:calls=");
    return (sha > 0 ? sha : 0) + (eval > 0 ? eval : 0);   /* (-1: no such row, none yet) */
}

void hlt_log_commands(hlt_redis *r)
{
    const char *cmds[] = { "CONFIG SET slowlog-max-len 1024", "CONFIG SET slowlog-log-slower-than 0",
                           "SLOWLOG RESET" };
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        redisReply *rep = hlt_cmd(r, cmds[i]);
        cr_assert(rep && rep->type == REDIS_REPLY_STATUS, "%s: %s", cmds[i], rep ? rep->str : "no reply");
        freeReplyObject(rep);
    }
}

long long hlt_logged(hlt_redis *r, const char *arg)
{
    redisReply *rep = hlt_cmd(r, "SLOWLOG GET 1024");
    long long n = 0;
    cr_assert(rep && rep->type == REDIS_REPLY_ARRAY, "SLOWLOG GET: no list");
    for (size_t i = 0; i < rep->elements; i++) {   /* [id, when, us, [args...], ...] */
        const redisReply *e = rep->element[i], *a = e->elements > 3 ? e->element[3] : NULL;
        for (size_t j = 0; a && a->type == REDIS_REPLY_ARRAY && j < a->elements; j++)
            if (a->element[j]->type == REDIS_REPLY_STRING && !strcmp(a->element[j]->str, arg)) {
                n++;
                break;
            }
    }
    freeReplyObject(rep);
    return n;
}

int hlt_matches(const char *s, const char *re)
{
    regex_t rx;
    int ok;
    cr_assert_eq(regcomp(&rx, re, REG_EXTENDED | REG_NOSUB), 0);
    ok = regexec(&rx, s, 0, NULL, 0) == 0;
    regfree(&rx);
    return ok;
}
