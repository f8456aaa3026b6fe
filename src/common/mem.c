/* The accounted allocator: every byte the library keeps goes through zero_mem_alloc, charged to
 * a category of an account. A 64-byte header before each block records its size and category.
 * The default hook maps large host blocks for transparent huge pages (ZERO_HUGEPAGES). */
#include "common/internal.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
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

/*
 * Blocks of ZERO__HUGE_MIN bytes and more (parameters, gradients, optimizer states, gathered
 * units: what collectives, the optimizer and the matmuls stream through) get their own mapping,
 * 2 MiB-aligned and marked MADV_HUGEPAGE, so that the kernel backs them with transparent huge
 * pages where it can: 512 times fewer page faults and TLB entries, and far fewer pages for
 * process_vm_readv to pin (a 64 MiB reduce-scatter: 1.6x faster, docs/BENCHMARKS.md). The mapping
 * ends at the block's last 4 KiB page, so a partly used 2 MiB page at the end stays small pages
 * and RSS does not grow. ZERO_HUGEPAGES=0 turns this off (plain aligned malloc, as for smaller
 * blocks); sanitizer builds never use it, so that ASan keeps its redzones on every block.
 */
#define ZERO__HUGE_MIN ((size_t)4 << 20)
#define ZERO__HUGE_PAGE ((size_t)2 << 20)
#define ZERO__SMALL_PAGE ((size_t)4096)

#if defined(__SANITIZE_ADDRESS__)
#define ZERO__HUGE_ALLOWED 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZERO__HUGE_ALLOWED 0
#endif
#endif
#ifndef ZERO__HUGE_ALLOWED
#define ZERO__HUGE_ALLOWED 1
#endif

static int g_huge = -1;      /* -1: ZERO_HUGEPAGES not read yet */
static int g_huge_used = 0;  /* a large block was allocated: the setting is fixed from now on */

static int huge_on(void);

int zero__mem_hugepages(void) { return huge_on(); }

int zero__mem_set_hugepages(int on) {
    on = on != 0 && ZERO__HUGE_ALLOWED;
    if (g_huge_used && on != huge_on()) return -1;
    g_huge = on;
    return 0;
}

static int huge_on(void) {
    if (g_huge < 0) {
        const char *v = getenv("ZERO_HUGEPAGES");
        int on = ZERO__HUGE_ALLOWED;
        if (v && !strcmp(v, "0")) on = 0;
        else if (v && strcmp(v, "1"))
            zero__log(ZERO_LOG_WARN, "ZERO_HUGEPAGES '%s': expected 0 (off) or 1 (on, the default); using %d", v,
                      on);
        g_huge = on;
    }
    return g_huge;
}

/* A block goes to its own mapping exactly when this says so, at allocation and at free alike. */
static int huge_block(size_t bytes) {
    if (bytes < ZERO__HUGE_MIN) return 0;
    g_huge_used = 1;
    return huge_on();
}

static void *map_huge(size_t bytes) {
    const size_t len = (bytes + ZERO__SMALL_PAGE - 1) / ZERO__SMALL_PAGE * ZERO__SMALL_PAGE;
    if (len < bytes || len > SIZE_MAX - ZERO__HUGE_PAGE) return NULL;
    unsigned char *raw =
        mmap(NULL, len + ZERO__HUGE_PAGE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (raw == MAP_FAILED) return NULL;
    unsigned char *p =
        (unsigned char *)(((uintptr_t)raw + ZERO__HUGE_PAGE - 1) & ~(uintptr_t)(ZERO__HUGE_PAGE - 1));
    if (p > raw) munmap(raw, (size_t)(p - raw));
    size_t tail = (size_t)(raw + len + ZERO__HUGE_PAGE - (p + len));
    if (tail) munmap(p + len, tail);
#ifdef MADV_HUGEPAGE
    madvise(p, len, MADV_HUGEPAGE); /* advice only: small pages if the kernel says no */
#endif
    return p;
}

static void *default_alloc(void *ctx, zero_mem_space space, size_t bytes, size_t align) {
    (void)ctx;
    (void)space;
    if (huge_block(bytes)) return align <= ZERO__HUGE_PAGE ? map_huge(bytes) : NULL;
    void *p = NULL;
    if (posix_memalign(&p, align, bytes) != 0) return NULL;
    return p;
}

static void default_free(void *ctx, zero_mem_space space, void *p, size_t bytes) {
    (void)ctx;
    (void)space;
    if (p && huge_block(bytes)) munmap(p, (bytes + ZERO__SMALL_PAGE - 1) / ZERO__SMALL_PAGE * ZERO__SMALL_PAGE);
    else free(p);
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

char *zero__strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, n);
    if (p) memcpy(p, s, n);
    return p;
}
