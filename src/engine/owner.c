/* The ownership table: the ownership plan (src/partition/own.c) of the engine's stage, precision,
 * offload and world, and each unit's owned views, computed from it once at finalize. */
#include "engine/internal.h"

#include <stdlib.h>
#include <string.h>

/* Test hook (tests/mpi/test_engine_views.c): a deliberately wrong view, to show that the
 * equivalence and memory tests catch one. 0 in every real run. */
int zero__view_mutation;

/* The engine's setup as the plan's input: a device rank when the engine has a device (its
 * states in TIER_DEVICE, "cpu" offload in TIER_PINNED), else a host rank (RAM or NVMe). */
static void own_in(const zero_engine *e, zero__own_in *in) {
    zero__own_in_config(in, &e->cfg, e->world);
    in->half = e->wdt != ZERO_DTYPE_FP32;
    in->nstates = e->nstates;
    in->frozen = e->nfrozen > 0;
    in->device = e->dev != NULL;
}

void zero__own_table(zero_engine *e) {
    zero__own_in in;
    own_in(e, &in);
    zero__own_plan_of(&in, &e->own);
    etable *t = &e->own;
    if (zero__view_mutation == ZERO__MUTATE_GRADS_WHOLE && e->cfg.stage == 2) {
        t->k[EK_GRADS].extent = EXT_WHOLE;
        t->reduce_each_mb = 0;
    }
}

int zero__own_hpz(const zero_config *cfg, int world) {
    zero__own_in in;
    zero__own_in_config(&in, cfg, world);
    zero__own_plan t;
    zero__own_plan_of(&in, &t);
    return t.hpz;
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
    v->work = half || !t->master_in_params ? wslice : NULL;
    /* master: its own array, or the working slice (fp32) */
    const uint64_t mbase = t->k[EK_MASTER].extent == EXT_WHOLE ? 0 : u->offset;
    v->master = t->master_in_params ? (float *)wslice : (float *)at(e, u->master, mbase, v->lo, 4);
    const uint64_t obase = t->k[EK_OPTIM].extent == EXT_WHOLE ? 0 : u->offset;
    v->state[0] = (float *)at(e, u->s0, obase, v->lo, 4);
    v->state[1] = (float *)at(e, u->s1, obase, v->lo, 4);
    if (u->q8on && u->q8.m) { /* lo - obase is a multiple of the blocks (the alignment is) */
        const uint64_t b = (v->lo - obase) / ZERO_QUANT_Q8_BLOCK;
        v->q8 = (zero_q8_state){(uint8_t *)at(e, u->q8.m, obase, v->lo, 1), (uint8_t *)at(e, u->q8.v, obase, v->lo, 1),
                                u->q8.m_absmax + b, u->q8.v_absmax + b};
    }
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
