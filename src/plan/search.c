/* The planner's search: walk the stage/offload ladder, size each rung's memory on the given
 * hardware, predict its step time, and pick the fastest that fits with its micro-batch and checkpointing. */
#include "plan/internal.h"

#include <math.h>
#include <string.h>

/* The largest micro-batch the search will try: enough for any real run, small enough that the
 * linear scan over micro-batches stays instant. */
#define PLAN_MAX_MICRO_BATCH 65536

void zero_plan_request_default(zero_plan_request *r) {
    memset(r, 0, sizeof *r);
    zero_plan_setup_default(&r->base);
    r->nodes = 1;
    r->headroom = 0.1;
    r->max_micro_batch = 8;
    zero_plan_rates_default(&r->rates, 0);
}

typedef struct rung {
    int stage;
    zero_offload_device opt, param;
    int hpz; /* 1: hpZ with H = the ranks per node (several nodes of several ranks only) */
} rung;

/* DeepSpeed's order: speed falls and memory savings grow down the list (include/zero/plan.h);
 * on a tie of predicted time the earlier rung wins. */
static const rung ladder[] = {
    {0, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0}, {1, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0},
    {2, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0}, {2, ZERO_OFFLOAD_CPU, ZERO_OFFLOAD_NONE, 0},
    {3, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0}, {3, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 1},
    {3, ZERO_OFFLOAD_CPU, ZERO_OFFLOAD_NONE, 0},  {3, ZERO_OFFLOAD_CPU, ZERO_OFFLOAD_CPU, 0},
    {2, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NONE, 0}, {3, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NONE, 0},
    {3, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME, 0},
};
_Static_assert(sizeof ladder / sizeof ladder[0] == ZERO_PLAN_MAX_CANDIDATES, "ladder size");

/* The usable sizes of a request's hardware: per rank on the device (on a CPU-only machine its
 * share of the node's RAM), per node on the host and NVMe. */
static void usable_of(const zero_plan_request *r, zero_plan_usable *u) {
    const double keep = 1.0 - r->headroom;
    u->ranks_per_node = r->nodes > 0 && r->base.ranks >= r->nodes ? r->base.ranks / r->nodes : 1;
    if (r->device_mem == 0) {
        u->device = keep * r->host_mem / (double)u->ranks_per_node;
        u->host = 0;
    } else {
        u->device = keep * r->device_mem;
        u->host = keep * r->host_mem;
    }
    u->nvme = keep * r->nvme_mem;
}

int zero_plan_fit(const zero_plan_request *r, const zero_plan_mem *mem, uint64_t activation,
                  zero_plan_candidate *c, zero_plan_usable *usable) {
    zero_plan_usable u;
    usable_of(r, &u);
    if (usable) *usable = u;
    const double rpn = (double)u.ranks_per_node;
    c->need_device = (double)mem->device + (double)mem->transient + (double)activation;
    if (r->device_mem == 0) {
        c->need_device += (double)mem->host;
        c->need_host = 0;
    } else { /* a device rank's host memory: its states and the pinned staging of its copies and collectives */
        c->need_host = rpn * ((double)mem->host + (double)mem->staging);
    }
    c->need_nvme = rpn * (double)mem->nvme;
    c->missing_device = fmax(0.0, c->need_device - u.device);
    c->missing_host = fmax(0.0, c->need_host - u.host);
    c->missing_nvme = fmax(0.0, c->need_nvme - u.nvme);
    return c->missing_device == 0 && c->missing_host == 0 && c->missing_nvme == 0;
}

typedef struct ctx {
    const zero_plan_model *m;
    const zero_plan_request *r;
} ctx;

static uint64_t activation(const ctx *c, int64_t mb, int ckpt) {
    return c->m->activation ? c->m->activation(c->m->activation_ctx, mb, ckpt) : 0;
}

/* Fills the needs and shortfalls of cand at (mb, ckpt); returns 1 when nothing is missing. */
static int size_at(const ctx *c, zero_plan_candidate *cand, int64_t mb, int ckpt) {
    cand->micro_batch = mb;
    cand->checkpointing = ckpt;
    cand->activation = activation(c, mb, ckpt);
    return zero_plan_fit(c->r, &cand->mem, cand->activation, cand, NULL);
}

static zero_status check_request(const zero_plan_request *r, zero_error *err) {
    if (!r) {
        zero__plan_err(err, "request: NULL: expected a zero_plan_request");
        return ZERO_ERR_INVALID_ARG;
    }
    if (r->base.ranks < 1 || r->nodes < 1 || r->base.ranks % r->nodes != 0) {
        zero__plan_err(err, "%d ranks on %d nodes: expected ranks >= 1, a multiple of nodes >= 1",
                       r->base.ranks, r->nodes);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(r->device_mem >= 0) || !(r->host_mem >= 0) || !(r->nvme_mem >= 0) ||
        !isfinite(r->device_mem + r->host_mem + r->nvme_mem)) {
        zero__plan_err(err, "memory sizes device %g, host %g, nvme %g: expected finite sizes >= 0",
                       r->device_mem, r->host_mem, r->nvme_mem);
        return ZERO_ERR_INVALID_ARG;
    }
    if (r->device_mem == 0 && r->host_mem <= 0) {
        zero__plan_err(err, "no device memory and host memory %g: a CPU-only machine needs its "
                            "host memory (> 0)", r->host_mem);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(r->headroom >= 0 && r->headroom < 1)) {
        zero__plan_err(err, "headroom %g: expected a fraction in [0, 1)", r->headroom);
        return ZERO_ERR_INVALID_ARG;
    }
    if (r->max_micro_batch < 1 || r->max_micro_batch > PLAN_MAX_MICRO_BATCH) {
        zero__plan_err(err, "max micro-batch %lld: expected 1..%d", (long long)r->max_micro_batch,
                       PLAN_MAX_MICRO_BATCH);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

/* The ladder walked with the request's base setup, its optimizer states in `states`, into *res
 * (its usable sizes already set). */
static zero_status walk(const zero_plan_model *m, const zero_plan_request *r, int states, zero_plan_result *out,
                        zero_error *err) {
    zero_plan_result res = *out;
    zero_status st = ZERO_OK;
    const int cpu_only = r->device_mem == 0;
    ctx c = {m, r};
    res.count = 0;
    res.skipped_count = 0;
    res.chosen = -1;
    res.closest = -1;
    res.optim_states = states;
    const int timed = r->compute.fwd_flops_per_token > 0;
    double least = INFINITY;
    for (size_t i = 0; i < sizeof ladder / sizeof ladder[0]; i++) {
        const rung *g = &ladder[i];
        const int uses_cpu = g->opt == ZERO_OFFLOAD_CPU || g->param == ZERO_OFFLOAD_CPU;
        const int uses_nvme = g->opt == ZERO_OFFLOAD_NVME || g->param == ZERO_OFFLOAD_NVME;
        if ((uses_cpu && cpu_only) || (uses_nvme && r->nvme_mem <= 0)) continue;
        /* hpZ's group is a node: it needs several nodes (else nothing crosses) of several ranks */
        if (g->hpz && (r->nodes < 2 || res.ranks_per_node < 2)) continue;
        zero_plan_candidate *cand = &res.cand[res.count];
        memset(cand, 0, sizeof *cand);
        cand->stage = g->stage;
        cand->offload_optimizer = g->opt;
        cand->offload_param = g->param;
        zero_plan_setup s = r->base;
        s.optim_states = states;
        s.stage = g->stage;
        s.offload_optimizer = g->opt;
        s.offload_param = g->param;
        s.hpz_partition_size = g->hpz ? res.ranks_per_node : 1;
        s.on_device = !cpu_only; /* a CPU rank keeps every state in RAM */
        cand->hpz_partition_size = s.hpz_partition_size;
        st = zero_plan_estimate(m, &s, &cand->mem, err);
        if (st != ZERO_OK) return st;
        if (cand->mem.unsupported) { /* the engine would refuse it: named, not proposed */
            res.skipped[res.skipped_count].stage = g->stage;
            res.skipped[res.skipped_count].hpz_partition_size = s.hpz_partition_size;
            res.skipped[res.skipped_count].offload_optimizer = g->opt;
            res.skipped[res.skipped_count].offload_param = g->param;
            res.skipped[res.skipped_count++].why = cand->mem.unsupported;
            continue;
        }
        /* Checkpointing only matters when the model tells activations apart. */
        const int can_ckpt = m->activation != NULL;
        for (int ckpt = 0; ckpt <= can_ckpt; ckpt++) {
            if (!size_at(&c, cand, 1, ckpt)) continue;
            int64_t best = 1;
            /* Activations grow with the micro-batch: the first one that does not fit ends the scan. */
            for (int64_t mb = 2; mb <= r->max_micro_batch && size_at(&c, cand, mb, ckpt); mb++) best = mb;
            zero_plan_time t;
            st = zero_plan_step_time(m, &r->compute, &s, r->nodes, best, ckpt, &r->rates, &t, err);
            if (st != ZERO_OK) return st;
            cand->variant_micro_batch[ckpt] = best;
            cand->variant_seconds[ckpt] = t.total;
        }
        if (!cand->variant_micro_batch[0] && !cand->variant_micro_batch[can_ckpt]) {
            size_at(&c, cand, 1, can_ckpt);
            st = zero_plan_step_time(m, &r->compute, &s, r->nodes, 1, can_ckpt, &r->rates, &cand->time, err);
            if (st != ZERO_OK) return st;
            cand->step_seconds = cand->time.total;
            cand->sample_seconds = cand->step_seconds;
            double miss = cand->missing_device + cand->missing_host + cand->missing_nvme;
            if (miss < least) {
                least = miss;
                res.closest = res.count;
            }
            res.count++;
            continue;
        }
        cand->fits = 1;
        /* The faster way per sequence, checkpointing off on a tie; without the model's FLOPs the
         * times lack the compute, and checkpointing is used only where it is needed to fit. */
        int ckpt = 0;
        if (!cand->variant_micro_batch[0])
            ckpt = 1;
        else if (timed && cand->variant_micro_batch[1] &&
                 cand->variant_seconds[1] / (double)cand->variant_micro_batch[1] <
                     cand->variant_seconds[0] / (double)cand->variant_micro_batch[0])
            ckpt = 1;
        size_at(&c, cand, cand->variant_micro_batch[ckpt], ckpt);
        st = zero_plan_step_time(m, &r->compute, &s, r->nodes, cand->micro_batch, ckpt, &r->rates, &cand->time, err);
        if (st != ZERO_OK) return st;
        cand->step_seconds = cand->time.total;
        cand->sample_seconds = cand->step_seconds / (double)cand->micro_batch;
        /* Without FLOPs: the first rung that fits, the ladder's order being DeepSpeed's by speed. */
        if (res.chosen < 0 || (timed && cand->sample_seconds < res.cand[res.chosen].sample_seconds))
            res.chosen = res.count;
        res.count++;
    }
    if (res.chosen >= 0) res.closest = res.chosen;
    *out = res;
    return ZERO_OK;
}

zero_status zero_plan_search(const zero_plan_model *m, const zero_plan_request *r,
                             zero_plan_result *out, zero_error *err) {
    zero_status st = zero__plan_check_model(m, err);
    if (st == ZERO_OK) st = check_request(r, err);
    if (st != ZERO_OK) return st;
    zero_plan_result res;
    memset(&res, 0, sizeof res);
    zero_plan_usable u;
    usable_of(r, &u);
    res.ranks_per_node = u.ranks_per_node;
    res.usable_device = u.device;
    res.usable_host = u.host;
    res.usable_nvme = u.nvme;
    if ((st = walk(m, r, r->base.optim_states, &res, err)) != ZERO_OK) return st;
    /* Nothing fits with fp32 optimizer states: 8-bit ones, where the engine has them (AdamW or Adam,
     * on CPU ranks and devices), a quarter of the bytes; the plan says so (optim_states). */
    const zero_optim_type o = r->base.optimizer;
    if (res.chosen < 0 && r->base.optim_states == ZERO_OPTIM_STATES_FP32 &&
        (o == ZERO_OPTIM_ADAMW || o == ZERO_OPTIM_ADAM)) {
        zero_plan_result q8 = res;
        if ((st = walk(m, r, ZERO_OPTIM_STATES_INT8, &q8, err)) != ZERO_OK) return st;
        if (q8.chosen >= 0) res = q8;
    }
    *out = res;
    return ZERO_OK;
}
