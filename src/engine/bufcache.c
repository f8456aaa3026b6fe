/* The engine's transient buffers (gathered units, gradient buffers, reduction buffers, step
 * chunks) come from a cache of idle blocks, reused by exact size: the same sizes recur every step,
 * so the kernel no longer maps and zeroes their pages every step (docs/ENGINE.md, "Transient
 * buffers"). Idle blocks stay charged to ZERO_MEM_BUFFERS, and what is held (in use + idle) never
 * exceeds the most the engine had in use at once: the peak, and so every memory figure and bound,
 * is the same as without reuse. zero_extensions.reuse_buffers = false frees each block when it
 * is put back instead; zero_engine_trim frees the idle ones. */
#include "engine/internal.h"

#include <stdlib.h>
#include <string.h>

/* Frees idle block k; the others keep their order (oldest first). */
static void evict(zero_engine *e, int k) {
    ebufcache *c = &e->bc;
    c->idle_bytes -= c->idle[k].bytes;
    zero_mem_free(&e->acct, c->idle[k].p);
    memmove(&c->idle[k], &c->idle[k + 1], (size_t)(c->nidle - k - 1) * sizeof *c->idle);
    c->nidle--;
}

void *zero__buf_get(zero_engine *e, size_t bytes, int zeroed) {
    ebufcache *c = &e->bc;
    void *p = NULL;
    for (int k = c->nidle - 1; k >= 0; k--) { /* newest first: the block most likely still in cache */
        if (c->idle[k].bytes != bytes) continue;
        p = c->idle[k].p;
        c->idle_bytes -= bytes;
        memmove(&c->idle[k], &c->idle[k + 1], (size_t)(c->nidle - k - 1) * sizeof *c->idle);
        c->nidle--;
        break;
    }
    if (!p) {
        /* A miss: room for it within the in-use peak, evicting the oldest idle blocks. */
        uint64_t want = c->in_use + bytes;
        if (want > c->in_use_peak) c->in_use_peak = want;
        while (c->nidle > 0 && want + c->idle_bytes > c->in_use_peak) evict(e, 0);
        p = zero_mem_alloc(&e->acct, ZERO_MEM_BUFFERS, bytes);
    }
    while (!p && c->nidle > 0) { /* out of memory: give the idle blocks back first */
        evict(e, 0);
        p = zero_mem_alloc(&e->acct, ZERO_MEM_BUFFERS, bytes);
    }
    if (!p) return NULL;
    c->in_use += bytes;
    if (zeroed) memset(p, 0, bytes);
    return p;
}

void zero__buf_put(zero_engine *e, void *p) {
    if (!p) return;
    ebufcache *c = &e->bc;
    size_t bytes = zero_mem_size(p);
    c->in_use -= bytes;
    if (!e->cfg.reuse_buffers) {
        zero_mem_free(&e->acct, p);
        return;
    }
    if (c->nidle == c->cap_idle) {
        int cap = c->cap_idle ? 2 * c->cap_idle : 16;
        ebuf *n = realloc(c->idle, (size_t)cap * sizeof *n);
        if (!n) { /* the cache is only an optimization */
            zero_mem_free(&e->acct, p);
            return;
        }
        c->idle = n;
        c->cap_idle = cap;
    }
    c->idle[c->nidle++] = (ebuf){p, bytes};
    c->idle_bytes += bytes;
}

size_t zero_engine_trim(zero_engine *e) {
    if (!e) return 0;
    size_t freed = e->bc.idle_bytes;
    while (e->bc.nidle > 0) evict(e, e->bc.nidle - 1);
    return freed;
}

void zero__buf_free(zero_engine *e) {
    zero_engine_trim(e);
    free(e->bc.idle);
    e->bc = (ebufcache){0};
}
