/* zero/device.h — the device tier: memory spaces, streams, events and asynchronous copies behind
 * one table of backends, so that the engine's schedule is written once and proven on a stand-in
 * for a GPU before it runs on one (docs/DEVICE.md).
 *
 *   zero_device *d;   zero_device_create(&d, NULL, &err);           // $ZERO_DEVICE, else cpu
 *   float *x;         zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, n * 4, (void **)&x);
 *   zero_stream *s;   zero_stream_create(d, &s);
 *   zero_stream_copy(s, x, host, n * 4);                            // direction from the spaces
 *   zero_event *ev;   zero_event_create(d, &ev);  zero_event_record(ev, s);
 *   zero_stream_wait(other, ev);                                    // other runs after s's copy
 *   zero_stream_sync(s);  zero_stream_free(s);  zero_device_release(d, x);  zero_device_free(d);
 *
 * Backends:
 *  - cpu: device memory is host memory; every operation runs at once on the caller's thread; no
 *    copy costs anything that a host memcpy does not. Today's engine path.
 *  - fake: a GPU stand-in for tests. Device memory is not addressable by host code: it lies in a
 *    range the process maps PROT_NONE (a host access faults), mapped readable and writable only
 *    in a worker process that runs the device's copies, memsets and kernels. New allocations are
 *    filled with NaN. Each stream is a thread that runs its queue in order, each operation after
 *    a seeded random delay, so a missing event wait shows up as a wrong number. A capacity bounds
 *    device memory (an allocation past it fails, naming the bytes). A cost model (bytes /
 *    bandwidth + latency per copy direction, a rate for kernels) gives each stream a modeled
 *    clock, so overlap can be measured; bytes are counted per direction.
 *  - cuda: an NVIDIA GPU through the CUDA runtime, in a module of its own (libzero-cuda.so, built
 *    where nvcc is found) loaded on the first create that names it: libzero starts where no CUDA
 *    library is installed. Device memory from a stream-ordered pool, pinned memory from
 *    cudaHostAlloc, one CUDA stream and event per zero_stream and zero_event. Without a GPU its
 *    create fails at once: "no CUDA device (cudaGetDeviceCount: ...)".
 *
 * Contracts:
 *  - Memory of every space is allocated and freed here, and accounted per space and category in
 *    a side table (never a header inside the block: device memory cannot be written by the host).
 *    Pinned host memory is host-addressable and is what asynchronous copies to and from the
 *    device go through; a copy from or to pageable host memory returns when it has finished.
 *  - Operations on one stream run in the order they were queued; operations on two streams are
 *    unordered unless an event orders them (zero_event_record on one, zero_stream_wait on the
 *    other). zero_stream_sync / zero_device_sync wait for queued work.
 *  - A device, its streams and events are driven from one thread at a time.
 *  - Errors: a call returns a zero_status; the message is zero_device_last_error(d). An error
 *    inside a stream (an injected or real failure) is reported by the next sync of that stream.
 */
#ifndef ZERO_DEVICE_H
#define ZERO_DEVICE_H

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zero_device zero_device;
typedef struct zero_stream zero_stream;
typedef struct zero_event zero_event;

/* Copy directions, for the counters and the cost model. */
typedef enum zero_copy_dir {
    ZERO_COPY_H2H = 0, /* host to host (pinned or pageable) */
    ZERO_COPY_H2D = 1,
    ZERO_COPY_D2H = 2,
    ZERO_COPY_D2D = 3,
    ZERO_COPY_DIR_COUNT
} zero_copy_dir;

typedef struct zero_device_options {
    const char *backend;      /* "cpu", "fake" or "cuda"; NULL: $ZERO_DEVICE, else "cpu" */
    uint64_t capacity;        /* device bytes; 0: the backend's (fake: $ZERO_DEVICE_MEMORY, else 24 GiB) */
    uint64_t pinned_capacity; /* pinned host bytes (fake: 0 = 4 GiB) */
    uint64_t seed;            /* fake: the stream delays' seed */
    double max_delay_us;      /* fake: each operation waits a random delay in [0, this) (0: none); < 0: 200 */
    /* fake: the cost model, GB/s per direction and µs per copy (0: PCIe 4.0 x16, 25 GB/s and
     * 10 µs; device to device 1000 GB/s), and kernels' rate in GFLOP/s (0: 50,000) */
    double gbps[ZERO_COPY_DIR_COUNT];
    double latency_us;
    double gflops;
    int pace; /* fake: each operation lasts at least its modeled duration in real time (after its
               * random delay), so that overlap shows in wall-clock time (the benchmarks); 0: as fast
               * as the host runs it */
    int lazy; /* fake: a stream runs an operation only once something waits for it: the host's sync
               * of the stream, its sync or query of an event recorded after the operation, another
               * stream's wait for such an event. The latest a device may run it, so a missing wait
               * is a wrong number in every run, not by the timing's chance (the tests of waits);
               * 0: $ZERO_DEVICE_LAZY=1 turns it on */
} zero_device_options;
void zero_device_options_default(zero_device_options *o);

/* The backend the options (NULL: the defaults) name. A name that is not built, or a capacity the
 * backend cannot give, is ZERO_ERR_UNSUPPORTED / ZERO_ERR_CONFIG naming it in err. */
zero_status zero_device_create(zero_device **out, const zero_device_options *o, zero_error *err);
/* Waits for every stream, then frees (NULL is a no-op). Streams, events and memory must be freed first. */
void zero_device_free(zero_device *d);
const char *zero_device_backend(const zero_device *d); /* "cpu", "fake", "cuda" */
const char *zero_device_last_error(const zero_device *d);
/* The backends this build has, comma-separated ("cpu,fake", "cpu,fake,cuda"). */
const char *zero_device_backends_built(void);
/* One line on what stands behind a backend, written to buf (`zero --version --verbose`): for cuda
 * the CUDA runtime the module was built against, the driver found (or none), the cuBLASLt and
 * NCCL libraries found (or none); "" for cpu and fake. ZERO_ERR_UNSUPPORTED with the reason in buf
 * when the backend is not built or its module does not load; ZERO_ERR_CONFIG for another name. */
zero_status zero_device_describe(const char *backend, char *buf, size_t cap);

/* ---------------------------------------------------------------- memory */
#define ZERO_DEVICE_ALIGN 256 /* every block's alignment, and the granule its bytes are counted in */
/* bytes in `space`, charged to `cat`; ZERO_DEVICE_ALIGN-byte aligned. ZERO_ERR_NOMEM (with the bytes asked, in
 * use and the capacity in the message) past the space's capacity. bytes == 0 is INVALID_ARG. */
zero_status zero_device_alloc(zero_device *d, zero_mem_space space, zero_mem_category cat, size_t bytes, void **out);
/* Frees p (NULL is a no-op): the caller makes sure no queued operation still uses it. */
void zero_device_release(zero_device *d, void *p);
/* Frees p once everything queued on s so far has run (an event recorded there: CUDA's stream-
 * ordered free, for pinned host memory too), so a copy from or into p may still be in flight. p
 * counts as in use until then; such blocks are freed as their events complete — at the device's
 * next alloc (and, when an alloc would not fit or its backend finds no room, after waiting for
 * them), release_after, sync and free. NULL is a no-op; on a failure to record the event it waits for s and frees p at
 * once. */
zero_status zero_device_release_after(zero_device *d, void *p, zero_stream *s);
/* The space p was allocated in (p anywhere inside a block), or -1 when it is not the device's:
 * pageable host memory. */
int zero_device_space_of(const zero_device *d, const void *p);
/* Current and peak bytes of a space, per category (the side table's figures). */
void zero_device_mem_stats(const zero_device *d, zero_mem_space space, zero_mem_stats *out);
uint64_t zero_device_capacity(const zero_device *d, zero_mem_space space);

/* ---------------------------------------------------------------- streams and events */
zero_status zero_stream_create(zero_device *d, zero_stream **out);
void zero_stream_free(zero_stream *s);                 /* waits for its queue; NULL is a no-op */
zero_device *zero_stream_device(const zero_stream *s); /* the device s belongs to (NULL for NULL) */
/* Queues a copy of n bytes; dst and src in any spaces (the direction from the side table). */
zero_status zero_stream_copy(zero_stream *s, void *dst, const void *src, size_t n);
/* Queues dst[0..n) = byte. */
zero_status zero_stream_memset(zero_stream *s, void *dst, int byte, size_t n);
/* Waits until everything queued on s has run; the first failure since the last sync. */
zero_status zero_stream_sync(zero_stream *s);
zero_status zero_device_sync(zero_device *d);

zero_status zero_event_create(zero_device *d, zero_event **out);
void zero_event_free(zero_event *ev); /* NULL is a no-op */
/* Records ev at the end of what s has queued so far (a later record replaces it). */
zero_status zero_event_record(zero_event *ev, zero_stream *s);
/* What s queues after this runs after ev's record has run (no host wait). */
zero_status zero_stream_wait(zero_stream *s, zero_event *ev);
/* 1 when the recorded work has run (or ev was never recorded), 0 when not yet. */
int zero_event_query(zero_event *ev);
zero_status zero_event_sync(zero_event *ev);

/* ---------------------------------------------------------------- counters */
typedef struct zero_device_counters {
    uint64_t bytes[ZERO_COPY_DIR_COUNT]; /* copied, per direction */
    uint64_t copies[ZERO_COPY_DIR_COUNT];
    uint64_t kernels;
    double modeled_s; /* the cost model's makespan: the latest modeled end of any stream (fake) */
} zero_device_counters;
void zero_device_counters_get(const zero_device *d, zero_device_counters *out);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_DEVICE_H */
