/* Checksums of swap files: a CRC32C per ZERO_IO_ALIGN-byte block of the data area, kept in RAM,
 * set when the pool writes a block and verified when it reads one back (docs/OFFLOAD.md).
 *
 * The CRC is the checkpoints' (zero_crc32c); a block is 4096 bytes, too short for the 3-stream
 * path of zero_crc32c, so the SSE4.2 kernel here runs four blocks side by side (each block its
 * own chain), which keeps the crc32 instruction's pipeline full. The scalar path calls
 * zero_crc32c per block: the reference the unit test compares against. */
#include "offload/internal.h"
#include "zero/ckpt.h"

#include <string.h>

#define BLK ZERO_IO_ALIGN

void zero__swap_block_crcs_scalar(const void *data, size_t blocks, uint32_t *out) {
    const unsigned char *p = data;
    for (size_t i = 0; i < blocks; i++) out[i] = zero_crc32c(0, p + i * BLK, BLK);
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static void crcs_sse42(const unsigned char *p, size_t blocks, uint32_t *out) {
    size_t i = 0;
    for (; i + 4 <= blocks; i += 4) {
        const unsigned char *a = p + i * BLK;
        uint64_t c0 = 0xffffffffu, c1 = 0xffffffffu, c2 = 0xffffffffu, c3 = 0xffffffffu;
        for (size_t k = 0; k < BLK; k += 8) {
            uint64_t w0, w1, w2, w3;
            memcpy(&w0, a + k, 8);
            memcpy(&w1, a + BLK + k, 8);
            memcpy(&w2, a + 2 * BLK + k, 8);
            memcpy(&w3, a + 3 * BLK + k, 8);
            c0 = _mm_crc32_u64(c0, w0);
            c1 = _mm_crc32_u64(c1, w1);
            c2 = _mm_crc32_u64(c2, w2);
            c3 = _mm_crc32_u64(c3, w3);
        }
        out[i] = ~(uint32_t)c0;
        out[i + 1] = ~(uint32_t)c1;
        out[i + 2] = ~(uint32_t)c2;
        out[i + 3] = ~(uint32_t)c3;
    }
    for (; i < blocks; i++) {
        uint64_t c = 0xffffffffu;
        for (size_t k = 0; k < BLK; k += 8) {
            uint64_t w;
            memcpy(&w, p + i * BLK + k, 8);
            c = _mm_crc32_u64(c, w);
        }
        out[i] = ~(uint32_t)c;
    }
}

static int have_sse42(void) {
    static int cached = -1;
    if (cached < 0) cached = __builtin_cpu_supports("sse4.2") && zero_impl_best() != ZERO_IMPL_SCALAR;
    return cached;
}

void zero__swap_block_crcs(const void *data, size_t blocks, uint32_t *out) {
    if (have_sse42()) crcs_sse42(data, blocks, out);
    else zero__swap_block_crcs_scalar(data, blocks, out);
}
#else
void zero__swap_block_crcs(const void *data, size_t blocks, uint32_t *out) {
    zero__swap_block_crcs_scalar(data, blocks, out);
}
#endif
