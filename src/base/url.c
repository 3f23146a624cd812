/* SPDX-License-Identifier: BSD-3-Clause */
/* url.c -- server URLs, as the Redis ecosystem writes them:
 *   redis://[[user]:password@]host[:port][/db]         (or ?db=N, redis-py's form, instead)
 *   rediss://[[user]:password@]host[:port][/db]        (the same over TLS)
 *   unix://[[user]:password@]/path/to/redis.sock[?db=N]
 *   redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]
 *                    [?sentinel_username=U&sentinel_password=P]#master-name
 *   rediss-sentinel://...                               (the same, TLS to Sentinels and nodes)
 *   redis-cluster://[[user]:password@]host[:port][,host[:port]...]   (Cluster seed nodes)
 *   rediss-cluster://...                                  (the same over TLS)
 * The user info is for the data nodes; the query gives the Sentinels their own AUTH (the
 * names go-redis, redis-rb and ioredis give these options), %-escaped like the user info.
 * Strict: anything not in these forms is EINVAL with a message saying what is wrong, so a
 * typo never silently becomes "localhost, no password". No message repeats a value. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"

#define FAIL(...) do { snprintf(err, err_len, __VA_ARGS__); goto fail; } while (0)
#define NEED(p)   do { if (!(p)) { st = HILOCK_ENOMEM; snprintf(err, err_len, "out of memory"); goto fail; } } while (0)

static int hexval(int ch)
{
    if (ch >= '0' && ch <= '9') return ch - '0';
    if (ch >= 'a' && ch <= 'f') return ch - 'a' + 10;
    if (ch >= 'A' && ch <= 'F') return ch - 'A' + 10;
    return -1;
}

/* Percent-decode s[0..n) into a new string; NULL with *bad=1 on a bad escape or a NUL. */
static char *pct_decode(const char *s, size_t n, int *bad)
{
    char *d = malloc(n + 1), *o = d;
    *bad = 0;
    if (!d) return NULL;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '%') {
            int h, l;
            if (i + 2 >= n || (h = hexval(s[i + 1])) < 0 || (l = hexval(s[i + 2])) < 0 ||
                (h == 0 && l == 0)) {
                *bad = 1;
                break;
            }
            *o++ = (char)(h * 16 + l);
            i += 2;
        } else {
            *o++ = s[i];
        }
    }
    if (*bad) {
        free(d);
        return NULL;
    }
    *o = '\0';
    return d;
}

/* Parse a decimal in [lo, hi] from s[0..n); -1 if not. */
static long parse_num(const char *s, size_t n, long lo, long hi)
{
    long v = 0;
    if (n == 0 || n > 10) return -1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v >= lo && v <= hi ? v : -1;
}

static int host_char(int ch)
{
    return (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
           ch == '-' || ch == '.' || ch == '_';
}

/* host[:port] in s[0..n) -> hp. Returns 0, or -1 with err written. */
static int parse_hostport(const char *s, size_t n, int defport, hl_hostport *hp,
                          char *err, size_t err_len)
{
    size_t hend, i = 0;
    const char *h;
    if (n > 0 && s[0] == '[') {
        const char *rb = memchr(s, ']', n);
        if (!rb || rb == s + 1) {
            snprintf(err, err_len, "bad IPv6 address (use [::1])");
            return -1;
        }
        for (const char *q = s + 1; q < rb; q++)
            if (hexval(*q) < 0 && *q != ':' && *q != '.') {
                snprintf(err, err_len, "bad character in IPv6 address");
                return -1;
            }
        h = s + 1;
        hend = (size_t)(rb - s - 1);
        i = (size_t)(rb - s) + 1;
    } else {
        while (i < n && s[i] != ':') {
            if (!host_char((unsigned char)s[i])) {
                snprintf(err, err_len, "bad character '%c' in host", s[i]);
                return -1;
            }
            i++;
        }
        h = s;
        hend = i;
        if (hend == 0) {
            snprintf(err, err_len, "missing host");
            return -1;
        }
    }
    hp->port = defport;
    if (i < n) {
        long p;
        if (s[i] != ':' || (p = parse_num(s + i + 1, n - i - 1, 1, 65535)) < 0) {
            snprintf(err, err_len, "bad port (want 1..65535)");
            return -1;
        }
        hp->port = (int)p;
    }
    hp->host = hl_strndup(h, hend);
    if (!hp->host) {
        snprintf(err, err_len, "out of memory");
        return -1;
    }
    return 0;
}

/* "[[user]:password@]" at the start of s[0..n): consumes it, sets u->user/u->pass. */
static hilock_status parse_userinfo(const char **sp, const char *end, hl_url *u,
                                    char *err, size_t err_len)
{
    const char *s = *sp, *at = NULL, *colon;
    int bad = 0;
    for (const char *q = s; q < end && *q != '/' && *q != '#' && *q != '?'; q++)
        if (*q == '@') at = q;
    if (!at) return HILOCK_OK;
    colon = memchr(s, ':', (size_t)(at - s));
    if (!colon) {
        snprintf(err, err_len, "user info needs a password: [user]:password@");
        return HILOCK_EINVAL;
    }
    if (at == colon + 1) {
        snprintf(err, err_len, "empty password");
        return HILOCK_EINVAL;
    }
    if (colon > s) {
        u->user = pct_decode(s, (size_t)(colon - s), &bad);
        if (!u->user) goto bad;
    }
    u->pass = pct_decode(colon + 1, (size_t)(at - colon - 1), &bad);
    if (!u->pass) goto bad;
    *sp = at + 1;
    return HILOCK_OK;
bad:
    snprintf(err, err_len, bad ? "bad %%-escape in user info" : "out of memory");
    return bad ? HILOCK_EINVAL : HILOCK_ENOMEM;
}

/* "sentinel_username=U&sentinel_password=P" (either order) in s[0..n), after the '?'. */
static hilock_status parse_sentinel_query(const char *s, size_t n, hl_url *u, char *err,
                                          size_t err_len)
{
    const char *q = s, *end = s + n;
    for (;;) {
        const char *amp = memchr(q, '&', (size_t)(end - q)), *e = amp ? amp : end;
        const char *eq = memchr(q, '=', (size_t)(e - q));
        char **field = NULL;
        int bad = 0;
        if (eq && (size_t)(eq - q) == 17 && !strncmp(q, "sentinel_username", 17)) field = &u->sentinel_user;
        if (eq && (size_t)(eq - q) == 17 && !strncmp(q, "sentinel_password", 17)) field = &u->sentinel_pass;
        if (!field) {
            snprintf(err, err_len, "unknown query parameter in Sentinel URL (want "
                     "?sentinel_username=U&sentinel_password=P before the '#')");
            return HILOCK_EINVAL;
        }
        if (*field) {
            snprintf(err, err_len, "%.17s given twice", q);
            return HILOCK_EINVAL;
        }
        if (eq + 1 == e) {
            snprintf(err, err_len, "empty %.17s", q);
            return HILOCK_EINVAL;
        }
        if (!(*field = pct_decode(eq + 1, (size_t)(e - eq - 1), &bad))) {
            snprintf(err, err_len, bad ? "bad %%-escape in %.17s" : "out of memory", q);
            return bad ? HILOCK_EINVAL : HILOCK_ENOMEM;
        }
        if (!amp) break;
        q = amp + 1;
    }
    if (u->sentinel_user && !u->sentinel_pass) {
        snprintf(err, err_len, "sentinel_username needs sentinel_password");
        return HILOCK_EINVAL;
    }
    return HILOCK_OK;
}

/* "host[:port][,host[:port]...]" in [p, end) -> u->sentinels (a Sentinel URL's Sentinels,
 * a cluster URL's seeds: `what` in messages). 0, or -1 with err written (ENOMEM: "out of
 * memory"; the caller's status stays EINVAL, as for every list error). */
static int parse_hostlist(const char *p, const char *end, hl_url *u, const char *what,
                          char *err, size_t err_len)
{
    int defport = u->kind == HL_URL_SENTINEL ? 26379 : 6379;
    for (const char *q = p; q < end;) {
        const char *comma = memchr(q, ',', (size_t)(end - q));
        const char *e = comma ? comma : end;
        hl_hostport *ns;
        if (u->nsentinels >= 32) {
            snprintf(err, err_len, "at most 32 %s addresses", what);
            return -1;
        }
        if (!(ns = realloc(u->sentinels, (u->nsentinels + 1) * sizeof *ns))) {
            snprintf(err, err_len, "out of memory");
            return -1;
        }
        u->sentinels = ns;
        memset(&ns[u->nsentinels], 0, sizeof *ns);
        if (parse_hostport(q, (size_t)(e - q), defport, &ns[u->nsentinels], err, err_len)) return -1;
        u->nsentinels++;
        q = comma ? comma + 1 : end;
        if (comma && q == end) {
            snprintf(err, err_len, "empty %s address after ','", what);
            return -1;
        }
    }
    if (u->nsentinels == 0) {
        snprintf(err, err_len, "missing %s address", what);
        return -1;
    }
    return 0;
}

/* Span k of the secrets of s, in the order they are written (k = 0: the user info's password,
 * if any; k >= 1: the (k)th sentinel_password= value): its start and *end; NULL past the
 * last. Spans may overlap (an '@' in a sentinel password): hl_url_secret merges them. */
static const char *secret_span(const char *s, size_t k, const char **end)
{
    const char *info = strstr(s, "://"), *at = strrchr(s, '@'), *colon = NULL, *p = s;
    info = info ? info + 3 : s;
    if (at && at > info) colon = memchr(info, ':', (size_t)(at - info));
    if (k == 0) {
        *end = colon ? at : s;
        return colon ? colon + 1 : s;   /* (empty: nothing to hide) */
    }
    while ((p = strstr(p, "sentinel_password=")) != NULL && (p += 18, --k > 0)) {}
    if (p) *end = p + strcspn(p, "&#");
    return p;
}

const char *hl_url_secret(const char *s, const char *from, size_t *len)
{
    const char *start = NULL, *end = NULL, *b, *e;
    int grew = 1;
    for (size_t k = 0; (b = secret_span(s, k, &e)) != NULL; k++)   /* the first one from `from` */
        if (e > b && b >= from && (!start || b < start)) start = b, end = e;
    while (start && grew) {   /* and every one that overlaps it */
        grew = 0;
        for (size_t k = 0; (b = secret_span(s, k, &e)) != NULL; k++)
            if (b <= end && e > end) end = e, grew = 1;
    }
    if (start) *len = (size_t)(end - start);
    return start;
}

const char *hl_url_shown(const char *s, char *buf, size_t cap)
{
    size_t o = 0, max = cap < 124 ? cap - 4 : 120, len = 0;   /* room for "..." and the NUL */
    const char *q = s, *secret = hl_url_secret(s, s, &len);
    while (*q && o + 3 < max) {
        if (q != secret) {
            buf[o++] = *q++;
            continue;
        }
        memcpy(buf + o, "***", 3), o += 3;
        secret = hl_url_secret(s, q += len, &len);
    }
    strcpy(buf + o, *q ? "..." : "");
    return buf;
}

/* What the user likely meant by a server without a scheme, for the message: a host:port,
 * a socket path, a unix: without its "//". 0 if nothing comes to mind. */
static int suggest(const char *s, char *out, size_t cap)
{
    size_t n = strcspn(s, "/:@");
    if (s[0] == '/')
        return snprintf(out, cap, "unix://%s", s), 1;
    if (!strncmp(s, "unix:", 5) && s[5] != '/')
        return 0;
    if (!strncmp(s, "unix:/", 6) && strncmp(s, "unix://", 7))
        return snprintf(out, cap, "unix://%s", s + 5), 1;
    if (n > 0 && (s[n] == ':' || !s[n]) && !strstr(s, "://") && !strchr(s, '@')) {
        for (size_t i = 0; i < n; i++)
            if (!host_char((unsigned char)s[i])) return 0;
        return snprintf(out, cap, "redis://%s", s), 1;
    }
    return 0;
}

hilock_status hl_url_parse(const char *s, hl_url *u, char *err, size_t err_len)
{
    hilock_status st = HILOCK_EINVAL;
    const char *p, *end;
    memset(u, 0, sizeof *u);
    if (!s || !*s) FAIL("empty URL");
    end = s + strlen(s);
    for (p = s; p < end; p++)
        if ((unsigned char)*p <= ' ' || *p == 0x7f) FAIL("control character or space in URL");

    if (!strncmp(s, "redis://", 8)) {
        u->kind = HL_URL_TCP;
        p = s + 8;
    } else if (!strncmp(s, "unix://", 7)) {
        u->kind = HL_URL_UNIX;
        p = s + 7;
    } else if (!strncmp(s, "redis-sentinel://", 17)) {
        u->kind = HL_URL_SENTINEL;
        p = s + 17;
    } else if (!strncmp(s, "rediss://", 9)) {
        u->kind = HL_URL_TCP;
        u->tls = 1;
        p = s + 9;
    } else if (!strncmp(s, "rediss-sentinel://", 18)) {
        u->kind = HL_URL_SENTINEL;
        u->tls = 1;
        p = s + 18;
    } else if (!strncmp(s, "redis-cluster://", 16) || !strncmp(s, "rediss-cluster://", 17)) {
        u->kind = HL_URL_CLUSTER;
        u->tls = s[5] == 's';
        p = s + 16 + u->tls;
    } else {
        char hint[200];
        if (suggest(s, hint, sizeof hint))
            FAIL("unknown scheme: did you mean %.150s?", hint);
        FAIL("unknown scheme (want redis://, rediss://, unix://, redis-sentinel://, "
             "rediss-sentinel://, redis-cluster:// or rediss-cluster://)");
    }

    if ((st = parse_userinfo(&p, end, u, err, err_len)) != HILOCK_OK) goto fail;
    st = HILOCK_EINVAL;

    if (u->kind == HL_URL_UNIX) {
        const char *q = strchr(p, '?');
        size_t plen = q ? (size_t)(q - p) : (size_t)(end - p);
        if (plen == 0 || p[0] != '/') FAIL("unix socket path must be absolute: unix:///path");
        if (memchr(p, '#', plen)) FAIL("unexpected '#' in unix URL");
        NEED(u->path = hl_strndup(p, plen));
        if (q) {
            long db;
            if (strncmp(q, "?db=", 4) || (db = parse_num(q + 4, strlen(q + 4), 0, 1000000)) < 0)
                FAIL("unix URL query must be ?db=N");
            u->db = (int)db;
        }
        return HILOCK_OK;
    }

    /* authority: up to '/', '?', '#' or end; a Sentinel URL's query runs up to the '#' */
    const char *slash = p, *hash, *query;
    while (slash < end && *slash != '/' && *slash != '#' && *slash != '?') slash++;
    hash = memchr(slash, '#', (size_t)(end - slash));
    query = memchr(slash, '?', (size_t)((hash ? hash : end) - slash));
    /* redis:// and rediss:// take ?db=N (redis-py's spelling of /N), nothing else */
    if (query && u->kind == HL_URL_TCP && !hash && !strncmp(query, "?db=", 4)) {
        long db = parse_num(query + 4, (size_t)(end - query - 4), 0, 1000000);
        if (db < 0) FAIL("bad database number in ?db=");
        if (query > slash && *slash == '/' && query > slash + 1)
            FAIL("database given twice: /N or ?db=N, not both");
        u->db = (int)db;
        end = query;   /* the rest is read without it */
        query = NULL;
    }
    if (query && u->kind != HL_URL_SENTINEL)
        FAIL("unexpected query ('?') in URL%s", u->kind == HL_URL_TCP ? " (only ?db=N)" : "");
    if (u->kind == HL_URL_CLUSTER) {
        if (hash) FAIL("unexpected '#' in cluster URL (a cluster has no master name)");
        if (slash < end) FAIL("unexpected '/' in cluster URL (a Redis Cluster has database 0 only)");
        if (parse_hostlist(p, slash, u, "seed", err, err_len)) goto fail;
        return HILOCK_OK;
    }
    if (u->kind == HL_URL_TCP) {
        hl_hostport hp;
        if (hash) FAIL("unexpected '#' in %s URL (Sentinel URLs are %s)",
                       u->tls ? "rediss://" : "redis://", u->tls ? "rediss-sentinel://" : "redis-sentinel://");
        if (parse_hostport(p, (size_t)(slash - p), 6379, &hp, err, err_len)) goto fail;
        u->host = hp.host;
        u->port = hp.port;
    } else {
        if (!hash || !hash[1]) FAIL("Sentinel URL needs the master name: ...#mymaster");
        NEED(u->master = hl_strdup(hash + 1));
        if (parse_hostlist(p, slash, u, "sentinel", err, err_len)) goto fail;
        if (query && (st = parse_sentinel_query(query + 1, (size_t)(hash - query - 1), u, err,
                                                err_len)) != HILOCK_OK)
            goto fail;
        st = HILOCK_EINVAL;
    }
    if (slash < end && *slash == '/') {
        const char *dbend = query ? query : hash ? hash : end;
        long db;
        if (dbend > slash + 1) {   /* (an empty path leaves ?db=N's, or 0) */
            if ((db = parse_num(slash + 1, (size_t)(dbend - slash - 1), 0, 1000000)) < 0)
                FAIL("bad database number after '/'");
            u->db = (int)db;
        }
    }
    return HILOCK_OK;
fail:
    hl_url_free(u);
    return st;
}

void hl_url_free(hl_url *u)
{
    if (!u) return;
    free(u->host);
    free(u->path);
    free(u->user);
    if (u->pass) memset(u->pass, 0, strlen(u->pass));
    free(u->pass);
    free(u->sentinel_user);
    if (u->sentinel_pass) memset(u->sentinel_pass, 0, strlen(u->sentinel_pass));
    free(u->sentinel_pass);
    for (size_t i = 0; i < u->nsentinels; i++) free(u->sentinels[i].host);
    free(u->sentinels);
    free(u->master);
    memset(u, 0, sizeof *u);
}
