/* The ownership plan (own.h): ZeRO's stages as extents, the rules that change them (one rank,
 * NVMe, fp32's master, hpZ) and the validity rules, as one pure function of the setup. */
#include "partition/own.h"

#include <string.h>

/* ZeRO's stages as extents (docs/DESIGN.md's table, docs/ENGINE.md §3): what stays whole, what
 * is sharded. Frozen parameters are parameters without the rest: kept as the working parameters are. */
static const int STAGE_EXTENTS[4][EK_COUNT] = {
    /*           params     grads      master     optimizer  frozen */
    /* 0 */ {EXT_WHOLE, EXT_WHOLE, EXT_WHOLE, EXT_WHOLE, EXT_WHOLE},
    /* 1 */ {EXT_WHOLE, EXT_WHOLE, EXT_SHARD, EXT_SHARD, EXT_WHOLE},
    /* 2 */ {EXT_WHOLE, EXT_SHARD, EXT_SHARD, EXT_SHARD, EXT_WHOLE},
    /* 3 */ {EXT_SHARD, EXT_SHARD, EXT_SHARD, EXT_SHARD, EXT_SHARD},
};

static int offload_ok(zero_offload_device d) {
    return d == ZERO_OFFLOAD_NONE || d == ZERO_OFFLOAD_CPU || d == ZERO_OFFLOAD_NVME;
}

/* The tier an offload setting puts a state in: a host rank keeps "none" and "cpu" alike in RAM. */
static int tier_of(zero_offload_device d, int device) {
    if (d == ZERO_OFFLOAD_NVME) return TIER_NVME;
    if (!device) return TIER_RAM;
    return d == ZERO_OFFLOAD_CPU ? TIER_PINNED : TIER_DEVICE;
}

static unsigned rules(const zero__own_in *in) {
    unsigned bad = 0;
    const zero_offload_device oo = in->offload_optimizer, op = in->offload_param;
    if (in->stage < 0 || in->stage > 3) bad |= OWN_BAD_STAGE;
    if (in->world < 1) bad |= OWN_BAD_WORLD;
    if (!offload_ok(oo) || !offload_ok(op)) bad |= OWN_BAD_OFFLOAD;
    if (oo != ZERO_OFFLOAD_NONE && in->stage == 0) bad |= OWN_OPTIM_OFFLOAD_STAGE;
    if (op != ZERO_OFFLOAD_NONE && in->stage != 3) bad |= OWN_PARAM_OFFLOAD_STAGE;
    const int h = in->hpz;
    if (h < 1) bad |= OWN_HPZ_RANGE;
    if (h > 1 && in->stage != 3) bad |= OWN_HPZ_STAGE;
    if (h > 1 && (in->world < 1 || h > in->world || in->world % h)) bad |= OWN_HPZ_WORLD;
    if (h > 1 && op == ZERO_OFFLOAD_NVME) bad |= OWN_HPZ_NVME;
    return bad;
}

void zero__own_plan_of(const zero__own_in *in, zero__own_plan *t) {
    memset(t, 0, sizeof *t);
    t->invalid = rules(in);
    if (t->invalid & (OWN_BAD_STAGE | OWN_BAD_WORLD)) return; /* no extents to give */
    int x[EK_COUNT];
    memcpy(x, STAGE_EXTENTS[in->stage], sizeof x);
    const int half = in->half != 0;
    const zero_offload_device oo = offload_ok(in->offload_optimizer) ? in->offload_optimizer : ZERO_OFFLOAD_NONE;
    const zero_offload_device op = offload_ok(in->offload_param) ? in->offload_param : ZERO_OFFLOAD_NONE;
    /* NVMe: the parameter shards (offload_param, stage 3) and the optimizer states with the
     * master (offload_optimizer, stages 1-3); fp32 without optimizer state leaves nothing there */
    const int pnvme = op == ZERO_OFFLOAD_NVME;
    const int onvme = oo == ZERO_OFFLOAD_NVME && (in->nstates > 0 || half);
    /* fp32: the master is the working parameters' owned slice, so it lives where they do — unless
     * a device rank keeps the optimizer off the device (ZeRO-Offload, ZeRO-Infinity), where the
     * host's step needs its own fp32 master beside the states and writes the device's working copy
     * back, as in half precision; or keeps the parameters off it (offload_param alone) while the
     * optimizer stays: the master then stays with the states on the device, and the step writes
     * the working copy out to pinned memory or the NVMe tile */
    const int sep = half || (in->device && (oo == ZERO_OFFLOAD_CPU || onvme || op != ZERO_OFFLOAD_NONE));
    const int mnvme = sep ? onvme : pnvme;
    /* One rank: its shard is the whole unit (padded / 1), the same bytes, so a row kept in RAM
     * is kept whole, as at stage 0. A gather then hands out the persistent parameters instead of
     * copying them, and the gradient accumulates in the persistent buffer and is "reduced" once
     * a step in place, instead of going through a buffer per micro-batch and a received shard:
     * stages 1-3 on one rank hold and compute what stage 0 does. Rows on NVMe keep the stage's
     * extent (their tile passes and read-ahead are written for shards); master and optimizer
     * states share the update range, so they turn whole together. */
    if (in->world == 1) {
        x[EK_GRADS] = EXT_WHOLE;
        if (!pnvme) x[EK_PARAMS] = x[EK_FROZEN] = EXT_WHOLE;
        if (!onvme && !mnvme) x[EK_MASTER] = x[EK_OPTIM] = EXT_WHOLE;
    }
    const int base = tier_of(ZERO_OFFLOAD_NONE, in->device);
    for (int k = 0; k < EK_COUNT; k++) t->k[k] = (zero__own_row){x[k], base};
    if (in->nstates == 0) t->k[EK_OPTIM].extent = EXT_NONE;
    if (!in->frozen) t->k[EK_FROZEN].extent = EXT_NONE;
    t->k[EK_PARAMS].tier = tier_of(op, in->device);
    /* frozen parameters go where the parameters go: off the device, onto NVMe (the parameter
     * file holds each unit's frozen shard after its working shard, read with it for a gather) */
    t->k[EK_FROZEN].tier = t->k[EK_PARAMS].tier;
    /* the optimizer offload moves master and states together; "cpu" moves them on a device rank */
    const int otier = onvme || oo == ZERO_OFFLOAD_CPU ? tier_of(oo, in->device) : base;
    t->k[EK_OPTIM].tier = t->k[EK_MASTER].tier = otier;
    /* ZeRO-Offload: where the update runs on the host (its master or states off the device), a
     * device rank keeps the gradient it accumulates there too, page-locked, for the host optimizer
     * to read; the device holds only the gradients of the units in backward (transient). fp32
     * without optimizer state keeps nothing off the device: the update runs where the
     * parameters are. */
    if (in->device && (half || in->nstates > 0) && (oo == ZERO_OFFLOAD_CPU || onvme)) t->k[EK_GRADS].tier = TIER_PINNED;
    if (!sep) { /* the master is the working parameters' owned slice */
        t->master_in_params = 1;
        t->k[EK_MASTER].extent = EXT_NONE;
        t->k[EK_MASTER].tier = t->k[EK_PARAMS].tier;
    }
    const int upd = x[EK_OPTIM];
    t->gather_collective = t->k[EK_PARAMS].extent == EXT_SHARD;
    t->reduce_each_mb = t->k[EK_GRADS].extent == EXT_SHARD;
    t->update_whole = upd == EXT_WHOLE;
    t->regather = t->k[EK_PARAMS].extent == EXT_WHOLE && upd == EXT_SHARD;
    /* hpZ needs the parameters sharded over the world (stage 3) and a group smaller than the
     * world: with H = world the secondary shard would be the world shard itself. */
    const int h = in->hpz;
    t->hpz = t->gather_collective && h > 1 && h < in->world && in->world % h == 0 ? h : 0;
    if (t->hpz && in->frozen) t->invalid |= OWN_HPZ_FROZEN; /* the secondary shard covers the trainable part only */
}

void zero__own_in_config(zero__own_in *in, const zero_config *cfg, int world) {
    memset(in, 0, sizeof *in);
    in->stage = cfg->stage;
    in->world = world;
    in->half = cfg->precision != ZERO_DTYPE_FP32;
    in->offload_optimizer = cfg->offload_optimizer.device;
    in->offload_param = cfg->offload_param.device;
    in->hpz = cfg->hpz_partition_size;
}
