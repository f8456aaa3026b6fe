/* models/gpt2/gpt2_params.c — GPT-2's configuration: presets and checks, the parameter table
 * with Hugging Face names (units, offsets, shapes, flags), parameter counts and initialization. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "gpt2/gpt2_internal.h"

void gpt2__errorf(zero_error *err, const char *fmt, ...) {
    if (!err) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
}

static const struct {
    const char *name;
    gpt2_config cfg;
} presets[] = {
    {"tiny", {2, 64, 4, 64, 256}},
    {"small", {6, 512, 8, 512, 256}},
    {"gpt2", {12, 768, 12, 1024, 50257}},
    {"gpt2-medium", {24, 1024, 16, 1024, 50257}},
    {"gpt2-large", {36, 1280, 20, 1024, 50257}},
    {"gpt2-xl", {48, 1600, 25, 1024, 50257}},
};
#define NPRESETS ((int)(sizeof presets / sizeof presets[0]))

const char *const *gpt2_preset_names(void) {
    static const char *names[NPRESETS + 1];
    for (int i = 0; i < NPRESETS; i++) names[i] = presets[i].name;
    names[NPRESETS] = NULL;
    return names;
}

zero_status gpt2_config_preset(gpt2_config *cfg, const char *name, zero_error *err) {
    for (int i = 0; name && i < NPRESETS; i++) {
        if (!strcmp(name, presets[i].name)) {
            *cfg = presets[i].cfg;
            return ZERO_OK;
        }
    }
    gpt2__errorf(err, "model '%s': expected one of tiny, small, gpt2, gpt2-medium, gpt2-large, gpt2-xl",
                 name ? name : "(null)");
    return ZERO_ERR_INVALID_ARG;
}

zero_status gpt2_config_check(const gpt2_config *c, zero_error *err) {
    /* The limits keep B*T*4C, V*C and B*H*T*T far below 2^62 for any B, T an int can hold. */
    const struct { const char *name; int v, hi; } f[] = {
        {"n_layer", c->n_layer, 4096}, {"n_embd", c->n_embd, 1 << 16},
        {"n_head", c->n_head, 1 << 12}, {"n_ctx", c->n_ctx, 1 << 20},
        {"vocab", c->vocab, 1 << 24},
    };
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        if (f[i].v < 1 || f[i].v > f[i].hi) {
            gpt2__errorf(err, "%s %d: expected an integer in [1, %d]", f[i].name, f[i].v, f[i].hi);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    if (c->n_embd % c->n_head) {
        gpt2__errorf(err, "n_embd %d: expected a multiple of n_head %d", c->n_embd, c->n_head);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

void gpt2__block_layout_of(int C, gpt2__block_layout *o) {
    const uint64_t c = (uint64_t)C;
    uint64_t at = 0;
    o->ln1_w = at, at += c;
    o->ln1_b = at, at += c;
    o->attn_w = at, at += c * 3 * c;
    o->attn_b = at, at += 3 * c;
    o->attnproj_w = at, at += c * c;
    o->attnproj_b = at, at += c;
    o->ln2_w = at, at += c;
    o->ln2_b = at, at += c;
    o->fc_w = at, at += c * 4 * c;
    o->fc_b = at, at += 4 * c;
    o->fcproj_w = at, at += 4 * c * c;
    o->fcproj_b = at, at += c;
    o->numel = at;
}

uint64_t gpt2_num_params(const gpt2_config *c) {
    const uint64_t C = (uint64_t)c->n_embd;
    return (uint64_t)c->vocab * C + (uint64_t)c->n_ctx * C + (uint64_t)c->n_layer * (12 * C * C + 13 * C) +
           2 * C;
}

int gpt2_num_units(const gpt2_config *c) { return c->n_layer + 2; }

const char *gpt2_unit_name(const gpt2_config *c, int unit, char *buf, size_t cap) {
    if (!buf || !cap) return buf;
    if (unit == GPT2_UNIT_EMBEDDINGS) snprintf(buf, cap, "embeddings");
    else if (unit >= 1 && unit <= c->n_layer) snprintf(buf, cap, "h.%d", unit - 1);
    else if (unit == c->n_layer + 1) snprintf(buf, cap, "ln_f");
    else buf[0] = '\0';
    return buf;
}

uint64_t gpt2_unit_numel(const gpt2_config *c, int unit) {
    const uint64_t C = (uint64_t)c->n_embd;
    if (unit == GPT2_UNIT_EMBEDDINGS) return ((uint64_t)c->vocab + (uint64_t)c->n_ctx) * C;
    if (unit >= 1 && unit <= c->n_layer) return 12 * C * C + 13 * C;
    if (unit == c->n_layer + 1) return 2 * C;
    return 0;
}

uint64_t gpt2_unit_offset(const gpt2_config *c, int unit) {
    uint64_t off = 0;
    for (int u = 0; u < unit && u < gpt2_num_units(c); u++) off += gpt2_unit_numel(c, u);
    return off;
}

int gpt2_num_tensors(const gpt2_config *c) { return 2 + 12 * c->n_layer + 2; }

/* Block tensor names and shapes in units of C: {rows, cols} (cols 0 = a vector). */
static const struct {
    const char *name;
    int rows, cols;
    unsigned flags;
} block_tensors[12] = {
    {"ln_1.weight", 1, 0, ZERO_PARAM_NO_DECAY},     {"ln_1.bias", 1, 0, ZERO_PARAM_NO_DECAY},
    {"attn.c_attn.weight", 1, 3, 0},                {"attn.c_attn.bias", 3, 0, ZERO_PARAM_NO_DECAY},
    {"attn.c_proj.weight", 1, 1, 0},                {"attn.c_proj.bias", 1, 0, ZERO_PARAM_NO_DECAY},
    {"ln_2.weight", 1, 0, ZERO_PARAM_NO_DECAY},     {"ln_2.bias", 1, 0, ZERO_PARAM_NO_DECAY},
    {"mlp.c_fc.weight", 1, 4, 0},                   {"mlp.c_fc.bias", 4, 0, ZERO_PARAM_NO_DECAY},
    {"mlp.c_proj.weight", 4, 1, 0},                 {"mlp.c_proj.bias", 1, 0, ZERO_PARAM_NO_DECAY},
};

zero_status gpt2_tensor_desc(const gpt2_config *c, int index, gpt2_param_desc *o) {
    const int64_t C = c->n_embd;
    const int n = gpt2_num_tensors(c);
    if (index < 0 || index >= n) return ZERO_ERR_INVALID_ARG;
    memset(o, 0, sizeof *o);
    if (index < 2) {
        o->unit = GPT2_UNIT_EMBEDDINGS;
        o->ndim = 2;
        o->shape[0] = index == 0 ? c->vocab : c->n_ctx;
        o->shape[1] = C;
        o->offset = index == 0 ? 0 : (uint64_t)c->vocab * (uint64_t)C;
        snprintf(o->name, sizeof o->name, "%s", index == 0 ? "wte.weight" : "wpe.weight");
    } else if (index >= n - 2) {
        o->unit = c->n_layer + 1;
        o->ndim = 1;
        o->shape[0] = C;
        o->offset = index == n - 2 ? 0 : (uint64_t)C;
        o->flags = ZERO_PARAM_NO_DECAY;
        snprintf(o->name, sizeof o->name, "%s", index == n - 2 ? "ln_f.weight" : "ln_f.bias");
    } else {
        const int l = (index - 2) / 12, k = (index - 2) % 12;
        o->unit = 1 + l;
        uint64_t off = 0;
        for (int j = 0; j < k; j++)
            off += (uint64_t)(block_tensors[j].rows * C) * (uint64_t)(block_tensors[j].cols ? block_tensors[j].cols * C : 1);
        o->offset = off;
        o->ndim = block_tensors[k].cols ? 2 : 1;
        o->shape[0] = block_tensors[k].rows * C;
        if (o->ndim == 2) o->shape[1] = block_tensors[k].cols * C;
        o->flags = block_tensors[k].flags;
        snprintf(o->name, sizeof o->name, "h.%d.%s", l, block_tensors[k].name);
    }
    o->numel = (uint64_t)o->shape[0] * (uint64_t)(o->ndim == 2 ? o->shape[1] : 1);
    return ZERO_OK;
}

double gpt2__normal(uint64_t *state) {
    /* 1 - u lies in (0, 1]: the logarithm is finite. */
    const double u1 = 1.0 - gpt2__uniform(state);
    const double u2 = gpt2__uniform(state);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fill_normal(float *dst, uint64_t n, double std, uint64_t *state) {
    for (uint64_t i = 0; i < n; i++) dst[i] = (float)(std * gpt2__normal(state));
}

static void fill_value(float *dst, uint64_t n, float v) {
    for (uint64_t i = 0; i < n; i++) dst[i] = v;
}

void gpt2_init_unit(const gpt2_config *c, int unit, uint64_t seed, float *dst) {
    /* One stream per (seed, unit): units initialize independently of one another. */
    uint64_t state = gpt2__mix64(seed ^ gpt2__mix64(0x6770743275ull + (uint64_t)unit));
    const uint64_t C = (uint64_t)c->n_embd;
    const double std = 0.02, proj_std = 0.02 / sqrt(2.0 * c->n_layer);
    if (unit == GPT2_UNIT_EMBEDDINGS) {
        fill_normal(dst, gpt2_unit_numel(c, unit), std, &state);
    } else if (unit >= 1 && unit <= c->n_layer) {
        gpt2__block_layout L;
        gpt2__block_layout_of(c->n_embd, &L);
        fill_value(dst + L.ln1_w, C, 1.0f);
        fill_value(dst + L.ln1_b, C, 0.0f);
        fill_normal(dst + L.attn_w, C * 3 * C, std, &state);
        fill_value(dst + L.attn_b, 3 * C, 0.0f);
        fill_normal(dst + L.attnproj_w, C * C, proj_std, &state);
        fill_value(dst + L.attnproj_b, C, 0.0f);
        fill_value(dst + L.ln2_w, C, 1.0f);
        fill_value(dst + L.ln2_b, C, 0.0f);
        fill_normal(dst + L.fc_w, C * 4 * C, std, &state);
        fill_value(dst + L.fc_b, 4 * C, 0.0f);
        fill_normal(dst + L.fcproj_w, 4 * C * C, proj_std, &state);
        fill_value(dst + L.fcproj_b, C, 0.0f);
    } else if (unit == c->n_layer + 1) {
        fill_value(dst, C, 1.0f);
        fill_value(dst + C, C, 0.0f);
    }
}
