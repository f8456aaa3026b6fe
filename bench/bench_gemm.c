/* bench/bench_gemm.c — sgemm (and bf16 GEMM) GFLOP/s of one BLAS backend on the model's shapes,
 * for bench/gemm.sh, which runs every backend in turn, interleaved, and tabulates the ratios.
 *
 * Usage: bench_gemm BACKEND [seconds-per-shape]
 *   cblas:/path/to/lib.so   any CBLAS (OpenBLAS pthread/OpenMP builds, BLIS), loaded with dlopen
 *   dnnl-sgemm              oneDNN's dnnl_sgemm (row-major), when built with oneDNN
 *   dnnl-matmul             oneDNN's matmul primitive, the weight pre-packed once (reorder timed apart)
 *   dnnl-matmul-bf16        the same with bf16 activations and weights, fp32 output
 *   mk-bf16                 mk_gemm_bf16 (models/kernels), the path it picks on this CPU
 * Prints one line per shape and operation: backend model op M N K gflops ms. Threads follow the
 * environment (OMP_NUM_THREADS; the script sets the library's own variable too). */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef BENCH_HAVE_DNNL
#include <oneapi/dnnl/dnnl.h>
#endif
#include "kernels/kernels.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 };
typedef void (*sgemm_fn)(int order, int ta, int tb, int M, int N, int K, float alpha, const float *A,
                         int lda, const float *B, int ldb, float beta, float *C, int ldc);

/* One linear layer y = x W, x (N, IC), W (IC, OC), and the products of its backward. */
typedef struct layer {
    const char *model, *name;
    int IC, OC;
} layer;

/* small: C = 512; gpt2: C = 768; SmolLM2-135M: C = 576, 9 heads of 64 with 3 kv heads (q, k, v
 * 576 + 2 * 192 = 960 wide), MLP 1536 (gate and up fused: 3072). Rows N = B*T = 512. */
static const layer layers[] = {
    {"small", "qkv", 512, 1536},   {"small", "proj", 512, 512},    {"small", "fc", 512, 2048},
    {"small", "fc_proj", 2048, 512}, {"gpt2", "qkv", 768, 2304},   {"gpt2", "proj", 768, 768},
    {"gpt2", "fc", 768, 3072},     {"gpt2", "fc_proj", 3072, 768}, {"smollm", "qkv", 576, 960},
    {"smollm", "o_proj", 576, 576}, {"smollm", "gate_up", 576, 3072}, {"smollm", "down", 1536, 576},
};
enum { NLAYERS = sizeof layers / sizeof layers[0], NROWS = 512 };

static double now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

/* The three products of a layer: fwd y = x W (NN), bwd-data dx = dy W^T (NT), bwd-weight
 * dW = x^T dy (TN). M, N, K and the transposes of each, row-major. */
typedef struct op {
    const char *name;
    int ta, tb, M, N, K;
} op;
static void ops_of(const layer *l, op o[3]) {
    o[0] = (op){"fwd", 0, 0, NROWS, l->OC, l->IC};
    o[1] = (op){"bwd_data", 0, 1, NROWS, l->IC, l->OC};
    o[2] = (op){"bwd_weight", 1, 0, l->IC, l->OC, NROWS};
}

typedef struct runner {
    void *ctx;
    /* prepares the product (the weight operand is B for fwd/bwd_data); returns 0 when supported */
    int (*prepare)(void *ctx, const op *o, const float *A, const float *B, float *C);
    void (*run)(void *ctx);
    void (*release)(void *ctx);
} runner;

/* ---------------------------------------------------------------- CBLAS via dlopen */
typedef struct cb {
    sgemm_fn f;
    op o;
    const float *A, *B;
    float *C;
} cb;
static int cb_prepare(void *p, const op *o, const float *A, const float *B, float *C) {
    cb *c = p;
    c->o = *o, c->A = A, c->B = B, c->C = C;
    return 0;
}
static void cb_run(void *p) {
    cb *c = p;
    const op *o = &c->o;
    const int lda = o->ta ? o->M : o->K, ldb = o->tb ? o->K : o->N;
    c->f(ROW_MAJOR, o->ta ? TRANS : NO_TRANS, o->tb ? TRANS : NO_TRANS, o->M, o->N, o->K, 1.0f, c->A,
         lda, c->B, ldb, 0.0f, c->C, o->N);
}
static void cb_release(void *p) { (void)p; }

/* ---------------------------------------------------------------- mk_gemm_bf16 */
typedef struct mkb {
    op o;
    uint16_t *A, *B;
    float *C;
} mkb;
static uint16_t to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
static int mkb_prepare(void *p, const op *o, const float *A, const float *B, float *C) {
    mkb *m = p;
    m->o = *o, m->C = C;
    const size_t na = (size_t)o->M * o->K, nb = (size_t)o->K * o->N;
    m->A = malloc(2 * na), m->B = malloc(2 * nb);
    for (size_t i = 0; i < na; i++) m->A[i] = to_bf16(A[i]);
    for (size_t i = 0; i < nb; i++) m->B[i] = to_bf16(B[i]);
    return 0;
}
static void mkb_run(void *p) {
    mkb *m = p;
    const op *o = &m->o;
    mk_gemm_bf16(o->ta, o->tb, o->M, o->N, o->K, 1.0f, m->A, o->ta ? o->M : o->K, m->B,
                 o->tb ? o->K : o->N, 0.0f, m->C, o->N, MK_GEMM_AUTO);
}
static void mkb_release(void *p) {
    mkb *m = p;
    free(m->A), free(m->B);
}

#ifdef BENCH_HAVE_DNNL
/* ---------------------------------------------------------------- oneDNN */
typedef struct dn {
    int matmul, bf16;
    dnnl_engine_t eng;
    dnnl_stream_t st;
    op o;
    const float *A, *B;
    float *C;
    dnnl_primitive_t prim;
    dnnl_memory_t ma, mb, mc;
    void *abuf, *bbuf;
    double reorder_ms;
} dn;

static int dn_prepare(void *p, const op *o, const float *A, const float *B, float *C) {
    dn *d = p;
    d->o = *o, d->A = A, d->B = B, d->C = C;
    if (!d->matmul) return 0;
    const dnnl_data_type_t dt = d->bf16 ? dnnl_bf16 : dnnl_f32;
    const size_t es = d->bf16 ? 2 : 4, na = (size_t)o->M * o->K, nb = (size_t)o->K * o->N;
    d->abuf = malloc(es * na), d->bbuf = malloc(es * nb);
    if (d->bf16) {
        for (size_t i = 0; i < na; i++) ((uint16_t *)d->abuf)[i] = to_bf16(A[i]);
        for (size_t i = 0; i < nb; i++) ((uint16_t *)d->bbuf)[i] = to_bf16(B[i]);
    } else {
        memcpy(d->abuf, A, 4 * na), memcpy(d->bbuf, B, 4 * nb);
    }
    dnnl_memory_desc_t amd, bmd, bany, cmd;
    dnnl_dims_t ad = {o->M, o->K}, bd = {o->K, o->N}, cd = {o->M, o->N};
    dnnl_memory_desc_init_by_tag(&amd, 2, ad, dt, o->ta ? dnnl_ba : dnnl_ab);
    dnnl_memory_desc_init_by_tag(&bmd, 2, bd, dt, o->tb ? dnnl_ba : dnnl_ab);
    dnnl_memory_desc_init_by_tag(&bany, 2, bd, dt, dnnl_format_tag_any);
    dnnl_memory_desc_init_by_tag(&cmd, 2, cd, dnnl_f32, dnnl_ab);
    dnnl_matmul_desc_t mdsc;
    if (dnnl_matmul_desc_init(&mdsc, &amd, &bany, NULL, &cmd) != dnnl_success) return -1;
    dnnl_primitive_desc_t pd;
    if (dnnl_primitive_desc_create(&pd, &mdsc, NULL, d->eng, NULL) != dnnl_success) return -1;
    const dnnl_memory_desc_t *wmd = dnnl_primitive_desc_query_md(pd, dnnl_query_weights_md, 0);
    dnnl_primitive_create(&d->prim, pd);
    dnnl_memory_t braw;
    dnnl_memory_create(&d->ma, &amd, d->eng, d->abuf);
    dnnl_memory_create(&braw, &bmd, d->eng, d->bbuf);
    dnnl_memory_create(&d->mb, wmd, d->eng, DNNL_MEMORY_ALLOCATE);
    dnnl_memory_create(&d->mc, &cmd, d->eng, C);
    dnnl_primitive_desc_t rpd;
    dnnl_primitive_t r;
    dnnl_reorder_primitive_desc_create(&rpd, &bmd, d->eng, wmd, d->eng, NULL);
    dnnl_primitive_create(&r, rpd);
    dnnl_exec_arg_t ra[2] = {{DNNL_ARG_FROM, braw}, {DNNL_ARG_TO, d->mb}};
    const double t0 = now();
    dnnl_primitive_execute(r, d->st, 2, ra);
    dnnl_stream_wait(d->st);
    d->reorder_ms = 1e3 * (now() - t0);
    dnnl_primitive_destroy(r);
    dnnl_primitive_desc_destroy(rpd);
    dnnl_memory_destroy(braw);
    dnnl_primitive_desc_destroy(pd);
    return 0;
}
static void dn_run(void *p) {
    dn *d = p;
    const op *o = &d->o;
    if (!d->matmul) {
        dnnl_sgemm(o->ta ? 'T' : 'N', o->tb ? 'T' : 'N', o->M, o->N, o->K, 1.0f, d->A,
                   o->ta ? o->M : o->K, d->B, o->tb ? o->K : o->N, 0.0f, d->C, o->N);
        return;
    }
    dnnl_exec_arg_t args[3] = {{DNNL_ARG_SRC, d->ma}, {DNNL_ARG_WEIGHTS, d->mb}, {DNNL_ARG_DST, d->mc}};
    dnnl_primitive_execute(d->prim, d->st, 3, args);
    dnnl_stream_wait(d->st);
}
static void dn_release(void *p) {
    dn *d = p;
    if (!d->matmul) return;
    dnnl_primitive_destroy(d->prim);
    dnnl_memory_destroy(d->ma), dnnl_memory_destroy(d->mb), dnnl_memory_destroy(d->mc);
    free(d->abuf), free(d->bbuf);
}
#endif

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: bench_gemm cblas:LIB|dnnl-sgemm|dnnl-matmul|dnnl-matmul-bf16|mk-bf16 [seconds]\n");
        return 2;
    }
    const char *be = argv[1];
    const double secs = argc > 2 ? atof(argv[2]) : 0.3;
    runner r = {0};
    cb c = {0};
    mkb m = {0};
#ifdef BENCH_HAVE_DNNL
    dn d = {0};
#endif
    if (!strncmp(be, "cblas:", 6)) {
        void *h = dlopen(be + 6, RTLD_NOW | RTLD_LOCAL);
        if (!h || !(c.f = (sgemm_fn)dlsym(h, "cblas_sgemm"))) {
            fprintf(stderr, "bench_gemm: cannot load cblas_sgemm from %s: %s\n", be + 6, dlerror());
            return 1;
        }
        r = (runner){&c, cb_prepare, cb_run, cb_release};
    } else if (!strcmp(be, "mk-bf16")) {
        r = (runner){&m, mkb_prepare, mkb_run, mkb_release};
        fprintf(stderr, "mk-bf16 path: %s\n", mk_gemm_bf16_path_name());
#ifdef BENCH_HAVE_DNNL
    } else if (!strncmp(be, "dnnl-", 5)) {
        d.matmul = strncmp(be, "dnnl-matmul", 11) == 0;
        d.bf16 = strstr(be, "bf16") != NULL;
        if (!strcmp(be, "dnnl-sgemm") || d.matmul) {
            dnnl_engine_create(&d.eng, dnnl_cpu, 0);
            dnnl_stream_create(&d.st, d.eng, dnnl_stream_default_flags);
            r = (runner){&d, dn_prepare, dn_run, dn_release};
        }
#endif
    }
    if (!r.run) {
        fprintf(stderr, "bench_gemm: unknown or unavailable backend %s\n", be);
        return 2;
    }
    size_t maxe = 0;
    for (int i = 0; i < NLAYERS; i++) {
        const size_t a = (size_t)NROWS * (layers[i].IC > layers[i].OC ? layers[i].IC : layers[i].OC);
        const size_t w = (size_t)layers[i].IC * layers[i].OC;
        maxe = a > maxe ? a : maxe;
        maxe = w > maxe ? w : maxe;
    }
    float *A = malloc(4 * maxe), *B = malloc(4 * maxe), *C = malloc(4 * maxe);
    for (size_t i = 0; i < maxe; i++) {
        A[i] = (float)((i * 2654435761u) % 1000) * 1e-3f - 0.5f;
        B[i] = (float)((i * 40503u) % 1000) * 1e-3f - 0.5f;
    }
    for (int i = 0; i < NLAYERS; i++) {
        op ops[3];
        ops_of(&layers[i], ops);
        for (int k = 0; k < 3; k++) {
            const op *o = &ops[k];
            if (r.prepare(r.ctx, o, A, B, C)) {
                printf("%s %s_%s %s %d %d %d unsupported\n", be, layers[i].model, layers[i].name, o->name, o->M, o->N, o->K);
                continue;
            }
            r.run(r.ctx), r.run(r.ctx);
            double best = 1e30, spent = 0.0;
            int reps = 0;
            while (spent < secs || reps < 3) {
                const double t0 = now();
                r.run(r.ctx);
                const double t = now() - t0;
                best = t < best ? t : best;
                spent += t, reps++;
            }
            printf("%s %s_%s %s %d %d %d %.2f %.4f\n", be, layers[i].model, layers[i].name, o->name, o->M,
                   o->N, o->K, 2.0 * o->M * o->N * (double)o->K / best * 1e-9, best * 1e3);
            r.release(r.ctx);
        }
    }
    free(A), free(B), free(C);
    return 0;
}
