/* models/decoder/lora.c — LoRA adapters of the decoder as PEFT computes them: targets, tensors and
 * their place in the layer units, PEFT's initialization, and the forward/backward of the adapters
 * that the pass calls at its four linear sites (qkv, attention output, MLP in, MLP out). */
#include <cblas.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder_internal.h"
#include "decoder/lora.h"

/* ---------------------------------------------------------------- targets */
typedef struct tdesc {
    unsigned bit;
    int site;           /* DEC__SITE_* */
    const char *module; /* under the layer: "self_attn.q_proj", GPT-2 "attn.c_attn" */
    const char *name;   /* PEFT's target_modules entry */
} tdesc;

static const tdesc LLAMA_T[] = {
    {DEC_LORA_Q, DEC__SITE_QKV, "self_attn.q_proj", "q_proj"},  {DEC_LORA_K, DEC__SITE_QKV, "self_attn.k_proj", "k_proj"},
    {DEC_LORA_V, DEC__SITE_QKV, "self_attn.v_proj", "v_proj"},  {DEC_LORA_O, DEC__SITE_O, "self_attn.o_proj", "o_proj"},
    {DEC_LORA_GATE, DEC__SITE_FC, "mlp.gate_proj", "gate_proj"}, {DEC_LORA_UP, DEC__SITE_FC, "mlp.up_proj", "up_proj"},
    {DEC_LORA_DOWN, DEC__SITE_PROJ, "mlp.down_proj", "down_proj"},
};
static const tdesc GPT2_T[] = {
    {DEC_LORA_C_ATTN, DEC__SITE_QKV, "attn.c_attn", "c_attn"},
    {DEC_LORA_ATTN_C_PROJ, DEC__SITE_O, "attn.c_proj", "attn.c_proj"},
    {DEC_LORA_C_FC, DEC__SITE_FC, "mlp.c_fc", "c_fc"},
    {DEC_LORA_MLP_C_PROJ, DEC__SITE_PROJ, "mlp.c_proj", "mlp.c_proj"},
};

static const tdesc PHI3_T[] = {
    {DEC_LORA_QKV_PROJ, DEC__SITE_QKV, "self_attn.qkv_proj", "qkv_proj"},
    {DEC_LORA_O, DEC__SITE_O, "self_attn.o_proj", "o_proj"},
    {DEC_LORA_GATE_UP, DEC__SITE_FC, "mlp.gate_up_proj", "gate_up_proj"},
    {DEC_LORA_DOWN, DEC__SITE_PROJ, "mlp.down_proj", "down_proj"},
};

static const tdesc *table(const dec_config *c, int *n) {
    if (c->fused_names) {
        *n = (int)(sizeof PHI3_T / sizeof PHI3_T[0]);
        return PHI3_T;
    }
    if (dec_is_llama(c)) {
        *n = (int)(sizeof LLAMA_T / sizeof LLAMA_T[0]);
        return LLAMA_T;
    }
    *n = (int)(sizeof GPT2_T / sizeof GPT2_T[0]);
    return GPT2_T;
}

/* Where a target's adapter reads and writes: its site's output columns [col0, col0 + out) of
 * a row of ld, from an input of `in` columns. */
static void geometry(const dec_config *c, unsigned bit, int *col0, int *out, int *in, int *ld) {
    dec__dims d;
    dec__dims_of(c, &d);
    *col0 = 0;
    switch (bit) {
    case DEC_LORA_Q: *out = d.Q, *in = d.C, *ld = d.QKV; break;
    case DEC_LORA_K: *col0 = d.Q, *out = d.KV, *in = d.C, *ld = d.QKV; break;
    case DEC_LORA_V: *col0 = d.Q + d.KV, *out = d.KV, *in = d.C, *ld = d.QKV; break;
    case DEC_LORA_C_ATTN:
    case DEC_LORA_QKV_PROJ: *out = d.QKV, *in = d.C, *ld = d.QKV; break;
    case DEC_LORA_GATE_UP: *out = d.FC, *in = d.C, *ld = d.FC; break;
    case DEC_LORA_O:
    case DEC_LORA_ATTN_C_PROJ: *out = d.C, *in = d.Q, *ld = d.C; break;
    case DEC_LORA_GATE: *out = d.F, *in = d.C, *ld = d.FC; break;
    case DEC_LORA_UP: *col0 = d.F, *out = d.F, *in = d.C, *ld = d.FC; break;
    case DEC_LORA_C_FC: *out = d.F, *in = d.C, *ld = d.FC; break;
    default: /* DOWN, MLP_C_PROJ */ *out = d.C, *in = d.F, *ld = d.C; break;
    }
}

void dec_lora_default(dec_lora *l) {
    memset(l, 0, sizeof *l);
    l->r = 8;
    l->alpha = 8;
}

double dec_lora_scaling(const dec_lora *l) { return l->rslora ? l->alpha / sqrt((double)l->r) : l->alpha / l->r; }

zero_status dec_lora_targets(const dec_config *cfg, const char *names, unsigned *out, zero_error *err) {
    int n;
    const tdesc *t = table(cfg, &n);
    *out = 0;
    if (!names || !*names) { /* PEFT's TRANSFORMERS_MODELS_TO_LORA_TARGET_MODULES_MAPPING */
        *out = cfg->fused_names ? DEC_LORA_QKV_PROJ : dec_is_llama(cfg) ? DEC_LORA_Q | DEC_LORA_V : DEC_LORA_C_ATTN;
        return ZERO_OK;
    }
    const char *p = names;
    while (*p) {
        const char *end = strchr(p, ',');
        const size_t len = end ? (size_t)(end - p) : strlen(p);
        unsigned bits = 0;
        for (int i = 0; i < n; i++) {
            const char *last = strrchr(t[i].module, '.') + 1; /* "c_proj" names both GPT-2 c_proj */
            if ((strlen(t[i].module) == len && !strncmp(t[i].module, p, len)) || (strlen(last) == len && !strncmp(last, p, len)))
                bits |= t[i].bit;
        }
        if (!bits) {
            char known[256] = "";
            for (int i = 0; i < n; i++)
                snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", t[i].name);
            if (!dec_is_llama(cfg)) snprintf(known + strlen(known), sizeof known - strlen(known), ", c_proj (both)");
            dec__errorf(err, "LoRA target '%.*s': not a module of a %s layer (expected one of %s)", (int)(len < 64 ? len : 64),
                        p, dec_arch_name(cfg->arch), known);
            return ZERO_ERR_INVALID_ARG;
        }
        *out |= bits;
        p += len;
        if (*p == ',') p++;
    }
    return ZERO_OK;
}

const char *dec_lora_targets_string(const dec_config *cfg, unsigned targets, char *buf, size_t cap) {
    int n;
    const tdesc *t = table(cfg, &n);
    size_t at = 0;
    buf[0] = 0;
    const unsigned both = DEC_LORA_ATTN_C_PROJ | DEC_LORA_MLP_C_PROJ;
    for (int i = 0; i < n && at < cap; i++) {
        if (!(targets & t[i].bit)) continue;
        const char *name = t[i].name;
        if ((targets & both) == both) { /* GPT-2's two c_proj: PEFT's "c_proj" */
            if (t[i].bit == DEC_LORA_MLP_C_PROJ) continue;
            if (t[i].bit == DEC_LORA_ATTN_C_PROJ) name = "c_proj";
        }
        at += (size_t)snprintf(buf + at, cap - at, "%s%s", at ? "," : "", name);
    }
    return buf;
}

zero_status dec_lora_check(const dec_config *cfg, const dec_lora *l, zero_error *err) {
    int n;
    const tdesc *t = table(cfg, &n);
    unsigned all = 0;
    for (int i = 0; i < n; i++) all |= t[i].bit;
    if (l->r < 1 || l->r > 65536) {
        dec__errorf(err, "LoRA r %d: expected a rank of 1 to 65536", l->r);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(l->alpha > 0) || !isfinite(l->alpha)) {
        dec__errorf(err, "LoRA alpha %g: expected a finite number > 0", l->alpha);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(l->dropout >= 0 && l->dropout < 1)) {
        dec__errorf(err, "LoRA dropout %g: expected a probability in [0, 1)", l->dropout);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!l->targets || (l->targets & ~all)) {
        dec__errorf(err, "LoRA targets 0x%x: expected modules of a %s layer", l->targets, dec_arch_name(cfg->arch));
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

/* ---------------------------------------------------------------- tensors */
static int ntargets(const dec_config *c, const dec_lora *l, const tdesc **t) {
    int n, k = 0;
    *t = table(c, &n);
    for (int i = 0; i < n; i++) k += (l->targets & (*t)[i].bit) != 0;
    return k;
}

/* The k-th set target (0-based) of the table. */
static const tdesc *target_at(const dec_config *c, const dec_lora *l, int k) {
    int n;
    const tdesc *t = table(c, &n);
    for (int i = 0; i < n; i++)
        if ((l->targets & t[i].bit) && k-- == 0) return &t[i];
    return NULL;
}

int dec_lora_num_tensors(const dec_config *cfg, const dec_lora *l) {
    const tdesc *t;
    return cfg->n_layer * 2 * ntargets(cfg, l, &t);
}

uint64_t dec_lora_unit_numel(const dec_config *cfg, const dec_lora *l, int unit) {
    if (unit < 1 || unit > cfg->n_layer) return 0;
    const tdesc *t;
    const int nt = ntargets(cfg, l, &t);
    uint64_t n = 0;
    for (int k = 0; k < nt; k++) {
        int col0, out, in, ld;
        geometry(cfg, target_at(cfg, l, k)->bit, &col0, &out, &in, &ld);
        n += (uint64_t)l->r * ((uint64_t)in + (uint64_t)out);
    }
    return n;
}

uint64_t dec_lora_num_params(const dec_config *cfg, const dec_lora *l) {
    return (uint64_t)cfg->n_layer * dec_lora_unit_numel(cfg, l, 1);
}

static const char *layer_prefix(const dec_config *c, int layer, char *buf, size_t cap) {
    snprintf(buf, cap, dec_is_llama(c) ? "model.layers.%d." : "h.%d.", layer);
    return buf;
}

zero_status dec_lora_tensor_desc(const dec_config *cfg, const dec_lora *l, int i, dec_param_desc *out) {
    const tdesc *t;
    const int nt = ntargets(cfg, l, &t);
    if (nt == 0 || i < 0 || i >= dec_lora_num_tensors(cfg, l)) return ZERO_ERR_INVALID_ARG;
    const int layer = i / (2 * nt), k = (i % (2 * nt)) / 2, isb = i % 2;
    const tdesc *d = target_at(cfg, l, k);
    memset(out, 0, sizeof *out);
    char pre[32];
    snprintf(out->name, sizeof out->name, "%s%s.lora_%c.weight", layer_prefix(cfg, layer, pre, sizeof pre), d->module,
             isb ? 'B' : 'A');
    out->unit = 1 + layer;
    uint64_t off = dec_unit_numel(cfg, 1 + layer);
    for (int j = 0; j <= k; j++) {
        int col0, o, in, ld;
        geometry(cfg, target_at(cfg, l, j)->bit, &col0, &o, &in, &ld);
        const uint64_t na = (uint64_t)l->r * (uint64_t)in, nb = (uint64_t)o * (uint64_t)l->r;
        if (j < k) {
            off += na + nb;
            continue;
        }
        out->offset = isb ? off + na : off;
        out->numel = isb ? nb : na;
        out->ndim = 2;
        out->shape[0] = isb ? o : l->r;
        out->shape[1] = isb ? l->r : in;
    }
    out->flags = 0;
    return ZERO_OK;
}

int dec_lora_is_param(const char *name) {
    const size_t n = strlen(name), k = strlen(".lora_A.weight");
    return n > k && (!strcmp(name + n - k, ".lora_A.weight") || !strcmp(name + n - k, ".lora_B.weight"));
}

const char *dec_lora_module(const dec_config *cfg, unsigned target, int layer, char *buf, size_t cap, int *out_f,
                            int *in_f) {
    int n;
    const tdesc *t = table(cfg, &n);
    buf[0] = 0;
    for (int i = 0; i < n; i++) {
        if (t[i].bit != target) continue;
        snprintf(buf, cap, dec_is_llama(cfg) ? "model.layers.%d.%s" : "transformer.h.%d.%s", layer, t[i].module);
        int col0, ld;
        geometry(cfg, target, &col0, out_f, in_f, &ld);
    }
    return buf;
}

int dec_lora_quantizes(const dec_config *cfg, const dec_param_desc *d, int embeddings) {
    if (!dec_is_llama(cfg) || d->ndim != 2) return 0;
    return (d->unit >= 1 && d->unit <= cfg->n_layer) || (embeddings && (d->unit == DEC_UNIT_EMBEDDINGS || d->unit == cfg->n_layer + 1));
}

zero_status dec_lora_register(const dec_config *cfg, const dec_lora *l, zero_engine *e, zero_error *err) {
    zero_status st = dec_config_check(cfg, err);
    if (!st) st = dec_lora_check(cfg, l, err);
    if (st) return st;
    /* a quantized base (zero_config.quant_base): the layers' linear weights, (out, in) as
     * mk_qlinear reads them; norms, biases, the embeddings and the LM head stay in the frozen dtype */
    const int qbase = zero_config_base_format(zero_engine_config(e)) != ZERO_QFMT_NONE;
    if (qbase && !dec_is_llama(cfg)) {
        dec__errorf(err, "a quantized base (zero_extensions.quantize_base \"%s\") of GPT-2 (Conv1D weights) is not "
                    "supported yet", zero_qformat_name((zero_qformat)zero_engine_config(e)->quant_base));
        return ZERO_ERR_UNSUPPORTED;
    }
    char name[32];
    int next = 0, lnext = 0;
    const int nl = dec_lora_num_tensors(cfg, l);
    for (int u = 0; u < dec_num_units(cfg); u++) {
        const int id = zero_engine_add_unit(e, dec_unit_name(cfg, u, name, sizeof name));
        if (id != u) {
            dec__errorf(err, "registering unit '%s': engine returned %d, expected id %d (%s)", name, id, u,
                        id < 0 ? zero_engine_last_error(e) : "the engine must start empty");
            return id < 0 ? (zero_status)id : ZERO_ERR_STATE;
        }
        dec_param_desc d;
        /* the base, frozen; then this layer's adapters */
        for (; next < dec_num_tensors(cfg) && !dec_tensor_desc(cfg, next, &d) && d.unit == u; next++) {
            const unsigned q = dec_lora_quantizes(cfg, &d, zero_engine_config(e)->quant_embed) ? ZERO_PARAM_QUANTIZE : 0u;
            if ((st = zero_engine_add_param(e, u, d.name, d.shape, d.ndim, d.flags | ZERO_PARAM_FROZEN | q))) break;
        }
        for (; !st && lnext < nl && !dec_lora_tensor_desc(cfg, l, lnext, &d) && d.unit == u; lnext++)
            st = zero_engine_add_param(e, u, d.name, d.shape, d.ndim, d.flags);
        if (st) {
            dec__errorf(err, "registering '%s': %s", d.name, zero_engine_last_error(e));
            return st;
        }
    }
    return ZERO_OK;
}

void dec_lora_init_unit(const dec_config *cfg, const dec_lora *l, int unit, float *dst) {
    uint64_t state = dec__mix64(l->seed ^ dec__mix64(0x6c6f7261ull + (uint64_t)unit)); /* "lora" */
    const tdesc *t;
    const int nt = ntargets(cfg, l, &t);
    size_t at = 0;
    for (int k = 0; k < nt; k++) {
        int col0, out, in, ld;
        geometry(cfg, target_at(cfg, l, k)->bit, &col0, &out, &in, &ld);
        /* kaiming_uniform_(a = sqrt(5)): gain sqrt(2 / (1 + 5)), bound gain * sqrt(3 / fan_in) */
        const double bound = 1.0 / sqrt((double)in);
        const size_t na = (size_t)l->r * (size_t)in, nb = (size_t)out * (size_t)l->r;
        for (size_t i = 0; i < na; i++) dst[at + i] = (float)((2.0 * dec__uniform(&state) - 1.0) * bound);
        memset(dst + at + na, 0, nb * sizeof(float));
        at += na + nb;
    }
}

zero_status dec_lora_init(const dec_config *cfg, const dec_lora *l, zero_engine *e, zero_error *err) {
    const uint64_t n = dec_lora_unit_numel(cfg, l, 1);
    float *buf = malloc((size_t)(n ? n : 1) * sizeof(float));
    if (!buf) {
        dec__errorf(err, "cannot allocate %.1f MiB to initialize the adapters", n * 4.0 / 1048576.0);
        return ZERO_ERR_NOMEM;
    }
    zero_status st = ZERO_OK;
    for (int u = 1; u <= cfg->n_layer && !st; u++) {
        dec_lora_init_unit(cfg, l, u, buf);
        const uint64_t base = dec_unit_numel(cfg, u);
        if ((st = zero_engine_set_unit_range(e, u, base, base + n, buf))) {
            char name[32];
            dec__errorf(err, "initializing the adapters of '%s': %s", dec_unit_name(cfg, u, name, sizeof name),
                        zero_engine_last_error(e));
        }
    }
    free(buf);
    return st;
}

/* ---------------------------------------------------------------- the pass */
typedef struct lsite {
    int n;             /* targets at this site */
    struct {
        int k;         /* the target's index among the set ones (dropout stream) */
        int col0, out, in, ld;
        uint64_t ga, gb; /* offsets of A and B among the adapters (the gradient buffer's layout) */
    } t[4];
} lsite;

struct dec__lora {
    dec_lora l;
    float s;
    int training;
    uint64_t key;  /* the dropout masks' key (dec_lora_set_key) */
    lsite site[DEC__NSITES];
    size_t N;      /* rows the scratch holds */
    int maxin;
    float *h, *dh; /* (N, r) */
    float *xd;     /* (N, maxin): the dropped input (dropout > 0) */
    float *dxd;    /* (N, maxin): its gradient */
    float *ad;     /* a layer's adapters widened from a bf16 trainable part (dec__lora_adapters) */
    uint64_t nad;  /* their elements (dec_lora_unit_numel of a layer) */
    uint64_t bytes;
};

uint64_t dec_lora_activation_bytes(const dec_config *cfg, const dec_lora *l, int B, int T) {
    const uint64_t N = (uint64_t)B * (uint64_t)T;
    dec__dims d;
    dec__dims_of(cfg, &d);
    const uint64_t maxin = (uint64_t)(d.F > d.C ? (d.F > d.Q ? d.F : d.Q) : (d.C > d.Q ? d.C : d.Q));
    return 4 * (2 * N * (uint64_t)l->r + (l->dropout > 0 ? 2 * N * maxin : 0) + dec_lora_unit_numel(cfg, l, 1));
}

dec__lora *dec__lora_create(const dec_config *c, const dec_lora *l, int B, int T, uint64_t *bytes, zero_error *err) {
    if (dec_lora_check(c, l, err)) return NULL;
    dec__lora *x = calloc(1, sizeof *x);
    if (!x) goto nomem;
    x->l = *l;
    x->s = (float)dec_lora_scaling(l);
    x->N = (size_t)B * (size_t)T;
    dec__dims d;
    dec__dims_of(c, &d);
    x->maxin = d.F > d.C ? (d.F > d.Q ? d.F : d.Q) : (d.C > d.Q ? d.C : d.Q);
    /* the targets by site, with their offsets among the adapters (the layer's base first, frozen:
     * the gradient buffer holds the adapters only, in the same order) */
    const tdesc *tt;
    const int nt = ntargets(c, l, &tt);
    uint64_t off = 0;
    for (int k = 0; k < nt; k++) {
        const tdesc *t = target_at(c, l, k);
        lsite *s = &x->site[t->site];
        int col0, out, in, ld;
        geometry(c, t->bit, &col0, &out, &in, &ld);
        const int j = s->n++;
        s->t[j].k = k;
        s->t[j].col0 = col0, s->t[j].out = out, s->t[j].in = in, s->t[j].ld = ld;
        s->t[j].ga = off;
        s->t[j].gb = off + (uint64_t)l->r * (uint64_t)in;
        off += (uint64_t)l->r * ((uint64_t)in + (uint64_t)out);
    }
    const size_t nr = x->N * (size_t)l->r, nx = l->dropout > 0 ? x->N * (size_t)x->maxin : 0;
    x->nad = off;
    x->h = malloc(2 * nr * sizeof(float));
    if (nx) x->xd = malloc(2 * nx * sizeof(float));
    x->ad = malloc((size_t)(off ? off : 1) * sizeof(float));
    if (!x->h || (nx && !x->xd) || !x->ad) goto nomem;
    x->dh = x->h + nr;
    if (nx) x->dxd = x->xd + nx;
    x->bytes = (2 * nr + 2 * nx + (size_t)off) * sizeof(float);
    *bytes = x->bytes;
    return x;
nomem:
    dec__lora_free(x);
    dec__errorf(err, "cannot allocate the LoRA scratch for %zu rows", (size_t)B * (size_t)T);
    return NULL;
}

void dec__lora_free(dec__lora *x) {
    if (!x) return;
    free(x->h);
    free(x->xd);
    free(x->ad);
    free(x);
}

void dec__lora_begin(dec__lora *x, int training) { x->training = training && x->l.dropout > 0; }

void dec__lora_key(dec__lora *x, uint64_t key) { x->key = key; }

/* The dropout mask: element i of the (N, IC) input is kept when a uniform draw that is a function
 * of (seed, key, layer, target, element) only is >= p — the same in forward, in the recomputed
 * forward and in backward. */
static uint64_t mask_base(const dec__lora *x, int layer, int k) {
    return dec__mix64(x->l.seed ^ dec__mix64(x->key ^ dec__mix64(0x64726f70ull + (uint64_t)layer * 64 + (uint64_t)k)));
}
static inline int kept(uint64_t base, size_t i, double p) {
    return (double)(dec__mix64(base + (uint64_t)i) >> 11) * (1.0 / 9007199254740992.0) >= p;
}

/* The adapter's input: x itself, or (training with dropout) x masked and the kept elements
 * scaled by 1/(1 - p), as torch.nn.Dropout does. */
static const float *dropped(dec__lora *x, int layer, int k, const float *in, int IC, size_t N) {
    if (!x->training) return in;
    const double p = x->l.dropout;
    const float keep = (float)(1.0 / (1.0 - p));
    const uint64_t base = mask_base(x, layer, k);
    const size_t n = N * (size_t)IC;
#pragma omp parallel for schedule(static) if (n >= (1u << 18))
    for (size_t i = 0; i < n; i++) x->xd[i] = kept(base, i, p) ? in[i] * keep : 0.0f;
    return x->xd;
}

uint64_t dec__lora_numel(const dec__lora *x) { return x->nad; }

const float *dec__lora_adapters(dec__lora *x, const uint16_t *b) {
    zero_convert(b, ZERO_DTYPE_BF16, x->ad, ZERO_DTYPE_FP32, (size_t)x->nad, ZERO_IMPL_AUTO);
    return x->ad;
}

void dec__lora_fwd(dec__lora *x, int site, const float *ad, const float *in, float *y, size_t N, int layer) {
    const lsite *s = &x->site[site];
    const int r = x->l.r;
    for (int j = 0; j < s->n; j++) {
        const int IC = s->t[j].in, OC = s->t[j].out, ld = s->t[j].ld;
        const float *xin = dropped(x, layer, s->t[j].k, in, IC, N);
        /* h = x A^T (N, r); y[:, col0 : col0 + out] += s h B^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, r, IC, 1.0f, xin, IC, ad + s->t[j].ga, IC, 0.0f, x->h, r);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, OC, r, x->s, x->h, r, ad + s->t[j].gb, r, 1.0f,
                    y + s->t[j].col0, ld);
    }
}

void dec__lora_bwd(dec__lora *x, int site, const float *ad, float *g, const float *in, const float *dy, float *dinp,
                   size_t N, int layer) {
    const lsite *s = &x->site[site];
    const int r = x->l.r;
    for (int j = 0; j < s->n; j++) {
        const int IC = s->t[j].in, OC = s->t[j].out, ld = s->t[j].ld;
        const float *A = ad + s->t[j].ga, *B = ad + s->t[j].gb, *d = dy + s->t[j].col0;
        const float *xin = dropped(x, layer, s->t[j].k, in, IC, N);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)N, r, IC, 1.0f, xin, IC, A, IC, 0.0f, x->h, r);
        /* dB += s dy^T h (out, r); dh = s dy B (N, r); dA += dh^T x (r, in) */
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, r, (int)N, x->s, d, ld, x->h, r, 1.0f, g + s->t[j].gb, r);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, r, OC, x->s, d, ld, B, r, 0.0f, x->dh, r);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, r, IC, (int)N, 1.0f, x->dh, r, xin, IC, 1.0f, g + s->t[j].ga, IC);
        /* d x += dh A (through the dropout mask: kept elements scaled, dropped ones 0) */
        if (xin == in) {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, IC, r, 1.0f, x->dh, r, A, IC, 1.0f, dinp, IC);
            continue;
        }
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)N, IC, r, 1.0f, x->dh, r, A, IC, 0.0f, x->dxd, IC);
        const double pd = x->l.dropout;
        const float keep = (float)(1.0 / (1.0 - pd));
        const uint64_t base = mask_base(x, layer, s->t[j].k);
        const size_t n = N * (size_t)IC;
#pragma omp parallel for schedule(static) if (n >= (1u << 18))
        for (size_t e = 0; e < n; e++)
            if (kept(base, e, pd)) dinp[e] += x->dxd[e] * keep;
    }
}
