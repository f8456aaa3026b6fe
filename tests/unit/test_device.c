/* The device layer on both backends: accounting per space against the blocks allocated, the
 * fake device's capacity, NaN-filled new memory, copies in every direction (pinned and pageable)
 * with their byte counters, kernels, streams ordered by events — and the fake device biting: a
 * host access to device memory faults, a dropped event wait shows as a wrong number, and the cost
 * model's makespan is the sum or the max of two streams as their events say. */
#include "device/internal.h"
#include "harness.h"
#include "optim/internal.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static zero_device *make(const char *backend, uint64_t cap, double delay_us, uint64_t seed) {
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = backend;
    o.capacity = cap;
    o.pinned_capacity = 64u << 20;
    o.max_delay_us = delay_us;
    o.seed = seed;
    zero_device *d = NULL;
    zero_error err;
    ZT_CHECKF(zero_device_create(&d, &o, &err) == ZERO_OK, "create %s: %s", backend, err.msg);
    return d;
}

/* Copies through every path and a kernel; values and counters checked. */
static void test_roundtrip(const char *backend) {
    zero_device *d = make(backend, 256u << 20, 50, 7);
    if (!d) return;
    const size_t n = (3u << 20) / 4 + 17; /* more than the 1 MiB bounce, not a multiple of it */
    float *x = NULL, *y = NULL, *pin = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, n * 4, (void **)&x));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_GRADS, n * 4, (void **)&y));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, n * 4, (void **)&pin));
    ZT_EQ_INT(zero_device_space_of(d, x + 5), ZERO_SPACE_DEVICE);
    ZT_EQ_INT(zero_device_space_of(d, pin), ZERO_SPACE_HOST_PINNED);
    float *host = malloc(n * 4), *back = malloc(n * 4);
    ZT_EQ_INT(zero_device_space_of(d, host), -1);
    for (size_t i = 0; i < n; i++) host[i] = (float)i * 0.5f;
    zero_stream *s = NULL;
    ZT_OK(zero_stream_create(d, &s));
    /* fresh device memory is NaN on the fake device (the cpu backend leaves it as malloc does) */
    ZT_OK(zero_stream_copy(s, back, y, n * 4));
    ZT_OK(zero_stream_sync(s));
    if (!strcmp(backend, "fake")) {
        int nans = 0;
        for (size_t i = 0; i < n; i++) nans += isnan(back[i]);
        ZT_EQ_INT(nans, n);
    }
    ZT_OK(zero_stream_copy(s, x, host, n * 4)); /* pageable -> device */
    ZT_OK(zero_stream_copy(s, y, x, n * 4));    /* device -> device */
    zero__kcall k = {.id = ZERO__K_AXPY_F32, .n = n, .p = {y, x}, .a = {2.0}};
    ZT_OK(zero__stream_launch(s, &k));         /* y = 3x */
    ZT_OK(zero_stream_copy(s, pin, y, n * 4)); /* device -> pinned */
    ZT_OK(zero_stream_sync(s));
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += pin[i] != (float)i * 1.5f;
    ZT_EQ_INT(bad, 0);
    ZT_OK(zero_stream_memset(s, y, 0, n * 4));
    ZT_OK(zero_stream_copy(s, back, y, n * 4)); /* device -> pageable */
    ZT_OK(zero_stream_sync(s));
    bad = 0;
    for (size_t i = 0; i < n; i++) bad += back[i] != 0.0f;
    ZT_EQ_INT(bad, 0);
    zero_device_counters c;
    zero_device_counters_get(d, &c);
    ZT_EQ_INT(c.bytes[ZERO_COPY_H2D], n * 4);
    ZT_EQ_INT(c.bytes[ZERO_COPY_D2D], n * 4);
    ZT_EQ_INT(c.bytes[ZERO_COPY_D2H], 3 * n * 4);
    ZT_EQ_INT(c.copies[ZERO_COPY_D2H], 3);
    ZT_EQ_INT(c.kernels, 1);
    if (!strcmp(backend, "cpu")) ZT_CHECK(c.modeled_s == 0);
    /* accounting: what was allocated, rounded to 256 bytes, per space and category */
    const size_t r = (n * 4 + 255) / 256 * 256;
    zero_mem_stats st;
    zero_device_mem_stats(d, ZERO_SPACE_DEVICE, &st);
    ZT_EQ_INT(st.current[ZERO_MEM_PARAMS], r);
    ZT_EQ_INT(st.current[ZERO_MEM_GRADS], r);
    ZT_EQ_INT(st.total_current, 2 * r);
    zero_device_release(d, y);
    zero_device_mem_stats(d, ZERO_SPACE_DEVICE, &st);
    ZT_EQ_INT(st.total_current, r);
    ZT_EQ_INT(st.total_peak, 2 * r);
    zero_device_mem_stats(d, ZERO_SPACE_HOST_PINNED, &st);
    ZT_EQ_INT(st.current[ZERO_MEM_BUFFERS], r);
    /* a copy that runs past its block (its size rounded up to 256 bytes) is refused */
    ZT_EQ_INT(zero_stream_copy(s, (char *)x + 256, host, n * 4), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_stream_copy(s, (char *)x + (r - n * 4), host, n * 4));
    ZT_OK(zero_stream_sync(s));
    zero_stream_free(s);
    zero_device_release(d, x);
    zero_device_release(d, pin);
    free(host);
    free(back);
    zero_device_free(d);
}

static void test_capacity(void) {
    zero_device *d = make("fake", 1u << 20, 0, 1);
    if (!d) return;
    void *a = NULL, *b = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, 700000, &a));
    ZT_EQ_INT(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, 400000, &b), ZERO_ERR_NOMEM);
    ZT_CHECKF(strstr(zero_device_last_error(d), "400128 bytes for optim do not fit") &&
                  strstr(zero_device_last_error(d), "700160 of its 1048576 bytes are in use"),
              "%s", zero_device_last_error(d));
    zero_device_release(d, a);
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, 1u << 20, &b)); /* freed space is reused whole */
    zero_device_release(d, b);
    zero_device_free(d);
    /* backends that are not built, and sizes that are not sizes */
    zero_device_options o;
    zero_device_options_default(&o);
    zero_error err;
    zero_device *x = NULL;
    o.backend = "cuda";
    ZT_EQ_INT(zero_device_create(&x, &o, &err), ZERO_ERR_UNSUPPORTED);
    ZT_CHECKF(strstr(err.msg, "no CUDA backend") != NULL, "%s", err.msg);
    o.backend = "tpu";
    ZT_EQ_INT(zero_device_create(&x, &o, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "'tpu': expected one of cpu,fake") != NULL, "%s", err.msg);
    o.backend = "fake";
    setenv("ZERO_DEVICE_MEMORY", "24 GiB", 1);
    ZT_EQ_INT(zero_device_create(&x, &o, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "ZERO_DEVICE_MEMORY '24 GiB'") != NULL, "%s", err.msg);
    setenv("ZERO_DEVICE_MEMORY", "2GiB", 1);
    ZT_OK(zero_device_create(&x, &o, &err));
    ZT_EQ_INT(zero_device_capacity(x, ZERO_SPACE_DEVICE), 2ull << 30);
    zero_device_free(x);
    unsetenv("ZERO_DEVICE_MEMORY");
}

static void on_segv(int sig) {
    (void)sig;
    _exit(42);
}

/* Host code that touches fake device memory faults (in a child, so that the test survives it). */
static void test_host_access_faults(void) {
    zero_device *d = make("fake", 1u << 20, 0, 1);
    if (!d) return;
    float *x = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, 4096, (void **)&x));
    fflush(NULL);
    const pid_t c = fork();
    if (c == 0) {
        /* our handler, so that a sanitizer's own (which exits with its code) does not decide */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_segv;
        sigaction(SIGSEGV, &sa, NULL);
        volatile float v = x[3]; /* a host path reading device memory */
        (void)v;
        _exit(0);
    }
    int st = 0;
    waitpid(c, &st, 0);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 42, "a host read of device memory: status 0x%x, expected the fault",
              st);
    zero_device_release(d, x);
    zero_device_free(d);
}

/* Two streams: a producer fills a buffer, a consumer copies it out. With the event wait every
 * trial reads the filled values; without it (the bug a missing wait is), the seeded delays make
 * the consumer overtake the producer, and the check sees it. */
static int consumer_wrong(zero_device *d, int with_wait) {
    const size_t n = 1024;
    float *x = NULL;
    float out[1024];
    zero_stream *a = NULL, *b = NULL;
    zero_event *ev = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, n * 4, (void **)&x));
    ZT_OK(zero_stream_create(d, &a));
    ZT_OK(zero_stream_create(d, &b));
    ZT_OK(zero_event_create(d, &ev));
    int wrong = 0;
    for (int t = 0; t < 20; t++) {
        zero__kcall k = {.id = ZERO__K_FILL_F32, .n = n, .p = {x}, .a = {(double)(t + 1)}};
        ZT_OK(zero__stream_launch(a, &k));
        ZT_OK(zero_event_record(ev, a));
        if (with_wait) ZT_OK(zero_stream_wait(b, ev));
        ZT_OK(zero_stream_copy(b, out, x, n * 4));
        ZT_OK(zero_device_sync(d));
        for (size_t i = 0; i < n; i++)
            if (out[i] != (float)(t + 1)) {
                wrong++;
                break;
            }
    }
    zero_event_free(ev);
    zero_stream_free(a);
    zero_stream_free(b);
    zero_device_release(d, x);
    return wrong;
}

static void test_events(void) {
    zero_device *d = make("fake", 1u << 20, 2000, 42);
    if (!d) return;
    ZT_EQ_INT(consumer_wrong(d, 1), 0);
    const int wrong = consumer_wrong(d, 0);
    ZT_CHECKF(wrong > 0, "a dropped event wait went unnoticed in 20 trials");
    printf("a dropped event wait: %d of 20 trials read the buffer before it was written\n", wrong);
    zero_device_free(d);
    /* the cpu backend runs in order on the caller: right either way */
    zero_device *c = make("cpu", 0, 0, 0);
    if (c) {
        ZT_EQ_INT(consumer_wrong(c, 0), 0);
        zero_device_free(c);
    }
}

/* The cost model: 1 MiB host to device and 2 MiB device to host at 25 GB/s and 10 µs each. On
 * two streams they overlap (makespan = the longer); ordered by an event they add up. */
static void test_cost_model(void) {
    for (int ordered = 0; ordered < 2; ordered++) {
        zero_device *d = make("fake", 8u << 20, 0, 1);
        if (!d) return;
        char *x = NULL, *p = NULL;
        ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, 2u << 20, (void **)&x));
        ZT_OK(zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, 2u << 20, (void **)&p));
        zero_stream *a = NULL, *b = NULL;
        zero_event *ev = NULL;
        ZT_OK(zero_stream_create(d, &a));
        ZT_OK(zero_stream_create(d, &b));
        ZT_OK(zero_event_create(d, &ev));
        ZT_OK(zero_stream_copy(a, x, p, 1u << 20));
        ZT_OK(zero_event_record(ev, a));
        if (ordered) ZT_OK(zero_stream_wait(b, ev));
        ZT_OK(zero_stream_copy(b, p, x, 2u << 20));
        ZT_OK(zero_device_sync(d));
        zero_device_counters c;
        zero_device_counters_get(d, &c);
        const double t1 = 10e-6 + (double)(1u << 20) / 25e9, t2 = 10e-6 + (double)(2u << 20) / 25e9;
        ZT_NEAR(c.modeled_s, ordered ? t1 + t2 : t2, 1e-9);
        zero_event_free(ev);
        zero_stream_free(a);
        zero_stream_free(b);
        zero_device_release(d, x);
        zero_device_release(d, p);
        zero_device_free(d);
    }
}

/* 1 when a and b hold the same bits (NaN payloads included) */
static int same_bits(const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) {
        uint32_t x, y;
        memcpy(&x, a + i, 4);
        memcpy(&y, b + i, 4);
        if (x != y) return 0;
    }
    return 1;
}

/* The device's kernels run the kernel layer's element formulas: on the fake device (in its worker
 * process) and on the cpu backend they give the host references' bits, for every optimizer and
 * the narrowing conversions, on values that include zeros, subnormals, infinities and NaN. */
static void test_kernels_match_host(const char *backend) {
    zero_device *d = make(backend, 64u << 20, 20, 3);
    if (!d) return;
    const size_t n = 4099;
    float *hp = malloc(n * 4), *hm = malloc(n * 4), *hv = malloc(n * 4), *hg = malloc(n * 4);
    float *rp = malloc(n * 4), *rm = malloc(n * 4), *rv = malloc(n * 4);
    uint16_t *h16 = malloc(n * 2), *r16 = malloc(n * 2);
    static const float edge[] = {0.0f,      -0.0f, 1e-40f,   -1e-40f,       INFINITY,
                                 -INFINITY, NAN,   65520.0f, 3.3895314e38f, 1.00390625f};
    uint64_t st = 99;
    for (size_t i = 0; i < n; i++) {
        st = st * 6364136223846793005ull + 1442695040888963407ull;
        const float r = (float)((int64_t)(st >> 20) % 200001 - 100000) * 1e-4f;
        hp[i] = i % 97 < 10 ? edge[i % 97] : r;
        hg[i] = i % 89 < 10 ? edge[i % 89] : r * 0.37f;
        hm[i] = r * 0.01f;
        hv[i] = fabsf(r) * 1e-3f;
    }
    float *dp = NULL, *dm = NULL, *dv = NULL, *dg = NULL;
    uint16_t *d16 = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_MASTER, n * 4, (void **)&dp));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, n * 4, (void **)&dm));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, n * 4, (void **)&dv));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_GRADS, n * 4, (void **)&dg));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, n * 2, (void **)&d16));
    zero_stream *s = NULL;
    ZT_OK(zero_stream_create(d, &s));
    const zero_optim_type types[4] = {ZERO_OPTIM_ADAMW, ZERO_OPTIM_ADAM, ZERO_OPTIM_SGD, ZERO_OPTIM_LION};
    for (int t = 0; t < 4; t++) {
        zero_optim_hparams h;
        zero_optim_hparams_default(&h, types[t]);
        h.weight_decay = 0.1f;
        if (types[t] == ZERO_OPTIM_SGD) h.momentum = 0.9f;
        zero__kcall k = {.id = ZERO__K_OPTIM, .n = n, .p = {dp, dm, dv, dg}};
        zero__optim_consts(&h, 3, 0.5f, 1.0f, &k.optim);
        memcpy(rp, hp, n * 4);
        memcpy(rm, hm, n * 4);
        memcpy(rv, hv, n * 4);
        zero__optim_scalar(&k.optim, rp, rm, rv, hg, n, NULL, ZERO_DTYPE_FP32);
        ZT_OK(zero_stream_copy(s, dp, hp, n * 4));
        ZT_OK(zero_stream_copy(s, dm, hm, n * 4));
        ZT_OK(zero_stream_copy(s, dv, hv, n * 4));
        ZT_OK(zero_stream_copy(s, dg, hg, n * 4));
        ZT_OK(zero__stream_launch(s, &k));
        float *op = malloc(n * 4), *om = malloc(n * 4);
        ZT_OK(zero_stream_copy(s, op, dp, n * 4));
        ZT_OK(zero_stream_copy(s, om, dm, n * 4));
        ZT_OK(zero_stream_sync(s));
        ZT_CHECKF(same_bits(op, rp, n) && same_bits(om, rm, n),
                  "%s: optimizer %d on the device differs from the host's", backend, (int)types[t]);
        free(op);
        free(om);
    }
    for (int bf = 0; bf < 2; bf++) {
        zero__kcall k = {.id = bf ? ZERO__K_F32_TO_BF16 : ZERO__K_F32_TO_FP16, .n = n, .p = {dp, d16}};
        ZT_OK(zero_stream_copy(s, dp, hp, n * 4));
        ZT_OK(zero__stream_launch(s, &k));
        ZT_OK(zero_stream_copy(s, h16, d16, n * 2));
        ZT_OK(zero_stream_sync(s));
        ZT_OK(zero_convert(hp, ZERO_DTYPE_FP32, r16, bf ? ZERO_DTYPE_BF16 : ZERO_DTYPE_FP16, n, ZERO_IMPL_SCALAR));
        ZT_CHECKF(!memcmp(h16, r16, n * 2), "%s: %s narrowing on the device differs from the host's", backend,
                  bf ? "bf16" : "fp16");
    }
    zero_stream_free(s);
    zero_device_release(d, dp);
    zero_device_release(d, dm);
    zero_device_release(d, dv);
    zero_device_release(d, dg);
    zero_device_release(d, d16);
    zero_device_free(d);
    free(hp), free(hm), free(hv), free(hg), free(rp), free(rm), free(rv), free(h16), free(r16);
}

int main(void) {
    test_roundtrip("cpu");
    test_roundtrip("fake");
    test_capacity();
    test_host_access_faults();
    test_events();
    test_cost_model();
    test_kernels_match_host("cpu");
    test_kernels_match_host("fake");
    return zt_finish("test_device");
}
