/* The objectives the loop calls (trainer.h, trn_objective): the causal LM (every counted target's
 * cross-entropy, its mean over the global batch; deterministic runs sum it exactly), DPO and ORPO
 * on preference pairs (docs/MODEL.md, "Preference tuning"). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/lora.h"
#include "trainer/internal.h"

/* ------------------------------------------------------------------ causal LM */

/* Deterministic mode: a sum over sequences that is the same whatever the ranks' shares. Each term
 * is rounded once to a multiple of 2^-bits (a loss of a few units keeps some 50 bits) and the
 * integers are summed, which is associative; acc[1] counts the terms that did not fit. */
#define DET_LOSS_BITS 32 /* a step's terms l_a = (sequence's loss sum) / (global count / G): < 2^30 */
#define DET_VAL_BITS  24 /* validation terms: a sequence's mean loss times its count: < 2^38 */
static void det_add(int64_t acc[2], double x, int bits) {
    const double q = ldexp(x, bits);
    if (!isfinite(q) || fabs(q) >= 0x1p62) acc[1]++;
    else acc[0] += llrint(q);
}

/* One engine micro-batch of n sequences of the session's length: the forward and backward pass
 * (the loss over `denom`; traced when `traced`), then the engine told it is done. */
static zero_status backward_pass(trn_session *t, const int32_t *in, const int32_t *tg, int n, double denom, int traced,
                                 float *loss) {
    const double tc = zero_now();
    if (dec_engine_micro_batch(t->s.model, t->s.engine, in, tg, n, t->T, denom, loss) != ZERO_OK)
        return trn__fail(t, "forward/backward", zero_engine_last_error(t->s.engine));
    if (traced) zero_trace_span(ZERO_TRACE_COMPUTE, "forward+backward", tc, zero_now());
    if (zero_engine_micro_batch_done(t->s.engine) != ZERO_OK)
        return trn__fail(t, "micro-batch", zero_engine_last_error(t->s.engine));
    return ZERO_OK;
}

/* Deterministic mode: the step's K micro-batches of B sequences as B*K/A micro-batches of A
 * sequences each (the engine's atoms, A = deterministic_atom; its gradient_accumulation_steps is
 * B*K/A), and the step's loss summed exactly over every atom of every rank: *loss is the same for
 * any world size. */
static zero_status det_micro_batches(trn_session *t, int64_t total, double *loss) {
    const int B = t->B, K = t->K, T = t->T, A = t->s.cfg->deterministic_atom;
    int64_t acc[2] = {0, 0}, all[2];
    for (int k = 0; k < K; k++)
        for (int a = 0; a < B; a += A) {
            const size_t at = ((size_t)k * B + (size_t)a) * T;
            float l;
            trn__set_docs(t, at);
            const zero_status st = backward_pass(t, t->inputs + at, t->targets + at, A, (double)total, 1, &l);
            if (st != ZERO_OK) return st;
            det_add(acc, l, DET_LOSS_BITS);
        }
    if (zero_comm_all_reduce(t->s.comm, acc, all, 2, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
        return trn__fail(t, "the step's loss", zero_comm_last_error(t->s.comm));
    /* l_a is the atom's share of the global sum / count times the number of atoms, G / A: the
     * loss is their mean */
    *loss = all[1] ? NAN : ldexp((double)all[0], -DET_LOSS_BITS) / ((double)t->G / (double)A);
    return ZERO_OK;
}

static zero_status lm_micro_batches(trn_session *t, int64_t step, int64_t total, double *loss) {
    if (t->s.cfg->deterministic) return det_micro_batches(t, total, loss);
    const int B = t->B, K = t->K, T = t->T;
    *loss = 0;
    for (int k = 0; k < K; k++) {
        const size_t at = (size_t)k * B * T;
        float l;
        if (t->s.lora) dec_lora_set_key(t->s.model, trn_lora_key(step, k, t->rank));
        trn__set_docs(t, at);
        const zero_status st = backward_pass(t, t->inputs + at, t->targets + at, B, (double)total, 1, &l);
        if (st != ZERO_OK) return st;
        *loss += l / K;
    }
    return ZERO_OK;
}

/* Mean validation loss over `nb` batches of G sequences (every rank its share): the mean over
 * every counted target of the batches, whatever the number of ranks. */
static zero_status lm_validate(trn_session *t, int64_t nb, double *out) {
    const int B = t->B, K = t->K, T = t->T;
    zero_error err = {{0}};
    dec_data *vd = trn__val_source(t);
    double sum = 0;
    int64_t counted = 0, dsum[2] = {0, 0};
    for (int64_t b = 0; b < nb; b++)
        for (int k = 0; k < K; k++) {
            int32_t *vdocs = t->docs && dec_data_has_docs(vd) ? t->docs : NULL;
            if (dec_data_batch(vd, DEC_SPLIT_VAL, t->s.seed, b, t->G, dec_data_first(t->rank, B, K, k), B, T, t->inputs,
                               t->targets, vdocs, &err) != ZERO_OK)
                return trn__fail(t, "validation data", err.msg);
            if (t->s.cfg->deterministic) { /* one sequence at a time, summed exactly (det_add) */
                for (int a = 0; a < B; a++) {
                    const int32_t *in = t->inputs + (size_t)a * T, *tg = t->targets + (size_t)a * T;
                    float l;
                    dec_set_docs(t->s.model, vdocs ? vdocs + (size_t)a * T : NULL);
                    if (dec_engine_eval(t->s.model, t->s.engine, in, tg, 1, T, &l) != ZERO_OK)
                        return trn__fail(t, "validation", zero_engine_last_error(t->s.engine));
                    const int64_t c = dec_count_targets(tg, (size_t)T);
                    if (c) det_add(dsum, (double)l * (double)c, DET_VAL_BITS);
                    counted += c;
                }
                continue;
            }
            float l;
            dec_set_docs(t->s.model, vdocs);
            if (dec_engine_eval(t->s.model, t->s.engine, t->inputs, t->targets, B, T, &l) != ZERO_OK)
                return trn__fail(t, "validation", zero_engine_last_error(t->s.engine));
            const int64_t c = dec_count_targets(t->targets, (size_t)B * T);
            sum += c ? (double)l * (double)c : 0.0; /* the micro-batch's mean times its count */
            counted += c;
        }
    if (t->s.cfg->deterministic) {
        int64_t all[3], mine[3] = {dsum[0], dsum[1], counted};
        if (zero_comm_all_reduce(t->s.comm, mine, all, 3, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
            return trn__fail(t, "validation", zero_comm_last_error(t->s.comm));
        *out = all[2] && !all[1] ? ldexp((double)all[0], -DET_VAL_BITS) / (double)all[2] : NAN;
        return ZERO_OK;
    }
    float mine = (float)sum, total = 0;
    int64_t all = 0;
    if (zero_comm_all_reduce(t->s.comm, &mine, &total, 1, ZERO_DTYPE_FP32, ZERO_OP_SUM) != ZERO_OK ||
        zero_comm_all_reduce(t->s.comm, &counted, &all, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
        return trn__fail(t, "validation", zero_comm_last_error(t->s.comm));
    *out = all ? (double)total / (double)all : NAN;
    return ZERO_OK;
}

/* ---------------------------------------------------------------- preference objectives */

/* out[i] = the sum over the ranks of v[i], in rank order, in double: each rank's values travel as
 * their bits in a slot of their own (the communicator sums integers; one rank writes a slot). */
static int allsum_f64(trn_session *t, const double *v, size_t n, double *out) {
    const size_t W = (size_t)t->world;
    int64_t *mine = calloc(W * n + 1, sizeof *mine), *all = calloc(W * n + 1, sizeof *all);
    int bad = !mine || !all;
    if (!bad) {
        memcpy(mine + (size_t)t->rank * n, v, n * sizeof *v);
        bad = zero_comm_all_reduce(t->s.comm, mine, all, W * n, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK;
    }
    for (size_t i = 0; !bad && i < n; i++) {
        double sum = 0, x;
        for (size_t k = 0; k < W; k++) memcpy(&x, all + k * n + i, sizeof x), sum += x;
        out[i] = sum;
    }
    free(mine), free(all);
    return bad ? -1 : 0;
}

/* The summed log-likelihood of each of the B sequences of the last pass (-its cross-entropy), and
 * the counted targets of each. */
static void seq_stats(trn_session *t, const int32_t *tg, int B, double *ll, double *cnt) {
    const int T = t->T;
    dec_seq_losses(t->s.model, B, T, ll);
    for (int b = 0; b < B; b++) {
        ll[b] = -ll[b];
        cnt[b] = (double)dec_count_targets(tg + (size_t)b * T, (size_t)T);
    }
}

/* The sequences of one pass: deterministic mode passes atoms (whole pairs, the same bits on any
 * number of ranks), else a micro-batch. */
static int pref_pass_size(const trn_session *t) {
    return t->s.cfg->deterministic ? t->s.cfg->deterministic_atom : t->B;
}

/* The reference log-likelihoods of every pair of `d` under the initial weights, into *out (2 per
 * pair, malloc'd). The pairs are dealt to the ranks a micro-batch at a time (each rank's passes
 * are collective at stage 3: every rank makes as many), then summed. */
static zero_status reference_of(trn_session *t, dec_data *d, double **out) {
    const int T = t->T, per = pref_pass_size(t) / 2;
    const uint64_t P = dec_data_num_pairs(d);
    zero_error err = {{0}};
    double *mine = calloc(2 * P + 1, sizeof *mine), ll[2 * 1024] = {0}, cnt[2 * 1024];
    *out = calloc(2 * P + 1, sizeof **out);
    if (!mine || !*out) {
        free(mine);
        return trn__fail(t, "DPO reference", "out of memory for the reference log-likelihoods");
    }
    const uint64_t chunks = (P + (uint64_t)per - 1) / (uint64_t)per,
                   rounds = (chunks + (uint64_t)t->world - 1) / (uint64_t)t->world;
    dec_set_seq_weights(t->s.model, NULL);
    dec_set_docs(t->s.model, NULL);
    for (uint64_t rd = 0; rd < rounds; rd++) {
        const uint64_t ch = rd * (uint64_t)t->world + (uint64_t)t->rank;
        int n = 0;
        for (int i = 0; i < per && ch < chunks && ch * (uint64_t)per + (uint64_t)i < P; i++, n++)
            if (dec_data_pair_rows(d, ch * (uint64_t)per + (uint64_t)i, T, t->inputs + (size_t)2 * i * T,
                                   t->targets + (size_t)2 * i * T, &err) != ZERO_OK) {
                free(mine);
                return trn__fail(t, "DPO reference", err.msg);
            }
        if (!n) { /* no pair left for this rank: a pass without targets keeps the ranks in step */
            for (size_t k = 0; k < (size_t)2 * T; k++) t->inputs[k] = 0, t->targets[k] = -1;
        }
        float l;
        if (dec_engine_eval(t->s.model, t->s.engine, t->inputs, t->targets, n ? 2 * n : 2, T, &l) != ZERO_OK) {
            free(mine);
            return trn__fail(t, "DPO reference", zero_engine_last_error(t->s.engine));
        }
        seq_stats(t, t->targets, 2 * n, ll, cnt);
        for (int i = 0; i < 2 * n; i++) mine[2 * ch * (uint64_t)per + (uint64_t)i] = ll[i];
    }
    /* each pair's values come from the one rank that computed them: their bits summed with zeros */
    const int bad = zero_comm_all_reduce(t->s.comm, mine, *out, 2 * P, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK;
    free(mine);
    return bad ? trn__fail(t, "DPO reference", zero_comm_last_error(t->s.comm)) : ZERO_OK;
}

static int hex_value(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }

/* setup.reference (trn_reference_text's form) into the session's arrays: its pair counts must be
 * the data's, every value a log-likelihood (finite, at most 0). */
static zero_status reference_decode(trn_session *t, const char *text) {
    const uint64_t P = dec_data_num_pairs(t->s.data), V = t->s.val ? dec_data_num_pairs(t->s.val) : 0;
    unsigned long long p = 0, v = 0;
    int used = 0;
    char msg[320];
    if (sscanf(text, "%llu %llu %n", &p, &v, &used) != 2 || used == 0)
        return trn__fail(t, "DPO reference", "the recorded reference does not start with its pair counts");
    if (p != P || v != V) {
        snprintf(msg, sizeof msg,
                 "the recorded reference is of %llu training and %llu validation pairs; the data has %llu and %llu "
                 "(the reference is of the data the run started on)",
                 p, v, (unsigned long long)P, (unsigned long long)V);
        return trn__fail(t, "DPO reference", msg);
    }
    const char *h = text + used;
    const size_t n = 2 * (size_t)(P + V);
    if (strlen(h) != 16 * n) return trn__fail(t, "DPO reference", "the recorded reference is cut short or too long");
    t->ref = calloc(2 * P + 1, sizeof *t->ref);
    t->val_ref = V ? calloc(2 * V + 1, sizeof *t->val_ref) : NULL;
    if (!t->ref || (V && !t->val_ref)) return trn__fail(t, "DPO reference", "out of memory");
    for (size_t i = 0; i < n; i++) {
        uint64_t bits = 0;
        for (int k = 0; k < 16; k++) {
            const int d = hex_value(h[16 * i + (size_t)k]);
            if (d < 0) return trn__fail(t, "DPO reference", "the recorded reference holds a character that is not hex");
            bits = bits << 4 | (uint64_t)d;
        }
        double x;
        memcpy(&x, &bits, sizeof x);
        if (!(x <= 0) || !isfinite(x)) {
            snprintf(msg, sizeof msg,
                     "the recorded reference's value %zu is %g: expected a log-likelihood (finite, <= 0)", i, x);
            return trn__fail(t, "DPO reference", msg);
        }
        if (i < 2 * P) t->ref[i] = x;
        else t->val_ref[i - 2 * P] = x;
    }
    return ZERO_OK;
}

/* DPO's reference: every pair's log-likelihoods under the initial weights, before the first step
 * (TRL's precompute_ref_log_probs; with LoRA the initial model is the base: B starts at 0), of the
 * training data (its held-out split included) and of separate validation data. */
static zero_status dpo_prepare(trn_session *t) {
    if (t->s.reference) return reference_decode(t, t->s.reference);
    zero_status s = reference_of(t, t->s.data, &t->ref);
    if (s == ZERO_OK && t->s.val) s = reference_of(t, t->s.val, &t->val_ref);
    return s;
}

char *trn_reference_text(const trn_session *t) {
    if (!t->ref) return NULL;
    const uint64_t P = dec_data_num_pairs(t->s.data), V = t->val_ref ? dec_data_num_pairs(t->s.val) : 0;
    const size_t n = 2 * (size_t)(P + V);
    char *out = malloc(48 + 16 * n), *p = out;
    if (!out) return NULL;
    p += sprintf(p, "%llu %llu ", (unsigned long long)P, (unsigned long long)V);
    for (size_t i = 0; i < n; i++) {
        const double x = i < 2 * P ? t->ref[i] : t->val_ref[i - 2 * P];
        uint64_t bits;
        memcpy(&bits, &x, sizeof bits);
        p += sprintf(p, "%016llx", (unsigned long long)bits);
    }
    return out;
}

/* The last counted target of a sequence (its EOS), or -1: every token up to it is the sequence's,
 * prompt included. */
static int last_target(const int32_t *tg, int T) {
    int last = -1;
    for (int i = 0; i < T; i++)
        if (tg[i] >= 0) last = i;
    return last;
}

/* The passes of Bh sequences (Bh / 2 pairs: chosen, rejected, ...) of batch `step` of a split,
 * the first of them the batch's sequence `first`: the policy's log-likelihoods (a forward pass),
 * the objective's weights; with backward, the weighted pass that adds the gradient (one engine
 * micro-batch). Adds the pairs' sums into *sums. */
static zero_status pref_pass(trn_session *t, dec_split split, int64_t step, int64_t first, int Bh, int32_t *in,
                             int32_t *tg, double tokens, int backward, dec_pref_sums *sums) {
    const int T = t->T, n = Bh / 2;
    const int orpo = t->s.objective == DEC_OBJ_ORPO, nseq = orpo ? 3 * n : Bh;
    zero_error err = {{0}};
    double ll[3 * 1024] = {0}, cnt[3 * 1024] = {0}, lc[1024], lr[1024], rc[1024], rr[1024], nc[1024], nr[1024];
    float wc[1024], wr[1024], wall[1024], w[3 * 1024];
    float l;
    if (orpo) { /* ORPO's NLL is over the whole chosen sequences: each again, every token a target */
        memcpy(t->xin, in, (size_t)Bh * T * sizeof *in);
        memcpy(t->xtg, tg, (size_t)Bh * T * sizeof *tg);
        for (int i = 0; i < n; i++) {
            const int32_t *ci = in + (size_t)2 * i * T, *ct = tg + (size_t)2 * i * T;
            int32_t *xi = t->xin + (size_t)(Bh + i) * T, *xt = t->xtg + (size_t)(Bh + i) * T;
            const int last = last_target(ct, T);
            memcpy(xi, ci, (size_t)T * sizeof *xi);
            for (int j = 0; j < T; j++) xt[j] = j < last ? ci[j + 1] : j == last ? ct[j] : -1;
        }
        in = t->xin, tg = t->xtg;
    }
    dec_set_seq_weights(t->s.model, NULL);
    if (dec_engine_eval(t->s.model, t->s.engine, in, tg, nseq, T, &l) != ZERO_OK)
        return trn__fail(t, "preference pass", zero_engine_last_error(t->s.engine));
    seq_stats(t, tg, nseq, ll, cnt);
    /* the pairs and their reference: validation data of its own has its own */
    dec_data *d = split == DEC_SPLIT_VAL ? trn__val_source(t) : t->s.data;
    const double *ref = d == t->s.data ? t->ref : t->val_ref;
    for (int i = 0; i < n; i++) {
        lc[i] = ll[2 * i], lr[i] = ll[2 * i + 1], nc[i] = cnt[2 * i], nr[i] = cnt[2 * i + 1];
        if (ref) {
            uint64_t p;
            if (dec_data_pair_of(d, split, t->s.seed, step, t->G, first + 2 * i, &p, &err) != ZERO_OK)
                return trn__fail(t, "preference pairs", err.msg);
            rc[i] = ref[2 * p], rr[i] = ref[2 * p + 1];
        }
    }
    const dec_pref_opts po = {t->s.objective, t->s.beta, t->s.label_smoothing};
    if (dec_pref_weights(&po, n, lc, lr, rc, rr, nc, nr, orpo ? ll + Bh : NULL, (double)t->G / 2, tokens, wc, wr, wall,
                         sums) != ZERO_OK)
        return trn__fail(t, "preference objective", "a completion without a counted token, or a probability of 1");
    if (!backward) return ZERO_OK;
    for (int i = 0; i < n; i++) {
        w[2 * i] = wc[i], w[2 * i + 1] = wr[i];
        if (orpo) w[Bh + i] = wall[i];
    }
    dec_set_seq_weights(t->s.model, w);
    /* the loss is sum w CE, the weights hold the global batch's mean: a denominator of 1 (the
     * caller traces the whole micro-batch, its forward pass with it) */
    const zero_status st = backward_pass(t, in, tg, nseq, 1.0, 0, &l);
    dec_set_seq_weights(t->s.model, NULL);
    return st;
}

/* The chosen sequences' tokens of the step's micro-batches (every token, the prompt's included),
 * all ranks: ORPO's NLL is their mean. */
static zero_status chosen_tokens(trn_session *t, const int32_t *tg, int nseq, double *out) {
    int64_t mine = 0, all = 0;
    for (int s = 0; s < nseq; s += 2) mine += last_target(tg + (size_t)s * t->T, t->T) + 1;
    if (zero_comm_all_reduce(t->s.comm, &mine, &all, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
        return trn__fail(t, "counting the targets", zero_comm_last_error(t->s.comm));
    *out = (double)all;
    return ZERO_OK;
}

/* A step's (or a validation batch's) preference sums over the ranks. Deterministic mode: each
 * atom's sums (the same bits whatever the ranks' shares: an atom is passed alone) were rounded
 * into acc (det_add), whose integers sum exactly; else the ranks' double sums, in rank order. */
enum { PREF_FIELDS = 6 };
static void pref_fields(const dec_pref_sums *s, double v[PREF_FIELDS]) {
    v[0] = s->loss, v[1] = s->nll, v[2] = s->chosen, v[3] = s->rejected, v[4] = s->margin, v[5] = s->correct;
}
static void pref_det_add(int64_t acc[2 * PREF_FIELDS], const dec_pref_sums *s) {
    double v[PREF_FIELDS];
    pref_fields(s, v);
    for (int f = 0; f < PREF_FIELDS; f++) det_add(acc + 2 * f, v[f], DET_LOSS_BITS);
}

/* The mean loss of the global sums: the preference term's mean over the pairs, plus ORPO's NLL
 * over the chosen tokens. */
static zero_status pref_reduce(trn_session *t, dec_pref_sums *s, const int64_t *acc, double tokens, double pairs,
                               double *loss) {
    double v[PREF_FIELDS], g[PREF_FIELDS];
    if (acc) {
        int64_t all[2 * PREF_FIELDS];
        if (zero_comm_all_reduce(t->s.comm, acc, all, 2 * PREF_FIELDS, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
            return trn__fail(t, "the preference loss", zero_comm_last_error(t->s.comm));
        for (int f = 0; f < PREF_FIELDS; f++) g[f] = all[2 * f + 1] ? NAN : ldexp((double)all[2 * f], -DET_LOSS_BITS);
    } else {
        pref_fields(s, v);
        if (allsum_f64(t, v, PREF_FIELDS, g))
            return trn__fail(t, "the preference loss", zero_comm_last_error(t->s.comm));
    }
    *s = (dec_pref_sums){g[0], g[1], g[2], g[3], g[4], g[5]};
    *loss = s->loss / pairs + (t->s.objective == DEC_OBJ_ORPO ? s->nll / tokens : 0.0);
    return ZERO_OK;
}

/* Micro-batch k of the step's (or validation batch's) buffers, pass by pass; deterministic mode
 * rounds each pass's sums into acc. */
static zero_status pref_micro_batch(trn_session *t, dec_split split, int64_t step, int k, double tokens, int backward,
                                    dec_pref_sums *sums, int64_t *acc) {
    const int B = t->B, T = t->T, A = pref_pass_size(t);
    const int64_t first = dec_data_first(t->rank, B, t->K, k);
    for (int a = 0; a < B; a += A) {
        const size_t at = ((size_t)k * B + (size_t)a) * T;
        dec_pref_sums one = {0};
        zero_status s = pref_pass(t, split, step, first + a, A, t->inputs + at, t->targets + at, tokens, backward,
                                  acc ? &one : sums);
        if (s != ZERO_OK) return s;
        if (acc) pref_det_add(acc, &one);
    }
    return ZERO_OK;
}

static zero_status pref_micro_batches(trn_session *t, int64_t step, int64_t total, double *loss) {
    (void)total; /* the objective's weights hold the global batch's means */
    const int B = t->B, K = t->K;
    int64_t acc[2 * PREF_FIELDS] = {0}, *det = t->s.cfg->deterministic ? acc : NULL;
    double tokens = 0;
    if (chosen_tokens(t, t->targets, B * K, &tokens) != ZERO_OK) return ZERO_ERR_INTERNAL;
    memset(&t->pref, 0, sizeof t->pref);
    for (int k = 0; k < K; k++) {
        if (t->s.lora && !det) dec_lora_set_key(t->s.model, trn_lora_key(step, k, t->rank));
        const double tc = zero_now();
        if (pref_micro_batch(t, DEC_SPLIT_TRAIN, step, k, tokens, 1, &t->pref, det) != ZERO_OK)
            return ZERO_ERR_INTERNAL;
        zero_trace_span(ZERO_TRACE_COMPUTE, "forward+backward", tc, zero_now());
    }
    t->pref_pairs = (double)t->G / 2;
    return pref_reduce(t, &t->pref, det, tokens, t->pref_pairs, loss);
}

/* The preference loss of the validation pairs. */
static zero_status pref_validate(trn_session *t, int64_t nb, double *out) {
    const int B = t->B, K = t->K, T = t->T;
    zero_error err = {{0}};
    dec_data *vd = trn__val_source(t);
    dec_pref_sums sums = {0};
    int64_t acc[2 * PREF_FIELDS] = {0}, *det = t->s.cfg->deterministic ? acc : NULL;
    double tokens = 0, all_tokens = 0;
    for (int64_t b = 0; b < nb; b++) {
        for (int k = 0; k < K; k++) {
            int32_t *in = t->inputs + (size_t)k * B * T, *tg = t->targets + (size_t)k * B * T;
            if (dec_data_batch(vd, DEC_SPLIT_VAL, t->s.seed, b, t->G, dec_data_first(t->rank, B, K, k), B, T, in, tg,
                               NULL, &err) != ZERO_OK)
                return trn__fail(t, "validation data", err.msg);
        }
        if (chosen_tokens(t, t->targets, B * K, &tokens) != ZERO_OK) return ZERO_ERR_INTERNAL;
        all_tokens += tokens;
        for (int k = 0; k < K; k++)
            if (pref_micro_batch(t, DEC_SPLIT_VAL, b, k, tokens, 0, &sums, det) != ZERO_OK) return ZERO_ERR_INTERNAL;
    }
    return pref_reduce(t, &sums, det, all_tokens > 0 ? all_tokens : 1, (double)t->G / 2 * (double)(nb > 0 ? nb : 1),
                       out);
}

static const trn_objective objectives[] = {
    {DEC_OBJ_LM, "lm", 1, 1, NULL, lm_micro_batches, lm_validate},
    {DEC_OBJ_DPO, "dpo", 1, 1, dpo_prepare, pref_micro_batches, pref_validate},
    {DEC_OBJ_ORPO, "orpo", 3, 2, NULL, pref_micro_batches, pref_validate},
};

const trn_objective *trn_objective_of(dec_objective id) {
    for (size_t i = 0; i < sizeof objectives / sizeof objectives[0]; i++)
        if (objectives[i].id == id) return &objectives[i];
    return NULL;
}
