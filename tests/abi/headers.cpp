/* SPDX-License-Identifier: BSD-3-Clause */
// headers.cpp -- every public header in one C++17 program, compiled (not run) by
// tests/abi/headers.sh with g++ and clang++ under -Werror -Wold-style-cast (and g++'s
// -Wuseless-cast): the macros and the header-only adapters are C++-clean. The adapters'
// functions are referenced, so their bodies are compiled as C++ too.
#include <hilock.h>
#include <hilock_async.h>
#include <hilock_inspect.h>
#include <hilock_legacy.h>
#include <hilock_libevent.h>
#include <hilock_libuv.h>
#include <hilock.hpp>

int main()
{
    hilock_options o;
    hilock_options_init(&o);
    hilock_keepalive_options ko;
    hilock_keepalive_options_init(&ko);
    hilock_status (*uv)(hilock_client *, uv_loop_t *) = &hilock_libuv_attach;
    hilock_status (*ev)(hilock_client *, struct event_base *) = &hilock_libevent_attach;
    (void)uv, (void)ev;
    int64_t wait = HILOCK_WAIT_FOREVER, ttl = HILOCK_TTL_MAX_MS;
    return wait < 0 && ttl > 0 && o.nservers == 0 ? 0 : 1;
}
