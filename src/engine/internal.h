/* Private state of the ZeRO engine, shared by its files: registration (engine.c), the control
 * channel that turns divergence into errors (control.c), gather/release and stage-3 prefetch
 * (gather.c), gradient reduction (reduce.c), the optimizer step (step.c), checkpoints (save.c)
 * and NVMe offload (offload.c: files, layout, tile passes; offload_param.c: stage-3 read-ahead). */
#ifndef ZERO_ENGINE_INTERNAL_H
#define ZERO_ENGINE_INTERNAL_H

#include "common/internal.h"
#include "zero/engine.h"
#include "zero/offload.h"
#include "zero/optim.h"
#include "zero/partition.h"
#include "zero/quant.h"
#include "partition/own.h"

/* One registered parameter: a [offset, offset+numel) range of its unit's view, and [soff, soff +
 * numel) of the unit's part it belongs to: the trainable part, or (ZERO_PARAM_FROZEN) the frozen
 * part. */
typedef struct eparam {
    char *name;
    int unit;
    uint64_t offset, numel;
    int ndim;
    int64_t shape[8];
    unsigned flags;
    uint64_t soff;
    /* a frozen parameter of a quantized base (ZERO_PARAM_QUANTIZE under zero_config.quant_base): its
     * record's format and its elements of the frozen part (frozen-dtype slots of raw record bytes:
     * zero_quant_place); ZERO_QFMT_NONE and numel otherwise */
    zero_qformat qfmt;
    uint64_t slots;
} eparam;

static inline int zero__frozen(const eparam *p) { return (p->flags & ZERO_PARAM_FROZEN) != 0; }
static inline int zero__quantized(const eparam *p) { return p->qfmt != ZERO_QFMT_NONE; }

/* ------------------------------------------------------------ the ownership table (owner.c)
 * The ownership plan (src/partition/own.h) of the engine's setup says what a rank keeps of each
 * kind of per-unit state and where it lives. Every other file reads the table's predicates and the
 * per-unit views below; none asks "which stage?" (docs/ENGINE.md, "The ownership table"). */
typedef zero__own_row eown;
typedef zero__own_plan etable;

/* One owned slice of one parameter: unit elements [lo, hi) inside the rank's update range, the
 * parameter's index and its ZERO_PARAM_* flags. The step runs the optimizer slice by slice. */
typedef struct eslice {
    uint64_t lo, hi;
    int param;
    unsigned flags;
} eslice;

/* A unit's owned views, computed once at finalize (owner.c) from the table and the partition.
 * Ranges are in unit elements; each pointer addresses the element at the start of its range, and
 * is NULL where the array is not in RAM (NVMe: the tile passes of offload.c reach it). */
typedef struct eview {
    uint64_t lo, hi;   /* the update range: master, optimizer states, owned gradient
                        * ([0, numel) when the update is whole, else [offset, offset + valid)) */
    uint64_t slo, shi; /* the rank's partition slice [offset, offset + valid) (inside [lo, hi)):
                        * what it saves and what its part of the norm sums */
    float *master;     /* fp32 master at lo (fp32 training: the working parameters' slice) */
    float *state[2];   /* optimizer states at lo (NULL when they are 8-bit: q8) */
    zero_q8_state q8;  /* 8-bit optimizer states at lo (eunit.q8on), else all NULL */
    void *work;        /* working dtype at lo: the step's write-back target; NULL in fp32 (the
                        * master is the working copy) or when the parameters are on NVMe */
    void *grad;        /* working-dtype owned gradient at lo (after the reduction) */
    void *wp;          /* persistent working parameters, at element wlo; NULL on NVMe */
    uint64_t wlo, whi; /* [0, numel) when kept whole, else the partition slice */
    void *gwhole;      /* the whole persistent gradient (grads kept whole), else NULL */
    uint64_t gelems;   /* persistent gradient elements (padded or shard): cleared each step */
    eslice *slices;    /* the owned parameter slices, in order, covering [lo, hi) */
    int nslices;
    void *fp;          /* persistent frozen parameters (frozen dtype), at frozen-part element flo */
    uint64_t flo, fhi; /* [0, fnumel) when kept whole, else the frozen part's partition slice */
} eview;

/* One unit: in the model's view one flat fp32 buffer of vnumel elements (its parameters in
 * registration order). Inside, two parts each partitioned on its own: the trainable part (numel,
 * padded, shard, offset, valid: its parameters back to back, padded to a multiple of
 * world*align, this rank owning [offset, offset+shard)) — which is all that gradients, masters,
 * optimizer states, reductions, the step, the offload tiles and checkpoints see, in its own
 * coordinates — and the frozen part (f*: the ZERO_PARAM_FROZEN parameters back to back, in the
 * frozen dtype). Without frozen parameters the trainable part is the view. Buffers marked (T)
 * are transient and charged to "buffers". */
typedef struct eunit {
    char *name;
    uint64_t numel, padded, shard, offset, valid;      /* the trainable part */
    uint64_t vnumel;                                   /* the view: numel + fnumel */
    uint64_t fnumel, fpadded, fshard, foffset, fvalid; /* the frozen part */
    int nquant;                                        /* its quantized parameters (records) */
    int first_param, nparams;

    /* persistent allocations, sized by the table (read them through `v`) */
    void *params;   /* working dtype: padded (whole) or shard */
    void *grads;    /* working dtype: padded (whole) or shard */
    float *master;  /* fp32 master when it is not the working copy: padded (whole) or shard */
    float *s0, *s1; /* optimizer states: padded (whole) or shard */
    int q8on;       /* the states are 8-bit (zero_config.optim_states, the unit at least optim_states_min) */
    zero_q8_state q8; /* then: indices (padded or shard bytes) and absmax (one fp32 per 256) each */
    void *fparams;  /* frozen dtype: fpadded (whole) or fshard */
    void *sec;      /* hpZ: the secondary shard (etable.hpz), working dtype; NULL when off */
    eview v;        /* the owned views of the arrays above (owner.c) */
    int sec_valid;  /* hpZ: `sec` equals the working parameters' slice (the step, load and an
                     * uncovered set_range make it stale; the next world all-gather refreshes it) */

    /* (T) gather */
    int gathers;        /* gather nesting: released when it drops to 0 */
    void *gathered;     /* stage 3: padded working-dtype all-gather target */
    float *view;        /* fp32 compute view when the working dtype is not fp32 */
    zero_request *prefetch; /* stage 3: in-flight all-gather into `gathered` */
    int sec_fill;           /* hpZ: `gathered` comes from the world: copy the secondary shard from it */
    double prefetch_t0;     /* when it was started (zero_now) */
    void *fgathered;        /* stage 3: fpadded frozen-dtype all-gather target */
    zero_request *fprefetch; /* stage 3: in-flight all-gather into `fgathered` */
    int pf_pending;          /* stage 3: a prefetch was started and its landing not yet handled */
    void *qsend, *qrecv;     /* qwZ: this rank's message and the world's (qwz.c) while the trainable
                              * part's all-gather is in flight, decoded into `gathered` when it lands */
    void *fqsend, *fqrecv;   /* qwZ: the same for the frozen part, into `fgathered` */
    void *hpart, *hfpart;    /* on a device: gather_parts' host copies of the two parts */

    /* (T) reduction */
    float *gscratch;    /* fp32 padded gradient buffer handed to the model (when not the persistent grads) */
    void *gsend;        /* working-dtype padded copy of gscratch sent to the reduction (half types) */
    void *grecv;        /* stages 2-3: working-dtype shard the reduce-scatter lands in */
    zero_request *reduce; /* in-flight reduction (stages 1-2 after a step: the parameters' all-gather) */
    double reduce_t0;     /* when it was started (zero_now) */
    int ready_mb;       /* micro-batch index of the last grad_ready, -1 none */
    int pf_mark;        /* the prefetch walk that last counted this unit (gather.c) */
    int reduced_step;   /* stages 0-1: the reduction of this step was started */
    void *dacc;         /* deterministic mode, half precision: the int32 sums of this step (determ.c) */
    uint8_t *dseen;     /* deterministic mode: this step's largest exponent field per grid block (determ.c) */
    uint64_t *dmass;    /* deterministic mode: this step's sum over the atoms of each block's largest |q| */
    int8_t *dgrid;      /* deterministic mode: each block's own grid exponent (persistent, charged to grads) */
    int dfloor;         /* deterministic mode: the unit's floor, its coarsest own grid - FLOOR (determ.c) */

    /* NVMe offload (offload.c): where this unit's data areas start in the swap files */
    uint64_t obase;     /* optimizer file: the unit's tile records */
    uint64_t pbase;     /* parameter file: the working-dtype shard, padded to ZERO_IO_ALIGN */
    int pslot;          /* parameter pool buffer holding (or reading) the shard, -1 none */
    int pready;         /* the read into pslot was waited for and succeeded */
} eunit;

/* Where an fp32 array of the owned slice lives under NVMe offload. */
enum { LOC_RAM = 0, LOC_OPTIM = 1, LOC_PARAM = 2 };

/* NVMe offload of the engine (docs/OFFLOAD.md). The optimizer file holds, per unit, tiles of T
 * owned elements: [array 0 | array 1 | ...] of L = roundup(n*4, ZERO_IO_ALIGN) bytes each, the
 * arrays being the fp32 master (when it lives there) and the optimizer states (an 8-bit state: its
 * n indices then its blocks' absmax, rounded up alike); the parameter file
 * holds each unit's working-dtype shard (stage 3), in which tile j starts at byte j*T*w. */
typedef struct eoffload {
    int opt, par;              /* optimizer / parameter offload to NVMe in effect */
    int master_loc;            /* LOC_*: the fp32 master (fp32 training: the working shard) */
    int nso;                   /* fp32 arrays per element in the optimizer file */
    uint64_t T;                /* owned elements per tile */
    zero_io *io;
    zero_swap *ofile, *pfile;
    zero_offload_pool *tpool;  /* step tiles (and checkpoint streaming) */
    zero_offload_pool *ppool;  /* stage-3 parameter shards; == tpool when only parameters go to NVMe */
    void *tmem, *pmem;         /* on a device: the pools' pinned memory (offload.c), else NULL */
    int fcache_unit;           /* frozen parts on NVMe: the unit whose frozen shard a write holds in
                                * fcache_buf of the parameter pool (offload_param.c), -1 none */
    int fcache_buf;
    zero_offload_stats st;     /* since create */
    char job[64];
} eoffload;

enum { CTRL_GATHER = 1, CTRL_REDUCE = 2, CTRL_STEP = 3, CTRL_NORM = 4, CTRL_READ = 5, CTRL_SAVE = 6, CTRL_LOAD = 7, CTRL_AGREE = 8 };

/* What every rank announces before a collective; all ranks must announce the same. */
typedef struct ctrl_rec {
    int32_t op;
    int32_t unit;
    int64_t seq;
    double a, b;   /* payload (CTRL_NORM: sum of squares, overflow flag) */
    uint64_t hash; /* running hash of every (op, unit, seq) so far, exchanged or not */
} ctrl_rec;

/* bufcache.c: idle transient blocks, reused by exact size (zero_extensions.reuse_buffers). */
typedef struct ebuf {
    void *p;
    size_t bytes;
} ebuf;
typedef struct ebufcache {
    ebuf *idle;           /* oldest first */
    int nidle, cap_idle;
    uint64_t idle_bytes;  /* charged to ZERO_MEM_BUFFERS while idle */
    uint64_t in_use;      /* handed out, not yet put back */
    uint64_t in_use_peak; /* the most in use at once: in use + idle never exceeds it */
} ebufcache;

struct zero_engine {
    zero_comm *user_comm; /* not owned */
    zero_comm *data;      /* owned duplicate: the data-plane collectives and their counters */
    zero_comm *ctrl;      /* owned duplicate: the control plane (tags, norms, reads) */
    zero_comm *sec;       /* owned, hpZ only: the rank's group of hpz consecutive ranks (split of
                           * the user's communicator), for the secondary all-gathers */
    int rank, world;
    zero_config cfg;
    zero_dtype wdt;       /* working dtype */
    size_t wsize;         /* bytes per working element */
    zero_dtype fdt;       /* the frozen parameters' dtype (zero_config.frozen_dtype) */
    size_t fsize;         /* bytes per frozen element */
    uint64_t nfrozen;     /* frozen elements over all units (0: no frozen parameter) */
    zero_qformat qfmt;    /* the base format of ZERO_PARAM_QUANTIZE parameters (zero_config_base_format) */
    int nquant;           /* parameters stored in it */
    /* a quantized parameter being set piece by piece (set_unit_range), coded as its pieces come
     * (quant/internal.h's zero__quant_record_code): its record so far, its blocks' first-level
     * absmax (NF4 with double quantization), the values of a block not yet whole */
    void *qrec;
    float *qam;
    float qtail[ZERO_QUANT_NF4_BLOCK];
    uint64_t qtail_n;
    int qstage_param;     /* its index, -1 none */
    uint64_t qfill;       /* its elements [0, qfill) are set: coded, or in qtail */
    uint64_t align;       /* partition alignment in elements */
    int nstates;          /* optimizer state arrays per element (0..2) */
    zero_memacct acct;
    zero_loss_scaler scaler;
    char err[1024];
    int finalized, broken;

    eunit *units;
    int nunits, cap_units;
    eparam *params;
    int nparams, cap_params;

    int64_t step;         /* optimizer steps taken (skipped included) */
    int mb;               /* micro-batch index inside the step */
    int mb_open;          /* a gradient call happened in micro-batch `mb` */
    int det_redo;         /* deterministic mode: the step's gradients outgrew their grids (determ.c) */
    int64_t ctrl_seq;     /* collectives announced so far (exchanged or only hashed) */
    uint64_t ctrl_hash;   /* running hash of the announced sequence (control.c) */
    int64_t steps_run;    /* steps this engine took (a loaded step count not included) */
    int pf_epoch;         /* stage-3 prefetch walks so far (marks units seen in one walk) */
    double comm_wait;     /* seconds waited on communication in the current step */

    /* stage-3 prefetch: the gather order recorded in the first step */
    int *order;
    int norder, cap_order, recording, cursor;
    uint64_t live;        /* gathered elements currently held (stage 3) */
    int inflight_reductions;
    int *inflight;        /* units with a reduction in flight, oldest first */
    ctrl_rec *ctrl_all;   /* world records */

    etable own;           /* the ownership table (owner.c) */
    /* zero_engine_options, copied ("" where the variable rules) */
    char opt_job[64], opt_io_backend[32], opt_io_fault[512];
    int opt_job_set, opt_io_backend_set, opt_io_fault_set, opt_io_depth;
    eoffload off;
    ebufcache bc;
    /* the device tier (devtier.c): NULL on the cpu backend, where every array is host memory */
    zero_device *dev;
    zero_stream *stream;  /* the engine's one stream: every device operation, in program order */
    float *qmap;          /* 8-bit states on the device: the signed and unsigned dynamic maps there (2 x 256) */
    int sync_copies;      /* zero_engine_options.sync_copies: every upload waited for (no overlap) */
    int test_skip_wait;   /* zero_engine_options.test_skip_wait: the upload buffers' wait dropped */
    char alloc_err[512];  /* the device's reason for the first failed allocation of finalize */
};

/* owner.c: the table (finalize, before anything is allocated) and each unit's views (after its
 * arrays are allocated; -1 when out of memory). */
void zero__own_table(zero_engine *e);
int zero__own_views(zero_engine *e, eunit *u);
void zero__own_free(eunit *u);
/* Elements a rank keeps of `kind` (EK_*) for unit u: padded, shard or 0 (EK_FROZEN: of the
 * frozen part's partition). */
uint64_t zero__own_elems(const zero_engine *e, const eunit *u, int kind);
/* hpZ: the group size the table will hold for cfg on `world` ranks (0: off); create splits the
 * secondary communicator by it before the table exists. */
int zero__own_hpz(const zero_config *cfg, int world);
/* hpZ: elements of u's secondary shard (padded / hpz; 0 when off) and its first unit element. */
uint64_t zero__own_sec_elems(const zero_engine *e, const eunit *u);
uint64_t zero__own_sec_offset(const zero_engine *e, const eunit *u);
/* Test hook: a deliberately wrong view (tests/mpi/test_engine_views.c); 0 in real runs. */
extern int zero__view_mutation;
enum { ZERO__MUTATE_NONE = 0, ZERO__MUTATE_DECAY_FLAG = 1, ZERO__MUTATE_SLICE_RANGE = 2, ZERO__MUTATE_GRADS_WHOLE = 3 };

/* gather.c: the fp32 view of unit u with frozen parameters (numel values) from its two parts whole:
 * tfull the trainable part in tdt, ffull the frozen part (host or device memory); each parameter
 * converted from its part (runs lying back to back in one piece), a quantized one's record decoded. */
zero_status zero__assemble_view(zero_engine *e, const eunit *u, const void *tfull, zero_dtype tdt, const void *ffull,
                                float *view);

/* Records an error on the engine and returns `s`. */
zero_status zero__eng_fail(zero_engine *e, zero_status s, const char *fmt, ...) ZERO__PRINTF(3, 4);
/* The control exchange: every rank announces (op, unit, a, b); on disagreement every rank
 * returns ZERO_ERR_DIVERGED naming what each rank did. Which announcements are exchanged
 * depends on check_divergence: all (COLLECTIVE); those of the first step, the step's, save's,
 * load's and every one carrying a payload, with a running hash of all the others compared
 * (STEP, the default); only the payload ones (OFF). On success e->ctrl_all holds every rank's
 * record (when an exchange took place). */
zero_status zero__ctrl_exchange(zero_engine *e, int op, int unit, double a, double b);
/* Every rank passes its local status: ZERO_OK on all ranks only when all succeeded; otherwise the
 * failing rank keeps its own message and the others name the first failing rank. */
zero_status zero__eng_agree(zero_engine *e, zero_status mine, const char *what);
/* Checks that a per-unit call can run: finalized, not broken, unit in range (`what` names the call). */
zero_status zero__eng_check_unit(zero_engine *e, int unit, const char *what);
/* Adds the time since t0 to the step's communication wait, and a span to the trace. Also used
 * for the calls that start a collective: a backend may do the whole transfer there (the in-node
 * shared-memory paths do), and that time is exposed communication too. */
void zero__eng_waited(zero_engine *e, const char *what, double t0);
/* Waits on a request (a collective `what` started at t_issue), adding the time to the step's
 * communication wait; the trace gets the wait and the collective's whole flight, from its start
 * to now, on the "comm in flight" track (the part outside the wait ran beside the compute). */
zero_status zero__eng_wait(zero_engine *e, zero_request **req, double t_issue, const char *what);
#define ZERO__TRACE_PREFETCH "all-gather prefetch" /* the flight of a stage-3 prefetch */

/* devtier.c: the device tier (docs/ENGINE.md, "The device tier"). On the cpu backend (e->dev
 * NULL) each is the host operation itself. Pointers may be host or device memory as the names
 * say; a status other than ZERO_OK has been recorded on the engine (zero__eng_fail). */
zero_status zero__dev_open(zero_engine *e, const zero_device_options *o, zero_error *err);
void zero__dev_close(zero_engine *e);
int zero__dev_is(const zero_engine *e, const void *p); /* p lies in device memory */
/* A persistent array of n elements in the tier's memory (zeroed; NULL when n is 0, else *fail set
 * on failure); released by zero__eng_release. */
void *zero__eng_alloc(zero_engine *e, int tier, zero_mem_category c, uint64_t n, size_t elem, int *fail);
void zero__eng_release(zero_engine *e, void *p);
/* Transient buffers in the memory the unit arrays live in (device memory on a device, else the
 * buffer cache's host blocks). */
void *zero__dbuf_get(zero_engine *e, size_t bytes, int zeroed);
void zero__dbuf_put(zero_engine *e, void *p);
zero_status zero__x_copy(zero_engine *e, void *dst, const void *src, size_t bytes); /* any memory; done on return */
zero_status zero__x_zero(zero_engine *e, void *dst, size_t bytes);
/* n host fp32 values into dst (host or device) as ddt; n elements of src (sdt) into host fp32 */
zero_status zero__x_store(zero_engine *e, void *dst, zero_dtype ddt, const float *src, uint64_t n);
zero_status zero__x_load(zero_engine *e, float *dst, const void *src, zero_dtype sdt, uint64_t n);
/* n elements of src (sdt) into dst (ddt), both in the same memory (host, or device) */
zero_status zero__x_convert(zero_engine *e, const void *src, zero_dtype sdt, void *dst, zero_dtype ddt, uint64_t n);
/* dst += src in the working dtype (both where the unit arrays are); dst += host fp32 src */
zero_status zero__x_add(zero_engine *e, void *dst, const void *src, uint64_t n);
zero_status zero__x_accum_f32(zero_engine *e, void *dst, const float *src, uint64_t n);
/* Σ g² over each block of `block` working-dtype elements of g (device memory) into host out[] */
zero_status zero__x_sumsq(zero_engine *e, const void *g, uint64_t n, uint64_t block, double *out);
/* Blockwise 8-bit coding on a device (its kernels: the formulas of the host's zero_quant_blockwise /
 * zero_dequant_blockwise, whose callers use them directly on the host): n values decoded into fp32
 * dst, or x coded (its indices and the absmax of its blocks of `block`; the last block of the n
 * values is the partial one), against map ZERO__QMAP_* (quant/internal.h). step.c's 8-bit states,
 * qwz.c's messages. */
zero_status zero__x_q8_load(zero_engine *e, const uint8_t *idx, const float *absmax, int map, uint64_t block,
                            uint64_t n, float *dst);
zero_status zero__x_q8_store(zero_engine *e, const float *x, int map, uint64_t block, uint64_t n, uint8_t *idx,
                             float *absmax);
/* the optimizer's step on n device elements (grad in the working dtype; out: its write-back, or NULL) */
zero_status zero__x_optim(zero_engine *e, const zero_optim_hparams *h, float *master, float *s0, float *s1,
                          const void *grad, float gscale, float decay, uint64_t n, void *out);
/* Uploads that overlap the host's work (ZeRO-Offload's updated working copy, docs/DEVICE.md
 * "Overlap"): two pinned buffers taken in turn. The host writes chunks into one, back to back
 * while they continue one range of device memory; once it is full (or the next chunk goes
 * elsewhere) its copy to the device is queued on the engine's stream and the host goes on in the
 * other. A buffer is written again only once its event says its copy has run (the one host wait:
 * it costs nothing while the host is the slower side). Later device operations are on the same
 * stream, so they see the uploads without a wait; the host must flush before anything on the
 * device reads the range (a collective, another stream). */
#define ZERO__UPL_BYTES ((size_t)1 << 20)
typedef struct zero__upl {
    void *buf[2];
    zero_event *ev[2];
    int used[2], next;
    size_t bytes, fill; /* per buffer; what the current one holds */
    void *dst;          /* where the current buffer goes on the device */
    const void *array;  /* the device array dst lies in */
} zero__upl;
/* bytes per buffer (allocated at first use; on the cpu backend, no device, u stays empty) */
void zero__upl_open(zero_engine *e, zero__upl *u, size_t bytes);
/* *out: where to write `bytes` that go to dst (device memory, inside `array`) — in the current
 * buffer when they continue its range in the same array, else in the next, once its last copy has
 * run (a failure is recorded on e) */
zero_status zero__upl_take(zero_engine *e, zero__upl *u, const void *array, void *dst, size_t bytes, void **out);
/* queues the copy of what the current buffer holds */
zero_status zero__upl_flush(zero_engine *e, zero__upl *u);
/* flushes, waits for the copies (ZERO_OK, or the first failure) and frees u's buffers */
zero_status zero__upl_close(zero_engine *e, zero__upl *u);

/* The data plane's collectives on the unit arrays, started (a request, waited for by the caller):
 * on a device the host-staged device collectives' non-blocking forms (the whole message staged in
 * pinned memory at the call, the host collective running while the caller computes, the result
 * copied up at the wait). In place as the host ones. req NULL: blocking — on a device, chunked
 * through fixed staging (docs/DEVICE.md "Overlap": non-blocking only where the engine bounds what is
 * in flight, so that the pinned staging is bounded too; zero__x_async says which). */
zero_status zero__x_all_reduce(zero_engine *e, void *buf, uint64_t n, zero_request **req);
/* qblock > 0: qgZ's quantized reduce-scatter (zero_comm_ireduce_scatter_q8) in blocks of qblock */
zero_status zero__x_reduce_scatter(zero_engine *e, const void *send, void *recv, uint64_t n, size_t qblock,
                                   zero_request **req);
/* req NULL: blocking */
zero_status zero__x_all_gather(zero_engine *e, zero_comm *c, const void *send, void *recv, uint64_t n, zero_dtype dt,
                               zero_request **req);
/* req where every one in flight is staged whole without a bound on their number (the whole
 * gradient's reductions at stages 0-1, the regather at stages 1-2): NULL on a device, so that
 * they run blocking through the fixed staging; req on the host */
zero_request **zero__x_async(const zero_engine *e, zero_request **req);

/* bufcache.c: every transient buffer of the engine (charged to ZERO_MEM_BUFFERS). get returns
 * `bytes` (zero-filled when asked) or NULL when out of memory; put hands it back for reuse. */
void *zero__buf_get(zero_engine *e, size_t bytes, int zeroed);
void zero__buf_put(zero_engine *e, void *p);
void zero__buf_free(zero_engine *e); /* frees the idle blocks and the cache's own array */

/* qwz.c: ZeRO++'s quantized weight gathers (zero_config.quant_weights). on: in effect (stage 3's
 * gathers, more than one rank). bytes: the message of n elements (zero_quant_msg_bytes). encode:
 * n elements of src (dtype dt, where the unit arrays live) into msg; decode: the world's messages
 * laid end to end in `all` into dst (world x n elements of dt), this rank's slice copied from own,
 * unquantized. Both on the device's kernels on a device, through an fp32 buffer of
 * zero_quant_msg_chunk elements for a dtype other than fp32. */
int zero__qwz_on(const zero_engine *e);
/* the frozen parts too: unless they hold a quantized base's records, which go as stored */
int zero__qwz_frozen(const zero_engine *e);
uint64_t zero__qwz_bytes(const zero_engine *e, uint64_t n);
zero_status zero__qwz_encode(zero_engine *e, const void *src, zero_dtype dt, uint64_t n, void *msg);
zero_status zero__qwz_decode(zero_engine *e, const void *all, zero_dtype dt, uint64_t n, const void *own, void *dst);

/* gather.c */
zero_status zero__gather_drain(zero_engine *e); /* waits and frees stage-3 prefetches */
/* hpZ: unit u's working parameters changed (all units when u is NULL): its secondary shard is
 * stale until the next all-gather over the world refreshes it. Every rank calls it alike. */
void zero__sec_stale(zero_engine *e, eunit *u);

/* offload.c: one element range of one tile, its arrays bound to RAM or to the pool buffer */
typedef struct etile {
    eunit *u;
    int64_t j;            /* tile index inside the unit */
    uint64_t first, n;    /* owned-slice index of its first element; elements */
    uint64_t lo, hi;      /* the part [lo, hi) (owned-slice indices) the pass covers */
    float *master, *s0, *s1; /* s0, s1: fp32 states (NULL when they are 8-bit) */
    zero_q8_state q8;     /* 8-bit states (eunit.q8on): indices and absmax of the n elements */
    void *work;           /* half precision: the working copy of the n elements; fp32: NULL */
} etile;
enum { ARR_MASTER = 1u, ARR_S0 = 2u, ARR_S1 = 4u, ARR_WORK = 8u };
/* A pass over the tiles of units [ua, ub) that meet owned-slice range [lo, hi): arrays in `rd`
 * are read before cb, those in `wr` written after it (a tile only partly in range is read too). */
typedef struct eopass {
    int ua, ub;
    uint64_t lo, hi;
    unsigned rd, wr;
    zero_status (*cb)(zero_engine *e, etile *x, void *ctx);
    void *ctx;
} eopass;
/* Sets up the files and pools (finalize; collective): on failure removes what it created. */
zero_status zero__off_setup(zero_engine *e);
void zero__off_free(zero_engine *e);
/* Waits for the parameter read-ahead and stage-3 prefetches and frees their buffers: before any
 * pass touches the files outside gathers. */
zero_status zero__off_quiesce(zero_engine *e);
zero_status zero__off_run(zero_engine *e, const eopass *p);
/* Any offload in effect. */
static inline int zero__off_on(const zero_engine *e) { return e->off.opt || e->off.par; }
/* A working copy apart from the fp32 master: half precision, or the table keeps the master apart
 * (a device rank's offloaded optimizer, docs/DEVICE.md). */
static inline int zero__work_apart(const zero_engine *e) {
    return e->wdt != ZERO_DTYPE_FP32 || !e->own.master_in_params;
}
/* The step's update of every unit through the pool (step.c supplies the per-tile kernel). */
zero_status zero__step_tile(zero_engine *e, etile *x, void *ctx);

/* offload_param.c: stage-3 parameter shards read from the file before their all-gather */
/* Before the control exchange of gather(u): makes u's shard (when it must be all-gathered) and
 * the next prefetched unit's shard ready in the pool. Returns the local I/O status. */
zero_status zero__poff_prepare(zero_engine *e, eunit *u);
/* After the exchange: ZERO_OK when every rank's status in ctrl_all is OK, else fails everywhere. */
zero_status zero__poff_check(zero_engine *e, eunit *u);
/* The all-gather's send buffer: u's shard in the pool. */
const void *zero__poff_shard(zero_engine *e, eunit *u);
/* u's all-gather finished: its pool buffer is free again. */
void zero__poff_done(zero_engine *e, eunit *u);
/* Whether the prefetch of u may start (its shard is ready). */
int zero__poff_ready(const zero_engine *e, const eunit *u);
/* Starts reads of the units after the cursor into the free pool buffers. */
void zero__poff_read_ahead(zero_engine *e);
/* Releases every pool buffer (no all-gather may be in flight). */
void zero__poff_release_all(zero_engine *e);
/* The parameter file's region of u: the working shard, then the frozen shard, each padded to
 * ZERO_IO_ALIGN; a pool buffer holds it whole, the frozen shard at zero__poff_frozen_at. */
uint64_t zero__poff_region(const zero_engine *e, const eunit *u);
uint64_t zero__poff_frozen_at(const zero_engine *e, const eunit *u);
/* Frozen parts on NVMe (the parameter file): u's frozen shard, this rank's fshard elements of the
 * frozen dtype, in host memory to write into (loading: set_unit, a record, a checkpoint). One unit
 * is held at a time, read first (a partial write keeps the rest) and written back when another
 * is asked for or by zero__foff_flush, which every read of the file runs first. On an I/O failure
 * *out is NULL and the engine's error set. */
zero_status zero__foff_region(zero_engine *e, eunit *u, void **out);
zero_status zero__foff_flush(zero_engine *e);
/* Copies u's frozen shard (its first `bytes`) out of the file into dst. */
zero_status zero__foff_read(zero_engine *e, eunit *u, void *dst, size_t bytes);
/* reduce.c */
zero_status zero__reduce_finish_all(zero_engine *e); /* starts missing and waits every reduction */
/* determ_kernels.c: deterministic mode's kernels; each fast kernel has its scalar reference (_ref)
 * that tests/unit/test_determ_kernels.c holds it to, bit for bit. A unit's elements are cut into
 * blocks of ZERO_DQ_BLOCK, each with a grid exponent (int8: ZERO_DQ_EMIN..ZERO_DQ_EMAX, or
 * ZERO_DQ_UNSET; a block quantizes with zero__dq_grid: the coarser of its grid and the unit's
 * floor), a "seen" byte (the largest fp32 exponent field quantized into it this step;
 * ZERO_DQ_NAN after an Inf or NaN) and a "mass" (the sum over the atoms of the block's largest
 * |q|). quantize rounds elements [i0, i0 + n) of x (unit element indices; i0 a multiple of the
 * block) to int32 multiples of 2^grid, clamped to |q| <= ZERO_DQ_CLAMP, and writes (add = 0; dst
 * may be x) or adds them into dst, raising `seen` and adding to `mass`; convert turns sums back
 * into fp32, once rounded (NaN where seen says so; out may be acc). A zero__dk_sq is the exact
 * sum of squares: one unsigned 128-bit sum per fp32 exponent field; sq_add sets *bad on an Inf
 * or NaN; sq_value rounds it to a double in a fixed order. */
#define ZERO_DQ_BLOCK 32
#define ZERO_DQ_UNSET INT8_MIN
#define ZERO_DQ_EMIN  (-126)
#define ZERO_DQ_EMAX  96
#define ZERO_DQ_NAN   255
#define ZERO_DQ_CLAMP 2147483520 /* 2^31 - 128: the largest float below 2^31 */
/* The grid a block with own grid g quantizes with in a unit whose floor is `floor`: the coarser
 * (ZERO_DQ_UNSET where neither is set). */
static inline int zero__dq_grid(int g, int floor) { return g > floor ? g : floor; }
void zero__dq_quantize(const float *x, int32_t *dst, uint64_t i0, uint64_t n, const int8_t *grid, int floor,
                       uint8_t *seen, uint64_t *mass, int add);
void zero__dq_quantize_ref(const float *x, int32_t *dst, uint64_t i0, uint64_t n, const int8_t *grid, int floor,
                           uint8_t *seen, uint64_t *mass, int add);
void zero__dq_convert(const int32_t *acc, float *out, uint64_t i0, uint64_t n, const int8_t *grid, int floor,
                      const uint8_t *seen);
void zero__dq_convert_ref(const int32_t *acc, float *out, uint64_t i0, uint64_t n, const int8_t *grid, int floor,
                          const uint8_t *seen);
typedef struct zero__dk_sq {
    unsigned __int128 b[256];
} zero__dk_sq;
void zero__dk_sq_add(zero__dk_sq *a, const float *x, uint64_t n, int *bad);
void zero__dk_sq_add_ref(zero__dk_sq *a, const float *x, uint64_t n, int *bad);
void zero__dk_sq_merge(zero__dk_sq *a, const zero__dk_sq *o);
double zero__dk_sq_value(const zero__dk_sq *a);
/* determ.c: deterministic mode (zero_extensions.deterministic). fold adds one micro-batch's (one
 * atom's) fp32 gradient onto u's grids into its int32 sums; reduce_all sums them over the ranks
 * into the owned gradients (the step's reduction), or, where a block outgrew its grid, sets the
 * grids, drops the sums and sets *redo; norm is the exact sum of squares of the owned gradients
 * over every rank (and the Inf/NaN flag). blocks: grid blocks of n elements; headroom: L bits;
 * set_floor: the unit's floor from its grids. */
zero_status zero__det_fold(zero_engine *e, eunit *u, const float *g);
zero_status zero__det_reduce_all(zero_engine *e, int *redo);
zero_status zero__det_norm(zero_engine *e, double *sumsq, int *overflow);
uint64_t zero__det_blocks(uint64_t n);
int zero__det_headroom(const zero_engine *e);
void zero__det_set_floor(eunit *u); /* from u's grids (after a load) */
void zero__det_clear_grids(eunit *u); /* no block has a grid, so no floor either */
/* Pointer to element i of a working-dtype buffer. */
static inline void *zero__wptr(const zero_engine *e, void *base, uint64_t i) {
    return (char *)base + i * e->wsize;
}
/* dst[i] += src[i] in working dtype (fp32 accumulate, one rounding) for n elements. */
void zero__wadd(zero_engine *e, void *dst, const void *src, uint64_t n);
/* dst[i] (working) += src[i] (fp32). */
void zero__wadd_f32(zero_engine *e, void *dst, const float *src, uint64_t n);

#endif
