/* slot.c -- Redis Cluster hash slots (the cluster specification, "Keys distribution model"
 * and its Appendix A): CRC16-XMODEM of the key's hash tag, mod 16384. Pure functions: used
 * by the Cluster topology to route a command, and by the lock layer to keep a lock's aux
 * keys in its key's slot. */
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

static uint16_t crc16(const char *buf, size_t len)
{
    static uint16_t table[256];
    static volatile int ready;   /* racing threads compute the same values: harmless */
    uint16_t crc = 0;
    if (!ready) {
        for (int i = 0; i < 256; i++) table[i] = crc_table((unsigned char)i);
        ready = 1;
    }
    for (size_t i = 0; i < len; i++)
        crc = (uint16_t)((crc << 8) ^ table[((crc >> 8) ^ (unsigned char)buf[i]) & 0xff]);
    return crc;
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

/* The decimal numbers 0, 1, 2, ... in turn: every slot is met before 110,000 (measured:
 * the last is 109757), i.e. at most ~1 ms. */
void hl_slot_tag(unsigned slot, char *buf)
{
    size_t len = 1;
    memcpy(buf, "0", 2);
    while (len < 15) {
        size_t i = len;
        if (crc16(buf, len) % HL_SLOTS == slot) return;
        while (i > 0 && buf[i - 1] == '9') buf[--i] = '0';   /* + 1, in decimal */
        if (i > 0) {
            buf[i - 1]++;
        } else {
            memmove(buf + 1, buf, len + 1);
            buf[0] = '1';
            len++;
        }
    }
    buf[0] = '\0';   /* unreachable */
}
