/* SPDX-License-Identifier: BSD-3-Clause */
/* peer.h -- a client written by others, run as a child process for the interop suites: the
 * node peer (tests/interop/node, test_interop.c) and the python peer (tests/interop/python,
 * test_interop_cluster.c). The child dies with the test (PR_SET_PDEATHSIG); every wait on it
 * is bounded. Criterion asserts: for tests only. */
#ifndef HILOCK_TEST_PEER_H
#define HILOCK_TEST_PEER_H

#include <stddef.h>
#include <sys/types.h>

typedef struct hlt_peer {
    pid_t  pid;
    int    fd;          /* its stdout */
    int    in;          /* its stdin (hlt_peer_start with_stdin), else -1 */
    char   out[4096];
    size_t len;
} hlt_peer;

/* The directory of a peer, tests/interop/SUB (holding FILE): $ENV_NAME if set, else found from
 * the working directory or from the test binary's path; asserts it is found. */
const char *hlt_peer_dir(const char *sub, const char *file, const char *env_name);
/* execv("/bin/sh", argv): argv[0] is "sh" (see test_interop.c for why through a shell).
 * with_stdin: a pipe to its stdin (hlt_peer_say), else it inherits ours. */
void hlt_peer_start(hlt_peer *p, const char *const *argv, int with_stdin);
/* Write one line (a '\n' is added) to its stdin. */
void hlt_peer_say(hlt_peer *p, const char *line);
/* Read until a full line arrives (or EOF / timeout). Returns the line (in p->out), or NULL. */
const char *hlt_peer_line(hlt_peer *p, long timeout_ms);
/* Drop the line returned last, keep what followed it. */
void hlt_peer_next(hlt_peer *p);
/* Close its pipes, wait for it to exit (killing it after timeout_ms); its exit status, 128 +
 * the signal, or -1 if it had to be killed. */
int hlt_peer_end(hlt_peer *p, long timeout_ms);
/* A number field of a flat JSON line: "name":123 or "name":"123" (asserts it is there). */
long long hlt_jnum(const char *line, const char *name);

/* The wall clock (CLOCK_REALTIME) in ms: what the legacy recipe's stamps count. */
long long hlt_wall_ms(void);
/* One attempt of the documented legacy recipe (ms stamps, "<") as separate commands on rc, an
 * emulation written for the tests: SETNX key a stamp timeout_ms + 1 ahead; if the key is taken
 * and its stamp has passed, GETSET a new one and win iff the old value returned had passed.
 * 1 if it won (its stamp in mine, 32 bytes), else 0. */
struct redisContext;
int hlt_doc_peer_try(struct redisContext *rc, const char *key, long long timeout_ms, char *mine);

#endif
