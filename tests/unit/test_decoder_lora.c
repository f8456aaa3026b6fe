/* LoRA on the decoder without PyTorch (models/decoder/lora.c): target names as PEFT matches them,
 * the adapters' tensors and place, PEFT's initialization (A inside Kaiming-uniform's bound with
 * its spread, B zero: the model's output unchanged), the forward against the merged weights
 * W + s·B·A (Linear) and W + s·(B·A)^T (GPT-2's Conv1D) — every target of both families, fused
 * q/k/v and gate/up columns included —, every adapter gradient element against central finite
 * differences (also with dropout, whose masks depend on the key only), no gradient for the base
 * (its buffers are NULL: the pass must not ask for them), evaluation without dropout, rsLoRA's
 * scaling, and checkpointing bitwise. (Against PEFT itself: test_lora_peft.) */
#include <stdint.h>

#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "harness.h"

static uint64_t rng_state = 777;
static double randn(void) {
    double u[2];
    for (int i = 0; i < 2; i++) {
        rng_state ^= rng_state >> 12, rng_state ^= rng_state << 25, rng_state ^= rng_state >> 27;
        u[i] = ((rng_state * 2685821657736338717ull) >> 11) * (1.0 / 9007199254740992.0);
    }
    return sqrt(-2.0 * log(1.0 - u[0])) * cos(6.283185307179586 * u[1]);
}

/* A model in raw buffers: unit u's view (base + adapters) and, for layers, the adapters' gradient
 * buffer; the embeddings' and final unit's gradients are NULL (frozen). */
typedef struct net {
    dec_config cfg;
    dec_lora l;
    float *params[16], *grads[16];
} net;

static void net_init(net *n, const dec_config *cfg, const dec_lora *l, double bnoise) {
    memset(n, 0, sizeof *n);
    n->cfg = *cfg;
    n->l = *l;
    for (int u = 0; u < dec_num_units(cfg); u++) {
        const uint64_t base = dec_unit_numel(cfg, u), ad = dec_lora_unit_numel(cfg, l, u);
        n->params[u] = calloc(base + ad + 1, 4);
        dec_init_unit(cfg, u, 3, n->params[u]);
        for (uint64_t i = 0; i < base; i++) n->params[u][i] += (float)(0.2 * randn());
        if (ad) {
            dec_lora_init_unit(cfg, l, u, n->params[u] + base);
            n->grads[u] = calloc(ad, 4);
        }
    }
    /* B away from zero, so that the adapters change the output and A gets a gradient */
    for (int i = 0; bnoise > 0 && i < dec_lora_num_tensors(cfg, l); i++) {
        dec_param_desc d;
        dec_lora_tensor_desc(cfg, l, i, &d);
        if (strstr(d.name, "lora_B"))
            for (uint64_t k = 0; k < d.numel; k++) n->params[d.unit][d.offset + k] = (float)(bnoise * randn());
    }
}

static void net_free(net *n) {
    for (int u = 0; u < 16; u++) free(n->params[u]), free(n->grads[u]);
}

static void batch(const dec_config *c, int32_t *tok, int32_t *tgt, int n) {
    for (int i = 0; i < n; i++) {
        tok[i] = (int32_t)(fabs(randn()) * 1e6) % c->vocab;
        tgt[i] = i % 4 == 1 ? -1 : (int32_t)(fabs(randn()) * 1e6) % c->vocab;
    }
}

static void names(void) {
    dec_config g, q;
    dec_config_preset(&g, "tiny", NULL);
    dec_config_preset(&q, "qwen2.5-0.5b", NULL);
    unsigned t = 0;
    zero_error err;
    ZT_OK(dec_lora_targets(&q, "q_proj,k_proj,v_proj,o_proj", &t, &err));
    ZT_EQ_INT(t, DEC_LORA_Q | DEC_LORA_K | DEC_LORA_V | DEC_LORA_O);
    ZT_OK(dec_lora_targets(&q, "self_attn.q_proj,mlp.down_proj", &t, &err));
    ZT_EQ_INT(t, DEC_LORA_Q | DEC_LORA_DOWN);
    ZT_OK(dec_lora_targets(&g, "c_proj", &t, &err)); /* PEFT: both c_proj modules of a GPT-2 block */
    ZT_EQ_INT(t, DEC_LORA_ATTN_C_PROJ | DEC_LORA_MLP_C_PROJ);
    ZT_OK(dec_lora_targets(&g, "attn.c_proj,c_fc", &t, &err));
    ZT_EQ_INT(t, DEC_LORA_ATTN_C_PROJ | DEC_LORA_C_FC);
    ZT_OK(dec_lora_targets(&q, "", &t, &err)); /* PEFT's defaults */
    ZT_EQ_INT(t, DEC_LORA_Q | DEC_LORA_V);
    ZT_OK(dec_lora_targets(&g, NULL, &t, &err));
    ZT_EQ_INT(t, DEC_LORA_C_ATTN);
    ZT_EQ_INT(dec_lora_targets(&q, "q_proj,c_attn", &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "'c_attn'") && strstr(err.msg, "q_proj"), "%s", err.msg);
    ZT_EQ_INT(dec_lora_targets(&g, "q_proj", &t, &err), ZERO_ERR_INVALID_ARG);
    char buf[128];
    ZT_CHECK(!strcmp(dec_lora_targets_string(&g, DEC_LORA_C_ATTN | DEC_LORA_ATTN_C_PROJ | DEC_LORA_MLP_C_PROJ, buf, sizeof buf),
                     "c_attn,c_proj"));
    ZT_CHECK(!strcmp(dec_lora_targets_string(&q, DEC_LORA_V | DEC_LORA_Q | DEC_LORA_UP, buf, sizeof buf), "q_proj,v_proj,up_proj"));
    dec_lora l;
    dec_lora_default(&l);
    l.targets = DEC_LORA_Q;
    l.r = 0;
    ZT_EQ_INT(dec_lora_check(&q, &l, &err), ZERO_ERR_INVALID_ARG);
    l.r = 4, l.dropout = 1.0;
    ZT_EQ_INT(dec_lora_check(&q, &l, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "dropout 1"), "%s", err.msg);
    l.dropout = 0, l.alpha = 0;
    ZT_EQ_INT(dec_lora_check(&q, &l, &err), ZERO_ERR_INVALID_ARG);
    l.alpha = 32, l.r = 16;
    ZT_NEAR(dec_lora_scaling(&l), 2.0, 1e-12);
    l.rslora = 1;
    ZT_NEAR(dec_lora_scaling(&l), 8.0, 1e-12);
    /* the tensors of qwen2.5-0.5b with q,v at r 16: 24 layers x (16 (896 + 896) + 16 (896 + 128)) */
    l.rslora = 0;
    l.targets = DEC_LORA_Q | DEC_LORA_V;
    ZT_EQ_INT(dec_lora_num_params(&q, &l), 24ull * (16 * (896 + 896) + 16 * (896 + 128)));
    ZT_EQ_INT(dec_lora_num_tensors(&q, &l), 24 * 4);
    dec_param_desc d;
    ZT_OK(dec_lora_tensor_desc(&q, &l, 7, &d));
    ZT_CHECKF(!strcmp(d.name, "model.layers.1.self_attn.v_proj.lora_B.weight"), "%s", d.name);
    ZT_EQ_INT(d.shape[0], 128);
    ZT_EQ_INT(d.shape[1], 16);
    ZT_EQ_INT(d.unit, 2);
    ZT_EQ_INT(d.offset, dec_unit_numel(&q, 2) + 16 * (896 + 896) + 16 * 896);
    ZT_CHECK(dec_lora_is_param(d.name) && !dec_lora_is_param("model.layers.1.self_attn.v_proj.weight"));
}

/* PEFT's init: A ~ U(-1/sqrt(in), 1/sqrt(in)) (kaiming_uniform_ with a = sqrt(5)), B = 0. */
static void init(void) {
    dec_config q;
    dec_config_preset(&q, "smollm2-135m", NULL);
    dec_lora l;
    dec_lora_default(&l);
    l.r = 8, l.seed = 5, l.targets = DEC_LORA_Q | DEC_LORA_DOWN; /* in 576 and 1536 */
    const uint64_t n = dec_lora_unit_numel(&q, &l, 1);
    float *a = malloc(n * 4), *b = malloc(n * 4);
    dec_lora_init_unit(&q, &l, 1, a);
    dec_lora_init_unit(&q, &l, 1, b);
    ZT_CHECK(!memcmp(a, b, n * 4)); /* deterministic */
    dec_lora_init_unit(&q, &l, 2, b);
    ZT_CHECK(memcmp(a, b, n * 4) != 0); /* one stream per unit */
    const uint64_t base = dec_unit_numel(&q, 1);
    for (int i = 0; i < 4; i++) {
        dec_param_desc d;
        dec_lora_tensor_desc(&q, &l, i, &d);
        const float *v = a + (d.offset - base);
        if (strstr(d.name, "lora_B")) {
            int zeros = 0;
            for (uint64_t k = 0; k < d.numel; k++) zeros += v[k] == 0.0f;
            ZT_EQ_INT(zeros, d.numel);
            continue;
        }
        const double bound = 1.0 / sqrt((double)d.shape[1]);
        double mx = 0, mean = 0, var = 0;
        for (uint64_t k = 0; k < d.numel; k++) mx = fmax(mx, fabs(v[k])), mean += v[k];
        mean /= (double)d.numel;
        for (uint64_t k = 0; k < d.numel; k++) var += (v[k] - mean) * (v[k] - mean);
        var /= (double)d.numel;
        ZT_CHECKF(mx <= bound && mx > 0.99 * bound, "%s: largest |A| %g, bound %g", d.name, mx, bound);
        ZT_CHECKF(fabs(mean) < 0.05 * bound, "%s: mean %g", d.name, mean);
        ZT_CHECKF(fabs(var / (bound * bound / 3.0) - 1.0) < 0.05, "%s: variance %g, uniform's %g", d.name, var, bound * bound / 3);
    }
    free(a), free(b);
}

/* The forward with adapters equals the base model with every targeted weight merged. */
static void merged(const char *what, const dec_config *c, unsigned targets, int rslora) {
    const int B = 2, T = 5;
    dec_lora l;
    dec_lora_default(&l);
    l.r = 3, l.alpha = 5, l.targets = targets, l.seed = 9, l.rslora = rslora;
    net n;
    net_init(&n, c, &l, 0.5);
    int32_t tok[10], tgt[10];
    batch(c, tok, tgt, 10);
    dec_model *m = NULL, *mb = NULL;
    ZT_OK(dec_create(&m, c, B, T, 0, NULL));
    ZT_OK(dec_create(&mb, c, B, T, 0, NULL));
    if (!m || !mb) return;
    ZT_OK(dec_set_lora(m, &l, NULL));
    float loss = 0, merged_loss = 0, base_loss = 0;
    float *logits = malloc((size_t)B * T * c->vocab * 4), *mlogits = malloc((size_t)B * T * c->vocab * 4);
    ZT_OK(dec_forward(m, (const float *const *)n.params, tok, tgt, B, T, 0, &loss, logits));
    ZT_OK(dec_forward(mb, (const float *const *)n.params, tok, tgt, B, T, 0, &base_loss, NULL));
    /* merge: for each adapter pair, W += s B A in the base weight's layout */
    const double s = dec_lora_scaling(&l);
    for (int i = 0; i < dec_lora_num_tensors(c, &l); i += 2) {
        dec_param_desc da, db;
        dec_lora_tensor_desc(c, &l, i, &da);
        dec_lora_tensor_desc(c, &l, i + 1, &db);
        char mod[128];
        snprintf(mod, sizeof mod, "%s", da.name);
        *strstr(mod, ".lora_A") = 0;
        /* the base weight's descriptor, and the column offset of a fused product */
        int found = -1, col0 = 0;
        dec_param_desc w;
        const char *sub = strrchr(mod, '.') + 1;
        for (int t = 0; t < dec_num_tensors(c); t++) {
            dec_tensor_desc(c, t, &w);
            char want[140];
            snprintf(want, sizeof want, "%s.weight", mod);
            if (!strcmp(w.name, want)) found = t;
        }
        ZT_CHECKF(found >= 0, "%s: no base weight for %s", what, mod);
        if (found < 0) continue;
        dec_tensor_desc(c, found, &w);
        const int out = (int)db.shape[0], in = (int)da.shape[1], r = (int)da.shape[0];
        const int conv = c->arch == DEC_ARCH_GPT2;
        (void)col0, (void)sub;
        float *W = n.params[w.unit] + w.offset;
        const float *A = n.params[da.unit] + da.offset, *Bm = n.params[db.unit] + db.offset;
        for (int o = 0; o < out; o++)
            for (int k = 0; k < in; k++) {
                double acc = 0;
                for (int j = 0; j < r; j++) acc += (double)Bm[o * r + j] * A[j * in + k];
                if (conv) W[(size_t)k * out + o] += (float)(s * acc);
                else W[(size_t)o * in + k] += (float)(s * acc);
            }
    }
    ZT_OK(dec_forward(mb, (const float *const *)n.params, tok, tgt, B, T, 0, &merged_loss, mlogits));
    double worst = 0;
    for (size_t i = 0; i < (size_t)B * T * c->vocab; i++) worst = fmax(worst, fabs(logits[i] - mlogits[i]));
    ZT_CHECKF(worst < 2e-5, "%s: logits differ from the merged model's by %g", what, worst);
    ZT_NEAR(loss, merged_loss, 1e-5);
    ZT_CHECKF(fabs(loss - base_loss) > 1e-4, "%s: the adapters do not change the loss (%g vs %g)", what, loss, base_loss);
    printf("%s: adapters vs merged weights: logits within %.2g; loss %.6f (base %.6f)\n", what, worst, loss, base_loss);
    free(logits), free(mlogits);
    dec_free(m), dec_free(mb);
    net_free(&n);
}

/* Every adapter gradient element against central differences of the training loss (the same
 * dropout key in every call: the same masks); base gradients are never asked for. */
static void gradients(const char *what, const dec_config *c, unsigned targets, double dropout) {
    const int B = 2, T = 5;
    dec_lora l;
    dec_lora_default(&l);
    l.r = 2, l.alpha = 3, l.targets = targets, l.seed = 4, l.dropout = dropout;
    net n;
    net_init(&n, c, &l, 0.5);
    int32_t tok[10], tgt[10];
    batch(c, tok, tgt, 10);
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, c, B, T, 0, NULL));
    if (!m) return;
    ZT_OK(dec_set_lora(m, &l, NULL));
    dec_lora_set_key(m, 12345);
    float loss = 0;
    ZT_OK(dec_forward_backward(m, (const float *const *)n.params, n.grads, tok, tgt, B, T, 1.0f, 0, &loss, NULL));
    /* scratch gradient buffers for the finite-difference calls */
    float *scratch[16] = {0};
    for (int u = 0; u < dec_num_units(c); u++)
        if (n.grads[u]) scratch[u] = calloc(dec_lora_unit_numel(c, &l, u), 4);
    const float h = 3e-3f;
    double worst = 0;
    int checked = 0;
    for (int i = 0; i < dec_lora_num_tensors(c, &l); i++) {
        dec_param_desc d;
        dec_lora_tensor_desc(c, &l, i, &d);
        float *p = n.params[d.unit] + d.offset;
        const float *g = n.grads[d.unit] + (d.offset - dec_unit_numel(c, d.unit));
        double gmax = 0;
        for (uint64_t k = 0; k < d.numel; k++) gmax = fmax(gmax, fabs(g[k]));
        int bad = 0;
        for (uint64_t k = 0; k < d.numel; k++) {
            const float keep = p[k];
            float lp = 0, lm = 0;
            p[k] = keep + h;
            dec_forward_backward(m, (const float *const *)n.params, scratch, tok, tgt, B, T, 1.0f, 0, &lp, NULL);
            p[k] = keep - h;
            dec_forward_backward(m, (const float *const *)n.params, scratch, tok, tgt, B, T, 1.0f, 0, &lm, NULL);
            p[k] = keep;
            const double fd = ((double)lp - lm) / (2.0 * h);
            const double err = fabs(fd - g[k]), tol = 2e-3 * gmax + 2e-3 * fabs(g[k]) + 2e-4;
            worst = fmax(worst, err / (gmax + 1e-12));
            checked++;
            if (err > tol && bad++ < 3)
                ZT_FAIL("%s: %s[%llu]: backward %.6g, finite difference %.6g", what, d.name, (unsigned long long)k, g[k], fd);
            zt_checks++;
        }
        ZT_CHECKF(gmax > 1e-4, "%s: %s: gradient is all zero", what, d.name);
    }
    printf("%s: %d adapter elements, worst |fd - g| / max|g| = %.3g\n", what, checked, worst);
    /* the same key: bitwise the same; another key (with dropout): another loss; evaluation: no
     * dropout; checkpointing: bitwise */
    float l2 = 0, l3 = 0, le = 0, lc = 0, lnod = 0;
    for (int u = 0; u < dec_num_units(c); u++)
        if (scratch[u]) memset(scratch[u], 0, dec_lora_unit_numel(c, &l, u) * 4);
    ZT_OK(dec_forward_backward(m, (const float *const *)n.params, scratch, tok, tgt, B, T, 1.0f, 0, &l2, NULL));
    int same = l2 == loss;
    for (int u = 0; u < dec_num_units(c); u++)
        if (scratch[u]) same &= !memcmp(scratch[u], n.grads[u], dec_lora_unit_numel(c, &l, u) * 4);
    ZT_CHECKF(same, "%s: a pass with the same key is not bitwise the same", what);
    dec_lora_set_key(m, 999);
    ZT_OK(dec_forward_backward(m, (const float *const *)n.params, scratch, tok, tgt, B, T, 1.0f, 0, &l3, NULL));
    if (dropout > 0) ZT_CHECKF(l3 != loss, "%s: another key gives the same dropout", what);
    else ZT_CHECK(l3 == loss);
    ZT_OK(dec_forward(m, (const float *const *)n.params, tok, tgt, B, T, 0, &le, NULL));
    dec_lora nod = l;
    nod.dropout = 0;
    dec_model *m0 = NULL;
    ZT_OK(dec_create(&m0, c, B, T, 0, NULL));
    if (m0) {
        ZT_OK(dec_set_lora(m0, &nod, NULL));
        ZT_OK(dec_forward(m0, (const float *const *)n.params, tok, tgt, B, T, 0, &lnod, NULL));
        ZT_CHECKF(le == lnod, "%s: evaluation applies dropout (%g vs %g)", what, le, lnod);
    }
    dec_free(m0);
    dec_model *mc = NULL;
    ZT_OK(dec_create(&mc, c, B, T, 1, NULL));
    if (mc) {
        ZT_OK(dec_set_lora(mc, &l, NULL));
        dec_lora_set_key(mc, 12345);
        for (int u = 0; u < dec_num_units(c); u++)
            if (scratch[u]) memset(scratch[u], 0, dec_lora_unit_numel(c, &l, u) * 4);
        ZT_OK(dec_forward_backward(mc, (const float *const *)n.params, scratch, tok, tgt, B, T, 1.0f, 0, &lc, NULL));
        same = lc == loss;
        for (int u = 0; u < dec_num_units(c); u++)
            if (scratch[u]) same &= !memcmp(scratch[u], n.grads[u], dec_lora_unit_numel(c, &l, u) * 4);
        ZT_CHECKF(same, "%s: checkpointing changes the result", what);
    }
    dec_free(mc);
    for (int u = 0; u < 16; u++) free(scratch[u]);
    dec_free(m);
    net_free(&n);
}

int main(void) {
    names();
    init();
    dec_config q; /* a Llama with every option (GQA, q/k norm, biases, untied) */
    dec_config_preset(&q, "qwen3-8b", NULL);
    q.n_layer = 2, q.n_embd = 8, q.n_head = 4, q.n_kv_head = 2, q.head_dim = 4, q.n_inner = 6, q.vocab = 11;
    q.n_ctx = 16, q.qkv_bias = q.o_bias = q.mlp_bias = 1;
    q.arch = DEC_ARCH_LLAMA;
    ZT_OK(dec_config_check(&q, NULL));
    const unsigned all_llama = DEC_LORA_Q | DEC_LORA_K | DEC_LORA_V | DEC_LORA_O | DEC_LORA_GATE | DEC_LORA_UP | DEC_LORA_DOWN;
    dec_config g;
    dec_config_gpt2(&g, 2, 12, 3, 16, 13);
    const unsigned all_gpt2 = DEC_LORA_C_ATTN | DEC_LORA_ATTN_C_PROJ | DEC_LORA_C_FC | DEC_LORA_MLP_C_PROJ;
    merged("llama, every target", &q, all_llama, 0);
    merged("llama, k and up only, rsLoRA", &q, DEC_LORA_K | DEC_LORA_UP, 1);
    merged("gpt2, every target (Conv1D)", &g, all_gpt2, 0);
    gradients("llama, every target", &q, all_llama, 0.0);
    gradients("llama, every target, dropout 0.3", &q, all_llama, 0.3);
    gradients("gpt2, every target", &g, all_gpt2, 0.0);
    gradients("gpt2, c_attn, dropout 0.5", &g, DEC_LORA_C_ATTN, 0.5);
    return zt_finish("test_decoder_lora");
}
