/* The engine's life cycle: create, register units and parameters, finalize (allocate each
 * stage's shards), set parameter values, query layout/accounting, free. */
#include "engine/internal.h"
#include "quant/internal.h"

#include "config/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

zero_status zero__eng_fail(zero_engine *e, zero_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->err, sizeof e->err, fmt, ap);
    va_end(ap);
    if (s == ZERO_ERR_COMM || s == ZERO_ERR_DIVERGED) e->broken = 1;
    zero__log(ZERO_LOG_DEBUG, "engine: %s", e->err);
    return s;
}

void zero_engine_options_default(zero_engine_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o); /* every switch off (sync_copies, test_skip_wait) */
    zero_io_options_default(&o->io);
    zero_device_options_default(&o->device);
}

zero_status zero_engine_create(zero_engine **out, zero_comm *comm, const zero_config *cfg) {
    zero_error err;
    zero_status s = zero_engine_create_with(out, comm, cfg, NULL, &err);
    if (s != ZERO_OK) zero__log(ZERO_LOG_ERROR, "engine: %s", err.msg);
    return s;
}

/* The checks of a config that create needs (zero_config_resolve makes them all, for a config
 * that skipped it), naming the field as the JSON spells it. */
static zero_status check_config(const zero_config *cfg, int world, zero_error *err) {
    zero__own_in in; /* the ownership plan's rules, worded with the JSON's field names */
    zero__own_in_config(&in, cfg, world);
    zero__own_plan plan;
    zero__own_plan_of(&in, &plan);
    if (plan.invalid & OWN_BAD_STAGE) {
        if (err) ZERO__ERR(err, "zero_optimization.stage %d: expected 0, 1, 2 or 3", cfg->stage);
        return ZERO_ERR_CONFIG;
    }
    if (cfg->precision != ZERO_DTYPE_FP32 && cfg->precision != ZERO_DTYPE_BF16 && cfg->precision != ZERO_DTYPE_FP16) {
        if (err) ZERO__ERR(err, "precision %d (bf16.enabled / fp16.enabled): expected fp32, bf16 or fp16", (int)cfg->precision);
        return ZERO_ERR_CONFIG;
    }
    const zero_dtype fd = cfg->frozen_dtype;
    if (fd != ZERO_DTYPE_COUNT && fd != ZERO_DTYPE_FP32 && fd != ZERO_DTYPE_BF16 && fd != ZERO_DTYPE_FP16) {
        if (err) ZERO__ERR(err, "zero_extensions.frozen_dtype %d: expected fp32, bf16, fp16 or auto", (int)fd);
        return ZERO_ERR_CONFIG;
    }
    if (zero_config_base_format(cfg) != ZERO_QFMT_NONE && cfg->save_frozen) {
        if (err) ZERO__ERR(err, "zero_extensions.save_frozen with zero_extensions.quantize_base \"%s\" is not supported "
                                "yet (a quantized base is read from the model again)",
                           zero_qformat_name((zero_qformat)cfg->quant_base));
        return ZERO_ERR_UNSUPPORTED;
    }
    zero_status ss = zero__config_check_states(cfg, err ? err->msg : NULL, err ? sizeof err->msg : 0);
    if (ss != ZERO_OK) return ss;
    const zero_offload_config *oo = &cfg->offload_optimizer, *op = &cfg->offload_param;
    const char *bad = NULL, *why = "";
    /* "cpu" is a no-op on a host rank: the engine words the plan's stage rules for nvme */
    if ((plan.invalid & OWN_OPTIM_OFFLOAD_STAGE) && oo->device == ZERO_OFFLOAD_NVME)
        bad = "offload_optimizer.device", why = "nvme needs stage 1, 2 or 3";
    else if (oo->device == ZERO_OFFLOAD_NVME && !oo->nvme_path[0]) bad = "offload_optimizer.nvme_path", why = "empty: expected a directory";
    else if ((plan.invalid & OWN_PARAM_OFFLOAD_STAGE) && op->device == ZERO_OFFLOAD_NVME)
        bad = "offload_param.device", why = "nvme needs stage 3";
    else if (op->device == ZERO_OFFLOAD_NVME && !op->nvme_path[0]) bad = "offload_param.nvme_path", why = "empty: expected a directory";
    if (bad) {
        if (err) ZERO__ERR(err, "zero_optimization.%s: %s (stage is %d)", bad, why, cfg->stage);
        return ZERO_ERR_CONFIG;
    }
    /* ZeRO++'s quantized communication, set directly by a program (the loader checks the keys) */
    if (cfg->quant_weights && (cfg->stage != 3 || cfg->quant_weights_block < 1)) {
        if (err) ZERO__ERR(err, "zero_optimization.zero_quantized_weights: needs stage 3 and a block >= 1 (stage is %d, "
                           "zero_extensions.quantized_weights_block %lld)", cfg->stage, (long long)cfg->quant_weights_block);
        return ZERO_ERR_CONFIG;
    }
    if (cfg->quant_grads && (cfg->stage < 2 || cfg->deterministic || cfg->quant_grads_block < 1)) {
        if (err) ZERO__ERR(err, "zero_optimization.zero_quantized_gradients: needs stage 2 or 3, no deterministic mode and "
                           "a block >= 1 (stage is %d, deterministic %d, zero_extensions.quantized_gradients_block %lld)",
                           cfg->stage, cfg->deterministic, (long long)cfg->quant_grads_block);
        return ZERO_ERR_CONFIG;
    }
    if (cfg->check_divergence < ZERO_DIVERGENCE_OFF || cfg->check_divergence > ZERO_DIVERGENCE_COLLECTIVE) {
        if (err) ZERO__ERR(err, "zero_extensions.check_divergence %d: expected 0 (off), 1 (step) or 2 (collective)",
                           cfg->check_divergence);
        return ZERO_ERR_CONFIG;
    }
    return zero__config_check_hpz(cfg, world, err ? err->msg : NULL, err ? sizeof err->msg : 0);
}

/* Copies a string option into the engine ("" and *set = 0 for NULL); -1 when too long. */
static int copy_opt(char *dst, size_t cap, const char *v, int *set) {
    *set = v != NULL;
    dst[0] = 0;
    if (!v) return 0;
    if (strlen(v) >= cap) return -1;
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

zero_status zero_engine_create_with(zero_engine **out, zero_comm *comm, const zero_config *cfg,
                                    const zero_engine_options *opts, zero_error *err) {
    if (!out) {
        if (err) ZERO__ERR(err, "engine_create: out is NULL: expected a pointer to receive the engine");
        return ZERO_ERR_INVALID_ARG;
    }
    *out = NULL;
    if (!comm || !cfg) {
        if (err) ZERO__ERR(err, "engine_create: %s is NULL", comm ? "the config" : "the communicator");
        return ZERO_ERR_INVALID_ARG;
    }
    zero_status cs = check_config(cfg, zero_comm_size(comm), err);
    if (cs != ZERO_OK) return cs;
    zero_engine_options dflt;
    zero_engine_options_default(&dflt);
    if (!opts) opts = &dflt;
    zero_engine *e = calloc(1, sizeof *e);
    if (!e) {
        if (err) ZERO__ERR(err, "engine_create: out of memory");
        return ZERO_ERR_NOMEM;
    }
    if (copy_opt(e->opt_job, sizeof e->opt_job, opts->job_id, &e->opt_job_set) ||
        copy_opt(e->opt_io_backend, sizeof e->opt_io_backend, opts->io.backend, &e->opt_io_backend_set) ||
        copy_opt(e->opt_io_fault, sizeof e->opt_io_fault, opts->io.fault, &e->opt_io_fault_set)) {
        free(e);
        if (err) ZERO__ERR(err, "zero_engine_options: a string is longer than the engine keeps (job_id < 64, io.backend < 32, io.fault < 512 bytes)");
        return ZERO_ERR_INVALID_ARG;
    }
    e->opt_io_depth = opts->io.queue_depth;
    e->sync_copies = opts->sync_copies != 0;
    e->test_skip_wait = opts->test_skip_wait != 0;
    zero_status ds = zero__dev_open(e, &opts->device, err);
    if (ds != ZERO_OK) {
        free(e);
        return ds;
    }
    e->user_comm = comm;
    e->cfg = *cfg;
    e->rank = zero_comm_rank(comm);
    e->world = zero_comm_size(comm);
    e->wdt = cfg->precision;
    e->wsize = zero_dtype_size(e->wdt);
    e->fdt = cfg->frozen_dtype == ZERO_DTYPE_COUNT ? e->wdt : cfg->frozen_dtype;
    e->fsize = zero_dtype_size(e->fdt);
    e->qfmt = (zero_qformat)zero_config_base_format(cfg);
    e->qstage_param = -1;
    int64_t ab = cfg->align_bytes > 0 ? cfg->align_bytes : 64;
    e->align = (uint64_t)(ab / 4 > 0 ? ab / 4 : 1);
    /* 8-bit states: every shard starts on a block of 256, so the blocks are the unit's whatever the
     * world size (checkpoints reshard by blocks) */
    if (cfg->optim_states == ZERO_OPTIM_STATES_INT8 && e->align < ZERO_QUANT_Q8_BLOCK) e->align = ZERO_QUANT_Q8_BLOCK;
    e->nstates = zero_optim_state_count(cfg->optim.type, cfg->optim.momentum);
    if (e->cfg.grad_accum < 1) e->cfg.grad_accum = 1;
    if (cfg->precision == ZERO_DTYPE_FP16)
        zero_loss_scaler_init(&e->scaler, cfg->loss_scale, cfg->initial_scale_power, cfg->loss_scale_window,
                              cfg->hysteresis, cfg->min_loss_scale, cfg->consecutive_hysteresis);
    else
        zero_loss_scaler_init_none(&e->scaler);
    zero_status s = zero_comm_split(comm, 0, e->rank, &e->data);
    if (s == ZERO_OK) s = zero_comm_split(comm, 0, e->rank, &e->ctrl);
    /* hpZ: the group of hpz consecutive ranks (a node, when ranks are placed node by node) */
    const int hpz = zero__own_hpz(cfg, e->world);
    if (s == ZERO_OK && hpz) s = zero_comm_split(comm, e->rank / hpz, e->rank, &e->sec);
    if (s != ZERO_OK) {
        if (err) ZERO__ERR(err, "engine_create: %s the communicator failed: %s", hpz ? "splitting" : "duplicating",
                           zero_comm_last_error(comm));
        zero_comm_free(e->data);
        zero_comm_free(e->ctrl);
        free(e);
        return s;
    }
    e->ctrl_all = calloc((size_t)e->world, sizeof(ctrl_rec));
    if (!e->ctrl_all) {
        zero_engine_free(e);
        if (err) ZERO__ERR(err, "engine_create: out of memory");
        return ZERO_ERR_NOMEM;
    }
    e->recording = 1;
    *out = e;
    return ZERO_OK;
}

static void free_unit_transients(zero_engine *e, eunit *u) {
    if (u->prefetch) zero_request_wait(u->prefetch);
    if (u->fprefetch) zero_request_wait(u->fprefetch);
    if (u->reduce) zero_request_wait(u->reduce);
    u->prefetch = u->fprefetch = u->reduce = NULL;
    zero__dbuf_put(e, u->gathered);
    zero__dbuf_put(e, u->fgathered);
    u->fgathered = NULL;
    zero__buf_put(e, u->view);
    zero__buf_put(e, u->hpart);
    zero__buf_put(e, u->hfpart);
    u->hpart = u->hfpart = NULL;
    zero__buf_put(e, u->gscratch);
    zero__dbuf_put(e, u->gsend);
    zero__dbuf_put(e, u->grecv);
    zero__buf_put(e, u->dacc);
    zero__buf_put(e, u->dseen);
    zero__buf_put(e, u->dmass);
    u->dseen = NULL;
    u->dmass = NULL;
    u->gathered = u->gsend = u->grecv = u->dacc = NULL;
    u->view = u->gscratch = NULL;
}

void zero_engine_free(zero_engine *e) {
    if (!e) return;
    /* collectives first (a prefetch may be sending from an offload buffer), then the offload's
     * own transfers and files, then the memory */
    for (int i = 0; i < e->nunits; i++) free_unit_transients(e, &e->units[i]);
    zero__buf_free(e);
    zero__off_free(e);
    for (int i = 0; i < e->nunits; i++) {
        eunit *u = &e->units[i];
        zero__eng_release(e, u->params);
        zero__eng_release(e, u->grads);
        zero__eng_release(e, u->dgrid);
        zero__eng_release(e, u->master);
        zero__eng_release(e, u->s0);
        zero__eng_release(e, u->s1);
        zero__eng_release(e, u->q8.m);
        zero__eng_release(e, u->q8.v);
        zero__eng_release(e, u->q8.m_absmax);
        zero__eng_release(e, u->q8.v_absmax);
        zero__eng_release(e, u->fparams);
        zero__eng_release(e, u->sec);
        zero__own_free(u);
        free(u->name);
    }
    for (int i = 0; i < e->nparams; i++) free(e->params[i].name);
    free(e->qrec);
    free(e->qam);
    free(e->units);
    free(e->params);
    free(e->order);
    free(e->inflight);
    free(e->ctrl_all);
    zero_comm_free(e->data);
    zero_comm_free(e->ctrl);
    zero_comm_free(e->sec);
    zero__dev_close(e);
    free(e);
}

const char *zero_engine_last_error(const zero_engine *e) { return e ? e->err : "no engine"; }

int zero_engine_add_unit(zero_engine *e, const char *name) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "add_unit '%s': the engine is already finalized", name ? name : "");
    if (!name || !*name) return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "add_unit: expected a non-empty unit name");
    for (int i = 0; i < e->nunits; i++)
        if (!strcmp(e->units[i].name, name))
            return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "add_unit '%s': a unit of that name exists", name);
    if (e->nunits == e->cap_units) {
        int cap = e->cap_units ? 2 * e->cap_units : 16;
        eunit *u = realloc(e->units, (size_t)cap * sizeof *u);
        if (!u) return zero__eng_fail(e, ZERO_ERR_NOMEM, "add_unit: out of memory");
        e->units = u;
        e->cap_units = cap;
    }
    eunit *u = &e->units[e->nunits];
    memset(u, 0, sizeof *u);
    u->name = strdup(name);
    if (!u->name) return zero__eng_fail(e, ZERO_ERR_NOMEM, "add_unit: out of memory");
    u->first_param = e->nparams;
    u->ready_mb = -1;
    return e->nunits++;
}

zero_status zero_engine_add_param(zero_engine *e, int unit, const char *name, const int64_t *shape, int ndim,
                                  unsigned flags) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "add_param '%s': the engine is already finalized", name ? name : "");
    if (unit < 0 || unit >= e->nunits)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "add_param: unit %d: expected 0..%d", unit, e->nunits - 1);
    if (unit != e->nunits - 1)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG,
                              "add_param '%s': unit %d is closed; parameters go to the last added unit (%d)",
                              name ? name : "", unit, e->nunits - 1);
    if (!name || !*name) return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "add_param: expected a non-empty name");
    if (ndim < 1 || ndim > 8 || !shape)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "add_param '%s': ndim %d: expected 1..8", name, ndim);
    if (flags & ~(unsigned)(ZERO_PARAM_NO_DECAY | ZERO_PARAM_FROZEN | ZERO_PARAM_QUANTIZE))
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG,
                              "add_param '%s': flags 0x%x: expected ZERO_PARAM_NO_DECAY, ZERO_PARAM_FROZEN, "
                              "ZERO_PARAM_QUANTIZE or 0", name, flags);
    if ((flags & ZERO_PARAM_QUANTIZE) && !(flags & ZERO_PARAM_FROZEN))
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG,
                              "add_param '%s': ZERO_PARAM_QUANTIZE without ZERO_PARAM_FROZEN: a quantized base is not "
                              "trained (mark it frozen, and train adapters beside it)", name);
    if (zero_engine_find_param(e, name) >= 0)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "add_param '%s': a parameter of that name exists", name);
    uint64_t numel = 1;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] < 1 || (uint64_t)shape[d] > (UINT64_MAX >> 8) / numel)
            return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "add_param '%s': dimension %d is %lld: expected >= 1",
                                  name, d, (long long)shape[d]);
        numel *= (uint64_t)shape[d];
    }
    if (e->nparams == e->cap_params) {
        int cap = e->cap_params ? 2 * e->cap_params : 64;
        eparam *p = realloc(e->params, (size_t)cap * sizeof *p);
        if (!p) return zero__eng_fail(e, ZERO_ERR_NOMEM, "add_param: out of memory");
        e->params = p;
        e->cap_params = cap;
    }
    eunit *u = &e->units[unit];
    eparam *p = &e->params[e->nparams];
    memset(p, 0, sizeof *p);
    p->name = strdup(name);
    if (!p->name) return zero__eng_fail(e, ZERO_ERR_NOMEM, "add_param: out of memory");
    p->unit = unit;
    p->offset = u->vnumel;
    p->numel = numel;
    p->ndim = ndim;
    memcpy(p->shape, shape, (size_t)ndim * sizeof *shape);
    p->flags = flags;
    /* its place in its part: the trainable parameters back to back, the frozen ones likewise (a
     * quantized one as its record, on the record alignment: zero_quant_place) */
    p->qfmt = (flags & ZERO_PARAM_QUANTIZE) ? e->qfmt : ZERO_QFMT_NONE;
    if (flags & ZERO_PARAM_FROZEN) {
        const uint64_t end = zero_quant_place(p->qfmt, numel, e->fsize, u->fnumel, &p->soff);
        p->slots = end - p->soff;
        u->fnumel = end;
        e->nfrozen += numel;
        e->nquant += zero__quantized(p);
        u->nquant += zero__quantized(p);
    } else {
        p->soff = u->numel;
        p->slots = numel;
        u->numel += numel;
    }
    u->vnumel += numel;
    u->nparams++;
    e->nparams++;
    return ZERO_OK;
}

/* The device bytes of the states the table puts on the device, every array rounded up to the
 * device's blocks (the device's own figure when all of them fit). */
static uint64_t device_need(const zero_engine *e) {
    const etable *t = &e->own;
    uint64_t need = 0;
    for (int i = 0; i < e->nunits; i++) {
        const eunit *u = &e->units[i];
        const uint64_t n[EK_COUNT] = {zero__own_elems(e, u, EK_PARAMS) * e->wsize, zero__own_elems(e, u, EK_GRADS) * e->wsize,
                                      zero__own_elems(e, u, EK_MASTER) * 4, zero__own_elems(e, u, EK_OPTIM) * 4 * (uint64_t)e->nstates,
                                      zero__own_elems(e, u, EK_FROZEN) * e->fsize};
        for (int k = 0; k < EK_COUNT; k++) {
            if (t->k[k].tier != TIER_DEVICE || !n[k]) continue;
            const uint64_t arrays = k == EK_OPTIM ? (uint64_t)e->nstates : 1, each = n[k] / arrays;
            need += arrays * ((each + ZERO_DEVICE_ALIGN - 1) / ZERO_DEVICE_ALIGN * ZERO_DEVICE_ALIGN);
        }
    }
    return need;
}

zero_status zero_engine_finalize(zero_engine *e) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "finalize: called twice");
    if (e->nunits == 0) return zero__eng_fail(e, ZERO_ERR_STATE, "finalize: no units registered");
    if (e->cfg.deterministic && e->nfrozen) /* determ.c sums the trainable part only as yet */
        return zero__eng_fail(e, ZERO_ERR_UNSUPPORTED,
                              "finalize: zero_extensions.deterministic with frozen parameters is not supported yet");
    for (int i = 0; i < e->nunits; i++) {
        eunit *u = &e->units[i];
        if (u->vnumel == 0) return zero__eng_fail(e, ZERO_ERR_STATE, "finalize: unit '%s' has no parameters", u->name);
        /* each part partitioned on its own (an empty part: 0 everywhere) */
        zero_shard sh, fsh;
        if (zero_partition_shard(u->numel, e->world, e->rank, e->align, &sh) != 0 ||
            zero_partition_shard(u->fnumel, e->world, e->rank, e->align, &fsh) != 0)
            return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "finalize: unit '%s' of %llu elements cannot be partitioned",
                                  u->name, (unsigned long long)u->vnumel);
        u->padded = sh.padded;
        u->shard = sh.size;
        u->offset = sh.offset;
        u->valid = sh.valid;
        u->fpadded = fsh.padded;
        u->fshard = fsh.size;
        u->foffset = fsh.offset;
        u->fvalid = fsh.valid;
    }
    /* the table says what each rank keeps and where; NVMe offload sets up what lives there
     * (collective when it is on). With the frozen parameters known, the plan's frozen rules. */
    zero__own_table(e);
    if (e->own.invalid & OWN_HPZ_FROZEN) /* the secondary shard covers the trainable part only */
        return zero__eng_fail(e, ZERO_ERR_UNSUPPORTED, "finalize: zero_optimization.zero_hpz_partition_size %d with "
                              "ZERO_PARAM_FROZEN parameters is not supported yet",
                              e->cfg.hpz_partition_size);
    zero_status s = zero__off_setup(e);
    if (s != ZERO_OK) return s;
    const etable *t = &e->own;
    int fail = 0;
    const char *fail_unit = NULL; /* the unit whose array did not fit the device */
    for (int i = 0; i < e->nunits && !fail; i++) {
        eunit *u = &e->units[i];
        /* each array in its tier's memory (NVMe: the swap files of offload.c) */
        const int pt = t->k[EK_PARAMS].tier, gt = t->k[EK_GRADS].tier, mt = t->k[EK_MASTER].tier;
        const int ot = t->k[EK_OPTIM].tier, ft = t->k[EK_FROZEN].tier;
        if (pt != TIER_NVME) u->params = zero__eng_alloc(e, pt, ZERO_MEM_PARAMS, zero__own_elems(e, u, EK_PARAMS), e->wsize, &fail);
        u->grads = zero__eng_alloc(e, gt, ZERO_MEM_GRADS, zero__own_elems(e, u, EK_GRADS), e->wsize, &fail);
        if (e->cfg.deterministic && u->numel) { /* the grids of determ.c: none set yet */
            u->dgrid = zero__eng_alloc(e, TIER_RAM, ZERO_MEM_GRADS, zero__det_blocks(u->padded), 1, &fail);
            if (u->dgrid) zero__det_clear_grids(u);
        }
        if (mt != TIER_NVME) u->master = zero__eng_alloc(e, mt, ZERO_MEM_MASTER, zero__own_elems(e, u, EK_MASTER), 4, &fail);
        u->q8on = e->cfg.optim_states == ZERO_OPTIM_STATES_INT8 && u->numel &&
                  u->numel >= (uint64_t)e->cfg.optim_states_min;
        if (ot != TIER_NVME && u->q8on) { /* all-zero bytes: the value 0 (docs/QUANT.md) */
            const uint64_t n = zero__own_elems(e, u, EK_OPTIM), nb = zero_quant_blocks(n, ZERO_QUANT_Q8_BLOCK);
            u->q8.m = zero__eng_alloc(e, ot, ZERO_MEM_OPTIM, n, 1, &fail);
            u->q8.v = zero__eng_alloc(e, ot, ZERO_MEM_OPTIM, n, 1, &fail);
            u->q8.m_absmax = zero__eng_alloc(e, ot, ZERO_MEM_OPTIM, nb, 4, &fail);
            u->q8.v_absmax = zero__eng_alloc(e, ot, ZERO_MEM_OPTIM, nb, 4, &fail);
        } else if (ot != TIER_NVME) {
            const uint64_t n = zero__own_elems(e, u, EK_OPTIM);
            if (e->nstates >= 1) u->s0 = zero__eng_alloc(e, ot, ZERO_MEM_OPTIM, n, 4, &fail);
            if (e->nstates >= 2) u->s1 = zero__eng_alloc(e, ot, ZERO_MEM_OPTIM, n, 4, &fail);
        }
        /* frozen parameters are parameters: charged to ZERO_MEM_PARAMS, in the frozen dtype */
        if (ft != TIER_NVME) u->fparams = zero__eng_alloc(e, ft, ZERO_MEM_PARAMS, zero__own_elems(e, u, EK_FROZEN), e->fsize, &fail);
        /* hpZ: the secondary shard, accounted as parameters; stale until the first gather over the
         * world or a write of the whole unit (so that a model loads by parts, set_unit_range) */
        u->sec = zero__eng_alloc(e, pt, ZERO_MEM_PARAMS, zero__own_sec_elems(e, u), e->wsize, &fail);
        u->sec_valid = 0;
        if (!fail && zero__own_views(e, u) != 0) fail = 1;
        if (fail && e->alloc_err[0] && !fail_unit) fail_unit = u->name;
    }
    e->inflight = calloc((size_t)e->nunits, sizeof(int));
    if (fail || !e->inflight) {
        zero__off_free(e);
        if (e->alloc_err[0]) /* the device's own line (the bytes asked, in use, its capacity) and the whole need */
            return zero__eng_fail(e, ZERO_ERR_NOMEM,
                                  "finalize: stage %d: unit '%s': %s; the states need %llu bytes of device memory per "
                                  "rank at this stage (`zero plan --gpus N --gpu-memory SIZE` finds a stage or offload "
                                  "that fits)",
                                  e->cfg.stage, fail_unit ? fail_unit : "?", e->alloc_err,
                                  (unsigned long long)device_need(e));
        return zero__eng_fail(e, ZERO_ERR_NOMEM, "finalize: out of memory allocating the shards (stage %d)", e->cfg.stage);
    }
    e->finalized = 1;
    return ZERO_OK;
}

/* set_range's offloaded part: the covered elements of a tile, converted where they live. */
typedef struct set_ctx {
    uint64_t lo; /* unit element of values[0] */
    const float *values;
} set_ctx;

static zero_status set_tile(zero_engine *e, etile *x, void *ctx) {
    const set_ctx *c = ctx;
    const eunit *u = x->u;
    const uint64_t a = x->lo - x->first, n = x->hi - x->lo; /* inside the tile */
    const float *v = c->values + (u->offset + x->lo - c->lo);
    if (e->own.k[EK_MASTER].tier == TIER_NVME) memcpy(x->master + a, v, (size_t)n * 4);
    if (x->work && e->own.k[EK_PARAMS].tier == TIER_NVME)
        zero_convert(v, ZERO_DTYPE_FP32, zero__wptr(e, x->work, a), e->wdt, n, ZERO_IMPL_AUTO);
    return ZERO_OK;
}

/* Copies values[lo, hi) of the trainable part (fp32, its coordinates) into this rank's persistent
 * copies, as the views say; `every` says that every rank passes them (set_unit, set_param), not
 * only the ones it owns (set_unit_range). */
static zero_status set_trainable(zero_engine *e, eunit *u, uint64_t lo, uint64_t hi, const float *values, int every) {
    zero_status s;
    const int whole = lo == 0 && hi >= u->numel;
    const eview *v = &u->v;
    const etable *t = &e->own;
    /* the working parameters this rank keeps (whole or its slice), when in RAM */
    uint64_t a = lo > v->wlo ? lo : v->wlo, b = hi < v->whi ? hi : v->whi;
    if (a < b && v->wp && (s = zero__x_store(e, zero__wptr(e, v->wp, a - v->wlo), e->wdt, values + (a - lo), b - a)) != ZERO_OK)
        return s;
    /* hpZ: the secondary shard takes the same values; a write of the whole unit that every rank
     * makes gives each all of them (no communication), so the shard is current after it on every
     * rank alike (set_unit_range may reach one rank only: a rank owning all of a small unit) */
    if (u->sec) {
        const uint64_t slo = zero__own_sec_offset(e, u), shi0 = slo + zero__own_sec_elems(e, u);
        const uint64_t shi = shi0 < u->numel ? shi0 : u->numel;
        a = lo > slo ? lo : slo;
        b = hi < shi ? hi : shi;
        if (a < b && (s = zero__x_store(e, zero__wptr(e, u->sec, a - slo), e->wdt, values + (a - lo), b - a)) != ZERO_OK)
            return s;
        if (whole && every) u->sec_valid = 1;
    }
    /* a master of its own (half precision), over the update range */
    a = lo > v->lo ? lo : v->lo;
    b = hi < v->hi ? hi : v->hi;
    if (a < b && !t->master_in_params && v->master &&
        (s = zero__x_store(e, v->master + (a - v->lo), ZERO_DTYPE_FP32, values + (a - lo), b - a)) != ZERO_OK)
        return s;
    const int half = zero__work_apart(e);
    unsigned arrays = (t->k[EK_MASTER].tier == TIER_NVME ? ARR_MASTER : 0u) |
                      (half && t->k[EK_PARAMS].tier == TIER_NVME ? ARR_WORK : 0u);
    if (!arrays || a >= b) return ZERO_OK;
    set_ctx c = {lo, values};
    const int ui = (int)(u - e->units);
    eopass p = {ui, ui + 1, a - u->offset, b - u->offset, 0, arrays, set_tile, &c};
    s = zero__off_run(e, &p);
    return s;
}

/* Where this rank's frozen copy of u starts: its array, or on NVMe the unit's frozen shard held in
 * host memory for the write (zero__foff_region); NULL when it keeps none, or on a failure (*s). */
static void *frozen_dst(zero_engine *e, eunit *u, zero_status *s) {
    *s = ZERO_OK;
    if (u->v.fp || e->own.k[EK_FROZEN].tier != TIER_NVME || !u->fshard) return u->v.fp;
    void *r;
    *s = zero__foff_region(e, u, &r);
    return r;
}

/* values[lo, hi) of the frozen part into this rank's frozen copy (whole, or its slice). */
static zero_status set_frozen(zero_engine *e, eunit *u, uint64_t lo, uint64_t hi, const float *values) {
    const eview *v = &u->v;
    const uint64_t a = lo > v->flo ? lo : v->flo, b = hi < v->fhi ? hi : v->fhi;
    if (a >= b) return ZERO_OK;
    zero_status s;
    char *fp = frozen_dst(e, u, &s);
    if (fp) return zero__x_store(e, fp + (a - v->flo) * e->fsize, e->fdt, values + (a - lo), b - a);
    return s;
}

/* The part of quantized parameter p's record `rec` that this rank keeps, into its frozen copy. */
static zero_status keep_record(zero_engine *e, eunit *u, const eparam *p, const void *rec) {
    const eview *v = &u->v;
    const uint64_t a = p->soff > v->flo ? p->soff : v->flo, end = p->soff + p->slots, b = end < v->fhi ? end : v->fhi;
    zero_status s = ZERO_OK;
    if (a < b) {
        char *fp = frozen_dst(e, u, &s);
        if (fp)
            s = zero__x_copy(e, fp + (a - v->flo) * e->fsize, (const char *)rec + (a - p->soff) * e->fsize,
                             (size_t)((b - a) * e->fsize));
    }
    return s;
}

/* A quantized parameter's record: the tensor's n values coded whole (zero_quant_record_encode),
 * and the part of the record this rank keeps copied into its frozen copy. */
static zero_status put_record(zero_engine *e, eunit *u, const eparam *p, const float *x) {
    const size_t bytes = (size_t)(p->slots * e->fsize);
    void *rec = zero__buf_get(e, bytes, 0);
    if (!rec) return zero__eng_fail(e, ZERO_ERR_NOMEM, "set '%s': out of memory for its %s record (%zu bytes)", p->name,
                                    zero_qformat_name(p->qfmt), bytes);
    zero_status s = zero_quant_record_encode(p->qfmt, x, p->numel, rec);
    if (s != ZERO_OK) s = zero__eng_fail(e, s, "set '%s': coding it as %s: %s", p->name, zero_qformat_name(p->qfmt),
                                         zero_status_string(s));
    else s = keep_record(e, u, p, rec);
    zero__buf_put(e, rec);
    return s;
}

/* 1 when this rank keeps any of a frozen parameter's elements of its part (its record). */
static int keeps_frozen(const eunit *u, const eparam *p) {
    return p->soff < u->v.fhi && p->soff + p->slots > u->v.flo;
}

static void qstage_drop(zero_engine *e) {
    free(e->qrec);
    free(e->qam);
    e->qrec = NULL;
    e->qam = NULL;
    e->qtail_n = 0;
    e->qstage_param = -1;
}

/* Codes n values of the staged parameter p from its element `at` (a block's first). */
static zero_status qstage_code(zero_engine *e, const eparam *p, uint64_t at, const float *x, uint64_t n) {
    zero_status s = zero__quant_record_code(p->qfmt, p->numel, x, at / ZERO_QUANT_NF4_BLOCK, n, e->qrec, e->qam);
    return s == ZERO_OK ? ZERO_OK
                        : zero__eng_fail(e, s, "set '%s': coding it as %s: %s", p->name, zero_qformat_name(p->qfmt),
                                         zero_status_string(s));
}

/* values of a quantized parameter's elements [lo, hi) (its own coordinates). It is coded as one
 * tensor: set whole, or in pieces from its first element in order, each coded as it comes (its
 * whole blocks; a block's values that are not all in yet wait for the next piece), so that no
 * rank holds the tensor in fp32: the record (the format's bytes, about a quarter or an eighth of
 * fp32's) and its first-level scales are what is held until the last piece. A rank that keeps
 * none of its record skips it. */
static zero_status set_quantized(zero_engine *e, eunit *u, int pi, uint64_t lo, uint64_t hi, const float *values) {
    const eparam *p = &e->params[pi];
    if (!keeps_frozen(u, p)) return ZERO_OK;
    if (lo == 0 && hi == p->numel && e->qstage_param < 0) return put_record(e, u, p, values);
    if (e->qstage_param >= 0 && e->qstage_param != pi)
        return zero__eng_fail(e, ZERO_ERR_STATE, "set '%s': the quantized parameter '%s' was set up to element %llu of "
                              "%llu: a quantized parameter is coded whole, set it to its end first", p->name,
                              e->params[e->qstage_param].name, (unsigned long long)e->qfill,
                              (unsigned long long)e->params[e->qstage_param].numel);
    const uint64_t at = e->qstage_param == pi ? e->qfill : 0;
    if (lo != at)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "set '%s': elements [%llu, %llu) of a quantized parameter: expected "
                              "the next ones from element %llu (it is coded whole: set it whole, or in order)", p->name,
                              (unsigned long long)lo, (unsigned long long)hi, (unsigned long long)at);
    const uint64_t B = ZERO_QUANT_NF4_BLOCK;
    if (e->qstage_param < 0) {
        const uint64_t nb = zero_quant_blocks(p->numel, B);
        e->qrec = calloc(1, (size_t)(p->slots * e->fsize));
        e->qam = p->qfmt == ZERO_QFMT_NF4_DQ ? malloc((size_t)nb * sizeof(float)) : NULL;
        if (!e->qrec || (p->qfmt == ZERO_QFMT_NF4_DQ && !e->qam)) {
            qstage_drop(e);
            return zero__eng_fail(e, ZERO_ERR_NOMEM, "set '%s': out of memory for its %s record", p->name,
                                  zero_qformat_name(p->qfmt));
        }
        e->qstage_param = pi;
        e->qfill = 0;
        e->qtail_n = 0;
    }
    zero_status s = ZERO_OK;
    uint64_t k = 0, n = hi - lo;
    if (e->qtail_n) { /* a block begun by the last piece: completed from this one */
        const uint64_t take = B - e->qtail_n < n ? B - e->qtail_n : n;
        memcpy(e->qtail + e->qtail_n, values, (size_t)take * sizeof(float));
        e->qtail_n += take;
        k = take;
        const uint64_t start = lo - (e->qtail_n - take);
        if (e->qtail_n == B || start + e->qtail_n == p->numel) {
            s = qstage_code(e, p, start, e->qtail, e->qtail_n);
            e->qtail_n = 0;
        }
    }
    /* the piece's whole blocks (and the tensor's last, partial one) at once; the rest waits */
    const uint64_t from = lo + k, whole = hi == p->numel ? n - k : (n - k) / B * B;
    if (s == ZERO_OK && whole) s = qstage_code(e, p, from, values + k, whole);
    if (s == ZERO_OK && k + whole < n) {
        memcpy(e->qtail, values + k + whole, (size_t)(n - k - whole) * sizeof(float));
        e->qtail_n = n - k - whole;
    }
    e->qfill = hi;
    if (s != ZERO_OK || hi < p->numel) {
        if (s != ZERO_OK) qstage_drop(e);
        return s;
    }
    zero__quant_record_finish(p->qfmt, p->numel, e->qam, e->qrec);
    s = keep_record(e, u, p, e->qrec);
    qstage_drop(e);
    return s;
}

/* Copies values[lo, hi) of a unit's view (fp32) into its parts, parameter by parameter where the
 * unit has frozen ones (the view is then not the trainable part); `every`: as set_trainable.
 * Stage-3 prefetches are finished and dropped first: one in flight reads the shards being
 * written, and one held would hand the next gather the old values (under parameter offload, so is
 * the read-ahead). */
static zero_status set_range(zero_engine *e, eunit *u, uint64_t lo, uint64_t hi, const float *values, int every) {
    zero_status s = zero__gather_drain(e);
    if (s != ZERO_OK) return s;
    /* hpZ: a current secondary shard holds other ranks' elements, which a write of part of the
     * unit (set_unit_range is not collective) cannot reach; and whether it is current must stay
     * the same on every rank (it picks the communicator of the next gather). hpZ and frozen
     * parameters are exclusive (finalize), so the view is the trainable part here. */
    if (u->sec && u->sec_valid && !(lo == 0 && hi >= u->numel))
        return zero__eng_fail(e, ZERO_ERR_UNSUPPORTED, "writing [%llu, %llu) of unit '%s' (part of it) between "
                              "its gather and the next step under zero_optimization.zero_hpz_partition_size "
                              "%d is not supported yet (write the whole unit, or before its first gather or after "
                              "the step)", (unsigned long long)lo, (unsigned long long)hi, u->name, e->own.hpz);
    if (u->fnumel == 0) return set_trainable(e, u, lo, hi, values, every);
    for (int pi = u->first_param; pi < u->first_param + u->nparams && s == ZERO_OK; pi++) {
        const eparam *p = &e->params[pi];
        const uint64_t a = p->offset > lo ? p->offset : lo;
        const uint64_t b = p->offset + p->numel < hi ? p->offset + p->numel : hi;
        if (a >= b) continue;
        const uint64_t sa = p->soff + (a - p->offset), sb = sa + (b - a);
        if (zero__quantized(p)) s = set_quantized(e, u, pi, a - p->offset, b - p->offset, values + (a - lo));
        else if (zero__frozen(p)) s = set_frozen(e, u, sa, sb, values + (a - lo));
        else s = set_trainable(e, u, sa, sb, values + (a - lo), every);
    }
    return s;
}

zero_status zero_engine_set_unit(zero_engine *e, int unit, const float *values) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "set_unit: finalize the engine first");
    if (unit < 0 || unit >= e->nunits || !values)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "set_unit: unit %d: expected 0..%d and values", unit, e->nunits - 1);
    eunit *u = &e->units[unit];
    if (u->gathers) return zero__eng_fail(e, ZERO_ERR_STATE, "set_unit '%s': the unit is gathered", u->name);
    return set_range(e, u, 0, u->vnumel, values, 1);
}

zero_status zero_engine_set_param(zero_engine *e, const char *name, const float *values) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "set_param: finalize the engine first");
    int i = zero_engine_find_param(e, name);
    if (i < 0 || !values) return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "set_param: no parameter named '%s'", name ? name : "");
    eparam *p = &e->params[i];
    eunit *u = &e->units[p->unit];
    if (u->gathers) return zero__eng_fail(e, ZERO_ERR_STATE, "set_param '%s': its unit is gathered", name);
    return set_range(e, u, p->offset, p->offset + p->numel, values, 1);
}

zero_status zero_engine_set_unit_range(zero_engine *e, int unit, uint64_t lo, uint64_t hi, const float *values) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "set_unit_range: finalize the engine first");
    if (unit < 0 || unit >= e->nunits || (!values && hi > lo))
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "set_unit_range: unit %d: expected 0..%d and values", unit,
                              e->nunits - 1);
    eunit *u = &e->units[unit];
    if (lo > hi || hi > u->vnumel)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "set_unit_range '%s': [%llu, %llu): expected a range inside "
                              "the unit's %llu elements", u->name, (unsigned long long)lo, (unsigned long long)hi,
                              (unsigned long long)u->vnumel);
    if (u->gathers) return zero__eng_fail(e, ZERO_ERR_STATE, "set_unit_range '%s': the unit is gathered", u->name);
    return lo == hi ? ZERO_OK : set_range(e, u, lo, hi, values, 0);
}

int zero_engine_num_units(const zero_engine *e) { return e ? e->nunits : 0; }
int zero_engine_num_params(const zero_engine *e) { return e ? e->nparams : 0; }

zero_status zero_engine_unit_info(const zero_engine *e, int unit, zero_unit_info *out) {
    if (!e || !out || unit < 0 || unit >= e->nunits) return ZERO_ERR_INVALID_ARG;
    const eunit *u = &e->units[unit];
    out->name = u->name;
    out->numel = u->vnumel;
    out->trainable = u->numel;
    out->padded = u->padded;
    out->shard = u->shard;
    out->offset = u->offset;
    out->valid = u->valid;
    out->frozen = u->fnumel;
    out->frozen_padded = u->fpadded;
    out->frozen_shard = u->fshard;
    out->frozen_offset = u->foffset;
    out->frozen_valid = u->fvalid;
    out->nparams = u->nparams;
    return ZERO_OK;
}

zero_status zero_engine_param_info(const zero_engine *e, int param, zero_param_info *out) {
    if (!e || !out || param < 0 || param >= e->nparams) return ZERO_ERR_INVALID_ARG;
    const eparam *p = &e->params[param];
    out->name = p->name;
    out->unit = p->unit;
    out->offset = p->offset;
    out->numel = p->numel;
    out->ndim = p->ndim;
    memcpy(out->shape, p->shape, sizeof out->shape);
    out->flags = p->flags;
    const eunit *u = &e->units[p->unit];
    const int frozen = zero__frozen(p);
    out->grad_offset = frozen ? UINT64_MAX : p->soff;
    out->frozen_offset = frozen ? p->soff : UINT64_MAX;
    out->format = p->qfmt;
    out->own_lo = 0;
    out->own_hi = p->numel;
    if (e->finalized && zero__quantized(p)) { /* coded whole: all of it where the rank keeps any of its record */
        out->own_hi = keeps_frozen(u, p) ? p->numel : 0;
    } else if (e->finalized && e->own.k[frozen ? EK_FROZEN : EK_PARAMS].extent == EXT_SHARD) {
        /* the parameter's part of this rank's slice of its part */
        const uint64_t slo = frozen ? u->foffset : u->offset, shi = slo + (frozen ? u->fvalid : u->valid);
        const uint64_t a = p->soff > slo ? p->soff : slo, b = p->soff + p->numel < shi ? p->soff + p->numel : shi;
        out->own_lo = a < b ? a - p->soff : 0;
        out->own_hi = a < b ? b - p->soff : 0;
    }
    return ZERO_OK;
}

int zero_engine_find_param(const zero_engine *e, const char *name) {
    if (!e || !name) return -1;
    for (int i = 0; i < e->nparams; i++)
        if (!strcmp(e->params[i].name, name)) return i;
    return -1;
}

void zero_engine_mem_stats(const zero_engine *e, zero_mem_stats *out) {
    if (e && out) *out = e->acct.stats;
}

void zero_engine_comm_counters(const zero_engine *e, zero_comm_counters *out) {
    if (!e || !out) return;
    zero_comm_get_counters(e->data, out);
    if (e->sec) { /* hpZ: the all-gathers inside the group count with the others */
        zero_comm_counters g;
        zero_comm_get_counters(e->sec, &g);
        for (int k = 0; k < ZERO_COLL_COUNT; k++) {
            out->bytes[k] += g.bytes[k];
            out->calls[k] += g.calls[k];
        }
        for (int p = 0; p < ZERO_COMM_PATH_COUNT; p++) out->path_bytes[p] += g.path_bytes[p];
    }
}

const zero_config *zero_engine_config(const zero_engine *e) { return e ? &e->cfg : NULL; }
const zero_loss_scaler *zero_engine_scaler(const zero_engine *e) { return e ? &e->scaler : NULL; }
int64_t zero_engine_step_count(const zero_engine *e) { return e ? e->step : 0; }
zero_comm *zero_engine_comm(const zero_engine *e) { return e ? e->user_comm : NULL; }
double zero_engine_loss_scale(const zero_engine *e) { return e ? e->scaler.scale : 1.0; }
