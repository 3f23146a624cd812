/* SPDX-License-Identifier: BSD-3-Clause */
/* test_platform.c -- the platform layer (src/platform/platform.h) as built (PLATFORM=linux or
 * posix): unit tests, no server. Each contract in the header, checked against the kernel's
 * own view (fcntl, a closed descriptor's EBADF, the children's pids). Process-wide effects
 * (closing descriptors) happen in a forked child. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base.h"   /* hl_now_us */
#include "platform.h"

static int is_open(int fd)
{
    return fcntl(fd, F_GETFD) >= 0 || errno != EBADF;
}

/* In a child: hold fds 40, 41 and 300 open, run close(lo), exit 0 only if every fd >= lo is
 * closed and 40 (below it) is still open. */
static int closes_from(void (*close_fn)(int), int lo)
{
    pid_t pid = fork();
    int status = -1;
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        int fd = open("/dev/null", O_RDONLY);
        if (fd < 0 || dup2(fd, 40) < 0 || dup2(fd, 41) < 0 || dup2(fd, 300) < 0) _exit(2);
        close_fn(lo);
        _exit(is_open(40) && !is_open(41) && !is_open(300) ? 0 : 1);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

Test(platform, close_from_closes_every_descriptor_from_the_bound_up)
{
    cr_assert_eq(closes_from(hl_plat_close_from, 41), 0);
}

/* what close_from falls back to without close_range (old kernel headers, older kernels, posix.c) */
Test(platform, close_each_closes_every_descriptor_from_the_bound_up)
{
    cr_assert_eq(closes_from(hl_plat_close_each, 41), 0);
}

Test(platform, random_bytes_differ_between_draws)
{
    unsigned char a[32], b[32], zero[32] = { 0 };
    cr_assert_eq(hl_plat_random(a, sizeof a), 0);
    cr_assert_eq(hl_plat_random(b, sizeof b), 0);
    cr_assert_neq(memcmp(a, b, sizeof a), 0);
    cr_assert_neq(memcmp(a, zero, sizeof a), 0);
}

Test(platform, sockets_are_nonblocking_and_close_on_exec)
{
    int fd = hl_plat_socket(AF_UNIX, SOCK_STREAM);
    cr_assert_geq(fd, 0);
    cr_assert(fcntl(fd, F_GETFD) & FD_CLOEXEC);
    cr_assert(fcntl(fd, F_GETFL) & O_NONBLOCK);
    close(fd);
}

Test(platform, pipes_get_exactly_the_flags_asked_for)
{
    int p[2];
    cr_assert_eq(hl_plat_pipe(p, O_CLOEXEC | O_NONBLOCK), 0);
    for (int i = 0; i < 2; i++) {
        cr_assert(fcntl(p[i], F_GETFD) & FD_CLOEXEC);
        cr_assert(fcntl(p[i], F_GETFL) & O_NONBLOCK);
        close(p[i]);
    }
    cr_assert_eq(hl_plat_pipe(p, O_CLOEXEC), 0);
    for (int i = 0; i < 2; i++) {
        cr_assert(fcntl(p[i], F_GETFD) & FD_CLOEXEC);
        cr_assert_not(fcntl(p[i], F_GETFL) & O_NONBLOCK);
        close(p[i]);
    }
}

/* a send to a peer that has gone is EPIPE, and the default SIGPIPE (which would end the
 * test) is not raised */
Test(platform, a_send_to_a_closed_peer_is_epipe_not_sigpipe)
{
    int sv[2];
    struct sigaction dfl, old;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    close(sv[1]);
    sigaction(SIGPIPE, &dfl, &old);
    errno = 0;
    cr_assert_eq(send(sv[0], "x", 1, HL_PLAT_NOSIGNAL), -1);
    cr_assert_eq(errno, EPIPE);
    sigaction(SIGPIPE, &old, NULL);
    close(sv[0]);
}

Test(platform, sleep_until_returns_at_or_after_the_time)
{
    int64_t t = hl_now_us() + 20000;
    hl_plat_sleep_until(t);
    cr_assert_geq(hl_now_us(), t);
    cr_assert_lt(hl_now_us(), t + 5000000);   /* does not hang */
}

/* As the keepalive waits: loop on the monotonic clock; it must end by the deadline (a
 * generous bound: 2 shared cores), and the first wait must not be an instant return. */
Test(platform, condition_variable_waits_end_at_a_monotonic_deadline)
{
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv;
    int64_t start = hl_now_us(), t = start + 150000;
    int rounds = 0;
    cr_assert_eq(hl_plat_cond_init(&cv), 0);
    pthread_mutex_lock(&mu);
    hl_plat_cond_wait_until(&cv, &mu, t);
    cr_assert_geq(hl_now_us() - start, 1000, "the first wait returned at once");
    while (hl_now_us() < t && rounds++ < 1000) hl_plat_cond_wait_until(&cv, &mu, t);
    pthread_mutex_unlock(&mu);
    cr_assert_geq(hl_now_us(), t);
    cr_assert_lt(hl_now_us(), t + 5000000);
    pthread_cond_destroy(&cv);
}

static void *thread_id(void *out)
{
    *(long *)out = hl_plat_thread_id();
    return NULL;
}

Test(platform, each_thread_has_its_own_id)
{
    pthread_t th;
    long other = 0;
    cr_assert_eq(pthread_create(&th, NULL, thread_id, &other), 0);
    pthread_join(th, NULL);
    cr_assert_gt(hl_plat_thread_id(), 0);
    cr_assert_gt(other, 0);
    cr_assert_neq(other, hl_plat_thread_id());
}

/* Where the system lists children (linux.c), a forked child is among them; elsewhere the
 * listing says it cannot (-1). */
/* The title goes over argv's contiguous strings, cut to fit, the rest zeroed; a string that
 * lies elsewhere (not part of the area the system shows) is left alone; a title taken from
 * argv itself is read before it is overwritten. */
Test(platform, set_title_writes_over_the_contiguous_argv_strings_only)
{
    static const char fresh[] = "hilock\0-s\0redis://h:1\0job\0sh";   /* 29 bytes with the NUL */
    char area[sizeof fresh], other[] = "elsewhere", want[sizeof fresh] = "hilock-guard job";
    char *argv[] = { area, area + 7, area + 10, area + 22, area + 26, other, NULL };
    memcpy(area, fresh, sizeof area);
    hl_plat_set_title(6, argv, "hilock-guard job");
    cr_assert_eq(memcmp(area, want, sizeof area), 0, "%s", area);
    cr_assert_str_eq(other, "elsewhere");
    memcpy(area, fresh, sizeof area);
    hl_plat_set_title(5, argv, "a title much longer than the 29 bytes of the area it goes over");
    cr_assert_str_eq(area, "a title much longer than the");   /* 28 bytes and the NUL */
    memcpy(area, fresh, sizeof area);
    hl_plat_set_title(5, argv, argv[2]);   /* from inside argv */
    cr_assert_eq(memcmp(area, "redis://h:1\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0", sizeof area), 0);
    memcpy(area, fresh, sizeof area);
    hl_plat_set_title(0, argv, "x");       /* nothing to write over */
    cr_assert_eq(memcmp(area, fresh, sizeof area), 0);
}

Test(platform, children_lists_a_forked_child)
{
    pid_t kids[64];
    long n, i;
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        pause();
        _exit(0);
    }
    n = hl_plat_children(kids, 64);
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    if (n < 0) {
        cr_assert_eq(errno, ENOSYS);
        return;
    }
    for (i = 0; i < n && kids[i] != pid; i++) {}
    cr_assert_lt(i, n, "the child %d is not listed", (int)pid);
}

/* A fiber's stack: every byte of it is usable, and it is given back whole. */
Test(platform, a_stack_is_usable_from_its_lowest_to_its_highest_byte)
{
    size_t size = 16 * (size_t)sysconf(_SC_PAGESIZE);
    char *s = hl_plat_stack_new(size);
    cr_assert_not_null(s);
    memset(s, 0xa5, size);
    cr_assert_eq((unsigned char)s[0], 0xa5);
    cr_assert_eq((unsigned char)s[size - 1], 0xa5);
    hl_plat_stack_free(s, size);
    hl_plat_stack_free(NULL, size);   /* NULL-safe */
}

/* ... and the page below it is a guard: an overflow faults instead of writing over a
 * neighbour (in a child, its SIGSEGV at the default action: a sanitizer's handler would
 * report the fault instead). */
Test(platform, the_page_below_a_stack_faults)
{
    size_t size = 16 * (size_t)sysconf(_SC_PAGESIZE);
    int status = 0;
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        struct sigaction sa;
        volatile char *s = hl_plat_stack_new(size);
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = SIG_DFL;
        sigaction(SIGSEGV, &sa, NULL);
        if (!s) _exit(2);
        s[size - 1] = 1;   /* (its top is writable) */
        s[-1] = 1;
        _exit(0);
    }
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    cr_assert(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV, "the write below the stack did not fault "
              "(status %#x)", status);
}
