/* The `self` backend: a communicator of one rank, no MPI needed. A reduction over one rank is
 * the identity, so every collective is a copy (or nothing when in place) and completes at once. */
#include "comm/internal.h"

#include <stdint.h>
#include <string.h>

static void copy(void *dst, const void *src, size_t bytes) {
    if (bytes && dst != src) memmove(dst, src, bytes);
}

static zero_status self_all_reduce(zero_comm *c, const void *send, void *recv, size_t count,
                                   zero_dtype dt, zero_op op, zero_request *req) {
    copy(recv, send, count * zero_dtype_size(dt));
    return ZERO_OK;
}

/* One rank: the only block is block 0, so reduce_scatter and all_gather are copies too. */
static zero_status self_all_gather(zero_comm *c, const void *send, void *recv, size_t count,
                                   zero_dtype dt, zero_request *req) {
    copy(recv, send, count * zero_dtype_size(dt));
    return ZERO_OK;
}

/* qgZ on one rank: nothing crosses, nothing is quantized */
static zero_status self_reduce_scatter_q8(zero_comm *c, const void *send, void *recv, size_t count, zero_dtype dt,
                                          size_t block, zero_request *req) {
    c->counters.calls[ZERO_COLL_REDUCE_SCATTER]++; /* one rank moves nothing */
    copy(recv, send, count * zero_dtype_size(dt));
    return ZERO_OK;
}

static zero_status self_broadcast(zero_comm *c, void *buf, size_t count, zero_dtype dt, int root) {
    return ZERO_OK;
}

static zero_status self_barrier(zero_comm *c) { return ZERO_OK; }

static zero_status self_split(zero_comm *c, int color, int key, zero_comm **out) {
    if (color < 0) return ZERO_OK;
    if (!(*out = zero__comm_new(&zero__comm_self_ops, 0, 1))) {
        ZERO__COMM_ERR(c, "split: out of memory for a communicator");
        return ZERO_ERR_NOMEM;
    }
    return ZERO_OK;
}

static zero_status self_wait(zero_request *req) { return ZERO_OK; }

static zero_status self_test(zero_request *req, int *done) {
    *done = 1;
    return ZERO_OK;
}

const zero__comm_ops zero__comm_self_ops = {
    .name = "self",
    .max_count = SIZE_MAX,
    .caps = ZERO__CAP_AVG, /* the average over one rank is the value itself */
    .all_reduce = self_all_reduce,
    .reduce_scatter = self_all_reduce,
    .all_gather = self_all_gather,
    .reduce_scatter_q8 = self_reduce_scatter_q8,
    .broadcast = self_broadcast,
    .barrier = self_barrier,
    .split = self_split,
    .wait = self_wait,
    .test = self_test,
    .destroy = NULL,
};
