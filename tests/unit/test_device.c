/* The device layer on its backends: accounting per space against the blocks allocated, the
 * capacity, NaN-filled new memory, copies in every direction (pinned and pageable) with their byte
 * counters, every kernel of the table against the host reference bit for bit, the launch checks,
 * streams ordered by events — and the fake device biting: a host access to device memory faults,
 * a dropped event wait shows as a wrong number, and the cost model's makespan is the sum or the
 * max of two streams as their events say. The cuda backend: where there is no GPU its create fails
 * at once naming cudaGetDeviceCount's error; with ZERO_TEST_DEVICE=cuda (scripts/gpu_check.sh on a
 * GPU) the backend-generic checks run on it too. */
#include "device/internal.h"
#include "device_probe.h"
#include "harness.h"
#include "common/internal.h"
#include "optim/internal.h"
#include "zero/quant.h"

#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
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
    if (strcmp(backend, "fake") != 0) ZT_CHECK(c.modeled_s == 0); /* only the fake device models time */
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

/* A capacity is honoured: an allocation past it fails with one line naming the bytes. */
static void test_capacity(const char *backend) {
    zero_device *d = make(backend, 1u << 20, 0, 1);
    if (!d) return;
    void *a = NULL, *b = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, 700000, &a));
    ZT_EQ_INT(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, 400000, &b), ZERO_ERR_NOMEM);
    char want[96];
    snprintf(want, sizeof want, "%s device: device memory: 400128 bytes for optim do not fit", backend);
    ZT_CHECKF(strstr(zero_device_last_error(d), want) &&
                  strstr(zero_device_last_error(d), "700160 of its 1048576 bytes are in use"),
              "%s", zero_device_last_error(d));
    zero_device_release(d, a);
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, 1u << 20, &b)); /* freed space is reused whole */
    zero_device_release(d, b);
    zero_device_free(d);
}

/* Whether this machine has an NVIDIA GPU: $ZERO_TEST_GPU (1 or 0) where set, else whether the
 * driver's control device exists. */
static int gpu_expected(void) { return zt_gpu_expected(); }

/* cuda: not built (a CPU build), no GPU (at once, one line), or a GPU: created. */
static void test_cuda_create(void) {
    zero_device_options o;
    zero_device_options_default(&o);
    zero_error err = {{0}};
    zero_device *x = NULL;
    o.backend = "cuda";
    const zero_status st = zero_device_create(&x, &o, &err);
    if (!strstr(zero_device_backends_built(), "cuda")) {
        ZT_EQ_INT(st, ZERO_ERR_UNSUPPORTED);
        ZT_CHECKF(strstr(err.msg, "no CUDA backend") != NULL, "%s", err.msg);
    } else if (gpu_expected()) {
        ZT_CHECKF(st == ZERO_OK, "a GPU is expected (ZERO_TEST_GPU, /dev/nvidiactl) but: %s", err.msg);
        ZT_CHECKF(!strcmp(zero_device_backend(x), "cuda"), "backend %s", zero_device_backend(x));
        ZT_CHECK(zero_device_capacity(x, ZERO_SPACE_DEVICE) > (1ull << 30));
        zero_device_free(x);
    } else {
        /* no GPU: at once, one line naming the call and its error */
        ZT_EQ_INT(st, ZERO_ERR_UNSUPPORTED);
        ZT_CHECKF(!strncmp(err.msg, "no CUDA device (cudaGetDeviceCount: ", 36) && strchr(err.msg, '\n') == NULL &&
                      err.msg[strlen(err.msg) - 1] == ')',
                  "%s", err.msg);
        printf("cuda without a GPU: %s\n", err.msg);
        char line[512];
        ZT_OK(zero_device_describe("cuda", line, sizeof line));
        ZT_CHECKF(strstr(line, "runtime ") && strstr(line, "cuBLASLt ") && strstr(line, "NCCL "), "%s", line);
        printf("cuda: %s\n", line);
    }
}

/* Backends that are not built or cannot start, and sizes that are not sizes. */
static void test_create_errors(void) {
    test_cuda_create();
    zero_device_options o;
    zero_device_options_default(&o);
    zero_error err = {{0}};
    zero_device *x = NULL;
    o.backend = "tpu";
    ZT_EQ_INT(zero_device_create(&x, &o, &err), ZERO_ERR_CONFIG);
    char want[64];
    snprintf(want, sizeof want, "'tpu': expected one of %s", zero_device_backends_built());
    ZT_CHECKF(strstr(err.msg, want) != NULL, "%s", err.msg);
    char line[512];
    ZT_EQ_INT(zero_device_describe("tpu", line, sizeof line), ZERO_ERR_CONFIG);
    ZT_OK(zero_device_describe("fake", line, sizeof line));
    ZT_CHECK(line[0] == 0);
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

/* The cuda module's loading, in a child each (a process loads it once): a ZERO_CUDA_MODULE that
 * is not there, one that is not a shared object, and one that is not the module (libzero.so
 * itself, where the build has it) are one line each. */
static void module_child(const char *path, const char *want) {
    int fd[2];
    if (pipe(fd) != 0) {
        ZT_FAIL("pipe");
        return;
    }
    fflush(NULL);
    const pid_t c = fork();
    if (c == 0) {
        close(fd[0]);
        setenv("ZERO_CUDA_MODULE", path, 1);
        zero_device_options o;
        zero_device_options_default(&o);
        o.backend = "cuda";
        zero_device *x = NULL;
        zero_error err = {{0}};
        const zero_status st = zero_device_create(&x, &o, &err);
        if (write(fd[1], err.msg, strlen(err.msg)) < 0) _exit(3);
        _exit(st == ZERO_ERR_UNSUPPORTED ? 0 : 1);
    }
    close(fd[1]);
    char msg[600] = {0};
    size_t got = 0;
    ssize_t r;
    while (got < sizeof msg - 1 && (r = read(fd[0], msg + got, sizeof msg - 1 - got)) > 0) got += (size_t)r;
    close(fd[0]);
    int st = 0;
    waitpid(c, &st, 0);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "ZERO_CUDA_MODULE=%s: status 0x%x (%s)", path, st, msg);
    ZT_CHECKF(strstr(msg, want) != NULL && !strchr(msg, '\n'), "ZERO_CUDA_MODULE=%s: '%s', expected '%s'", path, msg,
              want);
}

static void test_module_errors(void) {
    if (!strstr(zero_device_backends_built(), "cuda")) return;
    module_child("/nonexistent/libzero-cuda.so", "ZERO_CUDA_MODULE '/nonexistent/libzero-cuda.so': no such file");
    char text[] = "/tmp/zero_test_device_XXXXXX"; /* not a shared object */
    const int fd = mkstemp(text);
    if (fd >= 0) {
        if (write(fd, "not ELF\n", 8) != 8) ZT_FAIL("write %s", text);
        close(fd);
        module_child(text, "did not load: ");
        unlink(text);
    }
    const char *bd = getenv("ZERO_BUILD_DIR"); /* a shared object without the entry point */
    char lib[1024];
    snprintf(lib, sizeof lib, "%s/libzero.so", bd ? bd : ".");
    if (bd && access(lib, F_OK) == 0) module_child(lib, "is from another build of zero");
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

/* Lazy streams (zero_device_options.lazy): an operation runs only once something waits for it, so
 * a missing wait is wrong in every trial (not by chance), the waits that are there make it right,
 * and the host's wait on an event runs what the event follows (and no more). */
static void test_lazy(void) {
    setenv("ZERO_DEVICE_LAZY", "1", 1);
    zero_device *d = make("fake", 1u << 20, 0, 1);
    unsetenv("ZERO_DEVICE_LAZY");
    if (!d) return;
    ZT_EQ_INT(consumer_wrong(d, 1), 0);
    ZT_EQ_INT(consumer_wrong(d, 0), 20); /* the consumer's stream is waited for, the producer's not */
    const size_t n = 256;
    float *x = NULL, *p = NULL, out[256];
    zero_stream *a = NULL;
    zero_event *e1 = NULL, *e2 = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, n * 4, (void **)&x));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, n * 4, (void **)&p));
    ZT_OK(zero_stream_create(d, &a));
    ZT_OK(zero_event_create(d, &e1));
    ZT_OK(zero_event_create(d, &e2));
    for (size_t i = 0; i < n; i++) p[i] = 1;
    ZT_OK(zero_stream_copy(a, x, p, n * 4));
    ZT_OK(zero_event_record(e1, a));
    zero__kcall k = {.id = ZERO__K_FILL_F32, .n = n, .p = {p}, .a = {3.0}};
    ZT_OK(zero__stream_launch(a, &k)); /* after e1: held while only e1 is waited for */
    ZT_OK(zero_event_record(e2, a));
    usleep(20000);
    ZT_EQ_INT(p[0] == 1, 1);                 /* nothing ran: nothing waited */
    for (size_t i = 0; i < n; i++) p[i] = 2; /* the copy, still queued, takes these */
    ZT_OK(zero_event_sync(e1));
    usleep(20000);
    ZT_CHECKF(p[0] == 2, "the fill after e1 ran on e1's wait (p[0] %g)", (double)p[0]);
    while (!zero_event_query(e2)) {} /* a query lets it run too */
    ZT_EQ_INT(p[n - 1] == 3, 1);
    ZT_OK(zero_stream_copy(a, out, x, n * 4));
    ZT_CHECKF(out[0] == 2 && out[n - 1] == 2, "the held copy read the host's later values: %g", (double)out[0]);
    zero_event_free(e1);
    zero_event_free(e2);
    zero_stream_free(a);
    zero_device_release(d, x);
    zero_device_release(d, p);
    zero_device_free(d);
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = "fake";
    zero_error err = {{0}};
    setenv("ZERO_DEVICE_LAZY", "yes", 1);
    ZT_EQ_INT(zero_device_create(&d, &o, &err), ZERO_ERR_CONFIG);
    unsetenv("ZERO_DEVICE_LAZY");
    ZT_CHECKF(strstr(err.msg, "ZERO_DEVICE_LAZY 'yes': expected 1") != NULL, "%s", err.msg);
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

/* Paced (zero_device_options.pace): each operation lasts its modeled time in wall-clock time.
 * At 1 GB/s, 4 MiB host to device take 4.2 ms: the stream's sync returns no sooner; two such
 * copies ordered on one stream no sooner than twice that (what the overlap benchmark relies on).
 * Unpaced, the same copy takes what memcpy takes (not checked: a loaded machine may be slow). */
static void test_pace(void) {
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = "fake";
    o.capacity = 16u << 20;
    o.pinned_capacity = 16u << 20;
    o.max_delay_us = 0;
    o.pace = 1;
    o.gbps[ZERO_COPY_H2D] = 1;
    zero_device *d = NULL;
    zero_error err;
    ZT_CHECKF(zero_device_create(&d, &o, &err) == ZERO_OK, "create paced fake: %s", err.msg);
    if (!d) return;
    char *x = NULL, *p = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, 4u << 20, (void **)&x));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, 4u << 20, (void **)&p));
    zero_stream *a = NULL;
    ZT_OK(zero_stream_create(d, &a));
    const double t = 10e-6 + (double)(4u << 20) / 1e9;
    for (int n = 1; n <= 2; n++) {
        const double t0 = zero_now();
        for (int k = 0; k < n; k++) ZT_OK(zero_stream_copy(a, x, p, 4u << 20));
        ZT_OK(zero_stream_sync(a));
        const double w = zero_now() - t0;
        ZT_CHECKF(w >= n * t, "%d paced copies of 4 MiB at 1 GB/s took %.6f s, less than their modeled %.6f s", n, w,
                  n * t);
    }
    zero_stream_free(a);
    zero_device_release(d, x);
    zero_device_release(d, p);
    zero_device_free(d);
}

/* 1 when a and b hold the same n values of es bytes (bf: 2-byte values are bf16, else fp16) bit
 * for bit. Where `any_nan`, two NaNs count as the same whatever their payloads: a GPU's arithmetic
 * returns its canonical NaN where the host keeps an operand's payload (docs/DEVICE.md); the cpu
 * and fake backends run the host's code and are held to every bit. */
static int nan_bits(const unsigned char *p, size_t es, int bf) {
    uint64_t u = 0;
    memcpy(&u, p, es);
    if (es == 8) return (u & 0x7fffffffffffffffull) > 0x7ff0000000000000ull;
    if (es == 4) return (u & 0x7fffffffu) > 0x7f800000u;
    return bf ? (u & 0x7fffu) > 0x7f80u : (u & 0x7fffu) > 0x7c00u;
}
static int same_vals(const void *a, const void *b, size_t n, size_t es, int bf, int any_nan) {
    const unsigned char *x = a, *y = b;
    for (size_t i = 0; i < n; i++, x += es, y += es)
        if (memcmp(x, y, es) != 0 && !(any_nan && nan_bits(x, es, bf) && nan_bits(y, es, bf))) return 0;
    return 1;
}
static int same_bits(const float *a, const float *b, size_t n, int any_nan) {
    return same_vals(a, b, n, 4, 0, any_nan);
}

/* The device's kernels run the kernel layer's element formulas: on the fake device (in its worker
 * process) and on the cpu backend they give the host references' bits, for every optimizer and
 * the narrowing conversions, on values that include zeros, subnormals, infinities and NaN. */
static void test_kernels_match_host(const char *backend) {
    zero_device *d = make(backend, 64u << 20, 20, 3);
    if (!d) return;
    const int any_nan = !strcmp(backend, "cuda");
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
        ZT_CHECKF(same_bits(op, rp, n, any_nan) && same_bits(om, rm, n, any_nan),
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
        ZT_CHECKF(same_vals(h16, r16, n, 2, bf, any_nan), "%s: %s narrowing on the device differs from the host's",
                  backend, bf ? "bf16" : "fp16");
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

/* Values that cover every class: zeros, subnormals, infinities, NaN, ties, and random ones. */
static uint64_t rng_state = 12345;
static uint32_t rnd32(void) {
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(rng_state >> 32);
}
static float rnd_float(size_t i) {
    static const float edge[] = {0.0f, -0.0f,    1e-40f,        -1e-40f,     INFINITY, -INFINITY,
                                 NAN,  65520.0f, 3.3895314e38f, 1.00390625f, 6e-8f,    -2.9802322e-08f};
    if (i % 61 < 12) return edge[i % 61];
    if (i % 61 == 12) { /* a random bit pattern, NaN payloads and all */
        const uint32_t u = rnd32();
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    return (float)((int32_t)rnd32() % 2000001) * 1e-4f;
}

/* Every kernel of the table but the optimizer's (test_kernels_match_host) on the device against
 * the host reference it stands for, bitwise: fill and axpy against their loops, widening against
 * zero_convert, the two-source sum against zero__reduce_scalar, accumulation against
 * zero__accumulate_scalar, the sums of squares block by block against zero__sumsq_scalar. */
static void test_all_kernels(const char *backend) {
    zero_device *d = make(backend, 64u << 20, 20, 5);
    if (!d) return;
    const int any_nan = !strcmp(backend, "cuda");
    const size_t n = 4099;
    float *hx = malloc(n * 4), *hy = malloc(n * 4), *out = malloc(n * 4), *ref = malloc(n * 4);
    uint16_t *ha = malloc(n * 2), *hb = malloc(n * 2), *o16 = malloc(n * 2), *r16 = malloc(n * 2);
    double *osq = malloc(n * 8);
    for (size_t i = 0; i < n; i++) {
        hx[i] = rnd_float(i);
        hy[i] = rnd_float(i + 7);
        ha[i] = (uint16_t)rnd32(); /* every 16-bit pattern class: subnormal, Inf, NaN halves too */
        hb[i] = i % 5 ? (uint16_t)rnd32() : (uint16_t)(rnd32() & 0x83ff); /* subnormals and zeros */
    }
    float *dx = NULL, *dy = NULL;
    uint16_t *da = NULL, *db = NULL;
    double *dsq = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_GRADS, n * 4, (void **)&dx));
    ZT_OK(
        zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, n * 4, (void **)&dy)); /* pinned operands too */
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_GRADS, n * 2, (void **)&da));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_GRADS, n * 2, (void **)&db));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, n * 8, (void **)&dsq));
    zero_stream *s = NULL;
    ZT_OK(zero_stream_create(d, &s));
    /* fill, then axpy: y += a x */
    zero__kcall fill = {.id = ZERO__K_FILL_F32, .n = n, .p = {dx}, .a = {-0.1}};
    ZT_OK(zero__stream_launch(s, &fill));
    ZT_OK(zero_stream_copy(s, out, dx, n * 4));
    ZT_OK(zero_stream_sync(s));
    int bad = 0;
    for (size_t i = 0; i < n; i++) bad += out[i] != (float)-0.1;
    ZT_CHECKF(bad == 0, "%s: fill: %d elements differ", backend, bad);
    ZT_OK(zero_stream_copy(s, dx, hx, n * 4));
    ZT_OK(zero_stream_copy(s, dy, hy, n * 4));
    zero__kcall axpy = {.id = ZERO__K_AXPY_F32, .n = n, .p = {dy, dx}, .a = {0.3}};
    ZT_OK(zero__stream_launch(s, &axpy));
    ZT_OK(zero_stream_copy(s, out, dy, n * 4));
    ZT_OK(zero_stream_sync(s));
    for (size_t i = 0; i < n; i++) {
        const float p = (float)0.3 * hx[i]; /* rounded, then added: no fma */
        ref[i] = hy[i] + p;
    }
    ZT_CHECKF(same_bits(out, ref, n, any_nan), "%s: axpy differs from the host's", backend);
    const zero_dtype half[2] = {ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int h = 0; h < 2; h++) {
        zero__kcall w = {.id = ZERO__K_WIDEN, .n = n, .p = {da, dx}, .a = {(double)half[h]}};
        ZT_OK(zero_stream_copy(s, da, ha, n * 2));
        ZT_OK(zero__stream_launch(s, &w));
        ZT_OK(zero_stream_copy(s, out, dx, n * 4));
        ZT_OK(zero_stream_sync(s));
        ZT_OK(zero_convert(ha, half[h], ref, ZERO_DTYPE_FP32, n, ZERO_IMPL_SCALAR));
        ZT_CHECKF(same_bits(out, ref, n, any_nan), "%s: widening %s differs from the host's", backend,
                  zero_dtype_name(half[h]));
    }
    const zero_dtype all[3] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    for (int t = 0; t < 3; t++) {
        const zero_dtype dt = all[t];
        const size_t es = dt == ZERO_DTYPE_FP32 ? 4 : 2;
        const void *A = dt == ZERO_DTYPE_FP32 ? (const void *)hx : ha,
                   *B = dt == ZERO_DTYPE_FP32 ? (const void *)hy : hb;
        void *dA = dt == ZERO_DTYPE_FP32 ? (void *)dx : da, *dB = dt == ZERO_DTYPE_FP32 ? (void *)dy : db;
        /* dA += dB */
        zero__kcall add = {.id = ZERO__K_ADD, .n = n, .p = {dA, dB}, .a = {(double)dt}};
        ZT_OK(zero_stream_copy(s, dA, A, n * es));
        ZT_OK(zero_stream_copy(s, dB, B, n * es));
        ZT_OK(zero__stream_launch(s, &add));
        ZT_OK(zero_stream_copy(s, out, dA, n * es));
        ZT_OK(zero_stream_sync(s));
        memcpy(ref, A, n * es);
        const void *src[2] = {ref, B};
        zero__reduce_scalar(dt, 0, src, 2, ref, n, 0);
        ZT_CHECKF(same_vals(out, ref, n, es, dt == ZERO_DTYPE_BF16, any_nan), "%s: the %s sum differs from the host's",
                  backend, zero_dtype_name(dt));
        /* dA (dt) += hy (fp32, from the pinned block) */
        zero__kcall acc = {.id = ZERO__K_ACCUM_F32, .n = n, .p = {dA, dy}, .a = {(double)dt}};
        ZT_OK(zero_stream_copy(s, dA, A, n * es));
        ZT_OK(zero_stream_copy(s, dy, hy, n * 4));
        ZT_OK(zero__stream_launch(s, &acc));
        ZT_OK(zero_stream_copy(s, out, dA, n * es));
        ZT_OK(zero_stream_sync(s));
        memcpy(ref, A, n * es);
        zero__accumulate_scalar(dt, ref, hy, n);
        ZT_CHECKF(same_vals(out, ref, n, es, dt == ZERO_DTYPE_BF16, any_nan),
                  "%s: %s accumulation differs from the host's", backend, zero_dtype_name(dt));
        /* sums of squares by blocks: shorter than the 16 lanes, not a multiple of them, one block */
        const uint64_t blocks[5] = {1, 7, 16, 1000, 8192};
        ZT_OK(zero_stream_copy(s, dA, A, n * es));
        for (int b = 0; b < 5; b++) {
            const uint64_t nb = (n + blocks[b] - 1) / blocks[b];
            zero__kcall sq = {.id = ZERO__K_SUMSQ, .n = n, .p = {dA, dsq}, .a = {(double)dt, (double)blocks[b]}};
            ZT_OK(zero__stream_launch(s, &sq));
            ZT_OK(zero_stream_copy(s, osq, dsq, nb * 8));
            ZT_OK(zero_stream_sync(s));
            int wrong = 0;
            for (uint64_t k = 0; k < nb; k++) {
                const uint64_t lo = k * blocks[b], len = n - lo < blocks[b] ? n - lo : blocks[b];
                const double r = zero__sumsq_scalar(dt, (const char *)A + lo * es, (size_t)len);
                wrong += !same_vals(&r, &osq[k], 1, 8, 0, any_nan);
            }
            ZT_CHECKF(wrong == 0, "%s: %s sums of squares by %llu: %d of %llu blocks differ from the host's", backend,
                      zero_dtype_name(dt), (unsigned long long)blocks[b], wrong, (unsigned long long)nb);
        }
    }
    zero_stream_free(s);
    zero_device_release(d, dx);
    zero_device_release(d, dy);
    zero_device_release(d, da);
    zero_device_release(d, db);
    zero_device_release(d, dsq);
    zero_device_free(d);
    free(hx), free(hy), free(out), free(ref), free(ha), free(hb), free(o16), free(r16), free(osq);
}

/* The quantized base's tile loaders as device kernels (NF4 with fp32 absmax, and an 8-bit code
 * table such as int8's) against the host's decoding (zero_dequant_nf4, zero_dequant_blockwise), and
 * 8-bit coding (q8_store, 8-bit optimizer states' kernel) against zero_quant_blockwise with both
 * dynamic maps, a block of zeros and a NaN among them, bit for bit, on an odd length with a partial
 * last block; a block of 0 is refused at launch. */
static void test_quant_kernels(const char *backend) {
    zero_device *d = make(backend, 16u << 20, 20, 5);
    if (!d) return;
    const uint64_t n = 4099, nb = zero_quant_blocks(n, 64);
    float *x = malloc(n * 4), *ref = malloc(n * 4), *out = malloc(n * 4), *ab = malloc(nb * 4), code[256];
    uint8_t *packed = malloc((n + 1) / 2), *idx = malloc(n);
    for (uint64_t i = 0; i < n; i++) x[i] = rnd_float(i + 3) * (i % 64 == 5 ? 40.0f : 1.0f);
    void *dp = NULL, *da = NULL, *dc = NULL, *dout = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, n, &dp));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, nb * 4, &da));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, 256 * 4, &dc));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, n * 4, &dout));
    zero_stream *s = NULL;
    ZT_OK(zero_stream_create(d, &s));
    /* NF4 */
    zero_quant_nf4(x, n, packed, ab);
    zero_dequant_nf4(packed, ab, 0, n, ref);
    ZT_OK(zero_stream_copy(s, dp, packed, (n + 1) / 2));
    ZT_OK(zero_stream_copy(s, da, ab, nb * 4));
    zero__kcall k4 = {.id = ZERO__K_NF4_LOAD, .n = n, .p = {dp, da, dout}, .a = {64}};
    ZT_OK(zero__stream_launch(s, &k4));
    ZT_OK(zero_stream_copy(s, out, dout, n * 4));
    ZT_OK(zero_stream_sync(s));
    ZT_CHECKF(same_bits(out, ref, n, 0), "%s: the NF4 loader differs from the host's decoding", backend);
    /* int8's linear map */
    zero_quant_linear_map(code);
    zero_quant_blockwise(x, n, 64, code, idx, ab);
    zero_dequant_blockwise(idx, ab, code, 64, 0, n, ref);
    ZT_OK(zero_stream_copy(s, dp, idx, n));
    ZT_OK(zero_stream_copy(s, da, ab, nb * 4));
    ZT_OK(zero_stream_copy(s, dc, code, 256 * 4));
    zero__kcall k8 = {.id = ZERO__K_Q8_LOAD, .n = n, .p = {dp, dc, da, dout}, .a = {64}};
    ZT_OK(zero__stream_launch(s, &k8));
    ZT_OK(zero_stream_copy(s, out, dout, n * 4));
    ZT_OK(zero_stream_sync(s));
    ZT_CHECKF(same_bits(out, ref, n, 0), "%s: the 8-bit loader differs from the host's decoding", backend);
    /* 8-bit coding with the dynamic maps (blocks of 256: 17 here, the last of 3 values) */
    const uint64_t nb8 = zero_quant_blocks(n, 256);
    for (int i = 64; i < 64 + 256; i++) x[i] = 0.0f; /* overlaps blocks 0 and 1 */
    x[700] = NAN;
    uint8_t *didx = malloc(n);
    float *dab = malloc(nb8 * 4);
    for (int sgn = 1; sgn >= 0; sgn--) {
        zero_quant_dynamic_map(sgn, code);
        for (uint64_t i = 0; i < n && !sgn; i++) x[i] = fabsf(x[i]); /* the second moment's map: values >= 0 */
        zero_quant_blockwise(x, n, 256, code, idx, ab);
        ZT_OK(zero_stream_copy(s, dout, x, n * 4));
        ZT_OK(zero_stream_copy(s, dc, code, 256 * 4));
        zero__kcall kq = {.id = ZERO__K_Q8_STORE, .n = n, .p = {dout, dc, dp, da}, .a = {256}};
        ZT_OK(zero__stream_launch(s, &kq));
        ZT_OK(zero_stream_copy(s, didx, dp, n));
        ZT_OK(zero_stream_copy(s, dab, da, nb8 * 4));
        ZT_OK(zero_stream_sync(s));
        ZT_CHECKF(!memcmp(didx, idx, n), "%s: 8-bit coding (%s map): the indices differ from the host's", backend,
                  sgn ? "signed" : "unsigned");
        ZT_CHECKF(same_bits(dab, ab, nb8, 0), "%s: 8-bit coding (%s map): the absmax differ from the host's", backend,
                  sgn ? "signed" : "unsigned");
    }
    free(didx);
    free(dab);
    /* a block of 0 elements, and a code table that is not on the device: refused before anything runs */
    zero__kcall bad = k4;
    bad.a[0] = 0;
    ZT_EQ_INT(zero__stream_launch(s, &bad), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_device_last_error(d), "block 0") != NULL, "%s", zero_device_last_error(d));
    bad = k8;
    bad.p[1] = code;
    ZT_EQ_INT(zero__stream_launch(s, &bad), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_device_last_error(d), "operand 1") != NULL, "%s", zero_device_last_error(d));
    zero_stream_free(s);
    zero_device_release(d, dp);
    zero_device_release(d, da);
    zero_device_release(d, dc);
    zero_device_release(d, dout);
    zero_device_free(d);
    free(x), free(ref), free(out), free(ab), free(packed), free(idx);
}

/* zero_device_release_after: a pinned block whose copy to the device is queued is freed only once
 * the copy has run, so the copy reads what the block held when it was queued even when the next
 * allocation — which fits the pinned capacity only after the block is freed, and so waits for it
 * — takes the same memory and the host writes it at once (lazy: nothing runs before a wait). */
static void test_release_after(const char *backend, int lazy) {
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = backend;
    o.capacity = 1u << 20;
    o.pinned_capacity = (1u << 20) + (1u << 16); /* a stream's 1 MiB bounce (fake) and one 48 KiB block */
    o.max_delay_us = 50;
    o.lazy = lazy;
    zero_device *d = NULL;
    zero_error err = {{0}};
    if (zero_device_create(&d, &o, &err) != ZERO_OK) {
        ZT_FAIL("create %s: %s", backend, err.msg);
        return;
    }
    enum { N = 12288 };
    zero_stream *s = NULL;
    float *a = NULL, *b = NULL, *dv = NULL, got[N];
    ZT_OK(zero_stream_create(d, &s));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, N * 4, (void **)&dv));
    zero_mem_stats st0, st;
    zero_device_mem_stats(d, ZERO_SPACE_HOST_PINNED, &st0);
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, N * 4, (void **)&a));
    for (int i = 0; i < N; i++) a[i] = (float)i;
    ZT_OK(zero_stream_copy(s, dv, a, N * 4));
    ZT_OK(zero_device_release_after(d, a, s));
    zero_device_mem_stats(d, ZERO_SPACE_HOST_PINNED, &st);
    if (lazy) /* the copy has not run: the block is still the device's */
        ZT_CHECKF(st.total_current == st0.total_current + N * 4,
                  "%s: pinned %zu bytes after release_after, expected %zu", backend, st.total_current,
                  st0.total_current + N * 4);
    ZT_CHECKF(zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, N * 4, (void **)&b) == ZERO_OK,
              "%s lazy %d: %s", backend, lazy, zero_device_last_error(d));
    for (int i = 0; i < N; i++) b[i] = -1.0f;
    ZT_OK(zero_stream_copy(s, got, dv, N * 4));
    ZT_OK(zero_stream_sync(s));
    int bad = 0;
    for (int i = 0; i < N; i++) bad += got[i] != (float)i;
    ZT_CHECKF(bad == 0, "%s (lazy %d): %d values of the copy read after the block was freed and written", backend, lazy,
              bad);
    zero_device_release(d, b);
    ZT_OK(zero_device_release_after(d, NULL, s));
    ZT_EQ_INT(zero_device_release_after(d, dv, NULL), ZERO_ERR_INVALID_ARG);
    /* handed back and never waited for: freed with the device */
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_HOST_PINNED, ZERO_MEM_BUFFERS, N * 4, (void **)&a));
    ZT_OK(zero_stream_copy(s, dv, a, N * 4));
    ZT_OK(zero_device_release_after(d, a, s));
    zero_device_release(d, dv);
    zero_stream_free(s);
    zero_device_free(d);
}

/* Past the grid a launch covers in one pass (65535 blocks of 256 threads): the grid-stride loops
 * go round twice, and the sums of squares run more blocks than a CUDA block has groups. Widening,
 * accumulation, the optimizer and the sums of squares against the host references (a GPU run:
 * the cpu and fake backends run these loops on the host). */
static void test_large(const char *backend) {
    zero_device *d = make(backend, 1ull << 30, 0, 1);
    if (!d) return;
    const int any_nan = !strcmp(backend, "cuda");
    const size_t n = (65535u * 256u) + 4099u;
    float *x = malloc(n * 4), *g = malloc(n * 4), *out = malloc(n * 4), *ref = malloc(n * 4);
    uint16_t *h = malloc(n * 2);
    double *sq = malloc((n / 1000 + 1) * 8);
    for (size_t i = 0; i < n; i++) {
        x[i] = rnd_float(i);
        g[i] = rnd_float(i + 3) * 0.01f;
        h[i] = (uint16_t)rnd32();
    }
    float *dx = NULL, *dg = NULL, *dm = NULL, *dv = NULL;
    uint16_t *dh = NULL;
    double *dsq = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_MASTER, n * 4, (void **)&dx));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_GRADS, n * 4, (void **)&dg));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, n * 4, (void **)&dm));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_OPTIM, n * 4, (void **)&dv));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, n * 2, (void **)&dh));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_BUFFERS, (n / 1000 + 1) * 8, (void **)&dsq));
    zero_stream *s = NULL;
    ZT_OK(zero_stream_create(d, &s));
    /* widen bf16, then add the gradient to it (fp32 accumulation) */
    zero__kcall w = {.id = ZERO__K_WIDEN, .n = n, .p = {dh, dx}, .a = {ZERO_DTYPE_BF16}};
    zero__kcall acc = {.id = ZERO__K_ACCUM_F32, .n = n, .p = {dx, dg}, .a = {ZERO_DTYPE_FP32}};
    ZT_OK(zero_stream_copy(s, dh, h, n * 2));
    ZT_OK(zero_stream_copy(s, dg, g, n * 4));
    ZT_OK(zero__stream_launch(s, &w));
    ZT_OK(zero__stream_launch(s, &acc));
    ZT_OK(zero_stream_copy(s, out, dx, n * 4));
    ZT_OK(zero_stream_sync(s));
    ZT_OK(zero_convert(h, ZERO_DTYPE_BF16, ref, ZERO_DTYPE_FP32, n, ZERO_IMPL_SCALAR));
    zero__accumulate_scalar(ZERO_DTYPE_FP32, ref, g, n);
    ZT_CHECKF(same_bits(out, ref, n, any_nan), "%s: %zu-element widening and accumulation differ", backend, n);
    /* AdamW over all of it */
    zero_optim_hparams hp;
    zero_optim_hparams_default(&hp, ZERO_OPTIM_ADAMW);
    hp.weight_decay = 0.1f;
    zero__kcall k = {.id = ZERO__K_OPTIM, .n = n, .p = {dx, dm, dv, dg}};
    zero__optim_consts(&hp, 2, 1.0f, 1.0f, &k.optim);
    ZT_OK(zero_stream_copy(s, dx, x, n * 4));
    ZT_OK(zero_stream_memset(s, dm, 0, n * 4));
    ZT_OK(zero_stream_memset(s, dv, 0, n * 4));
    ZT_OK(zero__stream_launch(s, &k));
    ZT_OK(zero_stream_copy(s, out, dx, n * 4));
    ZT_OK(zero_stream_sync(s));
    float *rm = calloc(n, 4), *rv = calloc(n, 4);
    memcpy(ref, x, n * 4);
    zero__optim_scalar(&k.optim, ref, rm, rv, g, n, NULL, ZERO_DTYPE_FP32);
    ZT_CHECKF(same_bits(out, ref, n, any_nan), "%s: a %zu-element AdamW step differs", backend, n);
    /* sums of squares by 1000: more blocks of the sum than a launch covers at once */
    const size_t nb = (n + 999) / 1000;
    zero__kcall sk = {.id = ZERO__K_SUMSQ, .n = n, .p = {dg, dsq}, .a = {ZERO_DTYPE_FP32, 1000}};
    ZT_OK(zero__stream_launch(s, &sk));
    ZT_OK(zero_stream_copy(s, sq, dsq, nb * 8));
    ZT_OK(zero_stream_sync(s));
    int wrong = 0;
    for (size_t b = 0; b < nb; b++) {
        const size_t lo = b * 1000, len = n - lo < 1000 ? n - lo : 1000;
        const double r = zero__sumsq_scalar(ZERO_DTYPE_FP32, g + lo, len);
        wrong += !same_vals(&r, &sq[b], 1, 8, 0, any_nan);
    }
    ZT_CHECKF(wrong == 0, "%s: %d of %zu sums of squares differ", backend, wrong, nb);
    zero_stream_free(s);
    zero_device_release(d, dx);
    zero_device_release(d, dg);
    zero_device_release(d, dm);
    zero_device_release(d, dv);
    zero_device_release(d, dh);
    zero_device_release(d, dsq);
    zero_device_free(d);
    free(x), free(g), free(out), free(ref), free(h), free(sq), free(rm), free(rv);
}

/* A launch the table cannot run is refused before it is queued, with one line: every backend's
 * kernels then run on operands they can reach. */
static void test_launch_checks(const char *backend) {
    zero_device *d = make(backend, 1u << 20, 0, 1);
    if (!d) return;
    float *x = NULL, *y = NULL, *p = NULL;
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, 1000, (void **)&x));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_DEVICE, ZERO_MEM_PARAMS, 1000, (void **)&y));
    ZT_OK(zero_device_alloc(d, ZERO_SPACE_HOST, ZERO_MEM_PARAMS, 1000, (void **)&p));
    float host[64];
    zero_stream *s = NULL;
    ZT_OK(zero_stream_create(d, &s));
    struct {
        zero__kcall k;
        const char *want;
    } bad[] = {
        {{.id = 99, .n = 4, .p = {x}}, "kernel 99 is not one of the 13"},
        {{.id = ZERO__K_WIDEN, .n = 4, .p = {x, y}, .a = {ZERO_DTYPE_FP32}},
         "launch widen: dtype 0: expected bf16 or fp16"},
        {{.id = ZERO__K_ADD, .n = 4, .p = {x, y}, .a = {ZERO_DTYPE_INT32}}, "launch add: dtype 3: expected fp32, bf16"},
        {{.id = ZERO__K_SUMSQ, .n = 4, .p = {x, y}, .a = {ZERO_DTYPE_FP32, 0}}, "launch sumsq: block 0: expected"},
        {{.id = ZERO__K_SUMSQ, .n = 4, .p = {x, y}, .a = {ZERO_DTYPE_FP32, 2.5}}, "launch sumsq: block 2.5: expected"},
        {{.id = ZERO__K_FILL_F32, .n = 4, .p = {host}}, "launch fill_f32: operand 0"},
        {{.id = ZERO__K_FILL_F32, .n = 4, .p = {p}}, "launch fill_f32: operand 0"},      /* pageable, the device's */
        {{.id = ZERO__K_AXPY_F32, .n = 257, .p = {x, y}}, "launch axpy_f32: operand 0"}, /* past its 1024 bytes */
        {{.id = ZERO__K_AXPY_F32, .n = 4, .p = {y, x + 254}}, "launch axpy_f32: operand 1"}, /* runs past the block */
        {{.id = ZERO__K_F32_TO_BF16, .n = 4, .p = {x, NULL}}, "launch f32_to_bf16: operand 1"},
        {{.id = ZERO__K_AXPY_F32, .n = 1ull << 62, .p = {x, y}}, "launch axpy_f32: 4611686018427387904 elements"},
        {{.id = ZERO__K_OPTIM, .n = 4, .p = {x, y, NULL, y}, .optim = {.type = ZERO_OPTIM_ADAMW}},
         "launch optim: operand 2"},
        {{.id = ZERO__K_OPTIM, .n = 4, .p = {x, y, y, y}, .optim = {.type = 7}}, "optimizer type 7: expected adamw"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ZT_EQ_INT(zero__stream_launch(s, &bad[i].k), ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(zero_device_last_error(d), bad[i].want) != NULL, "case %zu: '%s', expected '%s'", i,
                  zero_device_last_error(d), bad[i].want);
    }
    /* what the table takes: SGD without momentum keeps no state; nothing to do for n == 0 */
    zero__kcall sgd = {.id = ZERO__K_OPTIM, .n = 4, .p = {x, NULL, NULL, y}, .optim = {.type = ZERO_OPTIM_SGD}};
    ZT_OK(zero__stream_launch(s, &sgd));
    zero__kcall none = {.id = ZERO__K_FILL_F32, .n = 0, .p = {NULL}};
    ZT_OK(zero__stream_launch(s, &none));
    zero__kcall edge = {.id = ZERO__K_AXPY_F32, .n = 6, .p = {x + 250, y + 250}}; /* the block's last 24 bytes */
    ZT_OK(zero__stream_launch(s, &edge));
    ZT_OK(zero_stream_sync(s));
    zero_stream_free(s);
    zero_device_release(d, x);
    zero_device_release(d, y);
    zero_device_release(d, p);
    zero_device_free(d);
}

int main(void) {
    /* ZERO_TEST_DEVICE=cuda (scripts/gpu_check.sh): the backend-generic checks on that backend */
    const char *extra = getenv("ZERO_TEST_DEVICE");
    if (extra && *extra && strcmp(extra, "cpu") != 0 && strcmp(extra, "fake") != 0) {
        const int r = zt_device_probe("test_device", extra);
        if (r <= 0) return r == 0 ? 77 : zt_finish("test_device");
        printf("test_device: the backend-generic checks on %s\n", extra);
        test_roundtrip(extra);
        test_capacity(extra);
        test_launch_checks(extra);
        test_kernels_match_host(extra);
        test_all_kernels(extra);
        test_quant_kernels(extra);
        if (!getenv("ZERO_TEST_SMALL")) test_large(extra); /* ZERO_TEST_SMALL: under a sanitizer */
        zero_device *d = make(extra, 1u << 20, 0, 1);
        if (d) {
            ZT_EQ_INT(consumer_wrong(d, 1), 0); /* ordered by the event: right every time */
            zero_device_free(d);
        }
        test_cuda_create(); /* nothing of the fake device here: no worker process under a sanitizer */
        return zt_finish("test_device");
    }
    test_module_errors(); /* before this process loads the cuda module */
    test_roundtrip("cpu");
    test_roundtrip("fake");
    test_capacity("fake");
    test_capacity("cpu");
    test_create_errors();
    test_host_access_faults();
    test_events();
    test_lazy();
    test_cost_model();
    test_pace();
    test_launch_checks("cpu");
    test_launch_checks("fake");
    test_kernels_match_host("cpu");
    test_kernels_match_host("fake");
    test_all_kernels("cpu");
    test_all_kernels("fake");
    test_quant_kernels("cpu");
    test_quant_kernels("fake");
    test_release_after("cpu", 0);
    test_release_after("fake", 0);
    test_release_after("fake", 1);
    return zt_finish("test_device");
}
