/* SPDX-License-Identifier: BSD-3-Clause */
/* command.h -- what cli/main.c (the lock, COMMAND, its guard) and cli/args.c (the arguments)
 * share: the command's exit statuses and limits, its options as read (struct cli), and the
 * parse and its helpers. The subcommands (cli.h) need none of it. */
#ifndef HILOCK_CLI_COMMAND_H
#define HILOCK_CLI_COMMAND_H

#include <stddef.h>
#include <stdint.h>

#include "cli.h"

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
/* The shortest -t: the lock is renewed every third of it, a failed renewal is retried after
 * ~50 ms (retry_delay_ms) while more than the loss margin (half the ttl with the default -k)
 * is left, and COMMAND's tree is SIGKILLed up to 100 ms before the validity ends
 * (kill_lead_ms, which needs ttl >= 400 ms to get its 100 ms). At 500 ms a renewal has a
 * sixth of the ttl (83 ms) for one retry; below, a lock is lost by one slow round trip
 * (-t 5ms was lost within 29 ms). */
#define MIN_TTL_MS 500
#define MAX_WAIT_MS (INT64_C(1) << 40)   /* -w, -k: about 34 years */

typedef struct cli {
    const char *servers[MAX_SERVERS];
    size_t      nservers;
    char       *list_copy;       /* HILOCK_SERVERS or --servers-file, split in place */
    char       *arg_copy[MAX_SERVERS];   /* -s URLs: copies, as argv is scrubbed */
    size_t      narg_copy;
    const char *servers_file;
    int64_t     wait_ms;         /* HILOCK_WAIT_FOREVER, 0 (-n) or -w */
    int         nowait;          /* -n was given: it wins over -w, which is then said ignored */
    char        wait_opt[32];    /* -w as typed (-w, --wait, --timeout), if given */
    int         conflict_code;   /* -E */
    int64_t     ttl_ms;
    int         legacy;
    const char *preset;
    int         bridge;
    int         fair;            /* --fair: options.fair */
    int         no_fence;        /* --no-fence: options.fencing = 0 */
    int         limit;           /* --limit N: a permit of a semaphore (hilock_sem_acquire); 0 = none */
    int         shared;          /* --shared: a shared grant (hilock_rw_acquire) */
    int         lost_sig;        /* 0 = leave COMMAND running */
    int64_t     kill_after_ms;   /* -k; 0 = SIGKILL only at the validity's end less the lead */
    int         verbose;
    int         trace;           /* --trace: every event of the client on stderr (print_event) */
    int         tls;             /* --tls: redis:// URLs become rediss:// */
    char       *tls_copy[MAX_SERVERS];   /* those rediss:// copies */
    const char *cacert, *cacertdir, *cert, *keyfile, *sni;   /* the tls_* options */
    int         insecure;        /* --insecure: tls_verify = 0 */
    const char *key;
    char        shown[HL_TOOL_KEY_BUF];   /* the key as messages show it (hl_tool_key_shown) */
    char      **cmd;
    const char *shell;           /* -c: COMMAND is /bin/sh -c shell */
    char       *sh_cmd[4];       /* that argv */
    char        shell_opt[32];   /* -c as spelled */
    char        run_opt[32];     /* the first option given that only running COMMAND takes, as spelled */
    char      **tool;            /* inventory / inspect and their arguments (cli/inspect.c) */
    int         ntool;
    int         argc;            /* main's: the guard writes its title over them */
    char      **argv;
} cli;

/* The usage text (hilock --help). */
extern const char cli_usage_text[];
/* Read argv into o: -1 to go on (take the lock, or run a subcommand), else the exit status
 * (--help: 0; a usage error: EXIT_USAGE, said on stderr). */
int cli_parse_args(int argc, char **argv, cli *o);
/* "hilock: " fmt " (see hilock --help)" on stderr; EXIT_USAGE. */
int cli_usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* A signal's name ("TERM", or its number) in buf. */
const char *cli_signal_name(int sig, char *buf, size_t len);
/* Option c as the user spelled it at argv[at] ("-w", "--wait"), in buf. */
const char *cli_spelled(char *const *argv, int at, int c, char *buf, size_t len);

#endif
