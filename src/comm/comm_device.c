/* Collectives on device memory, staged through pinned host memory: what a device without a
 * collective library of its own (the fake device; GPUs without working peer-to-peer, where NCCL
 * would stage through host memory anyway) uses. Each collective runs in chunks: the device-to-host
 * copy of chunk i+1 is queued while the host collective of chunk i runs, and the host-to-device
 * copy of chunk i follows it on the same stream, so copies and the collective overlap and two
 * staging buffers of each kind suffice. The host collective is this communicator's; its counters
 * count one collective of the whole message (calls and bytes; path_bytes as the chunks went). */
#include "comm/internal.h"
#include "zero/device.h"

#include <string.h>

size_t zero__comm_dev_chunk_bytes = (size_t)4 << 20;

typedef enum { DEV_ALL_REDUCE, DEV_REDUCE_SCATTER, DEV_ALL_GATHER } dev_coll;

static zero_status dev_fail(zero_comm *c, zero_status s, const char *what, const char *why) {
    zero__errorf(c->err, sizeof c->err, "%s on device memory: %s", what, why);
    return s;
}

/* send/recv: device (or any) memory of the stream's device. all_reduce: count elements in and out;
 * reduce_scatter: size*count in, count out; all_gather: count in, size*count out. */
static zero_status dev_collective(zero_comm *c, zero_stream *s, dev_coll kind, const void *send, void *recv,
                                  size_t count, zero_dtype dt, zero_op op) {
    static const char *const names[3] = {"all_reduce", "reduce_scatter", "all_gather"};
    const char *what = names[kind];
    if (!c) return ZERO_ERR_INVALID_ARG;
    zero_device *d = zero_stream_device(s);
    const size_t esz = zero_dtype_size(dt);
    if (!d || !esz || (count && (!send || !recv)))
        return dev_fail(c, ZERO_ERR_INVALID_ARG, what, "expected a stream, a dtype and buffers");
    if (count == 0) return ZERO_OK;
    const size_t world = (size_t)zero_comm_size(c);
    size_t chunk = zero__comm_dev_chunk_bytes / esz / (kind == DEV_ALL_REDUCE ? 1 : world);
    if (chunk == 0) chunk = 1;
    if (chunk > count) chunk = count;
    /* staging: what goes to the host collective (in) and what comes back from it (out), twice */
    const size_t in_elems = kind == DEV_REDUCE_SCATTER ? world * chunk : chunk;
    const size_t out_elems = kind == DEV_ALL_GATHER ? world * chunk : kind == DEV_REDUCE_SCATTER ? chunk : 0;
    char *in[2] = {NULL, NULL}, *out[2] = {NULL, NULL};
    zero_status st = ZERO_OK;
    for (int b = 0; b < 2 && st == ZERO_OK; b++) {
        st = zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_COMM, in_elems * esz, (void **)&in[b]);
        if (st == ZERO_OK && out_elems)
            st = zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_COMM, out_elems * esz, (void **)&out[b]);
    }
    if (st != ZERO_OK) {
        st = dev_fail(c, st, what, zero_device_last_error(d));
        goto out;
    }
    /* the counters count one collective of the whole message (the chunks' sum rounds each chunk's
     * (N-1)/N share down) */
    const zero_coll coll = kind == DEV_ALL_REDUCE       ? ZERO_COLL_ALL_REDUCE
                           : kind == DEV_REDUCE_SCATTER ? ZERO_COLL_REDUCE_SCATTER
                                                        : ZERO_COLL_ALL_GATHER;
    const uint64_t bytes0 = c->counters.bytes[coll], calls0 = c->counters.calls[coll];
    const uint64_t whole = (uint64_t)count * esz * (kind == DEV_ALL_REDUCE ? 1 : world);
    /* queues the device-to-host copies of chunk [a, a + n) into in[b] */
    const char *sp = send;
    char *rp = recv;
#define STAGE_IN(a, n, b)                                                                             \
    do {                                                                                              \
        if (kind == DEV_REDUCE_SCATTER)                                                               \
            for (size_t r = 0; r < world && st == ZERO_OK; r++)                                       \
                st = zero_stream_copy(s, in[b] + r * (n)*esz, sp + (r * count + (a)) * esz, (n)*esz); \
        else st = zero_stream_copy(s, in[b], sp + (a)*esz, (n)*esz);                                  \
    } while (0)
    STAGE_IN(0, chunk, 0);
    for (size_t a = 0, i = 0; a < count && st == ZERO_OK; a += chunk, i++) {
        const size_t n = count - a < chunk ? count - a : chunk, b = i % 2;
        st = zero_stream_sync(s); /* chunk i is in in[b] (and chunk i-2's results have left out[b]) */
        if (st != ZERO_OK) {
            st = dev_fail(c, st, what, zero_device_last_error(d));
            break;
        }
        const size_t next = a + chunk;
        if (next < count) STAGE_IN(next, count - next < chunk ? count - next : chunk, 1 - b);
        if (st != ZERO_OK) break;
        /* the host collective on chunk i, while chunk i+1 comes over: the non-blocking form, waited
         * for, which is what the engine's host path starts (the same sums in the same order) */
        zero_request *rq = NULL;
        if (kind == DEV_ALL_REDUCE) st = zero_comm_iall_reduce(c, in[b], in[b], n, dt, op, &rq);
        else if (kind == DEV_REDUCE_SCATTER) st = zero_comm_ireduce_scatter(c, in[b], out[b], n, dt, op, &rq);
        else st = zero_comm_iall_gather(c, in[b], out[b], n, dt, &rq);
        if (st == ZERO_OK) st = zero_request_wait(rq);
        if (st != ZERO_OK) break;
        if (kind == DEV_ALL_REDUCE) st = zero_stream_copy(s, rp + a * esz, in[b], n * esz);
        else if (kind == DEV_REDUCE_SCATTER) st = zero_stream_copy(s, rp + a * esz, out[b], n * esz);
        else
            for (size_t r = 0; r < world && st == ZERO_OK; r++)
                st = zero_stream_copy(s, rp + (r * count + a) * esz, out[b] + r * n * esz, n * esz);
        if (st != ZERO_OK) st = dev_fail(c, st, what, zero_device_last_error(d));
    }
#undef STAGE_IN
    if (st == ZERO_OK && (st = zero_stream_sync(s)) != ZERO_OK) st = dev_fail(c, st, what, zero_device_last_error(d));
    if (st == ZERO_OK) {
        c->counters.bytes[coll] = bytes0 + zero_comm_ring_bytes(coll, whole, c->size);
        c->counters.calls[coll] = calls0 + 1;
    }
out:
    if (st != ZERO_OK) (void)zero_stream_sync(s); /* nothing queued may still use the staging */
    for (int b = 0; b < 2; b++) {
        zero_device_release(d, in[b]);
        zero_device_release(d, out[b]);
    }
    return st;
}

/* ---------------------------------------------------------------- non-blocking forms
 * The whole message is staged at once: its copy to pinned memory is waited for at the call (the
 * host collective reads it from then on), the host collective is started there — so the host
 * collectives of every rank start in program order, whatever the devices' timing, as the
 * communicator requires — and its result goes to the device when the request is waited for (or a
 * test sees it done): the copy queued on s, not waited for (what the caller queues on s next runs
 * after it), the staging freed once it has run (zero_device_release_after). What runs while
 * the caller computes is the host collective, as in the host path. */
struct zero__dev_req {
    zero_stream *s;
    zero_device *d;
    char *in, *out; /* pinned: what goes to the host collective, what comes back (all_reduce: in) */
    char *recv;
    size_t recv_bytes;
    zero_request *hr; /* the host collective (NULL once it is over) */
};

static void dev_req_free(zero__dev_req *dr) {
    if (!dr) return;
    zero_device_release(dr->d, dr->in);
    zero_device_release(dr->d, dr->out);
    zero_mem_free(NULL, dr);
}

/* qblock > 0: a reduce-scatter's host collective is qgZ's (zero_comm_ireduce_scatter_q8) */
static zero_status dev_icollective(zero_comm *c, zero_stream *s, dev_coll kind, const void *send, void *recv,
                                   size_t count, zero_dtype dt, zero_op op, size_t qblock, zero_request **req) {
    static const char *const names[3] = {"iall_reduce", "ireduce_scatter", "iall_gather"};
    const char *what = names[kind];
    if (!c) return ZERO_ERR_INVALID_ARG;
    if (!req) return dev_fail(c, ZERO_ERR_INVALID_ARG, what, "req is NULL: expected a pointer to receive the request");
    *req = NULL;
    zero_device *d = zero_stream_device(s);
    const size_t esz = zero_dtype_size(dt);
    if (!d || !esz || (count && (!send || !recv)))
        return dev_fail(c, ZERO_ERR_INVALID_ARG, what, "expected a stream, a dtype and buffers");
    if (count == 0) return ZERO_OK; /* nothing to wait for: a NULL request */
    const size_t world = (size_t)zero_comm_size(c);
    const size_t in_bytes = (kind == DEV_REDUCE_SCATTER ? world * count : count) * esz;
    const size_t out_bytes = kind == DEV_ALL_GATHER       ? world * count * esz
                             : kind == DEV_REDUCE_SCATTER ? count * esz
                                                          : 0;
    zero__dev_req *dr = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof *dr);
    zero_request *r = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof *r);
    if (!dr || !r) {
        zero_mem_free(NULL, dr);
        zero_mem_free(NULL, r);
        return dev_fail(c, ZERO_ERR_NOMEM, what, "out of memory for a request");
    }
    dr->s = s;
    dr->d = d;
    dr->recv = recv;
    dr->recv_bytes = out_bytes ? out_bytes : in_bytes;
    zero_status st = zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_COMM, in_bytes, (void **)&dr->in);
    if (st == ZERO_OK && out_bytes)
        st = zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_COMM, out_bytes, (void **)&dr->out);
    if (st == ZERO_OK) st = zero_stream_copy(s, dr->in, send, in_bytes);
    if (st == ZERO_OK) st = zero_stream_sync(s);
    if (st != ZERO_OK) {
        st = dev_fail(c, st, what, zero_device_last_error(d));
        (void)zero_stream_sync(s); /* nothing queued may still use the staging */
        dev_req_free(dr);
        zero_mem_free(NULL, r);
        return st;
    }
    if (kind == DEV_ALL_REDUCE) st = zero_comm_iall_reduce(c, dr->in, dr->in, count, dt, op, &dr->hr);
    else if (kind == DEV_REDUCE_SCATTER && qblock)
        st = zero_comm_ireduce_scatter_q8(c, dr->in, dr->out, count, dt, qblock, &dr->hr);
    else if (kind == DEV_REDUCE_SCATTER) st = zero_comm_ireduce_scatter(c, dr->in, dr->out, count, dt, op, &dr->hr);
    else st = zero_comm_iall_gather(c, dr->in, dr->out, count, dt, &dr->hr);
    if (st != ZERO_OK) { /* the host collective said why in c's error */
        dev_req_free(dr);
        zero_mem_free(NULL, r);
        return st;
    }
    r->comm = c;
    r->dev = dr;
    *req = r;
    return ZERO_OK;
}

zero_status zero__dev_req_finish(zero_request *r, int block, int *done) {
    zero__dev_req *dr = r->dev;
    zero_status st = ZERO_OK;
    *done = 0;
    if (dr->hr) {
        if (block) st = zero_request_wait(dr->hr);
        else if ((st = zero_request_test(dr->hr, done)) == ZERO_OK && !*done) return ZERO_OK;
        dr->hr = NULL; /* over (wait and a test that ends it free it) */
    }
    *done = 1;
    if (st == ZERO_OK) { /* (else the host collective said why in the communicator's error) */
        st = zero_stream_copy(dr->s, dr->recv, dr->out ? dr->out : dr->in, dr->recv_bytes);
        if (st == ZERO_OK) {
            /* the result goes up in the stream's order, not waited for: what the caller queues on s
             * next sees it, and the staging is freed once the copy has run (release_after) */
            st = zero_device_release_after(dr->d, dr->in, dr->s);
            const zero_status o = zero_device_release_after(dr->d, dr->out, dr->s);
            dr->in = dr->out = NULL;
            if (st == ZERO_OK) st = o;
        }
        if (st != ZERO_OK) st = dev_fail(r->comm, st, "a collective's result", zero_device_last_error(dr->d));
    }
    if (dr->in || dr->out) (void)zero_stream_sync(dr->s); /* nothing queued may still use the staging */
    dev_req_free(dr);
    r->dev = NULL;
    return st;
}

zero_status zero_comm_iall_reduce_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                         zero_dtype dt, zero_op op, zero_request **req) {
    return dev_icollective(c, s, DEV_ALL_REDUCE, send, recv, count, dt, op, 0, req);
}

zero_status zero_comm_ireduce_scatter_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                             zero_dtype dt, zero_op op, zero_request **req) {
    return dev_icollective(c, s, DEV_REDUCE_SCATTER, send, recv, count, dt, op, 0, req);
}

zero_status zero_comm_ireduce_scatter_q8_device(zero_comm *c, zero_stream *s, const void *send, void *recv,
                                                size_t count, zero_dtype dt, size_t block, zero_request **req) {
    if (c && !block) return dev_fail(c, ZERO_ERR_INVALID_ARG, "ireduce_scatter_q8", "block 0: expected at least 1");
    return dev_icollective(c, s, DEV_REDUCE_SCATTER, send, recv, count, dt, ZERO_OP_SUM, block, req);
}

zero_status zero_comm_iall_gather_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                         zero_dtype dt, zero_request **req) {
    return dev_icollective(c, s, DEV_ALL_GATHER, send, recv, count, dt, ZERO_OP_SUM, 0, req);
}

zero_status zero_comm_all_reduce_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                        zero_dtype dt, zero_op op) {
    return dev_collective(c, s, DEV_ALL_REDUCE, send, recv, count, dt, op);
}

zero_status zero_comm_reduce_scatter_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                            zero_dtype dt, zero_op op) {
    return dev_collective(c, s, DEV_REDUCE_SCATTER, send, recv, count, dt, op);
}

zero_status zero_comm_all_gather_device(zero_comm *c, zero_stream *s, const void *send, void *recv, size_t count,
                                        zero_dtype dt) {
    return dev_collective(c, s, DEV_ALL_GATHER, send, recv, count, dt, ZERO_OP_SUM);
}
