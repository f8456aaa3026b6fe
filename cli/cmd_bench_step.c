/* `zero bench step`: step time, tokens/s,
 * per-rank peak RSS and model FLOP utilization of `zero train` for each stage, rank count and thread
 * count, against PyTorch 2 (bench/torch_step.py: plain, DDP, ZeroRedundancyOptimizer, FSDP2) on the
 * same model, as ratios. */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "decoder/decoder.h"

#define MAX_LIST 16
#define MAX_STEPS 10000
#define MAX_REPEAT 100
#define MIB (1024.0 * 1024.0)

/* The PyTorch peers: plain on 1 rank; DDP, DDP + ZeroRedundancyOptimizer and FSDP2 on more. */
enum { PEER_PLAIN, PEER_DDP, PEER_ZERO, PEER_FSDP, PEER_COUNT };
static const char *const peer_name[PEER_COUNT] = {"plain", "ddp", "zero", "fsdp"};
static int peer_runs(int p, int ranks) { return (p == PEER_PLAIN) == (ranks == 1); }
/* Whether peer p is stage S's counterpart on `ranks` ranks: 1 rank: plain PyTorch for every
 * stage (nothing to shard); more: DDP ~ stage 0, ZeroRedundancyOptimizer ~ stage 1 (and 2: it
 * shards the optimizer states, DDP reduces whole gradients), FSDP2 ~ stages 2-3. */
static int counterpart(int p, int stage, int ranks) {
    if (ranks == 1) return p == PEER_PLAIN;
    switch (p) {
    case PEER_DDP: return stage == 0;
    case PEER_ZERO: return stage == 1 || stage == 2;
    case PEER_FSDP: return stage >= 2;
    default: return 0;
    }
}

/* Targets: issue #8's stage S step time over stage 0's; issue #20's step time against PyTorch 2
 * (and less memory), model FLOP utilization against the GEMM rate on the same shapes, and 2
 * threads against 1. */
static const double stage_target[4] = {1.0, 1.05, 1.05, 1.25};
#define TORCH_TARGET 0.85
#define MFU_TARGET 0.80
#define THREAD_TARGET 1.7

typedef struct step_opts {
    int json, torch, steps, warmup, repeat, micro_batch, seq, timeout_s;
    int nranks, ranks[MAX_LIST];
    int nstages, stages[4];
    int nthreads, threads[MAX_LIST]; /* 0: the share of the cores `zero train --ranks` gives */
    double gemm_s;                   /* seconds of each GEMM-rate measurement; 0: none */
    const char *model, *data, *torch_script;
    const char *precision;           /* fp32 or bf16: zero train's working precision, torch's autocast */
    const char *device, *device_memory; /* --device, --device-memory: passed to zero train (NULL: not given) */
} step_opts;

/* The figures of one configuration over every repeat. */
typedef struct figures {
    double *ms;           /* post-warm-up step times (ms) of every repeat; n of them */
    int n;
    double rss;           /* largest per-rank peak RSS over the repeats (bytes); NAN: none */
    double wait_sum;      /* Σ comm_wait_ms over the same steps */
    double states, total, stage0; /* per-rank model states, engine total, stage 0's states (bytes) */
    double params;
    double med, lo, hi;   /* of ms; NAN when n == 0 */
} figures;

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero bench step [--json] [--ranks-list 1,2,4] [--stages 0,1,2,3] [--threads-list 1,2]\n"
            "                       [--steps N] [--warmup W] [--repeat R] [--model NAME] [--micro-batch B]\n"
            "                       [--seq T] [--data FILE] [--gemm-seconds S] [--no-torch]\n"
            "                       [--torch-script FILE] [--timeout S] [--precision fp32|bf16]\n"
            "                       [--device cpu|fake|cuda] [--device-memory SIZE]\n"
            "\n"
            "Runs `zero train` (AdamW, --precision) for every thread count, rank count and stage, through\n"
            "--ranks, and reads its --log-json records: the step time (rank 0's, median of the steps\n"
            "after the first W of every repeat; min and max shown as the noise), tokens/s of all ranks\n"
            "at that median, the largest per-rank peak RSS by the last step before the final\n"
            "validation, and the model FLOP utilization: the model's FLOPs a rank computes per step\n"
            "(dec_step_flops) over the step time, divided by the BLAS's rate on the model's own\n"
            "products with the same threads, measured in the same run (dec_gemm_rate).\n"
            "When python3 (the first on PATH; ZERO_PYTHON overrides) imports torch, runs\n"
            "bench/torch_step.py for the same model, micro-batch per rank, sequence length, steps and\n"
            "threads per rank: plain PyTorch on 1 rank; DDP, DDP + ZeroRedundancyOptimizer and FSDP2\n"
            "(fully_shard) over gloo on more. The runs of every repeat are interleaved so that load\n"
            "from elsewhere falls on all of them.\n"
            "\n"
            "  x_s0      step time / stage 0's (targets: stages 1-2 <= 1.05, stage 3 <= 1.25)\n"
            "  mfu       model FLOP/s per rank / GEMM FLOP/s (target >= 0.80)\n"
            "  x_1t      1 thread's step time / this one's, at 2 threads (target >= 1.7)\n"
            "  ms/P      step time / PyTorch peer P's; rss/P peak RSS / P's; target against the\n"
            "            counterparts (1 rank: plain; stage 0: DDP, 1: ZeRO, 2: ZeRO and FSDP,\n"
            "            3: FSDP): time <= 0.85x and less memory\n"
            "\n"
            "  --ranks-list L    rank counts (default 1,2,4); more than one rank goes through mpiexec\n"
            "  --stages L        ZeRO stages (default 0,1,2,3)\n"
            "  --threads-list L  threads per rank (default: the cores / ranks share zero train gives)\n"
            "  --steps N         optimizer steps a run (default 6); --warmup W first steps dropped (1)\n"
            "  --repeat R        runs of every configuration (default 1)\n"
            "  --model NAME      preset (default small; the PyTorch peer models GPT-2 and Llama without\n"
            "                    biases or q/k norms); --micro-batch B per rank (4); --seq T (128)\n"
            "  --data FILE       training text (default: zero train's default corpus)\n"
            "  --gemm-seconds S  least time of each GEMM-rate measurement (default 1: after a warm-up\n"
            "                    round, at least 3 rounds, the best counted; 0: no MFU)\n"
            "  --no-torch        skip PyTorch (its columns are null)\n"
            "  --torch-script F  the PyTorch peer (default: bench/torch_step.py beside the build dir,\n"
            "                    or $ZERO_TORCH_STEP)\n"
            "  --timeout S       seconds one run may take before it is killed (default 1800)\n"
            "  --precision P     fp32 (default) or bf16: zero train's working precision (bf16 products\n"
            "                    where the CPU multiplies bf16) and PyTorch's autocast to bf16; the\n"
            "                    GEMM rate of the mfu is then that of the same bf16 products\n"
            "  --device D        zero train's --device (cpu, fake, cuda; default $ZERO_DEVICE, else cpu);\n"
            "  --device-memory X and --device-memory (docs/CLI.md): only cpu trains yet\n"
            "  --json            one object a line: \"run\": \"zero\" rows {\"ranks\", \"threads\", \"stage\",\n"
            "                    \"step_ms\", \"step_ms_min\", \"step_ms_max\", \"tokens_per_s\", \"rss_peak\",\n"
            "                    \"model_states\", \"stage0_model_states\", \"mem_total\", \"comm_wait_ms\",\n"
            "                    \"step_flops\", \"gemm_flops\", \"mfu\", \"meets_mfu_target\",\n"
            "                    \"thread_speedup\", \"meets_thread_target\", \"stage_ratio\",\n"
            "                    \"meets_stage_target\", \"torch_P_ms\", \"torch_P_rss\", \"ratio_P_ms\",\n"
            "                    \"ratio_P_rss\" for P in plain, ddp, zero, fsdp, \"meets_torch_target\", ...}\n"
            "                    and \"torch_P\" rows with their own figures (and mfu)\n");
}

/* "1,2,4" into out[] (each in [lo, hi], no repeats); -1 after printing the error. */
static int parse_list(const char *flag, const char *v, int lo, int hi, int *out, int cap, int *n) {
    *n = 0;
    const char *p = v;
    while (1) {
        char *end = NULL;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < lo || x > hi || (*end && *end != ',') || *n == cap) goto bad;
        for (int i = 0; i < *n; i++)
            if (out[i] == (int)x) goto bad;
        out[(*n)++] = (int)x;
        if (!*end) return 0;
        p = end + 1;
    }
bad:
    cli_error(CLI_USAGE, "%s '%s': expected a comma-separated list of at most %d distinct integers in [%d, %d]",
              flag, v, cap, lo, hi);
    return -1;
}

static int parse(int argc, char **argv, step_opts *o) {
    memset(o, 0, sizeof *o);
    o->torch = 1;
    o->steps = 6;
    o->warmup = 1;
    o->repeat = 1;
    o->micro_batch = 4;
    o->seq = 128;
    o->timeout_s = 1800;
    o->gemm_s = 1.0;
    o->model = "small";
    o->precision = "fp32";
    o->nranks = 3, o->ranks[0] = 1, o->ranks[1] = 2, o->ranks[2] = 4;
    o->nstages = 4;
    for (int s = 0; s < 4; s++) o->stages[s] = s;
    o->nthreads = 1, o->threads[0] = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
#define VALUE()                                                                                    \
    if (!(v = cli_flag_value(argc, argv, &i))) return -1
        if (!strcmp(a, "--json")) o->json = 1;
        else if (!strcmp(a, "--no-torch")) o->torch = 0;
        else if (!strcmp(a, "--ranks-list")) { VALUE(); if (parse_list(a, v, 1, 256, o->ranks, MAX_LIST, &o->nranks)) return -1; }
        else if (!strcmp(a, "--stages")) { VALUE(); if (parse_list(a, v, 0, 3, o->stages, 4, &o->nstages)) return -1; }
        else if (!strcmp(a, "--threads-list")) { VALUE(); if (parse_list(a, v, 1, 1024, o->threads, MAX_LIST, &o->nthreads)) return -1; }
        else if (!strcmp(a, "--steps")) { VALUE(); if (cli_parse_int(a, v, 2, MAX_STEPS, &o->steps)) return -1; }
        else if (!strcmp(a, "--warmup")) { VALUE(); if (cli_parse_int(a, v, 0, MAX_STEPS, &o->warmup)) return -1; }
        else if (!strcmp(a, "--repeat")) { VALUE(); if (cli_parse_int(a, v, 1, MAX_REPEAT, &o->repeat)) return -1; }
        else if (!strcmp(a, "--micro-batch")) { VALUE(); if (cli_parse_int(a, v, 1, 1 << 16, &o->micro_batch)) return -1; }
        else if (!strcmp(a, "--seq")) { VALUE(); if (cli_parse_int(a, v, 1, 1 << 20, &o->seq)) return -1; }
        else if (!strcmp(a, "--timeout")) { VALUE(); if (cli_parse_int(a, v, 1, 7 * 86400, &o->timeout_s)) return -1; }
        else if (!strcmp(a, "--gemm-seconds")) {
            VALUE();
            char *end = NULL;
            errno = 0;
            o->gemm_s = strtod(v, &end);
            if (end == v || *end || errno || !(o->gemm_s >= 0.0 && o->gemm_s <= 3600.0)) {
                cli_error(CLI_USAGE, "--gemm-seconds '%s': expected seconds in [0, 3600]", v);
                return -1;
            }
        }
        else if (!strcmp(a, "--model")) { VALUE(); o->model = v; }
        else if (!strcmp(a, "--data")) { VALUE(); o->data = v; }
        else if (!strcmp(a, "--torch-script")) { VALUE(); o->torch_script = v; }
        else if (!strcmp(a, "--precision")) {
            VALUE();
            if (strcmp(v, "fp32") != 0 && strcmp(v, "bf16") != 0) {
                cli_error(CLI_USAGE, "--precision '%s': expected fp32 or bf16", v);
                return -1;
            }
            o->precision = v;
        }
        else if (!strcmp(a, "--device")) { VALUE(); o->device = v; }
        else if (!strcmp(a, "--device-memory")) { VALUE(); o->device_memory = v; }
        else {
            cli_error(CLI_USAGE, "bench step: unknown option '%s': expected --json, --ranks-list, --stages, --threads-list, "
                      "--steps, --warmup, --repeat, --model, --micro-batch, --seq, --data, --gemm-seconds, --no-torch, "
                      "--torch-script, --timeout, --precision, --device or --device-memory", a);
            return -1;
        }
#undef VALUE
    }
    /* zero train gets them as given; checked here first so that a bad one is this command's usage error */
    cli_device dev;
    if (cli_device_resolve(o->device, o->device_memory, &dev) != CLI_OK) return -1;
    if (o->warmup >= o->steps) {
        cli_error(CLI_USAGE, "--warmup %d with --steps %d: expected warmup < steps (at least one timed step)",
                  o->warmup, o->steps);
        return -1;
    }
    dec_config m;
    zero_error err = {{0}};
    if (dec_config_preset(&m, o->model, &err) != ZERO_OK) {
        cli_error(CLI_USAGE, "--model: %s", err.msg);
        return -1;
    }
    if (o->data && access(o->data, R_OK)) {
        cli_error(CLI_USAGE, "--data '%s': cannot read it: %s", o->data, strerror(errno));
        return -1;
    }
    if (o->torch_script && access(o->torch_script, R_OK)) {
        cli_error(CLI_USAGE, "--torch-script '%s': cannot read it: %s", o->torch_script, strerror(errno));
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ the JSON the runs print */

/* Where the value of `key` starts in the flat JSON object `s`: at the top level (obj NULL) or
 * inside the top-level object member `obj`. NULL when absent. Strings are skipped whole, so a
 * key inside a string value never matches. */
static const char *json_at(const char *s, const char *obj, const char *key) {
    const size_t klen = strlen(key);
    int depth = 0, want = obj ? 2 : 1, in_obj = !obj;
    for (const char *p = s; *p; p++) {
        if (*p == '{' || *p == '[') {
            depth++;
        } else if (*p == '}' || *p == ']') {
            if (obj && depth == 2 && in_obj) return NULL; /* end of obj */
            depth--;
        } else if (*p == '"') {
            const char *k = p + 1, *q = k;
            while (*q && *q != '"') q += (*q == '\\' && q[1]) ? 2 : 1;
            if (!*q) return NULL;
            const char *c = q + 1;
            while (*c == ' ') c++;
            if (*c == ':') {
                c++;
                while (*c == ' ') c++;
                if (obj && depth == 1 && (size_t)(q - k) == strlen(obj) && !strncmp(k, obj, strlen(obj)) && *c == '{')
                    in_obj = 1;
                else if (in_obj && depth == want && (size_t)(q - k) == klen && !strncmp(k, key, klen))
                    return c;
            }
            p = q;
        }
    }
    return NULL;
}

/* The number at `key` (see json_at); NAN when absent or not a number. */
static double json_num(const char *s, const char *obj, const char *key) {
    const char *v = json_at(s, obj, key);
    if (!v) return NAN;
    char *end = NULL;
    double x = strtod(v, &end);
    return end == v ? NAN : x;
}

/* ------------------------------------------------------------------ child processes */

/* The run in progress, so that a SIGTERM or SIGINT sent to the bench alone reaches it too (an
 * orphaned mpiexec or torch launcher would keep the machine busy), and the scratch directory. */
static volatile sig_atomic_t current_child;
static char scratch_dir[PATH_MAX];
/* The files the runs write in the scratch directory. */
static const char *const scratch_names[] = {"train.jsonl", "train.out", "train.err", "torch.json", "torch.err"};
#define NSCRATCH (sizeof scratch_names / sizeof scratch_names[0])

static void on_signal(int sig) {
    if (current_child > 0) kill((pid_t)current_child, sig);
    /* best effort: the files are small, and these calls are async-signal-safe */
    char p[PATH_MAX + 16];
    for (size_t i = 0; scratch_dir[0] && i < NSCRATCH; i++) {
        size_t n = strlen(scratch_dir), m = strlen(scratch_names[i]);
        if (n + 1 + m >= sizeof p) break;
        memcpy(p, scratch_dir, n);
        p[n] = '/';
        memcpy(p + n + 1, scratch_names[i], m + 1);
        unlink(p);
    }
    if (scratch_dir[0]) rmdir(scratch_dir);
    signal(sig, SIG_DFL);
    raise(sig);
}

/* Runs argv (argv[0] a path) with stdout and stderr into files; returns its exit status, 124
 * after killing it at the timeout, 127 when it cannot start. */
static int run_child(char *const argv[], const char *out_path, const char *err_path, int timeout_s) {
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid < 0) return 127;
    if (pid == 0) {
        signal(SIGINT, SIG_DFL);
        signal(SIGTERM, SIG_DFL);
        int fo = open(out_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(err_path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) _exit(127);
        close(fo);
        close(fe);
        execv(argv[0], argv);
        dprintf(2, "cannot run %s: %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    current_child = pid;
    const double deadline = zero_now() + timeout_s;
    int st = 0, killed = 0;
    for (;;) {
        pid_t w = waitpid(pid, &st, WNOHANG);
        if (w == pid) break;
        if (w < 0 && errno != EINTR) {
            current_child = 0;
            return 127;
        }
        if (!killed && zero_now() > deadline) {
            /* mpiexec and the torch launcher pass SIGTERM on to their ranks */
            kill(pid, SIGTERM);
            killed = 1;
        } else if (killed == 1 && zero_now() > deadline + 10) {
            kill(pid, SIGKILL);
            killed = 2;
        }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    current_child = 0;
    if (killed) return 124;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

/* The last non-empty line of a file, for error messages. */
static const char *last_line(const char *path, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(path, "r");
    if (!f) return buf;
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) line[--n] = 0;
        if (n) snprintf(buf, cap, "%s", line);
    }
    fclose(f);
    return buf;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *s = malloc(cap);
    while (s) {
        size_t got = fread(s + n, 1, cap - n - 1, f);
        n += got;
        if (got == 0) break;
        if (n + 1 == cap) {
            char *t = realloc(s, cap *= 2);
            if (!t) free(s);
            s = t;
        }
    }
    fclose(f);
    if (s) s[n] = 0;
    return s;
}

static double load_average(void) {
    double l = NAN;
    FILE *f = fopen("/proc/loadavg", "r");
    if (f) {
        if (fscanf(f, "%lf", &l) != 1) l = NAN;
        fclose(f);
    }
    return l;
}

/* ------------------------------------------------------------------ our runs */

typedef struct ctx {
    const step_opts *o;
    dec_config cfg;
    char self[PATH_MAX], dir[PATH_MAX];
    char py[PATH_MAX], script[PATH_MAX];
    int have_torch;
    char torch_version[32];
    double torch_params;
} ctx;

/* The threads per rank a run gets: the list's value, or the share `zero train --ranks` gives
 * (OMP_NUM_THREADS when set, else cores / ranks). */
static int threads_of(int listed, int ranks) {
    if (listed > 0) return listed;
    const char *e = getenv("OMP_NUM_THREADS");
    if (e && atoi(e) > 0) return atoi(e);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    return cores > ranks ? (int)(cores / ranks) : 1;
}

/* Sets OMP_NUM_THREADS and OPENBLAS_NUM_THREADS for a child (listed > 0) and restores them. */
typedef struct env_save {
    char *omp, *blas;
} env_save;

static void env_threads(env_save *sv, int listed) {
    const char *o = getenv("OMP_NUM_THREADS"), *b = getenv("OPENBLAS_NUM_THREADS");
    sv->omp = o ? strdup(o) : NULL;
    sv->blas = b ? strdup(b) : NULL;
    if (listed > 0) {
        char t[16];
        snprintf(t, sizeof t, "%d", listed);
        setenv("OMP_NUM_THREADS", t, 1);
        setenv("OPENBLAS_NUM_THREADS", t, 1);
    }
}

static void env_restore(env_save *sv) {
    if (sv->omp) setenv("OMP_NUM_THREADS", sv->omp, 1);
    else unsetenv("OMP_NUM_THREADS");
    if (sv->blas) setenv("OPENBLAS_NUM_THREADS", sv->blas, 1);
    else unsetenv("OPENBLAS_NUM_THREADS");
    free(sv->omp), free(sv->blas);
}

/* One `zero train` run: appends its figures to f. Returns CLI_OK or the error it printed. */
static int run_ours(ctx *c, int ranks, int stage, int threads, figures *f) {
    const step_opts *o = c->o;
    char log[PATH_MAX + 16], out[PATH_MAX + 16], err[PATH_MAX + 16];
    char s_stage[8], s_ranks[16], s_steps[16], s_b[16], s_t[16];
    snprintf(log, sizeof log, "%s/train.jsonl", c->dir);
    snprintf(out, sizeof out, "%s/train.out", c->dir);
    snprintf(err, sizeof err, "%s/train.err", c->dir);
    snprintf(s_stage, sizeof s_stage, "%d", stage);
    snprintf(s_ranks, sizeof s_ranks, "%d", ranks);
    snprintf(s_steps, sizeof s_steps, "%d", o->steps);
    snprintf(s_b, sizeof s_b, "%d", o->micro_batch);
    snprintf(s_t, sizeof s_t, "%d", o->seq);
    unlink(log);
    /* --val-every 0: one validation, after the last step (outside every timed step) */
    char *argv[32] = {c->self, "train", "--model", (char *)o->model, "--stage", s_stage, "--ranks", s_ranks,
                      "--steps", s_steps, "--micro-batch", s_b, "--seq", s_t, "--precision", (char *)o->precision,
                      "--val-every", "0", "--val-batches", "1", "--log-json", log};
    int k = 0;
    while (argv[k]) k++;
    if (o->data) argv[k++] = "--data", argv[k++] = (char *)o->data;
    if (o->device) argv[k++] = "--device", argv[k++] = (char *)o->device;
    if (o->device_memory) argv[k++] = "--device-memory", argv[k++] = (char *)o->device_memory;
    argv[k] = NULL;
    env_save sv;
    env_threads(&sv, threads);
    int rc = run_child(argv, out, err, o->timeout_s);
    env_restore(&sv);
    char line[512];
    if (rc == 124)
        return cli_error(CLI_RUNTIME, "bench step: zero train --ranks %d --stage %d took over %d s (--timeout)", ranks,
                         stage, o->timeout_s);
    if (rc != 0)
        return cli_error(CLI_RUNTIME, "bench step: zero train --ranks %d --stage %d failed (exit %d): %s", ranks, stage,
                         rc, last_line(err, line, sizeof line));
    char *text = read_file(log);
    if (!text) return cli_error(CLI_RUNTIME, "bench step: cannot read the log of zero train: %s", log);
    int steps_seen = 0, done = 0;
    double rss = NAN;
    for (char *l = strtok(text, "\n"); l; l = strtok(NULL, "\n")) {
        if (json_at(l, NULL, "done")) {
            done = 1;
            f->states = json_num(l, "mem", "params") + json_num(l, "mem", "grads") + json_num(l, "mem", "master") +
                        json_num(l, "mem", "optim");
            f->total = json_num(l, "mem", "total");
            f->stage0 = json_num(l, NULL, "stage0_model_states");
            f->params = json_num(l, NULL, "params");
            continue;
        }
        double step = json_num(l, NULL, "step"), ms = json_num(l, NULL, "step_ms");
        if (!(step >= 1) || !(ms > 0)) continue;
        steps_seen++;
        /* the peak RSS of training alone: the last record's is taken after the final validation */
        if (step == o->steps - 1) rss = json_num(l, NULL, "rss_peak");
        if (step > o->warmup && f->n < o->steps * o->repeat) {
            f->ms[f->n++] = ms;
            f->wait_sum += json_num(l, NULL, "comm_wait_ms");
        }
    }
    free(text);
    if (steps_seen != o->steps || !done || !(rss > 0) || !(f->states > 0))
        return cli_error(CLI_RUNTIME, "bench step: zero train --ranks %d --stage %d wrote %d step records of %d%s to %s",
                         ranks, stage, steps_seen, o->steps, done ? "" : " and no final record", log);
    if (isnan(f->rss) || rss > f->rss) f->rss = rss;
    return CLI_OK;
}

/* ------------------------------------------------------------------ the PyTorch peer */

static int torch_importable(const char *py) {
    char cmd[PATH_MAX + 64];
    if (strchr(py, '\'')) return 0;
    snprintf(cmd, sizeof cmd, "'%s' -c 'import torch' >/dev/null 2>&1", py);
    return system(cmd) == 0;
}

/* The first executable `name` on PATH into out; 0 when none. */
static int which(const char *name, char *out, size_t cap) {
    const char *path = getenv("PATH");
    if (!path) return 0;
    while (*path) {
        const size_t n = strcspn(path, ":");
        if (n > 0 && n + 1 + strlen(name) < cap) {
            snprintf(out, cap, "%.*s/%s", (int)n, path, name);
            if (access(out, X_OK) == 0) return 1;
        }
        path += n + (path[n] == ':');
    }
    return 0;
}

/* The peer script: --torch-script, $ZERO_TORCH_STEP, or bench/torch_step.py in the source tree
 * beside the binary's build directory (build/zero -> bench/), or beside the binary. */
static int find_script(ctx *c) {
    const char *s = c->o->torch_script ? c->o->torch_script : getenv("ZERO_TORCH_STEP");
    if (s && *s) {
        snprintf(c->script, sizeof c->script, "%s", s);
        return access(c->script, R_OK) == 0;
    }
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", c->self);
    char *slash = strrchr(dir, '/');
    if (!slash) return 0;
    *slash = 0;
    const char *rel[] = {"/../bench/torch_step.py", "/bench/torch_step.py"};
    for (int i = 0; i < 2; i++) {
        if (strlen(dir) + strlen(rel[i]) >= sizeof c->script) continue;
        snprintf(c->script, sizeof c->script, "%s%s", dir, rel[i]);
        if (access(c->script, R_OK) == 0) return 1;
    }
    c->script[0] = 0;
    return 0;
}

/* What bench/torch_step.py cannot build of this model (NULL: it builds it exactly). */
static const char *torch_unsupported(const dec_config *m) {
    if (m->arch == DEC_ARCH_GPT2) return NULL;
    if (m->qkv_bias || m->o_bias || m->mlp_bias) return "biases in a Llama-family model";
    if (m->qk_norm) return "q/k norms";
    if (m->rope_type != DEC_ROPE_DEFAULT) return "RoPE scaling";
    return NULL;
}

static int run_torch(ctx *c, int ranks, int peer, int threads, figures *f) {
    const step_opts *o = c->o;
    dec_config m = c->cfg;
    if (o->seq > m.n_ctx) m.n_ctx = o->seq; /* as zero train grows its position table */
    char out[PATH_MAX + 16], err[PATH_MAX + 16];
    char a[14][24];
    snprintf(out, sizeof out, "%s/torch.json", c->dir);
    snprintf(err, sizeof err, "%s/torch.err", c->dir);
    snprintf(a[0], 24, "%d", ranks);
    snprintf(a[1], 24, "%d", m.n_layer);
    snprintf(a[2], 24, "%d", m.n_embd);
    snprintf(a[3], 24, "%d", m.n_head);
    snprintf(a[4], 24, "%d", m.vocab);
    snprintf(a[5], 24, "%d", m.n_ctx);
    snprintf(a[6], 24, "%d", o->micro_batch);
    snprintf(a[7], 24, "%d", o->seq);
    snprintf(a[8], 24, "%d", o->steps);
    snprintf(a[9], 24, "%d", threads);
    snprintf(a[10], 24, "%d", m.n_kv_head);
    snprintf(a[11], 24, "%d", m.head_dim);
    snprintf(a[12], 24, "%d", m.n_inner);
    snprintf(a[13], 24, "%.17g", m.rope_theta);
    char eps[32];
    snprintf(eps, sizeof eps, "%.17g", m.norm_eps);
    char *argv[48] = {c->py, c->script, "--mode", (char *)peer_name[peer], "--ranks", a[0], "--arch",
                      m.arch == DEC_ARCH_GPT2 ? "gpt2" : "llama", "--layers", a[1], "--dim", a[2], "--heads", a[3],
                      "--kv-heads", a[10], "--head-dim", a[11], "--inner", a[12], "--vocab", a[4], "--n-ctx", a[5],
                      "--rope-theta", a[13], "--eps", eps, "--micro-batch", a[6], "--seq", a[7], "--steps", a[8],
                      "--threads", a[9], "--precision", (char *)o->precision};
    int k = 0;
    while (argv[k]) k++; /* after the listed arguments (counting them by hand once dropped --threads) */
    if (!m.tied) argv[k++] = "--untied";
    argv[k] = NULL;
    int rc = run_child(argv, out, err, o->timeout_s);
    char line[512];
    if (rc == 124)
        return cli_error(CLI_RUNTIME, "bench step: torch %s on %d ranks took over %d s (--timeout)", peer_name[peer], ranks,
                         o->timeout_s);
    if (rc != 0)
        return cli_error(CLI_RUNTIME, "bench step: torch %s on %d ranks failed (exit %d): %s", peer_name[peer], ranks,
                         rc, last_line(err, line, sizeof line));
    char *text = read_file(out);
    const char *arr = text ? json_at(text, NULL, "step_ms") : NULL;
    int got = 0;
    if (arr && *arr == '[') {
        const char *p = arr + 1;
        for (int step = 1; step <= o->steps; step++) {
            char *end = NULL;
            double ms = strtod(p, &end);
            if (end == p || !(ms > 0)) break;
            got++;
            if (step > o->warmup && f->n < o->steps * o->repeat) f->ms[f->n++] = ms;
            p = end;
            while (*p == ' ' || *p == ',') p++;
        }
    }
    double rss = text ? json_num(text, NULL, "rss_peak") : NAN;
    c->torch_params = text ? json_num(text, NULL, "params") : NAN;
    const char *v = text ? json_at(text, NULL, "torch") : NULL;
    if (v && *v == '"') {
        size_t n = strcspn(v + 1, "\"");
        snprintf(c->torch_version, sizeof c->torch_version, "%.*s", (int)(n < 31 ? n : 31), v + 1);
    }
    free(text);
    if (got != o->steps || !(rss > 0))
        return cli_error(CLI_RUNTIME, "bench step: torch %s on %d ranks printed %d step times of %d: %s", peer_name[peer],
                         ranks, got, o->steps, last_line(err, line, sizeof line));
    if (isnan(f->rss) || rss > f->rss) f->rss = rss;
    return CLI_OK;
}

/* ------------------------------------------------------------------ the GEMM rate */

/* dec_gemm_rate with `threads` OpenMP threads (OpenBLAS's OpenMP build follows the team size). */
static int gemm_rate(ctx *c, int threads, double *out) {
#ifdef _OPENMP
    const int keep = omp_get_max_threads();
    omp_set_num_threads(threads);
#endif
    zero_status st = dec_gemm_rate(&c->cfg, c->o->micro_batch, c->o->seq, c->o->gemm_s,
                                   strcmp(c->o->precision, "bf16") ? ZERO_DTYPE_FP32 : ZERO_DTYPE_BF16, out);
#ifdef _OPENMP
    omp_set_num_threads(keep);
#endif
    if (st) return cli_error(CLI_RUNTIME, "bench step: the GEMM rate of %s at %d x %d: %s", c->o->model,
                             c->o->micro_batch, c->o->seq, zero_status_string(st));
    return CLI_OK;
}

/* ------------------------------------------------------------------ report */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *x, int n) {
    if (n <= 0) return NAN;
    qsort(x, (size_t)n, sizeof *x, cmp_double);
    return n % 2 ? x[n / 2] : 0.5 * (x[n / 2 - 1] + x[n / 2]);
}

static void summarize(figures *f) {
    f->med = median(f->ms, f->n);
    f->lo = f->n ? f->ms[0] : NAN;
    f->hi = f->n ? f->ms[f->n - 1] : NAN;
}

static void jnum(const char *key, double v) {
    printf(", \"%s\": ", key);
    cli_json_double(stdout, v);
}

static void jbool(const char *key, int v) { /* -1: not measured */
    printf(", \"%s\": %s", key, v < 0 ? "null" : v ? "true" : "false");
}

/* A ratio for the table: "-" when not measured. */
static const char *fmt_ratio(double v, char *buf, size_t cap) {
    if (isfinite(v)) snprintf(buf, cap, "%.3f", v);
    else snprintf(buf, cap, "-");
    return buf;
}

typedef struct row_eval {
    double x_s0, mfu, x_1t, ms_ratio[PEER_COUNT], rss_ratio[PEER_COUNT];
    int stage_ok, torch_ok, mfu_ok, thread_ok; /* 1 met, 0 missed, -1 not measured or no target */
} row_eval;

/* s0: stage 0's figures at these ranks and threads (or NULL); one: the same row at 1 thread when
 * this one ran 2 (or NULL); peers: PEER_COUNT figures (or NULL); flops: the model FLOPs a rank
 * computes per step; rate: the GEMM rate at these threads (NAN: not measured). */
static row_eval evaluate(const figures *f, int ranks, int stage, const figures *s0, const figures *one,
                         const figures peers[PEER_COUNT], double flops, double rate) {
    row_eval r;
    r.x_s0 = s0 && s0->n ? f->med / s0->med : NAN;
    r.stage_ok = stage == 0 || !isfinite(r.x_s0) ? -1 : r.x_s0 <= stage_target[stage];
    r.mfu = f->n ? flops / (f->med * 1e-3) / rate : NAN;
    r.mfu_ok = isfinite(r.mfu) ? r.mfu >= MFU_TARGET : -1;
    r.x_1t = one && one->n && f->n ? one->med / f->med : NAN;
    r.thread_ok = isfinite(r.x_1t) ? r.x_1t >= THREAD_TARGET : -1;
    r.torch_ok = -1;
    for (int p = 0; p < PEER_COUNT; p++) {
        r.ms_ratio[p] = peers && peers[p].n ? f->med / peers[p].med : NAN;
        r.rss_ratio[p] = peers && peers[p].n ? f->rss / peers[p].rss : NAN;
        if (!counterpart(p, stage, ranks) || !isfinite(r.ms_ratio[p])) continue;
        const int ok = r.ms_ratio[p] <= TORCH_TARGET && r.rss_ratio[p] < 1;
        r.torch_ok = r.torch_ok < 0 ? ok : (r.torch_ok && ok);
    }
    return r;
}

/* The fields of a row that zero's runs and the peers' share: the setup, the step times, the peak RSS. */
static void json_times(const step_opts *o, int ranks, const figures *f) {
    printf(", \"precision\": \"%s\", \"micro_batch\": %d, \"seq\": %d, \"steps\": %d, \"warmup\": %d, \"repeats\": %d, \"samples\": %d",
           o->precision, o->micro_batch, o->seq, o->steps, o->warmup, o->repeat, f->n);
    jnum("step_ms", f->med);
    jnum("step_ms_min", f->lo);
    jnum("step_ms_max", f->hi);
    jnum("tokens_per_s", (double)ranks * o->micro_batch * o->seq * 1e3 / f->med);
    jnum("rss_peak", f->rss);
}

static void print_json_row(const ctx *c, int ranks, int threads, int stage, const figures *f, const row_eval *r,
                           const figures peers[PEER_COUNT], double flops, double rate, double load0, double load1) {
    const step_opts *o = c->o;
    printf("{\"run\": \"zero\", \"ranks\": %d, \"threads\": %d, \"stage\": %d, \"model\": \"%s\"", ranks, threads, stage,
           o->model);
    jnum("params", f->params);
    json_times(o, ranks, f);
    jnum("model_states", f->states);
    jnum("stage0_model_states", f->stage0);
    jnum("mem_total", f->total);
    jnum("comm_wait_ms", f->n ? f->wait_sum / f->n : NAN);
    jnum("step_flops", flops);
    jnum("gemm_flops", rate);
    jnum("mfu", r->mfu);
    jnum("mfu_target", MFU_TARGET);
    jbool("meets_mfu_target", r->mfu_ok);
    jnum("thread_speedup", r->x_1t);
    jnum("thread_target", THREAD_TARGET);
    jbool("meets_thread_target", r->thread_ok);
    jnum("stage_ratio", r->x_s0);
    jnum("stage_target", stage_target[stage]);
    jbool("meets_stage_target", r->stage_ok);
    for (int p = 0; p < PEER_COUNT; p++) {
        char k[32];
        snprintf(k, sizeof k, "torch_%s_ms", peer_name[p]);
        jnum(k, peers && peers[p].n ? peers[p].med : NAN);
        snprintf(k, sizeof k, "torch_%s_rss", peer_name[p]);
        jnum(k, peers && peers[p].n ? peers[p].rss : NAN);
        snprintf(k, sizeof k, "ratio_%s_ms", peer_name[p]);
        jnum(k, r->ms_ratio[p]);
        snprintf(k, sizeof k, "ratio_%s_rss", peer_name[p]);
        jnum(k, r->rss_ratio[p]);
    }
    jnum("torch_target", TORCH_TARGET);
    jbool("meets_torch_target", r->torch_ok);
    jnum("load_before", load0);
    jnum("load_after", load1);
    printf("}\n");
}

static void print_json_peer(const ctx *c, int ranks, int threads, int p, const figures *f, double flops, double rate) {
    const step_opts *o = c->o;
    printf("{\"run\": \"torch_%s\", \"ranks\": %d, \"threads\": %d, \"torch\": \"%s\"", peer_name[p], ranks, threads,
           c->torch_version);
    jnum("params", c->torch_params);
    json_times(o, ranks, f);
    jnum("mfu", f->n ? flops / (f->med * 1e-3) / rate : NAN);
    printf("}\n");
}

static void print_table_row(const step_opts *o, int ranks, int threads, const char *name, const figures *f,
                            const row_eval *r, double mfu) {
    char b[12][16];
    printf("%5d %3d  %-11s %9.1f %9.1f %9.1f %8.0f %8.1f", ranks, threads, name, f->med, f->lo, f->hi,
           (double)ranks * o->micro_batch * o->seq * 1e3 / f->med, f->rss / MIB);
    if (!r) {
        printf(" %9s %7s %6s %5s\n", "", "", "", fmt_ratio(mfu, b[0], 16));
        return;
    }
    printf(" %9.1f %7.1f %6s %5s %5s", f->states / MIB, f->n ? f->wait_sum / f->n : 0.0, fmt_ratio(r->x_s0, b[0], 16),
           fmt_ratio(r->mfu, b[1], 16), fmt_ratio(r->x_1t, b[2], 16));
    for (int p = 0; p < PEER_COUNT; p++)
        printf(" %7s %7s", fmt_ratio(r->ms_ratio[p], b[3 + 2 * p], 16), fmt_ratio(r->rss_ratio[p], b[4 + 2 * p], 16));
    printf("  %s %s %s %s\n", r->stage_ok < 0 ? "stage:-   " : r->stage_ok ? "stage:ok  " : "stage:MISS",
           r->mfu_ok < 0 ? "mfu:-   " : r->mfu_ok ? "mfu:ok  " : "mfu:MISS", r->thread_ok < 0 ? "thr:-   " : r->thread_ok ? "thr:ok  " : "thr:MISS",
           r->torch_ok < 0 ? "torch:-" : r->torch_ok ? "torch:ok" : "torch:MISS");
}

/* ------------------------------------------------------------------ driver */

static int bench(ctx *c) {
    const step_opts *o = c->o;
    const int nr = o->nranks, ns = o->nstages, nt = o->nthreads;
    const int per = o->steps * o->repeat;
    const size_t nours = (size_t)nt * nr * ns, npeer = (size_t)nt * nr * PEER_COUNT;
    figures *ours = calloc(nours, sizeof *ours);
    figures *peers = calloc(npeer, sizeof *peers);
    double *pool = calloc((nours + npeer) * per, sizeof *pool);
    double *rates = calloc((size_t)nt * nr * o->repeat, sizeof *rates); /* per (threads, ranks, repeat) */
    double *rate = calloc((size_t)nt * nr, sizeof *rate);
    int rc = CLI_RUNTIME;
    if (!ours || !peers || !pool || !rates || !rate) {
        rc = cli_error(CLI_RUNTIME, "bench step: out of memory");
        goto done;
    }
    for (size_t i = 0; i < nours; i++) ours[i].ms = pool + i * per, ours[i].rss = NAN;
    for (size_t i = 0; i < npeer; i++) peers[i].ms = pool + (nours + i) * per, peers[i].rss = NAN;
#define OURS(t, i, j) (&ours[((size_t)(t) * nr + (i)) * ns + (j)])
#define PEERS(t, i) (&peers[((size_t)(t) * nr + (i)) * PEER_COUNT])
    const double flops = dec_step_flops(&c->cfg, o->micro_batch, o->seq);

    cli_bench_blas_core_warning();
    const double load0 = load_average();
    int npeers_run = 0;
    for (int i = 0; i < nr; i++)
        for (int p = 0; p < PEER_COUNT; p++) npeers_run += c->have_torch && peer_runs(p, o->ranks[i]);
    const int runs = o->repeat * nt * (nr * ns + npeers_run);
    int run = 0;
    for (int rep = 0; rep < o->repeat; rep++) {
        for (int t = 0; t < nt; t++) {
            for (int i = 0; i < nr; i++) {
                const int R = o->ranks[i], th = threads_of(o->threads[t], R);
                double *rr = &rates[((size_t)t * nr + i) * o->repeat + rep];
                *rr = NAN;
                if (o->gemm_s > 0) {
                    /* the same thread count as another rank count's: measured once a repeat */
                    for (int i2 = 0; i2 < i && isnan(*rr); i2++)
                        if (threads_of(o->threads[t], o->ranks[i2]) == th) *rr = rates[((size_t)t * nr + i2) * o->repeat + rep];
                    if (isnan(*rr) && (rc = gemm_rate(c, th, rr)) != CLI_OK) goto done;
                }
                for (int j = 0; j < ns + PEER_COUNT; j++) {
                    const int is_torch = j >= ns, p = j - ns;
                    if (is_torch && (!c->have_torch || !peer_runs(p, R))) continue;
                    figures *f = is_torch ? &PEERS(t, i)[p] : OURS(t, i, j);
                    const int before = f->n;
                    const double t0 = zero_now();
                    rc = is_torch ? run_torch(c, R, p, th, f) : run_ours(c, R, o->stages[j], o->threads[t], f);
                    if (rc != CLI_OK) goto done;
                    double last = median(f->ms + before, f->n - before);
                    char what[32];
                    if (is_torch) snprintf(what, sizeof what, "torch %s", peer_name[p]);
                    else snprintf(what, sizeof what, "stage %d", o->stages[j]);
                    fprintf(stderr, "bench step: [%d/%d] %d rank%s x %d thread%s, %-11s %8.1f ms/step (median of %d), "
                            "run %.0f s, load %.2f\n", ++run, runs, R, R > 1 ? "s" : " ", th, th > 1 ? "s" : " ", what,
                            last, f->n - before, zero_now() - t0, load_average());
                }
            }
        }
    }
    const double load1 = load_average();
    for (size_t i = 0; i < nours; i++) summarize(&ours[i]);
    for (size_t i = 0; i < npeer; i++) summarize(&peers[i]);
    for (int k = 0; k < nt * nr; k++) rate[k] = o->gemm_s > 0 ? median(&rates[(size_t)k * o->repeat], o->repeat) : NAN;

    if (!o->json) {
        printf("zero bench step: model %s (%.0f params), %s AdamW, micro-batch %d per rank, seq %d; %d steps a run, "
               "first %d dropped, %d repeat%s; load average %.2f before, %.2f after\n",
               o->model, ours[0].params, o->precision, o->micro_batch, o->seq, o->steps, o->warmup, o->repeat,
               o->repeat > 1 ? "s" : "",
               load0, load1);
        printf("model FLOPs per rank and step %.4g; GEMM rate on the model's products:", flops);
        for (int t = 0; t < nt; t++)
            for (int i = 0; i < nr; i++)
                printf(" %d x %d threads %.1f GFLOP/s%s", o->ranks[i], threads_of(o->threads[t], o->ranks[i]),
                       rate[t * nr + i] * 1e-9, t == nt - 1 && i == nr - 1 ? "\n" : ";");
        if (c->have_torch)
            printf("peer: PyTorch %s (%s): plain on 1 rank; DDP, DDP + ZeroRedundancyOptimizer, FSDP2 on more (gloo, CPU); "
                   "%.0f params\n", c->torch_version, c->script, c->torch_params);
        else
            printf("peer: none (%s)\n", !o->torch ? "--no-torch" : torch_unsupported(&c->cfg) ? torch_unsupported(&c->cfg)
                                        : c->script[0] ? "torch does not import" : "bench/torch_step.py not found");
        printf("step_ms: rank 0's median (min, max) over the timed steps; rss: largest per-rank peak; ratios: ours / "
               "theirs (< 1: faster, smaller)\n");
        printf("%5s %3s  %-11s %9s %9s %9s %8s %8s %9s %7s %6s %5s %5s", "ranks", "thr", "run", "step_ms", "min_ms",
               "max_ms", "tok/s", "rss_MiB", "state_MiB", "wait_ms", "x_s0", "mfu", "x_1t");
        for (int p = 0; p < PEER_COUNT; p++) printf(" ms/%-4s rss/%-4s", peer_name[p], peer_name[p]);
        printf("  targets\n");
    }
    int met = 0, total = 0;
    for (int t = 0; t < nt; t++) {
        for (int i = 0; i < nr; i++) {
            const int R = o->ranks[i], th = threads_of(o->threads[t], R);
            const double rt = rate[t * nr + i];
            int one_t = -1; /* the 1-thread entry of the list, when this row runs 2 */
            for (int t2 = 0; t2 < nt && th == 2; t2++)
                if (threads_of(o->threads[t2], R) == 1) one_t = t2;
            const figures *pp = c->have_torch ? PEERS(t, i) : NULL;
            for (int j = 0; j < ns; j++) {
                const figures *s0 = NULL;
                for (int j2 = 0; j2 < ns; j2++)
                    if (o->stages[j2] == 0) s0 = OURS(t, i, j2);
                const figures *f = OURS(t, i, j), *one = one_t >= 0 ? OURS(one_t, i, j) : NULL;
                row_eval r = evaluate(f, R, o->stages[j], s0, one, pp, flops, rt);
                met += (r.stage_ok == 1) + (r.torch_ok == 1) + (r.mfu_ok == 1) + (r.thread_ok == 1);
                total += (r.stage_ok >= 0) + (r.torch_ok >= 0) + (r.mfu_ok >= 0) + (r.thread_ok >= 0);
                if (o->json) {
                    print_json_row(c, R, th, o->stages[j], f, &r, pp, flops, rt, load0, load1);
                } else {
                    char name[16];
                    snprintf(name, sizeof name, "stage %d", o->stages[j]);
                    print_table_row(o, R, th, name, f, &r, NAN);
                }
            }
            for (int p = 0; pp && p < PEER_COUNT; p++) {
                if (!peer_runs(p, R)) continue;
                if (o->json) {
                    print_json_peer(c, R, th, p, &pp[p], flops, rt);
                } else {
                    char name[16];
                    snprintf(name, sizeof name, "torch %s", peer_name[p]);
                    print_table_row(o, R, th, name, &pp[p], NULL, pp[p].n ? flops / (pp[p].med * 1e-3) / rt : NAN);
                }
            }
        }
    }
#undef OURS
#undef PEERS
    if (!o->json) printf("targets met: %d of %d\n", met, total);
    fflush(stdout);
    rc = CLI_OK;
done:
    free(ours);
    free(peers);
    free(pool);
    free(rates);
    free(rate);
    return rc;
}

/* Removes the scratch directory's files and the directory itself. */
static void remove_dir(const char *dir) {
    char p[PATH_MAX + 16];
    for (size_t i = 0; i < NSCRATCH; i++) {
        snprintf(p, sizeof p, "%s/%s", dir, scratch_names[i]);
        unlink(p);
    }
    rmdir(dir);
}

int cli_bench_step(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CLI_OK;
        }
    }
    step_opts o;
    if (parse(argc, argv, &o)) return CLI_USAGE;
    ctx *c = calloc(1, sizeof *c);
    if (!c) return cli_error(CLI_RUNTIME, "bench step: out of memory");
    c->o = &o;
    dec_config_preset(&c->cfg, o.model, NULL);
    ssize_t n = readlink("/proc/self/exe", c->self, sizeof c->self - 1);
    if (n <= 0) {
        free(c);
        return cli_error(CLI_RUNTIME, "bench step: cannot find this program's path: %s", strerror(errno));
    }
    c->self[n] = 0;
    const char *tmp = getenv("TMPDIR");
    snprintf(c->dir, sizeof c->dir, "%s/zero_bench_step_XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(c->dir)) {
        int e = errno;
        free(c);
        return cli_error(CLI_RUNTIME, "bench step: cannot create a scratch directory under %s: %s",
                         tmp && *tmp ? tmp : "/tmp", strerror(e));
    }
    snprintf(scratch_dir, sizeof scratch_dir, "%s", c->dir);
    struct sigaction sa, old_int, old_term;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int);
    sigaction(SIGTERM, &sa, &old_term);
    const char *py = getenv("ZERO_PYTHON");
    if (py && *py) snprintf(c->py, sizeof c->py, "%s", py);
    else if (!which("python3", c->py, sizeof c->py)) snprintf(c->py, sizeof c->py, "/usr/bin/python3");
    const char *why = torch_unsupported(&c->cfg);
    c->have_torch = o.torch && !why && find_script(c) && torch_importable(c->py);
    if (o.torch && why) fprintf(stderr, "bench step: the PyTorch peer does not model %s: no PyTorch figures\n", why);
    else if (o.torch && o.torch_script && !c->have_torch)
        fprintf(stderr, "bench step: %s cannot import torch: no PyTorch figures\n", c->py);
    int rc = bench(c);
    sigaction(SIGINT, &old_int, NULL);
    sigaction(SIGTERM, &old_term, NULL);
    remove_dir(c->dir);
    scratch_dir[0] = 0;
    free(c);
    return rc;
}
