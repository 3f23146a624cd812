/* SPDX-License-Identifier: BSD-3-Clause */
/* args.c -- the hilock command's arguments (cli/hilock.1): its usage text, durations, signals,
 * the servers (-s, --servers-file, $HILOCK_SERVERS, --tls) and the options, read into a cli
 * (command.h) by cli_parse_args for main.c, which takes the lock and runs COMMAND. */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hilock.h"
#include "hilock_legacy.h"
#include "cli.h"
#include "command.h"

const char cli_usage_text[] =
    "Usage: hilock [options] KEY [--] COMMAND [ARGS...]\n"
    "       hilock [options] KEY -c 'SHELL COMMAND'\n"
    "       hilock [-s URL]... inventory [--json] [--progress] [--count=N] [--by-prefix] PATTERN...\n"
    "       hilock [-s URL]... inspect [--json] KEY\n"
    "       hilock [-s URL]... break [--force] [--token T] KEY\n"
    "Run COMMAND while holding the lock KEY on Redis: acquire it, keep it alive while\n"
    "COMMAND runs, release it when COMMAND exits, and exit with COMMAND's status.\n"
    "\n"
    "Options:\n"
    "  -n, --nonblock             fail at once (exit -E code) if the lock is busy (-w ignored)\n"
    "  -w, --wait=DURATION        give up (exit -E code) after waiting this long;\n"
    "                             default: wait as long as it takes. Within it, a server\n"
    "                             that is down or restarting is tried again (exit 69 if\n"
    "                             it still fails at the end); without it, it is not\n"
    "  -E, --conflict-exit-code=N exit status when the lock was not acquired (default 1)\n"
    "  -t, --ttl=DURATION         lock lifetime, renewed every third of it while COMMAND\n"
    "                             runs; bounds how long a crashed hilock blocks others\n"
    "                             (default 30s; at least 500ms)\n"
    "  -s, --server=URL           a Redis server; repeat for Redlock over N masters.\n"
    "                             Default: --servers-file, else $HILOCK_SERVERS (URLs\n"
    "                             separated by blanks or commas), else redis://127.0.0.1:6379.\n"
    "                             A password in URL is overwritten in hilock's argv once\n"
    "                             read (best effort: ps may see it before that)\n"
    "      --servers-file=FILE    read the URLs from FILE (as in HILOCK_SERVERS; lines\n"
    "                             starting with # are comments): keeps passwords out of\n"
    "                             the process list\n"
    "      --legacy[=PRESET]      use the legacy SETNX/GETSET recipe with that value format\n"
    "                             (doc, node-redis-lock, jedis-lock, redis-objects,\n"
    "                             redis-py-2, ruby-redis-lock; default doc)\n"
    "      --bridge               modern lock that legacy clients also respect\n"
    "                             (these two: hilock renews them itself, with connect\n"
    "                             and round-trip timeouts cut to a tenth of the ttl)\n"
    "      --fair                 first come, first served: wait in the key's queue, which\n"
    "                             --nonblock does not pass (one server only)\n"
    "      --no-fence             no fencing token (HILOCK_FENCE=0): the lock is one plain\n"
    "                             SET NX PX, the fastest grant (not with --legacy, --bridge, --fair)\n"
    "      --limit=N              a semaphore: at most N runs of KEY at once (one permit\n"
    "                             each, N = 1..1000; Redis >= 3.2, one server)\n"
    "      --shared               a shared lock: run alongside other --shared runs of KEY,\n"
    "                             never with an exclusive holder (a plain hilock KEY, which\n"
    "                             waits for them; while it waits, no new --shared run starts)\n"
    "                             (Redis >= 3.2; not with --limit)\n"
    "      --tls                  reach redis://, redis-sentinel:// and redis-cluster://\n"
    "                             servers over TLS (as rediss://... URLs)\n"
    "      --cacert=FILE          trust the CAs in this PEM file (default: the system's)\n"
    "      --cacertdir=DIR        trust the CAs in this directory (openssl rehash)\n"
    "      --cert=FILE            client certificate (PEM), for servers that ask for one\n"
    "      --key=FILE             its private key (PEM, not encrypted)\n"
    "      --sni=NAME             the server name to send and verify (default: the URL's host)\n"
    "      --insecure             TLS without verifying the server: UNSAFE\n"
    "  -L, --on-lost=SIGNAL       signal sent to COMMAND if the lock is lost (default TERM;\n"
    "                             'none' lets COMMAND finish)\n"
    "  -k, --kill-after=DURATION  then (or after a TERM, INT, HUP or QUIT sent to hilock)\n"
    "                             SIGKILL to COMMAND's whole tree (see below) if it is\n"
    "                             still running after this long (default 5s);\n"
    "                             at the latest just before the lock's validity ends,\n"
    "                             whatever -k says. The loss is declared -k before that\n"
    "                             end, but at least ttl/4 and at most ttl/2 before it\n"
    "  -c, --command=CMD          run /bin/sh -c CMD as COMMAND (as flock -c; also after\n"
    "                             KEY: hilock KEY -c CMD); not with a COMMAND\n"
    "  -v, --verbose              report acquisition, passed signals and release on stderr\n"
    "      --trace                every event of the lock's client on stderr, one line\n"
    "                             each: ms since hilock started, the event, its fields\n"
    "                             (key, node, status, duration, attempts, fence...)\n"
    "  -h, --help                 this text\n"
    "  -V, --version              the version\n"
    "DURATION is a number of seconds (1.5), or numbers each followed by a unit, d, h, m, s\n"
    "or ms, largest first (500ms, 2s, 10m, 1m30s, 1h30m); nothing else.\n"
    "URLs: redis://[[user]:password@]host[:port][/db], unix:///path/redis.sock[?db=N],\n"
    "      rediss://... (redis:// over TLS),\n"
    "      redis-sentinel://[[user]:password@]host[:port][,host[:port]...][/db]#master,\n"
    "      rediss-sentinel://... (TLS to the Sentinels and the nodes),\n"
    "      redis-cluster://[[user]:password@]host[:port][,host[:port]...] (Cluster seeds),\n"
    "      rediss-cluster://... (the same over TLS)\n"
    "\n"
    "COMMAND gets HILOCK_KEY and HILOCK_FENCE (the fencing token) in its environment, and\n"
    "not HILOCK_SERVERS. It runs in a process group of its own, unless hilock is the\n"
    "foreground job of a terminal (then it shares hilock's, and only COMMAND is killed).\n"
    "What COMMAND leaves running is reparented to hilock (a subreaper), which releases the\n"
    "lock only once all of it has exited (a stopped or stuck one keeps hilock waiting);\n"
    "on a loss the whole tree is signalled.\n"
    "If hilock dies (kill -9, OOM killer), COMMAND gets the -L signal (TERM if 'none') at\n"
    "once, and SIGKILL goes to its process group after -k, at the latest just before the\n"
    "lock's validity ends. Processes that leave the group are not reached then.\n"
    "If hilock is stopped or hung (it renews nothing), the guard sends COMMAND's tree SIGTERM\n"
    "and SIGKILL before the lock's validity ends; messages never wait for a stderr nobody reads.\n"
    "SIGTERM, SIGINT, SIGHUP and SIGQUIT sent to hilock go to COMMAND's whole tree, SIGKILL\n"
    "after -k; the lock is released once the tree is gone, and hilock exits 128+N.\n"
    "SIGUSR1 and SIGUSR2 are passed on to COMMAND (the terminal's Ctrl-C already reaches it\n"
    "and is not sent twice).\n"
    "\n"
    "inventory classifies the values of the keys matching each PATTERN on every master\n"
    "(modern token, legacy stamp of which preset, unknown; TTL; passed stamps) and sums\n"
    "them up per key family with advice; inspect shows who holds KEY and how, its fence\n"
    "counter and waiters. Both only read. (A lock named inventory: hilock -- inventory ...)\n"
    "break shows what holds KEY as inspect does, asks (y/N on the terminal; --force: do not\n"
    "ask; no terminal and no --force: refused), then removes it -- the lock, the legacy stamp,\n"
    "or every permit or grant, or only the holder with --token T -- with its aux records, if\n"
    "KEY did not change meanwhile. The fence counter is never reset: tokens keep growing. A\n"
    "holder learns of it at its next renewal (a hilock holder stops its COMMAND: exit 75).\n"
    "break exits 0 removed, 1 nothing to remove, 64 bad usage or KEY holds no lock, 69 a\n"
    "server failed, 75 KEY changed since shown (nothing removed), 77 not confirmed.\n"
    "\n"
    "Exit status:\n"
    "  COMMAND's status; 128+N if COMMAND was killed by signal N\n"
    "  1    the lock was not acquired: busy with -n, or the -w limit passed (see -E)\n"
    "  64   bad usage: option, argument, URL or preset; an option inventory or inspect\n"
    "       does not take\n"
    "  69   a server failed (connect, auth, reply, no quorum); COMMAND was not run\n"
    "  71   a system call failed (pipe, thread)\n"
    "  75   the lock was lost while COMMAND ran (COMMAND was signalled, see -L)\n"
    "  126  COMMAND could not be run; 127 COMMAND was not found\n"
    "  130  inventory stopped by Ctrl-C (143: SIGTERM)\n";

int cli_usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("hilock: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputs(" (see hilock --help)\n", stderr);
    va_end(ap);
    return EXIT_USAGE;
}

/* The units of a DURATION, largest first: a DURATION names each at most once, in this order. */
static const char unit_names[] = "dhms";   /* and "ms": index 4 */
static const double unit_ms[] = { 86400000, 3600000, 60000, 1000, 1 };

/* The unit at p: its index in unit_ms (*len its length), or -1. */
static int unit_at(const char *p, size_t *len)
{
    const char *u = *p ? strchr(unit_names, *p) : NULL;
    if (!u) return -1;
    *len = p[0] == 'm' && p[1] == 's' ? 2 : 1;
    return *len == 2 ? 4 : (int)(u - unit_names);
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* A DURATION, as documented and nothing else: seconds ("2", "1.5"), or parts NUMBER UNIT
 * with the units d, h, m, s and ms, each at most once, largest first ("500ms", "1m30s",
 * "1h30m", "2s500ms"); a NUMBER is digits with an optional fraction. (strtod also took
 * " 5", "+5", "0x10", "1e3", "inf".) Milliseconds, rounded to the nearest; -1 if malformed,
 * -2 if above max_ms once rounded. */
static int64_t parse_duration(const char *s, int64_t max_ms)
{
    double total = 0;
    int next = 0;   /* the smallest unit index still allowed */
    do {
        double v = 0, scale = 1;
        size_t len;
        int u;
        if (!is_digit(*s)) return -1;
        while (is_digit(*s)) v = v * 10 + (*s++ - '0');
        if (*s == '.') {
            if (!is_digit(*++s)) return -1;
            while (is_digit(*s)) v += (*s++ - '0') * (scale /= 10);
        }
        if (!*s && !next) {   /* a plain number: seconds */
            total = v * 1000;
            break;
        }
        if ((u = unit_at(s, &len)) < next) return -1;
        total += v * unit_ms[u];
        next = u + 1;
        s += len;
    } while (*s);
    /* compare the rounded value: the limit itself (365d = 31536000000 ms, which + 0.5 is
     * above it) is allowed */
    total += 0.5;
    return total >= (double)max_ms + 1 ? -2 : (int64_t)total;
}

static int parse_int(const char *s, long lo, long hi, long *out)
{
    char *end;
    if (!is_digit(*s)) return -1;   /* digits only: strtol also skips blanks and takes a sign */
    errno = 0;
    *out = strtol(s, &end, 10);
    return !*end && !errno && *out >= lo && *out <= hi ? 0 : -1;
}

static const struct { const char *name; int sig; } signames[] = {
    { "HUP", SIGHUP }, { "INT", SIGINT }, { "QUIT", SIGQUIT }, { "KILL", SIGKILL },
    { "USR1", SIGUSR1 }, { "USR2", SIGUSR2 }, { "TERM", SIGTERM },
};

/* "SIGTERM", or "signal 34" for one without a name here */
const char *cli_signal_name(int sig, char *buf, size_t len)
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
    if (o->nservers == MAX_SERVERS) return cli_usage_error("at most %d servers", MAX_SERVERS);
    o->servers[o->nservers++] = url;
    return 0;
}

/* -s URL: keep a copy, then overwrite its secrets in argv (what ps and /proc/PID/cmdline
 * show) with '*', by the library's rule (hl_url_secret). Best effort: they were visible from
 * exec until here. */
static int add_server_arg(cli *o, char *url)
{
    const char *copy, *p;
    size_t len;
    if (o->narg_copy == MAX_SERVERS) return cli_usage_error("at most %d servers", MAX_SERVERS);
    if (!(o->arg_copy[o->narg_copy] = strdup(url))) return EXIT_OSERR;
    copy = o->arg_copy[o->narg_copy++];
    if (add_server(o, copy)) return EXIT_USAGE;
    for (p = hl_url_secret(copy, copy, &len); p; p = hl_url_secret(copy, p + len, &len))
        memset(url + (p - copy), '*', len);
    return 0;
}

static int is_blank(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

/* Split a server list (HILOCK_SERVERS, a --servers-file) at blanks, and at commas that start
 * a new URL, with or without blanks after them ("redis://a:1, redis://b:2"), or end the list. */
static int servers_from_list(cli *o, const char *list)
{
    char *p, *start;
    if (!(o->list_copy = strdup(list))) return EXIT_OSERR;
    for (p = start = o->list_copy;; p++) {
        const char *next = p + 1;
        while (*p == ',' && is_blank(*next)) next++;
        int sep = is_blank(*p) || (*p == ',' && (!*next || starts_url(next)));
        if (*p && !sep) continue;
        int last = !*p;
        *p = '\0';
        if (*start && add_server(o, start)) return EXIT_USAGE;
        if (last) return 0;
        start = p + 1;
    }
}

/* Does a server URL of the list hold a password (its own, or the Sentinels')? */
static int holds_password(const cli *o)
{
    size_t len;
    for (size_t i = 0; i < o->nservers; i++)
        if (hl_url_secret(o->servers[i], o->servers[i], &len)) return 1;
    return 0;
}

/* A line whose first non-blank character is '#' is a comment: blanked, so the list splits
 * around it. (Only at a line's start: a Sentinel URL carries its master name after a '#'.) */
static void blank_comments(char *s)
{
    for (char *line = s; *line; ) {
        char *p = line;
        while (*p == ' ' || *p == '\t') p++;
        if (*p == '#')
            while (*p && *p != '\n') *p++ = ' ';
        while (*p && *p != '\n') p++;
        line = *p ? p + 1 : p;
    }
}

/* --servers-file: the same list as HILOCK_SERVERS, from a file (keep it mode 0600); blank
 * lines and comment lines ('#' first) are allowed. */
static int servers_from_file(cli *o, const char *name)
{
    char buf[8192];
    size_t n;
    int rc;
    FILE *f = fopen(name, "r");
    struct stat st;
    int readable_by_others;
    if (!f) return cli_usage_error("--servers-file: %s: %s", name, strerror(errno));
    readable_by_others = fstat(fileno(f), &st) == 0 && (st.st_mode & (S_IRGRP | S_IROTH));
    n = fread(buf, 1, sizeof buf, f);
    rc = ferror(f) ? cli_usage_error("--servers-file: %s: read error", name)
       : n == sizeof buf ? cli_usage_error("--servers-file: %s: longer than %zu bytes", name, sizeof buf - 1)
       : memchr(buf, '\0', n) ? cli_usage_error("--servers-file: %s: not a text file", name) : -1;
    fclose(f);
    if (rc >= 0) return rc;
    buf[n] = '\0';
    blank_comments(buf);
    if ((rc = servers_from_list(o, buf)) != 0) return rc;
    if (!o->nservers) return cli_usage_error("--servers-file: %s: no server URL in it", name);
    if (readable_by_others && holds_password(o))   /* as ssh and .netrc warn; still read it */
        fprintf(stderr, "hilock: warning: %s is readable by others and holds a password (chmod 600 %s)\n",
                name, name);
    return 0;
}

/* ---- options ---- */

enum { OPT_LEGACY = 256, OPT_BRIDGE, OPT_SERVERS_FILE, OPT_TLS, OPT_CACERT, OPT_CACERTDIR, OPT_CERT,
       OPT_KEY, OPT_SNI, OPT_INSECURE, OPT_FAIR, OPT_NO_FENCE, OPT_LIMIT, OPT_SHARED,
       OPT_TRACE };

static const struct option longopts[] = {
    { "nonblock", no_argument, NULL, 'n' },
    { "nb", no_argument, NULL, 'n' },
    { "wait", required_argument, NULL, 'w' },
    { "timeout", required_argument, NULL, 'w' },
    { "conflict-exit-code", required_argument, NULL, 'E' },
    { "ttl", required_argument, NULL, 't' },
    { "server", required_argument, NULL, 's' },
    { "servers-file", required_argument, NULL, OPT_SERVERS_FILE },
    { "legacy", optional_argument, NULL, OPT_LEGACY },
    { "bridge", no_argument, NULL, OPT_BRIDGE },
    { "fair", no_argument, NULL, OPT_FAIR },
    { "no-fence", no_argument, NULL, OPT_NO_FENCE },
    { "limit", required_argument, NULL, OPT_LIMIT },
    { "shared", no_argument, NULL, OPT_SHARED },
    { "tls", no_argument, NULL, OPT_TLS },
    { "cacert", required_argument, NULL, OPT_CACERT },
    { "cacertdir", required_argument, NULL, OPT_CACERTDIR },
    { "cert", required_argument, NULL, OPT_CERT },
    { "key", required_argument, NULL, OPT_KEY },
    { "sni", required_argument, NULL, OPT_SNI },
    { "insecure", no_argument, NULL, OPT_INSECURE },
    { "on-lost", required_argument, NULL, 'L' },
    { "kill-after", required_argument, NULL, 'k' },
    { "command", required_argument, NULL, 'c' },
    { "verbose", no_argument, NULL, 'v' },
    { "trace", no_argument, NULL, OPT_TRACE },
    { "help", no_argument, NULL, 'h' },
    { "version", no_argument, NULL, 'V' },
    { NULL, 0, NULL, 0 },
};

/* --tls, as redis-cli's: every redis:// server is reached as rediss:// and every
 * redis-sentinel:// one as rediss-sentinel:// (the same URL over TLS); other schemes are
 * left as written. Returns -1 to go on, or the status to exit with. */
static int servers_to_tls(cli *o)
{
    for (size_t i = 0; i < o->nservers; i++) {
        const char *rest = o->servers[i] + 5;   /* after "redis" */
        if (strncmp(o->servers[i], "redis://", 8) && strncmp(o->servers[i], "redis-sentinel://", 17) &&
            strncmp(o->servers[i], "redis-cluster://", 16))
            continue;
        if (!(o->tls_copy[i] = malloc(strlen(o->servers[i]) + 2))) return EXIT_OSERR;
        sprintf(o->tls_copy[i], "rediss%s", rest);
        o->servers[i] = o->tls_copy[i];
    }
    return -1;
}

/* The option getopt_long just read from the word argv[at], as the user spelled it: the long
 * name ("--timeout", not its "-w"), else "-c". */
const char *cli_spelled(char *const *argv, int at, int c, char *buf, size_t len)
{
    const char *w = argv[at];
    if (!strncmp(w, "--", 2) && w[2])
        snprintf(buf, len, "%.*s", (int)strcspn(w, "="), w);
    else
        snprintf(buf, len, "-%c", c);
    return buf;
}

/* -w, -k and -t: a DURATION up to max_ms, into *out; the status to exit with if it is not. */
static int duration_arg(const char *opt, const char *arg, int64_t max_ms, int64_t *out)
{
    if ((*out = parse_duration(arg, max_ms)) == -1)
        return cli_usage_error("%s: not a duration: '%s' (seconds, or numbers with d, h, m, s or ms: "
                           "1.5, 500ms, 1m30s)", opt, arg);
    if (*out < 0) return cli_usage_error("%s: '%s' is too long (it must be <= %s)", opt, arg,
                                     max_ms == HILOCK_TTL_MAX_MS ? "365 days" : "2^40 ms, about 34 years");
    return 0;
}

/* Where -c goes: after KEY (flock's "KEY -c CMD") or as an option; not with a COMMAND. */
static int shell_command(cli *o, int argc, char **argv, int *optind_p)
{
    int i = *optind_p;
    if (!o->shell && i < argc && !strcmp(argv[i], "-c")) {   /* flock's order */
        if (i + 2 != argc)
            return cli_usage_error(i + 1 == argc ? "option '-c' needs a value"
                               : "-c takes one shell command: quote it (-c 'CMD ARGS...')");
        strcpy(o->shell_opt, "-c");
        o->shell = argv[i + 1];
    } else if (!o->shell) {
        return -1;
    } else {
        if (i < argc && !strcmp(argv[i], "--")) i++;
        if (i < argc)
            return cli_usage_error("%s and a COMMAND exclude each other (got '%s' after KEY)", o->shell_opt, argv[i]);
    }
    o->sh_cmd[0] = (char *)"/bin/sh";
    o->sh_cmd[1] = (char *)"-c";
    o->sh_cmd[2] = (char *)o->shell;
    *optind_p = argc;
    return -1;
}

/* Fill *o from argv. Returns -1 to go on, or the status to exit with. */
int cli_parse_args(int argc, char **argv, cli *o)
{
    const char *env;
    char name[32];
    long n;
    int c, at;
    memset(o, 0, sizeof *o);
    o->argc = argc;
    o->argv = argv;
    o->wait_ms = HILOCK_WAIT_FOREVER;
    o->conflict_code = EXIT_NOT_ACQUIRED;
    o->ttl_ms = DEFAULT_TTL_MS;
    o->lost_sig = SIGTERM;
    o->kill_after_ms = DEFAULT_KILL_AFTER_MS;
    opterr = 0;
    /* '+': options end at KEY, so COMMAND's own options are left alone */
    while ((at = optind, c = getopt_long(argc, argv, "+:nw:E:t:s:L:k:c:vhV", longopts, NULL)) != -1) {
        /* the name in messages: as typed (-w, --wait or --timeout) */
        const char *opt = cli_spelled(argv, at, c == '?' || c == ':' ? optopt : c, name, sizeof name);
        /* inventory and inspect take only the servers and how to reach them (--tls, --cacert,
         * ..., --insecure: OPT_TLS..OPT_INSECURE): remember what else was given */
        if (c != 's' && c != OPT_SERVERS_FILE && (c < OPT_TLS || c > OPT_INSECURE) && !o->run_opt[0])
            snprintf(o->run_opt, sizeof o->run_opt, "%s", opt);
        switch (c) {
        case 'n': o->nowait = 1; break;
        case 'w':
            if ((c = duration_arg(opt, optarg, MAX_WAIT_MS, &o->wait_ms)) != 0) return c;
            snprintf(o->wait_opt, sizeof o->wait_opt, "%s", opt);
            break;
        case 'E':
            if (parse_int(optarg, 0, 255, &n)) return cli_usage_error("%s: not an exit code 0..255: '%s'", opt, optarg);
            o->conflict_code = (int)n;
            break;
        case 't':
            if ((c = duration_arg(opt, optarg, HILOCK_TTL_MAX_MS, &o->ttl_ms)) != 0) return c;
            if (o->ttl_ms < MIN_TTL_MS)
                return cli_usage_error("%s: '%s' is too short: the ttl must be at least %dms, as the lock "
                                   "is renewed every third of it", opt, optarg, MIN_TTL_MS);
            break;
        case 'c':
            o->shell = optarg;
            snprintf(o->shell_opt, sizeof o->shell_opt, "%s", opt);
            break;
        case 's':
            if ((c = add_server_arg(o, optarg)) != 0) return c;
            break;
        case OPT_SERVERS_FILE: o->servers_file = optarg; break;
        case OPT_LEGACY:
            o->legacy = 1;
            o->preset = optarg ? optarg : "doc";
            break;
        case OPT_BRIDGE: o->bridge = 1; break;
        case OPT_FAIR: o->fair = 1; break;
        case OPT_NO_FENCE: o->no_fence = 1; break;
        case OPT_LIMIT:
            if (parse_int(optarg, 1, HILOCK_SEM_LIMIT_MAX, &n))
                return cli_usage_error("%s: not a limit 1..%d: '%s'", opt, HILOCK_SEM_LIMIT_MAX, optarg);
            o->limit = (int)n;
            break;
        case OPT_SHARED: o->shared = 1; break;
        case OPT_TLS: o->tls = 1; break;
        case OPT_CACERT: o->cacert = optarg; break;
        case OPT_CACERTDIR: o->cacertdir = optarg; break;
        case OPT_CERT: o->cert = optarg; break;
        case OPT_KEY: o->keyfile = optarg; break;
        case OPT_SNI: o->sni = optarg; break;
        case OPT_INSECURE: o->insecure = 1; break;
        case 'L':
            if ((o->lost_sig = parse_signal(optarg)) < 0) return cli_usage_error("%s: unknown signal '%s'", opt, optarg);
            break;
        case 'k':
            if ((c = duration_arg(opt, optarg, MAX_WAIT_MS, &o->kill_after_ms)) != 0) return c;
            break;
        case 'v': o->verbose = 1; break;
        case OPT_TRACE: o->trace = 1; break;
        case 'h': fputs(cli_usage_text, stdout); return 0;
        case 'V': printf("hilock %s\n", HILOCK_VERSION); return 0;
        case ':': return cli_usage_error("option '%s' needs a value", opt);
        default:   /* '?' */
            if (optopt && !strncmp(argv[at], "--", 2))   /* a known long option, given a value */
                return cli_usage_error("option '%s' takes no value (got '%s')", opt, argv[at]);
            return cli_usage_error(optopt ? "unknown option '%s'" : "unknown or ambiguous option '%s'", opt);
        }
    }
    if (optind >= argc) return cli_usage_error("no KEY given");
    if ((hl_tool_word(argv[optind]) || !strcmp(argv[optind], "break")) && strcmp(argv[optind - 1], "--")) {   /* `-- inventory`: a KEY */
        o->tool = argv + optind;
        o->ntool = argc - optind;
    }
    if (o->tool && o->run_opt[0])
        return cli_usage_error("%s does not apply to %s, which takes only -s, --servers-file and the TLS options "
                           "(to lock a key named %s: hilock [options] -- %s COMMAND)", o->run_opt, o->tool[0],
                           o->tool[0], o->tool[0]);
    o->key = argv[optind++];
    if (!o->tool && !*o->key) return cli_usage_error("KEY is empty: name the Redis key to lock");
    hl_tool_key_shown(o->key, o->shown, sizeof o->shown);
    if (o->nowait) {   /* -n means one try, whatever order the options came in */
        if (o->wait_opt[0])
            fprintf(stderr, "hilock: %s is ignored: -n tries once and does not wait\n", o->wait_opt);
        o->wait_ms = 0;
    }
    if (!o->tool && (c = shell_command(o, argc, argv, &optind)) >= 0) return c;
    if (optind < argc && !strcmp(argv[optind], "--")) optind++;
    if (optind >= argc && !o->tool && !o->shell) return cli_usage_error("no COMMAND given");
    o->cmd = o->shell ? o->sh_cmd : argv + optind;
    if (o->legacy && o->bridge) return cli_usage_error("--legacy and --bridge exclude each other");
    if (o->legacy && o->fair) return cli_usage_error("--legacy and --fair exclude each other");
    if (o->no_fence && (o->legacy || o->bridge || o->fair))
        return cli_usage_error("--no-fence is for the modern lock: not with --legacy, --bridge or --fair");
    if (o->limit && o->shared) return cli_usage_error("--limit and --shared exclude each other");
    if (o->fair && (o->limit || o->shared))
        return cli_usage_error("--fair is for the plain lock: %s", o->limit
                           ? "a semaphore's waiters are not served in order" : "a shared/exclusive lock serves a "
                           "waiting writer before new readers instead");
    if ((o->limit || o->shared) && (o->legacy || o->bridge || o->no_fence))
        return cli_usage_error("%s takes permits or grants that always have a fencing token: not with --legacy, "
                           "--bridge or --no-fence", o->limit ? "--limit" : "--shared");
    if (o->nservers && o->servers_file) return cli_usage_error("-s and --servers-file exclude each other");
    if (o->servers_file) {
        if ((c = servers_from_file(o, o->servers_file)) != 0) return c;
    } else if (o->nservers == 0 && (env = getenv("HILOCK_SERVERS")) && *env) {
        if ((c = servers_from_list(o, env)) != 0) return c;
    }
    if (o->nservers == 0) o->servers[o->nservers++] = "redis://127.0.0.1:6379";
    return o->tls ? servers_to_tls(o) : -1;
}
