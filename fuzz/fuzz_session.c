/* SPDX-License-Identifier: BSD-3-Clause */
/* fuzz_session.c -- libFuzzer target for the engine's reading of a whole server byte stream
 * (src/engine/engine.c): handshake replies (AUTH, SELECT, INFO server, TIME), pending undos, pipelined scripts, NOSCRIPT
 * and the EVAL resend, replies cut short by EOF, replies left over on a reused connection --
 * through complete public calls (acquire, extend, check, release; modern, legacy, Redlock).
 *
 * A thread plays the server on a unix socket: on every connection it reads the request, then
 * sends the fuzz input (after its first byte) as the answer, and closes. Byte 0 picks the
 * client: bit 0 a password (AUTH first), bit 1 a database (SELECT), bit 2 three masters (the
 * same socket under three names, as a server listed twice is refused: Redlock), bit 3 legacy acquire, bit 4 a second round on the same
 * client. Checked: statuses from the enum only, a granted lock has a positive fence, every
 * call returns within its bound (no hang), and no crash, leak, UB or SIGPIPE death. */
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "hilock.h"
#include "hilock_legacy.h"

#define CHECK(cond) do { if (!(cond)) { \
    fprintf(stderr, "fuzz_session: %s:%d: invariant failed: %s\n", __FILE__, __LINE__, #cond); \
    abort(); } } while (0)

#define IO_MS 30

static char dir[64], sock_path[3][108];   /* the socket and two links to it */
static int lfd = -1;
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned char *resp;
static size_t resp_len;

static void *serve(void *arg)
{
    (void)arg;
    for (;;) {
        char buf[8192];
        struct pollfd p;
        unsigned char *copy;
        size_t n, off = 0;
        int fd = accept(lfd, NULL, NULL);
        if (fd < 0) continue;
        p.fd = fd;
        p.events = POLLIN;
        if (poll(&p, 1, 200) > 0 && read(fd, buf, sizeof buf) < 0) {
            close(fd);
            continue;
        }
        pthread_mutex_lock(&mu);
        n = resp_len;
        copy = malloc(n ? n : 1);
        if (copy) memcpy(copy, resp, n);
        pthread_mutex_unlock(&mu);
        while (copy && off < n) {   /* MSG_NOSIGNAL: a client that hung up must not kill us */
            ssize_t w = send(fd, copy + off, n - off, MSG_NOSIGNAL);
            if (w <= 0) break;
            off += (size_t)w;
        }
        free(copy);
        close(fd);
    }
    return NULL;
}

static void start_server(void)
{
    struct sockaddr_un a;
    pthread_t t;
    snprintf(dir, sizeof dir, "/tmp/hilock-fuzz-XXXXXX");
    CHECK(mkdtemp(dir) != NULL);
    for (int i = 0; i < 3; i++) snprintf(sock_path[i], sizeof sock_path[i], "%s/s%d.sock", dir, i);
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    memcpy(a.sun_path, sock_path[0], strlen(sock_path[0]) + 1);
    lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    CHECK(lfd >= 0 && bind(lfd, (struct sockaddr *)&a, sizeof a) == 0 && listen(lfd, 16) == 0);
    CHECK(symlink(sock_path[0], sock_path[1]) == 0 && symlink(sock_path[0], sock_path[2]) == 0);
    CHECK(pthread_create(&t, NULL, serve, NULL) == 0);
    pthread_detach(t);
}

static void cleanup(void)
{
    for (int i = 0; i < 3; i++) unlink(sock_path[i]);
    rmdir(dir);
}

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void check_status(hilock_status st)
{
    CHECK((int)st >= HILOCK_OK && (int)st <= HILOCK_ECANCELED);
}

/* bound: every call here is bounded by a few io/connect timeouts; 2 s means "hangs" */
#define TIMED(st, call) do { long long t0_ = now_ms(); st = (call); check_status(st); \
    CHECK(now_ms() - t0_ < 2000); } while (0)

static void round_trip(hilock_client *c, int legacy)
{
    hilock *l = NULL;
    hilock_status st;
    if (legacy) TIMED(st, hilock_legacy_acquire(c, "lock.fuzz", 1000, 0, &l));
    else TIMED(st, hilock_acquire(c, "fuzz", 1000, 0, &l));
    if (st != HILOCK_OK) {
        CHECK(l == NULL);
        return;
    }
    CHECK(l != NULL && hilock_fence(l) > 0);
    TIMED(st, hilock_extend(l, 1000));
    TIMED(st, hilock_check(l));
    TIMED(st, hilock_release(l));
    hilock_free(l);
}

/* hiredis 0.14 callocs an array's element table as soon as it reads "*<count>" (see
 * fuzz_reply.c): skip such inputs, they test hiredis, not hilock */
static int huge_array(const unsigned char *d, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        long long v = 0;
        size_t j = i + 1;
        if (d[i] != '*') continue;
        while (j < n && d[j] >= '0' && d[j] <= '9' && v < 100000) v = v * 10 + (d[j++] - '0');
        if (v > 4096) return 1;
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size);

int LLVMFuzzerTestOneInput(const unsigned char *data, size_t size)
{
    static int started;
    char url[3][300];
    const char *urls[3];
    hilock_options o;
    hilock_client *c = NULL;
    int opts;
    if (size < 1 || size > 4096 || huge_array(data, size)) return 0;
    if (!started) {
        start_server();
        atexit(cleanup);
        started = 1;
    }
    opts = data[0];
    pthread_mutex_lock(&mu);
    free(resp);
    resp = malloc(size);
    memcpy(resp, data + 1, size - 1);
    resp_len = size - 1;
    pthread_mutex_unlock(&mu);

    for (int i = 0; i < 3; i++) {
        snprintf(url[i], sizeof url[i], "unix://%s%s%s", opts & 1 ? ":s3cret@" : "", sock_path[i],
                 opts & 2 ? "?db=2" : "");
        urls[i] = url[i];
    }
    hilock_options_init(&o);
    o.servers = urls;
    o.nservers = opts & 4 ? 3 : 1;
    o.io_timeout_ms = IO_MS;
    o.connect_timeout_ms = IO_MS;
    o.retry_delay_ms = 1;
    CHECK(hilock_codec_preset("node-redis-lock", &o.codec) == HILOCK_OK);
    CHECK(hilock_client_new(&o, &c) == HILOCK_OK);
    round_trip(c, opts & 8);
    if (opts & 16) round_trip(c, opts & 8);
    hilock_client_free(c);
    return 0;
}
