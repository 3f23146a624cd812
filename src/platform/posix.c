/* SPDX-License-Identifier: BSD-3-Clause */
/* posix.c -- the platform layer from POSIX.1-2008 alone (see platform.h), with the one-line
 * calls of the BSDs and macOS where POSIX has none. Built when PLATFORM=posix: the starting
 * point of a FreeBSD or macOS port, and built and tested on Linux too (make PLATFORM=posix),
 * so it does not rot. Only the Linux parts are exercised there; the __APPLE__/__FreeBSD__
 * branches are the port's to prove.
 *
 * What it gives up against linux.c:
 *   - sockets and pipes get FD_CLOEXEC by fcntl after they are made: a fork on another
 *     thread in between may leak one into a child (a port with SOCK_CLOEXEC/pipe2 uses them);
 *   - where MSG_NOSIGNAL is missing (macOS), sockets are set SO_NOSIGPIPE instead;
 *   - without clock selection (macOS), condition variables wait on CLOCK_REALTIME: each wait
 *     is at most HL_PLAT_WALL_SLICE_US long, so a step of the wall clock delays a wake-up by
 *     at most that (HL_PLAT_WALL_CONDVAR forces this path, to test it on Linux);
 *   - the command: no process name; the parent-death signal and the child subreaper only
 *     with FreeBSD's procctl (elsewhere the guard process alone stops COMMAND when hilock
 *     dies, and COMMAND's orphans are not waited for); children are not listed (a FreeBSD
 *     port: procctl(PROC_REAP_GETPIDS); macOS: proc_listchildpids, or a kqueue EVFILT_PROC
 *     NOTE_TRACK watch). */
#if !defined(__APPLE__) && !defined(__FreeBSD__) && !defined(__OpenBSD__) && !defined(__NetBSD__)
#define _POSIX_C_SOURCE 200809L   /* (on the BSDs and macOS it would hide their own calls) */
#endif
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <unistd.h>
#if defined(__FreeBSD__)
#include <sys/procctl.h>
#endif

#include "platform.h"

#if defined(__APPLE__) || defined(__FreeBSD__) || defined(__OpenBSD__) || defined(__NetBSD__)
#define HL_PLAT_BSD 1
#endif

int hl_plat_random(void *buf, size_t n)
{
#ifdef HL_PLAT_BSD
    arc4random_buf(buf, n);   /* the kernel's generator; cannot fail */
    return 0;
#else
    unsigned char *p = buf;
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    while (n > 0) {
        ssize_t r = read(fd, p, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            close(fd);
            if (r == 0) errno = EIO;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    close(fd);
    return 0;
#endif
}

static int64_t mono_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

static struct timespec to_timespec(int64_t t_us)
{
    struct timespec ts = { (time_t)(t_us / 1000000), (long)(t_us % 1000000) * 1000 };
    return ts;
}

/* nanosleep, not clock_nanosleep (macOS has none): sleep what is left, again after a signal */
void hl_plat_sleep_until(int64_t t_us)
{
    int64_t left;
    while ((left = t_us - mono_us()) > 0) {
        struct timespec ts = to_timespec(left);
        nanosleep(&ts, NULL);
    }
}

/* Condition variables: on the monotonic clock where the platform selects clocks (common.c);
 * without clock selection (or with HL_PLAT_WALL_CONDVAR, as make test-platform builds it),
 * on the wall clock, below. */
#if !HL_PLAT_MONO_CONDVAR
#define HL_PLAT_WALL_SLICE_US 100000

int hl_plat_cond_init(pthread_cond_t *cv)
{
    return pthread_cond_init(cv, NULL);   /* waits on CLOCK_REALTIME */
}

/* The monotonic time left, capped to a slice, from the wall clock's now: never t_us converted
 * once, which a step of the wall clock would move by its size. */
void hl_plat_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t t_us)
{
    int64_t left = t_us - mono_us();
    struct timespec now, ts;
    if (left <= 0) return;
    if (left > HL_PLAT_WALL_SLICE_US) left = HL_PLAT_WALL_SLICE_US;
    clock_gettime(CLOCK_REALTIME, &now);
    ts = to_timespec((int64_t)now.tv_sec * 1000000 + now.tv_nsec / 1000 + left);
    pthread_cond_timedwait(cv, mu, &ts);
}
#endif

static int set_flags(int fd, int flags)
{
    int fl;
    if ((flags & O_CLOEXEC) && fcntl(fd, F_SETFD, FD_CLOEXEC) < 0) return -1;
    if ((flags & O_NONBLOCK) && ((fl = fcntl(fd, F_GETFL)) < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
        return -1;
    return 0;
}

static void close_keep_errno(int fd)
{
    int e = errno;
    close(fd);
    errno = e;
}

int hl_plat_socket(int family, int type)
{
    int fd = socket(family, type, 0);
    if (fd < 0) return -1;
#if !defined(MSG_NOSIGNAL) && defined(SO_NOSIGPIPE)
    {
        int one = 1;
        if (setsockopt(fd, SOL_SOCKET, SO_NOSIGPIPE, &one, sizeof one) < 0) {
            close_keep_errno(fd);
            return -1;
        }
    }
#endif
    if (set_flags(fd, O_CLOEXEC | O_NONBLOCK) < 0) {
        close_keep_errno(fd);
        return -1;
    }
    return fd;
}

int hl_plat_pipe(int fd[2], int flags)
{
    if (pipe(fd) < 0) return -1;
    if (set_flags(fd[0], flags) < 0 || set_flags(fd[1], flags) < 0) {
        close_keep_errno(fd[0]);
        close_keep_errno(fd[1]);
        return -1;
    }
    return 0;
}

long hl_plat_thread_id(void)
{
#if defined(__APPLE__)
    uint64_t id = 0;
    pthread_threadid_np(NULL, &id);
    return (long)id;
#elif defined(__FreeBSD__)
    return (long)pthread_getthreadid_np();
#else
    /* no system-wide id in POSIX: pthread_self's bytes (unique among live threads) */
    pthread_t self = pthread_self();
    unsigned long v = 0;
    memcpy(&v, &self, sizeof self < sizeof v ? sizeof self : sizeof v);
    return (long)(v & (unsigned long)LONG_MAX);
#endif
}

const char *hl_plat_progname(void)
{
#ifdef HL_PLAT_BSD
    const char *p = getprogname();
    return p ? p : "";
#else
    return "";
#endif
}

/* ---- the command ---- */

void hl_plat_close_from(int lo)
{
#if defined(__FreeBSD__)
    closefrom(lo);
#else
    hl_plat_close_each(lo);
#endif
}

void hl_plat_set_name(const char *name)
{
    (void)name;   /* pthread_setname_np is not async-signal-safe; ps shows the command's name */
}

int hl_plat_parent_death_signal(int sig)
{
#if defined(__FreeBSD__)
    return procctl(P_PID, 0, PROC_PDEATHSIG_CTL, &sig) < 0 ? errno : 0;
#else
    (void)sig;   /* macOS: none (a kqueue EVFILT_PROC NOTE_EXIT on the parent needs a watcher) */
    return ENOSYS;
#endif
}

int hl_plat_subreaper(void)
{
#if defined(__FreeBSD__)
    return procctl(P_PID, getpid(), PROC_REAP_ACQUIRE, NULL) < 0 ? errno : 0;
#else
    return ENOSYS;
#endif
}

long hl_plat_children_of(pid_t pid, pid_t *out, size_t max)
{
    (void)pid;
    (void)out;
    (void)max;
    errno = ENOSYS;
    return -1;
}

long hl_plat_children(pid_t *out, size_t max)
{
    (void)out;
    (void)max;
    errno = ENOSYS;
    return -1;
}

/* Anonymous memory where the headers name it (MAP_ANON on the BSDs and macOS); else POSIX's
 * own way, a private mapping of /dev/zero (POSIX.1-2008 names no anonymous mapping, and
 * glibc hides MAP_ANONYMOUS from a strict POSIX build). */
#if !defined(MAP_ANONYMOUS) && defined(MAP_ANON)
#define MAP_ANONYMOUS MAP_ANON
#endif
char *hl_plat_stack_new(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
#ifdef MAP_ANONYMOUS
    return hl_plat_stack_guard(mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
                               size);
#else
    void *m;
    int fd = open("/dev/zero", O_RDWR);
    if (fd < 0) return NULL;
    m = mmap(NULL, size + page, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    close(fd);
    return hl_plat_stack_guard(m, size);
#endif
}
