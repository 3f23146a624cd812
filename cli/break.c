/* SPDX-License-Identifier: BSD-3-Clause */
/* break.c -- `hilock break [--force] [--token T] KEY`: show what holds KEY (as inspect shows
 * it), ask, remove it with hilock_break (include/hilock_inspect.h), say what was removed.
 *
 * Asking: with --force, never. Else on the terminal: stdin when it is one, else /dev/tty (a
 * controlling terminal, as ssh -t and sudo use it); with neither (cron, a pipe, setsid) it
 * refuses, exit 77, nothing removed. The question is asked after every master's view was
 * shown, and the removal compares what it removes with what was shown: a key that changed
 * while the operator read it is not touched (exit 75: look again). */
#define _GNU_SOURCE
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "hilock.h"
#include "hilock_inspect.h"
#include "cli.h"

/* the exit statuses of break (cli/hilock.1, hilock --help) */
enum {
    BREAK_OK = 0,          /* removed on every master that held something                  */
    BREAK_NONE = 1,        /* nothing to remove: no such key, or --token is not a holder    */
    BREAK_USAGE = 64,      /* bad usage or input: options, empty KEY, a bad token, a key
                              that holds no lock (a user's value: refused)                   */
    BREAK_SERVER = 69,     /* a server failed                                               */
    BREAK_OSERR = 71,      /* out of memory                                                 */
    BREAK_CHANGED = 75,    /* KEY changed between the look and the removal: not removed     */
    BREAK_REFUSED = 77     /* not confirmed: answered no, or no terminal and no --force     */
};

typedef struct breaker {
    hilock_client *c;
    const char    *key, *token;
    int            force, asked_no_tty;
    char           shown[HL_TOOL_KEY_BUF];
} breaker;

static int usage(const char *fmt, const char *arg)
{
    fputs("hilock: break: ", stderr);
    fprintf(stderr, fmt, arg);
    fputs(" (see hilock --help)\n", stderr);
    return BREAK_USAGE;
}

static void on_show(size_t master, const hilock_lock_view *v, const char *error, void *arg)
{
    breaker *b = arg;
    hl_tool_show(b->c, b->key, master, v, error);
}

/* y or yes (any case) on one line of f */
static int said_yes(FILE *f)
{
    char line[64];
    size_t n;
    if (!fgets(line, sizeof line, f)) return 0;
    n = strcspn(line, "\r\n");
    line[n] = '\0';
    return !strcasecmp(line, "y") || !strcasecmp(line, "yes");
}

static int on_confirm(void *arg)
{
    breaker *b = arg;
    FILE *in = NULL, *out = stderr;
    int tty = -1, yes;
    if (b->force) return 1;
    fflush(stdout);
    if (isatty(0)) {
        in = stdin;
    } else if ((tty = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)) >= 0 && (in = fdopen(tty, "r+"))) {
        out = in;
    } else {
        if (tty >= 0) close(tty);
        b->asked_no_tty = 1;
        return 0;
    }
    fputs("Remove ", out);
    if (b->token) fprintf(out, "the holder %s of ", b->token);
    fprintf(out, "%s as shown above (the fence counter is kept)? [y/N] ", b->shown);
    fflush(out);
    yes = said_yes(in);
    if (in != stdin) fclose(in);
    return yes;
}

static const char *plural(int64_t n, const char *one, const char *many) { return n == 1 ? one : many; }

static void on_done(size_t master, const hilock_break_report *r, const char *error, void *arg)
{
    breaker *b = arg;
    const char *m = hilock_client_master_name(b->c, master);
    if (!r) {
        printf("%s on %s: error: %s\n", b->shown, m, error);
        return;
    }
    if (!strcmp(r->outcome, "none")) {
        printf("%s on %s: nothing to remove%s\n", b->shown, m, b->token ? " (no holder has that token here)" : "");
        return;
    }
    if (!strcmp(r->outcome, "changed")) {
        printf("%s on %s: CHANGED since it was shown: nothing removed (look again)\n", b->shown, m);
        return;
    }
    printf("%s on %s: removed ", b->shown, m);
    if (!strcmp(r->kind, "lock") || !strcmp(r->kind, "legacy"))
        printf("the %s", !strcmp(r->kind, "lock") ? "lock" : "legacy stamp");
    else
        printf("%lld %s %s", (long long)r->removed, !strcmp(r->kind, "semaphore") ? plural(r->removed, "permit", "permits")
               : plural(r->removed, "grant", "grants"), !strcmp(r->kind, "semaphore") ? "of the semaphore" : "of the shared/exclusive lock");
    if (strcmp(r->kind, "lock") && strcmp(r->kind, "legacy"))
        printf(" (%lld left)", (long long)r->left);
    printf(", %lld aux %s, woke %lld %s\n", (long long)r->records, plural(r->records, "record", "records"),
           (long long)r->woken, plural(r->woken, "waiter", "waiters"));
    if (r->fence >= 0)
        printf("  fence    counter kept at %lld: never reset, the next grant's token is larger\n", (long long)r->fence);
    else
        printf("  fence    no counter here (none is ever deleted by break)\n");
}

static int exit_of(hilock_status st)
{
    switch (st) {
    case HILOCK_OK: return BREAK_OK;
    case HILOCK_NOT_HELD: return BREAK_NONE;
    case HILOCK_BUSY: return BREAK_CHANGED;
    case HILOCK_ECANCELED: return BREAK_REFUSED;
    case HILOCK_EINVAL: return BREAK_USAGE;
    case HILOCK_ENOMEM: return BREAK_OSERR;
    default: return BREAK_SERVER;
    }
}

static int run(breaker *b)
{
    hilock_status st = hilock_break(b->c, b->key, b->token, on_show, on_confirm, on_done, b);
    const char *msg = hilock_client_errmsg(b->c);
    fflush(stdout);
    if (st == HILOCK_ECANCELED && b->asked_no_tty)
        fprintf(stderr, "hilock: break: no terminal to ask on, and no --force: nothing removed\n");
    else if (st == HILOCK_ECANCELED)
        fprintf(stderr, "hilock: break: not confirmed: nothing removed\n");
    else if (st != HILOCK_OK)
        fprintf(stderr, "hilock: %s\n", msg);
    return exit_of(st);
}

int hl_break_main(const hilock_options *o, int argc, char **argv)
{
    static const struct option opts[] = {
        { "force", no_argument, NULL, 'f' }, { "token", required_argument, NULL, 't' }, { NULL, 0, NULL, 0 }
    };
    breaker b;
    int opt, rc;
    memset(&b, 0, sizeof b);
    optind = 0;   /* glibc: 0 restarts getopt, after main.c's own parse */
    opterr = 0;
    while ((opt = getopt_long(argc, argv, "+:f", opts, NULL)) != -1) {
        if (opt == 'f') b.force = 1;
        else if (opt == 't') b.token = optarg;
        else if (opt == ':') return usage("option '%s' needs a value", argv[optind - 1]);
        else return usage("unknown option '%s'", argv[optind - 1]);
    }
    if (optind >= argc) return usage("no KEY given%s", "");
    b.key = argv[optind];
    /* options after KEY too: `hilock break KEY --force` reads as it is meant */
    for (int i = optind + 1; i < argc; i++) {
        if (!strcmp(argv[i], "--force") || !strcmp(argv[i], "-f")) b.force = 1;
        else if (!strcmp(argv[i], "--token") && i + 1 < argc) b.token = argv[++i];
        else if (!strncmp(argv[i], "--token=", 8)) b.token = argv[i] + 8;
        else return usage("one KEY only (got '%s' after it)", argv[i]);
    }
    if (!*b.key) return usage("KEY is empty: name the key to break%s", "");
    hl_tool_key_shown(b.key, b.shown, sizeof b.shown);
    if (hilock_client_new(o, &b.c) != HILOCK_OK) {
        fprintf(stderr, "hilock: %s\n", hilock_last_config_error());
        return BREAK_USAGE;
    }
    rc = run(&b);
    hilock_client_free(b.c);
    return rc;
}
