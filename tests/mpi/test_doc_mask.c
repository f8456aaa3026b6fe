/* Document-masked packing (dec_set_docs): examples packed into rows, each attending to itself only
 * with its positions from 0, compute what each computes alone in a row of its own. On Hugging Face
 * fixtures (GPT-2's learned positions; RoPE with GQA, per-head q/k norms, sliding windows with
 * soft-capping, Gemma 3's local table), through the engine on this MPI world at stages 0 and 3:
 *  - each example's loss in the packed rows (the other examples' targets not counted) equals its
 *    loss alone in a row, within 1e-6 relative; without the document mask a later example's loss
 *    differs (the test can fail);
 *  - the gradient norm of one step over the packed rows, split over the ranks, equals the one of
 *    the same examples one per row on one rank at stage 0 (the backward: attention, RoPE and the
 *    position table through the documents), within 1e-5 relative.
 * Runs on 1-4 ranks (12 packed rows split over them). */
#include <math.h>
#include <stdint.h>

#include "decoder_fixture.h"

enum { T = 16, ROWS = 12, MAXE = ROWS * T };

typedef struct packed {
    int32_t tok[ROWS * T], tg[ROWS * T], doc[ROWS * T];
    int ex_of[ROWS * T]; /* the example of each position */
    int n_ex, start[MAXE], len[MAXE];
    /* one example a row: E rows, each example at position 0, padding (token 0) without targets */
    int32_t *atok, *atg;
} packed;

static uint64_t rng = 0x5eed;
static uint32_t next_u32(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng >> 33);
}

/* Rows filled with examples of 1 to 9 tokens (a row's last one cut to what is left), their targets
 * the next token within the example (-1 at its last token), and the same examples one per row. */
static void make_batch(packed *p, int V) {
    memset(p, 0, sizeof *p);
    for (int r = 0; r < ROWS; r++)
        for (int t = 0; t < T;) {
            int n = 1 + (int)(next_u32() % 9);
            if (n > T - t) n = T - t;
            const int e = p->n_ex++;
            p->start[e] = r * T + t, p->len[e] = n;
            for (int j = 0; j < n; j++) {
                const int at = r * T + t + j;
                p->tok[at] = (int32_t)(next_u32() % (uint32_t)V);
                p->doc[at] = t;
                p->ex_of[at] = e;
            }
            t += n;
        }
    for (int at = 0; at < ROWS * T; at++) {
        const int e = p->ex_of[at], j = at - p->start[e];
        p->tg[at] = j + 1 < p->len[e] ? p->tok[at + 1] : -1;
    }
    p->atok = calloc((size_t)p->n_ex * T, sizeof *p->atok);
    p->atg = malloc((size_t)p->n_ex * T * sizeof *p->atg);
    for (int i = 0; i < p->n_ex * T; i++) p->atg[i] = -1;
    for (int e = 0; e < p->n_ex; e++)
        for (int j = 0; j < p->len[e]; j++) {
            p->atok[(size_t)e * T + j] = p->tok[p->start[e] + j];
            p->atg[(size_t)e * T + j] = p->tg[p->start[e] + j];
        }
}

/* The mean loss of the targets of example e only, over `rows` rows of tokens (tg's other targets -1). */
static int loss_of(dec_model *m, zero_engine *e, const int32_t *tok, const int32_t *tg, const int *ex_of, int rows,
                   int ex, float *out) {
    int32_t *only = malloc((size_t)rows * T * sizeof *only);
    for (int i = 0; i < rows * T; i++) only[i] = ex_of[i] == ex ? tg[i] : -1;
    const int rc = dec_engine_eval(m, e, tok, only, rows, T, out) != ZERO_OK;
    if (rc) ZT_FAIL("eval: %s", dec_last_error(m));
    free(only);
    return rc;
}

static void per_example(zero_comm *world, const char *name, const zt_golden *g, int stage, double *worst) {
    dec_config c;
    packed *p = malloc(sizeof *p);
    zero_engine *e = zt_fixture_engine(world, name, g, stage, MAXE, 1, &c);
    if (!e) {
        ZT_FAIL("%s: no engine", name);
        free(p);
        return;
    }
    make_batch(p, c.vocab);
    dec_model *m = NULL;
    zero_error err = {{0}};
    if (dec_create(&m, &c, p->n_ex > ROWS ? p->n_ex : ROWS, T, 0, &err)) {
        ZT_FAIL("%s: %s", name, err.msg);
        goto out;
    }
    int *alone_ex = malloc((size_t)p->n_ex * T * sizeof *alone_ex);
    for (int i = 0; i < p->n_ex * T; i++) alone_ex[i] = i / T;
    int counted = 0, differs = 0;
    for (int ex = 0; ex < p->n_ex; ex++) {
        if (p->len[ex] < 2) continue; /* no target */
        float packed_l, alone_l, crossing_l;
        dec_set_docs(m, p->doc);
        if (loss_of(m, e, p->tok, p->tg, p->ex_of, ROWS, ex, &packed_l)) break;
        dec_set_docs(m, NULL);
        if (loss_of(m, e, p->atok, p->atg, alone_ex, p->n_ex, ex, &alone_l)) break;
        if (loss_of(m, e, p->tok, p->tg, p->ex_of, ROWS, ex, &crossing_l)) break;
        const double rel = fabs((double)packed_l - alone_l) / fabs((double)alone_l);
        ZT_CHECKF(rel <= 1e-6, "%s stage %d: example %d (%d tokens at %d): packed loss %.9g, alone %.9g (rel %.3g)",
                  name, stage, ex, p->len[ex], p->start[ex] % T, packed_l, alone_l, rel);
        *worst = fmax(*worst, rel);
        counted++;
        if (p->start[ex] % T && fabs((double)crossing_l - alone_l) > 1e-4 * fabs((double)alone_l)) differs++;
    }
    ZT_CHECKF(counted > 10, "%s: only %d examples with targets", name, counted);
    ZT_CHECKF(differs > 0, "%s: without the document mask no later example's loss changed: the test sees nothing",
              name);
    free(alone_ex);
out:
    dec_free(m);
    zero_engine_free(e);
    free(p->atok), free(p->atg), free(p);
}

/* The gradient norm of one step: the packed rows over this world at `stage`, against the examples
 * one per row on one rank at stage 0. */
static void grad_norm(zero_comm *world, zero_comm *self, const char *name, const zt_golden *g, int stage,
                      double *worst) {
    const int W = zero_comm_size(world), rank = zero_comm_rank(world), B = ROWS / W;
    dec_config c;
    packed *p = malloc(sizeof *p);
    zero_engine *e = zt_fixture_engine(world, name, g, stage, B, 1, &c);
    if (!e) {
        ZT_FAIL("%s: no engine", name);
        free(p);
        return;
    }
    make_batch(p, c.vocab);
    zero_engine *ref = zt_fixture_engine(self, name, g, 0, p->n_ex, 1, NULL);
    dec_model *m = NULL, *mref = NULL;
    zero_error err = {{0}};
    if (!ref || dec_create(&m, &c, B, T, 0, &err) || dec_create(&mref, &c, p->n_ex, T, 0, &err)) {
        ZT_FAIL("%s: %s", name, err.msg);
        goto out;
    }
    const double denom = (double)dec_count_targets(p->tg, (size_t)ROWS * T);
    float l;
    zero_step_stats st, sref;
    dec_set_docs(m, p->doc + (size_t)rank * B * T);
    if (dec_engine_micro_batch(m, e, p->tok + (size_t)rank * B * T, p->tg + (size_t)rank * B * T, B, T, denom, &l) ||
        zero_engine_micro_batch_done(e) || zero_engine_step(e, &st)) {
        ZT_FAIL("%s stage %d: %s / %s", name, stage, dec_last_error(m), zero_engine_last_error(e));
        goto out;
    }
    if (dec_engine_micro_batch(mref, ref, p->atok, p->atg, p->n_ex, T, denom, &l) ||
        zero_engine_micro_batch_done(ref) || zero_engine_step(ref, &sref)) {
        ZT_FAIL("%s alone: %s / %s", name, dec_last_error(mref), zero_engine_last_error(ref));
        goto out;
    }
    const double rel = fabs(st.grad_norm - sref.grad_norm) / sref.grad_norm;
    ZT_CHECKF(rel <= 1e-5, "%s stage %d on %d ranks: gradient norm %.9g packed, %.9g one example a row (rel %.3g)",
              name, stage, W, st.grad_norm, sref.grad_norm, rel);
    *worst = fmax(*worst, rel);
out:
    dec_free(m);
    dec_free(mref);
    zero_engine_free(e);
    zero_engine_free(ref);
    free(p->atok), free(p->atg), free(p);
}

int main(void) {
    zero_comm *world = NULL, *self = NULL;
    if (zero_comm_init_mpi(&world, NULL) != ZERO_OK || zero_comm_init_self(&self) != ZERO_OK) {
        fprintf(stderr, "cannot create communicators\n");
        return 1;
    }
    zt_rank = zero_comm_rank(world);
    const int W = zero_comm_size(world);
    /* phi3_longrope is left out: LongRoPE picks its table by the pass's longest position, which
     * differs between a row of one example and rows of several (docs/MODEL.md) */
    static const char *const names[] = {"gpt2",          "llama_gqa4",     "qwen3",
                                        "gemma2_window", "mistral_window", "gemma3_window"};
    double worst_loss = 0, worst_norm = 0;
    ZT_CHECKF(ROWS % W == 0, "%d rows do not split over %d ranks", ROWS, W);
    for (size_t i = 0; i < sizeof names / sizeof names[0] && ROWS % W == 0; i++) {
        zt_golden g;
        if (zt_golden_load(names[i], &g)) continue;
        for (int stage = 0; stage <= 3; stage += 3) {
            rng = 0x5eed + i; /* every rank and stage packs the same examples */
            per_example(world, names[i], &g, stage, &worst_loss);
            rng = 0x5eed + i;
            grad_norm(world, self, names[i], &g, stage, &worst_norm);
        }
        zt_golden_free(&g);
    }
    if (zt_rank == 0)
        printf("%d rank%s: packed examples vs alone: worst loss rel %.3g, worst gradient norm rel %.3g\n", W,
               W > 1 ? "s" : "", worst_loss, worst_norm);
    zero_comm_free(self);
    zero_comm_free(world);
    return zt_finish("test_doc_mask");
}
