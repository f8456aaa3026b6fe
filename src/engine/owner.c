/* The ownership table: for the configured stage, precision and offload, what a rank keeps of each
 * kind of state (nothing, the whole unit, its shard) and where (RAM, NVMe); and each unit's owned
 * views, computed once at finalize. The only place in the engine that asks "which stage?". */
#include "engine/internal.h"

#include <stdlib.h>
#include <string.h>

/* ZeRO's stages as extents (DESIGN.md's table): what stays whole, what is sharded. Frozen
 * parameters are parameters without the rest: kept as the working parameters are. */
static const int STAGE_EXTENTS[4][EK_COUNT] = {
    /*           params     grads      master     optimizer  frozen */
    /* 0 */ {EXT_WHOLE, EXT_WHOLE, EXT_WHOLE, EXT_WHOLE, EXT_WHOLE},
    /* 1 */ {EXT_WHOLE, EXT_WHOLE, EXT_SHARD, EXT_SHARD, EXT_WHOLE},
    /* 2 */ {EXT_WHOLE, EXT_SHARD, EXT_SHARD, EXT_SHARD, EXT_WHOLE},
    /* 3 */ {EXT_SHARD, EXT_SHARD, EXT_SHARD, EXT_SHARD, EXT_SHARD},
};

/* Test hook (tests/mpi/test_engine_views.c): a deliberately wrong view, to show that the
 * equivalence and memory tests catch one. 0 in every real run. */
int zero__view_mutation;

void zero__own_table(zero_engine *e) {
    etable *t = &e->own;
    memset(t, 0, sizeof *t);
    int x[EK_COUNT];
    memcpy(x, STAGE_EXTENTS[e->cfg.stage], sizeof x);
    const int half = e->wdt != ZERO_DTYPE_FP32;
    /* NVMe: the parameter shards (offload_param, stage 3) and the optimizer states with the
     * master (offload_optimizer, stages 1-3); fp32 without optimizer state leaves nothing there */
    const int pnvme = e->cfg.offload_param.device == ZERO_OFFLOAD_NVME;
    const int onvme = e->cfg.offload_optimizer.device == ZERO_OFFLOAD_NVME && (e->nstates > 0 || half);
    /* fp32: the master is the working parameters' owned slice, so it lives where they do */
    const int mnvme = half ? onvme : pnvme;
    /* One rank: its shard is the whole unit (padded / 1), the same bytes, so a row kept in RAM
     * is kept whole, as at stage 0. A gather then hands out the persistent parameters instead of
     * copying them, and the gradient accumulates in the persistent buffer and is "reduced" once
     * a step in place, instead of going through a buffer per micro-batch and a received shard:
     * stages 1-3 on one rank hold and compute what stage 0 does. Rows on NVMe keep the stage's
     * extent (their tile passes and read-ahead are written for shards); master and optimizer
     * states share the update range, so they turn whole together. */
    if (e->world == 1) {
        x[EK_GRADS] = EXT_WHOLE;
        if (!pnvme) x[EK_PARAMS] = x[EK_FROZEN] = EXT_WHOLE;
        if (!onvme && !mnvme) x[EK_MASTER] = x[EK_OPTIM] = EXT_WHOLE;
    }
    for (int k = 0; k < EK_COUNT; k++) t->k[k] = (eown){x[k], TIER_RAM};
    if (e->nstates == 0) t->k[EK_OPTIM].extent = EXT_NONE;
    if (e->nfrozen == 0) t->k[EK_FROZEN].extent = EXT_NONE;
    if (pnvme) t->k[EK_PARAMS].tier = TIER_NVME;
    if (onvme) {
        t->k[EK_OPTIM].tier = TIER_NVME;
        t->k[EK_MASTER].tier = TIER_NVME;
    }
    if (!half) { /* the master is the working parameters' owned slice */
        t->master_in_params = 1;
        t->k[EK_MASTER].extent = EXT_NONE;
        t->k[EK_MASTER].tier = t->k[EK_PARAMS].tier;
    }
    if (zero__view_mutation == ZERO__MUTATE_GRADS_WHOLE && e->cfg.stage == 2) t->k[EK_GRADS].extent = EXT_WHOLE;
    const int upd = x[EK_OPTIM];
    t->gather_collective = t->k[EK_PARAMS].extent == EXT_SHARD;
    t->reduce_each_mb = t->k[EK_GRADS].extent == EXT_SHARD;
    t->update_whole = upd == EXT_WHOLE;
    t->regather = t->k[EK_PARAMS].extent == EXT_WHOLE && upd == EXT_SHARD;
    t->hpz = t->gather_collective ? zero__own_hpz(&e->cfg, e->world) : 0;
}

/* hpZ needs the parameters sharded over the world (stage 3) and a group smaller than the world:
 * with H = world the secondary shard would be the world shard itself. */
int zero__own_hpz(const zero_config *cfg, int world) {
    const int h = cfg->hpz_partition_size;
    return STAGE_EXTENTS[cfg->stage][EK_PARAMS] == EXT_SHARD && h > 1 && h < world && world % h == 0 ? h : 0;
}

uint64_t zero__own_sec_elems(const zero_engine *e, const eunit *u) {
    return e->own.hpz ? u->padded / (uint64_t)e->own.hpz : 0;
}

uint64_t zero__own_sec_offset(const zero_engine *e, const eunit *u) {
    return e->own.hpz ? (uint64_t)(e->rank % e->own.hpz) * zero__own_sec_elems(e, u) : 0;
}

uint64_t zero__own_elems(const zero_engine *e, const eunit *u, int kind) {
    const int f = kind == EK_FROZEN;
    switch (e->own.k[kind].extent) {
    case EXT_WHOLE: return f ? u->fpadded : u->padded;
    case EXT_SHARD: return f ? u->fshard : u->shard;
    default: return 0;
    }
}

/* Element i (unit coordinates) of an array that starts at unit element `base`. */
static void *at(const zero_engine *e, void *p, uint64_t base, uint64_t i, size_t elem) {
    (void)e;
    return p ? (char *)p + (i - base) * elem : NULL;
}

int zero__own_views(zero_engine *e, eunit *u) {
    const etable *t = &e->own;
    eview *v = &u->v;
    free(v->slices);
    memset(v, 0, sizeof *v);
    /* the update range: whole unit, or the partition slice */
    const int whole = t->update_whole;
    v->lo = whole ? 0 : u->offset;
    v->hi = whole ? u->numel : u->offset + u->valid;
    v->slo = u->offset;
    v->shi = u->offset + u->valid;
    /* working parameters */
    const int pwhole = t->k[EK_PARAMS].extent == EXT_WHOLE;
    v->wlo = pwhole ? 0 : u->offset;
    v->whi = pwhole ? u->numel : u->offset + u->valid;
    v->wp = u->params;
    const int half = e->wdt != ZERO_DTYPE_FP32;
    void *wslice = at(e, u->params, v->wlo, v->lo, e->wsize);
    v->work = half ? wslice : NULL;
    /* master: its own array, or the working slice (fp32) */
    const uint64_t mbase = t->k[EK_MASTER].extent == EXT_WHOLE ? 0 : u->offset;
    v->master = t->master_in_params ? (float *)wslice : (float *)at(e, u->master, mbase, v->lo, 4);
    const uint64_t obase = t->k[EK_OPTIM].extent == EXT_WHOLE ? 0 : u->offset;
    v->state[0] = (float *)at(e, u->s0, obase, v->lo, 4);
    v->state[1] = (float *)at(e, u->s1, obase, v->lo, 4);
    /* gradients: the whole persistent buffer, or the shard the reductions land in */
    const int gwhole = t->k[EK_GRADS].extent == EXT_WHOLE;
    v->gwhole = gwhole ? u->grads : NULL;
    v->gelems = zero__own_elems(e, u, EK_GRADS);
    v->grad = at(e, u->grads, gwhole ? 0 : u->offset, v->lo, e->wsize);
    /* the frozen parameters: whole, or the frozen part's slice */
    const int fwhole = t->k[EK_FROZEN].extent == EXT_WHOLE;
    v->flo = fwhole ? 0 : u->foffset;
    v->fhi = fwhole ? u->fnumel : u->foffset + u->fvalid;
    v->fp = u->fparams;
    /* the owned slices of the trainable parameters with their flags (trainable-part coordinates) */
    int n = 0;
    for (int pi = u->first_param; pi < u->first_param + u->nparams; pi++) {
        const eparam *p = &e->params[pi];
        if (!zero__frozen(p) && p->soff < v->hi && p->soff + p->numel > v->lo) n++;
    }
    v->slices = n ? calloc((size_t)n, sizeof *v->slices) : NULL;
    if (n && !v->slices) return -1;
    for (int pi = u->first_param; pi < u->first_param + u->nparams; pi++) {
        const eparam *p = &e->params[pi];
        if (zero__frozen(p)) continue;
        uint64_t a = p->soff > v->lo ? p->soff : v->lo;
        uint64_t b = p->soff + p->numel < v->hi ? p->soff + p->numel : v->hi;
        if (a < b) v->slices[v->nslices++] = (eslice){a, b, pi, p->flags};
    }
    /* the test hook's wrong views, at the stages that shard the update (stage 0, the tests'
     * reference, keeps the right ones; on one rank, where stages 1-3 update whole units too) */
    const int mutate = e->cfg.stage > 0;
    if (zero__view_mutation == ZERO__MUTATE_DECAY_FLAG && mutate)
        for (int k = 0; k < v->nslices; k++) v->slices[k].flags &= ~(unsigned)ZERO_PARAM_NO_DECAY;
    if (zero__view_mutation == ZERO__MUTATE_SLICE_RANGE && mutate && v->nslices > 0 && v->slices[0].hi - v->slices[0].lo > 1)
        v->slices[0].hi--;
    return 0;
}

void zero__own_free(eunit *u) {
    free(u->v.slices);
    u->v.slices = NULL;
    u->v.nslices = 0;
}
