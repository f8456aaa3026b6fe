/* The GPT-2 model's bookkeeping: preset parameter counts against the published GPT-2 sizes,
 * the tensor table (names, shapes, offsets, flags), initialization statistics, the activation
 * figure, input errors, and sampling. */
#include <stdint.h>

#include "decoder/decoder.h"
#include "harness.h"

static void test_presets(void) {
    /* Hugging Face GPT2Model sizes (tied head counted once). */
    const struct { const char *name; uint64_t params; } known[] = {
        {"gpt2", 124439808ull}, {"gpt2-medium", 354823168ull},
        {"gpt2-large", 774030080ull}, {"gpt2-xl", 1557611200ull},
    };
    for (int i = 0; i < 4; i++) {
        dec_config c;
        ZT_OK(dec_config_preset(&c, known[i].name, NULL));
        ZT_EQ_INT(dec_num_params(&c), known[i].params);
        ZT_OK(dec_config_check(&c, NULL));
    }
    dec_config c;
    ZT_OK(dec_config_preset(&c, "small", NULL));
    ZT_CHECKF(dec_num_params(&c) > 18000000 && dec_num_params(&c) < 22000000, "small: %llu params",
              (unsigned long long)dec_num_params(&c));
    ZT_EQ_INT(c.vocab, 256);
    int n = 0;
    for (const char *const *p = dec_preset_names(); *p; p++, n++) ZT_OK(dec_config_preset(&c, *p, NULL));
    ZT_EQ_INT(n, 15);

    zero_error err = {{0}};
    ZT_EQ_INT(dec_config_preset(&c, "gpt3", &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "'gpt3'") && strstr(err.msg, "tiny"), "message: %s", err.msg);
    dec_config bad;
    dec_config_gpt2(&bad, 2, 66, 4, 64, 256);
    ZT_EQ_INT(dec_config_check(&bad, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "66") && strstr(err.msg, "n_head"), "message: %s", err.msg);
    dec_config_gpt2(&bad, 0, 64, 4, 64, 256);
    ZT_EQ_INT(dec_config_check(&bad, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "n_layer 0"), "message: %s", err.msg);
}

static void test_tensor_table(void) {
    dec_config c;
    dec_config_preset(&c, "gpt2", NULL);
    const int C = c.n_embd;
    ZT_EQ_INT(dec_num_units(&c), 14);
    ZT_EQ_INT(dec_num_tensors(&c), 2 + 12 * 12 + 2);
    char name[32];
    ZT_CHECK(!strcmp(dec_unit_name(&c, 0, name, sizeof name), "embeddings"));
    ZT_CHECK(!strcmp(dec_unit_name(&c, 12, name, sizeof name), "h.11"));
    ZT_CHECK(!strcmp(dec_unit_name(&c, 13, name, sizeof name), "ln_f"));
    ZT_CHECK(!strcmp(dec_unit_name(&c, 14, name, sizeof name), ""));
    uint64_t total = 0, units = 0;
    for (int u = 0; u < dec_num_units(&c); u++) {
        ZT_EQ_INT(dec_unit_offset(&c, u), units);
        units += dec_unit_numel(&c, u);
    }
    ZT_EQ_INT(units, dec_num_params(&c));
    int prev_unit = -1;
    uint64_t next_off = 0;
    for (int i = 0; i < dec_num_tensors(&c); i++) {
        dec_param_desc d;
        ZT_OK(dec_tensor_desc(&c, i, &d));
        if (d.unit != prev_unit) {
            if (prev_unit >= 0) ZT_EQ_INT(next_off, dec_unit_numel(&c, prev_unit));
            ZT_EQ_INT(d.unit, prev_unit + 1);
            ZT_EQ_INT(d.offset, 0);
            prev_unit = d.unit;
            next_off = 0;
        }
        ZT_EQ_INT(d.offset, next_off); /* back to back, registration order */
        next_off = d.offset + d.numel;
        total += d.numel;
        /* every 1-D tensor (biases, LayerNorm) is excluded from weight decay, every 2-D one not */
        ZT_EQ_INT(!!(d.flags & ZERO_PARAM_NO_DECAY), d.ndim == 1);
    }
    ZT_EQ_INT(total, dec_num_params(&c));
    const struct { int index; const char *name; int64_t r, cl; } spot[] = {
        {0, "wte.weight", 50257, 768}, {1, "wpe.weight", 1024, 768},
        {2, "h.0.ln_1.weight", 768, 0}, {4, "h.0.attn.c_attn.weight", 768, 3 * 768},
        {5, "h.0.attn.c_attn.bias", 3 * 768, 0}, {6, "h.0.attn.c_proj.weight", 768, 768},
        {12, "h.0.mlp.c_proj.weight", 4 * 768, 768}, {25, "h.1.mlp.c_proj.bias", 768, 0},
        {146, "ln_f.weight", 768, 0}, {147, "ln_f.bias", 768, 0},
    };
    for (size_t i = 0; i < sizeof spot / sizeof spot[0]; i++) {
        dec_param_desc d;
        ZT_OK(dec_tensor_desc(&c, spot[i].index, &d));
        ZT_CHECKF(!strcmp(d.name, spot[i].name), "tensor %d: %s, expected %s", spot[i].index, d.name, spot[i].name);
        ZT_EQ_INT(d.shape[0], spot[i].r);
        ZT_EQ_INT(d.ndim, spot[i].cl ? 2 : 1);
        if (spot[i].cl) ZT_EQ_INT(d.shape[1], spot[i].cl);
    }
    dec_param_desc d;
    ZT_OK(dec_tensor_desc(&c, 12, &d));
    ZT_EQ_INT(d.offset, 2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C);
    ZT_EQ_INT(dec_tensor_desc(&c, 148, &d), ZERO_ERR_INVALID_ARG);
}

static double stddev(const float *x, size_t n, double *mean) {
    double s = 0, s2 = 0;
    for (size_t i = 0; i < n; i++) s += x[i];
    *mean = s / n;
    for (size_t i = 0; i < n; i++) s2 += (x[i] - *mean) * (x[i] - *mean);
    return sqrt(s2 / n);
}

static void test_init(void) {
    dec_config c;
    dec_config_gpt2(&c, 4, 128, 4, 64, 512);
    const uint64_t n0 = dec_unit_numel(&c, 0), n1 = dec_unit_numel(&c, 1);
    float *a = malloc(n1 * 4), *b = malloc(n1 * 4), *e = malloc(n0 * 4);
    dec_init_unit(&c, 1, 99, a);
    dec_init_unit(&c, 1, 99, b);
    ZT_CHECK(!memcmp(a, b, n1 * 4));
    dec_init_unit(&c, 2, 99, b); /* another unit: another stream */
    ZT_CHECK(memcmp(a, b, n1 * 4) != 0);
    dec_init_unit(&c, 1, 100, b);
    ZT_CHECK(memcmp(a, b, n1 * 4) != 0);
    double mean, sd;
    for (int i = 2; i < 14; i++) {
        dec_param_desc d;
        dec_tensor_desc(&c, i, &d);
        sd = stddev(a + d.offset, d.numel, &mean);
        const int is_proj = strstr(d.name, "c_proj.weight") != NULL;
        if (d.ndim == 2) {
            const double want = is_proj ? 0.02 / sqrt(2.0 * c.n_layer) : 0.02;
            ZT_CHECKF(fabs(sd - want) < 0.03 * want && fabs(mean) < 0.05 * want, "%s: mean %.4g std %.4g, want std %.4g",
                      d.name, mean, sd, want);
        } else {
            const float want = strstr(d.name, "ln_") && strstr(d.name, "weight") ? 1.0f : 0.0f;
            int ok = 1;
            for (uint64_t k = 0; k < d.numel; k++) ok &= a[d.offset + k] == want;
            ZT_CHECKF(ok, "%s: expected all %g", d.name, want);
        }
    }
    dec_init_unit(&c, 0, 99, e);
    sd = stddev(e, n0, &mean);
    ZT_CHECKF(fabs(sd - 0.02) < 0.0006 && fabs(mean) < 0.0005, "embeddings: mean %.4g std %.4g", mean, sd);
    free(a), free(b), free(e);
}

static void test_model_errors_and_loss(void) {
    dec_config c;
    dec_config_preset(&c, "tiny", NULL);
    zero_error err = {{0}};
    dec_model *m = NULL;
    ZT_EQ_INT(dec_create(&m, &c, 2, 65, 0, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "65") && strstr(err.msg, "1 .. 64") && strstr(err.msg, "n_positions"), "message: %s", err.msg);
    ZT_CHECK(m == NULL);
    ZT_OK(dec_create(&m, &c, 2, 16, 0, &err));
    if (!m) return;
    float *flat = malloc(dec_num_params(&c) * 4), *params[4];
    for (int u = 0; u < 4; u++) {
        params[u] = flat + dec_unit_offset(&c, u);
        dec_init_unit(&c, u, 3, params[u]);
    }
    int32_t tok[32], tgt[32];
    for (int i = 0; i < 32; i++) tok[i] = (i * 37) % 256, tgt[i] = (i * 11 + 5) % 256;
    float loss = -1;
    ZT_OK(dec_forward(m, (const float *const *)params, tok, tgt, 2, 16, 0, &loss, NULL));
    /* small random weights: nearly uniform predictions, loss close to ln V */
    ZT_CHECKF(fabs(loss - log(256.0)) < 0.15, "initial loss %.5f, ln 256 = %.5f", loss, log(256.0));
    tok[17] = 256;
    ZT_EQ_INT(dec_forward(m, (const float *const *)params, tok, tgt, 2, 16, 0, &loss, NULL), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(dec_last_error(m), "256") && strstr(dec_last_error(m), "sequence 1 position 1"),
              "message: %s", dec_last_error(m));
    tok[17] = 3;
    tgt[0] = -2; /* -1 means "not counted"; anything else below 0 is an error */
    ZT_EQ_INT(dec_forward(m, (const float *const *)params, tok, tgt, 2, 16, 0, &loss, NULL), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(dec_last_error(m), "target -2") && strstr(dec_last_error(m), "or -1"), "message: %s",
              dec_last_error(m));
    tgt[0] = 256;
    ZT_EQ_INT(dec_forward(m, (const float *const *)params, tok, tgt, 2, 16, 0, &loss, NULL), ZERO_ERR_INVALID_ARG);
    tgt[0] = 0;
    ZT_EQ_INT(dec_forward(m, (const float *const *)params, tok, tgt, 3, 16, 0, &loss, NULL), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(dec_forward(m, (const float *const *)params, tok, tgt, 1, 17, 0, &loss, NULL), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(dec_last_error(m), "17"), "message: %s", dec_last_error(m));
    float *nog[4] = {NULL, NULL, NULL, NULL};
    ZT_EQ_INT(dec_forward_backward(m, (const float *const *)params, nog, tok, tgt, 2, 16, 1.0f, 0, &loss, NULL),
              ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(dec_last_error(m), "grads["), "message: %s", dec_last_error(m));
    ZT_CHECK(dec_activation_bytes_allocated(m) == dec_activation_bytes(&c, 2, 16, 0));
    free(flat);
    dec_free(m);
    dec_free(NULL);
}

static int argmax(const float *x, int n) {
    int b = 0;
    for (int i = 1; i < n; i++) b = x[i] > x[b] ? i : b;
    return b;
}

static void test_generate(void) {
    dec_config c;
    dec_config_gpt2(&c, 2, 32, 2, 16, 64);
    const int T = 16, V = c.vocab;
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &c, 1, T, 0, NULL));
    if (!m) return;
    float *flat = malloc(dec_num_params(&c) * 4), *params[4];
    for (int u = 0; u < 4; u++) {
        params[u] = flat + dec_unit_offset(&c, u);
        dec_init_unit(&c, u, 8, params[u]);
    }
    /* larger weights than GPT-2's init, so the predictions are far from uniform */
    for (uint64_t i = 0; i < dec_num_params(&c); i++) flat[i] *= 4.0f;
    const float *const *P = (const float *const *)params;
    int32_t prompt[40], out1[24], out2[24], out3[24];
    for (int i = 0; i < 40; i++) prompt[i] = (i * 7 + 3) % V;
    float logits[16 * 64];

    /* greedy: the first token is the argmax of the last position's logits; a prompt longer than
     * T is cut to its last T tokens */
    dec_sampling greedy = {0.0f, 0, 1};
    ZT_OK(dec_generate(m, P, prompt, 40, 1, &greedy, out1));
    ZT_OK(dec_forward(m, P, prompt + 40 - T, NULL, 1, T, 0, NULL, logits));
    ZT_EQ_INT(out1[0], argmax(logits + (T - 1) * V, V));
    ZT_OK(dec_generate(m, P, prompt, 5, 1, &greedy, out1));
    ZT_OK(dec_forward(m, P, prompt, NULL, 1, 5, 0, NULL, logits));
    ZT_EQ_INT(out1[0], argmax(logits + 4 * V, V));

    dec_sampling s = {1.0f, 0, 77};
    ZT_OK(dec_generate(m, P, prompt, 3, 24, &s, out1));
    ZT_OK(dec_generate(m, P, prompt, 3, 24, &s, out2));
    ZT_CHECK(!memcmp(out1, out2, sizeof out1)); /* same seed, same tokens */
    s.seed = 78;
    ZT_OK(dec_generate(m, P, prompt, 3, 24, &s, out3));
    ZT_CHECK(memcmp(out1, out3, sizeof out1) != 0);
    for (int i = 0; i < 24; i++) ZT_CHECK(out1[i] >= 0 && out1[i] < V);
    /* top_k = 1 at any temperature is greedy */
    dec_sampling k1 = {1.5f, 1, 5};
    ZT_OK(dec_generate(m, P, prompt, 3, 24, &k1, out2));
    ZT_OK(dec_generate(m, P, prompt, 3, 24, &greedy, out3));
    ZT_CHECK(!memcmp(out2, out3, sizeof out2));
    /* sampling follows the softmax: from one context, 4000 draws of the first token */
    ZT_OK(dec_forward(m, P, prompt, NULL, 1, 3, 0, NULL, logits));
    const float *lg = logits + 2 * V;
    double p[64], z = 0;
    for (int i = 0; i < V; i++) z += exp(lg[i] - lg[argmax(lg, V)]);
    for (int i = 0; i < V; i++) p[i] = exp(lg[i] - lg[argmax(lg, V)]) / z;
    int counts[64] = {0};
    for (int r = 0; r < 4000; r++) {
        dec_sampling one = {1.0f, 0, 1000 + (uint64_t)r};
        int32_t t;
        ZT_OK(dec_generate(m, P, prompt, 3, 1, &one, &t));
        counts[t]++;
    }
    double chi = 0;
    int dof = 0;
    for (int i = 0; i < V; i++) {
        if (p[i] * 4000 < 5) continue;
        chi += (counts[i] - 4000 * p[i]) * (counts[i] - 4000 * p[i]) / (4000 * p[i]);
        dof++;
    }
    ZT_CHECKF(dof >= 8 && chi < dof + 6 * sqrt(2.0 * dof), "chi^2 %.1f with %d classes", chi, dof);
    printf("sampling: chi^2 %.1f over %d classes\n", chi, dof);

    ZT_EQ_INT(dec_generate(m, P, prompt, 0, 4, &s, out1), ZERO_ERR_INVALID_ARG);
    prompt[1] = V;
    ZT_EQ_INT(dec_generate(m, P, prompt, 3, 4, &s, out1), ZERO_ERR_INVALID_ARG);
    free(flat);
    dec_free(m);
}

int main(void) {
    test_presets();
    test_tensor_table();
    test_init();
    test_model_errors_and_loss();
    test_generate();
    return zt_finish("test_gpt2_model");
}
