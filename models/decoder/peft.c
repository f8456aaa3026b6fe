/* models/decoder/peft.c — PEFT's LoRA adapter directories: adapter_config.json in (refusing what
 * the decoder does not compute) and out, adapter_model.safetensors into an engine's adapters. */
#include "decoder/peft.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder_internal.h"
#include "zero/ckpt.h"

#define PREFIX "base_model.model."

const char *dec_peft_key(const dec_config *cfg, const char *name, char *buf, size_t cap) {
    snprintf(buf, cap, PREFIX "%s%s", dec_is_llama(cfg) ? "" : "transformer.", name);
    return buf;
}

/* A field that changes what PEFT computes, accepted only at its neutral value(s). */
static int neutral(const cJSON *v) {
    return !v || cJSON_IsNull(v) || cJSON_IsFalse(v) || (cJSON_IsArray(v) && !cJSON_GetArraySize(v)) ||
           (cJSON_IsObject(v) && !v->child);
}

static const char *show(const cJSON *v, char *buf, size_t cap) {
    char *t = v ? cJSON_PrintUnformatted(v) : NULL;
    snprintf(buf, cap, "%.60s%s", t ? t : "missing", t && strlen(t) > 60 ? "..." : "");
    cJSON_free(t);
    return buf;
}

/* adapter_config.json is untrusted (docs/SECURITY.md): a plain file of the adapter directory, at
 * most 1 MiB and 2^14 JSON values (PEFT writes ~1 KB), refused before it is parsed. */
#define PEFT_CONFIG_MAX_BYTES (UINT64_C(1) << 20)
#define PEFT_CONFIG_MAX_VALUES (UINT64_C(1) << 14)

zero_status dec_peft_read_config(const char *dir, const dec_config *cfg, dec_lora *out, zero_error *err) {
    char path[4200], b[128];
    zero_error pe = {{0}};
    char *text = NULL;
    size_t len = 0;
    zero_status rs = zero_path_in_dir(dir, "adapter_config.json", path, sizeof path, &pe);
    if (rs == ZERO_OK) rs = zero_read_file(path, PEFT_CONFIG_MAX_BYTES, &text, &len, &pe);
    if (rs == ZERO_OK && zero_json_check(text, len, PEFT_CONFIG_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &pe) != ZERO_OK) {
        dec__errorf(err, "%.300s: %.300s: refused before parsing", path, pe.msg);
        free(text);
        return ZERO_ERR_FORMAT;
    }
    if (rs != ZERO_OK) {
        dec__errorf(err, "%s", pe.msg);
        return rs;
    }
    cJSON *j = cJSON_ParseWithLength(text, len);
    free(text);
    zero_status st = ZERO_ERR_INVALID_ARG;
    if (!cJSON_IsObject(j)) {
        dec__errorf(err, "%s: not a JSON object", path);
        cJSON_Delete(j);
        return ZERO_ERR_FORMAT;
    }
    dec_lora_default(out);
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, "peft_type");
    if (!cJSON_IsString(v) || strcmp(v->valuestring, "LORA")) {
        dec__errorf(err, "%s: peft_type %s: expected \"LORA\" (zero trains LoRA adapters only)", path, show(v, b, sizeof b));
        goto out;
    }
    /* the fields that change what is computed, each at a value zero computes */
    static const char *const must_be_neutral[] = {"use_dora", "modules_to_save", "layers_to_transform", "layers_pattern",
                                                  "rank_pattern", "alpha_pattern", "layer_replication",
                                                  "trainable_token_indices", "target_parameters", "lora_bias",
                                                  "use_qalora", "alora_invocation_tokens", "use_bdlora", "exclude_modules",
                                                  "megatron_config"};
    for (size_t k = 0; k < sizeof must_be_neutral / sizeof must_be_neutral[0]; k++) {
        v = cJSON_GetObjectItemCaseSensitive(j, must_be_neutral[k]);
        if (!neutral(v)) {
            dec__errorf(err, "%s: %s %s is not supported yet (expected null, false or empty)", path, must_be_neutral[k],
                        show(v, b, sizeof b));
            goto out;
        }
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "bias");
    if (v && !(cJSON_IsString(v) && !strcmp(v->valuestring, "none"))) {
        dec__errorf(err, "%s: bias %s is not supported yet (expected \"none\": the base's biases stay frozen)", path,
                    show(v, b, sizeof b));
        goto out;
    }
    v = cJSON_GetObjectItemCaseSensitive(j, "r");
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 || v->valuedouble > 65536) {
        dec__errorf(err, "%s: r %s: expected a whole number of 1 to 65536", path, show(v, b, sizeof b));
        goto out;
    }
    out->r = (int)v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(j, "lora_alpha");
    if (!cJSON_IsNumber(v) || !(v->valuedouble > 0) || !isfinite(v->valuedouble)) {
        dec__errorf(err, "%s: lora_alpha %s: expected a number > 0", path, show(v, b, sizeof b));
        goto out;
    }
    out->alpha = v->valuedouble;
    v = cJSON_GetObjectItemCaseSensitive(j, "lora_dropout");
    if (v && !cJSON_IsNull(v) && (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble < 1))) {
        dec__errorf(err, "%s: lora_dropout %s: expected a probability in [0, 1)", path, show(v, b, sizeof b));
        goto out;
    }
    out->dropout = cJSON_IsNumber(v) ? v->valuedouble : 0.0;
    v = cJSON_GetObjectItemCaseSensitive(j, "use_rslora");
    if (v && !cJSON_IsBool(v) && !cJSON_IsNull(v)) {
        dec__errorf(err, "%s: use_rslora %s: expected true or false", path, show(v, b, sizeof b));
        goto out;
    }
    out->rslora = cJSON_IsTrue(v);
    v = cJSON_GetObjectItemCaseSensitive(j, "target_modules");
    if (cJSON_IsString(v)) {
        dec__errorf(err, "%s: target_modules \"%.60s\" (a regular expression) is not supported yet: list the module "
                    "names", path, v->valuestring);
        goto out;
    }
    if (!cJSON_IsArray(v) || !cJSON_GetArraySize(v)) {
        dec__errorf(err, "%s: target_modules %s: expected a list of module names", path, show(v, b, sizeof b));
        goto out;
    }
    char names[1024] = "";
    const cJSON *it;
    cJSON_ArrayForEach(it, v) {
        if (!cJSON_IsString(it) || strchr(it->valuestring, ',') || strlen(names) + strlen(it->valuestring) + 2 > sizeof names) {
            dec__errorf(err, "%s: target_modules: %s is not a module name", path, show(it, b, sizeof b));
            goto out;
        }
        snprintf(names + strlen(names), sizeof names - strlen(names), "%s%s", names[0] ? "," : "", it->valuestring);
    }
    zero_error e2;
    if (dec_lora_targets(cfg, names, &out->targets, &e2)) {
        dec__errorf(err, "%s: target_modules: %s", path, e2.msg);
        goto out;
    }
    st = dec_lora_check(cfg, out, err);
out:
    cJSON_Delete(j);
    return st;
}

zero_status dec_peft_load(const char *dir, const dec_config *cfg, const dec_lora *l, zero_engine *e, zero_error *err) {
    char path[4200], key[256];
    zero_st_file *f = NULL;
    zero_status st = zero_path_in_dir(dir, "adapter_model.safetensors", path, sizeof path, err); /* SECURITY.md */
    if (st) return st;
    st = zero_st_open(&f, NULL, path, err);
    if (st) return st;
    const int n = dec_lora_num_tensors(cfg, l);
    /* every tensor of the file is one of the adapters */
    for (int i = 0; i < zero_st_count(f) && !st; i++) {
        const char *name = zero_st_tensor_at(f, i)->name;
        int known = 0;
        for (int k = 0; k < n && !known; k++) {
            dec_param_desc d;
            dec_lora_tensor_desc(cfg, l, k, &d);
            known = !strcmp(dec_peft_key(cfg, d.name, key, sizeof key), name);
        }
        if (!known) {
            dec__errorf(err, "%s: tensor '%s' is not an adapter of this model with these targets (adapter_config.json "
                        "and the weights disagree, or another base?)", path, name);
            st = ZERO_ERR_FORMAT;
        }
    }
    float *buf = NULL;
    uint16_t *half = NULL;
    for (int k = 0; k < n && !st; k++) {
        dec_param_desc d;
        dec_lora_tensor_desc(cfg, l, k, &d);
        const int i = zero_st_find(f, dec_peft_key(cfg, d.name, key, sizeof key));
        if (i < 0) {
            dec__errorf(err, "%s: missing tensor '%s' (shape [%lld, %lld])", path, key, (long long)d.shape[0],
                        (long long)d.shape[1]);
            st = ZERO_ERR_FORMAT;
            break;
        }
        const zero_st_tensor *t = zero_st_tensor_at(f, i);
        if (t->ndim != 2 || t->shape[0] != d.shape[0] || t->shape[1] != d.shape[1]) {
            dec__errorf(err, "%s: tensor '%s' has %d dimensions [%lld, %lld]; this model expects [%lld, %lld]", path, key,
                        t->ndim, (long long)t->shape[0], (long long)(t->ndim > 1 ? t->shape[1] : 0),
                        (long long)d.shape[0], (long long)d.shape[1]);
            st = ZERO_ERR_FORMAT;
            break;
        }
        if (t->zdtype != ZERO_DTYPE_FP32 && t->zdtype != ZERO_DTYPE_BF16 && t->zdtype != ZERO_DTYPE_FP16) {
            dec__errorf(err, "%s: tensor '%s' has dtype %s: expected F32, BF16 or F16", path, key, t->dtype);
            st = ZERO_ERR_FORMAT;
            break;
        }
        free(buf), free(half);
        buf = malloc((size_t)d.numel * sizeof(float));
        half = malloc((size_t)d.numel * sizeof(uint16_t));
        if (!buf || !half) {
            dec__errorf(err, "out of memory for %s", key);
            st = ZERO_ERR_NOMEM;
            break;
        }
        if (t->zdtype == ZERO_DTYPE_FP32) st = zero_st_read(f, i, 0, buf, (size_t)t->nbytes);
        else if (!(st = zero_st_read(f, i, 0, half, (size_t)t->nbytes)))
            zero_convert(half, t->zdtype, buf, ZERO_DTYPE_FP32, d.numel, ZERO_IMPL_AUTO);
        if (st) dec__errorf(err, "%s", zero_st_last_error(f));
        else if (t->has_crc && zero_crc32c(0, t->zdtype == ZERO_DTYPE_FP32 ? (void *)buf : (void *)half, (size_t)t->nbytes) != t->crc) {
            dec__errorf(err, "%s: tensor '%s': checksum mismatch: the file is corrupt", path, key);
            st = ZERO_ERR_FORMAT;
        } else if ((st = dec_check_finite(buf, (size_t)d.numel, 0, path, key, err))) {
            break;
        } else if ((st = zero_engine_set_param(e, d.name, buf))) {
            dec__errorf(err, "%s: %s", key, zero_engine_last_error(e));
        }
    }
    free(buf), free(half);
    zero_st_close(f);
    return st;
}

char *dec_peft_config_json(const dec_config *cfg, const dec_lora *l, const char *base) {
    cJSON *j = cJSON_CreateObject(), *t = cJSON_CreateArray();
    if (!j || !t) {
        cJSON_Delete(j), cJSON_Delete(t);
        return NULL;
    }
    char names[256];
    dec_lora_targets_string(cfg, l->targets, names, sizeof names);
    for (char *p = names, *q; p && *p; p = q) {
        q = strchr(p, ',');
        if (q) *q++ = 0;
        cJSON_AddItemToArray(t, cJSON_CreateString(p));
    }
    if (base) cJSON_AddStringToObject(j, "base_model_name_or_path", base);
    else cJSON_AddNullToObject(j, "base_model_name_or_path");
    cJSON_AddStringToObject(j, "bias", "none");
    cJSON_AddBoolToObject(j, "fan_in_fan_out", !dec_is_llama(cfg)); /* GPT-2's Conv1D keeps (in, out) */
    cJSON_AddBoolToObject(j, "inference_mode", 1);
    cJSON_AddBoolToObject(j, "init_lora_weights", 1);
    cJSON_AddNumberToObject(j, "lora_alpha", l->alpha);
    cJSON_AddNumberToObject(j, "lora_dropout", l->dropout);
    cJSON_AddNullToObject(j, "modules_to_save");
    cJSON_AddStringToObject(j, "peft_type", "LORA");
    cJSON_AddNumberToObject(j, "r", l->r);
    cJSON_AddItemToObject(j, "target_modules", t);
    cJSON_AddStringToObject(j, "task_type", "CAUSAL_LM");
    cJSON_AddBoolToObject(j, "use_dora", 0);
    cJSON_AddBoolToObject(j, "use_rslora", l->rslora != 0);
    char *text = dec__json_indent(cJSON_Print(j));
    cJSON_Delete(j);
    return text;
}
