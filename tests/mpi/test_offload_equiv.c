/* NVMe offload changes where the bytes live, not the numbers: for stages 1-3, fp32/bf16 (and
 * fp16, SGD with momentum, Lion once each), optimizer offload, parameter offload (stage 3) and
 * both, training gives bitwise the parameters, gradient norms and losses of the same run without
 * offload. Two models: the MLP of tests/mlp_model.h (one tile per unit) and units of thousands of
 * elements streamed in many tiles through pools of 1, 2 and 4 buffers. Also checks what the
 * offload promises about memory and files: master/optim (and params) 0 in RAM, the pool in
 * `buffers`, files of the planner's size in nvme_path while the engine lives, none after. */
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "mlp_model.h"
#include "zero/offload.h"

enum { OFF_NONE = 0, OFF_OPT = 1, OFF_PAR = 2, OFF_BOTH = 3 };

static char g_dir[256];

typedef struct variant {
    int stage;
    zero_dtype prec;
    zero_optim_type opt;
    int mode;          /* OFF_* */
    int buffers;       /* pool buffers (both pools) */
    int64_t block;     /* aio block size */
    int big;           /* 1: the many-tile model */
} variant;

/* ------------------------------------------------------------------ the many-tile model */
/* Units of these sizes; the "loss" of a micro-batch is 0.5 * sum c_i (p_i - t_i)^2 with c and t
 * fixed per element and a per-rank, per-micro-batch factor, so gradients are c (p - t) * f. */
#define BIG_UNITS 4
/* the last unit is smaller than a rank's alignment: ranks other than 0 own only padding of it */
static const int big_numel[BIG_UNITS] = {9001, 2500, 20011, 5};

static int big_register(zero_engine *e) {
    for (int u = 0; u < BIG_UNITS; u++) {
        char name[32];
        snprintf(name, sizeof name, "big%d", u);
        int id = zero_engine_add_unit(e, name);
        if (id < 0) return id;
        int64_t a[1] = {big_numel[u] - 7}, b[1] = {big_numel[u] > 7 ? 7 : big_numel[u]};
        snprintf(name, sizeof name, "big%d.w", u);
        if (big_numel[u] > 7 && zero_engine_add_param(e, id, name, a, 1, 0)) return -1;
        snprintf(name, sizeof name, "big%d.b", u);
        if (zero_engine_add_param(e, id, name, b, 1, ZERO_PARAM_NO_DECAY)) return -1;
    }
    return zero_engine_finalize(e);
}

static int big_init(zero_engine *e) {
    for (int u = 0; u < BIG_UNITS; u++) {
        float *v = malloc((size_t)big_numel[u] * sizeof *v);
        for (int i = 0; i < big_numel[u]; i++) v[i] = 0.5f * mlp_uniform(((uint64_t)u << 32) + (uint64_t)i);
        int s = zero_engine_set_unit(e, u, v);
        free(v);
        if (s) return s;
    }
    /* one parameter set on its own: a range that splits tiles (read-modify-write) */
    float b[7] = {0.1f, -0.2f, 0.3f, -0.4f, 0.5f, -0.6f, 0.7f};
    return zero_engine_set_param(e, "big2.b", b);
}

static double big_step(zero_engine *e, int64_t s, int rank, int accum, zero_step_stats *st) {
    double loss = 0;
    for (int k = 0; k < accum; k++) {
        const float f = 1.0f + 0.25f * (float)rank + 0.125f * (float)k + 0.0625f * (float)s;
        const float scale = (float)zero_engine_loss_scale(e);
        for (int u = 0; u < BIG_UNITS; u++) { /* forward: the loss */
            const float *p = zero_engine_gather(e, u);
            if (!p) return NAN;
            for (int i = 0; i < big_numel[u]; i++) {
                double d = p[i] - 0.3 * mlp_uniform(((uint64_t)(u + 8) << 32) + (uint64_t)i);
                loss += 0.5 * d * d * f;
            }
            if (zero_engine_release(e, u)) return NAN;
        }
        for (int u = BIG_UNITS - 1; u >= 0; u--) { /* backward */
            const float *p = zero_engine_gather(e, u);
            float *g = p ? zero_engine_grad(e, u) : NULL;
            if (!g) return NAN;
            for (int i = 0; i < big_numel[u]; i++) {
                float c = 1.0f + 0.5f * mlp_uniform(((uint64_t)(u + 16) << 32) + (uint64_t)i);
                float t = 0.3f * mlp_uniform(((uint64_t)(u + 8) << 32) + (uint64_t)i);
                g[i] += scale * c * (p[i] - t) * f;
            }
            if (zero_engine_grad_ready(e, u) || zero_engine_release(e, u)) return NAN;
        }
        if (zero_engine_micro_batch_done(e)) return NAN;
    }
    return zero_engine_step(e, st) ? NAN : loss;
}

/* ------------------------------------------------------------------ runs */
#define STEPS 4
#define MAXU 4

typedef struct result {
    float *params[MAXU];
    double norms[STEPS], losses[STEPS];
    int nunits;
    zero_mem_stats mem;        /* between steps, after the last one */
    zero_engine_offload_info info;
    int files_seen;            /* swap files of this rank found in g_dir while the engine lived */
} result;

static void result_free(result *r) {
    for (int i = 0; i < MAXU; i++) free(r->params[i]);
    memset(r, 0, sizeof *r);
}

static int count_files(int rank) {
    char suffix[32];
    snprintf(suffix, sizeof suffix, "_rank%05d.", rank);
    int n = 0;
    DIR *d = opendir(g_dir);
    if (!d) return 0;
    for (struct dirent *de; (de = readdir(d)) != NULL;)
        if (!strncmp(de->d_name, "zero_", 5) && strstr(de->d_name, suffix) && strstr(de->d_name, ".swp")) n++;
    closedir(d);
    return n;
}

static void make_cfg(const variant *v, int mode, zero_config *cfg) {
    zero_config_default(cfg);
    cfg->stage = v->stage;
    cfg->precision = v->prec;
    cfg->grad_accum = 2;
    cfg->micro_batch = 2;
    if (v->prec == ZERO_DTYPE_FP16) cfg->initial_scale_power = 8;
    zero_optim_hparams_default(&cfg->optim, v->opt);
    cfg->optim.lr = 1e-2f;
    cfg->optim.weight_decay = 0.05f;
    if (v->opt == ZERO_OPTIM_SGD) {
        cfg->optim.momentum = 0.9f;
        cfg->optim.nesterov = 1;
    }
    cfg->gradient_clipping = 0.5;
    if (mode & OFF_OPT) {
        cfg->offload_optimizer.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg->offload_optimizer.nvme_path, sizeof cfg->offload_optimizer.nvme_path, "%s", g_dir);
        cfg->offload_optimizer.buffer_count = v->buffers;
    }
    if (mode & OFF_PAR) {
        cfg->offload_param.device = ZERO_OFFLOAD_NVME;
        snprintf(cfg->offload_param.nvme_path, sizeof cfg->offload_param.nvme_path, "%s", g_dir);
        cfg->offload_param.buffer_count = v->buffers;
    }
    cfg->aio_block_size = v->block;
}

static int run(zero_comm *comm, const variant *v, int mode, result *out) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    zero_config cfg;
    make_cfg(v, mode, &cfg);
    memset(out, 0, sizeof *out);
    out->nunits = v->big ? BIG_UNITS : MLP_LAYERS;
    zero_engine *e = NULL;
    int rc = -1;
    if (zero_engine_create(&e, comm, &cfg) != ZERO_OK) goto done;
    if (v->big ? (big_register(e) || big_init(e)) : (mlp_register(e) || mlp_init(e, 3))) goto done;
    out->files_seen = count_files(rank);
    for (int s = 0; s < STEPS; s++) {
        zero_step_stats st;
        if (v->big) {
            out->losses[s] = big_step(e, s, rank, 2, &st);
            if (isnan(out->losses[s])) goto done;
        } else if (mlp_train_step(e, s, world, rank, 2, 2, &out->losses[s], &st, 1.0f)) {
            goto done;
        }
        out->norms[s] = st.grad_norm;
    }
    zero_engine_trim(e); /* the idle transient buffers kept for reuse: not the pools' */
    zero_engine_mem_stats(e, &out->mem);
    zero_engine_offload_info_get(e, &out->info);
    for (int u = 0; u < out->nunits; u++) {
        zero_unit_info ui;
        zero_engine_unit_info(e, u, &ui);
        out->params[u] = malloc((size_t)ui.numel * sizeof(float));
        if (zero_engine_read_unit(e, u, out->params[u])) goto done;
    }
    rc = 0;
done:
    if (rc)
        ZT_FAIL("stage %d %s %s mode %d buffers %d block %lld %s: %s", v->stage, zero_dtype_name(v->prec),
                zero_optim_name(v->opt), mode, v->buffers, (long long)v->block, v->big ? "big" : "mlp",
                e ? zero_engine_last_error(e) : "create failed");
    zero_engine_free(e);
    return rc;
}

static void compare(const variant *v, int mode, const result *ref, const result *got) {
    const char *what = v->big ? "big" : "mlp";
    for (int u = 0; u < ref->nunits; u++) {
        int n = v->big ? big_numel[u] : mlp_unit_numel(u);
        zt_checks++;
        if (memcmp(ref->params[u], got->params[u], (size_t)n * sizeof(float))) {
            int i = 0;
            while (i < n && !memcmp(&ref->params[u][i], &got->params[u][i], sizeof(float))) i++;
            ZT_FAIL("stage %d %s %s mode %d buffers %d %s: unit %d[%d] = %.9g with offload, %.9g without", v->stage,
                    zero_dtype_name(v->prec), zero_optim_name(v->opt), mode, v->buffers, what, u, i, got->params[u][i],
                    ref->params[u][i]);
        }
    }
    for (int s = 0; s < STEPS; s++) {
        ZT_CHECKF(ref->norms[s] == got->norms[s], "%s mode %d step %d: norm %.17g vs %.17g", what, mode, s, got->norms[s],
                  ref->norms[s]);
        ZT_CHECKF(ref->losses[s] == got->losses[s], "%s mode %d step %d: loss %.17g vs %.17g", what, mode, s,
                  got->losses[s], ref->losses[s]);
    }
}

/* Memory and files against the planner's figures (zero/plan.h) for this model and setup. */
static void check_memory(zero_comm *comm, const variant *v, int mode, const result *got) {
    const int world = zero_comm_size(comm);
    zero_config cfg;
    make_cfg(v, mode, &cfg);
    uint64_t numel[MAXU];
    for (int u = 0; u < got->nunits; u++) numel[u] = (uint64_t)(v->big ? big_numel[u] : mlp_unit_numel(u));
    zero_plan_model m = {got->nunits, numel, NULL, NULL, NULL};
    zero_plan_setup ps;
    zero_plan_setup_from_config(&ps, &cfg, world);
    zero_plan_mem pm;
    ZT_OK(zero_plan_estimate(&m, &ps, &pm, NULL));
    const int half = v->prec != ZERO_DTYPE_FP32;
    const int opt = mode & OFF_OPT, par = mode & OFF_PAR;
    /* what the plan places on NVMe is not in RAM */
    ZT_EQ_INT(got->mem.current[ZERO_MEM_PARAMS], par ? 0 : pm.bytes[ZERO_MEM_PARAMS]);
    ZT_EQ_INT(got->mem.current[ZERO_MEM_GRADS], pm.bytes[ZERO_MEM_GRADS]);
    ZT_EQ_INT(got->mem.current[ZERO_MEM_MASTER], opt ? 0 : pm.bytes[ZERO_MEM_MASTER]);
    ZT_EQ_INT(got->mem.current[ZERO_MEM_OPTIM], opt ? 0 : pm.bytes[ZERO_MEM_OPTIM]);
    /* between steps the transient buffers are the pools: the plan's figure, each buffer of the
     * parameter pool rounded up to whole blocks, plus one block of alignment per pool */
    uint64_t pools = 0, plan_pool = pm.pool;
    if (opt) pools += (uint64_t)v->buffers * (uint64_t)v->block + ZERO_IO_ALIGN;
    if (par) {
        uint64_t per = (pm.largest_unit / (uint64_t)world) * zero_dtype_size(v->prec);
        per = (per + ZERO_IO_ALIGN - 1) / ZERO_IO_ALIGN * ZERO_IO_ALIGN;
        pools += (uint64_t)v->buffers * per + ZERO_IO_ALIGN;
        ZT_CHECKF(pools - plan_pool <= (uint64_t)(v->buffers + 2) * ZERO_IO_ALIGN, "pools %llu vs plan %llu",
                  (unsigned long long)pools, (unsigned long long)plan_pool);
    } else {
        ZT_EQ_INT(pools, plan_pool + ZERO_IO_ALIGN);
    }
    ZT_EQ_INT(got->mem.current[ZERO_MEM_BUFFERS], pools);
    ZT_EQ_INT(got->info.pool_bytes + (opt ? ZERO_IO_ALIGN : 0) + (par ? ZERO_IO_ALIGN : 0), pools);
    /* the files hold the plan's NVMe bytes, each unit's arrays rounded up to whole blocks */
    const uint64_t files = got->info.optim_file_bytes + got->info.param_file_bytes;
    const int arrays = (opt ? (half ? 1 : 0) + zero_optim_state_count(v->opt, 0.9f) : 0) + (par ? 1 : 0);
    const uint64_t tiles_max = pm.shard / (uint64_t)got->info.tile_elements + (uint64_t)got->nunits;
    ZT_CHECKF(files >= pm.nvme && files <= pm.nvme + (uint64_t)arrays * tiles_max * ZERO_IO_ALIGN,
              "swap files %llu bytes, plan %llu (mode %d)", (unsigned long long)files, (unsigned long long)pm.nvme, mode);
    ZT_EQ_INT(got->files_seen, (opt ? 1 : 0) + (par ? 1 : 0));
}

static void check_variant(zero_comm *comm, const variant *v, int *cases) {
    result ref, got;
    if (run(comm, v, OFF_NONE, &ref)) return;
    const int modes[3] = {OFF_OPT, OFF_PAR, OFF_BOTH};
    for (int k = 0; k < 3; k++) {
        if ((modes[k] & OFF_PAR) && v->stage != 3) continue;
        if (run(comm, v, modes[k], &got) == 0) {
            compare(v, modes[k], &ref, &got);
            check_memory(comm, v, modes[k], &got);
            (*cases)++;
        }
        result_free(&got);
        ZT_EQ_INT(count_files(zero_comm_rank(comm)), 0); /* removed by zero_engine_free */
    }
    result_free(&ref);
}

int main(void) {
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) return 1;
    zt_rank = zero_comm_rank(comm);
    int64_t id = getpid();
    zero_comm_broadcast(comm, &id, 1, ZERO_DTYPE_INT64, 0);
    snprintf(g_dir, sizeof g_dir, "/tmp/zero_test_offload_equiv_%lld", (long long)id);
    int cases = 0;
    for (int stage = 1; stage <= 3; stage++) {
        for (int p = 0; p < 2; p++) {
            const zero_dtype prec = p ? ZERO_DTYPE_BF16 : ZERO_DTYPE_FP32;
            variant mlp = {stage, prec, ZERO_OPTIM_ADAMW, 0, 4, 1 << 20, 0};
            check_variant(comm, &mlp, &cases);
            /* many tiles: the smallest block that holds a tile, pools of 1, 2 and 4 buffers */
            for (int b = 1; b <= 4; b *= 2) {
                variant big = {stage, prec, ZERO_OPTIM_ADAMW, 0, b, p ? 7 * 4096 : 4 * 4096, 1};
                check_variant(comm, &big, &cases);
            }
        }
    }
    /* other optimizers and fp16 once each, at stage 3 where every mode applies */
    variant sgd = {3, ZERO_DTYPE_FP32, ZERO_OPTIM_SGD, 0, 3, 2 * 4096, 1};
    check_variant(comm, &sgd, &cases);
    variant lion = {3, ZERO_DTYPE_BF16, ZERO_OPTIM_LION, 0, 2, 5 * 4096, 1};
    check_variant(comm, &lion, &cases);
    variant f16 = {2, ZERO_DTYPE_FP16, ZERO_OPTIM_ADAMW, 0, 2, 1 << 20, 0};
    check_variant(comm, &f16, &cases);
    ZT_CHECKF(cases == 47, "expected 47 offload runs compared, got %d", cases);
    zero_comm_barrier(comm);
    if (zt_rank == 0) rmdir(g_dir);
    zero_comm_free(comm);
    return zt_finish("test_offload_equiv");
}
