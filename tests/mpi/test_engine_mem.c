/* Memory and traffic against the formulas: for every stage, fp32/bf16/fp16 and accumulation 1
 * and 2, the engine's accounted bytes per category equal DESIGN.md's table (with the padding of
 * each unit) exactly; transient buffers stay under the bound documented in docs/ENGINE.md (on one
 * rank stage 0's at every stage: nothing to gather or reduce) and,
 * with reuse_buffers off, return to zero after each step; with it on (the default) the peak is
 * the same to the byte, steps 3-4 allocate fewer transient buffers (none in fp32 at stages 0-2),
 * and what is kept between steps goes back to zero on zero_engine_trim; and the data-collective
 * byte counters equal ZeRO's 2Ψ (stages 0-2) and 3Ψ (stage 3, per micro-batch) under the ring
 * rule of zero/comm.h. */
#include "harness.h"
#include "mlp_model.h"

#include <stdlib.h>

/* The allocator hook sees every block zero allocates (with its 64-byte header). It watches the
 * sizes of the engine's transient buffers (set per configuration): how many are allocated, and
 * how many of each size are alive at once. */
#define HDR 64
#define MAX_SIZES 16
static size_t g_size[MAX_SIZES];
static long g_live[MAX_SIZES], g_max[MAX_SIZES];
static int g_nsizes;
static long g_allocs;
static int watched(size_t bytes) {
    for (int i = 0; i < g_nsizes; i++)
        if (g_size[i] == bytes) return i;
    return -1;
}
static void watch(size_t bytes) {
    if (watched(bytes + HDR) < 0 && g_nsizes < MAX_SIZES) g_size[g_nsizes++] = bytes + HDR;
}
static void *count_alloc(void *ctx, zero_mem_space space, size_t bytes, size_t align) {
    (void)ctx;
    (void)space;
    void *p = NULL;
    int i = watched(bytes);
    if (i >= 0) {
        g_allocs++;
        if (++g_live[i] > g_max[i]) g_max[i] = g_live[i];
    }
    return posix_memalign(&p, align, bytes) == 0 ? p : NULL;
}
static void count_free(void *ctx, zero_mem_space space, void *p, size_t bytes) {
    (void)ctx;
    (void)space;
    int i = watched(bytes);
    if (i >= 0) g_live[i]--;
    free(p);
}

/* From the run of the same configuration with reuse_buffers off: the peak of the transient
 * buffers, and the transient allocations of steps 3 and 4. */
static size_t g_off_peak;
static long g_off_allocs;

static void check_config(zero_comm *comm, int stage, zero_dtype prec, int accum, int reuse) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.precision = prec;
    cfg.grad_accum = accum;
    cfg.micro_batch = 2;
    cfg.reuse_buffers = reuse;
    /* Units padded to 64 elements per rank: every transient size is a multiple of 128 bytes, so
     * the allocator hook cannot mistake a comm request (a smaller block) for one of them. */
    cfg.align_bytes = 256;
    if (prec == ZERO_DTYPE_FP16) cfg.loss_scale = 1024; /* static: no skipped steps */
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, &cfg) || mlp_register(e) || mlp_init(e, 3)) {
        ZT_FAIL("setup stage %d: %s", stage, e ? zero_engine_last_error(e) : "create");
        zero_engine_free(e);
        return;
    }
    const uint64_t w = zero_dtype_size(prec), align = 64; /* 256 bytes of fp32 */
    uint64_t P = 0, Pmax = 0, Smax = 0;
    uint64_t ar = 0, rs = 0, ag = 0; /* expected bytes of one call per unit, summed over units */
    for (int l = 0; l < MLP_LAYERS; l++) {
        uint64_t pad = zero_partition_padded((uint64_t)mlp_unit_numel(l), world, align);
        P += pad;
        Pmax = pad > Pmax ? pad : Pmax;
        Smax = pad / (uint64_t)world > Smax ? pad / (uint64_t)world : Smax;
        ar += zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, pad * w, world);
        rs += zero_comm_ring_bytes(ZERO_COLL_REDUCE_SCATTER, pad * w, world);
        ag += zero_comm_ring_bytes(ZERO_COLL_ALL_GATHER, pad * w, world);
    }
    const uint64_t S = P / (uint64_t)world;
    const int half = prec != ZERO_DTYPE_FP32;
    /* One rank keeps its shards whole (docs/ENGINE.md, "The ownership table"): stage 3 gathers
     * without a copy and stages 2-3 accumulate in place, with stage 0's transient buffers. */
    const int gathers = stage == 3 && world > 1, sharded_grads = stage >= 2 && world > 1;
    zero_mem_stats m;
    zero_engine_mem_stats(e, &m);
    ZT_EQ_INT(m.current[ZERO_MEM_PARAMS], (stage == 3 ? S : P) * w);
    ZT_EQ_INT(m.current[ZERO_MEM_GRADS], (stage <= 1 ? P : S) * w);
    ZT_EQ_INT(m.current[ZERO_MEM_MASTER], half ? (stage == 0 ? P : S) * 4 : 0);
    ZT_EQ_INT(m.current[ZERO_MEM_OPTIM], 2 * (stage == 0 ? P : S) * 4); /* AdamW: m and v */
    ZT_EQ_INT(m.current[ZERO_MEM_BUFFERS], 0);
    /* ZeRO's per-rank model-state bytes (16Ψ for mixed-precision Adam at stage 0 ...), with padding */
    uint64_t model_state = m.current[ZERO_MEM_PARAMS] + m.current[ZERO_MEM_GRADS] + m.current[ZERO_MEM_MASTER] +
                           m.current[ZERO_MEM_OPTIM];
    if (prec == ZERO_DTYPE_BF16) {
        uint64_t want[4] = {16 * P, 4 * P + 12 * S, 2 * P + 14 * S, 16 * S};
        ZT_EQ_INT(model_state, want[stage]);
    }

    /* the engine's transient sizes: gathered/view/gradient/send buffers, received shards, the
     * step's conversion chunk */
    g_nsizes = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        uint64_t pad = zero_partition_padded((uint64_t)mlp_unit_numel(l), world, align);
        watch(pad * w);
        watch(pad * 4);
        watch(pad / (uint64_t)world * w);
    }
    watch(16384 * 4);
    for (int i = 0; i < g_nsizes; i++) g_live[i] = g_max[i] = 0;
    const int steps = 4;
    size_t held = 0;
    long late_allocs = 0;
    for (int s = 0; s < steps; s++) {
        zero_step_stats st;
        long allocs0 = g_allocs;
        if (mlp_train_step(e, s, world, rank, accum, 2, NULL, &st, 1.0f)) {
            ZT_FAIL("train stage %d: %s", stage, zero_engine_last_error(e));
            break;
        }
        if (s >= 2) late_allocs += g_allocs - allocs0;
        zero_engine_mem_stats(e, &m);
        if (!reuse) {
            ZT_EQ_INT(m.current[ZERO_MEM_BUFFERS], 0);
            for (int i = 0; i < g_nsizes; i++) ZT_EQ_INT(g_live[i], 0);
            continue;
        }
        /* between steps the engine keeps idle buffers for reuse, never more than its peak */
        held = m.current[ZERO_MEM_BUFFERS];
        ZT_CHECK(held <= m.peak[ZERO_MEM_BUFFERS]);
    }
    zero_engine_mem_stats(e, &m);
    if (!reuse) {
        g_off_peak = m.peak[ZERO_MEM_BUFFERS];
        g_off_allocs = late_allocs;
    } else {
        /* reuse changes no memory figure: the peak is the one without reuse, to the byte */
        ZT_CHECKF(m.peak[ZERO_MEM_BUFFERS] == g_off_peak, "stage %d %s accum %d: buffers peak %zu with reuse, %zu without",
                  stage, zero_dtype_name(prec), accum, m.peak[ZERO_MEM_BUFFERS], g_off_peak);
        /* and it saves allocations: in steps 3-4 fewer than without reuse (none, where every
         * transient buffer has the size of a unit: fp32 at stages 0-2) */
        ZT_CHECKF(late_allocs <= g_off_allocs && (g_off_allocs == 0 || late_allocs < g_off_allocs),
                  "stage %d %s accum %d: %ld transient allocations in steps 3-4 with reuse, %ld without", stage,
                  zero_dtype_name(prec), accum, late_allocs, g_off_allocs);
        if (!half && stage <= 2) ZT_EQ_INT(late_allocs, 0);
        if (sharded_grads || half) ZT_CHECK(held > 0);
        ZT_EQ_INT(zero_engine_trim(e), held);
        zero_engine_mem_stats(e, &m);
        ZT_EQ_INT(m.current[ZERO_MEM_BUFFERS], 0);
    }
    /* The transient bound of docs/ENGINE.md for a model that holds one unit at a time:
     * stage-3 gathered units (current + prefetched), the fp32 view of the held unit (half types),
     * the fp32 gradient the model adds into, <= 2 reductions in flight (send + shard receive) and
     * the optimizer's fp32 conversion chunk (half types). */
    uint64_t bound = 0;
    if (gathers) bound += 2 * Pmax * w;
    if (half) bound += Pmax * 4 + 16384 * 4;
    if (sharded_grads || half) bound += Pmax * 4;
    if (sharded_grads) bound += 2 * (Pmax * (half ? w : 4) + Smax * w);
    zero_engine_mem_stats(e, &m);
    if (!reuse) ZT_CHECKF(m.peak[ZERO_MEM_BUFFERS] <= bound, "stage %d %s reuse %d: buffers peak %zu > bound %llu", stage,
              zero_dtype_name(prec), reuse, m.peak[ZERO_MEM_BUFFERS], (unsigned long long)bound);
    if (gathers) ZT_CHECK(m.peak[ZERO_MEM_BUFFERS] >= Pmax * w); /* it did gather */
    if (!half && !gathers && !sharded_grads) ZT_EQ_INT(m.peak[ZERO_MEM_BUFFERS], 0); /* fp32, nothing to copy */

    zero_comm_counters c;
    zero_engine_comm_counters(e, &c);
    uint64_t want_ar = 0, want_rs = 0, want_ag = 0;
    switch (stage) {
    case 0: want_ar = ar; break;                                  /* one all-reduce: 2Ψ */
    case 1: want_rs = rs; want_ag = ag; break;                    /* reduce-scatter + all-gather: 2Ψ */
    case 2: want_rs = (uint64_t)accum * rs; want_ag = ag; break;  /* a reduce-scatter per micro-batch */
    case 3: want_rs = (uint64_t)accum * rs; want_ag = (uint64_t)accum * 2 * ag; break; /* 3Ψ per micro-batch */
    }
    ZT_CHECKF(c.bytes[ZERO_COLL_ALL_REDUCE] == steps * want_ar, "stage %d %s accum %d: all-reduce bytes %llu, expected %llu", stage, zero_dtype_name(prec), accum, (unsigned long long)c.bytes[ZERO_COLL_ALL_REDUCE], (unsigned long long)(steps * want_ar));
    ZT_EQ_INT(c.bytes[ZERO_COLL_REDUCE_SCATTER], steps * want_rs);
    ZT_EQ_INT(c.bytes[ZERO_COLL_ALL_GATHER], steps * want_ag);
    if (accum == 1 && world > 1) { /* the paper's statement, in the ring rule: 2Ψ -> 4(N-1)/N Ψ w */
        uint64_t psi_w = P * w, total = c.bytes[0] + c.bytes[1] + c.bytes[2];
        uint64_t per_step = total / steps, unit = psi_w * 2 * (uint64_t)(world - 1) / (uint64_t)world;
        ZT_EQ_INT(per_step, (stage == 3 ? 3 : 2) * unit);
    }
    zero_engine_free(e);
}

int main(void) {
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) return 1;
    zt_rank = zero_comm_rank(comm);
    zero_set_allocator(&(zero_allocator){count_alloc, count_free, NULL});
    const zero_dtype precs[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int stage = 0; stage <= 3; stage++)
        for (int p = 0; p < 3; p++)
            for (int accum = 1; accum <= 2; accum++)
                for (int reuse = 0; reuse <= 1; reuse++) check_config(comm, stage, precs[p], accum, reuse);
    zero_comm_free(comm);
    return zt_finish("test_engine_mem");
}
