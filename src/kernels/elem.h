/* The kernel layer's element formulas: one element of every numeric kernel the engine and the
 * models run (conversion, optimizer steps, accumulation, squares, quantizers, activations, RoPE).
 *
 * Header-only and self-contained (libc and libm only), written in the common subset of C11 and
 * C++17 so that the same text compiles with cc for the CPU and with nvcc for the GPU: ZERO__HD is
 * `__host__ __device__` under nvcc and empty otherwise; no `restrict`, no designated initializers,
 * every pointer conversion spelled out. Each function is one element, in float, each operation
 * rounded once in the order written: the scalar reference kernels are loops over these, the
 * vector bodies (src/kernels/vec.h) repeat them lane by lane, and tests compare the two bit for
 * bit (docs/KERNELS.md). Files that compile these must not contract a*b+c into an fma: the CPU
 * files say `#pragma GCC optimize("fp-contract=off")` (or never get FMA instructions), nvcc gets
 * `--fmad=false` (CMakeLists.txt). The GELU/SiLU/RoPE bodies are the models' references, whose
 * vector twins use fma and their own exp and are held to a bound instead (docs/KERNELS.md). */
#ifndef ZERO_KERNELS_ELEM_H
#define ZERO_KERNELS_ELEM_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#if defined(__CUDACC__)
#define ZERO__HD __host__ __device__
#else
#define ZERO__HD
#endif

/* ---------------------------------------------------------------- fp32 bits */
static inline ZERO__HD uint32_t zero__f32_bits(float f) {
#if defined(__CUDA_ARCH__)
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

static inline ZERO__HD float zero__f32_from_bits(uint32_t u) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* ---------------------------------------------------------------- fp32 <-> bf16 / fp16
 * Contract of every conversion (scalar and vector alike, bitwise):
 *  - narrowing rounds to nearest, ties to even; finite values past the largest finite value
 *    round to Inf exactly as IEEE 754 says (fp16: |x| >= 65520 -> Inf); subnormal results are
 *    produced (bf16 keeps fp32 subnormals, fp16 rounds into its subnormal range correctly);
 *  - every NaN produced is quiet: sign and the leading payload bits kept, the quiet bit set
 *    (that is what F16C's vcvtps2ph/vcvtph2ps do, and the scalar code matches it);
 *  - widening is exact for every non-NaN value. */

static inline ZERO__HD uint16_t zero__fp32_to_bf16_bits(float f) {
    uint32_t u = zero__f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff plus the kept LSB carries into the kept half exactly when the dropped half
     * is above one half, or exactly one half with an odd kept half; the carry may ripple into
     * the exponent, which is the correct rounding up to the next binade or to Inf. */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

static inline ZERO__HD float zero__bf16_bits_to_fp32(uint16_t h) {
    uint32_t u = (uint32_t)h << 16;
    if ((u & 0x7fffffffu) > 0x7f800000u) u |= 0x00400000u;
    return zero__f32_from_bits(u);
}

static inline ZERO__HD uint16_t zero__fp32_to_fp16_bits(float f) {
    const uint32_t u = zero__f32_bits(f);
    const uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    const uint32_t x = u & 0x7fffffffu;
    if (x > 0x7f800000u) return (uint16_t)(sign | 0x7e00u | ((x >> 13) & 0x03ffu));
    if (x >= 0x477ff000u) return (uint16_t)(sign | 0x7c00u); /* >= 65520 (halfway past max) */
    if (x >= 0x38800000u) {                                  /* >= 2^-14: an fp16 normal */
        uint32_t r = x - 0x38000000u;                        /* exponent bias 127 -> 15 */
        r += 0x0fffu + ((r >> 13) & 1u);
        return (uint16_t)(sign | (r >> 13));
    }
    const uint32_t e = x >> 23;
    if (e < 102) return sign; /* below 2^-25: rounds to zero */
    /* fp16 subnormal k * 2^-24: x = mant * 2^(e-150), so k = mant >> (126 - e) rounded. */
    const uint32_t mant = (x & 0x007fffffu) | 0x00800000u;
    const uint32_t shift = 126u - e; /* 14..24 */
    uint32_t q = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1u), half = 1u << (shift - 1u);
    if (rem > half || (rem == half && (q & 1u))) q++; /* q = 0x400 is the smallest normal */
    return (uint16_t)(sign | q);
}

static inline ZERO__HD float zero__fp16_bits_to_fp32(uint16_t h) {
    const uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    const uint32_t e = (h >> 10) & 0x1fu, m = h & 0x03ffu;
    if (e == 0) {
        const float v = (float)m * 5.9604644775390625e-08f; /* m * 2^-24, exact: m < 2^10 */
        return zero__f32_from_bits(zero__f32_bits(v) | sign);
    }
    if (e == 31) return zero__f32_from_bits(sign | 0x7f800000u | (m << 13) | (m ? 0x00400000u : 0u));
    return zero__f32_from_bits(sign | ((e + 112u) << 23) | (m << 13));
}

/* ---------------------------------------------------------------- accumulation, squares */
/* A half-precision slot plus an fp32 contribution: widened, added in fp32, rounded once (the
 * engine's gradient accumulation, zero__accumulate). */
static inline ZERO__HD uint16_t zero__bf16_add_f32(uint16_t d, float x) {
    return zero__fp32_to_bf16_bits(zero__bf16_bits_to_fp32(d) + x);
}
static inline ZERO__HD uint16_t zero__fp16_add_f32(uint16_t d, float x) {
    return zero__fp32_to_fp16_bits(zero__fp16_bits_to_fp32(d) + x);
}

/* acc + x² in double: a float's square is exact in double, so an fma rounds as the plain add
 * does and every body gives the same bits (zero__sumsq's lanes). */
static inline ZERO__HD double zero__sq_acc(double acc, float x) {
    const double v = (double)x;
    return acc + v * v;
}

/* ---------------------------------------------------------------- optimizer steps */
/* The per-step constants every optimizer kernel reads, computed once per step in double and
 * rounded to float by zero__optim_consts (src/optim/optim.c), so that every implementation, on
 * the CPU or a GPU, reads the same float constants. */
typedef struct zero__optim_k {
    int type; /* a zero_optim_type */
    float grad_scale;
    float lr;
    float beta1, beta2, omb1, omb2; /* omb = 1 - beta, rounded once */
    float eps;
    float step_size; /* Adam(W): lr / (1 - beta1^step); lr without bias correction */
    float bc2_sqrt;  /* Adam(W): sqrt(1 - beta2^step); 1 without bias correction */
    int l2;          /* Adam, SGD: grad += wd * p (only when wd != 0) */
    float wd;        /* weight_decay * decay */
    int decoupled;   /* AdamW, Lion: p *= decay_mul before the update (only when wd != 0) */
    float decay_mul; /* 1 - lr * wd */
    float momentum;  /* SGD */
    int nesterov;    /* SGD */
    int first_step;  /* SGD: step == 1, the momentum buffer starts as the gradient */
} zero__optim_k;

/* Adam and AdamW (the switches l2 / decoupled say which): p master, m and v the moments, g0 the
 * gradient before grad_scale. */
static inline ZERO__HD void zero__adam_elem(const zero__optim_k *k, float *p, float *m, float *v, float g0) {
    float g = g0 * k->grad_scale;
    float x = *p;
    if (k->l2) g = g + k->wd * x;
    if (k->decoupled) x = x * k->decay_mul;
    const float mm = k->beta1 * *m + k->omb1 * g;
    const float vv = k->beta2 * *v + k->omb2 * (g * g);
    const float denom = sqrtf(vv) / k->bc2_sqrt + k->eps;
    x = x - k->step_size * (mm / denom);
    *m = mm;
    *v = vv;
    *p = x;
}

/* SGD, with momentum (buf not NULL; Nesterov or not) or without. */
static inline ZERO__HD void zero__sgd_elem(const zero__optim_k *k, float *p, float *buf, float g0) {
    float g = g0 * k->grad_scale;
    const float x = *p;
    if (k->l2) g = g + k->wd * x;
    if (buf) {
        const float b = k->first_step ? g : k->momentum * *buf + g;
        *buf = b;
        g = k->nesterov ? g + k->momentum * b : b;
    }
    *p = x - k->lr * g;
}

/* sign(c) as torch.sign: ±1, a zero stays that zero, a NaN stays NaN. */
static inline ZERO__HD float zero__sign(float c) { return c > 0.0f ? 1.0f : (c < 0.0f ? -1.0f : c); }

static inline ZERO__HD void zero__lion_elem(const zero__optim_k *k, float *p, float *m, float g0) {
    const float g = g0 * k->grad_scale;
    float x = *p;
    if (k->decoupled) x = x * k->decay_mul;
    const float c = k->beta1 * *m + k->omb1 * g;
    *p = x - k->lr * zero__sign(c);
    *m = k->beta2 * *m + k->omb2 * g;
}

/* ---------------------------------------------------------------- determinism quantizers */
/* The fp32 exponent field of x (0 for zeros and subnormals, 255 for Inf and NaN). */
static inline ZERO__HD uint32_t zero__f32_field(float x) { return (zero__f32_bits(x) >> 23) & 0xffu; }

/* x on the grid 2^e, given s = 2^-e: rint(x s) (nearest, ties to even), clamped to ±c; a NaN
 * counts 0 (its block is marked by its exponent field instead). x s is exact whenever the result
 * can be nonzero, so this equals the double reference rint(ldexp(x, -e)) (engine/determ_kernels.c). */
static inline ZERO__HD int32_t zero__dq_quantize_elem(float x, float s, float c) {
    float y = x != x ? 0.0f : x * s;
    y = y > c ? c : y < -c ? -c : y;
    return (int32_t)rintf(y);
}

/* A quantized sum S back to fp32: S rounded to fp32 (nearest even), then scaled exactly by
 * s = 2^e. */
static inline ZERO__HD float zero__dq_dequantize_elem(int32_t acc, float s) { return (float)acc * s; }

/* x² as its exponent field ef and the exact square of its significand (< 2^48): x² = m2 · 4^E
 * with E = ef - 150 (ef = 0: -149). The deterministic sum of squares adds m2 per field. */
static inline ZERO__HD uint64_t zero__dk_sq_elem(float x, uint32_t *ef) {
    const uint32_t u = zero__f32_bits(x);
    const uint32_t f = (u >> 23) & 0xffu, fr = u & 0x7fffffu;
    const uint64_t m = f ? (fr | 0x800000u) : fr;
    *ef = f;
    return m * m;
}

/* ---------------------------------------------------------------- activations, RoPE */
/* GELU (tanh form, as GPT-2): u = K (x + A x^3); gelu = x * sigmoid(2u). */
#define ZERO__GELU_K 0.7978845608028654f
#define ZERO__GELU_A 0.044715f
/* exp arguments of a sigmoid are clamped here: exp(80) is finite, so 1 - s = e * s never forms
 * inf * 0; the clamp moves results by less than 1e-34 (absolute). A NaN stays NaN. */
#define ZERO__SIG_CLAMP 80.0f

static inline ZERO__HD float zero__clamp_exp_arg(float v) { return v > ZERO__SIG_CLAMP ? ZERO__SIG_CLAMP : v; }

static inline ZERO__HD float zero__gelu(float x) {
    const float u = ZERO__GELU_K * (x + ZERO__GELU_A * x * x * x);
    return x / (1.0f + expf(zero__clamp_exp_arg(-2.0f * u)));
}

static inline ZERO__HD float zero__gelu_grad(float x) {
    const float u = ZERO__GELU_K * (x + ZERO__GELU_A * x * x * x);
    const float e = expf(zero__clamp_exp_arg(-2.0f * u));
    const float s = 1.0f / (1.0f + e);
    /* d/dx x sigmoid(2u) = s + 2x s (1 - s) u', with 1 - s = e s */
    return s + 2.0f * x * s * (e * s) * ZERO__GELU_K * (1.0f + 3.0f * ZERO__GELU_A * x * x);
}

static inline ZERO__HD float zero__silu(float x) { return x / (1.0f + expf(zero__clamp_exp_arg(-x))); }

static inline ZERO__HD float zero__silu_grad(float x) {
    const float e = expf(zero__clamp_exp_arg(-x));
    const float s = 1.0f / (1.0f + e);
    return s * (1.0f + x * (e * s));
}

/* SwiGLU: silu(gate) * up; its backward from dy: *dg = dy up silu'(gate), *du = dy silu(gate). */
static inline ZERO__HD float zero__swiglu(float gate, float up) { return zero__silu(gate) * up; }

static inline ZERO__HD void zero__swiglu_grad(float dy, float gate, float up, float *dg, float *du) {
    *dg = dy * up * zero__silu_grad(gate);
    *du = dy * zero__silu(gate);
}

/* RoPE on one pair (a, b) = (x[i], x[i + half]) by the angle whose cosine is c and (signed: the
 * backward rotates by -sn) sine is sn. */
static inline ZERO__HD void zero__rope_pair(float *a, float *b, float c, float sn) {
    const float x0 = *a, x1 = *b;
    *a = x0 * c - x1 * sn;
    *b = x1 * c + x0 * sn;
}

#endif
