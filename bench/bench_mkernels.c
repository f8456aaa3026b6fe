/* bench/bench_mkernels.c — time of each model kernel (models/kernels), scalar reference against
 * the best impl of this CPU, on the shapes of a training step (512 rows of small / gpt2 / SmolLM2).
 *
 * Usage: bench_mkernels [seconds-per-kernel]. Threads follow OMP_NUM_THREADS. Prints one line per
 * kernel: name, shape, scalar ms, best ms, speed-up, and for attention the GFLOP/s of the best.
 * bench_mkernels window [seconds]: the best impl's attention forward + backward, causal against a
 * sliding window of 512, at T = 1024 .. 16384 (8 heads of 64 on 4 kv heads, B = 1): how the time
 * grows with T (T^2 causal, T * W windowed). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "kernels/kernels.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static float *buf(size_t n, float a) {
    float *p = malloc(sizeof(float) * n);
    if (!p) {
        fprintf(stderr, "bench_mkernels: out of memory\n");
        exit(1);
    }
    unsigned s = 12345;
    for (size_t i = 0; i < n; i++) {
        s = s * 1103515245u + 12345u;
        p[i] = ((float)(s >> 8) / 16777216.0f * 2.0f - 1.0f) * a;
    }
    return p;
}

typedef struct ctx {
    size_t n, rows;
    int C, V;
    float *x, *y, *dy, *w, *b, *st, *st2, *dw, *db;
    int32_t *tg;
    mk_attn at;
    float *q, *out, *lse, *dq;
    mk_rope rope;
} ctx;

typedef void (*kern)(ctx *c, zero_impl impl);

static void k_gelu_fb(ctx *c, zero_impl i) {
    mk_gelu_fwd(c->y, c->x, c->n, i);
    mk_gelu_bwd(c->dw, c->dy, c->x, c->n, i);
}
static void k_swiglu_fb(ctx *c, zero_impl i) {
    const size_t F = (size_t)c->C;
    mk_swiglu_fwd(c->y, F, c->x, c->x + F, 2 * F, c->rows, F, i);
    mk_swiglu_bwd(c->dw, c->dw + F, c->dy, F, c->x, c->x + F, 2 * F, c->rows, F, i);
}
static void k_ln_fb(ctx *c, zero_impl i) {
    mk_layernorm_fwd(c->y, c->st, c->st2, c->x, c->w, c->b, c->rows, c->C, c->C, c->C, 1e-5f, i);
    mk_layernorm_bwd(c->dw, c->db, c->b, c->dy, c->x, c->w, c->st, c->st2, c->rows, c->C, c->C, c->C, 1, i);
}
static void k_rms_fb(ctx *c, zero_impl i) {
    mk_rmsnorm_fwd(c->y, c->st, c->x, c->w, c->rows, c->C, c->C, c->C, 1e-5f, i);
    mk_rmsnorm_bwd(c->dw, c->db, c->dy, c->x, c->w, c->st, c->rows, c->C, c->C, c->C, 1, i);
}
static void k_xent(ctx *c, zero_impl i) {
    memcpy(c->y, c->x, sizeof(float) * c->rows * c->V);
    mk_cross_entropy(c->y, c->st, c->tg, c->rows, c->V, 1.0f / 512, i);
}
static void k_colsum(ctx *c, zero_impl i) { mk_colsum(c->db, c->x, c->rows, (size_t)c->C, (size_t)c->C, i); }
static void k_sumsq(ctx *c, zero_impl i) {
    double s;
    mk_sum_squares(c->x, c->n, &s, i);
}
static void k_rope(ctx *c, zero_impl i) {
    mk_rope_fwd(&c->rope, c->x, (size_t)c->C, c->rows, 128, c->C / 64, 64, NULL, i);
}
static void k_att_f(ctx *c, zero_impl i) {
    const mk_attn *a = &c->at;
    const size_t hd = (size_t)a->n_head * a->head_dim;
    mk_attention_fwd(a, c->out, c->lse, c->q, c->q + hd, c->q + 2 * hd, i);
}
static void k_att_b(ctx *c, zero_impl i) {
    const mk_attn *a = &c->at;
    const size_t hd = (size_t)a->n_head * a->head_dim;
    mk_attention_bwd(a, c->dq, c->dq + hd, c->dq + 2 * hd, c->out, c->q, c->q + hd, c->q + 2 * hd, c->out,
                     c->lse, i);
}

static double timeit(kern k, ctx *c, zero_impl impl, double secs) {
    k(c, impl);
    double best = 1e30, spent = 0.0;
    int reps = 0;
    while (spent < secs || reps < 3) {
        const double t0 = now();
        k(c, impl);
        const double t = now() - t0;
        best = t < best ? t : best;
        spent += t, reps++;
    }
    return best;
}

static void run(const char *name, const char *shape, kern k, ctx *c, double secs, double flops) {
    const double ts = timeit(k, c, ZERO_IMPL_SCALAR, secs), tb = timeit(k, c, ZERO_IMPL_AUTO, secs);
    printf("%-12s %-28s scalar %9.3f ms  %s %8.3f ms  x%.1f", name, shape, ts * 1e3,
           zero_impl_name(zero_impl_best()), tb * 1e3, ts / tb);
    if (flops > 0) printf("  %.1f GFLOP/s", flops / tb * 1e-9);
    printf("\n");
}

static void k_att_fb(ctx *c, zero_impl i) {
    k_att_f(c, i);
    k_att_b(c, i);
}

/* Causal against windowed attention over T: time per call, and per query-key pair computed. */
static int bench_window(double secs) {
    ctx c = {0};
    const int H = 8, G = 4, hd = 64, W = 512;
    printf("attention forward + backward, %s, B1 H%d/%d hd%d: best of >= %.2f s each\n",
           zero_impl_name(zero_impl_best()), H, G, hd, secs);
    printf("%6s %12s %14s %8s %16s\n", "T", "causal ms", "window 512 ms", "ratio", "ns/(T*W) window");
    for (int T = 1024; T <= 16384; T *= 2) {
        const size_t ld = (size_t)(H + 2 * G) * hd, N = (size_t)T;
        c.at = (mk_attn){.B = 1, .T = T, .n_head = H, .n_kv_head = G, .head_dim = hd, .ld_q = ld, .ld_k = ld,
                         .ld_v = ld, .ld_o = (size_t)H * hd, .scale = 1.0f / 8.0f};
        c.q = buf(N * ld, 1.0f), c.dq = buf(N * ld, 1.0f), c.out = buf(N * H * hd, 1.0f), c.lse = buf((size_t)H * T, 1.0f);
        const double tc = T <= 8192 ? timeit(k_att_fb, &c, ZERO_IMPL_AUTO, secs) : NAN;
        c.at.window = W;
        const double tw = timeit(k_att_fb, &c, ZERO_IMPL_AUTO, secs);
        printf("%6d %12.1f %14.1f %8.2f %16.3f\n", T, tc * 1e3, tw * 1e3, tc / tw, tw * 1e9 / ((double)T * W));
        free(c.q), free(c.dq), free(c.out), free(c.lse);
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "window")) return bench_window(argc > 2 ? atof(argv[2]) : 0.3);
    const double secs = argc > 1 ? atof(argv[1]) : 0.3;
    const size_t rows = 512;
    ctx c = {0};
    c.rows = rows;
    /* element-wise at gpt2's MLP width 4C = 3072 */
    c.C = 3072, c.n = rows * 3072;
    c.x = buf(2 * c.n, 4.0f), c.y = buf(2 * c.n, 1.0f), c.dy = buf(2 * c.n, 1.0f), c.dw = buf(2 * c.n, 1.0f);
    c.w = buf(3072, 1.0f), c.b = buf(3072, 1.0f), c.db = buf(3072, 1.0f);
    c.st = buf(rows * 12, 1.0f), c.st2 = buf(rows * 12, 1.0f);
    run("gelu f+b", "512 x 3072", k_gelu_fb, &c, secs, 0);
    c.C = 1536;
    run("swiglu f+b", "512 x 1536 (fused gate_up)", k_swiglu_fb, &c, secs, 0);
    c.C = 768;
    run("layernorm f+b", "512 x 768", k_ln_fb, &c, secs, 0);
    run("rmsnorm f+b", "512 x 768", k_rms_fb, &c, secs, 0);
    c.C = 64, c.rows = rows * 12;
    run("rmsnorm f+b", "6144 x 64 (q norm per head)", k_rms_fb, &c, secs, 0);
    c.rows = rows, c.C = 3072;
    run("colsum", "512 x 3072 (bias grad)", k_colsum, &c, secs, 0);
    c.n = rows * 3072 * 2;
    run("sum_squares", "3.1M (gradient norm)", k_sumsq, &c, secs, 0);
    c.n = rows * 3072;
    float *cs = buf(1024 * 32, 1.0f), *sn = buf(1024 * 32, 1.0f);
    mk_rope_freq f = {.theta = 10000.0};
    mk_rope_table(cs, sn, 1024, 64, &f);
    c.rope = (mk_rope){cs, sn, 1024, 64};
    c.C = 768;
    run("rope", "512 tokens x 12 heads x 64", k_rope, &c, secs, 0);
    /* cross-entropy: gpt2's head chunk (166 rows of 50257) */
    c.rows = 166, c.V = 50257;
    free(c.x), free(c.y);
    c.x = buf((size_t)166 * 50257, 5.0f), c.y = buf((size_t)166 * 50257, 1.0f);
    c.tg = malloc(sizeof(int32_t) * 166);
    for (int i = 0; i < 166; i++) c.tg[i] = (i * 7919) % 50257;
    run("xent f+b", "166 x 50257", k_xent, &c, secs, 0);
    /* attention: gpt2 (12 heads of 64) at B = 4, T = 128 and B = 1, T = 1024, fused qkv */
    static const int shapes[][4] = {{4, 128, 12, 64}, {1, 1024, 12, 64}, {4, 128, 9, 64}};
    for (int s = 0; s < 3; s++) {
        const int B = shapes[s][0], T = shapes[s][1], H = shapes[s][2], hd = shapes[s][3];
        const int G = s == 2 ? 3 : H;
        const size_t ld = (size_t)3 * H * hd, N = (size_t)B * T;
        c.at = (mk_attn){.B = B, .T = T, .n_head = H, .n_kv_head = G, .head_dim = hd,
                         .ld_q = ld, .ld_k = ld, .ld_v = ld, .ld_o = (size_t)H * hd, .scale = 1.0f / 8.0f};
        c.q = buf(N * ld, 1.0f), c.dq = buf(N * ld, 1.0f), c.out = buf(N * H * hd, 1.0f), c.lse = buf((size_t)B * H * T, 1.0f);
        const double fl = 2.0 * B * H * (double)T * (T + 1) / 2.0 * hd * 2.0; /* QK^T and PV, causal half */
        char sh[64];
        snprintf(sh, sizeof sh, "B%d T%d H%d/%d hd%d", B, T, H, G, hd);
        run("attn fwd", sh, k_att_f, &c, secs, fl);
        run("attn bwd", sh, k_att_b, &c, secs, fl * 2.5);
        free(c.q), free(c.dq), free(c.out), free(c.lse);
    }
    return 0;
}
