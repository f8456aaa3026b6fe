/* CRC32C (Castagnoli, reflected polynomial 0x82F63B78), the per-tensor checksum of our files:
 * a table-driven scalar reference (slicing by 8) and the SSE4.2 crc32 instruction, picked at run time. */
#include "ckpt/internal.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82F63B78u

static uint32_t g_table[8][256];
static pthread_once_t g_table_once = PTHREAD_ONCE_INIT;

static void build_table(void) {
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++) c = (c >> 1) ^ (POLY & (0u - (c & 1u)));
        g_table[0][i] = c;
    }
    for (int t = 1; t < 8; t++)
        for (int i = 0; i < 256; i++) g_table[t][i] = (g_table[t - 1][i] >> 8) ^ g_table[0][g_table[t - 1][i] & 0xff];
}

/* The state is kept inverted between calls (crc ^ ~0), so crc32c(crc32c(0, a), b) = crc32c(0, a b). */
uint32_t zero__crc32c_scalar(uint32_t crc, const void *data, size_t n) {
    pthread_once(&g_table_once, build_table);
    const unsigned char *p = data;
    uint32_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xff];
        n--;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        w ^= c; /* little-endian: the low 4 bytes meet the running crc */
        c = g_table[7][w & 0xff] ^ g_table[6][(w >> 8) & 0xff] ^ g_table[5][(w >> 16) & 0xff] ^
            g_table[4][(w >> 24) & 0xff] ^ g_table[3][(w >> 32) & 0xff] ^ g_table[2][(w >> 40) & 0xff] ^
            g_table[1][(w >> 48) & 0xff] ^ g_table[0][w >> 56];
        p += 8;
        n -= 8;
    }
    while (n--) c = (c >> 8) ^ g_table[0][(c ^ *p++) & 0xff];
    return ~c;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>

/* The crc32 instruction has a latency of 3 cycles and a throughput of 1: three independent
 * streams over consecutive STREAM-byte blocks keep it busy. The streams are joined with
 * shift(c) = the state c after STREAM zero bytes, a linear map kept as 4 byte tables, since
 * crc(c, A B) = shift_|B|(crc(c, A)) ^ crc(0, B) for the raw (not inverted) state. */
#define STREAM 8192
static uint32_t g_shift[4][256];
static pthread_once_t g_shift_once = PTHREAD_ONCE_INIT;

static void build_shift(void) {
    pthread_once(&g_table_once, build_table);
    uint32_t bit[32];
    for (int b = 0; b < 32; b++) {
        uint32_t c = 1u << b;
        /* STREAM zero bytes, 8 at a time: the data word is 0, so only the state's 4 bytes index */
        for (int k = 0; k < STREAM / 8; k++)
            c = g_table[7][c & 0xff] ^ g_table[6][(c >> 8) & 0xff] ^ g_table[5][(c >> 16) & 0xff] ^ g_table[4][c >> 24];
        bit[b] = c;
    }
    for (int k = 0; k < 4; k++)
        for (int v = 0; v < 256; v++) {
            uint32_t x = 0;
            for (int b = 0; b < 8; b++)
                if (v & (1 << b)) x ^= bit[8 * k + b];
            g_shift[k][v] = x;
        }
}

static uint32_t shift(uint32_t c) {
    return g_shift[0][c & 0xff] ^ g_shift[1][(c >> 8) & 0xff] ^ g_shift[2][(c >> 16) & 0xff] ^ g_shift[3][c >> 24];
}

__attribute__((target("sse4.2"))) uint32_t zero__crc32c_hw(uint32_t crc, const void *data, size_t n) {
    const unsigned char *p = data;
    uint64_t c = ~crc;
    while (n && ((uintptr_t)p & 7)) {
        c = _mm_crc32_u8((uint32_t)c, *p++);
        n--;
    }
    if (n >= 3 * STREAM) pthread_once(&g_shift_once, build_shift);
    while (n >= 3 * STREAM) {
        uint64_t c1 = 0, c2 = 0;
        for (size_t i = 0; i < STREAM; i += 8) {
            uint64_t w0, w1, w2;
            memcpy(&w0, p + i, 8);
            memcpy(&w1, p + STREAM + i, 8);
            memcpy(&w2, p + 2 * STREAM + i, 8);
            c = _mm_crc32_u64(c, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
        }
        c = shift(shift((uint32_t)c) ^ (uint32_t)c1) ^ (uint32_t)c2;
        p += 3 * STREAM;
        n -= 3 * STREAM;
    }
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        c = _mm_crc32_u64(c, w);
        p += 8;
        n -= 8;
    }
    while (n--) c = _mm_crc32_u8((uint32_t)c, *p++);
    return ~(uint32_t)c;
}

int zero__crc32c_hw_available(void) {
    static int cached = -1;
    if (cached < 0) cached = __builtin_cpu_supports("sse4.2") ? 1 : 0;
    return cached;
}
#else
uint32_t zero__crc32c_hw(uint32_t crc, const void *data, size_t n) { return zero__crc32c_scalar(crc, data, n); }
int zero__crc32c_hw_available(void) { return 0; }
#endif

uint32_t zero_crc32c(uint32_t crc, const void *data, size_t n) {
    if (n == 0) return crc;
    /* ZERO_IMPL=scalar forces the reference, as for the other kernels; read once. */
    static int use_hw = -1;
    if (use_hw < 0) use_hw = zero__crc32c_hw_available() && zero_impl_best() != ZERO_IMPL_SCALAR;
    return use_hw ? zero__crc32c_hw(crc, data, n) : zero__crc32c_scalar(crc, data, n);
}
