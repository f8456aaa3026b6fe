/* models/decoder/engine.c — the decoder on a zero_engine: registers the units and tensors, sets
 * the initial values, and runs the model's pass with the engine as the provider of unit memory. */
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder_internal.h"

zero_status dec_engine_register(const dec_config *cfg, zero_engine *e, zero_error *err) {
    zero_status st = dec_config_check(cfg, err);
    if (st) return st;
    char name[32];
    int next = 0; /* tensors are in unit order: each unit's right after it (the engine's rule) */
    for (int u = 0; u < dec_num_units(cfg); u++) {
        const int id = zero_engine_add_unit(e, dec_unit_name(cfg, u, name, sizeof name));
        if (id != u) {
            dec__errorf(err, "registering unit '%s': engine returned %d, expected id %d (%s)", name, id,
                         u, id < 0 ? zero_engine_last_error(e) : "the engine must start empty");
            return id < 0 ? (zero_status)id : ZERO_ERR_STATE;
        }
        dec_param_desc d;
        for (; next < dec_num_tensors(cfg) && !dec_tensor_desc(cfg, next, &d) && d.unit == u; next++) {
            st = zero_engine_add_param(e, u, d.name, d.shape, d.ndim, d.flags);
            if (st) {
                dec__errorf(err, "registering '%s': %s", d.name, zero_engine_last_error(e));
                return st;
            }
        }
    }
    return ZERO_OK;
}

zero_status dec_engine_init(const dec_config *cfg, zero_engine *e, uint64_t seed, zero_error *err) {
    uint64_t most = 0;
    for (int u = 0; u < dec_num_units(cfg); u++)
        if (dec_unit_numel(cfg, u) > most) most = dec_unit_numel(cfg, u);
    float *buf = malloc(most * sizeof(float));
    if (!buf) {
        dec__errorf(err, "cannot allocate %.1f MiB to initialize a unit", most * 4.0 / 1048576.0);
        return ZERO_ERR_NOMEM;
    }
    zero_status st = ZERO_OK;
    for (int u = 0; u < dec_num_units(cfg) && !st; u++) {
        dec_init_unit(cfg, u, seed, buf);
        /* the unit's base tensors (a LoRA registration appends adapters after them: dec_lora_init).
         * The whole unit through set_unit, which every rank calls alike: under hpZ that makes the
         * secondary copies current, so the first forward's gathers stay inside the group too. */
        zero_unit_info ui;
        st = zero_engine_unit_info(e, u, &ui);
        if (!st)
            st = ui.numel == dec_unit_numel(cfg, u) ? zero_engine_set_unit(e, u, buf)
                                                     : zero_engine_set_unit_range(e, u, 0, dec_unit_numel(cfg, u), buf);
        if (st) {
            char name[32];
            dec__errorf(err, "initializing unit '%s': %s", dec_unit_name(cfg, u, name, sizeof name),
                         zero_engine_last_error(e));
        }
    }
    free(buf);
    return st;
}

/* ---------------------------------------------------------------- the engine as provider */
/* gather and grad return NULL without a status: the engine's message says what went wrong, and
 * the pass reports ZERO_ERR_STATE with it. */
static const float *eng_gather(dec_model *m, void *ctx, int unit) {
    zero_engine *e = ctx;
    const float *p = zero_engine_gather(e, unit);
    if (!p) {
        char name[32];
        dec__fail(m, ZERO_ERR_STATE, "gathering unit '%s': %s",
                   dec_unit_name(dec_model_config(m), unit, name, sizeof name), zero_engine_last_error(e));
    }
    return p;
}

static float *eng_grad(dec_model *m, void *ctx, int unit) {
    zero_engine *e = ctx;
    float *g = zero_engine_grad(e, unit);
    if (!g) {
        char name[32];
        dec__fail(m, ZERO_ERR_STATE, "gradient buffer of unit '%s': %s",
                   dec_unit_name(dec_model_config(m), unit, name, sizeof name), zero_engine_last_error(e));
    }
    return g;
}

static zero_status eng_status(dec_model *m, zero_engine *e, zero_status st, const char *what, int unit) {
    if (st) {
        char name[32];
        dec__seterr(m, "%s of unit '%s': %s", what,
                     dec_unit_name(dec_model_config(m), unit, name, sizeof name), zero_engine_last_error(e));
    }
    return st;
}

static zero_status eng_release(dec_model *m, void *ctx, int unit) {
    return eng_status(m, ctx, zero_engine_release(ctx, unit), "release", unit);
}

static zero_status eng_grad_ready(dec_model *m, void *ctx, int unit) {
    return eng_status(m, ctx, zero_engine_grad_ready(ctx, unit), "grad_ready", unit);
}

static zero_status eng_progress(dec_model *m, void *ctx) {
    zero_status st = zero_engine_progress(ctx);
    if (st) dec__seterr(m, "%s", zero_engine_last_error(ctx));
    return st;
}

static zero_status eng_gather_parts(dec_model *m, void *ctx, int unit, zero_unit_parts *out) {
    return eng_status(m, ctx, zero_engine_gather_parts(ctx, unit, out), "gather", unit);
}

/* The frozen place of the tensor at view offset `offset` of `unit`: the parameters are in unit
 * order and, inside one, in view order (a binary search over them). */
static zero_status eng_frozen_place(dec_model *m, void *ctx, int unit, uint64_t offset, uint64_t *slot, zero_qformat *fmt) {
    zero_engine *e = ctx;
    int lo = 0, hi = zero_engine_num_params(e);
    zero_param_info pi;
    while (lo < hi) {
        const int mid = lo + (hi - lo) / 2;
        zero_engine_param_info(e, mid, &pi);
        if (pi.unit < unit || (pi.unit == unit && pi.offset < offset)) lo = mid + 1;
        else hi = mid;
    }
    if (lo >= zero_engine_num_params(e) || zero_engine_param_info(e, lo, &pi) || pi.unit != unit ||
        pi.offset != offset || pi.frozen_offset == UINT64_MAX) {
        dec__seterr(m, "unit %d: no frozen parameter starts at element %llu", unit, (unsigned long long)offset);
        return ZERO_ERR_STATE;
    }
    *slot = pi.frozen_offset;
    *fmt = pi.format;
    return ZERO_OK;
}

/* The engine as the pass's provider, the products set for its working precision; where they are
 * bf16 the pass reads the units' parts as they are kept (gather_parts). */
static dec__units eng_units(dec_model *m, zero_engine *e) {
    dec__matmul_for_engine(m, zero_engine_config(e)->precision);
    const zero_config *c = zero_engine_config(e);
    dec__units u = {eng_gather, eng_release, eng_grad, eng_grad_ready, e, eng_progress, eng_gather_parts,
                    zero_config_base_format(c) != ZERO_QFMT_NONE ? eng_frozen_place : NULL,
                    c->frozen_dtype == ZERO_DTYPE_COUNT ? c->precision : c->frozen_dtype};
    return u;
}

static zero_status check_engine(dec_model *m, zero_engine *e) {
    const dec_config *c = dec_model_config(m);
    if (!e || zero_engine_num_units(e) != dec_num_units(c)) {
        dec__seterr(m, "engine has %d units: expected the %d of this model (dec_engine_register)",
                     e ? zero_engine_num_units(e) : 0, dec_num_units(c));
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

zero_status dec_engine_micro_batch(dec_model *m, zero_engine *e, const int32_t *tokens,
                                   const int32_t *targets, int B, int T, double denom, float *loss) {
    zero_status st = check_engine(m, e);
    if (st) return st;
    if (!tokens || !targets) {
        dec__seterr(m, "micro_batch needs tokens and targets (got NULL)");
        return ZERO_ERR_INVALID_ARG;
    }
    /* The engine averages the gradients over world * grad_accum micro-batches: a micro-batch's
     * share of the global sum / denom is its sum / (denom / (world * grad_accum)) after that. */
    const dec__units u = eng_units(m, e);
    const double per = (double)zero_comm_size(zero_engine_comm(e)) * (double)zero_engine_config(e)->grad_accum;
    dec__pass p = {tokens, targets, B, T, 1, (float)zero_engine_loss_scale(e), denom > 0 ? denom / per : 0.0, loss,
                   NULL, NULL, 0};
    return dec__run(m, &u, &p);
}

zero_status dec_engine_eval(dec_model *m, zero_engine *e, const int32_t *tokens,
                             const int32_t *targets, int B, int T, float *loss) {
    zero_status st = check_engine(m, e);
    if (st) return st;
    if (!tokens || !targets) {
        dec__seterr(m, "eval needs tokens and targets (got NULL)");
        return ZERO_ERR_INVALID_ARG;
    }
    const dec__units u = eng_units(m, e);
    dec__pass p = {tokens, targets, B, T, 0, 1.0f, 0.0, loss, NULL, NULL, 0};
    return dec__run(m, &u, &p);
}

zero_status dec_engine_locate_overflow(dec_model *m, zero_engine *e, const int32_t *tokens, int B, int T,
                                       zero_error *err) {
    zero_status st = check_engine(m, e);
    if (!st && !tokens) {
        dec__seterr(m, "locate_overflow needs tokens (got NULL)");
        st = ZERO_ERR_INVALID_ARG;
    }
    if (!st) {
        const dec__units u = eng_units(m, e);
        const dec__pass p = {tokens, NULL, B, T, 0, 1.0f, 0.0, NULL, NULL, NULL, 0};
        st = dec__run_probe(m, &u, &p);
    }
    if (st) dec__errorf(err, "%s", dec_last_error(m));
    return st;
}

zero_status dec_engine_generate(dec_model *m, zero_engine *e, const int32_t *prompt, int n_prompt,
                                 int n_new, const dec_sampling *s, int32_t *out) {
    zero_status st = check_engine(m, e);
    if (st) return st;
    const dec__units u = eng_units(m, e);
    return dec__generate(m, &u, prompt, n_prompt, n_new, s, out);
}
