/* SPDX-License-Identifier: BSD-3-Clause */
/* check.c -- merge the workers' logs of one run and judge them.
 *
 * The property: never two holders of one key while both believe they hold it. A holder's
 * belief is the union of its windows: [acquire returned, validity deadline], then
 * [extend returned, new deadline] for each successful extend, all cut at the moment it
 * started its release. (An E window that meets the holding's last one extends it: the cli
 * mode's COMMAND trees log their life as 10 ms beats.) Windows of different holdings of one key must not intersect.
 *
 * Also judged (each must be 0 unless the mode is documented not to guarantee it):
 *   - a write refused by the resource while its writer still believed it held the key
 *     (someone with a newer token wrote inside our window);
 *   - a fencing token that does not grow from one holding of a key to the next;
 *   - release/extend/check answering OK when called surely after the server's expiry
 *     (a paused holder), or NOT_HELD/LOST while the caller still believed it held the key;
 *   - a call that took longer than its bound (wait + connect_timeout + 3 x io_timeout, the
 *     library's: a connect, the handshake, the command, a resend after NOSCRIPT), less
 *     the time its worker was stopped by the fault injector;
 *   - statuses that faults cannot explain (EINVAL, EAUTH, EREPLY, ENOMEM, unknown), a worker that
 *     died without being killed. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "torture.h"

#define NOPS 4
#define NST  13
static const char *const ops[NOPS] = { "acq", "rel", "ext", "chk" };
static const char *const sts[NST] = { "OK", "BUSY", "NOT_HELD", "LOST", "EINVAL", "EIO",
    "ETIMEDOUT", "EAUTH", "EREPLY", "EREPLICAS", "ENOQUORUM", "ENOMEM", "UNKNOWN" };

typedef struct ival { int64_t s, e; int holding; int key; } ival;
/* g: what was granted: 'p' a permit, 's' shared, 'x' exclusive, '-' a lock */
typedef struct holding { int key; uint64_t fence; int64_t start; int worker; int pid; int64_t t0; char g; } holding;
/* what the legacy peer did to others' locks: a GETSET that lost its race (it overwrote a value
 * it had not judged) or a DEL that landed after its own stamp had passed */
typedef struct clobber { int key; int64_t sent, reply; } clobber;
/* NOT_HELD/LOST while believed held (op < NOPS), or a write refused while believed (op ==
 * NOPS): judged once every log is read */
typedef struct early { int key; int op; int64_t hold_t0, t_end; int stamp_unknown; } early;
typedef struct pause_ { int pid; int64_t s, e; } pause_;
typedef struct msg { char *text; long n; } msg;

typedef struct state {
    ival    *iv;   size_t niv, capiv;
    holding *h;    size_t nh, caph;
    pause_  *pz;   size_t npz, cappz;
    pause_  *fw;   size_t nfw, capfw;          /* failover windows (pid unused) */
    pause_  *rw;   size_t nrw, caprw;          /* servers down and restarted empty */
    msg     *m;    size_t nm, capm;
    clobber *g;    size_t ng, capg;
    early   *ea;   size_t nea, capea;
    long calls[NOPS][NST];
    int64_t max_dur[NOPS], max_bound[NOPS], max_excess;   /* us */
    char    max_excess_what[128];
    long over_bound, spanning_pause;
    long writes_ok, writes_rej, rej_believed, late_w_ok, late_w_rej;
    long late_ok[NOPS], late_notheld[NOPS], late_other[NOPS];
    long premature[NOPS];
    long faults_total;
    char *fault_kind[64]; long fault_n[64]; int nfk;
    long workers, quits, headers_missing, bad_lines;
    long node_holdings;
    long overlaps, overlaps_failover, overlaps_peer, premature_peer, premature_quorum, premature_stamp, rej_peer;
    long peer_getsets, peer_dels;
    int64_t overlap_max_us;
    long fence_regress;
    char examples[5][320]; int nex;
    int64_t t_last;                            /* the latest call's end in any log */
    long writer_waits, writer_busy, wait_excess;   /* rw: writers' acquires, those not granted, over the bound */
    int64_t writer_wait_max;
    int max_together;                          /* sem/rw: most permits / shared holders believed at once */
    int64_t grant_gap_max;                     /* sem: longest time a key went without a grant */
    int grant_gap_key;
} state;

#define GROW(arr, n, cap) do { if ((n) == (cap)) { size_t nc_ = (cap) ? (cap) * 2 : 1024; \
    void *p_ = realloc((arr), nc_ * sizeof *(arr)); if (!p_) { perror("realloc"); exit(2); } \
    (arr) = p_; (cap) = nc_; } } while (0)

static int op_index(const char *s)
{
    for (int i = 0; i < NOPS; i++) if (!strcmp(s, ops[i])) return i;
    return -1;
}

static int st_index(const char *s)
{
    for (int i = 0; i < NST - 1; i++) if (!strcmp(s, sts[i])) return i;
    return NST - 1;
}

/* time the worker `pid` spent stopped by the injector within [s, e] */
static int64_t paused_within(const state *S, int pid, int64_t s, int64_t e)
{
    int64_t t = 0;
    for (size_t i = 0; i < S->npz; i++) {
        const pause_ *p = &S->pz[i];
        int64_t a = p->s > s ? p->s : s, b = p->e < e ? p->e : e;
        if (p->pid == pid && b > a) t += b - a;
    }
    return t;
}

/* error messages, with digits folded so "port 41234" and "port 41235" count as one */
static void add_msg(state *S, const char *op, const char *st, const char *text)
{
    char buf[400];
    size_t o = 0;
    o += (size_t)snprintf(buf, sizeof buf, "%s %s: ", op, st);
    for (const char *p = text; *p && o < sizeof buf - 2; p++) {
        if (*p >= '0' && *p <= '9') {
            buf[o++] = '#';
            while (p[1] >= '0' && p[1] <= '9') p++;
        } else {
            buf[o++] = *p;
        }
    }
    buf[o] = '\0';
    for (size_t i = 0; i < S->nm; i++)
        if (!strcmp(S->m[i].text, buf)) { S->m[i].n++; return; }
    GROW(S->m, S->nm, S->capm);
    S->m[S->nm].text = strdup(buf);
    S->m[S->nm++].n = 1;
}

static void read_faults(state *S, const char *dir)
{
    char path[600], line[512], kind[64];
    long long s, e;
    FILE *f;
    snprintf(path, sizeof path, "%s/faults.log", dir);
    if (!(f = fopen(path, "r"))) return;
    while (fgets(line, sizeof line, f)) {
        int pid = 0, i;
        char *p;
        if (sscanf(line, "F %63s %lld %lld", kind, &s, &e) != 3) continue;
        S->faults_total++;
        for (i = 0; i < S->nfk && strcmp(S->fault_kind[i], kind); i++)
            ;
        if (i == S->nfk && S->nfk < 64) S->fault_kind[S->nfk++] = strdup(kind);
        if (i < 64) S->fault_n[i]++;
        if (!strcmp(kind, "restart-delayed")) {
            GROW(S->rw, S->nrw, S->caprw);
            S->rw[S->nrw++] = (pause_){ 0, s, e };
        }
        if (!strncmp(kind, "failover", 8)) {
            GROW(S->fw, S->nfw, S->capfw);
            S->fw[S->nfw++] = (pause_){ 0, s, e };
        }
        if ((p = strstr(line, "stopped=")) && sscanf(p, "stopped=%d", &pid) == 1) {
            GROW(S->pz, S->npz, S->cappz);
            S->pz[S->npz++] = (pause_){ pid, s, e };
        }
    }
    fclose(f);
}

static void end_holding(state *S, size_t first_iv, int64_t at)
{
    for (size_t i = first_iv; i < S->niv; i++)
        if (S->iv[i].e > at) S->iv[i].e = at;
}

static void read_worker(state *S, const char *path, int widx)
{
    char line[1024];
    FILE *f = fopen(path, "r");
    int pid = 0, wslot = widx, cur = -1, last = -1, node = 0;   /* current / latest holding */
    int stamps = 0, stamp_unknown = 0;   /* legacy/bridge worker; an extend's new stamp may have landed */
    size_t cur_iv = 0;
    if (!f) return;
    S->workers++;
    while (fgets(line, sizeof line, f)) {
        char op[16], st[16];
        long long a, b, c, d, e2;
        unsigned long long fence, seen;
        int k, x, y, z;
        size_t L = strlen(line);
        if (L == 0 || line[L - 1] != '\n') { S->bad_lines++; break; }   /* torn by kill -9 */
        switch (line[0]) {
        case 'H':
            if (sscanf(line, "H %d %d %d", &x, &y, &pid) != 3) S->bad_lines++;
            else wslot = x;
            node = strstr(line, " node") != NULL;   /* the npm redis-lock peer */
            stamps = strstr(line, " legacy") || strstr(line, " bridge");
            break;
        case 'Q':
            S->quits++;
            break;
        case 'A': {
            char g = '-';
            if (sscanf(line, "A %d %llu %lld %lld %lld %*d %*d %c", &k, &fence, &a, &b, &c, &g) < 5) {
                S->bad_lines++;
                break;
            }
            GROW(S->h, S->nh, S->caph);
            S->h[S->nh] = (holding){ k, fence, b, wslot, pid, a, g };
            cur = last = (int)S->nh++;
            stamp_unknown = 0;
            S->node_holdings += node;
            cur_iv = S->niv;
            if (c > b) {
                GROW(S->iv, S->niv, S->capiv);
                S->iv[S->niv++] = (ival){ b, c, cur, k };
            }
            break;
        }
        case 'T':   /* rw: a writer's wait, from its acquire call to its grant (or to giving up) */
            if (sscanf(line, "T %d %lld %lld %d", &k, &a, &b, &x) != 4) { S->bad_lines++; break; }
            S->writer_waits++;
            S->writer_busy += !x;
            d = b - a - paused_within(S, pid, a, b);
            if (d > S->writer_wait_max) S->writer_wait_max = d;
            if (!x || d > TT_RW_WAIT_BOUND_MS * 1000LL) S->wait_excess++;
            break;
        case 'E':
            if (sscanf(line, "E %d %llu %lld %lld", &k, &fence, &a, &b) != 4 || cur < 0) { S->bad_lines++; break; }
            if (b <= a) break;
            if (S->niv > cur_iv && a <= S->iv[S->niv - 1].e) {   /* meets the holding's last window: one window */
                if (b > S->iv[S->niv - 1].e) S->iv[S->niv - 1].e = b;
                break;
            }
            GROW(S->iv, S->niv, S->capiv);
            S->iv[S->niv++] = (ival){ a, b, cur, k };
            break;
        case 'V':   /* the library now says the lock is safe only until b: cut the windows */
            if (sscanf(line, "V %d %llu %lld %lld", &k, &fence, &a, &b) != 4 || cur < 0) { S->bad_lines++; break; }
            end_holding(S, cur_iv, b > a ? b : a);
            break;
        case 'R':
            if (sscanf(line, "R %d %llu %lld", &k, &fence, &a) != 3 || cur < 0) { S->bad_lines++; break; }
            end_holding(S, cur_iv, a);
            cur = -1;
            break;
        case 'W':
            if (sscanf(line, "W %d %llu %lld %d %llu %d %d", &k, &fence, &a, &x, &seen, &y, &z) != 7) {
                S->bad_lines++;
                break;
            }
            if (x) S->writes_ok++; else S->writes_rej++;
            if (!x && y && last >= 0) {
                GROW(S->ea, S->nea, S->capea);
                S->ea[S->nea++] = (early){ k, NOPS, S->h[last].t0, a, 0 };
            }
            if (z) { if (x) S->late_w_ok++; else S->late_w_rej++; }
            break;
        case 'C': {
            int oi, si;
            if (sscanf(line, "C %15s %15s %lld %lld %lld %d %d %d %llu", op, st, &a, &b, &c, &x, &y, &k,
                       &fence) != 9 || (oi = op_index(op)) < 0) {
                S->bad_lines++;
                break;
            }
            si = st_index(st);
            S->calls[oi][si]++;
            if (b > S->t_last) S->t_last = b;
            if (oi == 2 && stamps && (si == 5 || si == 6)) stamp_unknown = 1;   /* ext EIO/ETIMEDOUT */
            e2 = paused_within(S, pid, a, b);
            d = b - a - e2;
            if (e2 > 0) S->spanning_pause++;
            if (d > S->max_dur[oi]) { S->max_dur[oi] = d; S->max_bound[oi] = c; }
            if (d - c > S->max_excess) {
                S->max_excess = d - c;
                snprintf(S->max_excess_what, sizeof S->max_excess_what, "%s %s took %.1f ms, bound %.1f ms",
                         op, st, (double)d / 1000, (double)c / 1000);
            }
            if (y) {   /* surely after the server's expiry */
                if (si == 0) S->late_ok[oi]++;
                else if (si == 2) S->late_notheld[oi]++;
                else S->late_other[oi]++;
            }
            if (x && e2 == 0 && (si == 2 || si == 3) && last >= 0) {
                GROW(S->ea, S->nea, S->capea);
                S->ea[S->nea++] = (early){ k, oi, S->h[last].t0, b, stamp_unknown };
            }
            break;
        }
        case 'G':
        case 'D':
            if (sscanf(line + 1, " %d %lld %lld", &k, &a, &b) != 3) { S->bad_lines++; break; }
            if (line[0] == 'G') S->peer_getsets++; else S->peer_dels++;
            GROW(S->g, S->ng, S->capg);
            S->g[S->ng++] = (clobber){ k, a, b };
            break;
        case 'X': {
            char text[1024];
            if (sscanf(line, "X %15s %15s %1000[^\n]", op, st, text) == 3) add_msg(S, op, st, text);
            break;
        }
        default:
            S->bad_lines++;
        }
    }
    if (!pid) S->headers_missing++;
    fclose(f);
}

/* a lost GETSET of the legacy peer on `key` landed within [from, to] */
static int clobbered(const state *S, int key, int64_t from, int64_t to)
{
    for (size_t i = 0; i < S->ng; i++)
        if (S->g[i].key == key && S->g[i].reply >= from && S->g[i].sent <= to) return 1;
    return 0;
}

/* a server went down (and came back empty) within [s, e] */
static int restarted(const state *S, int64_t s, int64_t e)
{
    for (size_t i = 0; i < S->nrw; i++)
        if (s < S->rw[i].e && e > S->rw[i].s) return 1;
    return 0;
}

/* [s, e] meets a failover window, widened by the longest ttl on both sides (a lock granted
 * just before the switch lives that long) */
static int in_failover(const state *S, int64_t s, int64_t e)
{
    for (size_t i = 0; i < S->nfw; i++)
        if (s < S->fw[i].e + TT_TTL_MAX_MS * 1000 && e > S->fw[i].s - TT_TTL_MAX_MS * 1000) return 1;
    return 0;
}

static int cmp_iv(const void *a, const void *b)
{
    const ival *x = a, *y = b;
    if (x->key != y->key) return x->key - y->key;
    return x->s < y->s ? -1 : x->s > y->s;
}

static int cmp_h(const void *a, const void *b)
{
    const holding *x = a, *y = b;
    if (x->key != y->key) return x->key - y->key;
    return x->start < y->start ? -1 : x->start > y->start;
}

/* Sweep each key's windows by start, remembering the two latest ends of distinct holdings:
 * a window that starts before another holding's end is an overlap. */
static void find_overlaps(state *S)
{
    size_t i = 0;
    qsort(S->iv, S->niv, sizeof *S->iv, cmp_iv);
    while (i < S->niv) {
        int key = S->iv[i].key, id1 = -1, id2 = -1;
        int64_t end1 = INT64_MIN, end2 = INT64_MIN;
        for (; i < S->niv && S->iv[i].key == key; i++) {
            const ival *v = &S->iv[i];
            int64_t other_end = v->holding == id1 ? end2 : end1;
            int other = v->holding == id1 ? id2 : id1;
            if (v->e <= v->s) continue;
            if (other >= 0 && other_end > v->s) {
                int64_t depth = (other_end < v->e ? other_end : v->e) - v->s;
                if (in_failover(S, v->s, other_end)) S->overlaps_failover++;
                else if (clobbered(S, key, S->h[other].t0, v->s)) S->overlaps_peer++;
                S->overlaps++;
                if (depth > S->overlap_max_us) S->overlap_max_us = depth;
                if (S->nex < 5) {
                    const holding *a = &S->h[other], *b = &S->h[v->holding];
                    snprintf(S->examples[S->nex++], sizeof S->examples[0],
                             "key %d: w%d (pid %d, fence %llu) believed it held it until %.3f s; "
                             "w%d (pid %d, fence %llu) from %.3f s: %.1f ms overlap",
                             key, a->worker, a->pid, (unsigned long long)a->fence, (double)other_end / 1e6,
                             b->worker, b->pid, (unsigned long long)b->fence, (double)v->s / 1e6,
                             (double)depth / 1000);
                }
            }
            if (v->holding == id1) {
                if (v->e > end1) end1 = v->e;
            } else if (v->e > end1) {
                end2 = end1;
                id2 = id1;
                end1 = v->e;
                id1 = v->holding;
            } else if (v->e > end2) {
                end2 = v->e;
                id2 = v->holding;
            }
        }
    }
    /* fences must grow from one holding of a key to the next; the node peer mints none (0) */
    qsort(S->h, S->nh, sizeof *S->h, cmp_h);
    for (size_t j = 0, prev = (size_t)-1; j < S->nh; j++) {
        if (!S->h[j].fence) continue;
        if (prev != (size_t)-1 && S->h[j].key == S->h[prev].key && S->h[j].fence <= S->h[prev].fence) {
            S->fence_regress++;
            if (S->nex < 5)
                snprintf(S->examples[S->nex++], sizeof S->examples[0],
                         "key %d: fence %llu (w%d, pid %d, granted at %.3f s) after fence %llu (w%d, pid %d, "
                         "granted at %.3f s)", S->h[j].key, (unsigned long long)S->h[j].fence, S->h[j].worker,
                         S->h[j].pid, (double)S->h[j].start / 1e6, (unsigned long long)S->h[prev].fence,
                         S->h[prev].worker, S->h[prev].pid, (double)S->h[prev].start / 1e6);
        }
        prev = j;
    }
}

/* sem and rw: holders of one key may meet, in numbers. Each key's windows as events (an end
 * before a start at the same moment); a violation begins when the believed holders exceed
 * what the kind allows (sem: more than `limit` permits; rw: an exclusive holder beside
 * anyone) and ends when they fit again: one overlap each, its depth how long it lasted. */
typedef struct event { int64_t t; int delta; char g; } event;

static int cmp_ev(const void *a, const void *b)
{
    const event *x = a, *y = b;
    if (x->t != y->t) return x->t < y->t ? -1 : 1;
    return x->delta - y->delta;
}

static int too_many(const tt_check_opts *o, int permits, int shared, int excl)
{
    return o->limit ? permits > o->limit : excl > 0 && excl + shared > 1;
}

static void count_key(state *S, const tt_check_opts *o, int key, const event *ev, size_t n)
{
    int cnt[3] = { 0, 0, 0 };   /* permits, shared, exclusive */
    int64_t since = -1;
    for (size_t i = 0; i < n; i++) {
        int *c = &cnt[ev[i].g == 'p' ? 0 : ev[i].g == 's' ? 1 : 2];
        *c += ev[i].delta;
        if (cnt[0] + cnt[1] > S->max_together) S->max_together = cnt[0] + cnt[1];
        if (too_many(o, cnt[0], cnt[1], cnt[2]) == (since >= 0)) continue;
        if (since < 0) {   /* a violation begins */
            since = ev[i].t;
            S->overlaps++;
            if (S->nex < 5)
                snprintf(S->examples[S->nex++], sizeof S->examples[0],
                         "key %d at %.3f s: %d permits, %d shared, %d exclusive believed at once", key,
                         (double)since / 1e6, cnt[0], cnt[1], cnt[2]);
        } else {
            if (ev[i].t - since > S->overlap_max_us) S->overlap_max_us = ev[i].t - since;
            since = -1;
        }
    }
}

static void find_excess(state *S, const tt_check_opts *o)
{
    event *ev = malloc((2 * S->niv + 1) * sizeof *ev);
    size_t i = 0;
    if (!ev) { perror("malloc"); exit(2); }
    qsort(S->iv, S->niv, sizeof *S->iv, cmp_iv);
    while (i < S->niv) {
        int key = S->iv[i].key;
        size_t n = 0;
        for (; i < S->niv && S->iv[i].key == key; i++) {
            char g = S->h[S->iv[i].holding].g;
            if (S->iv[i].e <= S->iv[i].s) continue;
            ev[n++] = (event){ S->iv[i].s, +1, g };
            ev[n++] = (event){ S->iv[i].e, -1, g };
        }
        qsort(ev, n, sizeof *ev, cmp_ev);
        count_key(S, o, key, ev, n);
    }
    free(ev);
}

/* sem and rw: grants of one key overlap in time, so two grants made at once may return in
 * either order. What must hold: a grant whose acquire call began after another's returned has
 * the higher fence (the server made them in that order), and no two grants share a fence. */
static void fence_regress(state *S, const holding *a, const holding *b)
{
    S->fence_regress++;
    if (S->nex < 5)
        snprintf(S->examples[S->nex++], sizeof S->examples[0],
                 "key %d: fence %llu (w%d, asked at %.3f s) not above fence %llu (w%d, granted at %.3f s)", a->key,
                 (unsigned long long)a->fence, a->worker, (double)a->t0 / 1e6, (unsigned long long)b->fence,
                 b->worker, (double)b->start / 1e6);
}

static int cmp_fence(const void *a, const void *b)
{
    const holding *x = *(holding *const *)a, *y = *(holding *const *)b;
    if (x->key != y->key) return x->key - y->key;
    return x->fence < y->fence ? -1 : x->fence > y->fence;
}

static void check_fences_concurrent(state *S)
{
    size_t first = 0, *top = malloc((S->nh + 1) * sizeof *top);   /* top[i]: highest fence of first..i */
    const holding **byf = malloc((S->nh + 1) * sizeof *byf);
    if (!top || !byf) { perror("malloc"); exit(2); }
    qsort(S->h, S->nh, sizeof *S->h, cmp_h);   /* by key, then grant time */
    for (size_t j = 0; j < S->nh; j++) {
        size_t lo, hi;
        if (j && S->h[j].key != S->h[j - 1].key) first = j;
        top[j] = j > first && S->h[top[j - 1]].fence > S->h[j].fence ? top[j - 1] : j;
        /* the grants of the key returned before this call began: a prefix by grant time */
        for (lo = first, hi = j; lo < hi;) {
            size_t mid = lo + (hi - lo) / 2;
            if (S->h[mid].start < S->h[j].t0) lo = mid + 1; else hi = mid;
        }
        if (lo > first && S->h[j].fence && S->h[j].fence <= S->h[top[lo - 1]].fence)
            fence_regress(S, &S->h[j], &S->h[top[lo - 1]]);
        byf[j] = &S->h[j];
    }
    qsort(byf, S->nh, sizeof *byf, cmp_fence);
    for (size_t j = 1; j < S->nh; j++)
        if (byf[j]->fence && byf[j]->key == byf[j - 1]->key && byf[j]->fence == byf[j - 1]->fence)
            fence_regress(S, byf[j], byf[j - 1]);
    free(top);
    free(byf);
}

/* sem: a key that went without a grant for long while workers contended: permits leaked */
static void find_grant_gaps(state *S)
{
    for (size_t j = 0; j < S->nh; j++) {
        int64_t next = j + 1 < S->nh && S->h[j + 1].key == S->h[j].key ? S->h[j + 1].start : S->t_last;
        if (next - S->h[j].start > S->grant_gap_max) {
            S->grant_gap_max = next - S->h[j].start;
            S->grant_gap_key = S->h[j].key;
        }
    }
}

static int cmp_msg(const void *a, const void *b)
{
    const msg *x = a, *y = b;
    return (y->n > x->n) - (y->n < x->n);
}

int tt_check(const tt_check_opts *o)
{
    state *S = calloc(1, sizeof *S);
    DIR *d;
    struct dirent *e;
    char *rep = NULL, path[600];
    size_t replen = 0;
    FILE *out;
    long acq = 0, bad_status = 0, lost_unexpected;
    long late_ok = 0, premature = 0;
    int widx = 0, fail = 0;

    if (!S) return 2;
    read_faults(S, o->dir);
    if (!(d = opendir(o->dir))) {
        perror(o->dir);
        free(S);
        return 2;
    }
    {
        char **names = NULL;
        size_t n = 0, cap = 0;
        while ((e = readdir(d))) {
            if (e->d_name[0] != 'w' || !strstr(e->d_name, ".log")) continue;
            GROW(names, n, cap);
            names[n++] = strdup(e->d_name);
        }
        closedir(d);
        for (size_t i = 0; i < n; i++) {
            snprintf(path, sizeof path, "%s/%s", o->dir, names[i]);
            read_worker(S, path, widx++);
            free(names[i]);
        }
        free(names);
    }
    if (o->limit || o->rw) {
        find_excess(S, o);
        check_fences_concurrent(S);
        if (o->limit) find_grant_gaps(S);
    } else {
        find_overlaps(S);
    }
    for (size_t i = 0; i < S->nea; i++) {
        early *x = &S->ea[i];
        if (x->op == NOPS) {
            if (clobbered(S, x->key, x->hold_t0, x->t_end)) S->rej_peer++;
            else S->rej_believed++;
        } else if (clobbered(S, x->key, x->hold_t0, x->t_end)) {
            S->premature_peer++;
        } else if (o->quorum && restarted(S, x->hold_t0, x->t_end)) {
            S->premature_quorum++;
        } else if (x->stamp_unknown) {
            S->premature_stamp++;
        } else {
            S->premature[x->op]++;
        }
    }

    for (int i = 0; i < NOPS; i++) {
        late_ok += S->late_ok[i];
        premature += S->premature[i];
    }
    acq = (long)S->nh;
    bad_status = 0;
    /* EINVAL, EAUTH, EREPLY, ENOMEM, unknown: no injected fault explains them */
    for (int i = 0; i < NOPS; i++)
        bad_status += S->calls[i][4] + S->calls[i][7] + S->calls[i][8] + S->calls[i][11] + S->calls[i][12];
    lost_unexpected = 0;
    if (!o->allow_lost)
        for (int i = 0; i < NOPS; i++) lost_unexpected += S->calls[i][3];

    out = open_memstream(&rep, &replen);
    fprintf(out, "torture check: mode %s, %s\n", o->mode, o->dir);
    fprintf(out, "  acquisitions           %ld", acq);
    if (S->node_holdings) fprintf(out, " (%ld by the node redis-lock peer)", S->node_holdings);
    fprintf(out, ", worker logs %ld\n", S->workers);
    fprintf(out, "  faults injected        %ld", S->faults_total);
    for (int i = 0; i < S->nfk; i++) fprintf(out, "%s%s %ld", i ? ", " : " (", S->fault_kind[i], S->fault_n[i]);
    fprintf(out, "%s\n", S->nfk ? ")" : "");
    fprintf(out, "  overlaps               %ld%s", S->overlaps,
            o->expect_overlap ? "   (this scenario breaks a rule on purpose: must be > 0)" : "   (must be 0)");
    if (S->overlaps) fprintf(out, ", deepest %.1f ms", (double)S->overlap_max_us / 1000);
    if (S->nfw)
        fprintf(out, "; %ld of them around a Sentinel failover (asynchronous replication: reported, not judged)",
                S->overlaps_failover);
    if (S->ng)
        fprintf(out, "; %ld after the legacy peer overwrote or deleted a live lock (the recipe's documented "
                "flaws: reported, not judged)", S->overlaps_peer);
    fprintf(out, "\n");
    for (int i = 0; i < S->nex; i++) fprintf(out, "      %s\n", S->examples[i]);
    if (o->limit)
        fprintf(out, "  permits at once        at most %d believed (limit %d); longest time a key went without "
                "a grant: %.1f ms (key %d; bound %d ms: a dead holder's permit came back)\n", S->max_together,
                o->limit, (double)S->grant_gap_max / 1000, S->grant_gap_key, TT_SEM_GAP_BOUND_MS);
    if (o->rw)
        fprintf(out, "  shared holders at once at most %d; writers' waits %ld (%ld not granted), longest %.1f ms "
                "(bound %d ms%s): %ld over\n", S->max_together, S->writer_waits, S->writer_busy,
                (double)S->writer_wait_max / 1000, TT_RW_WAIT_BOUND_MS,
                o->expect_wait_excess ? ", logged past it on purpose: must be > 0" : "", S->wait_excess);
    fprintf(out, "  fence regressions      %ld%s\n", S->fence_regress,
            o->expect_fence_regress ? "   (this scenario logs decreasing fences on purpose: must be > 0)" :
            o->expect_overlap ? "" : " (must be 0)");
    fprintf(out, "  guarded writes         %ld accepted, %ld stale rejected by fencing\n", S->writes_ok, S->writes_rej);
    if (S->rej_peer)
        fprintf(out, "    rejected after the legacy peer overwrote or deleted the writer's lock: %ld (not judged)\n",
                S->rej_peer);
    fprintf(out, "    rejected while the writer believed it held the key: %ld%s\n", S->rej_believed,
            o->expect_overlap ? " (the overlaps' victims: fencing kept the resource consistent)" : " (must be 0)");
    fprintf(out, "    late writes (after the server's expiry, e.g. a paused holder): %ld rejected, %ld accepted "
                 "(no newer holder had written yet)\n", S->late_w_rej, S->late_w_ok);
    fprintf(out, "  calls after the server's expiry: OK %ld (must be 0), NOT_HELD", late_ok);
    for (int i = 1; i < NOPS; i++) fprintf(out, " %s %ld", ops[i], S->late_notheld[i]);
    fprintf(out, ", other errors");
    for (int i = 1; i < NOPS; i++) fprintf(out, " %s %ld", ops[i], S->late_other[i]);
    fprintf(out, "\n");
    if (S->ng)
        fprintf(out, "  legacy peer's writes to others' locks: %ld GETSETs that lost their race (overwrote the "
                "winner's stamp), %ld DELs that landed after its stamp had passed; NOT_HELD they caused: %ld "
                "(not judged)\n", S->peer_getsets, S->peer_dels, S->premature_peer);
    if (S->premature_stamp)
        fprintf(out, "  NOT_HELD after a legacy/bridge extend whose answer was lost: %ld (its new stamp landed "
                "late; the lock kept the old one, so release finds \"another value\": see the report)\n",
                S->premature_stamp);
    if (S->premature_quorum)
        fprintf(out, "  NOT_HELD after masters holding part of the quorum crashed (delayed restart): %ld "
                "(the lock lost its majority; nobody else could get one)\n", S->premature_quorum);
    fprintf(out, "  NOT_HELD/LOST while the holder believed it held: %ld%s\n", premature,
            o->allow_lost ? " (failover mode: reported, not judged)" :
            o->expect_overlap ? " (the overlaps, seen by their victims)" : " (must be 0)");
    fprintf(out, "  calls by status\n");
    for (int i = 0; i < NOPS; i++) {
        long tot = 0;
        for (int j = 0; j < NST; j++) tot += S->calls[i][j];
        if (!tot) continue;
        fprintf(out, "    %-4s %7ld:", ops[i], tot);
        for (int j = 0; j < NST; j++)
            if (S->calls[i][j]) fprintf(out, " %s %ld", sts[j], S->calls[i][j]);
        fprintf(out, "\n");
    }
    fprintf(out, "  longest call (less time stopped by the injector; %ld calls spanned a stop)\n", S->spanning_pause);
    for (int i = 0; i < NOPS; i++)
        if (S->max_dur[i])
            fprintf(out, "    %-4s %8.1f ms (its bound %.1f ms)\n", ops[i], (double)S->max_dur[i] / 1000,
                    (double)S->max_bound[i] / 1000);
    fprintf(out, "    worst excess over a bound: %.1f ms%s%s (allowed %.0f ms of scheduling slack)\n",
            S->max_excess > 0 ? (double)S->max_excess / 1000 : 0.0, S->max_excess > 0 ? ": " : "",
            S->max_excess > 0 ? S->max_excess_what : "", (double)o->tolerance_us / 1000);
    if (S->nm) {
        qsort(S->m, S->nm, sizeof *S->m, cmp_msg);
        fprintf(out, "  error messages (digits folded), most frequent first\n");
        for (size_t i = 0; i < S->nm && i < 10; i++) fprintf(out, "    %6ld  %s\n", S->m[i].n, S->m[i].text);
    }
    if (S->bad_lines) fprintf(out, "  unreadable log lines   %ld (a worker killed mid-write)\n", S->bad_lines);

    /* verdict */
    fprintf(out, "  verdict:");
    if (acq == 0) { fprintf(out, " no acquisition at all;"); fail = 1; }
    if (o->expect_overlap) {
        if (!S->overlaps) { fprintf(out, " the deliberate violation went unnoticed;"); fail = 1; }
    } else {
        if (S->overlaps > S->overlaps_failover + S->overlaps_peer) { fprintf(out, " overlaps;"); fail = 1; }
        if (S->rej_believed) { fprintf(out, " writes refused inside a believed window;"); fail = 1; }
        if (S->fence_regress && !o->expect_fence_regress) { fprintf(out, " fence regressions;"); fail = 1; }
        if (late_ok) { fprintf(out, " OK after the server's expiry;"); fail = 1; }
        if (premature && !o->allow_lost) { fprintf(out, " lost while believed held;"); fail = 1; }
        if (lost_unexpected) { fprintf(out, " LOST outside a failover mode;"); fail = 1; }
        if (o->limit && S->grant_gap_max > TT_SEM_GAP_BOUND_MS * 1000LL) {
            fprintf(out, " a key without a grant past the bound (permits leaked);");
            fail = 1;
        }
    }
    if (o->rw && !o->expect_wait_excess) {
        if (S->wait_excess) { fprintf(out, " a writer waited past its bound;"); fail = 1; }
        if (!S->writer_waits) { fprintf(out, " no writer's wait measured;"); fail = 1; }
    }
    if (o->expect_wait_excess && !S->wait_excess) {
        fprintf(out, " the logged starved writer went unnoticed;");
        fail = 1;
    }
    if (o->expect_fence_regress && !S->fence_regress) {
        fprintf(out, " the injected fence regression went unnoticed;");
        fail = 1;
    }
    if (S->max_excess > o->tolerance_us) { fprintf(out, " a call outlived its bound;"); fail = 1; }
    if (bad_status) { fprintf(out, " unexpected statuses (EINVAL/EAUTH/EREPLY/ENOMEM/unknown);"); fail = 1; }
    if (S->headers_missing) { fprintf(out, " worker logs without a header;"); fail = 1; }
    fprintf(out, " %s\n", fail ? "FAIL" : o->expect_overlap || o->expect_fence_regress ?
                 "PASS (violation caught, as expected)" : "PASS");
    fclose(out);

    fputs(rep, stdout);
    fflush(stdout);
    snprintf(path, sizeof path, "%s/report.txt", o->dir);
    if ((out = fopen(path, "w"))) {
        fputs(rep, out);
        fclose(out);
    }
    free(rep);
    for (size_t i = 0; i < S->nm; i++) free(S->m[i].text);
    for (int i = 0; i < S->nfk; i++) free(S->fault_kind[i]);
    free(S->m);
    free(S->iv);
    free(S->h);
    free(S->pz);
    free(S->fw);
    free(S->rw);
    free(S->g);
    free(S->ea);
    free(S);
    return fail;
}
