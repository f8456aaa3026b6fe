/* The quantized formats (zero/quant.h) against bitsandbytes: tests/data/quant/golden.safetensors
 * (scripts/make_quant_fixtures.py) — the dynamic maps, int8's linear map, NF4 with and without
 * double quantization, blockwise 8-bit with either dynamic map: codes, scales and decoded values
 * bit for bit; and properties that need no reference (the round trip's bound, a tie). */
#include "harness.h"
#include "kernels/quant.h"
#include "quant/internal.h"
#include "zero/ckpt.h"
#include "zero/optim.h"
#include "zero/quant.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static zero_st_file *golden;

/* Tensor `name` of the fixture (checked to hold `n` elements of `elem` bytes), malloc'd. */
static void *load(const char *name, uint64_t n, size_t elem) {
    const int i = zero_st_find(golden, name);
    if (i < 0) {
        ZT_FAIL("the fixture has no tensor %s", name);
        return NULL;
    }
    const zero_st_tensor *t = zero_st_tensor_at(golden, i);
    if (t->numel != n || t->elem_size != elem) {
        ZT_FAIL("%s: %llu elements of %zu bytes, expected %llu of %zu", name, (unsigned long long)t->numel,
                t->elem_size, (unsigned long long)n, elem);
        return NULL;
    }
    void *p = malloc(t->nbytes ? t->nbytes : 1);
    if (zero_st_read(golden, i, 0, p, t->nbytes) != ZERO_OK) {
        ZT_FAIL("read %s: %s", name, zero_st_last_error(golden));
        free(p);
        return NULL;
    }
    return p;
}

static uint64_t numel(const char *name) {
    const int i = zero_st_find(golden, name);
    return i < 0 ? 0 : zero_st_tensor_at(golden, i)->numel;
}

/* Elements where two fp32 arrays differ in their bits (printing the first). */
static uint64_t diff_f32(const char *what, const float *a, const float *b, uint64_t n) {
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, a + i, 4);
        memcpy(&y, b + i, 4);
        if (x != y && bad++ == 0)
            printf("  %s[%llu]: %.9g (0x%08x), expected %.9g (0x%08x)\n", what, (unsigned long long)i, (double)a[i], x,
                   (double)b[i], y);
    }
    return bad;
}

static uint64_t diff_u8(const char *what, const uint8_t *a, const uint8_t *b, uint64_t n) {
    uint64_t bad = 0;
    for (uint64_t i = 0; i < n; i++)
        if (a[i] != b[i] && bad++ == 0)
            printf("  %s[%llu]: %u, expected %u\n", what, (unsigned long long)i, a[i], b[i]);
    return bad;
}

static void test_maps(void) {
    float m[256];
    float *g = load("dyn_signed", 256, 4);
    zero_quant_dynamic_map(1, m);
    if (g) ZT_EQ_INT(diff_f32("dynamic map (signed)", m, g, 256), 0);
    free(g);
    g = load("dyn_unsigned", 256, 4);
    zero_quant_dynamic_map(0, m);
    if (g) ZT_EQ_INT(diff_f32("dynamic map (unsigned)", m, g, 256), 0);
    free(g);
    g = load("int8_code", 256, 4);
    zero_quant_linear_map(m);
    if (g) ZT_EQ_INT(diff_f32("linear map", m, g, 256), 0);
    free(g);
}

/* Blockwise 8-bit of tensor `x` with `code`: the indices, the absmax and (where given) the decoded values. */
static void blockwise(const char *x_name, const char *idx_name, const char *absmax_name, const char *deq_name,
                      const float *code, uint64_t block) {
    const uint64_t n = numel(x_name), nb = zero_quant_blocks(n, block);
    float *x = load(x_name, n, 4), *ga = load(absmax_name, nb, 4), *gd = deq_name ? load(deq_name, n, 4) : NULL;
    uint8_t *gi = load(idx_name, n, 1);
    uint8_t *idx = malloc(n + 1);
    float *a = malloc(nb * 4 + 4), *d = malloc(n * 4 + 4);
    if (x && ga && gi && (gd || !deq_name)) {
        zero_quant_blockwise(x, n, block, code, idx, a);
        ZT_EQ_INT(diff_f32(absmax_name, a, ga, nb), 0);
        ZT_EQ_INT(diff_u8(idx_name, idx, gi, n), 0);
        if (gd) {
            zero_dequant_blockwise(gi, ga, code, block, 0, n, d);
            ZT_EQ_INT(diff_f32(deq_name, d, gd, n), 0);
        }
    }
    free(x), free(ga), free(gd), free(gi), free(idx), free(a), free(d);
}

static void test_blockwise(void) {
    float code[256];
    zero_quant_linear_map(code);
    blockwise("int8_x", "int8_idx", "int8_absmax", "int8_deq", code, ZERO_QUANT_INT8_BLOCK);
    zero_quant_dynamic_map(1, code);
    blockwise("dyn_x", "dyn_idx", "dyn_absmax", NULL, code, ZERO_QUANT_Q8_BLOCK);
    zero_quant_dynamic_map(0, code);
    blockwise("dynu_x", "dynu_idx", "dynu_absmax", NULL, code, ZERO_QUANT_Q8_BLOCK);
}

/* The GPU's NF4 lookup (a switch) is the table, entry by entry. */
static void test_nf4_switch(void) {
    const float t[16] = ZERO__NF4_TABLE;
    for (int c = 0; c < 16; c++) {
        const float v = zero__nf4_value_switch(c), w = zero__nf4_value(c);
        uint32_t bv, bw, bt; /* the bits: -0 and 0 apart */
        memcpy(&bv, &v, 4), memcpy(&bw, &w, 4), memcpy(&bt, &t[c], 4);
        ZT_CHECKF(bv == bt && bw == bt, "NF4 code %d: switch %.9g, lookup %.9g, table %.9g", c, v, w, t[c]);
    }
}

static void test_nf4(void) {
    const uint64_t n = numel("nf4_x"), nb = zero_quant_blocks(n, ZERO_QUANT_NF4_BLOCK),
                   nb2 = zero_quant_blocks(nb, ZERO_QUANT_DQ_BLOCK);
    float *x = load("nf4_x", n, 4), *ga = load("nf4_absmax", nb, 4), *gd = load("nf4_deq", n, 4),
          *goff = load("nf4_offset", 1, 4), *ga2 = load("nf4_absmax2", nb2, 4), *gdd = load("nf4_deq_dq", n, 4);
    uint8_t *gp = load("nf4_packed", n / 2, 1), *gq = load("nf4_qabsmax", nb, 1);
    if (!(x && ga && gd && goff && ga2 && gdd && gp && gq)) return;
    uint8_t *p = malloc(n / 2), *q = malloc(nb);
    float *a = malloc(nb * 4), *d = malloc(n * 4), *a2 = malloc(nb2 * 4), *ad = malloc(nb * 4), off = 0;
    zero_quant_nf4(x, n, p, a);
    ZT_EQ_INT(diff_f32("nf4 absmax", a, ga, nb), 0);
    ZT_EQ_INT(diff_u8("nf4 codes", p, gp, n / 2), 0);
    zero_dequant_nf4(p, a, 0, n, d);
    ZT_EQ_INT(diff_f32("nf4 decoded", d, gd, n), 0);
    /* a tile from the middle of a block decodes as the whole does */
    zero_dequant_nf4(p, a, 100, 37, d);
    ZT_EQ_INT(diff_f32("nf4 tile", d, gd + 100, 37), 0);
    zero_quant_absmax(a, nb, q, a2, &off);
    ZT_EQ_INT(diff_f32("offset", &off, goff, 1), 0);
    ZT_EQ_INT(diff_f32("absmax2", a2, ga2, nb2), 0);
    ZT_EQ_INT(diff_u8("double-quantized absmax", q, gq, nb), 0);
    zero_dequant_absmax(q, a2, off, nb, ad);
    zero_dequant_nf4(p, ad, 0, n, d);
    ZT_EQ_INT(diff_f32("nf4 decoded (double quantization)", d, gdd, n), 0);
    free(x), free(ga), free(gd), free(goff), free(ga2), free(gdd), free(gp), free(gq);
    free(p), free(q), free(a), free(d), free(a2), free(ad);
}

/* 8-bit AdamW: 10 steps on the fixture's tensor against bitsandbytes' AdamW8bit (its CPU backend's
 * step, the states coded by the reference rule) and against zero's fp32 AdamW on the same steps. */
static void test_adamw8(void) {
    const uint64_t n = numel("adam_p0"), nb = zero_quant_blocks(n, ZERO_QUANT_Q8_BLOCK);
    float *p0 = load("adam_p0", n, 4), *g = load("adam_g", 10 * n, 4), *p8 = load("adam_p8", n, 4),
          *ma = load("adam_m_absmax", nb, 4), *va = load("adam_v_absmax", nb, 4);
    uint8_t *mi = load("adam_m_idx", n, 1), *vi = load("adam_v_idx", n, 1);
    if (!(p0 && g && p8 && ma && va && mi && vi)) return;
    ZT_CHECK(n > 0); /* the fixture's tensor */
    if (n == 0) return;
    zero_optim_hparams h;
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    h.lr = 1e-2f;
    h.beta1 = 0.9f;
    h.beta2 = 0.999f;
    h.eps = 1e-8f;
    h.weight_decay = 0.01f;
    float *p = malloc(n * 4), *q = malloc(n * 4), *m32 = calloc(n, 4), *v32 = calloc(n, 4);
    memcpy(p, p0, n * 4);
    memcpy(q, p0, n * 4);
    zero_q8_state st = {calloc(n, 1), calloc(n, 1), calloc(nb, 4), calloc(nb, 4)};
    for (int s = 0; s < 10; s++) {
        ZT_OK(zero_optim_step_q8(&h, s + 1, p, &st, g + (uint64_t)s * n, 1.0f, 1.0f, n, NULL, ZERO_DTYPE_FP32));
        ZT_OK(zero_optim_step(&h, s + 1, q, m32, v32, g + (uint64_t)s * n, 1.0f, 1.0f, n, NULL, ZERO_DTYPE_FP32,
                              ZERO_IMPL_SCALAR));
    }
    double d_ref = 0, d_32 = 0, d_own = 0, moved = 0;
    uint64_t mdiff = 0, vdiff = 0;
    for (uint64_t i = 0; i < n; i++) {
        d_ref = fmax(d_ref, fabs((double)p[i] - p8[i]));
        d_32 = fmax(d_32, fabs((double)p8[i] - q[i]));
        d_own = fmax(d_own, fabs((double)p[i] - q[i]));
        moved = fmax(moved, fabs((double)q[i] - p0[i]));
        mdiff += st.m[i] != mi[i];
        vdiff += st.v[i] != vi[i];
    }
    printf(
        "test_quant: 8-bit AdamW, 10 steps of lr 1e-2 on %llu values (moved up to %.4g): max |zero - AdamW8bit| %.3g, "
        "max |AdamW8bit - fp32 AdamW| %.3g; moment indices differing %llu and %llu\n",
        (unsigned long long)n, moved, d_ref, d_32, (unsigned long long)mdiff, (unsigned long long)vdiff);
    /* the same scheme: the same codes but where an element's fp32 rounding order puts it across a
     * midpoint (none here), the parameters within 1e-6; and 8-bit, not fp32: far from the fp32 run */
    ZT_CHECKF(d_ref <= 1e-6, "8-bit AdamW: %.3g from AdamW8bit, expected <= 1e-6", d_ref);
    ZT_CHECKF(mdiff + vdiff <= n / 500, "8-bit AdamW: %llu moment indices differ from AdamW8bit's",
              (unsigned long long)(mdiff + vdiff));
    ZT_CHECKF(d_own > 1e-4, "8-bit AdamW: %.3g from fp32 AdamW: the states were not 8-bit", d_own);
    free(p0), free(g), free(p8), free(ma), free(va), free(mi), free(vi);
    free(p), free(q), free(m32), free(v32), free(st.m), free(st.v), free(st.m_absmax), free(st.v_absmax);
}

/* A record coded in pieces of whole blocks (the engine's loading) equals the record of the whole
 * tensor, byte for byte, in every format, with a partial last block. */
static void test_record_pieces(void) {
    const uint64_t n = 64 * 300 + 37; /* 301 blocks: more than one block of NF4's double quantization */
    float *x = malloc(n * sizeof *x), *am = malloc(301 * sizeof *am);
    for (uint64_t i = 0; i < n; i++)
        x[i] = (float)((int64_t)((i * 2654435761u) % 2001) - 1000) / 997.0f * (i % 7 == 0 ? 9 : 1);
    const zero_qformat fs[3] = {ZERO_QFMT_NF4, ZERO_QFMT_NF4_DQ, ZERO_QFMT_INT8};
    for (int k = 0; k < 3; k++) {
        const size_t bytes = (size_t)zero_quant_record_bytes(fs[k], n);
        uint8_t *whole = malloc(bytes), *pieces = calloc(1, bytes);
        ZT_OK(zero_quant_record_encode(fs[k], x, n, whole));
        const uint64_t cuts[] = {0, 64, 64 * 37, 64 * 38, 64 * 250, n};
        for (int c = 0; c + 1 < 6; c++)
            ZT_OK(zero__quant_record_code(fs[k], n, x + cuts[c], cuts[c] / 64, cuts[c + 1] - cuts[c], pieces, am));
        zero__quant_record_finish(fs[k], n, am, pieces);
        ZT_CHECKF(!memcmp(whole, pieces, bytes), "%s: the record coded in pieces differs from the whole's",
                  zero_qformat_name(fs[k]));
        /* a piece that does not end on a block before the tensor's end is refused */
        ZT_EQ_INT(zero__quant_record_code(fs[k], n, x, 0, 100, pieces, am), ZERO_ERR_INVALID_ARG);
        free(whole);
        free(pieces);
    }
    free(x);
    free(am);
}

int main(void) {
    const char *src = getenv("ZERO_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof path, "%s/tests/data/quant/golden.safetensors", src ? src : ".");
    zero_error err = {{0}};
    if (zero_st_open(&golden, NULL, path, &err) != ZERO_OK) {
        ZT_FAIL("open %s: %s", path, err.msg);
        return zt_finish("test_quant");
    }
    test_maps();
    /* the fast index (the maps' lookup tables) against the bisection, every key */
    ZT_EQ_INT(zero__quant_index_check(), 0);
    test_blockwise();
    test_nf4();
    test_nf4_switch();
    test_adamw8();
    test_record_pieces();
    zero_st_close(golden);
    return zt_finish("test_quant");
}
