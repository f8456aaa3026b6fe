/* `zero bench adam`: the effective memory bandwidth of the AdamW step (scalar and best impl)
 * against a memory copy in the same run, and against torch.optim.AdamW when PyTorch imports. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define MAX_SIZES 8

typedef struct opts {
    int json;
    int nsizes;
    int64_t sizes[MAX_SIZES];
    int ndtypes;
    zero_dtype dtypes[3];
    int threads; /* 0: OpenMP's default */
    int torch;   /* 0: skip the PyTorch comparison */
} opts;

typedef struct result {
    int64_t n;
    zero_dtype dt;
    double best_s, scalar_s; /* seconds per step */
    double bytes;            /* bytes the step must move */
    double torch_s;          /* NAN: not measured */
} result;

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero bench adam [--json] [--n N] [--dtype fp32|bf16|fp16] [--threads T] [--no-torch]\n"
            "\n"
            "Times one AdamW step (zero_optim_step) on N fp32 elements, the scalar reference and the\n"
            "best implementation of this CPU, as an effective bandwidth: the bytes the update must move\n"
            "(read master, m, v, grad; write master, m, v: 28 bytes an element; +2 for the bf16/fp16\n"
            "write-back of the working copy) per second. Compares it with a memory copy measured in\n"
            "the same run (read + write bytes per second, same thread count) and, when /usr/bin/python3\n"
            "can import torch (ZERO_PYTHON overrides the interpreter), with torch.optim.AdamW (fused, or\n"
            "foreach) doing the same work (its step, plus a copy into a bf16/fp16 tensor): the script\n"
            "bench/torch_adam.py ($ZERO_TORCH_ADAM overrides where it is).\n"
            "\n"
            "  --n N          one size (default: 1Mi, 16Mi and 64Mi elements); units such as 16M accepted\n"
            "  --dtype D      working-copy dtype: fp32 (no write-back), bf16 or fp16 (default: all three)\n"
            "  --threads T    OpenMP threads for zero and torch (default: all cores)\n"
            "  --no-torch     skip the PyTorch comparison (torch_ratio is null)\n"
            "  --json         one JSON object a line per (n, dtype): {\"n\", \"dtype\", \"effective_gbps\",\n"
            "                 \"copy_gbps\", \"ratio\", \"torch_ratio\", \"scalar_gbps\", \"impl\", \"threads\",\n"
            "                 \"ms\", \"torch_ms\"}; ratio = effective/copy, torch_ratio = torch time / ours\n");
}

static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->torch = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--no-torch")) {
            o->torch = 0;
        } else if (!strcmp(a, "--n")) {
            const char *v = cli_flag_value(argc, argv, &i);
            double x;
            if (!v || cli_parse_size("--n", v, &x)) return -1;
            if (x < 1 || x > 4294967296.0 || x != floor(x)) {
                cli_error(CLI_USAGE, "--n '%s': expected a whole number of elements in [1, 2^32]", v);
                return -1;
            }
            if (o->nsizes == MAX_SIZES) {
                cli_error(CLI_USAGE, "--n: at most %d sizes", MAX_SIZES);
                return -1;
            }
            o->sizes[o->nsizes++] = (int64_t)x;
        } else if (!strcmp(a, "--dtype")) {
            const char *v = cli_flag_value(argc, argv, &i);
            zero_dtype dt;
            if (!v) return -1;
            if (zero_dtype_parse(v, &dt) != ZERO_OK ||
                (dt != ZERO_DTYPE_FP32 && dt != ZERO_DTYPE_BF16 && dt != ZERO_DTYPE_FP16)) {
                cli_error(CLI_USAGE, "--dtype '%s': expected fp32, bf16 or fp16", v);
                return -1;
            }
            o->ndtypes = 1;
            o->dtypes[0] = dt;
        } else if (!strcmp(a, "--threads")) {
            const char *v = cli_flag_value(argc, argv, &i);
            if (!v || cli_parse_int("--threads", v, 1, 4096, &o->threads)) return -1;
        } else {
            cli_error(CLI_USAGE, "bench adam: unknown option '%s' (zero bench adam --help)", a);
            return -1;
        }
    }
    if (o->nsizes == 0) {
        o->sizes[0] = (int64_t)1 << 20, o->sizes[1] = (int64_t)16 << 20, o->sizes[2] = (int64_t)64 << 20;
        o->nsizes = 3;
    }
    if (o->ndtypes == 0) {
        o->dtypes[0] = ZERO_DTYPE_FP32, o->dtypes[1] = ZERO_DTYPE_BF16, o->dtypes[2] = ZERO_DTYPE_FP16;
        o->ndtypes = 3;
    }
    return 0;
}

/* Deterministic values in [-0.5, 0.5) without a random-number generator call per element. */
static float hashed(uint64_t i, uint64_t salt) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ salt;
    x ^= x >> 29;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 32;
    return (float)((double)(x >> 40) / 16777216.0 - 0.5);
}

/* Seconds of the fastest of `reps` runs of fn (after one warm-up run). */
typedef int (*timed_fn)(void *ctx);
static double best_time(timed_fn fn, void *ctx, int reps) {
    if (fn(ctx)) return NAN;
    double best = INFINITY;
    for (int r = 0; r < reps; r++) {
        double t0 = zero_now();
        if (fn(ctx)) return NAN;
        double dt = zero_now() - t0;
        if (dt < best) best = dt;
    }
    return best;
}

/* Repetitions for a measurement whose single run takes about `once` seconds: ~0.25 s in all. */
static int reps_for(double once) {
    int r = once > 0 ? (int)(0.25 / once) : 50;
    return r < 3 ? 3 : r > 50 ? 50 : r;
}

typedef struct copy_ctx {
    char *dst;
    const char *src;
    size_t bytes;
} copy_ctx;

static int copy_run(void *p) {
    copy_ctx *c = p;
    const size_t chunk = (size_t)1 << 20, nch = (c->bytes + chunk - 1) / chunk;
#pragma omp parallel for schedule(static)
    for (size_t k = 0; k < nch; k++) {
        size_t off = k * chunk, len = c->bytes - off < chunk ? c->bytes - off : chunk;
        memcpy(c->dst + off, c->src + off, len);
    }
    return 0;
}

/* Memory-copy bandwidth, read + write bytes per second, of a buffer far larger than any cache. */
static double copy_gbps(void) {
    copy_ctx c;
    c.bytes = (size_t)256 << 20;
    char *src = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, c.bytes), *dst = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, c.bytes);
    double g = NAN;
    if (src && dst) {
        memset(src, 1, c.bytes);
        memset(dst, 0, c.bytes);
        c.src = src, c.dst = dst;
        double t = best_time(copy_run, &c, 8);
        g = 2.0 * (double)c.bytes / t / 1e9;
    }
    zero_mem_free(NULL, src);
    zero_mem_free(NULL, dst);
    return g;
}

typedef struct step_ctx {
    zero_optim_hparams h;
    int64_t step;
    float *p, *m, *v, *g;
    void *out;
    zero_dtype out_dt;
    size_t n;
    zero_impl impl;
} step_ctx;

static int step_run(void *p) {
    step_ctx *c = p;
    c->step++;
    return zero_optim_step(&c->h, c->step, c->p, c->m, c->v, c->g, 1.0f, 1.0f, c->n, c->out, c->out_dt, c->impl) !=
           ZERO_OK;
}

static double time_step(step_ctx *c, zero_impl impl) {
    c->impl = impl;
    double t0 = zero_now();
    if (step_run(c)) return NAN;
    return best_time(step_run, c, reps_for(zero_now() - t0));
}

static int bench_size(const opts *o, int64_t n, result *res) {
    const size_t N = (size_t)n;
    step_ctx c;
    memset(&c, 0, sizeof c);
    zero_optim_hparams_default(&c.h, ZERO_OPTIM_ADAMW);
    c.n = N;
    c.p = zero_mem_alloc(NULL, ZERO_MEM_MASTER, N * 4);
    c.m = zero_mem_calloc(NULL, ZERO_MEM_OPTIM, N * 4);
    c.v = zero_mem_calloc(NULL, ZERO_MEM_OPTIM, N * 4);
    c.g = zero_mem_alloc(NULL, ZERO_MEM_GRADS, N * 4);
    uint16_t *half = zero_mem_calloc(NULL, ZERO_MEM_PARAMS, N * 2);
    int rc = 0;
    if (!c.p || !c.m || !c.v || !c.g || !half) {
        rc = cli_error(CLI_RUNTIME, "bench adam: cannot allocate %.2f GB for n = %lld", (double)N * 18 / 1e9,
                       (long long)n);
        goto done;
    }
    for (size_t i = 0; i < N; i++) c.p[i] = hashed(i, 1), c.g[i] = hashed(i, 2) * 1e-2f;
    for (int d = 0; d < o->ndtypes; d++) {
        result *r = &res[d];
        r->n = n;
        r->dt = o->dtypes[d];
        c.out_dt = r->dt;
        c.out = r->dt == ZERO_DTYPE_FP32 ? NULL : half; /* fp32 training: the master is the working copy */
        r->bytes = (double)N * (28.0 + (c.out ? 2.0 : 0.0));
        r->scalar_s = time_step(&c, ZERO_IMPL_SCALAR);
        r->best_s = time_step(&c, ZERO_IMPL_AUTO);
        r->torch_s = NAN;
        if (isnan(r->scalar_s) || isnan(r->best_s)) {
            rc = cli_error(CLI_RUNTIME, "bench adam: zero_optim_step failed for n = %lld", (long long)n);
            goto done;
        }
    }
done:
    zero_mem_free(NULL, c.p);
    zero_mem_free(NULL, c.m);
    zero_mem_free(NULL, c.v);
    zero_mem_free(NULL, c.g);
    zero_mem_free(NULL, half);
    return rc;
}


static int torch_importable(const char *py) {
    char cmd[1200];
    if (strlen(py) > 1000 || strchr(py, '\'')) return 0;
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", py);
    return system(cmd) == 0;
}

/* The PyTorch peer: $ZERO_TORCH_ADAM, or bench/torch_adam.py in the source tree beside the
 * binary's build directory (build/zero -> bench/), or beside the binary. */
static int find_script(char *out, size_t cap) {
    const char *s = getenv("ZERO_TORCH_ADAM");
    if (s && *s) {
        snprintf(out, cap, "%s", s);
        return access(out, R_OK) == 0;
    }
    char dir[4096];
    ssize_t n = readlink("/proc/self/exe", dir, sizeof dir - 1);
    if (n <= 0) return 0;
    dir[n] = 0;
    char *slash = strrchr(dir, '/');
    if (!slash) return 0;
    *slash = 0;
    const char *rel[] = {"/../bench/torch_adam.py", "/bench/torch_adam.py"};
    for (int i = 0; i < 2; i++) {
        if (strlen(dir) + strlen(rel[i]) >= cap) continue;
        snprintf(out, cap, "%s%s", dir, rel[i]);
        if (access(out, R_OK) == 0) return 1;
    }
    return 0;
}

/* Fills res[].torch_s; leaves NAN where PyTorch (or its script) is missing or failed. */
static void bench_torch(const opts *o, result *res, int nres, const char **mode_out) {
    static char mode[32] = "";
    *mode_out = NULL;
    const char *py = getenv("ZERO_PYTHON");
    if (!py || !*py) py = "/usr/bin/python3";
    char path[1024];
    if (!find_script(path, sizeof path) || strchr(path, '\'') || !torch_importable(py)) return;
    char sizes[MAX_SIZES * 24] = "", dts[32] = "", cmd[4096];
    for (int i = 0; i < o->nsizes; i++)
        snprintf(sizes + strlen(sizes), sizeof sizes - strlen(sizes), "%s%lld", i ? "," : "", (long long)o->sizes[i]);
    for (int d = 0; d < o->ndtypes; d++)
        snprintf(dts + strlen(dts), sizeof dts - strlen(dts), "%s%s", d ? "," : "", zero_dtype_name(o->dtypes[d]));
    int threads = o->threads;
#ifdef _OPENMP
    if (threads == 0) threads = omp_get_max_threads();
#endif
    snprintf(cmd, sizeof cmd, "'%s' '%s' %s %s %d 2>/dev/null", py, path, sizes, dts, threads);
    FILE *p = popen(cmd, "r");
    if (p) {
        char line[256];
        while (fgets(line, sizeof line, p)) {
            long long n;
            char dt[16], md[32];
            double s;
            if (sscanf(line, "%lld %15s %lf %31s", &n, dt, &s, md) != 4 || !(s > 0)) continue;
            for (int i = 0; i < nres; i++) {
                if (res[i].n == n && !strcmp(zero_dtype_name(res[i].dt), dt)) {
                    res[i].torch_s = s;
                    snprintf(mode, sizeof mode, "%s", md);
                    *mode_out = mode;
                }
            }
        }
        pclose(p);
    }
}

int cli_bench_adam(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CLI_OK;
        }
    }
    opts o;
    if (parse(argc, argv, &o)) return CLI_USAGE;
#ifdef _OPENMP
    if (o.threads > 0) omp_set_num_threads(o.threads);
    const int threads = omp_get_max_threads();
#else
    const int threads = 1;
#endif
    const zero_impl best = zero_impl_best();
    const double copy = copy_gbps();
    if (isnan(copy)) return cli_error(CLI_RUNTIME, "bench adam: cannot allocate the 512 MiB memory-copy buffers");
    result res[MAX_SIZES * 3];
    int nres = 0;
    for (int s = 0; s < o.nsizes; s++) {
        int rc = bench_size(&o, o.sizes[s], res + nres);
        if (rc) return rc;
        nres += o.ndtypes;
    }
    const char *torch_mode = NULL;
    if (o.torch) bench_torch(&o, res, nres, &torch_mode);

    if (!o.json) {
        printf("zero bench adam: AdamW step, %d thread%s, best impl %s; memory copy %.1f GB/s (read+write)\n",
               threads, threads == 1 ? "" : "s", zero_impl_name(best), copy);
        printf("torch.optim.AdamW: %s\n", torch_mode ? torch_mode
                                       : o.torch ? "not available (torch_ratio null)"
                                                 : "skipped (--no-torch; torch_ratio null)");
        printf("%12s %5s %12s %12s %7s %10s %10s %11s\n", "n", "dtype", "scalar GB/s", "best GB/s", "ratio",
               "ms/step", "torch ms", "torch_ratio");
    }
    for (int i = 0; i < nres; i++) {
        const result *r = &res[i];
        const double eff = r->bytes / r->best_s / 1e9, sc = r->bytes / r->scalar_s / 1e9;
        const double tr = isnan(r->torch_s) ? NAN : r->torch_s / r->best_s;
        if (o.json) {
            printf("{\"n\": %lld, \"dtype\": \"%s\", \"effective_gbps\": ", (long long)r->n, zero_dtype_name(r->dt));
            cli_json_double(stdout, eff);
            printf(", \"copy_gbps\": ");
            cli_json_double(stdout, copy);
            printf(", \"ratio\": ");
            cli_json_double(stdout, eff / copy);
            printf(", \"torch_ratio\": ");
            cli_json_double(stdout, tr);
            printf(", \"scalar_gbps\": ");
            cli_json_double(stdout, sc);
            printf(", \"impl\": \"%s\", \"threads\": %d, \"ms\": ", zero_impl_name(best), threads);
            cli_json_double(stdout, r->best_s * 1e3);
            printf(", \"torch_ms\": ");
            cli_json_double(stdout, r->torch_s * 1e3);
            printf("}\n");
        } else {
            printf("%12lld %5s %12.2f %12.2f %7.2f %10.3f %10.3f %11.2f\n", (long long)r->n, zero_dtype_name(r->dt), sc,
                   eff, eff / copy, r->best_s * 1e3, r->torch_s * 1e3, tr);
        }
    }
    return CLI_OK;
}
