/* cli/cli.h — the `zero` command's subcommands and shared helpers for parsing and errors.
 * The CLI uses only the public API (include/zero/); these helpers are the CLI's own. */
#ifndef ZERO_CLI_H
#define ZERO_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "zero/zero.h"

/* Exit statuses of the command-line contract (DESIGN.md). */
enum { CLI_OK = 0, CLI_RUNTIME = 1, CLI_USAGE = 2 };

/* Subcommands: argv[0] is the subcommand name. Each returns an exit status. */
int cli_train(int argc, char **argv);
int cli_sample(int argc, char **argv);
int cli_estimate(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_export(int argc, char **argv);
int cli_inspect(int argc, char **argv);
int cli_tokenize(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_plot(int argc, char **argv);
int cli_bench_comm(int argc, char **argv);
int cli_bench_adam(int argc, char **argv);
int cli_bench_step(int argc, char **argv);
int cli_bench_io(int argc, char **argv);
int cli_bench_rates(int argc, char **argv);
/* NVMe offload's pool (4 buffers of 1 MiB, io_uring, O_DIRECT) writing then reading a file of
 * `bytes` in dir, best of 3: GB/s each way. Prints the error and returns its status on failure. */
int cli_bench_io_pool_rates(const char *dir, double bytes, double *read_gbps, double *write_gbps);
int cli_bench_tokenize(int argc, char **argv);

/* The MPI launcher the build found (CMake sets it). */
#ifndef ZERO_MPIEXEC
#define ZERO_MPIEXEC "mpiexec"
#endif

/* The whole command line, saved by main. */
extern int cli_argc;
extern char **cli_argv;
/* `--ranks N` outside an MPI launcher: runs `mpiexec -np N zero ...` (the same command line
 * without `--ranks N`) and returns the job's exit status (cli/launch.c). More than 8 ranks per
 * CPU of this process's affinity is a usage error unless the command line has --oversubscribe
 * (which every command that takes --ranks accepts and ignores otherwise). */
int cli_launch_ranks(int nranks);
/* One run of a job under mpiexec (cli/launch.c), the pieces cli_launch_ranks and the elastic
 * launcher share. */
typedef struct cli_job {
    int np;               /* ranks */
    const char *hostfile; /* mpiexec's --hostfile (ranks fill its hosts in order), or NULL: this machine */
    char **args;          /* the ranks' command line after the program, NULL-terminated */
    const char *what;     /* the flag that launched it, for messages ("--ranks 4") */
} cli_job;
typedef struct cli_job_end {
    int status;      /* mpiexec's wait status */
    int reported;    /* a rank's monitor reported its failure */
    int stop_signal; /* the signal that stopped the launcher (forwarded to the job), else 0 */
} cli_job_end;
/* Runs the job to its end: CLI_OK with `end` filled, or the status of the error it printed
 * (mpiexec could not start). */
int cli_job_run(const cli_job *j, cli_job_end *end);
/* The launcher's exit status for a job that ended (a rank's own 0/1/2; a failure mpiexec alone
 * saw is named in one line). */
int cli_job_status(const cli_job *j, const cli_job_end *end);
/* After a stop signal: says where the last checkpoint is and dies of the signal. */
void cli_job_stopped(int sig) __attribute__((noreturn));
/* This command line's words after the program for the ranks: without the launcher's flags
 * (--ranks, --hostfile, --elastic, --max-restarts with their values, --oversubscribe) nor the
 * flags in `drop` (each with its value), and with `extra` appended (both NULL-terminated or NULL).
 * malloc'd (the strings are argv's or extra's); NULL when out of memory. */
char **cli_rank_args(const char *const *drop, const char *const *extra);
/* `zero train --hostfile FILE` and/or `--elastic MIN:MAX` outside an MPI launcher
 * (cli/launch_elastic.c): runs the job on the file's hosts (or `ranks` local ranks without one)
 * and, with --elastic, restarts it from the latest checkpoint in `save` on the hosts that still
 * answer after a failure, at most max_restarts times. Returns the job's exit status. */
typedef struct cli_host cli_host;
typedef struct cli_elastic_opts {
    const char *hostfile; /* NULL: this machine, `ranks` ranks */
    const cli_host *hosts; /* the hostfile's hosts (cli_hostfile_read), nhosts of them */
    int nhosts;
    int ranks;
    int elastic;          /* --elastic given */
    int min_hosts, max_hosts;
    int max_restarts;
    const char *save;     /* --save DIR */
} cli_elastic_opts;
int cli_launch_elastic(const cli_elastic_opts *o);
/* Reads a hostfile in OpenMPI's form ("name [slots=N] [max_slots=N]" a line, # comments):
 * names and slots (1 where not given), malloc'd; returns how many, or -1 after printing the
 * error (CLI_USAGE: `flag` names where the path came from). */
struct cli_host {
    char name[256];
    int slots;
};
int cli_hostfile_read(const char *flag, const char *path, cli_host **out);
/* Set by cli_launch_ranks for its ranks: "1" when the user's stdout (stderr) is a terminal, else
 * "0" (a rank's own stdout is mpiexec's pseudo-terminal or pipe, whatever the user's is). */
#define CLI_TTY_ENV_OUT "ZERO_STDOUT_TTY"
#define CLI_TTY_ENV_ERR "ZERO_STDERR_TTY"
/* Called first in main: in a rank started by cli_launch_ranks, splits off the monitor that names
 * the rank if it dies (returns in the rank; the monitor never returns). Elsewhere a no-op. */
void cli_rank_monitor(void);

/* The scratch directory of a --ranks job (cli/launch_scratch.c): OpenMPI's session directory and
 * shared-memory segments go in it, and it goes when no process of the job runs any more. */
typedef struct cli_job_scratch {
    char dir[4096]; /* "" when there is none */
    int lock_fd;    /* the launcher's shared lock; -1 once released */
} cli_job_scratch;
/* Creates a new, locked job directory; -1 (and dir "") when it cannot. */
int cli_job_scratch_create(cli_job_scratch *j);
/* Releases the launcher's lock and removes the directory once no process holds the lock, waiting
 * up to wait_ms for that; 1 when it is gone (or there was none), 0 when left for the next sweep. */
int cli_job_scratch_remove(cli_job_scratch *j, int wait_ms);
/* In a rank's monitor: holds the lock of the job directory dir for as long as it (and the rank)
 * runs. */
void cli_job_scratch_join(const char *dir);
/* Removes the job directories of this user that no running process holds (their launcher was
 * killed outright); returns how many. */
int cli_job_scratch_sweep(void);
/* In every process that may own scratch files (each rank, a single-process run): SIGTERM, SIGINT
 * and SIGHUP (unless ignored, as under nohup) first remove them (zero_scratch_remove_all), then
 * end the process by the same signal as before. */
void cli_remove_scratch_on_stop(void);

/* Prints "zero: error: <msg>" (one line) to stderr and returns `code`. Silent while
 * cli_quiet_errors is set (ranks other than 0 repeating rank 0's deterministic errors). */
extern int cli_quiet_errors;
/* Library warnings and notes are dropped while set (ranks other than 0 of `zero train`, and its
 * first pass over the checks that every rank repeats), so that a warning prints once per job. */
extern int cli_quiet_warnings;
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Where texts a (ours) and b (recorded) first differ, for a refusal that names both: "line N: 'A...'
 * here, 'B...' in the record" (each line cut at 40 bytes), or "... ends at line N ..." when one is a
 * prefix of the other. */
void cli_first_difference(const char *a, const char *b, char *out, size_t cap);
/* "zero: note: ..." on stderr for what zero_ckpt_open chose on the user's behalf (a newer step
 * than `latest` names), unless warnings are quiet; nothing when it chose nothing. */
void cli_ckpt_note(const zero_ckpt *c);
/* In a command with peers (world > 1): a peer that dies closes its sockets, and a write to one
 * would kill this rank by SIGPIPE, so the launcher (ours or a user's mpirun) could name this rank's
 * signal instead of the peer's death. Ignored, the write fails and the collective returns its
 * error. A no-op for one rank. */
void cli_ignore_sigpipe(int world);
/* An output that would overwrite an input (or another output) is refused before anything runs.
 * cli_same_path: 1 when a and b name the same file — the same inode when both exist, the same
 * canonical directory and name when neither does (two outputs not written yet).
 * cli_path_under: where path (existing or about to be written) lies in or under the existing
 * directory dir, its part below dir ("" for dir itself) in rest, returned; NULL elsewhere. */
int cli_same_path(const char *a, const char *b);
const char *cli_path_under(const char *path, const char *dir, char *rest, size_t cap);
/* 1 when path is the file `in` names, or lies in or under the directory `in`. */
int cli_path_within(const char *path, const char *in);
/* Where the OpenBLAS core in use leaves AVX-512 unused (an AVX2 core named in $OPENBLAS_CORETYPE
 * on an AVX-512 CPU): "OpenBLAS runs AVX2 kernels on this AVX-512 CPU (OPENBLAS_CORETYPE=X); its
 * AVX-512 ones (Y) are faster" (a static buffer); NULL otherwise. zero --version --verbose prints
 * it as a note; the GEMM benchmarks (bench step, bench rates), whose rates are those of the core
 * in use, as one warning line on stderr (cli_bench_blas_core_warning). */
const char *cli_blas_core_note(void);
void cli_bench_blas_core_warning(void);
/* After a step every rank of `comm` took (loading, initializing), with `failed` this rank's
 * outcome: CLI_OK when no rank failed; otherwise the first failing rank prints `msg` (what =
 * the step's name, in the message of a failed agreement) and every rank returns CLI_RUNTIME, so
 * that no rank trains on while another stops. */
int cli_ranks_agree(zero_comm *comm, int failed, const char *what, const char *msg);

/* Parsers: on a bad value they print a one-line error naming the flag, the value and what was
 * expected, and return -1 (the caller returns CLI_USAGE). */
int cli_parse_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_int(const char *flag, const char *v, int lo, int hi, int *out);
int cli_parse_double(const char *flag, const char *v, double lo, double hi, double *out);
/* Sizes with units: 24GiB, 512MiB, 1.5GB, 7e9, 1.5B (billions), 350M (millions), 4K. */
int cli_parse_size(const char *flag, const char *v, double *out);
/* The value after a flag: argv[*i + 1], advancing *i; error when missing. */
const char *cli_flag_value(int argc, char **argv, int *i);

/* Writes a double as JSON (finite: %.17g; NaN/Inf as null). */
/* s as a JSON string: quotes and backslashes escaped, control bytes as \\u00XX. */
void cli_json_string(FILE *f, const char *s);
void cli_json_double(FILE *f, double v);

/* `zero estimate` and `zero plan` (cli/cmd_estimate.c): the flags both take and the planner's
 * description of the model they name. */
/* The device a command's engine runs on (--device / $ZERO_DEVICE, --device-memory /
 * $ZERO_DEVICE_MEMORY: the flag wins), as resolved by cli_device_resolve (cli/train_device.c). */
typedef struct cli_device {
    char backend[16];       /* "cpu", "fake" or "cuda": one this build has */
    const char *source;     /* "--device" or "ZERO_DEVICE" (NULL: the default, cpu) */
    uint64_t capacity;      /* device bytes given; 0: the backend's own */
    const char *mem_source; /* "--device-memory" or "ZERO_DEVICE_MEMORY" (NULL: not given) */
    const char *mem_text;   /* the size as given, for messages */
} cli_device;
/* flag_device / flag_memory: the flags' values or NULL. An unknown backend (the line lists the
 * built ones), a known one this build lacks (cuda) and a malformed size are each one line:
 * returns CLI_USAGE after printing it, else CLI_OK. */
int cli_device_resolve(const char *flag_device, const char *flag_memory, cli_device *out);

typedef struct cli_sizing_opts {
    const char *model;                  /* --model NAME|DIR or the DIR argument: a preset or a model directory */
    double params;                      /* --params N (0: not given) */
    int layers, dim, heads, seq, vocab; /* shape overrides (0: not given) */
    int ranks, nodes;                   /* --ranks (required), --nodes (1) */
    zero_dtype precision;               /* --precision (fp32) */
    zero_optim_type optimizer;          /* --optimizer (adamw) */
    int64_t micro_batch;                /* --micro-batch (0: the command's default) */
    int json;                           /* --json */
    const char *lora;                   /* --lora SPEC (zero estimate: the base frozen, adapters trained) */
    zero_dtype frozen_dtype;            /* --frozen-dtype (ZERO_DTYPE_COUNT: the precision) */
    int deterministic;                  /* --deterministic: the exact accumulators in the transient */
    int optim_states;                   /* --optimizer-states: ZERO_OPTIM_STATES_FP32 or _INT8 */
    int quant_base;                     /* --quantize-base: ZERO_QFMT_NONE, _NF4_DQ or _INT8 (needs --lora) */
    int quant_embed;                    /* --quantize-embeddings: the embeddings and LM head in that format too */
    int gpus;                           /* --gpus N: the ranks are N GPUs (0: not given) */
    double device_mem;                  /* --gpu-memory / --device-mem: per GPU (0: not given, CPU-only) */
    double host_mem;                    /* --host-mem: host RAM per node (-1: not given) */
    int objective;                      /* --objective: DEC_OBJ_LM (0), DEC_OBJ_DPO or DEC_OBJ_ORPO (zero train's) */
} cli_sizing_opts;

typedef struct cli_sizing_model {
    char name[512];          /* the preset, the directory, "custom" (shape flags) or "params" (--params) */
    int layers, dim, heads, n_ctx, vocab; /* the shape; layers 0 when unknown */
    int from_dir;            /* the model is a Hugging Face directory (name) */
    int has_weights;         /* ... with its weights (model.safetensors or the index) */
    struct dec_config *cfg;  /* the configuration when the shape is known (malloc'd) */
    int seq;                 /* T of a micro-batch (activations) */
    int orpo;                /* --objective orpo: a micro-batch of B sequences computes 3B/2 */
    uint64_t params;
    int num_units;
    uint64_t *unit_numel;    /* malloc'd (cli_sizing_model_free) */
    uint64_t *unit_frozen;   /* --lora: each unit's frozen base (malloc'd), else NULL; with --quantize-base
                              * its frozen part's elements as the engine lays it out (zero_quant_place) */
    uint64_t frozen_params;  /* --lora: the base's parameters */
    uint64_t trainable;      /* --lora: the adapters' parameters (params counts base + adapters) */
    int lora_r;              /* --lora: r, alpha, the scaling rule and targets as given */
    double lora_alpha;
    int lora_rslora;
    char lora_targets[256];
    zero_plan_bwd_piece *bwd; /* with a shape: room for the backward's L + 2 pieces (malloc'd;
                               * cli_sizing_compute fills them) */
    zero_plan_model plan;    /* points into this struct: do not copy it after building */
} cli_sizing_model;

void cli_sizing_opts_default(cli_sizing_opts *o);
/* Takes argv[*i] when it is one of the shared flags (advancing *i past its value): returns 1,
 * 0 when it is not one of them, -1 after printing the error for a bad value. */
int cli_sizing_flag(cli_sizing_opts *o, int argc, char **argv, int *i);
/* --gpus N: the ranks (it must agree with --ranks when both are given) and a GPU machine (it needs
 * --gpu-memory). Returns CLI_OK or the exit status of the error it printed. */
int cli_sizing_resolve(cli_sizing_opts *o);
/* Checks the shared flags and builds the model; returns CLI_OK or the exit status of the error
 * it printed. */
int cli_sizing_model_build(const cli_sizing_opts *o, cli_sizing_model *out);
void cli_sizing_model_free(cli_sizing_model *m);
/* "1.50 GiB", "512.00 MiB", "12 B": binary units, for humans (JSON carries exact bytes). */
const char *cli_fmt_bytes(double bytes, char *buf, size_t cap);

/* The step time of `zero plan` and `zero estimate` (cli/plan_time.c; docs/PLANNING.md §9). */
typedef struct cli_time_opts {
    const char *rates; /* --rates FILE|cpu|gpu; NULL: the cached file (cli_rates_default_path), else defaults */
    double link_gbps;  /* --link-gbps (0: not given) */
} cli_time_opts;

typedef struct cli_rates {
    zero_plan_rates r;
    int gpu;                   /* the rates are a GPU machine's */
    char source[4096];         /* the file they came from; "" for the defaults */
    char measured_at[48];
    int ranks_per_node, nodes; /* of the run that measured them (0: unknown) */
    int from_file;             /* how many rates the file set */
    double link_measured_gbps; /* the file's link rate (0: none) */
    char link_from[16];        /* "--link-gbps", "measured" or "default" */
    char compute_from[16];     /* the file's key that set compute_flops ("model_gflops", "gemm_gflops"), "" */
} cli_rates;

/* Takes --rates and --link-gbps like cli_sizing_flag. */
int cli_time_flag(cli_time_opts *t, int argc, char **argv, int *i);
/* Where `zero bench rates` stores and plan/estimate look for the rates: $ZERO_RATES, else
 * $XDG_CACHE_HOME/zero/rates.json, else $HOME/.cache/zero/rates.json. 0 when none can be named. */
int cli_rates_default_path(char *buf, size_t cap);
/* The rates for a plan: --rates cpu|gpu (defaults), --rates FILE, the cached file when it exists,
 * else the defaults of a GPU (gpu 1) or CPU-only machine; --link-gbps over the file's link rate. */
int cli_rates_resolve(const cli_time_opts *t, int gpu, cli_rates *out);
/* The human line saying which rates are used (and that they are defaults when they are), with notes. */
void cli_rates_note(FILE *f, const cli_rates *r, int nodes, int ranks_per_node, int gpu_asked);
void cli_rates_json(FILE *f, const cli_rates *r);
/* The model's FLOPs per token from its shape (or 2 per parameter for a bare --params model). */
void cli_sizing_compute(const cli_sizing_opts *o, const cli_sizing_model *m, zero_plan_compute *out);
const char *cli_fmt_seconds(double s, char *buf, size_t cap);
void cli_json_time(FILE *f, const zero_plan_time *t);
/* "compute 1.20 s + ... = 2.10 s" */
void cli_print_time(FILE *f, const zero_plan_time *t);

#endif
