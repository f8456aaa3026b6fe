/* Tests of the fused causal attention (models/kernels): the scalar reference against a double-
 * precision materialized attention (its mask written out: causal, and within a sliding window) and
 * finite differences, every vector impl (blockwise, online softmax) against the scalar one on
 * ragged shapes, GQA, fused and separate layouts, soft-capping, sliding windows; a window >= T
 * bitwise the causal kernel; packed documents (block-diagonal) against the reference and against
 * each document run alone; thread-count independence, argument checks. */
#include "mkernels_util.h"

#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct acase {
    int B, T, H, G, hd, fused;
} acase;

static const acase cases[] = {
    {1, 1, 1, 1, 1, 0},    {2, 7, 4, 2, 3, 1},    {1, 64, 2, 2, 16, 0},  {2, 65, 4, 1, 8, 1},
    {1, 130, 3, 3, 33, 0}, {2, 100, 6, 2, 64, 1}, {1, 200, 2, 1, 80, 0}, {1, 129, 2, 2, 128, 1},
    {1, 70, 2, 1, 256, 0}, {3, 37, 9, 3, 64, 1},  {1, 300, 2, 2, 24, 1}, {2, 17, 8, 8, 7, 0},
};
enum { NCASES = sizeof cases / sizeof cases[0] };
/* a sliding window per case: 1 (the token itself), shorter than a key block (T 130 window 17: the
 * first blocks skipped), a block and one more, windows ending inside a block, W = T (all) */
static const int windows[NCASES] = {1, 3, 64, 1, 17, 65, 64, 100, 2, 5, 70, 16};

/* Buffers of one case: q, k, v (in one fused buffer or three), out, lse, their gradients. */
typedef struct abuf {
    mk_attn a;
    size_t nq, nk, nv, no, nl; /* floats behind each pointer */
    float *qkv, *q, *k, *v, *out, *lse, *dout;
    float *dqkv, *dq, *dk, *dv;
} abuf;

static void abuf_init(abuf *s, const acase *c) {
    const int H = c->H, G = c->G, hd = c->hd;
    const size_t N = (size_t)c->B * c->T;
    memset(s, 0, sizeof *s);
    s->a = (mk_attn){.B = c->B, .T = c->T, .n_head = H, .n_kv_head = G, .head_dim = hd, .scale = 1.0f / sqrtf((float)hd)};
    if (c->fused) { /* (N, (H + 2G) hd + 3): q, k, v heads back to back, 3 floats of padding */
        const size_t ld = (size_t)(H + 2 * G) * hd + 3;
        s->a.ld_q = s->a.ld_k = s->a.ld_v = ld;
        s->nq = N * ld;
        s->qkv = mt_alloc(s->nq);
        s->dqkv = mt_alloc(s->nq);
        mt_fill(s->qkv, s->nq, 1.0f);
        s->q = s->qkv, s->k = s->qkv + (size_t)H * hd, s->v = s->k + (size_t)G * hd;
        s->dq = s->dqkv, s->dk = s->dqkv + (size_t)H * hd, s->dv = s->dk + (size_t)G * hd;
        s->a.ld_o = (size_t)H * hd + 5;
    } else {
        s->a.ld_q = s->a.ld_o = (size_t)H * hd;
        s->a.ld_k = s->a.ld_v = (size_t)G * hd;
        s->nq = N * s->a.ld_q, s->nk = s->nv = N * s->a.ld_k;
        s->q = mt_alloc(s->nq), s->k = mt_alloc(s->nk), s->v = mt_alloc(s->nv);
        mt_fill(s->q, s->nq, 1.0f), mt_fill(s->k, s->nk, 1.0f), mt_fill(s->v, s->nv, 1.0f);
        s->dq = mt_alloc(s->nq), s->dk = mt_alloc(s->nk), s->dv = mt_alloc(s->nv);
    }
    /* larger logits than uniform [-1, 1) gives: a sharper softmax, as trained models have */
    for (size_t t = 0; t < N; t++)
        for (int i = 0; i < H * hd; i++) s->q[t * s->a.ld_q + i] *= 3.0f;
    s->no = N * s->a.ld_o;
    s->out = mt_alloc(s->no), s->dout = mt_alloc(s->no);
    /* the forward writes only the heads of each token's row: the padding between rows (fused
     * layout) stays zero, so the finite differences' sum over out reads no stale heap bytes */
    memset(s->out, 0, s->no * sizeof *s->out);
    mt_fill(s->dout, s->no, 1.0f);
    s->nl = (size_t)c->B * H * c->T;
    s->lse = mt_alloc(s->nl);
}

static void abuf_free(abuf *s) {
    if (s->qkv) {
        free(s->qkv), free(s->dqkv);
    } else {
        free(s->q), free(s->k), free(s->v), free(s->dq), free(s->dk), free(s->dv);
    }
    free(s->out), free(s->dout), free(s->lse);
}

/* Gradient buffer(s) as one list, for filling and comparing. */
static int grad_parts(abuf *s, float **p, size_t *n) {
    if (s->qkv) {
        p[0] = s->dqkv, n[0] = s->nq;
        return 1;
    }
    p[0] = s->dq, p[1] = s->dk, p[2] = s->dv, n[0] = s->nq, n[1] = s->nk, n[2] = s->nv;
    return 3;
}

/* The mask, written out: query t sees key j when j <= t, within a window W j > t - W, and with
 * documents j is not before t's document's start. */
static int visible(const mk_attn *a, int b, int t, int j) {
    return j <= t && (a->window == 0 || j > t - a->window) && (!a->doc || j >= a->doc[(size_t)b * a->T + t]);
}

/* Documents of random lengths packed into each sequence (one token, a few, longer than a key
 * block), as doc starts: docs[b*T + t] is the first token of t's document. */
static int32_t *make_docs(int B, int T) {
    int32_t *d = malloc(sizeof(int32_t) * (size_t)B * (size_t)(T ? T : 1));
    for (int b = 0; b < B; b++) {
        int start = 0, left = 0;
        for (int t = 0; t < T; t++) {
            if (left == 0) {
                static const int lens[] = {1, 2, 5, 13, 64, 70, 150};
                start = t, left = lens[mt_next() % 7];
            }
            d[(size_t)b * T + t] = start;
            left--;
        }
    }
    return d;
}

/* The double-precision materialized attention: out, lse and the gradients (into float arrays
 * laid out as s's). */
static void attn_ref(const abuf *s, float *out, float *lse, float *dq, float *dk, float *dv) {
    const mk_attn *a = &s->a;
    const int T = a->T, hd = a->head_dim, grp = a->n_head / a->n_kv_head;
    double *p = malloc(sizeof(double) * T), *dp = malloc(sizeof(double) * T);
    double *gq = calloc((size_t)hd, sizeof(double));
    double *gk = calloc((size_t)a->B * T * a->n_kv_head * hd, sizeof(double));
    double *gv = calloc((size_t)a->B * T * a->n_kv_head * hd, sizeof(double));
    for (int b = 0; b < a->B; b++)
        for (int h = 0; h < a->n_head; h++) {
            const int g = h / grp;
            for (int t = 0; t < T; t++) {
                const float *qt = s->q + ((size_t)b * T + t) * a->ld_q + (size_t)h * hd;
                const float *dot = s->dout + ((size_t)b * T + t) * a->ld_o + (size_t)h * hd;
                double mx = -INFINITY, l = 0.0, D = 0.0;
                for (int j = 0; j < T; j++) {
                    if (!visible(a, b, t, j)) continue;
                    const float *kj = s->k + ((size_t)b * T + j) * a->ld_k + (size_t)g * hd;
                    double d = 0.0;
                    for (int i = 0; i < hd; i++) d += (double)qt[i] * kj[i];
                    p[j] = d * a->scale;
                    if (a->softcap > 0.0f) p[j] = a->softcap * tanh(p[j] / a->softcap);
                    mx = fmax(mx, p[j]);
                }
                for (int j = 0; j < T; j++)
                    if (visible(a, b, t, j)) l += (p[j] = exp(p[j] - mx));
                float *o = out + ((size_t)b * T + t) * a->ld_o + (size_t)h * hd;
                for (int i = 0; i < hd; i++) {
                    double acc = 0.0;
                    for (int j = 0; j < T; j++)
                        if (visible(a, b, t, j)) acc += p[j] / l * s->v[((size_t)b * T + j) * a->ld_v + (size_t)g * hd + i];
                    o[i] = (float)acc;
                }
                lse[((size_t)b * a->n_head + h) * T + t] = (float)(mx + log(l));
                for (int j = 0; j < T; j++) {
                    if (!visible(a, b, t, j)) continue;
                    p[j] /= l;
                    const float *vj = s->v + ((size_t)b * T + j) * a->ld_v + (size_t)g * hd;
                    double d = 0.0;
                    for (int i = 0; i < hd; i++) d += (double)dot[i] * vj[i];
                    dp[j] = d;
                    D += p[j] * d;
                }
                memset(gq, 0, sizeof(double) * hd);
                for (int j = 0; j < T; j++) {
                    if (!visible(a, b, t, j)) continue;
                    double ds = p[j] * (dp[j] - D) * a->scale;
                    if (a->softcap > 0.0f) { /* through the cap: 1 - tanh^2 of the capped logit's argument */
                        const double th = log(p[j] * l) + mx; /* the capped logit */
                        ds *= 1.0 - (th / a->softcap) * (th / a->softcap);
                    }
                    const float *kj = s->k + ((size_t)b * T + j) * a->ld_k + (size_t)g * hd;
                    double *gkj = gk + (((size_t)b * T + j) * a->n_kv_head + g) * hd;
                    double *gvj = gv + (((size_t)b * T + j) * a->n_kv_head + g) * hd;
                    for (int i = 0; i < hd; i++) {
                        gq[i] += ds * kj[i];
                        gkj[i] += ds * qt[i];
                        gvj[i] += p[j] * dot[i];
                    }
                }
                float *dqt = dq + ((size_t)b * T + t) * a->ld_q + (size_t)h * hd;
                for (int i = 0; i < hd; i++) dqt[i] = (float)gq[i];
            }
        }
    for (int b = 0; b < a->B; b++)
        for (int t = 0; t < T; t++)
            for (int g = 0; g < a->n_kv_head; g++)
                for (int i = 0; i < hd; i++) {
                    const size_t src = (((size_t)b * T + t) * a->n_kv_head + g) * hd + i;
                    dk[((size_t)b * T + t) * a->ld_k + (size_t)g * hd + i] = (float)gk[src];
                    dv[((size_t)b * T + t) * a->ld_v + (size_t)g * hd + i] = (float)gv[src];
                }
    free(p), free(dp), free(gq), free(gk), free(gv);
}

/* max |x| over the head elements of a gradient layout (padding excluded by the caller's zeros) */
static double max_abs(const float *x, size_t n) {
    double m = 0.0;
    for (size_t i = 0; i < n; i++) m = fmax(m, fabs(x[i]));
    return m;
}

static void test_against_ref(void) {
    printf("attention, per case: worst |diff| / bound of out, lse, grads (scalar vs double; vector vs scalar)\n");
    mt_err ws[4] = {{0}}, wv[MT_NVEC][4] = {{{0}}};
    /* every case plain, then again with Gemma 2's logit soft-capping (a cap of 0.5 bends every
     * logit), then within its sliding window (soft-capped on every other case), then with packed
     * documents (within the window on every other case, soft-capped on every third) */
    for (int ci = 0; ci < 4 * NCASES; ci++) {
        const acase *c = &cases[ci % NCASES];
        abuf s;
        abuf_init(&s, c);
        if (ci >= NCASES && (ci < 2 * NCASES || (ci < 3 * NCASES && ci % 2) || (ci >= 3 * NCASES && ci % 3 == 0)))
            s.a.softcap = 0.5f;
        if ((ci >= 2 * NCASES && ci < 3 * NCASES) || (ci >= 3 * NCASES && ci % 2)) s.a.window = windows[ci % NCASES];
        int32_t *docs = ci >= 3 * NCASES ? make_docs(c->B, c->T) : NULL;
        s.a.doc = docs;
        float *gp[3];
        size_t gn[3];
        const int ng = grad_parts(&s, gp, gn);
        /* reference outputs in separate buffers of the same layout (padding zero) */
        float *rout = calloc(s.no, 4), *rlse = calloc(s.nl, 4), *rg[3];
        for (int i = 0; i < ng; i++) rg[i] = calloc(gn[i], 4);
        float *rdq = rg[0], *rdk = ng == 1 ? rg[0] + (s.dk - s.dq) : rg[1], *rdv = ng == 1 ? rg[0] + (s.dv - s.dq) : rg[2];
        attn_ref(&s, rout, rlse, rdq, rdk, rdv);
        double gmax = 0.0;
        for (int i = 0; i < ng; i++) gmax = fmax(gmax, max_abs(rg[i], gn[i]));
        /* outputs of each impl, the scalar's kept for the vector comparison */
        float *sout = NULL, *slse = NULL, *sg[3] = {NULL, NULL, NULL};
        for (int v = -1; v < MT_NVEC; v++) {
            const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
            if (v >= 0 && !mt_impl_runs(impl)) continue;
            for (size_t i = 0; i < s.no; i++) s.out[i] = 0.0f; /* padding must stay 0 */
            for (int i = 0; i < ng; i++) memset(gp[i], 0, 4 * gn[i]);
            if (s.qkv) /* the fused gradient's padding and nothing else stays as it was */
                for (size_t i = 0; i < s.nq; i++) s.dqkv[i] = 0.0f;
            ZT_OK(mk_attention_fwd(&s.a, s.out, s.lse, s.q, s.k, s.v, impl));
            ZT_OK(mk_attention_bwd(&s.a, s.dq, s.dk, s.dv, s.dout, s.q, s.k, s.v, s.out, s.lse, impl));
            mt_err *e = v < 0 ? ws : wv[v];
            const float *eo = v < 0 ? rout : sout, *el = v < 0 ? rlse : slse;
            /* out: convex combinations of values in [-1, 1]; lse: around log T + max logit */
            mt_close("attn out", s.out, eo, s.no, 2e-6, 0.0, &e[0]);
            mt_close("attn lse", s.lse, el, s.nl, 2e-6, 1e-6, &e[1]);
            for (int i = 0; i < ng; i++)
                mt_close("attn grad", gp[i], v < 0 ? rg[i] : sg[i], gn[i], 2e-6 * gmax, 1e-5, &e[2]);
            if (v < 0) {
                sout = mt_dup(s.out, s.no), slse = mt_dup(s.lse, s.nl);
                for (int i = 0; i < ng; i++) sg[i] = mt_dup(gp[i], gn[i]);
            }
        }
        free(rout), free(rlse), free(sout), free(slse), free(docs);
        for (int i = 0; i < ng; i++) free(rg[i]), free(sg[i]);
        abuf_free(&s);
    }
    mt_report("out scalar vs double", &ws[0]);
    mt_report("lse scalar vs double", &ws[1]);
    mt_report("dq/dk/dv scalar vs double", &ws[2]);
    for (int v = 0; v < MT_NVEC; v++) {
        if (!zero_impl_available(mt_vec_impls[v])) continue;
        char what[80];
        snprintf(what, sizeof what, "out %s vs scalar", zero_impl_name(mt_vec_impls[v]));
        mt_report(what, &wv[v][0]);
        snprintf(what, sizeof what, "lse %s vs scalar", zero_impl_name(mt_vec_impls[v]));
        mt_report(what, &wv[v][1]);
        snprintf(what, sizeof what, "dq/dk/dv %s vs scalar", zero_impl_name(mt_vec_impls[v]));
        mt_report(what, &wv[v][2]);
    }
}

/* Central differences of L = sum r .* out through the scalar forward, against its backward; causal,
 * and within a window of 3. */
static void test_fd(int window) {
    const acase c = {2, 6, 4, 2, 5, 1};
    abuf s;
    abuf_init(&s, &c);
    s.a.window = window;
    ZT_OK(mk_attention_fwd(&s.a, s.out, s.lse, s.q, s.k, s.v, ZERO_IMPL_SCALAR));
    for (size_t i = 0; i < s.nq; i++) s.dqkv[i] = 0.0f;
    ZT_OK(mk_attention_bwd(&s.a, s.dq, s.dk, s.dv, s.dout, s.q, s.k, s.v, s.out, s.lse, ZERO_IMPL_SCALAR));
    double gmax = max_abs(s.dqkv, s.nq), worst = 0.0;
    const size_t ld = s.a.ld_q;
    for (size_t i = 0; i < s.nq; i++) {
        if (i % ld >= ld - 3) { /* padding: no gradient, never written */
            ZT_CHECK(s.dqkv[i] == 0.0f);
            continue;
        }
        const float save = s.qkv[i], h = 1e-2f;
        double l[2];
        for (int sg = 0; sg < 2; sg++) {
            s.qkv[i] = save + (sg ? -h : h);
            ZT_OK(mk_attention_fwd(&s.a, s.out, NULL, s.q, s.k, s.v, ZERO_IMPL_SCALAR));
            l[sg] = 0.0;
            for (size_t k = 0; k < s.no; k++) l[sg] += (double)s.dout[k] * s.out[k];
        }
        s.qkv[i] = save;
        const double fd = (l[0] - l[1]) / (2.0 * h), g = s.dqkv[i];
        const double err = fabs(fd - g) / (2e-3 * gmax + 2e-3 * fabs(g) + 2e-4);
        worst = fmax(worst, err);
        ZT_CHECKF(err <= 1.0, "attention fd[%zu]: fd %.7g, backward %.7g", i, fd, g);
    }
    printf("attention, window %d: finite differences of the scalar reference within %.4f of the bound (%zu "
           "elements)\n", window, worst, s.nq);
    abuf_free(&s);
}

/* Same bits on 1 and 3 threads, for every impl; causal and within a window of 40. */
static void test_threads(int window) {
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    const acase c = {3, 150, 4, 2, 32, 1};
    for (int v = -1; v < MT_NVEC; v++) {
        const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
        if (v >= 0 && !zero_impl_available(impl)) continue;
        float *keep[3] = {NULL, NULL, NULL};
        int same = 1;
        for (int k = 0; k < 2; k++) {
            abuf s;
            mt_state = 0x1234567ull; /* the same inputs both times */
            abuf_init(&s, &c);
            s.a.window = window;
            omp_set_num_threads(k ? 3 : 1);
            memset(s.dqkv, 0, 4 * s.nq);
            memset(s.out, 0, 4 * s.no); /* the padding between rows is never written */
            ZT_OK(mk_attention_fwd(&s.a, s.out, s.lse, s.q, s.k, s.v, impl));
            ZT_OK(mk_attention_bwd(&s.a, s.dq, s.dk, s.dv, s.dout, s.q, s.k, s.v, s.out, s.lse, impl));
            if (!k) {
                keep[0] = mt_dup(s.out, s.no), keep[1] = mt_dup(s.lse, s.nl), keep[2] = mt_dup(s.dqkv, s.nq);
            } else {
                same = !memcmp(keep[0], s.out, 4 * s.no) && !memcmp(keep[1], s.lse, 4 * s.nl) &&
                       !memcmp(keep[2], s.dqkv, 4 * s.nq);
            }
            abuf_free(&s);
        }
        ZT_CHECKF(same, "%s attention (window %d) differs between 1 and 3 threads", zero_impl_name(impl), window);
        free(keep[0]), free(keep[1]), free(keep[2]);
    }
    omp_set_num_threads(saved);
#else
    (void)window;
#endif
}

/* A window of T or more masks nothing: out, lse, dq, dk, dv bit for bit those of the causal
 * kernel, in every impl (the windowed paths must not change a single rounding). */
static void test_window_full(void) {
    int n = 0;
    for (int ci = 0; ci < NCASES; ci++) {
        const acase *c = &cases[ci];
        for (int v = -1; v < MT_NVEC; v++) {
            const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
            if (v >= 0 && !mt_impl_runs(impl)) continue;
            for (int capped = 0; capped < 2; capped++) {
                const int wins[3] = {0, c->T, c->T + 1 + ci * 1000};
                float *keep[3] = {NULL, NULL, NULL};
                for (int w = 0; w < 3; w++) {
                    abuf s;
                    mt_state = 0x9e3779b97f4a7c15ull + (uint64_t)ci; /* the same inputs each time */
                    abuf_init(&s, c);
                    s.a.window = wins[w];
                    s.a.softcap = capped ? 0.5f : 0.0f;
                    float *gp[3];
                    size_t gn[3];
                    const int ng = grad_parts(&s, gp, gn);
                    memset(s.out, 0, 4 * s.no);
                    for (int i = 0; i < ng; i++) memset(gp[i], 0, 4 * gn[i]);
                    ZT_OK(mk_attention_fwd(&s.a, s.out, s.lse, s.q, s.k, s.v, impl));
                    ZT_OK(mk_attention_bwd(&s.a, s.dq, s.dk, s.dv, s.dout, s.q, s.k, s.v, s.out, s.lse, impl));
                    /* gradients as one list: the fused buffer, or dq, dk, dv back to back */
                    size_t ngrad = 0;
                    for (int i = 0; i < ng; i++) ngrad += gn[i];
                    float *g = malloc(4 * ngrad), *at = g;
                    for (int i = 0; i < ng; i++) memcpy(at, gp[i], 4 * gn[i]), at += gn[i];
                    if (!w) {
                        keep[0] = mt_dup(s.out, s.no), keep[1] = mt_dup(s.lse, s.nl), keep[2] = g;
                    } else {
                        ZT_CHECKF(!memcmp(keep[0], s.out, 4 * s.no) && !memcmp(keep[1], s.lse, 4 * s.nl) &&
                                      !memcmp(keep[2], g, 4 * ngrad),
                                  "%s attention, case %d, window %d (softcap %d): not bitwise the causal kernel",
                                  zero_impl_name(impl), ci, wins[w], capped);
                        free(g);
                        n++;
                    }
                    abuf_free(&s);
                }
                free(keep[0]), free(keep[1]), free(keep[2]);
            }
        }
    }
    printf("attention: a window >= T bitwise the causal kernel (%d runs: forward and backward)\n", n);
}

/* Packed documents equal the same documents run as sequences of their own (a batch of one each):
 * out, lse and the gradients, every impl, within float rounding (the key blocks fall elsewhere).
 * No key or value outside the query's document carries weight: making every other document's
 * huge changes nothing. */
static void test_docs_separate(void) {
    static const int shapes[][4] = {{300, 4, 2, 32}, {200, 2, 2, 64}, {129, 3, 1, 17}}; /* T, H, G, hd */
    double worst = 0.0;
    int runs = 0;
    for (int si = 0; si < 3; si++)
        for (int v = -1; v < MT_NVEC; v++) {
            const zero_impl impl = v < 0 ? ZERO_IMPL_SCALAR : mt_vec_impls[v];
            if (v >= 0 && !mt_impl_runs(impl)) continue;
            const acase c = {1, shapes[si][0], shapes[si][1], shapes[si][2], shapes[si][3], 0};
            abuf s;
            abuf_init(&s, &c);
            int32_t *docs = make_docs(1, c.T);
            s.a.doc = docs;
            ZT_OK(mk_attention_fwd(&s.a, s.out, s.lse, s.q, s.k, s.v, impl));
            ZT_OK(mk_attention_bwd(&s.a, s.dq, s.dk, s.dv, s.dout, s.q, s.k, s.v, s.out, s.lse, impl));
            for (int t0 = 0; t0 < c.T;) {
                int n = 1;
                while (t0 + n < c.T && docs[t0 + n] == t0) n++;
                /* the document alone: its rows of q, k, v, dout as a sequence of n tokens */
                mk_attn one = s.a;
                one.T = n, one.doc = NULL;
                const size_t lq = s.a.ld_q, lk = s.a.ld_k, lo = s.a.ld_o;
                float *o = mt_alloc((size_t)n * lo), *l = mt_alloc((size_t)c.H * n);
                float *dq = mt_alloc((size_t)n * lq), *dk = mt_alloc((size_t)n * lk), *dv = mt_alloc((size_t)n * lk);
                ZT_OK(mk_attention_fwd(&one, o, l, s.q + t0 * lq, s.k + t0 * lk, s.v + t0 * lk, impl));
                ZT_OK(mk_attention_bwd(&one, dq, dk, dv, s.dout + t0 * lo, s.q + t0 * lq, s.k + t0 * lk,
                                       s.v + t0 * lk, o, l, impl));
                for (size_t i = 0; i < (size_t)n * lo; i++)
                    worst = fmax(worst, fabs(o[i] - s.out[t0 * lo + i]));
                for (int h = 0; h < c.H; h++)
                    for (int t = 0; t < n; t++)
                        worst = fmax(worst, fabs(l[(size_t)h * n + t] - s.lse[(size_t)h * c.T + t0 + t]) / 8.0);
                for (size_t i = 0; i < (size_t)n * lq; i++) worst = fmax(worst, fabs(dq[i] - s.dq[t0 * lq + i]));
                for (size_t i = 0; i < (size_t)n * lk; i++) {
                    worst = fmax(worst, fabs(dk[i] - s.dk[t0 * lk + i]));
                    worst = fmax(worst, fabs(dv[i] - s.dv[t0 * lk + i]));
                }
                free(o), free(l), free(dq), free(dk), free(dv);
                runs++;
                t0 += n;
            }
            /* every key and value but one document's made huge (keys 1e4: logits of 1e5 and more;
             * values 1e30): that document's outputs stay bitwise the same, so no other document's
             * key enters its softmax and no other value its sum with a weight other than 0 (the
             * blockwise kernels multiply the block's values by the zero weights: NaN would spread) */
            const int d0 = docs[c.T / 2];
            int d1 = d0 + 1;
            while (d1 < c.T && docs[d1] == d0) d1++;
            float *keep = mt_dup(s.out, s.no);
            for (int t = 0; t < c.T; t++)
                if (t < d0 || t >= d1)
                    for (size_t i = 0; i < s.a.ld_k; i++) {
                        s.k[(size_t)t * s.a.ld_k + i] = i % 2 ? 1e4f : -1e4f;
                        s.v[(size_t)t * s.a.ld_k + i] = 1e30f;
                    }
            ZT_OK(mk_attention_fwd(&s.a, s.out, s.lse, s.q, s.k, s.v, impl));
            ZT_CHECKF(!memcmp(s.out + (size_t)d0 * s.a.ld_o, keep + (size_t)d0 * s.a.ld_o,
                              sizeof(float) * (size_t)(d1 - d0) * s.a.ld_o),
                      "%s attention read a key outside the document [%d, %d)", zero_impl_name(impl), d0, d1);
            free(keep), free(docs);
            abuf_free(&s);
        }
    printf("attention: packed documents vs each run alone (%d documents): worst |diff| %.2e\n", runs, worst);
    ZT_CHECKF(worst < 2e-6, "packed documents differ from separate sequences by %.3e", worst);
}

static void test_args(void) {
    float x[64] = {0}, o[64], l[8];
    mk_attn a = {.B = 1, .T = 2, .n_head = 2, .n_kv_head = 1, .head_dim = 4, .ld_q = 8, .ld_k = 4, .ld_v = 4, .ld_o = 8, .scale = 0.5f};
    ZT_OK(mk_attention_fwd(&a, o, l, x, x, x, ZERO_IMPL_AUTO));
    mk_attn b = a;
    b.n_kv_head = 3;
    ZT_EQ_INT(mk_attention_fwd(&b, o, l, x, x, x, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    b = a, b.head_dim = 257, b.ld_q = b.ld_o = 514, b.ld_k = b.ld_v = 257;
    ZT_EQ_INT(mk_attention_fwd(&b, o, l, x, x, x, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    b = a, b.ld_k = 3;
    ZT_EQ_INT(mk_attention_bwd(&b, o, o, o, x, x, x, x, x, l, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    b = a, b.window = -1;
    ZT_EQ_INT(mk_attention_fwd(&b, o, l, x, x, x, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_attention_bwd(&b, o, o, o, x, x, x, x, x, l, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    const int32_t bad_doc[2][2] = {{1, 1}, {0, 0}}, good_doc[2] = {0, 1};
    b = a, b.doc = bad_doc[0]; /* the first token's document starts before it */
    ZT_EQ_INT(mk_attention_fwd(&b, o, l, x, x, x, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    b.doc = good_doc;
    ZT_OK(mk_attention_fwd(&b, o, l, x, x, x, ZERO_IMPL_AUTO));
    ZT_OK(mk_attention_bwd(&b, o, o, o, x, x, x, x, x, l, ZERO_IMPL_AUTO));
    b.doc = bad_doc[1]; /* one document: the causal mask */
    ZT_OK(mk_attention_fwd(&b, o, l, x, x, x, ZERO_IMPL_AUTO));
    const int32_t skip[3] = {0, 0, 1}; /* a document that starts neither at t nor where t-1's does */
    b = a, b.T = 3, b.doc = skip;
    ZT_EQ_INT(mk_attention_bwd(&b, o, o, o, x, x, x, x, x, l, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    b = a, b.scale = 0.0f;
    ZT_EQ_INT(mk_attention_fwd(&b, o, l, x, x, x, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    b = a, b.T = 0;
    ZT_OK(mk_attention_fwd(&b, NULL, NULL, NULL, NULL, NULL, ZERO_IMPL_AUTO));
    ZT_EQ_INT(mk_attention_bwd(&a, o, o, o, x, x, x, x, x, NULL, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(mk_attention_fwd(&a, o, l, x, x, x, (zero_impl)7), ZERO_ERR_INVALID_ARG);
}

int main(void) {
    printf("impl chosen here: %s\n", zero_impl_name(zero_impl_best()));
    test_against_ref();
    test_fd(0);
    test_fd(3);
    test_window_full();
    test_docs_separate();
    test_threads(0);
    test_threads(40);
    test_args();
    return zt_finish("test_mkernels_attn");
}
