/* The device front: options, the side table of blocks with per-space accounting, argument
 * checks, the cost model's clocks, counters and events; the backends (cpu.c, fake.c) run what
 * it queues. */
#include "device/internal.h"
#include "zero/optim.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZERO_HAVE_CUDA
const char *zero_device_backends_built(void) { return "cpu,fake,cuda"; }
#else
const char *zero_device_backends_built(void) { return "cpu,fake"; }
#endif

void zero_device_options_default(zero_device_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->max_delay_us = -1;
}

/* "24GiB", "512MiB", "1e9", plain bytes: 0 on success. */
static int parse_size(const char *v, uint64_t *out) {
    char *end = NULL;
    errno = 0;
    const double x = strtod(v, &end);
    if (errno || end == v || !(x > 0) || !isfinite(x)) return -1;
    double m = 1;
    if (!*end) m = 1;
    else if (!strcmp(end, "KiB")) m = 1024.0;
    else if (!strcmp(end, "MiB")) m = 1024.0 * 1024;
    else if (!strcmp(end, "GiB")) m = 1024.0 * 1024 * 1024;
    else if (!strcmp(end, "TiB")) m = 1024.0 * 1024 * 1024 * 1024;
    else if (!strcmp(end, "KB")) m = 1e3;
    else if (!strcmp(end, "MB")) m = 1e6;
    else if (!strcmp(end, "GB")) m = 1e9;
    else if (!strcmp(end, "TB")) m = 1e12;
    else return -1;
    if (x * m >= 18e18) return -1;
    *out = (uint64_t)(x * m);
    return 0;
}

zero_status zero_device_create(zero_device **out, const zero_device_options *opt, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    zero_device_options o;
    zero_device_options_default(&o);
    if (opt) o = *opt;
    const char *name = o.backend;
    const char *from = "zero_device_options.backend";
    if (!name) {
        name = getenv("ZERO_DEVICE");
        from = "ZERO_DEVICE";
    }
    if (!name || !*name) name = "cpu";
    const zero__dev_vtable *vt = !strcmp(name, "cpu") ? &zero__dev_cpu : !strcmp(name, "fake") ? &zero__dev_fake : NULL;
    if (!vt && !strcmp(name, "cuda")) {
        char why[400];
        vt = zero__dev_cuda_load(why, sizeof why);
        if (!vt) {
            if (err) ZERO__ERR(err, "%s 'cuda': %s (built: %s)", from, why, zero_device_backends_built());
            return ZERO_ERR_UNSUPPORTED;
        }
    }
    if (!vt) {
        if (err) ZERO__ERR(err, "%s '%s': expected one of %s", from, name, zero_device_backends_built());
        return ZERO_ERR_CONFIG;
    }
    const char *mem = getenv("ZERO_DEVICE_MEMORY");
    if (!o.capacity && mem && *mem && parse_size(mem, &o.capacity) != 0) {
        if (err) ZERO__ERR(err, "ZERO_DEVICE_MEMORY '%s': expected a size such as 24GiB, 512MiB or 1e9", mem);
        return ZERO_ERR_CONFIG;
    }
    const char *lazy = getenv("ZERO_DEVICE_LAZY");
    if (!o.lazy && lazy && *lazy) {
        if (strcmp(lazy, "0") != 0 && strcmp(lazy, "1") != 0) {
            if (err) ZERO__ERR(err, "ZERO_DEVICE_LAZY '%s': expected 1 (the fake device's lazy streams) or 0", lazy);
            return ZERO_ERR_CONFIG;
        }
        o.lazy = lazy[0] == '1';
    }
    if (!(o.max_delay_us < 1e7) || !(o.latency_us >= 0 && o.latency_us < 1e7) || !(o.gflops >= 0)) {
        if (err)
            ZERO__ERR(err,
                      "device options: max_delay_us %g, latency_us %g, gflops %g: expected [0, 1e7) µs and a rate >= 0",
                      o.max_delay_us, o.latency_us, o.gflops);
        return ZERO_ERR_INVALID_ARG;
    }
    for (int k = 0; k < ZERO_COPY_DIR_COUNT; k++) {
        if (!(o.gbps[k] >= 0) || !isfinite(o.gbps[k])) {
            if (err) ZERO__ERR(err, "device options: gbps[%d] %g: expected a rate >= 0 (0: the default)", k, o.gbps[k]);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    zero_device *d = calloc(1, sizeof *d);
    if (!d) {
        if (err) ZERO__ERR(err, "device: out of memory");
        return ZERO_ERR_NOMEM;
    }
    d->vt = vt;
    pthread_mutex_init(&d->mu, NULL);
    /* PCIe 4.0 x16 in each direction, HBM within the device, host memcpy between host buffers */
    static const double dflt[ZERO_COPY_DIR_COUNT] = {25, 25, 25, 1000};
    for (int k = 0; k < ZERO_COPY_DIR_COUNT; k++) d->gbps[k] = o.gbps[k] > 0 ? o.gbps[k] : dflt[k];
    d->latency_s = (o.latency_us > 0 ? o.latency_us : 10) * 1e-6;
    d->gflops = o.gflops > 0 ? o.gflops : 50000;
    zero_status s = vt->create(d, &o, err);
    if (s != ZERO_OK) {
        pthread_mutex_destroy(&d->mu);
        free(d);
        return s;
    }
    *out = d;
    return ZERO_OK;
}

/* Frees the deferred blocks whose events have completed (block: waits for each first). */
static void reap(zero_device *d, int block) {
    size_t k = 0;
    for (size_t i = 0; i < d->ndeferred; i++) {
        struct zero__dev_deferred *x = &d->deferred[i];
        if (block) (void)zero_event_sync(x->ev);
        if (zero_event_query(x->ev)) {
            zero_event_free(x->ev);
            zero_device_release(d, x->p);
        } else {
            d->deferred[k++] = *x;
        }
    }
    d->ndeferred = k;
}

zero_status zero_device_release_after(zero_device *d, void *p, zero_stream *s) {
    if (!d || !p) return d || !p ? ZERO_OK : ZERO_ERR_INVALID_ARG;
    if (!s || s->d != d) return ZERO_ERR_INVALID_ARG;
    reap(d, 0);
    zero_event *ev = NULL;
    zero_status st = ZERO_OK;
    if (d->ndeferred == d->capdeferred) {
        const size_t cap = d->capdeferred ? 2 * d->capdeferred : 16;
        struct zero__dev_deferred *x = realloc(d->deferred, cap * sizeof *x);
        if (x) d->deferred = x, d->capdeferred = cap;
        else st = ZERO_ERR_NOMEM;
    }
    if (st == ZERO_OK) st = zero_event_create(d, &ev);
    if (st == ZERO_OK) st = zero_event_record(ev, s);
    if (st != ZERO_OK) { /* at once, after everything queued on s */
        zero_event_free(ev);
        const zero_status w = zero_stream_sync(s);
        zero_device_release(d, p);
        return w != ZERO_OK ? w : st;
    }
    d->deferred[d->ndeferred++] = (struct zero__dev_deferred){p, ev};
    return ZERO_OK;
}

void zero_device_free(zero_device *d) {
    if (!d) return;
    reap(d, 1);
    free(d->deferred);
    /* blocks left allocated go with the regions */
    d->vt->destroy(d);
    free(d->blocks);
    pthread_mutex_destroy(&d->mu);
    free(d);
}

const char *zero_device_backend(const zero_device *d) { return d ? d->vt->name : "none"; }
const char *zero_device_last_error(const zero_device *d) { return d ? d->err : "no device"; }
uint64_t zero_device_capacity(const zero_device *d, zero_mem_space space) {
    return d && (unsigned)space < ZERO__DEV_SPACES ? d->capacity[space] : 0;
}

/* ---------------------------------------------------------------- the side table */
/* Index of the block holding p, or -1. */
static long find_block(const zero_device *d, uintptr_t p) {
    size_t lo = 0, hi = d->nblocks;
    while (lo < hi) {
        const size_t mid = (lo + hi) / 2;
        if (d->blocks[mid].lo + d->blocks[mid].bytes <= p) lo = mid + 1;
        else hi = mid;
    }
    return lo < d->nblocks && d->blocks[lo].lo <= p ? (long)lo : -1;
}

int zero_device_space_of(const zero_device *d, const void *p) {
    if (!d || !p) return -1;
    const long i = find_block(d, (uintptr_t)p);
    return i < 0 ? -1 : d->blocks[i].space;
}

static const char *space_name(int space) {
    return space == ZERO_SPACE_DEVICE ? "device" : space == ZERO_SPACE_HOST_PINNED ? "pinned host" : "host";
}

zero_status zero_device_alloc(zero_device *d, zero_mem_space space, zero_mem_category cat, size_t bytes, void **out) {
    if (!d || !out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if ((unsigned)space >= ZERO__DEV_SPACES || (unsigned)cat >= ZERO_MEM_COUNT || bytes == 0 ||
        bytes > (SIZE_MAX >> 2)) {
        zero__errorf(d->err, sizeof d->err,
                     "device alloc: space %d, category %d, %zu bytes: expected a space, a category "
                     "and 1 byte or more",
                     (int)space, (int)cat, bytes);
        return ZERO_ERR_INVALID_ARG;
    }
    const size_t rounded = (bytes + ZERO__DEV_ALIGN - 1) / ZERO__DEV_ALIGN * ZERO__DEV_ALIGN;
    zero_mem_stats *st = &d->stats[space];
    reap(d, d->capacity[space] && st->total_current + rounded > d->capacity[space]); /* waits only to fit */
    if (d->capacity[space] && st->total_current + rounded > d->capacity[space]) {
        zero__errorf(d->err, sizeof d->err,
                     "%s device: %s memory: %zu bytes for %s do not fit: %zu of its %llu bytes are "
                     "in use",
                     d->vt->name, space_name(space), rounded, zero_mem_category_name(cat), st->total_current,
                     (unsigned long long)d->capacity[space]);
        return ZERO_ERR_NOMEM;
    }
    if (d->nblocks == d->capblocks) {
        const size_t cap = d->capblocks ? 2 * d->capblocks : 64;
        zero__dev_block *b = realloc(d->blocks, cap * sizeof *b);
        if (!b) goto nomem;
        d->blocks = b;
        d->capblocks = cap;
    }
    d->err[0] = 0;
    void *p = d->vt->alloc(d, space, rounded);
    if (!p && d->ndeferred) { /* blocks handed back with release_after may be what it lacks: wait for them */
        reap(d, 1);
        d->err[0] = 0;
        p = d->vt->alloc(d, space, rounded);
    }
    if (!p) {
        if (!d->err[0]) /* the backend did not say why */
            zero__errorf(d->err, sizeof d->err,
                         "%s device: %s memory: %zu bytes for %s: the region is full or "
                         "fragmented (%zu bytes in use)",
                         d->vt->name, space_name(space), rounded, zero_mem_category_name(cat), st->total_current);
        return ZERO_ERR_NOMEM;
    }
    size_t i = 0;
    while (i < d->nblocks && d->blocks[i].lo < (uintptr_t)p) i++;
    memmove(d->blocks + i + 1, d->blocks + i, (d->nblocks - i) * sizeof *d->blocks);
    d->blocks[i] = (zero__dev_block){(uintptr_t)p, rounded, (int)space, (int)cat};
    d->nblocks++;
    st->current[cat] += rounded;
    if (st->current[cat] > st->peak[cat]) st->peak[cat] = st->current[cat];
    st->total_current += rounded;
    if (st->total_current > st->total_peak) st->total_peak = st->total_current;
    *out = p;
    return ZERO_OK;
nomem:
    zero__errorf(d->err, sizeof d->err, "device: out of host memory for the side table");
    return ZERO_ERR_NOMEM;
}

void zero_device_release(zero_device *d, void *p) {
    if (!d || !p) return;
    const long i = find_block(d, (uintptr_t)p);
    if (i < 0 || d->blocks[i].lo != (uintptr_t)p) return; /* not a block's start: not ours to free */
    const zero__dev_block b = d->blocks[i];
    d->vt->free(d, b.space, p, b.bytes);
    zero_mem_stats *st = &d->stats[b.space];
    st->current[b.cat] -= b.bytes;
    st->total_current -= b.bytes;
    memmove(d->blocks + i, d->blocks + i + 1, (d->nblocks - (size_t)i - 1) * sizeof *d->blocks);
    d->nblocks--;
}

void zero_device_mem_stats(const zero_device *d, zero_mem_space space, zero_mem_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (d && (unsigned)space < ZERO__DEV_SPACES) *out = d->stats[space];
}

/* ---------------------------------------------------------------- streams */
zero_status zero_stream_create(zero_device *d, zero_stream **out) {
    if (!d || !out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    zero_stream *s = calloc(1, sizeof *s);
    if (!s) {
        zero__errorf(d->err, sizeof d->err, "device: out of memory for a stream");
        return ZERO_ERR_NOMEM;
    }
    s->d = d;
    zero_status st = d->vt->stream_create(s);
    if (st != ZERO_OK) {
        free(s);
        return st;
    }
    s->next = d->streams;
    d->streams = s;
    *out = s;
    return ZERO_OK;
}

zero_device *zero_stream_device(const zero_stream *s) { return s ? s->d : NULL; }

void zero_stream_free(zero_stream *s) {
    if (!s) return;
    s->d->vt->drain(s);
    for (zero_stream **pp = &s->d->streams; *pp; pp = &(*pp)->next)
        if (*pp == s) {
            *pp = s->next;
            break;
        }
    s->d->vt->stream_destroy(s);
    free(s);
}

/* The cost model: op runs on s after what s queued before, for its modeled cost. */
static void model(zero_stream *s, zero__op *op, double cost) {
    if (!s->d->vt->modeled) return; /* the cpu backend costs what the host does; cuda what the GPU does */
    op->cost = cost;
    s->mclock += cost;
    zero_device *d = s->d;
    pthread_mutex_lock(&d->mu);
    if (s->mclock > d->ctr.modeled_s) d->ctr.modeled_s = s->mclock;
    pthread_mutex_unlock(&d->mu);
}

static zero_copy_dir dir_of(int dst_space, int src_space) {
    const int dd = dst_space == ZERO_SPACE_DEVICE, sd = src_space == ZERO_SPACE_DEVICE;
    return dd && sd ? ZERO_COPY_D2D : dd ? ZERO_COPY_H2D : sd ? ZERO_COPY_D2H : ZERO_COPY_H2H;
}

/* A range [p, p + n) lies inside one block of the device's, or (space -1) in none. */
static int range_ok(const zero_device *d, const void *p, size_t n, int *space) {
    const long i = find_block(d, (uintptr_t)p);
    *space = i < 0 ? -1 : d->blocks[i].space;
    if (i < 0) return find_block(d, (uintptr_t)p + n - 1) < 0; /* host memory must not run into a block */
    return (uintptr_t)p + n <= d->blocks[i].lo + d->blocks[i].bytes;
}

static zero_status submit(zero_stream *s, zero__op *op) {
    zero_device *d = s->d;
    zero_status st = d->vt->submit(s, op);
    /* a copy touching pageable host memory returns when it has run (the host may reuse the buffer) */
    const int pageable = op->dst_space < 0 || op->dst_space == ZERO_SPACE_HOST ||
                         (op->kind == ZERO__OP_COPY && (op->src_space < 0 || op->src_space == ZERO_SPACE_HOST));
    if (st == ZERO_OK && (op->kind == ZERO__OP_COPY || op->kind == ZERO__OP_SET) && pageable && d->vt->asynchronous)
        d->vt->drain(s);
    return st;
}

zero_status zero_stream_copy(zero_stream *s, void *dst, const void *src, size_t n) {
    if (!s) return ZERO_ERR_INVALID_ARG;
    zero_device *d = s->d;
    if (n == 0) return ZERO_OK;
    zero__op op = {.kind = ZERO__OP_COPY, .dst = dst, .src = src, .n = n};
    if (!dst || !src || !range_ok(d, dst, n, &op.dst_space) || !range_ok(d, src, n, &op.src_space)) {
        zero__errorf(d->err, sizeof d->err,
                     "copy of %zu bytes from %p to %p: each side must lie inside one block of the "
                     "device's, or wholly outside them (host memory)",
                     n, src, dst);
        return ZERO_ERR_INVALID_ARG;
    }
    const zero_copy_dir k = dir_of(op.dst_space, op.src_space);
    pthread_mutex_lock(&d->mu);
    d->ctr.bytes[k] += n;
    d->ctr.copies[k]++;
    pthread_mutex_unlock(&d->mu);
    model(s, &op, d->latency_s + (double)n / (d->gbps[k] * 1e9));
    return submit(s, &op);
}

zero_status zero_stream_memset(zero_stream *s, void *dst, int byte, size_t n) {
    if (!s) return ZERO_ERR_INVALID_ARG;
    zero_device *d = s->d;
    if (n == 0) return ZERO_OK;
    zero__op op = {.kind = ZERO__OP_SET, .dst = dst, .n = n, .byte = byte & 0xff, .src_space = ZERO_SPACE_DEVICE};
    if (!dst || !range_ok(d, dst, n, &op.dst_space)) {
        zero__errorf(d->err, sizeof d->err, "memset of %zu bytes at %p: it must lie inside one block, or outside them",
                     n, dst);
        return ZERO_ERR_INVALID_ARG;
    }
    model(s, &op, (double)n / (d->gbps[op.dst_space == ZERO_SPACE_DEVICE ? ZERO_COPY_D2D : ZERO_COPY_H2H] * 1e9));
    return submit(s, &op);
}

static size_t half_or_f32(double dt) {
    return dt == ZERO_DTYPE_FP32 ? 4 : dt == ZERO_DTYPE_BF16 || dt == ZERO_DTYPE_FP16 ? 2 : 0;
}

static const char *const kernel_names[ZERO__K_COUNT] = {
    "fill_f32",  "axpy_f32", "f32_to_bf16", "f32_to_fp16", "optim",    "widen", "add",
    "accum_f32", "sumsq",    "nf4_load",    "q8_load",     "q8_store", "gemm"};

const char *zero__kernel_name(int id) { return (unsigned)id < ZERO__K_COUNT ? kernel_names[id] : "unknown"; }

int zero__kcall_extents(const zero__kcall *k, size_t ext[4], char *why, size_t cap) {
    memset(ext, 0, 4 * sizeof *ext);
    if ((unsigned)k->id >= ZERO__K_COUNT) {
        zero__errorf(why, cap, "launch: kernel %d is not one of the %d the device has", k->id, ZERO__K_COUNT);
        return -1;
    }
    if (k->n > (SIZE_MAX >> 4)) { /* every extent below is n times at most 8 bytes, without overflow */
        zero__errorf(why, cap, "launch %s: %llu elements: expected fewer than 2^60", kernel_names[k->id],
                     (unsigned long long)k->n);
        return -1;
    }
    const size_t n = (size_t)k->n, es = half_or_f32(k->a[0]);
    switch (k->id) {
    case ZERO__K_FILL_F32: ext[0] = n * 4; break;
    case ZERO__K_AXPY_F32: ext[0] = ext[1] = n * 4; break;
    case ZERO__K_F32_TO_BF16:
    case ZERO__K_F32_TO_FP16:
        ext[0] = n * 4;
        ext[1] = n * 2;
        break;
    case ZERO__K_OPTIM: {
        const int t = k->optim.type;
        if (t != ZERO_OPTIM_ADAMW && t != ZERO_OPTIM_ADAM && t != ZERO_OPTIM_SGD && t != ZERO_OPTIM_LION) {
            zero__errorf(why, cap, "launch optim: optimizer type %d: expected adamw, adam, sgd or lion", t);
            return -1;
        }
        ext[0] = ext[3] = n * 4;
        /* the states the optimizer keeps: Adam(W) two, Lion one, SGD one with momentum (p[1] given) */
        ext[1] = t != ZERO_OPTIM_SGD || k->p[1] ? n * 4 : 0;
        ext[2] = t == ZERO_OPTIM_ADAMW || t == ZERO_OPTIM_ADAM ? n * 4 : 0;
        break;
    }
    case ZERO__K_WIDEN:
    case ZERO__K_ADD:
    case ZERO__K_ACCUM_F32:
    case ZERO__K_SUMSQ:
        if (!es || (k->id == ZERO__K_WIDEN && es != 2)) {
            zero__errorf(why, cap, "launch %s: dtype %g: expected %s", kernel_names[k->id], k->a[0],
                         k->id == ZERO__K_WIDEN ? "bf16 or fp16" : "fp32, bf16 or fp16");
            return -1;
        }
        ext[0] = n * es;
        ext[1] = k->id == ZERO__K_WIDEN || k->id == ZERO__K_ACCUM_F32 ? n * 4 : n * es;
        if (k->id == ZERO__K_SUMSQ) {
            const double b = k->a[1];
            if (!(b >= 1 && b <= 9e15 && b == (double)(uint64_t)b)) {
                zero__errorf(why, cap, "launch sumsq: block %g: expected a whole number of elements >= 1", b);
                return -1;
            }
            ext[1] = (size_t)((k->n + (uint64_t)b - 1) / (uint64_t)b) * sizeof(double);
        }
        break;
    case ZERO__K_NF4_LOAD:
    case ZERO__K_Q8_LOAD:
    case ZERO__K_Q8_STORE: { /* the blockwise formats' loaders and 8-bit coding (kernels/quant.h): blocks of a[0] */
        const double b = k->a[0];
        if (!(b >= 1 && b <= 9e15 && b == (double)(uint64_t)b)) {
            zero__errorf(why, cap, "launch %s: block %g: expected a whole number of elements >= 1", kernel_names[k->id],
                         b);
            return -1;
        }
        const size_t nb = (size_t)((k->n + (uint64_t)b - 1) / (uint64_t)b);
        if (k->id == ZERO__K_NF4_LOAD) {
            ext[0] = (n + 1) / 2;
            ext[1] = nb * 4;
            ext[2] = n * 4;
        } else if (k->id == ZERO__K_Q8_LOAD) {
            ext[0] = n;
            ext[1] = 256 * 4;
            ext[2] = nb * 4;
            ext[3] = n * 4;
        } else {
            ext[0] = n * 4;
            ext[1] = 256 * 4;
            ext[2] = n;
            ext[3] = nb * 4;
        }
        break;
    }
    case ZERO__K_GEMM: {
        const zero__gemm_k *g = &k->gemm;
        const size_t es = g->dtype == ZERO_DTYPE_FP32 ? 4 : g->dtype == ZERO_DTYPE_BF16 ? 2 : 0;
        const int64_t ar = g->transa ? g->k : g->m, ac = g->transa ? g->m : g->k;
        const int64_t br = g->transb ? g->n : g->k, bc = g->transb ? g->k : g->n;
        if (!es || g->m < 1 || g->n < 1 || g->k < 1 || g->lda < ar || g->ldb < br || g->ldc < g->m ||
            ((g->transa | g->transb) & ~1) || (g->bias & ~1) || k->n != (uint64_t)g->m * (uint64_t)g->n) {
            zero__errorf(why, cap,
                         "launch gemm: m %d, n %d, k %d, transa %d, transb %d, lda %lld, ldb %lld, ldc %lld, dtype %d, "
                         "%llu results: expected sizes >= 1, each leading dimension at least its stored matrix's rows, "
                         "fp32 or bf16 operands and m x n results",
                         g->m, g->n, g->k, g->transa, g->transb, (long long)g->lda, (long long)g->ldb,
                         (long long)g->ldc, g->dtype, (unsigned long long)k->n);
            return -1;
        }
        ext[0] = (size_t)((ac - 1) * g->lda + ar) * es;
        ext[1] = (size_t)((bc - 1) * g->ldb + br) * es;
        ext[2] = (size_t)((int64_t)(g->n - 1) * g->ldc + g->m) * 4;
        ext[3] = g->bias ? (size_t)g->m * 4 : 0;
        break;
    }
    default: break;
    }
    return 0;
}

zero_status zero__stream_launch(zero_stream *s, const zero__kcall *k) {
    if (!s || !k) return ZERO_ERR_INVALID_ARG;
    zero_device *d = s->d;
    size_t ext[4];
    if (zero__kcall_extents(k, ext, d->err, sizeof d->err) != 0) return ZERO_ERR_INVALID_ARG;
    /* every operand in device or pinned memory of this device: what a kernel on any backend can reach */
    for (int j = 0; j < 4 && k->n; j++) {
        if (!ext[j]) continue;
        const long b = k->p[j] ? find_block(d, (uintptr_t)k->p[j]) : -1;
        if (b < 0 || d->blocks[b].space == ZERO_SPACE_HOST ||
            (uintptr_t)k->p[j] + ext[j] > d->blocks[b].lo + d->blocks[b].bytes) {
            zero__errorf(d->err, sizeof d->err,
                         "launch %s: operand %d (%p, %zu bytes) must lie inside one device or pinned block of the "
                         "%s device's",
                         kernel_names[k->id], j, k->p[j], ext[j], d->vt->name);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    zero__op op = {.kind = ZERO__OP_KERNEL, .k = *k, .dst_space = ZERO_SPACE_DEVICE, .src_space = ZERO_SPACE_DEVICE};
    pthread_mutex_lock(&d->mu);
    d->ctr.kernels++;
    pthread_mutex_unlock(&d->mu);
    model(s, &op, (k->flops > 0 ? k->flops : (double)k->n) / (d->gflops * 1e9));
    return submit(s, &op);
}

zero_status zero_stream_sync(zero_stream *s) {
    if (!s) return ZERO_ERR_INVALID_ARG;
    s->d->vt->drain(s);
    const zero_status st = s->failed;
    if (st != ZERO_OK) snprintf(s->d->err, sizeof s->d->err, "%s", s->err);
    s->failed = ZERO_OK;
    return st;
}

zero_status zero_device_sync(zero_device *d) {
    if (!d) return ZERO_ERR_INVALID_ARG;
    zero_status first = ZERO_OK;
    for (zero_stream *s = d->streams; s; s = s->next) {
        const zero_status st = zero_stream_sync(s);
        if (first == ZERO_OK) first = st;
    }
    reap(d, 0);
    return first;
}

/* ---------------------------------------------------------------- events */
zero_status zero_event_create(zero_device *d, zero_event **out) {
    if (!d || !out) return ZERO_ERR_INVALID_ARG;
    zero_event *ev = calloc(1, sizeof *ev);
    if (!ev) {
        zero__errorf(d->err, sizeof d->err, "device: out of memory for an event");
        return ZERO_ERR_NOMEM;
    }
    ev->d = d;
    if (d->vt->event_create) {
        const zero_status st = d->vt->event_create(ev);
        if (st != ZERO_OK) {
            free(ev);
            return st;
        }
    }
    pthread_mutex_init(&ev->mu, NULL);
    pthread_cond_init(&ev->cv, NULL);
    *out = ev;
    return ZERO_OK;
}

void zero_event_free(zero_event *ev) {
    if (!ev) return;
    (void)zero_event_sync(ev);
    if (ev->d->vt->event_destroy) ev->d->vt->event_destroy(ev);
    pthread_cond_destroy(&ev->cv);
    pthread_mutex_destroy(&ev->mu);
    free(ev);
}

void zero__event_complete(zero_event *ev, uint64_t gen) {
    pthread_mutex_lock(&ev->mu);
    if (gen > ev->done) ev->done = gen;
    pthread_cond_broadcast(&ev->cv);
    pthread_mutex_unlock(&ev->mu);
}

void zero__event_block(zero_event *ev, uint64_t gen) {
    pthread_mutex_lock(&ev->mu);
    while (ev->done < gen) pthread_cond_wait(&ev->cv, &ev->mu);
    pthread_mutex_unlock(&ev->mu);
}

zero_status zero_event_record(zero_event *ev, zero_stream *s) {
    if (!ev || !s || ev->d != s->d) return ZERO_ERR_INVALID_ARG;
    pthread_mutex_lock(&ev->mu);
    const uint64_t gen = ++ev->recorded;
    pthread_mutex_unlock(&ev->mu);
    ev->mtime = s->mclock;
    zero__op op = {.kind = ZERO__OP_RECORD, .ev = ev, .gen = gen};
    return s->d->vt->submit(s, &op);
}

zero_status zero_stream_wait(zero_stream *s, zero_event *ev) {
    if (!ev || !s || ev->d != s->d) return ZERO_ERR_INVALID_ARG;
    pthread_mutex_lock(&ev->mu);
    const uint64_t gen = ev->recorded;
    pthread_mutex_unlock(&ev->mu);
    if (gen == 0) return ZERO_OK; /* never recorded: nothing to wait for */
    if (ev->mtime > s->mclock) s->mclock = ev->mtime;
    zero__op op = {.kind = ZERO__OP_WAIT, .ev = ev, .gen = gen};
    return s->d->vt->submit(s, &op);
}

int zero_event_query(zero_event *ev) {
    if (!ev) return 1;
    if (ev->d->vt->host_waits) ev->d->vt->host_waits(ev);
    if (ev->d->vt->event_query) return ev->d->vt->event_query(ev);
    pthread_mutex_lock(&ev->mu);
    const int r = ev->done >= ev->recorded;
    pthread_mutex_unlock(&ev->mu);
    return r;
}

zero_status zero_event_sync(zero_event *ev) {
    if (!ev) return ZERO_ERR_INVALID_ARG;
    if (ev->d->vt->host_waits) ev->d->vt->host_waits(ev);
    if (ev->d->vt->event_sync) return ev->d->vt->event_sync(ev);
    pthread_mutex_lock(&ev->mu);
    const uint64_t gen = ev->recorded;
    pthread_mutex_unlock(&ev->mu);
    zero__event_block(ev, gen);
    return ZERO_OK;
}

void zero_device_counters_get(const zero_device *d, zero_device_counters *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (!d) return;
    pthread_mutex_lock((pthread_mutex_t *)&d->mu);
    *out = d->ctr;
    pthread_mutex_unlock((pthread_mutex_t *)&d->mu);
}

/* ---------------------------------------------------------------- running an operation */
void zero__op_run(const zero__op *op) {
    switch (op->kind) {
    case ZERO__OP_COPY: memmove(op->dst, op->src, op->n); break;
    case ZERO__OP_SET: memset(op->dst, op->byte, op->n); break;
    case ZERO__OP_KERNEL: zero__dev_kernels[op->k.id](&op->k); break;
    default: break;
    }
}
