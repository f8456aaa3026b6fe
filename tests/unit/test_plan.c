/* Tests of the plan layer: per-rank bytes against hand-computed golden figures, the ZeRO paper's
 * example, offload placement, traffic, and the ladder search on hardware sized to pick each rung. */
#include "decoder/decoder.h"
#include "harness.h"
#include "zero/zero.h"

/* Golden model: units of 1000, 30 and 5000 elements on 3 ranks with align 16 (grain 48) pad to
 * 1008, 48 and 5040: P = 6096, S = 2032, U1 = 5040, U2 = 1008 (worked out by hand). */
static const uint64_t golden_units[3] = {1000, 30, 5000};

static zero_plan_model golden_model(void) {
    zero_plan_model m = {3, golden_units, NULL, NULL, NULL};
    return m;
}

static zero_plan_setup golden_setup(int stage, zero_dtype dt) {
    zero_plan_setup s;
    zero_plan_setup_default(&s);
    s.ranks = 3;
    s.stage = stage;
    s.precision = dt;
    s.optimizer = ZERO_OPTIM_ADAMW;
    return s;
}

typedef struct golden_row {
    uint64_t params, grads, master, optim, buffers;
} golden_row;

static void check_rows(zero_dtype dt, const golden_row rows[4]) {
    zero_plan_model m = golden_model();
    for (int stage = 0; stage < 4; stage++) {
        zero_plan_setup s = golden_setup(stage, dt);
        zero_plan_mem mem;
        zero_error err = {{0}};
        ZT_OK(zero_plan_estimate(&m, &s, &mem, &err));
        ZT_EQ_INT(mem.numel, 6030);
        ZT_EQ_INT(mem.padded, 6096);
        ZT_EQ_INT(mem.shard, 2032);
        ZT_EQ_INT(mem.largest_unit, 5040);
        ZT_EQ_INT(mem.second_unit, 1008);
        ZT_EQ_INT(mem.third_unit, 48);
        ZT_EQ_INT(mem.state_count, 2);
        ZT_EQ_INT(mem.bytes[ZERO_MEM_PARAMS], rows[stage].params);
        ZT_EQ_INT(mem.bytes[ZERO_MEM_GRADS], rows[stage].grads);
        ZT_EQ_INT(mem.bytes[ZERO_MEM_MASTER], rows[stage].master);
        ZT_EQ_INT(mem.bytes[ZERO_MEM_OPTIM], rows[stage].optim);
        ZT_EQ_INT(mem.bytes[ZERO_MEM_BUFFERS], rows[stage].buffers);
        ZT_EQ_INT(mem.bytes[ZERO_MEM_COMM], 0);
        ZT_EQ_INT(mem.transient, rows[stage].buffers);
        uint64_t states = rows[stage].params + rows[stage].grads + rows[stage].master + rows[stage].optim;
        ZT_EQ_INT(mem.model_states, states);
        ZT_EQ_INT(mem.device, states); /* no offload: every state on the device */
        ZT_EQ_INT(mem.host, 0);
        ZT_EQ_INT(mem.nvme, 0);
        ZT_EQ_INT(mem.pool, 0);
    }
}

/* Transient bounds, worked out by hand with U1 = 5040, U2 = 1008, U3 = 48 (include/zero/plan.h). */
static void test_golden_fp32(void) {
    /* fp32: params are the master; persistent grads are full fp32 buffers at stages 0-1. */
    const golden_row rows[4] = {
        {24384, 24384, 0, 48768, 0},
        {24384, 24384, 0, 16256, 0},
        /* grads (U1+U2)*4 = 24192; in flight (U1+U2)*4 = 24192 + (6096/3)*4 = 8128 */
        {24384, 8128, 0, 16256, 24192 + 24192 + 8128},
        /* + gathered (U1+U2)*4 = 24192 */
        {8128, 8128, 0, 16256, 24192 + 24192 + 24192 + 8128},
    };
    check_rows(ZERO_DTYPE_FP32, rows);
}

static void test_golden_bf16(void) {
    /* view 20160 + chunk 65536; grads 24192; in flight 6096*2 + (6048/3)*2 = 12192 + 4032;
     * stage 3 gathered (U1+U2)*2 = 12096 */
    const golden_row rows[4] = {
        {12192, 12192, 24384, 48768, 20160 + 65536 + 24192},
        {12192, 12192, 8128, 16256, 20160 + 65536 + 24192},
        {12192, 4064, 8128, 16256, 20160 + 65536 + 24192 + 12192 + 4032},
        {4064, 4064, 8128, 16256, 20160 + 65536 + 24192 + 12192 + 4032 + 12096},
    };
    check_rows(ZERO_DTYPE_BF16, rows);
    check_rows(ZERO_DTYPE_FP16, rows); /* same width, same bytes */
}

static void test_optimizers(void) {
    zero_plan_model m = golden_model();
    const struct { zero_optim_type t; float momentum; int k; } cases[] = {
        {ZERO_OPTIM_ADAM, 0.0f, 2}, {ZERO_OPTIM_SGD, 0.9f, 1}, {ZERO_OPTIM_SGD, 0.0f, 0},
        {ZERO_OPTIM_LION, 0.0f, 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zero_plan_setup s = golden_setup(1, ZERO_DTYPE_FP32);
        s.optimizer = cases[i].t;
        s.momentum = cases[i].momentum;
        zero_plan_mem mem;
        ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
        ZT_EQ_INT(mem.state_count, cases[i].k);
        ZT_EQ_INT(mem.bytes[ZERO_MEM_OPTIM], 2032ull * 4 * (uint64_t)cases[i].k);
    }
}

static void test_one_rank_and_align(void) {
    /* One rank, align 1: no padding at all, every stage keeps everything, whole. */
    zero_plan_model m = golden_model();
    for (int stage = 0; stage < 4; stage++) {
        zero_plan_setup s = golden_setup(stage, ZERO_DTYPE_BF16);
        s.ranks = 1;
        s.align = 1;
        zero_plan_mem mem;
        ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
        ZT_EQ_INT(mem.padded, 6030);
        ZT_EQ_INT(mem.shard, 6030);
        ZT_EQ_INT(mem.model_states, 6030ull * (2 + 2 + 4 + 8));
        /* the shard is the whole unit: stage 0's transient at every stage (U1 = 5000, U2 = 1000):
         * the fp32 view and chunk, two fp32 gradient buffers; nothing gathered or in flight */
        ZT_EQ_INT(mem.transient, 5000 * 4 + 65536 + 6000 * 4);
        s.precision = ZERO_DTYPE_FP32; /* fp32: the persistent gradient is the buffer: none */
        ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
        ZT_EQ_INT(mem.transient, 0);
        if (stage == 3) { /* parameter shards on NVMe still land in gathered copies: U1 + U2 */
            s.offload_param = ZERO_OFFLOAD_NVME;
            ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
            ZT_EQ_INT(mem.transient, 6000 * 4);
        }
    }
}

/* The ZeRO paper (Rajbhandari et al., SC20, figure 1): 7.5B parameters, 64 ranks, mixed-precision
 * Adam: 120 GB, 31.4 GB, 16.6 GB, 1.9 GB per device (GB = 1e9, rounded to the figure's digits). */
static void test_paper(void) {
    uint64_t units[32];
    for (int i = 0; i < 32; i++) units[i] = 7500000000ull / 32;
    zero_plan_model m = {32, units, NULL, NULL, NULL};
    const double exact[4] = {16 * 7.5e9, (4 + 12.0 / 64) * 7.5e9, (2 + 14.0 / 64) * 7.5e9,
                             16 * 7.5e9 / 64};
    const double paper[4] = {120, 31.4, 16.6, 1.9};
    for (int stage = 0; stage < 4; stage++) {
        zero_plan_setup s;
        zero_plan_setup_default(&s);
        s.ranks = 64;
        s.stage = stage;
        s.precision = ZERO_DTYPE_FP16;
        s.optimizer = ZERO_OPTIM_ADAM;
        zero_plan_mem mem;
        ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
        ZT_NEAR((double)mem.device, exact[stage], 1e-6); /* padding: 168 elements per unit */
        double gb = (double)mem.device / 1e9;
        double rounded = stage == 0 ? floor(gb + 0.5) : floor(gb * 10 + 0.5) / 10;
        ZT_NEAR(rounded, paper[stage], 1e-9);
    }
}

static void test_offload_placement(void) {
    zero_plan_model m = golden_model();
    zero_plan_mem mem;
    zero_plan_setup s = golden_setup(2, ZERO_DTYPE_BF16);
    s.offload_optimizer = ZERO_OFFLOAD_CPU;
    ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
    ZT_EQ_INT(mem.device, 12192); /* the bf16 parameters, whole */
    /* ZeRO-Offload: master 4S + Adam 8S, and the bf16 gradient shard 2S the host optimizer reads,
     * all pinned (S = 2032) */
    ZT_EQ_INT(mem.host, 8128 + 16256 + 4064);
    ZT_EQ_INT(mem.pinned, mem.host);
    ZT_EQ_INT(mem.grad_staging, 4064);
    ZT_EQ_INT(mem.nvme, 0);
    ZT_EQ_INT(mem.transient, 126112); /* offload moves states, not the transient */

    s = golden_setup(3, ZERO_DTYPE_BF16);
    s.offload_optimizer = ZERO_OFFLOAD_CPU;
    s.offload_param = ZERO_OFFLOAD_CPU;
    ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
    ZT_EQ_INT(mem.device, 0);
    ZT_EQ_INT(mem.host, 4064 + 4064 + 8128 + 16256);
    ZT_EQ_INT(mem.pinned, mem.host);

    /* NVMe: the states go to the drive; the host keeps the swap pools: 4 x 1 MiB for the
     * optimizer, 5 x min(1e8, U1/N = 1680) elements x 2 bytes for the parameters. */
    s.offload_optimizer = ZERO_OFFLOAD_NVME;
    s.offload_param = ZERO_OFFLOAD_NVME;
    ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
    ZT_EQ_INT(mem.device, 0);
    ZT_EQ_INT(mem.nvme, 4064 + 8128 + 16256);
    ZT_EQ_INT(mem.pool, 4 * 1048576 + 5 * 1680 * 2);
    ZT_EQ_INT(mem.host, mem.pool + 4064); /* the host optimizer reads the gradient shard there */
    ZT_EQ_INT(mem.pinned, mem.host);
    ZT_EQ_INT(mem.model_states, 4064 * 2 + 8128 + 16256);

    /* A CPU rank (on_device 0): every state in RAM, nothing pinned, no staging copy */
    s.on_device = 0;
    ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
    ZT_EQ_INT(mem.device, 0);
    ZT_EQ_INT(mem.pinned, 0);
    ZT_EQ_INT(mem.grad_staging, 0);
    ZT_EQ_INT(mem.host, mem.pool + 4064); /* the pools and the gradient shard */
}

static void test_traffic(void) {
    zero_plan_traffic t;
    zero_plan_traffic_of(1, 3, 6096, ZERO_DTYPE_FP32, &t);
    ZT_NEAR(t.volume, 2.0 * 6096 * 4, 0);
    ZT_NEAR(t.sent, 2.0 * 6096 * 4 * 2 / 3, 1e-12);
    ZT_NEAR(t.counted, 4.0 * 6096 * 4 * 2 / 3, 1e-12);
    ZT_NEAR(zero_plan_link_seconds(&t, 1.0), 2.0 * 6096 * 4 * 2 / 3 * 8 / 1e9, 1e-12);
    ZT_NEAR(zero_plan_link_seconds(&t, 0.0), 0, 0);
    zero_plan_traffic_of(3, 4, 1000, ZERO_DTYPE_BF16, &t);
    ZT_NEAR(t.volume, 3.0 * 1000 * 2, 0);
    ZT_NEAR(t.sent, 3.0 * 1000 * 2 * 3 / 4, 1e-12);
    zero_plan_traffic_of(3, 1, 1000, ZERO_DTYPE_BF16, &t);
    ZT_NEAR(t.volume + t.sent + t.counted, 0, 0); /* one rank talks to nobody */
    /* one optimizer step of K = 5 micro-batches (DESIGN.md's table): stages 0-1 reduce once;
     * stage 2 reduce-scatters every micro-batch and all-gathers once, (K + 1) / 2 of 2Ψ; stage 3
     * moves 3Ψ every micro-batch */
    const double want[4] = {1, 1, 3, 5};
    for (int st = 0; st < 4; st++) {
        int psi = 0;
        zero_plan_traffic_of(st, 4, 1000, ZERO_DTYPE_BF16, &t);
        ZT_NEAR(zero_plan_traffic_per_step(st, 4, 5, &t, &psi), want[st] * t.counted, 1e-12);
        ZT_EQ_INT(psi, st == 3 ? 3 : 2);
        ZT_NEAR(zero_plan_traffic_per_step(st, 1, 5, &t, &psi), 0, 0);
    }
}

static void test_errors(void) {
    zero_plan_model m = golden_model();
    zero_plan_mem mem;
    zero_error err = {{0}};
    zero_plan_setup s = golden_setup(4, ZERO_DTYPE_FP32);
    ZT_EQ_INT(zero_plan_estimate(&m, &s, &mem, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "stage 4") != NULL, "message: %s", err.msg);
    s = golden_setup(0, ZERO_DTYPE_INT32);
    ZT_EQ_INT(zero_plan_estimate(&m, &s, &mem, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "int32") != NULL, "message: %s", err.msg);
    s = golden_setup(2, ZERO_DTYPE_FP32);
    s.offload_param = ZERO_OFFLOAD_NVME;
    ZT_EQ_INT(zero_plan_estimate(&m, &s, &mem, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "stage 2") != NULL, "message: %s", err.msg);
    s = golden_setup(0, ZERO_DTYPE_FP32);
    s.ranks = 0;
    ZT_EQ_INT(zero_plan_estimate(&m, &s, &mem, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "ranks 0") != NULL, "message: %s", err.msg);
    s = golden_setup(0, ZERO_DTYPE_FP32);
    uint64_t zero_unit[2] = {5, 0};
    zero_plan_model bad = {2, zero_unit, NULL, NULL, NULL};
    ZT_EQ_INT(zero_plan_estimate(&bad, &s, &mem, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "unit 1") != NULL, "message: %s", err.msg);
    bad.num_units = 0;
    ZT_EQ_INT(zero_plan_estimate(&bad, &s, &mem, NULL), ZERO_ERR_INVALID_ARG);
    uint64_t huge[2] = {UINT64_MAX / 4, UINT64_MAX / 4};
    zero_plan_model big = {2, huge, NULL, NULL, NULL};
    ZT_EQ_INT(zero_plan_estimate(&big, &s, &mem, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "overflow") != NULL, "message: %s", err.msg);
}

/* ---------------------------------------------------------------- the search */
/* Search model: 100 units of 960 elements (multiples of 48: no padding on 3 ranks), so the model
 * states dominate the transient. P = 96000, S = 32000, U1 = U2 = 960, S1 = 320. In bf16 per rank
 * (worked out by hand):
 *   transient: stages 0-1 3840 + 65536 + 7680 = 77056; stage 2 + 7040 = 84096; stage 3 + 3840 = 87936
 *   stage 0: 192000 + 192000 + 384000 + 768000 = 1536000 (+ 77056 = 1613056 on the device)
 *   stage 1: 192000 + 192000 + 128000 + 256000 = 768000 (845056)
 *   stage 2: 192000 + 64000 + 384000 = 640000 (724096)
 *   2 + optimizer on cpu: 192000 (276096) on the device, 384000 + 64000 (the gradient shard the
 *   host optimizer reads, 2S) per rank on the host
 *   stage 3: 64000 + 64000 + 384000 = 512000 (599936)
 *   3 + optimizer on cpu: 64000 (151936), host 448000; 3 + cpu + cpu: 0 (87936), host 512000
 *   per rank */
static uint64_t search_units[100];

/* Activations: 10000 bytes per sequence, 1000 with checkpointing. */
static uint64_t linear_act(void *ctx, int64_t mb, int ckpt) {
    (void)ctx;
    return (uint64_t)mb * (ckpt ? 1000u : 10000u);
}

static zero_plan_model search_model(void) {
    for (int i = 0; i < 100; i++) search_units[i] = 960;
    zero_plan_model m = {100, search_units, linear_act, NULL, NULL};
    return m;
}

/* host 0 on a GPU machine (device > 0): a roomy host, 1e12 bytes — a device rank always needs
 * some, the pinned staging of its copies and collectives (zero_plan_mem.staging). */
static zero_plan_request golden_request(double device, double host, double nvme) {
    zero_plan_request r;
    zero_plan_request_default(&r);
    r.base = golden_setup(0, ZERO_DTYPE_BF16);
    r.device_mem = device;
    r.host_mem = device > 0 && host == 0 ? 1e12 : host;
    r.nvme_mem = nvme;
    r.headroom = 0;
    r.max_micro_batch = 8;
    return r;
}

static void test_search(void) {
    zero_plan_model m = search_model();
    zero_plan_result res;
    zero_error err = {{0}};

    /* Plenty: stage 0, no checkpointing, the largest micro-batch. */
    zero_plan_request r = golden_request(1e9, 0, 0);
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.count, 7); /* no nvme rungs */
    ZT_EQ_INT(res.chosen, 0);
    ZT_EQ_INT(res.cand[0].stage, 0);
    ZT_EQ_INT(res.cand[0].mem.transient, 77056);
    ZT_EQ_INT(res.cand[0].checkpointing, 0);
    ZT_EQ_INT(res.cand[0].micro_batch, 8);
    ZT_NEAR(res.cand[0].need_device, 1613056 + 80000, 0);

    /* Stage 0 fits only with checkpointing: 1613056 + 1000 B <= 1618056 -> B = 5. */
    r = golden_request(1618056, 0, 0);
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.chosen, 0);
    ZT_EQ_INT(res.cand[0].checkpointing, 1);
    ZT_EQ_INT(res.cand[0].micro_batch, 5);
    ZT_EQ_INT(res.cand[0].activation, 5000);

    /* 900000 bytes: stage 0 misses by 1614056 - 900000; stage 1 fits without checkpointing,
     * 845056 + 10000 B <= 900000 -> B = 5. */
    r = golden_request(900000, 0, 0);
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.chosen, 1);
    ZT_EQ_INT(res.cand[0].fits, 0);
    ZT_NEAR(res.cand[0].missing_device, 714056, 0);
    ZT_EQ_INT(res.cand[1].stage, 1);
    ZT_EQ_INT(res.cand[1].checkpointing, 0);
    ZT_EQ_INT(res.cand[1].micro_batch, 5);
    ZT_EQ_INT(res.closest, 1);

    /* 345000 bytes and a roomy host: stage 2 with the optimizer on cpu, 276096 + 10000 B <= 345000
     * -> B = 6 without checkpointing; host 3 x 448000. */
    r = golden_request(345000, 1e7, 0);
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.chosen, 3);
    ZT_EQ_INT(res.cand[3].stage, 2);
    ZT_EQ_INT(res.cand[3].offload_optimizer, ZERO_OFFLOAD_CPU);
    ZT_EQ_INT(res.cand[3].offload_param, ZERO_OFFLOAD_NONE);
    ZT_EQ_INT(res.cand[3].checkpointing, 0);
    ZT_EQ_INT(res.cand[3].micro_batch, 6);
    ZT_NEAR(res.cand[3].need_host, 3 * (448000.0 + (double)res.cand[3].mem.staging), 0); /* states + staging */
    ZT_NEAR(res.cand[2].missing_device, 724096 + 1000 - 345000, 0);

    /* Nothing fits in 1000 bytes: the closest is 3 + cpu + cpu, missing 87936 + 1000 - 1000. */
    r = golden_request(1000, 1e9, 0);
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.chosen, -1);
    ZT_EQ_INT(res.closest, 6);
    ZT_EQ_INT(res.cand[6].stage, 3);
    ZT_EQ_INT(res.cand[6].offload_param, ZERO_OFFLOAD_CPU);
    ZT_NEAR(res.cand[6].missing_device, 87936, 0);
    ZT_NEAR(res.cand[6].missing_host, 0, 0);

    /* The host's need is the states plus the pinned staging of the copies and collectives: 2 +
     * nvme needs the swap pools and the gradient shards the host optimizer reads, 3 x (4 x 1024 +
     * 64000) bytes, and ZeRO-Offload's two 1 MiB upload buffers (the working copy stays on the
     * device), as 2 + cpu does beside its 3 x 448000 of states; 3 + cpu + cpu uploads nothing (its
     * parameters are on the host). With the host at 2 + nvme's need exactly, 2 + cpu misses by its
     * extra states, 3 + cpu + cpu fits. */
    r = golden_request(345000, 1e12, 1e9);
    r.base.aio_block_size = 1024;
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.count, 10);
    const double st = (double)res.cand[7].mem.staging;
    ZT_EQ_INT(res.cand[7].stage, 2);
    ZT_EQ_INT(res.cand[7].offload_optimizer, ZERO_OFFLOAD_NVME);
    ZT_CHECKF(st > 2 * 1048576.0, "2 + nvme's staging %g: the upload buffers and the collectives'", st);
    ZT_NEAR(res.cand[3].mem.staging, st, 0);
    ZT_CHECKF(res.cand[6].mem.staging < 2 * 1048576.0, "3 + cpu + cpu's staging %llu",
              (unsigned long long)res.cand[6].mem.staging);
    ZT_NEAR(res.cand[7].need_host, 3 * (4096.0 + 64000 + st), 0);
    ZT_NEAR(res.cand[7].need_nvme, 3 * 384000.0, 0);
    r.host_mem = 3 * (4096.0 + 64000 + st);
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.cand[7].fits, 1);
    ZT_NEAR(res.cand[7].missing_host + res.cand[7].missing_device + res.cand[7].missing_nvme, 0, 0);
    ZT_EQ_INT(res.cand[3].fits, 0);
    ZT_NEAR(res.cand[3].missing_host, 3 * (448000 + st) - r.host_mem, 1e-6);
    ZT_EQ_INT(res.cand[6].fits, 1);
    ZT_NEAR(res.cand[6].need_host, 3 * (512000 + (double)res.cand[6].mem.staging), 0);

    /* Headroom: 10% of 1000000 kept free leaves 900000: as above, stage 1 at micro-batch 5. */
    r = golden_request(1000000, 0, 0);
    r.headroom = 0.1;
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_NEAR(res.usable_device, 900000, 1e-9);
    ZT_NEAR(res.cand[0].missing_device, 714056, 1e-6);
    ZT_EQ_INT(res.chosen, 1);
    ZT_EQ_INT(res.cand[1].checkpointing, 0);
    ZT_EQ_INT(res.cand[1].micro_batch, 5);

    /* Without an activation figure checkpointing is never chosen and activations count 0. */
    m.activation = NULL;
    r = golden_request(845056, 0, 0);
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.chosen, 1);
    ZT_EQ_INT(res.cand[1].checkpointing, 0);
    ZT_EQ_INT(res.cand[1].activation, 0);
    ZT_EQ_INT(res.cand[1].micro_batch, 8);
}

/* The least any rung of a CPU-only search needs per rank (every rung sized, none fitting: no RAM). */
static double least_need(const zero_plan_model *m, zero_plan_request r, int states) {
    zero_plan_result res;
    r.host_mem = 1; /* nothing fits: every rung reports its need at micro-batch 1 */
    r.base.optim_states = states;
    ZT_OK(zero_plan_search(m, &r, &res, NULL));
    double least = INFINITY;
    for (int i = 0; i < res.count; i++)
        if (res.cand[i].need_device < least) least = res.cand[i].need_device;
    return least;
}

/* Nothing fits with fp32 optimizer states on a CPU-only machine, something does with 8-bit ones:
 * the search says so (optim_states) and chooses among 8-bit rungs, without NVMe ones; not for SGD,
 * not on a GPU machine, not when fp32 fits. */
static void test_search_q8(void) {
    /* units of millions of elements (the golden model's are under 4,096: they would keep fp32) */
    static const uint64_t numel[3] = {UINT64_C(1) << 20, UINT64_C(1) << 20, UINT64_C(3) << 19};
    const zero_plan_model m = {3, numel, NULL, NULL, NULL};
    zero_plan_request r = golden_request(0, 0, 0);
    const double n32 = least_need(&m, r, ZERO_OPTIM_STATES_FP32), n8 = least_need(&m, r, ZERO_OPTIM_STATES_INT8);
    ZT_CHECKF(n8 < n32, "8-bit states need %g, fp32 %g", n8, n32);
    const int rpn = r.base.ranks; /* one node */
    r.host_mem = (n8 + n32) / 2 * rpn;
    zero_plan_result res;
    ZT_OK(zero_plan_search(&m, &r, &res, NULL));
    ZT_EQ_INT(res.optim_states, ZERO_OPTIM_STATES_INT8);
    ZT_CHECK(res.chosen >= 0);
    for (int i = 0; i < res.count; i++)
        ZT_CHECK(res.cand[i].offload_optimizer != ZERO_OFFLOAD_NVME && res.cand[i].offload_param != ZERO_OFFLOAD_NVME);
    /* the chosen rung's optimizer bytes are the 8-bit ones */
    zero_plan_setup s = r.base;
    s.stage = res.cand[res.chosen].stage;
    s.on_device = 0;
    s.optim_states = ZERO_OPTIM_STATES_INT8;
    zero_plan_mem pm;
    ZT_OK(zero_plan_estimate(&m, &s, &pm, NULL));
    ZT_EQ_INT(res.cand[res.chosen].mem.bytes[ZERO_MEM_OPTIM], pm.bytes[ZERO_MEM_OPTIM]);
    /* SGD: no 8-bit states; a GPU machine: none either (the engine steps them on the host) */
    zero_plan_request g = r;
    g.base.optimizer = ZERO_OPTIM_SGD;
    ZT_OK(zero_plan_search(&m, &g, &res, NULL));
    ZT_EQ_INT(res.optim_states, ZERO_OPTIM_STATES_FP32);
    g = r;
    g.device_mem = (n8 + n32) / 2;
    g.host_mem = 1;
    ZT_OK(zero_plan_search(&m, &g, &res, NULL));
    ZT_EQ_INT(res.optim_states, ZERO_OPTIM_STATES_FP32);
    /* room for fp32: fp32 */
    g = r;
    g.host_mem = n32 * 2 * rpn;
    ZT_OK(zero_plan_search(&m, &g, &res, NULL));
    ZT_EQ_INT(res.optim_states, ZERO_OPTIM_STATES_FP32);
    ZT_CHECK(res.chosen >= 0);
}

static void test_search_cpu_only(void) {
    zero_plan_model m = search_model();
    zero_plan_result res;
    /* CPU-only: 3 ranks share 3 x 900000 bytes of RAM; cpu rungs would move nothing. */
    zero_plan_request r = golden_request(0, 2700000, 1e9);
    r.base.aio_block_size = 1024;
    ZT_OK(zero_plan_search(&m, &r, &res, NULL));
    ZT_EQ_INT(res.count, 7);
    ZT_NEAR(res.usable_device, 900000, 1e-9);
    ZT_NEAR(res.usable_host, 0, 0);
    for (int i = 0; i < res.count; i++) {
        ZT_CHECK(res.cand[i].offload_optimizer != ZERO_OFFLOAD_CPU);
        ZT_NEAR(res.cand[i].need_host, 0, 0);
    }
    ZT_EQ_INT(res.chosen, 1);
    ZT_EQ_INT(res.cand[1].micro_batch, 5);
    /* On a CPU-only machine the NVMe pools are in the rank's RAM. */
    int nvme_rungs = 0;
    for (int i = 0; i < res.count; i++) {
        const zero_plan_candidate *c = &res.cand[i];
        if (c->offload_optimizer != ZERO_OFFLOAD_NVME) continue;
        nvme_rungs++;
        ZT_CHECK(c->mem.host > 0);
        ZT_NEAR(c->need_device, (double)(c->mem.device + c->mem.transient + c->mem.host) +
                                    (double)c->activation, 0);
    }
    ZT_EQ_INT(nvme_rungs, 3);
}

static void test_search_errors(void) {
    zero_plan_model m = search_model();
    zero_plan_result res;
    zero_error err = {{0}};
    zero_plan_request r = golden_request(1e9, 0, 0);
    r.nodes = 2; /* 3 ranks on 2 nodes */
    ZT_EQ_INT(zero_plan_search(&m, &r, &res, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "3 ranks on 2 nodes") != NULL, "message: %s", err.msg);
    r = golden_request(0, 0, 0);
    ZT_EQ_INT(zero_plan_search(&m, &r, &res, &err), ZERO_ERR_INVALID_ARG);
    r = golden_request(1e9, 0, 0);
    r.headroom = 1.0;
    ZT_EQ_INT(zero_plan_search(&m, &r, &res, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "headroom 1") != NULL, "message: %s", err.msg);
    r = golden_request(1e9, 0, 0);
    r.max_micro_batch = 0;
    ZT_EQ_INT(zero_plan_search(&m, &r, &res, &err), ZERO_ERR_INVALID_ARG);
    r = golden_request(-1, 0, 0);
    ZT_EQ_INT(zero_plan_search(&m, &r, &res, &err), ZERO_ERR_INVALID_ARG);
}

/* ---------------------------------------------------------------- the step's time */
/* Two units of 3200 elements (multiples of 4 x 16: no padding on 4 ranks): P = 6400, S = 1600,
 * M = 25600 bytes in fp32. Round rates so that every figure below is worked out by hand. */
static const uint64_t time_units[2] = {3200, 3200};

static zero_plan_rates round_rates(void) {
    zero_plan_rates r;
    memset(&r, 0, sizeof r);
    r.compute_flops = 1e9;
    r.mem_bytes = r.host_mem_bytes = 1e9;
    r.node_all_reduce = 1e8;
    r.node_reduce_scatter = 2e8;
    r.node_all_gather = 4e8;
    r.link_bytes = 1e8;
    r.latency = 1e-5;
    r.host_link_bytes = 1e7;
    r.disk_read_bytes = r.disk_write_bytes = 1e6;
    return r;
}

static void test_time_hand(void) {
    zero_plan_model m = {2, time_units, NULL, NULL, NULL};
    const zero_plan_compute c = {.fwd_flops_per_token = 1e6, .recompute_flops_per_token = 5e5, .seq_len = 10};
    zero_plan_rates r = round_rates();
    zero_plan_setup s;
    zero_plan_setup_default(&s);
    s.ranks = 4;
    s.stage = 3;
    zero_plan_time t;
    zero_error err = {{0}};
    /* 4 ranks on 2 nodes, micro-batch 2 (20 tokens), checkpointing:
     *   compute 3 x 20 x 1e6 / 1e9 = 0.06; recompute 20 x 5e5 / 1e9 = 0.01
     *   reduce-scatter: in node 1/2 x 25600 / 2e8 = 6.4e-5; across 1/2 x 25600 / 1e8 = 1.28e-4
     *     + 2 units x (1 step + 1 control exchange) x 1e-5 = 1.68e-4; each all-gather: 3.2e-5 in
     *     node, 1.68e-4 across
     *   update: 1600 x (8 + 8 x 2 + 2 x 4) = 51200 B / 1e9 = 5.12e-5 */
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.compute, 0.06, 1e-15);
    ZT_NEAR(t.recompute, 0.01, 1e-15);
    ZT_NEAR(t.comm_node, 6.4e-5 + 2 * 3.2e-5, 1e-15);
    ZT_NEAR(t.comm_cross, 3 * 1.68e-4, 1e-15);
    ZT_NEAR(t.comm_hidden, 0, 0);
    ZT_NEAR(t.optimizer, 5.12e-5, 1e-15);
    ZT_NEAR(t.host_copy + t.disk, 0, 0);
    ZT_NEAR(t.total, 0.07 + 1.28e-4 + 5.04e-4 + 5.12e-5, 1e-15);
    ZT_NEAR(t.cross_bytes, 3 * 12800, 0);
    ZT_NEAR(t.node_bytes, 3 * 12800, 0);
    ZT_EQ_INT(t.collectives, 6);
    /* qwZ in blocks of 4: the two all-gathers move 1 + 4/4 = 2 bytes an element instead of fp32's
     * 4, half their bytes and time (the reduce-scatter unchanged); its coder at dequant_elems: 2
     * world gathers of the 6400 elements; with hpZ the group's gather stays fp32 */
    s.quant_weights_block = 4;
    r.dequant_elems = 1e9;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.cross_bytes, 12800 + 2 * 6400, 0);
    ZT_NEAR(t.node_bytes, 12800 + 2 * 6400, 0);
    ZT_NEAR(t.comm_node, 6.4e-5 + 2 * 1.6e-5, 1e-15);
    ZT_NEAR(t.comm_cross, 1.68e-4 + 2 * (0.64e-4 + 4e-5), 1e-15);
    ZT_NEAR(t.dequant, 2 * 6400 / 1e9, 1e-15);
    /* qgZ in blocks of 4 (without qwZ): the reduce-scatter's cross-node step at 2 bytes an element
     * (its node step in fp32), its coder 2 (K-1)/K P/L elements */
    s.quant_weights_block = 0;
    s.quant_grads_block = 4;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.cross_bytes, 6400 + 2 * 12800, 0);
    ZT_NEAR(t.node_bytes, 3 * 12800, 0);
    ZT_NEAR(t.comm_cross, (0.64e-4 + 4e-5) + 2 * 1.68e-4, 1e-15);
    ZT_NEAR(t.dequant, 2 * 0.5 * 6400 / 2 / 1e9, 1e-15);
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 2, 1, &r, &t, &err)); /* one node: nothing quantized */
    ZT_NEAR(t.dequant + t.cross_bytes, 0, 0);
    s.quant_grads_block = 0;
    s.quant_weights_block = 4;
    zero_plan_traffic tq;
    zero_plan_traffic_frozen(3, 4, 6400, ZERO_DTYPE_FP32, 0, ZERO_DTYPE_COUNT, &tq);
    zero_plan_traffic_qgz(3, 4, 6400, ZERO_DTYPE_FP32, 4, &tq);
    ZT_NEAR(tq.volume, 6400 * 2 + 2 * 6400 * 4, 0);
    zero_plan_traffic_frozen(3, 4, 6400, ZERO_DTYPE_FP32, 0, ZERO_DTYPE_COUNT, &tq);
    zero_plan_traffic_qwz(3, 4, 6400, ZERO_DTYPE_FP32, 0, ZERO_DTYPE_COUNT, 4, 0, &tq);
    ZT_NEAR(tq.volume, 6400 * 4 + 2 * 6400 * 2, 0);
    ZT_NEAR(tq.sent, (6400 * 4 + 2 * 6400 * 2) * 3.0 / 4, 1e-9);
    zero_plan_traffic_qwz(2, 4, 6400, ZERO_DTYPE_FP32, 0, ZERO_DTYPE_COUNT, 4, 0, &tq); /* below stage 3: nothing */
    ZT_NEAR(tq.volume, 6400 * 4 + 2 * 6400 * 2, 0);
    s.stage = 2; /* below stage 3 nothing is gathered: the plain step */
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    zero_plan_time t2;
    s.quant_weights_block = 0;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t2, &err));
    ZT_NEAR(t.total, t2.total, 0);
    ZT_NEAR(t.cross_bytes, t2.cross_bytes, 0);
    s.quant_weights_block = -1;
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "qwZ") != NULL, "message: %s", err.msg);
    s.stage = 3;
    s.quant_weights_block = 0;
    r.dequant_elems = 0;

    /* Stage 0: one all-reduce, 2 x 1/2 x 25600 / 1e8 in node, the same across + 2 units x 3 x 1e-5;
     * the update of all 6400 elements; no checkpointing: no recompute. */
    s.stage = 0;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.recompute, 0, 0);
    ZT_NEAR(t.comm_node, 2.56e-4, 1e-15);
    ZT_NEAR(t.comm_cross, 2.56e-4 + 6e-5, 1e-15);
    ZT_NEAR(t.optimizer, 6400 * 32 / 1e9, 1e-15);
    ZT_NEAR(t.total, 0.06 + 2.56e-4 + 3.16e-4 + 2.048e-4, 1e-15);
    ZT_NEAR(t.cross_bytes, 25600, 0);
    ZT_EQ_INT(t.collectives, 2);

    /* One node of 4: nothing crosses; 4 nodes of 1: nothing in the node. */
    s.stage = 1;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_cross + t.cross_bytes, 0, 0);
    ZT_NEAR(t.comm_node, 3.0 / 4 * 25600 / 2e8 + 3.0 / 4 * 25600 / 4e8, 1e-15);
    ZT_OK(zero_plan_step_time(&m, &c, &s, 4, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_node, 0, 0);
    ZT_NEAR(t.comm_cross, 2 * (3.0 / 4 * 25600 / 1e8 + 3 * 2 * 2 * 1e-5), 1e-15);
    /* One rank talks to nobody. */
    s.ranks = 1;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_node + t.comm_cross, 0, 0);
    ZT_EQ_INT(t.collectives, 0);
    s.ranks = 4;

    /* Overlap hides communication up to the compute: half of it here. */
    r.overlap = 0.5;
    s.stage = 3;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.comm_hidden, 0.5 * (1.28e-4 + 5.04e-4), 1e-15);
    ZT_NEAR(t.total, 0.07 + 0.5 * (1.28e-4 + 5.04e-4) + 5.12e-5, 1e-15);
    /* ... never more than the compute: without FLOPs nothing is hidden. */
    ZT_OK(zero_plan_step_time(&m, NULL, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.compute + t.recompute + t.comm_hidden, 0, 0);
    r.overlap = 0;

    /* bf16, stage 3, optimizer and parameters on NVMe (w = 2, S = 1600, k = 2):
     *   update 1600 x (8 + 16 + 3 x 2) = 48000 B at host_mem 1e9 = 4.8e-5
     *   step reads: states 12800 + master 6400; writes the same + the working shard 3200;
     *   gathers read 2 x 3200. Two ranks share the node's drive (1e6 B/s each way):
     *   step I/O 2 x 19200 / 1e6 + 2 x 22400 / 1e6 = 0.0832, of which the update hides 4.8e-5;
     *   gather reads 2 x 6400 / 1e6 = 0.0128, hidden behind 0.07 of compute. */
    s.precision = ZERO_DTYPE_BF16;
    s.offload_optimizer = s.offload_param = ZERO_OFFLOAD_NVME;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.optimizer, 4.8e-5, 1e-15);
    ZT_NEAR(t.disk_read, 19200 + 6400, 0);
    ZT_NEAR(t.disk_written, 22400, 0);
    ZT_NEAR(t.disk, 0.0832 - 4.8e-5, 1e-12);
    /* Without compute the gathers' reads show: + 0.0128. */
    ZT_OK(zero_plan_step_time(&m, NULL, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.disk, 0.0832 - 4.8e-5 + 0.0128, 1e-12);
    /* fp32: the parameter file holds the master: read 3 times (2 gathers and the step), written
     * once; the states read and written once: reads 3 x 6400 + 12800, writes 6400 + 12800. */
    s.precision = ZERO_DTYPE_FP32;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.disk_read, 3 * 6400 + 12800, 0);
    ZT_NEAR(t.disk_written, 6400 + 12800, 0);
    /* cpu offload (a GPU machine): the gradient shard down and the parameters up, and with the
     * parameters on the host the two gathers' copies: 4 x 1600 x 2 B at 1e7 B/s. */
    s.precision = ZERO_DTYPE_BF16;
    s.offload_optimizer = s.offload_param = ZERO_OFFLOAD_CPU;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.host_copy, 4 * 1600 * 2 / 1e7, 1e-15);
    ZT_NEAR(t.disk + t.disk_read + t.disk_written, 0, 0);
}

/* Stage 3's prefetched gathers across nodes move while the unit before computes, at the
 * all-gather's progress share (docs/PLANNING.md §9): worked by hand on 2 nodes of 1 rank. */
static void test_time_gathers_hidden(void) {
    zero_plan_model m = {2, time_units, NULL, NULL, NULL};
    /* backward pieces (as test_time_backward_hidden's): 2 parts making unit 1 ready, 1 part (and
     * the recomputation) making none, 1 part making unit 0 ready; the forward runs them reversed */
    const zero_plan_bwd_piece pieces[3] = {{2, 0, 1}, {1, 1, -1}, {1, 0, 0}};
    zero_plan_compute c = {.fwd_flops_per_token = 1e6, .recompute_flops_per_token = 5e5, .seq_len = 10,
                           .bwd = pieces, .bwd_pieces = 3};
    zero_plan_rates r = round_rates();
    r.latency = 0;
    r.link_bytes = 2.56e5; /* a pass's gathers across: 1/2 x 25600 B = 0.05 s, 0.025 s a unit */
    zero_plan_setup s;
    zero_plan_setup_default(&s);
    s.ranks = 2;
    s.stage = 3;
    zero_plan_time t, t0;
    zero_error err = {{0}};
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t0, &err));
    ZT_NEAR(t0.comm_hidden_gathers, 0, 0);
    /* share 0.5, forward 0.02 s in pieces of 0.005, 0.005, 0.01 (reversed): unit 1's gather moves
     * during the second (0.0025); backward 0.02, 0.01, 0.01: unit 0's during the second (0.005) */
    r.progress_all_gather = 0.5;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_gathers, 0.0075, 1e-15);
    ZT_NEAR(t.comm_hidden, 0.0075, 1e-15);
    ZT_NEAR(t.total, t0.total - 0.0075, 1e-15);
    /* checkpointing: the recomputation (0.01 s) joins the backward's second piece: 0.02 s, 0.01 */
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_gathers, 0.0025 + 0.01, 1e-15);
    /* share 1: 0.005 + 0.01; a link 10 times as fast: each gather (0.0025 s) hides whole */
    r.progress_all_gather = 1;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_gathers, 0.015, 1e-15);
    r.link_bytes = 2.56e6;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_gathers, 0.005, 1e-15);
    /* stages 0-2 gather nothing before a unit computes; one node crosses nothing */
    s.stage = 2;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_gathers, 0, 0);
    s.stage = 3;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_gathers, 0, 0);
    /* a share outside [0, 1] is refused, naming it */
    r.progress_all_gather = 1.5;
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "progress_all_gather 1.5") != NULL, "%s", err.msg);
}

/* The backward's reductions drain across nodes while the backward computes, at their progress
 * share (docs/PLANNING.md §9): worked by hand on 2 nodes of 1 rank, no latency. */
static void test_time_backward_hidden(void) {
    zero_plan_model m = {2, time_units, NULL, NULL, NULL};
    /* the backward: a piece of 2 parts that makes unit 1 ready, one of 1 part (and all the
     * recomputation) that makes none, one of 1 part that makes unit 0 ready */
    const zero_plan_bwd_piece pieces[3] = {{2, 0, 1}, {1, 1, -1}, {1, 0, 0}};
    zero_plan_compute c = {.fwd_flops_per_token = 1e6, .recompute_flops_per_token = 5e5, .seq_len = 10,
                           .bwd = pieces, .bwd_pieces = 3};
    zero_plan_rates r = round_rates();
    r.latency = 0;
    r.link_bytes = 2.56e5; /* the all-reduce across: 2 x 1/2 x 25600 B = 0.1 s, 0.05 s a unit */
    zero_plan_setup s;
    zero_plan_setup_default(&s);
    s.ranks = 2;
    s.stage = 0;
    zero_plan_time t, t0;
    zero_error err = {{0}};
    /* share 0: nothing hidden, the step of before */
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t0, &err));
    ZT_NEAR(t0.comm_cross, 0.1, 1e-15);
    ZT_NEAR(t0.comm_hidden + t0.comm_hidden_backward, 0, 0);
    /* share 0.5: compute 0.06 s, backward 0.04 s in pieces of 0.02, 0.01, 0.01; unit 1's 0.05 s
     * posted after the first drains 0.005 in each of the others; unit 0's is posted at the end */
    r.progress_all_reduce = 0.5;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0.01, 1e-15);
    ZT_NEAR(t.comm_hidden, 0.01, 1e-15);
    ZT_NEAR(t.total, t0.total - 0.01, 1e-15);
    /* checkpointing: the recomputation (20 x 5e5 / 1e9 = 0.01 s) joins the middle piece: 0.02 s
     * there drains 0.01, the last 0.005 */
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0.015, 1e-15);
    /* share 1: 0.01 + 0.01; with a link 10 times as fast unit 1's 0.005 s all hides in the middle
     * piece */
    r.progress_all_reduce = 1;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0.02, 1e-15);
    r.link_bytes = 2.56e6;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0.005, 1e-15);
    /* overlap hides a share of what is left, within the compute: (0.01 - 0.005) / 2 */
    r.overlap = 0.5;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden, 0.005 + 0.0025, 1e-15);
    r.overlap = 0;
    r.link_bytes = 2.56e5;
    /* stages 1-2 use the reduce-scatter's share (its 0.05 s: 0.025 a unit): at 0.5, 0.01 */
    s.stage = 1;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0, 0);
    r.progress_reduce_scatter = 0.5;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0.01, 1e-15);
    /* stage 3 hides nothing (its reductions queue behind the backward's gathers); nor does one
     * node, a model without the backward's order, or one without FLOPs */
    s.stage = 3;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0, 0);
    s.stage = 1;
    s.ranks = 2;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0, 0);
    zero_plan_compute bare = c;
    bare.bwd = NULL, bare.bwd_pieces = 0;
    ZT_OK(zero_plan_step_time(&m, &bare, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0, 0);
    ZT_OK(zero_plan_step_time(&m, NULL, &s, 2, 2, 0, &r, &t, &err));
    ZT_NEAR(t.comm_hidden_backward, 0, 0);
    /* a larger share never makes a step slower */
    double prev = 1e9;
    for (int i = 0; i <= 10; i++) {
        r.progress_reduce_scatter = i / 10.0;
        ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
        ZT_CHECK(t.total <= prev);
        prev = t.total;
    }
    /* refused: a share outside [0, 1], a unit out of range or named twice, negative FLOPs */
    r.progress_reduce_scatter = 1.5;
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(err.msg, "progress_reduce_scatter") != NULL);
    r.progress_reduce_scatter = 0.5;
    const zero_plan_bwd_piece twice[2] = {{1, 0, 1}, {1, 0, 1}}, out[1] = {{1, 0, 2}}, neg[1] = {{-1, 0, 0}};
    const zero_plan_bwd_piece *bad[3] = {twice, out, neg};
    const int nbad[3] = {2, 1, 1};
    for (int i = 0; i < 3; i++) {
        c.bwd = bad[i], c.bwd_pieces = nbad[i];
        ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 2, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
        ZT_CHECK(strstr(err.msg, "backward piece") != NULL);
    }
}

/* hpZ (zero_hpz_partition_size H): the secondary shard P/H in the parameters (on the device);
 * the backward all-gather among the group's ranks (inside a node, or over H/L whole nodes); the
 * 3 + hpZ rung of the search on several nodes of several ranks; bad values refused. */
static void test_hpz(void) {
    zero_plan_model m = {2, time_units, NULL, NULL, NULL}; /* P = 6400 over 4 ranks: S = 1600 */
    const zero_plan_compute c = {.fwd_flops_per_token = 1e6, .recompute_flops_per_token = 5e5, .seq_len = 10};
    zero_plan_rates r = round_rates();
    zero_plan_setup s;
    zero_plan_setup_default(&s);
    ZT_EQ_INT(s.hpz_partition_size, 1);
    s.ranks = 4;
    s.stage = 3;
    zero_plan_mem mem, plain;
    zero_error err = {{0}};
    ZT_OK(zero_plan_estimate(&m, &s, &plain, &err));
    s.hpz_partition_size = 2;
    ZT_OK(zero_plan_estimate(&m, &s, &mem, &err));
    ZT_EQ_INT(mem.secondary, 3200);
    ZT_EQ_INT(mem.bytes[ZERO_MEM_PARAMS], (1600 + 3200) * 4);
    ZT_EQ_INT(mem.device, plain.device + 3200 * 4);
    ZT_EQ_INT(mem.transient, plain.transient);
    /* with the parameter shard on the host the secondary one stays on the device */
    s.offload_param = s.offload_optimizer = ZERO_OFFLOAD_CPU;
    ZT_OK(zero_plan_estimate(&m, &s, &mem, &err));
    ZT_EQ_INT(mem.device, 3200 * 4); /* the secondary shard; the gradient shard is pinned with the host's update */
    ZT_EQ_INT(mem.grad_staging, 1600 * 4);
    s.offload_param = s.offload_optimizer = ZERO_OFFLOAD_NONE;
    /* H = N: the engine keeps no secondary shard */
    s.hpz_partition_size = 4;
    ZT_OK(zero_plan_estimate(&m, &s, &mem, &err));
    ZT_EQ_INT(mem.secondary, 0);
    ZT_EQ_INT(mem.bytes[ZERO_MEM_PARAMS], plain.bytes[ZERO_MEM_PARAMS]);

    /* 4 ranks on 2 nodes, H = 2 = L, micro-batch 2, checkpointing (test_time_hand's figures): the
     * backward all-gather costs its in-node step (3.2e-5) and nothing across */
    zero_plan_time t;
    s.hpz_partition_size = 2;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 2, 1, &r, &t, &err));
    ZT_NEAR(t.comm_node, 6.4e-5 + 2 * 3.2e-5, 1e-15);
    ZT_NEAR(t.comm_cross, 2 * 1.68e-4, 1e-15);
    ZT_NEAR(t.cross_bytes, 2 * 12800, 0);
    ZT_NEAR(t.node_bytes, 3 * 12800, 0);
    ZT_NEAR(t.total, 0.07 + 1.28e-4 + 3.36e-4 + 5.12e-5, 1e-15);
    ZT_EQ_INT(t.collectives, 6);
    /* 4 ranks on 4 nodes, H = 2: the group is 2 nodes of one rank: the backward gather crosses
     * among 2 nodes (1/2 x 25600 / 1e8 + 2 units x 2 x 1e-5) instead of 4 (3/4, 2 units x 2 x 3) */
    ZT_OK(zero_plan_step_time(&m, &c, &s, 4, 2, 1, &r, &t, &err));
    ZT_NEAR(t.comm_node, 0, 0);
    ZT_NEAR(t.comm_cross, 2 * (3.0 / 4 * 25600 / 1e8 + 2 * 2 * 3 * 1e-5) + 1.0 / 2 * 25600 / 1e8 + 2 * 2 * 1e-5, 1e-15);
    ZT_NEAR(t.cross_bytes, 2 * 3.0 / 4 * 25600 + 1.0 / 2 * 25600, 1e-9);
    /* one node of 4, H = 2: the group's step over 2 of its ranks, nothing across */
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 2, 1, &r, &t, &err));
    ZT_NEAR(t.comm_node, 3.0 / 4 * 25600 / 2e8 + 3.0 / 4 * 25600 / 4e8 + 1.0 / 2 * 25600 / 4e8, 1e-15);
    ZT_NEAR(t.comm_cross, 0, 0);
    /* 6 ranks on 3 nodes of 2, H = 3: a group straddles nodes: refused */
    s.ranks = 6;
    s.hpz_partition_size = 3;
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 3, 2, 1, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "hpz_partition_size 3 on nodes of 2 ranks") != NULL, "%s", err.msg);
    s.ranks = 4;

    /* refused: not a divisor, below 1, below stage 3, with parameters on nvme */
    const struct { int h, stage; zero_offload_device par; } bad[] = {
        {3, 3, ZERO_OFFLOAD_NONE}, {8, 3, ZERO_OFFLOAD_NONE}, {0, 3, ZERO_OFFLOAD_NONE},
        {2, 2, ZERO_OFFLOAD_NONE}, {2, 3, ZERO_OFFLOAD_NVME},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        s.hpz_partition_size = bad[i].h;
        s.stage = bad[i].stage;
        s.offload_param = bad[i].par;
        ZT_EQ_INT(zero_plan_estimate(&m, &s, &mem, &err), ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(err.msg, "hpz_partition_size") != NULL, "%s", err.msg);
    }

    /* The search: on 2 nodes of 2 the rung 3 + hpZ (H = 2) follows stage 3; on one node, or
     * with one rank per node, it is left out. */
    zero_plan_request q;
    zero_plan_request_default(&q);
    q.base.ranks = 4;
    q.nodes = 2;
    q.host_mem = 1e9;
    q.compute = c;
    q.rates = r;
    zero_plan_result res;
    ZT_OK(zero_plan_search(&m, &q, &res, &err));
    int at = -1;
    for (int i = 0; i < res.count; i++)
        if (res.cand[i].hpz_partition_size > 1) at = i;
    ZT_CHECKF(at > 0 && res.cand[at - 1].stage == 3 && res.cand[at - 1].hpz_partition_size == 1, "hpZ rung at %d", at);
    if (at > 0) {
        ZT_EQ_INT(res.cand[at].stage, 3);
        ZT_EQ_INT(res.cand[at].hpz_partition_size, 2);
        ZT_EQ_INT(res.cand[at].mem.bytes[ZERO_MEM_PARAMS], res.cand[at - 1].mem.bytes[ZERO_MEM_PARAMS] + 3200 * 4);
        ZT_NEAR(3 * res.cand[at].time.cross_bytes, 2 * res.cand[at - 1].time.cross_bytes, 1e-9);
        ZT_CHECK(res.cand[at].step_seconds < res.cand[at - 1].step_seconds);
    }
    for (int k = 0; k < 2; k++) {
        q.nodes = k ? 4 : 1;
        ZT_OK(zero_plan_search(&m, &q, &res, &err));
        for (int i = 0; i < res.count; i++) ZT_EQ_INT(res.cand[i].hpz_partition_size, 1);
    }
}

/* Slower links never make a step faster; with several nodes they make it slower, by the cross
 * bytes over the rate; one node does not use the link at all. */
static void test_time_monotonic(void) {
    zero_plan_model m = {3, golden_units, NULL, NULL, NULL};
    const zero_plan_compute c = {.fwd_flops_per_token = 2e4, .recompute_flops_per_token = 1e4, .seq_len = 64};
    for (int stage = 0; stage < 4; stage++) {
        for (int nodes = 1; nodes <= 6; nodes *= 6) {
            zero_plan_setup s = golden_setup(stage, ZERO_DTYPE_BF16);
            s.ranks = 6;
            double prev = INFINITY;
            for (double gbps = 0.1; gbps <= 1000; gbps *= 10) {
                zero_plan_rates r;
                zero_plan_rates_default(&r, 0);
                r.link_bytes = gbps * 1e9 / 8;
                zero_plan_time t;
                ZT_OK(zero_plan_step_time(&m, &c, &s, nodes, 4, 1, &r, &t, NULL));
                if (nodes == 1) {
                    ZT_CHECK(prev == INFINITY || t.total == prev);
                    ZT_NEAR(t.cross_bytes, 0, 0);
                } else {
                    ZT_CHECKF(t.total < prev, "stage %d: %g s at %g Gbit/s, %g s slower", stage, t.total, gbps, prev);
                    /* 2 (stages 0-2) or 3 (stage 3) x (K-1)/K of M = P x 2 bytes; on 6 ranks
                     * the units pad to multiples of 96: 1056 + 96 + 5088 = 6240 = P */
                    const double passes = stage == 3 ? 3 : 2;
                    ZT_NEAR(t.cross_bytes, passes * 5.0 / 6 * 6240 * 2, 1e-9);
                    /* latency: (f + 1) x (K - 1) steps per unit's collective: 3 for the all-reduce,
                     * 2 for the others */
                    const double steps = stage == 0 ? 3 : 2 * passes;
                    ZT_NEAR(t.comm_cross, t.cross_bytes / r.link_bytes + r.latency * 5 * 3 * steps, 1e-12);
                }
                prev = t.total;
            }
        }
    }
}

/* Each collective's own cross-node rate replaces the link's for its bytes only: on 6 ranks over
 * 6 nodes (M = 6240 x 2 bytes, (K-1)/K = 5/6), stage 0's all-reduce moves 2 x 5/6 x M at
 * link_all_reduce, stages 1-2 a reduce-scatter and an all-gather of 5/6 x M each, stage 3 one
 * reduce-scatter and two all-gathers; a rate of 0 falls back to link_bytes. */
static void test_time_link_per_collective(void) {
    zero_plan_model m = {3, golden_units, NULL, NULL, NULL};
    const zero_plan_compute c = {.fwd_flops_per_token = 2e4, .recompute_flops_per_token = 1e4, .seq_len = 64};
    const double part = 5.0 / 6 * 6240 * 2;
    for (int stage = 0; stage < 4; stage++) {
        zero_plan_setup s = golden_setup(stage, ZERO_DTYPE_BF16);
        s.ranks = 6;
        zero_plan_rates r;
        zero_plan_rates_default(&r, 0);
        r.link_bytes = 1e8;
        zero_plan_time base, t;
        ZT_OK(zero_plan_step_time(&m, &c, &s, 6, 4, 0, &r, &base, NULL));
        r.link_all_reduce = 2e7;
        r.link_reduce_scatter = 4e7;
        r.link_all_gather = 0; /* the link's */
        ZT_OK(zero_plan_step_time(&m, &c, &s, 6, 4, 0, &r, &t, NULL));
        const double lat = base.comm_cross - base.cross_bytes / r.link_bytes;
        const double want = stage == 0   ? 2 * part / 2e7
                            : stage < 3 ? part / 4e7 + part / 1e8
                                        : part / 4e7 + 2 * part / 1e8;
        ZT_NEAR(t.cross_bytes, base.cross_bytes, 0);
        ZT_NEAR(t.comm_cross, want + lat, 1e-12);
        ZT_NEAR(t.total - base.total, t.comm_cross - base.comm_cross, 1e-12);
        r.link_all_reduce = -1;
        zero_error err = {{0}};
        ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 6, 4, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(err.msg, "link_all_reduce -1") != NULL, "message: %s", err.msg);
    }
}

/* The choice: stage 1 fits only with activation checkpointing, stage 3 without; the rung that
 * wins flips from stage 3 to stage 1 + checkpointing when the link slows. 100 units of 960 (the
 * search model) on 3 ranks, 3 nodes, bf16: M = 192000 B; stage 3's extra all-gather moves
 * 2/3 x M = 128000 B per node per step across the links; checkpointing redoes 100 x 1e6 FLOPs
 * at 1e10 FLOP/s = 0.01 s. At 1 Gbit/s the extra gather takes 1.024e-3 s: stage 3 wins; at
 * 10 Mbit/s 0.1024 s: stage 1 + checkpointing wins. */
static uint64_t big_act(void *ctx, int64_t mb, int ckpt) {
    (void)ctx;
    return (uint64_t)mb * (ckpt ? 1000u : 200000u);
}

static void test_time_flip(void) {
    zero_plan_model m = search_model();
    m.activation = big_act;
    /* 850000 B: stage 0 never fits; stages 1-2 only with checkpointing (845056 + 1000 and
     * 724096 + 1000; + 200000 without); stage 3 without it too (599936 + 200000). */
    zero_plan_request r = golden_request(850000, 1e6, 0); /* host: the staging, not the cpu rungs */
    r.nodes = 3;
    r.max_micro_batch = 1;
    r.compute = (zero_plan_compute){.fwd_flops_per_token = 1e6, .recompute_flops_per_token = 1e6, .seq_len = 100};
    zero_plan_rates_default(&r.rates, 1);
    r.rates.compute_flops = 1e10;
    r.rates.latency = 0;
    zero_plan_result res;
    zero_error err = {{0}};
    const double gbps[2] = {1, 0.01};
    for (int i = 0; i < 2; i++) {
        r.rates.link_bytes = gbps[i] * 1e9 / 8;
        ZT_OK(zero_plan_search(&m, &r, &res, &err));
        ZT_EQ_INT(res.cand[0].fits, 0);
        ZT_EQ_INT(res.cand[1].variant_micro_batch[0], 0);
        ZT_EQ_INT(res.cand[1].variant_micro_batch[1], 1);
        ZT_EQ_INT(res.cand[1].checkpointing, 1);
        ZT_EQ_INT(res.cand[2].checkpointing, 1);
        ZT_EQ_INT(res.cand[4].stage, 3);
        ZT_EQ_INT(res.cand[4].checkpointing, 0); /* both fit: the recompute only costs */
        ZT_EQ_INT(res.cand[4].variant_micro_batch[1], 1);
        ZT_CHECK(res.cand[4].variant_seconds[1] > res.cand[4].variant_seconds[0]);
        /* stages 1 and 2 tie (the same collectives, the same shard to update): stage 1 first */
        ZT_NEAR(res.cand[1].step_seconds, res.cand[2].step_seconds, 0);
        const double extra = 128000 / r.rates.link_bytes;
        ZT_NEAR(res.cand[4].step_seconds - res.cand[1].step_seconds, extra - 0.01, 1e-12);
        ZT_EQ_INT(res.chosen, i == 0 ? 4 : 1);
    }
    /* The same without the model's FLOPs: the first rung that fits, whatever the link. */
    r.compute = (zero_plan_compute){0};
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.chosen, 1);
    r.rates.link_bytes = 1e9;
    ZT_OK(zero_plan_search(&m, &r, &res, &err));
    ZT_EQ_INT(res.chosen, 1);
}

/* A larger micro-batch spreads the communication over more sequences: the choice compares
 * seconds per sequence, not per step. Checkpointing that lets 8 sequences fit instead of 1 wins
 * when the step is mostly communication. */
static uint64_t mid_act(void *ctx, int64_t mb, int ckpt) {
    (void)ctx;
    return (uint64_t)mb * (ckpt ? 1000u : 100000u);
}

static void test_time_per_sample(void) {
    zero_plan_model m = search_model();
    m.activation = mid_act;
    /* 720000 B: stage 3 only (stage 2 needs 724096 + 1000): 599936 + 100000 fits one sequence
     * without checkpointing, 599936 + 8 x 1000 eight with it. */
    zero_plan_request r = golden_request(720000, 1e6, 0); /* host: the staging, not the cpu rungs */
    r.nodes = 3;
    r.compute = (zero_plan_compute){.fwd_flops_per_token = 1e3, .recompute_flops_per_token = 1e3, .seq_len = 100};
    zero_plan_rates_default(&r.rates, 1);
    zero_plan_result res;
    ZT_OK(zero_plan_search(&m, &r, &res, NULL));
    ZT_EQ_INT(res.chosen, 4);
    const zero_plan_candidate *c = &res.cand[4];
    ZT_EQ_INT(c->variant_micro_batch[0], 1);
    ZT_EQ_INT(c->variant_micro_batch[1], 8);
    ZT_EQ_INT(c->checkpointing, 1);
    ZT_EQ_INT(c->micro_batch, 8);
    ZT_CHECK(c->variant_seconds[1] > c->variant_seconds[0]);
    ZT_NEAR(c->sample_seconds, c->variant_seconds[1] / 8, 1e-15);
    ZT_CHECK(c->sample_seconds < c->variant_seconds[0]);
}

/* Frozen parts (LoRA): the compute is 3 - f forwards (f: the frozen share of the parameters: no
 * weight gradient); at stage 3 the frozen parts are gathered in forward and in backward, in their
 * own dtype; stages 0-2 move the trainable parts only, as a model without the frozen ones. */
static void test_time_frozen(void) {
    static const uint64_t numel[2] = {3000000, 1000000}, frozen[2] = {2900000, 1000000};
    static const uint64_t trainable[1] = {100000}; /* the trainable parts alone (one node: no latency per unit) */
    const zero_plan_model mf = {2, numel, NULL, NULL, frozen}, mt = {1, trainable, NULL, NULL, NULL};
    const zero_plan_model ma = {2, numel, NULL, NULL, NULL};
    const zero_plan_compute c = {.fwd_flops_per_token = 1e6, .seq_len = 10};
    const zero_plan_rates r = round_rates();
    for (int stage = 0; stage < 4; stage++) {
        zero_plan_setup s;
        zero_plan_setup_default(&s);
        s.ranks = 4, s.stage = stage, s.precision = ZERO_DTYPE_BF16, s.frozen_dtype = ZERO_DTYPE_FP16;
        zero_plan_time tf, tt, ta;
        zero_plan_mem mem;
        ZT_OK(zero_plan_estimate(&mf, &s, &mem, NULL));
        ZT_OK(zero_plan_step_time(&mf, &c, &s, 1, 2, 0, &r, &tf, NULL));
        ZT_OK(zero_plan_step_time(&mt, &c, &s, 1, 2, 0, &r, &tt, NULL));
        ZT_OK(zero_plan_step_time(&ma, &c, &s, 1, 2, 0, &r, &ta, NULL));
        ZT_NEAR(tf.compute / ta.compute, (3.0 - 3.9 / 4.0) / 3.0, 1e-12);
        ZT_NEAR(tf.optimizer, tt.optimizer, 1e-12);
        const double extra = stage == 3 ? 2.0 * 3.0 / 4.0 * (double)mem.frozen_padded * 2.0 : 0.0;
        ZT_CHECKF(mem.frozen_padded >= 3900000 && mem.frozen_padded < 3900000 + 2 * 16 * 4, "Pf %llu",
                  (unsigned long long)mem.frozen_padded);
        ZT_NEAR(tf.node_bytes, tt.node_bytes + extra, 1e-9);
        ZT_NEAR(tf.comm_node, tt.comm_node + extra / r.node_all_gather, 1e-9);
        if (stage != 3) continue;
        /* the parameters on the host: each of the two gathers copies the frozen shard up as well
         * as the trainable one (Sf = Pf / 4 elements of fp16) */
        s.offload_param = s.offload_optimizer = ZERO_OFFLOAD_CPU;
        ZT_OK(zero_plan_estimate(&mf, &s, &mem, NULL));
        ZT_OK(zero_plan_step_time(&mf, &c, &s, 1, 2, 0, &r, &tf, NULL));
        const double S = (double)mem.shard, Sf = (double)(mem.frozen_padded / 4);
        ZT_NEAR(tf.host_copy, (2 * S * 2 + 2 * (S * 2 + Sf * 2)) / r.host_link_bytes, 1e-12);
    }
}

/* The kernels timed by their own rates: the 8-bit states' step (its elements at q8_update_elems,
 * the fp32 ones by their bytes) and a quantized base's decoding (every pass over the model), each
 * left out at rate 0. Worked by hand on round figures. */
static void test_time_quant(void) {
    /* two units of 2^20 (8-bit states) and one of 1000 (fp32: under optim_states_min) on 1 rank */
    static const uint64_t numel[3] = {UINT64_C(1) << 20, UINT64_C(1) << 20, 1000};
    const zero_plan_model m = {3, numel, NULL, NULL, NULL};
    zero_plan_rates r = round_rates();
    zero_plan_compute c = {.fwd_flops_per_token = 1e6, .recompute_flops_per_token = 5e5, .seq_len = 10};
    zero_plan_setup s;
    zero_plan_setup_default(&s);
    s.optim_states = ZERO_OPTIM_STATES_INT8;
    zero_plan_mem mem;
    ZT_OK(zero_plan_estimate(&m, &s, &mem, NULL));
    const double Eq = (double)(UINT64_C(2) << 20), E32 = 1024; /* 1000 padded to the 256 alignment */
    ZT_EQ_INT(mem.optim_q8, (uint64_t)Eq);
    ZT_EQ_INT(mem.padded, (uint64_t)(Eq + E32));
    zero_plan_time t, t0;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 1, 0, &r, &t0, NULL)); /* no rate: every element by bytes */
    ZT_NEAR(t0.optimizer, (Eq + E32) * (8 + 8 * 2 + 2 * 4) / 1e9, 1e-12);
    r.q8_update_elems = 1e6;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 1, 0, &r, &t, NULL));
    ZT_NEAR(t.optimizer, E32 * 32 / 1e9 + Eq / 1e6, 1e-12);
    ZT_NEAR(t.total - t0.total, t.optimizer - t0.optimizer, 1e-12);
    ZT_NEAR(t.dequant, 0, 0);
    /* 1e6 quantized weights a pass at 1e8 a second: forward and backward 0.02 s, the recompute
     * 0.01 s more, a forward-only pass (DPO) 0.01 s more; none without the rate */
    c.dequant_per_pass = 1e6;
    r.dequant_elems = 1e8;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 4, 0, &r, &t0, NULL));
    ZT_NEAR(t0.dequant, 0.02, 1e-15); /* per micro-batch, whatever its size */
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 4, 1, &r, &t, NULL));
    ZT_NEAR(t.dequant, 0.03, 1e-15);
    ZT_NEAR(t.total - t.compute - t.recompute - t.optimizer, 0.03, 1e-12);
    c.fwd_only_passes = 1;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 4, 1, &r, &t, NULL));
    ZT_NEAR(t.dequant, 0.04, 1e-15);
    r.dequant_elems = 0;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 4, 1, &r, &t, NULL));
    ZT_NEAR(t.dequant, 0, 0);
    c.dequant_per_pass = -1;
    zero_error err = {{0}};
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 1, 4, 1, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "dequantized weights per pass -1") != NULL, "%s", err.msg);
    c.dequant_per_pass = 0;
    r.q8_update_elems = -1;
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 1, 4, 1, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "q8_update_elems") != NULL, "%s", err.msg);
}

/* The rung the engine refuses with frozen parameters (the ownership plan's rule: hpZ): the
 * estimate names why and the search leaves it out, listing it, while every other rung is sized
 * as before; with the parameters on NVMe the frozen shards go to the parameter file, and a pool
 * buffer holds a unit's two shards. */
static void test_search_frozen(void) {
    static const uint64_t numel[2] = {3000000, 1000000}, frozen[2] = {2900000, 1000000};
    const zero_plan_model mf = {2, numel, NULL, NULL, frozen}, ma = {2, numel, NULL, NULL, NULL};
    zero_plan_setup s;
    zero_plan_setup_default(&s);
    s.ranks = 4, s.stage = 3;
    zero_plan_mem mem;
    ZT_OK(zero_plan_estimate(&mf, &s, &mem, NULL));
    ZT_CHECK(mem.unsupported == NULL);
    s.hpz_partition_size = 2;
    ZT_OK(zero_plan_estimate(&mf, &s, &mem, NULL));
    ZT_CHECKF(mem.unsupported && strstr(mem.unsupported, "hpZ with frozen parameters"), "%s",
              mem.unsupported ? mem.unsupported : "NULL");
    ZT_OK(zero_plan_estimate(&ma, &s, &mem, NULL)); /* without frozen parts hpZ runs */
    ZT_CHECK(mem.unsupported == NULL);
    s.hpz_partition_size = 1;
    s.offload_param = s.offload_optimizer = ZERO_OFFLOAD_NVME;
    ZT_OK(zero_plan_estimate(&mf, &s, &mem, NULL));
    ZT_CHECK(mem.unsupported == NULL);
    /* fp32, 4 ranks, align 16: unit 0's parts pad to 100032 + 2900032, unit 1's to 0 + 1000000;
     * the largest gathered unit is unit 0 (12000256 bytes): a buffer holds its quarter */
    ZT_EQ_INT(mem.pool, (uint64_t)s.optimizer_buffer_count * (uint64_t)s.aio_block_size +
                            (uint64_t)s.param_buffer_count * (12000256 / 4));
    /* every state on NVMe: both parts of the parameters, the master (a device rank's own) and the states */
    ZT_EQ_INT(mem.nvme, mem.bytes[ZERO_MEM_PARAMS] + mem.bytes[ZERO_MEM_MASTER] + mem.bytes[ZERO_MEM_OPTIM]);
    s.offload_param = ZERO_OFFLOAD_CPU, s.offload_optimizer = ZERO_OFFLOAD_CPU;
    ZT_OK(zero_plan_estimate(&mf, &s, &mem, NULL));
    ZT_CHECK(mem.unsupported == NULL);

    /* 4 ranks on 2 GPU nodes with NVMe, room for everything: 11 rungs without frozen parts, 10 with
     * (3 + hpZ 2 listed as skipped) */
    zero_plan_request r;
    zero_plan_request_default(&r);
    r.base.ranks = 4;
    r.nodes = 2;
    r.device_mem = 1e12, r.host_mem = 1e12, r.nvme_mem = 1e12;
    zero_plan_result res;
    ZT_OK(zero_plan_search(&ma, &r, &res, NULL));
    ZT_EQ_INT(res.count, 11);
    ZT_EQ_INT(res.skipped_count, 0);
    ZT_OK(zero_plan_search(&mf, &r, &res, NULL));
    ZT_EQ_INT(res.count, 10);
    ZT_EQ_INT(res.skipped_count, 1);
    ZT_EQ_INT(res.skipped[0].stage, 3);
    ZT_EQ_INT(res.skipped[0].hpz_partition_size, 2);
    ZT_CHECK(strstr(res.skipped[0].why, "hpZ") != NULL);
    for (int i = 0; i < res.count; i++) {
        ZT_CHECK(res.cand[i].fits);
        ZT_CHECK(res.cand[i].mem.unsupported == NULL);
        ZT_CHECK(res.cand[i].hpz_partition_size == 1);
    }
    ZT_CHECK(res.chosen >= 0);
}

/* A preference objective's forward-only pass: the compute of a forward more (frozen share and
 * all), at stage 3 one more all-gather of the trainable and of the frozen parts; ORPO's 3
 * sequences a pair: 1.5x the tokens. */
static void test_time_pref(void) {
    static const uint64_t numel[2] = {3000000, 1000000}, frozen[2] = {2900000, 1000000};
    const zero_plan_model mf = {2, numel, NULL, NULL, frozen};
    const zero_plan_compute c = {.fwd_flops_per_token = 1e6, .seq_len = 10};
    zero_plan_compute dpo = c, orpo = c, bad = c;
    dpo.fwd_only_passes = 1, orpo.fwd_only_passes = 1, orpo.seq_factor = 1.5, bad.fwd_only_passes = -1;
    const zero_plan_rates r = round_rates();
    for (int stage = 0; stage < 4; stage++) {
        zero_plan_setup s;
        zero_plan_setup_default(&s);
        s.ranks = 4, s.stage = stage, s.precision = ZERO_DTYPE_BF16, s.frozen_dtype = ZERO_DTYPE_FP16;
        zero_plan_time t, td, to;
        zero_plan_mem mem;
        ZT_OK(zero_plan_estimate(&mf, &s, &mem, NULL));
        ZT_OK(zero_plan_step_time(&mf, &c, &s, 1, 2, 0, &r, &t, NULL));
        ZT_OK(zero_plan_step_time(&mf, &dpo, &s, 1, 2, 0, &r, &td, NULL));
        ZT_OK(zero_plan_step_time(&mf, &orpo, &s, 1, 2, 0, &r, &to, NULL));
        const double f = 3.0 - 3.9 / 4.0; /* the frozen share skips the weight gradients' products */
        ZT_NEAR(td.compute / t.compute, (f + 1.0) / f, 1e-12);
        ZT_NEAR(to.compute / t.compute, 1.5 * (f + 1.0) / f, 1e-12);
        const double extra = stage == 3 ? 3.0 / 4.0 * ((double)mem.padded * 2.0 + (double)mem.frozen_padded * 2.0) : 0.0;
        ZT_NEAR(td.node_bytes, t.node_bytes + extra, 1e-6);
        ZT_NEAR(to.node_bytes, td.node_bytes, 1e-9);
        ZT_EQ_INT(zero_plan_step_time(&mf, &bad, &s, 1, 2, 0, &r, &t, NULL), ZERO_ERR_INVALID_ARG);
    }
}

static void test_time_errors(void) {
    zero_plan_model m = {2, time_units, NULL, NULL, NULL};
    const zero_plan_compute c = {.fwd_flops_per_token = 1e6, .seq_len = 10};
    zero_plan_setup s;
    zero_plan_setup_default(&s);
    s.ranks = 4;
    zero_plan_rates r = round_rates();
    zero_plan_time t;
    zero_error err = {{0}};
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 3, 1, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "4 ranks on 3 nodes") != NULL, "message: %s", err.msg);
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 0, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "micro-batch 0") != NULL, "message: %s", err.msg);
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 1, 0, NULL, &t, &err), ZERO_ERR_INVALID_ARG);
    r.link_bytes = 0; /* needed across 2 nodes, not on one */
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 1, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "link_bytes 0") != NULL, "message: %s", err.msg);
    ZT_OK(zero_plan_step_time(&m, &c, &s, 1, 1, 0, &r, &t, &err));
    r = round_rates();
    r.compute_flops = NAN;
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 1, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "compute_flops") != NULL, "message: %s", err.msg);
    r = round_rates();
    r.disk_write_bytes = 0;
    ZT_OK(zero_plan_step_time(&m, &c, &s, 2, 1, 0, &r, &t, &err)); /* no offload: not needed */
    s.stage = 3;
    s.offload_optimizer = ZERO_OFFLOAD_NVME;
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 1, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "disk_write_bytes 0") != NULL, "message: %s", err.msg);
    r = round_rates();
    r.overlap = 1.5;
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 1, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "overlap 1.5") != NULL, "message: %s", err.msg);
    r = round_rates();
    const zero_plan_compute noseq = {.fwd_flops_per_token = 1e6};
    ZT_EQ_INT(zero_plan_step_time(&m, &noseq, &s, 2, 1, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "sequence length") != NULL, "message: %s", err.msg);
    s.stage = 5; /* what the estimate refuses */
    ZT_EQ_INT(zero_plan_step_time(&m, &c, &s, 2, 1, 0, &r, &t, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "stage 5") != NULL, "message: %s", err.msg);
    /* The search passes the time model's errors on. */
    zero_plan_model sm = search_model();
    zero_plan_request q = golden_request(1e9, 0, 0);
    q.nodes = 3;
    q.compute = c;
    q.rates.link_bytes = -1;
    zero_plan_result res;
    ZT_EQ_INT(zero_plan_search(&sm, &q, &res, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "link_bytes -1") != NULL, "message: %s", err.msg);
}

/* ---------------------------------------------------------------- against the engine */
/* GPT-2 registered on a real engine over `comm`: the engine's accounting of the model states
 * equals the estimate to the byte (the issue asks for 2%), and after a micro-batch and a step the
 * peak of its transient buffers stays under the estimate's bound (*peak and *bound, when given,
 * receive both). Collective. */
static void engine_vs_estimate(zero_comm *comm, const char *what, const dec_config *g, int stage,
                               zero_dtype dt, int run_step, int hpz, int64_t qwz, uint64_t *peak, uint64_t *bound) {
    zero_engine *e = NULL;
    dec_model *model = NULL;
    zero_error err = {{0}};
    zero_config c;
    zero_config_default(&c);
    c.stage = stage;
    c.precision = dt;
    c.micro_batch = 2;
    c.grad_accum = 1;
    c.hpz_partition_size = hpz;
    c.quant_weights = qwz > 0; /* qwZ: its messages in flight join the transient */
    if (qwz > 0) c.quant_weights_block = qwz;
    const int world = zero_comm_size(comm);
    ZT_OK(zero_config_resolve(&c, world, &err));
    if (!comm || zero_engine_create(&e, comm, &c) != ZERO_OK) {
        ZT_FAIL("%s: engine create: %s", what, e ? zero_engine_last_error(e) : err.msg);
        goto done;
    }
    if (dec_engine_register(g, e, &err) || zero_engine_finalize(e)) {
        ZT_FAIL("%s: engine setup: %s / %s", what, err.msg, zero_engine_last_error(e));
        goto done;
    }
    const int nu = dec_num_units(g);
    uint64_t units[64];
    if (nu > 64) {
        ZT_FAIL("%s: %d units", what, nu);
        goto done;
    }
    for (int u = 0; u < nu; u++) units[u] = dec_unit_numel(g, u);
    zero_plan_model pm = {nu, units, NULL, NULL, NULL};
    zero_plan_setup s;
    zero_plan_setup_from_config(&s, zero_engine_config(e), world);
    zero_plan_mem mem;
    ZT_OK(zero_plan_estimate(&pm, &s, &mem, &err));
    zero_mem_stats ms;
    zero_engine_mem_stats(e, &ms);
    for (int cat = ZERO_MEM_PARAMS; cat <= ZERO_MEM_OPTIM; cat++)
        ZT_CHECKF(ms.current[cat] == mem.bytes[cat], "%s stage %d hpz %d %s %d ranks: %s engine %zu, estimate %llu",
                  what, stage, hpz, zero_dtype_name(dt), world, zero_mem_category_name((zero_mem_category)cat), ms.current[cat],
                  (unsigned long long)mem.bytes[cat]);
    if (run_step) {
        const int B = 2, T = g->n_ctx;
        int32_t tok[2 * 64], tgt[2 * 64];
        for (int i = 0; i < B * T; i++) tok[i] = (i * 7 + 3) % g->vocab, tgt[i] = (i * 5 + 1) % g->vocab;
        float loss = 0;
        zero_step_stats st;
        if (T > 64 || dec_engine_init(g, e, 1, &err) || dec_create(&model, g, B, T, 0, &err) ||
            dec_engine_micro_batch(model, e, tok, tgt, B, T, 0, &loss) || zero_engine_step(e, &st)) {
            ZT_FAIL("%s: a step: %s / %s", what, err.msg, model ? dec_last_error(model) : zero_engine_last_error(e));
            goto done;
        }
        zero_engine_mem_stats(e, &ms);
        if (peak) *peak = ms.peak[ZERO_MEM_BUFFERS];
        if (bound) *bound = mem.transient;
        ZT_CHECKF(ms.peak[ZERO_MEM_BUFFERS] <= mem.transient, "%s stage %d %s: buffers peak %zu > estimate %llu",
                  what, stage, zero_dtype_name(dt), ms.peak[ZERO_MEM_BUFFERS], (unsigned long long)mem.transient);
        /* The bound is not vacuous: what stage 3 gathers and half precision converts shows up. */
        if (stage == 3 || dt != ZERO_DTYPE_FP32) ZT_CHECK(ms.peak[ZERO_MEM_BUFFERS] * 4 >= mem.transient);
        for (int cat = ZERO_MEM_PARAMS; cat <= ZERO_MEM_OPTIM; cat++) ZT_EQ_INT(ms.current[cat], mem.bytes[cat]);
    }
done:
    dec_free(model);
    zero_engine_free(e);
}

/* Every stage and the first ndts precisions (fp32, bf16, fp16) on tiny and on odd sizes (padding
 * in every unit), with a step; `small` (19M parameters) for the accounting alone. */
static void engine_cases(zero_comm *comm, int with_small, int ndts) {
    dec_config tiny, small, odd;
    dec_config_gpt2(&odd, 1, 40, 5, 37, 97);
    ZT_OK(dec_config_preset(&tiny, "tiny", NULL));
    ZT_OK(dec_config_preset(&small, "small", NULL));
    const zero_dtype dts[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    const int world = zero_comm_size(comm);
    for (int stage = 0; stage < 4; stage++) {
        for (int d = 0; d < ndts; d++) {
            engine_vs_estimate(comm, "tiny", &tiny, stage, dts[d], 1, 1, 0, NULL, NULL);
            engine_vs_estimate(comm, "odd", &odd, stage, dts[d], 1, 1, 0, NULL, NULL);
            /* hpZ: the secondary shard in the parameters, every group size 1 < H < N */
            for (int h = 2; stage == 3 && h < world; h++)
                if (world % h == 0) {
                    engine_vs_estimate(comm, "tiny hpZ", &tiny, stage, dts[d], 1, h, 0, NULL, NULL);
                    engine_vs_estimate(comm, "odd hpZ", &odd, stage, dts[d], 1, h, 0, NULL, NULL);
                }
            /* qwZ: blocks of 32 (many a shard) and the default (a partial one), and with hpZ: the
             * engine's peak under the bound, which adds to plain stage 3's the largest unit's
             * messages in flight, (N + 1) zero_quant_msg_bytes of its shard, and in half precision
             * the coder's fp32 chunk (on one rank nothing: no gather is quantized) */
            if (stage == 3) {
                const struct { const char *name; const dec_config *g; int hpz; int64_t block; } q[3] = {
                    {"tiny qwZ", &tiny, 1, 32}, {"odd qwZ", &odd, 1, 2048}, {"tiny qwZ hpZ", &tiny, 2, 32}};
                for (int i = 0; i < 3; i++) {
                    if (q[i].hpz > 1 && world != 4) continue;
                    uint64_t pk0 = 0, b0 = 0, pk = 0, b = 0;
                    engine_vs_estimate(comm, q[i].name, q[i].g, stage, dts[d], 1, q[i].hpz, 0, &pk0, &b0);
                    engine_vs_estimate(comm, q[i].name, q[i].g, stage, dts[d], 1, q[i].hpz, q[i].block, &pk, &b);
                    uint64_t q1 = 0;
                    for (int u = 0; world > 1 && u < dec_num_units(q[i].g); u++) {
                        const uint64_t P = zero_partition_padded(dec_unit_numel(q[i].g, u), world, ZERO_PLAN_DEFAULT_ALIGN);
                        const uint64_t m = (uint64_t)(world + 1) * zero_quant_msg_bytes(P / (uint64_t)world, (uint64_t)q[i].block);
                        q1 = m > q1 ? m : q1;
                    }
                    if (q1 && dts[d] != ZERO_DTYPE_FP32) q1 += 4 * zero_quant_msg_chunk((uint64_t)q[i].block);
                    ZT_CHECKF(b - b0 == q1, "%s %s on %d ranks: the bound grows by %lld bytes, expected %llu", q[i].name,
                              zero_dtype_name(dts[d]), world, (long long)(b - b0), (unsigned long long)q1);
                    if (world == 1) ZT_EQ_INT(pk, pk0);
                }
            }
        }
        if (with_small) engine_vs_estimate(comm, "small", &small, stage, ZERO_DTYPE_BF16, 0, 1, 0, NULL, NULL);
    }
}

static void test_engine(void) {
    zero_comm *comm = NULL;
    ZT_OK(zero_comm_init_self(&comm));
    if (comm) engine_cases(comm, 1, 3);
    zero_comm_free(comm);
}

/* `mpiexec -n N test_plan --mpi-engine` (tests/cli/test_plan.sh): the same comparison on N ranks. */
static int mpi_engine(void) {
    zero_comm *comm = NULL;
    zero_status st = zero_comm_init_mpi(&comm, NULL);
    if (st == ZERO_ERR_UNSUPPORTED) {
        fprintf(stderr, "test_plan --mpi-engine: this build has no MPI\n");
        return 1;
    }
    if (st != ZERO_OK) {
        fprintf(stderr, "test_plan --mpi-engine: %s\n", comm ? zero_comm_last_error(comm) : zero_status_string(st));
        zero_comm_free(comm);
        return 1;
    }
    zt_rank = zero_comm_rank(comm);
    engine_cases(comm, 0, 2); /* fp32 and bf16: fp16 has bf16's widths (checked on one rank) */
    char name[64];
    snprintf(name, sizeof name, "test_plan --mpi-engine (%d ranks)", zero_comm_size(comm));
    zero_comm_free(comm);
    return zt_finish(name);
}

/* `test_plan --load-config FILE RANKS`: loads and resolves a config that `zero plan -o` wrote
 * (tests/cli/test_plan.sh), printing the loader's message when it refuses it. */
static int load_config(const char *path, const char *ranks) {
    zero_config cfg;
    zero_error err = {{0}};
    zero_config_default(&cfg);
    int world = atoi(ranks);
    zero_status st = zero_config_load_json_file(&cfg, path, &err);
    if (st == ZERO_OK) st = zero_config_resolve(&cfg, world, &err);
    if (st != ZERO_OK) {
        fprintf(stderr, "%s: %s\n", path, err.msg);
        return 1;
    }
    /* What the planner assumed is what the engine will be built from. */
    zero_plan_setup s;
    zero_plan_setup_from_config(&s, &cfg, world);
    printf("%s: stage %d, %s, micro-batch %lld, offload %s/%s\n", path, s.stage,
           zero_dtype_name(s.precision), (long long)cfg.micro_batch,
           zero_plan_offload_name(s.offload_optimizer), zero_plan_offload_name(s.offload_param));
    return 0;
}

/* A device rank's staging (include/zero/plan.h), worked out by hand for the golden model in bf16
 * on 3 ranks: G1 = 5040 x 2 = 10080, C = min(4 MiB, G1) = 10080; the blocking collectives 2 (C +
 * C/3) = 26880; stage 3's prefetch G1 + G1/3 = 13440; sharded gradients (stages 2-3) (U1 + U2 +
 * U3) x 2 = 12192 + (6096/3) x 2 = 4064; ZeRO-Offload's upload buffers 2 MiB where the host's step
 * writes a working copy kept on the device (not with the parameters offloaded too). A CPU rank
 * stages nothing; staging stays apart from host. */
static void test_staging(void) {
    zero_plan_model m = golden_model();
    const uint64_t want[4] = {26880, 26880, 26880 + 16256, 26880 + 13440 + 16256};
    for (int stage = 0; stage < 4; stage++)
        for (int off = 0; off < 2; off++) {
            zero_plan_setup s = golden_setup(stage, ZERO_DTYPE_BF16);
            if (off && stage == 0) continue; /* the optimizer offload needs stage 1 or more */
            if (off) s.offload_optimizer = ZERO_OFFLOAD_CPU;
            if (off && stage == 3) s.offload_param = ZERO_OFFLOAD_CPU;
            zero_plan_mem mem;
            zero_error err = {{0}};
            ZT_OK(zero_plan_estimate(&m, &s, &mem, &err));
            const uint64_t up = off && stage < 3 ? 2u << 20 : 0;
            ZT_CHECKF(mem.staging == want[stage] + up, "stage %d offload %d: staging %llu, expected %llu", stage, off,
                      (unsigned long long)mem.staging, (unsigned long long)(want[stage] + up));
            if (!off) ZT_EQ_INT(mem.host, 0);
            s.on_device = 0;
            ZT_OK(zero_plan_estimate(&m, &s, &mem, &err));
            ZT_EQ_INT(mem.staging, 0);
        }
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--load-config")) return load_config(argv[2], argv[3]);
    if (argc == 2 && !strcmp(argv[1], "--mpi-engine")) return mpi_engine();
    test_golden_fp32();
    test_hpz();
    test_golden_bf16();
    test_optimizers();
    test_one_rank_and_align();
    test_paper();
    test_staging();
    test_offload_placement();
    test_traffic();
    test_errors();
    test_search();
    test_search_cpu_only();
    test_search_q8();
    test_search_errors();
    test_time_hand();
    test_time_backward_hidden();
    test_time_gathers_hidden();
    test_time_monotonic();
    test_time_link_per_collective();
    test_time_flip();
    test_time_per_sample();
    test_time_frozen();
    test_search_frozen();
    test_time_quant();
    test_time_pref();
    test_time_errors();
    test_engine();
    return zt_finish("test_plan");
}
