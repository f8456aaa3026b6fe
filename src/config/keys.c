/* The key schema: every DeepSpeed key zero knows, where it lands in zero_config, its type, range,
 * whether it takes "auto", and the known keys zero does not implement yet. docs/CONFIG.md mirrors it. */
#include "config/internal.h"

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define OFF(f) offsetof(zero_config, f)
#define OT(t) (1u << (t))
#define ADAM_FAMILY (OT(ZERO_OPTIM_ADAMW) | OT(ZERO_OPTIM_ADAM))
#define WARMUP_ALL (OT(ZERO_SCHED_WARMUP_LR) | OT(ZERO_SCHED_WARMUP_DECAY_LR) | OT(ZERO_SCHED_WARMUP_COSINE_LR))

/* DeepSpeed's spellings, indexed by zero_optim_type / zero_sched_type (what to_json writes). */
static const char *const optim_names[] = {"AdamW", "Adam", "SGD", "Lion"};
static const char *const sched_names[] = {"constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};
enum { N_OPTIM = 4, N_SCHED = 4 };

/* DeepSpeed optimizers and schedules that zero knows of but does not implement yet. */
static const char *const optim_unsupported[] = {"OneBitAdam", "OneBitLamb", "ZeroOneAdam", "Lamb", "FusedLamb",
                                                "Adagrad", "MuAdam", "MuAdamW", "MuSGD", "Adafactor", NULL};
static const char *const sched_unsupported[] = {"OneCycle", "LRRangeTest", NULL};

static int in_list(const char *const *list, const char *s) {
    for (; *list; list++)
        if (!strcasecmp(*list, s)) return 1;
    return 0;
}

/* ------------------------------------------------------------------ small custom entries */

static zero_status load_noop(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)c, (void)k, (void)v, (void)cfg;
    return ZERO_OK; /* read by the section's own loader */
}

/* Keys whose DeepSpeed default is null and whose other values zero does not implement. */
static zero_status load_null_only(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)cfg;
    if (cJSON_IsNull(v)) return ZERO_OK;
    return zero__zc_fail(c, ZERO_ERR_UNSUPPORTED, "a value other than null is not supported yet (only null is accepted)%s%s",
                         k->hint ? "; " : "", k->hint ? k->hint : "");
}

/* Monitoring and similar sections: accepted while "enabled" is false or absent; their other
 * keys are not read (they only matter when the section is enabled). */
static zero_status load_section_off(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)cfg;
    if (cJSON_IsNull(v)) return ZERO_OK;
    if (!cJSON_IsObject(v)) return zero__zc_type_error(c, "an object", v);
    const cJSON *en = cJSON_GetObjectItemCaseSensitive(v, "enabled");
    if (!en) return ZERO_OK;
    size_t old = zero__zc_push(c, "enabled");
    zero_status st = ZERO_OK;
    int on = 0;
    /* "auto": the HF Trainer writes it for amp.enabled and fills true only for its apex backend,
     * which zero has not: off */
    if (zero__zc_is_auto(en)) on = 0;
    else if (!zero__zc_bool(en, &on)) st = zero__zc_type_error(c, "a boolean (true or false)", en);
    else if (on)
        st = zero__zc_fail(c, ZERO_ERR_UNSUPPORTED, "true is not supported yet (only false is accepted)%s%s",
                           k->hint ? "; " : "", k->hint ? k->hint : "");
    zero__zc_pop(c, old);
    return st;
}

static zero_status load_null_or_int(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k, (void)cfg;
    if (cJSON_IsNull(v)) return ZERO_OK;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 0)
        return zero__zc_type_error(c, "null or an integer >= 0", v);
    return ZERO_OK;
}

static zero_status load_max_grad_norm(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k, (void)v, (void)cfg;
    return zero__zc_fail(c, ZERO_ERR_CONFIG,
                         "not an optimizer parameter (DeepSpeed rejects it too): use the top-level \"gradient_clipping\"");
}

static zero_status load_adam_w_mode(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k, (void)cfg;
    if (!zero__zc_bool(v, &c->adam_w_mode)) return zero__zc_type_error(c, "a boolean (true or false)", v);
    return ZERO_OK;
}

/* ------------------------------------------------------------------ betas */

static const zc_key beta_key = {.name = "beta", .kind = ZC_F32, .flags = ZC_HI_OPEN, .lo = 0, .hi = 1};

static zero_status load_betas(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    if (!cJSON_IsArray(v) || cJSON_GetArraySize(v) != 2) return zero__zc_type_error(c, "an array of 2 numbers", v);
    double b[2];
    for (int i = 0; i < 2; i++) {
        const cJSON *e = cJSON_GetArrayItem(v, i);
        size_t old = zero__zc_push_index(c, i);
        zero_status st = cJSON_IsNumber(e) ? zero__zc_check_number(c, &beta_key, e->valuedouble)
                                           : zero__zc_type_error(c, "a number", e);
        zero__zc_pop(c, old);
        if (st) return st;
        b[i] = e->valuedouble;
    }
    cfg->optim.beta1 = (float)b[0];
    cfg->optim.beta2 = (float)b[1];
    return ZERO_OK;
}

static zero_status check_betas(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    const float b[2] = {cfg->optim.beta1, cfg->optim.beta2};
    for (int i = 0; i < 2; i++) {
        size_t old = zero__zc_push_index(c, i);
        zero_status st = zero__zc_check_number(c, &beta_key, b[i]);
        zero__zc_pop(c, old);
        if (st) return st;
    }
    return ZERO_OK;
}

static int save_betas(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (cfg->auto_fields & k->auto_bit) return cJSON_AddStringToObject(parent, k->name, "auto") ? 0 : -1;
    const double b[2] = {cfg->optim.beta1, cfg->optim.beta2};
    cJSON *a = cJSON_CreateDoubleArray(b, 2);
    if (!a) return -1;
    cJSON_AddItemToObject(parent, k->name, a);
    return 0;
}

/* ------------------------------------------------------------------ warmup_type */

static zero_status load_warmup_type(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "log")) cfg->sched.warmup_type_log = 1;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "linear")) cfg->sched.warmup_type_log = 0;
    else return zero__zc_type_error(c, "\"log\" or \"linear\"", v);
    return ZERO_OK;
}

static zero_status check_warmup_type(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (cfg->sched.warmup_type_log == 0 || cfg->sched.warmup_type_log == 1) return ZERO_OK;
    return zero__zc_fail(c, ZERO_ERR_CONFIG, "warmup_type_log %d: expected 1 (\"log\") or 0 (\"linear\")",
                         cfg->sched.warmup_type_log);
}

static int save_warmup_type(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    const char *s = (cfg->auto_fields & k->auto_bit) ? "auto" : cfg->sched.warmup_type_log ? "log" : "linear";
    return cJSON_AddStringToObject(parent, k->name, s) ? 0 : -1;
}

/* ------------------------------------------------------------------ offload device and path */

static const char *const device_names[] = {"none", "cpu", "nvme"};

static zero_status load_device(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    zero_offload_device *d = (zero_offload_device *)((char *)cfg + k->off);
    if (cJSON_IsString(v)) {
        for (int i = 0; i < 3; i++) {
            if (!strcasecmp(v->valuestring, device_names[i])) {
                *d = (zero_offload_device)i;
                return ZERO_OK;
            }
        }
        if (!strcasecmp(v->valuestring, "hpu"))
            return zero__zc_fail(c, ZERO_ERR_UNSUPPORTED, "\"hpu\" is not supported yet (expected \"none\", \"cpu\" or \"nvme\")");
    }
    return zero__zc_type_error(c, "\"none\", \"cpu\" or \"nvme\"", v);
}

static zero_status check_device(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    int d = (int)*(const zero_offload_device *)((const char *)cfg + k->off);
    if (d >= 0 && d < 3) return ZERO_OK;
    return zero__zc_fail(c, ZERO_ERR_CONFIG, "device %d: expected ZERO_OFFLOAD_NONE, _CPU or _NVME (0, 1, 2)", d);
}

static int save_device(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    int d = (int)*(const zero_offload_device *)((const char *)cfg + k->off);
    return cJSON_AddStringToObject(parent, k->name, device_names[d >= 0 && d < 3 ? d : 0]) ? 0 : -1;
}

static zero_status load_path(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    char *dst = (char *)cfg + k->off;
    if (!cJSON_IsString(v)) return zero__zc_type_error(c, "a string (a directory)", v);
    size_t n = strlen(v->valuestring);
    if (n >= sizeof cfg->offload_param.nvme_path)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "a path of %zu bytes is too long (expected at most %zu)", n,
                             sizeof cfg->offload_param.nvme_path - 1);
    memcpy(dst, v->valuestring, n + 1);
    return ZERO_OK;
}

static zero_status check_path(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    const char *p = (const char *)cfg + k->off;
    if (memchr(p, '\0', sizeof cfg->offload_param.nvme_path)) return ZERO_OK;
    return zero__zc_fail(c, ZERO_ERR_CONFIG, "not NUL-terminated within %zu bytes", sizeof cfg->offload_param.nvme_path);
}

static int save_path(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    const char *p = (const char *)cfg + k->off;
    if (!p[0]) return 0;
    return cJSON_AddStringToObject(parent, k->name, p) ? 0 : -1;
}

/* ------------------------------------------------------------------ fp16 / bf16 enabled */

static zero_status load_fp16_enabled(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k, (void)cfg;
    if (!zero__zc_lax_bool(c, v, &c->fp16_on)) return zero__zc_type_error(c, "a boolean (true or false) or \"auto\"", v);
    return ZERO_OK;
}

static zero_status load_bf16_enabled(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k, (void)cfg;
    if (!zero__zc_lax_bool(c, v, &c->bf16_on)) return zero__zc_type_error(c, "a boolean (true or false) or \"auto\"", v);
    return ZERO_OK;
}

/* With "auto" pending, the section that holds the precision writes true and the other "auto",
 * so that loading it back gives the same precision and the same bit. */
static int save_enabled(const zero_config *cfg, zero_dtype mine, cJSON *parent) {
    if ((cfg->auto_fields & ZERO_AUTO_PRECISION) && cfg->precision != mine)
        return cJSON_AddStringToObject(parent, "enabled", "auto") ? 0 : -1;
    return cJSON_AddBoolToObject(parent, "enabled", cfg->precision == mine) ? 0 : -1;
}

static int save_fp16_enabled(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    (void)k;
    return save_enabled(cfg, ZERO_DTYPE_FP16, parent);
}

static int save_bf16_enabled(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    (void)k;
    return save_enabled(cfg, ZERO_DTYPE_BF16, parent);
}

zero_status zero__config_finish(zc_ctx *c, zero_config *cfg) {
    if (c->fp16_on == 1 && c->bf16_on == 1) {
        c->len = 0;
        c->path[0] = '\0';
        return zero__zc_fail(c, ZERO_ERR_UNSUPPORTED,
                             "fp16.enabled and bf16.enabled both true is not supported yet (enable one of them)");
    }
    if (c->fp16_on == 1) cfg->precision = ZERO_DTYPE_FP16;
    else if (c->fp16_on == 0 && cfg->precision == ZERO_DTYPE_FP16) cfg->precision = ZERO_DTYPE_FP32;
    if (c->bf16_on == 1) cfg->precision = ZERO_DTYPE_BF16;
    else if (c->bf16_on == 0 && cfg->precision == ZERO_DTYPE_BF16) cfg->precision = ZERO_DTYPE_FP32;
    return ZERO_OK;
}

/* ------------------------------------------------------------------ optimizer */

static const zc_key optim_params[] = {
    {.name = "lr", .kind = ZC_F32, .flags = ZC_AUTO, .off = OFF(optim.lr), .lo = 0, .hi = ZERO_LR_MAX,
     .auto_bit = ZERO_AUTO_LR},
    {.name = "betas", .kind = ZC_CUSTOM, .flags = ZC_AUTO, .auto_bit = ZERO_AUTO_BETAS,
     .types = ADAM_FAMILY | OT(ZERO_OPTIM_LION), .load = load_betas, .check = check_betas, .save = save_betas},
    {.name = "eps", .kind = ZC_F32, .flags = ZC_AUTO, .off = OFF(optim.eps), .lo = 0, .hi = INFINITY,
     .auto_bit = ZERO_AUTO_EPS, .types = ADAM_FAMILY},
    {.name = "weight_decay", .kind = ZC_F32, .flags = ZC_AUTO, .off = OFF(optim.weight_decay), .lo = 0,
     .hi = INFINITY, .auto_bit = ZERO_AUTO_WEIGHT_DECAY},
    {.name = "bias_correction", .kind = ZC_BOOL, .off = OFF(optim.bias_correction), .types = ADAM_FAMILY},
    {.name = "adam_w_mode", .kind = ZC_CUSTOM, .types = ADAM_FAMILY, .load = load_adam_w_mode},
    {.name = "torch_adam", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT, .types = ADAM_FAMILY},
    {.name = "amsgrad", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .types = ADAM_FAMILY},
    {.name = "momentum", .kind = ZC_F32, .flags = ZC_HI_OPEN, .off = OFF(optim.momentum), .lo = 0, .hi = 1,
     .types = OT(ZERO_OPTIM_SGD)},
    {.name = "nesterov", .kind = ZC_BOOL, .off = OFF(optim.nesterov), .types = OT(ZERO_OPTIM_SGD)},
    {.name = "dampening", .kind = ZC_F64, .flags = ZC_OFF_ONLY, .lo = 0, .hi = 1, .off_value = 0,
     .types = OT(ZERO_OPTIM_SGD)},
    {.name = "max_grad_norm", .kind = ZC_CUSTOM, .load = load_max_grad_norm},
    {0},
};

static const zc_key optim_section[] = {
    {.name = "type", .kind = ZC_CUSTOM, .load = load_noop},
    {.name = "params", .kind = ZC_OBJECT, .children = optim_params},
    {0},
};

static zero_status section_type(zc_ctx *c, const cJSON *v, const char *what, const char *const *names, int n,
                                const cJSON **out) {
    if (!cJSON_IsObject(v)) return zero__zc_type_error(c, "an object", v);
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(v, "type");
    size_t old = zero__zc_push(c, "type");
    zero_status st = ZERO_OK;
    if (!t) {
        char list[128] = "";
        size_t len = 0;
        for (int i = 0; i < n && len < sizeof list; i++) {
            int w = snprintf(list + len, sizeof list - len, "%s%s", len ? ", " : "", names[i]);
            if (w > 0) len += (size_t)w;
        }
        st = zero__zc_fail(c, ZERO_ERR_CONFIG, "missing (every %s section names its type: %s)", what, list);
    } else if (!cJSON_IsString(t)) st = zero__zc_type_error(c, "a string", t);
    zero__zc_pop(c, old);
    *out = t;
    return st;
}

static zero_status load_optimizer(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    const cJSON *t;
    zero_status st = section_type(c, v, "optimizer", optim_names, N_OPTIM, &t);
    if (st) return st;
    zero_optim_type type;
    zero_status ps = zero_optim_parse(t->valuestring, &type);
    if (ps != ZERO_OK || (int)type < 0 || (int)type >= N_OPTIM) {
        size_t old = zero__zc_push(c, "type");
        if (ps == ZERO_ERR_UNSUPPORTED || in_list(optim_unsupported, t->valuestring))
            st = zero__zc_fail(c, ZERO_ERR_UNSUPPORTED, "\"%s\" is not supported yet (supported: Adam, AdamW, SGD, Lion)",
                               t->valuestring);
        else
            st = zero__zc_fail(c, ZERO_ERR_CONFIG, "unknown optimizer \"%s\" (expected Adam, AdamW, SGD or Lion)",
                               t->valuestring);
        zero__zc_pop(c, old);
        return st;
    }
    zero_optim_hparams_default(&cfg->optim, type);
    /* DeepSpeed's Adam and AdamW (FusedAdam, DeepSpeedCPUAdam) default to no weight decay */
    if (type == ZERO_OPTIM_ADAM || type == ZERO_OPTIM_ADAMW) cfg->optim.weight_decay = 0.0f;
    cfg->auto_fields &= ~(unsigned)(ZERO_AUTO_LR | ZERO_AUTO_BETAS | ZERO_AUTO_EPS | ZERO_AUTO_WEIGHT_DECAY);
    c->type_bit = OT(type);
    c->type_names = optim_names;
    c->type_count = N_OPTIM;
    c->adam_w_mode = -1;
    st = zero__zc_walk(c, k->children, v, cfg);
    c->type_bit = 0;
    if (st) return st;
    /* DeepSpeed: "Adam" runs AdamW's decoupled decay unless params.adam_w_mode is false */
    if (type == ZERO_OPTIM_ADAM && c->adam_w_mode != 0) type = ZERO_OPTIM_ADAMW;
    cfg->optim.type = type;
    return ZERO_OK;
}

static zero_status check_optimizer(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    int t = (int)cfg->optim.type;
    if (t < 0 || t >= N_OPTIM)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "type %d: expected a zero_optim_type (0..%d)", t, N_OPTIM - 1);
    unsigned saved = c->type_bit;
    c->type_bit = OT(t);
    zero_status st = zero__zc_check_table(c, k->children, cfg);
    c->type_bit = saved;
    return st;
}

static int save_optimizer(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    int t = (int)cfg->optim.type;
    if (t < 0 || t >= N_OPTIM) t = ZERO_OPTIM_ADAMW;
    cJSON *o = cJSON_AddObjectToObject(parent, k->name);
    if (!o || !cJSON_AddStringToObject(o, "type", optim_names[t])) return -1;
    cJSON *p = cJSON_AddObjectToObject(o, "params");
    if (!p || zero__zc_save_table(optim_params, cfg, OT(t), p)) return -1;
    if (t == ZERO_OPTIM_ADAM && !cJSON_AddBoolToObject(p, "adam_w_mode", 0)) return -1;
    return 0;
}

/* ------------------------------------------------------------------ scheduler */

static const zc_key sched_params[] = {
    {.name = "warmup_min_lr", .kind = ZC_F64, .flags = ZC_AUTO, .off = OFF(sched.warmup_min_lr), .lo = 0,
     .hi = ZERO_LR_MAX, .auto_bit = ZERO_AUTO_SCHED_WARMUP_MIN_LR, .auto_group = ZERO_AUTO_SCHED,
     .types = OT(ZERO_SCHED_WARMUP_LR) | OT(ZERO_SCHED_WARMUP_DECAY_LR)},
    {.name = "warmup_max_lr", .kind = ZC_F64, .flags = ZC_AUTO, .off = OFF(sched.warmup_max_lr), .lo = 0,
     .hi = ZERO_LR_MAX, .auto_bit = ZERO_AUTO_SCHED_WARMUP_MAX_LR, .auto_group = ZERO_AUTO_SCHED,
     .types = OT(ZERO_SCHED_WARMUP_LR) | OT(ZERO_SCHED_WARMUP_DECAY_LR)},
    {.name = "warmup_num_steps", .kind = ZC_I64, .flags = ZC_AUTO, .off = OFF(sched.warmup_num_steps), .lo = 0,
     .hi = INFINITY, .auto_bit = ZERO_AUTO_SCHED_WARMUP_NUM_STEPS, .auto_group = ZERO_AUTO_SCHED, .types = WARMUP_ALL},
    {.name = "warmup_type", .kind = ZC_CUSTOM, .flags = ZC_AUTO, .auto_bit = ZERO_AUTO_SCHED_WARMUP_TYPE,
     .auto_group = ZERO_AUTO_SCHED, .types = WARMUP_ALL, .load = load_warmup_type, .check = check_warmup_type,
     .save = save_warmup_type},
    {.name = "total_num_steps", .kind = ZC_I64, .flags = ZC_AUTO | ZC_UNSET0, .off = OFF(sched.total_num_steps),
     .lo = 1, .hi = INFINITY, .auto_bit = ZERO_AUTO_SCHED_TOTAL_NUM_STEPS, .auto_group = ZERO_AUTO_SCHED,
     .types = OT(ZERO_SCHED_WARMUP_DECAY_LR) | OT(ZERO_SCHED_WARMUP_COSINE_LR)},
    {.name = "warmup_min_ratio", .kind = ZC_F64, .flags = ZC_AUTO, .off = OFF(sched.warmup_min_ratio), .lo = 0,
     .hi = 1, .auto_bit = ZERO_AUTO_SCHED_WARMUP_MIN_RATIO, .auto_group = ZERO_AUTO_SCHED,
     .types = OT(ZERO_SCHED_WARMUP_COSINE_LR)},
    {.name = "cos_min_ratio", .kind = ZC_F64, .flags = ZC_AUTO, .off = OFF(sched.cos_min_ratio), .lo = 0, .hi = 1,
     .auto_bit = ZERO_AUTO_SCHED_COS_MIN_RATIO, .auto_group = ZERO_AUTO_SCHED, .types = OT(ZERO_SCHED_WARMUP_COSINE_LR)},
    {.name = "last_batch_iteration", .kind = ZC_I64, .flags = ZC_OFF_ONLY, .lo = -1, .hi = INFINITY, .off_value = -1,
     .types = WARMUP_ALL, .hint = "zero resumes the schedule from its own checkpoints (zero train --resume)"},
    {0},
};

static const zc_key sched_section[] = {
    {.name = "type", .kind = ZC_CUSTOM, .load = load_noop},
    {.name = "params", .kind = ZC_OBJECT, .children = sched_params},
    {0},
};

static zero_status load_scheduler(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    const cJSON *t;
    zero_status st = section_type(c, v, "scheduler", sched_names + 1, N_SCHED - 1, &t);
    if (st) return st;
    zero_sched_type type;
    zero_status ps = zero_sched_parse(t->valuestring, &type);
    if (ps != ZERO_OK || (int)type < 0 || (int)type >= N_SCHED) {
        size_t old = zero__zc_push(c, "type");
        if (ps == ZERO_ERR_UNSUPPORTED || in_list(sched_unsupported, t->valuestring))
            st = zero__zc_fail(c, ZERO_ERR_UNSUPPORTED,
                               "\"%s\" is not supported yet (supported: WarmupLR, WarmupDecayLR, WarmupCosineLR)",
                               t->valuestring);
        else
            st = zero__zc_fail(c, ZERO_ERR_CONFIG,
                               "unknown scheduler \"%s\" (expected WarmupLR, WarmupDecayLR or WarmupCosineLR)",
                               t->valuestring);
        zero__zc_pop(c, old);
        return st;
    }
    cfg->sched.type = type;
    cfg->sched_enabled = 1;
    c->type_bit = OT(type);
    c->type_names = sched_names;
    c->type_count = N_SCHED;
    st = zero__zc_walk(c, k->children, v, cfg);
    c->type_bit = 0;
    return st;
}

static zero_status check_scheduler(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    if (!cfg->sched_enabled) return ZERO_OK;
    int t = (int)cfg->sched.type;
    if (t < 0 || t >= N_SCHED)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "type %d: expected a zero_sched_type (0..%d)", t, N_SCHED - 1);
    unsigned saved = c->type_bit;
    c->type_bit = OT(t);
    zero_status st = zero__zc_check_table(c, k->children, cfg);
    c->type_bit = saved;
    return st;
}

static int save_scheduler(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    int t = (int)cfg->sched.type;
    if (!cfg->sched_enabled || t < 0 || t >= N_SCHED) return 0;
    cJSON *o = cJSON_AddObjectToObject(parent, k->name);
    const char *name = t == ZERO_SCHED_CONSTANT ? zero_sched_name(ZERO_SCHED_CONSTANT) : sched_names[t];
    if (!o || !cJSON_AddStringToObject(o, "type", name)) return -1;
    cJSON *p = cJSON_AddObjectToObject(o, "params");
    return p && !zero__zc_save_table(sched_params, cfg, OT(t), p) ? 0 : -1;
}

/* ------------------------------------------------------------------ sections */

static const zc_key fp16_keys[] = {
    {.name = "enabled", .kind = ZC_CUSTOM, .flags = ZC_AUTO, .auto_bit = ZERO_AUTO_PRECISION,
     .load = load_fp16_enabled, .save = save_fp16_enabled},
    {.name = "loss_scale", .kind = ZC_F64, .off = OFF(loss_scale), .lo = 0, .hi = INFINITY},
    {.name = "initial_scale_power", .kind = ZC_INT, .off = OFF(initial_scale_power), .lo = 0, .hi = 63},
    {.name = "loss_scale_window", .kind = ZC_I64, .off = OFF(loss_scale_window), .lo = 1, .hi = INFINITY},
    {.name = "hysteresis", .kind = ZC_INT, .off = OFF(hysteresis), .lo = 1, .hi = INFINITY},
    {.name = "consecutive_hysteresis", .kind = ZC_BOOL, .off = OFF(consecutive_hysteresis)},
    {.name = "min_loss_scale", .kind = ZC_F64, .flags = ZC_LO_OPEN, .off = OFF(min_loss_scale), .lo = 0, .hi = INFINITY},
    {.name = "auto_cast", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .hint = "the model decides its own casts"},
    {.name = "fp16_master_weights_and_grads", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY,
     .hint = "zero keeps an fp32 master copy"},
    {0},
};

static const zc_key bf16_keys[] = {
    {.name = "enabled", .kind = ZC_CUSTOM, .flags = ZC_AUTO, .auto_bit = ZERO_AUTO_PRECISION,
     .load = load_bf16_enabled, .save = save_bf16_enabled},
    /* when a micro-batch's gradient joins the fp32 accumulation: the same sum either way */
    {.name = "immediate_grad_update", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    /* zero skips a step whose gradients are not finite in every precision (docs/ENGINE.md §6-7) */
    {.name = "check_grad_overflow", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .off_value = 1,
     .hint = "zero always skips a step whose gradients are not finite"},
    {.name = "bf16_master_weights_and_grads", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .hint = "zero keeps an fp32 master copy"},
    {.name = "bf16_optimizer_states", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .hint = "zero keeps fp32 optimizer states"},
    {0},
};

/* "bfloat16": DeepSpeed's old name of the bf16 section, which it still reads where "bf16" is absent
 * (get_bfloat16_config) and ignores beside it; zero reads it the same way, and names the pair
 * instead of ignoring one (the two may say different things). */
static zero_status load_bfloat16_old(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    if (c->root && cJSON_GetObjectItemCaseSensitive(c->root, "bf16"))
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "the old name of \"bf16\", given beside it: DeepSpeed reads only "
                                                  "\"bf16\" then; keep one of the two");
    if (!cJSON_IsObject(v)) return zero__zc_type_error(c, "an object", v);
    const int lax = c->lax;
    c->lax = 1; /* DeepSpeed's DeepSpeedBF16Config, a pydantic model */
    const zero_status st = zero__zc_walk(c, bf16_keys, v, cfg);
    c->lax = lax;
    return st;
}

static const zc_key offload_optimizer_keys[] = {
    {.name = "device", .kind = ZC_CUSTOM, .off = OFF(offload_optimizer.device), .load = load_device,
     .check = check_device, .save = save_device},
    {.name = "nvme_path", .kind = ZC_CUSTOM, .flags = ZC_NULL_OK, .off = OFF(offload_optimizer.nvme_path),
     .load = load_path, .check = check_path, .save = save_path},
    {.name = "pin_memory", .kind = ZC_BOOL, .off = OFF(offload_optimizer.pin_memory)},
    /* ge=0 in DeepSpeed's schema; the NVMe pool refuses fewer than 1 when it is used (engine/offload.c) */
    {.name = "buffer_count", .kind = ZC_INT, .off = OFF(offload_optimizer.buffer_count), .lo = 0, .hi = 65536},
    {.name = "pipeline_read", .kind = ZC_BOOL, .off = OFF(offload_optimizer.pipeline_read)},
    {.name = "pipeline_write", .kind = ZC_BOOL, .off = OFF(offload_optimizer.pipeline_write)},
    /* partial offload (DeepSpeed's Twin-Flow, stage 3): not implemented, so only 1 */
    {.name = "ratio", .kind = ZC_F64, .flags = ZC_OFF_ONLY, .lo = 0, .hi = 1, .off_value = 1,
     .hint = "zero offloads all of the master and optimizer states"},
    {.name = "fast_init", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "super_offload", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY},
    /* the share of the cores SuperOffload's CPU Adam takes: nothing without super_offload */
    {.name = "cpuadam_cores_perc", .kind = ZC_F64, .flags = ZC_NO_EFFECT, .lo = 0, .hi = 1},
    {0},
};

static const zc_key offload_param_keys[] = {
    {.name = "device", .kind = ZC_CUSTOM, .off = OFF(offload_param.device), .load = load_device,
     .check = check_device, .save = save_device},
    {.name = "nvme_path", .kind = ZC_CUSTOM, .flags = ZC_NULL_OK, .off = OFF(offload_param.nvme_path),
     .load = load_path, .check = check_path, .save = save_path},
    {.name = "pin_memory", .kind = ZC_BOOL, .off = OFF(offload_param.pin_memory)},
    {.name = "buffer_count", .kind = ZC_INT, .off = OFF(offload_param.buffer_count), .lo = 0, .hi = 65536},
    {.name = "buffer_size", .kind = ZC_I64, .off = OFF(offload_param.buffer_size), .lo = 0, .hi = INFINITY,
     .set_bit = ZERO_SET_PARAM_BUFFER_SIZE},
    {.name = "max_in_cpu", .kind = ZC_I64, .off = OFF(offload_param.max_in_cpu), .lo = 0, .hi = INFINITY},
    {0},
};

/* zero_hpz_partition_size 0: DeepSpeed forms secondary groups only above 1, so 0 is 1 (off). */
static zero_status load_hpz(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    double x;
    if (!zero__zc_lax_number(c, v, 1, &x)) return zero__zc_type_error(c, "an integer", v);
    const zero_status st = zero__zc_check_number(c, k, x);
    if (st) return st;
    cfg->hpz_partition_size = x < 1 ? 1 : (int)x;
    return ZERO_OK;
}

/* zero_quantized_weights (ZeRO++ qwZ): it quantizes stage 3's parameter all-gathers, which only
 * stage 3 has (DeepSpeed reads the key at stage 3 only; zero names the mistake). */
static zero_status check_qwz(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (cfg->quant_weights != 0 && cfg->quant_weights != 1)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%d is not a boolean (expected 0 or 1)", cfg->quant_weights);
    if (cfg->quant_weights && cfg->stage != 3)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "true needs zero_optimization.stage 3 (stage is %d): qwZ quantizes "
                             "the all-gathers of the parameters, and only stage 3 gathers them", cfg->stage);
    return ZERO_OK;
}

/* zero_quantized_gradients (ZeRO++ qgZ): it quantizes the reduce-scatter of each micro-batch's
 * gradients, which stages 2-3 run (stages 0-1 reduce the accumulated gradient once, and deterministic
 * mode sums integers: no rounding there is allowed to depend on the split). */
static zero_status check_qgz(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (cfg->quant_grads != 0 && cfg->quant_grads != 1)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%d is not a boolean (expected 0 or 1)", cfg->quant_grads);
    if (cfg->quant_grads && cfg->stage < 2)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "true needs zero_optimization.stage 2 or 3 (stage is %d): qgZ "
                             "quantizes the reduce-scatter of each micro-batch's gradients, which stages 0-1 do not run",
                             cfg->stage);
    if (cfg->quant_grads && cfg->deterministic)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "true with zero_extensions.deterministic: deterministic mode sums "
                             "the gradients exactly as integers; choose one");
    return ZERO_OK;
}

/* leaf_module: which PyTorch module classes or names ZeRO-3 fetches as one (DeepSpeed's
 * DeepSpeedZeroLeafModuleConfig): zero's units are fetched whole already, so it changes nothing;
 * an object (or null), its contents not read. */
static zero_status load_leaf_module(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k, (void)cfg;
    if (cJSON_IsNull(v) || cJSON_IsObject(v)) return ZERO_OK;
    return zero__zc_type_error(c, "an object (PyTorch module classes and names) or null", v);
}

#define DEPRECATED_OFFLOAD "deprecated in DeepSpeed: use zero_optimization.offload_optimizer / offload_param"

static const zc_key zero_keys[] = {
    {.name = "stage", .kind = ZC_INT, .off = OFF(stage), .lo = 0, .hi = 3},
    {.name = "contiguous_gradients", .kind = ZC_BOOL, .off = OFF(contiguous_gradients)},
    /* DeepSpeed: Optional[bool], null = its default (on at stage 3 only), as when left out */
    {.name = "overlap_comm", .kind = ZC_BOOL, .flags = ZC_UNSET_NEG | ZC_NULL_OK, .off = OFF(overlap_comm)},
    {.name = "reduce_scatter", .kind = ZC_BOOL, .off = OFF(reduce_scatter)},
    /* the sizes are ge=0 in DeepSpeed's schema */
    {.name = "reduce_bucket_size", .kind = ZC_I64, .flags = ZC_AUTO, .off = OFF(reduce_bucket_size), .lo = 0,
     .hi = INFINITY, .auto_bit = ZERO_AUTO_REDUCE_BUCKET, .auto_group = ZERO_AUTO_BUCKETS},
    {.name = "allgather_partitions", .kind = ZC_BOOL, .off = OFF(allgather_partitions)},
    {.name = "allgather_bucket_size", .kind = ZC_I64, .flags = ZC_AUTO, .off = OFF(allgather_bucket_size), .lo = 0,
     .hi = INFINITY, .auto_bit = ZERO_AUTO_ALLGATHER_BUCKET, .auto_group = ZERO_AUTO_BUCKETS},
    {.name = "round_robin_gradients", .kind = ZC_BOOL, .off = OFF(round_robin_gradients)},
    {.name = "sub_group_size", .kind = ZC_I64, .off = OFF(sub_group_size), .lo = 0, .hi = INFINITY},
    {.name = "stage3_prefetch_bucket_size", .kind = ZC_I64, .flags = ZC_AUTO, .off = OFF(prefetch_bucket_size),
     .lo = 0, .hi = INFINITY, .auto_bit = ZERO_AUTO_PREFETCH_BUCKET, .auto_group = ZERO_AUTO_BUCKETS,
     .set_bit = ZERO_SET_PREFETCH_BUCKET},
    {.name = "stage3_param_persistence_threshold", .kind = ZC_I64, .flags = ZC_AUTO,
     .off = OFF(param_persistence_threshold), .lo = 0, .hi = INFINITY, .auto_bit = ZERO_AUTO_PERSISTENCE_THRESHOLD,
     .auto_group = ZERO_AUTO_BUCKETS},
    {.name = "stage3_max_live_parameters", .kind = ZC_I64, .off = OFF(max_live_parameters), .lo = 0, .hi = INFINITY},
    {.name = "stage3_max_reuse_distance", .kind = ZC_I64, .off = OFF(max_reuse_distance), .lo = 0, .hi = INFINITY},
    {.name = "stage3_gather_16bit_weights_on_model_save", .kind = ZC_BOOL,
     .off = OFF(gather_16bit_weights_on_model_save)},
    {.name = "stage3_gather_fp16_weights_on_model_save", .kind = ZC_BOOL, .flags = ZC_NOSAVE,
     .off = OFF(gather_16bit_weights_on_model_save)},
    {.name = "offload_optimizer", .kind = ZC_OBJECT, .flags = ZC_NULL_OK | ZC_PYDANTIC, .children = offload_optimizer_keys},
    {.name = "offload_param", .kind = ZC_OBJECT, .flags = ZC_NULL_OK | ZC_PYDANTIC, .children = offload_param_keys},
    {.name = "zero_hpz_partition_size", .kind = ZC_INT, .off = OFF(hpz_partition_size), .lo = 0, .hi = INFINITY,
     .load = load_hpz},
    {.name = "zero_quantized_weights", .kind = ZC_BOOL, .off = OFF(quant_weights), .check = check_qwz},
    {.name = "zero_quantized_nontrainable_weights", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY},
    {.name = "zero_quantized_gradients", .kind = ZC_BOOL, .off = OFF(quant_grads), .check = check_qgz},
    {.name = "zeropp_loco_param", .kind = ZC_CUSTOM, .load = load_null_only},
    {.name = "mics_shard_size", .kind = ZC_INT, .flags = ZC_OFF_ONLY, .lo = -INFINITY, .hi = INFINITY, .off_value = -1},
    {.name = "mics_hierarchical_params_gather", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY},
    /* DeepSpeed: Optional[bool] = None */
    {.name = "cpu_offload", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY | ZC_NULL_OK, .hint = DEPRECATED_OFFLOAD},
    {.name = "cpu_offload_param", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY | ZC_NULL_OK, .hint = DEPRECATED_OFFLOAD},
    {.name = "cpu_offload_use_pin_memory", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY | ZC_NULL_OK, .hint = DEPRECATED_OFFLOAD},
    {.name = "load_from_fp32_weights", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .off_value = 1,
     .hint = "zero always restores the fp32 master weights"},
    {.name = "elastic_checkpoint", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY,
     .hint = "zero checkpoints load on any world size without it"},
    {.name = "legacy_stage1", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY},
    {.name = "stage3_use_all_reduce_for_fetch_params", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY},
    {.name = "pipeline_loading_checkpoint", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY},
    {.name = "ignore_unused_parameters", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "use_multi_rank_bucket_allreduce", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "memory_efficient_linear", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "override_module_apply", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "log_trace_cache_warnings", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "stage3_model_persistence_threshold", .kind = ZC_F64, .flags = ZC_NO_EFFECT, .lo = 0, .hi = INFINITY},
    {.name = "stage3_module_granularity_threshold", .kind = ZC_F64, .flags = ZC_NO_EFFECT, .lo = 0, .hi = INFINITY},
    /* ZenFlow (an object enables it): not implemented */
    {.name = "zenflow", .kind = ZC_CUSTOM, .load = load_null_only},
    {.name = "stage3_allgather_sequential", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "enable_sanity_checks", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "save_muon_momentum_buffer_in_memory", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "leaf_module", .kind = ZC_CUSTOM, .load = load_leaf_module},
    {0},
};

static const zc_key aio_keys[] = {
    {.name = "block_size", .kind = ZC_I64, .off = OFF(aio_block_size), .lo = 4096, .hi = 1 << 30, .multiple_of = 4096},
    {.name = "queue_depth", .kind = ZC_INT, .off = OFF(aio_queue_depth), .lo = 1, .hi = 65536},
    {.name = "intra_op_parallelism", .kind = ZC_INT, .off = OFF(aio_intra_op_parallelism), .lo = 1, .hi = 1024},
    {.name = "thread_count", .kind = ZC_INT, .flags = ZC_NOSAVE, .off = OFF(aio_intra_op_parallelism), .lo = 1,
     .hi = 1024},
    {.name = "single_submit", .kind = ZC_BOOL, .off = OFF(aio_single_submit)},
    {.name = "overlap_events", .kind = ZC_BOOL, .off = OFF(aio_overlap_events)},
    {.name = "use_gds", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY},
    {0},
};

/* check_divergence: true (ZERO_DIVERGENCE_STEP), false (OFF), or "step" / "collective". */
static zero_status load_divergence(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    if (cJSON_IsBool(v)) cfg->check_divergence = cJSON_IsTrue(v) ? ZERO_DIVERGENCE_STEP : ZERO_DIVERGENCE_OFF;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "step")) cfg->check_divergence = ZERO_DIVERGENCE_STEP;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "collective")) cfg->check_divergence = ZERO_DIVERGENCE_COLLECTIVE;
    else return zero__zc_type_error(c, "true, false, \"step\" or \"collective\"", v);
    return ZERO_OK;
}

static zero_status check_divergence_mode(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (cfg->check_divergence < ZERO_DIVERGENCE_OFF || cfg->check_divergence > ZERO_DIVERGENCE_COLLECTIVE)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%d: expected 0 (off), 1 (step) or 2 (collective)", cfg->check_divergence);
    return ZERO_OK;
}

static int save_divergence(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    cJSON *v = cfg->check_divergence == ZERO_DIVERGENCE_COLLECTIVE ? cJSON_CreateString("collective")
                                                                   : cJSON_CreateBool(cfg->check_divergence != 0);
    if (!v) return -1;
    cJSON_AddItemToObject(parent, k->name, v);
    return 0;
}

/* frozen_dtype: "auto" (the working precision), "fp32", "bf16" or "fp16". */
static zero_status load_frozen_dtype(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    zero_dtype dt;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "auto")) {
        cfg->frozen_dtype = ZERO_DTYPE_COUNT;
        return ZERO_OK;
    }
    if (!cJSON_IsString(v) || zero_dtype_parse(v->valuestring, &dt) != ZERO_OK ||
        (dt != ZERO_DTYPE_FP32 && dt != ZERO_DTYPE_BF16 && dt != ZERO_DTYPE_FP16))
        return zero__zc_type_error(c, "\"auto\", \"fp32\", \"bf16\" or \"fp16\"", v);
    cfg->frozen_dtype = dt;
    return ZERO_OK;
}

static zero_status check_frozen_dtype(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    const zero_dtype d = cfg->frozen_dtype;
    if (d != ZERO_DTYPE_COUNT && d != ZERO_DTYPE_FP32 && d != ZERO_DTYPE_BF16 && d != ZERO_DTYPE_FP16)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "dtype %d: expected fp32, bf16, fp16 or ZERO_DTYPE_COUNT (auto)", (int)d);
    return ZERO_OK;
}

/* "auto" is the default: not written */
static int save_frozen_dtype(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    const zero_dtype d = cfg->frozen_dtype;
    if (d == ZERO_DTYPE_COUNT) return 0;
    return cJSON_AddStringToObject(parent, k->name, zero_dtype_name(d)) ? 0 : -1;
}

static zero_status load_optim_states(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "fp32")) cfg->optim_states = ZERO_OPTIM_STATES_FP32;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "int8")) cfg->optim_states = ZERO_OPTIM_STATES_INT8;
    else return zero__zc_type_error(c, "\"fp32\" or \"int8\"", v);
    return ZERO_OK;
}

static zero_status check_optim_states(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (cfg->optim_states != ZERO_OPTIM_STATES_FP32 && cfg->optim_states != ZERO_OPTIM_STATES_INT8)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%d: expected ZERO_OPTIM_STATES_FP32 (0) or ZERO_OPTIM_STATES_INT8 (1)",
                             cfg->optim_states);
    return ZERO_OK;
}

/* "fp32" is the default: not written */
static int save_optim_states(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (cfg->optim_states == ZERO_OPTIM_STATES_FP32) return 0;
    return cJSON_AddStringToObject(parent, k->name, "int8") ? 0 : -1;
}

/* quantize_base: "none" (the default), "nf4" or "int8". */
static zero_status load_quant_base(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    if (cJSON_IsString(v) && !strcmp(v->valuestring, "none")) cfg->quant_base = ZERO_QFMT_NONE;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "nf4")) cfg->quant_base = ZERO_QFMT_NF4;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "int8")) cfg->quant_base = ZERO_QFMT_INT8;
    else return zero__zc_type_error(c, "\"nf4\", \"int8\" or \"none\"", v);
    return ZERO_OK;
}

static zero_status check_quant_base(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (cfg->quant_base != ZERO_QFMT_NONE && cfg->quant_base != ZERO_QFMT_NF4 && cfg->quant_base != ZERO_QFMT_INT8)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%d: expected ZERO_QFMT_NONE (0), ZERO_QFMT_NF4 (1) or ZERO_QFMT_INT8 (3)",
                             cfg->quant_base);
    return ZERO_OK;
}

/* "none" is the default: not written */
static int save_quant_base(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (cfg->quant_base == ZERO_QFMT_NONE) return 0;
    return cJSON_AddStringToObject(parent, k->name, zero_qformat_name((zero_qformat)cfg->quant_base)) ? 0 : -1;
}

/* double_quant: written only when it is not the default */
static int save_quant_double(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (cfg->quant_double) return 0;
    return cJSON_AddBoolToObject(parent, k->name, 0) ? 0 : -1;
}

/* quantize_embeddings: only with a quantized base (the embeddings take its format); written when on */
static zero_status check_quant_embed(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (cfg->quant_embed != 0 && cfg->quant_embed != 1)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%d is not a boolean (expected 0 or 1)", cfg->quant_embed);
    if (cfg->quant_embed && cfg->quant_base == ZERO_QFMT_NONE)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "true: expected zero_extensions.quantize_base \"nf4\" or \"int8\" too "
                             "(the embeddings and the LM head take the base's format)");
    return ZERO_OK;
}

static int save_quant_embed(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (!cfg->quant_embed) return 0;
    return cJSON_AddBoolToObject(parent, k->name, 1) ? 0 : -1;
}

/* document_mask: true, false or "auto" (the default, not written). */
static zero_status load_doc_mask(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    if (cJSON_IsBool(v)) cfg->doc_mask = cJSON_IsTrue(v) ? ZERO_DOC_MASK_ON : ZERO_DOC_MASK_OFF;
    else if (cJSON_IsString(v) && !strcmp(v->valuestring, "auto")) cfg->doc_mask = ZERO_DOC_MASK_AUTO;
    else return zero__zc_type_error(c, "true, false or \"auto\"", v);
    return ZERO_OK;
}

static zero_status check_doc_mask(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (cfg->doc_mask != ZERO_DOC_MASK_AUTO && cfg->doc_mask != ZERO_DOC_MASK_ON && cfg->doc_mask != ZERO_DOC_MASK_OFF)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "%d: expected ZERO_DOC_MASK_AUTO (0), ZERO_DOC_MASK_ON (1) or "
                             "ZERO_DOC_MASK_OFF (2)", cfg->doc_mask);
    return ZERO_OK;
}

static int save_doc_mask(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (cfg->doc_mask == ZERO_DOC_MASK_AUTO) return 0;
    return cJSON_AddBoolToObject(parent, k->name, cfg->doc_mask == ZERO_DOC_MASK_ON) ? 0 : -1;
}

/* lora.targets: module names, as an array of strings or one comma-separated string. */
static zero_status load_lora_targets(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    char buf[sizeof cfg->lora.targets];
    size_t at = 0;
    const cJSON *it;
    /* none named is a mistake, not a wish for the defaults (that is the key left out) */
    if ((cJSON_IsString(v) && !*v->valuestring) || (cJSON_IsArray(v) && !v->child))
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "no module named: expected at least one (leave the key out for the "
                             "default targets)");
    if (cJSON_IsString(v)) {
        if (strlen(v->valuestring) >= sizeof buf)
            return zero__zc_fail(c, ZERO_ERR_CONFIG, "%zu bytes: expected at most %zu", strlen(v->valuestring), sizeof buf - 1);
        snprintf(cfg->lora.targets, sizeof cfg->lora.targets, "%s", v->valuestring);
        return ZERO_OK;
    }
    if (!cJSON_IsArray(v)) return zero__zc_type_error(c, "an array of module names, or one comma-separated string", v);
    buf[0] = 0;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it) || !*it->valuestring || strchr(it->valuestring, ','))
            return zero__zc_type_error(c, "module names (strings without a comma)", it);
        const size_t n = strlen(it->valuestring);
        if (at + n + 2 > sizeof buf)
            return zero__zc_fail(c, ZERO_ERR_CONFIG, "the names take more than %zu bytes", sizeof buf - 1);
        at += (size_t)snprintf(buf + at, sizeof buf - at, "%s%s", at ? "," : "", it->valuestring);
    }
    memcpy(cfg->lora.targets, buf, sizeof buf);
    return ZERO_OK;
}

static int save_lora_targets(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (!cfg->lora.targets[0]) return 0;
    return cJSON_AddStringToObject(parent, k->name, cfg->lora.targets) ? 0 : -1;
}

static const zc_key lora_keys[] = {
    {.name = "r", .kind = ZC_INT, .off = OFF(lora.r), .lo = 0, .hi = 65536},
    {.name = "alpha", .kind = ZC_F64, .flags = ZC_LO_OPEN, .off = OFF(lora.alpha), .lo = 0, .hi = 1e9},
    {.name = "targets", .kind = ZC_CUSTOM, .load = load_lora_targets, .save = save_lora_targets},
    {.name = "dropout", .kind = ZC_F64, .flags = ZC_HI_OPEN, .off = OFF(lora.dropout), .lo = 0, .hi = 1},
    {.name = "rslora", .kind = ZC_BOOL, .off = OFF(lora.rslora)},
    {0},
};

/* The lora section is written only when LoRA is on (r >= 1). */
static int save_lora(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (cfg->lora.r < 1) return 0;
    cJSON *o = cJSON_CreateObject();
    if (!o || zero__zc_save_table(lora_keys, cfg, 0, o)) {
        cJSON_Delete(o);
        return -1;
    }
    cJSON_AddItemToObject(parent, k->name, o);
    return 0;
}

static const zc_key extension_keys[] = {
    {.name = "check_divergence", .kind = ZC_CUSTOM, .off = OFF(check_divergence), .load = load_divergence,
     .check = check_divergence_mode, .save = save_divergence},
    {.name = "reuse_buffers", .kind = ZC_BOOL, .off = OFF(reuse_buffers)},
    {.name = "deterministic", .kind = ZC_BOOL, .off = OFF(deterministic)},
    {.name = "quantized_weights_block", .kind = ZC_I64, .off = OFF(quant_weights_block), .lo = 1, .hi = 1 << 24},
    {.name = "quantized_gradients_block", .kind = ZC_I64, .off = OFF(quant_grads_block), .lo = 1, .hi = 1 << 16},
    {.name = "deterministic_atom", .kind = ZC_INT, .off = OFF(deterministic_atom), .lo = 1, .hi = 1 << 20},
    {.name = "align_bytes", .kind = ZC_I64, .flags = ZC_POW2, .off = OFF(align_bytes), .lo = 64, .hi = 1 << 20},
    {.name = "frozen_dtype", .kind = ZC_CUSTOM, .off = OFF(frozen_dtype), .load = load_frozen_dtype,
     .check = check_frozen_dtype, .save = save_frozen_dtype},
    {.name = "save_frozen", .kind = ZC_BOOL, .off = OFF(save_frozen)},
    {.name = "optimizer_states", .kind = ZC_CUSTOM, .off = OFF(optim_states), .load = load_optim_states,
     .check = check_optim_states, .save = save_optim_states},
    {.name = "optimizer_states_min_size", .kind = ZC_I64, .off = OFF(optim_states_min), .lo = 0, .hi = INT64_C(1) << 40},
    {.name = "quantize_base", .kind = ZC_CUSTOM, .off = OFF(quant_base), .load = load_quant_base,
     .check = check_quant_base, .save = save_quant_base},
    {.name = "double_quant", .kind = ZC_BOOL, .off = OFF(quant_double), .save = save_quant_double},
    {.name = "quantize_embeddings", .kind = ZC_BOOL, .off = OFF(quant_embed), .check = check_quant_embed,
     .save = save_quant_embed},
    {.name = "document_mask", .kind = ZC_CUSTOM, .off = OFF(doc_mask), .load = load_doc_mask,
     .check = check_doc_mask, .save = save_doc_mask},
    {.name = "lora", .kind = ZC_OBJECT, .children = lora_keys, .save = save_lora},
    {0},
};

#define ACT_HINT "zero train --activation-checkpointing checkpoints the reference model's blocks"

static const zc_key activation_keys[] = {
    {.name = "partition_activations", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .hint = ACT_HINT},
    {.name = "cpu_checkpointing", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .hint = ACT_HINT},
    {.name = "contiguous_memory_optimization", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .hint = ACT_HINT},
    {.name = "synchronize_checkpoint_boundary", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .hint = ACT_HINT},
    {.name = "profile", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY, .hint = ACT_HINT},
    {.name = "number_checkpoints", .kind = ZC_CUSTOM, .load = load_null_or_int},
    {0},
};

#define MONITOR_HINT "zero writes its metrics with --log-json or to TensorBoard (tensorboard.enabled)"

/* A boolean written only when true, so that a config without the section writes none. */
static int save_true(const zc_key *k, const zero_config *cfg, cJSON *parent) {
    if (!*(const int *)((const char *)cfg + k->off)) return 0;
    return cJSON_AddBoolToObject(parent, k->name, 1) ? 0 : -1;
}

static zero_status load_job_name(zc_ctx *c, const zc_key *k, const cJSON *v, zero_config *cfg) {
    (void)k;
    if (!cJSON_IsString(v)) return zero__zc_type_error(c, "a string (a directory name)", v);
    const size_t n = strlen(v->valuestring);
    if (n >= sizeof cfg->tensorboard.job_name)
        return zero__zc_fail(c, ZERO_ERR_CONFIG, "a name of %zu bytes is too long (expected at most %zu)", n,
                             sizeof cfg->tensorboard.job_name - 1);
    memcpy(cfg->tensorboard.job_name, v->valuestring, n + 1);
    return ZERO_OK;
}

static zero_status check_job_name(zc_ctx *c, const zc_key *k, const zero_config *cfg) {
    (void)k;
    if (memchr(cfg->tensorboard.job_name, '\0', sizeof cfg->tensorboard.job_name)) return ZERO_OK;
    return zero__zc_fail(c, ZERO_ERR_CONFIG, "not NUL-terminated within %zu bytes", sizeof cfg->tensorboard.job_name);
}

/* DeepSpeed's TensorBoardConfig: the event files go to output_path/job_name. */
static const zc_key tensorboard_keys[] = {
    {.name = "enabled", .kind = ZC_BOOL, .off = OFF(tensorboard.enabled), .save = save_true},
    {.name = "output_path", .kind = ZC_CUSTOM, .flags = ZC_NULL_OK, .off = OFF(tensorboard.output_path),
     .load = load_path, .check = check_path, .save = save_path},
    {.name = "job_name", .kind = ZC_CUSTOM, .off = OFF(tensorboard.job_name), .load = load_job_name,
     .check = check_job_name, .save = save_path},
    {0},
};

static const zc_key root_keys[] = {
    {.name = "train_batch_size", .kind = ZC_I64, .flags = ZC_AUTO | ZC_UNSET0, .off = OFF(train_batch_size), .lo = 1,
     .hi = 2147483647.0, .auto_bit = ZERO_AUTO_TRAIN_BATCH},
    {.name = "train_micro_batch_size_per_gpu", .kind = ZC_I64, .flags = ZC_AUTO | ZC_UNSET0, .off = OFF(micro_batch),
     .lo = 1, .hi = 2147483647.0, .auto_bit = ZERO_AUTO_MICRO_BATCH},
    {.name = "gradient_accumulation_steps", .kind = ZC_I64, .flags = ZC_AUTO | ZC_UNSET0, .off = OFF(grad_accum),
     .lo = 1, .hi = 2147483647.0, .auto_bit = ZERO_AUTO_GRAD_ACCUM},
    {.name = "gradient_clipping", .kind = ZC_F64, .flags = ZC_AUTO, .off = OFF(gradient_clipping), .lo = 0,
     .hi = INFINITY, .auto_bit = ZERO_AUTO_CLIPPING},
    {.name = "steps_per_print", .kind = ZC_I64, .off = OFF(steps_per_print), .lo = 1, .hi = INFINITY},
    {.name = "wall_clock_breakdown", .kind = ZC_BOOL, .off = OFF(wall_clock_breakdown)},
    {.name = "optimizer", .kind = ZC_CUSTOM, .children = optim_section, .load = load_optimizer,
     .check = check_optimizer, .save = save_optimizer},
    {.name = "scheduler", .kind = ZC_CUSTOM, .children = sched_section, .load = load_scheduler,
     .check = check_scheduler, .save = save_scheduler},
    {.name = "fp16", .kind = ZC_OBJECT, .flags = ZC_PYDANTIC, .children = fp16_keys},
    {.name = "bf16", .kind = ZC_OBJECT, .flags = ZC_PYDANTIC, .children = bf16_keys},
    {.name = "bfloat16", .kind = ZC_CUSTOM, .flags = ZC_NOSAVE, .children = bf16_keys, .load = load_bfloat16_old},
    {.name = "zero_optimization", .kind = ZC_OBJECT, .flags = ZC_PYDANTIC, .children = zero_keys},
    {.name = "aio", .kind = ZC_OBJECT, .children = aio_keys},
    {.name = "zero_extensions", .kind = ZC_OBJECT, .children = extension_keys},
    {.name = "prescale_gradients", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY,
     .hint = "zero averages gradients after the reduction"},
    {.name = "gradient_predivide_factor", .kind = ZC_F64, .flags = ZC_OFF_ONLY | ZC_LO_OPEN, .lo = 0, .hi = INFINITY,
     .off_value = 1},
    {.name = "sparse_gradients", .kind = ZC_BOOL, .flags = ZC_OFF_ONLY},
    {.name = "communication_data_type", .kind = ZC_CUSTOM, .load = load_null_only,
     .hint = "zero communicates in the working precision and reduces gradients in fp32"},
    {.name = "dump_state", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "memory_breakdown", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "zero_allow_untested_optimizer", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "zero_force_ds_cpu_optimizer", .kind = ZC_BOOL, .flags = ZC_NO_EFFECT},
    {.name = "activation_checkpointing", .kind = ZC_OBJECT, .children = activation_keys},
    {.name = "amp", .kind = ZC_CUSTOM, .load = load_section_off, .hint = "use fp16 or bf16"},
    {.name = "tensorboard", .kind = ZC_OBJECT, .flags = ZC_NULL_OK | ZC_PYDANTIC, .children = tensorboard_keys},
    {.name = "wandb", .kind = ZC_CUSTOM, .load = load_section_off, .hint = MONITOR_HINT},
    {.name = "csv_monitor", .kind = ZC_CUSTOM, .load = load_section_off, .hint = MONITOR_HINT},
    {.name = "comet", .kind = ZC_CUSTOM, .load = load_section_off, .hint = MONITOR_HINT},
    {.name = "comms_logger", .kind = ZC_CUSTOM, .load = load_section_off, .hint = MONITOR_HINT},
    {.name = "flops_profiler", .kind = ZC_CUSTOM, .load = load_section_off, .hint = MONITOR_HINT},
    {0},
};

const zc_key *zero__config_schema(void) { return root_keys; }
