/* SPDX-License-Identifier: BSD-3-Clause */
/* slot.c -- Redis Cluster hash slots (the cluster specification, "Keys distribution model"
 * and its Appendix A): CRC16-XMODEM of the key's hash tag, mod 16384. Pure functions: used
 * by the Cluster topology to route a command, and by the lock layer to keep a lock's aux
 * keys in its key's slot. */
#include <pthread.h>
#include <string.h>

#include "base.h"

/* CRC16-CCITT (XMODEM): polynomial 0x1021, initial value 0, no reflection; a byte at a time
 * through a table made from the polynomial (so there is no 256-number table to mistype). */
static uint16_t crc_table(unsigned char byte)
{
    uint16_t crc = (uint16_t)(byte << 8);
    for (int b = 0; b < 8; b++) crc = (uint16_t)(crc & 0x8000 ? (crc << 1) ^ 0x1021 : crc << 1);
    return crc;
}

static uint16_t table[256];            /* crc16, byte at a time */
static uint16_t basis[14], comb[14];   /* hl_slot_tag: see there */
static pthread_once_t tables_once = PTHREAD_ONCE_INIT;
static void make_tables(void);

static uint16_t crc16_made(const char *buf, size_t len)   /* the table made */
{
    uint16_t crc = 0;
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
}

static uint16_t crc16(const char *buf, size_t len)
{
    pthread_once(&tables_once, make_tables);
    return crc16_made(buf, len);
}

unsigned hl_key_slot(const char *key, size_t len)
{
    const char *open = memchr(key, '{', len), *close;
    if (open) {
        close = memchr(open + 1, '}', len - (size_t)(open + 1 - key));
        if (close && close > open + 1) return crc16(open + 1, (size_t)(close - open - 1)) & (HL_SLOTS - 1);
    }
    return crc16(key, len) & (HL_SLOTS - 1);
}

/* Four letters of "@ABCDEFGHIJKLMNO" (0x40 | a nibble): 16 free bits. With a zero initial
 * value the CRC is linear over GF(2) for messages of one length -- crc(a ^ b) = crc(a) ^
 * crc(b) -- so the slot of "@@@@" plus the nibbles is crc("@@@@") xor the contributions of
 * the bits set, and the bits giving `slot` are found by Gaussian elimination: constant time
 * (a search over strings took ~0.1 ms a call, a third of a lock cycle). Deterministic: the
 * same tag for a slot in every process and version. */
/* The 14 slot bits each of the 16 free bits moves, reduced to a basis (comb: which free bits
 * make each basis vector). */
static void make_basis(void)
{
    unsigned char one[4];
    for (int b = 0; b < 16; b++) {
        uint16_t mb = (uint16_t)(1u << b), x;
        memset(one, 0, sizeof one);
        one[b / 4] = (unsigned char)(1u << (b % 4));
        x = crc16_made((const char *)one, 4) & (HL_SLOTS - 1);
        for (int p = 13; p >= 0 && x; p--) {
            if (!(x >> p & 1)) continue;
            if (!basis[p]) {
                basis[p] = x;
                comb[p] = mb;
                break;
            }
            x ^= basis[p];
            mb ^= comb[p];
        }
    }
}

/* Once per process: every new lock on a Cluster asks for a tag. */
static void make_tables(void)
{
    for (int i = 0; i < 256; i++) table[i] = crc_table((unsigned char)i);
    make_basis();
}

void hl_slot_tag(unsigned slot, char *buf)
{
    uint16_t x, m = 0;
    pthread_once(&tables_once, make_tables);
    x = (uint16_t)((slot ^ crc16("@@@@", 4)) & (HL_SLOTS - 1));
    for (int p = 13; p >= 0; p--)
        if (x >> p & 1) {   /* (the basis has full rank: every slot is reached) */
            x ^= basis[p];
            m ^= comb[p];
        }
    for (int i = 0; i < 4; i++) buf[i] = (char)(0x40 | (m >> (4 * i) & 0xf));
    buf[4] = '\0';
}
