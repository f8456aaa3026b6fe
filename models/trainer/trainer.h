/* trainer/trainer.h — the training loop as a library layer (docs/ARCHITECTURE.md, "trainer"):
 * on an engine whose model is registered, finalized and initialized, and a decoder over it, a
 * session runs the steps of a run — the data's batches, the objective's micro-batches (causal LM,
 * DPO, ORPO: a table, trn_objective_of), the optimizer step, validation, checkpoints and their
 * retention — and judges a run that trains nothing. What a program shows of it, it shows from
 * the hooks. The `zero train` command is one such program (cli/train.c); examples/finetune.c is
 * another.
 *
 *   trn_setup s;
 *   trn_setup_default(&s);
 *   s.comm = comm, s.engine = e, s.model = m, s.data = data, s.cfg = &cfg, s.T = T, s.steps = 100;
 *   trn_session *t;
 *   if (trn_create(&t, &s, &err) != ZERO_OK) ...;
 *   if (trn_run(t, &hooks) != ZERO_OK && !trn_error_quiet(t)) fprintf(stderr, "%s\n", trn_last_error(t));
 *   trn_free(t);
 *
 * Every rank calls the same functions in the same order (they are collective). Errors: a status,
 * and the session's message (trn_last_error: "rank R: what: why"); where another rank says it
 * (the lowest rank that finds weights that overflow, rank 0 for a run that trains nothing),
 * trn_error_quiet is 1 on the others. */
#ifndef ZERO_TRAINER_H
#define ZERO_TRAINER_H

#include <stdint.h>

#include "decoder/data.h"
#include "decoder/decoder.h"
#include "decoder/pref.h"
#include "zero/zero.h"

typedef struct trn_setup {
    zero_comm *comm;     /* the engine's communicator (borrowed, as all below) */
    zero_engine *engine; /* registered, finalized, its weights in place (zero_engine_load for a resume) */
    dec_model *model;    /* the decoder, made for the objective's sequences per micro-batch (trn_model_batch) */
    dec_data *data;      /* the training data (preference pairs for DPO and ORPO) */
    dec_data *val;       /* validation data, all of it; NULL: data's held-out split */
    /* the run's configuration: micro_batch B and grad_accum K as the user set them (with
     * deterministic, the engine's own are atoms: B*K/A micro-batches of A sequences) */
    const zero_config *cfg;
    int T;                    /* sequence length */
    int docs;                 /* packed examples attend to themselves only (dec_set_docs per micro-batch) */
    dec_objective objective;  /* DEC_OBJ_LM (default), DPO or ORPO */
    double beta;              /* DPO's beta, ORPO's lambda (0.1) */
    double label_smoothing;   /* DPO's (0) */
    uint64_t seed;            /* the data's order */
    int lora;                 /* the model has LoRA adapters: each micro-batch its dropout key (trn_lora_key) */
    int64_t steps;            /* the run ends when the engine's step count reaches it */
    int64_t val_every;        /* validation every N steps and at the last (0: at the last only) */
    int val_batches;          /* at most so many validation batches of the global batch (8) */
    const char *save;         /* checkpoints: this directory (NULL: none) */
    int64_t save_every;       /* ... every N steps and at the last (0: at the last only; with steps 0, step 0) */
    int save_total_limit;     /* ... keep the newest N (0: all) */
    const char *save_json;    /* the record a checkpoint keeps of the run (zero_engine_save's user JSON) */
    const char *weights_from; /* where the weights came from, for the message of a first step that
                                 overflows (" (--resume DIR)"); NULL: nothing said */
    const char *reference;    /* DPO resumed: the reference of the run's start (trn_reference_text, as
                                 its checkpoint's record keeps it); NULL: computed before the first step */
} trn_setup;
void trn_setup_default(trn_setup *s);

/* The decoder's sequences per pass for a micro-batch of B sequences (dec_create's batch): ORPO
 * passes each pair's chosen sequence once more (3 per pair), deterministic runs pass atoms. */
int trn_model_batch(const trn_setup *s);

/* What a step did, as every rank sees it. */
typedef struct trn_step_report {
    int64_t step; /* 1-based: the engine's step count after it */
    double loss;  /* the global batch's mean loss (the objective's) */
    double val;   /* the validation loss, when has_val */
    int has_val;
    zero_step_stats st; /* the engine's step */
    int redone;         /* deterministic: computed twice (its gradients outgrew their grids) */
    double seconds;     /* the step's time, its data included, validation and saves not */
    int64_t tokens;     /* tokens of the global batch (G * T) */
    int pref;           /* a preference objective: the sums below */
    dec_pref_sums sums; /* the global batch's (rewards of the pairs, their margins, correct pairs) */
    double pairs;       /* ... its pairs */
    int has_io;         /* NVMe offload on: the largest per-rank bytes read, written, µs waited */
    int64_t io[3];
} trn_step_report;

typedef struct trn_hooks {
    void *ctx;
    /* After each step, on every rank (collectives allowed); nonzero stops the run (the hook says
     * why: trn_run returns ZERO_ERR_INTERNAL, quiet). Called before trn_run judges the run. */
    int (*step)(void *ctx, const trn_step_report *r);
    /* After a checkpoint of `step` was saved (every rank); prune_error: what retention could not
     * remove (rank 0; the save stands), else NULL. */
    void (*saved)(void *ctx, int64_t step, const char *prune_error);
} trn_hooks;

typedef struct trn_session trn_session;

/* Checks the setup (an objective the data cannot feed, a batch the objective cannot split) and
 * allocates the step's buffers. */
zero_status trn_create(trn_session **out, const trn_setup *s, zero_error *err);
void trn_free(trn_session *t); /* NULL is a no-op */

/* The objective's preparation, once (trn_run calls it when the program has not): DPO's reference
 * log-likelihoods of every pair, training and validation, under the weights the run starts from,
 * or setup.reference decoded (its pairs counted against the data's: another count is an error). */
zero_status trn_prepare(trn_session *t);
/* DPO, after trn_prepare: the reference as text, for a checkpoint's record (malloc'd: "P V " then
 * 16 hex digits per value, the bits of each double: the training data's pairs, chosen then
 * rejected, then the validation data's); NULL for another objective. */
char *trn_reference_text(const trn_session *t);
/* The record checkpoints keep of the run from now on (setup.save_json; borrowed). */
void trn_set_save_json(trn_session *t, const char *json);

/* The run: the objective's preparation (DPO's reference log-likelihoods), then the steps from the
 * engine's step count to setup.steps, each followed by validation and saves when due, the hook,
 * and the judgement (nothing trained, a loss that is not finite at the last step, a dynamic loss
 * scale stuck at its minimum). A session runs once. */
zero_status trn_run(trn_session *t, const trn_hooks *h);

/* One step (the engine's next), without validation, saves or judgement. */
zero_status trn_step(trn_session *t, trn_step_report *out);
/* The validation loss over setup.val_batches batches (collective; NaN with nothing to count). */
zero_status trn_validate(trn_session *t, double *out);
/* 1 when there is validation data for the global batch. */
int trn_has_validation(const trn_session *t);

const char *trn_last_error(const trn_session *t);
int trn_error_quiet(const trn_session *t);
/* Traffic of the validation passes so far (left out of a step's figures). */
void trn_eval_counters(const trn_session *t, zero_comm_counters *out);
/* Sequences of the global batch (ranks x B x K). */
int64_t trn_global_batch(const trn_session *t);

/* The LoRA dropout masks' key of micro-batch k of step s on a rank. */
uint64_t trn_lora_key(int64_t step, int k, int rank);

/* The objectives: each a row the loop calls. */
typedef struct trn_objective {
    dec_objective id;
    const char *name;
    int seqs_num, seqs_den; /* the decoder's sequences per micro-batch sequence (ORPO 3/2) */
    /* before the first step (DPO: the reference), or NULL */
    zero_status (*prepare)(trn_session *t);
    /* the step's micro-batches (the data already in the session's buffers, `total` its counted
     * targets over every rank): forward, backward, *loss the global batch's mean */
    zero_status (*micro_batches)(trn_session *t, int64_t step, int64_t total, double *loss);
    zero_status (*validate)(trn_session *t, int64_t batches, double *out);
} trn_objective;
const trn_objective *trn_objective_of(dec_objective id);

#endif
