/* SPDX-License-Identifier: BSD-3-Clause */
/* sentinel_fixture.h -- a master, its replica and three Sentinels, on free loopback ports.
 *
 * The data nodes are hlt_redis servers (fixture.h); the Sentinels are redis-sentinel
 * processes with their config in the fixture's temp dir. Every process is a child of the
 * test with PR_SET_PDEATHSIG, so it dies with the test even on a crash; hlt_sentinel_stop()
 * kills them all and removes the dir. Sentinels run with down-after 1000 ms and
 * SENTINEL DEBUG info-period 500 publish-period 250, which shortens the old master's
 * split-brain window from ~11 s to ~2 s (docs/failover-facts.md, "The old master after a
 * failover").
 *
 * While a fixture runs, the test process ignores SIGPIPE: a Sentinel's reconfiguration kills
 * the normal clients of both data nodes (CLIENT KILL), so the fixture's and the test's own
 * read-back connections (hiredis writes with write(2)) can hit a peer that has just gone.
 * The library's no-SIGPIPE promise is tested on its own (test_transport, test_tls). */
#ifndef HILOCK_TEST_SENTINEL_FIXTURE_H
#define HILOCK_TEST_SENTINEL_FIXTURE_H

#include <signal.h>

#include "fixture.h"

#define HLT_NSENTINELS 3

typedef struct hlt_sentinel {
    hlt_redis *data[2];                /* [0] starts as the master, [1] as its replica   */
    pid_t      spid[HLT_NSENTINELS];
    int        sport[HLT_NSENTINELS];
    char       dir[128];
    char       name[32];               /* master name                                     */
    char       pass[64];               /* requirepass of the data nodes ("" = none)       */
    char       spass[64];              /* requirepass of the Sentinels ("" = none)        */
    char       url[512];               /* redis-sentinel://127.0.0.1:A,...:C#name, with
                                          ?sentinel_password=spass before the '#' if set;
                                          TLS: rediss-sentinel://127.0.0.1:TA,...:TC#name */
    int        stls[HLT_NSENTINELS];   /* TLS: Sentinel k's TLS port (sport[k] stays plain,
                                          for the fixture's own commands); else 0         */
    char       tls[3][192];            /* TLS: certificate, key, CA (all nodes); else ""  */
    /* timings of the last hlt_sentinel_failover / hlt_sentinel_wait_switch, ms from its start */
    long long  t_promoted, t_switched, t_demoted;
    struct sigaction sigpipe_old;      /* SIGPIPE's disposition before the fixture started */
} hlt_sentinel;

/* Start the five processes and wait until every Sentinel knows the other two and the replica.
 * NULL (and why, on stderr) on failure; nothing is left running then. */
hlt_sentinel *hlt_sentinel_start(void);
/* The same with `password` required by both data nodes (masterauth and Sentinel auth-pass set
 * to match); the Sentinels themselves need none. */
hlt_sentinel *hlt_sentinel_start_auth(const char *password);
/* The same, and with `sentinel_password` (if not NULL) required by the Sentinels themselves
 * (requirepass, and sentinel-pass so that they can talk to each other). The fixture's own
 * commands to the Sentinels AUTH first. */
hlt_sentinel *hlt_sentinel_start_opts(const char *password, const char *sentinel_password);
/* A TLS deployment: the data nodes listen only on TLS ports (data[i]->port; their unix
 * sockets stay plain for hlt_data_cmd) and replicate over TLS; the Sentinels reach them, and
 * each other, over TLS (tls-replication yes) and take clients on their TLS ports (stls[];
 * their plain ports stay open for the fixture's commands). Every process presents `crt`
 * (which must name 127.0.0.1) with `key` and trusts `ca`; none asks for a client
 * certificate. f->url is the rediss-sentinel:// URL. */
hlt_sentinel *hlt_sentinel_start_tls(const char *crt, const char *key, const char *ca);
/* Kill every process this fixture started (thawing frozen ones first), remove the dir, free.
 * NULL-safe. */
void hlt_sentinel_stop(hlt_sentinel *f);

/* Index in data[] of the node the first live Sentinel names as master; -1 if none answers. */
int hlt_sentinel_master(hlt_sentinel *f);
/* Command on Sentinel k (fresh connection, 2 s timeout). Caller frees the reply. */
redisReply *hlt_sentinel_cmd(hlt_sentinel *f, int k, const char *fmt, ...);
/* Command on data node i, retried once on a connection Sentinel has just killed. */
redisReply *hlt_data_cmd(hlt_sentinel *f, int i, const char *fmt, ...);
/* ROLE of data node i: "master", "slave", or "" if it does not answer. */
const char *hlt_data_role(hlt_sentinel *f, int i);

/* SENTINEL failover, then wait until every Sentinel names the other node (t_promoted,
 * t_switched); with wait_demotion also until the old master is a connected replica again and
 * the Sentinels see it as a healthy replica (t_demoted), so another failover can follow.
 * 0 on success, -1 on timeout. */
int hlt_sentinel_failover(hlt_sentinel *f, int wait_demotion);
/* After freezing the master: wait until every Sentinel names data[to] (t_switched). */
int hlt_sentinel_wait_switch(hlt_sentinel *f, int to, long timeout_ms);
/* Wait until data[i] is a replica with its link up and its master streaming to it (e.g. the
 * old master after a thaw). */
int hlt_sentinel_wait_replica(hlt_sentinel *f, int i, long timeout_ms);
/* Wait until replica data[i] has applied every write its master (the other node) had when
 * asked (its slave_repl_offset reaches the master's master_repl_offset). 0, or -1 on timeout. */
int hlt_sentinel_wait_synced(hlt_sentinel *f, int i, long timeout_ms);

/* Cut replication on replica i without touching the master: a bogus masterauth and a killed
 * master link (it then fails to AUTH on every retry). hlt_sentinel_heal undoes it. */
int hlt_sentinel_cut(hlt_sentinel *f, int i);
int hlt_sentinel_heal(hlt_sentinel *f, int i);

/* Freeze / thaw data node i (SIGSTOP / SIGCONT). */
void hlt_sentinel_freeze(hlt_sentinel *f, int i);
void hlt_sentinel_thaw(hlt_sentinel *f, int i);

/* Read-back helpers on data node i (through hlt_data_cmd). */
char     *hlt_data_get(hlt_sentinel *f, int i, const char *key);   /* malloc'd, NULL if none */
long long hlt_data_exists(hlt_sentinel *f, int i, const char *key);
/* 1 if data node i holds key = value within ms (polled: replication is asynchronous). */
int       hlt_data_holds_within(hlt_sentinel *f, int i, const char *key, const char *value, long ms);

#endif
