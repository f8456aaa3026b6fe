/* Stage 3 with offload_param on NVMe: a unit's working-dtype shard lives in the parameter swap
 * file and is read into a buffer of the parameter pool before its all-gather. From the second
 * step on, the reads run ahead in the recorded gather order (as far as free buffers allow) while
 * the model computes, so a gather usually finds its shard, and the next unit's, already in RAM.
 *
 * Every decision here (which buffer, what to read ahead, what to evict) depends only on the calls
 * made, never on how fast the disk is: ranks must take the same prefetch decisions, because a
 * prefetch is a collective. */
#include "engine/internal.h"

#include <string.h>

static uint64_t round_io(uint64_t x) { return (x + ZERO_IO_ALIGN - 1) / ZERO_IO_ALIGN * ZERO_IO_ALIGN; }

uint64_t zero__poff_frozen_at(const zero_engine *e, const eunit *u) { return round_io(u->shard * e->wsize); }

uint64_t zero__poff_region(const zero_engine *e, const eunit *u) {
    return zero__poff_frozen_at(e, u) + round_io(u->fshard * e->fsize);
}

/* The working and the frozen shard, one read (they are contiguous in the file and the buffer). */
static zero_status submit_read(zero_engine *e, eunit *u, int buf) {
    const size_t bytes = (size_t)zero__poff_region(e, u);
    zero_offload_extent x = {e->off.pfile, u->pbase, bytes, 0, ZERO_OFFLOAD_READ};
    u->pslot = buf;
    u->pready = 0;
    e->off.st.reads++;
    e->off.st.bytes_read += bytes;
    /* a failed submission is recorded on the buffer and reported by its wait */
    return zero_offload_pool_submit(e->off.ppool, buf, &x, 1);
}

/* Drops v's read: its all-gathers that read the buffer (both parts) waited for, the buffer
 * given back. */
static zero_status drop_read(zero_engine *e, eunit *v) {
    if (v->prefetch) {
        zero_status s = zero__eng_wait(e, &v->prefetch, v->prefetch_t0, ZERO__TRACE_PREFETCH);
        if (s != ZERO_OK) return s;
    }
    if (v->fprefetch) { /* the frozen part's all-gather reads the same buffer */
        zero_status s = zero__eng_wait(e, &v->fprefetch, v->prefetch_t0, ZERO__TRACE_PREFETCH);
        if (s != ZERO_OK) return s;
    }
    zero__poff_done(e, v);
    return ZERO_OK;
}

/* Frees a buffer for a read the gather needs now, evicting (deterministically) a unit read ahead,
 * then one whose prefetch all-gather is in flight (waited for: its gathered copy stays). When
 * nothing but keep1/keep2 holds a buffer: an error if `must`, else *out = -1. */
static zero_status take_buffer(zero_engine *e, const eunit *keep1, const eunit *keep2, int must, int *out) {
    zero_offload_pool *p = e->off.ppool;
    if ((*out = zero_offload_pool_acquire(p)) >= 0) return ZERO_OK;
    for (int pass = 0; pass < 2; pass++)
        for (int i = e->nunits - 1; i >= 0; i--) {
            eunit *v = &e->units[i];
            if (v->pslot < 0 || v == keep1 || v == keep2 || (pass == 0) != (v->prefetch == NULL)) continue;
            zero_status s = drop_read(e, v);
            if (s != ZERO_OK) return s;
            if ((*out = zero_offload_pool_acquire(p)) >= 0) return ZERO_OK;
        }
    if (!must) return ZERO_OK;
    return zero__eng_fail(e, ZERO_ERR_INTERNAL, "gather: no parameter buffer could be freed (bug)");
}

static zero_status wait_ready(zero_engine *e, eunit *u) {
    if (u->pready) return ZERO_OK;
    zero_status s = zero_offload_pool_wait(e->off.ppool, u->pslot, &e->off.st);
    if (s != ZERO_OK)
        return zero__eng_fail(e, s, "gather '%s': reading its parameter shard failed: %s", u->name,
                              zero_offload_pool_last_error(e->off.ppool));
    u->pready = 1;
    return ZERO_OK;
}

zero_status zero__poff_prepare(zero_engine *e, eunit *u) {
    zero_status s = zero__foff_flush(e); /* a frozen shard written since is in the file */
    if (s != ZERO_OK) return s;
    const int need_u = !u->prefetch && !u->gathered;
    if (need_u) {
        if (u->pslot < 0) {
            int b;
            if ((s = take_buffer(e, u, NULL, 1, &b)) != ZERO_OK) return s;
            (void)submit_read(e, u, b);
        }
        if ((s = wait_ready(e, u)) != ZERO_OK) return s;
    }
    /* the unit prefetch_ahead all-gathers first after this one, under its conditions */
    if (e->recording || e->cursor >= e->norder) return ZERO_OK;
    eunit *n = &e->units[e->order[e->cursor]];
    const uint64_t budget = e->cfg.max_live_parameters > 0 ? (uint64_t)e->cfg.max_live_parameters : UINT64_MAX;
    const uint64_t live = e->live + (need_u ? u->padded : 0);
    if (n == u || n->gathered || live + n->padded > budget) return ZERO_OK;
    if (n->pslot < 0) {
        int b; /* u's buffer stays: when it is the only one, no prefetch this time */
        if ((s = take_buffer(e, u, n, 0, &b)) != ZERO_OK) return s;
        if (b < 0) return ZERO_OK;
        (void)submit_read(e, n, b);
    }
    return wait_ready(e, n);
}

zero_status zero__poff_check(zero_engine *e, eunit *u) {
    zero_status mine = ZERO_OK;
    int bad = -1;
    for (int r = 0; r < e->world; r++) {
        zero_status o = (zero_status)(int)e->ctrl_all[r].a;
        if (r == e->rank) mine = o;
        if (o != ZERO_OK && bad < 0) bad = r;
    }
    if (bad < 0) return ZERO_OK;
    e->broken = 1; /* some rank cannot all-gather: the engine stops on every rank */
    if (mine != ZERO_OK) return mine;
    zero_status o = (zero_status)(int)e->ctrl_all[bad].a;
    return zero__eng_fail(e, o, "gather '%s': reading the parameter shard failed on rank %d: %s", u->name, bad,
                          zero_status_string(o));
}

const void *zero__poff_shard(zero_engine *e, eunit *u) {
    return u->pslot >= 0 ? zero_offload_pool_buffer(e->off.ppool, u->pslot) : NULL;
}

int zero__poff_ready(const zero_engine *e, const eunit *u) {
    (void)e;
    return u->pslot >= 0 && u->pready;
}

void zero__poff_done(zero_engine *e, eunit *u) {
    if (u->pslot < 0) return;
    zero_offload_pool_release(e->off.ppool, u->pslot);
    u->pslot = -1;
    u->pready = 0;
}

void zero__poff_read_ahead(zero_engine *e) {
    if (e->recording || e->off.fcache_unit >= 0) return; /* a held frozen write: prepare flushes it */
    /* never past the end of the step's order: the step rewrites the file */
    for (int k = e->cursor; k < e->norder; k++) {
        eunit *m = &e->units[e->order[k]];
        if (m->pslot >= 0 || m->gathered) continue;
        int b = zero_offload_pool_acquire(e->off.ppool);
        if (b < 0) return;
        (void)submit_read(e, m, b);
    }
}

void zero__poff_release_all(zero_engine *e) {
    for (int i = 0; i < e->nunits; i++) zero__poff_done(e, &e->units[i]);
}

/* ------------------------------------------------------------------ frozen parts on NVMe */

/* One transfer of u's frozen shard between the file and pool buffer b (at its place there),
 * waited for. */
static zero_status frozen_io(zero_engine *e, eunit *u, int b, unsigned flags) {
    const uint64_t at = zero__poff_frozen_at(e, u);
    zero_offload_extent x = {e->off.pfile, u->pbase + at, (size_t)round_io(u->fshard * e->fsize), (size_t)at, flags};
    if (flags == ZERO_OFFLOAD_READ) e->off.st.reads++, e->off.st.bytes_read += x.bytes;
    else e->off.st.writes++, e->off.st.bytes_written += x.bytes;
    zero_status s = zero_offload_pool_submit(e->off.ppool, b, &x, 1);
    zero_status w = zero_offload_pool_wait(e->off.ppool, b, &e->off.st);
    if (s == ZERO_OK) s = w;
    if (s != ZERO_OK)
        return zero__eng_fail(e, s, "'%s': %s its frozen shard %s the parameter file failed: %s", u->name,
                              flags == ZERO_OFFLOAD_READ ? "reading" : "writing", flags == ZERO_OFFLOAD_READ ? "from" : "to",
                              zero_offload_pool_last_error(e->off.ppool));
    return ZERO_OK;
}

zero_status zero__foff_flush(zero_engine *e) {
    eoffload *o = &e->off;
    if (o->fcache_unit < 0) return ZERO_OK;
    eunit *u = &e->units[o->fcache_unit];
    const int b = o->fcache_buf;
    o->fcache_unit = o->fcache_buf = -1;
    zero_status s = frozen_io(e, u, b, ZERO_OFFLOAD_WRITE);
    zero_offload_pool_release(o->ppool, b);
    return s;
}

/* A buffer for u's frozen shard alone: u's own read is dropped (it would be stale after a write,
 * and a read copies the buffer it is in), so the buffer comes from the pool's free ones. */
static zero_status frozen_buffer(zero_engine *e, eunit *u, int *b) {
    if (u->pslot >= 0) {
        zero_status s = u->pready ? ZERO_OK : zero_offload_pool_wait(e->off.ppool, u->pslot, &e->off.st);
        if (s != ZERO_OK) {
            zero__poff_done(e, u);
            return zero__eng_fail(e, s, "'%s': reading its shards: %s", u->name, zero_offload_pool_last_error(e->off.ppool));
        }
        if ((s = drop_read(e, u)) != ZERO_OK) return s;
    }
    return take_buffer(e, NULL, NULL, 1, b);
}

zero_status zero__foff_region(zero_engine *e, eunit *u, void **out) {
    eoffload *o = &e->off;
    const int unit = (int)(u - e->units);
    *out = NULL;
    if (o->fcache_unit != unit) {
        zero_status s = zero__foff_flush(e);
        int b;
        if (s == ZERO_OK) s = frozen_buffer(e, u, &b);
        if (s != ZERO_OK) return s;
        if ((s = frozen_io(e, u, b, ZERO_OFFLOAD_READ)) != ZERO_OK) {
            zero_offload_pool_release(o->ppool, b);
            return s;
        }
        o->fcache_unit = unit;
        o->fcache_buf = b;
    }
    *out = (char *)zero_offload_pool_buffer(o->ppool, o->fcache_buf) + zero__poff_frozen_at(e, u);
    return ZERO_OK;
}

zero_status zero__foff_read(zero_engine *e, eunit *u, void *dst, size_t bytes) {
    zero_status s = zero__foff_flush(e);
    if (s != ZERO_OK) return s;
    int b;
    if ((s = frozen_buffer(e, u, &b)) != ZERO_OK) return s;
    s = frozen_io(e, u, b, ZERO_OFFLOAD_READ);
    if (s == ZERO_OK) memcpy(dst, (const char *)zero_offload_pool_buffer(e->off.ppool, b) + zero__poff_frozen_at(e, u), bytes);
    zero_offload_pool_release(e->off.ppool, b);
    return s;
}
