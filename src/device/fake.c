/* The fake device: a GPU stand-in that bites where a GPU bites. Its memory is a shared-memory
 * region this process maps PROT_NONE (host code that touches it faults) and that a worker
 * process, forked when the device is created, maps readable and writable at the same address: the
 * worker runs every copy, memset and kernel that touches device memory. Pinned host memory is a
 * second shared region, mapped readable and writable in both. Each stream is a thread that runs
 * its queue in order, each operation after a seeded random delay (lazy: besides, only once
 * something waits for it), and hands device work to the
 * worker one command at a time; new device memory is filled with NaN (all bits set).
 *
 * Layout: two memfd regions, [dev, dev + capacity) and [pin, pin + pinned_capacity), carved by a
 * first-fit list of free extents (256-byte aligned) kept in this process. Pageable host memory
 * reaches the device through a pinned bounce buffer per stream (1 MiB), as a GPU driver stages it. */
#define _GNU_SOURCE /* memfd_create */
#include "device/internal.h"
#include "zero/trace.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BOUNCE           ((size_t)1 << 20)
#define DEFAULT_CAPACITY ((uint64_t)24 << 30)
#define DEFAULT_PINNED   ((uint64_t)4 << 30)

typedef struct extent {
    uint64_t off, len;
} extent;

typedef struct region {
    char *base;
    uint64_t size;
    int fd;
    extent *free; /* sorted by off, coalesced */
    size_t nfree, capfree;
} region;

typedef struct fake {
    region dev, pin;
    pid_t worker;
    int sock; /* to the worker: one command, one reply */
    pthread_mutex_t sock_mu;
    uint64_t seed, nstreams;
    double max_delay_us;
    int pace; /* each operation lasts at least its modeled duration */
    int lazy; /* an operation runs only once something waits for it */
} fake;

/* A command to the worker: an operation on memory both processes map at the same addresses. */
typedef struct wcmd {
    zero__op op;
    int quit;
} wcmd;

typedef struct qnode {
    zero__op op;
    uint64_t seq; /* its place in the stream's queue, from 1 */
    struct qnode *next;
} qnode;

typedef struct fstream {
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    qnode *head, *tail;
    int busy, stop;
    uint64_t queued, released; /* lazy: operations queued, and those that may run */
    uint64_t rng;
    char *bounce; /* BOUNCE bytes of pinned memory */
    int track;    /* its trace track: ZERO_TRACE_DEVICE + the stream's number */
} fstream;

/* ---------------------------------------------------------------- regions */
static int region_init(region *r, const char *name, uint64_t size, int prot) {
    memset(r, 0, sizeof *r);
    r->fd = (int)memfd_create(name, MFD_CLOEXEC);
    if (r->fd < 0) return -1;
    if (ftruncate(r->fd, (off_t)size) != 0) return -1;
    /* MAP_NORESERVE: a 24 GiB device costs what is touched */
    void *p = mmap(NULL, size, prot, MAP_SHARED | MAP_NORESERVE, r->fd, 0);
    if (p == MAP_FAILED) return -1;
    r->base = p;
    r->size = size;
    r->free = malloc(sizeof *r->free);
    if (!r->free) return -1;
    r->free[0] = (extent){0, size};
    r->nfree = 1;
    r->capfree = 1;
    return 0;
}

static void region_fini(region *r) {
    if (r->base) munmap(r->base, r->size);
    if (r->fd >= 0) close(r->fd);
    free(r->free);
}

static void *region_alloc(region *r, uint64_t len) {
    for (size_t i = 0; i < r->nfree; i++) {
        if (r->free[i].len < len) continue;
        const uint64_t off = r->free[i].off;
        r->free[i].off += len;
        r->free[i].len -= len;
        if (!r->free[i].len) {
            memmove(r->free + i, r->free + i + 1, (r->nfree - i - 1) * sizeof *r->free);
            r->nfree--;
        }
        return r->base + off;
    }
    return NULL;
}

static void region_free(region *r, void *p, uint64_t len) {
    const uint64_t off = (uint64_t)((char *)p - r->base);
    size_t i = 0;
    while (i < r->nfree && r->free[i].off < off) i++;
    const int left = i > 0 && r->free[i - 1].off + r->free[i - 1].len == off;
    const int right = i < r->nfree && off + len == r->free[i].off;
    if (left && right) {
        r->free[i - 1].len += len + r->free[i].len;
        memmove(r->free + i, r->free + i + 1, (r->nfree - i - 1) * sizeof *r->free);
        r->nfree--;
    } else if (left) {
        r->free[i - 1].len += len;
    } else if (right) {
        r->free[i].off = off;
        r->free[i].len += len;
    } else {
        if (r->nfree == r->capfree) {
            const size_t cap = r->capfree ? 2 * r->capfree : 8;
            extent *e = realloc(r->free, cap * sizeof *e);
            if (!e) return; /* the extent is lost to this device: it cannot be handed out twice */
            r->free = e;
            r->capfree = cap;
        }
        memmove(r->free + i + 1, r->free + i, (r->nfree - i) * sizeof *r->free);
        r->free[i] = (extent){off, len};
        r->nfree++;
    }
}

/* ---------------------------------------------------------------- the worker */
/* The worker's exit: straight to the kernel, so that nothing of the parent's (stdio buffers a
 * sanitizer's exit would flush, atexit handlers) runs twice. */
static void worker_exit(int code) { syscall(SYS_exit_group, code); }

static void worker_main(int sock, region *dev) {
    /* only here is the device's memory addressable */
    if (mprotect(dev->base, dev->size, PROT_READ | PROT_WRITE) != 0) worker_exit(3);
    prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the process that owns the device */
    for (;;) {
        wcmd c;
        const ssize_t n = recv(sock, &c, sizeof c, 0);
        if (n != (ssize_t)sizeof c || c.quit) worker_exit(0);
        zero__op_run(&c.op);
        const int ok = 0;
        if (send(sock, &ok, sizeof ok, MSG_NOSIGNAL) != (ssize_t)sizeof ok) worker_exit(0);
    }
}

/* Runs op in the worker and waits for it. */
static zero_status to_worker(zero_device *d, const zero__op *op, char *err, size_t cap) {
    fake *f = d->impl;
    wcmd c;
    memset(&c, 0, sizeof c);
    c.op = *op;
    int ok = -1;
    pthread_mutex_lock(&f->sock_mu);
    const int sent = send(f->sock, &c, sizeof c, MSG_NOSIGNAL) == (ssize_t)sizeof c;
    const int got = sent && recv(f->sock, &ok, sizeof ok, 0) == (ssize_t)sizeof ok;
    pthread_mutex_unlock(&f->sock_mu);
    if (got && ok == 0) return ZERO_OK;
    snprintf(err, cap, "fake device: its worker process (pid %d) is gone: it crashed running a device operation",
             (int)f->worker);
    return ZERO_ERR_INTERNAL;
}

/* ---------------------------------------------------------------- device */
static zero_status fake_create(zero_device *d, const zero_device_options *o, zero_error *err) {
    fake *f = calloc(1, sizeof *f);
    if (!f) {
        if (err) ZERO__ERR(err, "fake device: out of memory");
        return ZERO_ERR_NOMEM;
    }
    f->dev.fd = f->pin.fd = f->sock = -1;
    const uint64_t cap = o->capacity ? o->capacity : DEFAULT_CAPACITY;
    const uint64_t pcap = o->pinned_capacity ? o->pinned_capacity : DEFAULT_PINNED;
    f->seed = o->seed;
    f->max_delay_us = o->max_delay_us < 0 ? 200 : o->max_delay_us;
    f->pace = o->pace != 0;
    f->lazy = o->lazy != 0;
    pthread_mutex_init(&f->sock_mu, NULL);
    int sv[2] = {-1, -1};
    if (region_init(&f->dev, "zero-fake-device", (cap + ZERO__DEV_ALIGN - 1) / ZERO__DEV_ALIGN * ZERO__DEV_ALIGN,
                    PROT_NONE) ||
        region_init(&f->pin, "zero-fake-pinned", (pcap + ZERO__DEV_ALIGN - 1) / ZERO__DEV_ALIGN * ZERO__DEV_ALIGN,
                    PROT_READ | PROT_WRITE) ||
        socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0) {
        if (err)
            ZERO__ERR(err, "fake device: cannot map %llu bytes of device and %llu of pinned memory: %s",
                      (unsigned long long)cap, (unsigned long long)pcap, strerror(errno));
        goto fail;
    }
    f->worker = fork();
    if (f->worker < 0) {
        if (err) ZERO__ERR(err, "fake device: cannot start its worker process: %s", strerror(errno));
        goto fail;
    }
    if (f->worker == 0) {
        close(sv[0]);
        worker_main(sv[1], &f->dev);
    }
    close(sv[1]);
    sv[1] = -1;
    f->sock = sv[0];
    d->impl = f;
    d->capacity[ZERO_SPACE_DEVICE] = f->dev.size;
    d->capacity[ZERO_SPACE_HOST_PINNED] = f->pin.size;
    return ZERO_OK;
fail:
    if (sv[0] >= 0) close(sv[0]);
    if (sv[1] >= 0) close(sv[1]);
    region_fini(&f->dev);
    region_fini(&f->pin);
    pthread_mutex_destroy(&f->sock_mu);
    free(f);
    return ZERO_ERR_NOMEM;
}

static void fake_destroy(zero_device *d) {
    fake *f = d->impl;
    for (size_t i = 0; i < d->nblocks; i++)
        if (d->blocks[i].space == ZERO_SPACE_HOST) free((void *)d->blocks[i].lo);
    wcmd c;
    memset(&c, 0, sizeof c);
    c.quit = 1;
    (void)send(f->sock, &c, sizeof c, MSG_NOSIGNAL);
    close(f->sock);
    int st;
    while (waitpid(f->worker, &st, 0) < 0 && errno == EINTR) {}
    region_fini(&f->dev);
    region_fini(&f->pin);
    pthread_mutex_destroy(&f->sock_mu);
    free(f);
}

static void *fake_alloc(zero_device *d, int space, size_t bytes) {
    fake *f = d->impl;
    if (space == ZERO_SPACE_HOST) return aligned_alloc(ZERO__DEV_ALIGN, bytes);
    region *r = space == ZERO_SPACE_DEVICE ? &f->dev : &f->pin;
    void *p = region_alloc(r, bytes);
    if (!p) return NULL;
    /* new memory holds NaN, so a read before a write shows */
    if (space == ZERO_SPACE_HOST_PINNED) {
        memset(p, 0xff, bytes);
    } else {
        const zero__op op = {.kind = ZERO__OP_SET, .dst = p, .n = bytes, .byte = 0xff};
        char e[256];
        if (to_worker(d, &op, e, sizeof e) != ZERO_OK) {
            region_free(r, p, bytes);
            snprintf(d->err, sizeof d->err, "%s", e);
            return NULL;
        }
    }
    return p;
}

static void fake_free(zero_device *d, int space, void *p, size_t bytes) {
    fake *f = d->impl;
    if (space == ZERO_SPACE_HOST) free(p);
    else region_free(space == ZERO_SPACE_DEVICE ? &f->dev : &f->pin, p, bytes);
}

/* ---------------------------------------------------------------- streams */
static uint64_t next_rand(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void fail_op(zero_stream *s, zero_status st, const char *msg) {
    fstream *q = s->impl;
    pthread_mutex_lock(&q->mu);
    if (s->failed == ZERO_OK) {
        s->failed = st;
        snprintf(s->err, sizeof s->err, "%s", msg);
    }
    pthread_mutex_unlock(&q->mu);
}

static int shared(int space) { return space == ZERO_SPACE_DEVICE || space == ZERO_SPACE_HOST_PINNED; }

/* A copy or memset, with pageable host memory staged through the bounce buffer. */
static void run_transfer(zero_stream *s, const zero__op *op) {
    fstream *q = s->impl;
    zero_device *d = s->d;
    char e[256];
    const int set = op->kind == ZERO__OP_SET;
    if (op->dst_space != ZERO_SPACE_DEVICE && (set || op->src_space != ZERO_SPACE_DEVICE)) {
        zero__op_run(op); /* host to host: this process addresses both */
        return;
    }
    if (shared(op->dst_space) && (set || shared(op->src_space))) { /* the worker maps both */
        if (to_worker(d, op, e, sizeof e) != ZERO_OK) fail_op(s, ZERO_ERR_INTERNAL, e);
        return;
    }
    const int to_device = !shared(op->src_space); /* else device to pageable host memory */
    for (size_t at = 0; at < op->n; at += BOUNCE) {
        const size_t n = op->n - at < BOUNCE ? op->n - at : BOUNCE;
        zero__op part = *op;
        part.n = n;
        if (to_device) {
            memcpy(q->bounce, (const char *)op->src + at, n);
            part.src = q->bounce;
            part.dst = (char *)op->dst + at;
        } else {
            part.src = (const char *)op->src + at;
            part.dst = q->bounce;
        }
        if (to_worker(d, &part, e, sizeof e) != ZERO_OK) {
            fail_op(s, ZERO_ERR_INTERNAL, e);
            return;
        }
        if (!to_device) memcpy((char *)op->dst + at, q->bounce, n);
    }
}

/* A span on the stream's trace track: what the operation was, from when it began to when it
 * ended (its pacing included); records (instants) are left out. */
static void trace_op(const fstream *q, const zero__op *op, double t0) {
    static const char *const dirs[ZERO_COPY_DIR_COUNT] = {"H2H", "H2D", "D2H", "D2D"};
    char name[64];
    switch (op->kind) {
    case ZERO__OP_COPY: {
        const int dd = op->dst_space == ZERO_SPACE_DEVICE, sd = op->src_space == ZERO_SPACE_DEVICE;
        snprintf(name, sizeof name, "copy %s %zu B", dirs[dd && sd ? 3 : dd ? 1 : sd ? 2 : 0], op->n);
        break;
    }
    case ZERO__OP_SET: snprintf(name, sizeof name, "memset %zu B", op->n); break;
    case ZERO__OP_KERNEL: snprintf(name, sizeof name, "kernel %s", zero__kernel_name(op->k.id)); break;
    case ZERO__OP_WAIT: snprintf(name, sizeof name, "wait for an event"); break;
    default: return;
    }
    zero_trace_span(q->track, name, t0, zero_now());
}

/* Paced: the operation that began at t0 lasts its modeled time in real time (a GPU's copy
 * engine at PCIe speed), so that a schedule's overlap shows in wall-clock time. */
static void pace_until(double t) {
    for (double left = t - zero_now(); left > 0; left = t - zero_now()) {
        const struct timespec ts = {(time_t)left, (long)((left - (double)(time_t)left) * 1e9)};
        nanosleep(&ts, NULL);
    }
}

/* Lazy streams: s's operations up to the seq-th may run. */
static void release(zero_stream *s, uint64_t seq) {
    fstream *q = s->impl;
    pthread_mutex_lock(&q->mu);
    if (seq > q->released) q->released = seq;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
}

/* What the last record of ev follows may run (lazy). */
static void fake_host_waits(zero_event *ev) {
    if (!((fake *)ev->d->impl)->lazy) return;
    pthread_mutex_lock(&ev->mu);
    zero_stream *s = ev->done < ev->recorded ? ev->rec_s : NULL; /* (a stream freed since ran it all) */
    const uint64_t seq = ev->rec_seq;
    pthread_mutex_unlock(&ev->mu);
    if (s) release(s, seq);
}

static void *stream_main(void *arg) {
    zero_stream *s = arg;
    fstream *q = s->impl;
    fake *f = s->d->impl;
    if (f->pace) (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL); /* sleeps of microseconds, not 50 more */
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while ((!q->head || (f->lazy && q->head->seq > q->released)) && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        if (!q->head) break;
        qnode *n = q->head;
        q->head = n->next;
        if (!q->head) q->tail = NULL;
        q->busy = 1;
        pthread_mutex_unlock(&q->mu);
        if (f->max_delay_us > 0 && n->op.kind != ZERO__OP_RECORD) {
            const double us = (double)(next_rand(&q->rng) >> 11) * 0x1.0p-53 * f->max_delay_us;
            const struct timespec ts = {0, (long)(us * 1e3)};
            nanosleep(&ts, NULL);
        }
        const int traced = zero_trace_enabled() && n->op.kind != ZERO__OP_RECORD;
        const double t0 = (f->pace && n->op.cost > 0) || traced ? zero_now() : 0;
        switch (n->op.kind) {
        case ZERO__OP_RECORD: zero__event_complete(n->op.ev, n->op.gen); break;
        case ZERO__OP_WAIT:
            fake_host_waits(n->op.ev); /* lazy: what it waits for may run */
            zero__event_block(n->op.ev, n->op.gen);
            break;
        case ZERO__OP_KERNEL: {
            char e[256];
            if (to_worker(s->d, &n->op, e, sizeof e) != ZERO_OK) fail_op(s, ZERO_ERR_INTERNAL, e);
            break;
        }
        default: run_transfer(s, &n->op); break;
        }
        if (f->pace && n->op.cost > 0) pace_until(t0 + n->op.cost);
        if (traced) trace_op(q, &n->op, t0);
        free(n);
        pthread_mutex_lock(&q->mu);
        q->busy = 0;
        pthread_cond_broadcast(&q->cv);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

static zero_status fake_stream_create(zero_stream *s) {
    zero_device *d = s->d;
    fake *f = d->impl;
    fstream *q = calloc(1, sizeof *q);
    if (!q) {
        zero__errorf(d->err, sizeof d->err, "fake device: out of memory for a stream");
        return ZERO_ERR_NOMEM;
    }
    q->rng = f->seed ^ (0x5bd1e995ull * ++f->nstreams);
    q->track = ZERO_TRACE_DEVICE + (int)((f->nstreams - 1) % ZERO_TRACE_STREAMS);
    q->bounce = region_alloc(&f->pin, BOUNCE);
    if (!q->bounce) {
        free(q);
        zero__errorf(d->err, sizeof d->err, "fake device: no pinned memory left for a stream's 1 MiB bounce buffer");
        return ZERO_ERR_NOMEM;
    }
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    s->impl = q;
    if (pthread_create(&q->th, NULL, stream_main, s) != 0) {
        region_free(&f->pin, q->bounce, BOUNCE);
        pthread_cond_destroy(&q->cv);
        pthread_mutex_destroy(&q->mu);
        free(q);
        s->impl = NULL;
        zero__errorf(d->err, sizeof d->err, "fake device: cannot start a stream's thread");
        return ZERO_ERR_NOMEM;
    }
    return ZERO_OK;
}

static void fake_stream_destroy(zero_stream *s) {
    fstream *q = s->impl;
    fake *f = s->d->impl;
    pthread_mutex_lock(&q->mu);
    q->released = q->queued; /* what is queued runs before the thread stops */
    q->stop = 1;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    pthread_join(q->th, NULL);
    region_free(&f->pin, q->bounce, BOUNCE);
    pthread_cond_destroy(&q->cv);
    pthread_mutex_destroy(&q->mu);
    free(q);
}

static zero_status fake_submit(zero_stream *s, const zero__op *op) {
    fstream *q = s->impl;
    qnode *n = malloc(sizeof *n);
    if (!n) {
        zero__errorf(s->d->err, sizeof s->d->err, "fake device: out of memory queueing an operation");
        return ZERO_ERR_NOMEM;
    }
    n->op = *op;
    n->next = NULL;
    pthread_mutex_lock(&q->mu);
    n->seq = ++q->queued;
    if (op->kind == ZERO__OP_RECORD) { /* where a wait for the event releases the queue to (lazy) */
        pthread_mutex_lock(&op->ev->mu);
        op->ev->rec_s = s;
        op->ev->rec_seq = n->seq;
        pthread_mutex_unlock(&op->ev->mu);
    }
    if (q->tail) q->tail->next = n;
    else q->head = n;
    q->tail = n;
    pthread_cond_broadcast(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return ZERO_OK;
}

static void fake_drain(zero_stream *s) {
    fstream *q = s->impl;
    pthread_mutex_lock(&q->mu);
    q->released = q->queued;
    pthread_cond_broadcast(&q->cv);
    while (q->head || q->busy) pthread_cond_wait(&q->cv, &q->mu);
    pthread_mutex_unlock(&q->mu);
}

const zero__dev_vtable zero__dev_fake = {
    .name = "fake",
    .asynchronous = 1,
    .modeled = 1,
    .create = fake_create,
    .destroy = fake_destroy,
    .alloc = fake_alloc,
    .free = fake_free,
    .stream_create = fake_stream_create,
    .stream_destroy = fake_stream_destroy,
    .submit = fake_submit,
    .drain = fake_drain,
    .host_waits = fake_host_waits,
};
