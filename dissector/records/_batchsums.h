/* What the byte walk takes of a record set, summed in C where the set holds nothing that would
 * make an Issue (records/_headers.c set_sums, and protocol/_reader.c's walk in place of calling
 * it): included by both. The twin is record_set.py_set_sums over the Python walk, with the
 * CRC32C of checksums.crc32c (the tests compare them on good and damaged record sets). */
#ifndef KD_BATCHSUMS_H
#define KD_BATCHSUMS_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define BATCH_HEADER 61
#define BATCH_MIN_LENGTH (BATCH_HEADER - 12)

static uint32_t crc32c_table[8][256];

static void crc32c_tables(void)
{
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;   /* Castagnoli, reflected */
        crc32c_table[0][n] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int n = 0; n < 256; n++)
            crc32c_table[t][n] = (crc32c_table[t - 1][n] >> 8)
                ^ crc32c_table[0][crc32c_table[t - 1][n] & 0xFF];
}

static uint32_t crc32c_soft(const unsigned char *p, size_t n)
{
    uint32_t c = 0xFFFFFFFFu;
    for (; n >= 8; n -= 8, p += 8) {   /* slicing by 8 */
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16
                           | (uint32_t)p[3] << 24);
        c = crc32c_table[7][lo & 0xFF] ^ crc32c_table[6][(lo >> 8) & 0xFF]
            ^ crc32c_table[5][(lo >> 16) & 0xFF] ^ crc32c_table[4][lo >> 24]
            ^ crc32c_table[3][p[4]] ^ crc32c_table[2][p[5]] ^ crc32c_table[1][p[6]]
            ^ crc32c_table[0][p[7]];
    }
    while (n--)
        c = (c >> 8) ^ crc32c_table[0][(c ^ *p++) & 0xFF];
    return c ^ 0xFFFFFFFFu;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>
#define CRC32C_HW 1
/* The instruction takes 3 cycles and can start one every cycle: three streams of B bytes are
 * summed at once (three times one stream's speed on data in cache), then joined. A CRC without
 * its final inversion is linear, so crc(s, D0 D1 D2) = shift(crc(s, D0), 2B) ^
 * shift(crc(0, D1), B) ^ crc(0, D2), where shift(c, L) is c run through L zero bytes: linear in
 * c, so four byte tables per shift. */
#define CRC32C_LONG 2048    /* bytes per stream for long sets (bulk batches)... */
#define CRC32C_SHORT 256    /* ...and for what is left, down to 768 bytes */
static uint32_t crc32c_shift[2][2][4][256];   /* [long, short][by B, by 2B][byte][value] */

__attribute__((target("sse4.2"))) static uint32_t crc32c_zeros(uint32_t c, size_t n)
{
    uint64_t c64 = c;
    for (; n; n -= 8)
        c64 = _mm_crc32_u64(c64, 0);
    return (uint32_t)c64;
}

__attribute__((target("sse4.2"))) static void crc32c_shift_tables(void)
{
    const size_t streams[2] = {CRC32C_LONG, CRC32C_SHORT};
    for (int s = 0; s < 2; s++)
        for (int m = 0; m < 2; m++) {
            uint32_t bit[32];   /* the shift of each single bit; a byte's is the XOR of its bits' */
            for (int i = 0; i < 32; i++)
                bit[i] = crc32c_zeros(1u << i, streams[s] * (size_t)(m + 1));
            for (int k = 0; k < 4; k++)
                for (int v = 0; v < 256; v++) {
                    uint32_t x = 0;
                    for (int j = 0; j < 8; j++)
                        if (v >> j & 1)
                            x ^= bit[8 * k + j];
                    crc32c_shift[s][m][k][v] = x;
                }
        }
}

static inline uint32_t crc32c_shifted(uint32_t t[4][256], uint64_t c)
{
    return t[0][c & 0xFF] ^ t[1][(c >> 8) & 0xFF] ^ t[2][(c >> 16) & 0xFF] ^ t[3][(c >> 24) & 0xFF];
}

/* c run through p[:*n] three streams of `b` bytes at a time, while 3b bytes are left */
__attribute__((target("sse4.2"))) static uint64_t crc32c_streams(
    uint64_t c, const unsigned char **p, size_t *n, size_t b, uint32_t shift[2][4][256])
{
    const unsigned char *q = *p;
    for (; *n >= 3 * b; *n -= 3 * b, q += 3 * b) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < b; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, q + i, 8);
            memcpy(&w1, q + b + i, 8);
            memcpy(&w2, q + 2 * b + i, 8);
            c = _mm_crc32_u64(c, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c = crc32c_shifted(shift[1], c) ^ crc32c_shifted(shift[0], c1) ^ c2;
    }
    *p = q;
    return c;
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_hw(const unsigned char *p, size_t n)
{
    uint64_t c = crc32c_streams(0xFFFFFFFFu, &p, &n, CRC32C_LONG, crc32c_shift[0]);
    c = crc32c_streams(c, &p, &n, CRC32C_SHORT, crc32c_shift[1]);
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return c32 ^ 0xFFFFFFFFu;
}
#endif

/* CRC32C of p[:n] (the instruction where the processor has it) */
static uint32_t crc32c(const unsigned char *p, size_t n)
{
    static int mode = -1;   /* 0: tables, 1: the instruction */
    if (mode < 0) {
#ifdef CRC32C_HW
        __builtin_cpu_init();
        mode = __builtin_cpu_supports("sse4.2") ? 1 : 0;
        if (mode)
            crc32c_shift_tables();
#else
        mode = 0;
#endif
        if (mode == 0)
            crc32c_tables();
    }
#ifdef CRC32C_HW
    if (mode)
        return crc32c_hw(p, n);
#endif
    return crc32c_soft(p, n);
}

static int64_t batch_be(const unsigned char *p, int n)   /* big-endian, sign-extended */
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    if (n < 8 && (v >> (8 * n - 1)))
        v |= ~(uint64_t)0 << (8 * n);
    return (int64_t)v;
}

/* The sums of a v2-only record set b[:n] headers-only, with the checks of the headers walk
 * (magic 2, a length of a header at least, a record count not negative, the CRC when `crc`):
 * 1 with *count and *unc (-1: unknown, a compressed batch) set; 0 where the set holds anything
 * that would make an Issue (the RecordSet then says what). A partial last batch ends the walk
 * (it is `truncated`, not an issue, at this level). */
static int batch_sums(const unsigned char *b, Py_ssize_t n, int crc, long long *count,
                      long long *unc)
{
    Py_ssize_t pos = 0;
    *count = *unc = 0;
    while (n - pos >= 17) {
        const unsigned char *h = b + pos;
        int64_t length = batch_be(h + 8, 4);
        if (h[16] != 2 || length < BATCH_MIN_LENGTH)
            return 0;
        Py_ssize_t size = (Py_ssize_t)length + 12;
        if (size > n - pos)
            break;
        int64_t records = batch_be(h + 57, 4);
        if (records < 0)
            return 0;
        if (crc && crc32c(h + 21, (size_t)(size - 21)) != (uint32_t)batch_be(h + 17, 4))
            return 0;
        *count += records;
        if (*unc >= 0)   /* a compressed batch's size is not known without decompressing it */
            *unc = (batch_be(h + 21, 2) & 7) == 0 ? *unc + size : -1;
        pos += size;
    }
    return 1;
}

#endif
