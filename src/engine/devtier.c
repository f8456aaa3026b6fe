/* The engine's device tier (docs/DEVICE.md, docs/ENGINE.md "The device tier"): where the
 * ownership table's tier is TIER_DEVICE the array lives in the device's memory, and every engine
 * operation on it goes through the device layer — copies, memsets and the kernels (conversions,
 * sums, sums of squares, the optimizer step) queued on the engine's stream, collectives through
 * the host-staged device collectives of src/comm. The model computes on the host: what the engine
 * hands it (the fp32 view of a gathered unit, its gradient buffer) is host memory, filled from and
 * folded into the device arrays here.
 *
 * e->dev is NULL on the cpu backend: each helper is then the host operation the engine ran before
 * the device tier existed, on the same numbers, so the cpu path costs nothing new. On a device the
 * kernels are the host kernels' scalar bodies (src/device/kernels.c), which every vector body of
 * the host equals bit for bit: a run on the fake device gives the cpu backend's bits.
 *
 * Order: every device operation goes on the one engine stream, in program order; a result the
 * host reads (a copy into pageable host memory, the sums of squares) returns once it has run. */
#include "device/internal.h"
#include "engine/internal.h"
#include "optim/internal.h"
#include "quant/internal.h"

#include <stdlib.h>
#include <string.h>

#define HOST_CHUNK ((uint64_t)1 << 18) /* elements converted on the host per upload or download */
#define DEV_CHUNK  ((uint64_t)1 << 18) /* fp32 gradient elements widened on the device per optimizer launch */

/* A device call failed with st (ZERO_ERR_NOMEM past a capacity; a stream's failure at its sync). */
static zero_status dev_fail(zero_engine *e, zero_status st, const char *what) {
    return zero__eng_fail(e, st, "%s on the %s device: %s", what, zero_device_backend(e->dev),
                          zero_device_last_error(e->dev));
}

zero_status zero__dev_open(zero_engine *e, const zero_device_options *o, zero_error *err) {
    zero_device_options d;
    zero_device_options_default(&d);
    if (o) d = *o;
    const char *name = d.backend ? d.backend : getenv("ZERO_DEVICE");
    if (!name || !*name || !strcmp(name, "cpu")) return ZERO_OK; /* host memory: the host path */
    zero_status s = zero_device_create(&e->dev, &d, err);
    if (s != ZERO_OK) return s;
    if ((s = zero_stream_create(e->dev, &e->stream)) != ZERO_OK) {
        if (err) ZERO__ERR(err, "engine: the device's stream: %s", zero_device_last_error(e->dev));
        zero_device_free(e->dev);
        e->dev = NULL;
    }
    return s;
}

void zero__dev_close(zero_engine *e) {
    if (!e->dev) return;
    (void)zero_stream_sync(e->stream);
    zero_device_release(e->dev, e->qmap);
    e->qmap = NULL;
    zero_stream_free(e->stream);
    zero_device_free(e->dev);
    e->stream = NULL;
    e->dev = NULL;
}

const char *zero_engine_device(const zero_engine *e) { return e && e->dev ? zero_device_backend(e->dev) : "cpu"; }

void zero_engine_device_mem_stats(const zero_engine *e, zero_mem_space space, zero_mem_stats *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (e && e->dev) zero_device_mem_stats(e->dev, space, out);
}

void zero_engine_device_counters(const zero_engine *e, zero_device_counters *out) {
    if (!out) return;
    memset(out, 0, sizeof *out);
    if (e && e->dev) zero_device_counters_get(e->dev, out);
}

int zero__dev_is(const zero_engine *e, const void *p) {
    return e->dev && p && zero_device_space_of(e->dev, p) == ZERO_SPACE_DEVICE;
}

/* ---------------------------------------------------------------- memory */
void *zero__eng_alloc(zero_engine *e, int tier, zero_mem_category c, uint64_t n, size_t elem, int *fail) {
    if (n == 0) return NULL;
    void *p = NULL;
    if (tier == TIER_DEVICE || tier == TIER_PINNED) {
        const zero_mem_space sp = tier == TIER_DEVICE ? ZERO_SPACE_DEVICE : ZERO_SPACE_HOST_PINNED;
        if (!e->dev || zero_device_alloc(e->dev, sp, c, (size_t)(n * elem), &p) != ZERO_OK) {
            if (!e->alloc_err[0] && e->dev)
                snprintf(e->alloc_err, sizeof e->alloc_err, "%s", zero_device_last_error(e->dev));
            *fail = 1;
            return NULL;
        }
        /* zeroed, as the host arrays are (new device memory holds NaN) */
        if (zero__x_zero(e, p, (size_t)(n * elem)) != ZERO_OK) {
            zero_device_release(e->dev, p);
            *fail = 1;
            return NULL;
        }
        return p;
    }
    p = zero_mem_calloc(&e->acct, c, (size_t)(n * elem));
    if (!p) *fail = 1;
    return p;
}

void zero__eng_release(zero_engine *e, void *p) {
    if (!p) return;
    if (e->dev && zero_device_space_of(e->dev, p) >= 0) zero_device_release(e->dev, p);
    else zero_mem_free(&e->acct, p);
}

void *zero__dbuf_get(zero_engine *e, size_t bytes, int zeroed) {
    if (!e->dev) return zero__buf_get(e, bytes, zeroed);
    void *p = NULL;
    if (zero_device_alloc(e->dev, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, bytes, &p) != ZERO_OK) return NULL;
    if (zeroed && zero__x_zero(e, p, bytes) != ZERO_OK) {
        zero_device_release(e->dev, p);
        return NULL;
    }
    return p;
}

void zero__dbuf_put(zero_engine *e, void *p) {
    if (!p) return;
    if (!e->dev) {
        zero__buf_put(e, p);
        return;
    }
    /* nothing queued may still use it */
    (void)zero_stream_sync(e->stream);
    zero_device_release(e->dev, p);
}

/* ---------------------------------------------------------------- copies and conversions */
zero_status zero__x_copy(zero_engine *e, void *dst, const void *src, size_t bytes) {
    if (!bytes) return ZERO_OK;
    if (!e->dev) {
        memmove(dst, src, bytes);
        return ZERO_OK;
    }
    zero_status s = zero_stream_copy(e->stream, dst, src, bytes);
    if (s == ZERO_OK) s = zero_stream_sync(e->stream);
    return s == ZERO_OK ? ZERO_OK : dev_fail(e, s, "copy");
}

zero_status zero__x_zero(zero_engine *e, void *dst, size_t bytes) {
    if (!bytes || !dst) return ZERO_OK;
    if (!zero__dev_is(e, dst)) { /* host memory, pinned included: at once, as the host's writes after it */
        memset(dst, 0, bytes);
        return ZERO_OK;
    }
    zero_status s = zero_stream_memset(e->stream, dst, 0, bytes);
    return s == ZERO_OK ? ZERO_OK : dev_fail(e, s, "memset");
}

/* n elements between host fp32 `host` and `dev` (device memory, dtype dt) through a host buffer
 * of the working size, a chunk at a time: up (host to device) or down. */
static zero_status staged(zero_engine *e, int up, float *host, void *dev, zero_dtype dt, uint64_t n) {
    const size_t es = zero_dtype_size(dt);
    if (dt == ZERO_DTYPE_FP32)
        return up ? zero__x_copy(e, dev, host, (size_t)n * 4) : zero__x_copy(e, host, dev, (size_t)n * 4);
    const uint64_t c = n < HOST_CHUNK ? n : HOST_CHUNK;
    void *tmp = zero__buf_get(e, (size_t)(c * es), 0);
    if (!tmp) return zero__eng_fail(e, ZERO_ERR_NOMEM, "device %s: out of memory", up ? "upload" : "download");
    zero_status s = ZERO_OK;
    for (uint64_t a = 0; a < n && s == ZERO_OK; a += c) {
        const uint64_t k = n - a < c ? n - a : c;
        char *d = (char *)dev + a * es;
        if (up) {
            zero_convert(host + a, ZERO_DTYPE_FP32, tmp, dt, (size_t)k, ZERO_IMPL_AUTO);
            s = zero__x_copy(e, d, tmp, (size_t)(k * es));
        } else if ((s = zero__x_copy(e, tmp, d, (size_t)(k * es))) == ZERO_OK) {
            zero_convert(tmp, dt, host + a, ZERO_DTYPE_FP32, (size_t)k, ZERO_IMPL_AUTO);
        }
    }
    zero__buf_put(e, tmp);
    return s;
}

zero_status zero__x_store(zero_engine *e, void *dst, zero_dtype ddt, const float *src, uint64_t n) {
    if (!n) return ZERO_OK;
    if (zero__dev_is(e, dst)) return staged(e, 1, (float *)src, dst, ddt, n);
    zero_convert(src, ZERO_DTYPE_FP32, dst, ddt, (size_t)n, ZERO_IMPL_AUTO);
    return ZERO_OK;
}

zero_status zero__x_load(zero_engine *e, float *dst, const void *src, zero_dtype sdt, uint64_t n) {
    if (!n) return ZERO_OK;
    if (zero__dev_is(e, src)) return staged(e, 0, dst, (void *)src, sdt, n);
    zero_convert(src, sdt, dst, ZERO_DTYPE_FP32, (size_t)n, ZERO_IMPL_AUTO);
    return ZERO_OK;
}

zero_status zero__x_convert(zero_engine *e, const void *src, zero_dtype sdt, void *dst, zero_dtype ddt, uint64_t n) {
    if (!n) return ZERO_OK;
    if (!zero__dev_is(e, dst)) {
        zero_convert(src, sdt, dst, ddt, (size_t)n, ZERO_IMPL_AUTO);
        return ZERO_OK;
    }
    if (sdt == ddt) {
        zero_status s = zero_stream_copy(e->stream, dst, src, (size_t)(n * zero_dtype_size(sdt)));
        return s == ZERO_OK ? ZERO_OK : dev_fail(e, s, "copy");
    }
    const int narrow = sdt == ZERO_DTYPE_FP32;
    zero__kcall k = {.id =
                         narrow ? (ddt == ZERO_DTYPE_BF16 ? ZERO__K_F32_TO_BF16 : ZERO__K_F32_TO_FP16) : ZERO__K_WIDEN,
                     .n = n,
                     .p = {(void *)src, dst},
                     .a = {(double)(narrow ? ddt : sdt)}};
    zero_status s = zero__stream_launch(e->stream, &k);
    return s == ZERO_OK ? ZERO_OK : dev_fail(e, s, "conversion");
}

/* ---------------------------------------------------------------- overlapped uploads */
void zero__upl_open(zero_engine *e, zero__upl *u, size_t bytes) {
    memset(u, 0, sizeof *u);
    u->bytes = e->dev ? bytes : 0;
}

/* Queues the copy of what the current buffer holds to its place on the device. */
static zero_status upl_send(zero_engine *e, zero__upl *u) {
    const int b = u->next;
    if (!u->fill) return ZERO_OK;
    zero_status s = zero_stream_copy(e->stream, u->dst, u->buf[b], u->fill);
    if (s == ZERO_OK) s = zero_event_record(u->ev[b], e->stream);
    if (s == ZERO_OK && e->sync_copies) s = zero_event_sync(u->ev[b]);
    if (s != ZERO_OK) return dev_fail(e, s, "upload");
    u->used[b] = 1;
    u->next = b ^ 1;
    u->fill = 0;
    u->dst = NULL;
    u->array = NULL;
    return ZERO_OK;
}

zero_status zero__upl_take(zero_engine *e, zero__upl *u, const void *array, void *dst, size_t bytes, void **out) {
    *out = NULL;
    if (bytes > u->bytes)
        return zero__eng_fail(e, ZERO_ERR_INTERNAL, "upload of %zu bytes: the buffers hold %zu", bytes, u->bytes);
    zero_status s;
    /* what does not continue the buffer's range in the same array (two arrays may lie end to end:
     * a copy stays inside one block), or does not fit, starts the next */
    if (u->fill && (array != u->array || (char *)u->dst + u->fill != (char *)dst || u->fill + bytes > u->bytes) &&
        (s = upl_send(e, u)) != ZERO_OK)
        return s;
    const int b = u->next;
    if (!u->fill) {
        if (!u->buf[b]) { /* first use: the buffer and its event (no pinned memory where nothing goes up) */
            if (zero_device_alloc(e->dev, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, u->bytes, &u->buf[b]) != ZERO_OK ||
                zero_event_create(e->dev, &u->ev[b]) != ZERO_OK)
                return dev_fail(e, ZERO_ERR_NOMEM, "the upload buffers");
        } else if (u->used[b] && !e->test_skip_wait) {
            /* the wait the test switch drops: the host would then overwrite a buffer whose copy
             * may not have run, and the device receive later numbers (the fake device's delays
             * make that a wrong parameter, which the test sees) */
            if ((s = zero_event_sync(u->ev[b])) != ZERO_OK) return dev_fail(e, s, "upload");
        }
        u->dst = dst;
        u->array = array;
    }
    *out = (char *)u->buf[b] + u->fill;
    u->fill += bytes;
    return ZERO_OK;
}

zero_status zero__upl_flush(zero_engine *e, zero__upl *u) { return upl_send(e, u); }

zero_status zero__upl_close(zero_engine *e, zero__upl *u) {
    if (!e->dev || !u->bytes) return ZERO_OK;
    zero_status s = upl_send(e, u);
    if (u->used[0] || u->used[1]) {
        const zero_status w = zero_stream_sync(e->stream);
        if (w != ZERO_OK && s == ZERO_OK) s = dev_fail(e, w, "upload");
    }
    for (int b = 0; b < 2; b++) {
        if (u->buf[b]) zero_device_release(e->dev, u->buf[b]);
        if (u->ev[b]) zero_event_free(u->ev[b]);
    }
    memset(u, 0, sizeof *u);
    return s;
}

/* ---------------------------------------------------------------- kernels */
static zero_status launch(zero_engine *e, const zero__kcall *k, const char *what) {
    zero_status s = zero__stream_launch(e->stream, k);
    return s == ZERO_OK ? ZERO_OK : dev_fail(e, s, what);
}

zero_status zero__x_add(zero_engine *e, void *dst, const void *src, uint64_t n) {
    if (!n) return ZERO_OK;
    if (!e->dev) {
        zero__wadd(e, dst, src, n);
        return ZERO_OK;
    }
    zero__kcall k = {.id = ZERO__K_ADD, .n = n, .p = {dst, (void *)src}, .a = {(double)e->wdt}};
    zero_status s = launch(e, &k, "gradient sum");
    if (s == ZERO_OK &&
        !zero__dev_is(e, dst)) { /* into pinned host memory (ZeRO-Offload's gradient): the host reads it next */
        s = zero_stream_sync(e->stream);
        if (s != ZERO_OK) return dev_fail(e, s, "gradient sum");
    }
    return s;
}

zero_status zero__x_accum_f32(zero_engine *e, void *dst, const float *src, uint64_t n) {
    if (!n) return ZERO_OK;
    if (!zero__dev_is(e, dst)) {
        zero__wadd_f32(e, dst, src, n);
        return ZERO_OK;
    }
    /* the host's fp32 gradient goes over in chunks, each added on the device */
    const uint64_t c = n < DEV_CHUNK ? n : DEV_CHUNK;
    float *tmp = zero__dbuf_get(e, (size_t)(c * 4), 0);
    if (!tmp) return dev_fail(e, ZERO_ERR_NOMEM, "gradient accumulation");
    zero_status s = ZERO_OK;
    for (uint64_t a = 0; a < n && s == ZERO_OK; a += c) {
        const uint64_t m = n - a < c ? n - a : c;
        s = zero__x_copy(e, tmp, src + a, (size_t)(m * 4));
        zero__kcall k = {
            .id = ZERO__K_ACCUM_F32, .n = m, .p = {(char *)dst + a * e->wsize, tmp}, .a = {(double)e->wdt}};
        if (s == ZERO_OK) s = launch(e, &k, "gradient accumulation");
    }
    zero__dbuf_put(e, tmp);
    return s;
}

zero_status zero__x_sumsq(zero_engine *e, const void *g, uint64_t n, uint64_t block, double *out) {
    const uint64_t nb = (n + block - 1) / block;
    if (!nb) return ZERO_OK;
    double *dout = zero__dbuf_get(e, (size_t)(nb * sizeof(double)), 0);
    if (!dout) return dev_fail(e, ZERO_ERR_NOMEM, "sum of squares");
    zero__kcall k = {.id = ZERO__K_SUMSQ,
                     .n = n,
                     .p = {(void *)g, dout},
                     .a = {(double)e->wdt, (double)block},
                     .flops = 2.0 * (double)n};
    zero_status s = launch(e, &k, "sum of squares");
    if (s == ZERO_OK) s = zero__x_copy(e, out, dout, (size_t)(nb * sizeof(double)));
    zero__dbuf_put(e, dout);
    return s;
}

/* The three maps of quant/internal.h (ZERO__QMAP_*) in device memory, uploaded at the first use
 * (3 KiB of buffers). */
static const float *qmap_of(zero_engine *e, int map) {
    if (!e->qmap) {
        float *m = NULL;
        if (zero_device_alloc(e->dev, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, 3 * 256 * 4, (void **)&m) != ZERO_OK)
            return NULL;
        for (int i = 0; i < 3; i++)
            if (zero__x_copy(e, m + 256 * i, zero__quant_map(i), 256 * 4) != ZERO_OK) {
                zero_device_release(e->dev, m);
                return NULL;
            }
        e->qmap = m;
    }
    return e->qmap + 256 * map;
}

zero_status zero__x_q8_load(zero_engine *e, const uint8_t *idx, const float *absmax, int map, uint64_t block,
                            uint64_t n, float *dst) {
    if (!n) return ZERO_OK;
    const float *code = qmap_of(e, map);
    if (!code) return dev_fail(e, ZERO_ERR_NOMEM, "the 8-bit maps");
    zero__kcall k = {.id = ZERO__K_Q8_LOAD,
                     .n = n,
                     .p = {(void *)idx, (void *)code, (void *)absmax, dst},
                     .a = {(double)block},
                     .flops = (double)n};
    return launch(e, &k, "8-bit decode");
}

zero_status zero__x_q8_store(zero_engine *e, const float *x, int map, uint64_t block, uint64_t n, uint8_t *idx,
                             float *absmax) {
    if (!n) return ZERO_OK;
    const float *code = qmap_of(e, map);
    if (!code) return dev_fail(e, ZERO_ERR_NOMEM, "the 8-bit maps");
    zero__kcall k = {.id = ZERO__K_Q8_STORE,
                     .n = n,
                     .p = {(void *)x, (void *)code, idx, absmax},
                     .a = {(double)block},
                     .flops = 10.0 * (double)n};
    return launch(e, &k, "8-bit coding");
}

zero_status zero__x_optim(zero_engine *e, const zero_optim_hparams *h, float *master, float *s0, float *s1,
                          const void *grad, float gscale, float decay, uint64_t n, void *out) {
    zero__optim_k c;
    zero__optim_consts(h, e->step + 1, gscale, decay, &c);
    const int states = zero_optim_state_count(h->type, h->momentum);
    if (states < 1) s0 = NULL;
    if (states < 2) s1 = NULL;
    const int half = e->wdt != ZERO_DTYPE_FP32;
    if (!half && out == (void *)master) out = NULL;
    const uint64_t ch = n < DEV_CHUNK ? n : DEV_CHUNK;
    /* out is device or pinned memory (the parameters on the device, in pinned memory, or in the
     * NVMe pool, pinned on a device): the kernels write it in place */
    float *tmp = half ? zero__dbuf_get(e, (size_t)(ch * 4), 0) : NULL;
    if (half && !tmp) return dev_fail(e, ZERO_ERR_NOMEM, "optimizer step");
    zero_status s = ZERO_OK;
    for (uint64_t a = 0; a < n && s == ZERO_OK; a += ch) {
        const uint64_t m = n - a < ch ? n - a : ch;
        float *gf = (float *)grad + a;
        if (half) {
            zero__kcall w = {
                .id = ZERO__K_WIDEN, .n = m, .p = {(char *)grad + a * e->wsize, tmp}, .a = {(double)e->wdt}};
            s = launch(e, &w, "optimizer step");
            gf = tmp;
        }
        zero__kcall k = {.id = ZERO__K_OPTIM,
                         .n = m,
                         .p = {master + a, s0 ? s0 + a : NULL, s1 ? s1 + a : NULL, gf},
                         .optim = c,
                         .flops = 12.0 * (double)m};
        if (s == ZERO_OK) s = launch(e, &k, "optimizer step");
        char *o = out ? (char *)out + a * e->wsize : NULL;
        if (s == ZERO_OK && o && half) {
            zero__kcall nk = {.id = e->wdt == ZERO_DTYPE_BF16 ? ZERO__K_F32_TO_BF16 : ZERO__K_F32_TO_FP16,
                              .n = m,
                              .p = {master + a, o}};
            s = launch(e, &nk, "optimizer step");
        }
        /* fp32 with a master of its own (the parameters off the device): the working copy is a copy */
        if (s == ZERO_OK && o && !half) s = zero__x_copy(e, o, master + a, (size_t)(m * e->wsize));
    }
    zero__dbuf_put(e, tmp);
    return s;
}

/* ---------------------------------------------------------------- collectives */
zero_status zero__x_all_reduce(zero_engine *e, void *buf, uint64_t n, zero_request **req) {
    if (!e->dev) return zero_comm_iall_reduce(e->data, buf, buf, (size_t)n, e->wdt, ZERO_OP_SUM, req);
    if (req) return zero_comm_iall_reduce_device(e->data, e->stream, buf, buf, (size_t)n, e->wdt, ZERO_OP_SUM, req);
    return zero_comm_all_reduce_device(e->data, e->stream, buf, buf, (size_t)n, e->wdt, ZERO_OP_SUM);
}

zero_status zero__x_reduce_scatter(zero_engine *e, const void *send, void *recv, uint64_t n, size_t qblock,
                                   zero_request **req) {
    if (qblock) { /* qgZ: the non-blocking forms (waited for here when req is NULL) */
        zero_request *mine = NULL, **r = req ? req : &mine;
        zero_status s =
            e->dev ? zero_comm_ireduce_scatter_q8_device(e->data, e->stream, send, recv, (size_t)n, e->wdt, qblock, r)
                   : zero_comm_ireduce_scatter_q8(e->data, send, recv, (size_t)n, e->wdt, qblock, r);
        return s == ZERO_OK && !req ? zero_request_wait(mine) : s;
    }
    if (!e->dev) return zero_comm_ireduce_scatter(e->data, send, recv, (size_t)n, e->wdt, ZERO_OP_SUM, req);
    if (req)
        return zero_comm_ireduce_scatter_device(e->data, e->stream, send, recv, (size_t)n, e->wdt, ZERO_OP_SUM, req);
    return zero_comm_reduce_scatter_device(e->data, e->stream, send, recv, (size_t)n, e->wdt, ZERO_OP_SUM);
}

zero_request **zero__x_async(const zero_engine *e, zero_request **req) { return e->dev ? NULL : req; }

zero_status zero__x_all_gather(zero_engine *e, zero_comm *c, const void *send, void *recv, uint64_t n, zero_dtype dt,
                               zero_request **req) {
    if (!e->dev) {
        if (req) return zero_comm_iall_gather(c, send, recv, (size_t)n, dt, req);
        return zero_comm_all_gather(c, send, recv, (size_t)n, dt);
    }
    if (req) return zero_comm_iall_gather_device(c, e->stream, send, recv, (size_t)n, dt, req);
    return zero_comm_all_gather_device(c, e->stream, send, recv, (size_t)n, dt);
}
