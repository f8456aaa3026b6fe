/* Stage-3 prefetch depth and the divergence check's modes. A chain of equal units is gathered
 * forward and backward: without stage3_prefetch_bucket_size the engine holds the current unit
 * and the next one at most; with it, as many units ahead as fit (none for 0), within
 * stage3_max_live_parameters; the parameters are bitwise the same whatever the depth (on one rank
 * nothing is gathered: the shard is the whole unit). Then ranks
 * that reduce two equal-sized units in different orders after the first step: the default mode
 * (a hash of the sequence, compared at the step) and the diagnostic mode (every collective,
 * naming the unit) both fail on every rank with ZERO_ERR_DIVERGED. zero_engine_progress between
 * gathers (a prefetch in flight) changes no bit. */
#include "engine/internal.h"
#include "harness.h"

#define UNITS 6
#define U 4800 /* a multiple of world * 16 for 1-4 ranks: no padding */

static int g_poll; /* step() calls zero_engine_progress after every gather */

static zero_engine *make(zero_comm *comm, int stage, int check, int64_t bucket, int given, int64_t live_max) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = stage;
    cfg.check_divergence = check;
    cfg.prefetch_bucket_size = bucket;
    if (given) cfg.set_fields |= ZERO_SET_PREFETCH_BUCKET;
    if (live_max) cfg.max_live_parameters = live_max;
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    cfg.optim.lr = 1e-2f;
    zero_engine *e = NULL;
    if (zero_engine_create(&e, comm, &cfg) != ZERO_OK) return NULL;
    int64_t shape[1] = {U};
    for (int i = 0; i < UNITS; i++) {
        char name[16];
        snprintf(name, sizeof name, "u%d", i);
        int u = zero_engine_add_unit(e, name);
        snprintf(name, sizeof name, "u%d.w", i);
        if (u < 0 || zero_engine_add_param(e, u, name, shape, 1, 0)) goto fail;
    }
    if (zero_engine_finalize(e)) goto fail;
    float *v = malloc(U * sizeof *v);
    for (int i = 0; i < UNITS; i++) {
        for (int k = 0; k < U; k++) v[k] = (float)((i * 7919 + k * 104729) % 2003) / 1001.0f - 1.0f;
        zero_engine_set_unit(e, i, v);
    }
    free(v);
    return e;
fail:
    ZT_FAIL("setup: %s", zero_engine_last_error(e));
    zero_engine_free(e);
    return NULL;
}

/* One step: forward gathers u0..u5, backward u5..u0 with a gradient that depends on the
 * parameters; *live_peak gets the most gathered elements seen right after a gather. */
static int step(zero_engine *e, uint64_t *live_peak) {
    for (int i = 0; i < UNITS; i++) {
        if (!zero_engine_gather(e, i)) return -1;
        if (e->live > *live_peak) *live_peak = e->live;
        if (g_poll && (zero_engine_progress(e) || zero_engine_progress(e))) return -1;
        if (zero_engine_release(e, i)) return -1;
    }
    for (int i = UNITS - 1; i >= 0; i--) {
        const float *p = zero_engine_gather(e, i);
        float *g = p ? zero_engine_grad(e, i) : NULL;
        if (!g) return -1;
        if (e->live > *live_peak) *live_peak = e->live;
        if (g_poll && zero_engine_progress(e)) return -1;
        for (int k = 0; k < U; k++) g[k] += p[k] * 0.5f + 0.01f * (float)(k % 7);
        if (zero_engine_grad_ready(e, i) || zero_engine_release(e, i)) return -1;
    }
    return zero_engine_step(e, NULL);
}

/* Trains 4 steps; returns the largest number of units held at once from step 2 on (the order
 * is recorded in step 1), and the final parameters of every unit into out. */
static int depth(zero_comm *comm, int64_t bucket, int given, int64_t live_max, float *out) {
    zero_engine *e = make(comm, 3, ZERO_DIVERGENCE_STEP, bucket, given, live_max);
    if (!e) return -1;
    uint64_t peak = 0;
    int rc = step(e, &peak);
    peak = 0;
    for (int s = 1; s < 4 && !rc; s++) rc = step(e, &peak);
    for (int i = 0; i < UNITS && !rc; i++) rc = zero_engine_read_unit(e, i, out + (size_t)i * U);
    if (rc) ZT_FAIL("bucket %lld: %s", (long long)bucket, zero_engine_last_error(e));
    zero_engine_free(e);
    return rc ? -1 : (int)(peak / U);
}

static void test_prefetch(zero_comm *comm) {
    float *ref = malloc((size_t)UNITS * U * sizeof *ref), *got = malloc((size_t)UNITS * U * sizeof *got);
    /* one rank: its shard is the whole unit, and a gather hands out the persistent parameters
     * (docs/ENGINE.md, "The ownership table"): nothing is gathered, whatever the depth */
    const int one = zero_comm_size(comm) == 1;
    ZT_EQ_INT(depth(comm, 0, 0, 0, ref), one ? 0 : 2);              /* default: the current unit and the next */
    ZT_EQ_INT(depth(comm, 0, 1, 0, got), one ? 0 : 1);              /* bucket 0 given: no prefetch */
    ZT_CHECK(!memcmp(ref, got, (size_t)UNITS * U * sizeof *ref));
    g_poll = 1; /* progress with the next unit's all-gather in flight */
    ZT_EQ_INT(depth(comm, 0, 0, 0, got), one ? 0 : 2);
    ZT_CHECK(!memcmp(ref, got, (size_t)UNITS * U * sizeof *ref));
    g_poll = 0;
    ZT_EQ_INT(zero_engine_progress(NULL), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(depth(comm, 3 * U, 1, 0, got), one ? 0 : 4);          /* three units ahead fit */
    ZT_CHECK(!memcmp(ref, got, (size_t)UNITS * U * sizeof *ref));
    ZT_EQ_INT(depth(comm, 3 * U - 1, 1, 0, got), one ? 0 : 3);      /* the third does not */
    ZT_EQ_INT(depth(comm, 100 * U, 1, 3 * U, got), one ? 0 : 3);    /* max_live_parameters caps it */
    ZT_CHECK(!memcmp(ref, got, (size_t)UNITS * U * sizeof *ref));
    free(ref);
    free(got);
}

/* After a clean first step, rank 0 reduces u1 before u0, the others u0 before u1 (equal sizes:
 * the collectives match, the data do not). */
static zero_status swapped_step(zero_engine *e, int rank) {
    zero_status s = ZERO_OK;
    for (int k = 0; k < 2 && s == ZERO_OK; k++) {
        int i = rank == 0 ? 1 - k : k;
        float *g = zero_engine_grad(e, i);
        if (!g) return ZERO_ERR_STATE;
        s = zero_engine_grad_ready(e, i);
    }
    if (s != ZERO_OK) return s;
    for (int i = 2; i < UNITS && s == ZERO_OK; i++) s = zero_engine_grad(e, i) ? zero_engine_grad_ready(e, i) : ZERO_ERR_STATE;
    return s != ZERO_OK ? s : zero_engine_step(e, NULL);
}

static void test_divergence_modes(zero_comm *comm) {
    const int world = zero_comm_size(comm), rank = zero_comm_rank(comm);
    if (world < 2) return;
    for (int mode = ZERO_DIVERGENCE_STEP; mode <= ZERO_DIVERGENCE_COLLECTIVE; mode++) {
        zero_engine *e = make(comm, 2, mode, 0, 0, 0);
        if (!e) return;
        uint64_t peak = 0;
        ZT_OK(step(e, &peak)); /* the first step: every collective is checked in both modes */
        zero_status s = swapped_step(e, rank);
        ZT_EQ_INT(s, ZERO_ERR_DIVERGED);
        const char *msg = zero_engine_last_error(e);
        if (mode == ZERO_DIVERGENCE_STEP)
            ZT_CHECKF(strstr(msg, "collectives since the last check differ") && strstr(msg, "\"collective\""),
                      "message: %s", msg);
        else
            ZT_CHECKF(strstr(msg, "grad_ready of unit 'u1'") && strstr(msg, "grad_ready of unit 'u0'"), "message: %s", msg);
        ZT_CHECK(zero_engine_gather(e, 0) == NULL); /* the engine refuses further work */
        zero_engine_free(e);
    }
}

int main(void) {
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi(&comm, NULL) != ZERO_OK) return 1;
    zt_rank = zero_comm_rank(comm);
    test_prefetch(comm);
    test_divergence_modes(comm);
    zero_comm_free(comm);
    return zt_finish("test_engine_prefetch");
}
