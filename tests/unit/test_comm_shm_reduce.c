/* The many-source reduction kernel of the shared-memory collectives: scalar and AVX2 bodies
 * against an independent element-by-element reference (specials included) and against each
 * other bit for bit, every dtype x op x number of sources x length, dst aliasing a source;
 * and the streaming copy against memcpy. */
#include "comm/internal.h"
#include "harness.h"
#include "ref_half.h"
#include "zero/zero.h"

#include <stdint.h>

static uint64_t g_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
    g_state ^= g_state << 13;
    g_state ^= g_state >> 7;
    g_state ^= g_state << 17;
    return g_state;
}

/* A float with a wide range of magnitudes and, now and then, a special value. */
static float rand_float(int specials) {
    uint64_t r = next_u64();
    if (specials) {
        switch (r % 97) {
        case 0: return NAN;
        case 1: return INFINITY;
        case 2: return -INFINITY;
        case 3: return -0.0f;
        case 4: return 1e-40f; /* fp32 subnormal */
        case 5: return 70000.0f; /* overflows fp16 */
        default: break;
        }
    }
    float m = (float)((r >> 11) & 0xffffff) / (float)(1 << 24) * 2.0f - 1.0f;
    return ldexpf(m, (int)((r >> 40) % 24) - 12);
}

static void fill(void *buf, zero_dtype dt, size_t n, int specials) {
    for (size_t i = 0; i < n; i++) {
        uint64_t r = next_u64();
        switch (dt) {
        case ZERO_DTYPE_FP32: ((float *)buf)[i] = rand_float(specials); break;
        case ZERO_DTYPE_BF16: ((uint16_t *)buf)[i] = ref_to_bf16(rand_float(specials)); break;
        case ZERO_DTYPE_FP16: ((uint16_t *)buf)[i] = ref_to_fp16(rand_float(specials)); break;
        case ZERO_DTYPE_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)r; break;
        case ZERO_DTYPE_INT64: ((int64_t *)buf)[i] = (int64_t)r; break;
        case ZERO_DTYPE_UINT8: ((uint8_t *)buf)[i] = (uint8_t)r; break;
        default: break;
        }
    }
}

static float widen(zero_dtype dt, const void *buf, size_t i) {
    if (dt == ZERO_DTYPE_FP32) return ((const float *)buf)[i];
    uint16_t h = ((const uint16_t *)buf)[i];
    return dt == ZERO_DTYPE_BF16 ? ref_from_bf16(h) : ref_from_fp16(h);
}

static float ref_max(float a, float b) {
    if (a != a) return a;
    if (b != b) return b;
    return a > b ? a : b;
}

/* Element i of the left-to-right reduction of the sources, as the kernel's contract says. */
static void reference(zero_dtype dt, zero_op op, void *const *src, int nsrc, size_t i, void *out) {
    int max = op == ZERO_OP_MAX;
    switch (dt) {
    case ZERO_DTYPE_FP32:
    case ZERO_DTYPE_BF16:
    case ZERO_DTYPE_FP16: {
        float acc = widen(dt, src[0], i);
        for (int k = 1; k < nsrc; k++) {
            float x = widen(dt, src[k], i);
            acc = max ? ref_max(acc, x) : acc + x;
        }
        if (dt == ZERO_DTYPE_FP32) memcpy(out, &acc, 4);
        else {
            uint16_t h = dt == ZERO_DTYPE_BF16 ? ref_to_bf16(acc) : ref_to_fp16(acc);
            memcpy(out, &h, 2);
        }
        break;
    }
    case ZERO_DTYPE_INT32: {
        uint32_t s = (uint32_t)((int32_t *)src[0])[i];
        int32_t m = ((int32_t *)src[0])[i];
        for (int k = 1; k < nsrc; k++) {
            int32_t x = ((int32_t *)src[k])[i];
            s += (uint32_t)x;
            if (x > m) m = x;
        }
        int32_t v = max ? m : (int32_t)s;
        memcpy(out, &v, 4);
        break;
    }
    case ZERO_DTYPE_INT64: {
        uint64_t s = (uint64_t)((int64_t *)src[0])[i];
        int64_t m = ((int64_t *)src[0])[i];
        for (int k = 1; k < nsrc; k++) {
            int64_t x = ((int64_t *)src[k])[i];
            s += (uint64_t)x;
            if (x > m) m = x;
        }
        int64_t v = max ? m : (int64_t)s;
        memcpy(out, &v, 8);
        break;
    }
    case ZERO_DTYPE_UINT8: {
        uint8_t s = ((uint8_t *)src[0])[i], m = s;
        for (int k = 1; k < nsrc; k++) {
            uint8_t x = ((uint8_t *)src[k])[i];
            s = (uint8_t)(s + x);
            if (x > m) m = x;
        }
        memcpy(out, max ? &m : &s, 1);
        break;
    }
    default: break;
    }
}

static int is_nan_elem(zero_dtype dt, const void *p) {
    if (dt == ZERO_DTYPE_FP32) {
        float f;
        memcpy(&f, p, 4);
        return f != f;
    }
    if (dt == ZERO_DTYPE_BF16 || dt == ZERO_DTYPE_FP16) {
        uint16_t h;
        memcpy(&h, p, 2);
        return dt == ZERO_DTYPE_BF16 ? (h & 0x7f80) == 0x7f80 && (h & 0x7f)
                                     : (h & 0x7c00) == 0x7c00 && (h & 0x3ff);
    }
    return 0;
}

enum { MAXSRC = 5 };

static void check_case(zero_dtype dt, zero_op op, int nsrc, size_t n, int specials) {
    size_t es = zero_dtype_size(dt), bytes = n * es + 1;
    void *src[MAXSRC];
    for (int k = 0; k < nsrc; k++) {
        src[k] = malloc(bytes);
        fill(src[k], dt, n, specials);
    }
    unsigned char *a = malloc(bytes + 16), *b = malloc(bytes + 16), *alias = malloc(bytes);
    memset(a, 0xA5, bytes + 16);
    memset(b, 0xA5, bytes + 16);
    zero__reduce_scalar(dt, op == ZERO_OP_MAX, (const void *const *)src, nsrc, a, n, 0);
    /* Streaming stores change where the lines go, never the bits. */
    int have_avx2 = zero_impl_available(ZERO_IMPL_AVX2);
    if (have_avx2) zero__reduce_avx2(dt, op == ZERO_OP_MAX, (const void *const *)src, nsrc, b, n, (int)(n & 1));
    else zero__reduce_scalar(dt, op == ZERO_OP_MAX, (const void *const *)src, nsrc, b, n, 1);
    int bad_ref = 0, bad_avx = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char want[8];
        reference(dt, op, src, nsrc, i, want);
        const unsigned char *got = a + i * es;
        int same = !memcmp(got, want, es) || (is_nan_elem(dt, got) && is_nan_elem(dt, want));
        if (!same && bad_ref++ < 3)
            ZT_FAIL("%s op %d nsrc %d n %zu: element %zu differs from the reference",
                    zero_dtype_name(dt), (int)op, nsrc, n, i);
    }
    /* Every NaN payload included: the two bodies give the same bits. */
    if (memcmp(a, b, n * es + 16)) bad_avx = 1;
    ZT_CHECKF(!bad_avx, "%s op %d nsrc %d n %zu: avx2 and scalar bodies differ", zero_dtype_name(dt),
              (int)op, nsrc, n);
    ZT_CHECKF(a[n * es] == 0xA5, "wrote past dst");
    zt_checks++;
    /* dst exactly one of the sources (in-place reduce-scatter): same result. */
    int k = nsrc - 1 - (int)(n % (size_t)nsrc);
    memcpy(alias, src[k], bytes);
    void *keep = src[k];
    src[k] = alias;
    zero__shm_reduce(dt, op, (const void *const *)src, nsrc, alias, n, (int)(n % 3 == 1), ZERO_IMPL_AUTO);
    ZT_CHECKF(!memcmp(alias, a, n * es), "%s op %d nsrc %d n %zu: dst == src[%d] changes the result",
              zero_dtype_name(dt), (int)op, nsrc, n, k);
    src[k] = keep;
    for (int j = 0; j < nsrc; j++) free(src[j]);
    free(a);
    free(b);
    free(alias);
}

/* The kernel's order is the sources' order: (big + small) - big is not small + (big - big). */
static void test_order(void) {
    float x[3] = {1e8f, 1.0f, -1e8f}, out;
    const void *src[3] = {&x[0], &x[1], &x[2]};
    zero__shm_reduce(ZERO_DTYPE_FP32, ZERO_OP_SUM, src, 3, &out, 1, 0, ZERO_IMPL_AUTO);
    ZT_CHECK(out == 0.0f); /* 1e8 + 1 rounds to 1e8 */
    const void *src2[3] = {&x[0], &x[2], &x[1]};
    zero__shm_reduce(ZERO_DTYPE_FP32, ZERO_OP_SUM, src2, 3, &out, 1, 0, ZERO_IMPL_AUTO);
    ZT_CHECK(out == 1.0f);
    /* bf16 accumulates in fp32 and rounds once: 256 + 1 + 1 = 258 exactly (bf16 has 8 bits,
     * so rounding after every step would give 256 twice). */
    uint16_t h[3] = {ref_to_bf16(256.0f), ref_to_bf16(1.0f), ref_to_bf16(1.0f)}, r = 0;
    const void *src3[3] = {&h[0], &h[1], &h[2]};
    zero__shm_reduce(ZERO_DTYPE_BF16, ZERO_OP_SUM, src3, 3, &r, 1, 1, ZERO_IMPL_AUTO);
    ZT_EQ_INT(r, ref_to_bf16(258.0f));
}

/* The streaming copy equals memcpy at every length and misalignment, and stays in bounds. */
static void test_copy_stream(void) {
    enum { MAX = 4096 + 200 };
    unsigned char *src = malloc(MAX + 64), *dst = malloc(MAX + 128);
    for (int i = 0; i < MAX + 64; i++) src[i] = (unsigned char)(next_u64() >> 24);
    const size_t lens[] = {0, 1, 15, 16, 63, 64, 65, 127, 1000, 4096, MAX};
    int bad = 0;
    for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++) {
        for (size_t so = 0; so < 3; so++) {
            for (size_t d = 0; d < 40; d += 13) {
                memset(dst, 0x5A, MAX + 128);
                zero__copy_stream(dst + d, src + so, lens[li]);
                bad += memcmp(dst + d, src + so, lens[li]) != 0;
                for (size_t i = 0; i < d; i++) bad += dst[i] != 0x5A;
                for (size_t i = d + lens[li]; i < MAX + 128; i++) bad += dst[i] != 0x5A;
            }
        }
    }
    ZT_EQ_INT(bad, 0);
    free(src);
    free(dst);
}

int main(void) {
    const size_t lens[] = {0, 1, 7, 1023, 1024, 1025, 3001};
    for (int d = 0; d < ZERO_DTYPE_COUNT; d++)
        for (int op = 0; op <= 2; op += 2)
            for (int nsrc = 1; nsrc <= MAXSRC; nsrc++)
                for (size_t li = 0; li < sizeof lens / sizeof lens[0]; li++)
                    check_case((zero_dtype)d, (zero_op)op, nsrc, lens[li], (int)(li & 1));
    test_order();
    test_copy_stream();
    return zt_finish("test_comm_shm_reduce");
}
