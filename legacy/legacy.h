/* SPDX-License-Identifier: BSD-3-Clause */
/* legacy.h -- the lock kinds legacy/legacy.c provides (kind.h): the SETNX/GETSET recipe of
 * legacy fleets, and bridge mode (a modern lock that legacy clients also respect). For the
 * entry points that choose a kind (hilock_legacy_acquire, src/api/acquire.c) and the fuzzers;
 * src/ never includes this.
 * Layer: legacy (this folder: the legacy and bridge kinds, their codecs)
 * May call: lock engine resp base platform
 */
#ifndef HILOCK_LEGACY_KINDS_H
#define HILOCK_LEGACY_KINDS_H

#include "kind.h"

extern const hl_kind_ops hl_kind_legacy, hl_kind_bridge;

/* Why a fair client's legacy acquire is refused (blocking and _async alike). */
#define HL_LEGACY_NOT_FAIR "a legacy lock cannot be fair: the legacy recipe has no queue; " \
                           "take it with fair off"

#endif
