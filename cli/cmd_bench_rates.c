/* `zero bench rates`: the rates of this machine that the planner's step time needs (GEMM GFLOP/s on
 * the model's shapes, memory, in-node collectives, the links between nodes, the disk), into a JSON file. */
#include "cli.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>

#include "decoder/decoder.h"
#ifdef ZERO_HAVE_MPI
#include <mpi.h>
#endif

#define MIB (1024.0 * 1024.0)

typedef struct rates_opts {
    cli_sizing_opts s;
    const char *out;  /* -o FILE ("-": print only); NULL: cli_rates_default_path */
    const char *disk; /* --disk DIR */
    double disk_size;
    int iters;
} rates_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero bench rates [--model NAME | --layers L --dim C [--heads H --vocab V]] [--seq T]\n"
            "                        [--micro-batch B] [--precision P] [--ranks N] [--disk DIR]\n"
            "                        [--disk-size BYTES] [--iters K] [-o FILE] [--json]\n"
            "\n"
            "Measures what `zero plan` and `zero estimate` need to predict a step's time, with every\n"
            "rank measuring at once (as in training), the slowest rank's time, median of K rounds (5):\n"
            "  gemm_gflops   the matrix products of one forward + backward of the model's block and LM\n"
            "                head at micro-batch B (4) x T tokens (min(256, context)), as models/decoder calls\n"
            "                them (cblas_sgemm), per rank\n"
            "  model_gflops  the model's whole forward + backward on the same micro-batch (the products\n"
            "                and the kernels around them), the same FLOPs: the compute rate the planner\n"
            "                uses (gemm_gflops where the model is too large to run here)\n"
            "  mem_gbps      a memcpy per rank, bytes read + written per second\n"
            "  node_*_gbps   all_reduce / reduce_scatter / all_gather busbw among the ranks of a node\n"
            "                (zero's communicator), on a message of the model's mean unit\n"
            "  link_gbps     (several nodes) each node's link: all_gather across nodes as the engine's\n"
            "                hierarchical collectives do it; latency_us: a 1-element all_gather's time\n"
            "                per step across nodes\n"
            "  link_*_gbps   (several nodes) the same for all_reduce, reduce_scatter and all_gather each,\n"
            "                posted non-blocking and waited as the engine does: the rate each\n"
            "                collective's bytes cross the link at (link_gbps = the all_gather's)\n"
            "  link_*_progress  (several nodes) the share of that rate an all_reduce / reduce_scatter /\n"
            "                all_gather keeps while the rank computes the layer's products with a progress\n"
            "                call after each (as the backward does after posting a unit's reduction, and\n"
            "                stage 3 after posting the next unit's gather), [0, 1]\n"
            "  disk_*_gbps   (--disk DIR) NVMe offload's pool writing, then reading, a file of\n"
            "                --disk-size (256MiB) in DIR (rank 0, best of 3)\n"
            "Writes them to FILE (default $ZERO_RATES, else $XDG_CACHE_HOME/zero/rates.json, else\n"
            "~/.cache/zero/rates.json: where plan and estimate look); -o - only prints. --json prints\n"
            "the file's JSON. --ranks N runs N local ranks through mpiexec; under mpirun/srun the MPI\n"
            "world is measured (across nodes too). docs/PLANNING.md §9.\n");
}

static int parse(int argc, char **argv, rates_opts *o) {
    memset(o, 0, sizeof *o);
    cli_sizing_opts_default(&o->s);
    o->disk_size = 256 * MIB;
    o->iters = 5;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int r = cli_sizing_flag(&o->s, argc, argv, &i);
        if (r < 0) return -1;
        if (r > 0) continue;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(o->out = cli_flag_value(argc, argv, &i))) return -1;
        } else if (!strcmp(a, "--disk")) {
            if (!(o->disk = cli_flag_value(argc, argv, &i))) return -1;
        } else if (!strcmp(a, "--disk-size")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_size(a, v, &o->disk_size)) return -1;
            if (o->disk_size < MIB || o->disk_size > 1024 * 1024 * MIB) {
                cli_error(CLI_USAGE, "--disk-size '%s': expected 1MiB to 1TiB", v);
                return -1;
            }
        } else if (!strcmp(a, "--iters")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_int(a, v, 1, 1000, &o->iters)) return -1;
        } else {
            cli_error(CLI_USAGE, "bench rates: unknown option '%s' (zero bench rates --help)", a);
            return -1;
        }
    }
    if (o->s.params > 0) {
        cli_error(CLI_USAGE, "bench rates: --params: expected a model with a shape (--model, or --layers and --dim)");
        return -1;
    }
    /* the machine-sizing flags of estimate and plan: this command measures the machine it runs on */
    const char *sizing = o->s.gpus ? "--gpus" : o->s.device_mem > 0 ? "--gpu-memory" : o->s.host_mem >= 0 ? "--host-mem" : NULL;
    if (sizing) {
        cli_error(CLI_USAGE, "bench rates: unknown option '%s' (it measures this machine; zero bench rates --help)", sizing);
        return -1;
    }
    if (o->s.nodes != 1) {
        cli_error(CLI_USAGE, "bench rates: --nodes: the nodes are those of the MPI world (run it under mpirun)");
        return -1;
    }
    if (o->disk && !*o->disk) {
        cli_error(CLI_USAGE, "--disk '': expected a directory");
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the world */

typedef struct world {
    int rank, size, lrank, lsize, nodes;
#ifdef ZERO_HAVE_MPI
    MPI_Comm local, cross; /* the ranks of my node; one rank of every node with my local rank */
#endif
} world;

static double max_over_ranks(double t) {
#ifdef ZERO_HAVE_MPI
    double m = t;
    MPI_Allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
#else
    return t;
#endif
}

static void barrier(void) {
#ifdef ZERO_HAVE_MPI
    MPI_Barrier(MPI_COMM_WORLD);
#endif
}

static int cmp_double(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* ------------------------------------------------------------------ GEMM on the model's shapes */

typedef struct gemm_bufs {
    float *x, *w, *y, *att, *logits, *wte;
} gemm_bufs;

/* The widths of a decoder layer (models/decoder): Q = H D query columns, KV = G D key/value
 * columns, FC the MLP's first product (F, or 2F for SwiGLU's gate and up), F its second's input. */
typedef struct dims {
    int C, H, G, D, Q, QKV, F, FC, wt;
} dims;

static dims dims_of(const dec_config *c) {
    dims d;
    d.C = c->n_embd, d.H = c->n_head, d.G = c->n_kv_head, d.D = c->head_dim, d.F = c->n_inner;
    d.Q = d.H * d.D;
    d.QKV = d.Q + 2 * d.G * d.D;
    d.FC = dec_is_llama(c) ? 2 * d.F : d.F;
    d.wt = dec_is_llama(c); /* Linear weights (out, in); GPT-2's Conv1D (in, out) */
    return d;
}

/* After each product with `prog` non-NULL: one pass of its progress engine, as models/decoder
 * calls zero_engine_progress after every kernel. */
#define PROGRESS(prog) ((prog) ? (void)zero_comm_progress(prog) : (void)0)

/* One forward + backward of one layer (B sequences of T tokens): the matrix products of
 * models/decoder's kernels with their shapes, weight layouts and strides; returns the FLOPs
 * (2 M N K each). */
static double layer_pass(const gemm_bufs *g, const dims *d, int B, int T, zero_comm *prog) {
    const int N = B * T;
    double f = 0;
    const int lin[4][2] = {{d->C, d->QKV}, {d->Q, d->C}, {d->C, d->FC}, {d->F, d->C}}; /* (in, out) */
    for (int l = 0; l < 4; l++) {
        const int IC = lin[l][0], OC = lin[l][1];
        if (d->wt) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, IC, 1.0f, g->x, IC, g->w, IC, 0.0f, g->y, OC);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, IC, OC, 1.0f, g->y, OC, g->w, IC, 0.0f, g->x, IC);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, IC, N, 1.0f, g->y, OC, g->x, IC, 1.0f, g->w, IC);
            PROGRESS(prog);
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, OC, IC, 1.0f, g->x, IC, g->w, OC, 0.0f, g->y, OC);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, IC, OC, 1.0f, g->y, OC, g->w, OC, 0.0f, g->x, IC);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, IC, OC, N, 1.0f, g->x, IC, g->y, OC, 1.0f, g->w, OC);
            PROGRESS(prog);
        }
        f += 3 * 2.0 * N * IC * OC;
    }
    /* attention per (sequence, query head): scores and weighted sum; backward's four products */
    const int QKV = d->QKV, D = d->D;
    for (int b = 0; b < B; b++) {
        for (int h = 0; h < d->H; h++) {
            const float *q = g->x + (size_t)b * T * QKV + (size_t)h * D, *k = g->x + (size_t)b * T * QKV + d->Q;
            float *a = g->att + ((size_t)b * d->H + h) * T * T, *o = g->y + (size_t)b * T * QKV + (size_t)h * D;
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, q, QKV, k, QKV, 0.0f, a, T);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, a, T, k, QKV, 0.0f, o, QKV);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, a, T, o, QKV, 0.0f, o, QKV);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, T, T, D, 1.0f, o, QKV, k, QKV, 0.0f, a, T);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, T, D, T, 1.0f, a, T, k, QKV, 0.0f, o, QKV);
            PROGRESS(prog);
            cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, T, D, T, 1.0f, a, T, q, QKV, 0.0f, o, QKV);
            PROGRESS(prog);
            f += 6 * 2.0 * T * T * D;
        }
    }
    return f;
}

/* The LM head (V, C), in chunks of at most 2^23 / V rows as models/decoder computes it. */
static double head_pass(const gemm_bufs *g, int N, int C, int V) {
    int rows = (int)((1u << 23) / (unsigned)V);
    if (rows < 1) rows = 1;
    double f = 0;
    for (int r0 = 0; r0 < N; r0 += rows) {
        const int nr = N - r0 < rows ? N - r0 : rows;
        const float *xr = g->x + (size_t)r0 * C;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, nr, V, C, 1.0f, xr, C, g->wte, C, 0.0f, g->logits, V);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, nr, C, V, 1.0f, g->logits, V, g->wte, C, 0.0f, g->y, C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, nr, 1.0f, g->logits, V, xr, C, 1.0f, g->wte, C);
        f += 3 * 2.0 * nr * V * C;
    }
    return f;
}

static float *fill(size_t n) {
    float *p = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, n * sizeof *p);
    if (p)
        for (size_t i = 0; i < n; i++) p[i] = 0.001f * (float)(i % 13);
    return p;
}

static size_t max3(size_t a, size_t b, size_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

static void gemm_bufs_free(gemm_bufs *g) {
    zero_mem_free(NULL, g->x);
    zero_mem_free(NULL, g->w);
    zero_mem_free(NULL, g->y);
    zero_mem_free(NULL, g->att);
    zero_mem_free(NULL, g->logits);
    zero_mem_free(NULL, g->wte);
    memset(g, 0, sizeof *g);
}

/* The buffers of layer_pass and head_pass for micro-batch B of model m. */
static int gemm_bufs_alloc(gemm_bufs *g, const cli_sizing_model *m, int B) {
    const dims d = dims_of(m->cfg);
    const int T = m->seq, V = m->cfg->vocab;
    const size_t N = (size_t)B * T, wide = max3((size_t)d.QKV, (size_t)d.FC, (size_t)d.F);
    size_t rows = ((size_t)1 << 23) / (size_t)V;
    if (rows < 1) rows = 1;
    if (rows > N) rows = N;
    *g = (gemm_bufs){fill(N * (wide > (size_t)d.C ? wide : (size_t)d.C)), fill(wide * max3((size_t)d.C, (size_t)d.Q, (size_t)d.F)),
                     fill(N * (wide > (size_t)d.C ? wide : (size_t)d.C)), fill((size_t)B * d.H * T * T), fill(rows * V),
                     fill((size_t)V * d.C)};
    if (g->x && g->w && g->y && g->att && g->logits && g->wte) return CLI_OK;
    gemm_bufs_free(g);
    return cli_error(CLI_RUNTIME, "bench rates: out of memory for the GEMM buffers of micro-batch %d x %d tokens", B, T);
}

/* FLOP/s of one rank's forward + backward products: L layers and the head, the slowest rank's
 * median over rounds; also the FLOPs themselves (*flops), to check against the planner's formula. */
static int measure_gemm(const cli_sizing_model *m, int B, int iters, double *rate, double *flops) {
    const dims d = dims_of(m->cfg);
    const int T = m->seq, V = m->cfg->vocab, L = m->cfg->n_layer;
    const size_t N = (size_t)B * T;
    gemm_bufs g;
    int rc = gemm_bufs_alloc(&g, m, B);
    if (rc != CLI_OK) return rc;
    double *t = calloc((size_t)iters, sizeof *t);
    if (!t) {
        rc = cli_error(CLI_RUNTIME, "bench rates: out of memory");
        goto out;
    }
    *flops = L * layer_pass(&g, &d, B, T, NULL) + head_pass(&g, (int)N, d.C, V); /* warm-up */
    for (int it = 0; it < iters; it++) {
        barrier();
        double t0 = zero_now();
        layer_pass(&g, &d, B, T, NULL);
        double tb = zero_now() - t0;
        t0 = zero_now();
        head_pass(&g, (int)N, d.C, V);
        t[it] = max_over_ranks(L * tb + (zero_now() - t0));
    }
    *rate = *flops / median(t, iters);
out:
    free(t);
    gemm_bufs_free(&g);
    return rc;
}

/* FLOP/s of the model's own forward + backward (models/decoder: the products and every kernel
 * around them) on one micro-batch, with the planner's FLOPs: what the step's compute runs at. NAN
 * (not an error) when the parameters and gradients would take over an eighth of the node's free
 * memory. */
static int measure_model(const cli_sizing_model *sm, int B, int iters, int lsize, double flops, double *rate) {
    *rate = NAN;
    const dec_config *cfg = sm->cfg;
    const int T = sm->seq, U = dec_num_units(cfg);
    const double bytes = 8.0 * (double)dec_num_params(cfg) * lsize;
    const long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    int skip = pages > 0 && bytes > 0.125 * (double)pages * psz;
    if (max_over_ranks(skip)) return CLI_OK; /* every rank takes the same way */
    dec_model *m = NULL;
    zero_error err = {{0}};
    float **p = calloc((size_t)U, sizeof *p), **g = calloc((size_t)U, sizeof *g);
    int32_t *tok = malloc((size_t)B * T * sizeof *tok);
    double *t = calloc((size_t)iters, sizeof *t);
    int rc = CLI_OK, bad = !p || !g || !tok || !t;
    for (int u = 0; u < U && !bad; u++) {
        const size_t n = (size_t)dec_unit_numel(cfg, u);
        p[u] = zero_mem_alloc(NULL, ZERO_MEM_PARAMS, n * sizeof(float));
        g[u] = zero_mem_alloc(NULL, ZERO_MEM_GRADS, n * sizeof(float));
        if (!p[u] || !g[u]) bad = 1;
        else dec_init_unit(cfg, u, 1, p[u]), memset(g[u], 0, n * sizeof(float));
    }
    if (bad) {
        rc = cli_error(CLI_RUNTIME, "bench rates: out of memory for the model's parameters and gradients");
        goto out;
    }
    for (int i = 0; i < B * T; i++) tok[i] = (int32_t)((unsigned)i * 2654435761u % (unsigned)cfg->vocab);
    if (dec_create(&m, cfg, B, T, 0, &err) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "bench rates: %s", err.msg);
        goto out;
    }
    for (int it = 0; it <= iters; it++) { /* the first is a warm-up */
        float loss;
        barrier();
        double t0 = zero_now();
        if (dec_forward_backward(m, (const float *const *)p, g, tok, tok, B, T, 1.0f, 0, &loss, NULL) != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "bench rates: forward/backward: %s", dec_last_error(m));
            goto out;
        }
        double dt = max_over_ranks(zero_now() - t0);
        if (it) t[it - 1] = dt;
    }
    *rate = flops / median(t, iters);
out:
    dec_free(m);
    for (int u = 0; u < U && p && g; u++) {
        zero_mem_free(NULL, p[u]);
        zero_mem_free(NULL, g[u]);
    }
    free(p);
    free(g);
    free(tok);
    free(t);
    return rc;
}

/* ------------------------------------------------------------------ memory and collectives */

/* Bytes read + written per second by one rank's memcpy of `bytes`, every rank at once. */
static int measure_mem(size_t bytes, int iters, double *rate) {
    char *a = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, bytes), *b = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, bytes);
    double *t = calloc((size_t)iters, sizeof *t);
    int rc = CLI_OK;
    if (!a || !b || !t) {
        rc = cli_error(CLI_RUNTIME, "bench rates: out of memory for two buffers of %zu bytes", bytes);
        goto out;
    }
    memset(a, 1, bytes);
    memset(b, 2, bytes);
    for (int it = 0; it < iters; it++) {
        barrier();
        double t0 = zero_now();
        memcpy(b, a, bytes);
        t[it] = max_over_ranks(zero_now() - t0);
    }
    *rate = 2.0 * (double)bytes / median(t, iters);
out:
    free(t);
    zero_mem_free(NULL, a);
    zero_mem_free(NULL, b);
    return rc;
}

/* Elements per second one rank steps AdamW with 8-bit states (zero_optim_step_q8 on n elements,
 * every rank at once), and weights per second it decodes from an NF4 record with double-quantized
 * scales (zero_quant_record_decode, a 65,536-weight tile at a time as the quantized linear layers
 * read them): the planner's q8_update_elems and dequant_elems. */
static int measure_quant(size_t n, int iters, double *q8, double *dq) {
    const uint64_t nb = zero_quant_blocks(n, ZERO_QUANT_Q8_BLOCK);
    float *master = fill(n), *grad = fill(n), *tile = malloc(65536 * sizeof *tile);
    uint8_t *m = calloc(n, 1), *v = calloc(n, 1);
    float *ma = calloc(nb, sizeof *ma), *va = calloc(nb, sizeof *va);
    void *rec = malloc(zero_quant_record_bytes(ZERO_QFMT_NF4_DQ, n));
    double *t = calloc((size_t)iters, sizeof *t);
    int rc = CLI_OK;
    zero_quant_view view;
    if (!master || !grad || !tile || !m || !v || !ma || !va || !rec || !t) {
        rc = cli_error(CLI_RUNTIME, "bench rates: out of memory for %zu elements of 8-bit states", n);
        goto out;
    }
    zero_optim_hparams h;
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    const zero_q8_state st = {m, v, ma, va};
    for (int it = 0; it < iters; it++) {
        barrier();
        double t0 = zero_now();
        zero_status s = zero_optim_step_q8(&h, it + 1, master, &st, grad, 1.0f, h.weight_decay, n, NULL, ZERO_DTYPE_FP32);
        t[it] = max_over_ranks(zero_now() - t0);
        if (s != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "bench rates: the 8-bit step: %s", zero_status_string(s));
            goto out;
        }
    }
    *q8 = (double)n / median(t, iters);
    if (zero_quant_record_encode(ZERO_QFMT_NF4_DQ, grad, n, rec) != ZERO_OK ||
        zero_quant_record_view(ZERO_QFMT_NF4_DQ, rec, n, &view) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "bench rates: coding an NF4 record of %zu weights failed", n);
        goto out;
    }
    for (int it = 0; it < iters; it++) {
        barrier();
        double t0 = zero_now();
        for (size_t i = 0; i < n; i += 65536)
            (void)zero_quant_record_decode(&view, i, n - i < 65536 ? n - i : 65536, tile);
        t[it] = max_over_ranks(zero_now() - t0);
    }
    *dq = (double)n / median(t, iters);
out:
    zero_mem_free(NULL, master), zero_mem_free(NULL, grad), free(tile), free(m), free(v), free(ma), free(va), free(rec), free(t);
    return rc;
}

#ifdef ZERO_HAVE_MPI
/* Posts collective k (0 all_reduce, 1 reduce_scatter, 2 all_gather) of `count` fp32 elements a rank. */
static zero_status post(zero_comm *c, int k, const float *send, float *recv, size_t count, zero_request **r) {
    return k == 0   ? zero_comm_iall_reduce(c, send, recv, count, ZERO_DTYPE_FP32, ZERO_OP_SUM, r)
           : k == 1 ? zero_comm_ireduce_scatter(c, send, recv, count, ZERO_DTYPE_FP32, ZERO_OP_SUM, r)
                    : zero_comm_iall_gather(c, send, recv, count, ZERO_DTYPE_FP32, r);
}

/* The buffers of collective k on c for a full message of about `bytes` (fp32): `full` elements, a
 * multiple of the ranks (at least one each), `count` of them a rank's call takes. */
typedef struct coll_msg {
    size_t full, count;
    float *send, *recv;
} coll_msg;

static void coll_msg_free(coll_msg *x) {
    zero_mem_free(NULL, x->send);
    zero_mem_free(NULL, x->recv);
    x->send = x->recv = NULL;
}

static int coll_msg_alloc(coll_msg *x, const zero_comm *c, int k, size_t bytes) {
    const size_t n = (size_t)zero_comm_size(c);
    x->full = bytes / 4 / n * n;
    if (x->full == 0) x->full = n;
    x->count = k == 0 ? x->full : x->full / n;
    x->send = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (x->full + 1) * 4);
    x->recv = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, (x->full + 1) * 4);
    if (!x->send || !x->recv) {
        coll_msg_free(x);
        return cli_error(CLI_RUNTIME, "bench rates: out of memory for a collective of %zu bytes", bytes);
    }
    for (size_t i = 0; i <= x->full; i++) x->send[i] = (float)(i % 5), x->recv[i] = 0;
    return CLI_OK;
}

/* Median seconds of collective k (0 all_reduce, 1 reduce_scatter, 2 all_gather) of a full message
 * of about `bytes` (fp32; *msg: the bytes it really is, a multiple of 4 x ranks) on c, the slowest
 * rank of the world, every communicator of its kind at once. */
static int time_coll(zero_comm *c, int k, int nonblocking, size_t bytes, int iters, double *secs, double *msg) {
    coll_msg x;
    int rc = coll_msg_alloc(&x, c, k, bytes);
    if (rc != CLI_OK) return rc;
    *msg = 4.0 * (double)x.full;
    double *t = calloc((size_t)iters + 1, sizeof *t);
    if (!t) {
        rc = cli_error(CLI_RUNTIME, "bench rates: out of memory");
        goto out;
    }
    for (int it = 0; it <= iters; it++) { /* the first is a warm-up */
        barrier();
        double t0 = zero_now();
        zero_status s;
        if (nonblocking) {
            zero_request *r = NULL;
            s = post(c, k, x.send, x.recv, x.count, &r);
            if (s == ZERO_OK) s = zero_request_wait(r);
        } else {
            s = k == 0   ? zero_comm_all_reduce(c, x.send, x.recv, x.count, ZERO_DTYPE_FP32, ZERO_OP_SUM)
                : k == 1 ? zero_comm_reduce_scatter(c, x.send, x.recv, x.count, ZERO_DTYPE_FP32, ZERO_OP_SUM)
                         : zero_comm_all_gather(c, x.send, x.recv, x.count, ZERO_DTYPE_FP32);
        }
        if (s != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "bench rates: %s", zero_comm_last_error(c));
            goto out;
        }
        t[it] = max_over_ranks(zero_now() - t0);
    }
    *secs = median(t + 1, iters);
out:
    free(t);
    coll_msg_free(&x);
    return rc;
}

/* The share of its rate collective k (0 all_reduce, 1 reduce_scatter, 2 all_gather) of about `bytes` keeps on c
 * while the rank computes the model's layer products with a progress call after each, as the
 * backward does after posting a unit's reduction. Alone it takes `alone` seconds; posted, then
 * about 0.8 x `alone` of products computed (C: they end at C, slowest rank), then waited (ending at
 * T): what moved during the products is alone - (T - C) of its time, the share (alone - (T - C)) / C
 * (the rest taken to move at the full rate in the wait); median of the rounds, within [0, 1]. */
static int measure_progress(zero_comm *c, int k, size_t bytes, double alone, const cli_sizing_model *m, int B,
                            int iters, double *share) {
    const dims d = dims_of(m->cfg);
    gemm_bufs g;
    int rc = gemm_bufs_alloc(&g, m, B);
    if (rc != CLI_OK) return rc;
    coll_msg x;
    if ((rc = coll_msg_alloc(&x, c, k, bytes)) != CLI_OK) {
        gemm_bufs_free(&g);
        return rc;
    }
    double *v = calloc((size_t)iters, sizeof *v);
    if (!v) {
        rc = cli_error(CLI_RUNTIME, "bench rates: out of memory");
        goto out;
    }
    /* a layer's products with their progress calls, nothing in flight: how many make 0.8 x alone */
    layer_pass(&g, &d, B, m->seq, c);
    barrier();
    double t0 = zero_now();
    layer_pass(&g, &d, B, m->seq, c);
    const double one = max_over_ranks(zero_now() - t0);
    int passes = (int)lround(0.8 * alone / (one > 0 ? one : 1e-9));
    if (passes < 1) passes = 1;
    for (int it = 0; it < iters; it++) {
        barrier();
        zero_request *r = NULL;
        t0 = zero_now();
        zero_status s = post(c, k, x.send, x.recv, x.count, &r);
        for (int p = 0; p < passes && s == ZERO_OK; p++) layer_pass(&g, &d, B, m->seq, c);
        const double busy = zero_now() - t0;
        if (s == ZERO_OK) s = zero_request_wait(r);
        const double total = zero_now() - t0;
        if (max_over_ranks(s != ZERO_OK)) {
            rc = cli_error(CLI_RUNTIME, "bench rates: %s", zero_comm_last_error(c));
            goto out;
        }
        const double C = max_over_ranks(busy), T = max_over_ranks(total);
        v[it] = (alone - (T - C)) / C;
    }
    const double eta = median(v, iters);
    *share = eta < 0 ? 0 : eta > 1 ? 1 : eta;
out:
    free(v);
    coll_msg_free(&x);
    gemm_bufs_free(&g);
    return rc;
}
#endif

/* ------------------------------------------------------------------ the file */

typedef struct figures {
    double gemm, model, gemm_flops, mem, q8, dequant, node[3], link, link_coll[3], progress[3], latency, disk_read, disk_write;
    size_t msg;
} figures;

static void json_or_null(FILE *f, double v) {
    if (isnan(v)) fputs("null", f);
    else fprintf(f, "%.6g", v);
}

static void write_json(FILE *f, const rates_opts *o, const cli_sizing_model *m, const world *w, const figures *x) {
    char at[48] = "", host[256] = "";
    time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm)) strftime(at, sizeof at, "%Y-%m-%dT%H:%M:%SZ", &tm);
    if (gethostname(host, sizeof host - 1) != 0) host[0] = 0;
    const char *threads = getenv("OMP_NUM_THREADS");
    fprintf(f, "{\n  \"version\": 1,\n  \"kind\": \"cpu\",\n  \"measured_at\": \"%s\",\n  \"host\": \"", at);
    for (const char *c = host; *c; c++)
        if (*c != '"' && *c != '\\' && (unsigned char)*c >= 0x20) fputc(*c, f);
    fprintf(f, "\",\n  \"ranks\": %d,\n  \"nodes\": %d,\n  \"ranks_per_node\": %d,\n  \"threads_per_rank\": %d,\n",
            w->size, w->nodes, w->lsize, threads ? atoi(threads) : 0);
    fprintf(f, "  \"shape\": {\"model\": \"%s\", \"layers\": %d, \"dim\": %d, \"heads\": %d, \"vocab\": %d, "
               "\"seq\": %d, \"micro_batch\": %lld, \"gemm_flops\": %.0f},\n",
            m->name, m->layers, m->dim, m->heads, m->vocab, m->seq, (long long)o->s.micro_batch, x->gemm_flops);
    fprintf(f, "  \"gemm_gflops\": ");
    json_or_null(f, x->gemm / 1e9);
    fprintf(f, ",\n  \"model_gflops\": ");
    json_or_null(f, x->model / 1e9);
    fprintf(f, ",\n  \"mem_gbps\": ");
    json_or_null(f, x->mem / 1e9);
    fprintf(f, ",\n  \"host_mem_gbps\": ");
    json_or_null(f, x->mem / 1e9);
    fprintf(f, ",\n  \"q8_update_gelems\": ");
    json_or_null(f, x->q8 / 1e9);
    fprintf(f, ",\n  \"dequant_gelems\": ");
    json_or_null(f, x->dequant / 1e9);
    static const char *names[3] = {"all_reduce", "reduce_scatter", "all_gather"};
    for (int k = 0; k < 3; k++) {
        fprintf(f, ",\n  \"node_%s_gbps\": ", names[k]);
        json_or_null(f, x->node[k] / 1e9);
    }
    fprintf(f, ",\n  \"message_bytes\": %zu,\n  \"link_gbps\": ", x->msg);
    json_or_null(f, x->link * 8 / 1e9);
    for (int k = 0; k < 3; k++) {
        fprintf(f, ",\n  \"link_%s_gbps\": ", names[k]);
        json_or_null(f, x->link_coll[k] * 8 / 1e9);
    }
    for (int k = 0; k < 3; k++) {
        fprintf(f, ",\n  \"link_%s_progress\": ", names[k]);
        json_or_null(f, x->progress[k]);
    }
    fprintf(f, ",\n  \"latency_us\": ");
    json_or_null(f, x->latency * 1e6);
    fprintf(f, ",\n  \"disk_read_gbps\": ");
    json_or_null(f, x->disk_read);
    fprintf(f, ",\n  \"disk_write_gbps\": ");
    json_or_null(f, x->disk_write);
    fprintf(f, ",\n  \"overlap\": 0\n}\n");
}

/* mkdir -p of path's directory. */
static int make_parent(const char *path) {
    char dir[4096];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return 0;
    *slash = 0;
    for (char *p = dir + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(dir, 0755) != 0 && errno != EEXIST) return -1;
        *p = '/';
    }
    return mkdir(dir, 0755) != 0 && errno != EEXIST ? -1 : 0;
}

static int save(const char *path, const rates_opts *o, const cli_sizing_model *m, const world *w, const figures *x) {
    char tmp[4200];
    if (snprintf(tmp, sizeof tmp, "%s.tmp", path) >= (int)sizeof tmp) return cli_error(CLI_USAGE, "-o '%s': path too long", path);
    if (make_parent(path) != 0) return cli_error(CLI_RUNTIME, "rates file '%s': cannot make its directory: %s", path, strerror(errno));
    zero_error err;
    /* zero_create_tmp: a link planted at PATH.tmp is removed, never followed (docs/SECURITY.md) */
    const int fd = zero_create_tmp(path, tmp, sizeof tmp, &err);
    if (fd < 0) return cli_error(CLI_RUNTIME, "rates file '%s': %s", path, err.msg);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return cli_error(CLI_RUNTIME, "rates file '%s': %s", path, strerror(errno));
    }
    write_json(f, o, m, w, x);
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return cli_error(CLI_RUNTIME, "rates file '%s': %s", path, strerror(e ? e : EIO));
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------ the command */

static int run(rates_opts *o) {
    world w;
    memset(&w, 0, sizeof w);
    w.size = w.lsize = w.nodes = 1;
#ifdef ZERO_HAVE_MPI
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) {
        int provided;
        MPI_Init_thread(NULL, NULL, MPI_THREAD_FUNNELED, &provided);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &w.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &w.size);
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, w.rank, MPI_INFO_NULL, &w.local);
    MPI_Comm_rank(w.local, &w.lrank);
    MPI_Comm_size(w.local, &w.lsize);
    MPI_Comm_split(MPI_COMM_WORLD, w.lrank, w.rank, &w.cross);
    MPI_Comm_size(w.cross, &w.nodes);
    int lmin = w.lsize, lmax = w.lsize;
    MPI_Allreduce(&w.lsize, &lmin, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    MPI_Allreduce(&w.lsize, &lmax, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
#endif
    cli_quiet_errors = w.rank != 0;
    cli_ignore_sigpipe(w.size);
    int rc = CLI_OK;
    cli_sizing_model m;
    memset(&m, 0, sizeof m);
    figures x;
    memset(&x, 0, sizeof x);
    x.gemm = x.model = x.link = x.latency = x.disk_read = x.disk_write = NAN;
    for (int k = 0; k < 3; k++) x.node[k] = x.link_coll[k] = NAN;
    x.progress[0] = x.progress[1] = x.progress[2] = NAN;
#ifdef ZERO_HAVE_MPI
    if (lmin != lmax) {
        rc = cli_error(CLI_USAGE, "bench rates: nodes of %d to %d ranks: expected the same number of ranks on every node "
                       "(what the engine's hierarchical collectives need)", lmin, lmax);
        goto done;
    }
#endif
    if (o->s.ranks && o->s.ranks != w.size) {
        rc = cli_error(CLI_USAGE, "--ranks %d: launched with %d ranks: expected the same number", o->s.ranks, w.size);
        goto done;
    }
    o->s.ranks = w.size;
    if (!o->s.model && !o->s.layers) o->s.model = "small";
    if (!o->s.micro_batch) o->s.micro_batch = 4;
    if ((rc = cli_sizing_model_build(&o->s, &m)) != CLI_OK) goto done;
    if (!m.cfg) {
        rc = cli_error(CLI_USAGE, "bench rates: expected a model with a shape (--model, or --layers and --dim)");
        goto done;
    }
    if (!o->s.seq && m.seq > 256) m.seq = 256; /* zero train's default: min(256, the context) */

    if (w.rank == 0) cli_bench_blas_core_warning();
    if ((rc = measure_gemm(&m, (int)o->s.micro_batch, o->iters, &x.gemm, &x.gemm_flops)) != CLI_OK) goto done;
    if ((rc = measure_model(&m, (int)o->s.micro_batch, o->iters, w.lsize, x.gemm_flops, &x.model)) != CLI_OK) goto done;
    /* memcpy: 64 MiB a rank, less when the node's ranks would take over a quarter of its memory */
    size_t mbytes = 64 << 20;
    long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
    while (pages > 0 && mbytes > (1 << 20) && 2.0 * mbytes * w.lsize > 0.25 * (double)pages * psz) mbytes /= 2;
    if ((rc = measure_mem(mbytes, o->iters, &x.mem)) != CLI_OK) goto done;
    if ((rc = measure_quant(mbytes / 16, o->iters, &x.q8, &x.dequant)) != CLI_OK) goto done;

    /* the collectives' message: the model's mean unit in the working dtype, within 64 KiB..256 MiB */
    double msg = (double)m.params / m.num_units * zero_dtype_size(o->s.precision);
    msg = msg < 65536 ? 65536 : msg > 256 * MIB ? 256 * MIB : msg;
    x.msg = (size_t)msg;
#ifdef ZERO_HAVE_MPI
    if (w.lsize > 1) {
        zero_comm *c = NULL;
        if (zero_comm_init_mpi(&c, &w.local) != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "bench rates: %s", zero_comm_last_error(NULL));
            goto done;
        }
        for (int k = 0; k < 3 && rc == CLI_OK; k++) {
            double t, bytes;
            if ((rc = time_coll(c, k, 0, x.msg, o->iters, &t, &bytes)) == CLI_OK)
                x.node[k] = (k == 0 ? 2.0 : 1.0) * (w.lsize - 1) / w.lsize * bytes / t;
        }
        zero_comm_free(c);
        if (rc != CLI_OK) goto done;
    }
    if (w.nodes > 1) {
        /* As the engine's cross-node step: each of a node's L ranks all-gathers M / L among its
         * peers of the other nodes, all at once: each node's link carries (K-1)/K x M each way. */
        zero_comm *c = NULL;
        if (zero_comm_init_mpi(&c, &w.cross) != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "bench rates: %s", zero_comm_last_error(NULL));
            goto done;
        }
        /* The same for each collective on its own (the all-gather's is the link's rate): each
         * node's link carries f (K-1)/K x M each way, f = 2 for the all-reduce. Timed in the
         * non-blocking form the engine posts (the gradients' reductions, the step's gathers, the
         * stage-3 prefetch): across nodes MPI runs those through other algorithms than the
         * blocking calls (OpenMPI: libnbc's schedules, progressed inside MPI calls). */
        const double K = w.nodes;
        for (int k = 0; k < 3 && rc == CLI_OK; k++) {
            double t = 0, bytes = 0;
            if ((rc = time_coll(c, k, 1, x.msg / (size_t)w.lsize, o->iters, &t, &bytes)) == CLI_OK)
                x.link_coll[k] = (k == 0 ? 2.0 : 1.0) * (K - 1) / K * bytes * w.lsize / t;
            /* the backward's reductions, stage 3's prefetched gathers: how much of that rate they
             * keep while the model computes */
            if (rc == CLI_OK)
                rc = measure_progress(c, k, x.msg / (size_t)w.lsize, t, &m, (int)o->s.micro_batch, o->iters,
                                      &x.progress[k]);
        }
        double ts = 0, small = 0;
        if (rc == CLI_OK && (rc = time_coll(c, 2, 0, 4 * (size_t)w.nodes, o->iters, &ts, &small)) == CLI_OK) {
            x.link = x.link_coll[2];
            x.latency = ts / (K - 1);
        }
        zero_comm_free(c);
        if (rc != CLI_OK) goto done;
    }
#endif
    if (o->disk) {
        int drc = CLI_OK;
        if (w.rank == 0) drc = cli_bench_io_pool_rates(o->disk, o->disk_size, &x.disk_read, &x.disk_write);
        if (max_over_ranks(drc) != CLI_OK) {
            rc = drc != CLI_OK ? drc : CLI_RUNTIME;
            goto done;
        }
    }

    if (w.rank == 0) {
        char path[4096];
        const int print_only = o->out && !strcmp(o->out, "-");
        if (!o->out && !cli_rates_default_path(path, sizeof path)) {
            rc = cli_error(CLI_RUNTIME, "bench rates: no HOME, XDG_CACHE_HOME or ZERO_RATES to store the rates in: give -o FILE");
            goto done;
        }
        if (o->out && !print_only) snprintf(path, sizeof path, "%s", o->out);
        if (o->s.json) {
            write_json(stdout, o, &m, &w, &x);
        } else {
            printf("zero bench rates: %d rank%s on %d node%s (%d per node), model %s L=%d C=%d H=%d V=%d, "
                   "micro-batch %lld x %d tokens; slowest rank, median of %d\n",
                   w.size, w.size == 1 ? "" : "s", w.nodes, w.nodes == 1 ? "" : "s", w.lsize, m.name, m.layers,
                   m.dim, m.heads, m.vocab, (long long)o->s.micro_batch, m.seq, o->iters);
            printf("  gemm_gflops               %10.3f  per rank: the matrix products alone (%.4g GFLOP a forward + "
                   "backward)\n", x.gemm / 1e9, x.gemm_flops / 1e9);
            printf("  model_gflops              %10.3f  per rank: the model's forward + backward (the planner's "
                   "compute rate)\n", x.model / 1e9);
            printf("  mem_gbps                  %10.3f  per rank, read + written\n", x.mem / 1e9);
            printf("  q8_update_gelems          %10.3f  per rank: AdamW with 8-bit states, elements\n", x.q8 / 1e9);
            printf("  dequant_gelems            %10.3f  per rank: NF4 weights decoded, a tile at a time\n", x.dequant / 1e9);
            static const char *names[3] = {"all_reduce", "reduce_scatter", "all_gather"};
            for (int k = 0; k < 3; k++) {
                char key[40];
                snprintf(key, sizeof key, "node_%s_gbps", names[k]);
                printf("  %-25s %10.3f  busbw among %d rank%s, %zu-byte message\n", key, x.node[k] / 1e9, w.lsize,
                       w.lsize == 1 ? "" : "s", x.msg);
            }
            printf("  link_gbps                 %10.3f  Gbit/s each way per node\n", x.link * 8 / 1e9);
            for (int k = 0; k < 3; k++) {
                char key[40];
                snprintf(key, sizeof key, "link_%s_gbps", names[k]);
                printf("  %-25s %10.3f  Gbit/s each way per node, as %s reaches it\n", key, x.link_coll[k] * 8 / 1e9,
                       names[k]);
            }
            for (int k = 0; k < 3; k++) {
                char key[40];
                snprintf(key, sizeof key, "link_%s_progress", names[k]);
                printf("  %-28s %7.3f  of its rate while the model computes (progress calls between products)\n",
                       key, x.progress[k]);
            }
            printf("  latency_us                %10.3f  per step across nodes\n", x.latency * 1e6);
            printf("  disk_read_gbps            %10.3f\n  disk_write_gbps           %10.3f\n", x.disk_read, x.disk_write);
        }
        if (!print_only) {
            if ((rc = save(path, o, &m, &w, &x)) != CLI_OK) goto done;
            if (!o->s.json) printf("wrote %s\n", path);
        }
    }
done:
    cli_sizing_model_free(&m);
#ifdef ZERO_HAVE_MPI
    MPI_Comm_free(&w.local);
    MPI_Comm_free(&w.cross);
    int fin = 0;
    MPI_Finalized(&fin);
    if (!fin) MPI_Finalize();
#endif
    return rc;
}

int cli_bench_rates(int argc, char **argv) {
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CLI_OK;
        }
    rates_opts o;
    if (parse(argc, argv, &o)) return CLI_USAGE;
    if (o.s.ranks > 1 && !zero_comm_mpi_launched()) {
#ifdef ZERO_HAVE_MPI
        return cli_launch_ranks(o.s.ranks);
#else
        return cli_error(CLI_RUNTIME, "--ranks %d: this build of zero has no MPI", o.s.ranks);
#endif
    }
    return run(&o);
}
