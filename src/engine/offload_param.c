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

static zero_status submit_read(zero_engine *e, eunit *u, int buf) {
    const size_t bytes = (size_t)((u->shard * e->wsize + ZERO_IO_ALIGN - 1) / ZERO_IO_ALIGN * ZERO_IO_ALIGN);
    zero_offload_extent x = {e->off.pfile, u->pbase, bytes, 0, ZERO_OFFLOAD_READ};
    u->pslot = buf;
    u->pready = 0;
    e->off.st.reads++;
    e->off.st.bytes_read += bytes;
    /* a failed submission is recorded on the buffer and reported by its wait */
    return zero_offload_pool_submit(e->off.ppool, buf, &x, 1);
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
            if (v->prefetch) {
                zero_status s = zero__eng_wait(e, &v->prefetch, v->prefetch_t0, ZERO__TRACE_PREFETCH);
                if (s != ZERO_OK) return s;
            }
            zero__poff_done(e, v);
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
    zero_status s = ZERO_OK;
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
    if (e->recording) return;
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
