/* SPDX-License-Identifier: BSD-3-Clause */
/* client.c -- options, validation and the client's lifetime. */
#include <assert.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "lock.h"
#include "session.h"
#include "transport.h"

static __thread char config_err[256];

/* Only ever changed in a fresh child, which has one thread: no other thread can race it. */
unsigned long hl_fork_gen;
static pthread_once_t fork_once = PTHREAD_ONCE_INIT;

static void on_fork_child(void) { hl_fork_gen++; }
static void watch_forks(void) { pthread_atfork(NULL, NULL, on_fork_child); }

int hl_forked(const hilock_client *c) { return c->fork_gen != hl_fork_gen; }

hilock_status hl_check_fork(hilock_client *c)
{
    if (c->runner && !c->runner->may_block(c))   /* (its own flows run the blocking code) */
        return hl_fail(c, HILOCK_EINVAL, "client attached to an event loop: its blocking calls "
                       "are refused; use the _async calls (hilock_async.h)");
    if (!hl_forked(c)) return HILOCK_OK;
    return hl_fail(c, HILOCK_EINVAL, "client used in a forked child (pid %ld); made in pid %ld "
                   "(after fork, the child may only free it)", (long)getpid(), c->pid);
}

/* The serial (hilock_client.serial) of the client on which this thread's last call was
 * refused (hl_enter), 0: none -- a serial, not an address, so a new client made where a freed
 * one was is not taken for it. Its address is also the thread's identity in
 * hilock_client.owner: a thread-local's address is unique among live threads and costs no
 * system call (pthread_t is not portably an integer). */
static __thread unsigned long refused_serial;
static __thread int refused_observing;   /* ... and it was refused as made from an observer */
static unsigned long serials;   /* atomic: the last serial given */

/* The value of hilock_client.owner while no thread is inside: 0, or for a client attached to
 * an event loop, the attaching thread's identity | 1 (identities are aligned addresses): only
 * that thread may take it, so another thread never runs the loop's code (its timer, its
 * fds), even while the loop's thread is outside hilock. The binding lives in owner itself, so
 * one compare-and-swap both checks it and takes the client: no stale read of a separate field.
 * Set by the attaching thread's hl_leave (c->loop is set by then), dropped by the hl_leave
 * after the loop is let go (hilock_client_free). */
static uintptr_t idle_owner(const hilock_client *c, uintptr_t me) { return c->loop ? me | 1 : 0; }

/* One compare-and-swap per public call (docs: its cost next to a lock cycle's round trips). */
hilock_status hl_enter(hilock_client *c, int *took)
{
    uintptr_t me = (uintptr_t)&refused_serial, cur = 0;
    *took = 0;
    /* a forked child's copy: refused whatever call it is (its owner may be a parent
     * thread's, copied); the child has one thread, so errmsg is ours to write */
    if (hl_forked(c)) return hl_check_fork(c);
    if (hl_observing()) {   /* from inside an observer (hilock_observe.h): nothing is sent */
        refused_serial = c->serial;
        refused_observing = 1;
        return HILOCK_EINVAL;
    }
    if (__atomic_load_n(&c->owner, __ATOMIC_RELAXED) != me) {
        if (!__atomic_compare_exchange_n(&c->owner, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED) &&
            (cur != (me | 1) ||   /* idle, bound to this thread (idle_owner) */
             !__atomic_compare_exchange_n(&c->owner, &cur, me, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))) {
            refused_serial = c->serial;   /* not c->errmsg: the thread inside owns it */
            refused_observing = 0;
            return HILOCK_EINVAL;
        }
        *took = 1;
        hl_cancel_enter(c->cancel);
    }
    if (refused_serial == c->serial) refused_serial = 0;
    return HILOCK_OK;
}

hilock_status hl_cancel_verdict(hilock_client *c, hilock_status st)
{
    char was[HL_ERRMSG_MAX];
    c->cancel->hit = 0;
    if (st == HILOCK_OK || st == HILOCK_ECANCELED) return st;
    memcpy(was, c->errmsg, sizeof was);
    if (strstr(was, "cancelled")) return hl_fail(c, HILOCK_ECANCELED, "%s", was);
    return hl_fail(c, HILOCK_ECANCELED, "cancelled%s%.*s", was[0] ? ": " : "",
                   (int)sizeof was - 40, was);
}

hilock_status hl_leave(hilock_client *c, int took, hilock_status st)
{
    if (took && c->cancel->hit) st = hl_cancel_verdict(c, st);
    if (took) __atomic_store_n(&c->owner, idle_owner(c, (uintptr_t)&refused_serial), __ATOMIC_RELEASE);
    return st;
}

void hilock_cancel(hilock_client *c)
{
    if (c) hl_cancel_ask(c->cancel);
}

/* hilock_client_free's way in: as hl_enter, but a loop's client that no thread is inside
 * may be taken by any thread (freeing is the one call not bound to the loop's thread). */
static void enter_to_free(hilock_client *c, int *took)
{
    uintptr_t me = (uintptr_t)&refused_serial, cur;
    if (hl_enter(c, took) == HILOCK_OK) return;
    refused_serial = 0;
    cur = __atomic_load_n(&c->owner, __ATOMIC_RELAXED);
    *took = (cur & 1) && __atomic_compare_exchange_n(&c->owner, &cur, me, 0, __ATOMIC_ACQUIRE,
                                                     __ATOMIC_RELAXED);
}

const char *hilock_last_config_error(void) { return config_err; }

static hilock_status config_fail(hilock_status st, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

static hilock_status config_fail(hilock_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(config_err, sizeof config_err, fmt, ap);
    va_end(ap);
    return st;
}

/* Where each field ends, in declaration order: fields are only ever appended (here too). */
#define END(f) HL_FIELD_END(hilock_options, f)
static const size_t options_ends[] = {
    END(servers), END(nservers), END(connect_timeout_ms), END(io_timeout_ms), END(retry_delay_ms),
    END(drift_factor), END(min_replicas), END(replicas_timeout_ms), END(failover_guard), END(bridge),
    END(codec), END(skew_margin_ms), END(clock_offset_ms), END(legacy_pexpire), END(wake),
    END(failover_guard_ms), END(tls_ca_file), END(tls_ca_path), END(tls_cert_file), END(tls_key_file),
    END(tls_server_name), END(tls_verify), END(fair), END(fencing), END(poll_ms),
};
/* A field appended to the struct but not to the list above fails the build here (the last
 * field listed must end within the struct's trailing padding). */
typedef char hl_options_ends_complete[sizeof(hilock_options) - END(poll_ms) < 8 ? 1 : -1];
#undef END

static void options_defaults(hilock_options *o)
{
    memset(o, 0, sizeof *o);
    o->connect_timeout_ms = 1000;
    o->io_timeout_ms = 1000;
    o->retry_delay_ms = 50;
    o->drift_factor = 0.01;
    o->min_replicas = 0;
    o->replicas_timeout_ms = 100;
    o->failover_guard = -1;
    o->bridge = 0;
    /* the documented recipe: integer seconds, +1, a stamp equal to now is not yet expired */
    o->codec.unit = HILOCK_UNIT_S;
    o->codec.decimals = 0;
    o->codec.plus_one = 1;
    o->codec.expired_if_equal = 0;
    o->codec.suffix = HILOCK_SUFFIX_NONE;
    o->skew_margin_ms = 0;
    o->clock_offset_ms = 0;
    o->legacy_pexpire = 0;
    o->wake = 1;
    o->tls_verify = 1;
    o->fencing = 1;
    o->poll_ms = 1000;
}

void hilock_options_init_sized(hilock_options *o, size_t size)
{
    hilock_options def;
    options_defaults(&def);
    hl_sized_init(o, size, &def, sizeof def);
}

/* The symbol binaries built against 0.1.0's header call (no size argument): that size. */
void (hilock_options_init)(hilock_options *o)
{
    hilock_options_init_sized(o, HL_OPTIONS_V0_SIZE);
}

static const char *check_options(const hilock_options *o)
{
    if (!o->servers || o->nservers == 0) return "no server given (options.servers / nservers)";
    if (o->nservers > HL_MAX_NODES) return "at most 32 servers";
    if (o->connect_timeout_ms <= 0 || o->connect_timeout_ms > 3600000)
        return "connect_timeout_ms must be in 1..3600000";
    if (o->io_timeout_ms <= 0 || o->io_timeout_ms > 3600000)
        return "io_timeout_ms must be in 1..3600000";
    if (o->retry_delay_ms <= 0 || o->retry_delay_ms > 600000)
        return "retry_delay_ms must be in 1..600000";
    if (!(o->drift_factor >= 0.0 && o->drift_factor < 0.5)) return "drift_factor must be in [0, 0.5)";
    if (o->min_replicas < 0 || o->min_replicas > 64) return "min_replicas must be in 0..64";
    if (o->replicas_timeout_ms <= 0 || o->replicas_timeout_ms > 3600000)
        return "replicas_timeout_ms must be in 1..3600000";
    if (o->failover_guard < -1 || o->failover_guard > 1) return "failover_guard must be -1, 0 or 1";
    if (o->failover_guard_ms < 0 || o->failover_guard_ms > HILOCK_TTL_MAX_MS)
        return "failover_guard_ms must be in 0..HILOCK_TTL_MAX_MS";
    if (o->bridge < 0 || o->bridge > 1) return "bridge must be 0 or 1";
    if (o->wake < 0 || o->wake > 1) return "wake must be 0 or 1";
    if (o->poll_ms <= 0 || o->poll_ms > 600000) return "poll_ms must be in 1..600000";
    if (o->codec.unit < HILOCK_UNIT_S || o->codec.unit > HILOCK_UNIT_US) return "codec.unit is not a hilock_unit";
    if ((o->codec.decimals < 0 || o->codec.decimals > 6) && o->codec.decimals != HILOCK_DECIMALS_RUBY &&
        o->codec.decimals != HILOCK_DECIMALS_PYTHON)
        return "codec.decimals must be in 0..6, HILOCK_DECIMALS_RUBY or HILOCK_DECIMALS_PYTHON";
    if (o->codec.decimals < 0 && o->codec.unit != HILOCK_UNIT_S)
        return "codec.decimals HILOCK_DECIMALS_RUBY and _PYTHON need codec.unit HILOCK_UNIT_S";
    if (o->codec.suffix < HILOCK_SUFFIX_NONE || o->codec.suffix > HILOCK_SUFFIX_PID_THREAD)
        return "codec.suffix is not a hilock_suffix";
    if (o->bridge && o->nservers != 1)
        return "bridge mode needs exactly one server (legacy peers use one; no quorum)";
    if (o->skew_margin_ms < 0 || o->skew_margin_ms > 3600000) return "skew_margin_ms must be in 0..3600000";
    if (o->clock_offset_ms < -86400000 || o->clock_offset_ms > 86400000)
        return "clock_offset_ms must be in -86400000..86400000";
    if (o->legacy_pexpire < 0 || o->legacy_pexpire > 1) return "legacy_pexpire must be 0 or 1";
    if (o->tls_verify < 0 || o->tls_verify > 1) return "tls_verify must be 0 or 1";
    if (o->fair < 0 || o->fair > 1) return "fair must be 0 or 1";
    if (o->fair && o->bridge)
        return "fair is not supported with bridge: legacy peers know no queue and would pass it";
    if (o->fencing < 0 || o->fencing > 1) return "fencing must be 0 or 1";
    if (o->bridge && !o->fencing)
        return "fencing = 0 needs bridge = 0 (a bridge lock writes a legacy stamp with its token, "
               "not a plain SET NX PX)";
    if (o->fair && !o->fencing)
        return "fair = 1 needs fencing = 1 (a fair grant is the queue's script, which mints the "
               "token; fencing = 0 is the plain SET NX PX path)";
    /* src/kinds/fair.c: an entry lives 2 x io_timeout_ms + retry_delay_ms after its waiter's last
     * call, and a live waiter calls again within 1.5 x (io_timeout_ms + retry_delay_ms) */
    if (o->fair && o->retry_delay_ms > o->io_timeout_ms)
        return "fair = 1 needs retry_delay_ms <= io_timeout_ms (a waiter pausing longer would let "
               "its queue entry lapse while it still waits: the lock would silently stop being "
               "first come, first served)";
    return NULL;
}

static void client_destroy(hilock_client *c)
{
    for (size_t i = 0; i < c->nnodes; i++) {
        hl_node *n = &c->nodes[i];
        hl_node_close(n);
        if (n->topo && n->topo->free) n->topo->free(n);
        for (size_t u = 0; u < n->nundo; u++) {
            free(n->undo[u].key);
            free(n->undo[u].value);
        }
        free(n->undo);
        free(n->name);
        hl_url_free(&n->url);
        for (int q = 0; q < HL_MAX_CMDS; q++) hl_reply_free(n->reply[q]);
    }
    free(c->nodes);
    free(c->cmdinfo);   /* guarded.c's: one array */
    free(c->record_memo);
    hl_buf_free(&c->obuf);
    /* nnodes, not opt.nservers: a copy made just before node_name() failed is freed too */
    for (size_t i = 0; i < c->nnodes && c->servers; i++) free(c->servers[i]);
    free(c->servers);
    hl_tls_ctx_free(c->tls);
    free((char *)c->opt.tls_ca_file);
    free((char *)c->opt.tls_ca_path);
    free((char *)c->opt.tls_cert_file);
    free((char *)c->opt.tls_key_file);
    free((char *)c->opt.tls_server_name);
    pthread_mutex_destroy(&c->live_mu);
    hl_cancel_free(&c->cancel_own);
    free(c);
}

/* The tls_* strings, owned by the client from here on (c->opt holds the caller's pointers on
 * entry). -1: out of memory (what was copied is freed with the client). */
static int copy_tls_strings(hilock_client *c)
{
    const char **f[] = {&c->opt.tls_ca_file, &c->opt.tls_ca_path, &c->opt.tls_cert_file,
                        &c->opt.tls_key_file, &c->opt.tls_server_name};
    const char *given[sizeof f / sizeof f[0]];
    int failed = 0;
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        given[i] = *f[i];
        *f[i] = NULL;
    }
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++)
        if (given[i] && !(*f[i] = hl_strdup(given[i]))) failed = 1;
    return failed ? -1 : 0;
}

/* The TLS context, loaded once per client so that an unreadable file is EINVAL here, not a
 * failure at every connect. Made when a file is given or a server needs TLS; or shared (a
 * client made like another: the same options, so the same context). */
static hilock_status load_tls(hilock_client *c, int needed, struct hl_tls_ctx *shared, char *err,
                              size_t err_len)
{
    const hilock_options *o = &c->opt;
    hl_tls_config cfg = {o->tls_ca_file, o->tls_ca_path, o->tls_cert_file, o->tls_key_file,
                         o->tls_server_name, o->tls_verify};
    if (shared) {
        c->tls = hl_tls_ctx_ref(shared);
        return HILOCK_OK;
    }
    if (!needed && !o->tls_ca_file && !o->tls_ca_path && !o->tls_cert_file && !o->tls_key_file)
        return HILOCK_OK;
    if (!(c->tls = hl_tls_ctx_new(&cfg, err, err_len))) return HILOCK_EINVAL;
    return HILOCK_OK;
}

static char *node_name(const hl_url *u)
{
    char buf[600];
    if (u->kind == HL_URL_UNIX)
        snprintf(buf, sizeof buf, "%s", u->path);
    else if (u->kind == HL_URL_SENTINEL)
        snprintf(buf, sizeof buf, "sentinel %s", u->master);
    else if (u->kind == HL_URL_CLUSTER)   /* until a key routes it to a shard (cluster.c) */
        snprintf(buf, sizeof buf, strchr(u->sentinels[0].host, ':') ? "cluster [%s]:%d" : "cluster %s:%d",
                 u->sentinels[0].host, u->sentinels[0].port);
    else
        snprintf(buf, sizeof buf, strchr(u->host, ':') ? "[%s]:%d" : "%s:%d", u->host, u->port);
    return hl_strdup(buf);
}

/* Do two URLs' lists (Sentinels, cluster seeds) share an address, as written? */
static int share_address(const hl_url *a, const hl_url *b)
{
    for (size_t i = 0; i < a->nsentinels; i++)
        for (size_t j = 0; j < b->nsentinels; j++)
            if (!strcasecmp(a->sentinels[i].host, b->sentinels[j].host) &&
                a->sentinels[i].port == b->sentinels[j].port)
                return 1;
    return 0;
}

/* Do two parsed URLs name the same server as written? (host names are not resolved: the
 * same server under two names is found at connect, by its run_id: engine.c's handshake) */
static int same_server(const hl_url *a, const hl_url *b)
{
    if (a->kind != b->kind) return 0;
    switch (a->kind) {
    case HL_URL_UNIX: return !strcmp(a->path, b->path);
    /* one Sentinel answers for one group, in whatever order the lists name it: a master name
     * alone is not enough (two groups may both call theirs "mymaster") */
    case HL_URL_SENTINEL: return !strcmp(a->master, b->master) && share_address(a, b);
    case HL_URL_CLUSTER: return share_address(a, b);   /* a seed belongs to one cluster */
    default: return !strcasecmp(a->host, b->host) && a->port == b->port;
    }
}

/* A server listed twice would be a Redlock whose quorum one server decides (and whose
 * members overwrite each other's key: every run ends "lost"). The message names both
 * entries by their node names, which carry no password. */
static hilock_status refuse_duplicates(const hilock_client *c)
{
    for (size_t i = 0; i < c->nnodes; i++)
        for (size_t j = i + 1; j < c->nnodes; j++)
            if (same_server(&c->nodes[i].url, &c->nodes[j].url))
                return config_fail(HILOCK_EINVAL, "server %zu and server %zu of %zu are the same "
                                   "server (%s): list each Redlock member once", i + 1, j + 1,
                                   c->nnodes, c->nodes[i].name);
    return HILOCK_OK;
}

/* c->tag and c->record (base.h: HL_TAG_LEN): once, from the kernel's random bytes. */
static int client_tag(hilock_client *c)
{
    unsigned char raw[HL_TAG_LEN / 2];
    if (hl_client_random(c, raw, sizeof raw) < 0) return -1;
    hl_hex(c->tag, raw, sizeof raw);
    snprintf(c->record, sizeof c->record, "%s\n%s", c->tag, c->holder);
    return 0;
}

static hilock_status client_new(const hilock_options *given, size_t size, struct hl_tls_ctx *shared,
                                hilock_client **out)
{
    hilock_options full, *o = &full;
    hilock_client *c;
    const char *why;
    char err[200];
    int tls_needed = 0;
    config_err[0] = '\0';
    if (!out) return config_fail(HILOCK_EINVAL, "out is NULL");
    *out = NULL;
    if (!given) return config_fail(HILOCK_EINVAL, "options are NULL");
    options_defaults(&full);
    if (hl_sized_take(&full, sizeof full, given, size, options_ends,
                      sizeof options_ends / sizeof options_ends[0], "hilock_options", err, sizeof err))
        return config_fail(HILOCK_EINVAL, "%s", err);
    if ((why = check_options(o))) return config_fail(HILOCK_EINVAL, "%s", why);
    if (o->fair && o->nservers > 1)   /* docs/fairness.md: one queue per master orders nothing */
        return config_fail(HILOCK_EINVAL, "fair is not supported with %zu servers (Redlock): "
                           "queues on several masters cannot agree on one order; use one server "
                           "URL (direct or Sentinel)", o->nservers);
    for (size_t i = 0; i < o->nservers; i++)
        if (!o->servers[i])
            return config_fail(HILOCK_EINVAL, "server %zu of %zu is NULL", i + 1, o->nservers);

    if (!(c = calloc(1, sizeof *c))) return config_fail(HILOCK_ENOMEM, "out of memory");
    hl_cancel_init(c->cancel = &c->cancel_own);
    pthread_mutex_init(&c->live_mu, NULL);
    c->refs = 1;
    c->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    pthread_once(&fork_once, watch_forks);
    c->fork_gen = hl_fork_gen;
    c->pid = (long)getpid();
    hl_holder_text(c->holder, sizeof c->holder);
    c->opt = *o;
    if (copy_tls_strings(c) < 0) goto oom;
    c->servers = calloc(o->nservers, sizeof *c->servers);
    c->nodes = calloc(o->nservers, sizeof *c->nodes);
    if (!c->servers || !c->nodes) goto oom;
    c->opt.nservers = 0;
    for (size_t i = 0; i < o->nservers; i++) {
        hilock_status st = hl_url_parse(o->servers[i], &c->nodes[i].url, err, sizeof err);
        if (st != HILOCK_OK) {
            char shown[128];   /* never a password: hl_url_shown */
            config_fail(st, "server %zu of %zu (%s): %s", i + 1, o->nservers,
                        hl_url_shown(o->servers[i], shown, sizeof shown), err);
            client_destroy(c);
            return st;
        }
        c->nnodes++;
        c->nodes[i].transport = c->nodes[i].url.tls ? &hl_transport_tls : &hl_transport_tcp;
        tls_needed |= c->nodes[i].url.tls;
        c->nodes[i].topo = c->nodes[i].url.kind == HL_URL_SENTINEL ? &hl_topo_sentinel
                           : c->nodes[i].url.kind == HL_URL_CLUSTER ? &hl_topo_cluster : &hl_topo_direct;
        if (!(c->servers[i] = hl_strdup(o->servers[i])) || !(c->nodes[i].name = node_name(&c->nodes[i].url)))
            goto oom;
        c->opt.nservers++;
    }
    c->opt.servers = (const char *const *)c->servers;
    if (refuse_duplicates(c) != HILOCK_OK) {
        client_destroy(c);
        return HILOCK_EINVAL;
    }
    if (load_tls(c, tls_needed, shared, err, sizeof err) != HILOCK_OK) {
        config_fail(HILOCK_EINVAL, "%s", err);
        client_destroy(c);
        return HILOCK_EINVAL;
    }
    for (size_t i = 0; i < c->nnodes; i++) {
        if (c->nodes[i].url.tls) c->nodes[i].transport_cfg = c->tls;
        /* Redlock members with one master (direct, Sentinel): same run_id, same server
         * (engine.c's handshake). Not a cluster: its masters change with the key. */
        if (c->nnodes > 1 && !c->nodes[i].topo->sharded) {
            c->nodes[i].peers = c->nodes;
            c->nodes[i].npeers = c->nnodes;
        }
    }
    c->quorum = c->nnodes / 2 + 1;
    if (hl_plat_random(&c->rng, sizeof c->rng) < 0) c->rng = (uint64_t)hl_now_us();
    c->rnd_used = sizeof c->rnd;   /* empty: the first token draws the pool */
    if (client_tag(c) < 0) {
        client_destroy(c);
        return config_fail(HILOCK_EIO, "no random bytes for the client's tag");
    }
    c->errmsg[0] = '\0';
    *out = c;
    return HILOCK_OK;
oom:
    client_destroy(c);
    return config_fail(HILOCK_ENOMEM, "out of memory");
}

hilock_status hilock_client_new_sized(const hilock_options *given, size_t size, hilock_client **out)
{
    return client_new(given, size, NULL, out);
}

hilock_status hl_client_new_like(const hilock_client *c, hilock_client **out)
{
    return client_new(&c->opt, sizeof c->opt, c->tls, out);
}

/* The symbol binaries built against 0.1.0's header call (no size argument): that size. */
hilock_status (hilock_client_new)(const hilock_options *o, hilock_client **out)
{
    return hilock_client_new_sized(o, HL_OPTIONS_V0_SIZE, out);
}

hilock_status hilock_client_open(const char *url, hilock_client **out)
{
    hilock_options o;
    hilock_options_init(&o);
    o.servers = &url;
    o.nservers = 1;
    if (!url) {
        if (out) *out = NULL;
        return config_fail(HILOCK_EINVAL, "url is NULL");
    }
    return hilock_client_new(&o, out);
}

const char *hilock_client_errmsg(const hilock_client *c)
{
    if (c && refused_serial == c->serial)   /* this thread's last call was refused */
        return refused_observing ? HL_IN_OBSERVER : HL_TWO_THREADS;
    return c ? c->errmsg : "no client";
}

hilock_status hilock_set_observer(hilock_client *c, hilock_observer_fn fn, void *arg)
{
    int took;
    hilock_status st;
    if (!c) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    c->obs_fn = fn;
    c->obs_arg = fn ? arg : NULL;
    return hl_leave(c, took, HILOCK_OK);
}

hilock_status hilock_client_stats_sized(hilock_client *c, hilock_stats *s, size_t size)
{
    int took;
    hilock_status st;
    if (!c || !s || !size) return HILOCK_EINVAL;
    if ((st = hl_enter(c, &took)) != HILOCK_OK) return st;
    hl_stats_copy(c, s, size);
    return hl_leave(c, took, HILOCK_OK);
}

/* Atomic: a lock may be freed on one thread while another uses the client (hilock.h). */
void hl_client_ref(hilock_client *c) { __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED); }

int hl_client_random(hilock_client *c, void *buf, size_t n)
{
    if (n > sizeof c->rnd) return -1;
    assert(c->rnd_used <= sizeof c->rnd);   /* (else the subtraction below wraps) */
    if (sizeof c->rnd - c->rnd_used < n) {
        if (hl_plat_random(c->rnd, sizeof c->rnd) < 0) return -1;
        c->rnd_used = 0;
    }
    memcpy(buf, c->rnd + c->rnd_used, n);
    memset(c->rnd + c->rnd_used, 0, n);
    c->rnd_used += n;
    return 0;
}

void hl_client_unref(hilock_client *c)
{
    if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0) client_destroy(c);
}

/* Attached to a loop: every call in flight ends first (its done runs, with a status), and
 * the loop is let go; then the user's reference goes. */
void hilock_client_free(hilock_client *c)
{
    int took = 0;
    if (c && c->runner && !hl_forked(c)) {
        /* the loop's flows end here: they must find c in this thread's hands (hl_enter's
         * nested case). Another thread inside is the caller's bug: no status to say so. */
        enter_to_free(c, &took);
        c->runner->detach(c);
        hl_leave(c, took, HILOCK_OK);
    }
    hl_client_unref(c);
}

/* ---- helpers shared by every lock path ---- */

/* Three forms, so that the aux key hashes where the key does (the cluster rule: the tag is
 * between the first '{' and the first '}' after it, if not empty):
 *   - the key has a tag: append ("jobs:{tenant}:nightly:fence"): the same tag;
 *   - it has no '}': wrap ("{orders}:fence"): the tag is the whole key, which is what the key
 *     itself hashes on (the names of every earlier version, on one master too);
 *   - it has a '}' but no tag ("a}b", "a{}b", "a}b{c"): the key hashes whole, and no wrapper
 *     or suffix can reproduce that, so a tag of ours with the key's slot goes first
 *     ("{GKAD}a{}b:fence", hl_slot_tag). Earlier versions appended here, which put the aux
 *     keys in another slot of a cluster; on one master only these keys' aux names change. */
char *hl_aux_key(const char *key, const char *suffix)
{
    size_t kl = strlen(key), sl = strlen(suffix), tl;
    const char *open = strchr(key, '{');
    const char *close = open ? strchr(open + 1, '}') : NULL;
    char ours[16], *d;
    const char *tag = key;   /* what goes between the braces of the wrapper */
    if (open && close && close > open + 1) {   /* append */
        if (!(d = malloc(kl + sl + 1))) return NULL;
        memcpy(d, key, kl);
        memcpy(d + kl, suffix, sl + 1);
        return d;
    }
    if (strchr(key, '}')) {   /* {ours}key<suffix> */
        hl_slot_tag(hl_key_slot(key, kl), ours);
        tag = ours;
    }
    tl = tag == key ? kl : strlen(tag);
    if (!(d = malloc(tl + kl + sl + 3))) return NULL;
    d[0] = '{';
    memcpy(d + 1, tag, tl);
    d[tl + 1] = '}';
    if (tag == key) {         /* {key}<suffix> */
        memcpy(d + tl + 2, suffix, sl + 1);
    } else {
        memcpy(d + tl + 2, key, kl);
        memcpy(d + tl + 2 + kl, suffix, sl + 1);
    }
    return d;
}

int64_t hl_valid_until(const hilock_client *c, int64_t ttl_ms, int64_t t0_us)
{
    int64_t drift_us = (int64_t)((double)ttl_ms * c->opt.drift_factor * 1000.0) + 2000;
    return t0_us + ttl_ms * 1000 - drift_us;
}

hilock_status hl_check_key(hilock_client *c, const char *key)
{
    if (!key) return hl_fail(c, HILOCK_EINVAL, "key is NULL");
    if (!*key) return hl_fail(c, HILOCK_EINVAL, "key is empty");
    if (strlen(key) > HILOCK_KEY_MAX)
        return hl_fail(c, HILOCK_EINVAL, "key is longer than %d bytes", HILOCK_KEY_MAX);
    return HILOCK_OK;
}

hilock_status hl_check_ttl(hilock_client *c, int64_t ttl_ms)
{
    if (ttl_ms <= 0) return hl_fail(c, HILOCK_EINVAL, "ttl_ms must be > 0 (got %lld)", (long long)ttl_ms);
    if (ttl_ms > HILOCK_TTL_MAX_MS)
        return hl_fail(c, HILOCK_EINVAL, "ttl_ms %lld is more than HILOCK_TTL_MAX_MS", (long long)ttl_ms);
    if (hl_valid_until(c, ttl_ms, 0) <= 1000)
        return hl_fail(c, HILOCK_EINVAL, "ttl_ms %lld leaves no validity after the drift allowance "
                       "(ttl*drift_factor + 2 ms)", (long long)ttl_ms);
    return HILOCK_OK;
}

/* now + lo + a random share of span (us), capped by the holder's expiry and the wait's end */
static int64_t next_after(hilock_client *c, int64_t lo, int64_t span, int64_t hint_us, int64_t wait_end)
{
    int64_t d = lo + (int64_t)(hl_rng_next(&c->rng) % (uint64_t)(span + 1));
    if (hint_us > 0 && hint_us + 500 < d) d = hint_us + 500;   /* the holder expires sooner */
    return hl_round_end(hl_deadline_of(d, wait_end), hl_now_us());
}

int64_t hl_next_attempt(hilock_client *c, int64_t hint_us, int64_t wait_end)
{
    int64_t mean = c->opt.retry_delay_ms * 1000;   /* +-50% */
    return next_after(c, mean / 2, mean, hint_us, wait_end);
}

int64_t hl_next_poll(hilock_client *c, int64_t hint_us, int64_t wait_end)
{
    int64_t poll = c->opt.poll_ms * 1000;   /* 0.75..1 x: a free key is seen within poll_ms */
    return next_after(c, poll - poll / 4, poll / 4, hint_us, wait_end);
}

int64_t hl_next_watch(hilock_client *c, int64_t left_ms, int64_t hint_us, int64_t wait_end)
{
    return next_after(c, left_ms * 1000, c->opt.poll_ms * 1000, hint_us, wait_end);
}
