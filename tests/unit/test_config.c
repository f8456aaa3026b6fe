/* Tests of the config layer: DeepSpeed defaults, every error path of the loader (misspelling with
 * suggestion, wrong type, range, unsupported, malformed JSON with position, missing file), the
 * batch triple, "auto", combination checks, real DeepSpeed configs, and the JSON round trip. */
#include "harness.h"
#include "zero/zero.h"
#include "config/internal.h"

#include <errno.h>
#include <stdint.h>
#include <unistd.h>

/* ------------------------------------------------------------------ helpers */

/* Compares every field; names the first that differs in `why`. */
static int cfg_equal(const zero_config *a, const zero_config *b, char *why, size_t cap) {
#define F(f)                                                                                       \
    if (a->f != b->f) {                                                                            \
        snprintf(why, cap, "%s: %.17g != %.17g", #f, (double)a->f, (double)b->f);                  \
        return 0;                                                                                  \
    }
#define S(f)                                                                                       \
    if (strcmp(a->f, b->f)) {                                                                      \
        snprintf(why, cap, "%s: \"%.60s\" != \"%.60s\"", #f, a->f, b->f);                          \
        return 0;                                                                                  \
    }
#define OFFLOAD(o)                                                                                 \
    F(o.device) S(o.nvme_path) F(o.pin_memory) F(o.buffer_count) F(o.buffer_size) F(o.max_in_cpu) \
    F(o.pipeline_read) F(o.pipeline_write) F(o.ratio)
    F(train_batch_size) F(micro_batch) F(grad_accum) F(gradient_clipping) F(steps_per_print)
    F(wall_clock_breakdown)
    F(optim.type) F(optim.lr) F(optim.beta1) F(optim.beta2) F(optim.eps) F(optim.weight_decay)
    F(optim.momentum) F(optim.nesterov) F(optim.bias_correction)
    F(sched_enabled) F(sched.type) F(sched.warmup_min_lr) F(sched.warmup_max_lr) F(sched.warmup_num_steps)
    F(sched.warmup_type_log) F(sched.total_num_steps) F(sched.warmup_min_ratio) F(sched.cos_min_ratio)
    F(precision) F(loss_scale) F(initial_scale_power) F(loss_scale_window) F(hysteresis) F(min_loss_scale)
    F(consecutive_hysteresis)
    F(stage) F(contiguous_gradients) F(overlap_comm) F(reduce_scatter) F(allgather_partitions)
    F(round_robin_gradients) F(reduce_bucket_size) F(allgather_bucket_size) F(sub_group_size)
    F(prefetch_bucket_size) F(param_persistence_threshold) F(max_live_parameters) F(max_reuse_distance)
    F(gather_16bit_weights_on_model_save)
    F(hpz_partition_size)
    OFFLOAD(offload_optimizer) OFFLOAD(offload_param)
    F(aio_block_size) F(aio_queue_depth) F(aio_intra_op_parallelism) F(aio_single_submit)
    F(aio_overlap_events) F(check_divergence) F(reuse_buffers) F(align_bytes) F(auto_fields)
#undef F
#undef S
#undef OFFLOAD
    return 1;
}

/* Exact equality of floating-point values (float fields compared with the float literal). */
#define ZT_EQ_F(a, b)                                                                              \
    do {                                                                                           \
        double zt_a = (double)(a), zt_b = (double)(b);                                             \
        zt_checks++;                                                                               \
        if (zt_a != zt_b) ZT_FAIL("%s == %s: %.9g != %.9g", #a, #b, zt_a, zt_b);                   \
    } while (0)

#define ZT_CFG_EQ(a, b)                                                                            \
    do {                                                                                           \
        char zt_why[256] = "";                                                                     \
        zt_checks++;                                                                               \
        if (!cfg_equal((a), (b), zt_why, sizeof zt_why)) ZT_FAIL("configs differ: %s", zt_why);    \
    } while (0)

/* Loads json over the defaults and expects status st and a message containing each of the
 * (NULL-terminated) fragments; the config must stay at the defaults on error. */
static void expect_load(const char *json, zero_status st, const char *frag1, const char *frag2, int line) {
    zero_config cfg, def;
    zero_config_default(&cfg);
    zero_config_default(&def);
    zero_error err = {{0}};
    zero_status got = zero_config_load_json_string(&cfg, json, &err);
    zt_checks++;
    if (got != st) {
        ZT_FAIL("line %d: status %d (%s), expected %d; message: %s", line, got, zero_status_string(got), st, err.msg);
        return;
    }
    zt_checks++;
    if (frag1 && !strstr(err.msg, frag1)) ZT_FAIL("line %d: message \"%s\" lacks \"%s\"", line, err.msg, frag1);
    zt_checks++;
    if (frag2 && !strstr(err.msg, frag2)) ZT_FAIL("line %d: message \"%s\" lacks \"%s\"", line, err.msg, frag2);
    if (st != ZERO_OK) ZT_CFG_EQ(&cfg, &def);
}
#define EXPECT(json, st, f1, f2) expect_load(json, st, f1, f2, __LINE__)

static zero_status load(zero_config *cfg, const char *json, zero_error *err) {
    zero_config_default(cfg);
    return zero_config_load_json_string(cfg, json, err);
}

static const char *data_path(const char *name, char *buf, size_t cap) {
    const char *root = getenv("ZERO_SOURCE_DIR");
    snprintf(buf, cap, "%s/tests/data/configs/%s", root ? root : "..", name);
    return buf;
}

/* ------------------------------------------------------------------ defaults */

static void test_defaults(void) {
    zero_config c;
    memset(&c, 0x5a, sizeof c);
    zero_config_default(&c);
    ZT_EQ_INT(c.stage, 0);
    ZT_EQ_INT(c.precision, ZERO_DTYPE_FP32);
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_ADAMW);
    ZT_EQ_F(c.optim.lr, 1e-3f);
    ZT_EQ_F(c.optim.beta1, 0.9f);
    ZT_EQ_F(c.optim.beta2, 0.999f);
    ZT_EQ_F(c.optim.eps, 1e-8f);
    ZT_EQ_F(c.optim.weight_decay, 0.01f); /* zero_optim_hparams_default(AdamW), torch's default */
    ZT_EQ_INT(c.train_batch_size, 0);
    ZT_EQ_INT(c.micro_batch, 0);
    ZT_EQ_INT(c.grad_accum, 0);
    ZT_EQ_F(c.gradient_clipping, 0);
    ZT_EQ_INT(c.steps_per_print, 10);
    ZT_EQ_INT(c.sched_enabled, 0);
    ZT_EQ_INT(c.sched.warmup_num_steps, 1000);
    ZT_EQ_INT(c.sched.warmup_type_log, 1);
    ZT_EQ_F(c.sched.cos_min_ratio, 1e-4);
    ZT_EQ_F(c.sched.warmup_max_lr, 1e-3);
    ZT_EQ_F(c.sched.warmup_min_ratio, 0);
    ZT_EQ_F(c.loss_scale, 0);
    ZT_EQ_INT(c.initial_scale_power, 16);
    ZT_EQ_INT(c.loss_scale_window, 1000);
    ZT_EQ_INT(c.hysteresis, 2);
    ZT_EQ_F(c.min_loss_scale, 1);
    ZT_EQ_INT(c.consecutive_hysteresis, 0);
    ZT_EQ_INT(c.contiguous_gradients, 1);
    ZT_EQ_INT(c.overlap_comm, -1);
    ZT_EQ_INT(c.reduce_scatter, 1);
    ZT_EQ_INT(c.allgather_partitions, 1);
    ZT_EQ_INT(c.round_robin_gradients, 0);
    ZT_EQ_INT(c.reduce_bucket_size, 500000000);
    ZT_EQ_INT(c.allgather_bucket_size, 500000000);
    ZT_EQ_INT(c.sub_group_size, 1000000000);
    ZT_EQ_INT(c.prefetch_bucket_size, 50000000);
    ZT_EQ_INT(c.param_persistence_threshold, 100000);
    ZT_EQ_INT(c.max_live_parameters, 1000000000);
    ZT_EQ_INT(c.max_reuse_distance, 1000000000);
    ZT_EQ_INT(c.gather_16bit_weights_on_model_save, 0);
    ZT_EQ_INT(c.hpz_partition_size, 1);
    ZT_EQ_INT(c.offload_optimizer.device, ZERO_OFFLOAD_NONE);
    ZT_EQ_INT(c.offload_optimizer.buffer_count, 4);
    ZT_EQ_F(c.offload_optimizer.ratio, 1);
    ZT_EQ_INT(c.offload_param.device, ZERO_OFFLOAD_NONE);
    ZT_EQ_INT(c.offload_param.buffer_count, 5);
    ZT_EQ_INT(c.offload_param.buffer_size, 100000000);
    ZT_CHECK(!(c.set_fields & ZERO_SET_PARAM_BUFFER_SIZE)); /* absent: the buffers hold the largest shard */
    ZT_EQ_INT(c.offload_param.max_in_cpu, 1000000000);
    ZT_EQ_INT(c.offload_param.nvme_path[0], 0);
    ZT_EQ_INT(c.aio_block_size, 1048576);
    ZT_EQ_INT(c.aio_queue_depth, 8);
    ZT_EQ_INT(c.aio_intra_op_parallelism, 1);
    ZT_EQ_INT(c.aio_single_submit, 0);
    ZT_EQ_INT(c.aio_overlap_events, 1);
    ZT_EQ_INT(c.check_divergence, 1);
    ZT_EQ_INT(c.reuse_buffers, 1);
    ZT_EQ_INT(c.align_bytes, 64);
    ZT_EQ_INT(c.auto_fields, 0);
    /* an empty document changes nothing */
    zero_config d;
    zero_config_default(&d);
    ZT_OK(zero_config_load_json_string(&d, "{}", NULL));
    ZT_CFG_EQ(&c, &d);
}

/* ------------------------------------------------------------------ values land where they belong */

static void test_values(void) {
    zero_config c;
    zero_error err = {{0}};
    ZT_OK(load(&c,
               "{\"train_micro_batch_size_per_gpu\": 4, \"gradient_clipping\": 0.5, \"steps_per_print\": 7,"
               " \"wall_clock_breakdown\": true,"
               " \"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.1, \"momentum\": 0.9, \"nesterov\": true,"
               "   \"weight_decay\": 5e-4}},"
               " \"fp16\": {\"enabled\": true, \"loss_scale\": 128, \"initial_scale_power\": 12,"
               "   \"loss_scale_window\": 500, \"hysteresis\": 3, \"min_loss_scale\": 0.25, \"consecutive_hysteresis\": true},"
               " \"zero_optimization\": {\"stage\": 3, \"overlap_comm\": false, \"reduce_bucket_size\": 1e6,"
               "   \"stage3_max_live_parameters\": 3e8, \"stage3_prefetch_bucket_size\": 12345,"
               "   \"stage3_gather_fp16_weights_on_model_save\": true, \"sub_group_size\": 1e8,"
               "   \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/tmp/nv\", \"buffer_count\": 7,"
               "     \"buffer_size\": 2e7, \"max_in_cpu\": 0}},"
               " \"aio\": {\"block_size\": 8192, \"queue_depth\": 16, \"intra_op_parallelism\": 2,"
               "   \"single_submit\": true, \"overlap_events\": false},"
               " \"zero_extensions\": {\"check_divergence\": false, \"align_bytes\": 256}}",
               &err));
    ZT_CHECKF(err.msg[0] == 0, "unexpected message %s", err.msg);
    ZT_EQ_INT(c.micro_batch, 4);
    ZT_EQ_F(c.gradient_clipping, 0.5);
    ZT_EQ_INT(c.steps_per_print, 7);
    ZT_EQ_INT(c.wall_clock_breakdown, 1);
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_SGD);
    ZT_EQ_F(c.optim.lr, 0.1f);
    ZT_EQ_F(c.optim.momentum, 0.9f);
    ZT_EQ_INT(c.optim.nesterov, 1);
    ZT_EQ_F(c.optim.weight_decay, 5e-4f);
    ZT_EQ_INT(c.precision, ZERO_DTYPE_FP16);
    ZT_EQ_F(c.loss_scale, 128);
    ZT_EQ_INT(c.initial_scale_power, 12);
    ZT_EQ_INT(c.loss_scale_window, 500);
    ZT_EQ_INT(c.hysteresis, 3);
    ZT_EQ_F(c.min_loss_scale, 0.25);
    ZT_EQ_INT(c.consecutive_hysteresis, 1);
    ZT_EQ_INT(c.stage, 3);
    ZT_EQ_INT(c.overlap_comm, 0);
    ZT_EQ_INT(c.reduce_bucket_size, 1000000);
    ZT_EQ_INT(c.max_live_parameters, 300000000);
    ZT_EQ_INT(c.prefetch_bucket_size, 12345);
    ZT_EQ_INT(c.gather_16bit_weights_on_model_save, 1); /* the deprecated spelling lands on the same field */
    ZT_EQ_INT(c.sub_group_size, 100000000);
    ZT_EQ_INT(c.offload_param.device, ZERO_OFFLOAD_NVME);
    ZT_CHECK(!strcmp(c.offload_param.nvme_path, "/tmp/nv"));
    ZT_EQ_INT(c.offload_param.buffer_count, 7);
    ZT_EQ_INT(c.offload_param.buffer_size, 20000000);
    ZT_CHECK(c.set_fields & ZERO_SET_PARAM_BUFFER_SIZE); /* given: the engine holds shards to it */
    ZT_EQ_INT(c.offload_param.max_in_cpu, 0);
    ZT_EQ_INT(c.aio_block_size, 8192);
    ZT_EQ_INT(c.aio_queue_depth, 16);
    ZT_EQ_INT(c.aio_intra_op_parallelism, 2);
    ZT_EQ_INT(c.aio_single_submit, 1);
    ZT_EQ_INT(c.aio_overlap_events, 0);
    ZT_EQ_INT(c.check_divergence, 0);
    ZT_EQ_INT(c.align_bytes, 256);

    /* layering: a second document changes only what it names */
    ZT_OK(zero_config_load_json_string(&c, "{\"zero_optimization\": {\"stage\": 1}, \"bf16\": {\"enabled\": true}}", &err));
    ZT_EQ_INT(c.stage, 1);
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    ZT_EQ_INT(c.micro_batch, 4);
    ZT_EQ_INT(c.aio_queue_depth, 16);
    /* fp16.enabled false leaves bf16 alone; bf16.enabled false returns to fp32 */
    ZT_OK(zero_config_load_json_string(&c, "{\"fp16\": {\"enabled\": false}}", &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    ZT_OK(zero_config_load_json_string(&c, "{\"bf16\": {\"enabled\": false}}", &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_FP32);

    /* "bfloat16", DeepSpeed's old name of the bf16 section: read where "bf16" is absent (as
     * DeepSpeed's get_bfloat16_config does), refused beside it (DeepSpeed would ignore it there) */
    ZT_OK(zero_config_load_json_string(&c, "{\"bfloat16\": {\"enabled\": true}}", &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    ZT_OK(zero_config_load_json_string(&c, "{\"bfloat16\": {\"enabled\": false}}", &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_FP32);
    ZT_EQ_INT(zero_config_load_json_string(&c, "{\"bf16\": {\"enabled\": true}, \"bfloat16\": {\"enabled\": true}}", &err),
              ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "bfloat16") && strstr(err.msg, "the old name of \"bf16\", given beside it"), "%s", err.msg);
    ZT_EQ_INT(c.precision, ZERO_DTYPE_FP32); /* a refused document changes nothing */
    ZT_EQ_INT(zero_config_load_json_string(&c, "{\"bfloat16\": {\"enabld\": true}}", &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "bfloat16.enabld") && strstr(err.msg, "enabled"), "%s", err.msg);
    /* written back as "bf16" */
    ZT_OK(zero_config_load_json_string(&c, "{\"bfloat16\": {\"enabled\": true}}", &err));
    char *back = zero_config_to_json(&c);
    ZT_CHECKF(back && strstr(back, "\"bf16\"") && !strstr(back, "bfloat16"), "%s", back ? back : "");
    free(back);
    ZT_OK(zero_config_load_json_string(&c, "{\"bf16\": {\"enabled\": false}}", &err));

    /* aio.thread_count is DeepSpeed's older spelling of intra_op_parallelism */
    ZT_OK(load(&c, "{\"aio\": {\"thread_count\": 3}}", &err));
    ZT_EQ_INT(c.aio_intra_op_parallelism, 3);
    /* null where DeepSpeed's default is null */
    ZT_OK(load(&c, "{\"zero_optimization\": {\"offload_param\": null, \"offload_optimizer\": {\"nvme_path\": null},"
                   " \"zeropp_loco_param\": null}, \"communication_data_type\": null}", &err));
    ZT_EQ_INT(c.offload_param.device, ZERO_OFFLOAD_NONE);
    /* harmless keys accepted with no effect */
    ZT_OK(load(&c, "{\"dump_state\": true, \"memory_breakdown\": false, \"zero_allow_untested_optimizer\": true,"
                   " \"zero_optimization\": {\"ignore_unused_parameters\": false, \"memory_efficient_linear\": true,"
                   "   \"stage3_model_persistence_threshold\": 9223372036854775807, \"load_from_fp32_weights\": true},"
                   " \"prescale_gradients\": false, \"gradient_predivide_factor\": 1.0, \"sparse_gradients\": false,"
                   " \"activation_checkpointing\": {\"partition_activations\": false, \"number_checkpoints\": null},"
                   " \"wandb\": {\"enabled\": false, \"project\": \"x\"}, \"amp\": {\"enabled\": false, \"opt_level\": \"O1\"}}",
               &err));
    zero_config d;
    zero_config_default(&d);
    ZT_CFG_EQ(&c, &d);
    ZT_OK(load(&c, "\xEF\xBB\xBF{\"zero_optimization\": {\"stage\": 2}}", &err)); /* byte-order mark */
    ZT_EQ_INT(c.stage, 2);
}

/* ------------------------------------------------------------------ optimizer semantics */

static void test_optimizer(void) {
    zero_config c;
    zero_error err = {{0}};
    zero_optim_hparams h;
    /* DeepSpeed: "Adam" runs decoupled weight decay (adam_w_mode defaults to true) */
    ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"lr\": 2e-4, \"weight_decay\": 0.1}}}", &err));
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_ADAMW);
    ZT_EQ_F(c.optim.lr, 2e-4f);
    ZT_EQ_F(c.optim.weight_decay, 0.1f);
    ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false}}}", &err));
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_ADAM);
    ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"adam_w_mode\": false}}}", &err));
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_ADAMW); /* the name AdamW wins, as in DeepSpeed */
    /* DeepSpeed's Adam/AdamW default to no weight decay; case-insensitive names */
    ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"adamw\"}}", &err));
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_ADAMW);
    ZT_EQ_F(c.optim.weight_decay, 0.0f);
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    ZT_EQ_F(c.optim.lr, h.lr);
    ZT_EQ_F(c.optim.beta2, h.beta2);
    ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"Lion\", \"params\": {\"betas\": [0.95, 0.98], \"lr\": 1e-4}}}", &err));
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_LION);
    ZT_EQ_F(c.optim.beta1, 0.95f);
    ZT_EQ_F(c.optim.beta2, 0.98f);
    ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"Lion\"}}", &err));
    zero_optim_hparams_default(&h, ZERO_OPTIM_LION);
    ZT_EQ_F(c.optim.beta2, h.beta2); /* naming a type resets to that type's defaults */
    ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"bias_correction\": false, \"eps\": 1e-6,"
                   " \"torch_adam\": true, \"amsgrad\": false}}}", &err));
    ZT_EQ_INT(c.optim.bias_correction, 0);
    ZT_EQ_F(c.optim.eps, 1e-6f);

    EXPECT("{\"optimizer\": {\"params\": {\"lr\": 1}}}", ZERO_ERR_CONFIG, "optimizer.type: missing", NULL);
    EXPECT("{\"optimizer\": {\"type\": 3}}", ZERO_ERR_CONFIG, "optimizer.type: expected a string, found a number (3)", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"Lamb\"}}", ZERO_ERR_UNSUPPORTED, "optimizer.type: \"Lamb\" is not supported yet", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"OneBitAdam\"}}", ZERO_ERR_UNSUPPORTED, "not supported yet", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"Adamm\"}}", ZERO_ERR_CONFIG, "unknown optimizer \"Adamm\"", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"betas\": [0.9, 0.99]}}}", ZERO_ERR_CONFIG,
           "optimizer.params.betas: not a parameter of SGD", "AdamW, Adam, Lion");
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"momentum\": 0.9}}}", ZERO_ERR_CONFIG,
           "optimizer.params.momentum: not a parameter of AdamW (only SGD takes it)", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"max_grad_norm\": 1.0}}}", ZERO_ERR_CONFIG,
           "optimizer.params.max_grad_norm", "gradient_clipping");
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"amsgrad\": true}}}", ZERO_ERR_UNSUPPORTED,
           "optimizer.params.amsgrad: true is not supported yet (only false is accepted)", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"dampening\": 0.1}}}", ZERO_ERR_UNSUPPORTED,
           "optimizer.params.dampening: 0.1 is not supported yet (only 0 is accepted)", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"weight_decy\": 0.1}}}", ZERO_ERR_CONFIG,
           "unknown key \"optimizer.params.weight_decy\": did you mean \"optimizer.params.weight_decay\"?", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"param\": {}}}", ZERO_ERR_CONFIG,
           "did you mean \"optimizer.params\"?", NULL);
}

/* ------------------------------------------------------------------ errors */

static void test_unknown_keys(void) {
    /* the full message, exactly as the brief words it */
    zero_config c;
    zero_error err = {{0}};
    ZT_CHECK(load(&c, "{\"zero_optimization\": {\"stgae\": 2}}", &err) == ZERO_ERR_CONFIG);
    ZT_CHECKF(!strcmp(err.msg, "unknown key \"zero_optimization.stgae\": did you mean \"zero_optimization.stage\"?"),
              "message: %s", err.msg);
    EXPECT("{\"trian_batch_size\": 8}", ZERO_ERR_CONFIG,
           "unknown key \"trian_batch_size\": did you mean \"train_batch_size\"?", NULL);
    EXPECT("{\"gradient_acumulation_steps\": 2}", ZERO_ERR_CONFIG, "did you mean \"gradient_accumulation_steps\"?", NULL);
    EXPECT("{\"fp61\": {\"enabled\": true}}", ZERO_ERR_CONFIG, "did you mean \"fp16\"?", NULL);
    EXPECT("{\"zero_optimization\": {\"offload_param\": {\"devise\": \"cpu\"}}}", ZERO_ERR_CONFIG,
           "unknown key \"zero_optimization.offload_param.devise\": did you mean "
           "\"zero_optimization.offload_param.device\"?", NULL);
    EXPECT("{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 1e-3, \"warmup_num_step\": 10}}}",
           ZERO_ERR_CONFIG, "did you mean \"scheduler.params.warmup_num_steps\"?", NULL);
    /* a key at the wrong level: the same name elsewhere in the schema */
    EXPECT("{\"stage\": 2}", ZERO_ERR_CONFIG, "unknown key \"stage\": did you mean \"zero_optimization.stage\"?", NULL);
    EXPECT("{\"zero_optimization\": {\"lr\": 2}}", ZERO_ERR_CONFIG, "did you mean \"optimizer.params.lr\"?", NULL);
    /* nothing close */
    EXPECT("{\"foo\": 1}", ZERO_ERR_CONFIG, "unknown key \"foo\" (no known key at this level is close", NULL);
    EXPECT("{\"zero_optimization\": {\"completely_different\": 1}}", ZERO_ERR_CONFIG,
           "unknown key \"zero_optimization.completely_different\" (no known key", NULL);
    /* case matters for keys (as in DeepSpeed), but the suggestion finds it */
    EXPECT("{\"Train_Batch_Size\": 8}", ZERO_ERR_CONFIG, "did you mean \"train_batch_size\"?", NULL);
    EXPECT("{\"train_batch_size\": 8, \"train_batch_size\": 16}", ZERO_ERR_CONFIG,
           "the key \"train_batch_size\" appears twice in one object (first at byte 1)", NULL);
    /* a good key before the bad one is not applied: the config is unchanged (checked in EXPECT) */
    EXPECT("{\"train_batch_size\": 8, \"zero_optimization\": {\"stage\": 2, \"reduce_bucket_sz\": 5}}", ZERO_ERR_CONFIG,
           "did you mean \"zero_optimization.reduce_bucket_size\"?", NULL);
}

static void test_wrong_types(void) {
    /* a number as a string: DeepSpeed's pydantic sections coerce it (test_deepspeed_strings), its
     * plain keys do not */
    EXPECT("{\"train_batch_size\": \"8\"}", ZERO_ERR_CONFIG, "train_batch_size: expected an integer, found a string (\"8\")",
           NULL);
    EXPECT("{\"zero_optimization\": {\"stage\": \"three\"}}", ZERO_ERR_CONFIG,
           "zero_optimization.stage: expected an integer, found a string (\"three\")", NULL);
    EXPECT("{\"zero_optimization\": {\"stage\": \"3.0\"}}", ZERO_ERR_CONFIG,
           "zero_optimization.stage: expected an integer, found a string (\"3.0\")", NULL);
    EXPECT("{\"zero_optimization\": {\"stage\": \"auto\"}}", ZERO_ERR_CONFIG,
           "zero_optimization.stage: \"auto\" is not accepted for this key (expected an integer", NULL);
    /* 0 and 1 are DeepSpeed's booleans too (test_deepspeed_values); 2 is not */
    EXPECT("{\"zero_optimization\": {\"offload_param\": {\"pin_memory\": 2}}}", ZERO_ERR_CONFIG,
           "zero_optimization.offload_param.pin_memory: expected a boolean (true or false), found a number (2)", NULL);
    EXPECT("{\"zero_optimization\": {\"offload_param\": {\"pin_memory\": \"maybe\"}}}", ZERO_ERR_CONFIG,
           "zero_optimization.offload_param.pin_memory: expected a boolean (true or false), found a string (\"maybe\")", NULL);
    EXPECT("{\"wall_clock_breakdown\": \"true\"}", ZERO_ERR_CONFIG,
           "wall_clock_breakdown: expected a boolean (true or false), found a string (\"true\")", NULL);
    EXPECT("{\"train_batch_size\": 2.5}", ZERO_ERR_CONFIG, "train_batch_size: 2.5 is not an integer", NULL);
    EXPECT("{\"train_batch_size\": true}", ZERO_ERR_CONFIG, "train_batch_size: expected an integer, found a boolean (true)", NULL);
    EXPECT("{\"gradient_clipping\": [1]}", ZERO_ERR_CONFIG, "gradient_clipping: expected a number, found an array", NULL);
    EXPECT("{\"zero_optimization\": 3}", ZERO_ERR_CONFIG, "zero_optimization: expected an object, found a number (3)", NULL);
    EXPECT("{\"fp16\": {\"enabled\": \"sure\"}}", ZERO_ERR_CONFIG,
           "fp16.enabled: expected a boolean (true or false) or \"auto\", found a string (\"sure\")", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"betas\": 0.9}}}", ZERO_ERR_CONFIG,
           "optimizer.params.betas: expected an array of 2 numbers, found a number (0.9)", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"betas\": [0.9, \"x\"]}}}", ZERO_ERR_CONFIG,
           "optimizer.params.betas[1]: expected a number, found a string (\"x\")", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"betas\": [0.9, 0.99, 0.999]}}}", ZERO_ERR_CONFIG,
           "expected an array of 2 numbers, found an array", NULL);
    EXPECT("{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"gpu\"}}}", ZERO_ERR_CONFIG,
           "zero_optimization.offload_optimizer.device: expected \"none\", \"cpu\" or \"nvme\", found a string (\"gpu\")", NULL);
    EXPECT("{\"zero_optimization\": {\"offload_optimizer\": {\"nvme_path\": 5}}}", ZERO_ERR_CONFIG,
           "zero_optimization.offload_optimizer.nvme_path: expected a string", NULL);
    EXPECT("{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_type\": \"cosine\"}}}", ZERO_ERR_CONFIG,
           "scheduler.params.warmup_type: expected \"log\" or \"linear\", found a string (\"cosine\")", NULL);
    EXPECT("{\"zero_optimization\": {\"stage\": null}}", ZERO_ERR_CONFIG,
           "zero_optimization.stage: expected an integer, found null", NULL);
    EXPECT("{\"tensorboard\": {\"enabled\": 0.5}}", ZERO_ERR_CONFIG, "tensorboard.enabled: expected a boolean", NULL);
}

static void test_ranges(void) {
    EXPECT("{\"zero_optimization\": {\"stage\": 5}}", ZERO_ERR_CONFIG,
           "zero_optimization.stage: 5 is out of range (expected an integer in [0, 3])", NULL);
    EXPECT("{\"zero_optimization\": {\"stage\": -1}}", ZERO_ERR_CONFIG, "-1 is out of range", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": -0.001}}}", ZERO_ERR_CONFIG,
           "optimizer.params.lr: -0.001 is out of range (expected a number in [0, 10])", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1e39}}}", ZERO_ERR_CONFIG,
           "optimizer.params.lr: 1e+39 is out of range", NULL); /* beyond a float */
    /* every learning rate takes --lr's range, ZERO_LR_MAX (lr 1000 in fp16 overflowed every step
     * after the first and the run ended with exit 0) */
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 1000}}}", ZERO_ERR_CONFIG,
           "optimizer.params.lr: 1000 is out of range (expected a number in [0, 10])", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 10.5}}}", ZERO_ERR_CONFIG,
           "optimizer.params.lr: 10.5 is out of range (expected a number in [0, 10])", NULL);
    EXPECT("{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_max_lr\": 1000}}}", ZERO_ERR_CONFIG,
           "scheduler.params.warmup_max_lr: 1000 is out of range (expected a number in [0, 10])", NULL);
    EXPECT("{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"warmup_min_lr\": 11}}}", ZERO_ERR_CONFIG,
           "scheduler.params.warmup_min_lr: 11 is out of range (expected a number in [0, 10])", NULL);
    {
        zero_config c;
        zero_error err;
        ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": 10}}}", &err));
        ZT_EQ_F(c.optim.lr, (float)ZERO_LR_MAX); /* the bound itself is accepted, as by --lr */
    }
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"betas\": [0.9, 1.0]}}}", ZERO_ERR_CONFIG,
           "optimizer.params.betas[1]: 1 is out of range (expected a number in [0, 1))", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"betas\": [-0.1, 0.9]}}}", ZERO_ERR_CONFIG,
           "optimizer.params.betas[0]: -0.1 is out of range", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"momentum\": 1}}}", ZERO_ERR_CONFIG,
           "optimizer.params.momentum: 1 is out of range (expected a number in [0, 1))", NULL);
    EXPECT("{\"train_batch_size\": 0}", ZERO_ERR_CONFIG, "train_batch_size: 0 is out of range (expected an integer in [1, 2147483647])", NULL);
    EXPECT("{\"gradient_accumulation_steps\": -3}", ZERO_ERR_CONFIG, "gradient_accumulation_steps: -3 is out of range", NULL);
    EXPECT("{\"gradient_clipping\": -1}", ZERO_ERR_CONFIG, "gradient_clipping: -1 is out of range (expected a number >= 0)", NULL);
    EXPECT("{\"fp16\": {\"min_loss_scale\": 0}}", ZERO_ERR_CONFIG, "fp16.min_loss_scale: 0 is out of range (expected a number > 0)", NULL);
    EXPECT("{\"fp16\": {\"initial_scale_power\": 64}}", ZERO_ERR_CONFIG, "fp16.initial_scale_power: 64 is out of range", NULL);
    EXPECT("{\"aio\": {\"block_size\": 5000}}", ZERO_ERR_CONFIG, "aio.block_size: 5000 is not a multiple of 4096", NULL);
    EXPECT("{\"zero_extensions\": {\"align_bytes\": 96}}", ZERO_ERR_CONFIG, "zero_extensions.align_bytes: 96 is not a power of two", NULL);
    EXPECT("{\"zero_extensions\": {\"align_bytes\": 32}}", ZERO_ERR_CONFIG, "zero_extensions.align_bytes: 32 is out of range (expected an integer in [64, 1048576])", NULL);
    EXPECT("{\"zero_optimization\": {\"offload_optimizer\": {\"ratio\": 1.5}}}", ZERO_ERR_CONFIG,
           "zero_optimization.offload_optimizer.ratio: 1.5 is out of range (expected a number in [0, 1])", NULL);
    EXPECT("{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": 0}}}", ZERO_ERR_CONFIG,
           "scheduler.params.total_num_steps: 0 is out of range", NULL);
    EXPECT("{\"steps_per_print\": 1e300}", ZERO_ERR_CONFIG, "steps_per_print: 1e+300 is out of range", NULL);
    EXPECT("{\"zero_optimization\": {\"reduce_bucket_size\": 9.3e18}}", ZERO_ERR_CONFIG, "is out of range", NULL);
    char longpath[1200 + 64];
    int n = snprintf(longpath, sizeof longpath, "{\"zero_optimization\": {\"offload_param\": {\"nvme_path\": \"");
    memset(longpath + n, 'a', 1100);
    snprintf(longpath + n + 1100, sizeof longpath - n - 1100, "\"}}}");
    EXPECT(longpath, ZERO_ERR_CONFIG, "zero_optimization.offload_param.nvme_path: a path of 1100 bytes is too long", NULL);
}

static void test_unsupported(void) {
    EXPECT("{\"zero_optimization\": {\"zero_quantized_nontrainable_weights\": true}}", ZERO_ERR_UNSUPPORTED,
           "zero_optimization.zero_quantized_nontrainable_weights: true is not supported yet", NULL);
    EXPECT("{\"zero_optimization\": {\"zero_quantized_nontrainable_weights\": false}}", ZERO_OK, NULL, NULL);
    EXPECT("{\"zero_optimization\": {\"mics_hierarchical_params_gather\": true}}", ZERO_ERR_UNSUPPORTED,
           "zero_optimization.mics_hierarchical_params_gather: true is not supported yet", NULL);
    /* ZeRO++'s qwZ and qgZ: loaded; resolve checks them against the stage (test_engine_qwz) */
    EXPECT("{\"zero_optimization\": {\"zero_quantized_gradients\": true, \"zero_quantized_weights\": true}}", ZERO_OK,
           NULL, NULL);
    /* hpZ: the value is loaded; resolve checks it against the stage and the world (test_combinations) */
    EXPECT("{\"zero_optimization\": {\"zero_hpz_partition_size\": 4}}", ZERO_OK, NULL, NULL);
    EXPECT("{\"zero_optimization\": {\"zero_hpz_partition_size\": 1}}", ZERO_OK, NULL, NULL);
    EXPECT("{\"zero_optimization\": {\"zero_hpz_partition_size\": -1}}", ZERO_ERR_CONFIG,
           "zero_optimization.zero_hpz_partition_size: -1 is out of range (expected an integer >= 0)", NULL);
    EXPECT("{\"zero_optimization\": {\"zero_hpz_partition_size\": -2}}", ZERO_ERR_CONFIG,
           "zero_optimization.zero_hpz_partition_size: -2 is out of range", NULL);
    EXPECT("{\"zero_optimization\": {\"zero_hpz_partition_size\": 2.5}}", ZERO_ERR_CONFIG,
           "zero_optimization.zero_hpz_partition_size: 2.5 is not an integer", NULL);
    EXPECT("{\"zero_optimization\": {\"zero_hpz_partition_size\": \"2x\"}}", ZERO_ERR_CONFIG,
           "zero_optimization.zero_hpz_partition_size: expected an integer", NULL);
    EXPECT("{\"scheduler\": {\"type\": \"OneCycle\", \"params\": {\"cycle_min_lr\": 0}}}", ZERO_ERR_UNSUPPORTED,
           "scheduler.type: \"OneCycle\" is not supported yet", NULL);
    EXPECT("{\"scheduler\": {\"type\": \"Cosine\"}}", ZERO_ERR_CONFIG, "scheduler.type: unknown scheduler \"Cosine\"", NULL);
    EXPECT("{\"fp16\": {\"enabled\": true}, \"bf16\": {\"enabled\": true}}", ZERO_ERR_UNSUPPORTED,
           "fp16.enabled and bf16.enabled both true is not supported yet", NULL);
    EXPECT("{\"fp16\": {\"enabled\": true, \"auto_cast\": true}}", ZERO_ERR_UNSUPPORTED, "fp16.auto_cast: true is not supported yet", NULL);
    EXPECT("{\"csv_monitor\": {\"enabled\": true, \"output_path\": \"x\"}}", ZERO_ERR_UNSUPPORTED,
           "csv_monitor.enabled: true is not supported yet", "--log-json");
    EXPECT("{\"tensorboard\": {\"enabled\": true, \"output_pat\": \"x\"}}", ZERO_ERR_CONFIG,
           "unknown key \"tensorboard.output_pat\": did you mean \"tensorboard.output_path\"?", NULL);
    EXPECT("{\"zero_optimization\": {\"load_from_fp32_weights\": false}}", ZERO_ERR_UNSUPPORTED,
           "zero_optimization.load_from_fp32_weights: false is not supported yet (only true is accepted)", NULL);
    EXPECT("{\"zero_optimization\": {\"cpu_offload\": true}}", ZERO_ERR_UNSUPPORTED, "deprecated in DeepSpeed", NULL);
    EXPECT("{\"prescale_gradients\": true}", ZERO_ERR_UNSUPPORTED, "prescale_gradients: true is not supported yet", NULL);
    EXPECT("{\"gradient_predivide_factor\": 2}", ZERO_ERR_UNSUPPORTED, "gradient_predivide_factor: 2 is not supported yet", NULL);
    EXPECT("{\"communication_data_type\": \"fp16\"}", ZERO_ERR_UNSUPPORTED, "communication_data_type: a value other than null", NULL);
    EXPECT("{\"zero_optimization\": {\"offload_param\": {\"device\": \"hpu\"}}}", ZERO_ERR_UNSUPPORTED,
           "zero_optimization.offload_param.device: \"hpu\" is not supported yet", NULL);
    EXPECT("{\"activation_checkpointing\": {\"partition_activations\": true}}", ZERO_ERR_UNSUPPORTED,
           "activation_checkpointing.partition_activations: true is not supported yet", NULL);
    EXPECT("{\"aio\": {\"use_gds\": true}}", ZERO_ERR_UNSUPPORTED, "aio.use_gds: true is not supported yet", NULL);
    EXPECT("{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"last_batch_iteration\": 10}}}", ZERO_ERR_UNSUPPORTED,
           "scheduler.params.last_batch_iteration: 10 is not supported yet (only -1 is accepted)", NULL);
}

/* Values DeepSpeed accepts for keys zero reads (its pydantic schema: deepspeed/runtime/zero/config.py,
 * zero/offload_config.py, precision_config.py; docs/CONFIG.md lists the audit), each refused before. */
/* Strings where DeepSpeed's pydantic sections (zero_optimization with its offload sections, fp16,
 * bf16, tensorboard) coerce them: numbers and pydantic's boolean words. */
static void test_deepspeed_strings(void) {
    zero_config c;
    zero_error err = {{0}};
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": \"3\", \"reduce_bucket_size\": \"500000000\", "
                   "\"stage3_max_live_parameters\": \" 1000 \", \"overlap_comm\": \"false\", \"zero_hpz_partition_size\": \"2\", "
                   "\"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/n\", \"buffer_count\": \"7\", \"pin_memory\": \"off\"}, "
                   "\"offload_optimizer\": {\"pin_memory\": \"Yes\", \"ratio\": \"1\"}}, "
                   "\"fp16\": {\"enabled\": \"True\", \"loss_scale\": \"128\", \"initial_scale_power\": \"+12\", "
                   "\"min_loss_scale\": \"0.5\"}}",
               &err));
    ZT_EQ_INT(c.stage, 3);
    ZT_EQ_INT(c.reduce_bucket_size, 500000000);
    ZT_EQ_INT(c.max_live_parameters, 1000);
    ZT_EQ_INT(c.overlap_comm, 0);
    ZT_EQ_INT(c.hpz_partition_size, 2);
    ZT_EQ_INT(c.offload_param.buffer_count, 7);
    ZT_EQ_INT(c.offload_param.pin_memory, 0);
    ZT_EQ_INT(c.offload_optimizer.pin_memory, 1);
    ZT_EQ_INT(c.precision, ZERO_DTYPE_FP16);
    ZT_EQ_F(c.loss_scale, 128);
    ZT_EQ_INT(c.initial_scale_power, 12);
    ZT_EQ_F(c.min_loss_scale, 0.5);
    ZT_OK(load(&c, "{\"bf16\": {\"enabled\": \"1\"}, \"tensorboard\": {\"enabled\": \"no\"}}", &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    ZT_OK(load(&c, "{\"bfloat16\": {\"enabled\": \"on\"}}", &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    /* the coerced value is range-checked as a number is */
    EXPECT("{\"zero_optimization\": {\"stage\": \"4\"}}", ZERO_ERR_CONFIG,
           "zero_optimization.stage: 4 is out of range (expected an integer in [0, 3])", NULL);
    EXPECT("{\"zero_optimization\": {\"offload_optimizer\": {\"ratio\": \"0.5\"}}}", ZERO_ERR_UNSUPPORTED,
           "zero_optimization.offload_optimizer.ratio: 0.5 is not supported yet", NULL);
    /* an integer key takes digits only, as pydantic's int; a float key an exponent too */
    EXPECT("{\"zero_optimization\": {\"reduce_bucket_size\": \"5e8\"}}", ZERO_ERR_CONFIG,
           "zero_optimization.reduce_bucket_size: expected an integer, found a string (\"5e8\")", NULL);
    ZT_OK(load(&c, "{\"fp16\": {\"loss_scale\": \"1e3\"}}", &err));
    ZT_EQ_F(c.loss_scale, 1000);
    EXPECT("{\"fp16\": {\"loss_scale\": \"\"}}", ZERO_ERR_CONFIG, "fp16.loss_scale: expected a number, found a string", NULL);
    /* sections DeepSpeed reads as plain dicts keep JSON's types: aio, the optimizer's params */
    EXPECT("{\"aio\": {\"queue_depth\": \"8\"}}", ZERO_ERR_CONFIG, "aio.queue_depth: expected an integer, found a string", NULL);
    EXPECT("{\"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lr\": \"0.001\"}}}", ZERO_ERR_CONFIG,
           "optimizer.params.lr: expected a number, found a string (\"0.001\")", NULL);
    /* "auto" where the HF Trainer writes it: amp.enabled is off (true only for its apex backend) */
    ZT_OK(load(&c, "{\"amp\": {\"enabled\": \"auto\", \"opt_level\": \"auto\"}}", &err));
}

/* Keys of newer DeepSpeed versions (precision_config.py, zero/config.py, zero/offload_config.py):
 * each honoured, accepted as changing nothing, or refused as not supported yet. */
static void test_deepspeed_new_keys(void) {
    zero_config c;
    zero_error err = {{0}};
    /* accepted: their values change nothing zero computes (docs/CONFIG.md says why) */
    ZT_OK(load(&c, "{\"bf16\": {\"enabled\": true, \"immediate_grad_update\": true, \"check_grad_overflow\": true, "
                   "\"bf16_master_weights_and_grads\": false, \"bf16_optimizer_states\": false}, "
                   "\"zero_optimization\": {\"stage\": 3, \"stage3_allgather_sequential\": true, \"enable_sanity_checks\": true, "
                   "\"save_muon_momentum_buffer_in_memory\": true, \"leaf_module\": {\"classes\": [\"MixtralSparseMoeBlock\"]}, "
                   "\"zenflow\": null, \"log_trace_cache_warnings\": true, \"stage3_module_granularity_threshold\": 100, "
                   "\"zeropp_loco_param\": null, \"mics_shard_size\": -1, "
                   "\"offload_optimizer\": {\"device\": \"cpu\", \"super_offload\": false, \"cpuadam_cores_perc\": 0.5, "
                   "\"fast_init\": true, \"pipeline_read\": true, \"pipeline_write\": true}}}",
               &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    ZT_EQ_INT(c.stage, 3);
    /* refused: each named in the one error that lists a document's problems */
    EXPECT("{\"bf16\": {\"enabled\": true, \"check_grad_overflow\": false, \"bf16_master_weights_and_grads\": true, "
           "\"bf16_optimizer_states\": true}, \"zero_optimization\": {\"stage\": 3, \"zenflow\": {\"topk_ratio\": 0.1}, "
           "\"offload_optimizer\": {\"device\": \"cpu\", \"super_offload\": true, \"ratio\": 0.3}, \"mics_shard_size\": 8, "
           "\"zeropp_loco_param\": {\"err_beta\": 0.8}}}",
           ZERO_ERR_UNSUPPORTED, "8 problems: (1) bf16.check_grad_overflow: false is not supported yet (only true is accepted); "
                                 "zero always skips a step whose gradients are not finite",
           NULL);
    /* every one of them, listed whole by the file loader's report (the message holds what fits) */
    char path[] = "/tmp/zero_test_config_XXXXXX";
    const int fd = mkstemp(path);
    ZT_CHECKF(fd >= 0, "mkstemp");
    FILE *f = fdopen(fd, "w");
    fputs("{\"bf16\": {\"check_grad_overflow\": false, \"bf16_master_weights_and_grads\": true, \"bf16_optimizer_states\": true}, "
        "\"zero_optimization\": {\"zenflow\": {\"topk_ratio\": 0.1}, \"offload_optimizer\": {\"super_offload\": true, "
        "\"ratio\": 0.3}, \"mics_shard_size\": 8, \"zeropp_loco_param\": {\"err_beta\": 0.8}}}",
          f);
    fclose(f);
    char *all = NULL;
    zero_config_default(&c);
    ZT_EQ_INT(zero_config_load_json_file_report(&c, path, &all, &err), ZERO_ERR_UNSUPPORTED);
    unlink(path);
    ZT_CHECKF(all != NULL, "no report");
    if (!all) return;
    const char *named[] = {"bf16.check_grad_overflow", "bf16.bf16_master_weights_and_grads", "bf16.bf16_optimizer_states",
                           "zero_optimization.zenflow", "zero_optimization.offload_optimizer.super_offload",
                           "zero_optimization.offload_optimizer.ratio: 0.3", "zero_optimization.mics_shard_size: 8",
                           "zero_optimization.zeropp_loco_param"};
    for (size_t i = 0; i < sizeof named / sizeof named[0]; i++)
        ZT_CHECKF(strstr(all, named[i]) != NULL, "%s not named in: %s", named[i], all);
    free(all);
    /* types and ranges are DeepSpeed's */
    EXPECT("{\"zero_optimization\": {\"offload_optimizer\": {\"cpuadam_cores_perc\": 1.5}}}", ZERO_ERR_CONFIG,
           "zero_optimization.offload_optimizer.cpuadam_cores_perc: 1.5 is out of range (expected a number in [0, 1])", NULL);
    EXPECT("{\"zero_optimization\": {\"leaf_module\": [1]}}", ZERO_ERR_CONFIG,
           "zero_optimization.leaf_module: expected an object (PyTorch module classes and names) or null, found an array", NULL);
    EXPECT("{\"bf16\": {\"immediate_grad_update\": 3}}", ZERO_ERR_CONFIG,
           "bf16.immediate_grad_update: expected a boolean (true or false), found a number (3)", NULL);
}

static void test_deepspeed_values(void) {
    zero_config c;
    zero_error err = {{0}};
    /* booleans as 0 and 1 (pydantic coerces them; plain sections test their truth) */
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 2, \"overlap_comm\": 1, \"contiguous_gradients\": 0, "
                   "\"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": 1}}, "
                   "\"fp16\": {\"enabled\": 1, \"consecutive_hysteresis\": 1}, \"wall_clock_breakdown\": 1, "
                   "\"tensorboard\": {\"enabled\": 0}, \"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": 0}}}",
               &err));
    ZT_EQ_INT(c.overlap_comm, 1);
    ZT_EQ_INT(c.contiguous_gradients, 0);
    ZT_EQ_INT(c.offload_optimizer.pin_memory, 1);
    ZT_EQ_INT(c.precision, ZERO_DTYPE_FP16);
    ZT_EQ_INT(c.consecutive_hysteresis, 1);
    ZT_EQ_INT(c.wall_clock_breakdown, 1);
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_ADAM); /* adam_w_mode 0: the classic Adam, as false */
    ZT_OK(load(&c, "{\"bf16\": {\"enabled\": 1}}", &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    /* an off-only key takes its off value as a number; its on value stays "not supported yet" */
    EXPECT("{\"zero_optimization\": {\"zero_quantized_nontrainable_weights\": 0, \"load_from_fp32_weights\": 1}}", ZERO_OK, NULL, NULL);
    EXPECT("{\"zero_optimization\": {\"zero_quantized_nontrainable_weights\": 1}}", ZERO_ERR_UNSUPPORTED,
           "zero_optimization.zero_quantized_nontrainable_weights: true is not supported yet", NULL);
    /* Optional[bool] = None: null is the default (overlap_comm: on at stage 3 only) */
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 3, \"overlap_comm\": null, \"cpu_offload\": null, "
                   "\"cpu_offload_param\": null, \"cpu_offload_use_pin_memory\": null}}", &err));
    ZT_OK(zero_config_resolve(&c, 2, &err));
    ZT_EQ_INT(c.overlap_comm, 1);
    /* ge=0 sizes: 0 is a value; hpZ 0 is off, as 1 */
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 3, \"reduce_bucket_size\": 0, \"allgather_bucket_size\": 0, "
                   "\"sub_group_size\": 0, \"zero_hpz_partition_size\": 0, \"offload_optimizer\": {\"buffer_count\": 0}, "
                   "\"offload_param\": {\"buffer_count\": 0, \"buffer_size\": 0}}}", &err));
    ZT_EQ_INT(c.reduce_bucket_size, 0);
    ZT_EQ_INT(c.allgather_bucket_size, 0);
    ZT_EQ_INT(c.sub_group_size, 0);
    ZT_EQ_INT(c.hpz_partition_size, 1);
    ZT_EQ_INT(c.offload_param.buffer_size, 0);
    ZT_OK(zero_config_resolve(&c, 4, &err));
    /* numbers written as 5e8 and 1000.0 for integer keys are integers (as pydantic's int takes them) */
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 2.0, \"reduce_bucket_size\": 5e8, \"allgather_bucket_size\": 2e8}, "
                   "\"fp16\": {\"loss_scale_window\": 1000.0, \"hysteresis\": 2.0}, \"steps_per_print\": 1e1}", &err));
    ZT_EQ_INT(c.stage, 2);
    ZT_EQ_INT(c.reduce_bucket_size, 500000000);
    ZT_EQ_INT(c.allgather_bucket_size, 200000000);
    ZT_EQ_INT(c.loss_scale_window, 1000);
    ZT_EQ_INT(c.steps_per_print, 10);
    /* what DeepSpeed refuses too stays refused: a fraction for an integer, a negative size */
    EXPECT("{\"zero_optimization\": {\"reduce_bucket_size\": 5.5}}", ZERO_ERR_CONFIG, "5.5 is not an integer", NULL);
    EXPECT("{\"zero_optimization\": {\"sub_group_size\": -1}}", ZERO_ERR_CONFIG, "-1 is out of range", NULL);
}

/* Every problem of a document in one error, not one a run: five keys of a DeepSpeed config that
 * zero cannot take (two unknown, each with its nearest key; three unsupported) come back together
 * in document order, in err as many as fit and in full through zero_config_load_json_file_report. */
static void test_all_problems(void) {
    static const char *const want[] = {
        "unknown key \"zero_optimization.reduce_bucket_sz\": did you mean \"zero_optimization.reduce_bucket_size\"?",
        "zero_optimization.zero_quantized_nontrainable_weights: true is not supported yet (only false is accepted)",
        "csv_monitor.enabled: true is not supported yet (only false is accepted); zero writes its metrics with "
        "--log-json or to TensorBoard (tensorboard.enabled)",
        "unknown key \"optimizer.params.lrr\": did you mean \"optimizer.params.lr\"?",
        "communication_data_type: a value other than null is not supported yet (only null is accepted); zero "
        "communicates in the working precision and reduces gradients in fp32",
    };
    const char *json = "{\"train_batch_size\": 8,\n"
                       " \"zero_optimization\": {\"stage\": 2, \"reduce_bucket_sz\": 5e8, \"zero_quantized_nontrainable_weights\": true},\n"
                       " \"csv_monitor\": {\"enabled\": true},\n"
                       " \"optimizer\": {\"type\": \"AdamW\", \"params\": {\"lrr\": 1e-3}},\n"
                       " \"communication_data_type\": \"fp16\"}\n";
    char path[] = "/tmp/zero_test_config_XXXXXX";
    const int fd = mkstemp(path);
    ZT_CHECK(fd >= 0);
    if (fd < 0) return;
    ZT_CHECK(write(fd, json, strlen(json)) == (ssize_t)strlen(json));
    close(fd);
    zero_config c, def;
    zero_config_default(&def);
    zero_config_default(&c);
    zero_error err = {{0}};
    char *all = NULL;
    /* the first problem is an unknown key: its status, ZERO_ERR_CONFIG, is the document's */
    ZT_EQ_INT(zero_config_load_json_file_report(&c, path, &all, &err), ZERO_ERR_CONFIG);
    ZT_CFG_EQ(&c, &def); /* nothing of it applied */
    char full[2048];
    size_t n = 0;
    for (int i = 0; i < 5; i++) n += (size_t)snprintf(full + n, sizeof full - n, "%s\n", want[i]);
    ZT_CHECKF(all && !strcmp(all, full), "the list:\n%s\nexpected:\n%s", all ? all : "(null)", full);
    free(all);
    /* err: as many as fit in its 512 bytes, numbered, then how many more (the 5th does not fit) */
    char head[1024];
    snprintf(head, sizeof head, "5 problems: (1) %s; (2) %s; (3) %s; (4) %s (and 1 more)", want[0], want[1], want[2],
             want[3]);
    ZT_CHECKF(!strcmp(err.msg, head), "message:  %s\nexpected: %s", err.msg, head);
    /* the string loader the same; the status is the first problem's, whichever kind it is */
    zero_config_default(&c);
    ZT_EQ_INT(zero_config_load_json_string(&c, "{\"csv_monitor\": {\"enabled\": true}, \"foo\": 1}", &err),
              ZERO_ERR_UNSUPPORTED);
    ZT_CHECKF(!strcmp(err.msg, "2 problems: (1) csv_monitor.enabled: true is not supported yet (only false is "
                               "accepted); zero writes its metrics with --log-json or to TensorBoard "
                               "(tensorboard.enabled); (2) unknown key \"foo\" "
                               "(no known key at this level is close; docs/CONFIG.md lists them)"),
              "message: %s", err.msg);
    /* one problem: its own message, as before */
    EXPECT("{\"zero_optimization\": {\"stage\": 5}}", ZERO_ERR_CONFIG,
           "zero_optimization.stage: 5 is out of range (expected an integer in [0, 3])", NULL);
    /* a document that loads: no list */
    all = (char *)1;
    zero_config_default(&c);
    FILE *f = fopen(path, "w");
    ZT_CHECK(f != NULL);
    if (f) fputs("{\"zero_optimization\": {\"stage\": 2}}", f), fclose(f);
    ZT_OK(zero_config_load_json_file_report(&c, path, &all, &err));
    ZT_CHECK(all == NULL);
    ZT_EQ_INT(c.stage, 2);
    unlink(path);
    /* many problems: the count and the first ones, never past the message */
    char big[8192];
    n = (size_t)snprintf(big, sizeof big, "{");
    for (int i = 0; i < 40; i++) n += (size_t)snprintf(big + n, sizeof big - n, "%s\"bogus_key_%02d\": 1", i ? ", " : "", i);
    snprintf(big + n, sizeof big - n, "}");
    ZT_EQ_INT(zero_config_load_json_string(&c, big, &err), ZERO_ERR_CONFIG);
    const char *first = "40 problems: (1) unknown key \"bogus_key_00\" (no known key at this level is close";
    ZT_CHECKF(!strncmp(err.msg, first, strlen(first)) && strstr(err.msg, "; (5) unknown key \"bogus_key_04\"") &&
                  strstr(err.msg, "lists them) (and 35 more)") && strlen(err.msg) < sizeof err.msg - 1,
              "message: %s", err.msg);
}

/* Loads malformed text and checks the reported position: cJSON stops at the offending byte (the
 * first byte of `mark`) or just after it, and the line and column must match that byte, counted here. */
static void expect_malformed(const char *text, const char *mark, size_t want_line, int at) {
    zero_config c;
    zero_config_default(&c);
    zero_error err = {{0}};
    zt_checks++;
    if (zero_config_load_json_string(&c, text, &err) != ZERO_ERR_CONFIG) {
        ZT_FAIL("line %d: not rejected (%s)", at, err.msg);
        return;
    }
    size_t line, col, byte;
    const char *p = strstr(err.msg, "line "), *pc = strstr(err.msg, "at column ");
    zt_checks++;
    line = 1; /* a text of one line: no line number */
    if (!(p && sscanf(p, "line %zu, column %zu (byte %zu)", &line, &col, &byte) == 3) &&
        !(pc && sscanf(pc, "at column %zu (byte %zu)", &col, &byte) == 2)) {
        ZT_FAIL("line %d: no position in \"%s\"", at, err.msg);
        return;
    }
    size_t bad = (size_t)(strstr(text, mark) - text);
    ZT_CHECKF(byte == bad || byte == bad + 1, "line %d: byte %zu, the mistake is at %zu (%s)", at, byte, bad, err.msg);
    size_t l = 1, start = 0;
    for (size_t i = 0; i < byte; i++)
        if (text[i] == '\n') l++, start = i + 1;
    ZT_CHECKF(line == l && line == want_line, "line %d: line %zu, expected %zu", at, line, want_line);
    ZT_CHECKF(col == byte - start + 1, "line %d: column %zu, expected %zu", at, col, byte - start + 1);
    ZT_CHECKF(strstr(err.msg, mark) != NULL, "line %d: message \"%s\" does not show \"%s\"", at, err.msg, mark);
}

static void test_malformed(void) {
    expect_malformed("{\n  \"zero_optimization\": {\n    \"stage\": 2,\n    oops: 1\n  }\n}\n", "oops", 4, __LINE__);
    expect_malformed("{\"train_batch_size\": 8,}", "}", 1, __LINE__);
    expect_malformed("{\n\"a\": [1, 2,, 3]}", ",,", 2, __LINE__);
    expect_malformed("{\n\n\"a\": tru}", "tru}", 3, __LINE__);
    expect_malformed("{\"a\": \"unterminated}", "\"unterminated", 1, __LINE__);
    /* positions cJSON gives exactly: the end of a truncated text, trailing content, a missing ':' */
    EXPECT("{\"train_batch_size\": ", ZERO_ERR_CONFIG,
           "not valid JSON at column 22 (byte 21): the text ends where a value was expected, near "
           "\"{\"train_batch_size\": \"", NULL);
    EXPECT("", ZERO_ERR_CONFIG, "not valid JSON at column 1 (byte 0)", NULL);
    EXPECT("{} {}", ZERO_ERR_CONFIG, "not valid JSON at column 4 (byte 3): bytes after the JSON value", NULL); /* trailing content */
    EXPECT("[1, 2]", ZERO_ERR_CONFIG, "config: expected a JSON object at the top level, found an array", NULL);

    /* the file name leads the message */
    char path[] = "/tmp/zero_test_config_XXXXXX";
    int fd = mkstemp(path);
    ZT_CHECK(fd >= 0);
    if (fd >= 0) {
        const char *text = "{\n\"stage\" 3\n}";
        ZT_CHECK(write(fd, text, strlen(text)) == (ssize_t)strlen(text));
        close(fd);
        zero_config c;
        zero_config_default(&c);
        zero_error err = {{0}};
        ZT_EQ_INT(zero_config_load_json_file(&c, path, &err), ZERO_ERR_CONFIG);
        char want[160];
        snprintf(want, sizeof want, "%s: not valid JSON at line 2, column 9 (byte 10)", path);
        ZT_CHECKF(strstr(err.msg, want) != NULL, "message \"%s\" lacks \"%s\"", err.msg, want);
        unlink(path);
    }
}

static void test_files(void) {
    zero_config c;
    zero_error err = {{0}};
    zero_config_default(&c);
    const char *missing = "/nonexistent/dir/ds_config.json";
    ZT_EQ_INT(zero_config_load_json_file(&c, missing, &err), ZERO_ERR_IO);
    char want[256];
    snprintf(want, sizeof want, "cannot open config \"%s\": %s", missing, strerror(ENOENT));
    ZT_CHECKF(!strcmp(err.msg, want), "message: %s", err.msg);
    /* a directory opens but does not read */
    ZT_EQ_INT(zero_config_load_json_file(&c, "/tmp", &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "\"/tmp\"") && strstr(err.msg, strerror(EISDIR)), "message: %s", err.msg);

    char p[512];
    zero_config_default(&c);
    ZT_EQ_INT(zero_config_load_json_file(&c, data_path("misspelled.json", p, sizeof p), &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "unknown key \"zero_optimization.reduce_bucket_sz\": did you mean "
                              "\"zero_optimization.reduce_bucket_size\"?") != NULL, "message: %s", err.msg);
    ZT_EQ_INT(c.train_batch_size, 0); /* nothing of a rejected file is applied */

    ZT_EQ_INT(zero_config_load_json_file(NULL, p, &err), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_config_load_json_file(&c, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_config_load_json_string(&c, NULL, NULL), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_config_resolve(NULL, 1, NULL), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(zero_config_to_json(NULL) == NULL);
}

/* ------------------------------------------------------------------ batch triple */

static void test_batch(void) {
    struct {
        int64_t T, M, A;
        int world;
        zero_status st;
        int64_t eT, eM, eA; /* expected after resolve */
        const char *frag;
    } cases[] = {
        {32, 4, 2, 4, ZERO_OK, 32, 4, 2, NULL},
        {32, 4, 2, 3, ZERO_ERR_CONFIG, 0, 0, 0,
         "train_batch_size 32 != train_micro_batch_size_per_gpu 4 * gradient_accumulation_steps 2 * world size 3 (= 24)"},
        {32, 4, 0, 2, ZERO_OK, 32, 4, 4, NULL},
        {30, 4, 0, 2, ZERO_ERR_CONFIG, 0, 0, 0,
         "train_batch_size 30 is not divisible by train_micro_batch_size_per_gpu 4 * world size 2 (= 8)"},
        {48, 0, 4, 3, ZERO_OK, 48, 4, 4, NULL},
        {48, 0, 5, 3, ZERO_ERR_CONFIG, 0, 0, 0,
         "train_batch_size 48 is not divisible by gradient_accumulation_steps 5 * world size 3 (= 15)"},
        {0, 3, 5, 4, ZERO_OK, 60, 3, 5, NULL},
        {32, 0, 0, 4, ZERO_OK, 32, 8, 1, NULL},
        {33, 0, 0, 4, ZERO_ERR_CONFIG, 0, 0, 0, "train_batch_size 33 is not divisible by the world size 4"},
        {0, 6, 0, 2, ZERO_OK, 12, 6, 1, NULL},
        {0, 0, 7, 3, ZERO_OK, 21, 1, 7, NULL},
        {0, 0, 0, 5, ZERO_OK, 5, 1, 1, NULL},
        {0, 2147483647, 2147483647, 2147483647, ZERO_ERR_CONFIG, 0, 0, 0, "overflows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zero_config c;
        zero_config_default(&c);
        char json[256];
        int n = snprintf(json, sizeof json, "{");
        if (cases[i].T) n += snprintf(json + n, sizeof json - n, "\"train_batch_size\": %lld,", (long long)cases[i].T);
        if (cases[i].M)
            n += snprintf(json + n, sizeof json - n, "\"train_micro_batch_size_per_gpu\": %lld,", (long long)cases[i].M);
        if (cases[i].A)
            n += snprintf(json + n, sizeof json - n, "\"gradient_accumulation_steps\": %lld,", (long long)cases[i].A);
        snprintf(json + n, sizeof json - n, "\"steps_per_print\": 10}");
        zero_error err = {{0}};
        ZT_OK(zero_config_load_json_string(&c, json, &err));
        zero_config before = c;
        zero_status st = zero_config_resolve(&c, cases[i].world, &err);
        ZT_CHECKF(st == cases[i].st, "case %zu: status %d, expected %d (%s)", i, st, cases[i].st, err.msg);
        if (cases[i].st == ZERO_OK && st == ZERO_OK) {
            ZT_EQ_INT(c.train_batch_size, cases[i].eT);
            ZT_EQ_INT(c.micro_batch, cases[i].eM);
            ZT_EQ_INT(c.grad_accum, cases[i].eA);
            /* the invariant, computed here */
            ZT_EQ_INT(c.train_batch_size, c.micro_batch * c.grad_accum * cases[i].world);
            /* resolving again changes nothing */
            zero_config again = c;
            ZT_OK(zero_config_resolve(&again, cases[i].world, &err));
            ZT_CFG_EQ(&again, &c);
        } else if (cases[i].frag) {
            ZT_CHECKF(strstr(err.msg, cases[i].frag) != NULL, "case %zu: message \"%s\" lacks \"%s\"", i, err.msg,
                      cases[i].frag);
            ZT_CFG_EQ(&c, &before); /* a failed resolve leaves cfg alone */
        }
    }
    zero_config c;
    zero_config_default(&c);
    zero_error err = {{0}};
    ZT_EQ_INT(zero_config_resolve(&c, 0, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "world size 0") != NULL, "message: %s", err.msg);
}

/* ------------------------------------------------------------------ auto and resolve */

static int log_infos;
static char log_last[1024];
static void log_sink(void *ctx, zero_log_level level, const char *msg) {
    (void)ctx;
    if (level == ZERO_LOG_INFO) log_infos++;
    snprintf(log_last, sizeof log_last, "%s", msg);
}

static void test_auto_and_hf(void) {
    char p[512];
    zero_config c;
    zero_error err = {{0}};
    zero_config_default(&c);
    ZT_OK(zero_config_load_json_file(&c, data_path("hf_ds_config_zero3.json", p, sizeof p), &err));
    unsigned want = ZERO_AUTO_TRAIN_BATCH | ZERO_AUTO_MICRO_BATCH | ZERO_AUTO_GRAD_ACCUM | ZERO_AUTO_LR |
                    ZERO_AUTO_WEIGHT_DECAY | ZERO_AUTO_BETAS | ZERO_AUTO_EPS | ZERO_AUTO_CLIPPING |
                    ZERO_AUTO_PRECISION | ZERO_AUTO_SCHED | ZERO_AUTO_BUCKETS | ZERO_AUTO_SCHED_WARMUP_MIN_LR |
                    ZERO_AUTO_SCHED_WARMUP_MAX_LR | ZERO_AUTO_SCHED_WARMUP_NUM_STEPS | ZERO_AUTO_REDUCE_BUCKET |
                    ZERO_AUTO_PREFETCH_BUCKET | ZERO_AUTO_PERSISTENCE_THRESHOLD;
    ZT_CHECKF(c.auto_fields == want, "auto_fields 0x%x, expected 0x%x", c.auto_fields, want);
    ZT_EQ_INT(c.stage, 3);
    ZT_EQ_INT(c.offload_optimizer.device, ZERO_OFFLOAD_CPU);
    ZT_EQ_INT(c.offload_param.device, ZERO_OFFLOAD_CPU);
    ZT_EQ_INT(c.offload_param.pin_memory, 1);
    ZT_EQ_INT(c.overlap_comm, 1);
    ZT_EQ_INT(c.sub_group_size, 1000000000);
    ZT_EQ_INT(c.gather_16bit_weights_on_model_save, 1);
    ZT_EQ_INT(c.steps_per_print, 2000);
    ZT_EQ_INT(c.sched_enabled, 1);
    ZT_EQ_INT(c.sched.type, ZERO_SCHED_WARMUP_LR);

    /* to_json keeps the pending "auto" markers exactly */
    char *js = zero_config_to_json(&c);
    ZT_CHECK(js != NULL);
    if (js) {
        zero_config back;
        zero_config_default(&back);
        ZT_OK(zero_config_load_json_string(&back, js, &err));
        ZT_CFG_EQ(&back, &c);
        ZT_CHECK(strstr(js, "\"lr\":\t\"auto\"") != NULL);
        free(js);
    }

    /* a flag set by the caller before resolve is kept (the CLI: --lr) */
    c.optim.lr = 5e-4f;
    log_infos = 0;
    zero_log_set_callback(log_sink, NULL);
    zero_log_set_level(ZERO_LOG_INFO);
    ZT_OK(zero_config_resolve(&c, 2, &err));
    zero_log_set_callback(NULL, NULL);
    zero_log_set_level(ZERO_LOG_WARN);
    ZT_EQ_INT(log_infos, 2); /* offload "cpu" on a CPU rank: one line per section */
    ZT_CHECKF(strstr(log_last, "offload_param.device \"cpu\"") != NULL, "log: %s", log_last);
    ZT_EQ_INT(c.auto_fields, 0);
    ZT_EQ_INT(c.micro_batch, 1);
    ZT_EQ_INT(c.grad_accum, 1);
    ZT_EQ_INT(c.train_batch_size, 2);
    ZT_EQ_INT(c.precision, ZERO_DTYPE_FP32);
    ZT_EQ_F(c.optim.lr, 5e-4f);
    ZT_EQ_F(c.sched.warmup_max_lr, 5e-4f); /* "auto" warmup_max_lr follows the optimizer's lr */
    ZT_EQ_F(c.sched.warmup_min_lr, 0);
    ZT_EQ_INT(c.sched.warmup_num_steps, 1000);
    ZT_EQ_F(c.gradient_clipping, 0);
    ZT_EQ_F(c.optim.weight_decay, 0.0f);
    ZT_EQ_F(c.optim.eps, 1e-8f);
    ZT_EQ_INT(c.reduce_bucket_size, 500000000);
    ZT_EQ_INT(c.prefetch_bucket_size, 50000000);
    ZT_EQ_INT(c.param_persistence_threshold, 100000);

    /* resolved, it writes no "auto" and reads back equal */
    js = zero_config_to_json(&c);
    ZT_CHECK(js && !strstr(js, "auto"));
    if (js) {
        zero_config back;
        zero_config_default(&back);
        ZT_OK(zero_config_load_json_string(&back, js, &err));
        ZT_CFG_EQ(&back, &c);
        free(js);
    }

    /* "auto" with a value the other section decides: bf16 true, fp16 auto */
    ZT_OK(load(&c, "{\"fp16\": {\"enabled\": \"auto\"}, \"bf16\": {\"enabled\": true}}", &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    ZT_EQ_INT(c.auto_fields, ZERO_AUTO_PRECISION);
    js = zero_config_to_json(&c);
    if (js) {
        zero_config back;
        zero_config_default(&back);
        ZT_OK(zero_config_load_json_string(&back, js, &err));
        ZT_CFG_EQ(&back, &c);
        free(js);
    }
    ZT_OK(zero_config_resolve(&c, 1, &err));
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);

    /* total_num_steps "auto": the caller must fill it */
    ZT_OK(load(&c, "{\"scheduler\": {\"type\": \"WarmupDecayLR\", \"params\": {\"total_num_steps\": \"auto\","
                   " \"warmup_num_steps\": 10}}}", &err));
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "scheduler.params.total_num_steps: \"auto\" needs the run's number of steps") != NULL,
              "message: %s", err.msg);
    c.sched.total_num_steps = 500;
    ZT_OK(zero_config_resolve(&c, 1, &err));
    ZT_EQ_INT(c.sched.total_num_steps, 500);
    ZT_OK(load(&c, "{\"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"warmup_min_ratio\": 0.1}}}", &err));
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "scheduler.params.total_num_steps: required by WarmupCosineLR") != NULL, "message: %s",
              err.msg);
    /* "auto" only where DeepSpeed takes it */
    EXPECT("{\"zero_optimization\": {\"sub_group_size\": \"auto\"}}", ZERO_ERR_CONFIG, "\"auto\" is not accepted", NULL);
}

static void test_combinations(void) {
    zero_config c;
    zero_error err = {{0}};
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 2, \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/x\"}}}", &err));
    ZT_EQ_INT(zero_config_resolve(&c, 2, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "zero_optimization.offload_param.device: \"nvme\" needs zero_optimization.stage 3 (stage is 2)"),
              "message: %s", err.msg);
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 3, \"offload_param\": {\"device\": \"nvme\"}}}", &err));
    ZT_EQ_INT(zero_config_resolve(&c, 2, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "zero_optimization.offload_param.nvme_path: required when device is \"nvme\""),
              "message: %s", err.msg);
    ZT_OK(load(&c, "{\"zero_optimization\": {\"offload_optimizer\": {\"device\": \"cpu\"}}}", &err));
    ZT_EQ_INT(zero_config_resolve(&c, 2, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "offload_optimizer.device: \"cpu\" needs zero_optimization.stage 1, 2 or 3 (stage is 0)"),
              "message: %s", err.msg);
    /* partial offload is not implemented: the loader takes ratio 1 only, resolve refuses a field
     * a program set to anything else */
    ZT_EQ_INT(load(&c, "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\", "
                       "\"ratio\": 0.5}}}", &err), ZERO_ERR_UNSUPPORTED);
    ZT_CHECKF(!strcmp(err.msg, "zero_optimization.offload_optimizer.ratio: 0.5 is not supported yet (only 1 is accepted); "
                               "zero offloads all of the master and optimizer states"),
              "message: %s", err.msg);
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 3, \"offload_optimizer\": {\"device\": \"cpu\", \"ratio\": 1}}}",
               &err));
    c.offload_optimizer.ratio = 0.25;
    ZT_EQ_INT(zero_config_resolve(&c, 2, &err), ZERO_ERR_UNSUPPORTED);
    ZT_CHECKF(strstr(err.msg, "zero_optimization.offload_optimizer.ratio: 0.25 is not supported yet"), "message: %s", err.msg);
    ZT_OK(load(&c, "{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"nesterov\": true}}}", &err));
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "optimizer.params.nesterov: true needs optimizer.params.momentum > 0"), "message: %s", err.msg);

    /* hpZ: stage 3, a divisor of the world size, no parameter offload to NVMe (yet) */
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 2}}", &err));
    ZT_OK(zero_config_resolve(&c, 4, &err));
    ZT_EQ_INT(c.hpz_partition_size, 2);
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 4}}", &err));
    ZT_OK(zero_config_resolve(&c, 4, &err)); /* the whole world: accepted, changes nothing */
    const struct { const char *js; int world; zero_status st; const char *msg; } hpz[] = {
        {"{\"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 3}}", 4, ZERO_ERR_CONFIG,
         "zero_optimization.zero_hpz_partition_size: 3 does not divide the world size 4 (expected a divisor"},
        {"{\"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 8}}", 4, ZERO_ERR_CONFIG,
         "zero_optimization.zero_hpz_partition_size: 8 is larger than the world size 4"},
        {"{\"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 2}}", 1, ZERO_ERR_CONFIG,
         "zero_optimization.zero_hpz_partition_size: 2 is larger than the world size 1"},
        {"{\"zero_optimization\": {\"stage\": 2, \"zero_hpz_partition_size\": 2}}", 4, ZERO_ERR_CONFIG,
         "zero_optimization.zero_hpz_partition_size: 2 needs zero_optimization.stage 3 (stage is 2)"},
        {"{\"zero_optimization\": {\"stage\": 3, \"zero_hpz_partition_size\": 2, \"offload_param\": "
         "{\"device\": \"nvme\", \"nvme_path\": \"/x\"}}}", 4, ZERO_ERR_UNSUPPORTED,
         "zero_optimization.zero_hpz_partition_size: 2 with zero_optimization.offload_param.device \"nvme\" is not "
         "supported yet"},
    };
    for (size_t i = 0; i < sizeof hpz / sizeof hpz[0]; i++) {
        ZT_OK(load(&c, hpz[i].js, &err));
        zero_config before = c;
        ZT_EQ_INT(zero_config_resolve(&c, hpz[i].world, &err), hpz[i].st);
        ZT_CHECKF(strstr(err.msg, hpz[i].msg) != NULL, "message: %s", err.msg);
        ZT_CFG_EQ(&c, &before);
    }
    zero_config_default(&c);
    c.stage = 3;
    c.hpz_partition_size = -1; /* set by a program: the same key path */
    ZT_EQ_INT(zero_config_resolve(&c, 4, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "zero_optimization.zero_hpz_partition_size: -1 is out of range"), "message: %s", err.msg);

    /* overlap_comm: DeepSpeed's stage-dependent default, unless given */
    for (int stage = 0; stage <= 3; stage++) {
        char js[96];
        snprintf(js, sizeof js, "{\"zero_optimization\": {\"stage\": %d}}", stage);
        ZT_OK(load(&c, js, &err));
        ZT_OK(zero_config_resolve(&c, 1, &err));
        ZT_EQ_INT(c.overlap_comm, stage == 3);
    }
    ZT_OK(load(&c, "{\"zero_optimization\": {\"stage\": 3, \"overlap_comm\": false}}", &err));
    ZT_OK(zero_config_resolve(&c, 1, &err));
    ZT_EQ_INT(c.overlap_comm, 0);

    /* resolve checks values a program set directly, with the JSON key path */
    zero_config_default(&c);
    c.stage = 4;
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "zero_optimization.stage: 4 is out of range (expected an integer in [0, 3])"), "message: %s", err.msg);
    zero_config_default(&c);
    c.optim.beta2 = 1.0f;
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "optimizer.params.betas[1]: 1 is out of range"), "message: %s", err.msg);
    zero_config_default(&c);
    c.align_bytes = 100;
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "zero_extensions.align_bytes: 100 is not a power of two"), "message: %s", err.msg);
    zero_config_default(&c);
    c.precision = ZERO_DTYPE_INT32;
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "not a training precision"), "message: %s", err.msg);
    zero_config_default(&c);
    c.micro_batch = -2;
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "train_micro_batch_size_per_gpu: -2 is out of range"), "message: %s", err.msg);
    zero_config_default(&c);
    c.offload_param.device = (zero_offload_device)7;
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "zero_optimization.offload_param.device: device 7"), "message: %s", err.msg);
}

/* ------------------------------------------------------------------ real configs and round trips */

static void roundtrip(const zero_config *c, const char *what) {
    char *js = zero_config_to_json(c);
    zt_checks++;
    if (!js) {
        ZT_FAIL("%s: to_json returned NULL", what);
        return;
    }
    zero_config back;
    zero_config_default(&back);
    zero_error err = {{0}};
    zero_status st = zero_config_load_json_string(&back, js, &err);
    ZT_CHECKF(st == ZERO_OK, "%s: reload failed: %s\n%s", what, err.msg, js);
    char why[256] = "";
    zt_checks++;
    if (!cfg_equal(&back, c, why, sizeof why)) ZT_FAIL("%s: round trip differs: %s\n%s", what, why, js);
    free(js);
}

static void test_roundtrip(void) {
    char p[512];
    zero_config c;
    zero_error err = {{0}};

    zero_config_default(&c);
    roundtrip(&c, "defaults");
    ZT_OK(zero_config_resolve(&c, 3, &err));
    roundtrip(&c, "defaults resolved");

    zero_config_default(&c);
    ZT_OK(zero_config_load_json_file(&c, data_path("ds_config_zero2_nvme.json", p, sizeof p), &err));
    ZT_EQ_INT(c.train_batch_size, 48);
    ZT_EQ_INT(c.grad_accum, 4);
    ZT_EQ_INT(c.optim.type, ZERO_OPTIM_ADAMW);
    ZT_EQ_F(c.optim.beta2, 0.95f);
    ZT_EQ_INT(c.sched.type, ZERO_SCHED_WARMUP_DECAY_LR);
    ZT_EQ_INT(c.sched.warmup_type_log, 0);
    ZT_EQ_INT(c.sched.total_num_steps, 5000);
    ZT_EQ_INT(c.precision, ZERO_DTYPE_BF16);
    ZT_EQ_INT(c.offload_optimizer.device, ZERO_OFFLOAD_NVME);
    ZT_CHECK(!strcmp(c.offload_optimizer.nvme_path, "/local_nvme"));
    ZT_EQ_INT(c.allgather_bucket_size, 200000000);
    ZT_EQ_INT(c.round_robin_gradients, 1);
    ZT_EQ_INT(c.aio_block_size, 262144);
    ZT_EQ_INT(c.aio_queue_depth, 32);
    roundtrip(&c, "zero2 nvme");
    ZT_OK(zero_config_resolve(&c, 4, &err));
    ZT_EQ_INT(c.micro_batch, 3); /* 48 / (4 accum * 4 ranks) */
    roundtrip(&c, "zero2 nvme resolved");
    ZT_EQ_INT(zero_config_resolve(&c, 5, &err), ZERO_ERR_CONFIG); /* 48 != 3 * 4 * 5 */

    const char *docs[] = {
        "{\"optimizer\": {\"type\": \"Adam\", \"params\": {\"adam_w_mode\": false, \"lr\": 0.0123, \"betas\": [0.8, 0.9],"
        " \"eps\": 1e-7, \"weight_decay\": 0.05, \"bias_correction\": false}}}",
        "{\"optimizer\": {\"type\": \"SGD\", \"params\": {\"lr\": 0.3, \"momentum\": 0.9, \"nesterov\": true}},"
        " \"fp16\": {\"enabled\": true, \"loss_scale\": 0, \"initial_scale_power\": 20, \"consecutive_hysteresis\": true}}",
        "{\"optimizer\": {\"type\": \"Lion\", \"params\": {\"lr\": 3e-5, \"betas\": [0.9, 0.99], \"weight_decay\": 1.0}},"
        " \"scheduler\": {\"type\": \"WarmupCosineLR\", \"params\": {\"total_num_steps\": 100, \"warmup_min_ratio\": 0.01,"
        "  \"cos_min_ratio\": 0.1, \"warmup_num_steps\": 7, \"warmup_type\": \"log\"}}}",
        "{\"scheduler\": {\"type\": \"WarmupLR\", \"params\": {\"warmup_min_lr\": 1e-6, \"warmup_max_lr\": \"auto\","
        " \"warmup_type\": \"auto\"}}, \"gradient_clipping\": \"auto\", \"zero_optimization\": {\"stage\": 1,"
        " \"reduce_bucket_size\": 12345, \"allgather_bucket_size\": \"auto\"}}",
        "{\"zero_optimization\": {\"stage\": 3, \"contiguous_gradients\": false, \"reduce_scatter\": false,"
        " \"allgather_partitions\": false, \"stage3_max_reuse_distance\": 0, \"stage3_param_persistence_threshold\": 0,"
        " \"offload_param\": {\"device\": \"nvme\", \"nvme_path\": \"/mnt/nvme \\\"quoted\\\" dir\", \"buffer_count\": 9,"
        "  \"buffer_size\": 123456789, \"max_in_cpu\": 5},"
        " \"offload_optimizer\": {\"device\": \"nvme\", \"nvme_path\": \"/mnt/o\", \"pipeline_read\": true,"
        "  \"pipeline_write\": true, \"ratio\": 1}}, \"zero_extensions\": {\"check_divergence\": false, \"align_bytes\": 4096},"
        " \"aio\": {\"single_submit\": true, \"overlap_events\": false, \"intra_op_parallelism\": 4}}",
    };
    for (size_t i = 0; i < sizeof docs / sizeof docs[0]; i++) {
        char what[32];
        snprintf(what, sizeof what, "doc %zu", i);
        zero_status st = load(&c, docs[i], &err);
        ZT_CHECKF(st == ZERO_OK, "%s: %s", what, err.msg);
        roundtrip(&c, what);
        if (zero_config_resolve(&c, 2, &err) == ZERO_OK) {
            snprintf(what, sizeof what, "doc %zu resolved", i);
            roundtrip(&c, what);
        } else {
            ZT_FAIL("doc %zu: resolve failed: %s", i, err.msg);
        }
    }
    ZT_EQ_F(c.offload_optimizer.ratio, 1);
}

/* ------------------------------------------------------------------ suggestions */

/* zero_extensions.check_divergence takes a boolean or a mode; stage3_prefetch_bucket_size marks
 * itself as given (the engine's prefetch depth depends on it); both round-trip. */
/* tensorboard: DeepSpeed's three keys are read (the trainer writes output_path/job_name); a config
 * without the section writes none, one with it writes it back; a name too long is refused. */
static void test_tensorboard(void) {
    zero_config c, d;
    zero_error err = {{0}};
    zero_config_default(&c);
    char *j = zero_config_to_json(&c);
    ZT_CHECKF(j && !strstr(j, "tensorboard"), "defaults wrote a tensorboard section: %s", j ? j : "(null)");
    free(j);
    ZT_OK(zero_config_load_json_string(
        &c, "{\"tensorboard\": {\"enabled\": true, \"output_path\": \"runs/x\", \"job_name\": \"ft\"}}", &err));
    ZT_EQ_INT(c.tensorboard.enabled, 1);
    ZT_CHECK(!strcmp(c.tensorboard.output_path, "runs/x") && !strcmp(c.tensorboard.job_name, "ft"));
    roundtrip(&c, "tensorboard");
    j = zero_config_to_json(&c);
    zero_config_default(&d);
    ZT_OK(zero_config_load_json_string(&d, j, &err));
    ZT_CFG_EQ(&c, &d);
    free(j);
    zero_config_default(&c);
    ZT_OK(zero_config_load_json_string(&c, "{\"tensorboard\": null}", &err));
    ZT_OK(zero_config_load_json_string(&c, "{\"tensorboard\": {\"enabled\": false, \"job_name\": \"a\"}}", &err));
    ZT_EQ_INT(c.tensorboard.enabled, 0);
    char big[400];
    snprintf(big, sizeof big, "{\"tensorboard\": {\"job_name\": \"%0300d\"}}", 0);
    ZT_EQ_INT(zero_config_load_json_string(&c, big, &err), ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "tensorboard.job_name: a name of 300 bytes is too long (expected at most 255)"), "%s",
              err.msg);
    ZT_EQ_INT(zero_config_load_json_string(&c, "{\"tensorboard\": {\"output_path\": 3}}", &err), ZERO_ERR_CONFIG);
}

static void test_engine_modes(void) {
    zero_config c;
    zero_error err = {{0}};
    zero_config_default(&c);
    ZT_EQ_INT(c.check_divergence, ZERO_DIVERGENCE_STEP);
    ZT_EQ_INT(c.set_fields, 0);
    const char *modes[4] = {"true", "false", "\"step\"", "\"collective\""};
    const int want[4] = {ZERO_DIVERGENCE_STEP, ZERO_DIVERGENCE_OFF, ZERO_DIVERGENCE_STEP, ZERO_DIVERGENCE_COLLECTIVE};
    for (int i = 0; i < 4; i++) {
        char js[128];
        snprintf(js, sizeof js, "{\"zero_extensions\": {\"check_divergence\": %s}}", modes[i]);
        zero_config_default(&c);
        ZT_OK(zero_config_load_json_string(&c, js, &err));
        ZT_EQ_INT(c.check_divergence, want[i]);
        roundtrip(&c, modes[i]);
    }
    zero_config_default(&c);
    ZT_EQ_INT(zero_config_load_json_string(&c, "{\"zero_extensions\": {\"check_divergence\": \"always\"}}", &err),
              ZERO_ERR_CONFIG);
    ZT_CHECKF(strstr(err.msg, "zero_extensions.check_divergence") && strstr(err.msg, "\"collective\""), "%s", err.msg);
    c.check_divergence = 7;
    ZT_EQ_INT(zero_config_resolve(&c, 1, &err), ZERO_ERR_CONFIG);
    zero_config_default(&c);
    ZT_OK(zero_config_load_json_string(&c, "{\"zero_optimization\": {\"stage3_prefetch_bucket_size\": 12345}}", &err));
    ZT_EQ_INT(c.set_fields, ZERO_SET_PREFETCH_BUCKET);
    ZT_EQ_INT(c.prefetch_bucket_size, 12345);
    roundtrip(&c, "prefetch bucket given");
    char *js = zero_config_to_json(&c);
    ZT_CHECK(js && strstr(js, "stage3_prefetch_bucket_size"));
    free(js);
    zero_config_default(&c); /* not given: not written, so it reads back as not given */
    js = zero_config_to_json(&c);
    ZT_CHECK(js && !strstr(js, "stage3_prefetch_bucket_size"));
    free(js);
}

static void test_edit_distance(void) {
    ZT_EQ_INT(zero__zc_edit_distance("stgae", "stage"), 1); /* one transposition */
    ZT_EQ_INT(zero__zc_edit_distance("kitten", "sitting"), 3);
    ZT_EQ_INT(zero__zc_edit_distance("", "abc"), 3);
    ZT_EQ_INT(zero__zc_edit_distance("abc", ""), 3);
    ZT_EQ_INT(zero__zc_edit_distance("Stage", "stage"), 0);
    ZT_EQ_INT(zero__zc_edit_distance("ca", "abc"), 3); /* OSA, not full Damerau (which gives 2) */
    ZT_EQ_INT(zero__zc_edit_distance("reduce_bucket_sz", "reduce_bucket_size"), 2);
}

int main(void) {
    test_defaults();
    test_values();
    test_optimizer();
    test_unknown_keys();
    test_wrong_types();
    test_ranges();
    test_unsupported();
    test_all_problems();
    test_deepspeed_values();
    test_deepspeed_strings();
    test_deepspeed_new_keys();
    test_malformed();
    test_files();
    test_batch();
    test_auto_and_hf();
    test_combinations();
    test_roundtrip();
    test_tensorboard();
    test_edit_distance();
    test_engine_modes();
    return zt_finish("test_config");
}
