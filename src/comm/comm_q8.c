/* qgZ's int8 messages in the comm layer (zero_comm_ireduce_scatter_q8): the parts of a
 * reduce-scatter coded with the quant layer's message coder, and the sum of what arrives (fp32,
 * in part order, one rounding to the dtype at the end). The plain MPI path and the shared-memory
 * collectives' cross-node step both use these two. */
#include "comm/internal.h"
#include "zero/quant.h"

#include <string.h>

zero_status zero__comm_q8_encode(const void *send, int n, int skip, size_t count, zero_dtype dt, size_t block,
                                 unsigned char *msgs) {
    const uint64_t R = zero_quant_msg_bytes(count, block);
    const size_t es = zero_dtype_size(dt);
    for (int k = 0; k < n; k++) {
        if (k == skip) continue;
        zero_status s =
            zero_quant_msg_encode((const char *)send + (size_t)k * count * es, dt, count, block, msgs + (size_t)k * R);
        if (s != ZERO_OK) return s;
    }
    return ZERO_OK;
}

zero_status zero__comm_q8_sum(const unsigned char *msgs, int n, int own, const void *own_vals, size_t count,
                              zero_dtype dt, size_t block, void *recv) {
    const uint64_t R = zero_quant_msg_bytes(count, block);
    /* the sums: recv itself in fp32, else an fp32 buffer; this rank's exact values widened apart
     * unless they come first (then they start the sums) */
    float *acc = dt == ZERO_DTYPE_FP32 ? recv : zero_mem_alloc(NULL, ZERO_MEM_COMM, count * 4);
    float *mine = own > 0 && count ? zero_mem_alloc(NULL, ZERO_MEM_COMM, count * 4) : NULL;
    if ((!acc || (own > 0 && !mine)) && count) {
        if (acc != recv) zero_mem_free(NULL, acc);
        zero_mem_free(NULL, mine);
        return ZERO_ERR_NOMEM;
    }
    for (int k = 0; k < n; k++) {
        if (k != own) {
            zero_quant_msg_decode(msgs + (size_t)k * R, count, block, 0, count, acc, k > 0);
        } else if (k == 0) {
            zero_convert(own_vals, dt, acc, ZERO_DTYPE_FP32, count, ZERO_IMPL_AUTO);
        } else {
            zero_convert(own_vals, dt, mine, ZERO_DTYPE_FP32, count, ZERO_IMPL_AUTO);
            for (size_t i = 0; i < count; i++) acc[i] += mine[i];
        }
    }
    if (acc != recv) {
        zero_convert(acc, ZERO_DTYPE_FP32, recv, dt, count, ZERO_IMPL_AUTO);
        zero_mem_free(NULL, acc);
    }
    zero_mem_free(NULL, mine);
    return ZERO_OK;
}
