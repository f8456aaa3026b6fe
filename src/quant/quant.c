/* Blockwise quantized formats (zero/quant.h, docs/QUANT.md): the scalar references over the kernel
 * layer's element formulas (kernels/quant.h), and the code tables built as their definitions say. */
#pragma GCC optimize("fp-contract=off")
#include "kernels/quant.h"
#include "quant/internal.h"
#include "zero/quant.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

uint64_t zero_quant_blocks(uint64_t n, uint64_t block) { return block ? (n + block - 1) / block : 0; }

void zero_quant_nf4_table(float out[16]) {
    static const float t[16] = ZERO__NF4_TABLE;
    memcpy(out, t, sizeof t);
}

/* n evenly spaced fp32 values from a to b, both ends included: the step (b - a) / (n - 1) in fp32,
 * the first half a + step * i, the second b - step * (n - 1 - i), each one fused multiply-add (one
 * rounding), so both ends are exact — torch.linspace's values on a CPU, which the maps are defined by. */
static void linspace(float a, float b, int n, float *out) {
    const float step = (b - a) / (float)(n - 1);
    const int half = n / 2;
    for (int i = 0; i < n; i++) out[i] = i < half ? fmaf(step, (float)i, a) : fmaf(-step, (float)(n - 1 - i), b);
}

static int cmp_float(const void *x, const void *y) {
    const float a = *(const float *)x, b = *(const float *)y;
    return (a > b) - (a < b);
}

/* The dynamic data type (Dettmers, "8-bit approximations for parallelism in deep learning"): for
 * each of 7 decades 10^(e - 6), e = 0..6, the midpoints of an fp32 linspace over [0.1, 1] of 2^e + 1
 * points (signed; unsigned: 2^(e+1) + 1) times the decade (all in fp32), with
 * their negatives when signed; then 0 and 1; ascending. 127 + 127 + 2 or 254 + 2 = 256 values. */
void zero_quant_dynamic_map(int is_signed, float out[256]) {
    int k = 0;
    float b[130];
    for (int e = 0; e < 7; e++) {
        const int items = is_signed ? (1 << e) + 1 : (1 << (e + 1)) + 1;
        linspace(0.1f, 1.0f, items, b);
        const float scale = (float)pow(10.0, (double)(e - 6));
        for (int i = 0; i + 1 < items; i++) {
            const float v = scale * ((b[i] + b[i + 1]) / 2.0f);
            out[k++] = v;
            if (is_signed) out[k++] = -v;
        }
    }
    out[k++] = 0.0f;
    out[k++] = 1.0f;
    qsort(out, 256, sizeof *out, cmp_float);
}

void zero_quant_linear_map(float out[256]) {
    float v[255];
    linspace(-1.0f, 1.0f, 255, v);
    for (int i = 0; i < 127; i++) out[i] = v[i];
    out[127] = 0.0f;
    for (int i = 127; i < 255; i++) out[i + 1] = v[i];
}

/* A block's absmax in 8 running maxima, combined at the end: the same value as one scan (a maximum
 * does not depend on the order, and a NaN never wins), without one scan's chain of dependent
 * steps (the compiler makes the 8 a vector). */
static float block_absmax(const float *x, uint64_t n) {
    float m[8] = {0};
    uint64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) { /* zero__q8_absmax_step, written for the vectorizer */
            const float v = fabsf(x[i + (uint64_t)j]);
            m[j] = v > m[j] ? v : m[j];
        }
    float a = 0.0f;
    for (int j = 0; j < 8; j++) a = zero__q8_absmax_step(a, m[j]);
    for (; i < n; i++) a = zero__q8_absmax_step(a, x[i]);
    return a;
}

/* A fast index for the three maps zero uses (the dynamic maps and int8's linear map): the midpoints
 * rounded to fp32 as zero__q_index computes them, and per value of a float's top 16 bits (sign,
 * exponent, 7 mantissa bits) the number of midpoints below the lowest value with those bits; the
 * index of v is that count plus the midpoints in [lowest, v), a short scan (a key spans 1/128 of
 * its octave: 0 to 3 midpoints). The same index as zero__q_index's bisection, every value: the
 * tables are built from the same midpoints and test_quant checks the two on every key. */
typedef struct q8_fast {
    float code[256], mid[256]; /* mid[255] = +inf: the scan's sentinel */
    int scan;                  /* the most midpoints any key's values span */
    uint8_t below[65536];
} q8_fast;

static q8_fast fast_maps[3];
static pthread_once_t fast_once = PTHREAD_ONCE_INIT;

/* The lowest float whose top 16 bits are `key` (NaN keys: their sign's infinity side). */
static float key_low(uint32_t key) {
    const uint32_t hi = key << 16;
    /* positive: the smallest bits are the lowest; negative: the largest magnitude is the lowest */
    const uint32_t bits = (hi & 0x80000000u) ? hi | 0xffffu : hi;
    return zero__f32_from_bits(bits);
}

/* The highest float whose top 16 bits are `key`. */
static float key_high(uint32_t key) {
    const uint32_t hi = key << 16;
    return zero__f32_from_bits((hi & 0x80000000u) ? hi : hi | 0xffffu);
}

static void fast_build(q8_fast *f, const float *code) {
    memcpy(f->code, code, sizeof f->code);
    for (int i = 0; i < 255; i++) f->mid[i] = (code[i] + code[i + 1]) * 0.5f;
    f->mid[255] = INFINITY;
    f->scan = 0;
    for (uint32_t k = 0; k < 65536; k++) {
        const float lo = key_low(k), hi = key_high(k);
        int q = 0, r;
        if (lo == lo) /* not NaN */
            while (q < 255 && f->mid[q] < lo) q++;
        f->below[k] = (uint8_t)q;
        for (r = q; hi == hi && r < 255 && f->mid[r] < hi; r++) {}
        if (r - q > f->scan) f->scan = r - q;
    }
}

static void fast_init(void) {
    float c[256];
    zero_quant_dynamic_map(1, c);
    fast_build(&fast_maps[0], c);
    zero_quant_dynamic_map(0, c);
    fast_build(&fast_maps[1], c);
    zero_quant_linear_map(c);
    fast_build(&fast_maps[2], c);
}

/* The fast index of code's map, if it is one of the three (bit for bit), else NULL. */
static const q8_fast *fast_of(const float *code) {
    pthread_once(&fast_once, fast_init);
    for (int i = 0; i < 3; i++) {
        int j = 0;
        while (j < 256 && zero__f32_bits(fast_maps[i].code[j]) == zero__f32_bits(code[j])) j++;
        if (j == 256) return &fast_maps[i];
    }
    return NULL;
}

static inline int fast_index(const q8_fast *f, float v) {
    int q = f->below[zero__f32_bits(v) >> 16];
    for (int j = 0; j < f->scan; j++) q += f->mid[q] < v; /* a fixed count: no unpredictable branch */
    return q;
}

/* int8's linear map (fast_maps[2]: about k / 127 at index k + 127 for k < 0, k + 128 for k > 0,
 * its two zeros at 127 and 128) without the table and without branches on the data: the index of
 * the nearest k, then moved one step down or up where the midpoints on either side do not bracket
 * v (mid[q - 1] < v <= mid[q]): the count of midpoints below v, zero__q_index's result. The
 * nearest k misses it by at most one (v * 127 rounds within an ulp of v's place between two
 * midpoints, which lie within an ulp of (k +- 1/2) / 127); zero__quant_index_check holds it to
 * the bisection (and, once, every float of [-1, 1]: 2,130,706,434 values, none different). v in [-1, 1] or NaN (index
 * 0, as the bisection gives). */
static inline int linear_index(const q8_fast *f, float v) {
    if (!(v == v)) return 0;
    /* v * 127 rounded to the nearest integer (ties to even) by the 1.5 * 2^23 trick: exact for
     * |t| < 2^22, no call */
    const float t = v * 127.0f, r = (t + 12582912.0f) - 12582912.0f;
    const int k = (int)r;
    int q = k + 127 + (k > 0) + ((k == 0) & (v > 0.0f));
    /* t is within 2^-17 of 127 v and 127 x each midpoint within 2e-5 of k +- 1/2: a t this far
     * from both is on the guessed side of both midpoints (the usual case: no load). Not around 0,
     * where the map's second zero is linspace's middle value, a rounding away from 0. */
    if (k != 0 && fabsf(t - r) < 0.49f) return q;
    const int below = q - (q > 0);
    q -= (q > 0) & !(f->mid[below] < v);
    q += f->mid[q] < v; /* mid[255] is +inf */
    return q;
}

int zero__quant_index_check(void) {
    int bad = 0;
    pthread_once(&fast_once, fast_init);
    for (uint32_t k = 0; k < 65536; k++) /* the linear map's own index, on the same values */
        for (int j = 0; j < 3; j++) {
            const uint32_t hi = k << 16, lo16[3] = {0, 0xffffu, 0x8123u};
            const float v = zero__f32_from_bits(hi | lo16[j]);
            if (v >= -1.0f && v <= 1.0f)
                bad += linear_index(&fast_maps[2], v) != zero__q_index(fast_maps[2].code, 256, v);
        }
    for (int m = 0; m < 3; m++)
        for (uint32_t k = 0; k < 65536; k++) { /* each key's lowest and highest value, and one between */
            const uint32_t hi = k << 16;
            const float vs[3] = {zero__f32_from_bits(hi), zero__f32_from_bits(hi | 0xffffu),
                                 zero__f32_from_bits(hi | 0x8123u)};
            for (int j = 0; j < 3; j++) {
                const float v = vs[j];
                if (!(v >= -1.0f && v <= 1.0f)) continue; /* normalized values only */
                bad += fast_index(&fast_maps[m], v) != zero__q_index(fast_maps[m].code, 256, v);
            }
        }
    return bad;
}

/* Blocks at a time on every core above this many values (each block is independent). */
#define Q_PARALLEL_MIN ((uint64_t)1 << 16)

/* n values of a block with absmax a coded against int8's linear map: zero__q_norm's value,
 * indexed by linear_index. */
static void code_run(const q8_fast *f, const float *x, uint64_t n, float a, int partial, uint8_t *out) {
    if (!(a > 0.0f)) { /* zero__q_norm's 0 */
        memset(out, linear_index(f, 0.0f), (size_t)n);
        return;
    }
    const float inv = 1.0f / a;
    for (uint64_t i = 0; i < n; i++) {
        float v = partial ? x[i] / a : x[i] * inv;
        v = v < -1.0f ? -1.0f : v;
        v = v > 1.0f ? 1.0f : v;
        out[i] = (uint8_t)linear_index(f, v);
    }
}

void zero_quant_blockwise(const float *x, uint64_t n, uint64_t block, const float *code, uint8_t *idx, float *absmax) {
    const q8_fast *f = fast_of(code);
    const uint64_t nb = (n + block - 1) / block;
#pragma omp parallel for schedule(static) if (n >= Q_PARALLEL_MIN)
    for (uint64_t b = 0; b < nb; b++) {
        if (!f) { /* another code: the kernel layer's body (the device kernel q8_store's) */
            zero__q8_store_block(x, code, block, n, b, idx, absmax);
            continue;
        }
        const uint64_t lo = b * block, len = n - lo < block ? n - lo : block;
        const float a = block_absmax(x + lo, len);
        absmax[b] = a;
        if (f == &fast_maps[2]) code_run(f, x + lo, len, a, len < block, idx + lo);
        else
            for (uint64_t i = 0; i < len; i++)
                idx[lo + i] = (uint8_t)fast_index(f, zero__q_norm(x[lo + i], a, len < block));
    }
}

void zero_dequant_blockwise(const uint8_t *idx, const float *absmax, const float *code, uint64_t block, uint64_t first,
                            uint64_t n, float *out) {
    if (n < Q_PARALLEL_MIN) {
        zero__q8_load(idx, code, absmax, 0, block, first, n, out);
        return;
    }
    const uint64_t step = (uint64_t)1 << 14;
#pragma omp parallel for schedule(static)
    for (uint64_t c = 0; c < n; c += step)
        zero__q8_load(idx, code, absmax, 0, block, first + c, n - c < step ? n - c : step, out + c);
}

void zero_quant_nf4(const float *x, uint64_t n, uint8_t *packed, float *absmax) {
    static const float t[16] = ZERO__NF4_TABLE;
    /* zero__q_index's midpoints, each rounded to fp32 as it computes them: a value's index is the
     * count of them below it (the same as its bisection: they ascend), without a branch */
    float mid[15];
    for (int j = 0; j < 15; j++) mid[j] = (t[j] + t[j + 1]) * 0.5f;
    const uint64_t block = ZERO_QUANT_NF4_BLOCK;
    memset(packed, 0, (size_t)((n + 1) / 2));
    const uint64_t nb = (n + block - 1) / block;
    /* blocks are independent and own whole bytes (64 values: 32 bytes) */
#pragma omp parallel for schedule(static) if (n >= Q_PARALLEL_MIN)
    for (uint64_t b = 0; b < nb; b++) {
        const uint64_t lo = b * block, len = n - lo < block ? n - lo : block;
        const float a = block_absmax(x + lo, len);
        absmax[b] = a;
        for (uint64_t i = lo; i < lo + len; i++) {
            const float v = zero__q_norm(x[i], a, len < block);
            int q = 0;
            for (int j = 0; j < 15; j++) q += mid[j] < v;
            packed[i >> 1] |= (uint8_t)((i & 1) ? q : q << 4);
        }
    }
}

void zero_dequant_nf4(const uint8_t *packed, const float *absmax, uint64_t first, uint64_t n, float *out) {
    zero__nf4_load(packed, absmax, 0, ZERO_QUANT_NF4_BLOCK, first, n, out);
}

void zero_quant_absmax(const float *absmax, uint64_t nblocks, uint8_t *q, float *absmax2, float *offset) {
    double sum = 0;
    for (uint64_t b = 0; b < nblocks; b++) sum += absmax[b];
    const float mean = nblocks ? (float)(sum / (double)nblocks) : 0.0f;
    const float *code = zero__quant_map(ZERO__QMAP_SIGNED);
    float tmp[ZERO_QUANT_DQ_BLOCK];
    /* a block of the absmax less their mean at a time (the last one partial as the vector's is) */
    for (uint64_t lo = 0; lo < nblocks; lo += ZERO_QUANT_DQ_BLOCK) {
        const uint64_t len = nblocks - lo < ZERO_QUANT_DQ_BLOCK ? nblocks - lo : ZERO_QUANT_DQ_BLOCK;
        for (uint64_t i = 0; i < len; i++) tmp[i] = absmax[lo + i] - mean;
        zero_quant_blockwise(tmp, len, ZERO_QUANT_DQ_BLOCK, code, q + lo, absmax2 + lo / ZERO_QUANT_DQ_BLOCK);
    }
    *offset = mean;
}

void zero_dequant_absmax(const uint8_t *q, const float *absmax2, float offset, uint64_t nblocks, float *out) {
    const float *code = zero__quant_map(ZERO__QMAP_SIGNED);
    for (uint64_t b = 0; b < nblocks; b++) out[b] = zero__dq_absmax(q, code, absmax2, ZERO_QUANT_DQ_BLOCK, offset, b);
}

const float *zero__quant_map(int which) {
    pthread_once(&fast_once, fast_init);
    return fast_maps[which].code;
}

/* ---------------------------------------------------------------- records */
const char *zero_qformat_name(zero_qformat f) {
    switch (f) {
    case ZERO_QFMT_NONE: return "none";
    case ZERO_QFMT_NF4: return "nf4";
    case ZERO_QFMT_NF4_DQ: return "nf4-dq";
    case ZERO_QFMT_INT8: return "int8";
    }
    return "?";
}

static uint64_t round_up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

/* The byte offsets of a record's parts: scales (f32) from 0, then the absmax codes and the codes. */
typedef struct rec_layout {
    uint64_t nb, nb2; /* blocks, double quantization's blocks of absmax */
    uint64_t absmax, absmax2, qabsmax, codes, end;
} rec_layout;

static int rec_layout_of(zero_qformat f, uint64_t n, rec_layout *l) {
    memset(l, 0, sizeof *l);
    if (f != ZERO_QFMT_NF4 && f != ZERO_QFMT_NF4_DQ && f != ZERO_QFMT_INT8) return -1;
    l->nb = zero_quant_blocks(n, ZERO_QUANT_NF4_BLOCK); /* int8's blocks are 64 as well */
    const uint64_t ncodes = f == ZERO_QFMT_INT8 ? n : (n + 1) / 2;
    if (f == ZERO_QFMT_NF4_DQ) {
        l->nb2 = zero_quant_blocks(l->nb, ZERO_QUANT_DQ_BLOCK);
        l->absmax2 = 4; /* after the offset */
        l->qabsmax = l->absmax2 + 4 * l->nb2;
        l->codes = l->qabsmax + l->nb;
    } else {
        l->absmax = 0;
        l->codes = 4 * l->nb;
    }
    l->end = round_up(l->codes + ncodes, ZERO_QUANT_RECORD_ALIGN);
    return 0;
}

uint64_t zero_quant_msg_bytes(uint64_t n, uint64_t block) {
    return n ? round_up(4 * zero_quant_blocks(n, block) + n, ZERO_QUANT_RECORD_ALIGN) : 0;
}

uint64_t zero_quant_msg_chunk(uint64_t block) {
    const uint64_t c = block ? ((uint64_t)1 << 16) / block * block : 0;
    return c ? c : block;
}

/* Values [lo, lo + n) of x in dtype dt widened to fp32 (exact) into out. */
static void widen_run(const void *x, zero_dtype dt, uint64_t lo, uint64_t n, float *out) {
    const uint16_t *h = (const uint16_t *)x + lo;
    if (dt == ZERO_DTYPE_BF16)
        for (uint64_t i = 0; i < n; i++) out[i] = zero__bf16_bits_to_fp32(h[i]);
    else
        for (uint64_t i = 0; i < n; i++) out[i] = zero__fp16_bits_to_fp32(h[i]);
}

/* A half block is widened this many values at a time. */
#define MSG_PIECE 256

zero_status zero_quant_msg_encode(const void *x, zero_dtype dt, uint64_t n, uint64_t block, void *msg) {
    if ((dt != ZERO_DTYPE_FP32 && dt != ZERO_DTYPE_BF16 && dt != ZERO_DTYPE_FP16) || !block)
        return ZERO_ERR_INVALID_ARG;
    pthread_once(&fast_once, fast_init);
    const q8_fast *f = &fast_maps[2]; /* int8's linear map */
    const uint64_t nb = zero_quant_blocks(n, block);
    float *absmax = msg;
    uint8_t *codes = (uint8_t *)msg + 4 * nb;
    memset(codes + n, 0, (size_t)(zero_quant_msg_bytes(n, block) - 4 * nb - n));
#pragma omp parallel for schedule(static) if (n >= Q_PARALLEL_MIN)
    for (uint64_t b = 0; b < nb; b++) {
        const uint64_t lo = b * block, len = n - lo < block ? n - lo : block;
        if (dt == ZERO_DTYPE_FP32) {
            const float *xf = (const float *)x + lo;
            absmax[b] = block_absmax(xf, len);
            code_run(f, xf, len, absmax[b], len < block, codes + lo);
            continue;
        }
        float w[MSG_PIECE], a = 0.0f;
        for (uint64_t i = 0; i < len; i += MSG_PIECE) {
            const uint64_t m = len - i < MSG_PIECE ? len - i : MSG_PIECE;
            widen_run(x, dt, lo + i, m, w);
            a = zero__q8_absmax_step(a, block_absmax(w, m));
        }
        absmax[b] = a;
        for (uint64_t i = 0; i < len; i += MSG_PIECE) {
            const uint64_t m = len - i < MSG_PIECE ? len - i : MSG_PIECE;
            widen_run(x, dt, lo + i, m, w);
            code_run(f, w, m, a, len < block, codes + lo + i);
        }
    }
    return ZERO_OK;
}

void zero_quant_msg_decode(const void *msg, uint64_t n, uint64_t block, uint64_t first, uint64_t count, float *out,
                           int add) {
    pthread_once(&fast_once, fast_init);
    const float *code = fast_maps[2].code, *absmax = msg;
    const uint8_t *codes = (const uint8_t *)msg + 4 * zero_quant_blocks(n, block);
    for (uint64_t k = 0; k < count;) { /* a block's run at a time: its scale read once */
        const uint64_t i = first + k, b = i / block,
                       end = (b + 1) * block - first < count ? (b + 1) * block - first : count;
        const float a = absmax[b];
        if (add)
            for (; k < end; k++) out[k] += code[codes[first + k]] * a;
        else
            for (; k < end; k++) out[k] = code[codes[first + k]] * a;
    }
}

uint64_t zero_quant_record_bytes(zero_qformat f, uint64_t n) {
    rec_layout l;
    return rec_layout_of(f, n, &l) ? 0 : l.end;
}

zero_status zero_quant_record_view(zero_qformat f, const void *rec, uint64_t n, zero_quant_view *out) {
    rec_layout l;
    if (!out || !rec || ((uintptr_t)rec & 3) || rec_layout_of(f, n, &l)) return ZERO_ERR_INVALID_ARG;
    const uint8_t *b = rec;
    memset(out, 0, sizeof *out);
    out->fmt = f;
    out->n = n;
    out->codes = b + l.codes;
    if (f == ZERO_QFMT_NF4_DQ) {
        memcpy(&out->offset, b, sizeof out->offset);
        out->absmax2 = (const float *)(const void *)(b + l.absmax2);
        out->qabsmax = b + l.qabsmax;
    } else {
        out->absmax = (const float *)(const void *)(b + l.absmax);
    }
    return ZERO_OK;
}

zero_status zero__quant_record_code(zero_qformat f, uint64_t ntotal, const float *x, uint64_t b0, uint64_t n, void *rec,
                                    float *am) {
    rec_layout l;
    const uint64_t first = b0 * ZERO_QUANT_NF4_BLOCK; /* int8's blocks are 64 as well */
    if (!rec || ((uintptr_t)rec & 3) || (!x && n) || rec_layout_of(f, ntotal, &l) || first > ntotal ||
        n > ntotal - first || (first + n < ntotal && n % ZERO_QUANT_NF4_BLOCK) || (f == ZERO_QFMT_NF4_DQ && !am))
        return ZERO_ERR_INVALID_ARG;
    uint8_t *b = rec;
    if (f == ZERO_QFMT_INT8) {
        zero_quant_blockwise(x, n, ZERO_QUANT_INT8_BLOCK, zero__quant_map(ZERO__QMAP_LINEAR), b + l.codes + first,
                             (float *)(void *)(b + l.absmax) + b0);
        return ZERO_OK;
    }
    /* NF4: a block is 32 whole bytes of codes */
    zero_quant_nf4(x, n, b + l.codes + first / 2, f == ZERO_QFMT_NF4 ? (float *)(void *)(b + l.absmax) + b0 : am + b0);
    return ZERO_OK;
}

void zero__quant_record_finish(zero_qformat f, uint64_t ntotal, const float *am, void *rec) {
    rec_layout l;
    if (f != ZERO_QFMT_NF4_DQ || rec_layout_of(f, ntotal, &l)) return; /* the scales are in place */
    uint8_t *b = rec;
    float offset;
    zero_quant_absmax(am, l.nb, b + l.qabsmax, (float *)(void *)(b + l.absmax2), &offset);
    memcpy(b, &offset, sizeof offset);
}

zero_status zero_quant_record_encode(zero_qformat f, const float *x, uint64_t n, void *rec) {
    rec_layout l;
    if (!rec || ((uintptr_t)rec & 3) || (!x && n) || rec_layout_of(f, n, &l)) return ZERO_ERR_INVALID_ARG;
    memset(rec, 0, (size_t)l.end);
    float *am = NULL;
    if (f == ZERO_QFMT_NF4_DQ && !(am = malloc((size_t)(l.nb ? l.nb : 1) * sizeof *am))) return ZERO_ERR_NOMEM;
    zero_status s = zero__quant_record_code(f, n, x, 0, n, rec, am);
    if (s == ZERO_OK) zero__quant_record_finish(f, n, am, rec);
    free(am);
    return s;
}

zero_status zero_quant_record_decode(const zero_quant_view *v, uint64_t first, uint64_t count, float *out) {
    if (!v || (!out && count) || first > v->n || count > v->n - first) return ZERO_ERR_INVALID_ARG;
    if (v->fmt == ZERO_QFMT_INT8) {
        zero__q8_load(v->codes, zero__quant_map(ZERO__QMAP_LINEAR), v->absmax, 0, ZERO_QUANT_INT8_BLOCK, first, count,
                      out);
        return ZERO_OK;
    }
    if (v->fmt == ZERO_QFMT_NF4) {
        zero__nf4_load(v->codes, v->absmax, 0, ZERO_QUANT_NF4_BLOCK, first, count, out);
        return ZERO_OK;
    }
    if (v->fmt != ZERO_QFMT_NF4_DQ) return ZERO_ERR_INVALID_ARG;
    /* the blocks' scales decoded a run at a time, then the values against them */
    const float *code = zero__quant_map(ZERO__QMAP_SIGNED);
    float am[256] = {0}; /* (every entry read is set below; the analyzer cannot tell) */
    uint64_t i = first;
    while (i < first + count) {
        const uint64_t b0 = i / ZERO_QUANT_NF4_BLOCK;
        const uint64_t nb = zero_quant_blocks(v->n, ZERO_QUANT_NF4_BLOCK);
        const uint64_t b1 = nb - b0 < 256 ? nb : b0 + 256;
        for (uint64_t b = b0; b < b1; b++)
            am[b - b0] = zero__dq_absmax(v->qabsmax, code, v->absmax2, ZERO_QUANT_DQ_BLOCK, v->offset, b);
        const uint64_t end = b1 * ZERO_QUANT_NF4_BLOCK < first + count ? b1 * ZERO_QUANT_NF4_BLOCK : first + count;
        zero__nf4_load(v->codes, am, b0, ZERO_QUANT_NF4_BLOCK, i, end - i, out + (i - first));
        i = end;
    }
    return ZERO_OK;
}

uint64_t zero_quant_place(zero_qformat f, uint64_t n, size_t slot, uint64_t at, uint64_t *start) {
    if (f == ZERO_QFMT_NONE || !slot) {
        *start = at;
        return at + n;
    }
    const uint64_t per = ZERO_QUANT_RECORD_ALIGN / slot; /* slot divides the alignment: 2 or 4 bytes */
    *start = round_up(at, per);
    return *start + zero_quant_record_bytes(f, n) / slot;
}
