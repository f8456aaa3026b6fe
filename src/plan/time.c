/* The step's time: compute from the model's FLOPs, the step's collectives on the in-node and
 * cross-node bandwidths, the update and the offload traffic, at a machine's rates (docs/PLANNING.md §9). */
#include "plan/internal.h"

#include <math.h>
#include <string.h>

/* The 8-bit AdamW step and the NF4 decode of one rank of 2 cores (docs/PLANNING.md §9: measured by
 * zero bench rates on the machines of docs/BENCHMARKS.md); a GPU's are 0: the engine has no device
 * kernels for them yet, so the time leaves them out there. */
#define Q8_DEFAULT 2e8
#define DEQUANT_DEFAULT 1e9

void zero_plan_rates_default(zero_plan_rates *r, int gpu) {
    memset(r, 0, sizeof *r);
    if (gpu) {
        r->compute_flops = 100e12;     /* a third of a current GPU's dense bf16 peak */
        r->mem_bytes = 1.5e12;
        r->host_mem_bytes = 20e9;
        r->node_all_reduce = r->node_reduce_scatter = r->node_all_gather = 100e9; /* NVLink */
        r->latency = 20e-6;
        r->host_link_bytes = 25e9;  /* PCIe 4.0 x16 */
        r->disk_read_bytes = 3e9;
        r->disk_write_bytes = 2e9;
    } else {
        r->compute_flops = 100e9;      /* a few AVX2/AVX-512 cores */
        r->mem_bytes = r->host_mem_bytes = 10e9;
        r->node_all_reduce = r->node_reduce_scatter = r->node_all_gather = 5e9;
        r->latency = 50e-6;         /* TCP over Ethernet */
        r->host_link_bytes = 10e9;  /* unused: cpu offload moves nothing on a CPU-only machine */
        r->disk_read_bytes = 2e9;
        r->disk_write_bytes = 1e9;
        r->q8_update_elems = Q8_DEFAULT;
        r->dequant_elems = DEQUANT_DEFAULT;
    }
    r->link_bytes = 10e9 / 8;       /* 10 Gbit/s */
    r->overlap = 0;
}

/* A rate must be finite and >= 0; `need` says the setup uses it, which then needs it > 0. */
static zero_status check_rate(const char *name, double v, int need, zero_error *err) {
    if (!(v >= 0) || !isfinite(v)) {
        zero__plan_err(err, "rate %s %g: expected a finite rate >= 0", name, v);
        return ZERO_ERR_INVALID_ARG;
    }
    if (need && v == 0) {
        zero__plan_err(err, "rate %s 0: this setup needs it (> 0)", name);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

/* Seconds of one collective of M bytes (the full message: the reduced buffer, or all N blocks) on
 * K nodes of L ranks: the in-node step at the node's busbw, then each node's link carrying
 * f*(K-1)/K*M each way (f = 2 for all-reduce, 1 otherwise; docs/COMM.md, "Between nodes") at
 * that collective's own cross-node rate `link` (0: the link's, link_bytes). */
typedef struct coll_cost {
    double node, cross, cross_bytes, node_bytes;
} coll_cost;

static coll_cost collective(double M, double f, double node_busbw, double link, int K, int L, int units,
                            const zero_plan_rates *r) {
    coll_cost c = {0, 0, 0, 0};
    if (L > 1) {
        c.node_bytes = f * (L - 1) / L * M;
        c.node = c.node_bytes / node_busbw;
    }
    if (K > 1) {
        c.cross_bytes = f * (K - 1) / K * M;
        /* Every unit's collective takes f*(K-1) steps across the nodes and the engine's control
         * exchange before it (the divergence check, a small all-gather) K-1 more, each paying the
         * latency. */
        c.cross = c.cross_bytes / (link > 0 ? link : r->link_bytes) + r->latency * (f + 1) * (K - 1) * units;
    }
    return c;
}

/* A unit's trainable elements: its reduction's share of the gradients. */
static double trainable(const zero_plan_model *m, int u) {
    return (double)(m->unit_numel[u] - (m->unit_frozen ? m->unit_frozen[u] : 0));
}

/* The backward's pieces: finite FLOPs >= 0, each unit named at most once. */
static zero_status check_pieces(const zero_plan_model *m, const zero_plan_compute *c, zero_error *err) {
    if (c->bwd_pieces < 0 || (c->bwd_pieces > 0 && !c->bwd)) {
        zero__plan_err(err, "backward pieces: %d at %p: expected a count >= 0 and, with pieces, an array",
                       c->bwd_pieces, (const void *)c->bwd);
        return ZERO_ERR_INVALID_ARG;
    }
    for (int i = 0; i < c->bwd_pieces; i++) {
        const zero_plan_bwd_piece *p = &c->bwd[i];
        if (!(p->flops_per_token >= 0) || !(p->recompute_flops_per_token >= 0) ||
            !isfinite(p->flops_per_token + p->recompute_flops_per_token)) {
            zero__plan_err(err, "backward piece %d: FLOPs %g (recompute %g): expected finite FLOPs >= 0", i,
                           p->flops_per_token, p->recompute_flops_per_token);
            return ZERO_ERR_INVALID_ARG;
        }
        if (p->ready_unit < -1 || p->ready_unit >= m->num_units) {
            zero__plan_err(err, "backward piece %d: unit %d: expected -1 or a unit in [0, %d)", i, p->ready_unit,
                           m->num_units);
            return ZERO_ERR_INVALID_ARG;
        }
        for (int j = 0; j < i && p->ready_unit >= 0; j++)
            if (c->bwd[j].ready_unit == p->ready_unit) {
                zero__plan_err(err, "backward pieces %d and %d: both make unit %d ready: expected it once", j, i,
                               p->ready_unit);
                return ZERO_ERR_INVALID_ARG;
            }
    }
    return ZERO_OK;
}

/* Of `cross` seconds of the backward's reductions across nodes (each unit's share in proportion
 * to its trainable elements, posted when its piece ends), what drains while the backward computes:
 * the pieces take `bwd` seconds (and `rec` of recomputation) in proportion to their FLOPs, and
 * during them the queue of posted reductions moves at share `eta` of its rate, one after the
 * other. What is left (and a unit no piece names) runs after the backward at the full rate. */
static double backward_hidden(const zero_plan_model *m, const zero_plan_compute *c, double cross, double eta,
                              double bwd, double rec) {
    double total = 0, sf = 0, sr = 0;
    for (int u = 0; u < m->num_units; u++) total += trainable(m, u);
    for (int i = 0; i < c->bwd_pieces; i++) {
        sf += c->bwd[i].flops_per_token;
        sr += c->bwd[i].recompute_flops_per_token;
    }
    if (!(total > 0) || !(eta > 0) || !(cross > 0)) return 0;
    double queue = 0, hidden = 0;
    for (int i = 0; i < c->bwd_pieces; i++) {
        const zero_plan_bwd_piece *p = &c->bwd[i];
        const double d = (sf > 0 ? bwd * p->flops_per_token / sf : 0) + (sr > 0 ? rec * p->recompute_flops_per_token / sr : 0);
        const double drain = fmin(queue, eta * d);
        queue -= drain;
        hidden += drain;
        if (p->ready_unit >= 0) queue += cross * trainable(m, p->ready_unit) / total;
    }
    return hidden;
}

/* Stage 3's gathers across nodes: the engine prefetches one unit ahead, so the next piece's unit
 * moves (cross: a pass's gathers' link time, split among the units by their elements) at share
 * eta of its rate while the piece before computes; what has not arrived when that piece ends is
 * waited for. The forward runs the backward's pieces in reverse at a third of their time
 * (fwd, the forward's share of the compute), the backward in order (bwd, and rec the recomputation
 * spread like backward_hidden's). */
static double gathers_hidden(const zero_plan_model *m, const zero_plan_compute *c, double fwd_cross, double bwd_cross,
                             double eta, double fwd, double bwd, double rec) {
    double total = 0, sf = 0, sr = 0;
    for (int u = 0; u < m->num_units; u++) total += (double)m->unit_numel[u];
    for (int i = 0; i < c->bwd_pieces; i++) {
        sf += c->bwd[i].flops_per_token;
        sr += c->bwd[i].recompute_flops_per_token;
    }
    if (!(total > 0) || !(eta > 0) || !(sf > 0)) return 0;
    double hidden = 0;
    const int n = c->bwd_pieces;
    for (int i = 0; i + 1 < n; i++) {
        /* backward: piece i computes while piece i + 1's unit is gathered */
        const zero_plan_bwd_piece *p = &c->bwd[i], *q = &c->bwd[i + 1];
        const double d = bwd * p->flops_per_token / sf + (sr > 0 ? rec * p->recompute_flops_per_token / sr : 0);
        if (q->ready_unit >= 0) hidden += fmin(bwd_cross * (double)m->unit_numel[q->ready_unit] / total, eta * d);
        /* forward (the reverse order): piece n-1-i computes while piece n-2-i's unit is gathered */
        const zero_plan_bwd_piece *a = &c->bwd[n - 1 - i], *b = &c->bwd[n - 2 - i];
        if (b->ready_unit >= 0)
            hidden += fmin(fwd_cross * (double)m->unit_numel[b->ready_unit] / total, eta * fwd * a->flops_per_token / sf);
    }
    return hidden;
}

zero_status zero_plan_step_time(const zero_plan_model *m, const zero_plan_compute *cm,
                                const zero_plan_setup *s, int nodes, int64_t micro_batch,
                                int checkpointing, const zero_plan_rates *r, zero_plan_time *out,
                                zero_error *err) {
    zero_plan_mem mem;
    zero_status st = zero_plan_estimate(m, s, &mem, err);
    if (st != ZERO_OK) return st;
    if (nodes < 1 || s->ranks % nodes != 0) {
        zero__plan_err(err, "%d ranks on %d nodes: expected nodes >= 1 dividing the ranks", s->ranks, nodes);
        return ZERO_ERR_INVALID_ARG;
    }
    if (micro_batch < 1) {
        zero__plan_err(err, "micro-batch %lld: expected at least 1", (long long)micro_batch);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!r) {
        zero__plan_err(err, "rates: NULL: expected a zero_plan_rates");
        return ZERO_ERR_INVALID_ARG;
    }
    const zero_plan_compute none = {0}, *c = cm ? cm : &none;
    const double fwd = c->fwd_flops_per_token, refwd = c->recompute_flops_per_token;
    if (!(fwd >= 0) || !(refwd >= 0) || !isfinite(fwd + refwd) || c->seq_len < 0 ||
        ((fwd > 0 || refwd > 0) && c->seq_len < 1)) {
        zero__plan_err(err, "model FLOPs %g (recompute %g) per token over %lld tokens: expected finite "
                            "FLOPs >= 0 and, with FLOPs, a sequence length >= 1",
                       fwd, refwd, (long long)c->seq_len);
        return ZERO_ERR_INVALID_ARG;
    }
    const int K = nodes, L = s->ranks / nodes, N = s->ranks;
    /* hpZ: the backward all-gather runs among the group's H consecutive ranks, which on nodes of
     * L ranks (placed node by node) are H/L whole nodes or part of one node */
    const int H = mem.secondary ? s->hpz_partition_size : 0;
    if (H && L % H != 0 && H % L != 0) {
        zero__plan_err(err, "hpz_partition_size %d on nodes of %d ranks: expected a group inside a node (a divisor "
                       "of the ranks per node) or of whole nodes (a multiple of them)", H, L);
        return ZERO_ERR_INVALID_ARG;
    }
    const int cpu_off = s->offload_optimizer == ZERO_OFFLOAD_CPU || s->offload_param == ZERO_OFFLOAD_CPU;
    const int nvme_off = s->offload_optimizer == ZERO_OFFLOAD_NVME || s->offload_param == ZERO_OFFLOAD_NVME;
    const int host_opt = s->offload_optimizer != ZERO_OFFLOAD_NONE;
    const struct { const char *name; double v; int need; } rates[] = {
        {"compute_flops", r->compute_flops, fwd > 0 || (checkpointing && refwd > 0)},
        {"mem_bytes", r->mem_bytes, !host_opt},
        {"host_mem_bytes", r->host_mem_bytes, host_opt},
        {"node_all_reduce", r->node_all_reduce, L > 1 && N > 1 && s->stage == 0},
        {"node_reduce_scatter", r->node_reduce_scatter, L > 1 && s->stage > 0},
        {"node_all_gather", r->node_all_gather, (L > 1 && s->stage > 0) || H > 1},
        {"link_bytes", r->link_bytes, K > 1},
        {"link_all_reduce", r->link_all_reduce, 0},
        {"link_reduce_scatter", r->link_reduce_scatter, 0},
        {"link_all_gather", r->link_all_gather, 0},
        {"latency", r->latency, 0},
        {"host_link_bytes", r->host_link_bytes, cpu_off},
        {"disk_read_bytes", r->disk_read_bytes, nvme_off},
        {"disk_write_bytes", r->disk_write_bytes, nvme_off},
        {"q8_update_elems", r->q8_update_elems, 0},
        {"dequant_elems", r->dequant_elems, 0},
    };
    for (size_t i = 0; i < sizeof rates / sizeof rates[0]; i++)
        if ((st = check_rate(rates[i].name, rates[i].v, rates[i].need, err)) != ZERO_OK) return st;
    const struct { const char *name; double v; } shares[] = {
        {"overlap", r->overlap},
        {"progress_all_reduce", r->progress_all_reduce},
        {"progress_reduce_scatter", r->progress_reduce_scatter},
        {"progress_all_gather", r->progress_all_gather},
    };
    for (size_t i = 0; i < sizeof shares / sizeof shares[0]; i++)
        if (!(shares[i].v >= 0 && shares[i].v <= 1)) {
            zero__plan_err(err, "rate %s %g: expected a fraction in [0, 1]", shares[i].name, shares[i].v);
            return ZERO_ERR_INVALID_ARG;
        }
    if ((st = check_pieces(m, c, err)) != ZERO_OK) return st;

    zero_plan_time t;
    memset(&t, 0, sizeof t);
    if (!(c->fwd_only_passes >= 0) || !(c->seq_factor >= 0) || !(c->dequant_per_pass >= 0) ||
        !isfinite(c->fwd_only_passes + c->seq_factor + c->dequant_per_pass)) {
        zero__plan_err(err, "forward-only passes %g, sequence factor %g, dequantized weights per pass %g: expected "
                       "finite numbers >= 0", c->fwd_only_passes, c->seq_factor, c->dequant_per_pass);
        return ZERO_ERR_INVALID_ARG;
    }
    const double xf = c->fwd_only_passes; /* forward-only passes besides the forward and backward */
    const double tokens = (double)micro_batch * (double)c->seq_len * (c->seq_factor > 0 ? c->seq_factor : 1.0);
    /* forward, then backward's two products per weight (the input's gradient and the weight's);
     * a frozen weight has no gradient: its share f of the parameters skips the second. */
    const double frozen_share = mem.numel ? (double)mem.frozen / (double)mem.numel : 0.0;
    if (fwd > 0) t.compute = (3.0 - frozen_share + xf) * tokens * fwd / r->compute_flops;
    if (checkpointing && refwd > 0) t.recompute = tokens * refwd / r->compute_flops;

    /* The step's collectives over M = P*w bytes (every unit's, summed): stage 0 one all-reduce;
     * stages 1-2 a reduce-scatter of the gradients and an all-gather of the updated parameters;
     * stage 3 the all-gathers of forward and backward and the reduce-scatter; under hpZ the
     * backward's runs inside the group: H/L nodes of L ranks, or H ranks of one node. */
    const double w = (double)zero_dtype_size(s->precision), M = (double)mem.padded * w;
    /* qwZ: the world's parameter gathers move int8 messages, 1 + 4 / block bytes an element (the
     * messages' padding to 16 bytes left out); hpZ's group gathers stay in the dtype */
    const double qB = s->stage == 3 ? (double)s->quant_weights_block : 0.0, qw = qB > 0 ? 1.0 + 4.0 / qB : 0.0;
    const double Mg = qB > 0 ? (double)mem.padded * qw : M;
    /* qgZ: the reduce-scatter's cross-node step on int8 messages of 1 + 4 / block bytes an element */
    const double gB = s->stage >= 2 ? (double)s->quant_grads_block : 0.0;
    const double Mr = gB > 0 ? (double)mem.padded * (1.0 + 4.0 / gB) : M;
    double cc0_cross = 0; /* the backward's reduction across nodes */
    double ag_fwd_cross = 0, ag_bwd_cross = 0; /* stage 3: the forward's and the backward's gathers across nodes */
    if (N > 1) {
        coll_cost cc[7];
        int n = 0;
        if (s->stage == 0) {
            cc[n++] = collective(M, 2, r->node_all_reduce, r->link_all_reduce, K, L, m->num_units, r);
        } else {
            cc[n++] = collective(M, 1, r->node_reduce_scatter, r->link_reduce_scatter, K, L, m->num_units, r);
            if (gB > 0) { /* qgZ: the node step exact, what crosses quantized */
                const coll_cost q = collective(Mr, 1, r->node_reduce_scatter, r->link_reduce_scatter, K, L, m->num_units, r);
                cc[n - 1].cross = q.cross;
                cc[n - 1].cross_bytes = q.cross_bytes;
            }
            cc[n++] = collective(s->stage == 3 ? Mg : M, 1, r->node_all_gather, r->link_all_gather, K, L, m->num_units, r);
            if (s->stage == 3 && H) {
                const int gl = H < L ? H : L;
                cc[n++] = collective(M, 1, r->node_all_gather, r->link_all_gather, H / gl, gl, m->num_units, r);
            } else if (s->stage == 3) {
                cc[n++] = collective(Mg, 1, r->node_all_gather, r->link_all_gather, K, L, m->num_units, r);
            }
            if (s->stage == 3 && xf > 0) /* each forward-only pass gathers as the forward does */
                cc[n++] = collective(Mg * xf, 1, r->node_all_gather, r->link_all_gather, K, L, m->num_units, r);
        }
        const int ntrain = n;
        cc0_cross = cc[0].cross;
        if (s->stage == 3) ag_fwd_cross = cc[1].cross, ag_bwd_cross = cc[2].cross;
        if (s->stage == 3 && mem.frozen_padded) { /* the frozen parts: gathered in forward and backward */
            const double wf = (double)zero_dtype_size(s->frozen_dtype == ZERO_DTYPE_COUNT ? s->precision : s->frozen_dtype);
            const double Mf = (double)mem.frozen_padded * (qB > 0 && !s->quant_base ? qw : wf);
            cc[n++] = collective(Mf, 1, r->node_all_gather, r->link_all_gather, K, L, m->num_units, r);
            cc[n++] = collective(Mf, 1, r->node_all_gather, r->link_all_gather, K, L, m->num_units, r);
            if (xf > 0) cc[n++] = collective(Mf * xf, 1, r->node_all_gather, r->link_all_gather, K, L, m->num_units, r);
        }
        for (int i = 0; i < n; i++) {
            t.comm_node += cc[i].node;
            t.comm_cross += cc[i].cross;
            t.cross_bytes += cc[i].cross_bytes;
            t.node_bytes += cc[i].node_bytes;
        }
        t.collectives = ntrain * m->num_units;
    }
    const double busy = t.compute + t.recompute, comm = t.comm_node + t.comm_cross;
    /* Stages 0-2 post each unit's reduction (cc[0]) when the backward has made its gradient; across
     * nodes it moves while the backward goes on, at its progress share. Stage 3's reductions share
     * the link with the backward's own gathers, which every unit waits for: none is taken as
     * hidden there. */
    if (N > 1 && K > 1 && s->stage < 3 && fwd > 0) {
        const double bwd = t.compute * (2.0 - frozen_share) / (3.0 - frozen_share);
        t.comm_hidden_backward = backward_hidden(m, c, cc0_cross, s->stage == 0 ? r->progress_all_reduce
                                                                                : r->progress_reduce_scatter,
                                                 bwd, t.recompute);
    }
    if (N > 1 && K > 1 && s->stage == 3 && fwd > 0) {
        const double fwd_t = t.compute / (3.0 - frozen_share + xf), bwd_t = fwd_t * (2.0 - frozen_share);
        t.comm_hidden_gathers = gathers_hidden(m, c, ag_fwd_cross, ag_bwd_cross, r->progress_all_gather, fwd_t, bwd_t,
                                               t.recompute);
    }
    const double hid = t.comm_hidden_backward + t.comm_hidden_gathers;
    t.comm_hidden = hid + fmin(r->overlap * (comm - hid), busy - hid);

    /* The update streams, per element of the updated shard: the gradient twice (norm, update),
     * the fp32 master in and out, every state in and out, and with a half working dtype the
     * working copy out: 8 + 8k + 2w (+ w) bytes. */
    const double half = w != 4 ? 1.0 : 0.0, k = (double)mem.state_count;
    const double E = (double)(s->stage == 0 ? mem.padded : mem.shard), S = (double)mem.shard;
    /* 8-bit states (optim_q8 of the E elements): the decode and code around the fp32 step are
     * compute, not bytes: their own measured rate, where one is given */
    const double Eq = r->q8_update_elems > 0 ? (double)mem.optim_q8 : 0.0;
    const double update = (E - Eq) * (8 + 8 * k + (2 + half) * w) / (host_opt ? r->host_mem_bytes : r->mem_bytes) +
                          (Eq > 0 ? Eq / r->q8_update_elems : 0.0);

    /* NVMe (docs/OFFLOAD.md): the states (and with a half dtype the master) in and out once per
     * step; the parameter shard read by both gathers of a micro-batch and written by the step
     * (fp32: it is the master, so the step reads it too). The node's drive is shared by its L
     * ranks. The step's I/O is pipelined with the update, the gathers' reads with the compute. */
    double step_rd = 0, step_wr = 0, gather_rd = 0;
    if (s->offload_optimizer == ZERO_OFFLOAD_NVME) {
        /* an 8-bit state: an index byte an element and 4 bytes a block of 256 */
        const double Sq = (double)mem.optim_q8, states = (S - Sq) * 4 * k + Sq * (1.0 + 4.0 / 256) * k;
        step_rd += states + half * S * 4;
        step_wr += states + half * S * 4;
    }
    if (s->offload_param == ZERO_OFFLOAD_NVME) {
        gather_rd += (2 + xf) * S * w;
        step_wr += S * w;
        if (!half) step_rd += S * 4;
    }
    t.disk_read = step_rd + gather_rd;
    t.disk_written = step_wr;
    double step_io = 0, gather_io = 0;
    if (nvme_off) {
        step_io = L * step_rd / r->disk_read_bytes + L * step_wr / r->disk_write_bytes;
        gather_io = L * gather_rd / r->disk_read_bytes;
    }
    t.optimizer = update;
    t.disk = fmax(0.0, step_io - update) + fmax(0.0, gather_io - busy);

    /* cpu offload: the gradient shard to the host and the updated parameter shard back; with the
     * parameters on the host, each of a micro-batch's two gathers first copies the shard up, the
     * frozen part's with it. */
    const double wf = (double)zero_dtype_size(s->frozen_dtype == ZERO_DTYPE_COUNT ? s->precision : s->frozen_dtype);
    const double Sf = (double)(mem.frozen_padded / (uint64_t)N); /* the frozen shard: gathered, never updated */
    double copy = 0;
    if (s->offload_optimizer == ZERO_OFFLOAD_CPU) copy += 2 * S * w;
    if (s->offload_param == ZERO_OFFLOAD_CPU) copy += (2 + xf) * (S * w + Sf * wf);
    if (copy > 0) t.host_copy = copy / r->host_link_bytes;

    /* a quantized base: its weights decoded in every pass over the model (plan.h) */
    if (c->dequant_per_pass > 0 && r->dequant_elems > 0)
        t.dequant = (2.0 + xf + (checkpointing ? 1.0 : 0.0)) * c->dequant_per_pass / r->dequant_elems;
    /* qwZ: each world gather codes this rank's shards and decodes the others' (as many elements as
     * the unit's), at the same rate */
    if (qB > 0 && N > 1 && r->dequant_elems > 0) {
        const double parts = (double)mem.padded + (s->quant_base ? 0.0 : (double)mem.frozen_padded);
        t.dequant += ((H ? 1.0 : 2.0) + xf) * parts / r->dequant_elems;
    }
    /* qgZ: across K nodes each rank codes and decodes (K - 1) / K of its 1 / L share of the gradient */
    if (gB > 0 && K > 1 && r->dequant_elems > 0)
        t.dequant += 2.0 * (double)(K - 1) / K * (double)mem.padded / L / r->dequant_elems;

    t.total = busy + comm - t.comm_hidden + t.optimizer + t.host_copy + t.disk + t.dequant;
    *out = t;
    return ZERO_OK;
}
