/* SPDX-License-Identifier: BSD-3-Clause */
/* test_messages.c -- the messages a newcomer reads: a forgotten password, a busy key (its
 * holder's TTL, or none), the key named once, printable and cut short, on the library's
 * errmsg and on the hilock command's stderr. Exact text where the message is the contract. */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <uv.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_libuv.h"

TestSuite(messages, .timeout = 60);

static char bin[PATH_MAX];

/* Run the command with argv[1..] (NULL-terminated) in the server's dir, stderr to err.txt,
 * HILOCK_SERVERS set to list (NULL: unset); its exit status. */
static int run_with_servers(hlt_redis *r, const char *list, const char *const *args)
{
    cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0, "%s not built", bin);
    if (list) setenv("HILOCK_SERVERS", list, 1);   /* (this test's process: set for each run) */
    else unsetenv("HILOCK_SERVERS");
    return hlt_reap(hlt_spawn_to(bin, args, r->dir, hlt_path(r, "out.txt"), hlt_path(r, "err.txt")), 20000);
}

static int run(hlt_redis *r, const char *const *args) { return run_with_servers(r, NULL, args); }

/* ---- a forgotten password ---- */

static int loop_done;
static hilock_status loop_st;
static char loop_err[300];

static void on_acquired(hilock_status st, hilock *l, void *arg)
{
    loop_st = st;
    snprintf(loop_err, sizeof loop_err, "%s", hilock_client_errmsg(arg));
    hilock_free(l);
    loop_done = 1;
}

Test(messages, a_forgotten_password_says_noauth_and_how_to_give_one_on_every_lock_path)
{
    hlt_redis *r = hlt_redis_started("--requirepass s3cret");
    char want[300];
    hilock *l = NULL;
    uv_loop_t loop;
    hilock_client *c;
    snprintf(want, sizeof want, "127.0.0.1:%d: NOAUTH: the server needs a password: "
             "redis://:PASSWORD@127.0.0.1:%d", r->port, r->port);
    for (int fencing = 1; fencing >= 0; fencing--) {   /* the script, then SET NX PX */
        hilock_options o = hlt_options((const char *[]){ r->url }, 1);
        o.retry_delay_ms = 50;   /* the library's default */
        o.fencing = fencing;
        c = hlt_client_new(&o);
        cr_assert_eq(hilock_acquire(c, "k", 5000, 0, &l), HILOCK_EAUTH);
        cr_assert_str_eq(hilock_client_errmsg(c), want, "fencing %d", fencing);
        hilock_client_free(c);
    }
    /* the event loop */
    cr_assert_eq(uv_loop_init(&loop), 0);
    hilock_options o2 = hlt_options((const char *[]){ r->url }, 1);
    o2.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o2);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    loop_done = 0;
    cr_assert_eq(hilock_acquire_async(c, "k", 5000, 0, on_acquired, c), HILOCK_OK);
    for (long long end = hlt_now_ms() + 10000; !loop_done && hlt_now_ms() < end;) uv_run(&loop, UV_RUN_ONCE);
    cr_assert(loop_done, "the loop's acquire never ended");
    cr_assert_eq(loop_st, HILOCK_EAUTH);
    cr_assert_str_eq(loop_err, want);
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    cr_assert_eq(hlt_exists(r, "k"), 0, "nothing written");
    hlt_redis_stop(r);
}

Test(messages, the_command_says_noauth_and_how_to_give_a_password)
{
    hlt_redis *r = hlt_redis_start("--requirepass s3cret");
    char want[400], sock[300];
    const char *a[] = { "-s", r ? r->url : "", "k", "true", NULL };
    const char *b[] = { "-s", sock, "--no-fence", "k", "true", NULL };
    const char *i[] = { "-s", r ? r->url : "", "inspect", "k", NULL };
    cr_assert_not_null(r);
    cr_assert_eq(run(r, a), 69);
    snprintf(want, sizeof want, "hilock: lock k: 127.0.0.1:%d: NOAUTH: the server needs a password: "
             "redis://:PASSWORD@127.0.0.1:%d\n", r->port, r->port);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"), want);
    snprintf(sock, sizeof sock, "%s", r->unix_url);
    cr_assert_eq(run(r, b), 69);
    snprintf(want, sizeof want, "hilock: lock k: %s: NOAUTH: the server needs a password: "
             "unix://:PASSWORD@%s\n", r->unix_url + 7, r->unix_url + 7);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"), want);
    cr_assert_eq(run(r, i), 69);
    cr_assert(strstr(hlt_slurp(r, "err.txt"), "NOAUTH: the server needs a password: redis://:PASSWORD@127.0.0.1:"),
              "%s", hlt_slurp(r, "err.txt"));
    cr_assert_eq(hlt_exists(r, "k"), 0);
    hlt_redis_stop(r);
}

/* ---- a busy key: its holder's TTL, or none ---- */

Test(messages, busy_says_when_the_holder_expires_or_that_it_never_will)
{
    hlt_redis *r = hlt_redis_started(NULL);
    hilock *l = NULL;
    redisReply *rep;
    for (int fencing = 1; fencing >= 0; fencing--) {
        hilock_options o = hlt_options((const char *[]){ r->url }, 1);
        o.retry_delay_ms = 50;   /* the library's default */
        o.fencing = fencing;
        hilock_client *c = hlt_client_new(&o);
        const char *m;
        double s = 0;
        rep = hlt_cmd(r, "SET lock:m 1700000000.5");   /* a legacy stamp: no TTL */
        freeReplyObject(rep);
        cr_assert_eq(hilock_acquire(c, "lock:m", 5000, 0, &l), HILOCK_BUSY);
        cr_assert_str_eq(hilock_client_errmsg(c), "lock:m: held by another owner; lock:m has no TTL: it "
                         "will never expire by itself (see hilock inspect lock:m; hilock break removes it)",
                         "fencing %d", fencing);
        rep = hlt_cmd(r, "PEXPIRE lock:m 50000");
        freeReplyObject(rep);
        cr_assert_eq(hilock_acquire(c, "lock:m", 5000, 0, &l), HILOCK_BUSY);
        m = hilock_client_errmsg(c);
        cr_assert_eq(sscanf(m, "lock:m: held by another owner, expires in %lf s", &s), 1, "%s", m);
        cr_assert(s > 30 && s <= 50, "%s", m);
        rep = hlt_cmd(r, "PEXPIRE lock:m 7200000");
        freeReplyObject(rep);
        cr_assert_eq(hilock_acquire(c, "lock:m", 5000, 0, &l), HILOCK_BUSY);
        cr_assert_str_eq(hilock_client_errmsg(c), "lock:m: held by another owner, expires in 2.0 h");
        hilock_client_free(c);
    }
    {
        char *v = hlt_get(r, "lock:m");
        cr_assert_str_eq(v, "1700000000.5", "the holder's value is untouched");
        free(v);
    }
    hlt_redis_stop(r);
}

Test(messages, the_command_warns_before_waiting_for_a_holder_without_a_ttl)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r ? r->url : "", "-w", "0.2", "lock:m", "true", NULL };
    const char *b[] = { "-s", r ? r->url : "", "-n", "-v", "lock:m", "true", NULL };
    const char *want = "hilock: waiting for lock:m: held by another owner; lock:m has no TTL: it will "
                       "never expire by itself (see hilock inspect lock:m; hilock break removes it)\n";
    redisReply *rep;
    cr_assert_not_null(r);
    rep = hlt_cmd(r, "SET lock:m 1700000000.5");
    freeReplyObject(rep);
    cr_assert_eq(run(r, a), 1);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"), want);
    cr_assert_eq(run(r, b), 1);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"), "hilock: busy: lock:m: held by another owner; lock:m has no "
                     "TTL: it will never expire by itself (see hilock inspect lock:m; hilock break "
                     "removes it)\n");
    cr_assert_eq(hlt_pttl(r, "lock:m"), -1, "untouched");
    hlt_redis_stop(r);
}

/* ---- the key: once, printable, cut short ---- */

Test(messages, the_command_names_the_key_once_printable_and_cut_to_64_bytes)
{
    hlt_redis *r = hlt_redis_start(NULL);
    char big[5001], want[400];
    const char *a[] = { "-s", r ? r->url : "", "-n", "-v", "a\nb\x1b", "true", NULL };
    const char *b[] = { "-s", r ? r->url : "", big, "true", NULL };
    redisReply *rep;
    cr_assert_not_null(r);
    rep = hlt_cmd(r, "SET %s x", "a\nb\x1b");
    freeReplyObject(rep);
    cr_assert_eq(run(r, a), 1);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"), "hilock: busy: a\\x0ab\\x1b: held by another owner; a\\x0ab\\x1b has "
                     "no TTL: it will never expire by itself (see hilock inspect a\\x0ab\\x1b; hilock break "
                     "removes it)\n");
    memset(big, 'k', 5000);
    big[5000] = '\0';
    cr_assert_eq(run(r, b), 64);
    snprintf(want, sizeof want, "hilock: lock %.64s...(5000 bytes): key is longer than 4096 bytes\n", big);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"), want);
    cr_assert_eq(hlt_dbsize(r), 1);
    hlt_redis_stop(r);
}

/* ---- server lists ---- */

Test(messages, a_server_list_may_have_blanks_after_its_commas_and_a_trailing_comma)
{
    hlt_redis *a = hlt_redis_start(NULL), *b = hlt_redis_start(NULL);
    char list[700];
    const char *args[] = { "job", "sh", "-c", "touch ran", NULL };
    cr_assert(a && b);
    snprintf(list, sizeof list, "%s, %s", a->url, b->url);
    cr_assert_eq(run_with_servers(a, list, args), 0, "%s", hlt_slurp(a, "err.txt"));
    snprintf(list, sizeof list, "%s,", a->url);
    cr_assert_eq(run_with_servers(a, list, args), 0, "%s", hlt_slurp(a, "err.txt"));
    snprintf(list, sizeof list, "%s,\t%s,  ", a->url, b->url);
    cr_assert_eq(run_with_servers(a, list, args), 0, "%s", hlt_slurp(a, "err.txt"));
    cr_assert_eq(access(hlt_path(a, "ran"), F_OK), 0);
    cr_assert_eq(hlt_exists(a, "job"), 0, "released");
    cr_assert_eq(hlt_exists(b, "job"), 0, "released");
    hlt_redis_stop(a);
    hlt_redis_stop(b);
}

Test(messages, a_server_without_its_scheme_is_echoed_with_the_url_it_likely_meant)
{
    hlt_redis *r = hlt_redis_started(NULL);
    const char *a[] = { "-s", "localhost:6379", "job", "touch", "ran", NULL };
    const char *b[] = { "-s", "redis://127.0.0.1:1", "-s", "/p/redis.sock", "job", "touch", "ran", NULL };
    const char *c[] = { "-s", "redis://:Sekr1tPw@127.0.0.1:0", "job", "touch", "ran", NULL };
    cr_assert_eq(run(r, a), 64);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"),
                     "hilock: server 1 of 1 (localhost:6379): unknown scheme: did you mean redis://localhost:6379?\n");
    cr_assert_eq(run(r, b), 64);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"),
                     "hilock: server 2 of 2 (/p/redis.sock): unknown scheme: did you mean unix:///p/redis.sock?\n");
    cr_assert_eq(run(r, c), 64);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"), "hilock: server 1 of 1 (redis://:***@127.0.0.1:0): bad port (want 1..65535)\n");
    cr_assert_eq(access(hlt_path(r, "ran"), F_OK), -1, "COMMAND must not run");
    hlt_redis_stop(r);
}

/* ---- a key of another type ---- */

Test(messages, a_key_of_another_type_is_named_not_the_scripts_insides)
{
    hlt_redis *r = hlt_redis_start(NULL);
    char want[300], name[64];
    hilock *l = NULL;
    hilock_client *c;
    redisReply *rep;
    const char *a[] = { "-s", r ? r->url : "", "h", "true", NULL };
    cr_assert_not_null(r);
    snprintf(name, sizeof name, "127.0.0.1:%d", r->port);
    rep = hlt_cmd(r, "HSET h f 1");
    freeReplyObject(rep);
    rep = hlt_cmd(r, "RPUSH {g}:fence x");
    freeReplyObject(rep);
    for (int fencing = 1; fencing >= 0; fencing--) {
        hilock_options o = hlt_options((const char *[]){ r->url }, 1);
        o.retry_delay_ms = 50;   /* the library's default */
        o.fencing = fencing;
        c = hlt_client_new(&o);
        cr_assert_eq(hilock_acquire(c, "h", 5000, 0, &l), HILOCK_EREPLY);
        snprintf(want, sizeof want, "%s: WRONGTYPE: h holds a hash, not a lock", name);
        cr_assert_str_eq(hilock_client_errmsg(c), want, "fencing %d", fencing);
        hilock_client_free(c);
    }
    hilock_options o2 = hlt_options((const char *[]){ r->url }, 1);
    o2.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o2);
    cr_assert_eq(hilock_acquire(c, "g", 5000, 0, &l), HILOCK_EREPLY);
    snprintf(want, sizeof want, "%s: WRONGTYPE: its fence counter {g}:fence holds a list, not a number", name);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    cr_assert_eq(hlt_exists(r, "g"), 0, "the grant was undone");
    /* release, extend, check of a lock whose key became a set */
    cr_assert_eq(hilock_acquire(c, "w", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    rep = hlt_cmd(r, "DEL w");
    freeReplyObject(rep);
    rep = hlt_cmd(r, "SADD w x");
    freeReplyObject(rep);
    cr_assert_eq(hilock_extend(l, 5000), HILOCK_EREPLY);
    snprintf(want, sizeof want, "extend: %s: WRONGTYPE: w holds a set, not a lock", name);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    cr_assert_eq(hilock_check(l), HILOCK_EREPLY);
    snprintf(want, sizeof want, "check: %s: WRONGTYPE: w holds a set, not a lock", name);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    cr_assert_eq(hilock_release(l), HILOCK_EREPLY);
    snprintf(want, sizeof want, "release: %s: WRONGTYPE: w holds a set, not a lock", name);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    hilock_free(l);
    hilock_client_free(c);
    cr_assert_eq(run(r, a), 69);
    snprintf(want, sizeof want, "hilock: lock h: %s: WRONGTYPE: h holds a hash, not a lock\n", name);
    cr_assert_str_eq(hlt_slurp(r, "err.txt"), want);
    rep = hlt_cmd(r, "HLEN h");
    cr_assert_eq(rep->integer, 1, "the hash is untouched");
    freeReplyObject(rep);
    hlt_redis_stop(r);
}

/* ---- counts ---- */

Test(messages, one_key_is_one_key_not_one_keys)
{
    hlt_redis *r = hlt_redis_start(NULL);
    const char *a[] = { "-s", r ? r->url : "", "inventory", "solo", NULL };
    const char *o;
    redisReply *rep;
    cr_assert_not_null(r);
    rep = hlt_cmd(r, "SET solo 1700000000");
    freeReplyObject(rep);
    cr_assert_eq(run(r, a), 0, "%s", hlt_slurp(r, "err.txt"));
    o = hlt_slurp(r, "out.txt");
    cr_assert(!strncmp(o, "hilock inventory: 1 key on 1 master", 35), "%s", o);
    cr_assert(strstr(o, "\nfamily \"solo\": 1 key\n"), "%s", o);
    cr_assert(strstr(o, "! 1 DEAD LEGACY HOLDER: "), "%s", o);
    cr_assert_null(strstr(o, "1 keys"), "%s", o);
    cr_assert_eq(hlt_dbsize(r), 1);
    hlt_redis_stop(r);
}

Test(messages, a_long_key_is_cut_to_64_bytes_in_the_librarys_messages)
{
    hlt_redis *r = hlt_redis_started(NULL);
    char key[4001], want[600];
    hilock *l = NULL;
    hilock_client *c;
    redisReply *rep;
    memset(key, 'k', 4000);
    key[4000] = '\0';
    rep = hlt_cmd(r, "SET %s x", key);
    freeReplyObject(rep);
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, key, 5000, 0, &l), HILOCK_BUSY);
    snprintf(want, sizeof want, "%.64s...(4000 bytes): held by another owner; %.64s...(4000 bytes) has no TTL: it "
             "will never expire by itself (see hilock inspect %.64s...(4000 bytes); hilock break removes it)",
             key, key, key);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    rep = hlt_cmd(r, "DEL %s", key);
    freeReplyObject(rep);
    cr_assert_eq(hilock_acquire(c, key, 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(hilock_release(l), HILOCK_NOT_HELD);
    snprintf(want, sizeof want, "release %.64s...(4000 bytes): already released", key);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    cr_assert_str_eq(hilock_key(l), key, "hilock_key is the key itself");
    hilock_free(l);
    hilock_client_free(c);
    cr_assert_eq(hlt_exists(r, key), 0);
    hlt_redis_stop(r);
}

/* ---- issue 23: a password is hidden whole, whatever it holds; the key once; durations ---- */

Test(messages, a_password_with_a_slash_query_or_hash_is_never_echoed_by_the_command)
{
    hlt_redis *r = hlt_redis_start(NULL);
    static const char *const cases[][2] = {
        { "redis://:my/Sekr1t@127.0.0.1:6379", "(redis://:***@127.0.0.1:6379): missing host" },
        { "redis://:my?Sekr1t@127.0.0.1:6379", "(redis://:***@127.0.0.1:6379): unexpected query ('?') in URL (only ?db=N)" },
        { "redis://u:my#Sekr1t@127.0.0.1:6379", "(redis://u:***@127.0.0.1:6379): unexpected '#' in redis:// "
          "URL (Sentinel URLs are redis-sentinel://)" },
    };
    char want[300];
    cr_assert_not_null(r);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *a[] = { "-s", cases[i][0], "job", "touch", "ran", NULL };
        const char *b[] = { "job", "touch", "ran", NULL };
        snprintf(want, sizeof want, "hilock: server 1 of 1 %s\n", cases[i][1]);
        cr_assert_eq(run(r, a), 64);
        cr_assert_str_eq(hlt_slurp(r, "err.txt"), want);
        cr_assert_eq(run_with_servers(r, cases[i][0], b), 64);
        cr_assert_str_eq(hlt_slurp(r, "err.txt"), want, "HILOCK_SERVERS");
    }
    {   /* and the library's own text, which the command echoes */
        hilock_options o;
        hilock_client *c = NULL;
        const char *url = "redis://alice:p/Sekr1t@127.0.0.1:6379";
        hilock_options_init(&o);
        o.servers = &url;
        o.nservers = 1;
        cr_assert_eq(hilock_client_new(&o, &c), HILOCK_EINVAL);
        cr_assert_str_eq(hilock_last_config_error(), "server 1 of 1 (redis://alice:***@127.0.0.1:6379): bad port (want 1..65535)");
    }
    cr_assert_eq(access(hlt_path(r, "ran"), F_OK), -1, "COMMAND must not run");
    cr_assert_eq(hlt_dbsize(r), 0);
    hlt_redis_stop(r);
}

/* The number of times needle occurs in s */
static int count_of(const char *s, const char *needle)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)) != NULL; p += strlen(needle)) n++;
    return n;
}

/* The command's busy (-n -v) and release messages name a long key and one with control
 * characters once: it strips the library's form of the key by the library's own rule. */
Test(messages, the_command_names_a_long_or_unprintable_key_once_when_busy_and_on_release)
{
    hlt_redis *r = hlt_redis_started(NULL);
    char big[4001], huge[5001], want[400];
    const char *keys[] = { big, "a\nb\x1b" };
    const char *shown[] = { "...(4000 bytes)", "a\\x0ab\\x1b" };
    memset(big, 'k', 4000);
    big[4000] = '\0';
    for (int i = 0; i < 2; i++) {
        const char *busy[] = { "-s", r->url, "-n", "-v", keys[i], "true", NULL };
        const char *lost[] = { "-s", r->url, keys[i], "sh", "-c", "touch up; i=0; while [ -e up ] && "
                               "[ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done", NULL };
        const char *err;
        redisReply *rep = hlt_cmd(r, "SET %s x PX 50000", keys[i]);
        freeReplyObject(rep);
        cr_assert_eq(run(r, busy), 1);
        err = hlt_slurp(r, "err.txt");
        cr_assert(!strncmp(err, "hilock: busy: ", 14) && strstr(err, ": held by another owner, expires in "),
                  "%s", err);
        cr_assert_eq(count_of(err, shown[i]), 1, "%s", err);
        cr_assert_eq(hlt_exists(r, keys[i]), 1, "the holder's key is untouched");
        rep = hlt_cmd(r, "DEL %s", keys[i]);
        freeReplyObject(rep);
        {   /* COMMAND runs until the test takes its key away: the release finds it gone */
            pid_t pid = -1;
            char *argv[16];
            int n = 0;
            cr_assert_eq(hlt_built_bin(bin, sizeof bin, "hilock"), 0);
            argv[n++] = bin;
            for (const char *const *a = lost; *a; a++) argv[n++] = (char *)*a;
            argv[n] = NULL;
            unlink(hlt_path(r, "up"));
            pid = fork();
            cr_assert(pid >= 0);
            if (pid == 0) {
                int e = open(hlt_path(r, "err.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0600);
                if (e < 0 || chdir(r->dir) < 0) _exit(120);
                dup2(e, 2);
                execv(bin, argv);
                _exit(121);
            }
            for (int t = 0; t < 500 && access(hlt_path(r, "up"), F_OK); t++) usleep(10000);
            cr_assert_eq(access(hlt_path(r, "up"), F_OK), 0, "%s", hlt_slurp(r, "err.txt"));
            rep = hlt_cmd(r, "DEL %s", keys[i]);
            freeReplyObject(rep);
            unlink(hlt_path(r, "up"));
            cr_assert_eq(hlt_reap(pid, 20000), 75);
        }
        err = hlt_slurp(r, "err.txt");
        cr_assert(!strncmp(err, "hilock: lock lost before COMMAND ended: ", 40), "%s", err);
        cr_assert_eq(count_of(err, shown[i]), 1, "%s", err);
        cr_assert_eq(hlt_exists(r, keys[i]), 0);
    }
    memset(huge, 'k', 5000);
    huge[5000] = '\0';
    {
        const char *a[] = { "-s", r->url, huge, "true", NULL };
        cr_assert_eq(run(r, a), 64);
        snprintf(want, sizeof want, "hilock: lock %.64s...(5000 bytes): key is longer than 4096 bytes\n", huge);
        cr_assert_str_eq(hlt_slurp(r, "err.txt"), want);
        cr_assert_eq(count_of(hlt_slurp(r, "err.txt"), "...(5000 bytes)"), 1);
    }
    cr_assert_eq(hlt_exists(r, huge), 0);
    hlt_redis_stop(r);
}

/* ---- each call's own words ---- */

/* With the failover guard, a script that fails (WRONGTYPE) is not also judged by
 * failover.lua, whose round trip used to wipe the node's words: "extend: " and nothing. */
Test(messages, an_extend_with_the_failover_guard_names_a_key_of_another_type)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_options o;
    hilock_client *c = NULL;
    hilock *l = NULL;
    char want[300];
    const char *url;
    redisReply *rep;
    HLT_NEEDS(40000, "failover awareness needs Redis 4.0");
    cr_assert_not_null(r);
    url = r->url;
    o = hlt_options(&url, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    o.failover_guard = 1;
    c = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(c, "w", 5000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(c));
    rep = hlt_cmd(r, "DEL w");
    freeReplyObject(rep);
    rep = hlt_cmd(r, "HSET w f 1");
    freeReplyObject(rep);
    cr_assert_eq(hilock_extend(l, 60000), HILOCK_EREPLY);
    snprintf(want, sizeof want, "extend: 127.0.0.1:%d: WRONGTYPE: w holds a hash, not a lock", r->port);
    cr_assert_str_eq(hilock_client_errmsg(c), want);
    hilock_free(l);
    hilock_client_free(c);
    rep = hlt_cmd(r, "HLEN w");
    cr_assert_eq(rep->integer, 1, "the hash is untouched");
    freeReplyObject(rep);
    hlt_redis_stop(r);
}

typedef struct own_words {
    hilock_client *c;
    hilock_status  st;
    char           err[300];
    int           *left;
} own_words;

static void on_own_words(hilock_status st, hilock *l, void *arg)
{
    own_words *w = arg;
    w->st = st;
    snprintf(w->err, sizeof w->err, "%s", hilock_client_errmsg(w->c));
    hilock_free(l);
    --*w->left;
}

/* On an event loop, calls run while one waits: an acquire refused (NOPERM) whose undo takes a
 * round trip must end with its own words, not those of a busy acquire that ran meanwhile. */
Test(messages, a_call_on_the_loop_ends_with_its_own_words_not_another_calls)
{
    hlt_redis *r = hlt_redis_start(NULL);
    hilock_client *holder, *c;
    hilock *hy = NULL;
    own_words w[9];
    char url[300];
    uv_loop_t loop;
    int left = 9;
    redisReply *rep;
    HLT_NEEDS(60000, "no ACL before Redis 6.0");
    cr_assert_not_null(r);
    rep = hlt_cmd(r, "ACL SETUSER u on >p ~*y* +@all");
    freeReplyObject(rep);
    hilock_options o = hlt_options((const char *[]){ r->url }, 1);
    o.retry_delay_ms = 50;   /* the library's default */
    holder = hlt_client_new(&o);
    cr_assert_eq(hilock_acquire(holder, "y", 30000, 0, &hy), HILOCK_OK, "%s", hilock_client_errmsg(holder));
    snprintf(url, sizeof url, "redis://u:p@127.0.0.1:%d", r->port);
    hilock_options o2 = hlt_options((const char *[]){ url }, 1);
    o2.retry_delay_ms = 50;   /* the library's default */
    c = hlt_client_new(&o2);
    cr_assert_eq(uv_loop_init(&loop), 0);
    cr_assert_eq(hilock_libuv_attach(c, &loop), HILOCK_OK, "%s", hilock_client_errmsg(c));
    for (int i = 0; i < 9; i++) {
        w[i].c = c;
        w[i].left = &left;
        w[i].err[0] = '\0';
        cr_assert_eq(hilock_acquire_async(c, i ? "y" : "x", 5000, 0, on_own_words, &w[i]), HILOCK_OK);
    }
    for (long long end = hlt_now_ms() + 10000; left > 0 && hlt_now_ms() < end;) uv_run(&loop, UV_RUN_ONCE);
    cr_assert_eq(left, 0, "the loop's acquires never ended");
    cr_assert_eq(w[0].st, HILOCK_EAUTH, "x: %s", hilock_strerror(w[0].st));
    cr_assert(strstr(w[0].err, "NOPERM") && !strstr(w[0].err, "held by another owner"), "x's words: %s", w[0].err);
    for (int i = 1; i < 9; i++) {
        cr_assert_eq(w[i].st, HILOCK_BUSY);
        cr_assert(strstr(w[i].err, "y: held by another owner"), "y's words: %s", w[i].err);
    }
    hilock_client_free(c);
    uv_run(&loop, UV_RUN_NOWAIT);
    cr_assert_eq(uv_loop_close(&loop), 0);
    cr_assert_eq(hlt_exists(r, "x"), 0, "nothing written for x");
    cr_assert_eq(hilock_release(hy), HILOCK_OK);
    hilock_free(hy);
    hilock_client_free(holder);
    hlt_redis_stop(r);
}
