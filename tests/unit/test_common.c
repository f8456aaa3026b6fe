/* Tests of the common layer: status strings, the accounted allocator, implementation choice. */
#include "harness.h"
#include "zero/zero.h"

static void test_status(void) {
    ZT_CHECK(!strcmp(zero_status_string(ZERO_OK), "ok"));
    for (int s = ZERO_ERR_INTERNAL; s < 0; s++)
        ZT_CHECKF(strcmp(zero_status_string((zero_status)s), "unknown status") != 0, "status %d", s);
    ZT_CHECK(!strcmp(zero_status_string((zero_status)-1000), "unknown status"));
}

static void test_accounting(void) {
    zero_memacct a;
    memset(&a, 0, sizeof a);
    void *p = zero_mem_alloc(&a, ZERO_MEM_PARAMS, 1000);
    void *q = zero_mem_calloc(&a, ZERO_MEM_GRADS, 24);
    ZT_CHECK(p && q);
    ZT_EQ_INT(((uintptr_t)p) % 64, 0);
    ZT_EQ_INT(((unsigned char *)q)[23], 0);
    ZT_EQ_INT(a.stats.current[ZERO_MEM_PARAMS], 1000);
    ZT_EQ_INT(a.stats.current[ZERO_MEM_GRADS], 24);
    ZT_EQ_INT(a.stats.total_current, 1024);
    ZT_EQ_INT(zero_mem_size(p), 1000);
    zero_mem_free(&a, p);
    ZT_EQ_INT(a.stats.current[ZERO_MEM_PARAMS], 0);
    ZT_EQ_INT(a.stats.peak[ZERO_MEM_PARAMS], 1000);
    void *r = zero_mem_alloc(&a, ZERO_MEM_BUFFERS, 500);
    ZT_EQ_INT(a.stats.total_peak, 1024); /* 24 + 500 < 1024: the peak of the sum stays */
    zero_mem_free(&a, r);
    zero_mem_free(&a, q);
    zero_mem_free(&a, NULL);
    ZT_EQ_INT(a.stats.total_current, 0);
    zero_memacct_reset_peak(&a);
    ZT_EQ_INT(a.stats.total_peak, 0);
    ZT_CHECK(zero_mem_alloc(&a, ZERO_MEM_PARAMS, 0) == NULL);
    ZT_CHECK(zero_mem_alloc(&a, ZERO_MEM_COUNT, 8) == NULL);
    ZT_CHECK(zero_mem_alloc(&a, ZERO_MEM_PARAMS, SIZE_MAX) == NULL);
    ZT_EQ_INT(a.stats.total_current, 0);
}

static int custom_allocs;
static void *custom_alloc(void *ctx, zero_mem_space s, size_t bytes, size_t align) {
    (void)ctx; (void)s;
    custom_allocs++;
    void *p = NULL;
    return posix_memalign(&p, align, bytes) ? NULL : p;
}
static void custom_free(void *ctx, zero_mem_space s, void *p, size_t bytes) {
    (void)ctx; (void)s; (void)bytes;
    custom_allocs--;
    free(p);
}

static void test_allocator_hook(void) {
    zero_allocator al = {custom_alloc, custom_free, NULL};
    zero_set_allocator(&al);
    void *p = zero_mem_alloc(NULL, ZERO_MEM_OPTIM, 77);
    ZT_EQ_INT(custom_allocs, 1);
    zero_mem_free(NULL, p);
    ZT_EQ_INT(custom_allocs, 0);
    zero_set_allocator(NULL);
}

/* Large blocks from the default allocator: 2 MiB-aligned mappings that end at the block's last
 * 4 KiB page (docs in src/common/mem.c), every byte usable, accounted as any block; smaller ones
 * and sanitizer builds (ASan keeps its redzones) use malloc. */
#if defined(__SANITIZE_ADDRESS__)
#define HUGE_EXPECTED 0
#else
#define HUGE_EXPECTED 1
#endif
static int vma_of(uintptr_t a, uintptr_t *lo, uintptr_t *hi) {
    FILE *f = fopen("/proc/self/maps", "r");
    if (!f) return 0;
    unsigned long x, y;
    char line[512];
    int found = 0;
    while (!found && fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx", &x, &y) == 2 && a >= x && a < y) *lo = x, *hi = y, found = 1;
    fclose(f);
    return found;
}

static void test_huge_blocks(void) {
    const char *env = getenv("ZERO_HUGEPAGES");
    const int huge = HUGE_EXPECTED && !(env && !strcmp(env, "0"));
    const size_t sizes[4] = {((size_t)4 << 20) - 65, ((size_t)4 << 20) - 64, ((size_t)9 << 20) + 123, (size_t)64 << 20};
    for (int i = 0; i < 4; i++) {
        zero_memacct a;
        memset(&a, 0, sizeof a);
        unsigned char *p = zero_mem_alloc(&a, ZERO_MEM_GRADS, sizes[i]);
        ZT_CHECK(p != NULL);
        if (!p) continue;
        ZT_EQ_INT(a.stats.current[ZERO_MEM_GRADS], sizes[i]);
        ZT_EQ_INT(((uintptr_t)p) % 64, 0);
        const uintptr_t block = (uintptr_t)p - 64, end = (uintptr_t)p + sizes[i];
        const int mapped = huge && i > 0; /* block + header >= 4 MiB */
        if (mapped) {
            ZT_EQ_INT(block % ((uintptr_t)2 << 20), 0);
            uintptr_t lo = 0, hi = 0;
            ZT_CHECK(vma_of(block, &lo, &hi));
            ZT_EQ_INT(lo, block);
            ZT_EQ_INT(hi, (end + 4095) / 4096 * 4096); /* no partly used huge page past the end */
        }
        for (size_t k = 0; k < sizes[i]; k += 4093) p[k] = (unsigned char)(k * 7);
        p[sizes[i] - 1] = 0xa5;
        int bad = 0;
        for (size_t k = 0; k < sizes[i]; k += 4093) bad += p[k] != (unsigned char)(k * 7);
        ZT_EQ_INT(bad, 0);
        ZT_EQ_INT(p[sizes[i] - 1], 0xa5);
        zero_mem_free(&a, p);
        ZT_EQ_INT(a.stats.current[ZERO_MEM_GRADS], 0);
        if (mapped) { /* the mapping is gone */
            uintptr_t lo = 0, hi = 0;
            ZT_CHECK(!vma_of(block, &lo, &hi) || lo != block);
        }
    }
}

static void test_impl(void) {
    ZT_CHECK(zero_impl_available(ZERO_IMPL_SCALAR));
    ZT_CHECK(zero_impl_available(zero_impl_best()));
    ZT_CHECK(!strcmp(zero_impl_name(ZERO_IMPL_AVX2), "avx2"));
    ZT_CHECK(zero_rss_peak_bytes() > 0);
}

int main(void) {
    test_status();
    test_accounting();
    test_allocator_hook();
    test_huge_blocks();
    test_impl();
    return zt_finish("test_common");
}
