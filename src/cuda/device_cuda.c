/* The cuda backend of the device layer (docs/DEVICE.md, "The cuda backend"): device memory from a
 * stream-ordered pool, pinned host memory from cudaHostAlloc, one CUDA stream and event per
 * zero_stream and zero_event, copies and memsets queued on the stream, the table's kernels from
 * kernels.cu. Built into libzero-cuda.so, which libzero loads when a device names "cuda"; it
 * calls nothing of libzero's (every symbol here is its own or the CUDA runtime's). */
#include "cuda/cuda.h"
#include "device/internal.h"

#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct cuda_dev {
    int ordinal;
    cudaMemPool_t pool; /* NULL where the device has no memory pools: cudaMalloc */
    cudaStream_t alloc; /* allocations and frees; a free runs after what every stream queued */
    cudaEvent_t fence;  /* orders a free after the streams */
} cuda_dev;

/* "call: message (cudaErrorName code)" into dst */
static void cuda_msg(char *dst, size_t cap, const char *call, cudaError_t e) {
    snprintf(dst, cap, "%s: %s (%s %d)", call, cudaGetErrorString(e), cudaGetErrorName(e), (int)e);
}

/* The status of a CUDA error: memory is ZERO_ERR_NOMEM, an argument the runtime refused
 * ZERO_ERR_INVALID_ARG, the rest (a fault in a kernel, a lost device) ZERO_ERR_IO: the device's
 * own failure, named in the message. */
static zero_status cuda_status(cudaError_t e) {
    return e == cudaErrorMemoryAllocation ? ZERO_ERR_NOMEM
           : e == cudaErrorInvalidValue   ? ZERO_ERR_INVALID_ARG
                                          : ZERO_ERR_IO;
}

static zero_status dev_fail(zero_device *d, const char *call, cudaError_t e) {
    char m[400];
    cuda_msg(m, sizeof m, call, e);
    snprintf(d->err, sizeof d->err, "cuda device %d: %s", ((cuda_dev *)d->impl)->ordinal, m);
    return cuda_status(e);
}

static void use(const zero_device *d) { (void)cudaSetDevice(((const cuda_dev *)d->impl)->ordinal); }

/* ---------------------------------------------------------------- the device */
static zero_status cuda_create(zero_device *d, const zero_device_options *o, zero_error *err) {
    int count = 0;
    cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess || count < 1) {
        char m[300];
        if (e != cudaSuccess) cuda_msg(m, sizeof m, "cudaGetDeviceCount", e);
        else snprintf(m, sizeof m, "cudaGetDeviceCount: 0 devices");
        if (err) snprintf(err->msg, sizeof err->msg, "no CUDA device (%s)", m);
        return ZERO_ERR_UNSUPPORTED;
    }
    int ordinal = 0;
    const char *env = getenv("ZERO_CUDA_DEVICE");
    if (env && *env) {
        char *end = NULL;
        const long v = strtol(env, &end, 10);
        if (*end || end == env || v < 0 || v >= count) {
            if (err)
                snprintf(err->msg, sizeof err->msg, "ZERO_CUDA_DEVICE '%s': expected a device number below %d", env,
                         count);
            return ZERO_ERR_CONFIG;
        }
        ordinal = (int)v;
    }
    cuda_dev *c = calloc(1, sizeof *c);
    if (!c) {
        if (err) snprintf(err->msg, sizeof err->msg, "cuda device: out of memory");
        return ZERO_ERR_NOMEM;
    }
    c->ordinal = ordinal;
    const char *call = "cudaSetDevice";
    size_t free_b = 0, total_b = 0;
    int pools = 0;
    if ((e = cudaSetDevice(ordinal)) != cudaSuccess) goto fail;
    call = "cudaMemGetInfo";
    if ((e = cudaMemGetInfo(&free_b, &total_b)) != cudaSuccess) goto fail;
    if (o->capacity > total_b) {
        if (err)
            snprintf(err->msg, sizeof err->msg,
                     "device capacity %llu bytes: cuda device %d has %llu bytes (expected at most that, or 0)",
                     (unsigned long long)o->capacity, ordinal, (unsigned long long)total_b);
        free(c);
        return ZERO_ERR_CONFIG;
    }
    call = "cudaStreamCreateWithFlags";
    if ((e = cudaStreamCreateWithFlags(&c->alloc, cudaStreamNonBlocking)) != cudaSuccess) goto fail;
    call = "cudaEventCreateWithFlags";
    if ((e = cudaEventCreateWithFlags(&c->fence, cudaEventDisableTiming)) != cudaSuccess) goto fail_stream;
    call = "cudaDeviceGetAttribute";
    if ((e = cudaDeviceGetAttribute(&pools, cudaDevAttrMemoryPoolsSupported, ordinal)) != cudaSuccess) goto fail_event;
    if (pools) {
        struct cudaMemPoolProps props;
        memset(&props, 0, sizeof props);
        props.allocType = cudaMemAllocationTypePinned;
        props.handleTypes = cudaMemHandleTypeNone;
        props.location.type = cudaMemLocationTypeDevice;
        props.location.id = ordinal;
        call = "cudaMemPoolCreate";
        if ((e = cudaMemPoolCreate(&c->pool, &props)) != cudaSuccess) goto fail_event;
        /* freed memory stays in the pool for the next allocation (the engine's sizes repeat) */
        uint64_t keep = UINT64_MAX;
        call = "cudaMemPoolSetAttribute";
        if ((e = cudaMemPoolSetAttribute(c->pool, cudaMemPoolAttrReleaseThreshold, &keep)) != cudaSuccess) {
            cudaMemPoolDestroy(c->pool);
            goto fail_event;
        }
    }
    d->impl = c;
    d->capacity[ZERO_SPACE_DEVICE] = o->capacity ? o->capacity : (uint64_t)total_b;
    d->capacity[ZERO_SPACE_HOST_PINNED] = o->pinned_capacity; /* 0: what the host can pin */
    return ZERO_OK;
fail_event:
    cudaEventDestroy(c->fence);
fail_stream:
    cudaStreamDestroy(c->alloc);
fail:
    if (err) {
        char m[300];
        cuda_msg(m, sizeof m, call, e);
        snprintf(err->msg, sizeof err->msg, "cuda device %d: %s", ordinal, m);
    }
    free(c);
    return cuda_status(e);
}

static void cuda_free(zero_device *d, int space, void *p, size_t bytes);

static void cuda_destroy(zero_device *d) {
    cuda_dev *c = d->impl;
    use(d);
    /* blocks left allocated go with the device */
    while (d->nblocks) {
        const zero__dev_block b = d->blocks[--d->nblocks];
        cuda_free(d, b.space, (void *)b.lo, b.bytes);
    }
    cudaStreamSynchronize(c->alloc);
    if (c->pool) cudaMemPoolDestroy(c->pool);
    cudaEventDestroy(c->fence);
    cudaStreamDestroy(c->alloc);
    free(c);
}

/* ---------------------------------------------------------------- memory */
static void *cuda_alloc(zero_device *d, int space, size_t bytes) {
    cuda_dev *c = d->impl;
    void *p = NULL;
    if (space == ZERO_SPACE_HOST) return aligned_alloc(ZERO__DEV_ALIGN, bytes);
    use(d);
    cudaError_t e;
    const char *call;
    if (space == ZERO_SPACE_HOST_PINNED) {
        call = "cudaHostAlloc";
        e = cudaHostAlloc(&p, bytes, cudaHostAllocPortable | cudaHostAllocMapped);
    } else if (c->pool) {
        /* stream-ordered on the allocation stream, then waited for: every stream may use it at once */
        call = "cudaMallocFromPoolAsync";
        e = cudaMallocFromPoolAsync(&p, bytes, c->pool, c->alloc);
        if (e == cudaSuccess) {
            call = "cudaStreamSynchronize";
            e = cudaStreamSynchronize(c->alloc);
        }
    } else {
        call = "cudaMalloc";
        e = cudaMalloc(&p, bytes);
    }
    if (e != cudaSuccess) {
        dev_fail(d, call, e);
        return NULL;
    }
    if ((uintptr_t)p % ZERO__DEV_ALIGN) { /* the runtime aligns to 256 bytes at least; the front relies on it */
        snprintf(d->err, sizeof d->err, "cuda device: %s gave %p, not %d-byte aligned", call, p, ZERO__DEV_ALIGN);
        cuda_free(d, space, p, bytes);
        return NULL;
    }
    return p;
}

static void cuda_free(zero_device *d, int space, void *p, size_t bytes) {
    (void)bytes;
    cuda_dev *c = d->impl;
    if (space == ZERO_SPACE_HOST) {
        free(p);
        return;
    }
    use(d);
    cudaError_t e = cudaSuccess;
    if (space == ZERO_SPACE_HOST_PINNED) {
        /* the host frees it at once: nothing queued may still read it */
        for (zero_stream *s = d->streams; s && e == cudaSuccess; s = s->next) e = cudaStreamSynchronize(s->impl);
        if (e == cudaSuccess) e = cudaFreeHost(p);
        if (e != cudaSuccess) dev_fail(d, "cudaFreeHost", e);
        return;
    }
    if (!c->pool) {
        e = cudaFree(p); /* cudaFree waits for the device */
        if (e != cudaSuccess) dev_fail(d, "cudaFree", e);
        return;
    }
    /* after what every stream has queued, without a host wait */
    for (zero_stream *s = d->streams; s && e == cudaSuccess; s = s->next) {
        e = cudaEventRecord(c->fence, s->impl);
        if (e == cudaSuccess) e = cudaStreamWaitEvent(c->alloc, c->fence, 0);
    }
    if (e == cudaSuccess) e = cudaFreeAsync(p, c->alloc);
    if (e != cudaSuccess) dev_fail(d, "cudaFreeAsync", e);
}

/* ---------------------------------------------------------------- streams */
static zero_status cuda_stream_create(zero_stream *s) {
    use(s->d);
    cudaStream_t cs = NULL;
    const cudaError_t e = cudaStreamCreateWithFlags(&cs, cudaStreamNonBlocking);
    if (e != cudaSuccess) return dev_fail(s->d, "cudaStreamCreateWithFlags", e);
    s->impl = cs;
    return ZERO_OK;
}

static void cuda_stream_destroy(zero_stream *s) {
    use(s->d);
    cudaStreamDestroy(s->impl);
}

static const char *const kernel_names[ZERO__K_COUNT] = {
    "fill_f32",  "axpy_f32", "f32_to_bf16", "f32_to_fp16", "optim",    "widen", "add",
    "accum_f32", "sumsq",    "nf4_load",    "q8_load",     "q8_store", "gemm"};

static zero_status cuda_submit(zero_stream *s, const zero__op *op) {
    zero_device *d = s->d;
    cudaStream_t cs = s->impl;
    use(d);
    cudaError_t e = cudaSuccess;
    const char *call = "";
    char kcall[64];
    const int pageable_dst = op->dst_space < 0 || op->dst_space == ZERO_SPACE_HOST;
    switch (op->kind) {
    case ZERO__OP_COPY: {
        call = "cudaMemcpyAsync";
        e = cudaMemcpyAsync(op->dst, op->src, op->n, cudaMemcpyDefault, cs);
        /* pageable host memory: the copy has run when the call returns (the contract) */
        if (e == cudaSuccess && (pageable_dst || op->src_space < 0 || op->src_space == ZERO_SPACE_HOST)) {
            call = "cudaStreamSynchronize (a copy from or to pageable host memory)";
            e = cudaStreamSynchronize(cs);
        }
        break;
    }
    case ZERO__OP_SET:
        if (op->dst_space == ZERO_SPACE_DEVICE) {
            call = "cudaMemsetAsync";
            e = cudaMemsetAsync(op->dst, op->byte, op->n, cs);
        } else { /* host memory (pinned or not): set by the host after what the stream queued */
            call = "cudaStreamSynchronize (a memset of host memory)";
            e = cudaStreamSynchronize(cs);
            if (e == cudaSuccess) memset(op->dst, op->byte, op->n);
        }
        break;
    case ZERO__OP_KERNEL:
        if (op->k.id == ZERO__K_GEMM) { /* cuBLASLt: its own statuses, its own line */
            char why[400];
            if (zero__cuda_gemm(&op->k.gemm, op->k.p, cs, why, sizeof why) == 0) return ZERO_OK;
            snprintf(d->err, sizeof d->err, "cuda device %d: %s", ((cuda_dev *)d->impl)->ordinal, why);
            return ZERO_ERR_IO;
        }
        snprintf(kcall, sizeof kcall, "kernel %s", kernel_names[op->k.id]);
        call = kcall;
        e = (cudaError_t)zero__cuda_kernel(op->k.id, op->k.n, op->k.p, op->k.a, &op->k.optim, cs);
        break;
    case ZERO__OP_RECORD:
        call = "cudaEventRecord";
        e = cudaEventRecord(op->ev->impl, cs);
        break;
    case ZERO__OP_WAIT:
        call = "cudaStreamWaitEvent";
        e = cudaStreamWaitEvent(cs, op->ev->impl, 0);
        break;
    }
    return e == cudaSuccess ? ZERO_OK : dev_fail(d, call, e);
}

static void cuda_drain(zero_stream *s) {
    use(s->d);
    const cudaError_t e = cudaStreamSynchronize(s->impl);
    if (e != cudaSuccess && s->failed == ZERO_OK) {
        char m[400];
        cuda_msg(m, sizeof m, "cudaStreamSynchronize", e);
        snprintf(s->err, sizeof s->err, "cuda device %d: a queued operation failed: %s",
                 ((cuda_dev *)s->d->impl)->ordinal, m);
        s->failed = cuda_status(e);
    }
}

/* ---------------------------------------------------------------- events */
static zero_status cuda_event_create(zero_event *ev) {
    use(ev->d);
    cudaEvent_t e = NULL;
    const cudaError_t r = cudaEventCreateWithFlags(&e, cudaEventDisableTiming);
    if (r != cudaSuccess) return dev_fail(ev->d, "cudaEventCreateWithFlags", r);
    ev->impl = e;
    return ZERO_OK;
}

static void cuda_event_destroy(zero_event *ev) {
    use(ev->d);
    cudaEventDestroy(ev->impl);
}

static int cuda_event_query(zero_event *ev) {
    use(ev->d);
    const cudaError_t r = cudaEventQuery(ev->impl);
    if (r == cudaErrorNotReady) return 0;
    if (r != cudaSuccess) dev_fail(ev->d, "cudaEventQuery", r); /* done as far as waiting goes: a sync reports it */
    return 1;
}

static zero_status cuda_event_sync(zero_event *ev) {
    use(ev->d);
    const cudaError_t r = cudaEventSynchronize(ev->impl);
    return r == cudaSuccess ? ZERO_OK : dev_fail(ev->d, "cudaEventSynchronize", r);
}

static const zero__dev_vtable cuda_vtable = {
    .name = "cuda",
    .asynchronous = 1,
    .modeled = 0,
    .create = cuda_create,
    .destroy = cuda_destroy,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .stream_create = cuda_stream_create,
    .stream_destroy = cuda_stream_destroy,
    .submit = cuda_submit,
    .drain = cuda_drain,
    .event_create = cuda_event_create,
    .event_destroy = cuda_event_destroy,
    .event_query = cuda_event_query,
    .event_sync = cuda_event_sync,
};

/* ---------------------------------------------------------------- what is installed */
static void append(char *buf, size_t cap, const char *fmt, ...) {
    const size_t len = strlen(buf);
    if (len + 1 >= cap) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf + len, cap - len, fmt, ap);
    va_end(ap);
}

/* A library's version through dlopen (the backend links neither: cuBLASLt and NCCL are named here
 * for the record; the GEMMs and collectives that will use them are not built yet). */
static void library_version(char *buf, size_t cap, const char *label, const char *const *names, const char *sym,
                            int nccl) {
    for (int i = 0; names[i]; i++) {
        void *h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) continue;
        void *f = dlsym(h, sym);
        long v = -1;
        if (f && nccl) {
            int x = 0;
            int (*get)(int *);
            *(void **)&get = f;
            if (get(&x) == 0) v = x;
        } else if (f) {
            size_t (*get)(void);
            *(void **)&get = f;
            v = (long)get();
        }
        dlclose(h);
        if (v >= 0) { /* both encode major * 10000 + minor * 100 + patch */
            append(buf, cap, ", %s %ld.%ld.%ld (%s)", label, v / 10000, v / 100 % 100, v % 100, names[i]);
            return;
        }
    }
    append(buf, cap, ", %s none", label);
}

static void cuda_describe(char *buf, size_t cap) {
    buf[0] = 0;
    int rt = 0, drv = 0, count = 0;
    cudaRuntimeGetVersion(&rt);
    append(buf, cap, "runtime %d.%d (static, built for sm_%s)", rt / 1000, rt % 1000 / 10, ZERO_CUDA_ARCHS);
    if (cudaDriverGetVersion(&drv) != cudaSuccess || drv == 0) append(buf, cap, ", driver none");
    else append(buf, cap, ", driver CUDA %d.%d", drv / 1000, drv % 1000 / 10);
    const cudaError_t e = cudaGetDeviceCount(&count);
    if (e != cudaSuccess) append(buf, cap, ", devices 0 (%s)", cudaGetErrorName(e));
    else {
        struct cudaDeviceProp p;
        append(buf, cap, ", devices %d", count);
        if (count > 0 && cudaGetDeviceProperties(&p, 0) == cudaSuccess)
            append(buf, cap, " (0: %s, sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                   (double)p.totalGlobalMem / (1024.0 * 1024 * 1024));
    }
    static const char *const lt[] = ZERO__CUBLASLT_NAMES;
    static const char *const nccl[] = {"libnccl.so.2", "libnccl.so", NULL};
    library_version(buf, cap, "cuBLASLt", lt, "cublasLtGetVersion", 0);
    library_version(buf, cap, "NCCL", nccl, "ncclGetVersion", 1);
}

static const zero__cuda_module module = {
    .abi = zero__dev_abi(),
    .vt = &cuda_vtable,
    .describe = cuda_describe,
};

__attribute__((visibility("default"))) const zero__cuda_module *zero__cuda_module_entry(void) { return &module; }
