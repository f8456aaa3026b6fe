/* `zero bench comm`: bandwidth of all_reduce, reduce_scatter and all_gather through zero's
 * communicator (shared memory inside a node) and through raw MPI calls on the same buffers, in
 * NCCL-tests' algbw/busbw terms, beside a memcpy of the same message measured in the same run. */
#include "cli.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#ifdef ZERO_HAVE_MPI
#include <mpi.h>
#endif

#define KIB 1024.0
#define MIB (1024.0 * 1024.0)
#define GIB (1024.0 * 1024.0 * 1024.0)
#define DEFAULT_MAX_BYTES (256.0 * MIB)
#define LIMIT_MAX_BYTES (4.0 * GIB) /* fp32 counts stay under MPI's INT_MAX */

typedef struct bench_opts {
    int json;
    int ranks;      /* 0: not given */
    double min_bytes;
    double max_bytes; /* 0: default (256 MiB, or less when memory is short) */
    int iters;      /* 0: automatic per size */
} bench_opts;

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero bench comm [--json] [--ranks N] [--min-bytes B] [--max-bytes B] [--iters K]\n"
            "\n"
            "Bandwidth of all_reduce, reduce_scatter and all_gather (fp32, sum) through zero's\n"
            "communicator and through the same MPI calls made directly, for message sizes from\n"
            "--min-bytes (default 1KiB) to --max-bytes (default 256MiB, lowered to fit half of the\n"
            "available memory when many ranks share the machine), multiplying by 4.\n"
            "  algbw = bytes / time;  busbw = algbw * 2(n-1)/n (all_reduce), (n-1)/n (others);\n"
            "  time = the slowest rank's mean over K iterations (default: 3 to 200, by size),\n"
            "  ours and mpi interleaved in 4 rounds of K/4, the best round of each kept;\n"
            "  ratio = ours / mpi (algbw; the same as busbw's with n > 1). GB/s = 1e9 bytes/s.\n"
            "  memcpy = bytes / time of one memcpy of the full message, every rank copying at once\n"
            "  (the memory bandwidth the ranks share), interleaved with the others the same way.\n"
            "  bytes is the full message: the reduced buffer, or all n blocks of reduce_scatter's\n"
            "  input and all_gather's output (rounded down to a multiple of 4n).\n"
            "  Ranks that share a node use the shared-memory path above ZERO_COMM_SHM_MIN_BYTES\n"
            "  (backend mpi+shm); ZERO_COMM_SHM=0 measures zero's plain MPI path instead.\n"
            "--ranks N  run on N local ranks through %s (under mpirun/srun: the MPI world,\n"
            "           which must then have N ranks)\n"
            "--oversubscribe  allow more than 8 ranks per CPU this process may use\n"
            "--json     one object per (collective, size) instead of the table\n",
#ifdef ZERO_MPIEXEC
            ZERO_MPIEXEC
#else
            "mpiexec (not in this build)"
#endif
    );
}

static int parse(int argc, char **argv, bench_opts *o) {
    memset(o, 0, sizeof *o);
    o->min_bytes = KIB;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--ranks")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_int(a, v, 1, 4096, &o->ranks)) return -1;
        } else if (!strcmp(a, "--oversubscribe")) {
            /* read by cli_launch_ranks */
        } else if (!strcmp(a, "--iters")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_int(a, v, 1, 1000000, &o->iters)) return -1;
        } else if (!strcmp(a, "--min-bytes") || !strcmp(a, "--max-bytes")) {
            double x;
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_size(a, v, &x)) return -1;
            if (x < 1 || x > LIMIT_MAX_BYTES) {
                cli_error(CLI_USAGE, "%s '%s': expected a size from 1 byte to 4GiB", a, v);
                return -1;
            }
            if (!strcmp(a, "--min-bytes")) o->min_bytes = x;
            else o->max_bytes = x;
        } else {
            cli_error(CLI_USAGE, "bench comm: unknown option '%s': expected --json, --ranks, "
                      "--oversubscribe, --min-bytes, --max-bytes or --iters", a);
            return -1;
        }
    }
    if (o->max_bytes > 0 && o->max_bytes < o->min_bytes) {
        cli_error(CLI_USAGE, "--max-bytes %.0f is below --min-bytes %.0f: expected max >= min",
                  o->max_bytes, o->min_bytes);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ measurement */

/* Half of MemAvailable, or 0 when unknown. */
static double mem_budget(void) {
    FILE *f = fopen("/proc/meminfo", "r");
    if (!f) return 0;
    char line[256];
    double kb = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "MemAvailable: %lf kB", &kb) == 1) break;
    fclose(f);
    return kb * 1024.0 / 2;
}

static const char *coll_names[3] = {"all_reduce", "reduce_scatter", "all_gather"};

enum { WAY_OURS, WAY_MPI, WAY_MEMCPY, WAYS };

/* Runs collective k `iters` times through zero (WAY_OURS) or raw MPI (WAY_MPI), or copies the
 * full message with memcpy on every rank at once (WAY_MEMCPY); returns the seconds per call of
 * the slowest rank, or -1 after printing an error. */
static double run(zero_comm *c, int k, int raw, float *send, float *recv, size_t count, int iters) {
    if (zero_comm_barrier(c)) {
        cli_error(CLI_RUNTIME, "bench comm: barrier: %s", zero_comm_last_error(c));
        return -1;
    }
    size_t full = count * (size_t)(k == 0 ? 1 : zero_comm_size(c)) * sizeof *send;
    double t0 = zero_now();
    for (int it = 0; it < iters; it++) {
        if (raw == WAY_MEMCPY) {
            memcpy(recv, send, full);
        } else if (raw == WAY_OURS) {
            zero_status s;
            if (k == 0) s = zero_comm_all_reduce(c, send, recv, count, ZERO_DTYPE_FP32, ZERO_OP_SUM);
            else if (k == 1) s = zero_comm_reduce_scatter(c, send, recv, count, ZERO_DTYPE_FP32, ZERO_OP_SUM);
            else s = zero_comm_all_gather(c, send, recv, count, ZERO_DTYPE_FP32);
            if (s) {
                cli_error(CLI_RUNTIME, "bench comm: %s: %s", coll_names[k], zero_comm_last_error(c));
                return -1;
            }
        } else {
#ifdef ZERO_HAVE_MPI
            int rc;
            if (k == 0) rc = MPI_Allreduce(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            else if (k == 1)
                rc = MPI_Reduce_scatter_block(send, recv, (int)count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
            else rc = MPI_Allgather(send, (int)count, MPI_FLOAT, recv, (int)count, MPI_FLOAT, MPI_COMM_WORLD);
            if (rc != MPI_SUCCESS) {
                cli_error(CLI_RUNTIME, "bench comm: raw MPI %s failed (MPI error %d)", coll_names[k], rc);
                return -1;
            }
#endif
        }
    }
    double t = (zero_now() - t0) / iters, tmax = t;
#ifdef ZERO_HAVE_MPI
    MPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
#endif
    return tmax;
}

/* Seconds per call through zero (out[WAY_OURS]), raw MPI (out[WAY_MPI], when have_mpi) and
 * memcpy (out[WAY_MEMCPY]): the three are interleaved in ROUNDS rounds and each keeps its best
 * round, so that a burst of load from elsewhere on the machine does not land on one side only. */
#define ROUNDS 4
static int measure(zero_comm *c, int k, int have_mpi, float *send, float *recv, size_t count,
                   int iters, double out[WAYS]) {
    int rounds = iters < ROUNDS ? iters : ROUNDS;
    for (int w = 0; w < WAYS; w++) out[w] = INFINITY;
    /* One untimed call of each warms up connections and pages. */
    for (int w = 0; w < WAYS; w++)
        if ((w != WAY_MPI || have_mpi) && run(c, k, w, send, recv, count, 1) < 0) return -1;
    for (int r = 0; r < rounds; r++) {
        int n = iters / rounds + (r < iters % rounds);
        for (int w = 0; w < WAYS; w++) {
            if (w == WAY_MPI && !have_mpi) continue;
            double t = run(c, k, w, send, recv, count, n);
            if (t < 0) return -1;
            if (t < out[w]) out[w] = t;
        }
    }
    if (!have_mpi) out[WAY_MPI] = NAN;
    return 0;
}

static int auto_iters(double bytes) {
    double k = 256.0 * MIB / bytes;
    return k < 3 ? 3 : k > 200 ? 200 : (int)k;
}

static void print_header(int n, const char *backend, int have_mpi) {
    printf("zero bench comm: %d rank%s, %s backend, fp32 sum; GB/s = 1e9 bytes/s; busbw = algbw * "
           "2(n-1)/n (all_reduce), (n-1)/n (reduce_scatter, all_gather); memcpy = GB/s of a copy of "
           "the message on every rank at once%s\n",
           n, n == 1 ? "" : "s", backend, have_mpi ? "" : "; no MPI in this build: mpi columns empty");
    printf("%-15s %11s %6s %11s %11s %11s %11s %11s %7s %11s\n", "collective", "bytes", "iters",
           "ours_us", "ours_algbw", "ours_busbw", "mpi_us", "mpi_busbw", "ratio", "memcpy");
}

static int bench(const bench_opts *o) {
    zero_comm *c = NULL;
    int have_mpi = 0;
    zero_error err = {{0}};
#ifdef ZERO_HAVE_MPI
    have_mpi = 1;
    if (zero_comm_init_mpi_with(&c, NULL, NULL, &err)) return cli_error(CLI_RUNTIME, "bench comm: %s", err.msg);
#else
    if (zero_comm_init_self_with(&c, &err)) return cli_error(CLI_RUNTIME, "bench comm: %s", err.msg);
#endif
    int rc = CLI_RUNTIME, n = zero_comm_size(c), rank = zero_comm_rank(c);
    cli_ignore_sigpipe(n);
    float *send = NULL, *recv = NULL;
    if (o->ranks && o->ranks != n) {
        rc = cli_error(CLI_USAGE, "--ranks %d: launched with %d ranks: expected the same number", o->ranks, n);
        goto done;
    }
    /* Every rank must run the same sizes: rank 0 decides the default maximum. */
    int64_t maxb = (int64_t)o->max_bytes;
    if (maxb <= 0) {
        double cap = DEFAULT_MAX_BYTES, budget = mem_budget();
        /* send + recv of the full message per rank; ranks assumed to share this machine. */
        while (budget > 0 && cap > KIB && 2 * cap * n > budget) cap /= 4;
        maxb = (int64_t)cap;
    }
    if (zero_comm_broadcast(c, &maxb, 1, ZERO_DTYPE_INT64, 0)) {
        cli_error(CLI_RUNTIME, "bench comm: %s", zero_comm_last_error(c));
        goto done;
    }
    if ((double)maxb < o->min_bytes) maxb = (int64_t)o->min_bytes;
    size_t max_elems = (size_t)maxb / 4 + (size_t)n;
    /* zero's allocator, as the engine's buffers: large blocks on transparent huge pages, which
     * both sides' single copies (ours and MPI's CMA) pin faster; ZERO_HUGEPAGES=0 for malloc */
    send = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, max_elems * sizeof *send);
    recv = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, max_elems * sizeof *recv);
    if (!send || !recv) {
        cli_error(CLI_RUNTIME, "bench comm: out of memory for two buffers of %lld bytes (use --max-bytes)",
                  (long long)maxb);
        goto done;
    }
    for (size_t i = 0; i < max_elems; i++) send[i] = (float)(i % 7) * 0.25f, recv[i] = 0;

    if (rank == 0 && !o->json) print_header(n, zero_comm_backend(c), have_mpi);
    for (int k = 0; k < 3; k++) {
        for (double want = o->min_bytes; want <= (double)maxb; want *= 4) {
            /* count per call: the whole buffer (all_reduce) or one rank's block. */
            size_t elems = (size_t)want / 4;
            size_t count = k == 0 ? elems : elems / (size_t)n;
            if (count == 0) count = 1;
            double bytes = 4.0 * (double)count * (k == 0 ? 1 : n);
            int iters = o->iters ? o->iters : auto_iters(bytes);
            double t[WAYS];
            if (measure(c, k, have_mpi, send, recv, count, iters, t)) goto done;
            double factor = n <= 1 ? 0 : (k == 0 ? 2.0 : 1.0) * (n - 1) / n;
            double ours_alg = bytes / t[WAY_OURS] / 1e9, ours_bus = ours_alg * factor;
            double mpi_alg = bytes / t[WAY_MPI] / 1e9, mpi_bus = mpi_alg * factor;
            double ratio = ours_alg / mpi_alg, copy = bytes / t[WAY_MEMCPY] / 1e9;
            if (rank != 0) continue;
            if (o->json) {
                printf("{\"collective\": \"%s\", \"bytes\": %.0f, \"ranks\": %d, \"iters\": %d, "
                       "\"ours_algbw_gbps\": ", coll_names[k], bytes, n, iters);
                cli_json_double(stdout, ours_alg);
                printf(", \"ours_busbw_gbps\": ");
                cli_json_double(stdout, ours_bus);
                printf(", \"mpi_algbw_gbps\": ");
                cli_json_double(stdout, mpi_alg);
                printf(", \"mpi_busbw_gbps\": ");
                cli_json_double(stdout, mpi_bus);
                printf(", \"ratio\": ");
                cli_json_double(stdout, ratio);
                printf(", \"ours_us\": ");
                cli_json_double(stdout, t[WAY_OURS] * 1e6);
                printf(", \"mpi_us\": ");
                cli_json_double(stdout, t[WAY_MPI] * 1e6);
                printf(", \"memcpy_gbps\": ");
                cli_json_double(stdout, copy);
                printf(", \"backend\": \"%s\"}\n", zero_comm_backend(c));
            } else {
                printf("%-15s %11.0f %6d %11.1f %11.3f %11.3f %11.1f %11.3f %7.3f %11.3f\n",
                       coll_names[k], bytes, iters, t[WAY_OURS] * 1e6, ours_alg, ours_bus,
                       t[WAY_MPI] * 1e6, mpi_bus, ratio, copy);
            }
            fflush(stdout);
        }
    }
    rc = CLI_OK;
done:
    zero_mem_free(NULL, send);
    zero_mem_free(NULL, recv);
    zero_comm_free(c);
    return rc;
}

int cli_bench_comm(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CLI_OK;
        }
    }
    bench_opts o;
    if (parse(argc, argv, &o)) return CLI_USAGE;
    /* The relaunched ranks get the command line without --ranks (cli_launch_ranks). */
    if (o.ranks > 1 && !zero_comm_mpi_launched()) {
#ifdef ZERO_HAVE_MPI
        return cli_launch_ranks(o.ranks);
#else
        return cli_error(CLI_RUNTIME, "--ranks %d: this build of zero has no MPI", o.ranks);
#endif
    }
    return bench(&o);
}
