/* SPDX-License-Identifier: BSD-3-Clause */
/* resolve.c -- host names looked up on helper threads (see resolve.h for why).
 *
 * A lookup is shared by two owners, the connection and its thread, each holding one
 * reference; the last to let go frees it. No mutex: a fork while a thread holds one would
 * leave it locked forever in the child, whose copy of the client may still be freed there.
 *
 * Why not glibc's getaddrinfo_a: it is glibc's only (musl has none), it tells of the end
 * through a signal or a thread of its own anyway, and gai_cancel cannot stop a lookup that
 * has started, so a hung one would still need the same care. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "platform.h"
#include "resolve.h"

struct hl_lookup {
    int              refs;        /* atomic: the connection's and the thread's */
    int              done;        /* atomic (release/acquire): rv, sys_err and ai are set */
    int              rv;          /* getaddrinfo's */
    int              sys_err;     /* errno, for EAI_SYSTEM */
    struct addrinfo *ai;
    int              rfd, wfd;    /* the pipe: the connection polls rfd, the thread writes wfd */
    pid_t            pid;         /* the process whose thread runs it (see hl_lookup_end) */
    char             serv[8];
    char             host[];
};

/* Lookups given up while still running (atomic): see HL_LOOKUPS_HUNG_MAX. A forked child
 * starts from 0: the threads that would bring the count down are not in it. */
static int hung;
static pthread_once_t forks_watched = PTHREAD_ONCE_INIT;

static void child_starts(void) { hung = 0; }
static void watch_forks(void) { pthread_atfork(NULL, NULL, child_starts); }

static void lookup_free(hl_lookup *q)
{
    if (q->ai) freeaddrinfo(q->ai);
    free(q);
}

/* The thread's end of the bargain. Its write to a pipe whose reader has gone is an EPIPE,
 * never a SIGPIPE: every signal is blocked on this thread (hl_lookup_start). */
static void *lookup_run(void *arg)
{
    hl_lookup *q = arg;
    struct addrinfo hints;
    memset(&hints, 0, sizeof hints);
    hints.ai_family = AF_UNSPEC;   /* both families in one round (A and AAAA asked together) */
    hints.ai_socktype = SOCK_STREAM;
    /* (no AI_ADDRCONFIG: glibc does not count loopback addresses, so on a host with only
     * loopback it would return nothing for "localhost"; an address of a family this host
     * cannot reach simply fails its connect, and the next one is tried) */
    hints.ai_flags = AI_NUMERICSERV;
    q->rv = getaddrinfo(q->host, q->serv, &hints, &q->ai);
    q->sys_err = errno;
    __atomic_store_n(&q->done, 1, __ATOMIC_RELEASE);
    if (write(q->wfd, "", 1) < 0) { /* (the connection gave up: nobody reads) */ }
    close(q->wfd);
    if (__atomic_sub_fetch(&q->refs, 1, __ATOMIC_ACQ_REL) == 0) {   /* given up while it ran */
        __atomic_sub_fetch(&hung, 1, __ATOMIC_RELAXED);
        lookup_free(q);
    }
    return NULL;
}

static hl_lookup *lookup_new(const char *host, int port, char *err, size_t len)
{
    size_t hl = strlen(host);
    hl_lookup *q = calloc(1, sizeof *q + hl + 1);
    int p[2];
    if (!q) {
        snprintf(err, len, "cannot resolve %.60s: out of memory", host);
        return NULL;
    }
    if (hl_plat_pipe(p, O_CLOEXEC | O_NONBLOCK) < 0) {
        snprintf(err, len, "cannot resolve %.60s: pipe: %s", host, strerror(errno));
        free(q);
        return NULL;
    }
    q->rfd = p[0];
    q->wfd = p[1];
    q->refs = 2;
    q->pid = getpid();
    snprintf(q->serv, sizeof q->serv, "%d", port);
    memcpy(q->host, host, hl + 1);
    return q;
}

/* A detached thread with every signal blocked: the application's handlers never run on it
 * (they may expect its own threads), and its write to a closed pipe raises no SIGPIPE. The
 * default stack: NSS modules (LDAP, systemd-resolved's) are not written for small ones. */
static int spawn(hl_lookup *q)
{
    pthread_attr_t attr;
    pthread_t t;
    sigset_t all, old;
    int rc;
    if ((rc = pthread_attr_init(&attr)) != 0) return rc;
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    rc = pthread_create(&t, &attr, lookup_run, q);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    return rc;
}

hl_lookup *hl_lookup_start(const char *host, int port, int *fd, char *err, size_t len)
{
    hl_lookup *q;
    int rc, h;
    pthread_once(&forks_watched, watch_forks);
    h = __atomic_load_n(&hung, __ATOMIC_RELAXED);
    if (h >= HL_LOOKUPS_HUNG_MAX) {
        snprintf(err, len, "cannot resolve %.60s: %d earlier lookups still hang (the resolver "
                 "does not answer)", host, h);
        return NULL;
    }
    if (!(q = lookup_new(host, port, err, len))) return NULL;
    if ((rc = spawn(q)) != 0) {
        snprintf(err, len, "cannot resolve %.60s: no thread for the lookup: %s", host, strerror(rc));
        close(q->rfd);
        close(q->wfd);
        free(q);
        return NULL;
    }
    *fd = q->rfd;
    return q;
}

int hl_lookup_result(hl_lookup *q, struct addrinfo **out, char *err, size_t len)
{
    if (!__atomic_load_n(&q->done, __ATOMIC_ACQUIRE)) {
        if (q->pid == getpid()) return 0;
        /* a forked child's copy: its thread stayed in the parent, whose byte on the shared
         * pipe may wake this poll too; no answer will ever come here */
        snprintf(err, len, "cannot resolve %.60s: the lookup was left in the parent process (fork)", q->host);
        return -1;
    }
    if (q->rv == 0) {
        *out = q->ai;
        q->ai = NULL;
        return 1;
    }
    snprintf(err, len, "cannot resolve %.60s: %s", q->host,
             q->rv == EAI_SYSTEM ? strerror(q->sys_err) : gai_strerror(q->rv));
    return -1;
}

void hl_lookup_end(hl_lookup *q)
{
    if (!q) return;
    close(q->rfd);
    /* A forked child's copy: its thread is not in this process and will never let go, so
     * the child frees its own copy (of the addresses too if they were complete at the fork).
     * Its copy of the write end is left alone: the parent's thread may have closed that
     * number before the fork, and the child may have reused it since. */
    if (q->pid != getpid()) {
        if (!__atomic_load_n(&q->done, __ATOMIC_ACQUIRE)) q->ai = NULL;
        lookup_free(q);
        return;
    }
    if (__atomic_sub_fetch(&q->refs, 1, __ATOMIC_ACQ_REL) == 0)
        lookup_free(q);
    else
        __atomic_add_fetch(&hung, 1, __ATOMIC_RELAXED);   /* its thread still runs */
}
