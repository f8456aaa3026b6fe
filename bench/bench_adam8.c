/* bench/bench_adam8.c — 8-bit AdamW (zero_optim_step_q8: the moments decoded, the fp32 step, coded
 * again; docs/QUANT.md) against the fp32 AdamW step (zero_optim_step) on the same parameters and
 * gradients: interleaved rounds, medians, the ratio and each step's nanoseconds per parameter; and
 * the moments' bytes (2.03 against 8 per parameter). Then the base formats' coding of the same
 * number of values (zero_quant_record_encode: NF4 with double quantization, int8; medians, ns a
 * value), what loading a quantized base costs per weight.
 *
 * Usage: bench_adam8 [millions of parameters [rounds]] (default 16 9). Threads follow
 * OMP_NUM_THREADS. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "zero/zero.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const size_t n = (size_t)((argc > 1 ? atof(argv[1]) : 16) * 1048576.0);
    const int rounds = argc > 2 ? atoi(argv[2]) : 9;
    if (n < 256 || rounds < 1 || rounds > 1000) {
        fprintf(stderr, "usage: bench_adam8 [millions of parameters (>= 0.001)] [rounds 1..1000]\n");
        return 2;
    }
    float *p32 = malloc(n * 4), *p8 = malloc(n * 4), *g = malloc(n * 4), *m = calloc(n, 4), *v = calloc(n, 4);
    const size_t nb = zero_quant_blocks(n, ZERO_QUANT_Q8_BLOCK);
    zero_q8_state st = {calloc(n, 1), calloc(n, 1), calloc(nb, 4), calloc(nb, 4)};
    double *t32 = malloc(sizeof(double) * (size_t)rounds), *t8 = malloc(sizeof(double) * (size_t)rounds);
    int rc = 0;
    if (!p32 || !p8 || !g || !m || !v || !st.m || !st.v || !st.m_absmax || !st.v_absmax || !t32 || !t8) {
        fprintf(stderr, "bench_adam8: out of memory for %zu parameters\n", n);
        rc = 1;
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        p32[i] = p8[i] = (float)((i * 2654435761u) % 2001) / 2000.0f - 0.5f;
        g[i] = (float)((i * 40503u) % 2001) / 2e5f - 0.005f;
    }
    zero_optim_hparams h;
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    for (int r = 0; r < rounds; r++) { /* interleaved: the same load on both */
        double t0 = now();
        if (zero_optim_step(&h, r + 1, p32, m, v, g, 1.0f, 1.0f, n, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO) != ZERO_OK) {
            rc = 1;
            goto done;
        }
        double t1 = now();
        if (zero_optim_step_q8(&h, r + 1, p8, &st, g, 1.0f, 1.0f, n, NULL, ZERO_DTYPE_FP32) != ZERO_OK) {
            rc = 1;
            goto done;
        }
        double t2 = now();
        t32[r] = t1 - t0;
        t8[r] = t2 - t1;
    }
    qsort(t32, (size_t)rounds, sizeof *t32, cmp);
    qsort(t8, (size_t)rounds, sizeof *t8, cmp);
    const double a = t32[rounds / 2], b = t8[rounds / 2];
    printf("bench_adam8: %zu parameters, %d rounds (medians): fp32 AdamW %.2f ms (%.2f ns/param), 8-bit AdamW %.2f ms "
           "(%.2f ns/param): ratio %.2f; moments %.3f bytes/param against 8\n",
           n, rounds, a * 1e3, a * 1e9 / (double)n, b * 1e3, b * 1e9 / (double)n, b / a,
           (2.0 * (double)n + 8.0 * (double)nb) / (double)n);
    const zero_qformat fm[2] = {ZERO_QFMT_NF4_DQ, ZERO_QFMT_INT8};
    for (int k = 0; k < 2 && !rc; k++) {
        void *rec = malloc((size_t)zero_quant_record_bytes(fm[k], n));
        for (int r = 0; rec && r < rounds && !rc; r++) {
            const double t0 = now();
            rc = zero_quant_record_encode(fm[k], p32, n, rec) != ZERO_OK;
            t8[r] = now() - t0;
        }
        if (rec && !rc) {
            qsort(t8, (size_t)rounds, sizeof *t8, cmp);
            printf("bench_adam8: coding %zu values as %s (zero_quant_record_encode, median): %.2f ms (%.2f ns/value)\n",
                   n, zero_qformat_name(fm[k]), t8[rounds / 2] * 1e3, t8[rounds / 2] * 1e9 / (double)n);
        }
        rc |= !rec;
        free(rec);
    }
done:
    free(p32), free(p8), free(g), free(m), free(v), free(st.m), free(st.v), free(st.m_absmax), free(st.v_absmax);
    free(t32), free(t8);
    return rc;
}
