/* Private structure of the device layer: the backend table, the side table of blocks, the
 * operations a stream queues, and the kernels a stream launches (the same bodies on every
 * backend: the fake device runs them in its worker process, the cpu backend on the caller). */
#ifndef ZERO_DEVICE_INTERNAL_H
#define ZERO_DEVICE_INTERNAL_H

#include "common/internal.h"
#include "device/kernel_ids.h"
#include "kernels/elem.h"
#include "zero/device.h"

#include <pthread.h>

#define ZERO__DEV_ALIGN  ZERO_DEVICE_ALIGN
#define ZERO__DEV_SPACES 3

/* ---------------------------------------------------------------- kernels */
/* A kernel call: an id (device/kernel_ids.h) and its arguments by value (pointers into device or
 * pinned memory, sizes and scalars), so that it can cross to the fake device's worker process. */
/* A GEMM as cuBLASLt takes it (column-major, as BLAS): C (m x n, fp32, leading dimension ldc) =
 * alpha op(A) op(B) + beta C, op(A) m x k (A stored k x m, lda >= k, when transa; else m x k,
 * lda >= m), op(B) k x n likewise, A and B both fp32 or both bf16 (dtype), products summed in fp32;
 * with bias, bias[i] (fp32, m values) is added to row i of the result (cuBLASLt's BIAS epilogue).
 * beta 0 does not read C. The operands are p[0] A, p[1] B, p[2] C, p[3] bias. */
typedef struct zero__gemm_k {
    int m, n, k;
    int transa, transb;
    int64_t lda, ldb, ldc;
    int dtype; /* ZERO_DTYPE_FP32 or ZERO_DTYPE_BF16: A's and B's */
    float alpha, beta;
    int bias;
} zero__gemm_k;

typedef struct zero__kcall {
    int id;
    uint64_t n;
    void *p[4];
    double a[4];
    double flops;        /* for the cost model (0: n) */
    zero__optim_k optim; /* ZERO__K_OPTIM: the step's constants (zero__optim_consts, src/optim) */
    zero__gemm_k gemm;   /* ZERO__K_GEMM: the call (n: its m x n results) */
} zero__kcall;

/* The row-major linear layers of the models (models/kernels' mk_linear: x (N, in), W (out, in),
 * y (N, out)) as column-major GEMMs — what a GPU model hands cuBLASLt: a row-major matrix is the
 * column-major storage of its transpose, so y = x W^T + b is y^T (out x N) = W' x^T with W' the
 * stored (in x out) read transposed, the bias on y^T's rows; dx = dy W is dx^T (in x N) = W^T
 * dy^T; dW = dy^T x is dW^T (in x out) = x^T dy (accumulated: beta 1). Each fills a descriptor
 * for kernel ZERO__K_GEMM with the operands in p[0..3] (A, B, C, bias), checked by
 * unit.test_device_gemm against mk_linear. */
void zero__gemm_linear_fwd(zero__kcall *k, int N, int in, int out, int dtype, const void *x, const void *w, float *y,
                           const float *bias);
void zero__gemm_linear_bwd_x(zero__kcall *k, int N, int in, int out, int dtype, const void *dy, const void *w,
                             float *dx);
void zero__gemm_linear_bwd_w(zero__kcall *k, int N, int in, int out, int dtype, const void *dy, const void *x,
                             float *dw);
typedef void (*zero__kernel_fn)(const zero__kcall *k);
extern const zero__kernel_fn zero__dev_kernels[ZERO__K_COUNT];
/* Queues k on s. ZERO_ERR_INVALID_ARG for an unknown id, a dtype or block the kernel does not
 * take, a missing operand, or an operand whose extent (n elements of its type) does not lie inside
 * one device or pinned block of s's device: every backend's kernels may then run unchecked. */
zero_status zero__stream_launch(zero_stream *s, const zero__kcall *k);
/* The kernel's name ("optim", "sumsq", ...; "unknown" outside the table), for messages and traces. */
const char *zero__kernel_name(int id);
/* The bytes of each operand of k (0: none), for the checks above and for a backend; -1 with a
 * message in why when k's id, dtype or block is not one the table has. */
int zero__kcall_extents(const zero__kcall *k, size_t ext[4], char *why, size_t cap);

/* ---------------------------------------------------------------- operations */
typedef enum { ZERO__OP_COPY, ZERO__OP_SET, ZERO__OP_KERNEL, ZERO__OP_RECORD, ZERO__OP_WAIT } zero__op_kind;
typedef struct zero__op {
    zero__op_kind kind;
    void *dst;
    const void *src;
    size_t n;
    int byte;
    int dst_space, src_space; /* zero_mem_space, or -1: pageable host memory */
    zero__kcall k;
    zero_event *ev;
    uint64_t gen; /* RECORD: the generation it completes; WAIT: the one it waits for */
    double cost;  /* the cost model's duration, in seconds (0 where nothing is modeled) */
} zero__op;

struct zero_event {
    zero_device *d;
    void *impl; /* the backend's event (cuda: a cudaEvent_t), where it keeps one */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t recorded;  /* generations recorded (host side) */
    uint64_t done;      /* generations whose record has run */
    double mtime;       /* the cost model's time of the last record */
    zero_stream *rec_s; /* the fake device's lazy streams: the stream of the last record, and */
    uint64_t rec_seq;   /* its place in that stream's queue */
};

struct zero_stream {
    zero_device *d;
    zero_stream *next; /* the device's streams */
    void *impl;
    double mclock;      /* the cost model: when this stream's last queued operation ends */
    zero_status failed; /* the first failure since the last sync (set by the backend) */
    char err[512];
};

/* ---------------------------------------------------------------- backends */
typedef struct zero__dev_vtable {
    const char *name;
    int asynchronous; /* streams run apart from the caller (copies from or to pageable memory are waited for) */
    int modeled;      /* the cost model applies (fake) */
    zero_status (*create)(zero_device *d, const zero_device_options *o, zero_error *err);
    void (*destroy)(zero_device *d);
    /* raw memory of a space (the front accounts it); NULL when the region is full */
    void *(*alloc)(zero_device *d, int space, size_t bytes);
    void (*free)(zero_device *d, int space, void *p, size_t bytes);
    zero_status (*stream_create)(zero_stream *s);
    void (*stream_destroy)(zero_stream *s);
    /* queues op (copied); runs it at once where the backend is synchronous */
    zero_status (*submit)(zero_stream *s, const zero__op *op);
    /* waits until s's queue is empty */
    void (*drain)(zero_stream *s);
    /* Optional: a backend whose events are its own (cuda). Without them the front keeps the
     * generations (zero__event_complete / zero__event_block) and the backend runs RECORD and
     * WAIT operations through those. */
    zero_status (*event_create)(zero_event *ev);
    void (*event_destroy)(zero_event *ev);
    int (*event_query)(zero_event *ev);        /* 1: done (or never recorded) */
    zero_status (*event_sync)(zero_event *ev); /* the device's err says why on failure */
    /* Optional: the host is about to wait for the device (an event's query or sync; drain calls
     * it itself): the fake device's lazy stream may then run what the event follows */
    void (*host_waits)(zero_event *ev);
} zero__dev_vtable;

extern const zero__dev_vtable zero__dev_cpu;
extern const zero__dev_vtable zero__dev_fake;

/* The cuda backend lives in a module of its own (libzero-cuda.so, src/cuda/), loaded on the first
 * create that names it, so that libzero and `zero` start where no CUDA library is installed
 * (docs/DEVICE.md, "The cuda backend"). The module's entry points, and the number that says both
 * sides were built from the same structures: */
#define ZERO__CUDA_MODULE_ENTRY "zero__cuda_module_entry"
typedef struct zero__cuda_module {
    uint64_t abi; /* zero__dev_abi() of the build that made the module */
    const zero__dev_vtable *vt;
    /* one line on the CUDA stack: the runtime built against, the driver found (or none), the
     * cuBLASLt and NCCL libraries found (or none) */
    void (*describe)(char *buf, size_t cap);
} zero__cuda_module;
typedef const zero__cuda_module *(*zero__cuda_module_fn)(void);
/* A fingerprint of the structures the front and a backend module share. */
#define zero__dev_abi()                                                                  \
    ((uint64_t)sizeof(struct zero_device) | (uint64_t)sizeof(struct zero_stream) << 12 | \
     (uint64_t)sizeof(struct zero_event) << 24 | (uint64_t)sizeof(zero__op) << 36 |      \
     (uint64_t)sizeof(zero__dev_vtable) << 48 | (uint64_t)ZERO__K_COUNT << 58)
/* The cuda module's table (NULL with why filled when it is not built or does not load). */
const zero__dev_vtable *zero__dev_cuda_load(char *why, size_t cap);

typedef struct zero__dev_block {
    uintptr_t lo;
    size_t bytes;
    int space, cat;
} zero__dev_block;

struct zero_device {
    const zero__dev_vtable *vt;
    void *impl;
    uint64_t capacity[ZERO__DEV_SPACES];
    zero__dev_block *blocks; /* sorted by lo */
    size_t nblocks, capblocks;
    zero_mem_stats stats[ZERO__DEV_SPACES];
    zero_device_counters ctr;
    zero_stream *streams;
    /* zero_device_release_after's blocks, each freed once its event has completed */
    struct zero__dev_deferred {
        void *p;
        zero_event *ev;
    } * deferred;
    size_t ndeferred, capdeferred;
    double gbps[ZERO_COPY_DIR_COUNT], latency_s, gflops;
    pthread_mutex_t mu; /* ctr, for backends that count on their stream threads */
    char err[512];
};

/* An event's record or wait, run where the backend runs operations. */
void zero__event_complete(zero_event *ev, uint64_t gen);
void zero__event_block(zero_event *ev, uint64_t gen);
/* Runs a copy, memset or kernel whose memory the caller can address (the cpu backend; the fake
 * device's worker). */
void zero__op_run(const zero__op *op);

#endif
