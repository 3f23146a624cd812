/* SPDX-License-Identifier: BSD-3-Clause */
/* fixture.h -- real redis-server processes for tests and benchmarks.
 * Each server gets its own temp dir, a unix socket there and a free port on 127.0.0.1, and
 * is killed by the kernel if the test process dies (PR_SET_PDEATHSIG). */
#ifndef HILOCK_TEST_FIXTURE_H
#define HILOCK_TEST_FIXTURE_H

#include <sys/types.h>
#include <hiredis/hiredis.h>

typedef struct hlt_redis {
    pid_t pid;
    int   port;
    char  dir[128];
    char  sock[192];
    char  url[256];        /* redis://127.0.0.1:PORT  */
    char  unix_url[256];   /* unix://DIR/redis.sock   */
    char  extra[512];      /* extra redis-server arguments, kept for restarts */
    redisContext *cli;     /* a separate connection for reading back state */
} hlt_redis;

/* Start a server; extra = more redis-server arguments ("--requirepass s3cret"), or NULL.
 * Returns NULL (and prints why) on failure. */
hlt_redis *hlt_redis_start(const char *extra);
/* Stop it (SIGKILL if SIGTERM is not enough), remove its dir, free. NULL-safe. */
void hlt_redis_stop(hlt_redis *r);
/* Kill the process (no cleanup of the struct) / start again on the same port and socket. */
void hlt_redis_kill(hlt_redis *r);
int  hlt_redis_restart(hlt_redis *r);
void hlt_redis_freeze(hlt_redis *r);   /* SIGSTOP */
void hlt_redis_thaw(hlt_redis *r);     /* SIGCONT */

/* Commands on the read-back connection (reconnects if needed). Caller frees the reply. */
redisReply *hlt_cmd(hlt_redis *r, const char *fmt, ...);
/* That connection itself (connected, AUTHed), or NULL if the server does not answer. */
redisContext *hlt_cli(hlt_redis *r);
/* GET as a malloc'd string, NULL if no key. */
char *hlt_get(hlt_redis *r, const char *key);
long long hlt_pttl(hlt_redis *r, const char *key);
long long hlt_exists(hlt_redis *r, const char *key);
long long hlt_dbsize(hlt_redis *r);
/* An integer field of INFO <section> (field as "blocked_clients:" or "cmdstat_get:calls=",
 * matched at the start of a line); -1 if missing. */
long long hlt_info_int(hlt_redis *r, const char *section, const char *field);
/* Wait until r is inside a script (a PING gets no reply, or -BUSY): the connections it made, 0 if never */
int  hlt_redis_wait_busy(hlt_redis *r, long limit_ms);

/* A free TCP port on 127.0.0.1 (bind to 0 and read it back). */
int  hlt_free_port(void);
/* A port on 127.0.0.1 where nothing answers: bound and not listening (a connect is refused)
 * for the rest of the process, so no other suite's server can take it meanwhile, as one
 * found free by hlt_free_port and let go can be. */
int  hlt_dead_port(void);
/* A free port whose cluster bus port (port + 10000, below 65536) is free too: a node whose bus
 * port cannot be bound exits during start-up (a fifth of the ephemeral range is above 55535). */
int  hlt_free_cluster_port(void);
/* SIGPIPE ignored while a fixture waits for a server it started: one that exits during
 * start-up (its port taken in between by another process's server) may close the socket
 * between our connect and our PING, and the test must see a retry, not die of the signal.
 * Returns the disposition to give back to hlt_sigpipe_restore. */
struct sigaction;
void hlt_sigpipe_ignore(struct sigaction *old);
void hlt_sigpipe_restore(const struct sigaction *old);
/* A listening socket on 127.0.0.1 for a fake server or proxy a test forks; -1 if that failed.
 * The port the kernel chose goes to *port, its URL and "host:port" name (as errmsg says it)
 * to url and name, each cap bytes. */
int  hlt_listen(int backlog, int *port, char *url, char *name, size_t cap);
long long hlt_now_ms(void);   /* monotonic */
void hlt_sleep_ms(long ms);
/* Wait for child pid at most limit_ms: its exit status as a shell shows it (128+N for signal
 * N), or -1 if it did not end in time (then it is killed and reaped). */
int  hlt_reap(pid_t pid, long limit_ms);
/* The path of a program built next to this test's directory: $(B)/tests/test_x -> $(B)/name.
 * 0, or -1 if it cannot be found or is not executable. */
int  hlt_built_bin(char *buf, size_t cap, const char *name);
/* The source tree (holding scripts/deps.sh): $HILOCK_SRCDIR, the current directory, or the
 * nearest parent of this binary that holds it. 0, or -1. */
int  hlt_srcdir(char *out, size_t n);

/* The redis-server on PATH (the one every fixture starts): its version as one number,
 * major * 10000 + minor * 100 + patch (2.8.24 -> 20824, 7.0.15 -> 70015), read once from
 * `redis-server --version`; 0 if it cannot be read. hlt_server_name: "Redis 7.0.15",
 * "Valkey 8.0.1". `make test-servers` puts each server of the matrix first on PATH. */
int  hlt_server_version(void);
int  hlt_server_is_valkey(void);
const char *hlt_server_name(void);
/* Server arguments in the words of the redis-server on PATH: the replica-named options of
 * 5.0+ (--replicaof, --replica-serve-stale-data, --cluster-replica-validity-factor) take
 * their older slave-named form before 5.0, and --protected-mode (3.2+) is left out, with its
 * value, before 3.2. hlt_server_args rewrites a whole "--opt value ..." line (split at
 * blanks) into out: 0, or -1 if cap is too small. hlt_server_option maps one option name:
 * opt itself, the old name written to buf, or NULL (leave the option out). Every fixture
 * passes its arguments through them, so a test may write the modern names. */
int  hlt_server_args(const char *args, char *out, size_t cap);
const char *hlt_server_option(const char *opt, char *buf, size_t cap);
/* CLUSTER ADDSLOTS from..to on c, one argument a slot (ADDSLOTSRANGE is 7.0's). */
redisReply *hlt_addslots(redisContext *c, int from, int to);
/* ACL SETUSER with rules split at blanks ("locker on >pw ~* &* +@all"); "&*" (channel rules,
 * 6.2+) is left out before 6.2, where every user may use every channel. A test of ACL users
 * first says HLT_NEEDS(60000, ...): no ACL before 6.0. */
redisReply *hlt_acl_setuser(hlt_redis *r, const char *rules);
/* The command that makes a server a replica: REPLICAOF (5.0+) or SLAVEOF. */
const char *hlt_replicaof(void);
/* In a Criterion test: skip it, as "n/a", when the server is older than VERSION (a number as
 * above), with the reason (what that server lacks). The matrix counts skips as n/a. */
#define HLT_NEEDS(version, reason)                                                         \
    do {                                                                                   \
        if (hlt_server_version() < (version))                                              \
            cr_skip_test("n/a on %s: %s", hlt_server_name(), (reason));                   \
    } while (0)

/* Poll (every 5 ms, limit_ms at most) until at least n clients of r are blocked (INFO clients'
 * blocked_clients: a waiter's BLPOP has reached the server): 1, or 0 if they never were. */
int hlt_redis_wait_blocked(hlt_redis *r, long long n, long limit_ms);

#endif
