/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * platform.h -- the platform layer: every call the library and the command make that is not
 * plain POSIX (or is POSIX but missing on a system hilock should build on) goes through here.
 * Layer: platform
 * May call:
 *
 * Owns: randomness, sleeping until a monotonic time, condition variables with monotonic
 * deadlines, sockets and pipes created close-on-exec and non-blocking, sends that raise no
 * SIGPIPE, the thread id and program name in holder texts, and the command's process
 * control (closing descriptors in a forked child, naming it, the parent-death signal, the
 * child subreaper and listing its children).
 * It calls only libc and the operating system, nothing of hilock's; every layer may call it.
 *
 * One implementation is built, chosen by the Makefile's PLATFORM: linux.c (the default on
 * Linux) or posix.c (getentropy/arc4random or /dev/urandom, fcntl, SO_NOSIGPIPE, nanosleep,
 * a CLOCK_REALTIME condition variable where clock selection is missing; the command's process
 * control where the system has it, procctl on FreeBSD). A port (FreeBSD, macOS, ...) provides
 * each function below in one file, with the same contract; scripts/check-platform.sh fails
 * when a Linux-only call appears outside this folder.
 */
#ifndef HILOCK_PLATFORM_H
#define HILOCK_PLATFORM_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

/* ---- the library ---- */

/* n bytes from the kernel's random source (never a user-space seed): 0, or -1 (errno). */
int hl_plat_random(void *buf, size_t n);

/* Sleep until t_us on hl_now_us()'s clock (CLOCK_MONOTONIC); a signal does not cut it short. */
void hl_plat_sleep_until(int64_t t_us);

/* A condition variable whose waits end at a CLOCK_MONOTONIC time (0, or an errno), and one
 * wait on it until t_us (hl_now_us()'s clock). The wait may end early (spuriously, or when a
 * fallback's wall clock steps): callers loop on their own condition and hl_now_us(). */
int  hl_plat_cond_init(pthread_cond_t *cv);
void hl_plat_cond_wait_until(pthread_cond_t *cv, pthread_mutex_t *mu, int64_t t_us);
/* 1 where they wait on CLOCK_MONOTONIC itself (POSIX clock selection; Linux always): the
 * one implementation, common.c's. 0: posix.c waits on the wall clock in slices (a platform
 * without clock selection, or HL_PLAT_WALL_CONDVAR to test that on one with it). */
#include <unistd.h>
#if defined(_POSIX_CLOCK_SELECTION) && _POSIX_CLOCK_SELECTION > 0 && !defined(HL_PLAT_WALL_CONDVAR)
#define HL_PLAT_MONO_CONDVAR 1
#else
#define HL_PLAT_MONO_CONDVAR 0
#endif

/* socket(family, type, 0), non-blocking and close-on-exec, and where the system has no
 * MSG_NOSIGNAL set to raise no SIGPIPE: the descriptor, or -1 (errno). */
int hl_plat_socket(int family, int type);

/* The flag every send() on a socket carries so that writing to a closed connection is an
 * EPIPE, not a SIGPIPE: MSG_NOSIGNAL, or 0 where hl_plat_socket set SO_NOSIGPIPE instead.
 * A macro: the send path stays one system call. */
#ifdef MSG_NOSIGNAL
#define HL_PLAT_NOSIGNAL MSG_NOSIGNAL
#else
#define HL_PLAT_NOSIGNAL 0
#endif

/* pipe() with O_CLOEXEC and/or O_NONBLOCK (flags) on both ends: 0, or -1 (errno). */
int hl_plat_pipe(int fd[2], int flags);

/* The calling thread's id as the system shows it (Linux: gettid), for holder texts. */
long hl_plat_thread_id(void);

/* The running program's name without its directory, or "" if unknown. */
const char *hl_plat_progname(void);

/* A stack of size bytes (a multiple of the page size) for a fiber (src/async/fiber.c): its
 * lowest byte, with one inaccessible page below it (an overflow faults instead of writing over
 * a neighbour), its pages committed only when touched where the system can say so (Linux:
 * MAP_NORESERVE); or NULL. hl_plat_stack_free takes it back with the same size. */
char *hl_plat_stack_new(size_t size);
void  hl_plat_stack_free(char *stack, size_t size);
/* (common.c, for the implementations' hl_plat_stack_new: m, a mapping of size bytes and one
 * page more -- or MAP_FAILED -- with its first page made the guard: the stack, or NULL) */
char *hl_plat_stack_guard(void *m, size_t size);

/* The machine's floating point: on x87 (i386 without SSE math) an expression keeps 80 bits
 * until a store, which then rounds a second time, so a sum can land one ulp from what a
 * double-rounding machine computes. Between hl_plat_fp_double_begin and _end (given what
 * begin returned) each x87 operation rounds as a double does (precision control: 53 bits).
 * Where HL_PLAT_FP_X87 is not defined, doubles already round once per operation. */
#if defined(__i386__) && !defined(__SSE2_MATH__) && defined(__GNUC__)
#define HL_PLAT_FP_X87 1
unsigned hl_plat_fp_double_begin(void);
void     hl_plat_fp_double_end(unsigned saved);
#endif

/* ---- the command (cli/): async-signal-safe, for a forked child of a threaded process ---- */

/* Close every descriptor >= lo (close_range where there is one, else each up to the limit). */
void hl_plat_close_from(int lo);
/* The portable fallback of hl_plat_close_from: close() each descriptor from lo to the soft
 * RLIMIT_NOFILE (at most 65536 of them). Exposed for its test. */
void hl_plat_close_each(int lo);
/* Name the calling process as ps shows it (best effort; a no-op where unsupported). */
void hl_plat_set_name(const char *name);
/* Give the calling process the command line title (as ps -f and pgrep -f show it): written
 * over its own argc strings of argv in place (the area the system shows: contiguous from
 * argv[0]; cut to fit), the rest of that area zeroed. For a forked child, whose argv is its
 * own copy: the parent's is unchanged. Best effort where the system shows a copy it keeps
 * (FreeBSD). */
void hl_plat_set_title(int argc, char **argv, const char *title);
/* Ask for signal sig when the parent dies: 0, ENOSYS where the system has no such request,
 * or another errno. */
int hl_plat_parent_death_signal(int sig);
/* Up to max pids of the children of process pid's main thread (what a subreaper adopts hangs
 * there), for the command's guard, which kills them while hilock is stopped: open/read only.
 * -1 (errno) where they cannot be listed so (ENOSYS, a kernel without the children file). */
long hl_plat_children_of(pid_t pid, pid_t *out, size_t max);

/* ---- the command's process tree (not async-signal-safe) ---- */

/* Become a child subreaper (orphans of descendants are reparented to us): 0, ENOSYS where
 * the system has none, or another errno. */
int hl_plat_subreaper(void);
/* Up to max pids of our children (all threads' children), -1 if they cannot be listed. */
long hl_plat_children(pid_t *out, size_t max);

#endif
