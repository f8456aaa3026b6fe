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
    test_impl();
    return zt_finish("test_common");
}
