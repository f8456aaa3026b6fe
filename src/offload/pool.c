/* The offload pool: a fixed set of aligned buffers through which swap-file data is streamed.
 * A pass reads tile i+1.. into free buffers while the caller computes tile i, and writes tile i
 * back while later tiles compute; memory never exceeds the buffers allocated at creation.
 *
 * Every transfer in flight carries a pointer to its request (slot, file, range, buffer) as the io
 * event's `user`, so any pool that reaps an event (pools may share one io) credits the right
 * buffer. A write computes the checksums of its blocks as it is submitted (the buffer is final
 * then) and records them when it succeeds; a read's blocks are verified when the buffer's owner
 * waits for it, not when the event is reaped, so that the CRC runs while the other buffers' reads
 * are in flight (a changed block fails the transfer, docs/OFFLOAD.md). */
#include "offload/internal.h"
#include "zero/trace.h"

#include <string.h>

typedef struct pslot pslot;

typedef struct preq {
    pslot *slot;
    int inflight;
    int verify;        /* a read arrived and its blocks are not verified yet */
    uint32_t *crcs;    /* a write: the CRCs of its blocks, computed at submit (NULL: checksums off) */
    zero_io_op op;
    zero_swap *swap;
    uint64_t offset; /* in the data area */
    size_t bytes;
    const char *buf;
} preq;

struct pslot {
    char *buf;
    int busy;            /* acquired: holds a tile (run) or belongs to a caller (acquire) */
    int pending;         /* transfers in flight */
    zero_status status;  /* first failure among its transfers since it was last checked */
    char msg[512];
    int64_t tile;        /* run: the tile it holds, -1 none */
    int next_req;        /* round-robin over req[] */
    int next;            /* extents described */
    uint32_t *crcs;      /* one CRC per block of buf: what its writes carry until they complete */
    zero_offload_extent ext[ZERO_OFFLOAD_MAX_EXTENTS];
    preq req[2 * ZERO_OFFLOAD_MAX_EXTENTS]; /* a read and a write of every extent may overlap */
};

struct zero_offload_pool {
    zero_io *io;
    zero_memacct *acct;
    int n;
    size_t bytes;
    char *mem;
    int own_mem; /* mem is the pool's (else the caller's: zero_offload_pool_create_in) */
    pslot *slots;
    uint32_t *crcs; /* the slots' CRC arrays, one allocation */
    char err[512];
};

size_t zero_offload_pool_bytes_for(int buffers, size_t buffer_bytes) {
    if (buffers < 1 || buffers > 4096 || buffer_bytes == 0 || buffer_bytes > ((size_t)1 << 40)) return 0;
    const size_t bytes = (buffer_bytes + ZERO_IO_ALIGN - 1) / ZERO_IO_ALIGN * ZERO_IO_ALIGN;
    return bytes > SIZE_MAX / (size_t)buffers ? 0 : bytes * (size_t)buffers;
}

static zero_status pool_create(zero_offload_pool **out, zero_io *io, int buffers, size_t buffer_bytes, zero_memacct *acct,
                               void *mem, size_t mem_bytes, zero_error *err) {
    if (!out) return ZERO_ERR_INVALID_ARG;
    *out = NULL;
    if (!io || buffers < 1 || buffers > 4096 || buffer_bytes == 0 || buffer_bytes > ((size_t)1 << 40)) {
        if (err) ZERO__ERR(err, "offload pool: %d buffers of %zu bytes: expected 1..4096 buffers of 1 byte to 1 TiB and an io",
                           buffers, buffer_bytes);
        return ZERO_ERR_INVALID_ARG;
    }
    const size_t bytes = (buffer_bytes + ZERO_IO_ALIGN - 1) / ZERO_IO_ALIGN * ZERO_IO_ALIGN;
    if (bytes > SIZE_MAX / (size_t)buffers) {
        if (err) ZERO__ERR(err, "offload pool: %d x %zu bytes overflows", buffers, bytes);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_offload_pool *p = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, sizeof *p);
    if (!p) goto nomem;
    p->io = io;
    p->acct = acct;
    p->n = buffers;
    p->bytes = bytes;
    if (mem && (mem_bytes < bytes * (size_t)buffers || (uintptr_t)mem % ZERO_IO_ALIGN)) {
        zero_mem_free(NULL, p);
        if (err)
            ZERO__ERR(err, "offload pool: memory %p of %zu bytes for %d x %zu: expected %zu bytes or more, %d-byte aligned",
                      mem, mem_bytes, buffers, bytes, bytes * (size_t)buffers, ZERO_IO_ALIGN);
        return ZERO_ERR_INVALID_ARG;
    }
    p->slots = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)buffers * sizeof *p->slots);
    /* 4 bytes per 4 KiB block of the buffers (1/1024 of them), next to the swap files' tables */
    const size_t blocks = bytes / ZERO_IO_ALIGN;
    p->crcs = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (size_t)buffers * blocks * sizeof *p->crcs);
    /* One allocation for all buffers: the pool's RAM is buffers x bytes (+ one alignment page). */
    p->own_mem = mem == NULL;
    p->mem = mem ? mem : zero_io_buffer_alloc(acct, ZERO_MEM_BUFFERS, (size_t)buffers * bytes);
    if (!p->slots || !p->crcs || !p->mem) goto nomem_p;
    for (int i = 0; i < buffers; i++) {
        pslot *s = &p->slots[i];
        s->buf = p->mem + (size_t)i * bytes;
        s->crcs = p->crcs + (size_t)i * blocks;
        s->tile = -1;
        for (int k = 0; k < 2 * ZERO_OFFLOAD_MAX_EXTENTS; k++) s->req[k].slot = s;
    }
    *out = p;
    return ZERO_OK;
nomem_p:
    zero_mem_free(NULL, p->slots);
    zero_mem_free(NULL, p->crcs);
    if (p->own_mem) zero_io_buffer_free(acct, p->mem);
    zero_mem_free(NULL, p);
nomem:
    if (err) ZERO__ERR(err, "offload pool: out of memory for %d buffers of %zu bytes", buffers, bytes);
    return ZERO_ERR_NOMEM;
}

zero_status zero_offload_pool_create(zero_offload_pool **out, zero_io *io, int buffers, size_t buffer_bytes,
                                     zero_memacct *acct, zero_error *err) {
    return pool_create(out, io, buffers, buffer_bytes, acct, NULL, 0, err);
}

zero_status zero_offload_pool_create_in(zero_offload_pool **out, zero_io *io, int buffers, size_t buffer_bytes,
                                        void *mem, size_t mem_bytes, zero_error *err) {
    if (!mem) {
        if (out) *out = NULL;
        if (err) ZERO__ERR(err, "offload pool: mem is NULL: expected the caller's memory");
        return ZERO_ERR_INVALID_ARG;
    }
    return pool_create(out, io, buffers, buffer_bytes, NULL, mem, mem_bytes, err);
}

int zero_offload_pool_count(const zero_offload_pool *p) { return p ? p->n : 0; }
size_t zero_offload_pool_buffer_bytes(const zero_offload_pool *p) { return p ? p->bytes : 0; }
void *zero_offload_pool_buffer(const zero_offload_pool *p, int buf) {
    return p && buf >= 0 && buf < p->n ? p->slots[buf].buf : NULL;
}
const char *zero_offload_pool_last_error(const zero_offload_pool *p) { return p ? p->err : "no pool"; }

/* Reaps one finished transfer (waiting for it when `block`) and credits its slot. Returns
 * ZERO_OK, or the io's own failure (the ring itself broke). *got says whether one was reaped. */
static zero_status reap_one(zero_offload_pool *p, int block, int *got) {
    zero_io_event ev;
    *got = 0;
    if (zero_io_inflight(p->io) == 0) return ZERO_OK;
    zero_status s = zero_io_complete(p->io, block ? 1 : 0, &ev, 1, got);
    if (s != ZERO_OK) {
        zero__errorf(p->err, sizeof p->err, "offload: waiting for I/O failed: %s", zero_io_last_error(p->io));
        return s;
    }
    if (*got == 0) return ZERO_OK;
    preq *r = ev.user;
    pslot *slot = r->slot;
    slot->pending--;
    r->inflight = 0;
    if (ev.status != ZERO_OK && slot->status == ZERO_OK) {
        slot->status = ev.status;
        snprintf(slot->msg, sizeof slot->msg, "%s", zero_io_last_error(p->io));
    } else if (ev.status == ZERO_OK && r->op == ZERO_IO_OP_WRITE) {
        /* recorded once the write is done: a failed write leaves the record of what the disk held
         * before */
        if (r->crcs) zero__swap_record(r->swap, r->offset, r->crcs, r->bytes);
    } else if (ev.status == ZERO_OK && r->op == ZERO_IO_OP_READ) {
        r->verify = 1; /* when the owner waits for the buffer (verify_slot) */
    }
    return ZERO_OK;
}

/* Verifies the reads of slot s that arrived since it was last checked; the first changed block
 * becomes the slot's failure (unless it has one already). */
static void verify_slot(pslot *s) {
    for (int k = 0; k < 2 * ZERO_OFFLOAD_MAX_EXTENTS; k++) {
        preq *r = &s->req[k];
        if (!r->verify) continue;
        r->verify = 0;
        if (s->status == ZERO_OK)
            s->status = zero__swap_verify(r->swap, r->offset, r->buf, r->bytes, s->msg, sizeof s->msg);
    }
}

/* Waits for every transfer of slot s, then verifies what its reads brought. */
static zero_status wait_slot(zero_offload_pool *p, pslot *s, double *waited) {
    if (s->pending == 0) {
        verify_slot(s);
        return ZERO_OK;
    }
    double t0 = zero_now();
    zero_status st = ZERO_OK;
    while (s->pending > 0 && st == ZERO_OK) {
        int got;
        st = reap_one(p, 1, &got);
        if (st == ZERO_OK && !got) {
            zero__errorf(p->err, sizeof p->err, "offload: %d transfers of a buffer are unaccounted for (bug)", s->pending);
            st = ZERO_ERR_INTERNAL;
        }
    }
    const double t1 = zero_now();
    if (waited) *waited += t1 - t0;
    zero_trace_span(ZERO_TRACE_IO, "offload: wait for I/O", t0, t1);
    if (st == ZERO_OK) verify_slot(s);
    return st;
}

static zero_status check_extent(zero_offload_pool *p, const zero_offload_extent *x, const char *what) {
    if (!x->swap || x->bytes == 0 || !(x->flags & (ZERO_OFFLOAD_READ | ZERO_OFFLOAD_WRITE)) ||
        x->buf_offset > p->bytes || x->bytes > p->bytes - x->buf_offset || x->offset > zero_swap_data_bytes(x->swap) ||
        x->bytes > zero_swap_data_bytes(x->swap) - x->offset) {
        zero__errorf(p->err, sizeof p->err,
                     "%s: transfer of %zu bytes at offset %llu of %s into buffer offset %zu: expected a swap file, "
                     "READ/WRITE, and ranges inside the %llu-byte data area and the %zu-byte buffer",
                     what, x->bytes, (unsigned long long)x->offset, x->swap ? zero_swap_path(x->swap) : "(no file)",
                     x->buf_offset, (unsigned long long)(x->swap ? zero_swap_data_bytes(x->swap) : 0), p->bytes);
        return ZERO_ERR_INVALID_ARG;
    }
    if (zero_swap_direct(x->swap) && ((x->offset | x->bytes | x->buf_offset) % ZERO_IO_ALIGN)) {
        zero__errorf(p->err, sizeof p->err,
                     "%s: transfer of %zu bytes at offset %llu of %s (buffer offset %zu): O_DIRECT needs multiples of %u",
                     what, x->bytes, (unsigned long long)x->offset, zero_swap_path(x->swap), x->buf_offset, ZERO_IO_ALIGN);
        return ZERO_ERR_INVALID_ARG;
    }
    if (zero_swap_checksums(x->swap) && ((x->offset | x->bytes) % ZERO_IO_ALIGN)) {
        zero__errorf(p->err, sizeof p->err,
                     "%s: transfer of %zu bytes at offset %llu of %s: a swap file with checksums moves whole %u-byte blocks",
                     what, x->bytes, (unsigned long long)x->offset, zero_swap_path(x->swap), ZERO_IO_ALIGN);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

/* Queues one transfer of slot s; a full ring first returns a finished request. */
static zero_status submit(zero_offload_pool *p, pslot *s, const zero_offload_extent *x, zero_io_op op,
                          zero_offload_stats *st) {
    preq *r = NULL;
    for (int k = 0; k < 2 * ZERO_OFFLOAD_MAX_EXTENTS && !r; k++) {
        preq *c = &s->req[s->next_req];
        s->next_req = (s->next_req + 1) % (2 * ZERO_OFFLOAD_MAX_EXTENTS);
        if (!c->inflight) r = c;
    }
    if (!r) {
        zero__errorf(p->err, sizeof p->err, "offload: more than %d transfers of one buffer in flight (bug)",
                     2 * ZERO_OFFLOAD_MAX_EXTENTS);
        return ZERO_ERR_INTERNAL;
    }
    r->op = op;
    r->swap = x->swap;
    r->offset = x->offset;
    r->bytes = x->bytes;
    r->buf = s->buf + x->buf_offset;
    r->verify = 0;
    r->crcs = NULL;
    if (op == ZERO_IO_OP_WRITE && zero_swap_checksums(x->swap)) {
        /* the buffer is final now; computed here, the CRCs overlap the other transfers in flight */
        r->crcs = s->crcs + x->buf_offset / ZERO_IO_ALIGN;
        zero__swap_block_crcs(r->buf, r->bytes / ZERO_IO_ALIGN, r->crcs);
    }
    for (;;) {
        zero_status rc = zero_io_submit(zero_swap_file(x->swap), op, s->buf + x->buf_offset, x->bytes,
                                        ZERO_SWAP_HEADER + x->offset, r);
        if (rc == ZERO_OK) break;
        if (rc == ZERO_ERR_STATE && zero_io_inflight(p->io) > 0) {
            int got;
            double t0 = zero_now();
            rc = reap_one(p, 1, &got);
            if (st) st->io_wait_s += zero_now() - t0;
            if (rc == ZERO_OK) continue;
            return rc;
        }
        zero__errorf(p->err, sizeof p->err, "offload: %s", zero_io_last_error(p->io));
        return rc;
    }
    s->pending++;
    r->inflight = 1;
    if (st) {
        if (op == ZERO_IO_OP_READ) {
            st->reads++;
            st->bytes_read += x->bytes;
        } else {
            st->writes++;
            st->bytes_written += x->bytes;
        }
    }
    return ZERO_OK;
}

static zero_status submit_flagged(zero_offload_pool *p, pslot *s, unsigned flag, zero_offload_stats *st) {
    for (int k = 0; k < s->next; k++) {
        if (!(s->ext[k].flags & flag)) continue;
        zero_status rc = submit(p, s, &s->ext[k], flag == ZERO_OFFLOAD_READ ? ZERO_IO_OP_READ : ZERO_IO_OP_WRITE, st);
        if (rc != ZERO_OK) return rc;
    }
    return ZERO_OK;
}

/* A failure a slot recorded becomes the pool's error (once). */
static zero_status take_failure(zero_offload_pool *p, pslot *s) {
    zero_status rc = s->status;
    if (rc != ZERO_OK) snprintf(p->err, sizeof p->err, "%s", s->msg);
    s->status = ZERO_OK;
    return rc;
}

static pslot *free_slot(zero_offload_pool *p) {
    for (int i = 0; i < p->n; i++)
        if (!p->slots[i].busy && p->slots[i].pending == 0) return &p->slots[i];
    return NULL;
}

/* Describes tile t into slot s and starts its reads. */
static zero_status issue(zero_offload_pool *p, const zero_offload_pass *pass, pslot *s, int64_t t,
                         zero_offload_stats *st) {
    s->busy = 1;
    s->tile = t;
    s->status = ZERO_OK;
    int n = pass->describe(pass->ctx, t, s->ext);
    if (n < 0 || n > ZERO_OFFLOAD_MAX_EXTENTS) {
        s->next = 0;
        if (n < 0) {
            zero__errorf(p->err, sizeof p->err, "offload: describing tile %lld failed", (long long)t);
            return (zero_status)n;
        }
        zero__errorf(p->err, sizeof p->err, "offload: tile %lld has %d transfers: at most %d", (long long)t, n,
                     ZERO_OFFLOAD_MAX_EXTENTS);
        return ZERO_ERR_INVALID_ARG;
    }
    s->next = n;
    for (int k = 0; k < n; k++) {
        zero_status rc = check_extent(p, &s->ext[k], "offload");
        if (rc != ZERO_OK) return rc;
    }
    return submit_flagged(p, s, ZERO_OFFLOAD_READ, st);
}

static pslot *slot_of_tile(zero_offload_pool *p, int64_t t) {
    for (int i = 0; i < p->n; i++)
        if (p->slots[i].busy && p->slots[i].tile == t) return &p->slots[i];
    return NULL;
}

/* Waits for every transfer of this pool; the first failure found (if rc is still OK) wins. */
static zero_status drain(zero_offload_pool *p, zero_status rc, zero_offload_stats *st) {
    for (int i = 0; i < p->n; i++) {
        pslot *s = &p->slots[i];
        zero_status w = wait_slot(p, s, st ? &st->io_wait_s : NULL);
        if (rc == ZERO_OK) rc = w;
        if (w != ZERO_OK) return rc; /* the ring is broken: do not spin on it */
        zero_status f = s->status;
        if (rc == ZERO_OK && f != ZERO_OK) rc = take_failure(p, s);
        s->status = ZERO_OK;
        s->busy = 0;
        s->tile = -1;
        s->next = 0;
    }
    return rc;
}

zero_status zero_offload_pool_run(zero_offload_pool *p, const zero_offload_pass *pass, zero_offload_stats *st) {
    if (!p || !pass || pass->tiles < 0 || (pass->tiles > 0 && !pass->describe)) return ZERO_ERR_INVALID_ARG;
    for (int i = 0; i < p->n; i++)
        if (p->slots[i].busy || p->slots[i].pending) {
            zero__errorf(p->err, sizeof p->err, "offload: a pass needs every buffer of the pool; buffer %d is in use", i);
            return ZERO_ERR_STATE;
        }
    const double t0 = zero_now();
    zero_status rc = ZERO_OK;
    int64_t next = 0; /* the next tile whose reads are issued */
    for (int64_t t = 0; t < pass->tiles && rc == ZERO_OK; t++) {
        /* Take what finished without waiting; a failed write stops the pass here. */
        int got = 1;
        while (got && rc == ZERO_OK) rc = reap_one(p, 0, &got);
        for (int i = 0; i < p->n && rc == ZERO_OK; i++)
            if (!p->slots[i].busy && p->slots[i].pending == 0 && p->slots[i].status != ZERO_OK)
                rc = take_failure(p, &p->slots[i]);
        /* Tile t itself needs a buffer: wait for a write-back to free one. */
        while (rc == ZERO_OK && next == t) {
            pslot *s = free_slot(p);
            if (s) {
                rc = issue(p, pass, s, next++, st);
                break;
            }
            double w0 = zero_now();
            rc = reap_one(p, 1, &got);
            if (st) st->io_wait_s += zero_now() - w0;
            for (int i = 0; i < p->n && rc == ZERO_OK; i++)
                if (!p->slots[i].busy && p->slots[i].pending == 0 && p->slots[i].status != ZERO_OK)
                    rc = take_failure(p, &p->slots[i]);
        }
        /* Read ahead into every other free buffer. */
        for (pslot *s; rc == ZERO_OK && next < pass->tiles && (s = free_slot(p)) != NULL;) rc = issue(p, pass, s, next++, st);
        if (rc != ZERO_OK) break;
        pslot *s = slot_of_tile(p, t);
        if (!s) {
            zero__errorf(p->err, sizeof p->err, "offload: tile %lld has no buffer (bug)", (long long)t);
            rc = ZERO_ERR_INTERNAL;
            break;
        }
        if ((rc = wait_slot(p, s, st ? &st->io_wait_s : NULL)) != ZERO_OK) break;
        if ((rc = take_failure(p, s)) != ZERO_OK) break;
        if (pass->compute) {
            double c0 = zero_now();
            rc = pass->compute(pass->ctx, t, s->buf);
            if (st) st->compute_s += zero_now() - c0;
            if (rc != ZERO_OK) {
                if (!p->err[0]) zero__errorf(p->err, sizeof p->err, "offload: computing tile %lld failed", (long long)t);
                break;
            }
        }
        rc = submit_flagged(p, s, ZERO_OFFLOAD_WRITE, st);
        s->busy = 0;
        s->tile = -1;
    }
    rc = drain(p, rc, st);
    if (st) st->wall_s += zero_now() - t0;
    return rc;
}

int zero_offload_pool_acquire(zero_offload_pool *p) {
    if (!p) return -1;
    pslot *s = free_slot(p);
    if (!s) return -1;
    s->busy = 1;
    s->tile = -1;
    s->next = 0;
    s->status = ZERO_OK;
    return (int)(s - p->slots);
}

zero_status zero_offload_pool_submit(zero_offload_pool *p, int buf, const zero_offload_extent *ext, int n) {
    if (!p || buf < 0 || buf >= p->n || !p->slots[buf].busy || n < 0 || n > ZERO_OFFLOAD_MAX_EXTENTS || (n && !ext)) {
        if (p) zero__errorf(p->err, sizeof p->err, "offload: submit on buffer %d: expected an acquired buffer and 0..%d transfers",
                            buf, ZERO_OFFLOAD_MAX_EXTENTS);
        return ZERO_ERR_INVALID_ARG;
    }
    pslot *s = &p->slots[buf];
    for (int k = 0; k < n; k++) {
        zero_status rc = check_extent(p, &ext[k], "offload");
        if (rc == ZERO_OK)
            rc = submit(p, s, &ext[k], (ext[k].flags & ZERO_OFFLOAD_READ) ? ZERO_IO_OP_READ : ZERO_IO_OP_WRITE, NULL);
        if (rc != ZERO_OK) {
            if (s->status == ZERO_OK) {
                s->status = rc;
                snprintf(s->msg, sizeof s->msg, "%s", p->err);
            }
            return rc;
        }
    }
    return ZERO_OK;
}

zero_status zero_offload_pool_wait(zero_offload_pool *p, int buf, zero_offload_stats *st) {
    if (!p || buf < 0 || buf >= p->n) return ZERO_ERR_INVALID_ARG;
    double t0 = zero_now(), w = 0;
    zero_status rc = wait_slot(p, &p->slots[buf], &w);
    if (rc == ZERO_OK) rc = take_failure(p, &p->slots[buf]);
    if (st) {
        st->io_wait_s += w;
        st->wall_s += zero_now() - t0;
    }
    return rc;
}

int zero_offload_pool_pending(const zero_offload_pool *p, int buf) {
    return p && buf >= 0 && buf < p->n ? p->slots[buf].pending : 0;
}

void zero_offload_pool_release(zero_offload_pool *p, int buf) {
    if (!p || buf < 0 || buf >= p->n) return;
    pslot *s = &p->slots[buf];
    (void)wait_slot(p, s, NULL);
    s->busy = 0;
    s->status = ZERO_OK;
    s->tile = -1;
}

void zero_offload_pool_free(zero_offload_pool *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++)
        if (wait_slot(p, &p->slots[i], NULL) != ZERO_OK) break;
    if (p->own_mem) zero_io_buffer_free(p->acct, p->mem);
    zero_mem_free(NULL, p->slots);
    zero_mem_free(NULL, p->crcs);
    zero_mem_free(NULL, p);
}
