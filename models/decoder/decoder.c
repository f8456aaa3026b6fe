/* models/decoder/decoder.c — the decoder: activation buffers (with or without checkpointing), the
 * forward/backward pass over units from a provider (raw pointers here, the engine elsewhere),
 * and token sampling. */
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "decoder/decoder_internal.h"
#include "decoder/lora.h"

/* Activations of one layer (N = B*T rows). */
typedef struct dec__acts {
    float *ln1;      /* (N, C) */
    float *ln1_mean; /* (N) LayerNorm only */
    float *ln1_rstd; /* (N) */
    float *qkv;      /* (N, QKV) the projection; q and k rotated in place unless qk_norm */
    float *qkn;      /* (N, Q + KV) q and k after their norms and RoPE (qk_norm only) */
    float *qk_rstd;  /* (N, H) then (N, G): the q/k norms' statistics (qk_norm only) */
    float *atty;     /* (N, Q) attention output, heads side by side */
    float *lse;      /* (B, H, T) log-sum-exp of each attention row (for the backward) */
    float *res2;     /* (N, C) residual after attention: input of the second norm */
    float *ln2;      /* (N, C) */
    float *ln2_mean; /* (N) */
    float *ln2_rstd; /* (N) */
    float *fch;      /* (N, FC) the MLP's first product (+ bias): GELU input, or [gate | up] */
    float *fch_act;  /* (N, F) GELU(fch), or silu(gate) * up (Gemma: gelu(gate) * up) */
    float *ao;       /* (N, C) Gemma 2/3: the attention projection's output, before its norm */
    float *mo;       /* (N, C) Gemma 2/3: the MLP's output, before its norm */
    float *pan_rstd; /* (N) */
    float *pfn_rstd; /* (N) */
} dec__acts;

struct dec_model {
    dec_config cfg;
    dec__dims d;
    dec__layout lay;
    int Bmax, Tmax, ckpt;
    size_t head_rows; /* rows of logits computed at once */
    size_t head_cap;  /* the rows the logits buffer holds (head_rows unless a test lowered it) */
    size_t head_wtile; /* head_wtiles' weight rows per tile (0: 16 MiB of fp32; tests lower it) */
    zero_impl impl;   /* the model kernels' implementation (zero_impl_best at create) */
    mk_prec prec;     /* the linear layers' products (dec_set_matmul_dtype) */
    int prec_forced;  /* dec__set_matmul_prec: the engine's passes keep prec as set */
    int no_working;   /* dec__set_working_copy(0): bf16 products on the fp32 view, as without one */
    int working_reads; /* units of the last pass resolved from a bf16 working copy (tests) */
    zero_mem_stats mem; /* the buffers below, as ZERO_MEM_BUFFERS */
    float *resid;     /* (L+1, N, C): resid[l] = input of layer l, resid[L] = input of the final norm */
    float *actbuf;    /* L sets of dec__acts (checkpointing: one set, shared) */
    dec__acts *acts;  /* (L) */
    int shared_holds; /* checkpointing: the layer whose activations the shared set holds, or -1 */
    float *lnf;       /* (N, C) */
    float *lnf_mean;  /* (N) */
    float *lnf_rstd;  /* (N) */
    float *logits;    /* (head_rows, V) */
    float *capt;      /* (head_rows, V) Gemma 2's final soft-capping: tanh(logit / cap) of the chunk */
    float *losses;    /* (N) */
    float *dres;      /* (N, C) gradient of the residual stream */
    float *dbuf;      /* (N, max(C, Q)) gradient of a norm output or of the attention output */
    float *dqkv;      /* (N, QKV) */
    float *dfch;      /* (N, FC), or (N, max(FC, Q + KV)) with qk_norm: d q, k after their norms */
    float *dact;      /* (N, F) SwiGLU only: gradient of silu(gate) * up */
    const int32_t *docs; /* dec_set_docs: (B, T) document starts of the next passes, or NULL */
    const float *seq_w;  /* dec_set_seq_weights: (B) each sequence's loss weight, or NULL (all 1) */
    const float *pass_w; /* the running pass's (NULL in sampling) */
    int pass_T;          /* the running pass's sequence length */
    int32_t *pos;     /* (Bmax, Tmax) the pass's positions with documents: t - its document's start */
    const int32_t *pass_doc, *pass_pos; /* the running pass's documents and positions (NULL: none) */
    int pass_span;    /* the running pass's positions: max(position) + 1 (T without documents) */
    float *rope_cos;  /* (ntab, Tmax, R/2) Llama family only (R: the rotated dims of a head) */
    float *rope_sin;  /* (ntab, Tmax, R/2) */
    /* the tables above: [0] the global layers' (LongRoPE: its short factors), [1] Gemma 3's local
     * layers', [2] LongRoPE's long factors (sequences past original_max_position_embeddings) */
    mk_rope rope[3];
    int has_rope[3];
    float embed_scale; /* Gemma: sqrt(C) rounded to fp32 (the compute dtype), else 0 */
    float *vec;       /* a unit's vectors (norm gains, biases) widened from its bf16 working copy */
    dec__lora *lora;  /* LoRA adapters (dec_set_lora): the base is frozen, layers train adapters */
    uint64_t lora_bytes;
    zero_status fail_status; /* set by a provider whose call returned NULL */
    /* The overflow probe (dec__run_probe): each unit's output is checked as the forward makes it,
     * and the first one that is not finite is described in probe_msg ("": none yet). */
    int probe;
    float probe_head; /* the LM head's first logit that is not finite in this pass (0: none) */
    char probe_msg[400];
    char probe_top[80];   /* the tensor of largest magnitude the sites so far read */
    double probe_top_mag; /* its magnitude (-1: none yet) */
    const dec__units *pass;  /* the provider of the pass running (dec__run), or NULL */
    /* A quantized base (the provider's frozen_place): where the tensors of the embeddings unit, of a
     * layer (the same for every layer) and of the final unit are kept in their frozen parts (found
     * at the pass's first gather). nqp: -1 not looked up in this pass, 0 no quantized base, 1 one. */
    struct dec__qset {
        struct dec__qplace {
            uint64_t view, slot, numel;
            zero_qformat fmt;
        } *p;
        int n;   /* tensors of the unit */
        int any; /* a record among them */
    } qs[3];     /* DEC__QS_*: the embeddings, a layer, the final unit */
    int nqp;
    char err[512];
};

void dec__seterr(dec_model *m, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
}

void dec__fail(dec_model *m, zero_status st, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(m->err, sizeof m->err, fmt, ap);
    va_end(ap);
    m->fail_status = st;
}

/* ---------------------------------------------------------------- buffer plan */
/* The one place that sizes the buffers: dec_create allocates exactly these, and
 * dec_activation_bytes adds them up. Sizes are in floats. */
typedef struct plan {
    uint64_t resid, act_set, nsets, lnf, head_rows, head, grads, rope, vec;
} plan;

static uint64_t head_rows_of(uint64_t N, int V) {
    /* Up to 2^24 logits (64 MiB) at a time: the full (N, V) logits of a 50k-150k vocabulary
     * would dwarf every other activation. Each chunk packs the head's weight again and adds into
     * its gradient again: 2^23 (166 rows of GPT-2's 50257) took 11% more time in the head than
     * 2^24 (333 rows), and all 512 rows only 2% less (docs/MODEL.md). */
    uint64_t r = ((uint64_t)1 << 24) / (uint64_t)V;
    if (r < 1) r = 1;
    return r < N ? r : N;
}

/* Which RoPE tables a model of sequences up to T needs (the bits of 1 << k for table k of
 * dec_model.rope) and how many. */
static unsigned rope_table_set(const dec_config *c, int T) {
    unsigned set = 1;
    if (c->rope_local_theta > 0 && c->sliding_pattern > 1) set |= 2;
    if (c->rope_type == DEC_ROPE_LONGROPE && T > c->rope_orig_ctx) set |= 4;
    return set;
}
static int rope_tables(const dec_config *c, int T) {
    const unsigned s = rope_table_set(c, T);
    return (int)(s & 1) + (int)(s >> 1 & 1) + (int)(s >> 2 & 1);
}

/* Columns of dfch: the MLP product's gradient, also the gradient of the normalized q and k, and
 * with sandwich norms the attention projection's output gradient. */
static uint64_t dfch_cols(const dec_config *c, const dec__dims *d) {
    const uint64_t qk = (uint64_t)d->Q + (uint64_t)d->KV;
    uint64_t n = c->qk_norm && qk > (uint64_t)d->FC ? qk : (uint64_t)d->FC;
    if (c->sandwich && (uint64_t)d->C > n) n = (uint64_t)d->C;
    return n;
}

static void plan_of(const dec_config *c, int B, int T, int ckpt, plan *p) {
    dec__dims d;
    dec__dims_of(c, &d);
    const uint64_t N = (uint64_t)B * (uint64_t)T, C = (uint64_t)d.C, L = (uint64_t)c->n_layer;
    const uint64_t NC = N * C, Q = (uint64_t)d.Q, KV = (uint64_t)d.KV, QKV = (uint64_t)d.QKV;
    const uint64_t F = (uint64_t)d.F, FC = (uint64_t)d.FC;
    p->resid = (L + 1) * NC;
    /* the attention keeps its output and one log-sum-exp per row: no (T, T) matrix */
    p->act_set = N * (C + QKV + Q + C + C + FC + F) + 4 * N + (uint64_t)B * (uint64_t)d.H * (uint64_t)T;
    if (c->qk_norm) p->act_set += N * (Q + KV) + N * (uint64_t)(d.H + d.G);
    if (c->sandwich) p->act_set += 2 * NC + 2 * N;
    p->nsets = ckpt ? 1 : L;
    p->lnf = NC + 2 * N;
    p->head_rows = head_rows_of(N, c->vocab);
    p->head = p->head_rows * (uint64_t)c->vocab * (c->final_softcap > 0 ? 2 : 1) + N;
    p->grads = NC + N * (C > Q ? C : Q) + N * QKV + N * dfch_cols(c, &d) + (d.llama ? N * F : 0);
    p->rope = d.llama ? (uint64_t)T * (uint64_t)(c->rotary_dim ? c->rotary_dim : d.D) * (uint64_t)rope_tables(c, T) : 0;
    /* a layer's vectors at most (the final unit's are 2C): the norms' gains and biases, the
     * products' biases and the q/k norms' gains, read in fp32 beside a bf16 working copy */
    p->vec = 6 * C + QKV + FC + 2 * (uint64_t)d.D;
}

uint64_t dec_activation_bytes(const dec_config *c, int B, int T, int checkpointing) {
    if (B < 1 || T < 1) return 0;
    plan p;
    plan_of(c, B, T, checkpointing, &p);
    return 4 * (p.resid + p.act_set * p.nsets + p.lnf + p.head + p.grads + p.rope + p.vec);
}

/* ---------------------------------------------------------------- FLOPs and the GEMM rate */
/* Multiply-adds of one token through the linear layers of one layer. */
static double layer_macs(const dec__dims *d) {
    return (double)d->C * d->QKV + (double)d->Q * d->C + (double)d->C * d->FC + (double)d->F * d->C;
}

double dec_step_flops(const dec_config *c, int B, int T) {
    dec__dims d;
    dec__dims_of(c, &d);
    const double N = (double)B * T, L = c->n_layer;
    const double linear = 2.0 * N * (L * layer_macs(&d) + (double)d.C * c->vocab);
    double pairs = 0.0; /* query-key pairs the layers see */
    for (int l = 0; l < c->n_layer; l++) {
        const double W = dec_layer_window(c, l);
        pairs += W > 0 && W < T ? W * (W + 1.0) / 2.0 + (T - W) * W : T * (T + 1.0) / 2.0;
    }
    const double attn = 4.0 * B * (double)d.H * d.D * pairs;
    return 3.0 * (linear + attn);
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

zero_status dec_gemm_rate(const dec_config *c, int B, int T, double seconds, zero_dtype products,
                          double *flops_per_s) {
    /* bf16 products where dec_set_matmul_dtype would take them, else fp32 (as the model) */
    const int bf = products == ZERO_DTYPE_BF16 && mk_gemm_bf16_native();
    dec__dims d;
    dec__dims_of(c, &d);
    const size_t N = (size_t)B * T, V = (size_t)c->vocab, hrows = (size_t)head_rows_of(N, c->vocab);
    /* the products: (in, out) of each linear layer, then the head's (C, V) over its row chunks */
    const int ins[4] = {d.C, d.Q, d.C, d.F}, outs[4] = {d.QKV, d.C, d.FC, d.C};
    size_t wmax = V * (size_t)d.C, xmax = N * (size_t)d.C, ymax = hrows * V;
    for (int i = 0; i < 4; i++) {
        const size_t w = (size_t)ins[i] * outs[i];
        wmax = w > wmax ? w : wmax;
        xmax = N * (size_t)ins[i] > xmax ? N * (size_t)ins[i] : xmax;
        ymax = N * (size_t)outs[i] > ymax ? N * (size_t)outs[i] : ymax;
    }
    float *W = calloc(wmax, 4), *dW = calloc(wmax, 4), *x = calloc(xmax, 4), *dx = calloc(xmax, 4), *y = calloc(ymax, 4);
    uint16_t *hb = bf ? calloc(wmax + xmax + ymax, 2) : NULL; /* bf16 copies of W, x and y */
    zero_status st = W && dW && x && dx && y && (hb || !bf) ? ZERO_OK : ZERO_ERR_NOMEM;
    for (size_t i = 0; !st && i < wmax; i++) W[i] = (float)((i % 97) * 1e-3);
    for (size_t i = 0; !st && i < xmax; i++) x[i] = (float)((i % 89) * 1e-3);
    for (size_t i = 0; !st && i < ymax; i++) y[i] = (float)((i % 83) * 1e-4);
    uint16_t *wb = hb, *xb = hb ? hb + wmax : NULL, *yb = hb ? hb + wmax + xmax : NULL;
    if (!st && bf) {
        zero_convert(W, ZERO_DTYPE_FP32, wb, ZERO_DTYPE_BF16, wmax, ZERO_IMPL_AUTO);
        zero_convert(x, ZERO_DTYPE_FP32, xb, ZERO_DTYPE_BF16, xmax, ZERO_IMPL_AUTO);
        zero_convert(y, ZERO_DTYPE_FP32, yb, ZERO_DTYPE_BF16, ymax, ZERO_IMPL_AUTO);
    }
    /* round 0 touches the buffers' pages and warms the BLAS and is not counted; then the best of
     * at least 3 rounds (with 2, one slow round under a moment's load set the rate: gpt2 at 2
     * threads measured 131-149 GFLOP/s where 8 s of rounds gave 165) */
    double best = 0.0, flops = 0.0;
    double t_end = 0.0;
    for (int round = 0; !st && (round < 4 || now_s() < t_end); round++) {
        if (round == 1) t_end = now_s() + seconds;
        const double t0 = now_s();
        flops = 0.0;
        for (int i = 0; i < 5 && !st; i++) {
            const int IC = i < 4 ? ins[i] : d.C, OC = i < 4 ? outs[i] : c->vocab, tw = i == 4 || d.llama;
            const size_t step = i < 4 ? N : hrows;
            for (size_t r0 = 0; r0 < N && !st; r0 += step) {
                const size_t nr = N - r0 < step ? N - r0 : step;
                if (bf) {
                    st = mk_linear_fwd_bf16(y, xb, wb, (int)nr, IC, OC, tw, 0.0f);
                    if (!st) st = mk_linear_bwd_bf16(dx, dW, yb, xb, wb, (int)nr, IC, OC, tw);
                } else {
                    st = mk_linear_fwd(y, x, W, NULL, NULL, nr, IC, OC, tw, MK_PREC_FP32, ZERO_IMPL_AUTO);
                    if (!st) st = mk_linear_bwd(dx, dW, NULL, y, x, W, nr, IC, OC, tw, MK_PREC_FP32, ZERO_IMPL_AUTO);
                }
                flops += 6.0 * (double)nr * IC * OC;
            }
        }
        const double r = flops / (now_s() - t0);
        if (round > 0) best = r > best ? r : best;
    }
    free(W), free(dW), free(x), free(dx), free(y), free(hb);
    if (!st) *flops_per_s = best;
    return st;
}

/* ---------------------------------------------------------------- create / free */
/* The model's own accounted allocation (64-byte aligned). Not zero_mem_alloc: the model stays a
 * client of the public API that links without the library, except where it drives an engine. */
static float *buf_alloc(dec_model *m, uint64_t floats) {
    const size_t bytes = (size_t)floats * sizeof(float);
    void *p = NULL;
    if (floats == 0) return NULL;
    if (floats > SIZE_MAX / 8 || posix_memalign(&p, 64, bytes)) return NULL;
    m->mem.current[ZERO_MEM_BUFFERS] += bytes;
    m->mem.total_current += bytes;
    if (m->mem.current[ZERO_MEM_BUFFERS] > m->mem.peak[ZERO_MEM_BUFFERS])
        m->mem.peak[ZERO_MEM_BUFFERS] = m->mem.current[ZERO_MEM_BUFFERS];
    if (m->mem.total_current > m->mem.total_peak) m->mem.total_peak = m->mem.total_current;
    return p;
}

static void buf_free(dec_model *m, float *p, uint64_t floats) {
    if (!p) return;
    m->mem.current[ZERO_MEM_BUFFERS] -= (size_t)floats * sizeof(float);
    m->mem.total_current -= (size_t)floats * sizeof(float);
    free(p);
}

zero_status dec_create(dec_model **out, const dec_config *cfg, int B, int T, int checkpointing, zero_error *err) {
    *out = NULL;
    zero_status st = dec_config_check(cfg, err);
    if (st) return st;
    if (B < 1 || (int64_t)B * T > INT_MAX / 4) {
        dec__errorf(err, "micro-batch %d x sequence %d: expected B >= 1 and B*T below 2^29", B, T);
        return ZERO_ERR_INVALID_ARG;
    }
    if ((st = dec_config_check_seq(cfg, T, err))) return st;
    if (cfg->head_dim > DEC__MAX_HEAD_DIM) {
        dec__errorf(err, "head_dim %d: the attention kernel supports heads of at most %d", cfg->head_dim,
                    DEC__MAX_HEAD_DIM);
        return ZERO_ERR_UNSUPPORTED;
    }
    dec_model *m = calloc(1, sizeof *m);
    if (!m) goto nomem;
    m->nqp = -1;
    m->cfg = *cfg;
    dec__dims_of(cfg, &m->d);
    dec__layout_of(cfg, &m->lay);
    m->Bmax = B;
    m->Tmax = T;
    m->ckpt = checkpointing ? 1 : 0;
    m->shared_holds = -1;
    m->impl = zero_impl_best();
    m->prec = MK_PREC_FP32;
    plan p;
    plan_of(cfg, B, T, m->ckpt, &p);
    m->head_rows = m->head_cap = (size_t)p.head_rows;
    const dec__dims *d = &m->d;
    const size_t N = (size_t)B * T, C = (size_t)d->C, L = (size_t)cfg->n_layer;
    const size_t NC = N * C;
    m->acts = calloc(L, sizeof *m->acts);
    m->resid = buf_alloc(m, p.resid);
    m->actbuf = buf_alloc(m, p.act_set * p.nsets);
    m->lnf = buf_alloc(m, p.lnf);
    m->logits = buf_alloc(m, p.head);
    m->dres = buf_alloc(m, p.grads);
    if (p.rope) m->rope_cos = buf_alloc(m, p.rope);
    m->vec = buf_alloc(m, p.vec);
    m->pos = malloc(N * sizeof *m->pos);
    if (!m->acts || !m->resid || !m->actbuf || !m->lnf || !m->logits || !m->dres || (p.rope && !m->rope_cos) ||
        !m->vec || !m->pos)
        goto nomem;
    for (size_t l = 0; l < L; l++) {
        float *s = m->actbuf + (m->ckpt ? 0 : l * p.act_set);
        dec__acts *a = &m->acts[l];
        a->ln1 = s, s += NC;
        a->ln1_mean = s, s += N;
        a->ln1_rstd = s, s += N;
        a->qkv = s, s += N * (size_t)d->QKV;
        a->atty = s, s += N * (size_t)d->Q;
        a->res2 = s, s += NC;
        a->ln2 = s, s += NC;
        a->ln2_mean = s, s += N;
        a->ln2_rstd = s, s += N;
        a->fch = s, s += N * (size_t)d->FC;
        a->fch_act = s, s += N * (size_t)d->F;
        if (cfg->qk_norm) {
            a->qkn = s, s += N * (size_t)(d->Q + d->KV);
            a->qk_rstd = s, s += N * (size_t)(d->H + d->G);
        }
        if (cfg->sandwich) {
            a->ao = s, s += NC;
            a->mo = s, s += NC;
            a->pan_rstd = s, s += N;
            a->pfn_rstd = s, s += N;
        }
        a->lse = s; /* (B, H, T): the rest of the set */
    }
    m->lnf_mean = m->lnf + NC;
    m->lnf_rstd = m->lnf_mean + N;
    m->losses = m->logits + p.head_rows * (size_t)cfg->vocab * (cfg->final_softcap > 0 ? 2 : 1);
    if (cfg->final_softcap > 0) m->capt = m->logits + p.head_rows * (size_t)cfg->vocab;
    m->dbuf = m->dres + NC;
    m->dqkv = m->dbuf + N * (size_t)(d->C > d->Q ? d->C : d->Q);
    m->dfch = m->dqkv + N * (size_t)d->QKV;
    m->dact = d->llama ? m->dfch + N * (size_t)dfch_cols(cfg, d) : NULL;
    if (p.rope) {
        const int R = cfg->rotary_dim ? cfg->rotary_dim : d->D, nt = rope_tables(cfg, T);
        const unsigned set = rope_table_set(cfg, T);
        const size_t tab = (size_t)T * (size_t)(R / 2);
        m->rope_sin = m->rope_cos + (size_t)nt * tab;
        int at = 0;
        for (int k = 0; k < 3; k++) {
            if (!(set >> k & 1)) continue;
            mk_rope_freq f = {cfg->rope_theta,
                              cfg->rope_type == DEC_ROPE_LINEAR     ? MK_ROPE_LINEAR
                              : cfg->rope_type == DEC_ROPE_LLAMA3   ? MK_ROPE_LLAMA3
                              : cfg->rope_type == DEC_ROPE_LONGROPE ? MK_ROPE_LONGROPE
                                                                    : MK_ROPE_NONE,
                              cfg->rope_factor, cfg->rope_low_freq, cfg->rope_high_freq, cfg->rope_orig_ctx,
                              k == 2 ? cfg->rope_long : cfg->rope_short, cfg->rope_attn_factor};
            if (k == 1) f = (mk_rope_freq){.theta = cfg->rope_local_theta, .scaling = MK_ROPE_NONE};
            float *cs = m->rope_cos + (size_t)at * tab, *sn = m->rope_sin + (size_t)at * tab;
            if (mk_rope_table(cs, sn, T, R, &f) != ZERO_OK) {
                dec__errorf(err, "rope_theta %g, rope_scaling (factor %g, low %g, high %g, original %d): expected theta "
                            "> 1 and finite positive factors (high_freq_factor > low_freq_factor)", cfg->rope_theta,
                            cfg->rope_factor, cfg->rope_low_freq, cfg->rope_high_freq, cfg->rope_orig_ctx);
                dec_free(m);
                return ZERO_ERR_INVALID_ARG;
            }
            m->rope[k] = (mk_rope){cs, sn, T, R};
            m->has_rope[k] = 1;
            at++;
        }
    }
    if (cfg->gemma) m->embed_scale = (float)sqrt((double)d->C);
    *out = m;
    return ZERO_OK;
nomem:
    dec__errorf(err, "cannot allocate %.1f MiB of activations for B=%d T=%d (checkpointing %s)",
                dec_activation_bytes(cfg, B, T, checkpointing) / 1048576.0, B, T, checkpointing ? "on" : "off");
    dec_free(m);
    return ZERO_ERR_NOMEM;
}

void dec_free(dec_model *m) {
    if (!m) return;
    plan p;
    plan_of(&m->cfg, m->Bmax, m->Tmax, m->ckpt, &p);
    buf_free(m, m->resid, p.resid);
    buf_free(m, m->actbuf, p.act_set * p.nsets);
    buf_free(m, m->lnf, p.lnf);
    buf_free(m, m->logits, p.head);
    buf_free(m, m->dres, p.grads);
    buf_free(m, m->rope_cos, p.rope);
    buf_free(m, m->vec, p.vec);
    if (m->lora) {
        m->mem.current[ZERO_MEM_BUFFERS] -= m->lora_bytes;
        m->mem.total_current -= m->lora_bytes;
        dec__lora_free(m->lora);
    }
    for (int k = 0; k < 3; k++) free(m->qs[k].p);
    free(m->acts);
    free(m->pos);
    free(m);
}

void dec_set_docs(dec_model *m, const int32_t *doc) { m->docs = doc; }
void dec_set_seq_weights(dec_model *m, const float *w) { m->seq_w = w; }

zero_status dec_seq_losses(const dec_model *m, int B, int T, double *out) {
    if (B < 1 || T < 1 || (size_t)B * T > (size_t)m->Bmax * m->Tmax || !out) return ZERO_ERR_INVALID_ARG;
    for (int b = 0; b < B; b++) {
        double s = 0.0;
        for (int t = 0; t < T; t++) s += m->losses[(size_t)b * T + t];
        out[b] = s;
    }
    return ZERO_OK;
}

/* d logits rows [r0, r0 + nr) times their sequence's weight (dec_set_seq_weights). */
static void weigh_rows(const dec_model *m, float *d, size_t r0, size_t nr) {
    if (!m->pass_w) return;
    const size_t V = (size_t)m->cfg.vocab;
    for (size_t i = 0; i < nr; i++) {
        const float w = m->pass_w[(r0 + i) / (size_t)m->pass_T];
        if (w != 1.0f)
            for (size_t j = 0; j < V; j++) d[i * V + j] *= w;
    }
}

void dec_lora_set_key(dec_model *m, uint64_t key) {
    if (m->lora) dec__lora_key(m->lora, key);
}

zero_status dec_set_lora(dec_model *m, const dec_lora *l, zero_error *err) {
    uint64_t bytes = 0;
    dec__lora *x = dec__lora_create(&m->cfg, l, m->Bmax, m->Tmax, &bytes, err);
    if (!x) return ZERO_ERR_INVALID_ARG;
    if (m->lora) {
        m->mem.current[ZERO_MEM_BUFFERS] -= m->lora_bytes;
        m->mem.total_current -= m->lora_bytes;
        dec__lora_free(m->lora);
    }
    m->lora = x;
    m->lora_bytes = bytes;
    m->mem.current[ZERO_MEM_BUFFERS] += bytes;
    m->mem.total_current += bytes;
    if (m->mem.current[ZERO_MEM_BUFFERS] > m->mem.peak[ZERO_MEM_BUFFERS]) m->mem.peak[ZERO_MEM_BUFFERS] = m->mem.current[ZERO_MEM_BUFFERS];
    if (m->mem.total_current > m->mem.total_peak) m->mem.total_peak = m->mem.total_current;
    return ZERO_OK;
}

const char *dec_last_error(const dec_model *m) { return m ? m->err : "no model"; }
const dec_config *dec_model_config(const dec_model *m) { return &m->cfg; }
size_t dec_activation_bytes_allocated(const dec_model *m) { return m->mem.total_current; }
void dec_mem_stats(const dec_model *m, zero_mem_stats *out) { *out = m->mem; }

void dec_set_blas_threads(int n) { mk_set_blas_threads(n); }

void dec_compute_info_get(dec_compute_info *out) {
    out->blas = mk_blas_name();
    out->blas_core_better = mk_blas_core_better();
    out->bf16_products = mk_gemm_bf16_path_name();
    out->kernels = zero_impl_name(zero_impl_best());
}

zero_dtype dec_set_matmul_dtype(dec_model *m, zero_dtype want) {
    m->prec = want == ZERO_DTYPE_BF16 && mk_gemm_bf16_native() ? MK_PREC_BF16 : MK_PREC_FP32;
    m->prec_forced = 0;
    return m->prec == MK_PREC_BF16 ? ZERO_DTYPE_BF16 : ZERO_DTYPE_FP32;
}

void dec__set_matmul_prec(dec_model *m, mk_prec prec) {
    m->prec = prec;
    m->prec_forced = 1;
}

void dec__matmul_for_engine(dec_model *m, zero_dtype precision) {
    if (!m->prec_forced) dec_set_matmul_dtype(m, precision);
}

void dec__set_working_copy(dec_model *m, int on) { m->no_working = !on; }
int dec__working_reads(const dec_model *m) { return m->working_reads; }

void dec__set_head_wtile(dec_model *m, size_t rows) { m->head_wtile = rows; }

zero_status dec__set_head_rows(dec_model *m, size_t rows) {
    if (rows < 1 || rows > m->head_cap) return ZERO_ERR_INVALID_ARG;
    m->head_rows = rows;
    return ZERO_OK;
}

zero_status dec__set_impl(dec_model *m, zero_impl impl) {
    if (impl == ZERO_IMPL_AUTO) impl = zero_impl_best();
    if (impl != ZERO_IMPL_SCALAR && impl != ZERO_IMPL_AVX2 && impl != ZERO_IMPL_AVX512) return ZERO_ERR_INVALID_ARG;
    if (!zero_impl_available(impl)) return ZERO_ERR_UNSUPPORTED;
    m->impl = impl;
    return ZERO_OK;
}

/* ---------------------------------------------------------------- layers */
static const float *opt(const float *base, uint64_t off) { return off == DEC__NONE ? NULL : base + off; }
/* A gradient's place; NULL when the tensor is absent or frozen (no gradient buffer: LoRA's base). */
static float *optw(float *base, uint64_t off) { return !base || off == DEC__NONE ? NULL : base + off; }

/* A provider's NULL: it recorded the reason and the status with dec__fail. */
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

/* A model kernel's failure (scratch it could not allocate; a bad argument would be a bug here):
 * the status, with the kernel named in the model's message. After each kernel the provider's
 * progress hook lets its collectives in flight move (its failure has its own message). */
#define MK(m, what, expr)                                                                          \
    do {                                                                                           \
        zero_status st_ = (expr);                                                                  \
        if (st_) {                                                                                 \
            dec__seterr(m, "%s: %s", what, zero_status_string(st_));                               \
            return st_;                                                                            \
        }                                                                                          \
        if ((m)->pass && (m)->pass->progress && (st_ = (m)->pass->progress(m, (m)->pass->ctx)))    \
            return st_;                                                                            \
    } while (0)

/* ---------------------------------------------------------------- a unit's tensors */
/* A matrix as the pass reads it: fp32 (f), or bf16 (b: the working copy as the engine keeps it,
 * which the bf16 products read as it is). Both NULL: absent. */
typedef struct dmat {
    const float *f;
    const uint16_t *b;
    int nq;           /* a quantized base's matrix: its tensors' records, one under the other */
    mk_qweight q[3];
} dmat;

/* A unit's tensors as the pass reads them (gather_unit): the vectors (norm gains, biases) in fp32,
 * the matrices in fp32 or bf16. p: the fp32 base (NULL when it is read in bf16), b: the bf16 one. */
typedef struct dec__uw {
    const float *p;
    const uint16_t *b;
    const char *qbase; /* a quantized base's frozen part (bytes; p or b is the same memory), else NULL */
    size_t qslot;      /* its elements' size */
    const struct dec__qset *qs; /* with qbase: where the unit's tensors are kept */
    const float *ad; /* a layer's LoRA adapters in fp32 (dec__lora_fwd), NULL without LoRA */
    const float *ln1_w, *ln1_b, *qkv_b, *q_norm, *k_norm, *o_b, *ln2_w, *ln2_b, *fc_b, *proj_b; /* a layer */
    const float *pan_w, *pfn_w; /* Gemma 2/3's output norms */
    dmat qkv, o, fc, proj;
    const float *lnf_w, *lnf_b; /* the final unit */
    dmat head;                  /* its lm_head, or the tied head's wte */
} dec__uw;

/* A vector of n at offset off: in the fp32 unit, or widened from the bf16 one into m->vec at *at. */
static const float *vec_of(dec_model *m, const dec__uw *o, uint64_t off, size_t n, size_t *at) {
    if (off == DEC__NONE) return NULL;
    if (o->p) return o->p + off;
    float *v = m->vec + *at;
    zero_convert(o->b + off, ZERO_DTYPE_BF16, v, ZERO_DTYPE_FP32, n, ZERO_IMPL_AUTO);
    *at += n;
    return v;
}

/* A norm gain: vec_of's, and for Gemma (1 + w) in fp32 (as transformers computes it), in m->vec. */
static const float *gain_of(dec_model *m, const dec__uw *o, uint64_t off, size_t n, size_t *at) {
    if (off == DEC__NONE || !m->cfg.gemma) return vec_of(m, o, off, n, at);
    float *v = m->vec + *at;
    if (o->p) memcpy(v, o->p + off, n * sizeof(float));
    else zero_convert(o->b + off, ZERO_DTYPE_BF16, v, ZERO_DTYPE_FP32, n, ZERO_IMPL_AUTO);
    for (size_t i = 0; i < n; i++) v[i] = 1.0f + v[i];
    *at += n;
    return v;
}

static dmat mat_of(const dec__uw *o, uint64_t off) {
    dmat x;
    memset(&x, 0, sizeof x);
    if (off == DEC__NONE) return x;
    if (o->p) x.f = o->p + off;
    else x.b = o->b + off;
    return x;
}

enum { DEC__QS_EMB = 0, DEC__QS_LAYER = 1, DEC__QS_FINAL = 2 };
static int qs_kind(const dec_model *m, int unit) {
    return unit == DEC_UNIT_EMBEDDINGS ? DEC__QS_EMB : unit <= m->cfg.n_layer ? DEC__QS_LAYER : DEC__QS_FINAL;
}

/* A quantized base's place of the unit's tensor at view offset `view` (NULL: none there). */
static const struct dec__qplace *qplace_of(const struct dec__qset *s, uint64_t view) {
    for (int i = 0; s && i < s->n; i++)
        if (s->p[i].view == view) return &s->p[i];
    return NULL;
}

/* A matrix of OC rows (IC wide) at view offset off in a quantized base: the records of the tensors
 * that make it, in order (a layer's q, k, v; gate, up; or one: a layer's other matrices, the
 * embeddings, the LM head). An element matrix there (the quantization left it out): its
 * frozen-dtype elements. */
static dmat qmat_of(const dec__uw *o, uint64_t off, int OC, int IC) {
    dmat x;
    memset(&x, 0, sizeof x);
    if (off == DEC__NONE) return x;
    const struct dec__qplace *q = qplace_of(o->qs, off);
    if (q && q->fmt == ZERO_QFMT_NONE) {
        if (o->p) x.f = o->p + q->slot;
        else x.b = o->b + q->slot;
        return x;
    }
    int rows = 0;
    for (; q && q->fmt != ZERO_QFMT_NONE && rows < OC && x.nq < 3; q = qplace_of(o->qs, off)) {
        zero_quant_view v;
        if (zero_quant_record_view(q->fmt, o->qbase + q->slot * o->qslot, q->numel, &v)) break;
        const int r = (int)(q->numel / (uint64_t)IC);
        x.q[x.nq++] = (mk_qweight){q->fmt == ZERO_QFMT_INT8 ? MK_Q_INT8 : MK_Q_NF4, r, IC, v.codes, v.absmax,
                                   v.qabsmax, v.absmax2, v.offset};
        rows += r;
        off += q->numel;
    }
    if (rows != OC) x.nq = -1; /* not the matrix's rows: resolve_unit's caller refuses it */
    return x;
}

/* 1 when a resolved matrix is usable: absent, elements, or records of its rows. */
static int mat_ok(dmat x) { return x.nq >= 0; }

static uint64_t slot_of(const struct dec__qset *s, uint64_t view) {
    const struct dec__qplace *q = view == DEC__NONE ? NULL : qplace_of(s, view);
    return q ? q->slot : DEC__NONE;
}

/* Resolves unit `unit`'s tensors from its fp32 values p or its bf16 working copy b (one of them).
 * qbase: a unit of a quantized base, whose frozen part p or b is (its vectors at their places
 * there, its matrices records: qmat_of); NULL: the unit's view or its parts in the layout's order. */
static void resolve_unit(dec_model *m, int unit, const float *p, const uint16_t *b, const void *qbase, dec__uw *o) {
    dec__layout tl;
    const dec__layout *w = &m->lay;
    const struct dec__qset *qs = qbase ? &m->qs[qs_kind(m, unit)] : NULL;
    if (qbase) { /* the vectors' places in the frozen part */
        tl = m->lay;
        uint64_t *f[] = {&tl.ln1_w, &tl.ln1_b,  &tl.qkv_b,  &tl.q_norm, &tl.k_norm, &tl.o_b,  &tl.ln2_w,
                         &tl.ln2_b, &tl.fc_b,   &tl.proj_b, &tl.pan_w,  &tl.pfn_w,  &tl.lnf_w, &tl.lnf_b};
        for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) *f[i] = slot_of(qs, *f[i]);
        w = &tl;
    }
    const dec__dims *d = &m->d;
    const size_t C = (size_t)d->C;
    size_t at = 0;
    memset(o, 0, sizeof *o);
    o->p = p, o->b = b;
    o->qbase = qbase;
    o->qslot = p ? sizeof(float) : sizeof(uint16_t);
    o->qs = qs;
    const int V = m->cfg.vocab;
    if (unit == DEC_UNIT_EMBEDDINGS) {
        o->head = qbase ? qmat_of(o, 0, V, d->C) : mat_of(o, 0); /* wte */
    } else if (unit <= m->cfg.n_layer) {
        o->ln1_w = gain_of(m, o, w->ln1_w, C, &at);
        o->ln1_b = vec_of(m, o, w->ln1_b, C, &at);
        o->qkv_b = vec_of(m, o, w->qkv_b, (size_t)d->QKV, &at);
        o->q_norm = gain_of(m, o, w->q_norm, (size_t)d->D, &at);
        o->k_norm = gain_of(m, o, w->k_norm, (size_t)d->D, &at);
        o->o_b = vec_of(m, o, w->o_b, C, &at);
        o->ln2_w = gain_of(m, o, w->ln2_w, C, &at);
        o->pan_w = gain_of(m, o, w->pan_w, C, &at);
        o->pfn_w = gain_of(m, o, w->pfn_w, C, &at);
        o->ln2_b = vec_of(m, o, w->ln2_b, C, &at);
        o->fc_b = vec_of(m, o, w->fc_b, (size_t)d->FC, &at);
        o->proj_b = vec_of(m, o, w->proj_b, C, &at);
        if (qbase) {
            o->qkv = qmat_of(o, m->lay.qkv_w, d->QKV, d->C), o->o = qmat_of(o, m->lay.o_w, d->C, d->Q);
            o->fc = qmat_of(o, m->lay.fc_w, d->FC, d->C), o->proj = qmat_of(o, m->lay.proj_w, d->C, d->F);
        } else {
            o->qkv = mat_of(o, w->qkv_w), o->o = mat_of(o, w->o_w);
            o->fc = mat_of(o, w->fc_w), o->proj = mat_of(o, w->proj_w);
        }
    } else {
        o->lnf_w = gain_of(m, o, w->lnf_w, C, &at);
        o->lnf_b = vec_of(m, o, w->lnf_b, C, &at);
        o->head = qbase ? qmat_of(o, m->lay.head_w, V, d->C) : mat_of(o, w->head_w);
    }
}

/* The base tensors' elements of a unit (without LoRA's adapters). */
static uint64_t base_numel(const dec_model *m, int unit) {
    return unit == DEC_UNIT_EMBEDDINGS ? m->lay.emb_numel : unit <= m->cfg.n_layer ? m->lay.numel : m->lay.final_numel;
}

static int fp32_or_bf16(zero_dtype d) { return d == ZERO_DTYPE_FP32 || d == ZERO_DTYPE_BF16; }

/* Gathers a unit and resolves its tensors. Where the products are bf16 and the provider has
 * them, from the unit's parts as they are kept (no fp32 view of the matrices is made): the base
 * is the trainable part, or under LoRA the frozen part (dec_lora_register: every base tensor
 * frozen, in order, the adapters the trainable part); bf16 or fp32 each. Else from its fp32 view. */
/* A quantized base (the provider's frozen_place) on a LoRA run: looks up once per pass where the
 * tensors of the embeddings unit, of a layer and of the final unit are kept (m->qs; m->nqp 0 when
 * the base is not quantized). */
static zero_status find_qbase(dec_model *m, const dec__units *u) {
    if (m->nqp >= 0) return ZERO_OK;
    m->nqp = 0;
    if (!u->frozen_place || !m->lora || m->cfg.n_layer < 1) return ZERO_OK;
    dec_param_desc d;
    int any = 0;
    for (int k = 0; k < 3; k++) {
        struct dec__qset *qs = &m->qs[k];
        const int unit = k == DEC__QS_EMB ? DEC_UNIT_EMBEDDINGS : k == DEC__QS_LAYER ? 1 : m->cfg.n_layer + 1;
        qs->n = qs->any = 0;
        for (int i = 0; i < dec_num_tensors(&m->cfg) && !dec_tensor_desc(&m->cfg, i, &d); i++) {
            if (d.unit != unit) continue;
            struct dec__qplace *q = realloc(qs->p, (size_t)(qs->n + 1) * sizeof *q);
            if (!q) {
                dec__seterr(m, "out of memory for a unit's places");
                return ZERO_ERR_NOMEM;
            }
            qs->p = q;
            q[qs->n].view = d.offset, q[qs->n].numel = d.numel;
            TRY(u->frozen_place(m, u->ctx, unit, d.offset, &q[qs->n].slot, &q[qs->n].fmt));
            qs->any |= q[qs->n].fmt != ZERO_QFMT_NONE;
            qs->n++;
        }
        any |= qs->any;
    }
    if (any && !m->d.llama) {
        dec__seterr(m, "a quantized base of GPT-2 (Conv1D weights, (in, out)) is not supported yet");
        return ZERO_ERR_UNSUPPORTED;
    }
    m->nqp = any;
    return ZERO_OK;
}

static zero_status gather_unit(dec_model *m, const dec__units *u, int unit, dec__uw *o) {
    const int layer = unit >= 1 && unit <= m->cfg.n_layer;
    TRY(find_qbase(m, u));
    const int qunit = m->nqp > 0 && m->qs[qs_kind(m, unit)].any; /* a unit holding records */
    /* a LoRA model's embeddings and final unit are frozen: read as kept even under fp32 products
     * (their bf16 head widened by tiles, head_wtiles; the embeddings' rows one at a time), so no
     * fp32 view of a vocabulary-sized table is made */
    const int frozen_unit = m->lora && !layer && m->impl != ZERO_IMPL_SCALAR && u->gather_parts && !m->no_working &&
                            (u->frozen_dtype == ZERO_DTYPE_FP32 || u->frozen_dtype == ZERO_DTYPE_BF16);
    if (!qunit && !frozen_unit &&
        !(m->prec == MK_PREC_BF16 && m->impl != ZERO_IMPL_SCALAR && u->gather_parts && !m->no_working)) {
        const float *p;
        TRY_PTR(u->gather(m, u->ctx, unit), p);
        resolve_unit(m, unit, p, NULL, NULL, o);
        if (m->lora && layer) o->ad = p + base_numel(m, unit);
        return ZERO_OK;
    }
    zero_unit_parts pt;
    TRY(u->gather_parts(m, u->ctx, unit, &pt));
    const int lora = m->lora != NULL;
    const void *bp = lora ? pt.frozen : pt.trainable;
    const zero_dtype bdt = lora ? pt.frozen_dtype : pt.trainable_dtype;
    const uint64_t bn = lora ? pt.frozen_numel : pt.trainable_numel, an = lora ? pt.trainable_numel : pt.frozen_numel;
    const uint64_t want_an = lora && layer ? dec__lora_numel(m->lora) : 0;
    if (qunit) { /* records and elements of the frozen dtype: the vectors widened, the matrices by tiles */
        if (an != want_an || !fp32_or_bf16(bdt) || (an && !fp32_or_bf16(pt.trainable_dtype))) {
            dec__seterr(m, "unit %d: a quantized base's parts: %llu adapter elements (%s) and a frozen part in %s: "
                        "expected %llu in fp32 or bf16", unit, (unsigned long long)an,
                        zero_dtype_name(pt.trainable_dtype), zero_dtype_name(bdt), (unsigned long long)want_an);
            return ZERO_ERR_STATE;
        }
        const int fp = bdt == ZERO_DTYPE_FP32;
        resolve_unit(m, unit, fp ? bp : NULL, fp ? NULL : bp, bp, o);
        if (!mat_ok(o->qkv) || !mat_ok(o->o) || !mat_ok(o->fc) || !mat_ok(o->proj) || !mat_ok(o->head)) {
            dec__seterr(m, "unit %d: a quantized base's matrices are not whole records of their rows", unit);
            return ZERO_ERR_STATE;
        }
        if (an)
            o->ad = pt.trainable_dtype == ZERO_DTYPE_FP32 ? pt.trainable : dec__lora_adapters(m->lora, pt.trainable);
        return ZERO_OK;
    }
    if (bn != base_numel(m, unit) || an != want_an || !fp32_or_bf16(bdt) || (an && !fp32_or_bf16(pt.trainable_dtype))) {
        dec__seterr(m, "unit %d: parts of %llu trainable (%s) and %llu frozen (%s) elements: expected the %llu of the "
                    "base%s and %llu of adapters, in fp32 or bf16", unit, (unsigned long long)pt.trainable_numel,
                    zero_dtype_name(pt.trainable_dtype), (unsigned long long)pt.frozen_numel,
                    zero_dtype_name(pt.frozen_dtype), (unsigned long long)base_numel(m, unit),
                    lora ? " (frozen)" : "", (unsigned long long)want_an);
        return ZERO_ERR_STATE;
    }
    const int fp = bdt == ZERO_DTYPE_FP32;
    resolve_unit(m, unit, fp ? bp : NULL, fp ? NULL : bp, NULL, o);
    if (!fp) m->working_reads++;
    if (an)
        o->ad = pt.trainable_dtype == ZERO_DTYPE_FP32 ? pt.trainable : dec__lora_adapters(m->lora, pt.trainable);
    return ZERO_OK;
}

/* out = x W' (+ bias, + resid) on the layer's matrix W (mk_linear_fwd, or _wb on bf16). */
static zero_status lin_fwd(dec_model *m, const char *what, float *out, const float *x, dmat W, const float *bias,
                           const float *resid, size_t N, int IC, int OC) {
    const int wt = m->d.llama;
    if (W.nq > 0) MK(m, what, mk_qlinear_fwd(out, x, W.q, W.nq, bias, resid, N, m->prec, m->impl));
    else if (W.b) MK(m, what, mk_linear_fwd_wb(out, x, W.b, bias, resid, N, IC, OC, wt, m->impl));
    else MK(m, what, mk_linear_fwd(out, x, W.f, bias, resid, N, IC, OC, wt, m->prec, m->impl));
    return ZERO_OK;
}

static zero_status lin_bwd(dec_model *m, const char *what, float *dx, float *dW, float *dbias, const float *dy,
                           const float *x, dmat W, size_t N, int IC, int OC) {
    const int wt = m->d.llama;
    if (W.nq > 0 && (dW || dbias)) { /* a quantized base is frozen: nothing of it trains */
        dec__seterr(m, "%s: a quantized weight takes no gradient", what);
        return ZERO_ERR_STATE;
    }
    if (W.nq > 0) MK(m, what, mk_qlinear_bwd(dx, dy, W.q, W.nq, N, m->prec, m->impl));
    else if (W.b) MK(m, what, mk_linear_bwd_wb(dx, dW, dbias, dy, x, W.b, N, IC, OC, wt, m->impl));
    else MK(m, what, mk_linear_bwd(dx, dW, dbias, dy, x, W.f, N, IC, OC, wt, m->prec, m->impl));
    return ZERO_OK;
}

/* out = norm(inp) with the gain and (LayerNorm) the bias; mean unused by RMSNorm. */
static zero_status norm_fwd(dec_model *m, float *out, float *mean, float *rstd, const float *inp, const float *gain,
                            const float *bias, size_t N) {
    const int C = m->d.C;
    const float eps = (float)m->cfg.norm_eps;
    if (m->d.llama) MK(m, "rmsnorm", mk_rmsnorm_fwd(out, rstd, inp, gain, N, C, C, C, eps, m->impl));
    else MK(m, "layernorm", mk_layernorm_fwd(out, mean, rstd, inp, gain, bias, N, C, C, C, eps, m->impl));
    return ZERO_OK;
}

/* dinp (+)= the norm's input gradient from dout (added when acc); the gain (and bias) gradients
 * added into g at g_off and b_off. */
static zero_status norm_bwd(dec_model *m, float *dinp, const float *dout, const float *inp, const float *gain,
                            float *g, uint64_t g_off, uint64_t b_off, const float *mean, const float *rstd, size_t N,
                            int acc) {
    const int C = m->d.C;
    if (m->d.llama)
        MK(m, "rmsnorm backward", mk_rmsnorm_bwd(dinp, optw(g, g_off), dout, inp, gain, rstd, N, C, C, C, acc, m->impl));
    else
        MK(m, "layernorm backward", mk_layernorm_bwd(dinp, optw(g, g_off), optw(g, b_off), dout, inp, gain, mean, rstd,
                                                     N, C, C, C, acc, m->impl));
    return ZERO_OK;
}

/* Layer l's attention on this micro-batch; q and k at ld_qk (the projection's stride, or the
 * normalized q/k buffer's with qk_norm), v in the projection; the layer's sliding window. */
static mk_attn attn_of(const dec_model *m, int l, int B, int T, size_t ld_qk) {
    const dec__dims *d = &m->d;
    /* Gemma 2/3: 1/sqrt(query_pre_attn_scalar) (transformers' query_pre_attn_scalar ** -0.5) */
    const float scale = m->cfg.attn_scalar > 0 ? (float)(1.0 / sqrt(m->cfg.attn_scalar)) : 1.0f / sqrtf((float)d->D);
    const mk_attn a = {B,     T,    d->H, d->G, d->D, ld_qk, ld_qk, (size_t)d->QKV, (size_t)d->Q,
                       scale, (float)m->cfg.attn_softcap, dec_layer_window(&m->cfg, l), m->pass_doc};
    return a;
}

/* The RoPE table of layer l for this pass: Gemma 3's local table on its local layers, LongRoPE's
 * long one past original_max_position_embeddings (transformers picks by max(position_ids) + 1: T,
 * or with documents the longest one's length). */
static const mk_rope *rope_of(const dec_model *m, int l) {
    const dec_config *c = &m->cfg;
    if (m->has_rope[1] && (l + 1) % c->sliding_pattern != 0) return &m->rope[1];
    if (m->has_rope[2] && m->pass_span > c->rope_orig_ctx) return &m->rope[2];
    return &m->rope[0];
}

/* y = a + b, element-wise (a residual add after a sandwich norm; y may equal a or b). */
static void add_rows(float *y, const float *a, const float *b, size_t n) {
    for (size_t i = 0; i < n; i++) y[i] = a[i] + b[i];
}

static zero_status layer_fwd(dec_model *m, int l, const dec__uw *w, int B, int T) {
    const dec__dims *d = &m->d;
    const int C = d->C;
    const size_t N = (size_t)B * T, NC = N * C, QK = (size_t)(d->Q + d->KV);
    const zero_impl im = m->impl;
    const float *p = w->ad; /* LoRA's adapters */
    const float *x = m->resid + (size_t)l * NC;
    float *y = m->resid + (size_t)(l + 1) * NC;
    dec__acts *a = &m->acts[l];
    TRY(norm_fwd(m, a->ln1, a->ln1_mean, a->ln1_rstd, x, w->ln1_w, w->ln1_b, N));
    TRY(lin_fwd(m, "qkv projection", a->qkv, a->ln1, w->qkv, w->qkv_b, NULL, N, C, d->QKV));
    if (m->lora) dec__lora_fwd(m->lora, DEC__SITE_QKV, p, a->ln1, a->qkv, N, l);
    float *qk = a->qkv; /* q heads then k heads, H + G adjacent heads of D */
    size_t ld_qk = (size_t)d->QKV;
    if (m->cfg.qk_norm) { /* the projection stays as it is: the norms' backward reads it */
        const float eps = (float)m->cfg.norm_eps;
        MK(m, "q norm", mk_rmsnorm_heads_fwd(a->qkn, a->qk_rstd, a->qkv, w->q_norm, N, d->H, d->D, d->QKV, QK, eps, im));
        MK(m, "k norm", mk_rmsnorm_heads_fwd(a->qkn + d->Q, a->qk_rstd + N * (size_t)d->H, a->qkv + d->Q, w->k_norm, N,
                                             d->G, d->D, d->QKV, QK, eps, im));
        qk = a->qkn, ld_qk = QK;
    }
    if (d->llama) MK(m, "rope", mk_rope_fwd(rope_of(m, l), qk, ld_qk, N, T, d->H + d->G, d->D, m->pass_pos, im));
    const mk_attn at = attn_of(m, l, B, T, ld_qk);
    MK(m, "attention", mk_attention_fwd(&at, a->atty, a->lse, qk, qk + d->Q, a->qkv + d->Q + d->KV, im));
    if (m->cfg.sandwich) { /* Gemma 2/3: x + norm(o), the norm's input kept in ao */
        TRY(lin_fwd(m, "attention projection", a->ao, a->atty, w->o, w->o_b, NULL, N, d->Q, C));
        if (m->lora) dec__lora_fwd(m->lora, DEC__SITE_O, p, a->atty, a->ao, N, l);
        TRY(norm_fwd(m, a->res2, NULL, a->pan_rstd, a->ao, w->pan_w, NULL, N));
        add_rows(a->res2, a->res2, x, NC);
    } else {
        TRY(lin_fwd(m, "attention projection", a->res2, a->atty, w->o, w->o_b, x, N, d->Q, C));
        if (m->lora) dec__lora_fwd(m->lora, DEC__SITE_O, p, a->atty, a->res2, N, l);
    }
    TRY(norm_fwd(m, a->ln2, a->ln2_mean, a->ln2_rstd, a->res2, w->ln2_w, w->ln2_b, N));
    if (d->llama) {
        TRY(lin_fwd(m, "gate/up projection", a->fch, a->ln2, w->fc, w->fc_b, NULL, N, C, d->FC));
        if (m->lora) dec__lora_fwd(m->lora, DEC__SITE_FC, p, a->ln2, a->fch, N, l);
        if (m->cfg.gemma) MK(m, "geglu", mk_geglu_fwd(a->fch_act, d->F, a->fch, a->fch + d->F, d->FC, N, d->F, im));
        else MK(m, "swiglu", mk_swiglu_fwd(a->fch_act, d->F, a->fch, a->fch + d->F, d->FC, N, d->F, im));
    } else if (w->fc_b) { /* the bias added in GELU's pass */
        TRY(lin_fwd(m, "fc", a->fch, a->ln2, w->fc, NULL, NULL, N, C, d->FC));
        if (m->lora) dec__lora_fwd(m->lora, DEC__SITE_FC, p, a->ln2, a->fch, N, l);
        MK(m, "bias + gelu", mk_bias_gelu_fwd(a->fch_act, d->F, a->fch, d->F, w->fc_b, N, d->F, im));
    } else {
        TRY(lin_fwd(m, "fc", a->fch, a->ln2, w->fc, NULL, NULL, N, C, d->FC));
        if (m->lora) dec__lora_fwd(m->lora, DEC__SITE_FC, p, a->ln2, a->fch, N, l);
        MK(m, "gelu", mk_gelu_fwd(a->fch_act, a->fch, N * (size_t)d->F, im));
    }
    if (m->cfg.sandwich) { /* res2 + norm(mlp), the norm's input kept in mo */
        TRY(lin_fwd(m, "mlp projection", a->mo, a->fch_act, w->proj, w->proj_b, NULL, N, d->F, C));
        if (m->lora) dec__lora_fwd(m->lora, DEC__SITE_PROJ, p, a->fch_act, a->mo, N, l);
        TRY(norm_fwd(m, y, NULL, a->pfn_rstd, a->mo, w->pfn_w, NULL, N));
        add_rows(y, y, a->res2, NC);
    } else {
        TRY(lin_fwd(m, "mlp projection", y, a->fch_act, w->proj, w->proj_b, a->res2, N, d->F, C));
        if (m->lora) dec__lora_fwd(m->lora, DEC__SITE_PROJ, p, a->fch_act, y, N, l);
    }
    if (m->ckpt) m->shared_holds = l;
    return ZERO_OK;
}

/* m->dres holds d loss / d (layer output); on return, d loss / d (layer input). g: the base's
 * gradients (NULL when frozen); gl: the adapters' (LoRA; NULL without). */
static zero_status layer_bwd(dec_model *m, int l, const dec__uw *w, float *g, float *gl, int B, int T) {
    const dec__layout *lo = &m->lay;
    const dec__dims *d = &m->d;
    const int C = d->C;
    const size_t N = (size_t)B * T, NC = N * C, QK = (size_t)(d->Q + d->KV);
    const zero_impl im = m->impl;
    const float *p = w->ad; /* LoRA's adapters */
    const float *x = m->resid + (size_t)l * NC;
    const dec__acts *a = &m->acts[l];
    /* Gemma 2/3: d mo (the MLP output's gradient through its norm) into dbuf; dres stays d res2's
     * residual part */
    const float *dmlp = m->dres;
    if (m->cfg.sandwich) {
        TRY(norm_bwd(m, m->dbuf, m->dres, a->mo, w->pfn_w, g, lo->pfn_w, DEC__NONE, NULL, a->pfn_rstd, N, 0));
        dmlp = m->dbuf;
    }
    if (d->llama) {
        TRY(lin_bwd(m, "mlp projection backward", m->dact, optw(g, lo->proj_w), optw(g, lo->proj_b), dmlp,
                    a->fch_act, w->proj, N, d->F, C));
        if (gl) dec__lora_bwd(m->lora, DEC__SITE_PROJ, p, gl, a->fch_act, dmlp, m->dact, N, l);
        if (m->cfg.gemma)
            MK(m, "geglu backward", mk_geglu_bwd(m->dfch, m->dfch + d->F, m->dact, d->F, a->fch, a->fch + d->F, d->FC,
                                                 N, d->F, im));
        else
            MK(m, "swiglu backward", mk_swiglu_bwd(m->dfch, m->dfch + d->F, m->dact, d->F, a->fch, a->fch + d->F, d->FC,
                                                   N, d->F, im));
    } else {
        TRY(lin_bwd(m, "mlp projection backward", m->dfch, optw(g, lo->proj_w), optw(g, lo->proj_b), m->dres,
                    a->fch_act, w->proj, N, d->F, C));
        if (gl) dec__lora_bwd(m->lora, DEC__SITE_PROJ, p, gl, a->fch_act, m->dres, m->dfch, N, l);
        if (lo->fc_b != DEC__NONE && g) /* with the fc bias gradient in the same pass */
            MK(m, "gelu backward", mk_gelu_bwd_bias(m->dfch, optw(g, lo->fc_b), m->dfch, a->fch, N, d->F, d->F, im));
        else
            MK(m, "gelu backward", mk_gelu_bwd(m->dfch, m->dfch, a->fch, N * (size_t)d->F, im));
    }
    TRY(lin_bwd(m, "fc backward", m->dbuf, optw(g, lo->fc_w), d->llama ? optw(g, lo->fc_b) : NULL, m->dfch, a->ln2,
                w->fc, N, C, d->FC));
    if (gl) dec__lora_bwd(m->lora, DEC__SITE_FC, p, gl, a->ln2, m->dfch, m->dbuf, N, l);
    TRY(norm_bwd(m, m->dres, m->dbuf, a->res2, w->ln2_w, g, lo->ln2_w, lo->ln2_b, a->ln2_mean, a->ln2_rstd, N, 1));
    const float *dattn = m->dres; /* the attention projection's output gradient */
    if (m->cfg.sandwich) {        /* through the post-attention norm, into dfch (free until the attention's) */
        TRY(norm_bwd(m, m->dfch, m->dres, a->ao, w->pan_w, g, lo->pan_w, DEC__NONE, NULL, a->pan_rstd, N, 0));
        dattn = m->dfch;
    }
    TRY(lin_bwd(m, "attention projection backward", m->dbuf, optw(g, lo->o_w), optw(g, lo->o_b), dattn, a->atty,
                w->o, N, d->Q, C));
    if (gl) dec__lora_bwd(m->lora, DEC__SITE_O, p, gl, a->atty, dattn, m->dbuf, N, l);
    /* d q and d k: into dqkv, or (qk_norm) into dfch, the gradient after the norms */
    const float *qk = m->cfg.qk_norm ? a->qkn : a->qkv;
    float *dqk = m->cfg.qk_norm ? m->dfch : m->dqkv;
    const size_t ld_qk = m->cfg.qk_norm ? QK : (size_t)d->QKV;
    const mk_attn at = attn_of(m, l, B, T, ld_qk);
    MK(m, "attention backward", mk_attention_bwd(&at, dqk, dqk + d->Q, m->dqkv + d->Q + d->KV, m->dbuf, qk, qk + d->Q,
                                                 a->qkv + d->Q + d->KV, a->atty, a->lse, im));
    if (d->llama) MK(m, "rope backward", mk_rope_bwd(rope_of(m, l), dqk, ld_qk, N, T, d->H + d->G, d->D, m->pass_pos, im));
    if (m->cfg.qk_norm) { /* dqkv's q and k columns: the gradients before the norms */
        MK(m, "q norm backward", mk_rmsnorm_heads_bwd(m->dqkv, optw(g, lo->q_norm), dqk, a->qkv, w->q_norm,
                                                      a->qk_rstd, N, d->H, d->D, d->QKV, QK, 0, im));
        MK(m, "k norm backward", mk_rmsnorm_heads_bwd(m->dqkv + d->Q, optw(g, lo->k_norm), dqk + d->Q, a->qkv + d->Q,
                                                      w->k_norm, a->qk_rstd + N * (size_t)d->H, N, d->G, d->D,
                                                      d->QKV, QK, 0, im));
    }
    TRY(lin_bwd(m, "qkv projection backward", m->dbuf, optw(g, lo->qkv_w), optw(g, lo->qkv_b), m->dqkv, a->ln1,
                w->qkv, N, C, d->QKV));
    if (gl) dec__lora_bwd(m->lora, DEC__SITE_QKV, p, gl, a->ln1, m->dqkv, m->dbuf, N, l);
    return norm_bwd(m, m->dres, m->dbuf, x, w->ln1_w, g, lo->ln1_w, lo->ln1_b, a->ln1_mean, a->ln1_rstd, N, 1);
}

/* ---------------------------------------------------------------- the overflow probe */
/* The first of x[0, n) that is not finite, or 0 when all are (0 is finite: it cannot be mistaken
 * for one). */
static float first_nonfinite(const float *x, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!isfinite(x[i])) return x[i];
    return 0.0f;
}

static const char *nonfinite_name(float v) { return isnan(v) ? "NaN" : v > 0 ? "+inf" : "-inf"; }

static double max_abs(const float *x, size_t n) {
    double mx = 0.0;
    for (size_t i = 0; i < n; i++)
        if (fabsf(x[i]) > mx) mx = fabsf(x[i]);
    return mx;
}

/* The largest magnitude in a tensor of the resolved unit: its fp32 values, or its bf16 ones
 * widened (exactly: a bf16 is the top half of the float). */
static double tensor_max_abs(const dec__uw *w, uint64_t off, uint64_t n) {
    const struct dec__qplace *q = w->qbase ? qplace_of(w->qs, off) : NULL;
    if (q && q->fmt != ZERO_QFMT_NONE) { /* a record: its values decoded a piece at a time */
        zero_quant_view v;
        float buf[1024];
        double mx = 0.0;
        if (zero_quant_record_view(q->fmt, w->qbase + q->slot * w->qslot, q->numel, &v)) return 0.0;
        for (uint64_t i = 0; i < n; i += 1024) {
            const uint64_t k = n - i < 1024 ? n - i : 1024;
            if (zero_quant_record_decode(&v, i, k, buf)) return 0.0;
            const double x = max_abs(buf, (size_t)k);
            if (x > mx) mx = x;
        }
        return mx;
    }
    if (q) off = q->slot;
    if (w->p) return max_abs(w->p + off, (size_t)n);
    double mx = 0.0;
    for (uint64_t i = 0; i < n; i++) {
        const uint32_t bits = (uint32_t)w->b[off + i] << 16;
        float f;
        memcpy(&f, &bits, sizeof f);
        if (fabsf(f) > mx) mx = fabsf(f);
    }
    return mx;
}

/* The tensor of largest magnitude among unit `unit`'s elements [lo, hi): its name into name (cap
 * bytes) and its magnitude (-1: none there). */
static double largest_tensor(const dec_model *m, int unit, const dec__uw *w, uint64_t lo, uint64_t hi, char *name,
                             size_t cap) {
    double top = -1.0;
    dec_param_desc d;
    for (int i = 0; i < dec_num_tensors(&m->cfg) && !dec_tensor_desc(&m->cfg, i, &d); i++) {
        if (d.unit != unit || d.offset < lo || d.offset >= hi) continue;
        const double mag = tensor_max_abs(w, d.offset, d.numel);
        if (mag > top) top = mag, snprintf(name, cap, "%s", d.name);
    }
    return top;
}

/* A site of the forward with the probe on: the weights it reads are unit `unit`'s elements
 * [lo, hi), its output out (n values; `bad` already found in it, or 0 to look). The first output
 * that is not finite is described in probe_msg: the site, the largest magnitude of its input (n_in
 * values, finite since the site before it was; NULL for the embeddings, which read token ids),
 * the tensor of largest magnitude it reads, and the largest of the sites before it when that is
 * larger (a huge norm gain overflows the product after it, not its own output). */
static void probe_site(dec_model *m, const char *what, int unit, const dec__uw *w, uint64_t lo, uint64_t hi,
                       const float *out, size_t n, const float *in, size_t n_in, float bad) {
    if (!m->probe || m->probe_msg[0]) return;
    char top[sizeof m->probe_top];
    const double mag = largest_tensor(m, unit, w, lo, hi, top, sizeof top);
    if (bad == 0.0f && (bad = first_nonfinite(out, n)) == 0.0f) {
        if (mag > m->probe_top_mag) m->probe_top_mag = mag, memcpy(m->probe_top, top, sizeof top);
        return;
    }
    char input[64] = "", before[sizeof m->probe_top + 64] = "";
    if (in) snprintf(input, sizeof input, " from a finite input (largest magnitude %.3g)", max_abs(in, n_in));
    if (m->probe_top_mag > mag)
        snprintf(before, sizeof before, ", the largest before it '%s' (magnitude %.3g)", m->probe_top,
                 m->probe_top_mag);
    snprintf(m->probe_msg, sizeof m->probe_msg,
             "%s outputs %s%s; the largest weight it reads is '%s' (magnitude %.3g)%s", what, nonfinite_name(bad),
             input, top, mag, before);
}

/* The bf16 operands of the LM head's products (NULL: fp32 products, or bf16 through mk_linear's
 * own copies under the scalar references): W rounded once for every chunk and both directions
 * (or the working copy itself), and one chunk's x (rounded for its forward, reused by its
 * backward) and d logits. */
typedef struct head16 {
    const uint16_t *w;
    uint16_t *x, *dy;
} head16;

/* The LM head W (V, C) over `rows` rows of x (rows, C): logits, loss, and with bwd the backward
 * (d x into dx, d W into gW unless it is NULL: frozen) — fused, so the full (rows, V) logits never
 * exist at once. */
static zero_status head_chunks(dec_model *m, const float *W, float *gW, int bwd, const float *x, size_t rows,
                               const int32_t *targets, float dscale, float *dx, float *logits_out, const head16 *h,
                               const dmat *Wq) {
    const int C = m->d.C, V = m->cfg.vocab;
    for (size_t r0 = 0; r0 < rows; r0 += m->head_rows) {
        const size_t nr = rows - r0 < m->head_rows ? rows - r0 : m->head_rows;
        const float *xr = x + r0 * C;
        if (Wq) {
            MK(m, "lm head", mk_qlinear_fwd(m->logits, xr, Wq->q, Wq->nq, NULL, NULL, nr, m->prec, m->impl));
        } else if (h) {
            zero_convert(xr, ZERO_DTYPE_FP32, h->x, ZERO_DTYPE_BF16, nr * C, ZERO_IMPL_AUTO);
            MK(m, "lm head", mk_linear_fwd_bf16(m->logits, h->x, h->w, (int)nr, C, V, 1, 0.0f));
        } else {
            MK(m, "lm head", mk_linear_fwd(m->logits, xr, W, NULL, NULL, nr, C, V, 1, m->prec, m->impl));
        }
        const float cap = (float)m->cfg.final_softcap;
        if (cap > 0.0f) /* final_logit_softcapping: cap tanh(logit / cap), tanh kept for the backward */
            for (size_t i = 0; i < nr * (size_t)V; i++) {
                m->capt[i] = tanhf(m->logits[i] / cap);
                m->logits[i] = cap * m->capt[i];
            }
        if (m->probe && m->probe_head == 0.0f) m->probe_head = first_nonfinite(m->logits, nr * V);
        if (logits_out) memcpy(logits_out + r0 * V, m->logits, nr * V * sizeof(float));
        if (!targets) continue;
        MK(m, "cross-entropy",
           mk_cross_entropy(m->logits, m->losses + r0, targets + r0, nr, V, bwd ? dscale : 0.0f, m->impl));
        if (!bwd) continue;
        if (dscale == 0.0f) memset(m->logits, 0, nr * V * sizeof(float)); /* nothing counts: no gradient */
        weigh_rows(m, m->logits, r0, nr);
        if (cap > 0.0f)
            for (size_t i = 0; i < nr * (size_t)V; i++) m->logits[i] *= 1.0f - m->capt[i] * m->capt[i];
        if (Wq) {
            MK(m, "lm head backward", mk_qlinear_bwd(dx + r0 * C, m->logits, Wq->q, Wq->nq, nr, m->prec, m->impl));
        } else if (h) {
            zero_convert(m->logits, ZERO_DTYPE_FP32, h->dy, ZERO_DTYPE_BF16, nr * V, ZERO_IMPL_AUTO);
            MK(m, "lm head backward", mk_linear_bwd_bf16(dx + r0 * C, gW, h->dy, h->x, h->w, (int)nr, C, V, 1));
        } else {
            MK(m, "lm head backward",
               mk_linear_bwd(dx + r0 * C, gW, NULL, m->logits, xr, W, nr, C, V, 1, m->prec, m->impl));
        }
    }
    return ZERO_OK;
}

/* The LM head over a bf16 weight wb (V, C) with fp32 products — a LoRA base kept in bf16 where the
 * products are fp32 (a CPU without bf16 instructions): the weight widened a tile of rows at a time
 * into fp32 (16 MiB), never whole (a 128k-token vocabulary's head would be a 1.5 GiB copy at
 * C = 3072). The weight is frozen: no gradient for it. Logits and losses as head_chunks'. */
static zero_status head_wtiles(dec_model *m, const uint16_t *wb, int bwd, const float *x, size_t rows,
                               const int32_t *targets, float dscale, float *dx, float *logits_out) {
    const size_t C = (size_t)m->d.C, V = (size_t)m->cfg.vocab;
    const size_t vt0 = m->head_wtile ? m->head_wtile : ((size_t)1 << 22) / C ? ((size_t)1 << 22) / C : 1;
    const size_t hr = rows < m->head_rows ? rows : m->head_rows;
    const size_t vt = vt0 < V ? vt0 : V;
    float *wt = malloc(vt * C * sizeof *wt), *tmp = malloc(hr * vt * sizeof *tmp);
    float *dxt = bwd ? malloc(hr * C * sizeof *dxt) : NULL;
    zero_status st = ZERO_OK;
    if (!wt || !tmp || (bwd && !dxt)) {
        dec__seterr(m, "lm head: out of memory for its weight tiles");
        st = ZERO_ERR_NOMEM;
        goto out;
    }
    const float cap = (float)m->cfg.final_softcap;
    for (size_t r0 = 0; r0 < rows && !st; r0 += m->head_rows) {
        const size_t nr = rows - r0 < m->head_rows ? rows - r0 : m->head_rows;
        const float *xr = x + r0 * C;
        for (size_t v0 = 0; v0 < V && !st; v0 += vt) { /* logits[:, v0 .. v0 + n) = x tile^T */
            const size_t n = V - v0 < vt ? V - v0 : vt;
            zero_convert(wb + v0 * C, ZERO_DTYPE_BF16, wt, ZERO_DTYPE_FP32, n * C, ZERO_IMPL_AUTO);
            st = mk_linear_fwd(tmp, xr, wt, NULL, NULL, nr, (int)C, (int)n, 1, MK_PREC_FP32, m->impl);
            for (size_t i = 0; i < nr && !st; i++) memcpy(m->logits + i * V + v0, tmp + i * n, n * sizeof *tmp);
        }
        if (st) break;
        if (cap > 0.0f)
            for (size_t i = 0; i < nr * V; i++) {
                m->capt[i] = tanhf(m->logits[i] / cap);
                m->logits[i] = cap * m->capt[i];
            }
        if (m->probe && m->probe_head == 0.0f) m->probe_head = first_nonfinite(m->logits, nr * V);
        if (logits_out) memcpy(logits_out + r0 * V, m->logits, nr * V * sizeof(float));
        if (!targets) continue;
        st = mk_cross_entropy(m->logits, m->losses + r0, targets + r0, nr, (int)V, bwd ? dscale : 0.0f, m->impl);
        if (st || !bwd) continue;
        if (dscale == 0.0f) memset(m->logits, 0, nr * V * sizeof(float));
        weigh_rows(m, m->logits, r0, nr);
        if (cap > 0.0f)
            for (size_t i = 0; i < nr * V; i++) m->logits[i] *= 1.0f - m->capt[i] * m->capt[i];
        /* dx = d logits W: the sum over the tiles of d logits[:, tile] tile */
        float *d = dx + r0 * C;
        for (size_t v0 = 0; v0 < V && !st; v0 += vt) {
            const size_t n = V - v0 < vt ? V - v0 : vt;
            zero_convert(wb + v0 * C, ZERO_DTYPE_BF16, wt, ZERO_DTYPE_FP32, n * C, ZERO_IMPL_AUTO);
            for (size_t i = 0; i < nr; i++) memcpy(tmp + i * n, m->logits + i * V + v0, n * sizeof *tmp);
            st = mk_linear_bwd(v0 ? dxt : d, NULL, NULL, tmp, xr, wt, nr, (int)C, (int)n, 1, MK_PREC_FP32, m->impl);
            if (!st && v0)
                for (size_t i = 0; i < nr * C; i++) d[i] += dxt[i];
        }
    }
    if (st && !m->err[0]) dec__seterr(m, "lm head: %s", zero_status_string(st));
out:
    free(wt), free(tmp), free(dxt);
    if (!st && m->pass && m->pass->progress) st = m->pass->progress(m, m->pass->ctx);
    return st;
}

/* head_chunks, with its bf16 operands where the products are bf16: a transient copy per call, as
 * mk_linear's, but W rounded once instead of once per chunk and direction (GPT-2's head at 512
 * rows: 4 roundings of its 38.6 M weights into fresh 77 MB copies became 1), and not at all when
 * it is the bf16 working copy. */
static zero_status head(dec_model *m, dmat W, float *gW, int bwd, const float *x, size_t rows,
                        const int32_t *targets, float dscale, float *dx, float *logits_out) {
    if (W.nq > 0) { /* a quantized base's head (zero_config.quant_embed): its tiles decoded by mk_qlinear */
        if (gW) {
            dec__seterr(m, "lm head: a quantized weight takes no gradient");
            return ZERO_ERR_STATE;
        }
        return head_chunks(m, NULL, NULL, bwd, x, rows, targets, dscale, dx, logits_out, NULL, &W);
    }
    if (!W.b && (m->prec != MK_PREC_BF16 || m->impl == ZERO_IMPL_SCALAR))
        return head_chunks(m, W.f, gW, bwd, x, rows, targets, dscale, dx, logits_out, NULL, NULL);
    if (W.b && m->prec != MK_PREC_BF16) { /* a frozen bf16 head under fp32 products (gather_unit) */
        if (gW) {
            dec__seterr(m, "lm head: a bf16 weight read as kept takes no gradient under fp32 products");
            return ZERO_ERR_STATE;
        }
        return head_wtiles(m, W.b, bwd, x, rows, targets, dscale, dx, logits_out);
    }
    const size_t C = (size_t)m->d.C, V = (size_t)m->cfg.vocab, hr = rows < m->head_rows ? rows : m->head_rows;
    const size_t wn = W.b ? 0 : V * C;
    uint16_t *b = malloc(sizeof(uint16_t) * (wn + hr * C + (bwd && targets ? hr * V : 0)));
    if (!b) {
        dec__seterr(m, "lm head: out of memory for its bf16 operands");
        return ZERO_ERR_NOMEM;
    }
    const head16 h = {W.b ? W.b : b, b + wn, b + wn + hr * C};
    if (!W.b) zero_convert(W.f, ZERO_DTYPE_FP32, b, ZERO_DTYPE_BF16, V * C, ZERO_IMPL_AUTO);
    const zero_status st = head_chunks(m, W.f, gW, bwd, x, rows, targets, dscale, dx, logits_out, &h, NULL);
    free(b);
    return st;
}

/* The embeddings' forward on the resolved unit: mk_embed_fwd on fp32, else each token's row of the
 * bf16 wte widened and the position's row of wpe (widened into m->dbuf, free until the backward)
 * added: the same single addition per element, so the same bits as on the widened table. */
static zero_status embed_fwd(dec_model *m, const dec__uw *w, const int32_t *tokens, size_t N, int T) {
    const size_t C = (size_t)m->d.C;
    const uint64_t wpe = m->lay.wpe;
    if (w->head.nq > 0) { /* a quantized base's wte (zero_config.quant_embed): each token's row decoded */
        for (size_t n = 0; n < N; n++)
            MK(m, "embedding", mk_qweight_rows(&w->head.q[0], tokens[n], 1, m->resid + n * C));
        return ZERO_OK;
    }
    if (w->p) {
        MK(m, "embedding", mk_embed_fwd(m->resid, tokens, w->p, opt(w->p, wpe), N, T, (int)C, m->pass_pos, m->impl));
        return ZERO_OK;
    }
    for (size_t n = 0; n < N; n++)
        zero_convert(w->b + (size_t)tokens[n] * C, ZERO_DTYPE_BF16, m->resid + n * C, ZERO_DTYPE_FP32, C,
                     ZERO_IMPL_AUTO);
    if (wpe != DEC__NONE) {
        /* the T positions' rows (N = B·T holds at least T rows) */
        zero_convert(w->b + wpe, ZERO_DTYPE_BF16, m->dbuf, ZERO_DTYPE_FP32, (size_t)T * C, ZERO_IMPL_AUTO);
        for (size_t n = 0; n < N; n++) {
            float *o = m->resid + n * C;
            const float *q = m->dbuf + (m->pass_pos ? (size_t)m->pass_pos[n] : n % (size_t)T) * C;
            for (size_t c = 0; c < C; c++) o[c] += q[c];
        }
    }
    return ZERO_OK;
}

/* ---------------------------------------------------------------- the pass */
static zero_status check_tokens(dec_model *m, const int32_t *tok, int B, int T, const char *what, int lo) {
    const int V = m->cfg.vocab;
    for (size_t i = 0; i < (size_t)B * T; i++) {
        if (tok[i] < lo || tok[i] >= V) {
            dec__seterr(m, "%s %d at sequence %zu position %zu: expected a token in [0, %d)%s", what, (int)tok[i],
                        i / (size_t)T, i % (size_t)T, V, lo < 0 ? " or -1 (not counted)" : "");
            return ZERO_ERR_INVALID_ARG;
        }
    }
    return ZERO_OK;
}

/* The pass's documents (dec_set_docs): checked to be runs (mk_attn's doc rule), and their
 * positions (t - the document's start) into m->pos; NULL: each sequence is one. */
static zero_status docs_of(dec_model *m, const int32_t *doc, int B, int T) {
    m->pass_doc = m->pass_pos = NULL;
    m->pass_span = T;
    if (!doc) return ZERO_OK;
    int span = 0;
    for (size_t n = 0; n < (size_t)B * T; n++) {
        const int t = (int)(n % (size_t)T);
        if (doc[n] != t && (t == 0 || doc[n] != doc[n - 1])) {
            dec__seterr(m, "document start %d at sequence %zu position %d: expected %d (a new document) or the "
                        "position's before (%d)", (int)doc[n], n / (size_t)T, t, t, t ? (int)doc[n - 1] : 0);
            return ZERO_ERR_INVALID_ARG;
        }
        m->pos[n] = t - doc[n];
        span = m->pos[n] + 1 > span ? m->pos[n] + 1 : span;
    }
    m->pass_doc = doc, m->pass_pos = m->pos, m->pass_span = span;
    return ZERO_OK;
}

int64_t dec_count_targets(const int32_t *targets, size_t n) {
    int64_t c = 0;
    for (size_t i = 0; i < n; i++) c += targets[i] >= 0;
    return c;
}

/* The final norm's backward: dres = d loss / d (final norm input), from m->dbuf = d lnf. */
static zero_status final_norm_bwd(dec_model *m, const dec__uw *w, float *g, size_t N) {
    const int L = m->cfg.n_layer;
    return norm_bwd(m, m->dres, m->dbuf, m->resid + (size_t)L * N * m->d.C, w->lnf_w, g, m->lay.lnf_w, m->lay.lnf_b,
                    m->lnf_mean, m->lnf_rstd, N, 0);
}

/* Sum of the per-row losses in row order, in double. */
/* The pass's loss sum: each row's loss times its sequence's weight. */
static double sum_losses(const dec_model *m, const float *x, size_t n) {
    double s = 0.0;
    for (size_t i = 0; i < n; i++) s += m->pass_w ? (double)m->pass_w[i / (size_t)m->pass_T] * x[i] : x[i];
    return s;
}

static zero_status run_pass(dec_model *m, const dec__units *u, const dec__pass *p) {
    const int B = p->B, T = p->T, L = m->cfg.n_layer, C = m->d.C;
    if (B < 1 || B > m->Bmax || T < 1 || T > m->Tmax) {
        dec__seterr(m, "micro-batch %d x sequence %d: expected 1 <= B <= %d and 1 <= T <= %d (the sizes the model "
                    "was created for)", B, T, m->Bmax, m->Tmax);
        return ZERO_ERR_INVALID_ARG;
    }
    if (p->backward && !p->targets) {
        dec__seterr(m, "backward needs targets");
        return ZERO_ERR_INVALID_ARG;
    }
    if (!(p->denom >= 0.0) && !(p->denom < 0.0)) {
        dec__seterr(m, "loss denominator %g: expected a number (<= 0: the count of counted targets)", p->denom);
        return ZERO_ERR_INVALID_ARG;
    }
    TRY(check_tokens(m, p->tokens, B, T, "token", 0));
    if (p->targets) TRY(check_tokens(m, p->targets, B, T, "target", -1));
    TRY(docs_of(m, p->sampling ? NULL : m->docs, B, T));
    m->pass_w = p->sampling ? NULL : m->seq_w;
    m->pass_T = T;
    for (int b = 0; m->pass_w && b < B; b++)
        if (!isfinite(m->pass_w[b])) {
            dec__seterr(m, "sequence %d's loss weight %g: expected a finite number", b, m->pass_w[b]);
            return ZERO_ERR_INVALID_ARG;
        }
    const size_t N = (size_t)B * T, NC = N * C;
    const double denom = p->targets ? (p->denom > 0 ? p->denom : (double)dec_count_targets(p->targets, N)) : 0.0;
    const float dscale = denom > 0 ? (float)((double)p->loss_scale / denom) : 0.0f;
    const dec__layout *lay = &m->lay;
    dec__uw w;
    float *g;
    m->shared_holds = -1;
    m->working_reads = 0;
    m->nqp = -1; /* the provider's places are looked up again (find_qbase) */
    /* LoRA: the base is frozen (no gradient for the embeddings and the final unit, the layers'
     * buffers hold their adapters' gradients only) */
    const int frozen = m->lora != NULL;
    if (m->lora) dec__lora_begin(m->lora, p->backward);

    /* forward (the probe, when on, checks each unit's output: a scan of what was just written) */
    m->probe_head = 0.0f;
    TRY(gather_unit(m, u, DEC_UNIT_EMBEDDINGS, &w));
    TRY(embed_fwd(m, &w, p->tokens, N, T));
    if (m->embed_scale != 0.0f) /* Gemma: the embeddings times sqrt(C) */
        for (size_t i = 0; i < NC; i++) m->resid[i] *= m->embed_scale;
    probe_site(m, "the embeddings", DEC_UNIT_EMBEDDINGS, &w, 0, lay->emb_numel, m->resid, NC, NULL, 0, 0.0f);
    TRY(u->release(m, u->ctx, DEC_UNIT_EMBEDDINGS));
    for (int l = 0; l < L; l++) {
        TRY(gather_unit(m, u, 1 + l, &w));
        TRY(layer_fwd(m, l, &w, B, T));
        if (m->probe && !m->probe_msg[0]) {
            char what[32];
            snprintf(what, sizeof what, "layer %d", l);
            probe_site(m, what, 1 + l, &w, 0, lay->numel, m->resid + (size_t)(l + 1) * NC, NC,
                       m->resid + (size_t)l * NC, NC, 0.0f);
        }
        TRY(u->release(m, u->ctx, 1 + l));
    }
    TRY(gather_unit(m, u, L + 1, &w));
    TRY(norm_fwd(m, m->lnf, m->lnf_mean, m->lnf_rstd, m->resid + (size_t)L * NC, w.lnf_w, w.lnf_b, N));
    probe_site(m, "the final norm", L + 1, &w, 0, m->cfg.tied ? lay->final_numel : lay->head_w, m->lnf, NC,
               m->resid + (size_t)L * NC, NC, 0.0f);

    /* the head: its input rows, targets and outputs */
    const float *hx = m->lnf;
    size_t hrows = N;
    const int32_t *htargets = p->targets;
    float *hlogits = p->logits;
    if (p->last_logits) { /* only each sequence's last position: gather those rows first */
        for (int b = 0; b < B; b++)
            memcpy(m->dbuf + (size_t)b * C, m->lnf + ((size_t)b * T + T - 1) * C, C * sizeof(float));
        hx = m->dbuf;
        hrows = (size_t)B;
        htargets = NULL;
        hlogits = p->last_logits;
    }
    const int bwd = p->backward;
    if (!m->cfg.tied) { /* lm_head is in the final unit: norm, head and their backward in one gather */
        g = NULL;
        if (bwd && !frozen) TRY_PTR(u->grad(m, u->ctx, L + 1), g);
        TRY(head(m, w.head, optw(g, lay->head_w), bwd, hx, hrows, htargets, dscale, m->dbuf, hlogits));
        if (m->probe_head != 0.0f)
            probe_site(m, "the LM head", L + 1, &w, lay->head_w, lay->final_numel, NULL, 0, hx, hrows * C,
                       m->probe_head);
        if (bwd) {
            TRY(final_norm_bwd(m, &w, g, N));
            if (!frozen) TRY(u->grad_ready(m, u->ctx, L + 1));
        }
        TRY(u->release(m, u->ctx, L + 1));
    } else { /* the tied head reads wte: the embeddings again; their gradient buffer stays open */
        TRY(u->release(m, u->ctx, L + 1));
        TRY(gather_unit(m, u, DEC_UNIT_EMBEDDINGS, &w));
        g = NULL;
        if (bwd && !frozen) TRY_PTR(u->grad(m, u->ctx, DEC_UNIT_EMBEDDINGS), g);
        TRY(head(m, w.head, g, bwd, hx, hrows, htargets, dscale, m->dbuf, hlogits));
        if (m->probe_head != 0.0f)
            probe_site(m, "the LM head (tied to the embeddings)", DEC_UNIT_EMBEDDINGS, &w, 0,
                       (uint64_t)m->cfg.vocab * (uint64_t)C, NULL, 0, hx, hrows * C, m->probe_head);
        TRY(u->release(m, u->ctx, DEC_UNIT_EMBEDDINGS));
        if (bwd) {
            TRY(gather_unit(m, u, L + 1, &w));
            g = NULL;
            if (!frozen) TRY_PTR(u->grad(m, u->ctx, L + 1), g);
            TRY(final_norm_bwd(m, &w, g, N));
            if (!frozen) TRY(u->grad_ready(m, u->ctx, L + 1));
            TRY(u->release(m, u->ctx, L + 1));
        }
    }
    if (p->targets && p->loss && !p->last_logits) *p->loss = denom > 0 ? (float)(sum_losses(m, m->losses, N) / denom) : 0.0f;
    if (!p->backward) return ZERO_OK;

    /* backward: m->dres holds d loss / d (final norm input) */
    for (int l = L - 1; l >= 0; l--) {
        TRY(gather_unit(m, u, 1 + l, &w));
        TRY_PTR(u->grad(m, u->ctx, 1 + l), g);
        if (m->ckpt && m->shared_holds != l) TRY(layer_fwd(m, l, &w, B, T));
        TRY(layer_bwd(m, l, &w, frozen ? NULL : g, frozen ? g : NULL, B, T));
        TRY(u->grad_ready(m, u->ctx, 1 + l));
        TRY(u->release(m, u->ctx, 1 + l));
    }
    if (frozen) return ZERO_OK; /* frozen embeddings: nothing below the first layer trains */
    /* The embedding backward reads no parameter: its gradient buffer is all it needs. */
    TRY_PTR(u->grad(m, u->ctx, DEC_UNIT_EMBEDDINGS), g);
    if (m->embed_scale != 0.0f)
        for (size_t i = 0; i < NC; i++) m->dres[i] *= m->embed_scale;
    if (m->cfg.has_pad) /* nn.Embedding(padding_idx): the pad token's lookups add no gradient */
        for (size_t n = 0; n < N; n++)
            if (p->tokens[n] == m->cfg.pad_token) memset(m->dres + n * C, 0, (size_t)C * sizeof(float));
    MK(m, "embedding backward", mk_embed_bwd(g, optw(g, lay->wpe), m->dres, p->tokens, N, T, C, m->pass_pos, m->impl));
    TRY(u->grad_ready(m, u->ctx, DEC_UNIT_EMBEDDINGS));
    return ZERO_OK;
}

zero_status dec__run(dec_model *m, const dec__units *u, const dec__pass *p) {
    m->pass = u;
    zero_status st = run_pass(m, u, p);
    m->pass = NULL;
    return st;
}

zero_status dec__run_probe(dec_model *m, const dec__units *u, const dec__pass *p) {
    m->probe = 1;
    m->probe_msg[0] = '\0';
    m->probe_top_mag = -1.0;
    zero_status st = dec__run(m, u, p);
    m->probe = 0;
    if (!st && m->probe_msg[0]) {
        dec__seterr(m, "%s", m->probe_msg);
        st = ZERO_ERR_FORMAT;
    }
    return st;
}

/* ---------------------------------------------------------------- raw pointers */
typedef struct raw_ctx {
    const float *const *params;
    float *const *grads;
} raw_ctx;

static const float *raw_gather(dec_model *m, void *ctx, int unit) {
    const float *p = ((raw_ctx *)ctx)->params[unit];
    if (!p) dec__fail(m, ZERO_ERR_INVALID_ARG, "params[%d] is NULL: expected unit %d's buffer", unit, unit);
    return p;
}
static zero_status raw_ok(dec_model *m, void *ctx, int unit) {
    (void)m, (void)ctx, (void)unit;
    return ZERO_OK;
}
static float *raw_grad(dec_model *m, void *ctx, int unit) {
    float *g = ((raw_ctx *)ctx)->grads[unit];
    if (!g) dec__fail(m, ZERO_ERR_INVALID_ARG, "grads[%d] is NULL: expected unit %d's gradient buffer", unit, unit);
    return g;
}

static zero_status raw_pass(dec_model *m, const float *const *params, float *const *grads, dec__pass *p) {
    if (!params) {
        dec__seterr(m, "params is NULL: expected one pointer per unit");
        return ZERO_ERR_INVALID_ARG;
    }
    raw_ctx ctx = {params, grads};
    dec__units u = {raw_gather, raw_ok, raw_grad, raw_ok, &ctx, NULL, NULL, NULL, ZERO_DTYPE_COUNT};
    return dec__run(m, &u, p);
}

zero_status dec_forward_backward(dec_model *m, const float *const *params, float *const *grads,
                                 const int32_t *tokens, const int32_t *targets, int B, int T, float loss_scale,
                                 double denom, float *loss, float *logits) {
    if (!grads || !tokens || !targets) {
        dec__seterr(m, "forward_backward needs grads, tokens and targets (got NULL)");
        return ZERO_ERR_INVALID_ARG;
    }
    dec__pass p = {tokens, targets, B, T, 1, loss_scale, denom, loss, logits, NULL, 0};
    return raw_pass(m, params, grads, &p);
}

zero_status dec_forward(dec_model *m, const float *const *params, const int32_t *tokens, const int32_t *targets,
                        int B, int T, double denom, float *loss, float *logits) {
    if (!tokens) {
        dec__seterr(m, "forward needs tokens (got NULL)");
        return ZERO_ERR_INVALID_ARG;
    }
    dec__pass p = {tokens, targets, B, T, 0, 1.0f, denom, loss, logits, NULL, 0};
    return raw_pass(m, params, NULL, &p);
}

/* ---------------------------------------------------------------- sampling */
static int cmp_desc(const void *a, const void *b) {
    const float x = *(const float *)a, y = *(const float *)b;
    return (x < y) - (x > y);
}

/* Picks a token from logits (V); scratch: V floats. */
static int sample_token(float *logits, float *scratch, int V, const dec_sampling *s, uint64_t *rng) {
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
    const double target = dec__uniform(rng) * sum;
    double acc = 0.0;
    for (int i = 0; i < V; i++) {
        acc += scratch[i];
        if (scratch[i] > 0.0f && acc > target) return i;
    }
    return best; /* rounding left target at the very end */
}

/* Logits that are not finite cannot be sampled from (every comparison with a NaN is false: the
 * pick would be token 0 whatever the model): the same pass again with the probe names the unit
 * where the forward overflowed (the pass is deterministic, so it overflows again). */
static zero_status refuse_logits(dec_model *m, const dec__units *u, const dec__pass *p, float bad, size_t len) {
    const zero_status st = dec__run_probe(m, u, p);
    if (st && st != ZERO_ERR_FORMAT) return st;
    dec__seterr(m, "the logits after %zu tokens hold %s: %s: expected weights whose forward pass is finite", len,
                nonfinite_name(bad), st ? m->probe_msg : "the pass again found every unit's output finite");
    return ZERO_ERR_FORMAT;
}

zero_status dec__generate(dec_model *m, const dec__units *u, const int32_t *prompt, int n_prompt, int n_new,
                          const dec_sampling *s, int32_t *out) {
    if (!prompt || n_prompt < 1 || n_new < 0 || (n_new > 0 && !out) || !s) {
        dec__seterr(m, "generate: prompt of %d tokens, %d new tokens: expected a prompt of at least one token, "
                    "n_new >= 0 and an output buffer", n_prompt, n_new);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!isfinite(s->temperature)) {
        dec__seterr(m, "temperature %g: expected a finite number (<= 0 means greedy)", s->temperature);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_status st = check_tokens(m, prompt, 1, n_prompt, "prompt token", 0);
    if (st) return st;
    const int V = m->cfg.vocab;
    const size_t total = (size_t)n_prompt + (size_t)n_new;
    int32_t *hist = malloc(total * sizeof *hist);
    float *buf = malloc(2 * (size_t)V * sizeof(float));
    if (!hist || !buf) {
        free(hist), free(buf);
        dec__seterr(m, "generate: cannot allocate %zu tokens of history", total);
        return ZERO_ERR_NOMEM;
    }
    memcpy(hist, prompt, (size_t)n_prompt * sizeof *hist);
    uint64_t rng = dec__mix64(s->seed ^ 0x73616d706c65ull);
    for (int i = 0; i < n_new && !st; i++) {
        const size_t len = (size_t)n_prompt + i;
        const int T = len < (size_t)m->Tmax ? (int)len : m->Tmax;
        dec__pass p = {hist + len - T, NULL, 1, T, 0, 1.0f, 0.0, NULL, NULL, buf, 1};
        st = dec__run(m, u, &p);
        const float bad = st ? 0.0f : first_nonfinite(buf, (size_t)V);
        if (bad != 0.0f) st = refuse_logits(m, u, &p, bad, len);
        if (!st) hist[len] = out[i] = sample_token(buf, buf + V, V, s, &rng);
    }
    free(hist);
    free(buf);
    return st;
}

zero_status dec_generate(dec_model *m, const float *const *params, const int32_t *prompt, int n_prompt, int n_new,
                         const dec_sampling *s, int32_t *out) {
    if (!params) {
        dec__seterr(m, "params is NULL: expected one pointer per unit");
        return ZERO_ERR_INVALID_ARG;
    }
    raw_ctx ctx = {params, NULL};
    dec__units u = {raw_gather, raw_ok, raw_grad, raw_ok, &ctx, NULL, NULL, NULL, ZERO_DTYPE_COUNT};
    return dec__generate(m, &u, prompt, n_prompt, n_new, s, out);
}
