/* qwZ (ZeRO++'s quantized weight gathers, zero_config.quant_weights): at stage 3 a rank codes its
 * shard of a unit's part as an int8 message (zero/quant.h: int8's linear map in blocks of
 * quant_weights_block, an fp32 absmax each), the messages are all-gathered as bytes, and each
 * rank decodes the others' into the gathered buffer while its own slice is copied from its shard
 * as it is. The same formulas on the host (the quant layer's zero_quant_msg_encode / _decode) and
 * on a device (its q8 kernels: the kernel layer's bodies), there in chunks of whole blocks so that
 * the message's last block is the only partial one. */
#include "engine/internal.h"
#include "quant/internal.h"

int zero__qwz_on(const zero_engine *e) { return e->cfg.quant_weights && e->own.gather_collective && e->world > 1; }

int zero__qwz_frozen(const zero_engine *e) { return zero__qwz_on(e) && !e->nquant; }

uint64_t zero__qwz_bytes(const zero_engine *e, uint64_t n) {
    return zero_quant_msg_bytes(n, (uint64_t)e->cfg.quant_weights_block);
}

zero_status zero__qwz_encode(zero_engine *e, const void *src, zero_dtype dt, uint64_t n, void *msg) {
    const uint64_t B = (uint64_t)e->cfg.quant_weights_block;
    if (!e->dev) { /* the quant layer's coder: the message whole, each value widened as it is read */
        const zero_status s = zero_quant_msg_encode(src, dt, n, B, msg);
        return s == ZERO_OK ? s
                            : zero__eng_fail(e, s, "qwZ: coding %llu elements of %s", (unsigned long long)n,
                                             zero_dtype_name(dt));
    }
    /* on a device: the kernels, a chunk of whole blocks at a time (widened first when not fp32) */
    const uint64_t nb = zero_quant_blocks(n, B), C = zero_quant_msg_chunk(B);
    const size_t esz = zero_dtype_size(dt);
    float *absmax = msg;
    uint8_t *codes = (uint8_t *)msg + 4 * nb;
    const uint64_t tail = zero__qwz_bytes(e, n) - 4 * nb - n; /* the padding, sent too: zeros */
    zero_status s = zero__x_zero(e, codes + n, (size_t)tail);
    float *tmp = NULL;
    if (s == ZERO_OK && dt != ZERO_DTYPE_FP32 && !(tmp = zero__dbuf_get(e, (size_t)(C * 4), 0)))
        s = zero__eng_fail(e, ZERO_ERR_NOMEM, "qwZ: out of memory for %llu elements", (unsigned long long)C);
    for (uint64_t a = 0; a < n && s == ZERO_OK; a += C) {
        const uint64_t m = n - a < C ? n - a : C;
        const void *x = (const char *)src + a * esz;
        if (tmp && (s = zero__x_convert(e, x, dt, tmp, ZERO_DTYPE_FP32, m)) != ZERO_OK) break;
        s = zero__x_q8_store(e, tmp ? tmp : x, ZERO__QMAP_LINEAR, B, m, codes + a, absmax + a / B);
    }
    zero__dbuf_put(e, tmp);
    return s;
}

/* Values [a, a + m) of a message of n into fp32 out: the quant layer's decoder on the host, the
 * q8_load kernel on a device. */
static zero_status decode_chunk(zero_engine *e, const char *msg, uint64_t n, uint64_t a, uint64_t m, float *out) {
    const uint64_t B = (uint64_t)e->cfg.quant_weights_block;
    if (!e->dev) {
        zero_quant_msg_decode(msg, n, B, a, m, out, 0);
        return ZERO_OK;
    }
    const uint8_t *codes = (const uint8_t *)msg + 4 * zero_quant_blocks(n, B);
    return zero__x_q8_load(e, codes + a, (const float *)msg + a / B, ZERO__QMAP_LINEAR, B, m, out);
}

zero_status zero__qwz_decode(zero_engine *e, const void *all, zero_dtype dt, uint64_t n, const void *own, void *dst) {
    const uint64_t C = zero_quant_msg_chunk((uint64_t)e->cfg.quant_weights_block), R = zero__qwz_bytes(e, n);
    const size_t esz = zero_dtype_size(dt);
    float *tmp = dt != ZERO_DTYPE_FP32 ? zero__dbuf_get(e, (size_t)(C * 4), 0) : NULL;
    zero_status s = dt == ZERO_DTYPE_FP32 || tmp ? ZERO_OK
                                                 : zero__eng_fail(e, ZERO_ERR_NOMEM,
                                                                  "qwZ: out of memory for %llu "
                                                                  "elements",
                                                                  (unsigned long long)C);
    for (int r = 0; r < e->world && s == ZERO_OK; r++) {
        char *slice = (char *)dst + (uint64_t)r * n * esz;
        if (r == e->rank) { /* this rank's own shard, as it is */
            s = zero__x_copy(e, slice, own, (size_t)(n * esz));
            continue;
        }
        const char *msg = (const char *)all + (uint64_t)r * R;
        for (uint64_t a = 0; a < n && s == ZERO_OK; a += C) {
            const uint64_t m = n - a < C ? n - a : C;
            s = decode_chunk(e, msg, n, a, m, tmp ? tmp : (float *)(slice + a * esz));
            if (s == ZERO_OK && tmp) s = zero__x_convert(e, tmp, ZERO_DTYPE_FP32, slice + a * esz, dt, m);
        }
    }
    zero__dbuf_put(e, tmp);
    return s;
}
