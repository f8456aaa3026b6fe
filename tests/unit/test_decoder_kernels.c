/* Every kernel of models/decoder/kernels.c against its scalar twin (kernels_ref.c) on random
 * inputs, at sizes that take the OpenMP paths and sizes that do not: fp32 kernels within a few
 * ulps of the double-accumulating twins (relative 1e-5 of the output's scale), accumulating
 * outputs added to what was there, in-place RMSNorm backward equal to the out-of-place one. */
#include <stdint.h>

#include "decoder/decoder_internal.h"
#include "harness.h"

static uint64_t rng = 12345;
static float urand(void) { return (float)(dec__uniform(&rng) * 2.0 - 1.0); }
static float *rnd(size_t n, float scale) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    for (size_t i = 0; i < n; i++) p[i] = urand() * scale;
    return p;
}
static float *copy(const float *a, size_t n) {
    float *p = malloc((n ? n : 1) * sizeof(float));
    memcpy(p, a, n * sizeof(float));
    return p;
}

/* max |a - b| <= tol * max(1, max |b|) */
static void close_to(const char *what, const float *a, const float *b, size_t n, double tol) {
    double d = 0, m = 1;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        if (fabs((double)a[i] - b[i]) > d) d = fabs((double)a[i] - b[i]), at = i;
        m = fmax(m, fabs(b[i]));
    }
    ZT_CHECKF(d <= tol * m, "%s: max |diff| %.3g at %zu (%.9g vs %.9g), scale %.3g", what, d, at, a[at], b[at], m);
}

static void test_embed(int B, int T, int C, int V) {
    int32_t *tok = malloc((size_t)B * T * sizeof *tok);
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)(dec__next(&rng) % (uint64_t)V);
    float *wte = rnd((size_t)V * C, 1), *wpe = rnd((size_t)T * C, 1), *o1 = rnd((size_t)B * T * C, 1), *o2 = rnd((size_t)B * T * C, 1);
    for (int k = 0; k < 2; k++) {
        const float *pe = k ? NULL : wpe;
        dec__embed_fwd(o1, tok, wte, pe, B, T, C);
        dec__ref_embed_fwd(o2, tok, wte, pe, B, T, C);
        close_to("embed_fwd", o1, o2, (size_t)B * T * C, 0);
        float *g1 = rnd((size_t)V * C, 1), *g2 = copy(g1, (size_t)V * C), *p1 = rnd((size_t)T * C, 1), *p2 = copy(p1, (size_t)T * C);
        dec__embed_bwd(g1, k ? NULL : p1, o1, tok, B, T, C);
        dec__ref_embed_bwd(g2, k ? NULL : p2, o1, tok, B, T, C);
        close_to("embed_bwd wte", g1, g2, (size_t)V * C, 1e-6);
        close_to("embed_bwd wpe", p1, p2, (size_t)T * C, 1e-6);
        free(g1), free(g2), free(p1), free(p2);
    }
    free(tok), free(wte), free(wpe), free(o1), free(o2);
}

static void test_norms(size_t N, int C) {
    float *x = rnd(N * C, 3), *w = rnd(C, 1), *b = rnd(C, 1), *d = rnd(N * C, 1);
    float *y1 = rnd(N * C, 1), *y2 = rnd(N * C, 1), *m1 = rnd(N, 1), *m2 = rnd(N, 1), *r1 = rnd(N, 1), *r2 = rnd(N, 1);
    dec__layernorm_fwd(y1, m1, r1, x, w, b, N, C, 1e-5);
    dec__ref_layernorm_fwd(y2, m2, r2, x, w, b, N, C, 1e-5);
    close_to("layernorm_fwd", y1, y2, N * C, 1e-6);
    close_to("layernorm rstd", r1, r2, N, 1e-6);
    float *di1 = rnd(N * C, 1), *di2 = copy(di1, N * C), *dw1 = rnd(C, 1), *dw2 = copy(dw1, C), *db1 = rnd(C, 1), *db2 = copy(db1, C);
    dec__layernorm_bwd(di1, dw1, db1, d, x, w, m1, r1, N, C);
    dec__ref_layernorm_bwd(di2, dw2, db2, d, x, w, m1, r1, N, C);
    close_to("layernorm_bwd dinp (accumulated)", di1, di2, N * C, 1e-5);
    close_to("layernorm_bwd dw", dw1, dw2, C, 1e-5);
    close_to("layernorm_bwd db", db1, db2, C, 1e-5);
    /* RMSNorm, whole rows and per group (q/k norm: G groups of D inside rows of stride ld) */
    const int G = 3, D = C / G > 1 ? (C / G) & ~1 : 2;
    const size_t ld = (size_t)G * D + 5;
    for (int grouped = 0; grouped < 2; grouped++) {
        const int g = grouped ? G : 1, dd = grouped ? D : C;
        const size_t l = grouped ? ld : (size_t)C, n = N * l;
        float *xx = rnd(n, 3), *ww = rnd(dd, 1), *dy = rnd(n, 1), *o1 = rnd(n, 1), *o2 = copy(o1, n);
        float *s1 = rnd(N * g, 1), *s2 = rnd(N * g, 1);
        dec__rmsnorm_fwd(o1, l, s1, xx, l, ww, N, g, dd, 1e-6);
        dec__ref_rmsnorm_fwd(o2, l, s2, xx, l, ww, N, g, dd, 1e-6);
        close_to(grouped ? "rmsnorm_fwd grouped" : "rmsnorm_fwd", o1, o2, n, 1e-6);
        close_to("rmsnorm rstd", s1, s2, N * g, 1e-6);
        for (int acc = 0; acc < 2; acc++) {
            float *a1 = rnd(n, 1), *a2 = copy(a1, n), *w1 = rnd(dd, 1), *w2 = copy(w1, dd);
            dec__rmsnorm_bwd(a1, l, dy, l, xx, l, ww, s1, w1, N, g, dd, acc);
            dec__ref_rmsnorm_bwd(a2, l, dy, l, xx, l, ww, s1, w2, N, g, dd, acc);
            close_to(acc ? "rmsnorm_bwd dinp (accumulated)" : "rmsnorm_bwd dinp", a1, a2, n, 1e-5);
            close_to("rmsnorm_bwd dw", w1, w2, dd, 1e-5);
            if (!acc) { /* in place: dinp == dout */
                float *ip = copy(dy, n), *w3 = copy(w2, dd);
                memcpy(w3, w1, dd * sizeof(float));
                float *w4 = rnd(dd, 1), *w5 = copy(w4, dd);
                dec__rmsnorm_bwd(ip, l, ip, l, xx, l, ww, s1, w4, N, g, dd, 0);
                dec__rmsnorm_bwd(a1, l, dy, l, xx, l, ww, s1, w5, N, g, dd, 0);
                for (size_t r = 0; r < N; r++) /* the columns the norm covers */
                    close_to("rmsnorm_bwd in place", ip + r * l, a1 + r * l, (size_t)g * dd, 0);
                close_to("rmsnorm_bwd in place dw", w4, w5, dd, 0);
                free(ip), free(w3), free(w4), free(w5);
            }
            free(a1), free(a2), free(w1), free(w2);
        }
        free(xx), free(ww), free(dy), free(o1), free(o2), free(s1), free(s2);
    }
    free(x), free(w), free(b), free(d), free(y1), free(y2), free(m1), free(m2), free(r1), free(r2);
    free(di1), free(di2), free(dw1), free(dw2), free(db1), free(db2);
}

static void test_matmul(size_t N, int IC, int OC) {
    for (int wt = 0; wt < 2; wt++)
        for (int bias = 0; bias < 2; bias++) {
            float *x = rnd(N * IC, 1), *W = rnd((size_t)IC * OC, 1), *bb = bias ? rnd(OC, 1) : NULL, *d = rnd(N * OC, 1);
            float *o1 = rnd(N * OC, 1), *o2 = copy(o1, N * OC);
            dec__matmul_fwd(o1, x, W, bb, N, IC, OC, wt, 1);
            dec__ref_matmul_fwd(o2, x, W, bb, N, IC, OC, wt, 1);
            close_to("matmul_fwd (accumulated)", o1, o2, N * OC, 1e-5);
            dec__matmul_fwd(o1, x, W, bb, N, IC, OC, wt, 0);
            dec__ref_matmul_fwd(o2, x, W, bb, N, IC, OC, wt, 0);
            close_to("matmul_fwd", o1, o2, N * OC, 1e-5);
            float *di1 = rnd(N * IC, 1), *di2 = rnd(N * IC, 1), *dW1 = rnd((size_t)IC * OC, 1), *dW2 = copy(dW1, (size_t)IC * OC);
            float *db1 = bias ? rnd(OC, 1) : NULL, *db2 = bias ? copy(db1, OC) : NULL;
            dec__matmul_bwd(di1, dW1, db1, d, x, W, N, IC, OC, wt);
            dec__ref_matmul_bwd(di2, dW2, db2, d, x, W, N, IC, OC, wt);
            close_to(wt ? "matmul_bwd dinp (Linear)" : "matmul_bwd dinp (Conv1D)", di1, di2, N * IC, 1e-5);
            close_to("matmul_bwd dW", dW1, dW2, (size_t)IC * OC, 1e-5);
            if (bias) close_to("matmul_bwd dbias", db1, db2, OC, 1e-5);
            free(x), free(W), free(bb), free(d), free(o1), free(o2), free(di1), free(di2), free(dW1), free(dW2), free(db1), free(db2);
        }
}

static void test_attention(int B, int T, int H, int G, int D) {
    const size_t N = (size_t)B * T, QKV = (size_t)(H + 2 * G) * D, Q = (size_t)H * D, A = (size_t)B * H * T * T;
    float *qkv = rnd(N * QKV, 1.5f), *o1 = rnd(N * Q, 1), *o2 = rnd(N * Q, 1), *a1 = rnd(A, 1), *a2 = rnd(A, 1);
    dec__attention_fwd(o1, a1, qkv, B, T, H, G, D);
    dec__ref_attention_fwd(o2, a2, qkv, B, T, H, G, D);
    close_to("attention_fwd probabilities", a1, a2, A, 1e-6);
    close_to("attention_fwd out", o1, o2, N * Q, 1e-5);
    float *dy = rnd(N * Q, 1), *d1 = rnd(N * QKV, 1), *d2 = rnd(N * QKV, 1), *s1 = rnd((size_t)T * T, 1), *s2 = rnd((size_t)T * T, 1);
    dec__attention_bwd(d1, s1, dy, a1, qkv, B, T, H, G, D);
    dec__ref_attention_bwd(d2, s2, dy, a1, qkv, B, T, H, G, D);
    close_to("attention_bwd dqkv", d1, d2, N * QKV, 1e-5);
    free(qkv), free(o1), free(o2), free(a1), free(a2), free(dy), free(d1), free(d2), free(s1), free(s2);
}

static void test_rope(size_t N, int T, int heads, int D) {
    dec_config c;
    dec_config_preset(&c, "llama-3.2-1b", NULL); /* llama3 scaling: every band of the rule */
    c.head_dim = D;
    c.rope_orig_ctx = 16;
    float *cs = malloc((size_t)T * D / 2 * sizeof(float)), *sn = malloc((size_t)T * D / 2 * sizeof(float));
    dec__rope_tables(&c, T, cs, sn);
    ZT_CHECK(cs[0] == 1.0f && sn[0] == 0.0f); /* position 0 is the identity */
    const size_t ld = (size_t)heads * D + 3;
    float *x = rnd(N * ld, 1), *y1 = copy(x, N * ld), *y2 = copy(x, N * ld);
    dec__rope_fwd(y1, ld, N, T, heads, D, cs, sn);
    dec__ref_rope_fwd(y2, ld, N, T, heads, D, cs, sn);
    close_to("rope_fwd", y1, y2, N * ld, 0);
    dec__rope_bwd(y1, ld, N, T, heads, D, cs, sn); /* the transpose of a rotation is its inverse */
    dec__ref_rope_bwd(y2, ld, N, T, heads, D, cs, sn);
    close_to("rope_bwd", y1, y2, N * ld, 0);
    close_to("rope_bwd(rope_fwd(x)) = x", y1, x, N * ld, 1e-6);
    free(cs), free(sn), free(x), free(y1), free(y2);
}

static void test_activations(size_t N, int F) {
    float *x = rnd(N * F, 4), *y1 = rnd(N * F, 1), *y2 = rnd(N * F, 1), *d1 = rnd(N * F, 1), *d2 = copy(d1, N * F);
    dec__gelu_fwd(y1, x, N * F);
    dec__ref_gelu_fwd(y2, x, N * F);
    close_to("gelu_fwd", y1, y2, N * F, 1e-6);
    dec__gelu_bwd(d1, x, N * F);
    dec__ref_gelu_bwd(d2, x, N * F);
    /* the fast tanh's 2e-7 error, times the derivative's x (1 - th^2) sqrt(2/pi) (1 + 3a x^2) term */
    close_to("gelu_bwd", d1, d2, N * F, 4e-6);
    float *gu = rnd(N * 2 * F, 4), *h1 = rnd(N * F, 1), *h2 = rnd(N * F, 1), *g1 = rnd(N * 2 * F, 1), *g2 = rnd(N * 2 * F, 1);
    dec__swiglu_fwd(h1, gu, N, F);
    dec__ref_swiglu_fwd(h2, gu, N, F);
    close_to("swiglu_fwd", h1, h2, N * F, 1e-6);
    dec__swiglu_bwd(g1, d1, gu, N, F);
    dec__ref_swiglu_bwd(g2, d1, gu, N, F);
    close_to("swiglu_bwd", g1, g2, N * 2 * F, 1e-6);
    free(x), free(y1), free(y2), free(d1), free(d2), free(gu), free(h1), free(h2), free(g1), free(g2);
}

static void test_crossentropy(size_t rows, int V) {
    int32_t *t = malloc(rows * sizeof *t);
    for (size_t i = 0; i < rows; i++) t[i] = i % 4 == 3 ? -1 : (int32_t)(dec__next(&rng) % (uint64_t)V);
    float *x = rnd(rows * V, 6), *l1 = rnd(rows, 1), *l2 = rnd(rows, 1);
    for (int grad = 0; grad < 2; grad++) {
        float *x1 = copy(x, rows * V), *x2 = copy(x, rows * V);
        const float ds = grad ? 0.25f : 0.0f;
        dec__crossentropy(x1, l1, t, rows, V, ds);
        dec__ref_crossentropy(x2, l2, t, rows, V, ds);
        close_to("crossentropy losses", l1, l2, rows, 1e-6);
        close_to(grad ? "crossentropy gradient" : "crossentropy leaves logits", x1, x2, rows * V, 1e-6);
        for (size_t i = 3; i < rows; i += 4) ZT_CHECK(l1[i] == 0.0f && (!grad || x1[i * V] == 0.0f));
        free(x1), free(x2);
    }
    free(t), free(x), free(l1), free(l2);
}

int main(void) {
    /* small (one thread) and large (OpenMP and multi-task column reductions) */
    test_embed(2, 5, 7, 11);
    test_embed(4, 64, 300, 97);
    test_norms(5, 6);
    test_norms(700, 384);
    test_matmul(7, 5, 3);
    test_matmul(300, 130, 140);
    test_attention(2, 5, 4, 4, 2); /* MHA */
    test_attention(2, 9, 6, 2, 4); /* GQA 3 */
    test_attention(1, 70, 8, 1, 8); /* MQA */
    test_rope(10, 5, 3, 8);
    test_rope(2048, 128, 9, 64);
    test_activations(3, 5);
    test_activations(600, 700);
    test_crossentropy(6, 9);
    test_crossentropy(300, 1200);
    return zt_finish("test_decoder_kernels");
}
