/* SPDX-License-Identifier: BSD-3-Clause */
/*
 * hilock_libevent.h -- drive a hilock client from a libevent 2 event_base (header-only; link
 * with -levent).
 *
 *     hilock_client *c;
 *     hilock_client_open("redis://127.0.0.1:6379", &c);
 *     hilock_libevent_attach(c, base);
 *     hilock_acquire_async(c, "jobs:nightly", 30000, 0, on_lock, NULL);
 *     event_base_dispatch(base);
 *
 * One persistent event per socket the client asks to watch and one timer event, made on
 * `base`; everything runs on the base's thread. hilock_client_free deletes and frees them.
 * Returns what hilock_loop_attach returns (hilock_async.h), or ENOMEM.
 */
#ifndef HILOCK_LIBEVENT_H
#define HILOCK_LIBEVENT_H

#include <stdlib.h>
#include <event2/event.h>

#include "hilock_async.h"

/* The functions below are static inline: a program that includes this header and uses none of
 * them compiles without "unused function" warnings. Their casts are C++ casts in C++ (no
 * -Wold-style-cast warning there); the macro is #undef'd at the end. Conversions between types
 * that are the same type on POSIX (evutil_socket_t and int; int64_t, time_t, suseconds_t on
 * LP64) are left implicit: a cast there is a -Wuseless-cast warning in C++. */
#ifdef __cplusplus
#define HILOCK_LIBEVENT_CAST(T, v) static_cast<T>(v)
#else
#define HILOCK_LIBEVENT_CAST(T, v) ((T)(v))
#endif

typedef struct hilock_libevent_fd {
    struct event              *ev;
    int                        fd, events;
    struct hilock_libevent_fd *next;
} hilock_libevent_fd;

typedef struct hilock_libevent {
    struct event_base  *base;
    hilock_client      *c;
    struct event       *timer;
    hilock_libevent_fd *fds;
} hilock_libevent;

static inline void hilock_libevent_on_fd(evutil_socket_t fd, short what, void *arg)
{
    hilock_libevent *u = HILOCK_LIBEVENT_CAST(hilock_libevent *, arg);
    hilock_loop_fd(u->c, fd, (what & EV_READ ? HILOCK_EV_READ : 0) |
                                  (what & EV_WRITE ? HILOCK_EV_WRITE : 0));
}

static inline void hilock_libevent_on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hilock_loop_timeout(HILOCK_LIBEVENT_CAST(hilock_libevent *, arg)->c);
}

static inline void hilock_libevent_watch(void *data, int fd, int events)
{
    hilock_libevent *u = HILOCK_LIBEVENT_CAST(hilock_libevent *, data);
    hilock_libevent_fd **pp = &u->fds, *w;
    short flags = HILOCK_LIBEVENT_CAST(short, EV_PERSIST | (events & HILOCK_EV_READ ? EV_READ : 0) |
                                              (events & HILOCK_EV_WRITE ? EV_WRITE : 0));
    while (*pp && (*pp)->fd != fd) pp = &(*pp)->next;
    w = *pp;
    if (w && (!events || w->events != events)) {   /* libevent: a new event for new flags */
        event_free(w->ev);
        if (!events) {
            *pp = w->next;
            free(w);
            return;
        }
        w->ev = NULL;
    }
    if (!events) return;
    if (!w) {
        w = HILOCK_LIBEVENT_CAST(hilock_libevent_fd *, calloc(1, sizeof *w));
        if (!w) return;   /* its deadline ends the call */
        w->fd = fd;
        w->next = u->fds;
        u->fds = w;
    }
    if (w->ev) return;   /* same flags: already there */
    w->events = events;
    if ((w->ev = event_new(u->base, fd, flags, hilock_libevent_on_fd, u)) != NULL)
        event_add(w->ev, NULL);
}

static inline void hilock_libevent_timer(void *data, int64_t ms)
{
    hilock_libevent *u = HILOCK_LIBEVENT_CAST(hilock_libevent *, data);
    struct timeval tv;
    if (ms < 0) {
        event_del(u->timer);
        return;
    }
    tv.tv_sec = ms / 1000;
    tv.tv_usec = ms % 1000 * 1000;
    event_add(u->timer, &tv);
}

static inline void hilock_libevent_detach(void *data)
{
    hilock_libevent *u = HILOCK_LIBEVENT_CAST(hilock_libevent *, data);
    while (u->fds) hilock_libevent_watch(u, u->fds->fd, 0);
    event_free(u->timer);
    free(u);
}

static inline hilock_status hilock_libevent_attach(hilock_client *c, struct event_base *base)
{
    hilock_libevent *u;
    hilock_loop l;
    hilock_status st;
    if (!c || !base) return HILOCK_EINVAL;
    if (!(u = HILOCK_LIBEVENT_CAST(hilock_libevent *, calloc(1, sizeof *u)))) return HILOCK_ENOMEM;
    u->base = base;
    u->c = c;
    if (!(u->timer = evtimer_new(base, hilock_libevent_on_timer, u))) {
        free(u);
        return HILOCK_ENOMEM;
    }
    l.data = u;
    l.watch = hilock_libevent_watch;
    l.timer = hilock_libevent_timer;
    l.detach = hilock_libevent_detach;
    if ((st = hilock_loop_attach(c, &l)) != HILOCK_OK) {
        event_free(u->timer);
        free(u);
    }
    return st;
}

#undef HILOCK_LIBEVENT_CAST

#endif
