/* How `zero train` explains itself: checks before any work (inputs, output paths, memory), the
 * resolved configuration and the keys that change nothing, a resume's global batch, the progress
 * line or bar, and the closing warnings. Kept apart from the training loop (cli/train.c). */
#include "run_ux.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "memcheck.h"
#include "train.h"

int cli_quiet_warnings;

/* ------------------------------------------------------------------ flags */

int ux_flag(train_opts *o, int argc, char **argv, int *i) {
    if (strcmp(argv[*i], "--print-every") != 0) return 0;
    const char *flag = argv[*i], *v = cli_flag_value(argc, argv, i);
    if (!v || cli_parse_i64(flag, v, 1, INT64_MAX / 2, &o->ux.print_every)) return -1;
    return 1;
}

/* ------------------------------------------------------------------ paths */

int ux_check_inputs(const train_opts *o) {
    const char *flag[] = {"--config", "--resume", "--data", "--init-from", "--val-data"};
    const char *path[] = {o->config, o->resume, o->data, o->init_from, o->val_data};
    for (int k = 0; k < 5; k++) {
        struct stat st;
        if (path[k] && stat(path[k], &st) != 0 && (errno == ENOENT || errno == ENOTDIR))
            return cli_error(CLI_USAGE, "%s '%s': %s", flag[k], path[k], strerror(errno));
    }
    return CLI_OK;
}

/* `path`'s directory ("." for a bare name) into buf. */
static void dir_of(const char *path, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", path);
    char *slash = strrchr(buf, '/');
    while (slash && slash > buf && slash[1] == 0) { /* "dir/" names dir itself: its parent is asked for */
        *slash = 0;
        slash = strrchr(buf, '/');
    }
    if (!slash) snprintf(buf, cap, ".");
    else if (slash == buf) buf[1] = 0; /* "/x": "/" */
    else *slash = 0;
}

/* A file to be written (is_dir 0) or a directory to be created or filled (is_dir 1): what exists
 * must be of that kind and writable, else its parent directory must exist and be writable. */
static int check_output(const char *flag, const char *path, int is_dir) {
    struct stat st;
    if (!*path) return cli_error(CLI_USAGE, "%s '': expected a path", flag);
    if (stat(path, &st) == 0) {
        if (is_dir && !S_ISDIR(st.st_mode))
            return cli_error(CLI_USAGE, "%s '%s': exists and is not a directory", flag, path);
        if (!is_dir && S_ISDIR(st.st_mode))
            return cli_error(CLI_USAGE, "%s '%s': is a directory, expected a file", flag, path);
        if (access(path, is_dir ? W_OK | X_OK : W_OK))
            return cli_error(CLI_USAGE, "%s '%s': not writable (%s)", flag, path, strerror(errno));
        return CLI_OK;
    }
    char dir[4096];
    dir_of(path, dir, sizeof dir);
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return cli_error(CLI_USAGE, "%s '%s': the directory %s does not exist", flag, path, dir);
    if (access(dir, W_OK | X_OK))
        return cli_error(CLI_USAGE, "%s '%s': cannot write in %s (%s)", flag, path, dir, strerror(errno));
    return CLI_OK;
}

/* The files a run writes (--log-json, --trace) must not be what it reads, each other, or the
 * names a checkpoint directory keeps for itself (latest, step_*): a typo would overwrite the
 * training data or a checkpoint when the first step is logged. */
static int check_aliases(const train_opts *o) {
    const char *oflag[2] = {"--log-json", "--trace"};
    const char *out[2] = {o->log_json && strcmp(o->log_json, "-") != 0 ? o->log_json : NULL, o->trace};
    if (out[0] && out[1] && cli_same_path(out[0], out[1]))
        return cli_error(CLI_USAGE, "--log-json '%s' and --trace '%s' name the same file: expected two", out[0],
                         out[1]);
    /* the last, --save, is written; --data and --val-data are read whole, directories included */
    const char *iflag[6] = {"--config", "--data", "--resume", "--init-from", "--val-data", "--save"};
    const char *in[6] = {o->config, o->data, o->resume, o->init_from, o->val_data, o->save};
    for (int k = 0; k < 2; k++) {
        if (!out[k]) continue;
        for (int i = 0; i < 6; i++) {
            char rest[PATH_MAX];
            if (!in[i]) continue;
            if (i < 5 && cli_same_path(out[k], in[i]))
                return cli_error(CLI_USAGE,
                                 "%s '%s' is the file %s '%s' names: expected another path (it would be "
                                 "overwritten)",
                                 oflag[k], out[k], iflag[i], in[i]);
            const char *r = cli_path_under(out[k], in[i], rest, sizeof rest);
            if (r && (i == 1 || i == 4 || !*r || !strcmp(r, "latest") || !strncmp(r, "step_", 5)))
                return cli_error(CLI_USAGE, "%s '%s': inside %s '%s'%s: expected a path outside it", oflag[k], out[k],
                                 iflag[i], in[i],
                                 i == 1 || i == 4 ? ", which is read as data"
                                                  : ", where a checkpoint keeps latest and step_*");
        }
    }
    return CLI_OK;
}

int ux_check_outputs(const train_opts *o) {
    int rc;
    if (o->save && (rc = check_output("--save", o->save, 1)) != CLI_OK) return rc;
    if (o->log_json && strcmp(o->log_json, "-") != 0 && (rc = check_output("--log-json", o->log_json, 0)) != CLI_OK)
        return rc;
    if (o->trace && (rc = check_output("--trace", o->trace, 0)) != CLI_OK) return rc;
    if ((rc = check_aliases(o)) != CLI_OK) return rc;
    /* Offload directories are never created: a typo would put the swap files on the wrong disk. */
    const zero_offload_config *oc[2] = {&o->cfg.offload_optimizer, &o->cfg.offload_param};
    const char *what[2] = {"optimizer", "param"};
    for (int k = 0; k < 2; k++) {
        if (oc[k]->device != ZERO_OFFLOAD_NVME || !oc[k]->nvme_path[0]) continue;
        const char *p = oc[k]->nvme_path;
        const int flag = k ? o->offload_param != NULL : o->offload_optimizer != NULL;
        char name[96];
        if (flag) snprintf(name, sizeof name, "--offload-%s nvme:", what[k]);
        else snprintf(name, sizeof name, "zero_optimization.offload_%s.nvme_path ", what[k]);
        struct stat st;
        if (stat(p, &st) != 0)
            return cli_error(CLI_USAGE,
                             "%s'%s': no such directory (offload directories are not created: make it, "
                             "on the drive meant for the swap files)",
                             name, p);
        if (!S_ISDIR(st.st_mode)) return cli_error(CLI_USAGE, "%s'%s': not a directory", name, p);
        if (access(p, W_OK | X_OK)) return cli_error(CLI_USAGE, "%s'%s': not writable (%s)", name, p, strerror(errno));
    }
    return CLI_OK;
}

/* ------------------------------------------------------------------ memory */

int ux_check_memory(const train_opts *o, int world) {
    if (world <= 0) return CLI_OK;
    const dec_config *m = &o->model_cfg;
    const int64_t B = o->cfg.micro_batch, K = o->cfg.grad_accum;
    cli_mem_need need;
    if (cli_mem_need_of(m, o->lora_on ? &o->lora : NULL, &o->cfg, world, B, o->T, o->checkpointing, &need))
        return CLI_OK; /* the engine will say what is wrong with the setup */
    const double act = need.act, act_ck = need.act_ckpt, states = need.states;
    const double batch = 2.0 * 4.0 * (double)B * (double)K * (double)o->T; /* the step's inputs and targets */
    const double rank = states + need.transient + act + batch;
    /* the ranks that share this machine: the launcher's (one node), else MPI's local size */
    int local = world;
    const char *ls = getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (!ls) ls = getenv("MPI_LOCALNRANKS");
    if (ls && atoi(ls) > 0 && atoi(ls) < world) local = atoi(ls);
    const double ram = cli_machine_ram();
    if (ram <= 0 || rank * local <= ram) return CLI_OK;
    char a[32], b[32], c[32], d[32], e[32], f[32], g[32];
    cli_fmt_bytes(batch, g, sizeof g);
    cli_fmt_bytes(rank, a, sizeof a);
    cli_fmt_bytes(act, b, sizeof b);
    cli_fmt_bytes(states, c, sizeof c);
    cli_fmt_bytes(rank * local, d, sizeof d);
    cli_fmt_bytes(ram, e, sizeof e);
    cli_fmt_bytes(rank - act + act_ck, f, sizeof f);
    char ranks[96] = "", hint[128] = "";
    if (local > 1) snprintf(ranks, sizeof ranks, ", %d ranks on this machine %s", local, d);
    if (!o->checkpointing && act_ck < act)
        snprintf(hint, sizeof hint, "--activation-checkpointing (a rank would need %s), ", f);
    if (batch > act + states) /* the step's tokens, all its micro-batches at once: --grad-accum's doing */
        return cli_error(CLI_USAGE,
                         "--grad-accum %lld (gradient_accumulation_steps) x --micro-batch %lld x --seq %d: the step's "
                         "tokens would need %s a rank, more than this machine's %s of RAM: expected fewer "
                         "accumulation steps",
                         (long long)K, (long long)B, o->T, g, e);
    return cli_error(CLI_USAGE,
                     "--micro-batch %lld --seq %d: a rank would need %s (activations %s, model states %s, the step's "
                     "tokens %s)%s, more than this machine's %s of RAM: try %sa smaller --micro-batch (with "
                     "--grad-accum) or --seq, or zero plan --model %s --ranks %d --host-mem %.0fGiB",
                     (long long)B, o->T, a, b, c, g, ranks, e, hint, o->src.name, world, floor(ram / 1073741824.0));
}

/* ------------------------------------------------------------------ the config file */

/* The --config document (NULL without one or when unreadable: the loader reported that). */
static cJSON *config_doc(const train_opts *o) {
    if (!o->config) return NULL;
    /* read as the loader reads it (docs/SECURITY.md): at most 16 MiB, its JSON bounded before parsing */
    char *text = NULL;
    size_t len = 0;
    zero_error err;
    if (zero_read_file(o->config, UINT64_C(16) << 20, &text, &len, &err) != ZERO_OK) return NULL;
    cJSON *doc = NULL;
    if (zero_json_check(text, len, UINT64_C(1) << 16, ZERO_JSON_MAX_DEPTH, &err) == ZERO_OK)
        doc = cJSON_ParseWithLength(text, len);
    free(text);
    return doc;
}

/* The value at a dotted path, or NULL. */
static const cJSON *at(const cJSON *doc, const char *path) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    const cJSON *v = doc;
    for (char *save = NULL, *k = strtok_r(buf, ".", &save); k && v; k = strtok_r(NULL, ".", &save))
        v = cJSON_IsObject(v) ? cJSON_GetObjectItemCaseSensitive(v, k) : NULL;
    return v;
}

/* Present with a value that asks for something (not false, not null). */
static int given(const cJSON *doc, const char *path) {
    const cJSON *v = at(doc, path);
    return v && !cJSON_IsFalse(v) && !cJSON_IsNull(v);
}

/* The batch is chosen: a flag, or a batch key of the config with a value ("auto" leaves it open). */
static int batch_chosen(const train_opts *o, const cJSON *doc) {
    if (o->micro_batch > 0 || o->grad_accum > 0) return 1;
    const char *keys[] = {"train_batch_size", "train_micro_batch_size_per_gpu", "gradient_accumulation_steps"};
    for (int k = 0; k < 3; k++) {
        const cJSON *v = at(doc, keys[k]);
        if (v && cJSON_IsNumber(v)) return 1;
    }
    return 0;
}

/* ------------------------------------------------------------------ keys that change nothing */

enum { R_NONE, R_CPU, R_NO_NVME, R_FP16_OFF, R_STATIC, R_STAGE3, R_COUNT };
static const char *const reason_text[R_COUNT] = {
    "no effect in zero",
    "no-op on a CPU rank: every state is in host memory already",
    "no NVMe offload in this run",
    "fp16 is off",
    "the fp16 loss scale is static",
    "stage 3 only",
};

/* Accepted by the config loader, stored or not, and read by nothing (docs/CONFIG.md: "no effect"
 * and the "(stored)" keys that only a GPU build or DeepSpeed's PyTorch mechanics would use). */
static const char *const no_effect[] = {
    "optimizer.params.torch_adam",
    "zero_optimization.offload_optimizer.fast_init",
    "zero_optimization.offload_optimizer.pipeline_read",
    "zero_optimization.offload_optimizer.pipeline_write",
    "zero_optimization.offload_param.max_in_cpu",
    "zero_optimization.contiguous_gradients",
    "zero_optimization.reduce_scatter",
    "zero_optimization.allgather_partitions",
    "zero_optimization.round_robin_gradients",
    "zero_optimization.overlap_comm",
    "zero_optimization.reduce_bucket_size",
    "zero_optimization.allgather_bucket_size",
    "zero_optimization.stage3_param_persistence_threshold",
    "zero_optimization.stage3_max_reuse_distance",
    "zero_optimization.stage3_gather_16bit_weights_on_model_save",
    "zero_optimization.stage3_gather_fp16_weights_on_model_save",
    "zero_optimization.ignore_unused_parameters",
    "zero_optimization.use_multi_rank_bucket_allreduce",
    "zero_optimization.memory_efficient_linear",
    "zero_optimization.override_module_apply",
    "zero_optimization.log_trace_cache_warnings",
    "zero_optimization.stage3_model_persistence_threshold",
    "zero_optimization.stage3_module_granularity_threshold",
    "aio.single_submit",
    "aio.overlap_events",
    "activation_checkpointing.number_checkpoints",
    "wall_clock_breakdown",
    "dump_state",
    "memory_breakdown",
    "zero_allow_untested_optimizer",
    "zero_force_ds_cpu_optimizer",
    NULL,
};

typedef struct inert_list {
    char text[R_COUNT][2048];
    size_t len[R_COUNT];
    int count;
} inert_list;

static void add(inert_list *l, const cJSON *doc, const char *path, int reason) {
    if (!given(doc, path)) return;
    const cJSON *v = at(doc, path);
    char *t = l->text[reason];
    size_t *n = &l->len[reason];
    if (*n >= sizeof l->text[0] - 1) return;
    const int w =
        snprintf(t + *n, sizeof l->text[0] - *n, "%s%s%s%s%s", *n ? ", " : "", path, cJSON_IsString(v) ? " \"" : "",
                 cJSON_IsString(v) ? v->valuestring : "", cJSON_IsString(v) ? "\"" : "");
    if (w > 0) *n += (size_t)w < sizeof l->text[0] - *n ? (size_t)w : sizeof l->text[0] - *n - 1;
    l->count++;
}

static void find_inert(const train_opts *o, const cJSON *doc, inert_list *l) {
    const zero_config *c = &o->cfg;
    for (const char *const *p = no_effect; *p; p++) add(l, doc, *p, R_NONE);
    const int nvme = c->offload_optimizer.device == ZERO_OFFLOAD_NVME || c->offload_param.device == ZERO_OFFLOAD_NVME;
    const char *sec[2] = {"zero_optimization.offload_optimizer", "zero_optimization.offload_param"};
    const zero_offload_config *oc[2] = {&c->offload_optimizer, &c->offload_param};
    const char *keys[] = {"nvme_path", "buffer_count", "buffer_size", "ratio", NULL};
    char path[160];
    for (int k = 0; k < 2; k++) {
        snprintf(path, sizeof path, "%s.device", sec[k]);
        const cJSON *dev = at(doc, path);
        /* a flag (--offload-*) replaced what the file asked for */
        const int flag = k ? o->offload_param != NULL : o->offload_optimizer != NULL;
        if (!flag && cJSON_IsString(dev) && !strcmp(dev->valuestring, "cpu")) add(l, doc, path, R_CPU);
        snprintf(path, sizeof path, "%s.pin_memory", sec[k]);
        add(l, doc, path, R_CPU);
        if (oc[k]->device == ZERO_OFFLOAD_NVME) continue;
        for (const char *const *q = keys; *q; q++) {
            snprintf(path, sizeof path, "%s.%s", sec[k], *q);
            add(l, doc, path, R_NO_NVME);
        }
    }
    if (!nvme) {
        const char *aio[] = {"aio.block_size",
                             "aio.queue_depth",
                             "aio.intra_op_parallelism",
                             "aio.thread_count",
                             "zero_optimization.sub_group_size",
                             NULL};
        for (const char *const *q = aio; *q; q++) add(l, doc, *q, R_NO_NVME);
    }
    const char *dyn[] = {"fp16.initial_scale_power",    "fp16.loss_scale_window", "fp16.hysteresis",
                         "fp16.consecutive_hysteresis", "fp16.min_loss_scale",    NULL};
    if (c->precision != ZERO_DTYPE_FP16) add(l, doc, "fp16.loss_scale", R_FP16_OFF);
    for (const char *const *q = dyn; *q; q++)
        if (c->precision != ZERO_DTYPE_FP16) add(l, doc, *q, R_FP16_OFF);
        else if (c->loss_scale > 0) add(l, doc, *q, R_STATIC);
    if (c->stage < 3) {
        add(l, doc, "zero_optimization.stage3_prefetch_bucket_size", R_STAGE3);
        add(l, doc, "zero_optimization.stage3_max_live_parameters", R_STAGE3);
    }
}

/* ------------------------------------------------------------------ resume: the global batch */

void ux_resume_batch(train_opts *o, int world) {
    o->ux.batch_note[0] = 0;
    const int64_t saved = o->ux.resume_global;
    if (!o->resume || world <= 0 || saved <= 0) return;
    zero_config *c = &o->cfg;
    const int64_t now = (int64_t)world * c->micro_batch * c->grad_accum;
    cJSON *doc = config_doc(o);
    const int chosen = batch_chosen(o, doc);
    cJSON_Delete(doc);
    if (chosen && !o->elastic_restart) { /* a restart keeps the run's batch: the flags cap the micro-batch */
        if (now != saved)
            snprintf(
                o->ux.batch_note, sizeof o->ux.batch_note,
                "the global batch is %lld (%d rank%s x micro-batch %lld x accumulation %lld), the checkpoint's %lld: "
                "the data order changes from here",
                (long long)now, world, world > 1 ? "s" : "", (long long)c->micro_batch, (long long)c->grad_accum,
                (long long)saved);
        return;
    }
    if (saved % world) {
        if (now != saved)
            snprintf(o->ux.batch_note, sizeof o->ux.batch_note,
                     "the checkpoint's global batch %lld does not divide among %d ranks: the global batch is now %lld "
                     "(micro-batch %lld x accumulation %lld) and the data order changes from here",
                     (long long)saved, world, (long long)now, (long long)c->micro_batch, (long long)c->grad_accum);
        return;
    }
    /* the largest micro-batch up to the default that divides a rank's share: no more memory */
    const int64_t share = saved / world;
    int64_t B = c->micro_batch < share ? c->micro_batch : share;
    while (share % B) B--;
    const int changed = B != c->micro_batch || share / B != c->grad_accum;
    c->micro_batch = B;
    c->grad_accum = share / B;
    c->train_batch_size = saved;
    if (changed)
        snprintf(o->ux.batch_note, sizeof o->ux.batch_note,
                 "kept the checkpoint's global batch %lld on %d rank%s: micro-batch %lld x accumulation %lld",
                 (long long)saved, world, world > 1 ? "s" : "", (long long)B, (long long)(share / B));
}

/* ------------------------------------------------------------------ the resolved configuration */

typedef struct line {
    char s[2048];
    size_t n;
} line;

static void put(line *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void put(line *l, const char *fmt, ...) {
    if (l->n >= sizeof l->s - 1) return;
    va_list ap;
    va_start(ap, fmt);
    const int w = vsnprintf(l->s + l->n, sizeof l->s - l->n, fmt, ap);
    va_end(ap);
    if (w > 0) l->n += (size_t)w < sizeof l->s - l->n ? (size_t)w : sizeof l->s - l->n - 1;
}

/* "cpu" moves a state to pinned host memory on a device; with the cpu backend it is there already */
static const char *offload_name(zero_offload_device d, const train_opts *o) {
    if (d == ZERO_OFFLOAD_CPU) return strcmp(o->dev.backend, "cpu") ? "cpu (pinned host memory)" : "cpu (a no-op here)";
    return d == ZERO_OFFLOAD_NVME ? "nvme" : "none";
}

static void auto_values(const train_opts *o, unsigned bits, line *l) {
    const zero_config *c = &o->cfg;
    const zero_sched *s = &c->sched;
#define AUTO(bit, ...) \
    if (bits & (bit)) put(l, "%s", l->n ? ", " : ""), put(l, __VA_ARGS__)
    AUTO(ZERO_AUTO_TRAIN_BATCH, "train_batch_size %lld", (long long)c->train_batch_size);
    AUTO(ZERO_AUTO_MICRO_BATCH, "train_micro_batch_size_per_gpu %lld%s", (long long)c->micro_batch,
         o->micro_batch > 0 ? " (--micro-batch)" : "");
    AUTO(ZERO_AUTO_GRAD_ACCUM, "gradient_accumulation_steps %lld%s", (long long)c->grad_accum,
         o->grad_accum > 0 ? " (--grad-accum)" : "");
    AUTO(ZERO_AUTO_LR, "optimizer.params.lr %g%s", (double)c->optim.lr, o->lr >= 0 ? " (--lr)" : "");
    AUTO(ZERO_AUTO_BETAS, "optimizer.params.betas [%g, %g]", (double)c->optim.beta1, (double)c->optim.beta2);
    AUTO(ZERO_AUTO_EPS, "optimizer.params.eps %g", (double)c->optim.eps);
    AUTO(ZERO_AUTO_WEIGHT_DECAY, "optimizer.params.weight_decay %g", (double)c->optim.weight_decay);
    AUTO(ZERO_AUTO_CLIPPING, "gradient_clipping %g%s", c->gradient_clipping, c->gradient_clipping > 0 ? "" : " (off)");
    AUTO(ZERO_AUTO_PRECISION, "fp16/bf16.enabled: %s%s", zero_dtype_name(c->precision),
         o->precision ? " (--precision)" : "");
    AUTO(ZERO_AUTO_SCHED_WARMUP_MIN_LR, "scheduler.params.warmup_min_lr %g", s->warmup_min_lr);
    AUTO(ZERO_AUTO_SCHED_WARMUP_MAX_LR, "scheduler.params.warmup_max_lr %g (the lr)", s->warmup_max_lr);
    AUTO(ZERO_AUTO_SCHED_WARMUP_NUM_STEPS, "scheduler.params.warmup_num_steps %lld", (long long)s->warmup_num_steps);
    AUTO(ZERO_AUTO_SCHED_WARMUP_TYPE, "scheduler.params.warmup_type %s", s->warmup_type_log ? "log" : "linear");
    AUTO(ZERO_AUTO_SCHED_TOTAL_NUM_STEPS, "scheduler.params.total_num_steps %lld (--steps)",
         (long long)s->total_num_steps);
    AUTO(ZERO_AUTO_SCHED_WARMUP_MIN_RATIO, "scheduler.params.warmup_min_ratio %g", s->warmup_min_ratio);
    AUTO(ZERO_AUTO_SCHED_COS_MIN_RATIO, "scheduler.params.cos_min_ratio %g", s->cos_min_ratio);
    AUTO(ZERO_AUTO_REDUCE_BUCKET, "zero_optimization.reduce_bucket_size %lld", (long long)c->reduce_bucket_size);
    AUTO(ZERO_AUTO_ALLGATHER_BUCKET, "zero_optimization.allgather_bucket_size %lld",
         (long long)c->allgather_bucket_size);
    AUTO(ZERO_AUTO_PREFETCH_BUCKET, "zero_optimization.stage3_prefetch_bucket_size %lld",
         (long long)c->prefetch_bucket_size);
    AUTO(ZERO_AUTO_PERSISTENCE_THRESHOLD, "zero_optimization.stage3_param_persistence_threshold %lld",
         (long long)c->param_persistence_threshold);
#undef AUTO
}

static int64_t period_of(const train_opts *o, const cJSON *doc) {
    if (o->ux.print_every > 0) return o->ux.print_every;
    const cJSON *v = at(doc, "steps_per_print");
    return v && cJSON_IsNumber(v) && o->cfg.steps_per_print > 0 ? o->cfg.steps_per_print : 1;
}

void ux_print_start(const train_opts *o, FILE *out, int world) {
    const zero_config *c = &o->cfg;
    cJSON *doc = config_doc(o);
    const int64_t global = c->micro_batch * c->grad_accum * world;
    line l = {{0}, 0};
    put(&l, "config: stage %d, %s, global batch %lld = %d rank%s x micro-batch %lld x accumulation %lld, %s lr %g",
        c->stage, zero_dtype_name(c->precision), (long long)global, world, world > 1 ? "s" : "",
        (long long)c->micro_batch, (long long)c->grad_accum, zero_optim_name(c->optim.type), (double)c->optim.lr);
    if (c->optim.type == ZERO_OPTIM_SGD) put(&l, " momentum %g", (double)c->optim.momentum);
    else put(&l, " betas [%g, %g]%s", (double)c->optim.beta1, (double)c->optim.beta2, "");
    if (c->optim.type == ZERO_OPTIM_ADAM || c->optim.type == ZERO_OPTIM_ADAMW) put(&l, " eps %g", (double)c->optim.eps);
    put(&l, " weight decay %g, ", (double)c->optim.weight_decay);
    if (c->sched_enabled)
        put(&l, "scheduler %s (warmup %lld steps)", zero_sched_name(c->sched.type),
            (long long)c->sched.warmup_num_steps);
    else put(&l, "constant lr");
    if (c->gradient_clipping > 0) put(&l, ", gradient clipping %g", c->gradient_clipping);
    else put(&l, ", no gradient clipping");
    if (c->precision == ZERO_DTYPE_FP16) {
        if (c->loss_scale > 0) put(&l, ", static loss scale %g", c->loss_scale);
        else put(&l, ", dynamic loss scale from 2^%d", c->initial_scale_power);
    }
    if (c->offload_optimizer.device != ZERO_OFFLOAD_NONE)
        put(&l, ", offload_optimizer %s", offload_name(c->offload_optimizer.device, o));
    if (c->offload_param.device != ZERO_OFFLOAD_NONE)
        put(&l, ", offload_param %s", offload_name(c->offload_param.device, o));
    put(&l, ", progress every %lld step%s", (long long)period_of(o, doc), period_of(o, doc) > 1 ? "s" : "");
    fprintf(out, "%s\n", l.s);

    /* what "auto" became: the bits of the file as loaded, the values as resolved */
    if (o->config) {
        zero_config raw;
        zero_config_default(&raw);
        if (zero_config_load_json_file(&raw, o->config, NULL) == ZERO_OK && raw.auto_fields) {
            line a = {{0}, 0};
            auto_values(o, raw.auto_fields, &a);
            if (a.n) fprintf(out, "config \"auto\": %s\n", a.s);
        }
    }
    /* zero's choices where the run leaves a key to its default and DeepSpeed's differs */
    line d = {{0}, 0};
    if (o->micro_batch <= 0 && !at(doc, "train_micro_batch_size_per_gpu") && !at(doc, "train_batch_size") &&
        !o->ux.batch_note[0] && c->micro_batch == 4)
        put(&d, "%smicro-batch 4 (DeepSpeed: 1)", d.n ? ", " : "");
    if (o->ux.print_every <= 0 && !at(doc, "steps_per_print"))
        put(&d, "%ssteps_per_print 1 (DeepSpeed: 10)", d.n ? ", " : "");
    if (c->stage == 3 && !at(doc, "zero_optimization.stage3_prefetch_bucket_size"))
        put(&d, "%sstage3_prefetch_bucket_size not given: the next unit only (DeepSpeed: 5e7 elements)",
            d.n ? ", " : "");
    if (d.n) fprintf(out, "defaults that differ from DeepSpeed's: %s\n", d.s);
    if (o->ux.batch_note[0]) fprintf(out, "resume: %s\n", o->ux.batch_note);
    if (o->ux.run_note[0]) fprintf(out, "resume: %s\n", o->ux.run_note);

    fflush(out); /* the warning follows these lines on a terminal */
    if (doc) {
        inert_list in;
        memset(&in, 0, sizeof in);
        find_inert(o, doc, &in);
        if (in.count) {
            line w = {{0}, 0};
            for (int r = 0; r < R_COUNT; r++)
                if (in.len[r]) put(&w, "%s%s (%s)", w.n ? "; " : "", in.text[r], reason_text[r]);
            fprintf(stderr, "zero: warning: %s: %d key%s accepted that change nothing in this run: %s\n", o->config,
                    in.count, in.count > 1 ? "s" : "", w.s);
        }
    }
    cJSON_Delete(doc);
    /* another run's checkpoints in --save: its step directories of the numbers this run saves
     * are replaced (docs/CHECKPOINT.md, step 9), as DeepSpeed's save of the same tag replaces it */
    char latest[PATH_MAX], step[64] = "";
    if (o->save && (!o->resume || !cli_path_within(o->resume, o->save)) &&
        (size_t)snprintf(latest, sizeof latest, "%s/latest", o->save) < sizeof latest) {
        FILE *f = fopen(latest, "r");
        if (f) {
            if (fgets(step, sizeof step, f)) step[strcspn(step, "\r\n")] = 0;
            fclose(f);
            /* the file's bytes are shown only when they are a step directory's name */
            if (strncmp(step, "step_", 5) != 0 || strspn(step + 5, "0123456789.") != strlen(step + 5)) step[0] = 0;
            fprintf(stderr,
                    "zero: warning: --save %s already holds a checkpoint (latest %s) that this run does not "
                    "resume: its saves replace the step directories of the same numbers (--resume %s continues it)\n",
                    o->save, step[0] ? step : "?", o->save);
        }
    }
}

/* ------------------------------------------------------------------ progress */

static const char *clock_of(double s, char *buf, size_t cap) {
    if (!(s >= 0) || !isfinite(s)) return snprintf(buf, cap, "?"), buf;
    const long long t = (long long)(s + 0.5);
    if (t >= 3600) snprintf(buf, cap, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(buf, cap, "%lld:%02lld", t / 60, t % 60);
    return buf;
}

/* Whether `out` reaches a terminal. A rank's stdout and stderr are whatever its MPI launcher made
 * of them: OpenMPI hands each rank a pseudo-terminal even when the user's output is a file, so
 * isatty() on a rank says nothing about the user's output. `--ranks N` tells its ranks what the
 * user's stdout and stderr are (CLI_TTY_ENV_OUT / _ERR, set by cli_launch_ranks); under a user's
 * own mpirun/srun nobody can tell, and a log must not fill with redraws: plain lines. */
static int reaches_terminal(FILE *out) {
    const char *term = getenv("TERM");
    if (term && !strcmp(term, "dumb")) return 0;
    const int fd = fileno(out);
    const char *told = fd == STDOUT_FILENO   ? getenv(CLI_TTY_ENV_OUT)
                       : fd == STDERR_FILENO ? getenv(CLI_TTY_ENV_ERR)
                                             : NULL;
    if (told) return !strcmp(told, "1");
    if (getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK")) return 0;
    return isatty(fd);
}

void ux_progress_begin(train_opts *o, FILE *out, int64_t first_step) {
    train_ux *u = &o->ux;
    cJSON *doc = config_doc(o);
    u->period = period_of(o, doc);
    cJSON_Delete(doc);
    u->out = out;
    u->tty = reaches_terminal(out);
    u->bar_drawn = 0;
    u->first_step = first_step;
    u->steps_run = u->skipped = 0;
    u->t_start = zero_now();
}

void ux_progress_clear(train_opts *o) {
    train_ux *u = &o->ux;
    if (!u->bar_drawn) return;
    fputs("\r\033[K", u->out);
    u->bar_drawn = 0;
}

void ux_progress_step(train_opts *o, const ux_step *s) {
    train_ux *u = &o->ux;
    u->steps_run++;
    u->skipped += s->skipped != 0;
    const double elapsed = zero_now() - u->t_start;
    const double eta = elapsed / (double)u->steps_run * (double)(o->steps - s->step);
    char el[32], et[32], mem[32];
    clock_of(elapsed, el, sizeof el);
    clock_of(eta, et, sizeof et);
    cli_fmt_bytes((double)s->mem_bytes, mem, sizeof mem);
    const int line_due = s->step % u->period == 0 || s->step == o->steps || s->has_val;
    ux_progress_clear(o);
    if (line_due) {
        fprintf(u->out, "step %lld/%lld | loss %.4f%s", (long long)s->step, (long long)o->steps, s->loss,
                s->skipped ? " (skipped)" : "");
        if (s->has_val) fprintf(u->out, " | val %.4f", s->val);
        fprintf(u->out, " | lr %.3g | grad norm %.4g", s->lr, s->grad_norm);
        if (o->cfg.precision == ZERO_DTYPE_FP16) fprintf(u->out, " | scale %g", s->loss_scale);
        fprintf(u->out, " | %.0f tok/s | %.0f ms/step | mem %s/rank", s->tokens_per_s, s->step_s * 1e3, mem);
        if (s->has_io) fprintf(u->out, " | io wait %.0f ms", s->io_wait_ms);
        fprintf(u->out, " | elapsed %s | ETA %s\n", el, et);
    }
    if (u->tty && s->step < o->steps) {
        enum { W = 30 };
        const double frac = o->steps > 0 ? (double)s->step / (double)o->steps : 1;
        char bar[W + 1];
        for (int k = 0; k < W; k++) bar[k] = k < (int)(frac * W) ? '#' : '.';
        bar[W] = 0;
        fprintf(u->out, "[%s] %lld/%lld %3.0f%% | loss %.4f | elapsed %s | ETA %s", bar, (long long)s->step,
                (long long)o->steps, 100 * frac, s->loss, el, et);
        u->bar_drawn = 1;
    }
    fflush(u->out);
}

void ux_progress_end(train_opts *o) {
    train_ux *u = &o->ux;
    ux_progress_clear(o);
    if (u->out) fflush(u->out);
    const zero_config *c = &o->cfg;
    /* A static scale never adapts: an overflow at every step means a run that does not train. */
    if (c->precision == ZERO_DTYPE_FP16 && c->loss_scale > 0 && u->steps_run > 0 && 2 * u->skipped > u->steps_run)
        fprintf(
            stderr,
            "zero: warning: the static fp16 loss scale %g skipped %lld of %lld steps (the scaled gradients overflowed; "
            "a skipped step does not update the model): lower fp16.loss_scale, or set it to 0 for a dynamic scale\n",
            c->loss_scale, (long long)u->skipped, (long long)u->steps_run);
}
