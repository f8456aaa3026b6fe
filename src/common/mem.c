/* The accounted allocator: every byte the library keeps goes through zero_mem_alloc, charged to
 * a category of an account. A 64-byte header before each block records its size and category. */
#include "common/internal.h"

#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define ZERO__ALIGN 64

typedef struct block_header {
    size_t bytes;
    int cat;
    int space;
    char pad[ZERO__ALIGN - sizeof(size_t) - 2 * sizeof(int)];
} block_header;
_Static_assert(sizeof(block_header) == ZERO__ALIGN, "header keeps 64-byte alignment");

static void *default_alloc(void *ctx, zero_mem_space space, size_t bytes, size_t align) {
    (void)ctx;
    (void)space;
    void *p = NULL;
    if (posix_memalign(&p, align, bytes) != 0) return NULL;
    return p;
}

static void default_free(void *ctx, zero_mem_space space, void *p, size_t bytes) {
    (void)ctx;
    (void)space;
    (void)bytes;
    free(p);
}

static zero_allocator g_alloc = {default_alloc, default_free, NULL};

void zero_set_allocator(const zero_allocator *a) {
    if (a && a->alloc && a->free) g_alloc = *a;
    else g_alloc = (zero_allocator){default_alloc, default_free, NULL};
}

const char *zero_mem_category_name(zero_mem_category c) {
    static const char *names[ZERO_MEM_COUNT] = {"params", "grads", "master", "optim", "buffers", "comm"};
    return (unsigned)c < ZERO_MEM_COUNT ? names[c] : "invalid";
}

static void charge(zero_memacct *a, int cat, size_t bytes) {
    if (!a) return;
    zero_mem_stats *s = &a->stats;
    s->current[cat] += bytes;
    if (s->current[cat] > s->peak[cat]) s->peak[cat] = s->current[cat];
    s->total_current += bytes;
    if (s->total_current > s->total_peak) s->total_peak = s->total_current;
}

void *zero_mem_alloc(zero_memacct *acct, zero_mem_category cat, size_t bytes) {
    if (bytes == 0 || (unsigned)cat >= ZERO_MEM_COUNT || bytes > SIZE_MAX - ZERO__ALIGN) return NULL;
    block_header *h = g_alloc.alloc(g_alloc.ctx, ZERO_SPACE_HOST, bytes + ZERO__ALIGN, ZERO__ALIGN);
    if (!h) return NULL;
    h->bytes = bytes;
    h->cat = (int)cat;
    h->space = ZERO_SPACE_HOST;
    charge(acct, (int)cat, bytes);
    return h + 1;
}

void *zero_mem_calloc(zero_memacct *acct, zero_mem_category cat, size_t bytes) {
    void *p = zero_mem_alloc(acct, cat, bytes);
    if (p) memset(p, 0, bytes);
    return p;
}

void zero_mem_free(zero_memacct *acct, void *p) {
    if (!p) return;
    block_header *h = (block_header *)p - 1;
    if (acct) {
        acct->stats.current[h->cat] -= h->bytes;
        acct->stats.total_current -= h->bytes;
    }
    g_alloc.free(g_alloc.ctx, (zero_mem_space)h->space, h, h->bytes + ZERO__ALIGN);
}

size_t zero_mem_size(const void *p) { return p ? ((const block_header *)p - 1)->bytes : 0; }

void zero_memacct_reset_peak(zero_memacct *acct) {
    for (int c = 0; c < ZERO_MEM_COUNT; c++) acct->stats.peak[c] = acct->stats.current[c];
    acct->stats.total_peak = acct->stats.total_current;
}

size_t zero_rss_peak_bytes(void) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0) return 0;
    return (size_t)ru.ru_maxrss * 1024u; /* Linux reports KiB */
}

double zero_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
