/* bench/bench_working.c — a bf16 micro-batch (forward + backward) of a preset through the engine
 * on one rank, its products forced to bf16, reading each unit's bf16 working copy as it is
 * (zero_engine_gather_parts) against reading the fp32 view the engine widens it into
 * (zero_engine_gather, which the products then round back): interleaved passes, medians, the
 * ratio. Where the CPU has no bf16 products both run the convert path (the products widened to
 * fp32 for sgemm), which times what the working copy saves but not the native products' share.
 *
 * Usage: bench_working [preset [passes [seq [micro-batch [lora]]]]] (default gpt2 7 128 4; "lora":
 * LoRA r 16 on the default targets, the base frozen in bf16). Threads follow OMP_NUM_THREADS. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decoder/decoder_internal.h"
#include "decoder/lora.h"

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static int cmp(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *preset = argc > 1 ? argv[1] : "gpt2";
    const int passes = argc > 2 ? atoi(argv[2]) : 7, T = argc > 3 ? atoi(argv[3]) : 128,
              B = argc > 4 ? atoi(argv[4]) : 4;
    const int lora = argc > 5 && !strcmp(argv[5], "lora");
    if (passes < 1 || passes > 1000 || T < 1 || B < 1 || (argc > 5 && !lora)) {
        fprintf(stderr,
                "bench_working: passes %d, seq %d, micro-batch %d%s%s: expected 1..1000 passes, positive sizes and "
                "\"lora\" or nothing\n",
                passes, T, B, argc > 5 ? ", " : "", argc > 5 ? argv[5] : "");
        return 2;
    }
    dec_lora l;
    dec_lora_default(&l);
    l.r = 16, l.alpha = 32;
    dec_config c;
    zero_error err = {{0}};
    zero_config cfg;
    zero_config_default(&cfg);
    cfg.precision = ZERO_DTYPE_BF16;
    cfg.micro_batch = B;
    cfg.grad_accum = 2 * (passes + 1); /* every pass one micro-batch of a step never taken: the same parameters */
    zero_optim_hparams_default(&cfg.optim, ZERO_OPTIM_ADAMW);
    zero_comm *self = NULL;
    zero_engine *e = NULL;
    dec_model *m = NULL;
    if (dec_config_preset(&c, preset, &err) || zero_comm_init_self(&self) || zero_config_resolve(&cfg, 1, &err) ||
        (lora && dec_lora_targets(&c, NULL, &l.targets, &err)) || zero_engine_create(&e, self, &cfg) ||
        (lora ? dec_lora_register(&c, &l, e, &err) : dec_engine_register(&c, e, &err)) || zero_engine_finalize(e) ||
        dec_engine_init(&c, e, 1, &err) || (lora && dec_lora_init(&c, &l, e, &err)) ||
        dec_create(&m, &c, B, T, 0, &err) || (lora && dec_set_lora(m, &l, &err))) {
        fprintf(stderr, "bench_working: setup: %s%s\n", err.msg, e ? zero_engine_last_error(e) : "");
        return 1;
    }
    dec__set_matmul_prec(m, MK_PREC_BF16);
    const size_t N = (size_t)B * T;
    int32_t *tok = malloc(N * sizeof *tok), *tgt = malloc(N * sizeof *tgt);
    double *t[2] = {calloc((size_t)passes, sizeof(double)), calloc((size_t)passes, sizeof(double))};
    int rc = 1;
    if (!tok || !tgt || !t[0] || !t[1]) {
        fprintf(stderr, "bench_working: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < N; i++)
        tok[i] = (int32_t)((i * 7919) % (size_t)c.vocab), tgt[i] = (int32_t)((i * 104729) % (size_t)c.vocab);
    float loss[2] = {0, 0};
    /* a warm-up pass of each, then pairs in alternating order */
    for (int k = -1; k < passes; k++)
        for (int j = 0; j < 2; j++) {
            const int on = (k & 1) ? j : 1 - j;
            dec__set_working_copy(m, on);
            const double t0 = now();
            if (dec_engine_micro_batch(m, e, tok, tgt, B, T, 0, &loss[on]) || zero_engine_micro_batch_done(e)) {
                fprintf(stderr, "bench_working: %s\n", dec_last_error(m));
                goto done;
            }
            if (k >= 0) t[on][k] = (now() - t0) * 1e3;
        }
    qsort(t[0], (size_t)passes, sizeof(double), cmp);
    qsort(t[1], (size_t)passes, sizeof(double), cmp);
    const double view = t[0][passes / 2], wk = t[1][passes / 2];
    printf("%s%s, micro-batch %d x %d, bf16 products (%s), %d interleaved passes each, medians:\n", preset,
           lora ? " (LoRA r 16)" : "", B, T, mk_gemm_bf16_path_name(), passes);
    printf("  fp32 view      %9.1f ms (min %.1f, max %.1f)\n", view, t[0][0], t[0][passes - 1]);
    printf("  working copy   %9.1f ms (min %.1f, max %.1f)\n", wk, t[1][0], t[1][passes - 1]);
    uint32_t bits[2];
    memcpy(bits, loss, sizeof bits);
    printf("  working / view %9.3f   (losses %.7g and %.7g: %s)\n", wk / view, loss[1], loss[0],
           bits[0] == bits[1] ? "the same bits" : "DIFFER");
    rc = 0;
done:
    free(tok), free(tgt), free(t[0]), free(t[1]);
    dec_free(m);
    zero_engine_free(e);
    zero_comm_free(self);
    return rc;
}
