/* Private state of the ZeRO engine, shared by its files: registration (engine.c), the control
 * channel that turns divergence into errors (control.c), gather/release and stage-3 prefetch
 * (gather.c), gradient reduction (reduce.c) and the optimizer step (step.c). */
#ifndef ZERO_ENGINE_INTERNAL_H
#define ZERO_ENGINE_INTERNAL_H

#include "common/internal.h"
#include "zero/engine.h"
#include "zero/optim.h"
#include "zero/partition.h"

/* One registered parameter: a [offset, offset+numel) range of its unit. */
typedef struct eparam {
    char *name;
    int unit;
    uint64_t offset, numel;
    int ndim;
    int64_t shape[8];
    unsigned flags;
} eparam;

/* One unit: a flat buffer, padded to a multiple of world*align, of which this rank owns the
 * slice [offset, offset+shard). Buffers marked (T) are transient and charged to "buffers". */
typedef struct eunit {
    char *name;
    uint64_t numel, padded, shard, offset, valid;
    int first_param, nparams;

    /* persistent */
    void *params;  /* working dtype; stages 0-2: padded (full), stage 3: shard */
    void *grads;   /* working dtype; stages 0-1: padded (full), stages 2-3: shard */
    float *master; /* fp32 master when working dtype != fp32: stage 0 padded, else shard */
    float *s0, *s1; /* optimizer states: stage 0 padded, else shard */

    /* (T) gather */
    int gathers;        /* gather nesting: released when it drops to 0 */
    void *gathered;     /* stage 3: padded working-dtype all-gather target */
    float *view;        /* fp32 compute view when the working dtype is not fp32 */
    zero_request *prefetch; /* stage 3: in-flight all-gather into `gathered` */

    /* (T) reduction */
    float *gscratch;    /* fp32 padded gradient buffer handed to the model (when not the persistent grads) */
    void *gsend;        /* working-dtype padded copy of gscratch sent to the reduction (half types) */
    void *grecv;        /* stages 2-3: working-dtype shard the reduce-scatter lands in */
    zero_request *reduce; /* in-flight reduction */
    int ready_mb;       /* micro-batch index of the last grad_ready, -1 none */
    int reduced_step;   /* stages 0-1: the reduction of this step was started */
} eunit;

enum { CTRL_GATHER = 1, CTRL_REDUCE = 2, CTRL_STEP = 3, CTRL_NORM = 4, CTRL_READ = 5, CTRL_SAVE = 6, CTRL_LOAD = 7, CTRL_AGREE = 8 };

/* What every rank announces before a collective; all ranks must announce the same. */
typedef struct ctrl_rec {
    int32_t op;
    int32_t unit;
    int64_t seq;
    double a, b; /* payload (CTRL_NORM: sum of squares, overflow flag) */
} ctrl_rec;

struct zero_engine {
    zero_comm *user_comm; /* not owned */
    zero_comm *data;      /* owned duplicate: the data-plane collectives and their counters */
    zero_comm *ctrl;      /* owned duplicate: the control plane (tags, norms, reads) */
    int rank, world;
    zero_config cfg;
    zero_dtype wdt;       /* working dtype */
    size_t wsize;         /* bytes per working element */
    uint64_t align;       /* partition alignment in elements */
    int nstates;          /* optimizer state arrays per element (0..2) */
    zero_memacct acct;
    zero_loss_scaler scaler;
    char err[1024];
    int finalized, broken;

    eunit *units;
    int nunits, cap_units;
    eparam *params;
    int nparams, cap_params;

    int64_t step;         /* optimizer steps taken (skipped included) */
    int mb;               /* micro-batch index inside the step */
    int mb_open;          /* a gradient call happened in micro-batch `mb` */
    int64_t ctrl_seq;     /* control exchanges so far */
    double comm_wait;     /* seconds waited on communication in the current step */

    /* stage-3 prefetch: the gather order recorded in the first step */
    int *order;
    int norder, cap_order, recording, cursor;
    uint64_t live;        /* gathered elements currently held (stage 3) */
    int inflight_reductions;
    int *inflight;        /* units with a reduction in flight, oldest first */
    ctrl_rec *ctrl_all;   /* world records */
};

/* Records an error on the engine and returns `s`. */
zero_status zero__eng_fail(zero_engine *e, zero_status s, const char *fmt, ...) ZERO__PRINTF(3, 4);
/* The control exchange: every rank announces (op, unit, a, b); on disagreement every rank
 * returns ZERO_ERR_DIVERGED naming what each rank did. With check_divergence off only payload
 * exchanges (CTRL_NORM, CTRL_READ) happen. On success e->ctrl_all holds every rank's record. */
zero_status zero__ctrl_exchange(zero_engine *e, int op, int unit, double a, double b);
/* Waits on a request, adding the time to the step's communication wait. */
zero_status zero__eng_wait(zero_engine *e, zero_request **req);

/* gather.c */
zero_status zero__gather_drain(zero_engine *e); /* waits and frees stage-3 prefetches */
/* reduce.c */
zero_status zero__reduce_finish_all(zero_engine *e); /* starts missing and waits every reduction */
/* Pointer to element i of a working-dtype buffer. */
static inline void *zero__wptr(const zero_engine *e, void *base, uint64_t i) {
    return (char *)base + i * e->wsize;
}
/* dst[i] += src[i] in working dtype (fp32 accumulate, one rounding) for n elements. */
void zero__wadd(zero_engine *e, void *dst, const void *src, uint64_t n);
/* dst[i] (working) += src[i] (fp32). */
void zero__wadd_f32(zero_engine *e, void *dst, const float *src, uint64_t n);

#endif
