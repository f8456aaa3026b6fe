/* cli/memcheck.h — the memory a command's model would take, reckoned before anything is
 * allocated (`zero train`, `zero sample`): the planner's per-rank figure and this machine's RAM. */
#ifndef ZERO_CLI_MEMCHECK_H
#define ZERO_CLI_MEMCHECK_H

#include <stdint.h>

#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "zero/zero.h"

/* One rank's bytes, as zero_plan_estimate and dec_activation_bytes count them. */
typedef struct cli_mem_need {
    double states;    /* model states: device + host (one RAM on a CPU machine) */
    double transient; /* the engine's transient buffers (buckets, gathered units) */
    double act;       /* activations of a micro-batch, LoRA's scratch included, as the run keeps them */
    double act_ckpt;  /* the same with activation checkpointing */
} cli_mem_need;

/* This machine's RAM in bytes: the physical pages, or the container's limit (cgroup v2
 * memory.max) when lower; 0 when unknown. Total, not free: a run that cannot fit an idle machine
 * is refused, one that only crowds it is not. */
double cli_machine_ram(void);

/* The bytes one rank of an engine with configuration cfg (resolved for `world` ranks) takes for
 * model m, with LoRA adapters on a frozen base when lora is not NULL, running micro-batches of
 * B sequences of T tokens (ckpt: activation checkpointing, which act reports; act_ckpt is always
 * the checkpointed figure). Returns 0, or -1 when the planner refuses the setup (the engine will
 * say why when it is built) or a few bytes of scratch cannot be had. */
int cli_mem_need_of(const dec_config *m, const dec_lora *lora, const zero_config *cfg, int world, int64_t B, int T,
                    int ckpt, cli_mem_need *out);

/* One device rank's bytes (zero_plan_estimate on a device rank: what the device holds). */
typedef struct cli_device_need {
    double device;    /* model states on the device */
    double host;      /* on the host (pinned: offloaded states, pools, a host optimizer's gradients) */
    double transient; /* the transient buffers, on the device */
    double act;       /* activations of a micro-batch as the run keeps them */
    int largest_unit; /* the unit of most elements */
    uint64_t largest_numel;
    double largest_bytes; /* its elements in the working dtype: what a gathered copy takes */
} cli_device_need;

/* As cli_mem_need_of, on a device rank. Returns 0, or -1 as cli_mem_need_of does. */
int cli_device_need_of(const dec_config *m, const dec_lora *lora, const zero_config *cfg, int world, int64_t B, int T,
                       int ckpt, cli_device_need *out);

#endif
