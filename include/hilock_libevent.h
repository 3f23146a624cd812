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

static void hilock_libevent_on_fd(evutil_socket_t fd, short what, void *arg)
{
    hilock_libevent *u = (hilock_libevent *)arg;
    hilock_loop_fd(u->c, (int)fd, (what & EV_READ ? HILOCK_EV_READ : 0) |
                                  (what & EV_WRITE ? HILOCK_EV_WRITE : 0));
}

static void hilock_libevent_on_timer(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    hilock_loop_timeout(((hilock_libevent *)arg)->c);
}

static void hilock_libevent_watch(void *data, int fd, int events)
{
    hilock_libevent *u = (hilock_libevent *)data;
    hilock_libevent_fd **pp = &u->fds, *w;
    short flags = (short)(EV_PERSIST | (events & HILOCK_EV_READ ? EV_READ : 0) |
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
        if (!(w = (hilock_libevent_fd *)calloc(1, sizeof *w))) return;   /* its deadline ends the call */
        w->fd = fd;
        w->next = u->fds;
        u->fds = w;
    }
    if (w->ev) return;   /* same flags: already there */
    w->events = events;
    if ((w->ev = event_new(u->base, fd, flags, hilock_libevent_on_fd, u)) != NULL)
        event_add(w->ev, NULL);
}

static void hilock_libevent_timer(void *data, int64_t ms)
{
    hilock_libevent *u = (hilock_libevent *)data;
    struct timeval tv;
    if (ms < 0) {
        event_del(u->timer);
        return;
    }
    tv.tv_sec = (long)(ms / 1000);
    tv.tv_usec = (long)(ms % 1000) * 1000;
    event_add(u->timer, &tv);
}

static void hilock_libevent_detach(void *data)
{
    hilock_libevent *u = (hilock_libevent *)data;
    while (u->fds) hilock_libevent_watch(u, u->fds->fd, 0);
    event_free(u->timer);
    free(u);
}

static hilock_status hilock_libevent_attach(hilock_client *c, struct event_base *base)
{
    hilock_libevent *u;
    hilock_loop l;
    hilock_status st;
    if (!c || !base) return HILOCK_EINVAL;
    if (!(u = (hilock_libevent *)calloc(1, sizeof *u))) return HILOCK_ENOMEM;
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

#endif
