/* The ownership plan: for a configuration and a world, what a rank keeps of each kind of state
 * (nothing, the whole unit, its shard), in which tier, and which validity rules the setup breaks.
 * One pure function (own.c), called by config resolution, the planner, the engine and (through
 * the planner's figures) the CLI: the only place that turns a stage into extents. Never installed. */
#ifndef ZERO_PARTITION_OWN_H
#define ZERO_PARTITION_OWN_H

#include "zero/config.h"

/* The kinds of per-unit state. EK_FROZEN: the frozen parameters (ZERO_PARAM_FROZEN), in the
 * frozen dtype. They have no gradient, master or optimizer row: kept whole or as shards like the
 * working parameters, and gathered with them, never reduced or updated. */
enum { EK_PARAMS = 0, EK_GRADS = 1, EK_MASTER = 2, EK_OPTIM = 3, EK_FROZEN = 4, EK_COUNT };
/* What a rank keeps of a kind: nothing, the whole unit (padded), or its shard (padded / world). */
enum { EXT_NONE = 0, EXT_WHOLE = 1, EXT_SHARD = 2 };
/* Where it lives. TIER_RAM: pageable host memory, where every state of a CPU rank is;
 * TIER_DEVICE: the accelerator's memory; TIER_PINNED: page-locked host memory a device copies
 * from (ZeRO-Offload's "cpu": the states offloaded, and the gradients of an update that runs on
 * the host, "cpu" or "nvme"). The plan returns the last two only for a device rank
 * (zero__own_in.device): the planner's GPU rows, and an engine with a device (devtier.c). */
enum { TIER_RAM = 0, TIER_NVME = 1, TIER_DEVICE = 2, TIER_PINNED = 3 };

/* The validity rules, one bit each; a plan names every rule its setup breaks (zero__own_plan.invalid)
 * and each caller words the ones it checks, in its own order. */
enum {
    OWN_BAD_STAGE = 1u << 0,           /* stage outside 0-3 */
    OWN_BAD_WORLD = 1u << 1,           /* world < 1 */
    OWN_BAD_OFFLOAD = 1u << 2,         /* an offload device that is none of none, cpu, nvme */
    OWN_OPTIM_OFFLOAD_STAGE = 1u << 3, /* offload_optimizer at stage 0: nothing is partitioned to move */
    OWN_PARAM_OFFLOAD_STAGE = 1u << 4, /* offload_param below stage 3: only stage 3 shards parameters */
    OWN_HPZ_RANGE = 1u << 5,           /* hpz_partition_size < 1 */
    OWN_HPZ_STAGE = 1u << 6,           /* hpz > 1 below stage 3 */
    OWN_HPZ_WORLD = 1u << 7,           /* hpz > 1 that does not divide the world (or exceeds it) */
    OWN_HPZ_NVME = 1u << 8,            /* hpz > 1 with the parameters on NVMe (unsupported) */
    OWN_HPZ_FROZEN = 1u << 9,          /* a secondary shard with frozen parameters (unsupported) */
};
#define OWN_HPZ_ANY (OWN_HPZ_RANGE | OWN_HPZ_STAGE | OWN_HPZ_WORLD | OWN_HPZ_NVME)

/* What the plan is computed from. */
typedef struct zero__own_in {
    int stage;                             /* 0-3 */
    int world;                             /* ranks of the data-parallel group, >= 1 */
    int half;                              /* working dtype bf16/fp16: a separate fp32 master */
    int nstates;                           /* optimizer state arrays (zero_optim_state_count) */
    int frozen;                            /* the model has ZERO_PARAM_FROZEN parameters */
    zero_offload_device offload_optimizer; /* master + optimizer states */
    zero_offload_device offload_param;     /* the stage-3 parameter shards */
    int hpz;                               /* zero_hpz_partition_size (1: off) */
    int device;                            /* a device rank: unoffloaded states in TIER_DEVICE, "cpu" in TIER_PINNED */
} zero__own_in;

typedef struct zero__own_row {
    int extent; /* EXT_* */
    int tier;   /* TIER_* */
} zero__own_row;

typedef struct zero__own_plan {
    zero__own_row k[EK_COUNT];
    /* fp32 training: the master is the working parameters' owned slice (EK_MASTER's extent is
     * EXT_NONE and its tier that of EK_PARAMS). */
    int master_in_params;
    /* What the extents imply for the collectives:
     *   gather_collective  params sharded: gather all-gathers the unit (stage 3);
     *   reduce_each_mb     grads sharded: every micro-batch's gradient is reduce-scattered into
     *                      the owned shard at grad_ready (stages 2-3); else the whole gradient
     *                      accumulates locally and is reduced once, in the last micro-batch;
     *   update_whole       every rank updates the whole unit (stage 0): the once-a-step
     *                      reduction is an all-reduce, else a reduce-scatter into the owned
     *                      slice (stage 1);
     *   regather           params whole, update sharded: the updated slices are all-gathered
     *                      after the update (stages 1-2). */
    int gather_collective, reduce_each_mb, update_whole, regather;
    /* hpZ (ZeRO++ hierarchical partitions; zero_hpz_partition_size H, stage 3): besides its world
     * shard, a rank keeps a secondary shard of the working parameters, padded / H elements at
     * (rank % H) * padded / H, so that a unit whose secondary copy is current is all-gathered
     * among the H ranks of the group (rank / H) alone. 0: off (H = 1, or H = world: the secondary
     * shard would be the world shard). */
    int hpz;
    unsigned invalid; /* OWN_* bits of the rules broken; 0: a valid setup */
} zero__own_plan;

/* The plan of `in` into *out. Pure: no allocation, no I/O, defined for every input (an invalid
 * stage or world gives every extent EXT_NONE, with the bit set in out->invalid). */
void zero__own_plan_of(const zero__own_in *in, zero__own_plan *out);

/* The inputs a config gives (frozen 0, nstates 0, a host rank): enough for every rule but the
 * frozen ones and for the extents of params, grads and frozen rows. */
void zero__own_in_config(zero__own_in *in, const zero_config *cfg, int world);

#endif
