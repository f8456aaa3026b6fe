/* The decoder's backward (Llama family and GPT-2) checked without PyTorch, element by element:
 * every gradient element of very small models against central finite differences of the loss,
 * with masked targets — one with every option (GQA 2, explicit head_dim, q/k RMSNorm, q/k/v/o and
 * MLP biases, llama3 RoPE, untied head), one tied with MQA and linear RoPE, and GPT-2; loss
 * scaling exact; checkpointing bitwise. (The fixtures' gradient norms against PyTorch:
 * test_decoder_hf.) */
#include <stdint.h>

#include "decoder/decoder.h"
#include "harness.h"

static uint64_t rng_state = 4242;
static double randn(void) {
    /* the test's own generator (xorshift64*), independent of the model's */
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
        u[i] = ((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
    }
    return sqrt(-2.0 * log(1.0 - u[0])) * cos(6.283185307179586 * u[1]);
}

typedef struct net {
    dec_config cfg;
    uint64_t P;
    float *flat, *gflat;
    float *params[16], *grads[16];
} net;

static void net_init(net *n, const dec_config *cfg, double noise) {
    n->cfg = *cfg;
    n->P = dec_num_params(cfg);
    n->flat = calloc(n->P, 4);
    n->gflat = calloc(n->P, 4);
    for (int u = 0; u < dec_num_units(cfg); u++) {
        n->params[u] = n->flat + dec_unit_offset(cfg, u);
        n->grads[u] = n->gflat + dec_unit_offset(cfg, u);
        dec_init_unit(cfg, u, 11, n->params[u]);
    }
    /* noise on every parameter (gains and biases too): every path of the backward matters */
    for (uint64_t i = 0; i < n->P; i++) n->flat[i] += (float)(noise * randn());
}

static void net_free(net *n) {
    free(n->flat);
    free(n->gflat);
}

/* Every element: |fd - g| <= 2e-3 * max|g| of its tensor + 2e-3 |g| + 2e-4 (as test_gpt2_grad). */
static void finite_differences(const char *what, const dec_config *cfg) {
    const int B = 2, T = 5;
    net n;
    net_init(&n, cfg, 0.3);
    int32_t tok[10], tgt[10];
    for (int i = 0; i < 10; i++) {
        tok[i] = (int32_t)(fabs(randn()) * 1e6) % cfg->vocab;
        tgt[i] = i % 4 == 1 ? -1 : (int32_t)(fabs(randn()) * 1e6) % cfg->vocab; /* masked targets */
    }
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, cfg, B, T, 0, NULL));
    if (!m) return;
    float loss = 0;
    ZT_OK(dec_forward_backward(m, (const float *const *)n.params, n.grads, tok, tgt, B, T, 1.0f, 0, &loss, NULL));
    const float h = 3e-3f;
    double worst = 0;
    int checked = 0;
    for (int i = 0; i < dec_num_tensors(cfg); i++) {
        dec_param_desc d;
        dec_tensor_desc(cfg, i, &d);
        float *p = n.params[d.unit] + d.offset;
        const float *g = n.grads[d.unit] + d.offset;
        double gmax = 0;
        for (uint64_t k = 0; k < d.numel; k++) gmax = fmax(gmax, fabs(g[k]));
        int bad = 0;
        for (uint64_t k = 0; k < d.numel; k++) {
            const float keep = p[k];
            float lp = 0, lm = 0;
            p[k] = keep + h;
            dec_forward(m, (const float *const *)n.params, tok, tgt, B, T, 0, &lp, NULL);
            p[k] = keep - h;
            dec_forward(m, (const float *const *)n.params, tok, tgt, B, T, 0, &lm, NULL);
            p[k] = keep;
            const double fd = ((double)lp - lm) / (2.0 * h);
            const double err = fabs(fd - g[k]), tol = 2e-3 * gmax + 2e-3 * fabs(g[k]) + 2e-4;
            worst = fmax(worst, err / (gmax + 1e-12));
            checked++;
            if (err > tol && bad++ < 3)
                ZT_FAIL("%s: %s[%llu]: backward %.6g, finite difference %.6g", what, d.name, (unsigned long long)k, g[k], fd);
            zt_checks++;
        }
        /* rows of the embedding for tokens that never occur get none; every other tensor does */
        if (!strstr(d.name, "embed_tokens")) ZT_CHECKF(gmax > 1e-4, "%s: %s: gradient is all zero", what, d.name);
    }
    printf("%s: %d elements, worst |fd - g| / max|g| = %.3g\n", what, checked, worst);

    /* loss scale 8: every gradient exactly 8 times; checkpointing: bitwise */
    float *g8 = calloc(n.P, 4), *gc = calloc(n.P, 4), *pg[16], *pc[16];
    for (int u = 0; u < dec_num_units(cfg); u++)
        pg[u] = g8 + dec_unit_offset(cfg, u), pc[u] = gc + dec_unit_offset(cfg, u);
    float l8 = 0, lc = 0;
    ZT_OK(dec_forward_backward(m, (const float *const *)n.params, pg, tok, tgt, B, T, 8.0f, 0, &l8, NULL));
    uint64_t exact = 0;
    for (uint64_t i = 0; i < n.P; i++) exact += g8[i] == 8.0f * n.gflat[i];
    ZT_CHECKF(exact == n.P && l8 == loss, "%s: loss scale 8: %llu of %llu gradients exact", what, (unsigned long long)exact,
              (unsigned long long)n.P);
    dec_model *mc = NULL;
    ZT_OK(dec_create(&mc, cfg, B, T, 1, NULL));
    if (mc) {
        ZT_OK(dec_forward_backward(mc, (const float *const *)n.params, pc, tok, tgt, B, T, 1.0f, 0, &lc, NULL));
        ZT_CHECKF(lc == loss && !memcmp(gc, n.gflat, n.P * 4), "%s: checkpointing changes the result", what);
    }
    dec_free(mc);
    free(g8), free(gc);
    dec_free(m);
    net_free(&n);
}

int main(void) {
    dec_config c;
    dec_config_preset(&c, "qwen3-8b", NULL);
    c.n_layer = 2, c.n_embd = 8, c.n_head = 4, c.n_kv_head = 2, c.head_dim = 4, c.n_inner = 6, c.vocab = 11;
    c.n_ctx = 16, c.qkv_bias = c.o_bias = c.mlp_bias = 1;
    c.rope_type = DEC_ROPE_LLAMA3, c.rope_factor = 8, c.rope_low_freq = 1, c.rope_high_freq = 4, c.rope_orig_ctx = 4;
    c.rope_theta = 100.0;
    c.arch = DEC_ARCH_LLAMA; /* a Llama with every option, q/k norm included */
    ZT_OK(dec_config_check(&c, NULL));
    finite_differences("every option", &c);
    dec_config_preset(&c, "smollm2-135m", NULL);
    c.n_layer = 2, c.n_embd = 8, c.n_head = 2, c.n_kv_head = 1, c.head_dim = 4, c.n_inner = 12, c.vocab = 13, c.n_ctx = 16;
    c.rope_type = DEC_ROPE_LINEAR, c.rope_factor = 2;
    ZT_OK(dec_config_check(&c, NULL));
    finite_differences("tied, MQA, linear RoPE", &c);
    dec_config_gpt2(&c, 2, 8, 2, 8, 11); /* GPT-2: LayerNorm, fused qkv with biases, GELU, learned positions */
    finite_differences("gpt2", &c);
    return zt_finish("test_decoder_grad");
}
