/* NVMe offload of the engine: the swap files (one per rank and kind), their layout in tiles, the
 * pools, and the tile passes through which the step, checkpoints, set_unit and read_unit reach
 * the offloaded arrays. docs/OFFLOAD.md has the design; offload_param.c the stage-3 read-ahead. */
#include "engine/internal.h"
#include "zero/trace.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ALIGN ((uint64_t)ZERO_IO_ALIGN)

static uint64_t round_up(uint64_t x) { return (x + ALIGN - 1) / ALIGN * ALIGN; }

/* Tiles of unit u: ceil(valid / T). */
static int64_t unit_tiles(const zero_engine *e, const eunit *u) {
    return (int64_t)((u->valid + e->off.T - 1) / e->off.T);
}

/* A state's slot in a tile record of n elements: fp32, or 8-bit — the n indices (rounded up to 8
 * bytes), then the absmax of its blocks (the tile starts on a block: T and every update range are
 * whole blocks) — rounded up to whole I/O blocks. */
static uint64_t q8_idx_bytes(uint64_t n) { return (n + 7) / 8 * 8; }
static uint64_t state_slot(const eunit *u, uint64_t n) {
    return u->q8on ? round_up(q8_idx_bytes(n) + 4 * zero_quant_blocks(n, ZERO_QUANT_Q8_BLOCK)) : round_up(n * 4);
}

/* The optimizer record of a tile of n elements of u: its slots in order (the master where it lives
 * there, then the states), each {array, byte offset in the record, bytes}; returns their count and
 * the record's bytes in *total. */
typedef struct oslot {
    unsigned arr;
    uint64_t off, len;
} oslot;
static int record_slots(const zero_engine *e, const eunit *u, uint64_t n, oslot *sl, uint64_t *total) {
    const eoffload *o = &e->off;
    int k = 0;
    uint64_t at = 0;
    if (o->master_loc == LOC_OPTIM) {
        sl[k++] = (oslot){ARR_MASTER, at, round_up(n * 4)};
        at += round_up(n * 4);
    }
    for (int i = 0; o->opt && i < e->nstates && i < 2; i++) {
        sl[k++] = (oslot){i == 0 ? ARR_S0 : ARR_S1, at, state_slot(u, n)};
        at += state_slot(u, n);
    }
    *total = at;
    return k;
}

static uint64_t record_bytes(const zero_engine *e, const eunit *u, uint64_t n) {
    oslot sl[3];
    uint64_t total;
    (void)record_slots(e, u, n, sl, &total);
    return total;
}

/* Bytes of the unit's tile records in the optimizer file. */
static uint64_t optim_region(const zero_engine *e, const eunit *u) {
    const eoffload *o = &e->off;
    if (!o->opt || u->valid == 0) return 0;
    const int64_t nt = unit_tiles(e, u);
    const uint64_t last = u->valid - (uint64_t)(nt - 1) * o->T;
    return (uint64_t)(nt - 1) * record_bytes(e, u, o->T) + record_bytes(e, u, last);
}

static uint64_t param_region(const zero_engine *e, const eunit *u) {
    return e->off.par ? zero__poff_region(e, u) : 0;
}

/* Removes what runs killed outright (kill -9, a crash, the OOM killer) left in dir: each swap file
 * there of this user and host whose lock no process holds (zero_swap_sweep). Every rank sweeps;
 * a file goes once, and the rank that removed it says so. */
static void sweep(const zero_engine *e, const char *dir) {
    zero_swap_swept w;
    if (zero_swap_sweep(dir, &w, NULL) != ZERO_OK || !w.removed) return;
    zero__log(ZERO_LOG_WARN,
              "offload: rank %d removed %d swap file%s (%.1f MB) that runs which were killed left in %s (%s%s)",
              e->rank, w.removed, w.removed == 1 ? "" : "s", (double)w.bytes / 1e6, dir, w.first,
              w.removed > 1 ? ", ..." : "");
}

static int valid_job(const char *s) {
    size_t n = strlen(s);
    if (n < 1 || n > 40) return 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
            return 0;
    }
    return 1;
}

/* The job id every rank names its files with: $ZERO_JOB_ID on rank 0, else rank 0's pid and
 * engine count, broadcast (so the files of one run share a name). */
static zero_status agree_job(zero_engine *e) {
    static int engines; /* engines set up by this process */
    char job[64] = {0};
    engines++;
    if (e->rank == 0) {
        const char *env = e->opt_job_set ? e->opt_job : getenv("ZERO_JOB_ID");
        if (env && *env) {
            if (!valid_job(env)) snprintf(job, sizeof job, "!");
            else snprintf(job, sizeof job, "%s", env);
        } else {
            snprintf(job, sizeof job, "%ld-%d", (long)getpid(), engines);
        }
    }
    zero_status s = zero_comm_broadcast(e->ctrl, job, sizeof job, ZERO_DTYPE_UINT8, 0);
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "finalize: agreeing on the offload job id failed: %s", zero_comm_last_error(e->ctrl));
    job[sizeof job - 1] = 0;
    if (!strcmp(job, "!"))
        return zero__eng_fail(e, ZERO_ERR_CONFIG, "%s (on rank 0): expected 1 to 40 of [A-Za-z0-9._-]",
                              e->opt_job_set ? "zero_engine_options.job_id" : "ZERO_JOB_ID");
    memcpy(e->off.job, job, sizeof job);
    return ZERO_OK;
}

/* A pool of n buffers of b bytes. On a device in its pinned memory, which the device copies to and
 * from directly (the planner counts the pools pinned: docs/DEVICE.md); else the pool's own. *raw:
 * the device block to release after the pool is freed (NULL: none). */
static zero_status pool_new(zero_engine *e, zero_offload_pool **pool, void **raw, int n, size_t b, zero_error *err) {
    *raw = NULL;
    const size_t need = zero_offload_pool_bytes_for(n, b);
    if (!e->dev || !need) return zero_offload_pool_create(pool, e->off.io, n, b, &e->acct, err);
    /* device blocks are ZERO_DEVICE_ALIGN-aligned; O_DIRECT buffers ZERO_IO_ALIGN-aligned */
    if (zero_device_alloc(e->dev, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, need + ZERO_IO_ALIGN - ZERO_DEVICE_ALIGN, raw) !=
        ZERO_OK) {
        if (err) ZERO__ERR(err, "the pool's %d x %zu bytes of pinned memory: %s", n, b, zero_device_last_error(e->dev));
        *raw = NULL;
        return ZERO_ERR_NOMEM;
    }
    void *m = (void *)(((uintptr_t)*raw + ZERO_IO_ALIGN - 1) & ~(uintptr_t)(ZERO_IO_ALIGN - 1));
    zero_status s = zero_offload_pool_create_in(pool, e->off.io, n, b, m, need, err);
    if (s != ZERO_OK) {
        zero_device_release(e->dev, *raw);
        *raw = NULL;
    }
    return s;
}

/* Chooses the layout and the tile size, creates files and pools. Local: the caller agrees. */
static zero_status setup_local(zero_engine *e) {
    eoffload *o = &e->off;
    const zero_config *c = &e->cfg;
    /* a unit's parameter shard: the working one and, with frozen parameters, the frozen one */
    uint64_t smax = 0, rmax = 0;
    const char *sname = "";
    for (int i = 0; i < e->nunits; i++) {
        const eunit *u = &e->units[i];
        if (u->shard + u->fshard > smax) {
            smax = u->shard + u->fshard;
            sname = u->name;
        }
        const uint64_t r = zero__poff_region(e, u);
        if (r > rmax) rmax = r;
    }
    o->fcache_unit = o->fcache_buf = -1;
    /* the master's file, as the table places it: with the states, or as the parameter shard */
    const etable *t = &e->own;
    o->master_loc = t->k[EK_MASTER].tier != TIER_NVME ? LOC_RAM : t->master_in_params ? LOC_PARAM : LOC_OPTIM;
    o->nso = (o->master_loc == LOC_OPTIM ? 1 : 0) + (o->opt ? e->nstates : 0);
    zero_error err = {{0}};
    zero_status s;

    size_t pbuf = 0;
    if (o->par) {
        /* a buffer holds the largest shard; a buffer_size given must be at least that */
        if ((c->set_fields & ZERO_SET_PARAM_BUFFER_SIZE) && (uint64_t)c->offload_param.buffer_size < smax)
            return zero__eng_fail(e, ZERO_ERR_CONFIG,
                                  "zero_optimization.offload_param.buffer_size: %lld elements is smaller than the largest "
                                  "unit shard ('%s', %llu elements%s): expected at least that, or no buffer_size (each "
                                  "buffer then holds the largest shard)",
                                  (long long)c->offload_param.buffer_size, sname, (unsigned long long)smax,
                                  e->nfrozen ? " with its frozen part" : "");
        if (c->offload_param.buffer_count < 1)
            return zero__eng_fail(e, ZERO_ERR_CONFIG, "zero_optimization.offload_param.buffer_count: %d: expected >= 1",
                                  c->offload_param.buffer_count);
        pbuf = (size_t)rmax;
    }
    /* The tile: T elements whose arrays fit one step buffer; a multiple of the elements in one
     * aligned block of every array, so that every tile but a unit's last starts aligned. */
    /* (an 8-bit state's slot holds fewer bytes than an fp32 one's: a tile that fits in fp32 fits) */
    const uint64_t per = (uint64_t)o->nso * 4 + (o->par ? e->wsize : 0);
    const uint64_t gran = ALIGN / (o->par && e->wsize == 2 ? 2 : 4);
    size_t tbuf;
    int tcount;
    if (o->opt) {
        if (c->offload_optimizer.buffer_count < 1)
            return zero__eng_fail(e, ZERO_ERR_CONFIG, "zero_optimization.offload_optimizer.buffer_count: %d: expected >= 1",
                                  c->offload_optimizer.buffer_count);
        tbuf = (size_t)c->aio_block_size;
        tcount = c->offload_optimizer.buffer_count;
    } else {
        tbuf = pbuf;
        tcount = c->offload_param.buffer_count;
    }
    o->T = per ? tbuf / per / gran * gran : gran;
    /* sub_group_size (elements) may make tiles smaller, never below one granule */
    if (c->sub_group_size > 0 && (uint64_t)c->sub_group_size < o->T)
        o->T = (uint64_t)c->sub_group_size > gran ? (uint64_t)c->sub_group_size / gran * gran : gran;
    if (o->T == 0)
        return zero__eng_fail(e, ZERO_ERR_CONFIG,
                              "aio.block_size: %lld bytes holds no step tile: a tile moves %llu bytes per element in "
                              "blocks of %llu elements, so expected at least %llu",
                              (long long)c->aio_block_size, (unsigned long long)per, (unsigned long long)gran,
                              (unsigned long long)(per * gran));

    uint64_t obytes = 0, pbytes = 0;
    for (int i = 0; i < e->nunits; i++) {
        eunit *u = &e->units[i];
        u->obase = obytes;
        u->pbase = pbytes;
        u->pslot = -1;
        u->pready = 0;
        obytes += optim_region(e, u);
        pbytes += param_region(e, u);
    }
    const int depth = 2 * (tcount + (o->par && o->opt ? c->offload_param.buffer_count : 0)) + 4;
    const zero_io_options io = {e->opt_io_backend_set ? e->opt_io_backend : NULL,
                                e->opt_io_fault_set ? e->opt_io_fault : NULL, e->opt_io_depth};
    s = zero_offload_io_create_with(&o->io, depth > c->aio_queue_depth ? depth : c->aio_queue_depth, &io, &err);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "NVMe offload: %s", err.msg);
    if (o->opt && obytes > 0) sweep(e, c->offload_optimizer.nvme_path);
    if (o->par && !(o->opt && obytes > 0 && !strcmp(c->offload_param.nvme_path, c->offload_optimizer.nvme_path)))
        sweep(e, c->offload_param.nvme_path);
    if (o->opt && obytes > 0) {
        s = zero_swap_create(&o->ofile, o->io, c->offload_optimizer.nvme_path, o->job, e->rank, e->world, "optim", obytes, &err);
        if (s != ZERO_OK) return zero__eng_fail(e, s, "offload_optimizer: %s", err.msg);
    }
    if (o->par) {
        s = zero_swap_create(&o->pfile, o->io, c->offload_param.nvme_path, o->job, e->rank, e->world, "param", pbytes, &err);
        if (s != ZERO_OK) return zero__eng_fail(e, s, "offload_param: %s", err.msg);
        s = pool_new(e, &o->ppool, &o->pmem, c->offload_param.buffer_count, pbuf, &err);
        if (s != ZERO_OK) return zero__eng_fail(e, s, "offload_param: %s", err.msg);
    }
    if (o->opt) {
        s = pool_new(e, &o->tpool, &o->tmem, tcount, tbuf, &err);
        if (s != ZERO_OK) return zero__eng_fail(e, s, "offload_optimizer: %s", err.msg);
    } else {
        o->tpool = o->ppool;
    }
    zero__log(ZERO_LOG_INFO, "offload: rank %d: %s%s%s, tiles of %llu elements, %s%s", e->rank,
              o->ofile ? zero_swap_path(o->ofile) : "", o->ofile && o->pfile ? " and " : "",
              o->pfile ? zero_swap_path(o->pfile) : "", (unsigned long long)o->T, zero_io_backend(o->io),
              (o->ofile ? zero_swap_direct(o->ofile) : zero_swap_direct(o->pfile)) ? ", O_DIRECT" : "");
    return ZERO_OK;
}

void zero__off_free(zero_engine *e) {
    eoffload *o = &e->off;
    o->fcache_unit = o->fcache_buf = -1; /* a held frozen write goes with the file */
    if (o->tpool != o->ppool) zero_offload_pool_free(o->tpool);
    zero_offload_pool_free(o->ppool);
    o->tpool = o->ppool = NULL;
    if (e->dev) { /* after the pools: their I/O has been waited for */
        zero_device_release(e->dev, o->tmem);
        zero_device_release(e->dev, o->pmem);
    }
    o->tmem = o->pmem = NULL;
    zero_error err = {{0}};
    if (zero_swap_remove(o->ofile, &err) != ZERO_OK) zero__log(ZERO_LOG_WARN, "offload: %s", err.msg);
    if (zero_swap_remove(o->pfile, &err) != ZERO_OK) zero__log(ZERO_LOG_WARN, "offload: %s", err.msg);
    o->ofile = o->pfile = NULL;
    zero_io_free(o->io);
    o->io = NULL;
    for (int i = 0; i < e->nunits; i++) e->units[i].pslot = -1;
}

zero_status zero__off_setup(zero_engine *e) {
    eoffload *o = &e->off;
    /* what the table put on NVMe: the optimizer file holds the states and a master of its own;
     * the parameter file the working shards (and with them, in fp32, the master) */
    o->opt = e->own.k[EK_OPTIM].tier == TIER_NVME;
    o->par = e->own.k[EK_PARAMS].tier == TIER_NVME;
    if (!o->opt && e->cfg.offload_optimizer.device == ZERO_OFFLOAD_NVME)
        zero__log(ZERO_LOG_INFO, "offload: offload_optimizer has nothing to hold (fp32, %s without state)",
                  zero_optim_name(e->cfg.optim.type));
    if (!o->opt && !o->par) return ZERO_OK;
    if (e->cfg.offload_optimizer.device == ZERO_OFFLOAD_NVME && e->cfg.offload_optimizer.ratio < 1.0)
        zero__log(ZERO_LOG_WARN, "offload: offload_optimizer.ratio %g: partial offload is not implemented; offloading all",
                  e->cfg.offload_optimizer.ratio);
    zero_status s = agree_job(e);
    zero_status mine = s == ZERO_OK ? setup_local(e) : s;
    if (s == ZERO_ERR_COMM) {
        zero__off_free(e);
        return s;
    }
    s = zero__eng_agree(e, mine, "finalize: NVMe offload setup");
    if (s != ZERO_OK) zero__off_free(e);
    return s;
}

zero_status zero__off_quiesce(zero_engine *e) {
    if (!e->off.par) return ZERO_OK;
    zero_status s = zero__gather_drain(e);
    zero_status f = zero__foff_flush(e);
    if (s == ZERO_OK) s = f;
    zero__poff_release_all(e);
    return s;
}

/* ------------------------------------------------------------------ tiles */

/* The array a tile's parameter slice holds: the fp32 master (fp32 training, where it is the
 * working copy) or the half working copy; 0 when neither goes through the parameter file. */
static unsigned param_array(const zero_engine *e) {
    return e->off.master_loc == LOC_PARAM ? ARR_MASTER : zero__work_apart(e) ? ARR_WORK : 0u;
}

/* The tile's arrays: which live in the buffer (the optimizer record, then the parameter slice), at
 * which byte of it. */
static void tile_bind(zero_engine *e, etile *x, char *buf) {
    const eoffload *o = &e->off;
    eunit *u = x->u;
    const int half = zero__work_apart(e);
    oslot sl[3];
    uint64_t rec;
    const int ns = record_slots(e, u, x->n, sl, &rec);
    char *pslice = buf ? buf + rec : NULL;
    /* what is in RAM comes from the unit's views (offload runs at stages 1-3: the update range
     * starts at the owned slice, where tile element 0 is) */
    const eview *v = &u->v;
    x->master = o->master_loc == LOC_PARAM ? (float *)pslice : v->master ? v->master + x->first : NULL;
    x->s0 = v->state[0] ? v->state[0] + x->first : NULL;
    x->s1 = v->state[1] ? v->state[1] + x->first : NULL;
    const uint64_t b = x->first / ZERO_QUANT_Q8_BLOCK;
    if (v->q8.m)
        x->q8 = (zero_q8_state){v->q8.m + x->first, v->q8.v ? v->q8.v + x->first : NULL, v->q8.m_absmax + b,
                                v->q8.v_absmax ? v->q8.v_absmax + b : NULL};
    else memset(&x->q8, 0, sizeof x->q8);
    for (int k = 0; k < ns; k++) {
        char *at = buf + sl[k].off;
        if (sl[k].arr == ARR_MASTER) {
            x->master = (float *)at;
        } else if (u->q8on) { /* the indices, then the blocks' absmax */
            uint8_t **idx = sl[k].arr == ARR_S0 ? &x->q8.m : &x->q8.v;
            float **am = sl[k].arr == ARR_S0 ? &x->q8.m_absmax : &x->q8.v_absmax;
            *idx = (uint8_t *)at;
            *am = (float *)(at + q8_idx_bytes(x->n));
        } else {
            *(sl[k].arr == ARR_S0 ? &x->s0 : &x->s1) = (float *)at;
        }
    }
    x->work = !half ? NULL : o->par ? (void *)pslice : v->work ? zero__wptr(e, v->work, x->first) : NULL;
}

/* The transfers of a tile for arrays `rd` (read) and `wr` (written); `rmw`: a written array is
 * read first (the tile is only partly overwritten). Returns their number. */
static int tile_extents(const zero_engine *e, const etile *x, unsigned rd, unsigned wr, int rmw, zero_offload_extent *ext) {
    const eoffload *o = &e->off;
    const eunit *u = x->u;
    if (rmw) rd |= wr;
    int n = 0;
    /* the optimizer record: its slots in order, one transfer when all go the same way */
    oslot sl[3];
    uint64_t recb;
    const int na = record_slots(e, u, x->n, sl, &recb);
    const uint64_t rec = u->obase + (uint64_t)x->j * record_bytes(e, u, o->T);
    unsigned fl[3], all = 1;
    for (int k = 0; k < na; k++) {
        fl[k] = ((rd & sl[k].arr) ? ZERO_OFFLOAD_READ : 0u) | ((wr & sl[k].arr) ? ZERO_OFFLOAD_WRITE : 0u);
        if (fl[k] != fl[0]) all = 0;
    }
    if (na > 0 && all && fl[0]) {
        ext[n++] = (zero_offload_extent){o->ofile, rec, (size_t)recb, 0, fl[0]};
    } else {
        for (int k = 0; k < na; k++)
            if (fl[k]) ext[n++] = (zero_offload_extent){o->ofile, rec + sl[k].off, (size_t)sl[k].len, (size_t)sl[k].off, fl[k]};
    }
    /* the parameter slice: the fp32 master (fp32 training) or the working copy (half) */
    if (o->par) {
        const unsigned in = param_array(e);
        unsigned f = ((rd & in) ? ZERO_OFFLOAD_READ : 0u) | ((wr & in) ? ZERO_OFFLOAD_WRITE : 0u);
        if (f)
            ext[n++] = (zero_offload_extent){o->pfile, u->pbase + (uint64_t)x->j * o->T * e->wsize,
                                             (size_t)round_up(x->n * e->wsize), (size_t)recb, f};
    }
    return n;
}

/* A pass in progress: the units' first tile numbers (prefix sums) and the first tile index. */
typedef struct run_ctx {
    zero_engine *e;
    const eopass *p;
    int cb_failed;   /* the callback failed: e->err holds its message */
    int64_t *prefix; /* ub - ua + 1 */
    int64_t *jlo;    /* first tile of each unit in range */
} run_ctx;

static void tile_at(run_ctx *r, int64_t t, etile *x) {
    const eopass *p = r->p;
    int lo = 0, hi = p->ub - p->ua; /* the unit i with prefix[i] <= t < prefix[i + 1] */
    while (hi - lo > 1) {
        int mid = (lo + hi) / 2;
        if (r->prefix[mid] <= t) lo = mid;
        else hi = mid;
    }
    while (lo + 1 < p->ub - p->ua && r->prefix[lo + 1] <= t) lo++;
    zero_engine *e = r->e;
    memset(x, 0, sizeof *x);
    x->u = &e->units[p->ua + lo];
    x->j = r->jlo[lo] + (t - r->prefix[lo]);
    x->first = (uint64_t)x->j * e->off.T;
    x->n = x->u->valid - x->first < e->off.T ? x->u->valid - x->first : e->off.T;
    x->lo = p->lo > x->first ? p->lo : x->first;
    x->hi = p->hi < x->first + x->n ? p->hi : x->first + x->n;
}

static int partial(const etile *x) { return x->lo > x->first || x->hi < x->first + x->n; }

static int run_describe(void *ctx, int64_t t, zero_offload_extent *ext) {
    run_ctx *r = ctx;
    etile x;
    tile_at(r, t, &x);
    return tile_extents(r->e, &x, r->p->rd, r->p->wr, partial(&x), ext);
}

static zero_status run_compute(void *ctx, int64_t t, void *buf) {
    run_ctx *r = ctx;
    zero_engine *e = r->e;
    etile x;
    tile_at(r, t, &x);
    tile_bind(e, &x, buf);
    zero_status s = r->p->cb(e, &x, r->p->ctx);
    if (s != ZERO_OK) {
        r->cb_failed = 1;
        return s;
    }
    /* Bytes past the data of a write that was not read first: zeros, not stale buffer contents
     * (the parameter slice's tail is the shard's padding, which the all-gather ships). */
    const unsigned wonly = r->p->wr & ~(r->p->rd | (partial(&x) ? r->p->wr : 0u));
    oslot sl[3];
    uint64_t recb;
    const int ns = record_slots(e, x.u, x.n, sl, &recb);
    for (int k = 0; k < ns; k++) {
        if (!(wonly & sl[k].arr)) continue;
        char *at = (char *)buf + sl[k].off;
        if (sl[k].arr != ARR_MASTER && x.u->q8on) { /* between the indices and the absmax, and after it */
            const uint64_t ib = q8_idx_bytes(x.n), ab = 4 * zero_quant_blocks(x.n, ZERO_QUANT_Q8_BLOCK);
            memset(at + x.n, 0, ib - x.n);
            memset(at + ib + ab, 0, sl[k].len - ib - ab);
        } else {
            memset(at + x.n * 4, 0, sl[k].len - x.n * 4);
        }
    }
    if (e->off.par) {
        const unsigned in = param_array(e);
        const uint64_t used = x.n * e->wsize;
        if (wonly & in) memset((char *)buf + recb + used, 0, round_up(used) - used);
    }
    return ZERO_OK;
}

zero_status zero__off_run(zero_engine *e, const eopass *p) {
    const int nu = p->ub - p->ua;
    if (nu <= 0) return ZERO_OK;
    /* a held frozen write gives its buffer back (the pass may need every one of a shared pool) */
    zero_status f = zero__foff_flush(e);
    if (f != ZERO_OK) return f;
    run_ctx r = {e, p, 0, NULL, NULL};
    r.prefix = zero_mem_alloc(&e->acct, ZERO_MEM_BUFFERS, (size_t)(nu + 1) * sizeof *r.prefix);
    r.jlo = zero_mem_alloc(&e->acct, ZERO_MEM_BUFFERS, (size_t)nu * sizeof *r.jlo);
    if (!r.prefix || !r.jlo) {
        zero_mem_free(&e->acct, r.prefix);
        zero_mem_free(&e->acct, r.jlo);
        return zero__eng_fail(e, ZERO_ERR_NOMEM, "offload: out of memory");
    }
    r.prefix[0] = 0;
    for (int i = 0; i < nu; i++) {
        const eunit *u = &e->units[p->ua + i];
        uint64_t hi = p->hi < u->valid ? p->hi : u->valid;
        int64_t a = (int64_t)(p->lo / e->off.T), b = p->lo < hi ? (int64_t)((hi - 1) / e->off.T) + 1 : a;
        r.jlo[i] = a;
        r.prefix[i + 1] = r.prefix[i] + (b - a);
    }
    zero_offload_pass pass = {r.prefix[nu], run_describe, run_compute, &r};
    const double t0 = zero_now();
    zero_status s = r.prefix[nu] > 0 ? zero_offload_pool_run(e->off.tpool, &pass, &e->off.st) : ZERO_OK;
    zero_trace_span(ZERO_TRACE_IO, "offload: pass over tiles", t0, zero_now());
    zero_mem_free(&e->acct, r.prefix);
    zero_mem_free(&e->acct, r.jlo);
    if (s != ZERO_OK && !r.cb_failed) zero__eng_fail(e, s, "NVMe offload: %s", zero_offload_pool_last_error(e->off.tpool));
    return s;
}

zero_status zero_engine_offload_info_get(const zero_engine *e, zero_engine_offload_info *out) {
    if (!e || !out) return ZERO_ERR_INVALID_ARG;
    memset(out, 0, sizeof *out);
    const eoffload *o = &e->off;
    out->io = o->st;
    out->optim_file_bytes = zero_swap_data_bytes(o->ofile);
    out->param_file_bytes = zero_swap_data_bytes(o->pfile);
    if (o->tpool) out->pool_bytes += (uint64_t)zero_offload_pool_count(o->tpool) * zero_offload_pool_buffer_bytes(o->tpool);
    if (o->ppool && o->ppool != o->tpool)
        out->pool_bytes += (uint64_t)zero_offload_pool_count(o->ppool) * zero_offload_pool_buffer_bytes(o->ppool);
    out->tile_elements = zero__off_on(e) ? (int64_t)o->T : 0;
    out->direct = o->ofile ? zero_swap_direct(o->ofile) : zero_swap_direct(o->pfile);
    out->backend = o->io ? zero_io_backend(o->io) : "none";
    return ZERO_OK;
}
