/* GPT-2 trained through the engine on the self communicator: the engine run computes what the
 * raw-pointer model computes (loss, gradient norm, eval, sampling), stage 3's gather/release
 * protocol gives the losses of stage 0, checkpointing changes nothing, and the loss falls on the
 * fortunes corpus. */
#include <stdint.h>

#include "decoder/data.h"
#include "decoder/decoder.h"
#include "harness.h"

enum { B = 4, K = 2, T = 64, STEPS = 12 };
#define SEED 5
#define DATA_SEED 77

typedef struct run {
    double losses[STEPS];
    double norm0;
    float *final; /* all units back to back after the last step */
} run;

static dec_data *data;
static dec_config cfg;

static zero_engine *make_engine(zero_comm *comm, int stage) {
    zero_config c;
    zero_config_default(&c);
    c.stage = stage;
    c.micro_batch = B;
    c.grad_accum = K;
    zero_optim_hparams_default(&c.optim, ZERO_OPTIM_ADAMW);
    c.optim.lr = 2e-3f;
    c.optim.weight_decay = 0.1f;
    zero_error err = {{0}};
    ZT_OK(zero_config_resolve(&c, 1, &err));
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, &c) != ZERO_OK) {
        ZT_FAIL("engine create: %s", e ? zero_engine_last_error(e) : "failed");
        zero_engine_free(e);
        return NULL;
    }
    zero_status st = dec_engine_register(&cfg, e, &err);
    if (!st) st = zero_engine_finalize(e);
    if (!st) st = dec_engine_init(&cfg, e, SEED, &err);
    if (st) {
        ZT_FAIL("engine setup: %s / %s", err.msg, zero_engine_last_error(e));
        zero_engine_free(e);
        return NULL;
    }
    return e;
}

static int train(zero_comm *comm, int stage, int ckpt, run *out) {
    memset(out, 0, sizeof *out);
    zero_engine *e = make_engine(comm, stage);
    dec_model *m = NULL;
    zero_error err = {{0}};
    if (!e) return -1;
    ZT_OK(dec_create(&m, &cfg, B, T, ckpt, &err));
    int rc = m ? 0 : -1;
    int32_t in[B * T], tg[B * T];
    for (int s = 0; s < STEPS && !rc; s++) {
        double sum = 0;
        for (int k = 0; k < K && !rc; k++) {
            float loss = 0;
            rc |= dec_data_batch(data, DEC_SPLIT_TRAIN, DATA_SEED, s, B * K, dec_data_first(0, B, K, k), B, T,
                                  in, tg, NULL, &err);
            if (!rc && dec_engine_micro_batch(m, e, in, tg, B, T, 0, &loss)) {
                ZT_FAIL("stage %d step %d: %s", stage, s, dec_last_error(m));
                rc = -1;
            }
            if (!rc && zero_engine_micro_batch_done(e)) {
                ZT_FAIL("stage %d step %d: %s", stage, s, zero_engine_last_error(e));
                rc = -1;
            }
            sum += loss;
        }
        zero_step_stats st;
        if (!rc && zero_engine_step(e, &st)) {
            ZT_FAIL("stage %d step %d: %s", stage, s, zero_engine_last_error(e));
            rc = -1;
        }
        out->losses[s] = sum / K;
        if (s == 0) out->norm0 = st.grad_norm;
    }
    out->final = malloc(dec_num_params(&cfg) * sizeof(float));
    for (int u = 0; u < dec_num_units(&cfg) && !rc; u++)
        ZT_OK(zero_engine_read_unit(e, u, out->final + dec_unit_offset(&cfg, u)));
    dec_free(m);
    zero_engine_free(e);
    return rc;
}

/* Step 0 computed on raw buffers: the mean loss and the norm of the mean gradient. */
static void raw_step0(double *loss, double *norm) {
    const uint64_t P = dec_num_params(&cfg);
    float *flat = malloc(P * 4), *g = calloc(P, 4), *params[8], *grads[8];
    for (int u = 0; u < dec_num_units(&cfg); u++) {
        params[u] = flat + dec_unit_offset(&cfg, u);
        grads[u] = g + dec_unit_offset(&cfg, u);
        dec_init_unit(&cfg, u, SEED, params[u]);
    }
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &cfg, B, T, 0, NULL));
    int32_t in[B * T], tg[B * T];
    *loss = 0;
    for (int k = 0; k < K && m; k++) {
        float l = 0;
        ZT_OK(dec_data_batch(data, DEC_SPLIT_TRAIN, DATA_SEED, 0, B * K, dec_data_first(0, B, K, k), B, T, in, tg, NULL, NULL));
        ZT_OK(dec_forward_backward(m, (const float *const *)params, grads, in, tg, B, T, 1.0f, 0, &l, NULL));
        *loss += l / K;
    }
    double s2 = 0;
    for (uint64_t i = 0; i < P; i++) s2 += ((double)g[i] / K) * ((double)g[i] / K);
    *norm = sqrt(s2);
    dec_free(m);
    free(flat), free(g);
}

/* eval and generate on the engine match the raw model on the engine's parameters. */
static void test_eval_generate(zero_comm *comm) {
    zero_engine *e = make_engine(comm, 3);
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &cfg, B, T, 0, NULL));
    if (!e || !m) return;
    const uint64_t P = dec_num_params(&cfg);
    float *flat = malloc(P * 4), *params[8];
    for (int u = 0; u < dec_num_units(&cfg); u++) {
        params[u] = flat + dec_unit_offset(&cfg, u);
        ZT_OK(zero_engine_read_unit(e, u, params[u]));
    }
    int32_t in[B * T], tg[B * T];
    ZT_OK(dec_data_batch(data, DEC_SPLIT_VAL, DATA_SEED, 0, B, 0, B, T, in, tg, NULL, NULL));
    float le = 0, lr = 0;
    ZT_OK(dec_engine_eval(m, e, in, tg, B, T, &le));
    ZT_OK(dec_forward(m, (const float *const *)params, in, tg, B, T, 0, &lr, NULL));
    ZT_CHECKF(le == lr, "eval loss %.9g, raw %.9g", le, lr);
    dec_sampling s = {0.8f, 20, 9};
    int32_t a[16], b[16];
    ZT_OK(dec_engine_generate(m, e, in, 10, 16, &s, a));
    ZT_OK(dec_generate(m, (const float *const *)params, in, 10, 16, &s, b));
    ZT_CHECK(!memcmp(a, b, sizeof a));
    /* a model that was not registered on this engine is refused, with a message */
    dec_config other = cfg;
    other.n_layer = 3;
    dec_model *m3 = NULL;
    ZT_OK(dec_create(&m3, &other, 1, 8, 0, NULL));
    if (m3) {
        ZT_EQ_INT(dec_engine_eval(m3, e, in, tg, 1, 8, &le), ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(dec_last_error(m3), "expected the 5"), "message: %s", dec_last_error(m3));
    }
    dec_free(m3);
    free(flat);
    dec_free(m);
    zero_engine_free(e);
}

/* Sets every element of tensor `name` (the model's own name) to v on the engine. */
static void fill_tensor(zero_engine *e, const char *name, float v) {
    dec_param_desc d;
    for (int i = 0; i < dec_num_tensors(&cfg) && !dec_tensor_desc(&cfg, i, &d); i++) {
        if (strcmp(d.name, name)) continue;
        float *u = malloc(dec_unit_numel(&cfg, d.unit) * sizeof *u);
        ZT_OK(zero_engine_read_unit(e, d.unit, u));
        for (uint64_t k = 0; k < d.numel; k++) u[d.offset + k] = v;
        ZT_OK(zero_engine_set_unit(e, d.unit, u));
        free(u);
        return;
    }
    ZT_FAIL("no tensor '%s'", name);
}

/* Finite weights whose forward pass overflows: dec_engine_locate_overflow names the first unit
 * whose output is not finite, its input's magnitude and the tensor behind it; generation refuses
 * the logits instead of drawing token 0 from NaN. A healthy model passes. */
static void test_locate_overflow(zero_comm *comm) {
    zero_engine *e = make_engine(comm, 3);
    dec_model *m = NULL;
    ZT_OK(dec_create(&m, &cfg, B, T, 0, NULL));
    if (!e || !m) return;
    int32_t in[B * T], tg[B * T], out[4];
    ZT_OK(dec_data_batch(data, DEC_SPLIT_VAL, DATA_SEED, 0, B, 0, B, T, in, tg, NULL, NULL));
    zero_error err = {{0}};
    const dec_sampling greedy = {0.0f, 0, 1};
    ZT_OK(dec_engine_locate_overflow(m, e, in, B, T, &err));
    /* the MLP's first product: 3e38 x a normalized input of several units is beyond a float */
    fill_tensor(e, "h.0.mlp.c_fc.weight", 3e38f);
    ZT_EQ_INT(dec_engine_locate_overflow(m, e, in, B, T, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "layer 0 outputs ") &&
                  strstr(err.msg, "; the largest weight it reads is "
                                  "'h.0.mlp.c_fc.weight' (magnitude 3e+38)") &&
                  !strstr(err.msg, "before it"),
              "message: %s", err.msg);
    ZT_EQ_INT(dec_engine_generate(m, e, in, 10, 4, &greedy, out), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(dec_last_error(m), "the logits after 10 tokens hold ") &&
                  strstr(dec_last_error(m), "'h.0.mlp.c_fc.weight' (magnitude 3e+38): expected weights whose forward "
                                            "pass is finite"),
              "message: %s", dec_last_error(m));
    /* a finite but huge final norm (its bias) overflows the tied head after it, whose own weights
     * are 0.5: the message names the head and the larger tensor before it */
    float *u1 = malloc(dec_unit_numel(&cfg, 1) * sizeof *u1);
    dec_init_unit(&cfg, 1, SEED, u1);
    ZT_OK(zero_engine_set_unit(e, 1, u1));
    free(u1);
    ZT_OK(dec_engine_locate_overflow(m, e, in, B, T, &err));
    fill_tensor(e, "ln_f.bias", 3e38f);
    fill_tensor(e, "wte.weight", 0.5f);
    ZT_EQ_INT(dec_engine_locate_overflow(m, e, in, B, T, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(!strcmp(err.msg, "the LM head (tied to the embeddings) outputs +inf from a finite input (largest "
                               "magnitude 3e+38); the largest weight it reads is 'wte.weight' (magnitude 0.5), the "
                               "largest before it 'ln_f.bias' (magnitude 3e+38)"),
              "message: %s", err.msg);
    dec_free(m);
    zero_engine_free(e);
}

int main(void) {
    zero_comm *comm = NULL;
    zero_error err = {{0}};
    ZT_OK(zero_comm_init_self(&comm));
    ZT_OK(dec_config_preset(&cfg, "tiny", NULL));
    if (dec_data_open(&data, NULL, &err)) {
        ZT_FAIL("fortunes corpus: %s", err.msg);
        return zt_finish("test_gpt2_engine");
    }
    run r0, r3, rc;
    const int ok0 = train(comm, 0, 0, &r0) == 0, ok3 = train(comm, 3, 0, &r3) == 0, okc = train(comm, 0, 1, &rc) == 0;
    if (ok0) {
        double loss, norm;
        raw_step0(&loss, &norm);
        ZT_CHECKF(fabs(r0.losses[0] - loss) <= 1e-7 * loss, "step 0 loss: engine %.9g, raw %.9g", r0.losses[0], loss);
        ZT_CHECKF(fabs(r0.norm0 - norm) <= 1e-5 * norm, "step 0 gradient norm: engine %.9g, raw %.9g", r0.norm0, norm);
        const double last = (r0.losses[STEPS - 1] + r0.losses[STEPS - 2] + r0.losses[STEPS - 3]) / 3;
        ZT_CHECKF(last < r0.losses[0] - 0.5, "loss did not fall: %.4f -> %.4f", r0.losses[0], last);
        printf("stage 0: loss %.4f -> %.4f over %d steps (grad norm at step 0: %.5f, raw %.5f)\n", r0.losses[0],
               r0.losses[STEPS - 1], STEPS, r0.norm0, norm);
    }
    if (ok0 && ok3) {
        for (int s = 0; s < STEPS; s++)
            ZT_CHECKF(fabs(r3.losses[s] - r0.losses[s]) <= 1e-6 * r0.losses[s], "step %d: stage 3 %.9g, stage 0 %.9g",
                      s, r3.losses[s], r0.losses[s]);
        double d = 0;
        for (uint64_t i = 0; i < dec_num_params(&cfg); i++) d = fmax(d, fabs(r3.final[i] - r0.final[i]));
        ZT_CHECKF(d <= 1e-5, "final parameters: stage 3 differs from stage 0 by %.3g", d);
    }
    if (ok0 && okc) {
        ZT_CHECK(!memcmp(rc.losses, r0.losses, sizeof rc.losses));
        ZT_CHECK(!memcmp(rc.final, r0.final, dec_num_params(&cfg) * sizeof(float)));
    }
    test_eval_generate(comm);
    test_locate_overflow(comm);
    free(r0.final), free(r3.final), free(rc.final);
    dec_data_free(data);
    zero_comm_free(comm);
    return zt_finish("test_gpt2_engine");
}
