/* SPDX-License-Identifier: BSD-3-Clause */
/* cli.c -- the command under torture: `hilock KEY COMMAND` run again and again by a few
 * slots, COMMAND a tree of processes, some slots reaching the server through a proxy that
 * partitions them, hilock itself killed with -9 (main.c injects both).
 *
 * COMMAND is `sh -c` that starts two `torture member` children without exec (as a backup
 * script runs pg_dump) and waits for them. The first process of the tree writes the holding's
 * A record (HILOCK_FENCE as its fence); then each member writes an E record every 10 ms
 * covering [its previous beat, now] while it lives, into the invocation's log. So the tree's
 * windows are a lower bound of its life, whatever kills it, and check.c's overlap sweep
 * judges them as any belief: two trees of one key alive at once is an overlap. A member
 * takes a while to stop after SIGTERM (its cleanup), as real work does.
 *
 * The proxy: 127.0.0.1 only; while partitioned it forwards nothing (a black hole: calls
 * time out, the connect itself completes in the kernel's backlog), and at the heal it cuts
 * every connection it carried. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <arpa/inet.h>
#include <unistd.h>

#include "torture.h"

#define CLI_TTL_MS     TT_CLI_TTL_MS
#define CLI_WAIT_MS    5000
#define BEAT_US        10000
#define HOLD_MIN_MS    200
#define HOLD_MAX_MS    2000   /* trees that outlive a few renewals: a partition can lose the lock under them */
#define STOP_MIN_MS    200
#define STOP_MAX_MS    1000   /* a COMMAND that takes up to 1 s to stop (issue: 2 s) */
#define LIE_MS         1500   /* cli-violation: a member claims to have lived this much longer */

/* ---- the member: one process of COMMAND's tree ---- */

static volatile sig_atomic_t termed;
static void on_term(int sig) { (void)sig; termed = 1; }

static int member_start(int fd, int key, uint64_t fence)
{
    int64_t t = tt_now_us();
    tt_logf(fd, "A %d %llu %lld %lld %lld %d %d", key, (unsigned long long)fence, (long long)t, (long long)t,
            (long long)t, CLI_TTL_MS, CLI_WAIT_MS);
    return 0;
}

/* Beat until the hold is over, or until stop_ms after a SIGTERM (its cleanup); bounded by
 * itself, so nothing outlives a run by more than HOLD_MAX_MS + STOP_MAX_MS. */
static int member_beat(int fd, int key, uint64_t fence, int64_t hold_ms, int64_t stop_ms, int64_t lie_ms)
{
    int64_t t0 = tt_now_us(), last = t0, end = t0 + hold_ms * 1000, term_end = 0;
    signal(SIGTERM, on_term);
    for (;;) {
        int64_t now;
        tt_sleep_us(BEAT_US);
        now = tt_now_us();
        tt_logf(fd, "E %d %llu %lld %lld", key, (unsigned long long)fence, (long long)last, (long long)now);
        last = now;
        if (termed && !term_end) term_end = now + stop_ms * 1000;
        if (now >= end || (term_end && now >= term_end)) break;
    }
    if (lie_ms > 0)   /* cli-violation: a record of a life it did not have */
        tt_logf(fd, "E %d %llu %lld %lld", key, (unsigned long long)fence, (long long)last,
                (long long)(last + lie_ms * 1000));
    return 0;
}

int tt_member_main(int argc, char **argv)
{
    const char *f = getenv("HILOCK_FENCE");
    uint64_t fence = f ? strtoull(f, NULL, 10) : 0;
    int fd, key, rc;
    if (argc < 5) return 2;
    fd = open(argv[2], O_WRONLY | O_APPEND);
    key = atoi(argv[3]);
    if (fd < 0) return 2;
    if (!strcmp(argv[4], "start")) rc = member_start(fd, key, fence);
    else if (argc >= 7) rc = member_beat(fd, key, fence, atoll(argv[4]), atoll(argv[5]), atoll(argv[6]));
    else rc = 2;
    close(fd);
    return rc;
}

/* ---- the slot: hilock again and again ---- */

static const char tree_script[] =
    "\"$0\" member \"$1\" \"$2\" start && { \"$0\" member \"$1\" \"$2\" \"$3\" \"$5\" \"$6\" & "
    "\"$0\" member \"$1\" \"$2\" \"$4\" \"$5\" 0 & wait; }";

/* hilock's stderr is a pipe the slot copies to the err file, so that the block-stderr fault
 * can leave it full and unread: err_fd[0] the slot's read end (non-blocking), err_fd[1] a
 * write end of the slot's own description (/proc/self/fd), non-blocking, to fill it with. */
static pid_t run_hilock(const tt_worker_cfg *cfg, const char *log, int err_fd[2], int key, uint64_t *rng)
{
    char k[16], h1[24], h2[24], stop[24], lie[24], ttl[24], wait[24];
    pid_t pid;
    snprintf(k, sizeof k, "%d", key);
    snprintf(h1, sizeof h1, "%lld", (long long)(HOLD_MIN_MS + tt_rand(rng) % (HOLD_MAX_MS - HOLD_MIN_MS)));
    snprintf(h2, sizeof h2, "%lld", (long long)(50 + tt_rand(rng) % (HOLD_MAX_MS / 2)));
    snprintf(stop, sizeof stop, "%lld", (long long)(STOP_MIN_MS + tt_rand(rng) % (STOP_MAX_MS - STOP_MIN_MS)));
    snprintf(lie, sizeof lie, "%d", cfg->inject && tt_uniform(rng) < 0.3 ? LIE_MS : 0);
    snprintf(ttl, sizeof ttl, "%dms", CLI_TTL_MS);
    snprintf(wait, sizeof wait, "%dms", CLI_WAIT_MS);
    err_fd[0] = err_fd[1] = -1;
    {
        int p[2];
        char name[64];
        if (pipe(p) < 0) return -1;
        snprintf(name, sizeof name, "/proc/self/fd/%d", p[1]);
        err_fd[1] = open(name, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
        fcntl(p[0], F_SETFL, O_NONBLOCK);
        fcntl(p[0], F_SETFD, FD_CLOEXEC);
        err_fd[0] = p[0];
        pid = fork();
        if (pid == 0) {
            int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
            if (fd < 0) _exit(126);
            tt_logf(fd, "H %d %d %d cli", cfg->slot, cfg->gen, (int)getpid());
            close(fd);
            dup2(p[1], 2);   /* hilock's messages: to the slot, which keeps them apart */
            close(p[1]);
            prctl(PR_SET_PDEATHSIG, SIGKILL);   /* the slot dies: hilock dies, its guard ends COMMAND */
            execl(cfg->hilock_bin, "hilock", "--trace", "-s", cfg->urls[0], "-t", ttl, "-w", wait, cfg->keys[key],
                  "sh", "-c", tree_script, cfg->self_bin, log, k, h1, h2, stop, lie, (char *)NULL);
            _exit(127);
        }
        close(p[1]);
    }
    return pid;
}

#define FILLER '\001'   /* never in hilock's messages, which show control bytes as \xNN */

/* Copy what hilock wrote to its stderr pipe into the err file (unless the fault keeps it
 * unread); at the fault's start, fill the pipe to the brim first. */
static void pump_err(const tt_worker_cfg *cfg, int err_fd[2], int err_file, int *blocked)
{
    char buf[4096];
    ssize_t n;
    if (cfg->shm->stderr_blocked[cfg->slot]) {
        if (!*blocked && err_fd[1] >= 0) {
            memset(buf, FILLER, sizeof buf);
            while (write(err_fd[1], buf, sizeof buf) > 0) {}
            while (write(err_fd[1], buf, 1) > 0) {}
        }
        *blocked = 1;
        return;
    }
    if (*blocked) {
        *blocked = 0;
        if (err_file >= 0) tt_logf(err_file, "(torture: stderr was full and unread here)");
    }
    while ((n = read(err_fd[0], buf, sizeof buf)) > 0) {
        size_t k = 0;
        for (ssize_t i = 0; i < n; i++)   /* not the filler */
            if (buf[i] != FILLER) buf[k++] = buf[i];
        if (k && err_file >= 0 && write(err_file, buf, k) < 0) { /* the run goes on */ }
    }
}

/* Wait for hilock (sent SIGTERM when the run ends); meanwhile publish TT_HOLDING once its COMMAND has written the holding's
 * A record (the log grew past the header), so the injector partitions and kills holders. */
static void wait_hilock(const tt_worker_cfg *cfg, tt_slot *s, pid_t pid, const char *log, int err_fd[2],
                        int err_file, int *st)
{
    off_t header = -1;
    int termed_ = 0, blocked = 0;
    for (;;) {
        struct stat sb;
        pid_t w = waitpid(pid, st, WNOHANG);
        if (w == pid || (w < 0 && errno != EINTR)) {
            cfg->shm->stderr_blocked[cfg->slot] = 0;   /* (what is left: read now) */
            pump_err(cfg, err_fd, err_file, &blocked);
            return;
        }
        pump_err(cfg, err_fd, err_file, &blocked);
        if (cfg->shm->stop && !termed_) {   /* the run ends: hilock passes SIGTERM on and releases */
            kill(pid, SIGTERM);
            termed_ = 1;
        }
        if (s->state != TT_HOLDING && stat(log, &sb) == 0) {
            if (header < 0 && sb.st_size > 0) header = sb.st_size;
            else if (header > 0 && sb.st_size > header) s->state = TT_HOLDING;
        }
        tt_sleep_us(5000);
    }
}

void tt_cli_main(const tt_worker_cfg *cfg)
{
    tt_slot *s = &cfg->shm->slot[cfg->slot];
    uint64_t rng = cfg->seed ^ ((uint64_t)cfg->slot << 32) ^ ((uint64_t)cfg->gen << 48);
    char log[600], err[600], msg[64];
    int n = 0, fd, err_file, err_fd[2];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (getppid() == 1) _exit(2);
    snprintf(log, sizeof log, "%s/w%02d-cli-%03d.log", cfg->dir, cfg->slot, cfg->gen);
    snprintf(err, sizeof err, "%s/hilock-%02d.err", cfg->dir, cfg->slot);
    if ((fd = open(log, O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644)) < 0) _exit(2);
    tt_logf(fd, "H %d %d %d cli-slot", cfg->slot, cfg->gen, (int)getpid());
    err_file = open(err, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);   /* hilock's messages, kept apart */
    while (!cfg->shm->stop) {
        char inv[600];
        int st;
        pid_t pid;
        snprintf(inv, sizeof inv, "%s/w%02d-%03d-%04d.log", cfg->dir, cfg->slot, cfg->gen, n++);
        pid = run_hilock(cfg, inv, err_fd, (int)(tt_rand(&rng) % (uint64_t)cfg->nkeys), &rng);
        if (pid < 0) _exit(2);
        s->child = pid;
        wait_hilock(cfg, s, pid, inv, err_fd, err_file, &st);
        close(err_fd[0]);
        if (err_fd[1] >= 0) close(err_fd[1]);
        s->child = 0;
        s->state = TT_IDLE;
        if (WIFSIGNALED(st)) snprintf(msg, sizeof msg, "killed by signal %d", WTERMSIG(st));
        else snprintf(msg, sizeof msg, "exit %d", WEXITSTATUS(st));
        if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) tt_logf(fd, "X cli %s hilock %s", "-", msg);
        tt_sleep_us((int64_t)(tt_rand(&rng) % 50000));
    }
    tt_logf(fd, "Q");
    _exit(0);
}

/* ---- the proxy ---- */

int tt_proxy_listen(int *port)
{
    struct sockaddr_in a;
    socklen_t len = sizeof a;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || listen(fd, 64) < 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    *port = ntohs(a.sin_port);
    return fd;
}

#define MAXPAIRS 64
typedef struct pair { int a, b; } pair;   /* a: the client's side, b: the server's */

static int dial(int port)
{
    struct sockaddr_in a;
    int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    memset(&a, 0, sizeof a);
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons((uint16_t)port);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        if (fd >= 0) close(fd);
        return -1;
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void cut(pair *p)
{
    close(p->a);
    close(p->b);
    p->a = p->b = -1;
}

/* copy what `from` has to `to`; 0 when the connection ended */
static int pump(int from, int to)
{
    char buf[16384];
    ssize_t n = read(from, buf, sizeof buf), off = 0;
    if (n <= 0) return 0;
    while (off < n) {
        ssize_t w = write(to, buf + off, (size_t)(n - off));
        if (w <= 0) return 0;
        off += w;
    }
    return 1;
}

void tt_proxy_main(tt_shm *shm, int p, int lfd, int to_port)
{
    pair pr[MAXPAIRS];
    int npr = 0, epoch = shm->proxy_epoch[p];
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    signal(SIGPIPE, SIG_IGN);
    for (;;) {   /* until stop_all kills it, after the slots: their last releases pass too */
        struct pollfd fds[1 + 2 * MAXPAIRS];
        int nf = 0;
        if (shm->proxy_epoch[p] != epoch) {   /* the partition healed: the old connections are gone */
            epoch = shm->proxy_epoch[p];
            for (int i = 0; i < npr; i++) cut(&pr[i]);
            npr = 0;
        }
        if (shm->partitioned[p]) {
            tt_sleep_us(5000);
            continue;
        }
        fds[nf++] = (struct pollfd){ lfd, POLLIN, 0 };
        for (int i = 0; i < npr; i++) {
            fds[nf++] = (struct pollfd){ pr[i].a, POLLIN, 0 };
            fds[nf++] = (struct pollfd){ pr[i].b, POLLIN, 0 };
        }
        if (poll(fds, (nfds_t)nf, 10) <= 0) continue;
        for (int i = 0; i < npr; i++) {
            int ok = 1;
            if (fds[1 + 2 * i].revents) ok = pump(pr[i].a, pr[i].b);
            if (ok && fds[2 + 2 * i].revents) ok = pump(pr[i].b, pr[i].a);
            if (!ok) cut(&pr[i]);
        }
        for (int i = 0; i < npr;)   /* compact */
            if (pr[i].a < 0) pr[i] = pr[--npr];
            else i++;
        if (fds[0].revents & POLLIN) {
            int a = accept(lfd, NULL, NULL), b;
            if (a < 0) continue;
            if (npr == MAXPAIRS || (b = dial(to_port)) < 0) {
                close(a);
                continue;
            }
            pr[npr++] = (pair){ a, b };
        }
    }
}
