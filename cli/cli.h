/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.h -- what the hilock command's files share (cli/main.c: the command and its
 * options; cli/inspect.c: its read-only subcommands):
 *   hilock [-s URL]... inventory [--json] [--progress] [--count=N] [--by-prefix] PATTERN...
 *   hilock [-s URL]... inspect [--json] KEY
 *   hilock [-s URL]... break [--force] [--token T] KEY   (cli/break.c)
 * cli/main.c parses the common options (-s, $HILOCK_SERVERS) and hands over the rest.
 * Layer: cli (this folder: the hilock command, on the library's public headers, include/)
 * May call: base platform
 * (base: the library's own rules for what messages show; platform: process control. Both
 * reach it through libhilock.a, linked statically, by the names declared there.) */
#ifndef HILOCK_CLI_H
#define HILOCK_CLI_H

#include <stddef.h>
#include <stdio.h>

/* Bytes of a key or a message, printable: control characters and bytes >= 0x7f as \xNN, '\'
 * as \\ (as inspect shows keys). */
void hl_tool_print(FILE *f, const char *s, size_t n);

/* The library's own rules for what messages show (secrets of URLs, keys, durations: src/base/base.h).
 * This command links libhilock.a, so it calls them rather than keeping copies that drift. */
#include "base.h"

/* A key as messages show it: the library's form (hl_key_cut) with the key's bytes printable
 * (hl_tool_print). Written into buf (HL_TOOL_KEY_BUF bytes); returns buf. */
#define HL_TOOL_KEY_BUF   (HL_KEY_SHOWN * 4 + HL_KEY_TAIL_BUF)
const char *hl_tool_key_shown(const char *key, char *buf, size_t cap);

#include "hilock.h"

/* Is word one of the subcommands ("inventory", "inspect")? */
int hl_tool_word(const char *word);

/* Run the subcommand argv[0] with its arguments argv[1..argc) on a client made of o (the
 * servers and how to reach them: TLS). Returns the exit status: 0; 64 bad usage; 69 a server
 * failed; 130 interrupted (Ctrl-C). */
int hl_tool_main(const hilock_options *o, int argc, char **argv);

/* hilock -v, on BUSY: the holder record of key on each master, one line each on stderr
 * ("hilock: "KEY" held by host ..., pid N, program ..., granted T ago ..."), and of a
 * semaphore or shared/exclusive lock those of its first three holders ("(permit; ...)");
 * nothing when there is none or the look fails. One more round trip, on that path only. */
void hl_tool_busy_holder(hilock_client *c, const char *key);

/* hilock break (cli/break.c) shows each master's view as inspect does: key, the master's name,
 * then the view's lines (or the error) on stdout. */
#include "hilock_inspect.h"
void hl_tool_show(hilock_client *c, const char *key, size_t master, const hilock_lock_view *lv, const char *error);

/* hilock [-s URL]... break [--force] [--token T] KEY (cli/break.c): argv[0] is "break". Returns the
 * exit status (cli/hilock.1). */
int hl_break_main(const hilock_options *o, int argc, char **argv);

#endif
