/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_url.c -- libFuzzer target for the server URL parser (src/base/url.c, hl_url_parse).
 *
 * Beyond "no crash, no leak, no UB", it checks the parser's promises:
 *   - the status is OK, EINVAL or ENOMEM; on failure the message is set and *u is all zero
 *     ("on failure nothing needs freeing");
 *   - on OK the fields of the kind are there and in range (port 1..65535, db >= 0,
 *     an absolute unix path, at least one sentinel and a master name, a user only with
 *     a password, for the data nodes and for the Sentinels alike);
 *   - printing the parsed URL back in canonical form and parsing that again gives the
 *     same fields (what the parser accepts, it understands one way only). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "lock.h"

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_url: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
    abort(); } } while (0)

static void put(hl_buf *b, const char *s) { hl_buf_put(b, s, strlen(s)); }

/* percent-encode everything but [A-Za-z0-9] */
static void put_escaped(hl_buf *b, const char *s)
{
    static const char hex[] = "0123456789ABCDEF";
    for (; *s; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9')) {
            hl_buf_put(b, s, 1);
        } else {
            char e[3] = { '%', hex[ch >> 4], hex[ch & 15] };
            hl_buf_put(b, e, 3);
        }
    }
}

static void put_hostport(hl_buf *b, const char *host, int port)
{
    char num[16];
    int v6 = strchr(host, ':') != NULL;
    if (v6) put(b, "[");
    put(b, host);
    if (v6) put(b, "]");
    snprintf(num, sizeof num, ":%d", port);
    put(b, num);
}

static void print_url(hl_buf *b, const hl_url *u)
{
    char num[32];
    static const char *const scheme[][2] = {
        [HL_URL_TCP] = { "redis://", "rediss://" }, [HL_URL_UNIX] = { "unix://", "unix://" },
        [HL_URL_SENTINEL] = { "redis-sentinel://", "rediss-sentinel://" },
        [HL_URL_CLUSTER] = { "redis-cluster://", "rediss-cluster://" },
    };
    put(b, scheme[u->kind][u->tls]);
    if (u->pass) {
        if (u->user) put_escaped(b, u->user);
        put(b, ":");
        put_escaped(b, u->pass);
        put(b, "@");
    }
    if (u->kind == HL_URL_UNIX) {
        put(b, u->path);
        if (u->db) {
            snprintf(num, sizeof num, "?db=%d", u->db);
            put(b, num);
        }
        return;
    }
    if (u->kind == HL_URL_TCP) {
        put_hostport(b, u->host, u->port);
    } else {
        for (size_t i = 0; i < u->nsentinels; i++) {
            if (i) put(b, ",");
            put_hostport(b, u->sentinels[i].host, u->sentinels[i].port);
        }
    }
    if (u->db) {
        snprintf(num, sizeof num, "/%d", u->db);
        put(b, num);
    }
    if (u->kind == HL_URL_SENTINEL) {
        if (u->sentinel_pass) {
            put(b, "?sentinel_password=");
            put_escaped(b, u->sentinel_pass);
        }
        if (u->sentinel_user) {
            put(b, "&sentinel_username=");
            put_escaped(b, u->sentinel_user);
        }
        put(b, "#");
        put(b, u->master);
    }
}

static int same_str(const char *a, const char *b)
{
    return (!a && !b) || (a && b && !strcmp(a, b));
}

static void check_same(const hl_url *a, const hl_url *b)
{
    CHECK(a->kind == b->kind);
    CHECK(a->tls == b->tls);
    CHECK(same_str(a->host, b->host));
    CHECK(a->port == b->port);
    CHECK(same_str(a->path, b->path));
    CHECK(same_str(a->user, b->user));
    CHECK(same_str(a->pass, b->pass));
    CHECK(a->db == b->db);
    CHECK(same_str(a->master, b->master));
    CHECK(same_str(a->sentinel_user, b->sentinel_user));
    CHECK(same_str(a->sentinel_pass, b->sentinel_pass));
    CHECK(a->nsentinels == b->nsentinels);
    for (size_t i = 0; i < a->nsentinels; i++) {
        CHECK(same_str(a->sentinels[i].host, b->sentinels[i].host));
        CHECK(a->sentinels[i].port == b->sentinels[i].port);
    }
}

static int all_zero(const hl_url *u)
{
    static const hl_url zero;
    return !memcmp(u, &zero, sizeof zero);
}

/* A Sentinel list or a cluster's seeds: each a host and a port. */
static void check_hosts(const hl_url *u)
{
    for (size_t i = 0; i < u->nsentinels; i++) {
        CHECK(u->sentinels[i].host && u->sentinels[i].host[0]);
        CHECK(u->sentinels[i].port >= 1 && u->sentinels[i].port <= 65535);
    }
}

static void check_fields(const hl_url *u)
{
    CHECK(u->db >= 0);
    CHECK(!u->user || u->pass);            /* user info needs a password */
    CHECK(!u->pass || u->pass[0]);         /* "empty password" is refused */
    CHECK(!u->sentinel_user || (u->sentinel_user[0] && u->sentinel_pass));
    CHECK(!u->sentinel_pass || (u->sentinel_pass[0] && u->kind == HL_URL_SENTINEL));
    CHECK(u->tls == 0 || (u->tls == 1 && u->kind != HL_URL_UNIX));
    switch (u->kind) {
    case HL_URL_TCP:
        CHECK(u->host && u->host[0] && !u->path && !u->master && !u->nsentinels);
        CHECK(u->port >= 1 && u->port <= 65535);
        break;
    case HL_URL_UNIX:
        CHECK(u->path && u->path[0] == '/' && !u->host && !u->master && !u->nsentinels);
        CHECK(!strchr(u->path, '?') && !strchr(u->path, '#'));
        break;
    case HL_URL_SENTINEL:
        CHECK(u->master && u->master[0] && u->nsentinels >= 1 && u->sentinels && !u->host && !u->path);
        check_hosts(u);
        break;
    case HL_URL_CLUSTER:   /* seeds only: no db, no master, no query */
        CHECK(!u->master && !u->db && !u->sentinel_pass && u->nsentinels >= 1 && u->sentinels &&
              !u->host && !u->path);
        check_hosts(u);
        break;
    default:
        CHECK(!"unknown kind");
    }
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    char *s, err[200], err2[200];
    hl_url u, v;
    hl_buf b = { 0 };
    hilock_status st;
    if (size > 4096) return 0;
    s = malloc(size + 1);
    if (!s) return 0;
    memcpy(s, data, size);
    s[size] = '\0';   /* the parser takes a C string: stop at the first NUL like every caller */

    err[0] = '\0';
    st = hl_url_parse(s, &u, err, sizeof err);
    CHECK(st == HILOCK_OK || st == HILOCK_EINVAL || st == HILOCK_ENOMEM);
    if (st != HILOCK_OK) {
        CHECK(err[0] != '\0' && memchr(err, '\0', sizeof err));
        CHECK(all_zero(&u));
        free(s);
        return 0;
    }
    check_fields(&u);

    print_url(&b, &u);
    CHECK(!b.oom);
    err2[0] = '\0';
    st = hl_url_parse(b.p, &v, err2, sizeof err2);
    if (st != HILOCK_OK) fprintf(stderr, "fuzz_url: canonical form \"%s\" refused: %s\n", b.p, err2);
    CHECK(st == HILOCK_OK);
    check_same(&u, &v);
    hl_url_free(&v);
    hl_url_free(&u);
    CHECK(all_zero(&u));
    hl_buf_free(&b);
    free(s);
    return 0;
}
