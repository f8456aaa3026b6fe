/* The cpu backend: device memory is host memory, every operation runs at once on the caller's
 * thread, and an event is done when it is recorded. What the engine does today, through the
 * device interface at no cost. */
#include "device/internal.h"

#include <stdlib.h>
#include <string.h>

static zero_status cpu_create(zero_device *d, const zero_device_options *o, zero_error *err) {
    (void)err;
    d->capacity[ZERO_SPACE_DEVICE] = o->capacity; /* 0: unbounded, as host memory is */
    d->capacity[ZERO_SPACE_HOST_PINNED] = o->pinned_capacity;
    return ZERO_OK;
}

static void cpu_destroy(zero_device *d) {
    for (size_t i = 0; i < d->nblocks; i++) free((void *)d->blocks[i].lo);
}

static void *cpu_alloc(zero_device *d, int space, size_t bytes) {
    (void)d;
    (void)space;
    return aligned_alloc(ZERO__DEV_ALIGN, bytes);
}

static void cpu_free(zero_device *d, int space, void *p, size_t bytes) {
    (void)d;
    (void)space;
    (void)bytes;
    free(p);
}

static zero_status cpu_stream_create(zero_stream *s) {
    (void)s;
    return ZERO_OK;
}
static void cpu_stream_destroy(zero_stream *s) { (void)s; }

static zero_status cpu_submit(zero_stream *s, const zero__op *op) {
    (void)s;
    if (op->kind == ZERO__OP_RECORD) zero__event_complete(op->ev, op->gen);
    else if (op->kind != ZERO__OP_WAIT) zero__op_run(op); /* a wait: what it waits for has run */
    return ZERO_OK;
}

static void cpu_drain(zero_stream *s) { (void)s; }

const zero__dev_vtable zero__dev_cpu = {
    .name = "cpu",
    .asynchronous = 0,
    .modeled = 0,
    .create = cpu_create,
    .destroy = cpu_destroy,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .stream_create = cpu_stream_create,
    .stream_destroy = cpu_stream_destroy,
    .submit = cpu_submit,
    .drain = cpu_drain,
};
