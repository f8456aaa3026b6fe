/* Private structure of the device layer: the backend table, the side table of blocks, the
 * operations a stream queues, and the kernels a stream launches (the same bodies on every
 * backend: the fake device runs them in its worker process, the cpu backend on the caller). */
#ifndef ZERO_DEVICE_INTERNAL_H
#define ZERO_DEVICE_INTERNAL_H

#include "common/internal.h"
#include "kernels/elem.h"
#include "zero/device.h"

#include <pthread.h>

#define ZERO__DEV_ALIGN  ZERO_DEVICE_ALIGN
#define ZERO__DEV_SPACES 3

/* ---------------------------------------------------------------- kernels */
/* A kernel call: an id and its arguments by value (pointers into device or pinned memory, sizes
 * and scalars), so that it can cross to the fake device's worker process. */
enum {
    ZERO__K_FILL_F32 = 0,    /* p[0][i] = a[0], i < n */
    ZERO__K_AXPY_F32 = 1,    /* p[0][i] += a[0] * p[1][i], i < n */
    ZERO__K_F32_TO_BF16 = 2, /* (uint16) p[1][i] = bf16(p[0][i]), round to nearest even */
    ZERO__K_F32_TO_FP16 = 3, /* (uint16) p[1][i] = fp16(p[0][i]) */
    ZERO__K_OPTIM = 4,       /* optim's element step over master p[0], states p[1], p[2], gradient p[3] */
    ZERO__K_WIDEN = 5,       /* (float) p[1][i] = widen(p[0][i]), p[0] in the half dtype a[0] (bf16 / fp16) */
    ZERO__K_ADD = 6,         /* p[0][i] += p[1][i], both in dtype a[0]: the host reduction's two-source sum */
    ZERO__K_ACCUM_F32 = 7,   /* p[0][i] (dtype a[0]) += (float) p[1][i]: the host accumulation */
    ZERO__K_SUMSQ = 8,       /* (double) p[1][b] = Σ x² over block b of a[1] elements of p[0] (dtype a[0]) */
    ZERO__K_COUNT
};
typedef struct zero__kcall {
    int id;
    uint64_t n;
    void *p[4];
    double a[4];
    double flops;        /* for the cost model (0: n) */
    zero__optim_k optim; /* ZERO__K_OPTIM: the step's constants (zero__optim_consts, src/optim) */
} zero__kcall;
typedef void (*zero__kernel_fn)(const zero__kcall *k);
extern const zero__kernel_fn zero__dev_kernels[ZERO__K_COUNT];
/* Queues k on s (ZERO_ERR_INVALID_ARG for an unknown id). */
zero_status zero__stream_launch(zero_stream *s, const zero__kcall *k);

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
} zero__op;

struct zero_event {
    zero_device *d;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    uint64_t recorded; /* generations recorded (host side) */
    uint64_t done;     /* generations whose record has run */
    double mtime;      /* the cost model's time of the last record */
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
    int asynchronous; /* streams run apart from the caller (and the cost model applies) */
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
} zero__dev_vtable;

extern const zero__dev_vtable zero__dev_cpu;
extern const zero__dev_vtable zero__dev_fake;

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
