/* The decoder against transformers on every fixture of scripts/make_decoder_fixtures.py (GPT-2,
 * Llama with GQA 4 / llama3 RoPE and biases / MQA sharded fp16, Mistral, Qwen2, Qwen3, Gemma 1/2/3,
 * Phi-3, and Mistral, Gemma 2/3 and Phi-3 with sliding windows shorter than the sequence), loaded
 * from their Hugging Face directories: logits within 1e-4 absolute, the masked mean loss within
 * 1e-5 relative, the gradient's global norm within 1e-4 relative; activation checkpointing
 * bitwise equal; a batch split in two with the global denominator equal to the whole; the
 * windowed fixtures' greedy generation past the window equal to transformers' generate(). */
#include <stdint.h>

#include "decoder_fixture.h"

static double grad_norm(float *const *g, const dec_config *c) {
    double s = 0;
    for (int u = 0; u < dec_num_units(c); u++)
        for (uint64_t i = 0; i < dec_unit_numel(c, u); i++) s += (double)g[u][i] * g[u][i];
    return sqrt(s);
}

static float **alloc_grads(const dec_config *c) {
    float **g = calloc((size_t)dec_num_units(c), sizeof *g);
    for (int u = 0; g && u < dec_num_units(c); u++) g[u] = calloc(dec_unit_numel(c, u), sizeof(float));
    return g;
}

static void free_grads(float **g, const dec_config *c) {
    for (int u = 0; g && u < dec_num_units(c); u++) free(g[u]);
    free(g);
}

static void zero_grads(float **g, const dec_config *c) {
    for (int u = 0; u < dec_num_units(c); u++) memset(g[u], 0, dec_unit_numel(c, u) * sizeof(float));
}

static void fixture(zero_comm *self, const char *name, double *worst_logit, double *worst_loss, double *worst_norm) {
    zt_golden g;
    if (zt_golden_load(name, &g)) return;
    dec_config c;
    zero_engine *e = zt_fixture_engine(self, name, &g, 0, ZT_FB, 1, &c);
    if (!e) {
        zt_golden_free(&g);
        return;
    }
    const int U = dec_num_units(&c), V = c.vocab, N = ZT_FB * ZT_FT;
    const float **params = calloc((size_t)U, sizeof *params);
    for (int u = 0; u < U; u++) params[u] = zero_engine_gather(e, u);
    float *logits = malloc((size_t)N * V * sizeof(float));
    float **grads = alloc_grads(&c), **grads2 = alloc_grads(&c);
    dec_model *m = NULL, *mc = NULL;
    zero_error err = {{0}};
    ZT_OK(dec_create(&m, &c, ZT_FB, ZT_FT, 0, &err));
    ZT_OK(dec_create(&mc, &c, ZT_FB, ZT_FT, 1, &err));
    if (!m || !mc || !logits || !grads || !grads2) goto out;

    /* logits and the masked mean loss */
    float loss = 0;
    ZT_OK(dec_forward(m, params, g.tokens, g.targets, ZT_FB, ZT_FT, 0, &loss, logits));
    double dl = 0, lmax = 0;
    ZT_EQ_INT(g.nlogits, (size_t)3 * ZT_FT * V);
    for (size_t i = 0; i < g.nlogits; i++) {
        dl = fmax(dl, fabs((double)logits[i] - g.logits[i]));
        lmax = fmax(lmax, fabs(g.logits[i]));
    }
    ZT_CHECKF(dl <= 1e-4, "%s: logits differ from transformers' by %.3g (largest |logit| %.3g)", name, dl, lmax);
    ZT_CHECKF(lmax > 1.0, "%s: logits too small (%.3g) for the comparison to mean much", name, lmax);
    const double rl = fabs(loss - g.loss) / g.loss;
    ZT_CHECKF(rl <= 1e-5, "%s: loss %.9g vs transformers %.9g (rel %.3g)", name, loss, g.loss, rl);

    /* the gradient: its global norm against PyTorch's, checkpointing bitwise equal */
    float l1 = 0, l2 = 0;
    ZT_OK(dec_forward_backward(m, params, grads, g.tokens, g.targets, ZT_FB, ZT_FT, 1.0f, 0, &l1, NULL));
    const double gn = grad_norm(grads, &c), rn = fabs(gn - g.grad_norm) / g.grad_norm;
    ZT_CHECKF(rn <= 1e-4, "%s: gradient norm %.9g vs PyTorch %.9g (rel %.3g)", name, gn, g.grad_norm, rn);
    ZT_CHECKF(l1 == loss, "%s: forward+backward loss %.9g != forward loss %.9g", name, l1, loss);
    ZT_OK(dec_forward_backward(mc, params, grads2, g.tokens, g.targets, ZT_FB, ZT_FT, 1.0f, 0, &l2, NULL));
    ZT_CHECKF(l1 == l2, "%s: checkpointing changes the loss", name);
    for (int u = 0; u < U; u++)
        ZT_CHECKF(!memcmp(grads[u], grads2[u], dec_unit_numel(&c, u) * sizeof(float)),
                  "%s: checkpointing changes unit %d's gradient", name, u);

    /* two halves with the global denominator: the losses add up and the gradients sum to the whole */
    const double count = (double)dec_count_targets(g.targets, (size_t)N);
    zero_grads(grads2, &c);
    float h1 = 0, h2 = 0;
    const int half = ZT_FB / 2 * ZT_FT;
    ZT_OK(dec_forward_backward(m, params, grads2, g.tokens, g.targets, ZT_FB / 2, ZT_FT, 1.0f, count, &h1, NULL));
    ZT_OK(dec_forward_backward(m, params, grads2, g.tokens + half, g.targets + half, ZT_FB / 2, ZT_FT, 1.0f, count,
                               &h2, NULL));
    ZT_CHECKF(fabs((double)h1 + h2 - l1) <= 1e-6 * l1, "%s: halves %.9g + %.9g != whole %.9g", name, h1, h2, l1);
    double e2 = 0, r2 = 0;
    for (int u = 0; u < U; u++)
        for (uint64_t i = 0; i < dec_unit_numel(&c, u); i++) {
            const double d = (double)grads2[u][i] - grads[u][i];
            e2 += d * d;
            r2 += (double)grads[u][i] * grads[u][i];
        }
    ZT_CHECKF(sqrt(e2 / r2) <= 1e-5, "%s: two halves' gradient differs from the whole's by %.3g (relative L2)", name,
              sqrt(e2 / r2));
    /* the same halves each with its own mean (the default) are not the global mean: masks differ */
    float d1 = 0;
    ZT_OK(dec_forward(m, params, g.tokens + half, g.targets + half, ZT_FB / 2, ZT_FT, 0, &d1, NULL));
    ZT_CHECKF(fabs(d1 - (double)h2 * count / (double)dec_count_targets(g.targets + half, (size_t)half)) <= 1e-5 * d1,
              "%s: the default denominator is not the micro-batch's count", name);

    /* past the window: transformers' greedy generate() (its cache keeps a sliding layer's last
     * sliding_window keys); zero recomputes the context, each query within its window */
    if (g.has_gen) {
        dec_model *mg = NULL;
        int32_t out[ZT_GEN_NEW] = {0};
        const dec_sampling greedy = {0.0f, 0, 0};
        ZT_OK(dec_create(&mg, &c, 1, ZT_GEN_PROMPT + ZT_GEN_NEW, 0, &err));
        if (mg) ZT_OK(dec_generate(mg, params, g.gen_prompt, ZT_GEN_PROMPT, ZT_GEN_NEW, &greedy, out));
        ZT_CHECKF(!memcmp(out, g.gen_tokens, sizeof out), "%s: greedy tokens differ from transformers' generate()",
                  name);
        dec_free(mg);
    }

    printf("%-18s %-20s logits %.2e (|max| %.2f)  loss %.7f vs %.7f (%.1e)  grad norm %.6f vs %.6f (%.1e)\n", name,
           dec_arch_name(c.arch), dl, lmax, loss, g.loss, rl, gn, g.grad_norm, rn);
    *worst_logit = fmax(*worst_logit, dl);
    *worst_loss = fmax(*worst_loss, rl);
    *worst_norm = fmax(*worst_norm, rn);
out:
    for (int u = 0; u < U; u++) zero_engine_release(e, u);
    dec_free(m);
    dec_free(mc);
    free_grads(grads, &c);
    free_grads(grads2, &c);
    free(logits);
    free(params);
    zero_engine_free(e);
    zt_golden_free(&g);
}

int main(void) {
    zero_comm *self = NULL;
    if (zero_comm_init_self(&self)) return 1;
    double wl = 0, wloss = 0, wn = 0;
    for (int i = 0; i < ZT_NFIXTURES; i++) fixture(self, zt_fixtures[i], &wl, &wloss, &wn);
    printf("worst over %d fixtures: logits %.2e absolute, loss %.1e relative, gradient norm %.1e relative\n",
           ZT_NFIXTURES, wl, wloss, wn);
    zero_comm_free(self);
    return zt_finish("test_decoder_hf");
}
