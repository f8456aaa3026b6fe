/* tests/device_probe.h — whether a device backend starts here, for the tests that also run on the
 * cuda backend (ZERO_TEST_DEVICE=cuda, scripts/gpu_check.sh): where it does not start and no GPU is
 * expected (no $ZERO_TEST_GPU=1, no /dev/nvidiactl) the test skips, named (exit 77); where a GPU is
 * expected, or the backend is one that always starts (cpu, fake), that is a failure. */
#ifndef ZERO_TEST_DEVICE_PROBE_H
#define ZERO_TEST_DEVICE_PROBE_H

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "zero/device.h"

static inline int zt_gpu_expected(void) {
    const char *v = getenv("ZERO_TEST_GPU");
    if (v && *v) return strcmp(v, "0") != 0;
    return access("/dev/nvidiactl", F_OK) == 0;
}

/* 1: backend starts, run the test; 0: skip it (printed, exit 77); -1: a failure (recorded). */
static inline int zt_device_probe(const char *test, const char *backend) {
    zero_device_options o;
    zero_device_options_default(&o);
    o.backend = backend;
    zero_device *probe = NULL;
    zero_error err = {{0}};
    if (zero_device_create(&probe, &o, &err) == ZERO_OK) {
        zero_device_free(probe);
        return 1;
    }
    if (!strcmp(backend, "cpu") || !strcmp(backend, "fake") || zt_gpu_expected()) {
        ZT_FAIL("%s: the %s device does not start where it should: %s", test, backend, err.msg);
        return -1;
    }
    printf("%s: %s skipped: %s\n", test, backend, err.msg);
    return 0;
}

#endif
