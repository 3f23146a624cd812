/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock -- run a command while holding a lock on Redis (in the spirit of flock(1)).
 *
 *   hilock [options] KEY [--] COMMAND [ARGS...]
 *   hilock [options] KEY -c 'SHELL COMMAND'
 *
 * Acquires KEY, keeps it alive (hilock_keepalive) while COMMAND runs, releases it when
 * COMMAND and everything it left running have exited, and exits with COMMAND's status. If
 * the lock is lost meanwhile, COMMAND's tree is signalled (TERM, then KILL after a grace
 * period, and at the latest when the lock's validity ends) and hilock exits with EXIT_LOST.
 * The manual is cli/hilock.1; `hilock --help` is the short form.
 *
 * Structure: one main thread that parses, acquires, spawns COMMAND and then sleeps in
 * poll() on a self-pipe. Everything that happens asynchronously -- a signal to forward,
 * SIGCHLD, and the keepalive's lost-lock callback (on the keepalive's own thread) -- is a
 * 2-byte record written to that pipe, so the main loop is the only place that acts.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "hilock.h"
#include "hilock_legacy.h"
#include "hilock_observe.h"
#include "cli.h"
#include "command.h"
#include "platform.h"

extern char **environ;


/* records on the self-pipe: {kind, value} */
enum { REC_SIGNAL = 1, REC_TTY_SIGNAL, REC_LOST };

/* the signals passed on to COMMAND */
static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])


static int pipe_fd[2] = { -1, -1 };
static int own_group;   /* COMMAND leads a process group of its own (see in_foreground) */


/* ---- small helpers ---- */

static int64_t now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static int64_t now_ms(void)
{
    return now_us() / 1000;
}

/* ---- stderr that never blocks ----
 *
 * Once the lock may be held, nothing hilock prints may stop it: a stderr that nobody reads
 * (a stalled log shipper, a full pipe, a terminal paused by Ctrl-S) would block the
 * keepalive's thread in a trace line, so renewals stop, or the main loop in a message, before
 * it signals COMMAND. So every line goes out through say_bytes: one write(2) of at most
 * PIPE_BUF bytes, made only when poll() says stderr takes it now (a pipe with a free buffer
 * takes a PIPE_BUF write whole without blocking; a stopped terminal says no). What does not
 * fit is dropped and counted, and the count is said at exit (say_dropped). stderr's own flags
 * are left alone: it is shared with COMMAND, which must not see O_NONBLOCK. One mutex orders
 * the two threads' lines; it is held only around poll and a write that does not block. */

static pthread_mutex_t say_mu = PTHREAD_MUTEX_INITIALIZER;
static unsigned long say_lost_lines;
static unsigned long long say_lost_bytes;

static void say_bytes(const char *s, size_t n)
{
    pthread_mutex_lock(&say_mu);
    while (n > 0) {
        struct pollfd p = { 2, POLLOUT, 0 };
        ssize_t w;
        if (poll(&p, 1, 0) != 1 || (p.revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) != POLLOUT) break;
        if ((w = write(2, s, n < PIPE_BUF ? n : PIPE_BUF)) <= 0) break;
        s += w;
        n -= (size_t)w;
    }
    if (n) {
        say_lost_lines++;
        say_lost_bytes += n;
    }
    pthread_mutex_unlock(&say_mu);
}

static void sayf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* printf to stderr through say_bytes (a line: at most 4 KiB) */
static void sayf(const char *fmt, ...)
{
    char buf[4096];
    va_list ap;
    int n;
    va_start(ap, fmt);
    n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) say_bytes(buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

/* A line composed with stdio (hl_tool_print and friends take a FILE): in memory, then one
 * say_bytes. msg_begin never returns NULL: without memory, a FILE that goes nowhere. */
typedef struct msg {
    FILE  *f;
    char  *buf;
    size_t len;
} msg;

static FILE *msg_begin(msg *m)
{
    static FILE *nowhere;
    m->buf = NULL;
    m->len = 0;
    if ((m->f = open_memstream(&m->buf, &m->len)) != NULL) return m->f;
    if (!nowhere) nowhere = fopen("/dev/null", "w");
    return nowhere ? nowhere : stderr;   /* (stderr: only without memory and /dev/null) */
}

static void msg_end(msg *m)
{
    if (!m->f) {
        say_lost_lines++;
        return;
    }
    if (fclose(m->f) == 0 && m->len) say_bytes(m->buf, m->len);
    free(m->buf);
}

/* At exit: what could not be written, said once more in the same way. */
static void say_dropped(void)
{
    unsigned long lines = say_lost_lines;
    if (lines)
        sayf("hilock: %lu message%s (%llu bytes) could not be written: stderr was not being read\n", lines,
             lines == 1 ? "" : "s", say_lost_bytes);
}

/* Does msg start with the key as the library shows it (hl_key_shown) and ": "? The length
 * of that, else 0. */
static size_t key_prefix(const char *msg, const char *key)
{
    char buf[HL_KEY_SHOWN_BUF];
    const char *shown = hl_key_shown(key, buf, sizeof buf);
    size_t m = strlen(shown);
    return !strncmp(msg, shown, m) && !strncmp(msg + m, ": ", 2) ? m + 2 : 0;
}

/* The library's message, printable, less the key it starts with ("KEY: ..." or "release
 * KEY: ..."): our line has named the key already. */
static void print_detail(FILE *f, const cli *o, const char *text)
{
    const char *sp = strchr(text, ' ');
    size_t skip = key_prefix(text, o->key);
    if (!skip && sp && !memchr(text, ':', (size_t)(sp - text)) && (skip = key_prefix(sp + 1, o->key)))
        skip += (size_t)(sp + 1 - text);
    hl_tool_print(f, text + skip, strlen(text + skip));
}

/* One line on stderr: "hilock: WHAT KEY: " and the library's message. */
static void print_error(const char *what, const cli *o, const char *text)
{
    msg m;
    FILE *f = msg_begin(&m);
    fprintf(f, "hilock: %s %s: ", what, o->shown);
    print_detail(f, o, text);
    fputc('\n', f);
    msg_end(&m);
}


/* ---- signals and the self-pipe ---- */

static void put_record(int kind, int value)
{
    unsigned char rec[2] = { (unsigned char)kind, (unsigned char)value };
    int saved = errno;
    /* one write of 2 bytes to a pipe is atomic; if the pipe is full the record is dropped,
     * which only a signal storm can cause (SIGCHLD is also found by polling waitpid) */
    if (write(pipe_fd[1], rec, 2) < 0) { /* nothing to do */ }
    errno = saved;
}

static void on_signal(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    /* a signal the kernel sent (the terminal's Ctrl-C, hangup) went to the whole foreground
     * process group, COMMAND included unless it has a group of its own: passing it on would
     * deliver it twice */
    put_record(si && si->si_code == SI_KERNEL && !own_group ? REC_TTY_SIGNAL : REC_SIGNAL, sig);
}

/* Runs on the keepalive thread: only hand the news to the main loop. */
static void on_lost(hilock *l, hilock_status why, void *arg)
{
    (void)l;
    (void)arg;
    put_record(REC_LOST, (int)why);
}

static int install_handlers(void)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < NFORWARDED; i++) {
        /* a signal hilock was told to ignore (nohup) stays ignored, for COMMAND too */
        if (sigaction(forwarded[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN) continue;
        if (sigaction(forwarded[i], &sa, NULL) < 0) return -1;
    }
    sa.sa_flags |= SA_NOCLDSTOP;
    return sigaction(SIGCHLD, &sa, NULL);
}

/* ---- the lock ---- */

/* A hilock still waiting for the key (or taking it): TERM, INT, HUP and QUIT end the wait
 * through hilock_cancel -- the library's own undo leaves nothing of an attempt in flight --
 * and hilock then dies of that signal with nothing held (a grant that landed first is
 * released). Caught from before the first try until the COMMAND handlers replace these
 * (install_handlers), so no signal in between kills hilock while it holds the key. */
static const int wait_signals[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT };
static hilock_client *volatile waiting_client;
static volatile sig_atomic_t wait_sig;

static void on_wait_signal(int sig)
{
    wait_sig = sig;
    hilock_cancel(waiting_client);   /* (async-signal-safe) */
}

static void catch_wait_signals(hilock_client *c)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_wait_signal;
    sigemptyset(&sa.sa_mask);
    waiting_client = c;
    for (size_t i = 0; i < sizeof wait_signals / sizeof wait_signals[0]; i++)
        if (sigaction(wait_signals[i], NULL, &old) == 0 && old.sa_handler != SIG_IGN)   /* (nohup) */
            sigaction(wait_signals[i], &sa, NULL);
}

/* A wait signal came: give back what *lp holds, then die of the signal (128 + N). */
static void die_if_wait_signalled(hilock **lp)
{
    int sig = wait_sig;
    sigset_t one;
    if (!sig) return;
    if (*lp) {
        hilock_release(*lp);
        hilock_free(*lp);
        *lp = NULL;
    }
    signal(sig, SIG_DFL);
    sigemptyset(&one);
    sigaddset(&one, sig);
    sigprocmask(SIG_UNBLOCK, &one, NULL);
    raise(sig);
    _exit(128 + sig);   /* (not reached) */
}


/* Legacy and bridge locks are renewed by the main loop (self_renew), which a renewal blocks
 * for up to connect_timeout_ms + 3 x io_timeout_ms (hilock_extend's bound, hilock.h: a
 * connect, then the handshake, the command and a resend after NOSCRIPT, each its own round
 * trip): bound each at a fifteenth of the ttl, so one renewal blocks 4/15 of it at most and
 * the loop is free again in time to stop COMMAND (the client is hilock's own: nothing else
 * relies on the longer defaults). */
static int64_t bound_round_trips(int64_t ttl_ms, hilock_options *opt)
{
    int64_t cap = ttl_ms / 15 > 0 ? ttl_ms / 15 : 1;
    if (opt->io_timeout_ms > cap) opt->io_timeout_ms = cap;
    if (opt->connect_timeout_ms > cap) opt->connect_timeout_ms = cap;
    return opt->connect_timeout_ms + 3 * opt->io_timeout_ms;   /* hilock_extend's bound */
}

/* The kinds: a permit (--limit), a shared grant (--shared), a legacy or a modern lock. Every
 * one is a hilock that the rest (keepalive, release, statuses) treats alike. */
static hilock_status lock_once(const cli *o, hilock_client *c, int64_t wait_ms, hilock **lp)
{
    if (o->limit) return hilock_sem_acquire(c, o->key, o->limit, o->ttl_ms, wait_ms, lp);
    if (o->shared) return hilock_rw_acquire(c, o->key, HILOCK_SHARED, o->ttl_ms, wait_ms, lp);
    return o->legacy ? hilock_legacy_acquire(c, o->key, o->ttl_ms, wait_ms, lp)
                     : hilock_acquire(c, o->key, o->ttl_ms, wait_ms, lp);
}

static int transient(hilock_status st);
static void sleep_ms(long ms);

/* The pauses between tries of a server that is down, within -w: doubling from the first to
 * the last, which a restart of a few seconds does not make much longer. */
#define RETRY_FIRST_MS 100
#define RETRY_MAX_MS 1000

/* Take the lock as -n / -w say, in one acquire: one start and one end (--trace, the client's
 * stats), however long it waits. The library waits for a holder, and within a finite -w tries
 * a server that fails (down, restarting: refused, reset, LOADING, a timeout, no quorum) again
 * until the limit, as a cron job started during a restart must not give up after a second;
 * without -w (no limit) such a failure is reported at once. What the wait meets first is said
 * as it begins (say_waiting, from the observer). A failure returned before the limit is tried
 * again, in a new acquire, after pauses doubling from RETRY_FIRST_MS: the last error then
 * stands. t0: when the wait began. */
static hilock_status lock_within(const cli *o, hilock_client *c, int64_t t0, hilock **lp)
{
    int64_t pause = RETRY_FIRST_MS, left;
    hilock_status st = lock_once(o, c, o->wait_ms, lp);
    while (st != HILOCK_OK && o->wait_ms > 0 && transient(st) && !wait_sig &&
           (left = o->wait_ms - (now_ms() - t0)) > 0) {
        sleep_ms((long)(pause < left ? pause : left));
        pause = pause * 2 < RETRY_MAX_MS ? pause * 2 : RETRY_MAX_MS;
        left = o->wait_ms - (now_ms() - t0);
        st = lock_once(o, c, left > 0 ? left : 0, lp);
    }
    return st;
}

/* The options that say where the servers are and how to reach them: the lock's and the
 * tools' (inventory, inspect) alike. */
static void connection_options(const cli *o, hilock_options *opt)
{
    hilock_options_init(opt);
    opt->servers = o->servers;
    opt->nservers = o->nservers;
    opt->tls_ca_file = o->cacert;
    opt->tls_ca_path = o->cacertdir;
    opt->tls_cert_file = o->cert;
    opt->tls_key_file = o->keyfile;
    opt->tls_server_name = o->sni;
    opt->tls_verify = !o->insecure;
}

/* ---- events: --trace, and -v's acquisition line ---- */

/* What the observer needs; static, as a keepalive thread calls it until the release. */
static struct observed {
    const cli *o;
    int64_t    start_us;   /* hilock started (monotonic): --trace's times count from it */
    int64_t    wait_us;    /* the acquire began: -v's "after N ms" */
    int        said_busy, said_failed, acquired;   /* (say_waiting; the main thread's) */
} seen;

static const char *const status_names[] = { "ok", "busy", "not_held", "lost", "einval", "eio", "etimedout",
                                            "eauth", "ereply", "ereplicas", "enoquorum", "enomem" };
static const char *const lost_names[] = { "unknown", "expired", "taken", "failover" };
static const char *const redirect_names[] = { "?", "moved", "ask", "tryagain" };

#define NAME_OF(names, i) ((size_t)(i) < sizeof names / sizeof names[0] ? names[i] : "?")

/* The kinds whose status is their result, said even when OK. */
static int has_result(hilock_event_kind k)
{
    return k == HILOCK_EVENT_ACQUIRE_GAVE_UP || k == HILOCK_EVENT_RELEASE || k == HILOCK_EVENT_EXTEND ||
           k == HILOCK_EVENT_RENEWAL || k == HILOCK_EVENT_LOST || k == HILOCK_EVENT_MEMBER ||
           k == HILOCK_EVENT_MAP_REFRESH || k == HILOCK_EVENT_CONNECT || k == HILOCK_EVENT_TLS_HANDSHAKE ||
           k == HILOCK_EVENT_ERROR;
}

/* " name=" and the bytes, printable (keys, nodes and messages come from servers and users). */
static void put_bytes(FILE *f, const char *name, const char *s, size_t n)
{
    fprintf(f, " %s=", name);
    hl_tool_print(f, s, n);
}

/* The fields a kind sets (hilock_observe.h), as name=value. */
static void put_fields(FILE *f, const hilock_event *e)
{
    if (e->key && e->keylen == strlen(seen.o->key) && !memcmp(e->key, seen.o->key, e->keylen))
        fprintf(f, " key=%s", seen.o->shown);
    else if (e->key)
        put_bytes(f, "key", e->key, e->keylen < HL_KEY_SHOWN ? e->keylen : HL_KEY_SHOWN);
    if (e->node) put_bytes(f, "node", e->node, strlen(e->node));
    if (e->status != HILOCK_OK || has_result(e->kind)) fprintf(f, " status=%s", NAME_OF(status_names, e->status));
    if (e->kind == HILOCK_EVENT_MEMBER) fprintf(f, " op=%s", hilock_event_name(e->op));
    if (e->duration_us >= 0) fprintf(f, " duration=%.3fms", (double)e->duration_us / 1000.0);
    if (e->attempts > 0) fprintf(f, " attempts=%ld", e->attempts);
    if (e->kind == HILOCK_EVENT_ACQUIRE_GRANTED)
        fprintf(f, " fence=%llu woken=%d", (unsigned long long)e->fence, e->woken);
    if (e->kind == HILOCK_EVENT_EXTEND || e->kind == HILOCK_EVENT_RENEWAL)
        fprintf(f, " validity=%lldms", (long long)e->validity_ms);
    if (e->kind == HILOCK_EVENT_LOST) fprintf(f, " why=%s", NAME_OF(lost_names, e->lost_why));
    if (e->kind == HILOCK_EVENT_REDIRECT) fprintf(f, " redirect=%s", NAME_OF(redirect_names, e->redirect));
    if (e->target && *e->target) put_bytes(f, "target", e->target, strlen(e->target));
    if (e->kind == HILOCK_EVENT_CONNECT) fprintf(f, " reconnect=%d", e->reconnect);
    if (e->message) put_bytes(f, "message", e->message, strlen(e->message));
}

/* The observer (the main thread, or the keepalive's for renewals and a loss it sees): with
 * --trace, "hilock: +MS KIND FIELDS" for each event; with -v, the grant's line, its fence and
 * wait from the same event. Composed in memory and written at once, never blocking (say_bytes):
 * the keepalive's thread must go on renewing whatever becomes of stderr. */
/* As a wait (-w, or no limit) begins, from its events: the first busy answer, when the holder
 * has no TTL (it may never go: rather than wait in silence) or with -v; with -v, the first
 * failure that a finite -w tries again. Each once, and only while hilock waits (the
 * keepalive's errors come later). */
static void say_waiting(const hilock_event *e)
{
    const cli *o = seen.o;
    if (e->kind == HILOCK_EVENT_ACQUIRE_GRANTED || e->kind == HILOCK_EVENT_ACQUIRE_GAVE_UP) seen.acquired = 1;
    if (o->wait_ms == 0 || seen.acquired || !e->message) return;
    if (e->kind == HILOCK_EVENT_ACQUIRE_BUSY && !seen.said_busy && (o->verbose || strstr(e->message, HL_NO_TTL))) {
        seen.said_busy = 1;
        print_error("waiting for", o, e->message);
    } else if (e->kind == HILOCK_EVENT_ERROR && !seen.said_failed && o->verbose && o->wait_ms > 0 &&
               transient(e->status)) {
        seen.said_failed = 1;
        print_error("trying again until the -w limit: lock", o, e->message);
    }
}

static void print_event(const hilock_event *e, void *arg)
{
    msg m;
    FILE *f;
    (void)arg;
    if (!seen.o->trace && !(seen.o->verbose && e->kind == HILOCK_EVENT_ACQUIRE_GRANTED)) {
        say_waiting(e);
        return;
    }
    f = msg_begin(&m);
    if (seen.o->trace) {
        fprintf(f, "hilock: +%.3fms %s", (double)(e->at_us - seen.start_us) / 1000.0, hilock_event_name(e->kind));
        put_fields(f, e);
        fputc('\n', f);
    }
    if (seen.o->verbose && e->kind == HILOCK_EVENT_ACQUIRE_GRANTED)
        fprintf(f, "hilock: %s acquired (fence %llu) after %lld ms\n", seen.o->shown,
                (unsigned long long)e->fence, (long long)((e->at_us - seen.wait_us) / 1000));
    msg_end(&m);
    say_waiting(e);   /* (after the event's own line) */
}

static int acquire(const cli *o, hilock_client **cp, hilock **lp)
{
    hilock_options opt;
    hilock_status st;
    int64_t t0;
    connection_options(o, &opt);
    opt.bridge = o->bridge;
    opt.fair = o->fair;
    opt.fencing = !o->no_fence;
    if (o->legacy && hilock_codec_preset(o->preset, &opt.codec) != HILOCK_OK)
        return cli_usage_error("--legacy: unknown preset '%s'", o->preset);
    if (o->legacy || o->bridge) bound_round_trips(o->ttl_ms, &opt);
    if ((st = hilock_client_new(&opt, cp)) != HILOCK_OK) {
        fprintf(stderr, "hilock: %s\n", hilock_last_config_error());
        return st == HILOCK_EINVAL ? EXIT_USAGE : EXIT_OSERR;
    }
    seen.o = o;
    /* (a wait's start is said from its events: say_waiting) */
    if ((o->trace || o->verbose || o->wait_ms != 0) && hilock_set_observer(*cp, print_event, NULL) != HILOCK_OK) {
        print_error("--trace", o, hilock_client_errmsg(*cp));
        return EXIT_OSERR;
    }
    t0 = now_ms();
    seen.wait_us = now_us();
    catch_wait_signals(*cp);
    st = lock_within(o, *cp, t0, lp);
    die_if_wait_signalled(lp);
    if (st == HILOCK_OK) return -1;   /* (-v: print_event said so) */
    if (st == HILOCK_BUSY) {
        /* busy is a result, said only with -v -- but a holder without a TTL never goes by
         * itself: -n says so as -w does when it begins to wait */
        if (o->verbose || (o->wait_ms == 0 && strstr(hilock_client_errmsg(*cp), HL_NO_TTL)))
            print_error(o->wait_ms ? "gave up waiting for" : "busy:", o, hilock_client_errmsg(*cp));
        if (o->verbose) hl_tool_busy_holder(*cp, o->key);   /* who, if its grant said so */
        return o->conflict_code;
    }
    /* (a passing failure with -w lasted to its end: lock_within) */
    print_error(o->wait_ms > 0 && transient(st) ? "still failing at the -w limit: lock" : "lock", o,
                hilock_client_errmsg(*cp));
    return st == HILOCK_EINVAL ? EXIT_USAGE : st == HILOCK_ENOMEM ? EXIT_OSERR : EXIT_SERVER;
}

/* ---- COMMAND ---- */

/* The state of one run, for the main loop. */
typedef struct run_state {
    const cli     *o;
    hilock_client *c;
    hilock        *l;
    pid_t          child;
    pid_t          guard;        /* the guard process (see start_guard), 0 = none */
    int            guard_fd;     /* our end of its pipe: EOF tells it hilock died */
    int            self_renew;   /* no keepalive for this kind of lock: the loop renews */
    int64_t        renew_at;     /* self_renew: next renewal, -1 = none */
    int64_t        extend_bound_ms;   /* self_renew: how long one hilock_extend may block */
    int64_t        kill_at;      /* SIGKILL time after a loss, -1 = none */
    int            lost;
    int            killed;       /* SIGKILL sent: repeated until the tree is gone */
    int            cmd_done;     /* COMMAND exited (kept unreaped: its pid and group stay ours) */
    int64_t        deadline;     /* the lock's validity ends then (now_ms clock); the guard knows */
    int64_t        margin_ms;    /* the loss is reported this long before the deadline */
    int64_t        lead_ms;      /* the tree is SIGKILLed this long before it at the latest */
    int            stop_sig;     /* TERM, INT, HUP or QUIT sent to hilock: passed to the tree, exit 128+N */
    int            guard_fired;  /* the guard signalled the tree while hilock lived (stopped, hung) */
} run_state;

/* 0 if p can be executed, else the errno execve would most likely give. */
static int executable(const char *p)
{
    struct stat st;
    if (stat(p, &st) < 0) return errno == ENOTDIR ? ENOENT : errno;
    if (S_ISDIR(st.st_mode)) return EACCES;
    return faccessat(AT_FDCWD, p, X_OK, AT_EACCESS) == 0 ? 0 : errno;
}

/* Find COMMAND as execvp does (a name with '/' as it is, else along PATH), before anything is
 * started: "not found" (127) and "cannot run" (126) are then decided here, exactly, and not
 * in a child that would have to report an exec failure. Returns 0 (path in buf) or errno. */
static int find_command(const char *cmd, char *buf, size_t len)
{
    const char *dirs = getenv("PATH"), *p, *end;
    int err = ENOENT;
    if (!*cmd) return ENOENT;
    if (strchr(cmd, '/'))
        return (size_t)snprintf(buf, len, "%s", cmd) >= len ? ENAMETOOLONG : executable(buf);
    if (!dirs) dirs = "/bin:/usr/bin";   /* execvp's default */
    for (p = dirs;; p = end + 1) {
        int e;
        if (!(end = strchr(p, ':'))) end = p + strlen(p);
        /* an empty entry is the current directory */
        if ((size_t)snprintf(buf, len, "%.*s%s%s", (int)(end - p), p, end > p ? "/" : "", cmd) < len) {
            if ((e = executable(buf)) == 0) return 0;
            if (e == EACCES) err = EACCES;   /* found, but not runnable: 126 unless found later */
        }
        if (!*end) return err;
    }
}

/* ---- COMMAND must not outlive hilock ----
 *
 * If hilock dies (SIGKILL, the OOM killer, a crash), nothing renews the lock any more and
 * it expires ttl later; COMMAND must be gone by then, or a second hilock would run its own
 * COMMAND alongside it. Two mechanisms, as neither suffices alone:
 *   - COMMAND asks the kernel for a signal when hilock dies (PR_SET_PDEATHSIG, the -L signal,
 *     TERM if that is none), so it can clean up. It is kept across execve (not for set-user-ID
 *     or file-capability programs) but can be ignored, and reaches COMMAND only.
 *   - A guard: a small process of hilock's own, forked before COMMAND may exec, reading a
 *     pipe whose other end only hilock holds: when to kill at the latest (the lock's
 *     deadline less kill_lead_ms) after each renewal, as 8-byte records. EOF means hilock
 *     died: it then sends SIGKILL, after -k and at the latest at the last such time it
 *     read, to COMMAND's process group (own_group) or to COMMAND. When COMMAND's tree is gone, hilock tells it so (a 0) before reaping COMMAND,
 *     so its kill can never reach a recycled pid.
 * COMMAND gets a process group of its own unless hilock is the foreground job of a
 * terminal: there it stays in hilock's group, to read the terminal and get its Ctrl-C, and
 * the guard can only kill COMMAND itself (hilock's group holds the shell's other processes).
 * Both forks happen in a threaded process (the keepalive): the children run only
 * async-signal-safe calls until execve or _exit. */

/* Is hilock the foreground job of its controlling terminal? */
static int in_foreground(void)
{
    int fd = open("/dev/tty", O_RDONLY | O_NOCTTY | O_CLOEXEC), fg;
    if (fd < 0) return 0;   /* no controlling terminal (cron, systemd, setsid) */
    fg = tcgetpgrp(fd) == getpgrp();
    close(fd);
    return fg;
}

/* How long before the validity's end a loss is reported (the keepalive's lost_margin_ms):
 * time for COMMAND to stop, -k, but at least a quarter of the ttl and at most half of it.
 * A margin near what a renewal leaves (two thirds of the ttl) would make the first failed
 * renewal a loss; half leaves a sixth of the ttl for retries. The cap costs no safety: the
 * SIGKILL comes before the validity's end whatever -k says (kill_lead_ms).
 * -L none: COMMAND is not stopped, so renewals are tried to the end (no margin). */
static int64_t loss_margin_ms(const cli *o)
{
    int64_t m = o->kill_after_ms < o->ttl_ms / 2 ? o->kill_after_ms : o->ttl_ms / 2;
    if (!o->lost_sig) return 0;
    return m > o->ttl_ms / 4 ? m : o->ttl_ms / 4;
}

/* How long before the validity's end COMMAND's tree is SIGKILLed at the latest: a process
 * outside its group is reached only once its parent has died and it is reparented to
 * hilock, a few ms per level and more on a loaded machine (10 levels took 150 ms on 2 busy
 * cores); and the end itself is only as exact as the clocks (the client already subtracts
 * a 1% drift). 100 ms, or 5% of the ttl if more, but at most a quarter of it. */
static int64_t kill_lead_ms(int64_t ttl_ms)
{
    int64_t lead = ttl_ms / 20 > 100 ? ttl_ms / 20 : 100;
    return lead < ttl_ms / 4 ? lead : ttl_ms / 4;
}

static void sleep_ms(long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {}
}

static int64_t backstop_ms(const run_state *r);

/* What the guard is told: the times to act by (now_ms clock, one system-wide CLOCK_MONOTONIC),
 * 16 bytes, one atomic write to its pipe. kill_at 0: COMMAND's tree is gone, the guard may go.
 * term_at > 0: while hilock lives, SIGTERM to the tree then, SIGKILL at kill_at (hilock has
 * not renewed by then: it is stopped, hung or blocked); GUARD_NO_TERM: SIGKILL only (hilock
 * sent the TERM itself); GUARD_DEAD_ONLY: act only once hilock died (-L none after a loss). */
typedef struct guard_rec {
    int64_t term_at;
    int64_t kill_at;
} guard_rec;

#define GUARD_NO_TERM   (-1)
#define GUARD_DEAD_ONLY (-2)
#define GUARD_FIRED_EXIT 3   /* the guard's exit status when it signalled while hilock lived */

/* The guard's view of hilock and COMMAND. */
typedef struct guard_ctx {
    pid_t       hilock;   /* its parent, whose children (COMMAND and what the subreaper adopted) it kills */
    pid_t       cmd;      /* COMMAND's pid, its process group's id if own_group */
    int         group;
    const char *died_msg, *live_msg;
    const char *title;    /* "hilock-guard KEY": its command line, not hilock's (pgrep -f COMMAND's
                             arguments finds hilock and COMMAND, not the guard) */
    int         argc;     /* over main's argv (its copy of them) */
    char      **argv;
} guard_ctx;

/* Write a message without ever blocking (the guard's say_bytes: poll first, one write). */
static void guard_say(const char *m)
{
    struct pollfd p = { 2, POLLOUT, 0 };
    size_t n = strlen(m);
    if (poll(&p, 1, 0) == 1 && (p.revents & (POLLOUT | POLLERR | POLLHUP | POLLNVAL)) == POLLOUT &&
        write(2, m, n < PIPE_BUF ? n : PIPE_BUF) < 0) { /* nowhere to say it */ }
}

/* Signal COMMAND's tree from the guard: its process group (or COMMAND), and every child of a
 * living hilock but the guard (what the subreaper adopted: a stopped hilock reaps nothing, so
 * those pids stay its children's), listed by hl_plat_children_of (async-signal-safe, as
 * everything this child of a threaded process calls). */
static void guard_signal(const guard_ctx *g, int sig, int hilock_alive)
{
    pid_t kids[1024];
    long n;
    kill(g->group ? -g->cmd : g->cmd, sig);
    if (!hilock_alive || (n = hl_plat_children_of(g->hilock, kids, sizeof kids / sizeof kids[0])) <= 0) return;
    for (long i = 0; i < n; i++)
        if (kids[i] > 0 && kids[i] != getpid() && kids[i] != g->cmd && (!g->group || getpgid(kids[i]) != g->cmd))
            kill(kids[i], sig);
}

/* The guard's whole life (forked with every signal blocked; never returns). While hilock
 * lives it waits in poll() for the next record, with a timeout: the time to act by is kept
 * on its own clock, so a hilock that is stopped (SIGSTOP), hung or blocked (a stderr nobody
 * reads) and renews nothing meanwhile still has COMMAND's tree stopped before the validity
 * it last reported ends. When hilock dies (EOF) it waits -k, at the latest until the last
 * kill time, for COMMAND's group to go, then SIGKILLs it. It acts first and writes after,
 * and never blocks in a write (guard_say). */
static void guard_main(int fd, const guard_ctx *g, guard_rec at, int64_t grace_ms)
{
    static const int quiet[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGCHLD,
                                 SIGTSTP, SIGTTIN, SIGTTOU };
    struct sigaction sa;
    sigset_t none;
    int64_t end, left;
    int termed = 0, fired = 0;
    /* signals meant for hilock or its group (Ctrl-C, Ctrl-Z, kill -TERM -PGID) are not for us,
     * nor is a stop of hilock's group: the guard leads a group of its own (SIGTTOU ignored,
     * so a message to the terminal from there never stops it) */
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = SIG_IGN;
    for (size_t i = 0; i < sizeof quiet / sizeof quiet[0]; i++) sigaction(quiet[i], &sa, NULL);
    setpgid(0, 0);
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    /* keep only the pipe and stderr: no copies of server sockets or of hilock's stdout */
    if (dup2(fd, 3) < 0) _exit(1);
    close(0);
    close(1);
    hl_plat_close_from(4);
    hl_plat_set_name("hilock-guard");   /* (async-signal-safe, as this child must be) */
    hl_plat_set_title(g->argc, g->argv, g->title);
    for (;;) {
        struct pollfd p = { 3, POLLIN, 0 };
        int64_t now = now_ms(), next = at.kill_at;
        guard_rec v;
        ssize_t n;
        if (at.term_at != GUARD_DEAD_ONLY) {
            if (at.term_at > 0 && !termed && now >= at.term_at) {
                guard_signal(g, SIGTERM, 1);
                termed = fired = 1;
                guard_say(g->live_msg);
            }
            if (now >= at.kill_at) {   /* again every 20 ms: each death hands us the next level */
                guard_signal(g, SIGKILL, 1);
                if (!fired) guard_say(g->live_msg);
                fired = 1;
                next = now + 20;
            } else if (at.term_at > 0 && !termed && at.term_at < next) {
                next = at.term_at;
            }
            left = next - now;
        } else {
            left = -1;
        }
        if (poll(&p, 1, left < 0 ? -1 : left > 60000 ? 60000 : (int)left) <= 0) continue;
        while ((n = read(3, &v, sizeof v)) < 0 && errno == EINTR) {}
        if (n != (ssize_t)sizeof v) break;   /* EOF: hilock died */
        if (v.kill_at == 0) _exit(fired ? GUARD_FIRED_EXIT : 0);   /* COMMAND's tree is gone */
        at = v;
    }
    /* hilock died (COMMAND got its death signal from the kernel): wait for COMMAND('s group)
     * to go; SIGKILL it after -k, and at the latest when the lock's validity ends: from then
     * on another client may hold the key */
    end = now_ms() + grace_ms;
    if (grace_ms <= 0 || end > at.kill_at) end = at.kill_at;
    while ((left = end - now_ms()) > 0) {
        if (kill(g->group ? -g->cmd : g->cmd, 0) < 0 && errno == ESRCH) break;
        sleep_ms(left < 20 ? (long)left : 20);
    }
    if (left <= 0) guard_signal(g, SIGKILL, 0);
    guard_say(g->died_msg);
    _exit(0);
}

/* How long before the validity's end the guard sends SIGTERM if hilock has not renewed:
 * halfway between the moment hilock itself declares the loss (backstop_ms: a living hilock
 * acts first, and the guard does not signal twice) and the SIGKILL's lead. */
static int64_t guard_term_ms(const run_state *r)
{
    return (backstop_ms(r) + r->lead_ms) / 2;
}

/* The record that tells the guard the lock's end d. With -L none COMMAND is never stopped for
 * the lock while hilock lives (renewals are tried to the end): the guard acts only if it dies. */
static void guard_times(const run_state *r, int64_t d, guard_rec *at)
{
    at->term_at = r->o->lost_sig ? d - guard_term_ms(r) : GUARD_DEAD_ONLY;
    at->kill_at = d - r->lead_ms;
}

/* Fork the guard of COMMAND (pid cmd). Called with every signal blocked. 0 or errno. */
static int start_guard(run_state *r, pid_t cmd)
{
    static char died[400], live[400], title[HL_TOOL_KEY_BUF + 16];
    char name[24];
    guard_ctx g;
    guard_rec at;
    int p[2];
    if (hl_plat_pipe(p, O_CLOEXEC) < 0) return errno;
    snprintf(died, sizeof died, "hilock: %.200s: hilock died while COMMAND ran (COMMAND got %s); "
             "SIGKILL to COMMAND%s after -k, at the latest when the lock's validity ends\n",
             r->o->shown, cli_signal_name(r->o->lost_sig ? r->o->lost_sig : SIGTERM, name, sizeof name),
             own_group ? "'s process group" : "");
    snprintf(live, sizeof live, "hilock: %.200s: hilock renewed nothing in time (stopped, hung or blocked): "
             "its guard sent SIGTERM to COMMAND's tree, SIGKILL before the lock's validity ends\n", r->o->shown);
    g.hilock = getpid();
    g.cmd = cmd;
    g.group = own_group;
    g.died_msg = died;
    g.live_msg = live;
    snprintf(title, sizeof title, "hilock-guard %.*s", (int)sizeof r->o->shown, r->o->shown);
    g.title = title;
    g.argc = r->o->argc;
    g.argv = r->o->argv;
    guard_times(r, r->deadline, &at);
    if ((r->guard = fork()) < 0) {
        int e = errno;
        close(p[0]);
        close(p[1]);
        r->guard = 0;
        return e;
    }
    if (r->guard == 0) {
        close(p[1]);
        guard_main(p[0], &g, at, r->o->kill_after_ms);
    }
    close(p[0]);
    /* a full pipe drops a record: the guard keeps an earlier time, which is safe */
    fcntl(p[1], F_SETFL, O_NONBLOCK);
    r->guard_fd = p[1];
    return 0;
}

/* Tell the guard when to act at the latest (kill_at 0: it may go). */
static void tell_guard(const run_state *r, int64_t term_at, int64_t kill_at)
{
    guard_rec v;
    v.term_at = term_at;
    v.kill_at = kill_at;
    if (r->guard && write(r->guard_fd, &v, sizeof v) < 0) { /* see start_guard */ }
}

/* COMMAND's tree is gone (COMMAND not yet reaped) or never ran: the guard may go. It exits
 * as soon as it reads the 0 (GUARD_FIRED_EXIT if it had to signal the tree); one that has not
 * within a second is stuck, and is killed: hilock's own exit never waits on it unbounded. */
static void stop_guard(run_state *r)
{
    int64_t end = now_ms() + 1000;
    int gone = 0, st;
    pid_t w;
    if (!r->guard) return;
    tell_guard(r, 0, 0);
    close(r->guard_fd);
    while (!gone && now_ms() < end) {
        w = waitpid(r->guard, &st, WNOHANG);
        if (w == r->guard && WIFEXITED(st) && WEXITSTATUS(st) == GUARD_FIRED_EXIT) r->guard_fired = 1;
        if (w == r->guard || (w < 0 && errno != EINTR)) gone = 1;   /* reaped (ECHILD: already) */
        else sleep_ms(5);
    }
    if (!gone) {   /* not reaped, so its pid is still its own */
        kill(r->guard, SIGKILL);
        while (waitpid(r->guard, NULL, 0) < 0 && errno == EINTR) {}
    }
    r->guard = 0;
}

/* What the child between fork and execve needs, all prepared before fork. */
typedef struct exec_plan {
    const char *path;
    char      **argv;
    char      **sh_argv;   /* ENOEXEC: sh path args... (as execvp does) */
    char      **envp;
    pid_t       parent;
    int         death_sig;
    int         go_fd, err_fd;
    sigset_t    mask;      /* the mask to restore */
} exec_plan;

/* In the child: never returns. Writes errno to err_fd if COMMAND cannot be executed. */
static void child_exec(const exec_plan *x)
{
    struct sigaction dfl, cur;
    unsigned char b;
    ssize_t n;
    int e;
    if (own_group) setpgid(0, 0);
    /* the race at start-up: hilock may have died before the request was made. A system
     * without the request (ENOSYS) has the guard alone to stop COMMAND. */
    e = hl_plat_parent_death_signal(x->death_sig);
    if ((e && e != ENOSYS) || getppid() != x->parent) _exit(127);
    /* COMMAND starts with default dispositions for what hilock catches or ignores itself
     * (SIGPIPE: the server connections must not kill hilock); set before unblocking, so a
     * signal pending now acts on COMMAND, not through hilock's handler */
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    for (size_t i = 0; i < NFORWARDED; i++)
        if (sigaction(forwarded[i], NULL, &cur) == 0 && cur.sa_handler != SIG_IGN)
            sigaction(forwarded[i], &dfl, NULL);
    sigaction(SIGPIPE, &dfl, NULL);
    sigaction(SIGCHLD, &dfl, NULL);
    sigprocmask(SIG_SETMASK, &x->mask, NULL);
    /* run only once the guard is up; EOF: hilock died first */
    while ((n = read(x->go_fd, &b, 1)) < 0 && errno == EINTR) {}
    if (n != 1) _exit(127);
    execve(x->path, x->argv, x->envp);
    if (errno == ENOEXEC) execve("/bin/sh", x->sh_argv, x->envp);   /* no "#!": sh runs it */
    e = errno;
    if (write(x->err_fd, &e, sizeof e) < 0) { /* the parent sees 126 anyway */ }
    _exit(127);
}

/* COMMAND's environment: ours with HILOCK_KEY and HILOCK_FENCE, without HILOCK_SERVERS
 * (it may hold passwords). NULL on ENOMEM or a setenv failure. */
static char **command_env(const cli *o, const hilock *l)
{
    char fence[24], **env;
    size_t n = 0, k = 0;
    snprintf(fence, sizeof fence, "%llu", (unsigned long long)hilock_fence(l));
    if (setenv("HILOCK_KEY", o->key, 1) < 0 || setenv("HILOCK_FENCE", fence, 1) < 0) return NULL;
    while (environ[n]) n++;
    if (!(env = calloc(n + 1, sizeof *env))) return NULL;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "HILOCK_SERVERS=", 15)) env[k++] = environ[i];
    return env;
}

/* Start COMMAND (r->child) with its guard. 0, or the errno of what failed (ENOENT: not
 * found, else cannot run); nothing is left running on failure. */
static int spawn(run_state *r)
{
    const cli *o = r->o;
    exec_plan x;
    sigset_t all;
    char path[PATH_MAX];
    int go[2] = { -1, -1 }, ep[2] = { -1, -1 }, err, e = 0;
    size_t n = 0;
    pid_t pid;
    if ((err = find_command(o->cmd[0], path, sizeof path)) != 0) return err;
    memset(&x, 0, sizeof x);
    while (o->cmd[n]) n++;
    x.path = path;
    x.argv = o->cmd;
    x.sh_argv = calloc(n + 2, sizeof *x.sh_argv);
    x.envp = command_env(o, r->l);
    if (!x.sh_argv || !x.envp) {
        err = ENOMEM;
        goto out;
    }
    x.sh_argv[0] = (char *)"sh";
    x.sh_argv[1] = path;
    memcpy(x.sh_argv + 2, o->cmd + 1, n * sizeof *x.sh_argv);   /* with the final NULL */
    x.parent = getpid();
    x.death_sig = o->lost_sig ? o->lost_sig : SIGTERM;
    if (hl_plat_pipe(go, O_CLOEXEC) < 0 || hl_plat_pipe(ep, O_CLOEXEC) < 0) {
        err = errno;
        goto out;
    }
    x.go_fd = go[0];
    x.err_fd = ep[1];
    own_group = !in_foreground();
    /* no handler of ours may run in the children before they have set up their own */
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &x.mask);
    if ((pid = fork()) == 0) {
        close(go[1]);   /* so that hilock's death is an EOF */
        close(ep[0]);
        child_exec(&x);
    }
    if (pid < 0) {
        err = errno;
        pthread_sigmask(SIG_SETMASK, &x.mask, NULL);
        goto out;
    }
    if (own_group) setpgid(pid, pid);   /* (also in the child: whichever runs first) */
    err = start_guard(r, pid);
    pthread_sigmask(SIG_SETMASK, &x.mask, NULL);
    close(go[0]);
    close(ep[1]);
    go[0] = ep[1] = -1;
    if (!err && write(go[1], "g", 1) != 1) err = errno;
    close(go[1]);   /* without "g" the child ends without running COMMAND */
    go[1] = -1;
    /* the exec error, or EOF once execve closed the pipe */
    if (!err) {
        ssize_t got;
        while ((got = read(ep[0], &e, sizeof e)) < 0 && errno == EINTR) {}
        if (got == (ssize_t)sizeof e) err = e;
    }
    if (err) {
        stop_guard(r);
        kill(pid, SIGKILL);   /* not yet COMMAND, or a failed one */
        while (waitpid(pid, NULL, 0) < 0 && errno == EINTR) {}
    } else {
        r->child = pid;
    }
out:
    for (int i = 0; i < 2; i++) {
        if (go[i] >= 0) close(go[i]);
        if (ep[i] >= 0) close(ep[i]);
    }
    free(x.sh_argv);
    free(x.envp);
    return err;
}

/* ---- COMMAND's tree ----
 *
 * hilock is a child subreaper (PR_SET_CHILD_SUBREAPER): what COMMAND leaves behind (a
 * script's child started without exec, a daemon) is reparented to hilock instead of init, so
 * hilock sees every process of the tree: its direct children. COMMAND itself is reaped only
 * once the rest is gone, so its pid and process group stay ours (the guard and the kills
 * below never reach a recycled pid), and the lock is released only then. */

#define MAX_OTHERS 256

/* hilock's children other than COMMAND and the guard: what COMMAND's tree left to us. */
static size_t others(const run_state *r, pid_t *out)
{
    pid_t all[MAX_OTHERS];
    long n = hl_plat_children(all, MAX_OTHERS);
    size_t k = 0;
    static int warned;
    if (n < 0 && !warned++)
        sayf("hilock: cannot list hilock's children (%s): COMMAND's orphans are not waited for nor killed\n",
             strerror(errno));
    for (long i = 0; i < n; i++)
        if (all[i] != r->child && all[i] != r->guard) out[k++] = all[i];
    return k;
}

/* Reap what has exited of them; the number still running (or not yet reaped). 0 only on a
 * listing that came back empty: one listed alive may exit before it is reaped, and what it
 * left is reparented to us by then (in the same step of the kernel as its exit), but not
 * in the listing. So after reaping everything listed, look again. */
static size_t reap_others(const run_state *r)
{
    pid_t o[MAX_OTHERS];
    for (int round = 0; round < 64; round++) {   /* bounded: a fork storm waits a turn */
        size_t n = others(r, o), left = 0;
        if (!n) return 0;
        for (size_t i = 0; i < n; i++)
            if (waitpid(o[i], NULL, WNOHANG) != o[i]) left++;
        if (left) return left;
    }
    return 1;
}

/* Has COMMAND exited? (Seen with WNOWAIT: not reaped, so its pid and group stay ours.)
 * 1, 0, or -1 if it cannot be waited for. */
static int command_done(run_state *r)
{
    siginfo_t si;
    si.si_pid = 0;
    if (!r->cmd_done && waitid(P_PID, (id_t)r->child, &si, WEXITED | WNOHANG | WNOWAIT) < 0)
        return errno == EINTR ? 0 : -1;
    if (si.si_pid == r->child) r->cmd_done = 1;
    return r->cmd_done;
}

/* Signal the whole tree: COMMAND's process group (COMMAND itself if it shares hilock's), and
 * every process reparented to hilock outside that group. */
static void signal_tree(const run_state *r, int sig)
{
    pid_t o[MAX_OTHERS];
    size_t n = others(r, o);
    kill(own_group ? -r->child : r->child, sig);
    /* (past MAX_OTHERS, the rest are reached by kill_tree's next rounds, as these die) */
    for (size_t i = 0; i < n; i++)
        if (!own_group || getpgid(o[i]) != r->child) kill(o[i], sig);
}

/* SIGKILL the tree until it is gone: each death reparents the next level to hilock, which
 * only then can reach it. Bounded (a process stuck in the kernel dies when it returns):
 * the loop then goes on killing every 10 ms. */
static void kill_tree(run_state *r)
{
    int64_t end = now_ms() + 200;
    do {
        signal_tree(r, SIGKILL);
        if (command_done(r) && !reap_others(r)) return;
        sleep_ms(1);
    } while (now_ms() < end);
}

/* The signals that stop a run: sent to hilock, they go to COMMAND's whole tree, SIGKILL
 * follows after -k, and hilock exits 128+N once the tree is gone (the lock released). */
static int stops_run(int sig)
{
    return sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT;
}

/* The latest time to SIGKILL the tree after a loss: the validity's end less the lead. */
static int64_t last_kill_at(const run_state *r)
{
    return r->deadline - r->lead_ms;
}

static void kill_by(run_state *r, int64_t t)
{
    if (r->kill_at < 0 || t < r->kill_at) r->kill_at = t;
}

/* A signal hilock was sent. TERM, INT, HUP, QUIT: to COMMAND's whole tree (as a lost lock
 * is), then SIGKILL after -k (-k 0: none; the lock is still held and renewed meanwhile).
 * USR1, USR2: to COMMAND while it runs, then to what it left running. */
static void pass_on(run_state *r, int sig)
{
    if (stops_run(sig)) {
        signal_tree(r, sig);
        if (!r->stop_sig) {
            r->stop_sig = sig;
            if (r->o->kill_after_ms > 0) kill_by(r, now_ms() + r->o->kill_after_ms);
        }
    } else if (r->cmd_done) {
        signal_tree(r, sig);
    } else {
        kill(r->child, sig);
    }
}

/* The lock's validity as last granted: the guard learns of each renewal (it acts by it,
 * should hilock be stopped or hung). It only grows: a lock found gone (NOT_HELD: deleted,
 * taken) keeps the end it was granted, and COMMAND its -k to stop, up to then. */
static void refresh_deadline(run_state *r)
{
    int64_t d = now_ms() + hilock_validity_ms(r->l);
    if (d > r->deadline + 2) {   /* (ms rounding: not for a 1 ms wobble) */
        r->deadline = d;
        guard_rec at;
        guard_times(r, d, &at);
        if (!r->lost) tell_guard(r, at.term_at, at.kill_at);
    }
}

/* The lock is lost: signal COMMAND's tree as -L says (SIGKILL follows after -k, and at the
 * latest when the lock's validity ends, whatever -k says), tell the guard, and only then say
 * why: the message may find stderr full (it is dropped then, never waited for). */
static void lost(run_state *r, hilock_status why, const char *detail)
{
    const cli *o = r->o;
    char name[24];
    int64_t now = now_ms(), left;
    msg m;
    FILE *f;
    r->lost = 1;
    r->renew_at = -1;
    refresh_deadline(r);
    if (o->lost_sig && r->child > 0) {
        kill_by(r, o->lost_sig == SIGKILL ? now
                   : o->kill_after_ms > 0 && now + o->kill_after_ms < last_kill_at(r)
                   ? now + o->kill_after_ms : last_kill_at(r));
        signal_tree(r, o->lost_sig);
        /* the guard stays the backstop, half the lead later: still before the validity ends,
         * but after hilock's own SIGKILL, which it does not repeat when hilock does its job */
        tell_guard(r, GUARD_NO_TERM, last_kill_at(r) + r->lead_ms / 2);
    } else if (r->child > 0) {
        tell_guard(r, GUARD_DEAD_ONLY, last_kill_at(r));   /* -L none: COMMAND keeps running */
    }
    f = msg_begin(&m);
    fprintf(f, "hilock: %s: lock lost: ", o->shown);
    print_detail(f, o, *detail ? detail : hilock_strerror(why));
    if (!o->lost_sig || r->child <= 0) {
        fputs(r->child > 0 ? "; COMMAND keeps running\n" : "\n", f);
    } else {
        left = r->kill_at - now;
        fprintf(f, "; sent %s to COMMAND", cli_signal_name(o->lost_sig, name, sizeof name));
        if (o->lost_sig != SIGKILL) {
            if (left > 0) fprintf(f, ", SIGKILL in %lld ms\n", (long long)left);
            else fputs(", SIGKILL now (the validity is used up)\n", f);
        } else {
            fputc('\n', f);
        }
    }
    msg_end(&m);
}

/* Errors a later renewal may not see (as hilock_keepalive treats them). */
static int transient(hilock_status st)
{
    return st == HILOCK_EIO || st == HILOCK_ETIMEDOUT || st == HILOCK_ENOQUORUM ||
           st == HILOCK_EREPLICAS;
}

/* Renewal of a lock hilock_keepalive does not take (legacy, bridge), on this thread, which
 * has nothing else to do with the client: every third of the ttl, retrying passing errors
 * while the lock is still valid -- the keepalive's rules. hilock_extend blocks this loop
 * (up to 4/15 of the ttl: bound_round_trips), so one that could end after the loop must
 * declare the loss is not started: the backstop declares it, and SIGKILL comes in time. */
static void self_renew(run_state *r)
{
    hilock_status st;
    int64_t valid;
    if (now_ms() + r->extend_bound_ms > r->deadline - backstop_ms(r)) {
        r->renew_at = -1;
        return;
    }
    st = hilock_extend(r->l, r->o->ttl_ms);
    valid = hilock_validity_ms(r->l);
    if (st == HILOCK_OK)
        r->renew_at = now_ms() + r->o->ttl_ms / 3;
    else if (transient(st) && valid > 100)
        r->renew_at = now_ms() + 100;
    else
        lost(r, st, hilock_client_errmsg(r->c));
}

/* Read the pending records: pass signals on, act on a loss. (REC_TTY_SIGNAL: COMMAND got
 * it from the kernel already; SIGCHLD: the loop's waitpid sees to it.) */
static void drain(run_state *r)
{
    unsigned char rec[2];
    while (read(pipe_fd[0], rec, 2) == 2) {
        if (rec[0] == REC_SIGNAL && rec[1] != SIGCHLD && r->child > 0) {
            pass_on(r, rec[1]);   /* (first: the message may not get out) */
            if (r->o->verbose) {
                char name[24];
                sayf("hilock: %s: passed %s to COMMAND%s\n", r->o->shown, cli_signal_name(rec[1], name, sizeof name),
                     stops_run(rec[1]) ? "'s tree" : r->cmd_done ? "'s remaining processes" : "");
            }
        }
        else if (rec[0] == REC_LOST && !r->lost)
            lost(r, (hilock_status)rec[1], hilock_keepalive_errmsg(r->l));
    }
}

/* How close to the deadline the loop itself declares the loss, should the keepalive not have
 * (a renewal still on the wire): the margin, but no more than a third of the ttl, which a
 * renewal on time always leaves. */
static int64_t backstop_ms(const run_state *r)
{
    return r->margin_ms < r->o->ttl_ms / 3 ? r->margin_ms : r->o->ttl_ms / 3;
}

static void earliest(int64_t *next, int64_t t)
{
    if (t >= 0 && (*next < 0 || t < *next)) *next = t;
}

/* The next thing the loop must do by time: poll()'s timeout in ms. */
static int next_timeout(const run_state *r)
{
    int64_t now = now_ms(), next = -1, left;
    earliest(&next, r->kill_at);
    earliest(&next, r->renew_at);
    if (!r->lost) {   /* read the validity again (renewals) and watch the backstop */
        int64_t period = r->o->ttl_ms / 6;
        earliest(&next, now + (period < 10 ? 10 : period > 1000 ? 1000 : period));
        earliest(&next, r->deadline - backstop_ms(r) > now ? r->deadline - backstop_ms(r) : now);
    }
    if (r->cmd_done) earliest(&next, now + 100);   /* orphans reparented without a SIGCHLD */
    if (next < 0) return -1;   /* nothing due (lost with -L none): wait for a signal */
    left = next - now;
    return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

/* Wait for COMMAND, passing signals on, renewing or acting on a loss. Returns its wait
 * status (-1 if it could not be had). */
static int supervise(run_state *r)
{
    for (;;) {
        struct pollfd p = { pipe_fd[0], POLLIN, 0 };
        size_t left;
        int status, was_done = r->cmd_done, done;
        if ((done = command_done(r)) < 0) return -1;
        /* (in this order: COMMAND's children are ours by the time it is seen exited) */
        left = reap_others(r);
        if (done && !left) {
            stop_guard(r);
            while (waitpid(r->child, &status, 0) < 0)
                if (errno != EINTR) return -1;
            return status;
        }
        if (done && !was_done && r->o->verbose)
            sayf("hilock: %s: COMMAND exited; holding the lock until the %zu processes it left have ended\n",
                 r->o->shown, left);
        if (!r->lost) refresh_deadline(r);
        if (!r->lost && now_ms() >= r->deadline - backstop_ms(r)) {
            char why[120];
            snprintf(why, sizeof why, "no renewal has succeeded, and the validity ends in %lld ms",
                     (long long)(r->deadline - now_ms()));
            lost(r, HILOCK_ETIMEDOUT, why);
        }
        if (r->kill_at >= 0 && now_ms() >= r->kill_at) {
            if (!r->killed) {
                kill_tree(r);
                sayf("hilock: %s: COMMAND still running: sent SIGKILL to %s\n", r->o->shown,
                     own_group ? "its process group and what it left" : "it and what it left");
            } else {
                signal_tree(r, SIGKILL);   /* what kill_tree's bound left (stuck in the kernel) */
            }
            r->killed = 1;
            r->kill_at = now_ms() + 10;   /* again, should something have been left */
        }
        if (r->renew_at >= 0 && now_ms() >= r->renew_at) self_renew(r);
        poll(&p, 1, next_timeout(r));   /* EINTR: go round */
        drain(r);
    }
}

static int exit_status_of(int status)
{
    if (status < 0) return EXIT_OSERR;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return EXIT_OSERR;
}

/* Release (which also stops the keepalive) and decide the exit status. */
static int finish(run_state *r, int status)
{
    const cli *o = r->o;
    hilock_status st = hilock_release(r->l);
    r->child = 0;
    drain(r);   /* a loss reported while COMMAND was exiting */
    if (r->guard_fired && !r->lost) {   /* hilock was stopped or hung past the time to renew */
        sayf("hilock: %s: the guard stopped COMMAND's tree: hilock renewed nothing in time (stopped, hung or "
             "blocked)%s\n", o->shown, st == HILOCK_OK ? "; the lock was still held and is released" : "");
        return EXIT_LOST;
    }
    if (r->lost) return EXIT_LOST;   /* already reported */
    if (st == HILOCK_NOT_HELD || st == HILOCK_LOST) {
        print_error("lock lost before COMMAND ended:", o, hilock_client_errmsg(r->c));
        return EXIT_LOST;
    }
    if (st != HILOCK_OK)   /* the key will expire by its ttl; COMMAND's result stands */
        print_error("release", o, hilock_client_errmsg(r->c));
    else if (o->verbose)
        sayf("hilock: %s released\n", o->shown);
    if (r->stop_sig) return 128 + r->stop_sig;   /* as a shell killed by it reports */
    return exit_status_of(status);
}

/* Keep the lock alive, run COMMAND under supervision, release. */
static int run(const cli *o, hilock_client *c, hilock *l)
{
    run_state r;
    hilock_keepalive_options ka;
    hilock_status st;
    int err, status;
    memset(&r, 0, sizeof r);
    r.o = o;
    r.c = c;
    r.l = l;
    r.guard_fd = r.renew_at = r.kill_at = -1;
    r.margin_ms = loss_margin_ms(o);
    r.lead_ms = kill_lead_ms(o->ttl_ms);
    r.deadline = now_ms() + hilock_validity_ms(l);
    if (hl_plat_pipe(pipe_fd, O_CLOEXEC | O_NONBLOCK) < 0) {
        perror("hilock: pipe");
        hilock_release(l);
        return EXIT_OSERR;
    }
    hilock_keepalive_options_init(&ka);
    ka.lost_margin_ms = r.margin_ms;
    st = hilock_keepalive_ex(l, on_lost, NULL, &ka);
    if (st == HILOCK_EINVAL && (o->legacy || o->bridge)) {   /* not for these kinds: renew here */
        hilock_options opt;   /* the client's, as acquire() made them */
        hilock_options_init(&opt);
        r.self_renew = 1;
        r.extend_bound_ms = bound_round_trips(o->ttl_ms, &opt);
        r.renew_at = now_ms() + o->ttl_ms / 3;
    } else if (st != HILOCK_OK) {
        print_error("keepalive", o, hilock_client_errmsg(c));
        hilock_release(l);
        return st == HILOCK_ENOMEM || st == HILOCK_EIO ? EXIT_OSERR : EXIT_SERVER;
    }
    /* COMMAND's orphans become ours, so the lock outlives none of them (see others()) */
    if ((err = hl_plat_subreaper()) != 0)
        sayf("hilock: cannot become a child subreaper (COMMAND's orphans are not waited for): %s\n", strerror(err));
    if (install_handlers() < 0) {
        perror("hilock: sigaction");
        hilock_release(l);
        return EXIT_OSERR;
    }
    die_if_wait_signalled(&l);   /* (a wait signal after the grant, before the handlers) */
    if ((err = spawn(&r)) != 0) {
        sayf("hilock: %s: %s\n", o->cmd[0], strerror(err));
        hilock_release(l);
        return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
    }
    if ((status = supervise(&r)) < 0)   /* COMMAND cannot be waited for: none of it may outlive the lock */
        kill_tree(&r);
    return finish(&r, status);
}

int main(int argc, char **argv)
{
    cli o;
    hilock_client *c = NULL;
    hilock *l = NULL;
    int rc;
    seen.start_us = now_us();
    rc = cli_parse_args(argc, argv, &o);
    if (rc < 0 && o.tool) {
        hilock_options opt;
        connection_options(&o, &opt);
        rc = !strcmp(o.tool[0], "break") ? hl_break_main(&opt, o.ntool, o.tool) : hl_tool_main(&opt, o.ntool, o.tool);
    }
    if (rc < 0) {
        /* a server closing the connection must not kill hilock with SIGPIPE */
        signal(SIGPIPE, SIG_IGN);
        rc = acquire(&o, &c, &l);
        if (rc < 0) rc = run(&o, c, l);
        say_dropped();
    }
    hilock_free(l);
    hilock_client_free(c);
    free(o.list_copy);
    for (size_t i = 0; i < o.narg_copy; i++) free(o.arg_copy[i]);
    for (size_t i = 0; i < MAX_SERVERS; i++) free(o.tls_copy[i]);
    if (pipe_fd[0] >= 0) close(pipe_fd[0]);
    if (pipe_fd[1] >= 0) close(pipe_fd[1]);
    return rc;
}
