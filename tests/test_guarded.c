/* SPDX-License-Identifier: BSD-3-Clause */
/* test_guarded.c -- hilock_guarded_command (issue 38): a command that runs only while the lock
 * holds, on one real redis-server. Every test asserts the status, the reply, and what the
 * command did or did not do, read back on a separate connection: writes run while held and
 * not after a DEL, an expiry, a release or a takeover; a permit removed from its set; the
 * shared/exclusive and fair kinds; a refused command's error reply; replies past the client's
 * limits (the connection stays); commands a script may not run; keys that move (COMMAND
 * GETKEYS); min_replicas (WAIT); Redlock and legacy locks refused; bad input. */
#include <criterion/criterion.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "checks.h"
#include "clients.h"
#include "fixture.h"
#include "hilock.h"
#include "hilock_legacy.h"
#include "hilock_async.h"
#include "hilock_observe.h"
#include "scenario.h"

static hlt_redis *R;

static void setup(void)
{
    R = hlt_redis_start(NULL);
    cr_assert_not_null(R, "redis-server did not start");
}

static void teardown(void) { hlt_redis_stop(R); }

TestSuite(guarded, .init = setup, .fini = teardown, .timeout = 60);

static hilock *must_lock(hilock_client *c, const char *key, int64_t ttl)
{
    hilock *l = NULL;
    hilock_status st = hilock_acquire(c, key, ttl, 0, &l);
    cr_assert_eq(st, HILOCK_OK, "acquire %s: %s (%s)", key, hilock_strerror(st), hilock_client_errmsg(c));
    return l;
}

/* hilock_guarded_command on a C-string argv (NULL-terminated list). */
#define G(l, reply, ...) guarded((l), (reply), (const char *[]){__VA_ARGS__, NULL})
static hilock_status guarded(hilock *l, hilock_reply **reply, const char **argv)
{
    int argc = 0;
    while (argv[argc]) argc++;
    return hilock_guarded_command(l, argc, argv, NULL, reply);
}

/* The same through a runner (scenario.h): blocking, or hilock_guarded_command_async on a loop. */
#define GR(run, l, reply, ...) guarded_run((run), (l), (reply), (const char *[]){__VA_ARGS__, NULL})
static hilock_status guarded_run(hlt_run *run, hilock *l, hilock_reply **reply, const char **argv)
{
    int argc = 0;
    while (argv[argc]) argc++;
    return hlt_run_guarded(run, l, argc, argv, NULL, reply);
}

static hilock *run_lock(hlt_run *run, const char *key, int64_t ttl)
{
    hilock *l = NULL;
    hilock_status st = hlt_run_acquire(run, key, ttl, 0, &l);
    cr_assert_eq(st, HILOCK_OK, "acquire %s: %s (%s)", key, hilock_strerror(st), hlt_run_errmsg(run));
    return l;
}

static hlt_run *runner(hlt_mode mode)
{
    hilock_options o = hlt_options((const char *[]){R->url}, 1);
    return hlt_run_new(&o, mode);
}

static void assert_gone(const char *key)
{
    cr_assert_eq(hlt_exists(R, key), 0, "%s was written", key);
}

static void assert_value(const char *key, const char *want)
{
    char *v = hlt_get(R, key);
    cr_assert(v && !strcmp(v, want), "%s is %s, not %s", key, v ? v : "(none)", want);
    free(v);
}

HLT_SCENARIO(guarded, a_write_runs_while_held)
{
    hlt_run *run = runner(mode);
    hilock *l = run_lock(run, "g:lock", 30000);
    hilock_reply *r = (hilock_reply *)1;
    cr_assert_eq(GR(run, l, &r, "SET", "g:job", "done"), HILOCK_OK, "%s", hlt_run_errmsg(run));
    cr_assert_not_null(r);
    cr_assert_eq(r->type, HILOCK_REPLY_STATUS);
    cr_assert_str_eq(r->str, "OK");
    cr_assert_eq(r->len, 2);
    assert_value("g:job", "done");
    hilock_reply_free(r);
    /* the reply's shapes: an integer, a nil, a string, an array */
    cr_assert_eq(GR(run, l, &r, "INCR", "g:n"), HILOCK_OK);
    cr_assert(r->type == HILOCK_REPLY_INTEGER && r->integer == 1);
    hilock_reply_free(r);
    cr_assert_eq(GR(run, l, &r, "GET", "g:none"), HILOCK_OK);
    cr_assert_eq(r->type, HILOCK_REPLY_NIL);
    cr_assert_null(r->str);
    hilock_reply_free(r);
    cr_assert_eq(GR(run, l, &r, "RPUSH", "g:list", "a", "b"), HILOCK_OK);
    hilock_reply_free(r);
    cr_assert_eq(GR(run, l, &r, "LRANGE", "g:list", "0", "-1"), HILOCK_OK);
    cr_assert(r->type == HILOCK_REPLY_ARRAY && r->elements == 2);
    cr_assert_str_eq(r->element[0]->str, "a");
    cr_assert_str_eq(r->element[1]->str, "b");
    hilock_reply_free(r);
    /* MSET's keys come from the server's key specs (first 1, last -1, step 2) */
    cr_assert_eq(GR(run, l, &r, "MSET", "g:m1", "1", "g:m2", "2"), HILOCK_OK, "%s", hlt_run_errmsg(run));
    hilock_reply_free(r);
    assert_value("g:m2", "2");
    cr_assert_eq(hlt_run_release(run, l), HILOCK_OK);
    cr_assert_eq(GR(run, l, &r, "SET", "g:job", "late"), HILOCK_NOT_HELD);
    cr_assert_null(r);
    cr_assert(strstr(hlt_run_errmsg(run), "released"), "%s", hlt_run_errmsg(run));
    assert_value("g:job", "done");
    hilock_free(l);
    hlt_run_free(run);
}

Test(guarded, binary_arguments_with_lengths)
{
    hilock_client *c = hlt_client(R->url);
    hilock *l = must_lock(c, "g:bin", 30000);
    const char *argv[] = {"SET", "g:b\0in", "v\0x"};
    const size_t len[] = {3, 6, 3};
    hilock_reply *r = NULL;
    redisReply *rep;
    cr_assert_eq(hilock_guarded_command(l, 3, argv, len, &r), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_reply_free(r);
    rep = redisCommand(hlt_cli(R), "GET %b", "g:b\0in", (size_t)6);
    cr_assert(rep && rep->type == REDIS_REPLY_STRING && rep->len == 3 && !memcmp(rep->str, "v\0x", 3));
    freeReplyObject(rep);
    cr_assert_eq(hilock_guarded_command(l, 2, (const char *[]){"GET", "g:b\0in"}, (const size_t[]){3, 6}, &r),
                 HILOCK_OK);
    cr_assert(r->type == HILOCK_REPLY_STRING && r->len == 3 && !memcmp(r->str, "v\0x", 3) && r->str[3] == 0);
    hilock_reply_free(r);
    hlt_release_gone(R, c, l, "g:bin");
    hilock_client_free(c);
}

HLT_SCENARIO(guarded, nothing_runs_after_a_del)
{
    hlt_run *run = runner(mode);
    hilock *l = run_lock(run, "g:del", 30000);
    hilock_reply *r = (hilock_reply *)1;
    freeReplyObject(hlt_cmd(R, "DEL g:del"));
    cr_assert_eq(GR(run, l, &r, "SET", "g:job", "late"), HILOCK_NOT_HELD);
    cr_assert_null(r);
    cr_assert(strstr(hlt_run_errmsg(run), "nothing ran"), "%s", hlt_run_errmsg(run));
    assert_gone("g:job");
    cr_assert_eq(hilock_validity_ms(l), 0);
    hilock_free(l);
    hlt_run_free(run);
}

static int key_gone(const char *key) { return hlt_exists(R, key) == 0; }

HLT_SCENARIO(guarded, nothing_runs_after_an_expiry)
{
    hlt_run *run = runner(mode);
    hilock *l = run_lock(run, "g:exp", 200);
    hilock_reply *r = NULL;
    long long t0 = hlt_now_ms();
    while (!key_gone("g:exp") && hlt_now_ms() - t0 < 10000) hlt_run_sleep(run, 20);
    cr_assert_eq(GR(run, l, &r, "SET", "g:job", "late"), HILOCK_NOT_HELD, "%s", hlt_run_errmsg(run));
    cr_assert_null(r);
    assert_gone("g:job");
    hilock_free(l);
    hlt_run_free(run);
}

Test(guarded, nothing_is_sent_after_a_release)
{
    hilock_client *c = hlt_client(R->url);
    hilock *l = must_lock(c, "g:rel", 30000);
    hilock_reply *r = NULL;
    long long calls;
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    calls = hlt_script_calls(R);
    cr_assert_eq(G(l, &r, "SET", "g:job", "late"), HILOCK_NOT_HELD);
    cr_assert_null(r);
    cr_assert(strstr(hilock_client_errmsg(c), "released"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hlt_script_calls(R), calls, "a script ran");
    assert_gone("g:job");
    hilock_free(l);
    hilock_client_free(c);
}

Test(guarded, nothing_runs_for_a_holder_taken_over)
{
    hilock_client *c = hlt_client(R->url), *d = hlt_client(R->url);
    hilock *l = must_lock(c, "g:take", 30000), *m;
    hilock_reply *r = NULL;
    freeReplyObject(hlt_cmd(R, "DEL g:take"));
    m = must_lock(d, "g:take", 30000);
    cr_assert_eq(G(l, &r, "SET", "g:job", "old"), HILOCK_NOT_HELD);
    cr_assert(strstr(hilock_client_errmsg(c), "another owner"), "%s", hilock_client_errmsg(c));
    assert_gone("g:job");
    cr_assert_eq(G(m, &r, "SET", "g:job", "new"), HILOCK_OK, "%s", hilock_client_errmsg(d));
    hilock_reply_free(r);
    assert_value("g:job", "new");
    hlt_release_gone(R, d, m, "g:take");
    hilock_free(l);
    hilock_client_free(c);
    hilock_client_free(d);
}

HLT_SCENARIO(guarded, a_permit_and_its_removal)
{
    HLT_NEEDS(30200, "semaphores need Redis 3.2");
    hlt_run *run = runner(mode);
    hilock *l = NULL;
    hilock_reply *r = NULL;
    cr_assert_eq(hlt_run_sem_acquire(run, "g:sem", 3, 30000, 0, &l), HILOCK_OK, "%s", hlt_run_errmsg(run));
    cr_assert_eq(GR(run, l, &r, "INCR", "g:count"), HILOCK_OK, "%s", hlt_run_errmsg(run));
    cr_assert(r && r->type == HILOCK_REPLY_INTEGER && r->integer == 1);
    hilock_reply_free(r);
    freeReplyObject(hlt_cmd(R, "ZREM g:sem %s", hilock_token(l)));
    cr_assert_eq(GR(run, l, &r, "INCR", "g:count"), HILOCK_NOT_HELD, "%s", hlt_run_errmsg(run));
    cr_assert_null(r);
    assert_value("g:count", "1");
    hilock_free(l);
    hlt_run_free(run);
}

Test(guarded, shared_exclusive_and_fair)
{
    HLT_NEEDS(30200, "shared/exclusive and fair locks need Redis 3.2");
    hilock_client *c = hlt_client(R->url);
    hilock_options o = hlt_options((const char *[]){R->url}, 1);
    hilock_client *f;
    hilock *l = NULL;
    hilock_reply *r = NULL;
    cr_assert_eq(hilock_rw_acquire(c, "g:rw", HILOCK_EXCLUSIVE, 30000, 0, &l), HILOCK_OK);
    cr_assert_eq(G(l, &r, "SET", "g:x", "1"), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_reply_free(r);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    cr_assert_eq(hilock_rw_acquire(c, "g:rw", HILOCK_SHARED, 30000, 0, &l), HILOCK_OK);
    cr_assert_eq(G(l, &r, "GET", "g:x"), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert_str_eq(r->str, "1");
    hilock_reply_free(r);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    cr_assert_eq(G(l, &r, "SET", "g:x", "2"), HILOCK_NOT_HELD);
    assert_value("g:x", "1");
    hilock_free(l);
    o.fair = 1;
    f = hlt_client_new(&o);
    l = must_lock(f, "g:fair", 30000);
    cr_assert_eq(G(l, &r, "SET", "g:f", "1"), HILOCK_OK, "%s", hilock_client_errmsg(f));
    hilock_reply_free(r);
    assert_value("g:f", "1");
    freeReplyObject(hlt_cmd(R, "DEL g:fair"));
    cr_assert_eq(G(l, &r, "SET", "g:f", "2"), HILOCK_NOT_HELD);
    assert_value("g:f", "1");
    hilock_free(l);
    hilock_client_free(f);
    hilock_client_free(c);
}

HLT_SCENARIO(guarded, a_refused_command_is_ereply_with_its_error)
{
    hlt_run *run = runner(mode);
    hilock *l = run_lock(run, "g:ref", 30000);
    hilock_reply *r = NULL;
    freeReplyObject(hlt_cmd(R, "SET g:s abc"));
    cr_assert_eq(GR(run, l, &r, "INCR", "g:s"), HILOCK_EREPLY);
    cr_assert(r && r->type == HILOCK_REPLY_ERROR, "no error reply");
    cr_assert(strstr(r->str, "not an integer"), "%s", r->str);
    cr_assert(strstr(hlt_run_errmsg(run), "not an integer"), "%s", hlt_run_errmsg(run));
    hilock_reply_free(r);
    assert_value("g:s", "abc");
    cr_assert_eq(GR(run, l, &r, "NOSUCHCOMMAND", "x"), HILOCK_EREPLY);
    cr_assert(r && r->type == HILOCK_REPLY_ERROR);
    hilock_reply_free(r);
    cr_assert_eq(GR(run, l, &r, "GET"), HILOCK_EREPLY);   /* wrong number of arguments */
    cr_assert(r && r->type == HILOCK_REPLY_ERROR);
    hilock_reply_free(r);
    cr_assert_eq(hlt_run_release(run, l), HILOCK_OK);
    hilock_free(l);
    hlt_run_free(run);
}

HLT_SCENARIO(guarded, a_reply_past_the_limits_leaves_the_connection)
{
    hlt_run *run = runner(mode);
    hilock_client *c = hlt_run_client(run);
    hilock *l = run_lock(run, "g:big", 30000);
    hilock_reply *r = NULL;
    hilock_stats s0, s1;
    redisContext *k = hlt_cli(R);
    char *big = malloc(70001);
    memset(big, 'x', 70000);
    big[70000] = 0;
    freeReplyObject(redisCommand(k, "SET g:bigs %s", big));
    for (int i = 0; i < 9000; i += 500) {
        const char *argv[502];
        argv[0] = "RPUSH";
        argv[1] = "g:bigl";
        for (int j = 0; j < 500; j++) argv[2 + j] = "e";
        freeReplyObject(redisCommandArgv(k, 502, argv, NULL));
    }
    cr_assert_eq(GR(run, l, &r, "PING"), HILOCK_OK);
    hilock_reply_free(r);
    hilock_client_stats(c, &s0);
    cr_assert_eq(GR(run, l, &r, "GET", "g:bigs"), HILOCK_EREPLY);
    cr_assert(r && r->type == HILOCK_REPLY_ERROR && strstr(r->str, "reply too large"), "%s", r ? r->str : "");
    hilock_reply_free(r);
    cr_assert_eq(GR(run, l, &r, "LRANGE", "g:bigl", "0", "-1"), HILOCK_EREPLY);
    cr_assert(r && strstr(r->str, "reply too large"), "%s", r ? r->str : "");
    cr_assert(strstr(hlt_run_errmsg(run), "it ran"), "%s", hlt_run_errmsg(run));
    hilock_reply_free(r);
    /* the connection stayed: the next call runs on it */
    cr_assert_eq(GR(run, l, &r, "LLEN", "g:bigl"), HILOCK_OK, "%s", hlt_run_errmsg(run));
    cr_assert_eq(r->integer, 9000);
    hilock_reply_free(r);
    hilock_client_stats(c, &s1);
    cr_assert_eq(s1.connects, s0.connects, "the connection was made anew");
    free(big);
    cr_assert_eq(hlt_run_release(run, l), HILOCK_OK);
    hilock_free(l);
    hlt_run_free(run);
}

HLT_SCENARIO(guarded, commands_a_script_may_not_run_are_refused)
{
    hlt_run *run = runner(mode);
    hilock *l = run_lock(run, "g:no", 30000);
    hilock_reply *r = (hilock_reply *)1;
    redisReply *rep;
    long long calls;
    const char *refused[][5] = {
        {"SUBSCRIBE", "ch", NULL}, {"BLPOP", "g:q", "1", NULL}, {"blpop", "g:q", "0", NULL},
        {"MULTI", NULL}, {"EXEC", NULL}, {"WATCH", "g:q", NULL}, {"EVAL", "return 1", "0", NULL},
        {"BRPOPLPUSH", "g:q", "g:q2", "0"}, {"MONITOR", NULL}, {"XREAD", "STREAMS", "g:s", "0"},
    };
    freeReplyObject(hlt_cmd(R, "RPUSH g:q kept"));
    calls = hlt_script_calls(R);
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        cr_assert_eq(guarded_run(run, l, &r, refused[i]), HILOCK_EINVAL, "%s", refused[i][0]);
        cr_assert_null(r);
        cr_assert(strstr(hlt_run_errmsg(run), "nothing"), "%s", hlt_run_errmsg(run));
    }
    cr_assert_eq(hlt_script_calls(R), calls, "a script ran");
    rep = hlt_cmd(R, "LLEN g:q");
    cr_assert(rep && rep->type == REDIS_REPLY_INTEGER && rep->integer == 1, "the list was popped");
    freeReplyObject(rep);
    cr_assert_eq(hlt_run_release(run, l), HILOCK_OK);
    hilock_free(l);
    hlt_run_free(run);
}

Test(guarded, keys_that_move_are_asked_for)
{
    hilock_client *c = hlt_client(R->url);
    hilock *l = must_lock(c, "g:mv", 30000);
    hilock_reply *r = NULL;
    /* (2.8 has no COMMAND GETKEYS: one server runs it without its keys declared) */
    freeReplyObject(hlt_cmd(R, "ZADD g:z 1 a"));
    cr_assert_eq(G(l, &r, "ZUNIONSTORE", "g:dest", "1", "g:z"), HILOCK_OK, "%s", hilock_client_errmsg(c));
    cr_assert(r->type == HILOCK_REPLY_INTEGER && r->integer == 1);
    hilock_reply_free(r);
    cr_assert_eq(hlt_exists(R, "g:dest"), 1);
    hlt_release_gone(R, c, l, "g:mv");
    hilock_client_free(c);
}

Test(guarded, bad_input_changes_nothing)
{
    hilock_client *c = hlt_client(R->url);
    hilock *l = must_lock(c, "g:bad", 30000);
    hilock_reply *r = (hilock_reply *)1;
    const char *argv[] = {"SET", "g:job", "x"};
    long long calls = hlt_script_calls(R);
    cr_assert_eq(hilock_guarded_command(NULL, 3, argv, NULL, &r), HILOCK_EINVAL);
    cr_assert_null(r);
    cr_assert_eq(hilock_guarded_command(l, 3, argv, NULL, NULL), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "reply is NULL"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_guarded_command(l, 3, NULL, NULL, &r), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "argv is NULL"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_guarded_command(l, 0, argv, NULL, &r), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "argc is 0"), "%s", hilock_client_errmsg(c));
    cr_assert_eq(hilock_guarded_command(l, -1, argv, NULL, &r), HILOCK_EINVAL);
    cr_assert_eq(hilock_guarded_command(l, HILOCK_GUARDED_MAX_ARGS + 1, argv, NULL, &r), HILOCK_EINVAL);
    cr_assert_eq(hilock_guarded_command(l, 3, (const char *[]){"SET", NULL, "x"}, NULL, &r), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(c), "argv[1] is NULL"), "%s", hilock_client_errmsg(c));
    cr_assert_null(r);
    cr_assert_eq(hlt_script_calls(R), calls, "a script ran");
    assert_gone("g:job");
    hlt_release_gone(R, c, l, "g:bad");
    hilock_client_free(c);
}

static void never_done(hilock_status st, hilock *l, hilock_reply *reply, void *arg)
{
    (void)st, (void)l, (void)reply;
    ++*(int *)arg;
}

HLT_SCENARIO(guarded, bad_input_on_the_loop_is_refused_at_once)
{
    hlt_run *run = runner(mode);
    hilock *l = run_lock(run, "g:badl", 30000);
    hilock_reply *r = NULL;
    int ran = 0;
    const char *argv[] = {"SET", "g:job", "x"};
    if (!hlt_run_on_loop(run)) {   /* a blocking client's _async call: not attached */
        cr_assert_eq(hilock_guarded_command_async(l, 3, argv, NULL, never_done, &ran), HILOCK_EINVAL);
        cr_assert(strstr(hilock_client_errmsg(hlt_run_client(run)), "not attached"), "%s",
                  hilock_client_errmsg(hlt_run_client(run)));
    } else {
        cr_assert_eq(hilock_guarded_command_async(NULL, 3, argv, NULL, never_done, &ran), HILOCK_EINVAL);
        cr_assert_eq(hilock_guarded_command_async(l, 3, argv, NULL, NULL, &ran), HILOCK_EINVAL);
        cr_assert_eq(hilock_guarded_command_async(l, 0, argv, NULL, never_done, &ran), HILOCK_EINVAL);
        cr_assert_eq(hilock_guarded_command_async(l, 3, NULL, NULL, never_done, &ran), HILOCK_EINVAL);
        cr_assert_eq(hilock_guarded_command_async(l, 3, (const char *[]){"SET", NULL, "x"}, NULL, never_done, &ran),
                     HILOCK_EINVAL);
        cr_assert(strstr(hilock_client_errmsg(hlt_run_client(run)), "argv[1] is NULL"), "%s",
                  hilock_client_errmsg(hlt_run_client(run)));
        /* the blocking call on an attached client: refused, nothing sent */
        cr_assert_eq(hilock_guarded_command(l, 3, argv, NULL, &r), HILOCK_EINVAL);
        cr_assert_null(r);
    }
    hlt_run_sleep(run, 50);
    cr_assert_eq(ran, 0, "done ran for a call refused at once");
    assert_gone("g:job");
    cr_assert_eq(hlt_run_release(run, l), HILOCK_OK);
    hilock_free(l);
    hlt_run_free(run);
}

Test(guarded, legacy_and_redlock_locks_are_refused)
{
    hlt_redis *R2 = hlt_redis_start(NULL);
    hilock_options o = hlt_options((const char *[]){R->url, R2->url}, 2);
    hilock_client *two = hlt_client_new(&o), *lc = hlt_codec_client(R->url, "doc", 0);
    hilock *l = NULL;
    hilock_reply *r = NULL;
    cr_assert_eq(hilock_acquire(two, "g:red", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(two));
    cr_assert_eq(G(l, &r, "SET", "g:job", "x"), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(two), "Redlock"), "%s", hilock_client_errmsg(two));
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    cr_assert_eq(hilock_legacy_acquire(lc, "g:leg", 30000, 0, &l), HILOCK_OK, "%s", hilock_client_errmsg(lc));
    cr_assert_eq(G(l, &r, "SET", "g:job", "x"), HILOCK_EINVAL);
    cr_assert(strstr(hilock_client_errmsg(lc), "timestamp"), "%s", hilock_client_errmsg(lc));
    cr_assert_null(r);
    cr_assert_eq(hilock_release(l), HILOCK_OK);
    hilock_free(l);
    assert_gone("g:job");
    hilock_client_free(two);
    hilock_client_free(lc);
    hlt_redis_stop(R2);
}

static int replica_synced(hlt_redis *rep)
{
    long long t0 = hlt_now_ms();
    while (hlt_now_ms() - t0 < 20000) {
        if (hlt_info_int(rep, "replication", "master_link_status") >= 0) {
            redisReply *x = hlt_cmd(rep, "INFO replication");
            int up = x && x->str && strstr(x->str, "master_link_status:up");
            freeReplyObject(x);
            if (up) return 1;
        }
        hlt_sleep_ms(50);
    }
    return 0;
}

Test(guarded, min_replicas_waits_for_the_write)
{
    HLT_NEEDS(30000, "WAIT is Redis 3.0's");
    char extra[128];
    hlt_redis *rep;
    hilock_options o = hlt_options((const char *[]){R->url}, 1);
    hilock_client *c;
    hilock *l;
    hilock_reply *r = NULL;
    snprintf(extra, sizeof extra, "--%s 127.0.0.1 %d", hlt_replicaof(), R->port);
    rep = hlt_redis_start(extra);
    cr_assert_not_null(rep);
    cr_assert(replica_synced(rep), "the replica did not sync");
    o.min_replicas = 1;
    o.replicas_timeout_ms = 2000;
    c = hlt_client_new(&o);
    l = must_lock(c, "g:wait", 30000);
    cr_assert_eq(G(l, &r, "SET", "g:w", "1"), HILOCK_OK, "%s", hilock_client_errmsg(c));
    hilock_reply_free(r);
    assert_value("g:w", "1");
    hlt_redis_freeze(rep);
    cr_assert_eq(G(l, &r, "SET", "g:w", "2"), HILOCK_EREPLICAS, "%s", hilock_client_errmsg(c));
    cr_assert(r && r->type == HILOCK_REPLY_STATUS, "the command's reply is kept");
    hilock_reply_free(r);
    assert_value("g:w", "2");   /* it ran: only its replication is short */
    hlt_redis_thaw(rep);
    hilock_free(l);
    hilock_client_free(c);
    hlt_redis_stop(rep);
}

/* A keepalive's renewals and guarded commands take turns on the lock (the hook): every write
 * runs, the lock stays valid past its first ttl, and nothing is left once released. */
Test(guarded, guarded_commands_beside_a_keepalive)
{
    hilock_client *c = hlt_client(R->url);
    hilock *l = must_lock(c, "g:ka", 600);
    hilock_reply *r = NULL;
    long long t0 = hlt_now_ms();
    int n = 0;
    cr_assert_eq(hilock_keepalive(l, NULL, NULL), HILOCK_OK, "%s", hilock_client_errmsg(c));
    while (hlt_now_ms() - t0 < 1500) {
        cr_assert_eq(G(l, &r, "INCR", "g:kan"), HILOCK_OK, "%s", hilock_client_errmsg(c));
        hilock_reply_free(r);
        n++;
        hlt_sleep_ms(5);
    }
    cr_assert_gt(hilock_validity_ms(l), 0, "the keepalive let it lapse");
    {
        char want[24];
        snprintf(want, sizeof want, "%d", n);
        assert_value("g:kan", want);
    }
    hlt_release_gone(R, c, l, "g:ka");
    hilock_client_free(c);
}

Test(guarded, reply_free_is_null_safe) { hilock_reply_free(NULL); }
