/* SPDX-License-Identifier: BSD-3-Clause */
/* codec.h -- helpers of the legacy value codecs shared by codec.c and legacy.c (not API). */
#ifndef HILOCK_LEGACY_CODEC_H
#define HILOCK_LEGACY_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "hilock_legacy.h"

int         hl_codec_valid(const hilock_codec *k);      /* fields in range */
int64_t     hl_codec_unit_us(const hilock_codec *k);    /* 1 s / 1 ms / 1 us in us */
int64_t     hl_codec_res_us(const hilock_codec *k);     /* finest step it writes: unit / 10^decimals, >= 1 us */
int         hl_codec_float(const hilock_codec *k);      /* HILOCK_DECIMALS_RUBY or _PYTHON */
/* The value a peer writes for its clock reading now_us plus add_us (timeout and "+1"): as
 * hilock_codec_format(now_us + add_us), except that a float style adds as its runtime adds.
 * *stamp_us (if not NULL): the stamp the value says, rounded down to a microsecond. */
hilock_status hl_codec_format_at(const hilock_codec *k, int64_t now_us, int64_t add_us, char *buf,
                                 size_t cap, int64_t *stamp_us);
/* "integer milliseconds, +1, expired at <=" (for messages) */
void        hl_codec_describe(const hilock_codec *k, char *buf, size_t cap);
/* The unit a numeric value looks like by its number of integer digits ("seconds", ...), or
 * NULL (not a number, or no telling). For messages only: the codec is explicit config. */
const char *hl_codec_guess_unit(const char *s, size_t len);

#endif
