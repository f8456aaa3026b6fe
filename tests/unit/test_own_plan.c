/* Tests of the ownership plan (src/partition/own.c): every stage x world 1-4 x offload x precision
 * x optimizer state count x frozen x host/device rank against docs/ENGINE.md §3's table and rules,
 * written out here apart from the code, and the validity rules one by one. */
#include "harness.h"
#include "partition/own.h"

/* docs/ENGINE.md §3 (DESIGN.md's stage table): params, grads, master, optimizer states. */
static const char *const DOC[4][4] = {
    {"whole", "whole", "whole", "whole"},
    {"whole", "whole", "shard", "shard"},
    {"whole", "shard", "shard", "shard"},
    {"shard", "shard", "shard", "shard"},
};

static int ext(const char *s) { return s[0] == 'w' ? EXT_WHOLE : EXT_SHARD; }

static const zero_offload_device OFF[3] = {ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_CPU, ZERO_OFFLOAD_NVME};

/* The tier docs/ENGINE.md names for a state kept under offload setting d (NVMe aside). */
static int tier(zero_offload_device d, int device) {
    if (d == ZERO_OFFLOAD_NVME) return TIER_NVME;
    if (!device) return TIER_RAM; /* a host rank: "cpu" is where everything already is */
    return d == ZERO_OFFLOAD_CPU ? TIER_PINNED : TIER_DEVICE;
}

static void check_one(int stage, int world, int half, int k, int frozen, zero_offload_device oo, zero_offload_device op,
                      int device) {
    const zero__own_in in = {stage, world, half, k, frozen, oo, op, 1, device};
    zero__own_plan t;
    zero__own_plan_of(&in, &t);
    /* validity: offload_optimizer needs stage 1-3, offload_param stage 3 */
    unsigned bad = 0;
    if (oo != ZERO_OFFLOAD_NONE && stage == 0) bad |= OWN_OPTIM_OFFLOAD_STAGE;
    if (op != ZERO_OFFLOAD_NONE && stage != 3) bad |= OWN_PARAM_OFFLOAD_STAGE;
    ZT_EQ_INT(t.invalid, bad);
    /* what lives on NVMe */
    const int pn = op == ZERO_OFFLOAD_NVME, on = oo == ZERO_OFFLOAD_NVME && (k > 0 || half);
    /* a master of its own: half precision, or fp32 on a device rank whose optimizer is in pinned
     * host memory (ZeRO-Offload: the host's step keeps the fp32 master beside the states), or whose
     * parameters are off the device (the master stays with the optimizer) */
    const int sep = half || (device && (oo == ZERO_OFFLOAD_CPU || on || op != ZERO_OFFLOAD_NONE));
    const int mn = sep ? on : pn;
    int x[EK_COUNT];
    for (int i = 0; i < 4; i++) x[i] = ext(DOC[stage][i]);
    x[EK_FROZEN] = x[EK_PARAMS];
    if (world == 1) { /* a shard is the whole unit: rows in RAM kept whole, as at stage 0 */
        x[EK_GRADS] = EXT_WHOLE;
        if (!pn) x[EK_PARAMS] = x[EK_FROZEN] = EXT_WHOLE;
        if (!on && !mn) x[EK_MASTER] = x[EK_OPTIM] = EXT_WHOLE;
    }
    const int upd = x[EK_OPTIM];
    if (!sep) x[EK_MASTER] = EXT_NONE;
    if (k == 0) x[EK_OPTIM] = EXT_NONE;
    if (!frozen) x[EK_FROZEN] = EXT_NONE;
    for (int i = 0; i < EK_COUNT; i++) ZT_EQ_INT(t.k[i].extent, x[i]);
    /* tiers */
    const int base = tier(ZERO_OFFLOAD_NONE, device);
    ZT_EQ_INT(t.k[EK_PARAMS].tier, tier(op, device));
    /* ZeRO-Offload: a device rank whose update runs on the host (its master or states in pinned
     * memory or on NVMe) keeps the gradient it accumulates in pinned memory */
    const int host_update = device && (half || k > 0) && (oo == ZERO_OFFLOAD_CPU || on);
    ZT_EQ_INT(t.k[EK_GRADS].tier, host_update ? TIER_PINNED : base);
    const int otier = on ? TIER_NVME : oo == ZERO_OFFLOAD_CPU ? tier(oo, device) : base;
    ZT_EQ_INT(t.k[EK_OPTIM].tier, otier);
    ZT_EQ_INT(t.k[EK_MASTER].tier, sep ? otier : t.k[EK_PARAMS].tier);
    ZT_EQ_INT(t.k[EK_FROZEN].tier, t.k[EK_PARAMS].tier); /* on NVMe too: the parameter file */
    ZT_EQ_INT(t.master_in_params, !sep);
    /* what the extents imply */
    ZT_EQ_INT(t.gather_collective, x[EK_PARAMS] == EXT_SHARD);
    ZT_EQ_INT(t.reduce_each_mb, x[EK_GRADS] == EXT_SHARD);
    ZT_EQ_INT(t.update_whole, upd == EXT_WHOLE);
    ZT_EQ_INT(t.regather, x[EK_PARAMS] == EXT_WHOLE && upd == EXT_SHARD);
    ZT_EQ_INT(t.hpz, 0);
    /* ZeRO's statements in words: on several ranks stage 3 gathers, stages 2-3 reduce every
     * micro-batch, stage 0 updates whole, stages 1-2 all-gather after the update */
    if (world > 1) {
        ZT_EQ_INT(t.gather_collective, stage == 3);
        ZT_EQ_INT(t.reduce_each_mb, stage >= 2);
        ZT_EQ_INT(t.update_whole, stage == 0);
        ZT_EQ_INT(t.regather, stage == 1 || stage == 2);
    } else if (!pn && !on && !mn) { /* one rank, all in memory: stage 0 whatever the stage */
        ZT_EQ_INT(t.gather_collective, 0);
        ZT_EQ_INT(t.reduce_each_mb, 0);
        ZT_EQ_INT(t.update_whole, 1);
        ZT_EQ_INT(t.regather, 0);
    }
}

static void test_table(void) {
    for (int stage = 0; stage < 4; stage++)
        for (int world = 1; world <= 4; world++)
            for (int half = 0; half < 2; half++)
                for (int k = 0; k <= 2; k++)
                    for (int frozen = 0; frozen < 2; frozen++)
                        for (int a = 0; a < 3; a++)
                            for (int b = 0; b < 3; b++)
                                for (int device = 0; device < 2; device++)
                                    check_one(stage, world, half, k, frozen, OFF[a], OFF[b], device);
}

static zero__own_plan plan_of(int stage, int world, int hpz, zero_offload_device op, int frozen) {
    const zero__own_in in = {stage, world, 1, 2, frozen, ZERO_OFFLOAD_NONE, op, hpz, 0};
    zero__own_plan t;
    zero__own_plan_of(&in, &t);
    return t;
}

static void test_hpz(void) {
    zero__own_plan t = plan_of(3, 4, 2, ZERO_OFFLOAD_NONE, 0);
    ZT_EQ_INT(t.invalid, 0);
    ZT_EQ_INT(t.hpz, 2);
    t = plan_of(3, 4, 4, ZERO_OFFLOAD_NONE, 0); /* H = world: the secondary shard is the world's */
    ZT_EQ_INT(t.invalid, 0);
    ZT_EQ_INT(t.hpz, 0);
    ZT_EQ_INT(plan_of(3, 4, 3, ZERO_OFFLOAD_NONE, 0).invalid, OWN_HPZ_WORLD);
    ZT_EQ_INT(plan_of(3, 2, 4, ZERO_OFFLOAD_NONE, 0).invalid, OWN_HPZ_WORLD);
    ZT_EQ_INT(plan_of(3, 4, 0, ZERO_OFFLOAD_NONE, 0).invalid, OWN_HPZ_RANGE);
    ZT_EQ_INT(plan_of(2, 4, 2, ZERO_OFFLOAD_NONE, 0).invalid, OWN_HPZ_STAGE);
    ZT_EQ_INT(plan_of(2, 4, 2, ZERO_OFFLOAD_NONE, 0).hpz, 0);
    ZT_EQ_INT(plan_of(3, 4, 2, ZERO_OFFLOAD_NVME, 0).invalid, OWN_HPZ_NVME);
    ZT_EQ_INT(plan_of(3, 4, 2, ZERO_OFFLOAD_NONE, 1).invalid, OWN_HPZ_FROZEN);
    ZT_EQ_INT(plan_of(3, 4, 4, ZERO_OFFLOAD_NONE, 1).invalid, 0); /* no secondary shard: allowed */
    ZT_EQ_INT(plan_of(3, 1, 2, ZERO_OFFLOAD_NONE, 0).invalid, OWN_HPZ_WORLD);
}

static void test_invalid_inputs(void) {
    const int stages[2] = {-1, 4};
    for (int i = 0; i < 2; i++) {
        const zero__own_in in = {stages[i], 2, 1, 2, 0, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 1, 0};
        zero__own_plan t;
        zero__own_plan_of(&in, &t);
        ZT_CHECK(t.invalid & OWN_BAD_STAGE);
        for (int k = 0; k < EK_COUNT; k++) ZT_EQ_INT(t.k[k].extent, EXT_NONE);
        ZT_EQ_INT(t.gather_collective + t.reduce_each_mb + t.update_whole + t.regather + t.hpz, 0);
    }
    zero__own_in in = {1, 0, 1, 2, 0, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 1, 0};
    zero__own_plan t;
    zero__own_plan_of(&in, &t);
    ZT_EQ_INT(t.invalid, OWN_BAD_WORLD);
    in.world = 2;
    in.offload_param = (zero_offload_device)7;
    zero__own_plan_of(&in, &t);
    ZT_CHECK(t.invalid & OWN_BAD_OFFLOAD);
    ZT_EQ_INT(t.k[EK_PARAMS].tier, TIER_RAM); /* an unknown device is kept where "none" is */
}

/* zero__own_in_config reads the config's stage, precision, offloads and hpZ. */
static void test_from_config(void) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = 3;
    cfg.precision = ZERO_DTYPE_BF16;
    cfg.offload_param.device = ZERO_OFFLOAD_NVME;
    cfg.hpz_partition_size = 2;
    zero__own_in in;
    zero__own_in_config(&in, &cfg, 4);
    ZT_EQ_INT(in.stage, 3);
    ZT_EQ_INT(in.world, 4);
    ZT_EQ_INT(in.half, 1);
    ZT_EQ_INT(in.offload_param, ZERO_OFFLOAD_NVME);
    ZT_EQ_INT(in.hpz, 2);
    ZT_EQ_INT(in.device, 0);
}

int main(void) {
    test_table();
    test_hpz();
    test_invalid_inputs();
    test_from_config();
    return zt_finish("test_own_plan");
}
