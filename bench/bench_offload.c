/* bench/bench_offload.c — ZeRO-Offload's optimizer step on the fake device with the cost model paced
 * in real time (zero_device_options.pace: each copy lasts latency + bytes / bandwidth, PCIe 4.0 x16
 * by default), the host's AdamW writing the updated bf16 working copy into pinned buffers whose
 * uploads run while it computes the next chunk (docs/DEVICE.md, "Overlap") — against the same step
 * with every upload waited for (zero_engine_options.sync_copies), and against the host optimizer
 * alone (the cpu backend: the same AdamW on the same numbers, nothing to copy). Interleaved
 * rounds, medians; the uploads' modeled time from the device's counters. What it shows: the
 * overlapped step against max(host optimizer, uploads), the bound being 1.15.
 *
 * Usage: bench_offload [millions of parameters [rounds [units [gbps]]]] (default 16 7 8 25: 16 Mi
 * parameters in 8 units, PCIe 4.0 x16). Threads follow OMP_NUM_THREADS. One rank, no MPI. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "zero/zero.h"

typedef struct run {
    zero_engine *e;
    int units;
} run;

static int make(run *r, zero_comm *comm, const char *backend, int sync, double gbps, int units, int64_t per_unit) {
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = 2;
    cfg.precision = ZERO_DTYPE_BF16;
    cfg.micro_batch = 1;
    cfg.offload_optimizer.device = ZERO_OFFLOAD_CPU;
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    zero_error err = {{0}};
    if (zero_config_resolve(&cfg, 1, &err) != ZERO_OK) {
        fprintf(stderr, "bench_offload: config: %s\n", err.msg);
        return -1;
    }
    zero_engine_options o;
    zero_engine_options_default(&o);
    o.device.backend = backend;
    o.device.max_delay_us = 0;
    o.device.pace = 1;
    o.device.pinned_capacity = (uint64_t)per_unit * (uint64_t)units * 20 + ((uint64_t)64 << 20);
    for (int k = 0; k < ZERO_COPY_DIR_COUNT && gbps > 0; k++)
        if (k != ZERO_COPY_D2D) o.device.gbps[k] = gbps;
    o.sync_copies = sync;
    r->units = units;
    if (zero_engine_create_with(&r->e, comm, &cfg, &o, &err) != ZERO_OK) {
        fprintf(stderr, "bench_offload: %s: %s\n", backend, err.msg);
        return -1;
    }
    float *v = malloc((size_t)per_unit * sizeof *v);
    if (!v) return -1;
    for (int64_t i = 0; i < per_unit; i++) v[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    int rc = 0;
    for (int u = 0; u < units && !rc; u++) {
        char name[32], pname[40];
        snprintf(name, sizeof name, "unit%d", u);
        snprintf(pname, sizeof pname, "%s.w", name);
        const int id = zero_engine_add_unit(r->e, name);
        const int64_t shape[1] = {per_unit};
        rc = id < 0 || zero_engine_add_param(r->e, id, pname, shape, 1, 0) != ZERO_OK;
    }
    if (!rc) rc = zero_engine_finalize(r->e) != ZERO_OK;
    for (int u = 0; u < units && !rc; u++) rc = zero_engine_set_unit(r->e, u, v) != ZERO_OK;
    free(v);
    if (rc) fprintf(stderr, "bench_offload: %s: %s\n", backend, zero_engine_last_error(r->e));
    return rc ? -1 : 0;
}

/* One step: every unit's gradient set (not timed), then zero_engine_step; its wall time. */
static double step(run *r, int64_t per_unit, zero_device_counters *dc) {
    for (int u = 0; u < r->units; u++) {
        if (!zero_engine_gather(r->e, u)) return -1;
        float *g = zero_engine_grad(r->e, u);
        if (!g) return -1;
        for (int64_t i = 0; i < per_unit; i++) g[i] = (float)((i + u) % 97) * 1e-3f - 0.05f;
        if (zero_engine_grad_ready(r->e, u) != ZERO_OK || zero_engine_release(r->e, u) != ZERO_OK) return -1;
    }
    zero_device_counters a, b;
    zero_engine_device_counters(r->e, &a);
    const double t0 = zero_now();
    zero_step_stats st;
    if (zero_engine_step(r->e, &st) != ZERO_OK) return -1;
    const double t = zero_now() - t0;
    zero_engine_device_counters(r->e, &b);
    for (int k = 0; k < ZERO_COPY_DIR_COUNT; k++) {
        dc->bytes[k] = b.bytes[k] - a.bytes[k];
        dc->copies[k] = b.copies[k] - a.copies[k];
    }
    return t;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const double mparams = argc > 1 ? atof(argv[1]) : 16;
    const int rounds = argc > 2 ? atoi(argv[2]) : 7;
    const int units = argc > 3 ? atoi(argv[3]) : 8;
    const double gbps = argc > 4 ? atof(argv[4]) : 25;
    if (!(mparams > 0 && mparams <= 1024) || rounds < 1 || rounds > 100 || units < 1 || units > 1024 || !(gbps > 0)) {
        fprintf(stderr,
                "usage: bench_offload [millions of parameters (0,1024] [rounds 1..100 [units 1..1024 [GB/s > 0]]]]\n");
        return 2;
    }
    const int64_t per_unit = (int64_t)(mparams * 1048576.0 / units);
    zero_comm *comm = NULL;
    if (zero_comm_init_self(&comm) != ZERO_OK) return 1;
    const char *names[3] = {"host optimizer alone (cpu backend)", "fake, uploads overlapped",
                            "fake, uploads synchronous"};
    run r[3];
    if (make(&r[0], comm, "cpu", 0, gbps, units, per_unit) || make(&r[1], comm, "fake", 0, gbps, units, per_unit) ||
        make(&r[2], comm, "fake", 1, gbps, units, per_unit))
        return 1;
    double t[3][100];
    zero_device_counters dc;
    memset(&dc, 0, sizeof dc);
    for (int k = 0; k < 3; k++) /* a warm-up step each: buffers, pages, the first moments */
        if (step(&r[k], per_unit, &dc) < 0) {
            fprintf(stderr, "bench_offload: %s: %s\n", names[k], zero_engine_last_error(r[k].e));
            return 1;
        }
    for (int i = 0; i < rounds; i++)
        for (int k = 0; k < 3; k++) {
            zero_device_counters c;
            t[k][i] = step(&r[k], per_unit, &c);
            if (t[k][i] < 0) {
                fprintf(stderr, "bench_offload: %s: %s\n", names[k], zero_engine_last_error(r[k].e));
                return 1;
            }
            if (k == 1) dc = c;
        }
    double med[3];
    for (int k = 0; k < 3; k++) {
        qsort(t[k], (size_t)rounds, sizeof(double), cmp);
        med[k] = t[k][rounds / 2];
    }
    /* the uploads as the cost model times them: what the step copied host to device */
    const double latency = 10e-6;
    const double up = (double)dc.copies[ZERO_COPY_H2D] * latency + (double)dc.bytes[ZERO_COPY_H2D] / (gbps * 1e9);
    const double bound = med[0] > up ? med[0] : up;
    printf("bench_offload: %.1f Mi parameters in %d units, bf16 working copy, AdamW on the host, %d rounds "
           "(medians), OMP_NUM_THREADS=%s\n",
           (double)per_unit * units / 1048576.0, units, rounds,
           getenv("OMP_NUM_THREADS") ? getenv("OMP_NUM_THREADS") : "unset");
    printf("  uploads per step: %llu copies, %.1f MiB host to device, %.2f ms at %.0f GB/s + 10 us each (the cost "
           "model)\n",
           (unsigned long long)dc.copies[ZERO_COPY_H2D], (double)dc.bytes[ZERO_COPY_H2D] / 1048576.0, up * 1e3, gbps);
    for (int k = 0; k < 3; k++) printf("  %-36s %8.2f ms\n", names[k], med[k] * 1e3);
    printf("  overlapped / max(host optimizer, uploads) = %.3f (bound 1.15); synchronous / the same = %.3f\n",
           med[1] / bound, med[2] / bound);
    for (int k = 0; k < 3; k++) zero_engine_free(r[k].e);
    zero_comm_free(comm);
    return 0;
}
