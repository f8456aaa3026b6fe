/* The vector optimizer kernels with the fused bf16/fp16/fp32 write-back, written once in the
 * kernel layer's vocabulary (kernels/vec.h) and compiled by optim_avx2.c (8 lanes) and
 * optim_avx512.c (16 lanes). Each lane runs the float operations of the element steps of
 * kernels/elem.h in their order (v_mul/v_add, never v_fmadd; the including file turns fp
 * contraction off), so every kernel here is bitwise equal to zero__optim_scalar; tails run the
 * element steps themselves. */
#include "kernels/vec.h"
#include "optim/internal.h"

static inline void V_FN(store_out)(void *out, zero_dtype dt, size_t i, vf x) {
    if (dt == ZERO_DTYPE_BF16) vh_store((uint16_t *)out + i, v_to_bf16(x));
    else if (dt == ZERO_DTYPE_FP16) vh_store((uint16_t *)out + i, v_to_fp16(x));
    else v_store((float *)out + i, x);
}

/* zero__adam_elem, V_W lanes at a time */
static void V_FN(adam)(const zero__optim_k *k, float *p, float *m, float *v, const float *g, size_t n, void *out,
                       zero_dtype dt) {
    const vf gs = v_set1(k->grad_scale), wd = v_set1(k->wd), dm = v_set1(k->decay_mul);
    const vf b1 = v_set1(k->beta1), b2 = v_set1(k->beta2), omb1 = v_set1(k->omb1), omb2 = v_set1(k->omb2);
    const vf bc2 = v_set1(k->bc2_sqrt), eps = v_set1(k->eps), ss = v_set1(k->step_size);
    const int l2 = k->l2, dec = k->decoupled;
    size_t i = 0;
    for (; i + V_W <= n; i += V_W) {
        vf gv = v_mul(v_load(g + i), gs);
        vf x = v_load(p + i);
        if (l2) gv = v_add(gv, v_mul(wd, x));
        if (dec) x = v_mul(x, dm);
        const vf mm = v_add(v_mul(b1, v_load(m + i)), v_mul(omb1, gv));
        const vf vv = v_add(v_mul(b2, v_load(v + i)), v_mul(omb2, v_mul(gv, gv)));
        const vf den = v_add(v_div(v_sqrt(vv), bc2), eps);
        x = v_sub(x, v_mul(ss, v_div(mm, den)));
        v_store(m + i, mm);
        v_store(v + i, vv);
        v_store(p + i, x);
        if (out) V_FN(store_out)(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, m, v, g, i, n, out, dt);
}

/* zero__sgd_elem, V_W lanes at a time */
static void V_FN(sgd)(const zero__optim_k *k, float *p, float *buf, const float *g, size_t n, void *out,
                      zero_dtype dt) {
    const vf gs = v_set1(k->grad_scale), wd = v_set1(k->wd), mom = v_set1(k->momentum), lr = v_set1(k->lr);
    const int l2 = k->l2, first = k->first_step, nest = k->nesterov;
    size_t i = 0;
    for (; i + V_W <= n; i += V_W) {
        vf gv = v_mul(v_load(g + i), gs);
        vf x = v_load(p + i);
        if (l2) gv = v_add(gv, v_mul(wd, x));
        if (buf) {
            const vf b = first ? gv : v_add(v_mul(mom, v_load(buf + i)), gv);
            v_store(buf + i, b);
            gv = nest ? v_add(gv, v_mul(mom, b)) : b;
        }
        x = v_sub(x, v_mul(lr, gv));
        v_store(p + i, x);
        if (out) V_FN(store_out)(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, buf, NULL, g, i, n, out, dt);
}

/* zero__lion_elem, V_W lanes at a time; sign(c) by two selects (a zero or NaN c passes through) */
static void V_FN(lion)(const zero__optim_k *k, float *p, float *m, const float *g, size_t n, void *out, zero_dtype dt) {
    const vf gs = v_set1(k->grad_scale), dm = v_set1(k->decay_mul), b1 = v_set1(k->beta1), b2 = v_set1(k->beta2);
    const vf omb1 = v_set1(k->omb1), omb2 = v_set1(k->omb2), lr = v_set1(k->lr), zero = v_zero();
    const vf one = v_set1(1.0f), mone = v_set1(-1.0f);
    const int dec = k->decoupled;
    size_t i = 0;
    for (; i + V_W <= n; i += V_W) {
        const vf gv = v_mul(v_load(g + i), gs);
        vf x = v_load(p + i);
        if (dec) x = v_mul(x, dm);
        const vf mv = v_load(m + i);
        const vf c = v_add(v_mul(b1, mv), v_mul(omb1, gv));
        vf u = v_select(v_gt(c, zero), one, c);
        u = v_select(v_lt(c, zero), mone, u);
        x = v_sub(x, v_mul(lr, u));
        v_store(m + i, v_add(v_mul(b2, mv), v_mul(omb2, gv)));
        v_store(p + i, x);
        if (out) V_FN(store_out)(out, dt, i, x);
    }
    zero__optim_scalar_range(k, p, m, NULL, g, i, n, out, dt);
}

void V_FN(zero__optim)(const zero__optim_k *k, float *p, float *s0, float *s1, const float *g, size_t n, void *out,
                       zero_dtype out_dt) {
    switch (k->type) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM: V_FN(adam)(k, p, s0, s1, g, n, out, out_dt); break;
    case ZERO_OPTIM_SGD: V_FN(sgd)(k, p, s0, g, n, out, out_dt); break;
    case ZERO_OPTIM_LION: V_FN(lion)(k, p, s0, g, n, out, out_dt); break;
    }
}
