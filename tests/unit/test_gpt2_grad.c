/* The GPT-2 backward checked without PyTorch: positions past the sequence get no gradient;
 * activation checkpointing bitwise equal to the plain run; loss scaling exact; accumulation into
 * non-zero buffers; activation accounting. (Finite differences: test_decoder_grad.c.) */
#include <stdint.h>

#include "decoder/decoder.h"
#include "harness.h"

static uint64_t rng_state = 42;
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
    float *params[64], *grads[64];
} net;

static void net_init(net *n, const dec_config *cfg, uint64_t seed, double noise) {
    n->cfg = *cfg;
    n->P = dec_num_params(cfg);
    n->flat = calloc(n->P, 4);
    n->gflat = calloc(n->P, 4);
    for (int u = 0; u < dec_num_units(cfg); u++) {
        n->params[u] = n->flat + dec_unit_offset(cfg, u);
        n->grads[u] = n->gflat + dec_unit_offset(cfg, u);
        dec_init_unit(cfg, u, seed, n->params[u]);
    }
    /* Noise on every parameter (LayerNorm gains and biases too) makes every path of the
     * backward matter: at GPT-2's init the attention is nearly uniform and biases are zero. */
    for (uint64_t i = 0; i < n->P; i++) n->flat[i] += (float)(noise * randn());
}

static void net_free(net *n) {
    free(n->flat);
    free(n->gflat);
}

static void random_tokens(int32_t *t, size_t n, int V) {
    for (size_t i = 0; i < n; i++) t[i] = (int32_t)(fabs(randn()) * 1e6) % V;
}

/* Every element: |fd - g| <= 2e-3 * max|g| of its tensor + 2e-3 |g| + 2e-4. A wrong term in the
 * backward is off by O(|g|), far above these fp32 finite-difference errors. */
/* Positions past the sequence get no gradient in GPT-2's learned position table (the finite
 * differences of every GPT-2 tensor are in test_decoder_grad.c, with the other architectures). */
static void test_unused_positions(void) {
    dec_config cfg;
    dec_config_gpt2(&cfg, 2, 8, 2, 8, 11);
    const int B = 2, T = 5;
    net n;
    net_init(&n, &cfg, 7, 0.3);
    int32_t tok[10], tgt[10];
    random_tokens(tok, 10, cfg.vocab);
    random_tokens(tgt, 10, cfg.vocab);
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &cfg, B, T, 0, NULL));
    if (!m) return;
    float loss = 0;
    ZT_OK(dec_forward_backward(m, (const float *const *)n.params, n.grads, tok, tgt, B, T, 1.0f, 0, &loss, NULL));
    const float *dwpe = n.grads[0] + (size_t)cfg.vocab * cfg.n_embd;
    double used = 0;
    for (int k = 0; k < T * cfg.n_embd; k++) used = fmax(used, fabs(dwpe[k]));
    ZT_CHECKF(used > 1e-4, "wpe.weight: the rows of the positions used get no gradient");
    for (int k = T * cfg.n_embd; k < cfg.n_ctx * cfg.n_embd; k++) ZT_CHECK(dwpe[k] == 0.0f);
    dec_free(m);
    net_free(&n);
}

/* The same micro-batch with and without checkpointing: the loss and every gradient bitwise
 * equal; and the activation memory the model reports equals the formula and shrinks. */
static void test_checkpointing(void) {
    dec_config cfg;
    ZT_OK(dec_config_preset(&cfg, "tiny", NULL));
    const int B = 3, T = 64;
    net a, b;
    net_init(&a, &cfg, 11, 0.0);
    net_init(&b, &cfg, 11, 0.0);
    int32_t tok[3 * 64], tgt[3 * 64];
    random_tokens(tok, (size_t)B * T, cfg.vocab);
    random_tokens(tgt, (size_t)B * T, cfg.vocab);
    dec_model *plain = NULL, *ckpt = NULL;
    ZT_OK(dec_create(&plain, &cfg, B, T, 0, NULL));
    ZT_OK(dec_create(&ckpt, &cfg, B, T, 1, NULL));
    if (!plain || !ckpt) return;
    ZT_EQ_INT(dec_activation_bytes_allocated(plain), dec_activation_bytes(&cfg, B, T, 0));
    ZT_EQ_INT(dec_activation_bytes_allocated(ckpt), dec_activation_bytes(&cfg, B, T, 1));
    ZT_CHECK(dec_activation_bytes(&cfg, B, T, 1) < dec_activation_bytes(&cfg, B, T, 0));
    /* two passes (T = 64, then a shorter T = 37) so both start from dirty buffers */
    const int Ts[2] = {64, 37};
    for (int r = 0; r < 2; r++) {
        float la = 0, lb = 0;
        ZT_OK(dec_forward_backward(plain, (const float *const *)a.params, a.grads, tok, tgt, B, Ts[r], 1.0f, 0, &la, NULL));
        ZT_OK(dec_forward_backward(ckpt, (const float *const *)b.params, b.grads, tok, tgt, B, Ts[r], 1.0f, 0, &lb, NULL));
        ZT_CHECKF(!memcmp(&la, &lb, 4), "loss %.9g vs checkpointed %.9g", la, lb);
        ZT_CHECKF(!memcmp(a.gflat, b.gflat, a.P * 4), "gradients differ with checkpointing (T=%d)", Ts[r]);
    }
    zero_mem_stats s;
    dec_mem_stats(ckpt, &s);
    ZT_EQ_INT(s.current[ZERO_MEM_BUFFERS], dec_activation_bytes(&cfg, B, T, 1));
    dec_config g2;
    dec_config_preset(&g2, "gpt2", NULL);
    printf("activations tiny B=%d T=%d: %.2f MiB plain, %.2f MiB checkpointed; gpt2 B=4 T=1024: "
           "%.0f MiB plain, %.0f MiB checkpointed\n", B, T,
           dec_activation_bytes(&cfg, B, T, 0) / 1048576.0, dec_activation_bytes(&cfg, B, T, 1) / 1048576.0,
           dec_activation_bytes(&g2, 4, 1024, 0) / 1048576.0, dec_activation_bytes(&g2, 4, 1024, 1) / 1048576.0);
    dec_free(plain);
    dec_free(ckpt);
    net_free(&a);
    net_free(&b);
}

/* Loss scale s multiplies every gradient by s exactly (a power of two); a second call adds a
 * second copy of the gradients to the buffers (accumulation, never overwrite); forward alone
 * gives the same loss and logits as forward+backward. */
static void test_scale_accumulate(void) {
    dec_config cfg;
    ZT_OK(dec_config_preset(&cfg, "tiny", NULL));
    const int B = 2, T = 32;
    net a, b;
    net_init(&a, &cfg, 5, 0.05);
    net_init(&b, &cfg, 5, 0.0);
    memcpy(b.flat, a.flat, a.P * 4);
    int32_t tok[64], tgt[64];
    random_tokens(tok, 64, cfg.vocab);
    random_tokens(tgt, 64, cfg.vocab);
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &cfg, B, T, 0, NULL));
    if (!m) return;
    float la = 0, lb = 0, lf = 0;
    float *lg1 = malloc(sizeof(float) * B * T * cfg.vocab), *lg2 = malloc(sizeof(float) * B * T * cfg.vocab);
    ZT_OK(dec_forward_backward(m, (const float *const *)a.params, a.grads, tok, tgt, B, T, 1.0f, 0, &la, lg1));
    ZT_OK(dec_forward_backward(m, (const float *const *)b.params, b.grads, tok, tgt, B, T, 8.0f, 0, &lb, NULL));
    ZT_CHECK(la == lb);
    int exact = 1;
    for (uint64_t i = 0; i < a.P; i++) exact &= b.gflat[i] == 8.0f * a.gflat[i];
    ZT_CHECKF(exact, "loss scale 8 did not scale every gradient by exactly 8");
    ZT_OK(dec_forward(m, (const float *const *)a.params, tok, tgt, B, T, 0, &lf, lg2));
    ZT_CHECK(lf == la);
    ZT_CHECK(!memcmp(lg1, lg2, sizeof(float) * B * T * cfg.vocab));

    float *once = malloc(a.P * 4);
    memcpy(once, a.gflat, a.P * 4);
    ZT_OK(dec_forward_backward(m, (const float *const *)a.params, a.grads, tok, tgt, B, T, 1.0f, 0, &la, NULL));
    double gmax = 0, emax = 0;
    for (uint64_t i = 0; i < a.P; i++) {
        gmax = fmax(gmax, fabs(once[i]));
        emax = fmax(emax, fabs(a.gflat[i] - 2.0 * once[i]));
    }
    ZT_CHECKF(emax <= 1e-6 * gmax, "two accumulated passes differ from twice one pass by %.3g (max %.3g)", emax, gmax);

    /* sequences do not see each other: the loss of B=2 is the mean of the two B=1 losses */
    float l0 = 0, l1 = 0;
    ZT_OK(dec_forward(m, (const float *const *)a.params, tok, tgt, 1, T, 0, &l0, NULL));
    ZT_OK(dec_forward(m, (const float *const *)a.params, tok + T, tgt + T, 1, T, 0, &l1, NULL));
    ZT_NEAR(lf, 0.5 * ((double)l0 + l1), 1e-6);
    /* causality: changing the last token leaves the logits of earlier positions unchanged */
    tok[T - 1] = (tok[T - 1] + 1) % cfg.vocab;
    ZT_OK(dec_forward(m, (const float *const *)a.params, tok, NULL, 1, T, 0, NULL, lg2));
    double cd = 0, last = 0;
    for (int i = 0; i < (T - 1) * cfg.vocab; i++) cd = fmax(cd, fabs(lg2[i] - lg1[i]));
    for (int i = (T - 1) * cfg.vocab; i < T * cfg.vocab; i++) last = fmax(last, fabs(lg2[i] - lg1[i]));
    ZT_CHECKF(cd <= 1e-6, "a future token changed earlier logits by %.3g", cd);
    ZT_CHECKF(last > 1e-4, "changing a token did not change its own logits");
    free(once), free(lg1), free(lg2);
    dec_free(m);
    net_free(&a);
    net_free(&b);
}

int main(void) {
    test_unused_positions();
    test_checkpointing();
    test_scale_accumulate();
    return zt_finish("test_gpt2_grad");
}
