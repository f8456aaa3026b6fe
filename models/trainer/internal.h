/* trainer/internal.h — the session, shared by the loop (loop.c) and the objectives (objective.c). */
#ifndef ZERO_TRAINER_INTERNAL_H
#define ZERO_TRAINER_INTERNAL_H

#include "trainer/trainer.h"

struct trn_session {
    trn_setup s;
    const trn_objective *obj;
    int rank, world, B, K, T;
    int64_t G;                 /* sequences per step, all ranks */
    int32_t *inputs, *targets; /* a step's K micro-batches at once */
    int32_t *docs;             /* the inputs' documents (setup.docs), else NULL */
    double *ref;               /* DPO: the reference's summed log-likelihoods, 2 per pair (all pairs) */
    double *val_ref;           /* ... of setup.val's pairs */
    int32_t *xin, *xtg;        /* ORPO: a micro-batch and its chosen sequences again (3 per pair) */
    dec_pref_sums pref;        /* the last step's sums over the global batch */
    double pref_pairs;         /* ... and its pairs */
    zero_comm_counters eval;   /* validation's traffic */
    int offload;               /* NVMe offload: steps report their I/O */
    int64_t off_prev[3];       /* this rank's offload bytes read, written and µs waited so far */
    int ran;
    int prepared;
    int quiet;
    char err[1200];
};

/* Sets the session's message "rank R: what: msg" and returns ZERO_ERR_INTERNAL. */
zero_status trn__fail(trn_session *t, const char *what, const char *msg);
/* The documents of the sequences from token `at` of the step's buffers, for the passes that follow. */
void trn__set_docs(trn_session *t, size_t at);
/* Where validation reads: setup.val, else the data's held-out split. */
dec_data *trn__val_source(const trn_session *t);
/* Validation's traffic between two counters is added to t->eval. */
void trn__eval_add(trn_session *t, const zero_comm_counters *before, const zero_comm_counters *after);

#endif
