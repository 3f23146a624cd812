/* SPDX-License-Identifier: BSD-3-Clause */
/* linux.c -- the platform layer on Linux (see platform.h): glibc >= 2.30 or musl, any kernel
 * hilock supports. Built when PLATFORM=linux (the Makefile's default on Linux). */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "platform.h"

int hl_plat_random(void *buf, size_t n)
{
    unsigned char *p = buf;
    while (n > 0) {
        ssize_t r = getrandom(p, n, 0);
        if (r < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

static struct timespec to_timespec(int64_t t_us)
{
    struct timespec ts = { (time_t)(t_us / 1000000), (long)(t_us % 1000000) * 1000 };
    return ts;
}

void hl_plat_sleep_until(int64_t t_us)
{
    struct timespec ts = to_timespec(t_us);
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

/* condition variables: common.c's, on the monotonic clock */
#if !HL_PLAT_MONO_CONDVAR
#error "linux.c: condition variables on CLOCK_MONOTONIC need POSIX clock selection"
#endif

int hl_plat_socket(int family, int type)
{
    return socket(family, type | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
}

int hl_plat_pipe(int fd[2], int flags)
{
    return pipe2(fd, flags & (O_CLOEXEC | O_NONBLOCK));
}

long hl_plat_thread_id(void)
{
    return (long)syscall(SYS_gettid);   /* gettid() itself needs glibc 2.30 */
}

const char *hl_plat_progname(void)
{
    return program_invocation_short_name;
}

/* ---- the command ---- */

void hl_plat_close_from(int lo)
{
    /* SYS_close_range: kernel headers >= 5.9 (RHEL 8 has older ones); the kernel may still
     * be older than the headers (ENOSYS). HL_PLAT_NO_CLOSE_RANGE builds the fallback alone. */
#if defined(SYS_close_range) && !defined(HL_PLAT_NO_CLOSE_RANGE)
    if (syscall(SYS_close_range, (unsigned)lo, ~0U, 0) == 0) return;
#endif
    hl_plat_close_each(lo);
}

void hl_plat_set_name(const char *name)
{
    /* the raw system call: a sanitizer's prctl() wrapper takes a lock another thread may
     * have held at the fork (make test-asan hung here once, the guard and hilock forever) */
    syscall(SYS_prctl, PR_SET_NAME, name, 0, 0, 0);
}

int hl_plat_parent_death_signal(int sig)
{
    return syscall(SYS_prctl, PR_SET_PDEATHSIG, sig, 0, 0, 0) < 0 ? errno : 0;
}

/* "/proc/N/task/N/children" without snprintf (async-signal-safe). */
static void children_path(char *buf, pid_t pid)
{
    char num[24];
    int k = 0;
    unsigned long v = (unsigned long)pid;
    char *p = buf;
    do num[k++] = (char)('0' + v % 10); while ((v /= 10) != 0);
    for (const char *s = "/proc/"; *s;) *p++ = *s++;
    for (int i = k; i > 0;) *p++ = num[--i];
    for (const char *s = "/task/"; *s;) *p++ = *s++;
    for (int i = k; i > 0;) *p++ = num[--i];
    for (const char *s = "/children"; *s;) *p++ = *s++;
    *p = '\0';
}

long hl_plat_children_of(pid_t pid, pid_t *out, size_t max)
{
    char file[80], buf[4096];
    ssize_t got;
    size_t n = 0;
    int fd;
    children_path(file, pid);
    if ((fd = open(file, O_RDONLY | O_CLOEXEC)) < 0) return -1;
    got = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (got < 0) return -1;
    buf[got] = '\0';
    for (char *p = buf; *p && n < max;) {   /* "123 456 " */
        long v = 0;
        while (*p == ' ' || *p == '\n') p++;
        if (*p < '0' || *p > '9') break;
        while (*p >= '0' && *p <= '9') v = v * 10 + (*p++ - '0');
        out[n++] = (pid_t)v;
    }
    return (long)n;
}

int hl_plat_subreaper(void)
{
    return prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) < 0 ? errno : 0;
}

/* Add the pids listed in a /proc/self/task/TID/children file. */
static size_t read_children(const char *file, pid_t *out, size_t n, size_t max)
{
    FILE *f = fopen(file, "r");
    int pid;
    if (!f) return n;
    while (n < max && fscanf(f, "%d", &pid) == 1) out[n++] = (pid_t)pid;
    fclose(f);
    return n;
}

/* Without that file (a kernel without CONFIG_PROC_CHILDREN): every process whose parent is
 * us, from /proc/PID/stat; -1 if /proc cannot be read. */
static long scan_children(pid_t *out, size_t max)
{
    DIR *d = opendir("/proc");
    struct dirent *e;
    char file[64], buf[512], *rp;
    size_t n = 0, got;
    pid_t self = getpid();
    int ppid;
    if (!d) return -1;
    while (n < max && (e = readdir(d)) != NULL) {
        FILE *f;
        if (e->d_name[0] < '1' || e->d_name[0] > '9') continue;
        snprintf(file, sizeof file, "/proc/%.20s/stat", e->d_name);
        if (!(f = fopen(file, "r"))) continue;
        got = fread(buf, 1, sizeof buf - 1, f);
        fclose(f);
        buf[got] = '\0';
        /* "pid (comm) state ppid ...": comm may hold anything, ')' last */
        if ((rp = strrchr(buf, ')')) && sscanf(rp + 1, " %*c %d", &ppid) == 1 && ppid == self)
            out[n++] = (pid_t)atoi(e->d_name);
    }
    closedir(d);
    return (long)n;
}

long hl_plat_children(pid_t *out, size_t max)
{
    char file[64];
    size_t n = 0;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    snprintf(file, sizeof file, "/proc/%d/task/%d/children", (int)getpid(), (int)getpid());
    if (!d || access(file, R_OK) < 0) {
        if (d) closedir(d);
        return scan_children(out, max);
    }
    /* a child hangs under the thread that forked it, or any, once reparented */
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') {
            snprintf(file, sizeof file, "/proc/self/task/%.20s/children", e->d_name);
            n = read_children(file, out, n, max);
        }
    closedir(d);
    return (long)n;
}

char *hl_plat_stack_new(size_t size)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return hl_plat_stack_guard(mmap(NULL, size + page, PROT_READ | PROT_WRITE,
                                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0), size);
}
