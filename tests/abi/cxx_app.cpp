/* SPDX-License-Identifier: BSD-3-Clause */
// cxx_app.cpp -- today's header from C++ (extern "C", and the sizing macros): makes a client
// with options, takes and releases a lock. usage: cxx_app URL; exit 0 = ok.
#include <hilock.h>
#include <hilock_legacy.h>
#include <cstdio>

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    const char *url = argv[1];
    hilock_options o;
    hilock_options_init(&o);
    o.servers = &url;
    o.nservers = 1;
    o.io_timeout_ms = 500;
    hilock_client *c = nullptr;
    if (hilock_client_new(&o, &c) != HILOCK_OK) {
        std::fprintf(stderr, "client: %s\n", hilock_last_config_error());
        return 1;
    }
    // the plain functions have addresses too: the frozen 0.1.0 entry points
    void (*init)(hilock_options *) = &hilock_options_init;
    hilock_status (*make)(const hilock_options *, hilock_client **) = &hilock_client_new;
    (void)init, (void)make;
    hilock *l = nullptr;
    hilock_status st = hilock_acquire(c, "abi:cxx", 5000, 0, &l);
    if (st == HILOCK_OK) {
        hilock_keepalive_options ko;
        hilock_keepalive_options_init(&ko);
        ko.max_renewals = 1;
        st = hilock_keepalive_ex(l, nullptr, nullptr, &ko);
        if (st == HILOCK_OK) st = hilock_release(l);
        hilock_free(l);
    }
    if (st != HILOCK_OK) std::fprintf(stderr, "%s: %s\n", hilock_strerror(st), hilock_client_errmsg(c));
    hilock_client_free(c);
    return st == HILOCK_OK ? 0 : 1;
}
