/* models/gpt2/gpt2.c — the GPT-2 model: activation buffers (with or without checkpointing), the
 * forward/backward pass over units from a provider (raw pointers here, the engine elsewhere),
 * and token sampling. */
#include <cblas.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpt2/gpt2_internal.h"

/* Activations of one block (N = B*T rows). */
typedef struct gpt2__acts {
    float *ln1;      /* (N, C) */
    float *ln1_mean; /* (N) */
    float *ln1_rstd; /* (N) */
    float *qkv;      /* (N, 3C) */
    float *atty;     /* (N, C) attention output, heads side by side */
    float *att;      /* (B, H, T, T) softmax probabilities */
    float *res2;     /* (N, C) residual after attention: input of ln_2 */
    float *ln2;      /* (N, C) */
    float *ln2_mean; /* (N) */
    float *ln2_rstd; /* (N) */
    float *fch;      /* (N, 4C) c_fc output, before GELU */
    float *fch_gelu; /* (N, 4C) */
} gpt2__acts;

struct gpt2_model {
    gpt2_config cfg;
    int Bmax, Tmax, ckpt;
    size_t head_rows; /* rows of logits computed at once */
    gpt2__block_layout lay;
    zero_mem_stats mem; /* the buffers above, as ZERO_MEM_BUFFERS */
    float *resid;     /* (L+1, N, C): resid[l] = input of block l, resid[L] = input of ln_f */
    float *actbuf;    /* L sets of gpt2__acts (checkpointing: one set, shared) */
    gpt2__acts *acts; /* (L) */
    int shared_holds; /* checkpointing: the block whose activations the shared set holds, or -1 */
    float *lnf;       /* (N, C) */
    float *lnf_mean;  /* (N) */
    float *lnf_rstd;  /* (N) */
    float *logits;    /* (head_rows, V) */
    float *losses;    /* (N) */
    float *dres;      /* (N, C) gradient of the residual stream */
    float *dbuf;      /* (N, C) gradient of a LayerNorm output or of the attention output */
    float *dqkv;      /* (N, 3C) */
    float *dfch;      /* (N, 4C) */
    float *datt;      /* (T, T) one head's attention gradient */
    zero_status fail_status; /* set by a provider whose call returned NULL */
    char err[512];
};

void gpt2__seterr(gpt2_model *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
}

void gpt2__fail(gpt2_model *m, zero_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    m->fail_status = st;
}

/* ---------------------------------------------------------------- buffer plan */
/* The one place that sizes the buffers: gpt2_create allocates exactly these, and
 * gpt2_activation_bytes adds them up. Sizes are in floats. */
typedef struct plan {
    uint64_t resid, act_set, nsets, lnf, head_rows, head, grads;
} plan;

static uint64_t head_rows_of(uint64_t N, int V) {
    /* Up to 2^23 logits (32 MiB) at a time: the full (N, V) logits of a 50k vocabulary would
     * dwarf every other activation. */
    uint64_t r = ((uint64_t)1 << 23) / (uint64_t)V;
    if (r < 1) r = 1;
    return r < N ? r : N;
}

static void plan_of(const gpt2_config *c, int B, int T, int ckpt, plan *p) {
    const uint64_t N = (uint64_t)B * (uint64_t)T, C = (uint64_t)c->n_embd, L = (uint64_t)c->n_layer;
    const uint64_t NC = N * C;
    p->resid = (L + 1) * NC;
    p->act_set = 15 * NC + 4 * N + (uint64_t)B * (uint64_t)c->n_head * (uint64_t)T * (uint64_t)T;
    p->nsets = ckpt ? 1 : L;
    p->lnf = NC + 2 * N;
    p->head_rows = head_rows_of(N, c->vocab);
    p->head = p->head_rows * (uint64_t)c->vocab + N;
    p->grads = 9 * NC + (uint64_t)T * (uint64_t)T;
}

uint64_t gpt2_activation_bytes(const gpt2_config *c, int B, int T, int checkpointing) {
    if (B < 1 || T < 1) return 0;
    plan p;
    plan_of(c, B, T, checkpointing, &p);
    return 4 * (p.resid + p.act_set * p.nsets + p.lnf + p.head + p.grads);
}

/* ---------------------------------------------------------------- create / free */
/* The model's own accounted allocation (64-byte aligned). Not zero_mem_alloc: the model stays a
 * client of the public API that links without the library, except where it drives an engine. */
static float *buf_alloc(gpt2_model *m, uint64_t floats) {
    const size_t bytes = (size_t)floats * sizeof(float);
    void *p = NULL;
    if (floats == 0 || floats > SIZE_MAX / 8 || posix_memalign(&p, 64, bytes)) return NULL;
    m->mem.current[ZERO_MEM_BUFFERS] += bytes;
    m->mem.total_current += bytes;
    if (m->mem.current[ZERO_MEM_BUFFERS] > m->mem.peak[ZERO_MEM_BUFFERS])
        m->mem.peak[ZERO_MEM_BUFFERS] = m->mem.current[ZERO_MEM_BUFFERS];
    if (m->mem.total_current > m->mem.total_peak) m->mem.total_peak = m->mem.total_current;
    return p;
}

static void buf_free(gpt2_model *m, float *p, uint64_t floats) {
    if (!p) return;
    m->mem.current[ZERO_MEM_BUFFERS] -= (size_t)floats * sizeof(float);
    m->mem.total_current -= (size_t)floats * sizeof(float);
    free(p);
}

zero_status gpt2_create(gpt2_model **out, const gpt2_config *cfg, int B, int T, int checkpointing,
                        zero_error *err) {
    *out = NULL;
    zero_status st = gpt2_config_check(cfg, err);
    if (st) return st;
    if (B < 1 || T < 1 || T > cfg->n_ctx || (int64_t)B * T > INT_MAX / 4) {
        gpt2__errorf(err, "micro-batch %d x sequence %d: expected B >= 1 and 1 <= T <= n_ctx %d "
                     "(and B*T below 2^29)", B, T, cfg->n_ctx);
        return ZERO_ERR_INVALID_ARG;
    }
    gpt2_model *m = calloc(1, sizeof *m);
    if (!m) goto nomem;
    m->cfg = *cfg;
    m->Bmax = B;
    m->Tmax = T;
    m->ckpt = checkpointing ? 1 : 0;
    m->shared_holds = -1;
    gpt2__block_layout_of(cfg->n_embd, &m->lay);
    plan p;
    plan_of(cfg, B, T, m->ckpt, &p);
    m->head_rows = (size_t)p.head_rows;
    const size_t N = (size_t)B * T, C = (size_t)cfg->n_embd, L = (size_t)cfg->n_layer;
    const size_t NC = N * C;
    m->acts = calloc(L, sizeof *m->acts);
    m->resid = buf_alloc(m, p.resid);
    m->actbuf = buf_alloc(m, p.act_set * p.nsets);
    m->lnf = buf_alloc(m, p.lnf);
    m->logits = buf_alloc(m, p.head);
    m->dres = buf_alloc(m, p.grads);
    if (!m->acts || !m->resid || !m->actbuf || !m->lnf || !m->logits || !m->dres) goto nomem;
    for (size_t l = 0; l < L; l++) {
        float *s = m->actbuf + (m->ckpt ? 0 : l * p.act_set);
        gpt2__acts *a = &m->acts[l];
        a->ln1 = s, s += NC;
        a->ln1_mean = s, s += N;
        a->ln1_rstd = s, s += N;
        a->qkv = s, s += 3 * NC;
        a->atty = s, s += NC;
        a->res2 = s, s += NC;
        a->ln2 = s, s += NC;
        a->ln2_mean = s, s += N;
        a->ln2_rstd = s, s += N;
        a->fch = s, s += 4 * NC;
        a->fch_gelu = s, s += 4 * NC;
        a->att = s; /* (B, H, T, T): the rest of the set */
    }
    m->lnf_mean = m->lnf + NC;
    m->lnf_rstd = m->lnf_mean + N;
    m->losses = m->logits + p.head_rows * (size_t)cfg->vocab;
    m->dbuf = m->dres + NC;
    m->dqkv = m->dbuf + NC;
    m->dfch = m->dqkv + 3 * NC;
    m->datt = m->dfch + 4 * NC;
    *out = m;
    return ZERO_OK;
nomem:
    gpt2__errorf(err, "cannot allocate %.1f MiB of activations for B=%d T=%d (checkpointing %s)",
                 gpt2_activation_bytes(cfg, B, T, checkpointing) / 1048576.0, B, T,
                 checkpointing ? "on" : "off");
    gpt2_free(m);
    return ZERO_ERR_NOMEM;
}

void gpt2_free(gpt2_model *m) {
    if (!m) return;
    plan p;
    plan_of(&m->cfg, m->Bmax, m->Tmax, m->ckpt, &p);
    buf_free(m, m->resid, p.resid);
    buf_free(m, m->actbuf, p.act_set * p.nsets);
    buf_free(m, m->lnf, p.lnf);
    buf_free(m, m->logits, p.head);
    buf_free(m, m->dres, p.grads);
    free(m->acts);
    free(m);
}

const char *gpt2_last_error(const gpt2_model *m) { return m ? m->err : "no model"; }
const gpt2_config *gpt2_model_config(const gpt2_model *m) { return &m->cfg; }
size_t gpt2_activation_bytes_allocated(const gpt2_model *m) { return m->mem.total_current; }
void gpt2_mem_stats(const gpt2_model *m, zero_mem_stats *out) { *out = m->mem; }

/* ---------------------------------------------------------------- blocks */
static void block_fwd(gpt2_model *m, int l, const float *p, int B, int T) {
    const gpt2__block_layout *w = &m->lay;
    const int C = m->cfg.n_embd;
    const size_t N = (size_t)B * T, NC = N * C;
    const float *x = m->resid + (size_t)l * NC;
    float *y = m->resid + (size_t)(l + 1) * NC;
    gpt2__acts *a = &m->acts[l];
    gpt2__layernorm_fwd(a->ln1, a->ln1_mean, a->ln1_rstd, x, p + w->ln1_w, p + w->ln1_b, N, C);
    gpt2__matmul_fwd(a->qkv, a->ln1, p + w->attn_w, p + w->attn_b, N, C, 3 * C, 0);
    gpt2__attention_fwd(a->atty, a->att, a->qkv, B, T, C, m->cfg.n_head);
    memcpy(a->res2, x, NC * sizeof(float));
    gpt2__matmul_fwd(a->res2, a->atty, p + w->attnproj_w, p + w->attnproj_b, N, C, C, 1);
    gpt2__layernorm_fwd(a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, p + w->ln2_w, p + w->ln2_b, N, C);
    gpt2__matmul_fwd(a->fch, a->ln2, p + w->fc_w, p + w->fc_b, N, C, 4 * C, 0);
    gpt2__gelu_fwd(a->fch_gelu, a->fch, 4 * NC);
    memcpy(y, a->res2, NC * sizeof(float));
    gpt2__matmul_fwd(y, a->fch_gelu, p + w->fcproj_w, p + w->fcproj_b, N, 4 * C, C, 1);
    if (m->ckpt) m->shared_holds = l;
}

/* m->dres holds d loss / d (block output); on return, d loss / d (block input). */
static void block_bwd(gpt2_model *m, int l, const float *p, float *g, int B, int T) {
    const gpt2__block_layout *w = &m->lay;
    const int C = m->cfg.n_embd;
    const size_t N = (size_t)B * T, NC = N * C;
    const float *x = m->resid + (size_t)l * NC;
    const gpt2__acts *a = &m->acts[l];
    gpt2__matmul_bwd(m->dfch, g + w->fcproj_w, g + w->fcproj_b, m->dres, a->fch_gelu, p + w->fcproj_w,
                     N, 4 * C, C);
    gpt2__gelu_bwd(m->dfch, a->fch, 4 * NC);
    gpt2__matmul_bwd(m->dbuf, g + w->fc_w, g + w->fc_b, m->dfch, a->ln2, p + w->fc_w, N, C, 4 * C);
    gpt2__layernorm_bwd(m->dres, g + w->ln2_w, g + w->ln2_b, m->dbuf, a->res2, p + w->ln2_w, a->ln2_mean,
                        a->ln2_rstd, N, C);
    gpt2__matmul_bwd(m->dbuf, g + w->attnproj_w, g + w->attnproj_b, m->dres, a->atty, p + w->attnproj_w,
                     N, C, C);
    gpt2__attention_bwd(m->dqkv, m->datt, m->dbuf, a->att, a->qkv, B, T, C, m->cfg.n_head);
    gpt2__matmul_bwd(m->dbuf, g + w->attn_w, g + w->attn_b, m->dqkv, a->ln1, p + w->attn_w, N, C, 3 * C);
    gpt2__layernorm_bwd(m->dres, g + w->ln1_w, g + w->ln1_b, m->dbuf, x, p + w->ln1_w, a->ln1_mean,
                        a->ln1_rstd, N, C);
}

/* The tied LM head over `rows` rows of x (rows, C): logits, loss, and with gwte the backward
 * (d x into dx, d wte into gwte) — fused, so the full (rows, V) logits never exist at once. */
static void head(gpt2_model *m, const float *wte, float *gwte, const float *x, size_t rows,
                 const int32_t *targets, float dscale, float *dx, float *logits_out) {
    const int C = m->cfg.n_embd, V = m->cfg.vocab;
    for (size_t r0 = 0; r0 < rows; r0 += m->head_rows) {
        const size_t nr = rows - r0 < m->head_rows ? rows - r0 : m->head_rows;
        const float *xr = x + r0 * C;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nr, V, C, 1.0f, xr, C, wte, C, 0.0f,
                    m->logits, V);
        if (logits_out) memcpy(logits_out + r0 * V, m->logits, nr * V * sizeof(float));
        if (!targets) continue;
        gpt2__crossentropy(m->logits, m->losses + r0, targets + r0, nr, V, gwte ? dscale : 0.0f);
        if (!gwte) continue;
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nr, C, V, 1.0f, m->logits, V, wte, C,
                    0.0f, dx + r0 * C, C);
        cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, V, C, (int)nr, 1.0f, m->logits, V, xr, C,
                    1.0f, gwte, C);
    }
}

/* ---------------------------------------------------------------- the pass */
static zero_status check_tokens(gpt2_model *m, const int32_t *tok, int B, int T, const char *what) {
    const int V = m->cfg.vocab;
    for (size_t i = 0; i < (size_t)B * T; i++) {
        if (tok[i] < 0 || tok[i] >= V) {
            gpt2__seterr(m, "%s %d at sequence %zu position %zu: expected a token in [0, %d)", what,
                         (int)tok[i], i / (size_t)T, i % (size_t)T, V);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    return ZERO_OK;
}

/* A provider's NULL: it recorded the reason and the status with gpt2__fail. */
#define TRY_PTR(expr, var)                                                                         \
    do {                                                                                           \
        m->fail_status = ZERO_ERR_INTERNAL;                                                        \
        if (!((var) = (expr))) return m->fail_status;                                              \
    } while (0)
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        zero_status st_ = (expr);                                                                  \
        if (st_) return st_;                                                                       \
    } while (0)

zero_status gpt2__run(gpt2_model *m, const gpt2__units *u, const gpt2__pass *p) {
    const int B = p->B, T = p->T, L = m->cfg.n_layer, C = m->cfg.n_embd, V = m->cfg.vocab;
    if (B < 1 || B > m->Bmax || T < 1 || T > m->Tmax) {
        gpt2__seterr(m, "micro-batch %d x sequence %d: expected 1 <= B <= %d and 1 <= T <= %d (the "
                     "sizes the model was created for)", B, T, m->Bmax, m->Tmax);
        return ZERO_ERR_INVALID_ARG;
    }
    if (p->backward && !p->targets) {
        gpt2__seterr(m, "backward needs targets");
        return ZERO_ERR_INVALID_ARG;
    }
    TRY(check_tokens(m, p->tokens, B, T, "token"));
    if (p->targets) TRY(check_tokens(m, p->targets, B, T, "target"));
    const size_t N = (size_t)B * T, NC = N * C;
    const float *w;
    float *g;
    m->shared_holds = -1;

    /* forward */
    TRY_PTR(u->gather(m, u->ctx, GPT2_UNIT_EMBEDDINGS), w);
    gpt2__encoder_fwd(m->resid, p->tokens, w, w + (size_t)V * C, B, T, C);
    TRY(u->release(m, u->ctx, GPT2_UNIT_EMBEDDINGS));
    for (int l = 0; l < L; l++) {
        TRY_PTR(u->gather(m, u->ctx, 1 + l), w);
        block_fwd(m, l, w, B, T);
        TRY(u->release(m, u->ctx, 1 + l));
    }
    TRY_PTR(u->gather(m, u->ctx, L + 1), w);
    gpt2__layernorm_fwd(m->lnf, m->lnf_mean, m->lnf_rstd, m->resid + (size_t)L * NC, w, w + C, N, C);
    TRY(u->release(m, u->ctx, L + 1));

    TRY_PTR(u->gather(m, u->ctx, GPT2_UNIT_EMBEDDINGS), w);
    g = NULL;
    if (p->backward) TRY_PTR(u->grad(m, u->ctx, GPT2_UNIT_EMBEDDINGS), g);
    if (p->last_logits) {
        /* Only each sequence's last position: gather those rows first. */
        for (int b = 0; b < B; b++)
            memcpy(m->dbuf + (size_t)b * C, m->lnf + ((size_t)b * T + T - 1) * C, C * sizeof(float));
        head(m, w, NULL, m->dbuf, (size_t)B, NULL, 0.0f, NULL, p->last_logits);
    } else {
        head(m, w, g, m->lnf, N, p->targets, p->loss_scale / (float)N, m->dbuf, p->logits);
    }
    TRY(u->release(m, u->ctx, GPT2_UNIT_EMBEDDINGS));
    if (p->targets && p->loss && !p->last_logits) *p->loss = (float)(gpt2__sum(m->losses, N) / (double)N);
    if (!p->backward) return ZERO_OK;

    /* backward: m->dbuf holds d loss / d lnf */
    TRY_PTR(u->gather(m, u->ctx, L + 1), w);
    TRY_PTR(u->grad(m, u->ctx, L + 1), g);
    memset(m->dres, 0, NC * sizeof(float));
    gpt2__layernorm_bwd(m->dres, g, g + C, m->dbuf, m->resid + (size_t)L * NC, w, m->lnf_mean,
                        m->lnf_rstd, N, C);
    TRY(u->grad_ready(m, u->ctx, L + 1));
    TRY(u->release(m, u->ctx, L + 1));
    for (int l = L - 1; l >= 0; l--) {
        TRY_PTR(u->gather(m, u->ctx, 1 + l), w);
        TRY_PTR(u->grad(m, u->ctx, 1 + l), g);
        if (m->ckpt && m->shared_holds != l) block_fwd(m, l, w, B, T);
        block_bwd(m, l, w, g, B, T);
        TRY(u->grad_ready(m, u->ctx, 1 + l));
        TRY(u->release(m, u->ctx, 1 + l));
    }
    /* The embedding backward reads no parameter: its gradient buffer is all it needs. */
    TRY_PTR(u->grad(m, u->ctx, GPT2_UNIT_EMBEDDINGS), g);
    gpt2__encoder_bwd(g, g + (size_t)V * C, m->dres, p->tokens, B, T, C);
    TRY(u->grad_ready(m, u->ctx, GPT2_UNIT_EMBEDDINGS));
    return ZERO_OK;
}

/* ---------------------------------------------------------------- raw pointers */
typedef struct raw_ctx {
    const float *const *params;
    float *const *grads;
} raw_ctx;

static const float *raw_gather(gpt2_model *m, void *ctx, int unit) {
    const float *p = ((raw_ctx *)ctx)->params[unit];
    if (!p) gpt2__fail(m, ZERO_ERR_INVALID_ARG, "params[%d] is NULL: expected unit %d's buffer", unit, unit);
    return p;
}
static zero_status raw_ok(gpt2_model *m, void *ctx, int unit) {
    (void)m, (void)ctx, (void)unit;
    return ZERO_OK;
}
static float *raw_grad(gpt2_model *m, void *ctx, int unit) {
    float *g = ((raw_ctx *)ctx)->grads[unit];
    if (!g)
        gpt2__fail(m, ZERO_ERR_INVALID_ARG, "grads[%d] is NULL: expected unit %d's gradient buffer", unit, unit);
    return g;
}

static zero_status raw_pass(gpt2_model *m, const float *const *params, float *const *grads,
                            gpt2__pass *p) {
    if (!params) {
        gpt2__seterr(m, "params is NULL: expected one pointer per unit");
        return ZERO_ERR_INVALID_ARG;
    }
    raw_ctx ctx = {params, grads};
    gpt2__units u = {raw_gather, raw_ok, raw_grad, raw_ok, &ctx};
    return gpt2__run(m, &u, p);
}

zero_status gpt2_forward_backward(gpt2_model *m, const float *const *params, float *const *grads,
                                  const int32_t *tokens, const int32_t *targets, int B, int T,
                                  float loss_scale, float *loss, float *logits) {
    if (!grads || !tokens || !targets) {
        gpt2__seterr(m, "forward_backward needs grads, tokens and targets (got NULL)");
        return ZERO_ERR_INVALID_ARG;
    }
    gpt2__pass p = {tokens, targets, B, T, 1, loss_scale, loss, logits, NULL};
    return raw_pass(m, params, grads, &p);
}

zero_status gpt2_forward(gpt2_model *m, const float *const *params, const int32_t *tokens,
                         const int32_t *targets, int B, int T, float *loss, float *logits) {
    if (!tokens) {
        gpt2__seterr(m, "forward needs tokens (got NULL)");
        return ZERO_ERR_INVALID_ARG;
    }
    gpt2__pass p = {tokens, targets, B, T, 0, 1.0f, loss, logits, NULL};
    return raw_pass(m, params, NULL, &p);
}

/* ---------------------------------------------------------------- sampling */
static int cmp_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Picks a token from logits (V); scratch: V floats. */
static int sample_token(float *logits, float *scratch, int V, const gpt2_sampling *s, uint64_t *rng) {
    int best = 0;
    for (int i = 1; i < V; i++) best = logits[i] > logits[best] ? i : best;
    if (!(s->temperature > 0.0f)) return best;
    float cut = -INFINITY;
    if (s->top_k > 0 && s->top_k < V) {
        memcpy(scratch, logits, V * sizeof(float));
        qsort(scratch, V, sizeof(float), cmp_desc);
        cut = scratch[s->top_k - 1];
    }
    const float mx = logits[best];
    double sum = 0.0;
    for (int i = 0; i < V; i++) {
        scratch[i] = logits[i] >= cut ? (float)exp((logits[i] - mx) / s->temperature) : 0.0f;
        sum += scratch[i];
    }
    const double target = gpt2__uniform(rng) * sum;
    double acc = 0.0;
    for (int i = 0; i < V; i++) {
        acc += scratch[i];
        if (scratch[i] > 0.0f && acc > target) return i;
    }
    return best; /* rounding left target at the very end */
}

zero_status gpt2__generate(gpt2_model *m, const gpt2__units *u, const int32_t *prompt, int n_prompt,
                           int n_new, const gpt2_sampling *s, int32_t *out) {
    if (!prompt || n_prompt < 1 || n_new < 0 || (n_new > 0 && !out) || !s) {
        gpt2__seterr(m, "generate: prompt of %d tokens, %d new tokens: expected a prompt of at least "
                     "one token, n_new >= 0 and an output buffer", n_prompt, n_new);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!isfinite(s->temperature)) {
        gpt2__seterr(m, "temperature %g: expected a finite number (<= 0 means greedy)", s->temperature);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_status st = check_tokens(m, prompt, 1, n_prompt, "prompt token");
    if (st) return st;
    const int V = m->cfg.vocab;
    const size_t total = (size_t)n_prompt + (size_t)n_new;
    int32_t *hist = malloc(total * sizeof *hist);
    float *buf = malloc(2 * (size_t)V * sizeof(float));
    if (!hist || !buf) {
        free(hist), free(buf);
        gpt2__seterr(m, "generate: cannot allocate %zu tokens of history", total);
        return ZERO_ERR_NOMEM;
    }
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    uint64_t rng = gpt2__mix64(s->seed ^ 0x73616d706c65ull);
    for (int i = 0; i < n_new && !st; i++) {
        const size_t len = (size_t)n_prompt + i;
        const int T = len < (size_t)m->Tmax ? (int)len : m->Tmax;
        gpt2__pass p = {hist + len - T, NULL, 1, T, 0, 1.0f, NULL, NULL, buf};
        st = gpt2__run(m, u, &p);
        if (!st) hist[len] = out[i] = sample_token(buf, buf + V, V, s, &rng);
    }
    free(hist);
    free(buf);
    return st;
}

zero_status gpt2_generate(gpt2_model *m, const float *const *params, const int32_t *prompt,
                          int n_prompt, int n_new, const gpt2_sampling *s, int32_t *out) {
    if (!params) {
        gpt2__seterr(m, "params is NULL: expected one pointer per unit");
        return ZERO_ERR_INVALID_ARG;
    }
    raw_ctx ctx = {params, NULL};
    gpt2__units u = {raw_gather, raw_ok, raw_grad, raw_ok, &ctx};
    return gpt2__generate(m, &u, prompt, n_prompt, n_new, s, out);
}
