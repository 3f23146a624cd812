/* SPDX-License-Identifier: BSD-3-Clause */
/* test_url.c -- the URL parser, as a table (unit tests: no server). Every accepted form with
 * every field it yields; every malformed one with the reason given, which never echoes the
 * password. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "lock.h"

typedef struct good {
    const char *url;
    hl_url_kind kind;
    const char *host;   /* TCP */
    int         port;
    const char *path;   /* UNIX */
    const char *user;
    const char *pass;
    int         db;
    int         tls;
} good;

static const good goods[] = {
    { "redis://127.0.0.1", HL_URL_TCP, "127.0.0.1", 6379, NULL, NULL, NULL, 0, 0 },
    { "redis://localhost:6380", HL_URL_TCP, "localhost", 6380, NULL, NULL, NULL, 0, 0 },
    { "redis://my-host.example_1:1", HL_URL_TCP, "my-host.example_1", 1, NULL, NULL, NULL, 0, 0 },
    { "redis://h:65535", HL_URL_TCP, "h", 65535, NULL, NULL, NULL, 0, 0 },
    { "redis://h/", HL_URL_TCP, "h", 6379, NULL, NULL, NULL, 0, 0 },
    { "redis://h/0", HL_URL_TCP, "h", 6379, NULL, NULL, NULL, 0, 0 },
    { "redis://h:7000/15", HL_URL_TCP, "h", 7000, NULL, NULL, NULL, 15, 0 },
    { "redis://h/1000000", HL_URL_TCP, "h", 6379, NULL, NULL, NULL, 1000000, 0 },
    { "redis://:pw@h", HL_URL_TCP, "h", 6379, NULL, NULL, "pw", 0, 0 },
    { "redis://alice:pw@h:7000/2", HL_URL_TCP, "h", 7000, NULL, "alice", "pw", 2, 0 },
    { "redis://al%40ice:p%3Aw%2F%25@h", HL_URL_TCP, "h", 6379, NULL, "al@ice", "p:w/%", 0, 0 },
    { "redis://u:p@ss@h", HL_URL_TCP, "h", 6379, NULL, "u", "p@ss", 0, 0 },
    { "redis://[::1]", HL_URL_TCP, "::1", 6379, NULL, NULL, NULL, 0, 0 },
    { "redis://:x@[::1]:6380/3", HL_URL_TCP, "::1", 6380, NULL, NULL, "x", 3, 0 },
    { "redis://[fe80::1:2]:1", HL_URL_TCP, "fe80::1:2", 1, NULL, NULL, NULL, 0, 0 },
    { "rediss://127.0.0.1", HL_URL_TCP, "127.0.0.1", 6379, NULL, NULL, NULL, 0, 1 },
    { "rediss://localhost:6380/2", HL_URL_TCP, "localhost", 6380, NULL, NULL, NULL, 2, 1 },
    { "rediss://alice:p%40w@h:7000/3", HL_URL_TCP, "h", 7000, NULL, "alice", "p@w", 3, 1 },
    { "rediss://:pw@[::1]:6380", HL_URL_TCP, "::1", 6380, NULL, NULL, "pw", 0, 1 },
    { "redis://h?db=1", HL_URL_TCP, "h", 6379, NULL, NULL, NULL, 1, 0 },   /* redis-py's form */
    { "redis://:pw@h:7000/?db=3", HL_URL_TCP, "h", 7000, NULL, NULL, "pw", 3, 0 },
    { "rediss://h?db=1", HL_URL_TCP, "h", 6379, NULL, NULL, NULL, 1, 1 },
    { "unix:///tmp/r.sock", HL_URL_UNIX, NULL, 0, "/tmp/r.sock", NULL, NULL, 0, 0 },
    { "unix:///tmp/r.sock?db=4", HL_URL_UNIX, NULL, 0, "/tmp/r.sock", NULL, NULL, 4, 0 },
    { "unix:///tmp/a@b.sock", HL_URL_UNIX, NULL, 0, "/tmp/a@b.sock", NULL, NULL, 0, 0 },
    { "unix:///tmp/a:b/c.sock", HL_URL_UNIX, NULL, 0, "/tmp/a:b/c.sock", NULL, NULL, 0, 0 },
    { "unix://:pw@/tmp/r.sock", HL_URL_UNIX, NULL, 0, "/tmp/r.sock", NULL, "pw", 0, 0 },
    { "unix://u:pw@/tmp/r.sock?db=1", HL_URL_UNIX, NULL, 0, "/tmp/r.sock", "u", "pw", 1, 0 },
};

Test(url, accepts_every_documented_form)
{
    for (size_t i = 0; i < sizeof goods / sizeof *goods; i++) {
        const good *g = &goods[i];
        hl_url u;
        char err[200] = "";
        hilock_status st = hl_url_parse(g->url, &u, err, sizeof err);
        cr_assert_eq(st, HILOCK_OK, "%s: %s", g->url, err);
        cr_assert_eq(u.kind, g->kind, "%s", g->url);
#define STR(field, want) do { \
            if (want) cr_assert(u.field && !strcmp(u.field, want), "%s: " #field " '%s', want '%s'", g->url, \
                                u.field ? u.field : "(null)", want); \
            else cr_assert_null(u.field, "%s: " #field " '%s'", g->url, u.field); } while (0)
        STR(host, g->host);
        STR(path, g->path);
        STR(user, g->user);
        STR(pass, g->pass);
#undef STR
        cr_assert_eq(u.port, g->port, "%s: port %d", g->url, u.port);
        cr_assert_eq(u.db, g->db, "%s: db %d", g->url, u.db);
        cr_assert_eq(u.tls, g->tls, "%s: tls %d", g->url, u.tls);
        hl_url_free(&u);
        hl_url_free(&u);   /* freeing twice is harmless: it zeroes */
    }
}

Test(url, sentinel_lists_every_address_with_its_port)
{
    hl_url u;
    char err[200] = "";
    cr_assert_eq(hl_url_parse("redis-sentinel://:pw@h1,h2:26380,[::1]/2#mymaster", &u, err, sizeof err),
                 HILOCK_OK, "%s", err);
    cr_assert_eq(u.kind, HL_URL_SENTINEL);
    cr_assert_eq(u.nsentinels, 3);
    cr_assert_str_eq(u.sentinels[0].host, "h1");
    cr_assert_eq(u.sentinels[0].port, 26379);
    cr_assert_str_eq(u.sentinels[1].host, "h2");
    cr_assert_eq(u.sentinels[1].port, 26380);
    cr_assert_str_eq(u.sentinels[2].host, "::1");
    cr_assert_eq(u.sentinels[2].port, 26379);
    cr_assert_str_eq(u.master, "mymaster");
    cr_assert_str_eq(u.pass, "pw");
    cr_assert_eq(u.db, 2);
    hl_url_free(&u);
}

/* rediss-sentinel://: the same fields as redis-sentinel://, and TLS (to the Sentinels and
 * the data nodes) */
Test(url, rediss_sentinel_is_a_sentinel_url_over_tls)
{
    hl_url u;
    char err[200] = "";
    cr_assert_eq(hl_url_parse("rediss-sentinel://:pw@h1:26380,[::1]/2?sentinel_password=sp#mymaster",
                              &u, err, sizeof err), HILOCK_OK, "%s", err);
    cr_assert_eq(u.kind, HL_URL_SENTINEL);
    cr_assert_eq(u.tls, 1);
    cr_assert_eq(u.nsentinels, 2);
    cr_assert_str_eq(u.sentinels[0].host, "h1");
    cr_assert_eq(u.sentinels[0].port, 26380);
    cr_assert_str_eq(u.sentinels[1].host, "::1");
    cr_assert_eq(u.sentinels[1].port, 26379);
    cr_assert_str_eq(u.master, "mymaster");
    cr_assert_str_eq(u.pass, "pw");
    cr_assert_str_eq(u.sentinel_pass, "sp");
    cr_assert_eq(u.db, 2);
    hl_url_free(&u);
    cr_assert_eq(hl_url_parse("redis-sentinel://h#m", &u, err, sizeof err), HILOCK_OK, "%s", err);
    cr_assert_eq(u.tls, 0);
    hl_url_free(&u);
}

/* The Sentinels' own AUTH comes from the query before the '#'; the user info stays the data
 * nodes'. */
Test(url, sentinel_user_and_password_come_from_the_query)
{
    static const struct {
        const char *url, *user, *pass, *suser, *spass, *master;
        int db;
    } t[] = {
        { "redis-sentinel://:pw@h1,h2/3?sentinel_password=sp#m", NULL, "pw", NULL, "sp", "m", 3 },
        { "redis-sentinel://h?sentinel_username=al%40ice&sentinel_password=s%23p%26#m", NULL, NULL,
          "al@ice", "s#p&", "m", 0 },
        { "redis-sentinel://u:pw@h?sentinel_password=x&sentinel_username=v#m", "u", "pw", "v", "x", "m", 0 },
        { "redis-sentinel://h?sentinel_password=a/b?c=d#m?e", NULL, NULL, NULL, "a/b?c=d", "m?e", 0 },
        { "redis-sentinel://h#m?sentinel_password=x", NULL, NULL, NULL, NULL, "m?sentinel_password=x", 0 },
    };
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++) {
        hl_url u;
        char err[200] = "";
        cr_assert_eq(hl_url_parse(t[i].url, &u, err, sizeof err), HILOCK_OK, "%s: %s", t[i].url, err);
#define SAME(field, want) cr_assert((!u.field && !(want)) || (u.field && (want) && !strcmp(u.field, want)), \
                                    "%s: " #field " '%s'", t[i].url, u.field ? u.field : "(null)")
        SAME(user, t[i].user);
        SAME(pass, t[i].pass);
        SAME(sentinel_user, t[i].suser);
        SAME(sentinel_pass, t[i].spass);
        SAME(master, t[i].master);
#undef SAME
        cr_assert_eq(u.db, t[i].db, "%s", t[i].url);
        cr_assert_eq(u.nsentinels, strstr(t[i].url, "h1,h2") ? 2u : 1u, "%s", t[i].url);
        hl_url_free(&u);
    }
}

typedef struct bad {
    const char *url;
    const char *why;    /* a word the reason must contain */
} bad;

static const bad bads[] = {
    { "", "empty" },
    { "localhost", "scheme" },
    { "127.0.0.1:6379", "scheme" },
    { "http://h", "scheme" },
    { "REDIS://h", "scheme" },
    { "redis:/h", "scheme" },
    { "rediss://", "host" },
    { "rediss://h:0", "port" },
    { "rediss://h#m", "rediss-sentinel://" },
    { "rediss-sentinel://h", "master name" },
    { "rediss-sentinel://h:0#m", "port" },
    { "rediss-sentinel://h,#m", "empty sentinel" },
    { "rediss-sentinel://#m", "missing sentinel address" },
    { "rediss-sentinel://h?x=1#m", "query" },
    { "redis-sentinels://h#m", "scheme" },
    { "rediss://u@h", "password" },
    { "rediss://h/x", "database" },
    { "redis://", "host" },
    { "redis://:6379", "host" },
    { "redis://h:", "port" },
    { "redis://h:0", "port" },
    { "redis://h:65536", "port" },
    { "redis://h:123456", "port" },
    { "redis://h:99999999999", "port" },
    { "redis://h:-1", "port" },
    { "redis://h:63x9", "port" },
    { "redis://h:6379:1", "port" },
    { "redis://h/x", "database" },
    { "redis://h/-1", "database" },
    { "redis://h/1/2", "database" },
    { "redis://h/1000001", "database" },
    { "redis://h/99999999999", "database" },
    { "redis://h/1?db=1", "twice" },
    { "redis://h?db=x", "?db=" },
    { "redis://h?db=", "?db=" },
    { "redis://h?db=1&x=2", "?db=" },
    { "redis://h?db=1#m", "query" },
    { "redis://h?foo=1", "only ?db=N" },
    { "redis-cluster://h?db=1", "query" },
    { "redis://h#m", "#" },
    { "redis://ho$t", "character" },
    { "redis://h h", "space" },
    { "redis://h\t", "control" },
    { "redis://h\n", "control" },
    { "redis://h\x7f", "control" },
    { "redis://[::1", "IPv6" },
    { "redis://[]:1", "IPv6" },
    { "redis://[g::1]", "IPv6" },
    { "redis://[::1]x", "port" },
    { "redis://u@h", "password" },
    { "redis://:@h", "empty password" },
    { "redis://u:@h", "empty password" },
    { "redis://:p%4@h", "escape" },
    { "redis://:p%zz@h", "escape" },
    { "redis://:p%00x@h", "escape" },
    { "redis://u%4:p@h", "escape" },
    { "redis://:pw@", "host" },
    { "unix://", "absolute" },
    { "unix://relative/r.sock", "absolute" },
    { "unix://:pw@relative", "absolute" },
    { "unix:///tmp/r.sock?db=", "?db=N" },
    { "unix:///tmp/r.sock?db=x", "?db=N" },
    { "unix:///tmp/r.sock?db=-1", "?db=N" },
    { "unix:///tmp/r.sock?foo=1", "?db=N" },
    { "unix:///tmp/r.sock?db=1&x=2", "?db=N" },
    { "unix:///tmp/r#x.sock", "#" },
    { "redis-sentinel://h", "master name" },
    { "redis-sentinel://h#", "master name" },
    { "redis-sentinel://h/1", "master name" },
    { "redis-sentinel://#m", "sentinel address" },
    { "redis-sentinel://a,#m", "empty sentinel" },
    { "redis-sentinel://a,,b#m", "host" },
    { "redis-sentinel://a:0#m", "port" },
    { "redis-sentinel://a/x#m", "database" },
    { "redis-sentinel://h?#m", "unknown query parameter" },
    { "redis-sentinel://h?password=x#m", "unknown query parameter" },
    { "redis-sentinel://h?sentinel_password#m", "unknown query parameter" },
    { "redis-sentinel://h?sentinel_password=a&#m", "unknown query parameter" },
    { "redis-sentinel://h?sentinel_user=u&sentinel_password=a#m", "unknown query parameter" },
    { "redis-sentinel://h?sentinel_password=#m", "empty sentinel_password" },
    { "redis-sentinel://h?sentinel_username=&sentinel_password=a#m", "empty sentinel_username" },
    { "redis-sentinel://h?sentinel_username=u#m", "needs sentinel_password" },
    { "redis-sentinel://h?sentinel_password=a&sentinel_password=b#m", "twice" },
    { "redis-sentinel://h?sentinel_password=a%zz#m", "escape" },
    { "redis-sentinel://h?sentinel_password=a%00#m", "escape" },
    { "redis-sentinel://h/x?sentinel_password=a#m", "database" },
    { "redis-sentinel://h?sentinel_password=a", "master name" },
    { "redis://h?sentinel_password=a", "query" },
    { "unix:///tmp/r.sock?sentinel_password=a", "?db=N" },
};

Test(url, rejects_malformed_urls_saying_why)
{
    for (size_t i = 0; i < sizeof bads / sizeof *bads; i++) {
        const bad *b = &bads[i];
        hl_url u;
        char err[200] = "";
        hilock_status st = hl_url_parse(b->url, &u, err, sizeof err);
        cr_assert_eq(st, HILOCK_EINVAL, "accepted '%s'", b->url);
        cr_assert(strstr(err, b->why), "'%s': reason '%s' should mention '%s'", b->url, err, b->why);
        /* nothing to free on failure: every pointer is NULL */
        cr_assert(!u.host && !u.path && !u.user && !u.pass && !u.sentinels && !u.master &&
                  !u.sentinel_user && !u.sentinel_pass, "%s", b->url);
    }
}

Test(url, reasons_never_echo_the_password)
{
    static const char *urls[] = {
        "redis://alice:Sekr1tPw@h:0", "redis://alice:Sekr1tPw@h/x", "redis://alice:Sekr1tPw@ho$t",
        "redis://:Sekr1tPw%zz@h", "unix://:Sekr1tPw@relative", "redis-sentinel://:Sekr1tPw@h",
        "redis://:Sekr1tPw@[::1", "redis://u:Sekr1tPw@h?db=1&x", "redis://u:Sekr1tPw@h?dbx=1",
        "redis-sentinel://h?sentinel_password=Sekr1tPw%zz#m", "redis-sentinel://h?Sekr1tPw#m",
        "redis-sentinel://h?x=Sekr1tPw#m", "redis-sentinel://h?sentinel_username=Sekr1tPw#m",
        "redis-sentinel://h?sentinel_password=Sekr1tPw&sentinel_password=Sekr1tPw#m",
        "redis-sentinel://h/Sekr1tPw?sentinel_password=x#m", "redis://h?sentinel_password=Sekr1tPw",
    };
    for (size_t i = 0; i < sizeof urls / sizeof *urls; i++) {
        hl_url u;
        char err[200] = "";
        cr_assert_eq(hl_url_parse(urls[i], &u, err, sizeof err), HILOCK_EINVAL, "accepted %s", urls[i]);
        cr_assert_null(strstr(err, "Sekr1t"), "'%s' echoes the password", err);
    }
}

Test(url, a_short_error_buffer_is_truncated_not_overrun)
{
    hl_url u;
    char err[8];
    memset(err, 'x', sizeof err);
    cr_assert_eq(hl_url_parse("rediss://h:0", &u, err, 6), HILOCK_EINVAL);
    cr_assert_eq(strlen(err), 5);
    cr_assert_eq(err[6], 'x');
    cr_assert_eq(hl_url_parse(NULL, &u, err, 6), HILOCK_EINVAL);
}

Test(url, a_server_without_its_scheme_gets_the_url_it_likely_meant)
{
    static const char *const cases[][2] = {
        { "localhost:6379", "unknown scheme: did you mean redis://localhost:6379?" },
        { "127.0.0.1:6379", "unknown scheme: did you mean redis://127.0.0.1:6379?" },
        { "my-host", "unknown scheme: did you mean redis://my-host?" },
        { "unix:/p/redis.sock", "unknown scheme: did you mean unix:///p/redis.sock?" },
        { "/p/redis.sock", "unknown scheme: did you mean unix:///p/redis.sock?" },
        { "u:Sekr1tPw@h:1", "unknown scheme (want redis://" },   /* never echoed */
        { "http://h:1", "unknown scheme (want redis://" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        hl_url u;
        char err[200] = "";
        cr_assert_eq(hl_url_parse(cases[i][0], &u, err, sizeof err), HILOCK_EINVAL, "accepted %s", cases[i][0]);
        cr_assert_eq(strncmp(err, cases[i][1], strlen(cases[i][1])), 0, "'%s': '%s'", cases[i][0], err);
    }
}

Test(url, the_shown_form_masks_every_password_and_stays_short)
{
    static const char *const cases[][2] = {
        { "redis://alice:Sekr1tPw@h:1/2", "redis://alice:***@h:1/2" },
        { "redis://:Sekr1tPw@h", "redis://:***@h" },
        { "redis://u:p@Sekr1tPw@h", "redis://u:***@h" },
        { "unix://:Sekr1tPw@/tmp/r.sock?db=1", "unix://:***@/tmp/r.sock?db=1" },
        { "u:Sekr1tPw@h:1", "u:***@h:1" },
        { "redis-sentinel://:Sekr1tPw@a,b?sentinel_username=s&sentinel_password=Sekr1tPw#m",
          "redis-sentinel://:***@a,b?sentinel_username=s&sentinel_password=***#m" },
        { "redis-sentinel://h?sentinel_password=Sekr1tPw", "redis-sentinel://h?sentinel_password=***" },
        { "localhost:6379", "localhost:6379" },
        { "redis://h", "redis://h" },
    };
    char buf[128], big[400];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        cr_assert_str_eq(hl_url_shown(cases[i][0], buf, sizeof buf), cases[i][1]);
    memset(big, 'h', sizeof big - 1);
    big[sizeof big - 1] = '\0';
    memcpy(big, "redis://", 8);
    hl_url_shown(big, buf, sizeof buf);
    cr_assert_eq(strlen(buf), 120, "%s", buf);
    cr_assert_str_eq(buf + 117, "...");
    cr_assert_leq(strlen(hl_url_shown(big, buf, 16)), 15, "a small buffer is not overrun");
}

/* ---- issue 23: one rule for a URL's secrets, up to the LAST '@' ---- */

Test(url, a_password_with_an_unencoded_slash_query_hash_or_at_is_hidden_whole)
{
    static const char *const cases[][2] = {
        { "redis://:my/Sekr1t@127.0.0.1:6379", "redis://:***@127.0.0.1:6379" },
        { "redis://:my?Sekr1t@127.0.0.1:6379", "redis://:***@127.0.0.1:6379" },
        { "redis://:my#Sekr1t@127.0.0.1:6379", "redis://:***@127.0.0.1:6379" },
        { "redis://:my@Sekr1t@127.0.0.1:6379/0", "redis://:***@127.0.0.1:6379/0" },
        { "redis://u:a#b?c/d@Sekr1t@h:1/2", "redis://u:***@h:1/2" },
        { "redis://alice:my:Sek/r1t@h", "redis://alice:***@h" },
        { "rediss-sentinel://:my/Sekr1t@a,b?sentinel_password=Sek/r1t#m",
          "rediss-sentinel://:***@a,b?sentinel_password=***#m" },
        { "redis-sentinel://a?sentinel_password=my@Sekr1t&sentinel_username=s#m",
          "redis-sentinel://a?sentinel_password=***&sentinel_username=s#m" },
        /* the ':' of a port before an '@' in a sentinel password: both hidden, as one */
        { "redis-sentinel://a:1?sentinel_password=my@Sekr1t&sentinel_username=s#m",
          "redis-sentinel://a:***&sentinel_username=s#m" },
        { "redis://alice@h:1", "redis://alice@h:1" },   /* no password: nothing hidden */
        { "redis://:@h", "redis://:@h" },
        { "redis://h:1/0", "redis://h:1/0" },
    };
    char buf[128];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        hl_url u;
        char err[200] = "";
        cr_assert_str_eq(hl_url_shown(cases[i][0], buf, sizeof buf), cases[i][1]);
        if (hl_url_parse(cases[i][0], &u, err, sizeof err) == HILOCK_OK) hl_url_free(&u);
        cr_assert_null(strstr(err, "Sekr1t"), "%s: %s", cases[i][0], err);
        cr_assert_null(strstr(err, "Sek/r1t"), "%s: %s", cases[i][0], err);
    }
}

Test(url, the_secrets_are_found_one_after_the_other_for_the_commands_argv)
{
    const char *s = "redis-sentinel://u:p/w@a,b?sentinel_password=x@y&sentinel_username=s#m", *p;
    size_t len = 0;
    cr_assert_eq(p = hl_url_secret(s, s, &len), strstr(s, "p/w@a,b?sentinel_password=x@y"));
    cr_assert_eq(len, strlen("p/w@a,b?sentinel_password=x@y"), "up to the last '@', and the "
                 "sentinel password that '@' is in");
    cr_assert_null(hl_url_secret(s, p + len, &len));
    s = "redis-sentinel://:pw@a?sentinel_password=sp&x=1#m";
    cr_assert_eq(p = hl_url_secret(s, s, &len), strstr(s, "pw@"));
    cr_assert_eq(len, 2);
    cr_assert_eq(p = hl_url_secret(s, p + len, &len), strstr(s, "sp&"));
    cr_assert_eq(len, 2);
    cr_assert_null(hl_url_secret(s, p + len, &len));
    s = "redis://alice@h:1/0";
    cr_assert_null(hl_url_secret(s, s, &len), "a user without a password");
    s = "redis://h:1";
    cr_assert_null(hl_url_secret(s, s, &len));
}
