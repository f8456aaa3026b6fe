/* Per-rank memory of one stage/offload setup and the traffic of a step: the engine's accounting
 * written as formulas (the table in include/zero/plan.h; derivation in docs/PLANNING.md). */
#include "plan/internal.h"

#include "partition/own.h"

#include "zero/partition.h"
#include "zero/quant.h"

#include <string.h>

void zero_plan_setup_default(zero_plan_setup *s) {
    memset(s, 0, sizeof *s);
    s->ranks = 1;
    s->stage = 0;
    s->precision = ZERO_DTYPE_FP32;
    s->optimizer = ZERO_OPTIM_ADAMW;
    s->momentum = 0.9f;
    s->align = ZERO_PLAN_DEFAULT_ALIGN;
    s->offload_optimizer = ZERO_OFFLOAD_NONE;
    s->offload_param = ZERO_OFFLOAD_NONE;
    s->optimizer_buffer_count = 4;
    s->aio_block_size = 1 << 20;
    s->param_buffer_count = 5;
    s->param_buffer_size = 100000000;
    s->frozen_dtype = ZERO_DTYPE_COUNT;
    s->hpz_partition_size = 1;
    s->optim_states_min = 4096; /* ZERO_QUANT_Q8_MIN */
    s->on_device = 1;
}

void zero_plan_setup_from_config(zero_plan_setup *s, const zero_config *cfg, int world) {
    zero_plan_setup_default(s);
    s->ranks = world;
    s->stage = cfg->stage;
    s->precision = cfg->precision;
    s->optimizer = cfg->optim.type;
    s->momentum = cfg->optim.momentum;
    /* The engine aligns shards to align_bytes over fp32 elements whatever the working dtype. */
    s->align = cfg->align_bytes >= 4 ? (uint64_t)cfg->align_bytes / 4 : 1;
    s->offload_optimizer = cfg->offload_optimizer.device;
    s->offload_param = cfg->offload_param.device;
    s->optimizer_buffer_count = cfg->offload_optimizer.buffer_count;
    s->aio_block_size = cfg->aio_block_size;
    s->param_buffer_count = cfg->offload_param.buffer_count;
    s->param_buffer_size = cfg->offload_param.buffer_size;
    s->frozen_dtype = cfg->frozen_dtype;
    s->hpz_partition_size = cfg->hpz_partition_size;
    s->quant_weights_block = cfg->quant_weights ? cfg->quant_weights_block : 0;
    s->quant_grads_block = cfg->quant_grads ? cfg->quant_grads_block : 0;
    s->quant_base = cfg->quant_base != ZERO_QFMT_NONE;
    s->deterministic = cfg->deterministic;
    s->optim_states = cfg->optim_states;
    s->optim_states_min = cfg->optim_states_min;
    s->on_device = 0; /* the engine runs on host memory unless its caller says otherwise */
}

const char *zero_plan_offload_name(zero_offload_device d) {
    switch (d) {
    case ZERO_OFFLOAD_NONE: return "none";
    case ZERO_OFFLOAD_CPU: return "cpu";
    case ZERO_OFFLOAD_NVME: return "nvme";
    }
    return "invalid";
}

/* a*b and a+b on uint64 that remember an overflow in *ovf instead of wrapping. */
static uint64_t mul(uint64_t a, uint64_t b, int *ovf) {
    uint64_t r;
    if (__builtin_mul_overflow(a, b, &r)) *ovf = 1;
    return r;
}
static uint64_t add(uint64_t a, uint64_t b, int *ovf) {
    uint64_t r;
    if (__builtin_add_overflow(a, b, &r)) *ovf = 1;
    return r;
}

/* The ownership plan of a setup (src/partition/own.h) on a device or a CPU rank (s->on_device):
 * the extents and tiers the formulas below read, and the rules check_setup words. */
static void own_plan(const zero_plan_setup *s, int any_frozen, zero__own_plan *t) {
    const zero__own_in in = {
        .stage = s->stage,
        .world = s->ranks,
        .half = s->precision != ZERO_DTYPE_FP32,
        .nstates = zero_optim_state_count(s->optimizer, s->momentum),
        .frozen = any_frozen,
        .offload_optimizer = s->offload_optimizer,
        .offload_param = s->offload_param,
        .hpz = s->hpz_partition_size,
        .device = s->on_device != 0,
    };
    zero__own_plan_of(&in, t);
}

zero_status zero__plan_check_model(const zero_plan_model *m, zero_error *err) {
    if (!m || m->num_units < 1 || !m->unit_numel) {
        zero__plan_err(err, "model: %d units: expected at least one unit with its sizes",
                       m ? m->num_units : 0);
        return ZERO_ERR_INVALID_ARG;
    }
    for (int u = 0; u < m->num_units; u++) {
        if (m->unit_numel[u] == 0) {
            zero__plan_err(err, "model: unit %d has 0 elements: expected at least 1", u);
            return ZERO_ERR_INVALID_ARG;
        }
        if (m->unit_frozen && m->unit_frozen[u] > m->unit_numel[u]) {
            zero__plan_err(err, "model: unit %d has %llu frozen elements of %llu: expected at most all", u,
                           (unsigned long long)m->unit_frozen[u], (unsigned long long)m->unit_numel[u]);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    return ZERO_OK;
}

static zero_status check_setup(const zero_plan_setup *s, zero_error *err) {
    if (!s) {
        zero__plan_err(err, "setup: NULL: expected a zero_plan_setup");
        return ZERO_ERR_INVALID_ARG;
    }
    zero__own_plan t;
    own_plan(s, 0, &t);
    if (t.invalid & OWN_BAD_WORLD) {
        zero__plan_err(err, "ranks %d: expected at least 1", s->ranks);
        return ZERO_ERR_INVALID_ARG;
    }
    if (t.invalid & OWN_BAD_STAGE) {
        zero__plan_err(err, "stage %d: expected 0, 1, 2 or 3", s->stage);
        return ZERO_ERR_INVALID_ARG;
    }
    if (s->precision != ZERO_DTYPE_FP32 && s->precision != ZERO_DTYPE_BF16 &&
        s->precision != ZERO_DTYPE_FP16) {
        zero__plan_err(err, "precision %s: expected fp32, bf16 or fp16", zero_dtype_name(s->precision));
        return ZERO_ERR_INVALID_ARG;
    }
    if (s->frozen_dtype != ZERO_DTYPE_COUNT && s->frozen_dtype != ZERO_DTYPE_FP32 && s->frozen_dtype != ZERO_DTYPE_BF16 &&
        s->frozen_dtype != ZERO_DTYPE_FP16) {
        zero__plan_err(err, "frozen dtype %s: expected fp32, bf16, fp16 or the precision", zero_dtype_name(s->frozen_dtype));
        return ZERO_ERR_INVALID_ARG;
    }
    if (s->optimizer < ZERO_OPTIM_ADAMW || s->optimizer > ZERO_OPTIM_LION) {
        zero__plan_err(err, "optimizer %d: expected adamw, adam, sgd or lion", (int)s->optimizer);
        return ZERO_ERR_INVALID_ARG;
    }
    if (s->align < 1) {
        zero__plan_err(err, "align 0: expected at least 1 element");
        return ZERO_ERR_INVALID_ARG;
    }
    if (s->optim_states == ZERO_OPTIM_STATES_INT8 &&
        ((s->optimizer != ZERO_OPTIM_ADAMW && s->optimizer != ZERO_OPTIM_ADAM) || s->optim_states_min < 0)) {
        zero__plan_err(err, "optimizer states int8 with %s (minimum size %lld): expected AdamW or Adam (the engine's "
                       "8-bit states) and a minimum size >= 0", zero_optim_name(s->optimizer), (long long)s->optim_states_min);
        return ZERO_ERR_UNSUPPORTED;
    }
    if (s->optim_states != ZERO_OPTIM_STATES_FP32 && s->optim_states != ZERO_OPTIM_STATES_INT8) {
        zero__plan_err(err, "optimizer states %d: expected fp32 (0) or int8 (1)", s->optim_states);
        return ZERO_ERR_INVALID_ARG;
    }
    if (t.invalid & OWN_BAD_OFFLOAD) {
        zero__plan_err(err, "offload device %d/%d: expected none, cpu or nvme",
                       (int)s->offload_optimizer, (int)s->offload_param);
        return ZERO_ERR_INVALID_ARG;
    }
    if (t.invalid & OWN_PARAM_OFFLOAD_STAGE) {
        zero__plan_err(err, "offload_param %s at stage %d: parameter offload needs stage 3",
                       zero_plan_offload_name(s->offload_param), s->stage);
        return ZERO_ERR_INVALID_ARG;
    }
    if (t.invalid & OWN_OPTIM_OFFLOAD_STAGE) {
        zero__plan_err(err, "offload_optimizer %s at stage 0: optimizer offload needs stage 1, 2 or 3",
                       zero_plan_offload_name(s->offload_optimizer));
        return ZERO_ERR_INVALID_ARG;
    }
    const int h = s->hpz_partition_size;
    if (t.invalid & OWN_HPZ_ANY) {
        zero__plan_err(err, "hpz_partition_size %d at stage %d on %d ranks%s: expected 1, or at stage 3 a divisor "
                       "of the ranks without parameters on nvme", h, s->stage, s->ranks,
                       s->offload_param == ZERO_OFFLOAD_NVME ? " with parameters on nvme" : "");
        return ZERO_ERR_INVALID_ARG;
    }
    if (s->quant_weights_block < 0 || s->quant_grads_block < 0) {
        zero__plan_err(err, "quantized weight gathers (qwZ) in blocks of %lld, gradients (qgZ) in blocks of %lld: "
                       "expected blocks >= 1, or 0 (off)", (long long)s->quant_weights_block,
                       (long long)s->quant_grads_block);
        return ZERO_ERR_INVALID_ARG;
    }
    if (s->optimizer_buffer_count < 0 || s->aio_block_size < 0 || s->param_buffer_count < 0 ||
        s->param_buffer_size < 0) {
        zero__plan_err(err, "offload pools %d x %lld bytes, %d x %lld elements: expected sizes >= 0",
                       s->optimizer_buffer_count, (long long)s->aio_block_size,
                       s->param_buffer_count, (long long)s->param_buffer_size);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

/* Adds `bytes` to the memory of a tier (TIER_*: device, host pinned or not, or NVMe). */
static void place(zero_plan_mem *o, int tier, uint64_t bytes, int *ovf) {
    if (tier == TIER_PINNED) o->pinned = add(o->pinned, bytes, ovf);
    if (tier == TIER_PINNED || tier == TIER_RAM) o->host = add(o->host, bytes, ovf);
    else if (tier == TIER_NVME) o->nvme = add(o->nvme, bytes, ovf);
    else o->device = add(o->device, bytes, ovf);
}

zero_status zero_plan_estimate(const zero_plan_model *m, const zero_plan_setup *s,
                               zero_plan_mem *out, zero_error *err) {
    zero_status st = zero__plan_check_model(m, err);
    if (st == ZERO_OK) st = check_setup(s, err);
    if (st != ZERO_OK) return st;
    zero_plan_mem o;
    memset(&o, 0, sizeof o);
    int ovf = 0;
    const uint64_t N = (uint64_t)s->ranks;
    const uint64_t w = zero_dtype_size(s->precision);
    const uint64_t wf = s->frozen_dtype == ZERO_DTYPE_COUNT ? w : zero_dtype_size(s->frozen_dtype);
    /* 8-bit states: every shard on a block (the engine's alignment) */
    const int q8 = s->optim_states == ZERO_OPTIM_STATES_INT8;
    const uint64_t align = q8 && s->align < ZERO_QUANT_Q8_BLOCK ? ZERO_QUANT_Q8_BLOCK : s->align;
    /* per unit: the trainable part (U: the gradient and reduction roles), the frozen part, what
     * a stage-3 gather holds of both (G), and the fp32 view gather hands out (X) */
    uint64_t G1 = 0, G2 = 0, X1 = 0, blocks = 0; /* blocks: deterministic mode's grid blocks */
    uint64_t Pq = 0; /* the padded elements of the units whose states are 8-bit */
    /* qwZ (stage 3 on several ranks): the largest unit's messages in flight, this rank's and the
     * world's of each part sent quantized ((N + 1) R, R = zero_quant_msg_bytes of its shard) */
    const uint64_t qB = s->stage == 3 && s->ranks > 1 ? (uint64_t)s->quant_weights_block : 0;
    uint64_t Q1 = 0;
    int any_frozen = 0;
    for (int u = 0; u < m->num_units; u++) {
        const uint64_t fr = m->unit_frozen ? m->unit_frozen[u] : 0, tr = m->unit_numel[u] - fr;
        uint64_t pu = zero_partition_padded(tr, s->ranks, align);
        const uint64_t pf = zero_partition_padded(fr, s->ranks, align);
        if (q8 && tr && tr >= (uint64_t)s->optim_states_min) Pq = add(Pq, pu, &ovf);
        if ((tr && pu == 0) || (fr && pf == 0)) ovf = 1;
        o.numel = add(o.numel, m->unit_numel[u], &ovf);
        o.padded = add(o.padded, pu, &ovf);
        blocks = add(blocks, pu / ZERO__PLAN_DET_BLOCK + (pu % ZERO__PLAN_DET_BLOCK != 0), &ovf);
        o.frozen = add(o.frozen, fr, &ovf);
        o.frozen_padded = add(o.frozen_padded, pf, &ovf);
        any_frozen |= fr > 0;
        const uint64_t g = add(mul(pu, w, &ovf), mul(pf, wf, &ovf), &ovf);
        if (g > G1) G2 = G1, G1 = g;
        else if (g > G2) G2 = g;
        const uint64_t x = fr ? m->unit_numel[u] : pu;
        if (x > X1) X1 = x;
        if (qB) {
            const uint64_t N1 = (uint64_t)s->ranks, R = zero_quant_msg_bytes(pu / N1, qB),
                           Rf = s->quant_base ? 0 : zero_quant_msg_bytes(pf / N1, qB);
            const uint64_t q = mul(N1 + 1, add(R, Rf, &ovf), &ovf);
            if (q > Q1) Q1 = q;
        }
        if (pu > o.largest_unit) {
            o.third_unit = o.second_unit;
            o.second_unit = o.largest_unit;
            o.largest_unit = pu;
        } else if (pu > o.second_unit) {
            o.third_unit = o.second_unit;
            o.second_unit = pu;
        } else if (pu > o.third_unit) {
            o.third_unit = pu;
        }
    }
    if (s->deterministic && any_frozen) { /* as the engine: refused at finalize */
        zero__plan_err(err, "deterministic mode with frozen parameters (LoRA): not supported yet");
        return ZERO_ERR_UNSUPPORTED;
    }
    o.shard = o.padded / N;
    const int half = w != 4;
    const int k = zero_optim_state_count(s->optimizer, s->momentum);
    o.state_count = k;
    const uint64_t P = o.padded, S = o.shard, U1 = o.largest_unit, U2 = o.second_unit,
                   U3 = o.third_unit, Pf = o.frozen_padded;

    /* hpZ: every padded unit divides by N, so by H (a divisor of N): P/H is the sum of the units'
     * secondary shards. H = N would make it the world shard: the engine keeps none. */
    const uint64_t H = (uint64_t)s->hpz_partition_size;
    zero__own_plan own; /* the extents and tiers of every state: the engine's table */
    own_plan(s, any_frozen, &own);
    o.secondary = own.hpz ? P / H : 0;
    /* what the engine refuses of this setup at finalize (src/engine/engine.c: the same bits) */
    if (own.invalid & OWN_HPZ_FROZEN) o.unsupported = "hpZ with frozen parameters is not supported yet";
    /* elements of a kind's extent: the whole padded total, the shard, or none */
#define OWN_ELEMS(kind, whole, shard) \
    (own.k[kind].extent == EXT_WHOLE ? (whole) : own.k[kind].extent == EXT_SHARD ? (shard) : 0)
    uint64_t *b = o.bytes;
    b[ZERO_MEM_PARAMS] = add(mul(OWN_ELEMS(EK_PARAMS, P, S), w, &ovf), mul(OWN_ELEMS(EK_FROZEN, Pf, Pf / N), wf, &ovf), &ovf);
    const uint64_t sec_bytes = mul(o.secondary, w, &ovf);
    b[ZERO_MEM_PARAMS] = add(b[ZERO_MEM_PARAMS], sec_bytes, &ovf);
    b[ZERO_MEM_GRADS] = mul(OWN_ELEMS(EK_GRADS, P, S), w, &ovf);
    if (s->deterministic) b[ZERO_MEM_GRADS] = add(b[ZERO_MEM_GRADS], blocks, &ovf); /* a grid byte per block */
    b[ZERO_MEM_MASTER] = mul(OWN_ELEMS(EK_MASTER, P, S), 4, &ovf); /* none in fp32: the working parameters */
    /* fp32 states: 4 bytes an element each; 8-bit: an index byte each and 4 bytes a block of 256
     * each (a padded unit is whole blocks, and so is its shard) */
    const uint64_t Eq = OWN_ELEMS(EK_OPTIM, Pq, Pq / N), E = OWN_ELEMS(EK_OPTIM, P, S) - Eq;
    o.optim_q8 = Eq;
    b[ZERO_MEM_OPTIM] = add(mul(mul(E, 4, &ovf), (uint64_t)k, &ovf),
                            mul(add(Eq, mul(Eq / ZERO_QUANT_Q8_BLOCK, 4, &ovf), &ovf), (uint64_t)k, &ovf), &ovf);
#undef OWN_ELEMS
    /* The transient's upper bound (docs/PLANNING.md): the largest distinct units in every role
     * at once; a padded unit divides by N, so (U1 + U2) / N is the sum of their shards. With
     * frozen parameters the view and the stage-3 gathers hold both parts. */
    const uint64_t U12 = add(U1, U2, &ovf), U123 = add(U12, U3, &ovf);
    /* On one rank a shard is the whole unit and the engine keeps every row in RAM whole, as at
     * stage 0: the stage-3 gathers copy only parameters read from NVMe, and the gradients
     * accumulate in place instead of going through reduction buffers. */
    /* A device rank computes on device memory: parameters kept on the host (offload_param "cpu")
     * come to the device a unit at a time, as a gathered copy, even where the rank keeps them whole */
    const int gathers = own.gather_collective || own.k[EK_PARAMS].tier == TIER_PINNED;
    const int sharded_grads = own.reduce_each_mb;
    uint64_t t = 0;
    if (half || any_frozen) t = add(t, mul(X1, 4, &ovf), &ovf);
    if (half) t = add(t, ZERO__PLAN_STEP_CHUNK, &ovf);
    if (gathers) t = add(t, add(G1, G2, &ovf), &ovf);
    /* qwZ: the messages of the unit in flight, and the coder's fp32 chunk where a part sent
     * quantized is not fp32 */
    if (Q1) {
        t = add(t, Q1, &ovf);
        if (half || (any_frozen && !s->quant_base && wf != 4)) t = add(t, mul(zero_quant_msg_chunk(qB), 4, &ovf), &ovf);
    }
    /* gradients kept off the device (ZeRO-Offload) are computed on it a unit at a time */
    const int grads_away = own.k[EK_GRADS].tier == TIER_PINNED;
    if (half || sharded_grads || grads_away) t = add(t, mul(U12, 4, &ovf), &ovf);
    if (sharded_grads) {
        /* Half: the starting unit's working-dtype copy joins two in-flight sends, before its
         * fp32 buffer is freed. fp32: the fp32 buffer itself is sent; the starting unit adds its
         * receive buffer to the two in flight. */
        if (half) t = add(t, add(mul(U123, w, &ovf), mul(U12 / N, w, &ovf), &ovf), &ovf);
        else t = add(t, add(mul(U12, w, &ovf), mul(U123 / N, w, &ovf), &ovf), &ovf);
    }
    /* Deterministic mode (docs/ENGINE.md §11): from a unit's first atom to the step, a seen byte
     * and an int64 mass per grid block, and in half precision the int32 sums (4 bytes a padded element where
     * gradients are kept whole, a shard element where they are sharded; fp32 sums in the gradient
     * buffer itself); fp32 gradients kept whole go through the fp32 buffers handed to the model
     * (two units' at most, as where they are sharded). At the step: half precision's conversion
     * chunk (2^18 elements at most) and the norm's records, 513 int64 a rank and this rank's. */
    if (s->deterministic) {
        uint64_t a = mul(blocks, 9, &ovf);
        if (half) a = add(a, mul(add(sharded_grads ? S : P, U1 < ZERO__PLAN_DET_CHUNK ? U1 : ZERO__PLAN_DET_CHUNK, &ovf), 4, &ovf), &ovf);
        else if (!sharded_grads) a = add(a, mul(U12, 4, &ovf), &ovf);
        o.accumulator = add(a, mul(ZERO__PLAN_DET_NORM_BYTES, N + 1, &ovf), &ovf);
        t = add(t, o.accumulator, &ovf);
    }
    b[ZERO_MEM_BUFFERS] = t;
    b[ZERO_MEM_COMM] = 0;
    for (int c = ZERO_MEM_PARAMS; c <= ZERO_MEM_OPTIM; c++)
        o.model_states = add(o.model_states, b[c], &ovf);
    o.transient = b[ZERO_MEM_BUFFERS];

    /* Each state in its tier: the optimizer offload moves master + states together, and on a
     * device rank the gradient with them (the host optimizer reads it: ZeRO-Offload); the
     * parameter offload (stage 3) the parameter shard. */
    place(&o, own.k[EK_PARAMS].tier, b[ZERO_MEM_PARAMS] - sec_bytes, &ovf);
    place(&o, s->on_device ? TIER_DEVICE : TIER_RAM, sec_bytes, &ovf); /* hpZ: the backward gathers read it there */
    place(&o, own.k[EK_GRADS].tier, b[ZERO_MEM_GRADS], &ovf);
    place(&o, own.k[EK_MASTER].tier, b[ZERO_MEM_MASTER], &ovf);
    place(&o, own.k[EK_OPTIM].tier, b[ZERO_MEM_OPTIM], &ovf);
    if (s->offload_optimizer == ZERO_OFFLOAD_NVME)
        o.pool = mul((uint64_t)s->optimizer_buffer_count, (uint64_t)s->aio_block_size, &ovf);
    if (s->offload_param == ZERO_OFFLOAD_NVME) {
        /* a buffer holds the largest unit's shard: the working one and the frozen one behind it
         * (G1 / N bytes; a buffer_size given smaller is refused by the engine, never used) */
        o.pool = add(o.pool, mul((uint64_t)s->param_buffer_count, G1 / N, &ovf), &ovf);
    }
    /* a device copies from and to page-locked memory only: the pools are pinned there */
    place(&o, s->on_device ? TIER_PINNED : TIER_RAM, o.pool, &ovf);
    if (own.k[EK_GRADS].tier == TIER_PINNED) o.grad_staging = b[ZERO_MEM_GRADS];
    if (s->on_device) { /* the staging of copies and collectives (plan.h) */
        uint64_t st = 0;
        if (own.k[EK_OPTIM].tier != TIER_DEVICE && own.k[EK_PARAMS].tier == TIER_DEVICE)
            st = 2 * ZERO__PLAN_UPL_BYTES; /* the host's step writes a working copy on the device */
        const uint64_t C = G1 < ZERO__PLAN_DEV_CHUNK ? G1 : ZERO__PLAN_DEV_CHUNK;
        st = add(st, mul(2, add(C, C / N, &ovf), &ovf), &ovf);
        if (gathers) st = add(st, add(G1, G1 / N, &ovf), &ovf); /* one rank too: a gather from NVMe prefetches */
        if (N > 1 && sharded_grads) st = add(st, add(mul(U123, w, &ovf), mul(U123 / N, w, &ovf), &ovf), &ovf);
        o.staging = st; /* beside host (plan.h) */
    }
    if (ovf) {
        zero__plan_err(err, "model of %d units at %d ranks: byte counts overflow 64 bits",
                       m->num_units, s->ranks);
        return ZERO_ERR_INVALID_ARG;
    }
    *out = o;
    return ZERO_OK;
}

void zero_plan_traffic_of(int stage, int ranks, uint64_t padded, zero_dtype precision,
                          zero_plan_traffic *out) {
    memset(out, 0, sizeof *out);
    if (ranks <= 1) return;
    const double w = (double)zero_dtype_size(precision);
    const zero__own_in in = {.stage = stage, .world = ranks, .half = precision != ZERO_DTYPE_FP32, .hpz = 1};
    zero__own_plan t;
    zero__own_plan_of(&in, &t);
    /* One all-reduce's worth (reduce-scatter + all-gather) of Ψ; parameters kept as shards
     * (stage 3) are gathered a second time, in backward. */
    const double passes = t.gather_collective ? 3.0 : 2.0;
    out->volume = passes * (double)padded * w;
    out->sent = out->volume * (double)(ranks - 1) / (double)ranks;
    out->counted = 2.0 * out->sent;
}

void zero_plan_traffic_frozen(int stage, int ranks, uint64_t padded, zero_dtype precision, uint64_t frozen_padded,
                              zero_dtype frozen_dtype, zero_plan_traffic *out) {
    zero_plan_traffic_of(stage, ranks, padded, precision, out);
    const zero__own_in in = {.stage = stage, .world = ranks, .half = precision != ZERO_DTYPE_FP32, .frozen = 1, .hpz = 1};
    zero__own_plan t;
    zero__own_plan_of(&in, &t);
    /* frozen parameters kept as shards are gathered with the others, in forward and backward */
    if (ranks <= 1 || t.k[EK_FROZEN].extent != EXT_SHARD) return;
    const double wf = (double)zero_dtype_size(frozen_dtype == ZERO_DTYPE_COUNT ? precision : frozen_dtype);
    out->volume += 2.0 * (double)frozen_padded * wf;
    out->sent = out->volume * (double)(ranks - 1) / (double)ranks;
    out->counted = 2.0 * out->sent;
}

void zero_plan_traffic_qwz(int stage, int ranks, uint64_t padded, zero_dtype precision, uint64_t frozen_padded,
                           zero_dtype frozen_dtype, int64_t quant_weights_block, int quant_base, zero_plan_traffic *t) {
    if (stage != 3 || ranks <= 1 || quant_weights_block <= 0) return;
    const double w = (double)zero_dtype_size(precision), q = 1.0 + 4.0 / (double)quant_weights_block;
    const double wf = (double)zero_dtype_size(frozen_dtype == ZERO_DTYPE_COUNT ? precision : frozen_dtype);
    t->volume -= 2.0 * (double)padded * (w - q);
    if (!quant_base) t->volume -= 2.0 * (double)frozen_padded * (wf - q);
    t->sent = t->volume * (double)(ranks - 1) / (double)ranks;
    t->counted = 2.0 * t->sent;
}

void zero_plan_traffic_qgz(int stage, int ranks, uint64_t padded, zero_dtype precision, int64_t quant_grads_block,
                           zero_plan_traffic *t) {
    if (stage < 2 || ranks <= 1 || quant_grads_block <= 0) return;
    const double w = (double)zero_dtype_size(precision), q = 1.0 + 4.0 / (double)quant_grads_block;
    t->volume -= (double)padded * (w - q);
    t->sent = t->volume * (double)(ranks - 1) / (double)ranks;
    t->counted = 2.0 * t->sent;
}

double zero_plan_traffic_per_step(int stage, int ranks, int grad_accum, const zero_plan_traffic *t, int *psi) {
    const zero__own_in in = {.stage = stage, .world = ranks > 1 ? ranks : 2, .half = 1, .hpz = 1};
    zero__own_plan p;
    zero__own_plan_of(&in, &p); /* the schedule of a world that communicates */
    if (psi) *psi = p.gather_collective ? 3 : 2;
    if (!t || ranks <= 1) return 0.0;
    const double K = grad_accum > 0 ? (double)grad_accum : 1.0;
    return t->counted * (p.gather_collective ? K : p.reduce_each_mb ? (K + 1) / 2 : 1.0);
}

double zero_plan_link_seconds(const zero_plan_traffic *t, double link_gbps) {
    if (!t || !(link_gbps > 0)) return 0.0;
    return t->sent * 8.0 / (link_gbps * 1e9);
}
