/*
 * hilock -- run a command while holding a lock on Redis (in the spirit of flock(1)).
 *
 *   hilock [options] KEY [--] COMMAND [ARGS...]
 *
 * Acquires KEY, keeps it alive (hilock_keepalive) while COMMAND runs, releases it when
 * COMMAND exits and exits with COMMAND's status. If the lock is lost meanwhile, COMMAND is
 * signalled (TERM, then KILL after a grace period) and hilock exits with EXIT_LOST.
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
#include <signal.h>
#include <spawn.h>
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
#include "inspect.h"

extern char **environ;

/* Exit statuses besides COMMAND's own (sysexits.h values where one fits). */
enum {
    EXIT_NOT_ACQUIRED = 1,   /* default of -E: busy (-n) or the -w limit passed          */
    EXIT_USAGE = 64,         /* EX_USAGE: bad option, argument, URL or preset             */
    EXIT_SERVER = 69,        /* EX_UNAVAILABLE: a server failed; COMMAND was not run      */
    EXIT_OSERR = 71,         /* EX_OSERR: pipe, spawn or thread failure                   */
    EXIT_LOST = 75,          /* EX_TEMPFAIL: the lock was lost while COMMAND ran          */
    EXIT_CANNOT_EXEC = 126,  /* like shells: COMMAND found but not runnable               */
    EXIT_NOT_FOUND = 127     /* like shells: COMMAND not found                            */
};

#define MAX_SERVERS 32
#define DEFAULT_TTL_MS 30000
#define DEFAULT_KILL_AFTER_MS 5000

/* records on the self-pipe: {kind, value} */
enum { REC_SIGNAL = 1, REC_TTY_SIGNAL, REC_LOST };

/* the signals passed on to COMMAND */
static const int forwarded[] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 };
#define NFORWARDED (sizeof forwarded / sizeof forwarded[0])

typedef struct cli {
    const char *servers[MAX_SERVERS];
    size_t      nservers;
    char       *env_copy;        /* HILOCK_SERVERS, split in place */
    int64_t     wait_ms;         /* HILOCK_WAIT_FOREVER, 0 (-n) or -w */
    int         conflict_code;   /* -E */
    int64_t     ttl_ms;
    int         legacy;
    const char *preset;
    int         bridge;
    int         lost_sig;        /* 0 = leave COMMAND running */
    int64_t     kill_after_ms;   /* 0 = never escalate to SIGKILL */
    int         verbose;
    const char *key;
    char      **cmd;
    char      **tool;            /* inventory / inspect and their arguments (cli/inspect.c) */
    int         ntool;
} cli;

static int pipe_fd[2] = { -1, -1 };

static const char usage_text[] =
    "Usage: hilock [options] KEY [--] COMMAND [ARGS...]\n"
    "       hilock [-s URL]... inventory [--json] [--progress] [--count=N] [--by-prefix] PATTERN...\n"
    "       hilock [-s URL]... inspect [--json] KEY\n"
    "Run COMMAND while holding the lock KEY on Redis: acquire it, keep it alive while\n"
    "COMMAND runs, release it when COMMAND exits, and exit with COMMAND's status.\n"
    "\n"
    "Options:\n"
    "  -n, --nonblock             fail at once (exit -E code) if the lock is busy\n"
    "  -w, --wait=DURATION        give up (exit -E code) after waiting this long;\n"
    "                             default: wait as long as it takes\n"
    "  -E, --conflict-exit-code=N exit status when the lock was not acquired (default 1)\n"
    "  -t, --ttl=DURATION         lock lifetime, renewed every third of it while COMMAND\n"
    "                             runs; bounds how long a crashed hilock blocks others\n"
    "                             (default 30s)\n"
    "  -s, --server=URL           a Redis server; repeat for Redlock over N masters.\n"
    "                             Default: $HILOCK_SERVERS (URLs separated by spaces or\n"
    "                             commas), else redis://127.0.0.1:6379\n"
    "      --legacy[=PRESET]      use the legacy SETNX/GETSET recipe with that value format\n"
    "                             (doc, node-redis-lock, jedis-lock, redis-objects,\n"
    "                             redis-py-2, ruby-redis-lock; default doc)\n"
    "      --bridge               modern lock that legacy clients also respect\n"
    "  -L, --on-lost=SIGNAL       signal sent to COMMAND if the lock is lost (default TERM;\n"
    "                             'none' lets COMMAND finish)\n"
    "  -k, --kill-after=DURATION  then SIGKILL if COMMAND is still running after this long\n"
    "                             (default 5s; 0 = never)\n"
    "  -v, --verbose              report acquisition, passed signals and release on stderr\n"
    "  -h, --help                 this text\n"
    "  -V, --version              the version\n"
    "DURATION is a number of seconds (fractions allowed) or NUMBER followed by ms, s or m.\n"
    "URLs: redis://[[user]:password@]host[:port][/db], unix:///path/redis.sock[?db=N],\n"
    "      redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master\n"
    "\n"
    "COMMAND gets HILOCK_KEY and HILOCK_FENCE (the fencing token) in its environment.\n"
    "SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 sent to hilock are passed on to\n"
    "COMMAND (the terminal's Ctrl-C already reaches it and is not sent twice).\n"
    "\n"
    "inventory classifies the values of the keys matching each PATTERN on every master\n"
    "(modern token, legacy stamp of which preset, unknown; TTL; passed stamps) and sums\n"
    "them up per key family with advice; inspect shows who holds KEY and how, its fence\n"
    "counter and waiters. Both only read. (A lock named inventory: hilock -- inventory ...)\n"
    "\n"
    "Exit status:\n"
    "  COMMAND's status; 128+N if COMMAND was killed by signal N\n"
    "  1    the lock was not acquired: busy with -n, or the -w limit passed (see -E)\n"
    "  64   bad usage: option, argument, URL or preset\n"
    "  69   a server failed (connect, auth, reply, no quorum); COMMAND was not run\n"
    "  71   a system call failed (pipe, thread)\n"
    "  75   the lock was lost while COMMAND ran (COMMAND was signalled, see -L)\n"
    "  126  COMMAND could not be run; 127 COMMAND was not found\n"
    "  130  inventory or inspect stopped by Ctrl-C\n";

/* ---- small helpers ---- */

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hilock: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see hilock --help)\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

/* One line on stderr whatever the library's message holds. */
static void print_error(const char *what, const char *key, const char *msg)
{
    fprintf(stderr, "hilock: %s %s: ", what, key);
    for (; *msg; msg++) fputc(*msg == '\n' || *msg == '\r' ? ' ' : *msg, stderr);
    fputc('\n', stderr);
}

/* "2", "1.5", "2s", "500ms", "1m" -> milliseconds, rounded; -1 if malformed or > max_ms. */
static int64_t parse_duration(const char *s, int64_t max_ms)
{
    char *end;
    double v, unit = 1000;
    errno = 0;
    v = strtod(s, &end);
    if (end == s || errno || !(v >= 0)) return -1;
    if (!strcmp(end, "ms")) unit = 1;
    else if (!strcmp(end, "m")) unit = 60000;
    else if (*end && strcmp(end, "s")) return -1;
    v = v * unit + 0.5;
    return v > (double)max_ms ? -1 : (int64_t)v;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    *out = strtol(s, &end, 10);
    return end != s && !*end && !errno && *out >= lo && *out <= hi ? 0 : -1;
}

static const struct { const char *name; int sig; } signames[] = {
    { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
    { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM },
};

/* "SIGTERM", or "signal 34" for one without a name here */
static const char *signal_name(int sig, char *buf, size_t len)
{
    for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
        if (signames[i].sig == sig) {
            snprintf(buf, len, "SIG%s", signames[i].name);
            return buf;
        }
    snprintf(buf, len, "signal %d", sig);
    return buf;
}

/* "TERM", "SIGTERM", "15" or "none" (0); -1 if unknown. */
static int parse_signal(const char *s)
{
    long n;
    if (!strcmp(s, "none")) return 0;
    if (!strncmp(s, "SIG", 3)) s += 3;
    for (size_t i = 0; i < sizeof signames / sizeof signames[0]; i++)
        if (!strcmp(s, signames[i].name)) return signames[i].sig;
    return parse_int(s, 1, SIGRTMAX, &n) == 0 ? (int)n : -1;
}

/* Does s start with "scheme://"? (a comma before one separates URLs; a comma elsewhere is
 * part of a Sentinel URL's host list) */
static int starts_url(const char *s)
{
    const char *p = s;
    while ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || *p == '-' || *p == '+')
        p++;
    return p > s && !strncmp(p, "://", 3);
}

static int add_server(cli *o, const char *url)
{
    if (o->nservers == MAX_SERVERS) return usage_error("at most %d servers", MAX_SERVERS);
    o->servers[o->nservers++] = url;
    return 0;
}

/* Split $HILOCK_SERVERS at blanks, and at commas that start a new URL. */
static int servers_from_env(cli *o, const char *env)
{
    char *p, *start;
    if (!(o->env_copy = strdup(env))) return EXIT_OSERR;
    for (p = start = o->env_copy;; p++) {
        int sep = *p == ' ' || *p == '\t' || *p == '\n' || (*p == ',' && starts_url(p + 1));
        if (*p && !sep) continue;
        int last = !*p;
        *p = '\0';
        if (*start && add_server(o, start)) return EXIT_USAGE;
        if (last) return 0;
        start = p + 1;
    }
}

/* ---- options ---- */

enum { OPT_LEGACY = 256, OPT_BRIDGE };

static const struct option longopts[] = {
    { "nonblock", no_argument, NULL, 'n' },
    { "nb", no_argument, NULL, 'n' },
    { "wait", required_argument, NULL, 'w' },
    { "timeout", required_argument, NULL, 'w' },
    { "conflict-exit-code", required_argument, NULL, 'E' },
    { "ttl", required_argument, NULL, 't' },
    { "server", required_argument, NULL, 's' },
    { "legacy", optional_argument, NULL, OPT_LEGACY },
    { "bridge", no_argument, NULL, OPT_BRIDGE },
    { "on-lost", required_argument, NULL, 'L' },
    { "kill-after", required_argument, NULL, 'k' },
    { "verbose", no_argument, NULL, 'v' },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
};

/* Fill *o from argv. Returns -1 to go on, or the status to exit with. */
static int parse_args(int argc, char **argv, cli *o)
{
    const char *env;
    long n;
    int c;
    memset(o, 0, sizeof *o);
    o->wait_ms = HILOCK_WAIT_FOREVER;
    o->conflict_code = EXIT_NOT_ACQUIRED;
    o->ttl_ms = DEFAULT_TTL_MS;
    o->lost_sig = SIGTERM;
    o->kill_after_ms = DEFAULT_KILL_AFTER_MS;
    opterr = 0;
    /* '+': options end at KEY, so COMMAND's own options are left alone */
    while ((c = getopt_long(argc, argv, "+:nw:E:t:s:L:k:vhV", longopts, NULL)) != -1) {
        switch (c) {
        case 'n': o->wait_ms = 0; break;
        case 'w':
            if ((o->wait_ms = parse_duration(optarg, INT64_C(1) << 40)) < 0)
                return usage_error("-w: not a duration: '%s'", optarg);
            break;
        case 'E':
            if (parse_int(optarg, 0, 255, &n)) return usage_error("-E: not an exit code 0..255: '%s'", optarg);
            o->conflict_code = (int)n;
            break;
        case 't':
            if ((o->ttl_ms = parse_duration(optarg, HILOCK_TTL_MAX_MS)) <= 0)
                return usage_error("-t: not a duration > 0 and <= 365 days: '%s'", optarg);
            break;
        case 's':
            if (add_server(o, optarg)) return EXIT_USAGE;
            break;
        case OPT_LEGACY:
            o->legacy = 1;
            o->preset = optarg ? optarg : "doc";
            break;
        case OPT_BRIDGE: o->bridge = 1; break;
        case 'L':
            if ((o->lost_sig = parse_signal(optarg)) < 0) return usage_error("-L: unknown signal '%s'", optarg);
            break;
        case 'k':
            if ((o->kill_after_ms = parse_duration(optarg, INT64_C(1) << 40)) < 0)
                return usage_error("-k: not a duration: '%s'", optarg);
            break;
        case 'v': o->verbose = 1; break;
        case 'h': fputs(usage_text, stdout); return 0;
        case 'V': printf("hilock %s\n", HILOCK_VERSION); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default:
            if (optopt) {
                char opt[3] = { '-', (char)optopt, '\0' };
                return usage_error("unknown option '%s'", opt);
            }
            return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc) return usage_error("no KEY given");
    if (hl_tool_word(argv[optind]) && strcmp(argv[optind - 1], "--")) {   /* `-- inventory`: a KEY */
        o->tool = argv + optind;
        o->ntool = argc - optind;
    }
    o->key = argv[optind++];
    if (optind < argc && !strcmp(argv[optind], "--")) optind++;
    if (optind >= argc && !o->tool) return usage_error("no COMMAND given");
    o->cmd = argv + optind;
    if (o->legacy && o->bridge) return usage_error("--legacy and --bridge exclude each other");
    if (o->nservers == 0 && (env = getenv("HILOCK_SERVERS")) && *env) {
        if ((c = servers_from_env(o, env)) != 0) return c;
    }
    if (o->nservers == 0) o->servers[o->nservers++] = "redis://127.0.0.1:6379";
    return -1;
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
     * process group, COMMAND included: passing it on would deliver it twice */
    put_record(si && si->si_code == SI_KERNEL ? REC_TTY_SIGNAL : REC_SIGNAL, sig);
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

static hilock_status lock_once(const cli *o, hilock_client *c, int64_t wait_ms, hilock **lp)
{
    return o->legacy ? hilock_legacy_acquire(c, o->key, o->ttl_ms, wait_ms, lp)
                     : hilock_acquire(c, o->key, o->ttl_ms, wait_ms, lp);
}

static int acquire(const cli *o, hilock_client **cp, hilock **lp)
{
    hilock_options opt;
    hilock_status st;
    int64_t t0;
    hilock_options_init(&opt);
    opt.servers = o->servers;
    opt.nservers = o->nservers;
    opt.bridge = o->bridge;
    if (o->legacy && hilock_codec_preset(o->preset, &opt.codec) != HILOCK_OK)
        return usage_error("--legacy: unknown preset '%s'", o->preset);
    if ((st = hilock_client_new(&opt, cp)) != HILOCK_OK) {
        fprintf(stderr, "hilock: %s\n", hilock_last_config_error());
        return st == HILOCK_EINVAL ? EXIT_USAGE : EXIT_OSERR;
    }
    t0 = now_ms();
    /* one try first: a server that is down or refuses us is reported at once, instead of
     * being retried (silently) for as long as -w allows; then wait for the holder */
    st = lock_once(o, *cp, 0, lp);
    if (st == HILOCK_BUSY && o->wait_ms != 0) {
        int64_t left = o->wait_ms - (now_ms() - t0);
        st = lock_once(o, *cp, o->wait_ms < 0 ? HILOCK_WAIT_FOREVER : left > 0 ? left : 0, lp);
    }
    if (st == HILOCK_OK) {
        if (o->verbose)
            fprintf(stderr, "hilock: %s acquired (fence %llu) after %lld ms\n", o->key,
                    (unsigned long long)hilock_fence(*lp), (long long)(now_ms() - t0));
        return -1;
    }
    if (st == HILOCK_BUSY) {
        if (o->verbose) print_error(o->wait_ms ? "gave up waiting for" : "busy:", o->key, hilock_client_errmsg(*cp));
        return o->conflict_code;
    }
    print_error("lock", o->key, hilock_client_errmsg(*cp));
    return st == HILOCK_EINVAL ? EXIT_USAGE : st == HILOCK_ENOMEM ? EXIT_OSERR : EXIT_SERVER;
}

/* ---- COMMAND ---- */

/* The state of one run, for the main loop. */
typedef struct run_state {
    const cli     *o;
    hilock_client *c;
    hilock        *l;
    pid_t          child;
    int            self_renew;   /* no keepalive for this kind of lock: the loop renews */
    int64_t        renew_at;     /* self_renew: next renewal, -1 = none */
    int64_t        kill_at;      /* SIGKILL time after a loss, -1 = none */
    int            lost;
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
        end = strchrnul(p, ':');
        /* an empty entry is the current directory */
        if ((size_t)snprintf(buf, len, "%.*s%s%s", (int)(end - p), p, end > p ? "/" : "", cmd) < len) {
            if ((e = executable(buf)) == 0) return 0;
            if (e == EACCES) err = EACCES;   /* found, but not runnable: 126 unless found later */
        }
        if (!*end) return err;
    }
}

static int spawn(const cli *o, const hilock *l, pid_t *pid)
{
    posix_spawnattr_t attr;
    sigset_t dfl;
    char fence[24], path[PATH_MAX];
    int err;
    if ((err = find_command(o->cmd[0], path, sizeof path)) != 0) return err;
    snprintf(fence, sizeof fence, "%llu", (unsigned long long)hilock_fence(l));
    if (setenv("HILOCK_KEY", o->key, 1) < 0 || setenv("HILOCK_FENCE", fence, 1) < 0) return errno;
    /* COMMAND starts with default dispositions for what hilock catches or ignores itself
     * (SIGPIPE is ignored here because the server connections must not kill hilock) */
    sigemptyset(&dfl);
    sigaddset(&dfl, SIGPIPE);
    sigaddset(&dfl, SIGCHLD);
    if ((err = posix_spawnattr_init(&attr)) != 0) return err;
    posix_spawnattr_setsigdefault(&attr, &dfl);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    err = posix_spawn(pid, path, NULL, &attr, o->cmd, environ);
    if (err == ENOEXEC) {   /* a script without "#!": run it with sh, as execvp does */
        size_t n = 0;
        char **argv;
        while (o->cmd[n]) n++;
        if (!(argv = calloc(n + 2, sizeof *argv))) {
            err = ENOMEM;
        } else {
            argv[0] = (char *)"sh";
            argv[1] = path;
            memcpy(argv + 2, o->cmd + 1, n * sizeof *argv);   /* with the final NULL */
            err = posix_spawn(pid, "/bin/sh", NULL, &attr, argv, environ);
            free(argv);
        }
    }
    posix_spawnattr_destroy(&attr);
    return err;
}

/* The lock is lost: say why, and signal COMMAND as -L and -k say. */
static void lost(run_state *r, hilock_status why, const char *detail)
{
    const cli *o = r->o;
    char name[24];
    r->lost = 1;
    r->renew_at = -1;
    fprintf(stderr, "hilock: %s: lock lost: ", o->key);
    for (detail = *detail ? detail : hilock_strerror(why); *detail; detail++)
        fputc(*detail == '\n' ? ' ' : *detail, stderr);
    if (!o->lost_sig || r->child <= 0) {
        fputs(r->child > 0 ? "; COMMAND keeps running\n" : "\n", stderr);
        return;
    }
    fprintf(stderr, "; sending %s to COMMAND\n", signal_name(o->lost_sig, name, sizeof name));
    kill(r->child, o->lost_sig);
    if (o->lost_sig != SIGKILL && o->kill_after_ms > 0) r->kill_at = now_ms() + o->kill_after_ms;
}

/* Errors a later renewal may not see (as hilock_keepalive treats them). */
static int transient(hilock_status st)
{
    return st == HILOCK_EIO || st == HILOCK_ETIMEDOUT || st == HILOCK_ENOQUORUM ||
           st == HILOCK_EREPLICAS;
}

/* Renewal of a lock hilock_keepalive does not take (legacy, bridge), on this thread, which
 * has nothing else to do with the client: every third of the ttl, retrying passing errors
 * while the lock is still valid -- the keepalive's rules. */
static void self_renew(run_state *r)
{
    hilock_status st = hilock_extend(r->l, r->o->ttl_ms);
    int64_t valid = hilock_validity_ms(r->l);
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
            if (r->o->verbose) {
                char name[24];
                fprintf(stderr, "hilock: %s: passing %s to COMMAND\n", r->o->key,
                        signal_name(rec[1], name, sizeof name));
            }
            kill(r->child, rec[1]);
        }
        else if (rec[0] == REC_LOST && !r->lost)
            lost(r, (hilock_status)rec[1], hilock_keepalive_errmsg(r->l));
    }
}

/* The next thing the loop must do by time: poll()'s timeout in ms, -1 = none. */
static int next_timeout(const run_state *r)
{
    int64_t next = -1, left;
    if (r->kill_at >= 0) next = r->kill_at;
    if (r->renew_at >= 0 && (next < 0 || r->renew_at < next)) next = r->renew_at;
    if (next < 0) return -1;
    left = next - now_ms();
    return left <= 0 ? 0 : left > 60000 ? 60000 : (int)left;
}

/* Wait for COMMAND, passing signals on, renewing or acting on a loss. Returns its wait
 * status (-1 if it could not be had). */
static int supervise(run_state *r)
{
    for (;;) {
        struct pollfd p = { pipe_fd[0], POLLIN, 0 };
        int status;
        pid_t w = waitpid(r->child, &status, WNOHANG);
        if (w == r->child) return status;
        if (w < 0 && errno != EINTR) return -1;
        if (r->kill_at >= 0 && now_ms() >= r->kill_at) {
            fprintf(stderr, "hilock: %s: COMMAND still running after -k: sending SIGKILL\n", r->o->key);
            kill(r->child, SIGKILL);
            r->kill_at = -1;
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
    if (r->lost) return EXIT_LOST;   /* already reported */
    if (st == HILOCK_NOT_HELD || st == HILOCK_LOST) {
        print_error("lock lost before COMMAND ended:", o->key, hilock_client_errmsg(r->c));
        return EXIT_LOST;
    }
    if (st != HILOCK_OK)   /* the key will expire by its ttl; COMMAND's result stands */
        print_error("release", o->key, hilock_client_errmsg(r->c));
    else if (o->verbose)
        fprintf(stderr, "hilock: %s released\n", o->key);
    return exit_status_of(status);
}

/* Keep the lock alive, run COMMAND under supervision, release. */
static int run(const cli *o, hilock_client *c, hilock *l)
{
    run_state r = { o, c, l, 0, 0, -1, -1, 0 };
    hilock_status st;
    int err;
    if (pipe2(pipe_fd, O_CLOEXEC | O_NONBLOCK) < 0) {
        perror("hilock: pipe");
        hilock_release(l);
        return EXIT_OSERR;
    }
    st = hilock_keepalive(l, on_lost, NULL);
    if (st == HILOCK_EINVAL && (o->legacy || o->bridge)) {   /* not for these kinds: renew here */
        r.self_renew = 1;
        r.renew_at = now_ms() + o->ttl_ms / 3;
    } else if (st != HILOCK_OK) {
        print_error("keepalive", o->key, hilock_client_errmsg(c));
        hilock_release(l);
        return st == HILOCK_ENOMEM || st == HILOCK_EIO ? EXIT_OSERR : EXIT_SERVER;
    }
    if (install_handlers() < 0) {
        perror("hilock: sigaction");
        hilock_release(l);
        return EXIT_OSERR;
    }
    if ((err = spawn(o, l, &r.child)) != 0) {
        fprintf(stderr, "hilock: %s: %s\n", o->cmd[0], strerror(err));
        hilock_release(l);
        return err == ENOENT ? EXIT_NOT_FOUND : EXIT_CANNOT_EXEC;
    }
    return finish(&r, supervise(&r));
}

int main(int argc, char **argv)
{
    cli o;
    hilock_client *c = NULL;
    hilock *l = NULL;
    int rc = parse_args(argc, argv, &o);
    if (rc < 0 && o.tool) rc = hl_tool_main(o.servers, o.nservers, o.ntool, o.tool);
    if (rc < 0) {
        /* a server closing the connection must not kill hilock with SIGPIPE */
        signal(SIGPIPE, SIG_IGN);
        rc = acquire(&o, &c, &l);
        if (rc < 0) rc = run(&o, c, l);
    }
    hilock_free(l);
    hilock_client_free(c);
    free(o.env_copy);
    if (pipe_fd[0] >= 0) close(pipe_fd[0]);
    if (pipe_fd[1] >= 0) close(pipe_fd[1]);
    return rc;
}
