/* Frozen parameters (ZERO_PARAM_FROZEN) on the MLP of tests/mlp_model.h, with layer 0 mixing a
 * frozen weight and a trainable bias, layer 1 entirely frozen, layer 2 a trainable weight and a
 * frozen bias: for stages 0-3, fp32 and bf16, frozen storage in the working dtype or in bf16
 * beside fp32 training, accumulation 1 and 2:
 *   - the run equals an independent oracle: the same MLP with every parameter trainable, the
 *     frozen ones' gradients left at zero and no weight decay (AdamW then never moves them), on
 *     the same world and stage; and the 1-rank stage-0 frozen run over the same global batches;
 *   - frozen values never change (bitwise); a fully frozen unit has no gradient buffer;
 *   - the accounting equals the formula to the byte (frozen: whole at stages 0-2, shard at 3, in
 *     the frozen dtype; no gradient, master or optimizer state), and the data collectives equal
 *     the reductions of the trainable parts plus the stage-3 gathers of both parts;
 *   - checkpoints hold the trainable part only (a resume sets the frozen values first) or, with
 *     save_frozen, both; a resume is bitwise; a checkpoint whose frozen set differs is refused;
 *   - param_info's grad_offset and own range, which a loader uses, tile each part across ranks;
 *   - at stage 3 with the parameters (and the optimizer) on NVMe, the frozen shards in the
 *     parameter file after the working ones: the run bitwise the same run in RAM, nothing of
 *     either part in RAM, the file's bytes the padded shards', checkpoints as above.
 * Runs under mpiexec with 1, 2, 3 and 4 ranks. */
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "mlp_model.h"

#define STEPS 6
#define BSZ 3

/* frozen[l][0]: layer l's weight, [1]: its bias */
static const int g_frozen[MLP_LAYERS][2] = {{1, 0}, {1, 1}, {0, 1}};

typedef struct fcfg {
    int stage, accum;
    zero_dtype prec, fdt; /* fdt: ZERO_DTYPE_COUNT for "auto" */
    int oracle;           /* register every parameter trainable (the oracle) */
    int save_frozen;
    int nvme;             /* stage 3: offload_param and offload_optimizer on NVMe (g_nvme_dir) */
} fcfg;

static char g_nvme_dir[300]; /* the test directory (256) and "/nvme" */

/* The initial values: frozen ones rounded to bf16 (exactly representable in every storage). */
static float *init_values(int l) {
    const int n = mlp_unit_numel(l), nw = mlp_dims[l + 1] * mlp_dims[l];
    float *v = malloc((size_t)n * sizeof *v);
    const float s = 1.0f / sqrtf((float)mlp_dims[l]);
    for (int i = 0; i < n; i++) {
        v[i] = s * mlp_uniform((5ull << 40) + ((uint64_t)l << 32) + (uint64_t)i);
        if (g_frozen[l][i >= nw]) v[i] = zero_bf16_to_fp32(zero_fp32_to_bf16(v[i]));
    }
    return v;
}

static zero_engine *make(zero_comm *comm, const fcfg *f, int accum) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = f->stage;
    cfg.precision = f->prec;
    cfg.frozen_dtype = f->fdt;
    cfg.grad_accum = accum;
    cfg.micro_batch = BSZ;
    cfg.save_frozen = f->save_frozen;
    cfg.align_bytes = 256; /* 64-element grains: padding in every unit */
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    cfg.optim.lr = 1e-2f;
    cfg.optim.weight_decay = 0.0f; /* the oracle's frozen parameters must not decay */
    if (f->nvme) {
        cfg.offload_param.device = cfg.offload_optimizer.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg.offload_param.nvme_path, sizeof cfg.offload_param.nvme_path, "%s", g_nvme_dir);
        snprintf(cfg.offload_optimizer.nvme_path, sizeof cfg.offload_optimizer.nvme_path, "%s", g_nvme_dir);
        cfg.offload_param.buffer_count = 2; /* fewer buffers than units: reads evict, a write waits for one */
    }
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, &cfg) != ZERO_OK) {
        ZT_FAIL("create: stage %d", f->stage);
        return NULL;
    }
    for (int l = 0; l < MLP_LAYERS; l++) {
        char name[32];
        snprintf(name, sizeof name, "layer%d", l);
        const int u = zero_engine_add_unit(e, name);
        int64_t ws[2] = {mlp_dims[l + 1], mlp_dims[l]}, bs[1] = {mlp_dims[l + 1]};
        const unsigned fw = !f->oracle && g_frozen[l][0] ? ZERO_PARAM_FROZEN : 0;
        const unsigned fb = !f->oracle && g_frozen[l][1] ? ZERO_PARAM_FROZEN : 0;
        snprintf(name, sizeof name, "layer%d.weight", l);
        ZT_OK(zero_engine_add_param(e, u, name, ws, 2, fw));
        snprintf(name, sizeof name, "layer%d.bias", l);
        ZT_OK(zero_engine_add_param(e, u, name, bs, 1, ZERO_PARAM_NO_DECAY | fb));
    }
    if (zero_engine_finalize(e) != ZERO_OK) {
        ZT_FAIL("finalize: %s", zero_engine_last_error(e));
        zero_engine_free(e);
        return NULL;
    }
    for (int l = 0; l < MLP_LAYERS; l++) {
        float *v = init_values(l);
        ZT_OK(zero_engine_set_unit(e, l, v));
        free(v);
    }
    return e;
}

/* The MLP's micro-batch (tests/mlp_model.h) adding only the trainable parameters' gradients, each
 * at its grad_offset (the oracle's gradient buffer is the whole unit: grad_offset = offset);
 * the entirely frozen layer takes no gradient call. */
static double micro_batch(zero_engine *e, int64_t first, int bsz) {
    const int L = MLP_LAYERS;
    int maxd = 0;
    for (int l = 0; l <= L; l++) maxd = mlp_dims[l] > maxd ? mlp_dims[l] : maxd;
    float *act = calloc((size_t)(L + 1) * bsz * maxd, sizeof(float)), *t = calloc((size_t)bsz * maxd, sizeof(float));
    float *d = calloc((size_t)bsz * maxd, sizeof(float)), *dn = calloc((size_t)bsz * maxd, sizeof(float));
#define ACT(l, b, i) act[((size_t)(l) * bsz + (b)) * maxd + (i)]
    for (int b = 0; b < bsz; b++) mlp_sample(first + b, &ACT(0, b, 0), &t[(size_t)b * maxd]);
    double loss = 0;
    for (int l = 0; l < L; l++) {
        const float *p = zero_engine_gather(e, l);
        if (!p) { loss = NAN; goto out; }
        const int in = mlp_dims[l], outd = mlp_dims[l + 1];
        for (int b = 0; b < bsz; b++)
            for (int o = 0; o < outd; o++) {
                float acc = p[(size_t)in * outd + o];
                for (int i = 0; i < in; i++) acc += p[(size_t)o * in + i] * ACT(l, b, i);
                ACT(l + 1, b, o) = l + 1 < L ? tanhf(acc) : acc;
            }
        zero_engine_release(e, l);
    }
    for (int b = 0; b < bsz; b++)
        for (int o = 0; o < mlp_dims[L]; o++) {
            float r = ACT(L, b, o) - t[(size_t)b * maxd + o];
            loss += 0.5 * (double)r * r;
            d[(size_t)b * maxd + o] = r * (float)zero_engine_loss_scale(e) / (float)bsz;
        }
    loss /= bsz;
    for (int l = L - 1; l >= 0; l--) {
        const float *p = zero_engine_gather(e, l);
        if (!p) { loss = NAN; goto out; }
        const int in = mlp_dims[l], outd = mlp_dims[l + 1];
        const int trains = !g_frozen[l][0] || !g_frozen[l][1];
        float *g = trains ? zero_engine_grad(e, l) : NULL;
        if (trains && !g) { loss = NAN; goto out; }
        zero_param_info wi, bi;
        zero_engine_param_info(e, zero_engine_find_param(e, l == 0 ? "layer0.weight" : l == 1 ? "layer1.weight" : "layer2.weight"), &wi);
        zero_engine_param_info(e, zero_engine_find_param(e, l == 0 ? "layer0.bias" : l == 1 ? "layer1.bias" : "layer2.bias"), &bi);
        float *gW = g && !g_frozen[l][0] ? g + wi.grad_offset : NULL, *gb = g && !g_frozen[l][1] ? g + bi.grad_offset : NULL;
        for (int b = 0; b < bsz; b++)
            for (int o = 0; o < outd; o++) {
                float dv = d[(size_t)b * maxd + o];
                if (gb) gb[o] += dv;
                if (gW)
                    for (int i = 0; i < in; i++) gW[(size_t)o * in + i] += dv * ACT(l, b, i);
            }
        if (l > 0)
            for (int b = 0; b < bsz; b++)
                for (int i = 0; i < in; i++) {
                    float acc = 0;
                    for (int o = 0; o < outd; o++) acc += p[(size_t)o * in + i] * d[(size_t)b * maxd + o];
                    float a = ACT(l, b, i);
                    dn[(size_t)b * maxd + i] = acc * (1 - a * a);
                }
        if ((trains && zero_engine_grad_ready(e, l)) || zero_engine_release(e, l)) { loss = NAN; goto out; }
        float *tmp = d; d = dn; dn = tmp;
    }
out:
#undef ACT
    free(act), free(t), free(d), free(dn);
    return loss;
}

static int train(zero_engine *e, int from, int to, int world, int rank, int accum, double *norms) {
    const int64_t G = (int64_t)world * accum * BSZ;
    for (int s = from; s < to; s++) {
        for (int k = 0; k < accum; k++) {
            const int64_t m = (int64_t)k * world + rank;
            if (isnan(micro_batch(e, s * G + m * BSZ, BSZ)) || zero_engine_micro_batch_done(e)) {
                ZT_FAIL("step %d: %s", s, zero_engine_last_error(e));
                return -1;
            }
        }
        zero_step_stats st;
        if (zero_engine_step(e, &st)) {
            ZT_FAIL("step %d: %s", s, zero_engine_last_error(e));
            return -1;
        }
        if (norms) norms[s] = st.grad_norm;
    }
    return 0;
}

static void read_all(zero_engine *e, float **out) {
    for (int l = 0; l < MLP_LAYERS; l++) {
        out[l] = malloc((size_t)mlp_unit_numel(l) * sizeof(float));
        ZT_OK(zero_engine_read_unit(e, l, out[l]));
    }
}
static void free_all(float **p) {
    for (int l = 0; l < MLP_LAYERS; l++) free(p[l]), p[l] = NULL;
}

/* a within tol of b (tol 0: bitwise); returns the largest relative difference */
static double compare(float **a, float **b, double tol, const char *what) {
    double worst = 0;
    for (int l = 0; l < MLP_LAYERS; l++)
        for (int i = 0; i < mlp_unit_numel(l); i++) {
            const double d = fabs((double)a[l][i] - b[l][i]) / fmax(1.0, fabs(b[l][i]));
            worst = fmax(worst, d);
            zt_checks++;
            if (tol == 0 ? a[l][i] != b[l][i] : d > tol) {
                ZT_FAIL("%s: layer%d[%d] = %.9g, expected %.9g", what, l, i, a[l][i], b[l][i]);
                return worst;
            }
        }
    return worst;
}

/* Bytes per category against the formula, and the collectives' bytes against the rule. */
static void check_memory(zero_engine *e, const fcfg *f, int world, int accum) {
    const uint64_t w = zero_dtype_size(f->prec), wf = zero_dtype_size(f->fdt == ZERO_DTYPE_COUNT ? f->prec : f->fdt);
    uint64_t Pt = 0, Pf = 0, rs = 0, ar = 0, ag_t = 0, ag_f = 0;
    for (int l = 0; l < MLP_LAYERS; l++) {
        const uint64_t nw = (uint64_t)mlp_dims[l + 1] * mlp_dims[l], nb = (uint64_t)mlp_dims[l + 1];
        const uint64_t t = (g_frozen[l][0] ? 0 : nw) + (g_frozen[l][1] ? 0 : nb), fr = nw + nb - t;
        const uint64_t pt = zero_partition_padded(t, world, 64), pf = zero_partition_padded(fr, world, 64);
        zero_unit_info ui;
        ZT_OK(zero_engine_unit_info(e, l, &ui));
        ZT_EQ_INT(ui.numel, nw + nb);
        ZT_EQ_INT(ui.trainable, t);
        ZT_EQ_INT(ui.frozen, fr);
        ZT_EQ_INT(ui.padded, pt);
        ZT_EQ_INT(ui.frozen_padded, pf);
        Pt += pt;
        Pf += pf;
        if (pt) {
            ar += zero_comm_ring_bytes(ZERO_COLL_ALL_REDUCE, pt * w, world);
            rs += zero_comm_ring_bytes(ZERO_COLL_REDUCE_SCATTER, pt * w, world);
            ag_t += zero_comm_ring_bytes(ZERO_COLL_ALL_GATHER, pt * w, world);
        }
        if (pf) ag_f += zero_comm_ring_bytes(ZERO_COLL_ALL_GATHER, pf * wf, world);
    }
    const uint64_t St = Pt / (uint64_t)world, Sf = Pf / (uint64_t)world;
    const int s = f->stage, half = f->prec != ZERO_DTYPE_FP32;
    zero_mem_stats m;
    zero_engine_mem_stats(e, &m);
    /* host memory holds the states on the cpu backend; on a device (ZERO_DEVICE=fake, the
     * mpi.*.fake runs) the device's side table does, in its blocks: test_engine_device checks those */
    if (f->nvme) { /* both parts in the parameter file: each unit's working shard, then its frozen one */
        uint64_t file = 0;
        for (int l = 0; l < MLP_LAYERS; l++) {
            zero_unit_info ui;
            ZT_OK(zero_engine_unit_info(e, l, &ui));
            file += (ui.padded / (uint64_t)world * w + 4095) / 4096 * 4096 +
                    (ui.frozen_padded / (uint64_t)world * wf + 4095) / 4096 * 4096;
        }
        zero_engine_offload_info oi;
        ZT_OK(zero_engine_offload_info_get(e, &oi));
        ZT_EQ_INT(oi.param_file_bytes, file);
        ZT_EQ_INT(m.current[ZERO_MEM_PARAMS], 0);
        ZT_EQ_INT(m.current[ZERO_MEM_OPTIM], 0);
    } else if (!strcmp(zero_engine_device(e), "cpu")) {
        ZT_EQ_INT(m.current[ZERO_MEM_PARAMS], s == 3 ? St * w + Sf * wf : Pt * w + Pf * wf);
        ZT_EQ_INT(m.current[ZERO_MEM_GRADS], (s <= 1 ? Pt : St) * w);
        ZT_EQ_INT(m.current[ZERO_MEM_MASTER], half ? (s == 0 ? Pt : St) * 4 : 0);
        ZT_EQ_INT(m.current[ZERO_MEM_OPTIM], 2 * (s == 0 ? Pt : St) * 4);
    }
    /* what trim frees: every transient buffer; the NVMe pools stay (buffers too) */
    uint64_t pools = 0; /* in host memory on the cpu backend (a device's pools are its pinned memory) */
    if (f->nvme && !strcmp(zero_engine_device(e), "cpu")) {
        zero_engine_offload_info oi;
        ZT_OK(zero_engine_offload_info_get(e, &oi));
        pools = oi.pool_bytes;
    }
    const uint64_t before = m.current[ZERO_MEM_BUFFERS];
    const uint64_t trimmed = zero_engine_trim(e);
    zero_engine_mem_stats(e, &m);
    ZT_EQ_INT(trimmed, before - m.current[ZERO_MEM_BUFFERS]);
    /* each pool's start aligned to the 4 KiB O_DIRECT needs: up to a block more each */
    ZT_CHECKF(m.current[ZERO_MEM_BUFFERS] >= pools && m.current[ZERO_MEM_BUFFERS] <= pools + 2 * 4096,
              "buffers after trim %llu, pools %llu", (unsigned long long)m.current[ZERO_MEM_BUFFERS],
              (unsigned long long)pools);
    /* STEPS steps of `accum` micro-batches: the trainable parts reduce, stage 3 gathers both parts
     * twice per micro-batch; the entirely frozen unit takes part in no reduction */
    zero_comm_counters c;
    zero_engine_comm_counters(e, &c);
    uint64_t want_ar = 0, want_rs = 0, want_ag = 0;
    if (s == 0) want_ar = ar;
    if (s == 1) want_rs = rs, want_ag = ag_t;
    if (s == 2) want_rs = (uint64_t)accum * rs, want_ag = ag_t;
    if (s == 3) want_rs = (uint64_t)accum * rs, want_ag = (uint64_t)accum * 2 * (ag_t + ag_f);
    ZT_EQ_INT(c.bytes[ZERO_COLL_ALL_REDUCE], STEPS * want_ar);
    ZT_EQ_INT(c.bytes[ZERO_COLL_REDUCE_SCATTER], STEPS * want_rs);
    ZT_EQ_INT(c.bytes[ZERO_COLL_ALL_GATHER], STEPS * want_ag);
}

/* grad_offset tiles each unit's trainable part; the own ranges tile every parameter over the
 * ranks (stage 3) or cover it (stages 0-2). */
static void check_layout(zero_comm *comm, zero_engine *e, const fcfg *f) {
    const int np = zero_engine_num_params(e);
    for (int p = 0; p < np; p++) {
        zero_param_info pi;
        ZT_OK(zero_engine_param_info(e, p, &pi));
        const int frozen = (pi.flags & ZERO_PARAM_FROZEN) != 0;
        if (frozen) ZT_CHECK(pi.grad_offset == UINT64_MAX);
        int64_t mine = (int64_t)(pi.own_hi - pi.own_lo), sum = 0;
        ZT_OK(zero_comm_all_reduce(comm, &mine, &sum, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM));
        ZT_EQ_INT(sum, f->stage == 3 ? (int64_t)pi.numel : (int64_t)pi.numel * zero_comm_size(comm));
    }
    /* layer 2: the trainable weight is first in the gradient buffer, layer 0's bias alone */
    zero_param_info pi;
    zero_engine_param_info(e, zero_engine_find_param(e, "layer0.bias"), &pi);
    ZT_EQ_INT(pi.grad_offset, 0);
    zero_engine_param_info(e, zero_engine_find_param(e, "layer2.weight"), &pi);
    ZT_EQ_INT(pi.grad_offset, 0);
    /* the entirely frozen unit has no gradient */
    ZT_CHECK(zero_engine_grad(e, 1) == NULL);
    ZT_CHECKF(strstr(zero_engine_last_error(e), "ZERO_PARAM_FROZEN") != NULL, "%s", zero_engine_last_error(e));
    ZT_EQ_INT(zero_engine_grad_ready(e, 1), ZERO_ERR_STATE);
}

static void one(zero_comm *world_comm, zero_comm *self, const fcfg *f, double *worst) {
    const int world = zero_comm_size(world_comm), rank = zero_comm_rank(world_comm);
    fcfg o = *f;
    o.oracle = 1;
    fcfg r = *f;
    r.stage = 0;
    r.nvme = 0; /* the reference: 1 rank at stage 0, in RAM */
    zero_engine *e = make(world_comm, f, f->accum), *eo = make(world_comm, &o, f->accum);
    zero_engine *er = make(self, &r, f->accum * world);
    double norms[STEPS], onorms[STEPS], rnorms[STEPS];
    float *got[MLP_LAYERS] = {0}, *orc[MLP_LAYERS] = {0}, *ref[MLP_LAYERS] = {0};
    if (!e || !eo || !er) goto out;
    check_layout(world_comm, e, f);
    if (train(e, 0, STEPS, world, rank, f->accum, norms) || train(eo, 0, STEPS, world, rank, f->accum, onorms) ||
        train(er, 0, STEPS, 1, 0, f->accum * world, rnorms))
        goto out;
    check_memory(e, f, world, f->accum);
    read_all(e, got);
    read_all(eo, orc);
    read_all(er, ref);
    char what[160];
    const int bf = f->prec == ZERO_DTYPE_BF16;
    snprintf(what, sizeof what, "stage %d %s frozen %s accum %d world %d vs the all-trainable oracle", f->stage,
             zero_dtype_name(f->prec), f->fdt == ZERO_DTYPE_COUNT ? "auto" : zero_dtype_name(f->fdt), f->accum, world);
    *worst = fmax(*worst, compare(got, orc, bf ? 2e-2 : 1e-5, what));
    snprintf(what, sizeof what, "stage %d %s frozen %s accum %d world %d vs 1 rank stage 0", f->stage,
             zero_dtype_name(f->prec), f->fdt == ZERO_DTYPE_COUNT ? "auto" : zero_dtype_name(f->fdt), f->accum, world);
    *worst = fmax(*worst, compare(got, ref, bf ? 2e-2 : 1e-5, what));
    for (int s = 0; s < STEPS; s++) {
        ZT_NEAR(norms[s], onorms[s], bf ? 2e-2 : 1e-5);
        ZT_NEAR(norms[s], rnorms[s], bf ? 2e-2 : 1e-5);
    }
    if (f->nvme) { /* the same run with every state in RAM: bit for bit */
        fcfg m = *f;
        m.nvme = 0;
        zero_engine *em = make(world_comm, &m, f->accum);
        double mnorms[STEPS];
        float *ram[MLP_LAYERS] = {0};
        if (em && !train(em, 0, STEPS, world, rank, f->accum, mnorms)) {
            read_all(em, ram);
            snprintf(what, sizeof what, "stage 3 %s frozen %s accum %d world %d on NVMe vs in RAM", zero_dtype_name(f->prec),
                     f->fdt == ZERO_DTYPE_COUNT ? "auto" : zero_dtype_name(f->fdt), f->accum, world);
            compare(got, ram, 0, what);
            for (int s = 0; s < STEPS; s++) ZT_CHECKF(norms[s] == mnorms[s], "%s: step %d norm %.17g vs %.17g", what, s, norms[s], mnorms[s]);
        }
        free_all(ram);
        zero_engine_free(em);
    }
    /* the frozen values are the initial ones, bit for bit; the trainable ones moved */
    for (int l = 0; l < MLP_LAYERS; l++) {
        float *v = init_values(l);
        const int nw = mlp_dims[l + 1] * mlp_dims[l];
        int moved = 0;
        for (int i = 0; i < mlp_unit_numel(l); i++) {
            if (g_frozen[l][i >= nw]) ZT_CHECKF(got[l][i] == v[i], "layer%d[%d]: frozen value %.9g changed to %.9g", l, i, v[i], got[l][i]);
            else moved += got[l][i] != v[i];
        }
        if (!g_frozen[l][0] || !g_frozen[l][1]) ZT_CHECKF(moved > 0, "layer%d: no trainable value moved", l);
        free(v);
    }
out:
    free_all(got), free_all(orc), free_all(ref);
    zero_engine_free(e), zero_engine_free(eo), zero_engine_free(er);
}

/* Checkpoints: the trainable part only (the resume sets the frozen values from "the base"
 * first) and, with save_frozen, both parts (the resume finds them in the checkpoint). */
static void checkpoints(zero_comm *comm, const char *dir, int stage, zero_dtype prec, int nvme) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    for (int sf = 0; sf <= 1; sf++) {
        fcfg f = {stage, 1, prec, ZERO_DTYPE_BF16, 0, sf, nvme};
        char path[512];
        snprintf(path, sizeof path, "%s/s%d_%d%s", dir, stage, sf, nvme ? "_nvme" : "");
        zero_engine *a = make(comm, &f, 1), *b = make(comm, &f, 1);
        float *want[MLP_LAYERS] = {0}, *got[MLP_LAYERS] = {0};
        if (!a || !b) goto next;
        if (train(a, 0, 3, world, rank, 1, NULL)) goto next;
        ZT_OK(zero_engine_save(a, path, NULL));
        if (train(a, 3, STEPS, world, rank, 1, NULL)) goto next;
        read_all(a, want);
        /* b: the trainable values wrong, the frozen ones (without save_frozen: set by the caller,
         * here already the base's from make; with it: zeroed here, the checkpoint must bring them) */
        for (int l = 0; l < MLP_LAYERS; l++) {
            float *v = calloc((size_t)mlp_unit_numel(l), sizeof(float));
            float *base = init_values(l);
            const int nw = mlp_dims[l + 1] * mlp_dims[l];
            for (int i = 0; i < mlp_unit_numel(l); i++) v[i] = g_frozen[l][i >= nw] ? (sf ? 0.0f : base[i]) : 7.0f;
            ZT_OK(zero_engine_set_unit(b, l, v));
            free(v), free(base);
        }
        ZT_OK(zero_engine_load(b, path, NULL));
        if (train(b, 3, STEPS, world, rank, 1, NULL)) goto next;
        read_all(b, got);
        char what[128];
        snprintf(what, sizeof what, "stage %d %s save_frozen %d%s: resumed run", stage, zero_dtype_name(prec), sf,
                 nvme ? " on NVMe" : "");
        compare(got, want, 0, what); /* bitwise */
        if (sf == 0) { /* the checkpoint of the trainable part holds no "<unit>/frozen" tensor */
            zero_ckpt *c = NULL;
            zero_error err;
            if (rank == 0 && zero_ckpt_open(&c, NULL, path, ZERO_CKPT_VERIFY, &err) == ZERO_OK) {
                ZT_CHECK(zero_ckpt_find(c, "layer0/frozen") < 0);
                ZT_CHECK(zero_ckpt_find(c, "layer1/master") < 0); /* frozen only: no master */
                ZT_CHECK(zero_ckpt_find(c, "layer2/master") >= 0);
                zero_ckpt_close(c);
            }
        }
        /* the all-trainable oracle's model does not load it: the frozen set differs */
        fcfg o = f;
        o.oracle = 1;
        zero_engine *x = make(comm, &o, 1);
        if (x) {
            ZT_EQ_INT(zero_engine_load(x, path, NULL), ZERO_ERR_FORMAT);
            ZT_CHECKF(strstr(zero_engine_last_error(x), "frozen") != NULL, "%s", zero_engine_last_error(x));
        }
        zero_engine_free(x);
    next:
        free_all(want), free_all(got);
        zero_engine_free(a), zero_engine_free(b);
    }
}

int main(void) {
    zero_comm *world_comm = NULL, *self = NULL;
    if (zero_comm_init_mpi(&world_comm, NULL) != ZERO_OK || zero_comm_init_self(&self) != ZERO_OK) {
        fprintf(stderr, "cannot create communicators\n");
        return 1;
    }
    const int world = zero_comm_size(world_comm);
    zt_rank = zero_comm_rank(world_comm);
    double worst[2] = {0, 0}; /* fp32, bf16 training */
    /* a directory every rank sees, named by rank 0 */
    char dir[256] = {0};
    if (zt_rank == 0) snprintf(dir, sizeof dir, "/tmp/zero_frozen_%d", (int)getpid());
    ZT_OK(zero_comm_broadcast(world_comm, dir, sizeof dir, ZERO_DTYPE_UINT8, 0));
    snprintf(g_nvme_dir, sizeof g_nvme_dir, "%s/nvme", dir);
    if (zt_rank == 0 && (mkdir(dir, 0700) != 0 || mkdir(g_nvme_dir, 0700) != 0)) ZT_FAIL("mkdir %s", g_nvme_dir);
    ZT_OK(zero_comm_barrier(world_comm));
    for (int stage = 0; stage <= 3; stage++)
        for (int accum = 1; accum <= 2; accum++) {
            const fcfg runs[3] = {{stage, accum, ZERO_DTYPE_FP32, ZERO_DTYPE_COUNT, 0, 0, 0},
                                  {stage, accum, ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, 0, 0, 0},
                                  {stage, accum, ZERO_DTYPE_BF16, ZERO_DTYPE_COUNT, 0, 0, 0}};
            for (int k = 0; k < 3; k++) one(world_comm, self, &runs[k], &worst[runs[k].prec == ZERO_DTYPE_BF16]);
        }
    /* stage 3 with both parts on NVMe */
    for (int accum = 1; accum <= 2; accum++) {
        const fcfg runs[3] = {{3, accum, ZERO_DTYPE_FP32, ZERO_DTYPE_COUNT, 0, 0, 1},
                              {3, accum, ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, 0, 0, 1},
                              {3, accum, ZERO_DTYPE_BF16, ZERO_DTYPE_COUNT, 0, 0, 1}};
        for (int k = 0; k < 3; k++) one(world_comm, self, &runs[k], &worst[runs[k].prec == ZERO_DTYPE_BF16]);
    }
    for (int stage = 0; stage <= 3; stage++) checkpoints(world_comm, dir, stage, ZERO_DTYPE_FP32, 0);
    checkpoints(world_comm, dir, 3, ZERO_DTYPE_BF16, 0);
    checkpoints(world_comm, dir, 3, ZERO_DTYPE_FP32, 1);
    checkpoints(world_comm, dir, 3, ZERO_DTYPE_BF16, 1);
    ZT_OK(zero_comm_barrier(world_comm));
    if (zt_rank == 0) {
        char cmd[300];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        if (system(cmd)) fprintf(stderr, "could not remove %s\n", dir);
        printf("frozen parameters: worst relative difference fp32 %.3g, bf16 %.3g (world %d)\n", worst[0], worst[1], world);
    }
    zero_comm_free(self);
    zero_comm_free(world_comm);
    return zt_finish("test_engine_frozen");
}
