/* SPDX-License-Identifier: BSD-3-Clause */
/* error.h -- the client's error text (error.c) (part of the engine layer: engine.h states its
 * rules and includes it) */
#ifndef HILOCK_ENGINE_ERROR_H
#define HILOCK_ENGINE_ERROR_H

#include "client.h"

/* ---- the client's error text (error.c) ---- */
/* Set c->errmsg (printf-style) and return st; hl_ok() clears it and returns HILOCK_OK. */
hilock_status hl_fail(hilock_client *c, hilock_status st, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
hilock_status hl_ok(hilock_client *c);
/* errmsg from the nodes' own errors ("node: why; node: why") with the given status. */
hilock_status hl_fail_nodes(hilock_client *c, hilock_status st, uint32_t mask, const char *what);

#endif
