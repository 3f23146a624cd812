/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock_libuv.h -- drive a hilock client from a libuv loop (header-only; link with -luv).
 *
 *     hilock_client *c;
 *     hilock_client_open("redis://127.0.0.1:6379", &c);
 *     hilock_libuv_attach(c, uv_default_loop());
 *     hilock_acquire_async(c, "jobs:nightly", 30000, 0, on_lock, NULL);
 *     uv_run(uv_default_loop(), UV_RUN_DEFAULT);
 *
 * uv.h needs POSIX: with -std=c99 compile with -D_POSIX_C_SOURCE=200809L (gnu99 has it).
 * One uv_poll_t per socket the client asks to watch and one uv_timer_t, made on `loop`;
 * everything runs on the loop's thread. hilock_client_free closes them (their memory goes in
 * the close callbacks, so run the loop once more, as libuv requires, before uv_loop_close).
 * A loop with calls in flight or a keepalive stays alive; an idle client keeps it alive
 * only through its open connection (which hilock_client_free closes).
 * Returns what hilock_loop_attach returns (hilock_async.h), or ENOMEM.
 */
#ifndef HILOCK_LIBUV_H
#define HILOCK_LIBUV_H

#include <stdlib.h>
#include <uv.h>

#include "hilock_async.h"

/* The functions below are static inline: a program that includes this header and uses none of
 * them compiles without "unused function" warnings. Their casts are C++ casts in C++ (no
 * -Wold-style-cast warning there); both macros are #undef'd at the end. */
#ifdef __cplusplus
#define HILOCK_LIBUV_CAST(T, v) static_cast<T>(v)
#define HILOCK_LIBUV_HANDLE(h) reinterpret_cast<uv_handle_t *>(h)
#else
#define HILOCK_LIBUV_CAST(T, v) ((T)(v))
#define HILOCK_LIBUV_HANDLE(h) ((uv_handle_t *)(h))
#endif

typedef struct hilock_libuv_fd {
    uv_poll_t                handle;
    int                      fd;
    hilock_client           *c;
    struct hilock_libuv_fd  *next;
} hilock_libuv_fd;

typedef struct hilock_libuv {
    uv_loop_t       *loop;
    hilock_client   *c;
    uv_timer_t       timer;
    hilock_libuv_fd *fds;
} hilock_libuv;

static inline void hilock_libuv_on_poll(uv_poll_t *h, int status, int events)
{
    hilock_libuv_fd *w = HILOCK_LIBUV_CAST(hilock_libuv_fd *, h->data);
    int ev = (events & UV_READABLE ? HILOCK_EV_READ : 0) | (events & UV_WRITABLE ? HILOCK_EV_WRITE : 0);
    if (status < 0) ev = HILOCK_EV_READ | HILOCK_EV_WRITE;   /* the read or write says what */
    hilock_loop_fd(w->c, w->fd, ev);
}

static inline void hilock_libuv_on_timer(uv_timer_t *t)
{
    hilock_loop_timeout(HILOCK_LIBUV_CAST(hilock_libuv *, t->data)->c);
}

static inline void hilock_libuv_free_handle(uv_handle_t *h)
{
    free(h->data);
}

static inline void hilock_libuv_watch(void *data, int fd, int events)
{
    hilock_libuv *u = HILOCK_LIBUV_CAST(hilock_libuv *, data);
    hilock_libuv_fd **pp = &u->fds, *w;
    int flags = (events & HILOCK_EV_READ ? UV_READABLE : 0) | (events & HILOCK_EV_WRITE ? UV_WRITABLE : 0);
    while (*pp && (*pp)->fd != fd) pp = &(*pp)->next;
    w = *pp;
    if (!events) {
        if (!w) return;
        *pp = w->next;
        uv_poll_stop(&w->handle);   /* before the fd closes */
        uv_close(HILOCK_LIBUV_HANDLE(&w->handle), hilock_libuv_free_handle);
        return;
    }
    if (!w) {
        w = HILOCK_LIBUV_CAST(hilock_libuv_fd *, calloc(1, sizeof *w));
        if (!w) return;   /* the call's deadline ends it */
        if (uv_poll_init(u->loop, &w->handle, fd) != 0) {
            free(w);
            return;
        }
        w->fd = fd;
        w->c = u->c;
        w->handle.data = w;
        w->next = u->fds;
        u->fds = w;
    }
    uv_poll_start(&w->handle, flags, hilock_libuv_on_poll);
}

static inline void hilock_libuv_timer(void *data, int64_t ms)
{
    hilock_libuv *u = HILOCK_LIBUV_CAST(hilock_libuv *, data);
    if (ms < 0) uv_timer_stop(&u->timer);
    else uv_timer_start(&u->timer, hilock_libuv_on_timer, HILOCK_LIBUV_CAST(uint64_t, ms), 0);
}

static inline void hilock_libuv_detach(void *data)
{
    hilock_libuv *u = HILOCK_LIBUV_CAST(hilock_libuv *, data);
    while (u->fds) hilock_libuv_watch(u, u->fds->fd, 0);
    uv_timer_stop(&u->timer);
    uv_close(HILOCK_LIBUV_HANDLE(&u->timer), hilock_libuv_free_handle);   /* frees u */
}

static inline hilock_status hilock_libuv_attach(hilock_client *c, uv_loop_t *loop)
{
    hilock_libuv *u;
    hilock_loop l;
    hilock_status st;
    if (!c || !loop) return HILOCK_EINVAL;
    if (!(u = HILOCK_LIBUV_CAST(hilock_libuv *, calloc(1, sizeof *u)))) return HILOCK_ENOMEM;
    u->loop = loop;
    u->c = c;
    l.data = u;
    l.watch = hilock_libuv_watch;
    l.timer = hilock_libuv_timer;
    l.detach = hilock_libuv_detach;
    if ((st = hilock_loop_attach(c, &l)) != HILOCK_OK) {
        free(u);
        return st;
    }
    uv_timer_init(loop, &u->timer);
    u->timer.data = u;
    return HILOCK_OK;
}

#undef HILOCK_LIBUV_CAST
#undef HILOCK_LIBUV_HANDLE

#endif
