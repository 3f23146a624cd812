/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * inspect.c -- `hilock inventory` and `hilock inspect`: read-only views of a fleet's lock keys,
 * over the public API of include/hilock_inspect.h (which never writes) and the codecs of
 * include/hilock_legacy.h. The manual is cli/hilock.1.
 *
 * What a value is (classify(), the one place that decides it):
 *   - "modern": 32 lowercase hex digits, the token hilock_acquire writes;
 *   - a preset name: a stamp that preset parses (hilock_codec_parse) AND that is plausible
 *     for it: as many integer digits as now has in that unit (10 for seconds, 13 for ms
 *     today), a fraction only for decimal presets, an owner suffix only for suffix presets.
 *     Presets that write identical values (node-redis-lock and jedis-lock: both integer ms)
 *     cannot be told apart by a value: all that fit are listed, the first of them names it;
 *   - "hilock-aux": a hilock aux key ({key}:fence, :waiters, :signal, ...), not a lock;
 *   - "semaphore", "rwlock": a sorted set with the kind's marker (hilock_key_view.value);
 *   - the Redis type for other keys that are not strings; "unknown" for every other value.
 *
 * JSON strings (--json): valid UTF-8 is copied, '"' '\' and control characters are escaped
 * (\n, \t, ..., \u00XX; also DEL), and each byte of invalid UTF-8 becomes U+FFFD; a key or
 * value that had invalid UTF-8 also gets "key_hex" / "value_hex" with its exact bytes.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hilock.h"
#include "hilock_inspect.h"
#include "hilock_legacy.h"
#include "cli.h"

enum { EXIT_OK = 0, EXIT_USAGE = 64, EXIT_SERVER = 69, EXIT_OSERR = 71 };

#define DEFAULT_COUNT 100
#define DEAD_AFTER_MS (3600 * 1000)   /* a stamp passed this long ago: its holder is gone */
#define MAX_FAMILIES 10000            /* more families are counted as one "(other families)" */
#define NSAMPLES 3

/* ---- what a value is ---- */

static const char *const preset_names[] = {
    "doc", "node-redis-lock", "jedis-lock", "redis-objects", "redis-py-2", "ruby-redis-lock",
};
#define NPRESETS (sizeof preset_names / sizeof preset_names[0])
static hilock_codec presets[NPRESETS];

/* kinds: the presets first (index = preset), then these */
enum { K_MODERN = NPRESETS, K_UNKNOWN, K_AUX, K_OTHER_TYPE, K_SEM, K_RW, NKINDS };
static const char *const unit_names[] = { "seconds", "milliseconds", "microseconds" };

typedef struct verdict {
    int      kind;
    unsigned fits;        /* bit p: preset p reads it and finds it plausible */
    int64_t  stamp_us;    /* a stamp: when it passes (wall clock) */
    int      passed;      /* a stamp: 1 passed, 0 not yet; -1 no stamp */
} verdict;

static int64_t wall_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

static int digits_of(int64_t v)
{
    int n = 1;
    while (v >= 10) v /= 10, n++;
    return n;
}

static int has_suffix(const char *s, size_t n, const char *suf)
{
    size_t l = strlen(suf);
    return n > l && !memcmp(s + n - l, suf, l);
}

/* {key}:fence, {key}:waiters, {key}:signal (or key{tag}...:fence): a tag closes before it.
 * Of any type: the kinds' are hashes, sorted sets and lists. */
static int is_aux_key(const char *k, size_t n)
{
    static const char *const aux[] = { ":fence", ":waiters", ":signal", ":holder", ":holders", ":wq",
                                       ":xsignal", ":ssignal", ":watch" };
    for (size_t i = 0; i < sizeof aux / sizeof aux[0]; i++)
        if (has_suffix(k, n, aux[i]) && memchr(k, '}', n - strlen(aux[i]))) return 1;
    return 0;
}

static int is_token(const char *v, size_t n)
{
    if (n != 32) return 0;
    for (size_t i = 0; i < n; i++)
        if (!is_digit(v[i]) && !(v[i] >= 'a' && v[i] <= 'f')) return 0;
    return 1;
}

static void classify(const hilock_key_view *k, int64_t now_us, verdict *out)
{
    size_t ip = 0, fd = 0, i;
    int dot, suffix;
    memset(out, 0, sizeof *out);
    out->kind = K_UNKNOWN;
    out->passed = -1;
    if (is_aux_key(k->key, k->key_len)) {
        out->kind = K_AUX;
        return;
    }
    if (strcmp(k->type, "string")) {   /* the kinds' marker, or another type */
        int zset = !strcmp(k->type, "zset") && k->value;
        out->kind = zset && !strcmp(k->value, "hilock:sem") ? K_SEM : zset && !strcmp(k->value, "hilock:rw") ? K_RW
                  : K_OTHER_TYPE;
        return;
    }
    if (is_token(k->value, k->value_len)) {
        out->kind = K_MODERN;
        return;
    }
    /* the shape of a stamp: digits [.digits] [-owner] */
    while (ip < k->value_len && is_digit(k->value[ip])) ip++;
    i = ip;
    dot = i < k->value_len && k->value[i] == '.';
    if (dot)
        for (i++; i < k->value_len && is_digit(k->value[i]); i++) fd++;
    suffix = i < k->value_len && k->value[i] == '-';
    for (size_t p = 0; p < NPRESETS; p++) {
        const hilock_codec *c = &presets[p];
        int64_t unit = c->unit == HILOCK_UNIT_S ? 1000000 : c->unit == HILOCK_UNIT_MS ? 1000 : 1;
        int64_t stamp;
        if (hilock_codec_parse(c, k->value, k->value_len, &stamp) != HILOCK_OK) continue;
        if ((int)ip != digits_of(now_us / unit) || dot != (c->decimals != 0) ||
            suffix != (c->suffix != HILOCK_SUFFIX_NONE))
            continue;
        out->fits |= 1u << p;
        /* the first that fits names it, unless a later one writes exactly these decimals (the
         * float styles, decimals < 0, write as many as the shortest round trip needs) */
        if (out->kind == K_UNKNOWN || (dot && (size_t)c->decimals == fd && (size_t)presets[out->kind].decimals != fd)) {
            out->kind = (int)p;
            out->stamp_us = stamp;
        }
    }
    if (out->kind < (int)NPRESETS)
        out->passed = hilock_codec_expired(&presets[out->kind], out->stamp_us, now_us);
}

/* The names of the kinds past the presets (index kind - K_MODERN), as rows and JSON show them */
static const char *const kind_names[] = { "modern", "unknown", "hilock-aux", "not-a-string", "semaphore", "rwlock" };

static const char *kind_name(const verdict *v, const hilock_key_view *k)
{
    if (v->kind < (int)NPRESETS) return preset_names[v->kind];
    return v->kind == K_OTHER_TYPE ? k->type : kind_names[v->kind - K_MODERN];
}

/* "integer milliseconds", "decimal seconds", "integer seconds -pid-thread" */
static void format_name(int p, char *buf, size_t cap)
{
    const hilock_codec *c = &presets[p];
    snprintf(buf, cap, "%s %s%s", c->decimals ? "decimal" : "integer", unit_names[c->unit],
             c->suffix ? " -pid-thread" : "");
}

/* ---- output helpers ---- */

/* Length of the valid UTF-8 sequence at s[0..n), 0 if invalid (overlong, surrogate, > U+10FFFF). */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;
    if (s[0] < 0x80) return 1;
    if (s[0] >= 0xc2 && s[0] <= 0xdf) len = 2, cp = s[0] & 0x1f;
    else if (s[0] >= 0xe0 && s[0] <= 0xef) len = 3, cp = s[0] & 0x0f;
    else if (s[0] >= 0xf0 && s[0] <= 0xf4) len = 4, cp = s[0] & 0x07;
    else return 0;
    if (len > n) return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    if ((len == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return len;
}

/* A JSON string; returns 1 if some bytes were not UTF-8 (written as U+FFFD). */
static int json_str(FILE *f, const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    int bad = 0;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        size_t l = utf8_len(u + i, n - i);
        unsigned char c = u[i];
        if (l == 0) {
            fputs("\\ufffd", f);
            bad = 1;
            i++;
            continue;
        }
        if (l > 1) fwrite(u + i, 1, l, f);
        else if (c == '"' || c == '\\') fprintf(f, "\\%c", c);
        else if (c == '\n') fputs("\\n", f);
        else if (c == '\r') fputs("\\r", f);
        else if (c == '\t') fputs("\\t", f);
        else if (c < 0x20 || c == 0x7f) fprintf(f, "\\u%04x", c);
        else fputc(c, f);
        i += l;
    }
    fputc('"', f);
    return bad;
}

static void hex(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) fprintf(f, "%02x", (unsigned char)s[i]);
    fputc('"', f);
}

/* Printable bytes for humans: a\x01\\b (as redis-cli shows keys); '"' too when quoted. */
static void escaped(FILE *f, const char *s, size_t n, int quoted)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if ((c == '"' && quoted) || c == '\\') fprintf(f, "\\%c", c);
        else if (c < 0x20 || c >= 0x7f) fprintf(f, "\\x%02x", c);
        else fputc(c, f);
    }
}

/* A quoted, printable form for humans: "a\x01\"b" (as redis-cli shows keys). */
static void show(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    escaped(f, s, n, 1);
    fputc('"', f);
}

void hl_tool_print(FILE *f, const char *s, size_t n)
{
    escaped(f, s, n, 0);
}

const char *hl_tool_key_shown(const char *key, char *buf, size_t cap)
{
    char tail[HL_KEY_TAIL_BUF];
    size_t m = hl_key_cut(key, tail, sizeof tail);
    FILE *f = fmemopen(buf, cap, "w");
    if (!f) return key;   /* (no memory: as it is) */
    escaped(f, key, m, 0);
    fputs(tail, f);
    fclose(f);
    return buf;
}

/* A duration (or how long ago), as the library's messages show one (hl_ms_shown) */
static const char *human_ms(int64_t ms, char *buf, size_t cap)
{
    return hl_ms_shown(ms < 0 ? -(long long)ms : (long long)ms, buf, cap);
}

static void json_presets(FILE *f, unsigned fits)
{
    const char *sep = "";
    fputs(",\"presets\":[", f);
    for (size_t p = 0; p < NPRESETS; p++)
        if (fits & (1u << p)) {
            fprintf(f, "%s\"%s\"", sep, preset_names[p]);
            sep = ",";
        }
    fputc(']', f);
}

/* the key's fields shared by both commands' JSON */
static void json_key(FILE *f, const hilock_key_view *k, const verdict *v, int64_t now_us)
{
    fputs(",\"key\":", f);
    if (json_str(f, k->key, k->key_len)) {
        fputs(",\"key_hex\":", f);
        hex(f, k->key, k->key_len);
    }
    fputs(",\"type\":", f);
    json_str(f, k->type, strlen(k->type));
    fprintf(f, ",\"kind\":\"%s\"", kind_name(v, k));
    json_presets(f, v->fits);
    if (k->pttl_ms >= 0) fprintf(f, ",\"pttl_ms\":%lld", (long long)k->pttl_ms);
    else fputs(",\"pttl_ms\":null", f);
    if (v->passed >= 0)
        fprintf(f, ",\"stamp_in_ms\":%lld,\"stamp_passed\":%s", (long long)((v->stamp_us - now_us) / 1000),
                v->passed ? "true" : "false");
    else
        fputs(",\"stamp_in_ms\":null,\"stamp_passed\":null", f);
    if (k->value) {
        fputs(",\"value\":", f);
        if (json_str(f, k->value, k->value_len)) {
            fputs(",\"value_hex\":", f);
            hex(f, k->value, k->value_len);
        }
        fprintf(f, ",\"value_size\":%lld", (long long)k->value_size);
    } else {
        fputs(",\"value\":null,\"value_size\":null", f);
    }
}

/* ---- Ctrl-C ---- */

static volatile sig_atomic_t stop_sig;

static void on_stop(int sig) { stop_sig = sig; }

static void catch_stop(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;   /* no SA_RESTART needed: the engine's poll() goes on after EINTR */
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

/* ---- the client ---- */

static int tool_usage(const char *fmt, const char *arg)
{
    fputs("hilock: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (see hilock --help)\n", stderr);
    return EXIT_USAGE;
}

static int open_client(const hilock_options *o, hilock_client **c)
{
    if (hilock_client_new(o, c) != HILOCK_OK) {
        fprintf(stderr, "hilock: %s\n", hilock_last_config_error());
        return EXIT_USAGE;
    }
    for (size_t p = 0; p < NPRESETS; p++)
        if (hilock_codec_preset(preset_names[p], &presets[p]) != HILOCK_OK) abort();   /* fixed names */
    return -1;
}

/* One line on stderr: "hilock: " and the library's message (which names the call). */
static void print_error(const char *msg)
{
    fputs("hilock: ", stderr);
    for (; *msg; msg++) fputc(*msg == '\n' || *msg == '\r' ? ' ' : *msg, stderr);
    fputc('\n', stderr);
}

/* ---- inventory: families ---- */

typedef struct kind_count {
    long keys, ttl, passed, passed_no_ttl, dead;
} kind_count;

typedef struct family {
    char      *name;
    size_t     master;             /* its source (inventory.src) */
    kind_count k[NKINDS];
    long       units[3];           /* stamps per unit */
    long       formats[NPRESETS];  /* stamps per format (by the preset that names it) */
    int64_t    oldest_dead_ms;
    char      *samples[NSAMPLES];  /* unknown values, shown */
    int        nsamples;
    char      *held[NSAMPLES];     /* modern lock keys, whose holders are shown (holder_lines) */
    int        nheld;
    struct family *next;           /* hash chain */
} family;

/* What one scan covers: master i of the client, or one master of its cluster (each master of
 * a redis-cluster:// URL is scanned by itself: the client routes a scan to one of them). */
typedef struct source {
    size_t master;
    char  *node;                   /* a cluster's master: its address; NULL: master i itself */
    char  *name;                   /* a cluster's master: "cluster ADDR"; NULL: the client's name */
} source;

typedef struct inventory {
    int          json, progress, tty, by_prefix;
    size_t       count;
    char       **patterns;
    int          npatterns;
    hilock_client *c;
    int64_t      now_us;
    long         scanned, seen;    /* keys returned by SCAN / counted (no repeats) */
    family      *fam[4096];
    family     **list;             /* in order of first appearance */
    size_t       nfam, capfam;
    family       other;            /* beyond MAX_FAMILIES */
    int          pattern;          /* the pattern being scanned */
    source      *src;              /* what is scanned, in order */
    size_t       nsrc, cur;        /* cur: the source being scanned */
    /* keys already counted, per master (SCAN may return a key twice; patterns may overlap) */
    char       **seen_set;
    size_t       seen_cap, seen_n;
    int          oom;
} inventory;

static uint64_t fnv(const void *p, size_t n, uint64_t h)
{
    const unsigned char *s = p;
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ULL;
    return h;
}

/* Add key (as master + length + bytes) to the seen set; 0 if it was there already. */
static int first_sight(inventory *inv, size_t master, const char *k, size_t n)
{
    size_t need = sizeof master + sizeof n + n;
    char *e;
    uint64_t h;
    if (inv->seen_n * 2 >= inv->seen_cap) {   /* grow, rehash */
        size_t cap = inv->seen_cap ? inv->seen_cap * 2 : 1024;
        char **t = calloc(cap, sizeof *t);
        if (!t) return inv->oom = 1, 1;
        for (size_t i = 0; i < inv->seen_cap; i++)
            if (inv->seen_set[i]) {
                size_t ln;
                memcpy(&ln, inv->seen_set[i] + sizeof master, sizeof ln);
                h = fnv(inv->seen_set[i], sizeof master + sizeof ln + ln, 14695981039346656037ULL);
                while (t[h & (cap - 1)]) h++;
                t[h & (cap - 1)] = inv->seen_set[i];
            }
        free(inv->seen_set);
        inv->seen_set = t;
        inv->seen_cap = cap;
    }
    if (!(e = malloc(need))) return inv->oom = 1, 1;
    memcpy(e, &master, sizeof master);
    memcpy(e + sizeof master, &n, sizeof n);
    memcpy(e + sizeof master + sizeof n, k, n);
    for (h = fnv(e, need, 14695981039346656037ULL);; h++) {
        char **slot = &inv->seen_set[h & (inv->seen_cap - 1)];
        if (!*slot) {
            *slot = e;
            inv->seen_n++;
            return 1;
        }
        /* the header (master, length) first: an entry may be shorter than need */
        if (!memcmp(*slot, e, sizeof master + sizeof n) && !memcmp(*slot, e, need)) {
            free(e);
            return 0;
        }
    }
}

static int is_glob(char c) { return c == '*' || c == '?' || c == '['; }

/* The family of a key: its pattern; or, for a pattern that starts with a glob ("*") or with
 * --by-prefix, the key's prefix up to its last ':' or '.', then "*". */
static family *family_of(inventory *inv, size_t master, const char *k, size_t n)
{
    const char *pat = inv->patterns[inv->pattern];
    char name[512];
    size_t len = 0;
    uint64_t h;
    family *f;
    if (inv->by_prefix || is_glob(pat[0])) {
        size_t cut = n;
        while (cut > 0 && k[cut - 1] != ':' && k[cut - 1] != '.') cut--;
        if (cut > 0 && cut < sizeof name - 2) {
            memcpy(name, k, cut);
            name[cut] = '*';
            len = cut + 1;
        }
    }
    if (!len) len = (size_t)snprintf(name, sizeof name, "%s", pat);
    if (len >= sizeof name) len = sizeof name - 1;
    h = fnv(&master, sizeof master, fnv(name, len, 14695981039346656037ULL)) % 4096;
    for (f = inv->fam[h]; f; f = f->next)
        if (f->master == master && strlen(f->name) == len && !memcmp(f->name, name, len)) return f;
    if (inv->nfam >= MAX_FAMILIES) return &inv->other;
    if (inv->nfam == inv->capfam) {
        size_t cap = inv->capfam ? inv->capfam * 2 : 16;
        family **l = realloc(inv->list, cap * sizeof *l);
        if (!l) return inv->oom = 1, &inv->other;
        inv->list = l;
        inv->capfam = cap;
    }
    if (!(f = calloc(1, sizeof *f)) || !(f->name = strndup(name, len))) {
        free(f);
        inv->oom = 1;
        return &inv->other;
    }
    f->master = master;
    f->next = inv->fam[h];
    inv->fam[h] = f;
    inv->list[inv->nfam++] = f;
    return f;
}

static void count_key(family *f, const hilock_key_view *k, const verdict *v, int64_t now_us)
{
    kind_count *kc = &f->k[v->kind];
    kc->keys++;
    if (k->pttl_ms >= 0) kc->ttl++;
    if (v->kind < (int)NPRESETS) {
        f->units[presets[v->kind].unit]++;
        f->formats[v->kind]++;
    }
    if (v->passed == 1) {
        kc->passed++;
        if (k->pttl_ms < 0) {
            int64_t ago_ms = (now_us - v->stamp_us) / 1000;
            kc->passed_no_ttl++;
            if (ago_ms > DEAD_AFTER_MS) {
                kc->dead++;
                if (ago_ms > f->oldest_dead_ms) f->oldest_dead_ms = ago_ms;
            }
        }
    }
    /* (looked up after the scan: a look inside the scan's callback would reuse its reply) */
    if (v->kind == K_MODERN && f->nheld < NSAMPLES && !memchr(k->key, '\0', k->key_len))
        if ((f->held[f->nheld] = strdup(k->key)) != NULL) f->nheld++;
    if (v->kind == K_UNKNOWN && f->nsamples < NSAMPLES) {
        size_t n = k->value_len > 40 ? 40 : k->value_len;
        char *s = malloc(n + 1);
        if (s) {
            memcpy(s, k->value, n);
            s[n] = '\0';
            f->samples[f->nsamples++] = s;
        }
    }
}

/* The name of source i, as the summary and each key's line show it. */
static const char *src_name(const inventory *inv, size_t i)
{
    return inv->src[i].name ? inv->src[i].name : hilock_client_master_name(inv->c, inv->src[i].master);
}

static void on_key(size_t master, const hilock_key_view *k, void *arg)
{
    inventory *inv = arg;
    size_t src = inv->cur;   /* (master: the client's; a cluster has many sources) */
    verdict v;
    (void)master;
    inv->scanned++;
    if (k->pttl_ms == -2 || !strcmp(k->type, "none")) return;   /* gone since SCAN saw it */
    if (!first_sight(inv, src, k->key, k->key_len)) return;
    inv->seen++;
    classify(k, inv->now_us, &v);
    count_key(family_of(inv, src, k->key, k->key_len), k, &v, inv->now_us);
    if (inv->json) {
        fputs("{\"master\":", stdout);
        json_str(stdout, src_name(inv, src), strlen(src_name(inv, src)));
        json_key(stdout, k, &v, inv->now_us);
        fputs("}\n", stdout);
    }
}

/* ---- inventory: the summary ---- */

static long legacy_keys(const family *f, int what)   /* what: 0 keys, 1 with TTL */
{
    long n = 0;
    for (size_t p = 0; p < NPRESETS; p++) n += what ? f->k[p].ttl : f->k[p].keys;
    return n;
}

/* the preset with the most stamps in f, and the others that write the same values */
static int main_preset(const family *f)
{
    int best = 0;
    for (size_t p = 1; p < NPRESETS; p++)
        if (f->formats[p] > f->formats[best]) best = (int)p;
    return best;
}

static int same_format(int a, int b)
{
    return presets[a].unit == presets[b].unit && (presets[a].decimals != 0) == (presets[b].decimals != 0) &&
           presets[a].suffix == presets[b].suffix;
}

/* "1 key", "2 keys" */
static const char *plural(long n, const char *one, const char *many) { return n == 1 ? one : many; }

/* Where advise() writes: text on stdout (notes "  ! ", then the advice "  => "), or for the
 * JSON summary either the family's warnings (objects of the summary's "warnings" array) or its
 * advice (the family's "advice" object): each with a code and the text as one line. */
enum { OUT_TEXT, OUT_WARNINGS, OUT_ADVICE };
typedef struct sink {
    int             mode;
    const inventory *inv;
    const family   *f;
    int             n;      /* OUT_WARNINGS: warnings written so far, over all families */
} sink;

static void json_message(const char *code, const char *fmt, va_list ap)
{
    char buf[2048], *o = buf;
    vsnprintf(buf, sizeof buf, fmt, ap);
    for (const char *q = buf; *q; q++) {   /* the text's line breaks and indents: one space */
        if (*q == '\n') {
            while (q[1] == ' ') q++;
            *o++ = ' ';
        } else {
            *o++ = *q;
        }
    }
    *o = '\0';
    printf("\"code\":\"%s\",\"message\":", code);
    json_str(stdout, buf, strlen(buf));
}

static void note(sink *s, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void note(sink *s, const char *code, const char *fmt, ...)
{
    va_list ap;
    const char *master = src_name(s->inv, s->f->master);
    if (s->mode == OUT_ADVICE) return;
    va_start(ap, fmt);
    if (s->mode == OUT_TEXT) {
        fputs("  ! ", stdout);
        vprintf(fmt, ap);
        fputc('\n', stdout);
    } else {
        printf("%s{\"family\":", s->n++ ? "," : "");
        json_str(stdout, s->f->name, strlen(s->f->name));
        fputs(",\"master\":", stdout);
        json_str(stdout, master, strlen(master));
        fputc(',', stdout);
        json_message(code, fmt, ap);
        fputc('}', stdout);
    }
    va_end(ap);
}

static void advice(sink *s, const char *code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void advice(sink *s, const char *code, const char *fmt, ...)
{
    va_list ap;
    if (s->mode == OUT_WARNINGS) return;
    va_start(ap, fmt);
    if (s->mode == OUT_TEXT) {
        fputs("  => ", stdout);
        vprintf(fmt, ap);
        fputc('\n', stdout);
    } else {
        fputs(",\"advice\":{", stdout);
        json_message(code, fmt, ap);
        fputc('}', stdout);
    }
    va_end(ap);
}

/* What docs/legacy-migration.md says for this family, as notes ("!") and one advice ("=>"). */
static void advise(sink *s)
{
    const family *f = s->f;
    long legacy = legacy_keys(f, 0), legacy_ttl = legacy_keys(f, 1), dead = 0, formats = 0;
    int units = 0, mp = main_preset(f);
    char age[32], oldest[32];
    for (size_t p = 0; p < NPRESETS; p++) {
        int first = f->formats[p] > 0;   /* the first preset of its format that has stamps */
        for (size_t q = 0; q < p && first; q++) first = !(f->formats[q] && same_format((int)q, (int)p));
        dead += f->k[p].dead;
        formats += first;
    }
    for (int u = 0; u < 3; u++) units += f->units[u] > 0;
    if (units > 1) {
        char list[128] = "";
        for (int u = 0; u < 3; u++)
            if (f->units[u])
                snprintf(list + strlen(list), sizeof list - strlen(list), " %s %ld", unit_names[u], f->units[u]);
        note(s, "mixed_units", "MIXED UNITS:%s.\n    This fleet already has a bug: ms clients read seconds "
             "stamps as 1970 and take live\n    locks at once, seconds clients wait for ms stamps for ever. "
             "Fix it first: one codec per\n    key family, the same timeout in every client (docs/legacy-migration.md, step 0).",
             list);
    } else if (formats > 1) {
        note(s, "mixed_formats", "MIXED FORMATS in one unit (integer, decimals, -pid suffix): parsers that "
             "refuse the other\n    format (Java, Python, C#) throw or wait. Fix it first: one codec per key "
             "family (step 0).");
    }
    if (f->k[K_MODERN].keys && legacy)
        note(s, "tokens_next_to_stamps", "RANDOM TOKENS NEXT TO LEGACY STAMPS: the Ruby gem, redis-objects "
             "<= 1.4 and jedis-lock's\n    master take a random token at once, npm redis-lock 0.0.x overwrites "
             "it. Use bridge mode\n    until no legacy client is left (docs/legacy-migration.md, steps 1-3).");
    if (dead)
        note(s, "dead_holders", "%ld DEAD LEGACY %s: no TTL, stamp passed more than %s ago (oldest %s ago). "
             "SET NX PX\n    clients wait for them for ever; bridge and legacy clients take them over. With "
             "no legacy\n    client left, give them a TTL once (docs/legacy-migration.md, step 3); inventory never writes.",
             dead, plural(dead, "HOLDER", "HOLDERS"), human_ms(DEAD_AFTER_MS, age, sizeof age),
             human_ms(f->oldest_dead_ms, oldest, sizeof oldest));
    if (f->k[K_UNKNOWN].keys) {
        char samples[512] = "";
        FILE *m = fmemopen(samples, sizeof samples, "w");
        for (int i = 0; m && i < f->nsamples; i++) {
            fputc(' ', m);
            show(m, f->samples[i], strlen(f->samples[i]));
        }
        if (m) fclose(m);
        note(s, "unknown_values", "%ld %s no preset reads (e.g.%s): find their writer before migrating (a "
             "custom hilock_codec?).", f->k[K_UNKNOWN].keys, plural(f->k[K_UNKNOWN].keys, "value", "values"),
             samples);
    }
    if (units > 1 || formats > 1) advice(s, "fix_codec_mix", "fix the codec mix first (docs/legacy-migration.md, step 0)");
    else if (legacy && legacy_ttl < legacy)
        advice(s, "step_1_bridge", "step 1: deploy bridge mode with the codec \"%s\" (hilock --bridge; "
               "o.bridge = 1 and\n     hilock_codec_preset(\"%s\", &o.codec)); legacy writers are active "
               "(stamps without TTL)", preset_names[mp], preset_names[mp]);
    else if (legacy)
        advice(s, "step_3_tokens", "every stamp has a TTL (bridge clients, or legacy ones that set one): when "
               "no legacy\n     client can run any more (docs/legacy-migration.md, step 2), step 3: random tokens");
    else if (f->k[K_MODERN].keys || f->k[K_SEM].keys || f->k[K_RW].keys)
        advice(s, "modern_only", "modern locks only: nothing to migrate");
    else if (f->k[K_UNKNOWN].keys)
        advice(s, "find_writer", "find the writer of the values above before anything else");
    else
        advice(s, "no_lock_values", "no lock values found");
}

/* a row of a family's counts */
static const char *count_name(int k)
{
    return k < (int)NPRESETS ? preset_names[k] : kind_names[k - K_MODERN];
}

/* The holders of the first modern locks seen (at most NSAMPLES a family: one look each, after
 * the scan), from their holder records: "  held by  "KEY": host ..." (hilock_lock_view). */
typedef struct held_look { const inventory *inv; const family *f; const char *key; } held_look;

static void holder_text(FILE *f, const hilock_lock_view *lv, int64_t now_us);

static void on_held(size_t master, const hilock_lock_view *lv, const char *error, void *arg)
{
    const held_look *h = arg;
    if (master != h->inv->src[h->f->master].master) return;   /* (the family's; a Redlock asks them all) */
    printf("  held by  ");
    show(stdout, h->key, strlen(h->key));
    fputs(": ", stdout);
    if (lv && lv->holder_host) holder_text(stdout, lv, wall_us());
    else if (lv) fputs("unknown (no holder record, or released since)", stdout);
    else fputs(error, stdout);
    fputc('\n', stdout);
}

static void holder_lines(const inventory *inv, const family *f)
{
    for (int i = 0; i < f->nheld && !stop_sig; i++) {
        held_look h = { inv, f, f->held[i] };
        hilock_inspect(inv->c, f->held[i], on_held, &h);
    }
}

static void print_family(const inventory *inv, const family *f)
{
    long total = 0;
    char fmt[64];
    for (int k = 0; k < NKINDS; k++) total += f->k[k].keys;
    printf("\nfamily ");
    show(stdout, f->name, strlen(f->name));
    if (inv->nsrc > 1) printf(" on %s", src_name(inv, f->master));
    printf(": %ld %s\n", total, plural(total, "key", "keys"));
    printf("  %-16s %8s %8s %8s %8s %8s  %s\n", "kind", "keys", "ttl", "no-ttl", "passed", "dead", "format");
    for (int k = 0; k < NKINDS; k++) {
        const kind_count *c = &f->k[k];
        const char *name = count_name(k);
        if (!c->keys) continue;
        if (k < (int)NPRESETS) {
            format_name(k, fmt, sizeof fmt);
            for (size_t p = 0; p < NPRESETS; p++)   /* presets no value can tell from this one */
                if ((int)p != k && same_format((int)p, k) && strlen(fmt) + strlen(preset_names[p]) + 8 < sizeof fmt)
                    strcat(strcat(fmt, ", or "), preset_names[p]);
        } else {
            snprintf(fmt, sizeof fmt, "%s", k == K_MODERN ? "32 hex digits (hilock token)"
                     : k == K_SEM ? "hilock --limit (sorted set)" : k == K_RW ? "hilock --shared (sorted set)" : "");
        }
        if (k < (int)NPRESETS)
            printf("  %-16s %8ld %8ld %8ld %8ld %8ld  %s\n", name, c->keys, c->ttl, c->keys - c->ttl, c->passed,
                   c->dead, fmt);
        else
            printf("  %-16s %8ld %8ld %8ld %8s %8s  %s\n", name, c->keys, c->ttl, c->keys - c->ttl, "-", "-", fmt);
    }
    holder_lines(inv, f);
    {
        sink s = { OUT_TEXT, inv, f, 0 };
        advise(&s);
    }
}

static int by_name(const void *a, const void *b)
{
    const family *x = *(const family *const *)a, *y = *(const family *const *)b;
    return x->master != y->master ? (x->master < y->master ? -1 : 1) : strcmp(x->name, y->name);
}

/* The summary as the last JSON line: {"summary":{...}} with what the text says (see
 * docs/command.md): counts, masters, families with their kinds and advice, warnings. */
static void print_summary_json(const inventory *inv, double secs, const char *incomplete)
{
    size_t m = inv->nsrc;
    sink s = { OUT_WARNINGS, inv, NULL, 0 };
    printf("{\"summary\":{\"keys\":%ld,\"scanned\":%ld,\"seconds\":%.1f,\"masters\":[", inv->seen,
           inv->scanned, secs);
    for (size_t i = 0; i < m; i++) {
        fputs(i ? "," : "", stdout);
        json_str(stdout, src_name(inv, i), strlen(src_name(inv, i)));
    }
    fputs("],\"incomplete\":", stdout);
    if (incomplete) json_str(stdout, incomplete, strlen(incomplete));
    else fputs("null", stdout);
    fputs(",\"families\":[", stdout);
    for (size_t i = 0; i < inv->nfam; i++) {
        const family *f = inv->list[i];
        sink a = { OUT_ADVICE, inv, f, 0 };
        long total = 0;
        const char *sep = "";
        for (int k = 0; k < NKINDS; k++) total += f->k[k].keys;
        fputs(i ? ",{\"family\":" : "{\"family\":", stdout);
        json_str(stdout, f->name, strlen(f->name));
        fputs(",\"master\":", stdout);
        json_str(stdout, src_name(inv, f->master), strlen(src_name(inv, f->master)));
        printf(",\"keys\":%ld,\"kinds\":{", total);
        for (int k = 0; k < NKINDS; k++) {
            const kind_count *c = &f->k[k];
            const char *name = count_name(k);
            if (!c->keys) continue;
            printf("%s\"%s\":{\"keys\":%ld,\"ttl\":%ld,\"no_ttl\":%ld", sep, name, c->keys, c->ttl,
                   c->keys - c->ttl);
            if (k < (int)NPRESETS) printf(",\"passed\":%ld,\"dead\":%ld}", c->passed, c->dead);
            else fputs(",\"passed\":null,\"dead\":null}", stdout);
            sep = ",";
        }
        fputc('}', stdout);
        advise(&a);
        fputc('}', stdout);
    }
    fputs("],\"warnings\":[", stdout);
    for (size_t i = 0; i < inv->nfam; i++) {
        s.f = inv->list[i];
        advise(&s);
    }
    printf("],\"more_families\":%s}}\n",
           inv->other.k[K_UNKNOWN].keys || legacy_keys(&inv->other, 0) || inv->other.k[K_MODERN].keys
           ? "true" : "false");
}

static void print_summary(inventory *inv, double secs, const char *incomplete)
{
    size_t m = inv->nsrc;
    if (inv->nfam) qsort(inv->list, inv->nfam, sizeof *inv->list, by_name);
    if (inv->json) {
        print_summary_json(inv, secs, incomplete);
        return;
    }
    printf("hilock inventory: %ld %s on %zu master%s", inv->seen, plural(inv->seen, "key", "keys"), m,
           m == 1 ? "" : "s");
    for (size_t i = 0; i < m; i++) printf("%s%s", i ? ", " : " (", src_name(inv, i));
    printf("%s in %.1f s; %zu famil%s%s%s\n", m ? ")" : "", secs, inv->nfam, inv->nfam == 1 ? "y" : "ies",
           incomplete ? "; INCOMPLETE: " : "", incomplete ? incomplete : "");
    printf("columns: ttl = has a TTL (PX), passed = the stamp has passed, dead = no TTL and passed more than 1 h ago\n");
    for (size_t i = 0; i < inv->nfam; i++) print_family(inv, inv->list[i]);
    if (inv->other.k[K_UNKNOWN].keys || legacy_keys(&inv->other, 0) || inv->other.k[K_MODERN].keys)
        printf("\n(more than %d families: the rest are not summarized; narrow the patterns)\n", MAX_FAMILIES);
}

static void free_inventory(inventory *inv)
{
    for (size_t i = 0; i < inv->nfam; i++) {
        for (int s = 0; s < inv->list[i]->nsamples; s++) free(inv->list[i]->samples[s]);
        for (int s = 0; s < inv->list[i]->nheld; s++) free(inv->list[i]->held[s]);
        free(inv->list[i]->name);
        free(inv->list[i]);
    }
    for (int s = 0; s < inv->other.nsamples; s++) free(inv->other.samples[s]);
    for (int s = 0; s < inv->other.nheld; s++) free(inv->other.held[s]);
    free(inv->list);
    for (size_t i = 0; i < inv->seen_cap; i++) free(inv->seen_set[i]);
    free(inv->seen_set);
    for (size_t i = 0; i < inv->nsrc; i++) {
        free(inv->src[i].node);
        free(inv->src[i].name);
    }
    free(inv->src);
}

static double mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void progress(const inventory *inv, double t0, double *last, int final)
{
    double now = mono_s();
    if (!inv->progress || (!final && now - *last < 0.5)) return;
    *last = now;
    if (final && inv->tty) {
        fputs("\r\033[K", stderr);
        return;
    }
    if (final) return;
    fprintf(stderr, "%shilock: %ld %s scanned (%.0f/s)%s", inv->tty ? "\r" : "", inv->scanned,
            plural(inv->scanned, "key", "keys"),
            now > t0 ? (double)inv->scanned / (now - t0) : 0.0, inv->tty ? "" : "\n");
}

static void add_source(inventory *inv, size_t master, const char *node)
{
    source *v = realloc(inv->src, (inv->nsrc + 1) * sizeof *v), *s;
    if (!v) {
        inv->oom = 1;
        return;
    }
    inv->src = v;
    s = &v[inv->nsrc];
    s->master = master;
    s->node = s->name = NULL;
    if (node && (!(s->node = strdup(node)) || asprintf(&s->name, "cluster %s", node) < 0)) {
        free(s->node);
        inv->oom = 1;
        return;
    }
    inv->nsrc++;
}

static void on_cluster_node(size_t master, const hilock_cluster_node *n, void *arg)
{
    if (!n->replica) add_source(arg, master, n->addr);
}

/* What to scan: each master of the client, and for a cluster each master of its slot map. A
 * cluster whose map no seed gives is named on stderr and left out (the run fails). */
static int inventory_sources(inventory *inv, const char **failed)
{
    int rc = EXIT_OK;
    for (size_t m = 0; m < hilock_client_masters(inv->c); m++) {
        hilock_status st = hilock_cluster_nodes(inv->c, m, NULL, on_cluster_node, inv);
        if (st == HILOCK_EINVAL) {   /* not a cluster (the only EINVAL of these arguments) */
            add_source(inv, m, NULL);
        } else if (st != HILOCK_OK) {
            print_error(hilock_client_errmsg(inv->c));
            *failed = hilock_client_master_name(inv->c, m);
            rc = EXIT_SERVER;
        }
    }
    return rc;
}

/* Scan every pattern on every source, a page at a time; stop between pages on Ctrl-C. */
static int inventory_scan(inventory *inv, const char **failed)
{
    double t0 = mono_s(), last = t0;
    int rc = inventory_sources(inv, failed);
    for (inv->cur = 0; inv->cur < inv->nsrc && !stop_sig; inv->cur++)
        for (inv->pattern = 0; inv->pattern < inv->npatterns && !stop_sig; inv->pattern++) {
            const source *s = &inv->src[inv->cur];
            const char *pat = inv->patterns[inv->pattern];
            uint64_t cur = 0;
            hilock_status st;
            do {
                st = s->node ? hilock_scan_node(inv->c, s->master, s->node, pat, inv->count, &cur, on_key, inv)
                             : hilock_scan(inv->c, s->master, pat, inv->count, &cur, on_key, inv);
                progress(inv, t0, &last, 0);
            } while (st == HILOCK_OK && cur && !stop_sig);
            if (st != HILOCK_OK) {
                print_error(hilock_client_errmsg(inv->c));
                *failed = src_name(inv, inv->cur);
                rc = st == HILOCK_EINVAL ? EXIT_USAGE : EXIT_SERVER;
                break;   /* the next source */
            }
        }
    progress(inv, t0, &last, 1);
    return rc;
}

static const struct option inv_opts[] = {
    { "json", no_argument, NULL, 'j' },
    { "progress", no_argument, NULL, 'p' },
    { "count", required_argument, NULL, 'c' },
    { "by-prefix", no_argument, NULL, 'b' },
    { NULL, 0, NULL, 0 },
};

static int inventory_main(hilock_client *c, int argc, char **argv)
{
    inventory inv;
    const char *failed = NULL;
    double t0 = mono_s();
    int o, rc;
    char *end;
    memset(&inv, 0, sizeof inv);
    inv.count = DEFAULT_COUNT;
    inv.c = c;
    inv.tty = isatty(2);
    inv.progress = inv.tty;
    optind = 0;   /* glibc: 0 restarts getopt, after main.c's own parse */
    opterr = 0;
    while ((o = getopt_long(argc, argv, "+:", inv_opts, NULL)) != -1) {
        switch (o) {
        case 'j': inv.json = 1; break;
        case 'p': inv.progress = 1; break;
        case 'b': inv.by_prefix = 1; break;
        case 'c':
            errno = 0;
            inv.count = (size_t)strtoul(optarg, &end, 10);
            if (*end || end == optarg || errno || inv.count < 1 || inv.count > 500)
                return tool_usage("inventory --count: not a number 1..500: '%s'", optarg);
            break;
        case ':': return tool_usage("inventory: option '%s' needs a value", argv[optind - 1]);
        default: return tool_usage("inventory: unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) return tool_usage("inventory: no PATTERN given%s", "");
    inv.patterns = argv + optind;
    inv.npatterns = argc - optind;
    inv.now_us = wall_us();
    rc = inventory_scan(&inv, &failed);
    if (inv.oom) {
        fprintf(stderr, "hilock: inventory: out of memory\n");
        rc = EXIT_OSERR;
    }
    print_summary(&inv, mono_s() - t0, stop_sig ? "interrupted" : failed ? "a master failed" : NULL);
    if (stop_sig) {
        fprintf(stderr, "hilock: inventory interrupted after %ld %s\n", inv.scanned, plural(inv.scanned, "key", "keys"));
        rc = 128 + stop_sig;
    }
    free_inventory(&inv);
    return rc;
}

/* ---- inspect ---- */

typedef struct inspection {
    hilock_client *c;
    const char    *key;
    int            json;
    int64_t        now_us;
    const char    *replica;   /* the view being shown is this replica's (of master `of`) */
    char           of[96];
    /* each master's view (type, start of the value), which its replicas' are compared with */
    struct seen { int have, failed; char type[32]; char value[HILOCK_VIEW_VALUE_MAX]; size_t len; } seen[32];
    size_t         master;    /* the replica's master (seen[master]) */
} inspection;

/* A replica's view against its master's: 1 the same type and value, 0 not, -1 unknown (the
 * master's view failed). TTLs are not compared: they pass while the views are read. */
static int same_as_master(const inspection *in, const hilock_key_view *k)
{
    const struct seen *m = in->master < 32 ? &in->seen[in->master] : NULL;
    if (!m || !m->have) return -1;
    return !strcmp(m->type, k->type) && m->len == k->value_len && !memcmp(m->value, k->value ? k->value : "", m->len);
}

/* Who holds it and how, in words. */
static const char *holder(const hilock_key_view *k, const verdict *v)
{
    if (!strcmp(k->type, "none")) return "nobody: no such key";
    if (v->kind == K_OTHER_TYPE) return "not a lock: the key holds another type";
    if (v->kind == K_MODERN) return "a modern lock (hilock token)";
    if (v->kind == K_UNKNOWN) return "a value no preset reads (another library's token?)";
    if (v->kind == K_AUX) return "not a lock: a hilock aux key";
    if (v->kind == K_SEM) return "a semaphore (hilock --limit N): its permits below";
    if (v->kind == K_RW) return "a shared/exclusive lock (hilock --shared): its grants below";
    if (k->pttl_ms < 0) return "a legacy lock (SETNX/GETSET stamp, no TTL)";
    if (presets[v->kind].suffix == HILOCK_SUFFIX_NONE && presets[v->kind].decimals == 0)
        return "a bridge lock (digits stamp + PX; or a legacy writer that sets a TTL)";
    return "a legacy lock with a TTL (legacy_pexpire, or a hybrid writer)";
}

static const char *holder_word(const hilock_key_view *k, const verdict *v)
{
    if (!strcmp(k->type, "none")) return "none";
    if (v->kind >= K_MODERN) return kind_names[v->kind - K_MODERN];
    if (k->pttl_ms < 0) return "legacy";
    return presets[v->kind].suffix == HILOCK_SUFFIX_NONE && presets[v->kind].decimals == 0 ? "bridge" : "legacy-ttl";
}

/* ---- the holder record (hilock_lock_view.holder_*): informative only, never ownership ---- */

/* A holder record as the view gives it: a lock's (holder_*) or a kind's holder's. */
typedef struct record { const char *host; int64_t pid; const char *program; int64_t since_ms; } record;

static record lock_record(const hilock_lock_view *lv)
{
    record r = { lv->holder_host, lv->holder_pid, lv->holder_program, lv->holder_since_ms };
    return r;
}

/* host "web-3", pid 4242, program "nightly", granted 12.3 s ago (since_ms -1: "granted"
 * and no time: a key granted faster than once a millisecond, hilock_inspect.h) */
static void record_text(FILE *f, record r, int64_t now_us)
{
    char a[32];
    int64_t ago = now_us / 1000 - r.since_ms;
    fputs("host ", f);
    show(f, r.host, strlen(r.host));
    fprintf(f, ", pid %lld, program ", (long long)r.pid);
    show(f, r.program, strlen(r.program));
    if (r.since_ms < 0) fputs(", granted (when: not known)", f);
    else fprintf(f, ", granted %s ago", human_ms(ago > 0 ? ago : 0, a, sizeof a));   /* (clocks differ a little) */
}

static void holder_text(FILE *f, const hilock_lock_view *lv, int64_t now_us) { record_text(f, lock_record(lv), now_us); }

/* {"host":...,"pid":N,"program":...,"since_ms":N} or null */
static void record_json(FILE *f, record r)
{
    if (!r.host) {
        fputs("null", f);
        return;
    }
    fputs("{\"host\":", f);
    json_str(f, r.host, strlen(r.host));
    fprintf(f, ",\"pid\":%lld,\"program\":", (long long)r.pid);
    json_str(f, r.program, strlen(r.program));
    fprintf(f, ",\"since_ms\":%lld}", (long long)r.since_ms);
}

/* ,"held_by":{...} or ,"held_by":null */
static void holder_json(FILE *f, const hilock_lock_view *lv)
{
    fputs(",\"held_by\":", f);
    record_json(f, lock_record(lv));
}

static record grant_record(const hilock_holder_view *h)
{
    record r = { h->host, h->pid, h->program, h->since_ms };
    return r;
}

/* A semaphore's or shared/exclusive lock's part of the JSON line (none for a lock):
 * ,"holders":N,"limit":N,"waiters":N,"writers_waiting":N,"grants":[{"token":...,"mode":...,
 * "pttl_ms":N,"limit":N,"held_by":{...}},...] */
static void kinds_json(FILE *f, const hilock_lock_view *lv)
{
    if (!lv->kind || !strcmp(lv->kind, "lock")) return;
    fprintf(f, ",\"holders\":%lld,\"limit\":", (long long)lv->holders);
    if (lv->limit >= 0) fprintf(f, "%lld", (long long)lv->limit);
    else fputs("null", f);
    fprintf(f, ",\"waiters\":%lld,\"writers_waiting\":%lld,\"grants\":[", (long long)lv->waiters,
            (long long)lv->writers_waiting);
    for (size_t i = 0; i < lv->nholder; i++) {
        const hilock_holder_view *h = &lv->holder[i];
        fputs(i ? ",{\"token\":" : "{\"token\":", f);
        json_str(f, h->token, h->token_len);
        fprintf(f, ",\"mode\":\"%s\",\"pttl_ms\":%lld,\"limit\":", h->mode, (long long)h->pttl_ms);
        if (h->limit >= 0) fprintf(f, "%lld", (long long)h->limit);
        else fputs("null", f);
        fputs(",\"held_by\":", f);
        record_json(f, grant_record(h));
        fputc('}', f);
    }
    fputc(']', f);
}

/* Who waits for a semaphore or a shared/exclusive lock, in one line: its registered waiters
 * ({KEY}:wq: for a permit; for a shared or an exclusive grant) and, on a shared/exclusive
 * lock, a plain lock's writers (the mark of acquire.lua, {KEY}:waiters, which a semaphore
 * never has), which like an exclusive waiter hold new shared grants off. */
static void kinds_waiters(FILE *f, const hilock_lock_view *lv)
{
    char a[32];
    int64_t exclusive = lv->writers_waiting, shared = lv->waiters - lv->writers_waiting;
    int plain = lv->waiters_pttl_ms >= 0;
    if (!strcmp(lv->kind, "semaphore")) {
        if (lv->waiters > 0) fprintf(f, "  waiters  %lld waiting for a permit\n", (long long)lv->waiters);
        else fputs("  waiters  none\n", f);
        return;
    }
    if (!lv->waiters && !plain) {
        fputs("  waiters  none\n", f);
        return;
    }
    fprintf(f, "  waiters  %lld for a shared grant, %lld for an exclusive one", (long long)shared, (long long)exclusive);
    if (plain)
        fprintf(f, ", and a plain lock's writer (its mark expires in %s)", human_ms(lv->waiters_pttl_ms, a, sizeof a));
    fputs(exclusive > 0 || plain ? ": no new shared grant meanwhile\n" : "\n", f);
}

/* The text lines of a semaphore's or shared/exclusive lock's holders and waiters. */
static void kinds_text(FILE *f, const hilock_lock_view *lv, int64_t now_us)
{
    char a[32];
    if (!lv->kind || !strcmp(lv->kind, "lock")) return;
    fprintf(f, "  holders  %lld", (long long)lv->holders);
    if (lv->limit >= 0) fprintf(f, " of limit %lld (the latest grant's; each caller passes its own)", (long long)lv->limit);
    fputc('\n', f);
    for (size_t i = 0; i < lv->nholder; i++) {
        const hilock_holder_view *h = &lv->holder[i];
        fprintf(f, "    %-9s ", h->mode);
        show(f, h->token, h->token_len);
        fprintf(f, " expires in %s", human_ms(h->pttl_ms, a, sizeof a));
        if (h->limit > 0) fprintf(f, ", limit %lld", (long long)h->limit);
        if (h->host) {
            fputs(", ", f);
            record_text(f, grant_record(h), now_us);
        }
        fputc('\n', f);
    }
    if (lv->nholder < (size_t)(lv->holders > 0 ? lv->holders : 0))
        fprintf(f, "    ... and %lld more\n", (long long)lv->holders - (long long)lv->nholder);
    kinds_waiters(f, lv);
}

typedef struct busy_look { hilock_client *c; const char *key; } busy_look;

#define BUSY_HOLDERS_SHOWN 3   /* a semaphore's or shared lock's holders -v names */

static void busy_line(const busy_look *b, size_t master, record r, const char *mode)
{
    fputs("hilock: ", stderr);
    show(stderr, b->key, strlen(b->key));
    if (hilock_client_masters(b->c) > 1) fprintf(stderr, " on %s", hilock_client_master_name(b->c, master));
    fputs(" held by ", stderr);
    record_text(stderr, r, wall_us());
    fprintf(stderr, " (%s%sits holder record: informative only)\n", mode ? mode : "", mode ? "; " : "");
}

static void on_busy_master(size_t master, const hilock_lock_view *lv, const char *error, void *arg)
{
    const busy_look *b = arg;
    (void)error;
    if (lv && lv->holder_host) busy_line(b, master, lock_record(lv), NULL);
    for (size_t i = 0; lv && i < lv->nholder && i < BUSY_HOLDERS_SHOWN; i++)
        if (lv->holder[i].host) busy_line(b, master, grant_record(&lv->holder[i]), lv->holder[i].mode);
}

void hl_tool_busy_holder(hilock_client *c, const char *key)
{
    busy_look b = { c, key };
    hilock_inspect(c, key, on_busy_master, &b);   /* (an error: nothing to add) */
}

static void inspect_json(const inspection *in, size_t master, const hilock_lock_view *lv, const char *error)
{
    const char *name = hilock_client_master_name(in->c, master);
    verdict v;
    if (in->replica) {   /* {"replica":"ADDR","of":"cluster ADDR",...} */
        fputs("{\"replica\":", stdout);
        json_str(stdout, in->replica, strlen(in->replica));
        fputs(",\"of\":", stdout);
        json_str(stdout, in->of, strlen(in->of));
    } else {
        fputs("{\"master\":", stdout);
        json_str(stdout, name, strlen(name));
    }
    if (!lv) {
        fputs(",\"key\":", stdout);
        json_str(stdout, in->key, strlen(in->key));
        fputs(",\"error\":", stdout);
        json_str(stdout, error, strlen(error));
        fputs("}\n", stdout);
        return;
    }
    classify(&lv->key, in->now_us, &v);
    json_key(stdout, &lv->key, &v, in->now_us);
    printf(",\"holder\":\"%s\"", holder_word(&lv->key, &v));
    if (lv->fence >= 0) printf(",\"fence\":%lld", (long long)lv->fence);
    else fputs(",\"fence\":null", stdout);
    if (lv->fence_pttl_ms >= 0) printf(",\"fence_pttl_ms\":%lld", (long long)lv->fence_pttl_ms);
    else fputs(",\"fence_pttl_ms\":null", stdout);   /* no counter, or no TTL: as pttl_ms (fence says which) */
    if (lv->waiters_pttl_ms >= 0) printf(",\"waiters_pttl_ms\":%lld", (long long)lv->waiters_pttl_ms);
    else fputs(",\"waiters_pttl_ms\":null", stdout);
    printf(",\"signals\":%lld", (long long)lv->signals);
    holder_json(stdout, lv);
    kinds_json(stdout, lv);
    if (in->replica)
        printf(",\"same_as_master\":%s", same_as_master(in, &lv->key) < 0 ? "null" : same_as_master(in, &lv->key) ? "true" : "false");
    fputs("}\n", stdout);
}

static void inspect_text(const inspection *in, size_t master, const hilock_lock_view *lv, const char *error)
{
    const hilock_key_view *k;
    char a[32], b[32];
    verdict v;
    fputs(master || in->replica ? "\n" : "", stdout);
    show(stdout, in->key, strlen(in->key));
    if (in->replica) printf(" on replica %s of %s\n", in->replica, in->of);
    else printf(" on %s\n", hilock_client_master_name(in->c, master));
    if (!lv) {
        printf("  error    %s\n", error);
        return;
    }
    k = &lv->key;
    classify(k, in->now_us, &v);
    if (in->replica && same_as_master(in, k) >= 0)
        printf("  replica  %s\n", same_as_master(in, k) ? "the same value as its master"
               : "DIFFERS from its master (it lags, lost its link, or missed a write)");
    printf("  holder   %s\n", holder(k, &v));
    if (lv->holder_host) {
        printf("  held by  ");
        holder_text(stdout, lv, in->now_us);
        printf(" (its holder record: informative only)\n");
    } else if (v.kind == K_MODERN) {
        printf("  held by  unknown: no holder record (fencing = 0, fair, or hilock 0.4.0 and older)\n");
    }
    if (k->value) {
        printf("  value    ");
        show(stdout, k->value, k->value_len);
        if ((int64_t)k->value_len < k->value_size) printf(" (first %zu of %lld bytes)", k->value_len, (long long)k->value_size);
        printf("\n  kind     %s", kind_name(&v, k));
        for (size_t p = 0; p < NPRESETS; p++)
            if ((v.fits & (1u << p)) && (int)p != v.kind) printf(" (or %s: same values)", preset_names[p]);
        if (v.kind < (int)NPRESETS) {
            format_name(v.kind, a, sizeof a);
            printf(", %s", a);
        }
        fputc('\n', stdout);
    } else if (strcmp(k->type, "none")) {
        printf("  type     %s\n", k->type);
    }
    if (k->pttl_ms >= 0) printf("  pttl     %lld ms (%s)\n", (long long)k->pttl_ms, human_ms(k->pttl_ms, a, sizeof a));
    else if (k->pttl_ms == -1) printf("  pttl     none (no expiry)\n");
    if (v.passed >= 0) {
        int64_t ms = (v.stamp_us - in->now_us) / 1000;
        printf("  stamp    %s %s%s%s\n", v.passed ? "passed" : "passes in", human_ms(ms, a, sizeof a), v.passed ? " ago" : "",
               v.passed && k->pttl_ms < 0 ? ": legacy clients take it over; SET NX PX clients wait for ever" : "");
    }
    if (lv->fence >= 0)
        printf("  fence    counter %lld (kept %s more)\n", (long long)lv->fence,
               lv->fence_pttl_ms >= 0 ? human_ms(lv->fence_pttl_ms, b, sizeof b) : "for ever");
    else
        printf("  fence    no counter (no hilock grant for an hour past the last one's ttl)\n");
    if (lv->kind && strcmp(lv->kind, "lock"))
        ;   /* a semaphore's or shared/exclusive lock's waiters: with its holders (kinds_text) */
    else if (lv->waiters_pttl_ms >= 0)
        printf("  waiters  yes: a waiter blocks for the release (marker expires in %s)\n",
               human_ms(lv->waiters_pttl_ms, a, sizeof a));
    else
        printf("  waiters  none marked\n");
    if (lv->signals > 0) printf("  signals  %lld wake-up(s) not taken yet\n", (long long)lv->signals);
    kinds_text(stdout, lv, in->now_us);
}

static void on_master(size_t master, const hilock_lock_view *lv, const char *error, void *arg)
{
    inspection *in = arg;
    if (!in->replica && !lv && master < 32) in->seen[master].failed = 1;
    if (!in->replica && lv && master < 32 && strlen(lv->key.type) < sizeof in->seen[0].type) {
        struct seen *m = &in->seen[master];
        m->have = 1;
        strcpy(m->type, lv->key.type);
        m->len = lv->key.value_len;   /* (at most HILOCK_VIEW_VALUE_MAX) */
        if (m->len) memcpy(m->value, lv->key.value, m->len);
    }
    if (in->json) inspect_json(in, master, lv, error);
    else inspect_text(in, master, lv, error);
}

/* A cluster's nodes for the key: its owner, then the owner's replicas. */
typedef struct shard {
    char   owner[96];
    char **replicas;
    size_t n;
    int    oom;
} shard;

static void on_shard_node(size_t master, const hilock_cluster_node *n, void *arg)
{
    shard *s = arg;
    char **v;
    (void)master;
    if (!n->replica) {
        snprintf(s->owner, sizeof s->owner, "cluster %s", n->addr);
        return;
    }
    if (!(v = realloc(s->replicas, (s->n + 1) * sizeof *v)) || !(v[s->n] = strdup(n->addr))) {
        if (v) s->replicas = v;
        s->oom = 1;
        return;
    }
    s->replicas = v;
    s->n++;
}

static int status_rc(hilock_status st)
{
    return st == HILOCK_OK ? EXIT_OK : st == HILOCK_EINVAL ? EXIT_USAGE : st == HILOCK_ENOMEM ? EXIT_OSERR : EXIT_SERVER;
}

/* After the masters' views: each replica's view of the key, for every cluster master (a
 * replica lags, or lost the key: an operator needs to see it). Each one is a view (or an
 * error) of its own; an error fails the run, the others are still shown. */
static int inspect_replicas(inspection *in)
{
    int rc = EXIT_OK;
    for (size_t m = 0; m < hilock_client_masters(in->c); m++) {
        shard s;
        hilock_status st;
        memset(&s, 0, sizeof s);
        st = hilock_cluster_nodes(in->c, m, in->key, on_shard_node, &s);
        if (st == HILOCK_EINVAL) continue;   /* not a cluster */
        if (st == HILOCK_OK && s.oom) {
            fprintf(stderr, "hilock: inspect: out of memory\n");
            rc = EXIT_OSERR;
        } else if (st != HILOCK_OK) {   /* (no map: the master's view said so already) */
            if (m >= 32 || !in->seen[m].failed) print_error(hilock_client_errmsg(in->c));
            rc = status_rc(st);
        }
        for (size_t r = 0; r < s.n; r++) {
            snprintf(in->of, sizeof in->of, "%s", s.owner);
            in->replica = s.replicas[r];
            in->master = m;
            if ((st = hilock_inspect_node(in->c, m, s.replicas[r], in->key, on_master, in)) != HILOCK_OK) {
                print_error(hilock_client_errmsg(in->c));
                rc = status_rc(st);
            }
            in->replica = NULL;
            free(s.replicas[r]);
        }
        free(s.replicas);
    }
    return rc;
}

static int inspect_main(hilock_client *c, int argc, char **argv)
{
    static const struct option opts[] = { { "json", no_argument, NULL, 'j' }, { NULL, 0, NULL, 0 } };
    inspection in;
    hilock_status st;
    int o, rc;
    memset(&in, 0, sizeof in);
    in.c = c;
    optind = 0;   /* glibc: 0 restarts getopt, after main.c's own parse */
    opterr = 0;
    while ((o = getopt_long(argc, argv, "+:", opts, NULL)) != -1) {
        if (o == 'j') in.json = 1;
        else return tool_usage("inspect: unknown option '%s'", argv[optind - 1]);
    }
    if (optind >= argc) return tool_usage("inspect: no KEY given%s", "");
    if (optind + 1 < argc) return tool_usage("inspect: one KEY only (got '%s' after it)", argv[optind + 1]);
    in.key = argv[optind];
    in.now_us = wall_us();
    st = hilock_inspect(c, in.key, on_master, &in);
    if (st != HILOCK_OK) print_error(hilock_client_errmsg(c));
    if (st == HILOCK_EINVAL) return EXIT_USAGE;   /* (a bad key: nothing was asked) */
    rc = inspect_replicas(&in);
    return st != HILOCK_OK ? status_rc(st) : rc;
}

/* hilock break shows what it would remove as inspect does (cli.h) */
void hl_tool_show(hilock_client *c, const char *key, size_t master, const hilock_lock_view *lv, const char *error)
{
    inspection in;
    for (size_t p = 0; p < NPRESETS; p++)
        if (hilock_codec_preset(preset_names[p], &presets[p]) != HILOCK_OK) abort();   /* fixed names */
    memset(&in, 0, sizeof in);
    in.c = c;
    in.key = key;
    in.now_us = wall_us();
    inspect_text(&in, master, lv, error);
}

/* ---- entry ---- */

int hl_tool_word(const char *word)
{
    return !strcmp(word, "inventory") || !strcmp(word, "inspect");
}

int hl_tool_main(const hilock_options *o, int argc, char **argv)
{
    hilock_client *c = NULL;
    int rc = open_client(o, &c);
    if (rc >= 0) return rc;
    catch_stop();
    rc = !strcmp(argv[0], "inventory") ? inventory_main(c, argc, argv) : inspect_main(c, argc, argv);
    hilock_client_free(c);
    return rc;
}
