/* The training loop (trainer.h): a step's data with the rule of decoder/data.h, the objective's
 * micro-batches, the engine's step (again when a deterministic step's gradients outgrew their
 * grids), validation and checkpoints when due, and the judgement of a run that trains nothing. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainer/internal.h"
#include "zero/offload.h"

void trn_setup_default(trn_setup *s) {
    memset(s, 0, sizeof *s);
    s->objective = DEC_OBJ_LM;
    s->beta = 0.1;
    s->val_batches = 8;
}

int trn_model_batch(const trn_setup *s) {
    const trn_objective *o = trn_objective_of(s->objective);
    const int B = s->cfg->deterministic ? s->cfg->deterministic_atom : (int)s->cfg->micro_batch;
    return o ? B / o->seqs_den * o->seqs_num : B;
}

uint64_t trn_lora_key(int64_t step, int k, int rank) {
    return ((uint64_t)step << 32) ^ ((uint64_t)(uint32_t)rank << 12) ^ (uint64_t)(uint32_t)k;
}

zero_status trn__fail(trn_session *t, const char *what, const char *msg) {
    snprintf(t->err, sizeof t->err, "rank %d: %s: %s", t->rank, what, msg);
    return ZERO_ERR_INTERNAL;
}

void trn__set_docs(trn_session *t, size_t at) { dec_set_docs(t->s.model, t->docs ? t->docs + at : NULL); }

dec_data *trn__val_source(const trn_session *t) { return t->s.val ? t->s.val : t->s.data; }

void trn__eval_add(trn_session *t, const zero_comm_counters *before, const zero_comm_counters *after) {
    for (int k = 0; k < ZERO_COLL_COUNT; k++) t->eval.bytes[k] += after->bytes[k] - before->bytes[k];
    for (int p = 0; p < ZERO_COMM_PATH_COUNT; p++)
        t->eval.path_bytes[p] += after->path_bytes[p] - before->path_bytes[p];
}

static zero_status setup_error(zero_error *err, const char *msg) {
    snprintf(err->msg, sizeof err->msg, "%s", msg);
    return ZERO_ERR_INVALID_ARG;
}

zero_status trn_create(trn_session **out, const trn_setup *s, zero_error *err) {
    *out = NULL;
    if (!s->comm || !s->engine || !s->model || !s->data || !s->cfg || s->T < 1)
        return setup_error(err,
                           "trainer: a communicator, an engine, a model, data, a configuration and T >= 1 are needed");
    const trn_objective *obj = trn_objective_of(s->objective);
    if (!obj) return setup_error(err, "trainer: unknown objective");
    const int B = (int)s->cfg->micro_batch, K = (int)s->cfg->grad_accum;
    if (B < 1 || K < 1) return setup_error(err, "trainer: micro_batch and grad_accum must be at least 1");
    if (s->objective != DEC_OBJ_LM) {
        if (!dec_data_pairs(s->data) || (s->val && !dec_data_pairs(s->val)))
            return setup_error(err, "trainer: DPO and ORPO need preference pairs (dec_data_opts.pairs)");
        if (B % 2 || B > 2048) /* the objective's per-pass arrays (objective.c) hold 1024 pairs */
            return setup_error(err, "trainer: a preference micro-batch is an even number of sequences, at most 2048");
        if (s->cfg->deterministic && s->cfg->deterministic_atom % 2)
            return setup_error(err, "trainer: deterministic DPO and ORPO pass whole pairs: an even deterministic_atom");
    }
    trn_session *t = calloc(1, sizeof *t);
    if (!t) return setup_error(err, "trainer: out of memory");
    t->s = *s;
    t->obj = obj;
    t->rank = zero_comm_rank(s->comm);
    t->world = zero_comm_size(s->comm);
    t->B = B, t->K = K, t->T = s->T;
    t->G = (int64_t)t->world * B * K;
    const size_t n = (size_t)B * (size_t)s->T * (size_t)K;
    t->inputs = malloc(n * sizeof *t->inputs);
    t->targets = malloc(n * sizeof *t->targets);
    int bad = !t->inputs || !t->targets;
    if (s->docs) bad |= !(t->docs = malloc(n * sizeof *t->docs));
    if (obj->seqs_num != obj->seqs_den) {
        const size_t x = (size_t)B / (size_t)obj->seqs_den * (size_t)obj->seqs_num * (size_t)s->T;
        bad |= !(t->xin = malloc(x * sizeof *t->xin)) || !(t->xtg = malloc(x * sizeof *t->xtg));
    }
    if (bad) {
        trn_free(t);
        return setup_error(err, "trainer: out of memory");
    }
    const zero_config *c = zero_engine_config(s->engine);
    t->offload = c->offload_optimizer.device == ZERO_OFFLOAD_NVME || c->offload_param.device == ZERO_OFFLOAD_NVME;
    *out = t;
    return ZERO_OK;
}

void trn_free(trn_session *t) {
    if (!t) return;
    free(t->inputs), free(t->targets), free(t->docs), free(t->ref), free(t->val_ref), free(t->xin), free(t->xtg);
    free(t);
}

const char *trn_last_error(const trn_session *t) { return t->err; }
int trn_error_quiet(const trn_session *t) { return t->quiet; }
void trn_eval_counters(const trn_session *t, zero_comm_counters *out) { *out = t->eval; }
int64_t trn_global_batch(const trn_session *t) { return t->G; }

int trn_has_validation(const trn_session *t) { return dec_data_val_batches(trn__val_source(t), t->G, t->T) > 0; }

/* NVMe offload since the last call: the largest per-rank bytes read, bytes written and µs of I/O
 * wait (out may be NULL: only restart the count). */
static int offload_delta(trn_session *t, int64_t out[3]) {
    zero_engine_offload_info in;
    zero_engine_offload_info_get(t->s.engine, &in);
    const int64_t now[3] = {(int64_t)in.io.bytes_read, (int64_t)in.io.bytes_written, (int64_t)(in.io.io_wait_s * 1e6)};
    int64_t mine[3];
    for (int k = 0; k < 3; k++) {
        mine[k] = now[k] - t->off_prev[k];
        t->off_prev[k] = now[k];
    }
    if (!out) return 0;
    return zero_comm_all_reduce(t->s.comm, mine, out, 3, ZERO_DTYPE_INT64, ZERO_OP_MAX) == ZERO_OK ? 0 : -1;
}

static double mean_over_ranks(trn_session *t, double x) {
    float mine = (float)x, mean = 0;
    if (zero_comm_all_reduce(t->s.comm, &mine, &mean, 1, ZERO_DTYPE_FP32, ZERO_OP_AVG) != ZERO_OK) return NAN;
    return mean;
}

zero_status trn_step(trn_session *t, trn_step_report *out) {
    const int B = t->B, K = t->K, T = t->T;
    const int64_t step = zero_engine_step_count(t->s.engine);
    zero_error err = {{0}};
    memset(out, 0, sizeof *out);
    const double t0 = zero_now();
    /* The step's tokens first: the loss is the mean over the counted targets of the whole global
     * batch (every rank's every micro-batch), whatever the number of ranks. */
    int64_t counted = 0, total = 0;
    for (int k = 0; k < K; k++) {
        int32_t *in = t->inputs + (size_t)k * B * T, *tg = t->targets + (size_t)k * B * T;
        if (dec_data_batch(t->s.data, DEC_SPLIT_TRAIN, t->s.seed, step, t->G, dec_data_first(t->rank, B, K, k), B, T,
                           in, tg, t->docs ? t->docs + (size_t)k * B * T : NULL, &err) != ZERO_OK)
            return trn__fail(t, "training data", err.msg);
        counted += dec_count_targets(tg, (size_t)B * T);
    }
    if (zero_comm_all_reduce(t->s.comm, &counted, &total, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
        return trn__fail(t, "counting the targets", zero_comm_last_error(t->s.comm));
    double loss = 0;
    for (;;) {
        zero_status s = t->obj->micro_batches(t, step, total, &loss);
        if (s != ZERO_OK) return s;
        const double ts = zero_now();
        if (zero_engine_step(t->s.engine, &out->st) != ZERO_OK)
            return trn__fail(t, "step", zero_engine_last_error(t->s.engine));
        zero_trace_span(ZERO_TRACE_COMPUTE, out->st.redo ? "optimizer step (redo)" : "optimizer step", ts, zero_now());
        if (!out->st.redo) break;
        if (out->redone++) /* the same atoms gave other gradients: the grids cannot settle */
            return trn__fail(t, "step", "deterministic: the step's gradients outgrew their grids twice in a row");
    }
    out->seconds = zero_now() - t0;
    out->step = step + 1;
    out->tokens = t->G * T;
    out->val = NAN;
    if (t->offload) {
        out->has_io = 1;
        if (offload_delta(t, out->io)) return trn__fail(t, "offload report", zero_comm_last_error(t->s.comm));
    }
    out->loss = t->s.cfg->deterministic ? loss : mean_over_ranks(t, loss);
    if (t->obj->id != DEC_OBJ_LM) {
        out->pref = 1;
        out->sums = t->pref;
        out->pairs = t->pref_pairs;
    }
    return ZERO_OK;
}

zero_status trn_validate(trn_session *t, double *out) {
    int64_t nb = dec_data_val_batches(trn__val_source(t), t->G, t->T);
    if (nb > t->s.val_batches) nb = t->s.val_batches;
    zero_comm_counters before, after;
    zero_engine_comm_counters(t->s.engine, &before);
    const double tv = zero_now();
    const zero_status s = t->obj->validate(t, nb, out);
    zero_trace_span(ZERO_TRACE_COMPUTE, "validation", tv, zero_now());
    zero_engine_comm_counters(t->s.engine, &after);
    trn__eval_add(t, &before, &after);
    return s;
}

/* The first step's loss is not finite: the forward pass of this rank's first micro-batch again,
 * with the model's probe, says where it stops being finite (the weights the run started from:
 * the step, its gradients not finite, was skipped). Weights whose forward overflows are refused
 * by the lowest rank that finds it (the others fail quietly); none found: the run goes on and
 * the rules of untrained() judge it. */
static zero_status refuse_overflowing_weights(trn_session *t) {
    const zero_config *c = t->s.cfg;
    const int B = c->deterministic ? c->deterministic_atom : t->B;
    zero_error err = {{0}};
    trn__set_docs(t, 0);
    const zero_status s = dec_engine_locate_overflow(t->s.model, t->s.engine, t->inputs, B, t->T, &err);
    if (s != ZERO_OK && s != ZERO_ERR_FORMAT) return trn__fail(t, "locating the overflow", err.msg);
    const int64_t mine = s == ZERO_ERR_FORMAT ? t->world - t->rank : 0; /* the lowest rank wins the MAX */
    int64_t top = 0;
    if (zero_comm_all_reduce(t->s.comm, &mine, &top, 1, ZERO_DTYPE_INT64, ZERO_OP_MAX) != ZERO_OK)
        return trn__fail(t, "locating the overflow", zero_comm_last_error(t->s.comm));
    if (!top) return ZERO_OK;
    t->quiet = t->world - top != t->rank;
    snprintf(t->err, sizeof t->err,
             "the forward pass of the first batch is not finite: %s: expected weights%s whose forward pass is finite%s",
             err.msg, t->s.weights_from ? t->s.weights_from : "",
             c->precision == ZERO_DTYPE_FP16 ? " (fp16 holds magnitudes up to 65504)" : "");
    return ZERO_ERR_FORMAT;
}

/* A run that trains nothing fails, saying why in `why`; returns 1 then. Judged after every step
 * from the same numbers on every rank: `skipped` steps in a row end at this one, `at_min` of them
 * at the dynamic loss scale's minimum, `applied` steps of this run updated the model, and `last`
 * says this is the run's last step.
 *  - A dynamic fp16 scale that overflows at its minimum `hysteresis` times in a row can come down
 *    no further: DeepSpeed stops such a run ("Current loss scale already at minimum"), at once.
 *    A healthy run does not get there: the scale comes down from 2^16 only until the gradients
 *    fit (--model tiny and small skip no step; a start at 2^32 skips 16 then trains), far above
 *    the default floor of 1, where the unscaled gradients themselves overflow fp16. A floor set
 *    higher is met sooner, as in DeepSpeed, which stops at the first such overflow once the
 *    hysteresis is spent (counting them in a row is never stricter).
 *  - At the last step: no step of this run updated the model (any precision; a dynamic scale
 *    still coming down counts too: nothing was trained), or the loss is not finite. */
static int untrained(const trn_session *t, const zero_step_stats *st, int64_t skipped, int64_t at_min, int64_t applied,
                     int64_t step, int last, double loss, char *why, size_t cap) {
    const zero_config *c = t->s.cfg;
    const zero_loss_scaler *sc = zero_engine_scaler(t->s.engine);
    const double now = zero_engine_loss_scale(t->s.engine);
    if (sc->dynamic && at_min >= sc->hysteresis) {
        char tail[48] = "";
        if (skipped > at_min) snprintf(tail, sizeof tail, ", the last %lld", (long long)at_min);
        snprintf(why, cap,
                 "step %lld: %lld steps in a row overflowed%s at the minimum loss scale %g (fp16.min_loss_scale), "
                 "which can come down no further: nothing is being trained; lower the learning rate (%g)",
                 (long long)step + 1, (long long)skipped, tail, sc->min_scale, st->lr);
        return 1;
    }
    if (!last) return 0;
    if (!applied) { /* then every step of the run was skipped: `skipped` counts them */
        const long long n = (long long)skipped;
        if (c->precision != ZERO_DTYPE_FP16)
            snprintf(why, cap,
                     "every one of the %lld steps of this run was skipped (their gradients were not finite): "
                     "nothing was trained; lower the learning rate (%g)",
                     n, st->lr);
        else if (!sc->dynamic)
            snprintf(why, cap,
                     "every one of the %lld steps of this run overflowed at the static fp16 loss scale %g: "
                     "nothing was trained; lower fp16.loss_scale, or set it to 0 for a dynamic scale",
                     n, sc->scale);
        else
            snprintf(why, cap,
                     "every one of the %lld steps of this run overflowed (the dynamic loss scale came down "
                     "to %g): nothing was trained; run more steps, start the scale lower (fp16.initial_scale_power) "
                     "or lower the learning rate (%g)",
                     n, now, st->lr);
        return 1;
    }
    if (!isfinite(loss)) {
        snprintf(why, cap, "the loss of the last step (%lld) is %s: the model diverged; lower the learning rate (%g)",
                 (long long)step + 1, isnan(loss) ? "NaN" : "infinite", st->lr);
        return 1;
    }
    return 0;
}

/* Saves step `step` (1-based) to setup.save and applies the retention (rank 0). */
static zero_status save(trn_session *t, const trn_hooks *h, int64_t step) {
    const double tw = zero_now();
    if (zero_engine_save(t->s.engine, t->s.save, t->s.save_json) != ZERO_OK)
        return trn__fail(t, "checkpoint", zero_engine_last_error(t->s.engine));
    zero_trace_span(ZERO_TRACE_IO, "save checkpoint", tw, zero_now());
    zero_error perr = {{0}};
    /* the save is done whatever retention finds: what it cannot remove is said, not fatal */
    const int pruned_bad = t->rank == 0 && t->s.save_total_limit &&
                           zero_ckpt_prune(t->s.save, t->s.save_total_limit, NULL, &perr) != ZERO_OK;
    if (h && h->saved) h->saved(h->ctx, step, pruned_bad ? perr.msg : NULL);
    return ZERO_OK;
}

zero_status trn_prepare(trn_session *t) {
    if (t->prepared) return ZERO_OK;
    t->prepared = 1;
    return t->obj->prepare ? t->obj->prepare(t) : ZERO_OK;
}

void trn_set_save_json(trn_session *t, const char *json) { t->s.save_json = json; }

zero_status trn_run(trn_session *t, const trn_hooks *h) {
    if (t->ran) {
        snprintf(t->err, sizeof t->err, "trainer: a session runs once");
        return ZERO_ERR_INVALID_ARG;
    }
    t->ran = 1;
    zero_status s;
    if ((s = trn_prepare(t)) != ZERO_OK) return s;
    const int64_t first_step = zero_engine_step_count(t->s.engine);
    if (t->offload) offload_delta(t, NULL);       /* the initialization's I/O is not a step's */
    int64_t skipped = 0, at_min = 0, applied = 0; /* untrained()'s counts */
    for (int64_t step = first_step; step < t->s.steps; step++) {
        trn_step_report r;
        if ((s = trn_step(t, &r)) != ZERO_OK) return s;
        if (step == first_step && !isfinite(r.loss) && (s = refuse_overflowing_weights(t)) != ZERO_OK) return s;
        const zero_loss_scaler *sc = zero_engine_scaler(t->s.engine);
        skipped = r.st.skipped ? skipped + 1 : 0;
        at_min = r.st.skipped && sc->dynamic && r.st.loss_scale <= sc->min_scale ? at_min + 1 : 0;
        applied += !r.st.skipped;
        const int last = step + 1 == t->s.steps;
        const int stop = untrained(t, &r.st, skipped, at_min, applied, step, last, r.loss, t->err, sizeof t->err);
        r.has_val =
            !stop && ((t->s.val_every > 0 && (step + 1) % t->s.val_every == 0) || last) && trn_has_validation(t);
        if (r.has_val && (s = trn_validate(t, &r.val)) != ZERO_OK) return s;
        /* a run stopped by untrained() does not save: the checkpoints it saved before stay as they are */
        if (t->s.save && !stop && ((t->s.save_every && (step + 1) % t->s.save_every == 0) || last) &&
            (s = save(t, h, step + 1)) != ZERO_OK)
            return s;
        if (t->offload) offload_delta(t, NULL); /* validation and saves are not the step's I/O */
        if (h && h->step && h->step(h->ctx, &r)) {
            t->quiet = 1;
            snprintf(t->err, sizeof t->err, "stopped by the step hook");
            return ZERO_ERR_INTERNAL;
        }
        if (stop) { /* rank 0 says why */
            t->quiet = t->rank != 0;
            return ZERO_ERR_INTERNAL;
        }
    }
    /* steps 0: the initial state, e.g. a model directory as a checkpoint */
    if (t->s.steps == 0 && t->s.save && (s = save(t, h, 0)) != ZERO_OK) return s;
    return ZERO_OK;
}
