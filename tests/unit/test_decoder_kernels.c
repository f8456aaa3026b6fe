/* The decoder on its model kernels, end to end: the loss, logits and every gradient with each
 * implementation (ZERO_IMPL_SCALAR: every kernel's scalar reference, products in double) against
 * the best one; bf16 products (forced) against fp32 within the documented tolerance; the bf16
 * request's fallback where the CPU has no bf16 arithmetic (bitwise the fp32 products of the
 * bf16-valued parameters: convert, then sgemm); checkpointing bitwise under bf16 too. */
#include <stdint.h>

#include "decoder/decoder_internal.h"
#include "harness.h"

static uint64_t rng_state = 777;
static double urand(void) {
    rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
    return ((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
}

typedef struct run {
    float loss, *logits, *g;
} run;

typedef struct net {
    dec_config cfg;
    int B, T;
    uint64_t P;
    float *flat;
    const float *params[16];
    int32_t *tok, *tgt;
} net;

static void net_init(net *n, const dec_config *cfg, int B, int T) {
    n->cfg = *cfg, n->B = B, n->T = T;
    n->P = dec_num_params(cfg);
    n->flat = calloc(n->P, 4);
    for (int u = 0; u < dec_num_units(cfg); u++) {
        n->params[u] = n->flat + dec_unit_offset(cfg, u);
        dec_init_unit(cfg, u, 5, n->flat + dec_unit_offset(cfg, u));
    }
    /* noise on every parameter, then bf16 values: what a bf16 engine hands the pass */
    for (uint64_t i = 0; i < n->P; i++)
        n->flat[i] = zero_bf16_to_fp32(zero_fp32_to_bf16(n->flat[i] + (float)(0.2 * (urand() - 0.5))));
    const size_t N = (size_t)B * T;
    n->tok = malloc(N * 4), n->tgt = malloc(N * 4);
    for (size_t i = 0; i < N; i++) {
        n->tok[i] = (int32_t)(urand() * cfg->vocab);
        n->tgt[i] = i % 7 == 3 ? -1 : (int32_t)(urand() * cfg->vocab);
    }
}

static void net_free(net *n) { free(n->flat), free(n->tok), free(n->tgt); }

/* One forward + backward with the given kernels and product precision; head_rows > 0: the LM
 * head's logits that many rows at a time (several chunks, the last ragged). */
static run do_run_rows(const net *n, zero_impl impl, int prec, int ckpt, size_t head_rows) {
    run r = {0, calloc((size_t)n->B * n->T * n->cfg.vocab, 4), calloc(n->P, 4)};
    float *grads[16];
    for (int u = 0; u < dec_num_units(&n->cfg); u++) grads[u] = r.g + dec_unit_offset(&n->cfg, u);
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &n->cfg, n->B, n->T, ckpt, NULL));
    if (!m) return r;
    ZT_OK(dec__set_impl(m, impl));
    if (head_rows) ZT_OK(dec__set_head_rows(m, head_rows));
    if (prec >= 0) dec__set_matmul_prec(m, (mk_prec)prec);
    else ZT_EQ_INT(dec_set_matmul_dtype(m, ZERO_DTYPE_BF16), mk_gemm_bf16_native() ? ZERO_DTYPE_BF16 : ZERO_DTYPE_FP32);
    ZT_OK(dec_forward_backward(m, n->params, grads, n->tok, n->tgt, n->B, n->T, 1.0f, 0, &r.loss, r.logits));
    dec_free(m);
    return r;
}

static run do_run(const net *n, zero_impl impl, int prec, int ckpt) { return do_run_rows(n, impl, prec, ckpt, 0); }

static void run_free(run *r) { free(r->logits), free(r->g); }

/* loss within rl relative; logits within rl * max|logit|; each tensor's gradient within
 * rg * max|g| element-wise and rg relative in L2. Prints the worst figures. */
static void compare(const char *what, const net *n, const run *a, const run *ref, double rl, double rg) {
    const double dl = fabs((double)a->loss - ref->loss) / fabs(ref->loss);
    double lmax = 0.0, ldiff = 0.0, worst_el = 0.0, worst_l2 = 0.0;
    const size_t nl = (size_t)n->B * n->T * n->cfg.vocab;
    for (size_t i = 0; i < nl; i++) lmax = fmax(lmax, fabs(ref->logits[i])), ldiff = fmax(ldiff, fabs(a->logits[i] - ref->logits[i]));
    char worst_name[32] = "";
    for (int t = 0; t < dec_num_tensors(&n->cfg); t++) {
        dec_param_desc d;
        dec_tensor_desc(&n->cfg, t, &d);
        const uint64_t o = dec_unit_offset(&n->cfg, d.unit) + d.offset;
        double gmax = 0.0, e = 0.0, s2 = 0.0, d2 = 0.0;
        for (uint64_t k = 0; k < d.numel; k++) {
            const double g = ref->g[o + k], x = a->g[o + k];
            gmax = fmax(gmax, fabs(g)), e = fmax(e, fabs(x - g)), s2 += g * g, d2 += (x - g) * (x - g);
        }
        const double el = gmax > 0 ? e / gmax : e, l2 = s2 > 0 ? sqrt(d2 / s2) : sqrt(d2);
        if (el > worst_el) worst_el = el, dec_unit_name(&n->cfg, d.unit, worst_name, sizeof worst_name);
        worst_l2 = fmax(worst_l2, l2);
        ZT_CHECKF(el <= rg && l2 <= rg, "%s: %s: max |diff| %.3g of max |g| %.3g, relative L2 %.3g (bound %.g)", what,
                  d.name, e, gmax, l2, rg);
    }
    printf("  %-34s loss %.2e, logits %.2e of %.3g, gradients %.2e (element/max, %s), %.2e (L2)\n", what, dl,
           ldiff / lmax, lmax, worst_el, worst_name, worst_l2);
    ZT_CHECKF(dl <= rl, "%s: loss %.9g vs %.9g", what, a->loss, ref->loss);
    ZT_CHECKF(ldiff <= rl * lmax, "%s: logits differ by %.3g (max |logit| %.3g)", what, ldiff, lmax);
}

static int same(const net *n, const run *a, const run *b) {
    return a->loss == b->loss && !memcmp(a->g, b->g, n->P * 4) &&
           !memcmp(a->logits, b->logits, (size_t)n->B * n->T * n->cfg.vocab * 4);
}

static void check_model(const char *what, const dec_config *cfg, int B, int T) {
    printf("%s (B %d, T %d):\n", what, B, T);
    net n;
    net_init(&n, cfg, B, T);
    run best = do_run(&n, ZERO_IMPL_AUTO, MK_PREC_FP32, 0);
    /* every impl against the references (products in double) */
    run ref = do_run(&n, ZERO_IMPL_SCALAR, MK_PREC_FP32, 0);
    compare("best impl vs scalar references", &n, &best, &ref, 5e-6, 2e-5);
    static const zero_impl vec[] = {ZERO_IMPL_AVX2, ZERO_IMPL_AVX512};
    for (int v = 0; v < 2; v++) {
        if (!zero_impl_available(vec[v])) {
            printf("  SKIP %s: this CPU cannot run it\n", zero_impl_name(vec[v]));
            continue;
        }
        run r = do_run(&n, vec[v], MK_PREC_FP32, 0);
        compare(zero_impl_name(vec[v]), &n, &r, &ref, 5e-6, 2e-5);
        run_free(&r);
    }
    /* bf16 products, forced (on any CPU: the convert path where there is no native one) */
    run b16 = do_run(&n, ZERO_IMPL_AUTO, MK_PREC_BF16, 0);
    compare("bf16 products vs fp32", &n, &b16, &best, 1e-2, 3e-2);
    run b16c = do_run(&n, ZERO_IMPL_AUTO, MK_PREC_BF16, 1);
    ZT_CHECKF(same(&n, &b16, &b16c), "%s: bf16 with checkpointing differs from bf16 without", what);
    /* asked for bf16: native where the CPU has it, else the fp32 products, bitwise */
    run ask = do_run(&n, ZERO_IMPL_AUTO, -1, 0);
    if (mk_gemm_bf16_native()) {
        ZT_CHECKF(same(&n, &ask, &b16), "%s: bf16 asked on a native CPU differs from bf16 forced", what);
    } else {
        ZT_CHECKF(same(&n, &ask, &best), "%s: bf16 asked without native bf16 is not the fp32 result", what);
        printf("  bf16 asked: no native bf16 here (%s): the fp32 products, bitwise\n", mk_gemm_bf16_path_name());
    }
    /* the LM head in chunks of 7 rows, the last ragged: fp32 against the references; bf16 (its
     * weight rounded once for every chunk and both directions, each chunk's x once for both)
     * against bf16 in one chunk: the chunks' products differ in the last fp32 bit, which a later
     * rounding to bf16 can turn into one bf16 step (2^-8) of a gradient, far below a wrong or
     * stale operand's error */
    const size_t N = (size_t)B * T;
    run c16 = do_run_rows(&n, ZERO_IMPL_AUTO, MK_PREC_BF16, 0, 7), c32 = do_run_rows(&n, ZERO_IMPL_AUTO, MK_PREC_FP32, 0, 7);
    compare("fp32, head in 7-row chunks", &n, &c32, &ref, 5e-6, 2e-5);
    compare("bf16, head in 7-row chunks vs 1", &n, &c16, &b16, 1e-6, 4e-3);
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &n.cfg, B, T, 0, NULL));
    if (m) {
        ZT_EQ_INT(dec__set_head_rows(m, 0), ZERO_ERR_INVALID_ARG);
        ZT_EQ_INT(dec__set_head_rows(m, N + 1), ZERO_ERR_INVALID_ARG);
        ZT_OK(dec__set_head_rows(m, N));
    }
    dec_free(m);
    run_free(&best), run_free(&ref), run_free(&b16), run_free(&b16c), run_free(&ask);
    run_free(&c16), run_free(&c32);
    net_free(&n);
}

/* A long sequence: the activations are linear in T (no B*H*T^2 term), equal to what the model
 * allocates, far below the T^2 probabilities earlier versions kept; the pass runs and its loss
 * is that of near-uniform logits. */
static void long_sequence(void) {
    dec_config c;
    dec_config_preset(&c, "smollm2-135m", NULL);
    c.n_layer = 2, c.n_embd = 32, c.n_head = 4, c.n_kv_head = 2, c.head_dim = 8, c.n_inner = 32, c.vocab = 64;
    c.n_ctx = 4096;
    ZT_OK(dec_config_check(&c, NULL));
    const int T = 4096;
    const uint64_t a1 = dec_activation_bytes(&c, 1, T / 4, 0), a2 = dec_activation_bytes(&c, 1, T / 2, 0), a4 = dec_activation_bytes(&c, 1, T, 0);
    ZT_CHECKF(a4 - a2 == 2 * (a2 - a1), "activations not linear in T: %llu, %llu, %llu", (unsigned long long)a1,
              (unsigned long long)a2, (unsigned long long)a4);
    const uint64_t t2 = (uint64_t)c.n_layer * c.n_head * T * (uint64_t)T * 4; /* the probabilities alone */
    ZT_CHECKF(a4 * 8 < t2, "activations %llu bytes: expected far below the %llu of T^2 probabilities",
              (unsigned long long)a4, (unsigned long long)t2);
    net n;
    net_init(&n, &c, 1, T);
    for (uint64_t i = 0; i < n.P; i++) n.flat[i] *= 0.1f; /* small weights: near-uniform logits */
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &c, 1, T, 0, NULL));
    if (m) {
        ZT_EQ_INT(dec_activation_bytes_allocated(m), a4);
        float *g = calloc(n.P, 4), *grads[16], loss = 0;
        for (int u = 0; u < dec_num_units(&c); u++) grads[u] = g + dec_unit_offset(&c, u);
        ZT_OK(dec_forward_backward(m, n.params, grads, n.tok, n.tgt, 1, T, 1.0f, 0, &loss, NULL));
        double s2 = 0.0;
        for (uint64_t i = 0; i < n.P; i++) s2 += (double)g[i] * g[i];
        printf("long sequence T %d: activations %.1f MiB (the T^2 probabilities alone would be %.0f MiB), loss %.4f "
               "(ln V %.4f), gradient norm %.3g\n", T, a4 / 1048576.0, t2 / 1048576.0, loss, log((double)c.vocab), sqrt(s2));
        ZT_CHECKF(fabs(loss - log((double)c.vocab)) < 0.05 && isfinite(s2) && s2 > 0, "long sequence: loss %.6g, |g|^2 %.3g",
                  loss, s2);
        free(g);
    }
    dec_free(m);
    net_free(&n);
}

int main(void) {
    dec_config c;
    dec_config_gpt2(&c, 2, 64, 4, 80, 97);
    ZT_OK(dec_config_check(&c, NULL));
    check_model("gpt2", &c, 3, 70); /* 70: two attention blocks, the second ragged */
    dec_config_preset(&c, "qwen3-8b", NULL);
    c.n_layer = 2, c.n_embd = 48, c.n_head = 4, c.n_kv_head = 2, c.head_dim = 16, c.n_inner = 40, c.vocab = 61;
    c.n_ctx = 80, c.qkv_bias = c.o_bias = c.mlp_bias = 1;
    c.rope_type = DEC_ROPE_LLAMA3, c.rope_factor = 8, c.rope_low_freq = 1, c.rope_high_freq = 4, c.rope_orig_ctx = 16;
    c.rope_theta = 1000.0;
    c.arch = DEC_ARCH_LLAMA; /* every option, q/k norm included */
    ZT_OK(dec_config_check(&c, NULL));
    check_model("llama, every option", &c, 2, 67);
    dec_config_preset(&c, "smollm2-135m", NULL);
    c.n_layer = 2, c.n_embd = 48, c.n_head = 6, c.n_kv_head = 1, c.head_dim = 8, c.n_inner = 64, c.vocab = 53, c.n_ctx = 80;
    ZT_OK(dec_config_check(&c, NULL));
    check_model("llama, tied, MQA", &c, 2, 65);
    /* Mistral's sliding window of 5 on every layer at T 140: the third query block skips the
     * first key block, the window's start falls inside the second */
    c.arch = DEC_ARCH_MISTRAL, c.sliding_window = 5, c.n_ctx = 160;
    ZT_OK(dec_config_check(&c, NULL));
    check_model("mistral, window 5", &c, 1, 140);
    long_sequence();
    return zt_finish("test_decoder_kernels");
}
