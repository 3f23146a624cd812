/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * guarded.c -- `make bench`, the guarded command of issue 38 (hilock_guarded_command,
 * docs/fencing.md "Fencing Redis itself"), against the bench's throwaway redis-server over TCP
 * 127.0.0.1: a guarded SET (one EVALSHA of guarded.lua: the lock's value compared, then the
 * SET, in one script) next to a plain SET, each on one connection of its own (the library's
 * connection for the guarded one; hiredis for the plain one: the library sends no plain
 * commands), one round trip per command, no pipelining; and, for the floor of any script,
 * hilock_check (one EVALSHA of check.lua: the compare alone) on the library's connection. They
 * run in turn in short slices (guarded, plain, check, guarded, ...) as part 1 of bench.c does,
 * so a burst of load elsewhere hits all alike; a ratio is the median of the per-slice ratios
 * (target: guarded / plain >= 0.8). The server's own time per call (INFO commandstats) says
 * where the difference goes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"


#define SLICE_S    0.25
#define MAX_SLICES 256

static const char *set_argv[] = { "SET", "bench:g:job", "state-of-the-job" };

/* SETs for secs; how many, in *n; the caller's clock in *us. */
static void guarded_sets(hilock *l, double secs, uint64_t *n, int64_t *us)
{
    int64_t t0 = now_us(), end = t0 + (int64_t)(secs * 1e6), t1;
    do {
        for (int i = 0; i < 32; i++) {
            hilock_reply *r = NULL;
            if (hilock_guarded_command(l, 3, set_argv, NULL, &r) != HILOCK_OK) die("guarded SET", "failed");
            hilock_reply_free(r);
        }
        *n += 32;
    } while ((t1 = now_us()) < end);
    *us += t1 - t0;
}

static void plain_sets(redisContext *k, double secs, uint64_t *n, int64_t *us)
{
    int64_t t0 = now_us(), end = t0 + (int64_t)(secs * 1e6), t1;
    do {
        for (int i = 0; i < 32; i++) {
            redisReply *r = redisCommandArgv(k, 3, set_argv, NULL);
            if (!r || r->type != REDIS_REPLY_STATUS) die("plain SET", k->errstr[0] ? k->errstr : "failed");
            freeReplyObject(r);
        }
        *n += 32;
    } while ((t1 = now_us()) < end);
    *us += t1 - t0;
}

static void checks(hilock *l, double secs, uint64_t *n, int64_t *us)
{
    int64_t t0 = now_us(), end = t0 + (int64_t)(secs * 1e6), t1;
    do {
        for (int i = 0; i < 32; i++)
            if (hilock_check(l) != HILOCK_OK) die("check", "failed");
        *n += 32;
    } while ((t1 = now_us()) < end);
    *us += t1 - t0;
}

/* usec_per_call of cmd in r's INFO commandstats ("evalsha", "set"); -1 unknown */
static double server_us(hlt_redis *r, const char *cmd)
{
    redisReply *x = hlt_cmd(r, "INFO commandstats");
    char pat[64];
    const char *p;
    double v = -1;
    snprintf(pat, sizeof pat, "cmdstat_%s:", cmd);
    if (x && x->str && (p = strstr(x->str, pat)) && (p = strstr(p, "usec_per_call="))) v = atof(p + 14);
    if (x) freeReplyObject(x);
    return v;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void guarded_bench(hlt_redis *r, double run_s)
{
    hilock_client *c;
    hilock *l = NULL;
    redisContext *k;
    uint64_t ng = 0, np = 0, nc = 0;
    int64_t ug = 0, up = 0, uc = 0;
    double ratio[MAX_SLICES], ratio_c[MAX_SLICES], sv_eval, sv_set, sv_check;
    int slices = (int)(run_s / SLICE_S + 0.5);
    printf("\nGuarded command (issue 38): a guarded SET (hilock_guarded_command: the lock compared "
           "and the SET in one script) next to\n  a plain SET (hiredis), each on one connection, one "
           "round trip each, in interleaved %.2f s slices; ratio: median per slice\n", SLICE_S);
    if (slices < 2) slices = 2;
    if (slices > MAX_SLICES) slices = MAX_SLICES;
    c = client_with((const char *[]){ r->url }, 1, NULL);
    if (hilock_acquire(c, "bench:g:lock", 3600 * 1000, 0, &l) != HILOCK_OK) die("acquire", hilock_client_errmsg(c));
    if (!(k = redisConnect("127.0.0.1", r->port)) || k->err) die("plain connection", k ? k->errstr : "no memory");
    guarded_sets(l, 0.2, &(uint64_t){ 0 }, &(int64_t){ 0 });   /* (warm: COMMAND INFO, EVALSHA's cache) */
    plain_sets(k, 0.2, &(uint64_t){ 0 }, &(int64_t){ 0 });
    checks(l, 0.2, &(uint64_t){ 0 }, &(int64_t){ 0 });
    freeReplyObject(hlt_cmd(r, "CONFIG RESETSTAT"));
    for (int s = 0; s < slices; s++) {
        uint64_t g0 = ng, p0 = np;
        int64_t gu0 = ug, pu0 = up;
        guarded_sets(l, SLICE_S, &ng, &ug);
        plain_sets(k, SLICE_S, &np, &up);
        ratio[s] = ((double)(ng - g0) / (double)(ug - gu0)) / ((double)(np - p0) / (double)(up - pu0));
    }
    sv_eval = server_us(r, "evalsha");
    sv_set = server_us(r, "set");
    freeReplyObject(hlt_cmd(r, "CONFIG RESETSTAT"));
    for (int s = 0; s < slices; s++) {
        uint64_t g0 = ng, c0 = nc;
        int64_t gu0 = ug, cu0 = uc;
        guarded_sets(l, SLICE_S / 2, &ng, &ug);
        checks(l, SLICE_S / 2, &nc, &uc);
        ratio_c[s] = ((double)(ng - g0) / (double)(ug - gu0)) / ((double)(nc - c0) / (double)(uc - cu0));
    }
    sv_check = server_us(r, "evalsha");   /* (guarded and check together) */
    qsort(ratio, (size_t)slices, sizeof ratio[0], cmp_d);
    qsort(ratio_c, (size_t)slices, sizeof ratio_c[0], cmp_d);
    printf("  %-40s %10s %10s %12s\n", "", "ops/s", "us/op", "server us");
    printf("  %-40s %10.0f %10.1f %12.2f\n", "guarded SET (hilock)", ng * 1e6 / (double)ug, (double)ug / (double)ng,
           sv_eval);
    printf("  %-40s %10.0f %10.1f %12.2f\n", "plain SET (hiredis)", np * 1e6 / (double)up, (double)up / (double)np,
           sv_set);
    printf("  %-40s %10.0f %10.1f %12s\n", "hilock_check (check.lua: compare only)", nc * 1e6 / (double)uc,
           (double)uc / (double)nc, "");
    printf("  guarded / plain: %.2f (median of %d slices; min %.2f, max %.2f; target >= 0.8)\n",
           ratio[slices / 2], slices, ratio[0], ratio[slices - 1]);
    printf("  guarded / check: %.2f (median; min %.2f, max %.2f); EVALSHA of both: %.2f us on the server\n",
           ratio_c[slices / 2], ratio_c[0], ratio_c[slices - 1], sv_check);
    if (hilock_release(l) != HILOCK_OK) die("release", hilock_client_errmsg(c));
    hilock_free(l);
    redisFree(k);
    hilock_client_free(c);
}
