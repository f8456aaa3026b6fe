/* cli/run_ux.h — how `zero train` explains itself: the checks made before any work (files named
 * on the command line, output paths, memory), the resolved configuration and its no-op keys, the
 * global batch of a resume, the progress line or bar, and the closing warnings (docs/CLI.md). */
#ifndef ZERO_CLI_RUN_UX_H
#define ZERO_CLI_RUN_UX_H

#include <stdint.h>
#include <stdio.h>

struct train_opts;

typedef struct train_ux {
    int64_t print_every;   /* --print-every N (0: not given) */
    int64_t resume_global; /* --resume: the checkpoint's global batch (0: none recorded) */
    char batch_note[512];  /* how a resume kept or changed the global batch ("" when it did not apply) */
    char run_note[1024];   /* what a resume changed from the checkpoint's run ("" when nothing) */
    /* the progress of train_run (rank 0) */
    FILE *out;
    int tty, bar_drawn;
    int64_t period, first_step, steps_run, skipped;
    double t_start;
} train_ux;

/* What the progress line of one step shows. */
typedef struct ux_step {
    int64_t step; /* 1-based */
    double loss, val, lr, grad_norm, loss_scale, step_s, tokens_per_s, io_wait_ms;
    int skipped, has_val, has_io;
    int64_t mem_bytes; /* accounted bytes per rank (largest rank) */
} ux_step;

/* --print-every N: returns 1 when argv[*i] is it (advancing *i), 0 when not, -1 after an error. */
int ux_flag(struct train_opts *o, int argc, char **argv, int *i);
/* A file or directory the command line names as input (--config, --resume, --data, --init-from)
 * that does not exist: a usage error (exit 2) before anything else. */
int ux_check_inputs(const struct train_opts *o);
/* --save, --log-json, --trace and the NVMe offload directories of the config (flags applied):
 * each one's directory exists and is writable; an offload directory must exist. Nothing is
 * created. Returns an exit status. */
int ux_check_outputs(const struct train_opts *o);
/* The per-rank memory the run would need (the planner's figure: model states, transient buffers,
 * activations), times the ranks of this machine, against its RAM: a usage error with the figure
 * and a hint when it cannot fit. Needs the resolved config (world > 0). */
int ux_check_memory(const struct train_opts *o, int world);
/* --resume with the batch left to its defaults: the checkpoint's global batch is kept on `world`
 * ranks (micro-batch and accumulation chosen for it) when it divides; otherwise, or when flags
 * change it, batch_note says that the data order changes. Needs the resolved config. */
void ux_resume_batch(struct train_opts *o, int world);
/* Rank 0 at start: the resolved configuration (what each "auto" became, zero's defaults that differ
 * from DeepSpeed's) on `out`, and one warning on stderr naming the config keys that change nothing. */
void ux_print_start(const struct train_opts *o, FILE *out, int world);

/* The progress line (period: --print-every, else the config's steps_per_print, else 1; the last
 * step and validation steps always) as plain lines, and a bar under them when `out` is a terminal. */
void ux_progress_begin(struct train_opts *o, FILE *out, int64_t first_step);
void ux_progress_step(struct train_opts *o, const ux_step *s);
/* Before another line is printed on `out` while the bar is drawn. */
void ux_progress_clear(struct train_opts *o);
/* After the last step: clears the bar; warns when a static fp16 loss scale skipped most steps. */
void ux_progress_end(struct train_opts *o);

#endif
