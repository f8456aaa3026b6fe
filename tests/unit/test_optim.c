/* Tests of the optimizer kernels: hand-computed steps, the scalar reference against a plain
 * double-precision re-implementation over several steps, every vector impl bitwise against the
 * scalar one (random values, and edge values in every slot), the fused write-back, decay = 0,
 * thread-count independence, argument checks. */
#include "harness.h"
#include "zero/zero.h"

#include <stdint.h>
#ifdef _OPENMP
#include <omp.h>
#endif

static uint64_t rng_state = 0x243f6a8885a308d3ull;
static uint64_t rng(void) {
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}
static float urand(void) { return (float)((rng() >> 40) * (1.0 / 16777216.0)) * 2.0f - 1.0f; } /* [-1,1) */

/* The configurations every test walks through. */
typedef struct cfg {
    const char *name;
    zero_optim_hparams h;
} cfg;

static int make_cfgs(cfg *c) {
    int k = 0;
    zero_optim_hparams_default(&c[k].h, ZERO_OPTIM_ADAMW);
    c[k].h.lr = 0.01f, c[k].h.weight_decay = 0.1f, c[k++].name = "adamw";
    zero_optim_hparams_default(&c[k].h, ZERO_OPTIM_ADAMW);
    c[k].h.bias_correction = 0, c[k].h.eps = 1e-6f, c[k++].name = "adamw-nobc";
    zero_optim_hparams_default(&c[k].h, ZERO_OPTIM_ADAM);
    c[k].h.lr = 0.02f, c[k].h.weight_decay = 0.05f, c[k].h.beta1 = 0.8f, c[k].h.beta2 = 0.95f, c[k++].name = "adam-l2";
    zero_optim_hparams_default(&c[k].h, ZERO_OPTIM_SGD);
    c[k].h.lr = 0.1f, c[k++].name = "sgd";
    zero_optim_hparams_default(&c[k].h, ZERO_OPTIM_SGD);
    c[k].h.lr = 0.05f, c[k].h.momentum = 0.9f, c[k].h.weight_decay = 0.01f, c[k++].name = "sgd-momentum";
    zero_optim_hparams_default(&c[k].h, ZERO_OPTIM_SGD);
    c[k].h.lr = 0.05f, c[k].h.momentum = 0.8f, c[k].h.nesterov = 1, c[k++].name = "sgd-nesterov";
    zero_optim_hparams_default(&c[k].h, ZERO_OPTIM_LION);
    c[k].h.lr = 1e-3f, c[k].h.weight_decay = 0.5f, c[k++].name = "lion";
    return k;
}

typedef struct bufs {
    size_t n;
    float *p, *s0, *s1, *g;
    uint16_t *h;
    float *o32;
} bufs;

static void bufs_alloc(bufs *b, size_t n) {
    size_t m = n ? n : 1;
    b->n = n;
    b->p = calloc(m, 4), b->s0 = calloc(m, 4), b->s1 = calloc(m, 4), b->g = calloc(m, 4);
    b->h = calloc(m, 2), b->o32 = calloc(m, 4);
}
static void bufs_free(bufs *b) { free(b->p), free(b->s0), free(b->s1), free(b->g), free(b->h), free(b->o32); }
static void bufs_copy(bufs *d, const bufs *s) {
    memcpy(d->p, s->p, s->n * 4), memcpy(d->s0, s->s0, s->n * 4), memcpy(d->s1, s->s1, s->n * 4);
    memcpy(d->g, s->g, s->n * 4);
}
/* p in [-2, 2), states zero, gradients of mixed magnitude with exact zeros (Lion's sign 0). */
static void bufs_init(bufs *b) {
    for (size_t i = 0; i < b->n; i++) {
        b->p[i] = 2.0f * urand();
        b->s0[i] = b->s1[i] = 0.0f;
    }
}
static void grads(bufs *b) {
    for (size_t i = 0; i < b->n; i++) {
        uint64_t r = rng();
        b->g[i] = (r % 13 == 0) ? 0.0f : urand() * ((r % 5 == 0) ? 1e-3f : 1.0f);
    }
}

/* Equal bits, or both NaN (NaN payloads may legitimately depend on operand order). */
static size_t first_diff(const void *a, const void *b, size_t n, size_t es) {
    if (!memcmp(a, b, n * es)) return (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (!memcmp((const char *)a + i * es, (const char *)b + i * es, es)) continue;
        if (es == 4) {
            float x, y;
            memcpy(&x, (const char *)a + i * 4, 4), memcpy(&y, (const char *)b + i * 4, 4);
            if (x != x && y != y) continue;
        }
        return i;
    }
    return (size_t)-1;
}

static void test_names(void) {
    static const char *names[] = {"adamw", "adam", "sgd", "lion"};
    for (int t = 0; t < 4; t++) {
        zero_optim_type o = (zero_optim_type)99;
        ZT_CHECK(!strcmp(zero_optim_name((zero_optim_type)t), names[t]));
        ZT_OK(zero_optim_parse(names[t], &o));
        ZT_EQ_INT(o, t);
    }
    zero_optim_type o = ZERO_OPTIM_SGD;
    ZT_OK(zero_optim_parse("AdamW", &o));
    ZT_EQ_INT(o, ZERO_OPTIM_ADAMW);
    ZT_OK(zero_optim_parse("LION", &o));
    ZT_EQ_INT(o, ZERO_OPTIM_LION);
    ZT_EQ_INT(zero_optim_parse("adamx", &o), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_parse("Lamb", &o), ZERO_ERR_UNSUPPORTED);
    ZT_EQ_INT(zero_optim_parse(NULL, &o), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(o, ZERO_OPTIM_LION);
    ZT_CHECK(!strcmp(zero_optim_name((zero_optim_type)7), "invalid"));
    ZT_EQ_INT(zero_optim_state_count(ZERO_OPTIM_ADAMW, 0), 2);
    ZT_EQ_INT(zero_optim_state_count(ZERO_OPTIM_ADAM, 0.9f), 2);
    ZT_EQ_INT(zero_optim_state_count(ZERO_OPTIM_SGD, 0), 0);
    ZT_EQ_INT(zero_optim_state_count(ZERO_OPTIM_SGD, 0.9f), 1);
    ZT_EQ_INT(zero_optim_state_count(ZERO_OPTIM_LION, 0), 1);
    ZT_EQ_INT(zero_optim_state_count((zero_optim_type)9, 0), -1);

    zero_optim_hparams h;
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    ZT_EQ_INT(h.type, ZERO_OPTIM_ADAMW);
    ZT_CHECK(h.lr == 1e-3f && h.beta1 == 0.9f && h.beta2 == 0.999f && h.eps == 1e-8f);
    ZT_CHECK(h.weight_decay == 0.01f && h.bias_correction == 1 && h.momentum == 0 && !h.nesterov);
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAM);
    ZT_CHECK(h.weight_decay == 0.0f && h.beta2 == 0.999f);
    zero_optim_hparams_default(&h, ZERO_OPTIM_LION);
    ZT_CHECK(h.beta1 == 0.9f && h.beta2 == 0.99f && h.weight_decay == 0.0f);
}

/* Single elements with values worked out by hand. */
static void test_hand(void) {
    zero_optim_hparams h;
    float p, m, v, g;
    /* AdamW step 1: p = 1*(1 - 0.1*0.1) = 0.99; m = 0.05; v = 0.001*0.25 = 0.00025;
     * step size 0.1/(1-0.9) = 1; denom = sqrt(0.00025)/sqrt(0.001) + 1e-8 = 0.5;
     * p = 0.99 - 0.05/0.5 = 0.89. */
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    h.lr = 0.1f, h.weight_decay = 0.1f;
    p = 1, m = 0, v = 0, g = 0.5f;
    ZT_OK(zero_optim_step(&h, 1, &p, &m, &v, &g, 1.0f, 1.0f, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
    ZT_NEAR(p, 0.89, 1e-6);
    ZT_NEAR(m, 0.05, 1e-7);
    ZT_NEAR(v, 0.25 * (1 - (double)0.999f), 1e-12); /* 1 - beta2 exactly as the float beta2 has it */
    /* grad_scale: g = 4 * 0.125 = 0.5 gives the same step */
    p = 1, m = 0, v = 0, g = 4.0f;
    ZT_OK(zero_optim_step(&h, 1, &p, &m, &v, &g, 0.125f, 1.0f, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
    ZT_NEAR(p, 0.89, 1e-6);
    /* Adam (L2) step 1, wd 0.5: g = 0.5 + 0.5*1 = 1; m = 0.1; v = 0.001; step size
     * 0.1/(1-0.9) = 1; denom = sqrt(0.001)/sqrt(0.001) + 1e-8 = 1; p = 1 - 0.1/1 = 0.9. */
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAM);
    h.lr = 0.1f, h.weight_decay = 0.5f;
    p = 1, m = 0, v = 0, g = 0.5f;
    ZT_OK(zero_optim_step(&h, 1, &p, &m, &v, &g, 1.0f, 1.0f, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
    ZT_NEAR(p, 0.9, 1e-6);
    ZT_NEAR(m, 0.1, 1e-7);
    /* SGD Nesterov, lr 0.1, momentum 0.9: step 1 buf = 2, g = 2 + 0.9*2 = 3.8, p = 0.62;
     * step 2 buf = 0.9*2 + 2 = 3.8, g = 2 + 0.9*3.8 = 5.42, p = 0.62 - 0.542 = 0.078. */
    zero_optim_hparams_default(&h, ZERO_OPTIM_SGD);
    h.lr = 0.1f, h.momentum = 0.9f, h.nesterov = 1;
    p = 1, m = 12345.0f /* ignored on step 1: the buffer starts as the gradient */, g = 2;
    ZT_OK(zero_optim_step(&h, 1, &p, &m, NULL, &g, 1.0f, 1.0f, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
    ZT_NEAR(p, 0.62, 1e-6);
    ZT_NEAR(m, 2.0, 1e-7);
    ZT_OK(zero_optim_step(&h, 2, &p, &m, NULL, &g, 1.0f, 1.0f, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
    ZT_NEAR(p, 0.078, 1e-6);
    ZT_NEAR(m, 3.8, 1e-6);
    /* plain SGD with L2 0.5: g = 2 + 0.5*1 = 2.5; p = 1 - 0.25 = 0.75 */
    zero_optim_hparams_default(&h, ZERO_OPTIM_SGD);
    h.lr = 0.1f, h.weight_decay = 0.5f;
    p = 1, g = 2;
    ZT_OK(zero_optim_step(&h, 1, &p, NULL, NULL, &g, 1.0f, 1.0f, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
    ZT_NEAR(p, 0.75, 1e-7);
    /* Lion lr 0.1, wd 0.5: p = 1*(1-0.05) = 0.95; c = 0.1*(-3) < 0 -> p = 0.95 + 0.1 = 1.05;
     * m = 0.01*(-3) = -0.03. A zero c leaves p at the decayed value. */
    zero_optim_hparams_default(&h, ZERO_OPTIM_LION);
    h.lr = 0.1f, h.weight_decay = 0.5f;
    p = 1, m = 0, g = -3;
    ZT_OK(zero_optim_step(&h, 1, &p, &m, NULL, &g, 1.0f, 1.0f, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
    ZT_NEAR(p, 1.05, 1e-6);
    ZT_NEAR(m, -3 * (1 - (double)0.99f), 1e-9);
    p = 1, m = 0, g = 0;
    ZT_OK(zero_optim_step(&h, 1, &p, &m, NULL, &g, 1.0f, 1.0f, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
    ZT_NEAR(p, 0.95, 1e-7);
}

/* The double-precision re-implementation: torch.optim semantics written out plainly. Returns
 * per element the bound on |float - double| accumulated over the steps (see test_vs_double). */
typedef struct dref {
    double *p, *s0, *s1, *tol;
    double *a0;               /* s0 recomputed with |terms|: the scale of its rounding error */
    unsigned char *ambiguous; /* Lion: sign(c) too close to call in float */
} dref;

static void dref_step(const zero_optim_hparams *h, int64_t t, dref *r, const float *g32, float gs,
                      float decay, size_t n) {
    const double lr = h->lr, b1 = h->beta1, b2 = h->beta2, eps = h->eps, wd = (double)h->weight_decay * decay;
    const double ulp = ldexp(1.0, -23);
    for (size_t i = 0; i < n; i++) {
        double g = (double)g32[i] * gs, p = r->p[i], upd = 0, scale = 0;
        /* |terms| of the gradient: L2 decay can cancel it, and float then rounds relative to this */
        const double ga = fabs(g) + (h->type == ZERO_OPTIM_ADAM || h->type == ZERO_OPTIM_SGD ? fabs(wd * p) : 0);
        switch (h->type) {
        case ZERO_OPTIM_ADAMW:
        case ZERO_OPTIM_ADAM: {
            if (h->type == ZERO_OPTIM_ADAM) g += wd * p;
            else p *= 1.0 - lr * wd;
            r->s0[i] = b1 * r->s0[i] + (1 - b1) * g;
            r->a0[i] = b1 * r->a0[i] + (1 - b1) * ga;
            r->s1[i] = b2 * r->s1[i] + (1 - b2) * g * g;
            double bc1 = h->bias_correction ? 1 - pow(b1, (double)t) : 1;
            double bc2 = h->bias_correction ? 1 - pow(b2, (double)t) : 1;
            double denom = sqrt(r->s1[i]) / sqrt(bc2) + eps;
            upd = lr / bc1 * r->s0[i] / denom;
            scale = lr / bc1 * r->a0[i] / denom;
            break;
        }
        case ZERO_OPTIM_SGD: {
            g += wd * p;
            double d = g, da = ga;
            if (h->momentum != 0) {
                r->s0[i] = t == 1 ? g : h->momentum * r->s0[i] + g;
                r->a0[i] = t == 1 ? ga : h->momentum * r->a0[i] + ga;
                d = h->nesterov ? g + h->momentum * r->s0[i] : r->s0[i];
                da = h->nesterov ? ga + h->momentum * r->a0[i] : r->a0[i];
            }
            upd = lr * d;
            scale = lr * da;
            break;
        }
        case ZERO_OPTIM_LION: {
            p *= 1.0 - lr * wd;
            double c = b1 * r->s0[i] + (1 - b1) * g;
            const double mag = b1 * r->a0[i] + (1 - b1) * fabs(g); /* 0: c is an exact 0 */
            if (mag > 0 && fabs(c) <= 1e-5 * mag) r->ambiguous[i] = 1;
            upd = lr * (c > 0 ? 1.0 : c < 0 ? -1.0 : 0.0);
            r->s0[i] = b2 * r->s0[i] + (1 - b2) * g;
            r->a0[i] = b2 * r->a0[i] + (1 - b2) * fabs(g);
            scale = lr;
            break;
        }
        }
        r->p[i] = p - upd;
        /* Float rounds p*decay and p-upd once each (<= 1 ulp of |p| together). The update term
         * and the states it reads are sums of terms each rounded a few times: their absolute
         * error is a few dozen float roundings of the sum of |terms| (`scale`), well under
         * 2e-6 * scale for the <= 8 steps run here. */
        r->tol[i] += ulp * (fabs(p) + fabs(upd)) + 2e-6 * scale;
    }
}

static void test_vs_double(const cfg *c, size_t n, float gs, int steps) {
    bufs b;
    bufs_alloc(&b, n);
    bufs_init(&b);
    dref r = {calloc(n + 1, 8), calloc(n + 1, 8), calloc(n + 1, 8), calloc(n + 1, 8), calloc(n + 1, 8),
              calloc(n + 1, 1)};
    for (size_t i = 0; i < n; i++) r.p[i] = b.p[i];
    const zero_optim_hparams *h = &c->h;
    for (int t = 1; t <= steps; t++) {
        grads(&b);
        ZT_OK(zero_optim_step(h, t, b.p, b.s0, b.s1, b.g, gs, 1.0f, n, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_SCALAR));
        dref_step(h, t, &r, b.g, gs, 1.0f, n);
    }
    size_t bad = 0, amb = 0;
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        if (r.ambiguous[i]) { amb++; continue; }
        double err = fabs((double)b.p[i] - r.p[i]);
        if (err / r.tol[i] > worst) worst = err / r.tol[i];
        if (!(err <= r.tol[i]) && bad++ < 3)
            ZT_FAIL("%s n=%zu p[%zu] = %.9g, double %.12g, |diff| %.3g > tol %.3g", c->name, n, i, (double)b.p[i],
                    r.p[i], err, r.tol[i]);
        zt_checks++;
    }
    ZT_EQ_INT(bad, 0);
    ZT_CHECKF(amb <= n / 1000 + 1, "%s: %zu of %zu Lion signs too close to call", c->name, amb, n);
    if (n > 1000) printf("  %-13s n=%-8zu vs double: worst |err|/tol = %.3f, ambiguous %zu\n", c->name, n, worst, amb);
    free(r.p), free(r.s0), free(r.s1), free(r.tol), free(r.a0), free(r.ambiguous);
    bufs_free(&b);
}

/* Every available vector impl against the scalar reference, bitwise, over several steps, with
 * each write-back dtype. */
static void test_vs_scalar(const cfg *c, size_t n) {
    const zero_impl impls[] = {ZERO_IMPL_AVX2, ZERO_IMPL_AVX512, ZERO_IMPL_AUTO};
    const zero_dtype outs[] = {ZERO_DTYPE_COUNT /* none */, ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    bufs ref, vec;
    bufs_alloc(&ref, n);
    bufs_alloc(&vec, n);
    for (size_t k = 0; k < sizeof impls / sizeof impls[0]; k++) {
        if (impls[k] == ZERO_IMPL_AUTO && n > 100000) continue; /* AUTO is one of the others */
        if (!zero_impl_available(impls[k])) {
            float p = 0, m = 0, v = 0, g = 0;
            ZT_EQ_INT(zero_optim_step(&c->h, 1, &p, &m, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, impls[k]),
                      ZERO_ERR_UNSUPPORTED);
            continue;
        }
        for (size_t o = 0; o < sizeof outs / sizeof outs[0]; o++) {
            const zero_dtype odt = outs[o];
            if (odt == ZERO_DTYPE_FP32 && n > 100000) continue; /* a plain store: small sizes cover it */
            const int has_out = odt != ZERO_DTYPE_COUNT;
            bufs_init(&ref);
            bufs_copy(&vec, &ref);
            const int steps = n > 100000 ? 2 : 3;
            for (int t = 1; t <= steps; t++) {
                grads(&ref);
                if (t == steps && n > 20) ref.g[n / 2] = INFINITY, ref.g[n / 3] = NAN; /* specials flow alike */
                memcpy(vec.g, ref.g, n * 4);
                void *oref = odt == ZERO_DTYPE_FP32 ? (void *)ref.o32 : (void *)ref.h;
                void *ovec = odt == ZERO_DTYPE_FP32 ? (void *)vec.o32 : (void *)vec.h;
                ZT_OK(zero_optim_step(&c->h, t, ref.p, ref.s0, ref.s1, ref.g, 0.75f, 1.0f, n,
                                      has_out ? oref : NULL, odt, ZERO_IMPL_SCALAR));
                ZT_OK(zero_optim_step(&c->h, t, vec.p, vec.s0, vec.s1, vec.g, 0.75f, 1.0f, n,
                                      has_out ? ovec : NULL, odt, impls[k]));
                size_t d;
                if ((d = first_diff(ref.p, vec.p, n, 4)) != (size_t)-1)
                    ZT_FAIL("%s %s n=%zu step %d: p[%zu] %a vs scalar %a", c->name, zero_impl_name(impls[k]), n, t, d,
                            (double)vec.p[d], (double)ref.p[d]);
                if ((d = first_diff(ref.s0, vec.s0, n, 4)) != (size_t)-1)
                    ZT_FAIL("%s %s n=%zu step %d: s0[%zu] differs", c->name, zero_impl_name(impls[k]), n, t, d);
                if ((d = first_diff(ref.s1, vec.s1, n, 4)) != (size_t)-1)
                    ZT_FAIL("%s %s n=%zu step %d: s1[%zu] differs", c->name, zero_impl_name(impls[k]), n, t, d);
                if (has_out && (d = first_diff(oref, ovec, n, zero_dtype_size(odt))) != (size_t)-1)
                    ZT_FAIL("%s %s n=%zu out %s[%zu] differs", c->name, zero_impl_name(impls[k]), n,
                            zero_dtype_name(odt), d);
                zt_checks += 4;
            }
        }
    }
    bufs_free(&ref);
    bufs_free(&vec);
}

/* Equal 16-bit words, or both NaN in the format dt (bf16 or fp16). */
static size_t first_diff_half(const uint16_t *a, const uint16_t *b, size_t n, zero_dtype dt) {
    const unsigned inf = dt == ZERO_DTYPE_BF16 ? 0x7f80u : 0x7c00u;
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i] && !((a[i] & 0x7fffu) > inf && (b[i] & 0x7fffu) > inf)) return i;
    return (size_t)-1;
}

/* Every vector impl bitwise against the scalar reference on edge values in every slot (master,
 * both states, gradient): ±0, subnormals, the largest finite, ±Inf, quiet and signalling NaNs,
 * bf16 and fp16 round-to-even ties and the fp16 overflow tie (for the write-back), ±1; with a
 * grad_scale that keeps gradients finite and one that overflows them. n = 71: the edges land in
 * every lane of 8 and 16 and in the scalar tail. */
static void test_vs_scalar_edges(const cfg *c) {
    static const uint32_t E[] = {0x00000000u, 0x80000000u, 0x00000001u, 0x807fffffu, 0x00800000u, 0x7f7fffffu,
                                 0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u,
                                 0x3f808000u, 0x3f818000u, 0x477ff000u, 0x477fefffu, 0x33000000u, 0x33c00000u,
                                 0x3f800000u, 0xbf800000u, 0x3a83126fu, 0x35800000u, 0xb8800000u};
    const size_t NE = sizeof E / sizeof E[0], n = 71;
    const zero_impl impls[] = {ZERO_IMPL_AVX2, ZERO_IMPL_AVX512};
    const zero_dtype outs[] = {ZERO_DTYPE_FP32, ZERO_DTYPE_BF16, ZERO_DTYPE_FP16};
    const float scales[] = {0.75f, 3e38f};
    bufs ref, vec;
    bufs_alloc(&ref, n);
    bufs_alloc(&vec, n);
    for (size_t k = 0; k < 2; k++) {
        if (!zero_impl_available(impls[k])) continue;
        for (size_t o = 0; o < 3; o++)
            for (size_t sc = 0; sc < 2; sc++) {
                for (size_t i = 0; i < n; i++) {
                    uint32_t u[4] = {E[i % NE], E[(i * 7 + 3) % NE], E[(i * 5 + 1) % NE], E[(i * 11 + 2) % NE]};
                    memcpy(&ref.p[i], &u[0], 4), memcpy(&ref.s0[i], &u[1], 4), memcpy(&ref.s1[i], &u[2], 4);
                    memcpy(&ref.g[i], &u[3], 4);
                }
                bufs_copy(&vec, &ref);
                const zero_dtype odt = outs[o];
                void *oref = odt == ZERO_DTYPE_FP32 ? (void *)ref.o32 : (void *)ref.h;
                void *ovec = odt == ZERO_DTYPE_FP32 ? (void *)vec.o32 : (void *)vec.h;
                for (int t = 1; t <= 3; t++) {
                    ZT_OK(zero_optim_step(&c->h, t, ref.p, ref.s0, ref.s1, ref.g, scales[sc], 1.0f, n, oref, odt,
                                          ZERO_IMPL_SCALAR));
                    ZT_OK(zero_optim_step(&c->h, t, vec.p, vec.s0, vec.s1, vec.g, scales[sc], 1.0f, n, ovec, odt,
                                          impls[k]));
                    size_t d = first_diff(ref.p, vec.p, n, 4);
                    if (d == (size_t)-1) d = first_diff(ref.s0, vec.s0, n, 4);
                    if (d == (size_t)-1) d = first_diff(ref.s1, vec.s1, n, 4);
                    ZT_CHECKF(d == (size_t)-1, "%s %s edges (scale %g) step %d: element %zu differs", c->name,
                              zero_impl_name(impls[k]), (double)scales[sc], t, d);
                    d = odt == ZERO_DTYPE_FP32 ? first_diff(oref, ovec, n, 4)
                                               : first_diff_half(oref, ovec, n, odt);
                    ZT_CHECKF(d == (size_t)-1, "%s %s edges: write-back %s[%zu] differs", c->name,
                              zero_impl_name(impls[k]), zero_dtype_name(odt), d);
                }
            }
    }
    bufs_free(&ref);
    bufs_free(&vec);
}

/* The fused write-back is exactly zero_convert of the updated master. */
static void test_writeback(const cfg *c, size_t n) {
    const zero_impl impls[] = {ZERO_IMPL_SCALAR, ZERO_IMPL_AVX2, ZERO_IMPL_AVX512};
    const zero_dtype dts[] = {ZERO_DTYPE_BF16, ZERO_DTYPE_FP16, ZERO_DTYPE_FP32};
    bufs b;
    bufs_alloc(&b, n);
    uint16_t *conv = calloc(n + 1, 4);
    for (size_t k = 0; k < 3; k++) {
        if (!zero_impl_available(impls[k])) continue;
        for (size_t d = 0; d < 3; d++) {
            bufs_init(&b);
            for (int t = 1; t <= 2; t++) {
                grads(&b);
                void *out = dts[d] == ZERO_DTYPE_FP32 ? (void *)b.o32 : (void *)b.h;
                ZT_OK(zero_optim_step(&c->h, t, b.p, b.s0, b.s1, b.g, 1.0f, 1.0f, n, out, dts[d], impls[k]));
                ZT_OK(zero_convert(b.p, ZERO_DTYPE_FP32, conv, dts[d], n, ZERO_IMPL_SCALAR));
                ZT_CHECKF(!memcmp(conv, out, n * zero_dtype_size(dts[d])), "%s %s write-back %s differs from zero_convert",
                          c->name, zero_impl_name(impls[k]), zero_dtype_name(dts[d]));
            }
        }
    }
    free(conv);
    bufs_free(&b);
}

/* decay = 0 leaves weight decay out entirely: the same bits as weight_decay = 0. */
static void test_decay_zero(const cfg *c, size_t n) {
    if (c->h.weight_decay == 0.0f) return;
    zero_optim_hparams nowd = c->h;
    nowd.weight_decay = 0.0f;
    bufs a, b;
    bufs_alloc(&a, n);
    bufs_alloc(&b, n);
    bufs_init(&a);
    bufs_copy(&b, &a);
    for (int t = 1; t <= 3; t++) {
        grads(&a);
        memcpy(b.g, a.g, n * 4);
        ZT_OK(zero_optim_step(&c->h, t, a.p, a.s0, a.s1, a.g, 1.0f, 0.0f, n, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO));
        ZT_OK(zero_optim_step(&nowd, t, b.p, b.s0, b.s1, b.g, 1.0f, 1.0f, n, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO));
    }
    ZT_CHECKF(!memcmp(a.p, b.p, n * 4), "%s: decay 0 differs from weight_decay 0", c->name);
    /* and decay 1 does change the result */
    bufs_init(&a);
    bufs_copy(&b, &a);
    grads(&a);
    memcpy(b.g, a.g, n * 4);
    ZT_OK(zero_optim_step(&c->h, 1, a.p, a.s0, a.s1, a.g, 1.0f, 1.0f, n, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO));
    ZT_OK(zero_optim_step(&nowd, 1, b.p, b.s0, b.s1, b.g, 1.0f, 1.0f, n, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO));
    ZT_CHECKF(memcmp(a.p, b.p, n * 4) != 0, "%s: decay 1 had no effect", c->name);
    bufs_free(&a);
    bufs_free(&b);
}

/* Results do not depend on the number of OpenMP threads. */
static void test_threads(const cfg *c) {
#ifdef _OPENMP
    const size_t n = ((size_t)1 << 20) + 3;
    bufs a, b;
    bufs_alloc(&a, n);
    bufs_alloc(&b, n);
    const int saved = omp_get_max_threads();
    const int counts[] = {3}; /* an odd count: the chunk split differs from any even one */
    for (int k = 0; k < 1; k++) {
        bufs_init(&a);
        bufs_copy(&b, &a);
        for (int t = 1; t <= 2; t++) {
            grads(&a);
            memcpy(b.g, a.g, n * 4);
            omp_set_num_threads(1);
            ZT_OK(zero_optim_step(&c->h, t, a.p, a.s0, a.s1, a.g, 1.0f, 1.0f, n, a.h, ZERO_DTYPE_BF16, ZERO_IMPL_AUTO));
            omp_set_num_threads(counts[k]);
            ZT_OK(zero_optim_step(&c->h, t, b.p, b.s0, b.s1, b.g, 1.0f, 1.0f, n, b.h, ZERO_DTYPE_BF16, ZERO_IMPL_AUTO));
        }
        ZT_CHECKF(!memcmp(a.p, b.p, n * 4) && !memcmp(a.s0, b.s0, n * 4) && !memcmp(a.s1, b.s1, n * 4) &&
                      !memcmp(a.h, b.h, n * 2),
                  "%s: %d threads differ from 1", c->name, counts[k]);
    }
    omp_set_num_threads(saved);
    bufs_free(&a);
    bufs_free(&b);
#else
    (void)c;
#endif
}

static void test_errors(void) {
    zero_optim_hparams h;
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    float p = 1, m = 0, v = 0, g = 1;
    uint16_t o;
    ZT_EQ_INT(zero_optim_step(NULL, 1, &p, &m, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_step(&h, 0, &p, &m, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, &m, NULL, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, NULL, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_step(&h, 1, NULL, &m, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, &m, &v, NULL, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, &m, &v, &g, 1, 1, 1, &o, ZERO_DTYPE_INT32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, &m, &v, &g, NAN, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, &m, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, (zero_impl)17), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(p == 1 && m == 0 && v == 0); /* nothing touched on an error */
    h.lr = NAN;
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, &m, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    h.lr = 1e-3f, h.beta2 = 1.0f;
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, &m, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    h.beta2 = 0.999f, h.type = (zero_optim_type)8;
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, &m, &v, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    zero_optim_hparams_default(&h, ZERO_OPTIM_SGD);
    h.nesterov = 1; /* Nesterov needs momentum (torch refuses it too) */
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, NULL, NULL, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    h.nesterov = 0; /* plain SGD needs no state at all */
    ZT_OK(zero_optim_step(&h, 1, &p, NULL, NULL, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO));
    ZT_NEAR(p, 1 - 1e-3, 1e-7);
    h.momentum = 0.5f;
    ZT_EQ_INT(zero_optim_step(&h, 1, &p, NULL, NULL, &g, 1, 1, 1, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO), ZERO_ERR_INVALID_ARG);
    /* fp32 write-back into the master itself (fp32 training): allowed, a no-op */
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    float pa[9] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, pb[9], ma[9] = {0}, va[9] = {0}, mb[9] = {0}, vb[9] = {0};
    float ga[9] = {1, -1, 2, -2, 0, 3, -3, 4, -4};
    memcpy(pb, pa, sizeof pa);
    ZT_OK(zero_optim_step(&h, 1, pa, ma, va, ga, 1, 1, 9, pa, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO));
    ZT_OK(zero_optim_step(&h, 1, pb, mb, vb, ga, 1, 1, 9, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO));
    ZT_CHECK(!memcmp(pa, pb, sizeof pa));
    /* n = 0 is a no-op that accepts NULL arrays */
    zero_optim_hparams_default(&h, ZERO_OPTIM_ADAMW);
    ZT_OK(zero_optim_step(&h, 1, NULL, NULL, NULL, NULL, 1, 1, 0, NULL, ZERO_DTYPE_FP32, ZERO_IMPL_AUTO));
}

int main(void) {
    test_names();
    test_hand();
    test_errors();
    cfg cfgs[16];
    const int nc = make_cfgs(cfgs);
    const size_t sizes[] = {0, 1, 7, 8, 9, 17, 1009, ((size_t)1 << 20) + 3};
    const size_t nsizes = sizeof sizes / sizeof sizes[0];
    for (int c = 0; c < nc; c++) {
        for (size_t s = 0; s < nsizes; s++) {
            test_vs_double(&cfgs[c], sizes[s], s % 2 ? 1.0f : 1.0f / 3.0f, sizes[s] > 100000 ? 3 : 5);
            test_vs_scalar(&cfgs[c], sizes[s]);
        }
        test_vs_scalar_edges(&cfgs[c]);
        test_writeback(&cfgs[c], 1009);
        test_writeback(&cfgs[c], 100003);
        test_decay_zero(&cfgs[c], 1009);
        test_threads(&cfgs[c]);
    }
    return zt_finish("test_optim");
}
