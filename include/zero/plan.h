/* zero/plan.h — the planner: per-rank bytes of every stage and offload, traffic and time per step,
 * and the search for the fastest setup that fits given hardware. Pure formulas, no allocation.
 *
 * The model-state figures are the engine's own accounting (zero_engine_mem_stats), written as
 * formulas. With N ranks, every unit u of numel_u elements is padded to P_u, the smallest multiple
 * of N*align (align in elements, 16 by default: the engine's 64 align_bytes / 4); P = sum of P_u,
 * S = P/N; w = bytes of the working dtype (fp32 4, bf16/fp16 2); k = optimizer state floats per
 * parameter (zero_optim_state_count: Adam/AdamW 2, SGD with momentum 1, Lion 1):
 *
 *            stage 0     stage 1     stage 2     stage 3
 *   params   P*w         P*w         P*w         S*w
 *   grads    P*w         P*w         S*w         S*w
 *   master   P*4         S*4         S*4         S*4      (0 in fp32 training: params are the master)
 *   optim    P*4*k       S*4*k       S*4*k       S*4*k
 * hpZ (stage 3, zero_hpz_partition_size H with 1 < H < N) adds the secondary shard to params:
 * (S + P/H)*w.
 *
 * With frozen parameters (zero_plan_model.unit_frozen) the table applies to the trainable parts
 * and params adds the frozen parts: Pf*wf at stages 0-2, Sf*wf at stage 3 (wf: the frozen dtype).
 *
 * Transient `buffers` (reported apart): an upper bound that puts the largest distinct units in
 * every role at once. With U1 >= U2 >= U3 the three largest padded units (0 when absent):
 *     U1*4 + 64 KiB           when w != 4: the fp32 view of the unit in use, the step's chunk
 *   + (U1 + U2)*w             stage 3: the gathered unit and the prefetched one
 *   + (U1 + U2)*4             when w != 4 or stage >= 2: the fp32 gradient buffers of the unit in
 *                             backward and of one held open across backward (a tied embedding's)
 *   + stage >= 2, reductions in flight (two, and the one being started):
 *       w != 4:  (U1 + U2 + U3)*w + (U1 + U2)/N*w     sends of three, receives of two
 *       w == 4:  (U1 + U2)*4 + (U1 + U2 + U3)/N*4     sends of two (the fp32 buffer), receives of three
 * docs/PLANNING.md derives these, places them (device, host, NVMe) and compares with DeepSpeed.
 *
 *   zero_plan_model m = {nunits, numels, act_fn, act_ctx};
 *   zero_plan_setup s;  zero_plan_setup_default(&s);  s.ranks = 64; s.stage = 3; ...
 *   zero_plan_mem mem;  zero_plan_estimate(&m, &s, &mem, &err);
 *   zero_plan_request r; zero_plan_request_default(&r); r.device_mem = 24 * 2^30; ...
 *   zero_plan_result res; zero_plan_search(&m, &r, &res, &err);   // res.chosen, or res.closest
 *   zero_plan_rates rt;  zero_plan_rates_default(&rt, 0);           // or measured rates
 *   zero_plan_compute c = {fwd_flops_per_token, recompute_flops_per_token, seq_len};
 *   zero_plan_time t;    zero_plan_step_time(&m, &c, &s, nodes, micro_batch, ckpt, &rt, &t, &err);
 *
 * The step's time (zero_plan_step_time) adds compute from the model's FLOPs per token, the bytes
 * of every collective on the in-node and cross-node bandwidths, the update and the offload I/O, at
 * a machine's rates (zero_plan_rates); the search then picks the fastest rung that fits.
 */
#ifndef ZERO_PLAN_H
#define ZERO_PLAN_H

#include "zero/common.h"
#include "zero/config.h"
#include "zero/optim.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The engine's default partition alignment in elements (align_bytes 64 over fp32 elements). */
#define ZERO_PLAN_DEFAULT_ALIGN 16

/* Activation bytes one rank holds for one micro-batch of `micro_batch` sequences, with
 * activation checkpointing on (1) or off (0). Supplied by the model (the planner knows no model). */
typedef uint64_t (*zero_plan_activation_fn)(void *ctx, int64_t micro_batch, int checkpointing);

/* A model as the planner sees it: its units in registration order. */
typedef struct zero_plan_model {
    int num_units;
    const uint64_t *unit_numel;        /* num_units element counts (each >= 1) */
    zero_plan_activation_fn activation; /* NULL: activations unknown, counted as 0 */
    void *activation_ctx;
    /* Frozen elements of each unit (ZERO_PARAM_FROZEN: part of unit_numel, <= it), or NULL for
     * none. Each unit's trainable part (numel - frozen) and frozen part are padded on their own;
     * the frozen part has no gradient, master or optimizer state: per rank its padded size Pf
     * whole at stages 0-2, Pf/N at stage 3, in the frozen dtype (docs/PLANNING.md, LoRA). A
     * quantized base's part counts its records as zero_engine_unit_info's `frozen` does (their
     * bytes / the frozen dtype's size, placed by zero_quant_place), and unit_numel is then the
     * trainable elements plus that count. */
    const uint64_t *unit_frozen;
} zero_plan_model;

/* One piece of the backward, in the order the model runs it: its FLOPs per token (and those it
 * redoes under activation checkpointing), after which unit ready_unit's gradient is complete and
 * its reduction is posted (-1: none). Only the shares of the pieces' FLOPs matter: the step time
 * spreads the backward's and the recomputation's time over them in proportion. */
typedef struct zero_plan_bwd_piece {
    double flops_per_token;
    double recompute_flops_per_token;
    int ready_unit;
} zero_plan_bwd_piece;

/* The model's compute, for the step time (apart from zero_plan_model, whose positional
 * initializers stay valid). All 0: compute unknown, left out of the time. */
typedef struct zero_plan_compute {
    double fwd_flops_per_token;       /* forward FLOPs per token: matrix products + attention */
    double recompute_flops_per_token; /* forward FLOPs redone per token in backward under
                                       * activation checkpointing */
    int64_t seq_len;                  /* tokens per sequence (a micro-batch of B holds B*seq_len) */
    /* Preference objectives (docs/PLANNING.md §9): forward passes without a backward each
     * micro-batch makes besides its forward and backward (DPO and ORPO's log-likelihood pass: 1;
     * 0: plain training), each computing, and at stage 3 gathering, as a forward does; and the
     * sequences computed per sequence of the micro-batch (ORPO's chosen sequences go twice: 1.5;
     * 0 means 1). */
    double fwd_only_passes;
    double seq_factor;
    /* The backward's order (NULL / 0: unknown; then no reduction is hidden behind it). A unit
     * no piece names is taken as ready at the backward's end. */
    const zero_plan_bwd_piece *bwd;
    int bwd_pieces;
    /* Weights of a quantized base (zero train --quantize-base) that one pass over the model
     * decodes: every rank computes the whole model, so each decodes them all in the forward, again
     * in the backward (the input's gradient), in each forward-only pass, and in the recompute under
     * activation checkpointing. 0: none. */
    double dequant_per_pass;
} zero_plan_compute;

/* One configuration to estimate. */
typedef struct zero_plan_setup {
    int ranks;                       /* N >= 1 */
    int stage;                       /* 0..3 */
    zero_dtype precision;            /* working dtype: fp32, bf16 or fp16 */
    zero_optim_type optimizer;
    float momentum;                  /* SGD only: 0 means no momentum buffer */
    uint64_t align;                  /* partition alignment in elements, >= 1 */
    zero_offload_device offload_optimizer; /* master + optimizer states: device, cpu or nvme */
    zero_offload_device offload_param;     /* stage 3 only: the parameter shard */
    int optimizer_buffer_count;      /* NVMe optimizer swap: buffers of aio_block_size bytes */
    int64_t aio_block_size;          /* bytes */
    int param_buffer_count;          /* NVMe parameter swap: buffers of the largest unit's shard */
    int64_t param_buffer_size;       /* elements: the config's (not used by the formulas: the engine's
                                      * buffers hold the largest shard, and refuse a smaller size given) */
    zero_dtype frozen_dtype;         /* the frozen parameters' dtype; ZERO_DTYPE_COUNT: the precision */
    int hpz_partition_size;          /* ZeRO++ hpZ (stage 3): groups of H consecutive ranks, each
                                      * keeping a secondary shard of P/H elements; 1 off (default),
                                      * H = ranks changes nothing; H must divide the ranks */
    int deterministic;               /* zero_extensions.deterministic: the grids join the gradients and
                                      * the fixed-point sums the transient (docs/ENGINE.md §11); no
                                      * frozen parts */
    int64_t quant_weights_block;     /* ZeRO++ qwZ (zero_config.quant_weights): 0 off; else at stage 3
                                      * the all-gathers of the parameters (not hpZ's group gathers) send
                                      * int8 messages (zero_quant_msg_bytes of each shard, blocks of
                                      * this many elements), held while in flight (transient); below
                                      * stage 3 (nothing gathered) it changes nothing */
    int64_t quant_grads_block;       /* ZeRO++ qgZ (zero_config.quant_grads): 0 off; else at stages 2-3
                                      * the reduce-scatters' cross-node steps carry int8 messages of
                                      * blocks of this many elements (the node step stays exact: on
                                      * one node it changes nothing); below stage 2 nothing */
    int quant_base;                  /* the frozen parts hold a quantized base's records (zero_config.
                                      * quant_base): qwZ sends them as stored */
    int optim_states;                /* ZERO_OPTIM_STATES_FP32 or _INT8 (zero/config.h): 8-bit moments
                                      * for units of at least optim_states_min trainable elements,
                                      * 2 bytes an element and 8 per block of 256; the alignment is
                                      * then at least 256 (as the engine's) */
    int64_t optim_states_min;
    int on_device;                   /* 1: each rank computes on a device (a GPU): the states not
                                      * offloaded are device memory, "cpu" offload is pinned host
                                      * memory, so is the gradient a host optimizer reads (the
                                      * ownership plan), the NVMe pools are pinned, and parameters
                                      * kept on the host are copied to the device to be used
                                      * (transient); 0: a CPU rank, every state in RAM (device 0) */
} zero_plan_setup;

/* 1 rank, stage 0, fp32, AdamW, align 16, no offload, DeepSpeed's pool defaults (optimizer: 4
 * buffers of the 1 MiB aio block; parameters: 5 buffers of 1e8 elements), hpZ off (1), a device
 * rank (on_device 1: the planner sizes GPU machines). */
void zero_plan_setup_default(zero_plan_setup *s);
/* The setup that a resolved config describes for `world` ranks (stage, precision, optimizer,
 * align_bytes / 4, offloads, pools) — what zero_engine_create would build from cfg — on CPU
 * ranks (on_device 0); a caller sizing a device run sets on_device. */
void zero_plan_setup_from_config(zero_plan_setup *s, const zero_config *cfg, int world);

/* Per-rank bytes of one setup. bytes[] is indexed by zero_mem_category, like zero_mem_stats:
 * params, grads, master, optim are the model states; buffers is the transient; comm is 0. */
typedef struct zero_plan_mem {
    uint64_t numel;              /* sum of numel_u: the model's parameter count */
    uint64_t padded;             /* P (of the trainable parts when some parameters are frozen) */
    uint64_t shard;              /* S = P / N */
    uint64_t frozen;             /* frozen elements (0 without unit_frozen) */
    uint64_t frozen_padded;      /* Pf: the frozen parts padded; Pf / N per rank at stage 3 */
    uint64_t largest_unit;       /* U1: the largest padded unit */
    uint64_t second_unit;        /* U2: the second largest (0 with one unit) */
    uint64_t third_unit;         /* U3: the third largest (0 with fewer than three units) */
    int state_count;             /* k */
    uint64_t optim_q8;           /* of the update's elements (the padded P at stage 0, the shard S at
                                  * stages 1-3), those whose states are 8-bit (optim_states int8) */
    uint64_t secondary;          /* hpZ: the secondary shard P/H (elements; 0 when off or H = N),
                                  * counted in bytes[ZERO_MEM_PARAMS] and kept on the device */
    uint64_t bytes[ZERO_MEM_COUNT];
    uint64_t model_states;       /* params + grads + master + optim */
    uint64_t transient;          /* == bytes[ZERO_MEM_BUFFERS] */
    uint64_t accumulator;        /* deterministic mode: its transient bytes (in transient): a seen
                                  * byte and an int64 mass per grid block of 32 elements (9 B, B =
                                  * sum of ceil(padded/32)),
                                  * half precision the int32 sums, 4 P where gradients are kept whole
                                  * (stages 0-1, one rank), else 4 S, and 4 min(U1, 2^18); fp32 kept
                                  * whole 4 (U1 + U2) (the buffers handed to the model); 4104 (N + 1).
                                  * The grids, B bytes, are in bytes[ZERO_MEM_GRADS] */
    uint64_t pool;               /* host I/O buffers of NVMe offload (counted in `host`) */
    /* Where the model states live: on a device rank (on_device) device memory, host memory and
     * NVMe; on a CPU rank device is 0 and host is all of it. device excludes the transient. */
    uint64_t device, host, nvme;
    /* Of host, the page-locked part (device ranks only; 0 on a CPU rank): the states offloaded to
     * "cpu", the NVMe pools and grad_staging. */
    uint64_t pinned;
    /* Of pinned: the gradients (bytes[ZERO_MEM_GRADS]) where the update runs on the host
     * (offload_optimizer "cpu" or "nvme" on a device rank, ZeRO-Offload): the rank accumulates
     * them there for the host optimizer, the device holds only the units' in backward. */
    uint64_t grad_staging;
    /* Beside host (pinned too; zero_plan_fit adds it to the host's need): a device rank's staging
     * buffers (docs/DEVICE.md, "Overlap"), an upper bound: the two 1 MiB upload buffers where the
     * host updates a working copy kept on the device, and the host-staged device collectives'
     * staging: the blocking ones 2 (C + C/N), C = min(4 MiB, the largest unit's bytes G1); the
     * non-blocking ones in flight: where units are gathered (stage 3, or parameters on the host)
     * the prefetch of one unit G1 (1 + 1/N), and with N > 1 where gradients are sharded three
     * reduce-scatters (U1 + U2 + U3) w (1 + 1/N). Apart from host so
     * that host stays the states' figure (a device with a collective library of its own stages
     * nothing). 0 on a CPU rank. */
    uint64_t staging;
    /* NULL when the engine runs this setup; else why it refuses it, one phrase (a static string),
     * such as "hpZ with frozen parameters is not supported yet": the ownership plan's own rule, so
     * the planner never proposes what zero train would refuse. The figures are still filled (what
     * the setup would take). */
    const char *unsupported;
} zero_plan_mem;

/* Fills *out for setup s. ZERO_ERR_INVALID_ARG (err says which value and what was expected)
 * for no units, a zero-sized unit, ranks < 1, a stage outside 0..3, a non-float precision,
 * align 0, offload_param without stage 3, hpz_partition_size < 1, or > 1 without stage 3, not
 * dividing the ranks or with parameters on nvme, or sizes that overflow 64 bits;
 * ZERO_ERR_UNSUPPORTED for deterministic with frozen parameters. err may be NULL. */
zero_status zero_plan_estimate(const zero_plan_model *m, const zero_plan_setup *s,
                               zero_plan_mem *out, zero_error *err);

/* Communication volume of one optimizer step (one micro-batch) per rank, in bytes of the working
 * dtype over Ψ = P padded elements. */
typedef struct zero_plan_traffic {
    double volume;  /* the ZeRO paper's figure: 2Ψw (stages 0-2), 3Ψw (stage 3); 0 with one rank */
    double sent;    /* what one rank sends in the ring algorithms: (N-1)/N * 2Ψw or 3Ψw */
    double counted; /* comm.h's sent+received rule (zero_comm_counters): 2 * sent */
} zero_plan_traffic;

void zero_plan_traffic_of(int stage, int ranks, uint64_t padded, zero_dtype precision,
                          zero_plan_traffic *out);
/* The same with frozen parameters: the trainable parts (`padded`, in the precision) are reduced
 * as above; the frozen parts (frozen_padded, in frozen_dtype) take part in no reduction and are
 * all-gathered only at stage 3, twice per micro-batch (forward and backward). */
void zero_plan_traffic_frozen(int stage, int ranks, uint64_t padded, zero_dtype precision, uint64_t frozen_padded,
                              zero_dtype frozen_dtype, zero_plan_traffic *out);
/* Under qwZ (stage 3, quant_weights_block B > 0): t (zero_plan_traffic_frozen's of the same
 * arguments) with the forward's and backward's all-gathers as int8 messages, 1 + 4/B bytes an
 * element instead of the dtype's (the frozen parts' too unless quant_base: records go as stored;
 * the messages' padding to 16 bytes left out). Nothing changes below stage 3 or on one rank. */
void zero_plan_traffic_qwz(int stage, int ranks, uint64_t padded, zero_dtype precision, uint64_t frozen_padded,
                           zero_dtype frozen_dtype, int64_t quant_weights_block, int quant_base, zero_plan_traffic *t);
/* Under qgZ (stages 2-3, quant_grads_block B > 0): t with the reduce-scatter as the comm layer
 * counts zero_comm_ireduce_scatter_q8, int8 messages of 1 + 4/B bytes an element instead of the
 * dtype's (padding left out). Nothing changes below stage 2 or on one rank. */
void zero_plan_traffic_qgz(int stage, int ranks, uint64_t padded, zero_dtype precision, int64_t quant_grads_block,
                           zero_plan_traffic *t);
/* Seconds `sent` bytes take on a link of link_gbps gigabits per second (0 when link_gbps <= 0). */
double zero_plan_link_seconds(const zero_plan_traffic *t, double link_gbps);
/* The counted traffic (t->counted's rule) of one optimizer step of grad_accum micro-batches, as the
 * ownership plan schedules it: gradients kept whole are reduced once a step (stages 0-1: counted
 * once); sharded gradients are reduce-scattered every micro-batch and the parameters all-gathered
 * once (stage 2: (K+1)/2 times counted); sharded parameters are gathered, and the gradients
 * reduced, every micro-batch (stage 3: K times). *psi (may be NULL): the ZeRO rule's multiple of
 * Ψ a micro-batch moves, 2 or 3, for messages. */
double zero_plan_traffic_per_step(int stage, int ranks, int grad_accum, const zero_plan_traffic *t, int *psi);

/* ------------------------------------------------------------------ the step's time */
/* The rates of the machine a plan is for, in units per second (docs/PLANNING.md §9: what each is,
 * how `zero bench rates` measures it, the defaults). Per rank unless said otherwise; a rate a
 * setup does not use may be 0. */
typedef struct zero_plan_rates {
    double compute_flops;       /* FLOP/s at which one rank runs the model's FLOPs, every rank computing */
    double mem_bytes;           /* bytes/s (read + written) one rank streams in device memory */
    double host_mem_bytes;      /* the same in host memory: the optimizer of cpu/nvme offload */
    double node_all_reduce;     /* in-node bus bandwidth (busbw, bytes/s) of each collective */
    double node_reduce_scatter; /*   among the ranks of one node (docs/COMM.md's busbw) */
    double node_all_gather;
    double link_bytes;          /* each node's network link, bytes/s each way (nodes > 1) */
    double latency;             /* seconds per step of a collective across nodes */
    double host_link_bytes;     /* one rank's device<->host copies, bytes/s (cpu offload) */
    double disk_read_bytes;     /* one node's drive, bytes/s, shared by the node's ranks */
    double disk_write_bytes;
    double overlap;             /* fraction of the communication time hidden behind compute, [0, 1] */
    /* Each collective's own rate across nodes (bytes/s each way on a node's link, as that
     * collective reaches it: MPI's algorithms differ); 0: link_bytes for that collective. */
    double link_all_reduce;
    double link_reduce_scatter;
    double link_all_gather;
    /* The share of its cross-node rate a posted all-reduce / reduce-scatter keeps while the rank
     * computes the model's kernels (the engine's progress calls between them), [0, 1]; 0: it
     * moves only in the wait. The step time drains the backward's reductions at this share while
     * the backward computes (docs/PLANNING.md §9). */
    double progress_all_reduce;
    double progress_reduce_scatter;
    /* The same for a posted all-gather: stage 3's prefetched gathers across nodes move at this
     * share while the unit before computes (zero train posts them non-blocking across nodes:
     * docs/COMM.md, "Non-blocking calls across nodes"); 0: fully exposed. */
    double progress_all_gather;
    /* Kernels whose cost is not their bytes at mem_bytes (0: left out of the time, as where the
     * engine has no such kernel: a GPU's): elements per second one rank steps with 8-bit optimizer
     * states (decode, the fp32 step, code again: zero_optim_step_q8), and weights of a quantized
     * base it decodes into the products' operands (NF4 with double-quantized scales: a tile at a
     * time, docs/QUANT.md). */
    double q8_update_elems;
    double dequant_elems;
} zero_plan_rates;

/* Documented defaults (docs/PLANNING.md §9) for a CPU-only machine (gpu 0: a rank is a set of
 * cores, the device memory is the host's) or a GPU machine (gpu 1). link_bytes: 10 Gbit/s. */
void zero_plan_rates_default(zero_plan_rates *r, int gpu);

/* One step's predicted time (seconds) and what it is made of. One micro-batch per step
 * (gradient_accumulation_steps 1, what `zero plan` writes). */
typedef struct zero_plan_time {
    double compute;      /* forward + backward: 3 forwards' FLOPs of micro_batch * seq_len tokens
                          * (3 - f with a share f of the parameters frozen: no weight gradient) */
    double recompute;    /* the forward redone under activation checkpointing */
    double comm_node;    /* the in-node part of the step's collectives */
    double comm_cross;   /* the part across nodes: link time + latency */
    double comm_hidden;  /* of comm_node + comm_cross, what runs behind compute: comm_hidden_backward,
                          * and `overlap` of the rest */
    double optimizer;    /* the update, memory-bound (with nvme offload: pipelined with its I/O); 8-bit
                          * states' elements at rates.q8_update_elems when that is given */
    double host_copy;    /* cpu offload: device<->host copies */
    double disk;         /* nvme offload: I/O not hidden behind compute or the update */
    double total;        /* the step: compute + recompute + comm - hidden + optimizer + host_copy + disk
                          * + dequant */
    double cross_bytes;  /* bytes each node's link carries each way per step */
    double node_bytes;   /* bytes a rank moves through the in-node collectives per step (ring rule, sent) */
    double disk_read, disk_written; /* bytes per rank per step (nvme offload) */
    double dequant;      /* decoding a quantized base's weights (compute.dequant_per_pass) in every
                          * pass over the model, and under qwZ coding and decoding the gathers'
                          * messages (a unit's elements each world gather), at rates.dequant_elems
                          * (0 when that is 0) */
    int collectives;     /* collectives per step (every unit's; stage 3 with frozen parts: their two
                          * gathers are counted in the bytes, not here) */
    double comm_hidden_backward; /* of comm_cross, the reductions' part that drains while the
                                  * backward computes (stages 0-2, the backward's order known) */
    double comm_hidden_gathers;  /* of comm_cross, stage 3's prefetched gathers' part that moves while
                                  * the unit before computes (the backward's order known) */
} zero_plan_time;

/* Predicts the step of setup s for model m of compute c (NULL: unknown) on `nodes` machines (ranks
 * a multiple of nodes) at micro_batch sequences per rank, activation checkpointing on or off, at
 * rates r (docs/PLANNING.md §9 has the formulas). ZERO_ERR_INVALID_ARG (err says which value) for
 * what zero_plan_estimate refuses, negative or non-finite FLOPs, FLOPs without a sequence length,
 * nodes that do not divide ranks, micro_batch < 1, a negative or non-finite rate, overlap or a
 * progress share outside [0, 1], backward pieces with negative or non-finite FLOPs, a unit out of
 * range or named twice, or a rate of 0 that the setup needs (compute_flops with FLOPs given, mem_bytes, in-node
 * bandwidth with several ranks per node, link_bytes with several nodes, host_link_bytes with cpu
 * offload, disk rates with nvme offload). err may be NULL. */
zero_status zero_plan_step_time(const zero_plan_model *m, const zero_plan_compute *c,
                                const zero_plan_setup *s, int nodes, int64_t micro_batch,
                                int checkpointing, const zero_plan_rates *r, zero_plan_time *out,
                                zero_error *err);

/* ------------------------------------------------------------------ the search */
/* The hardware and the choices left to the planner. Sizes are bytes. */
typedef struct zero_plan_request {
    zero_plan_setup base;     /* ranks, precision, optimizer, align, pools; stage/offload/hpZ ignored */
    int nodes;                /* machines; ranks must be a multiple of nodes */
    double device_mem;        /* per rank; 0: a CPU-only machine (a rank's memory is its share of host_mem) */
    double host_mem;          /* per node */
    double nvme_mem;          /* per node; 0: no NVMe offload */
    double headroom;          /* fraction of each memory kept free, in [0, 1) (default 0.1) */
    int64_t max_micro_batch;  /* largest micro-batch to consider (default 8) */
    zero_plan_compute compute; /* the model's FLOPs (default: all 0, compute left out) */
    zero_plan_rates rates;    /* for the step times (default: zero_plan_rates_default(gpu 0)) */
} zero_plan_request;

void zero_plan_request_default(zero_plan_request *r);

/* The ladder, in DeepSpeed's order (its advice: speed falls and memory savings grow down it):
 * 0; 1; 2; 2 + optimizer on cpu; 3; 3 + hpZ; 3 + optimizer on cpu; 3 + optimizer and params on
 * cpu; 2 + optimizer on nvme; 3 + optimizer on nvme; 3 + optimizer and params on nvme.
 * cpu rungs are left out on a CPU-only machine (they would move nothing), nvme rungs without
 * nvme_mem, 3 + hpZ (H = the ranks per node) on one node or with one rank per node, and any rung
 * the engine refuses for the model (zero_plan_mem.unsupported: listed in zero_plan_result.skipped). */
#define ZERO_PLAN_MAX_CANDIDATES 11

typedef struct zero_plan_candidate {
    int stage;
    int hpz_partition_size;   /* 1, or the ranks per node (the 3 + hpZ rung) */
    zero_offload_device offload_optimizer, offload_param;
    zero_plan_mem mem;
    int fits;                 /* 1: fits at micro_batch / checkpointing below */
    int64_t micro_batch;      /* fits: the largest in 1..max that fits; else 1 */
    int checkpointing;        /* fits: 0 when micro-batch 1 fits without it; else 1 */
    uint64_t activation;      /* bytes per rank at that micro-batch and checkpointing */
    double need_device;       /* per rank: device states + transient + activation (CPU-only: + host) */
    double need_host;         /* per node (CPU-only: 0, all of it is in need_device) */
    double need_nvme;         /* per node */
    double missing_device, missing_host, missing_nvme; /* shortfalls against the usable sizes */
    /* The time model: the step at micro_batch / checkpointing above (for a rung that does not fit:
     * at micro-batch 1 with checkpointing, for information). */
    zero_plan_time time;
    double step_seconds;      /* == time.total */
    double sample_seconds;    /* step_seconds / micro_batch: what the choice compares */
    /* Both ways of running the rung: [0] without activation checkpointing, [1] with it: the
     * largest micro-batch that fits (0: none does) and its step seconds. */
    int64_t variant_micro_batch[2];
    double variant_seconds[2];
} zero_plan_candidate;

typedef struct zero_plan_result {
    int count;                /* rungs evaluated, in ladder order */
    zero_plan_candidate cand[ZERO_PLAN_MAX_CANDIDATES];
    int chosen;               /* the fastest rung that fits (per sample), -1 when none does */
    int closest;              /* the rung missing the fewest bytes in all (== chosen when one fits) */
    double usable_device;     /* per rank: (1 - headroom) * device_mem, or the rank's RAM share */
    double usable_host;       /* per node (0 on a CPU-only machine: host is the device) */
    double usable_nvme;       /* per node */
    int ranks_per_node;
    /* Rungs of the ladder left out because the engine does not run them with this model
     * (zero_plan_mem.unsupported: hpZ or NVMe parameters with frozen parameters), in ladder order,
     * each with its reason. */
    int skipped_count;
    struct {
        int stage, hpz_partition_size;
        zero_offload_device offload_optimizer, offload_param;
        const char *why;
    } skipped[ZERO_PLAN_MAX_CANDIDATES];
    int optim_states;         /* the candidates' optimizer states: the request's, or ZERO_OPTIM_STATES_INT8
                               * when none fits with fp32 states and one does with 8-bit ones (AdamW or
                               * Adam on a CPU-only machine, where the engine steps them; the NVMe rungs
                               * left out) */
} zero_plan_result;

/* The need of one setup's bytes `mem` with `activation` bytes of activations on the request's
 * hardware (r->device_mem 0: a CPU-only machine, where the host bytes join the rank's need),
 * into c->need_* and c->missing_* (c's other fields are left as they are), the usable sizes
 * into *usable (may be NULL); returns 1 when nothing is missing: the search's fitting rule. */
typedef struct zero_plan_usable {
    double device; /* per rank */
    double host;   /* per node (0 on a CPU-only machine) */
    double nvme;   /* per node */
    int ranks_per_node;
} zero_plan_usable;
int zero_plan_fit(const zero_plan_request *r, const zero_plan_mem *mem, uint64_t activation,
                  zero_plan_candidate *c, zero_plan_usable *usable);

/* Evaluates every rung. Fitting means: per rank, model states on the device + transient +
 * activation <= usable_device; per node, ranks_per_node * host bytes <= usable_host and
 * ranks_per_node * NVMe bytes <= usable_nvme. A rung that fits at micro-batch 1 with activation
 * checkpointing fits. Each way of running it (checkpointing off, on) takes the largest micro-batch
 * up to max_micro_batch that fits; the rung runs the way with the fewer predicted seconds per
 * sequence (checkpointing off on a tie, and when the model gives no activation figure). The chosen
 * rung is the fitting one with the fewest seconds per sequence (the earlier rung on a tie).
 * Without the model's FLOPs (compute.fwd_flops_per_token 0) the times lack the compute and do not
 * choose: the first rung that fits wins, checkpointing on only where micro-batch 1 needs it. */
zero_status zero_plan_search(const zero_plan_model *m, const zero_plan_request *r,
                             zero_plan_result *out, zero_error *err);

/* "none", "cpu", "nvme" */
const char *zero_plan_offload_name(zero_offload_device d);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_PLAN_H */
