/* Private to the quant layer and its tests. */
#ifndef ZERO_QUANT_INTERNAL_H
#define ZERO_QUANT_INTERNAL_H

#include "zero/quant.h"

/* The fast index of zero_quant_blockwise for the dynamic and linear maps against zero__q_index's
 * bisection on three values of every 16-bit key inside [-1, 1]: the number that differ (0). */
int zero__quant_index_check(void);

/* The maps, built once (zero_quant_dynamic_map, zero_quant_linear_map): for the library's own
 * callers, which would otherwise build them again per call or keep copies. */
enum { ZERO__QMAP_SIGNED = 0, ZERO__QMAP_UNSIGNED = 1, ZERO__QMAP_LINEAR = 2 };
const float *zero__quant_map(int which);

/* A record coded in pieces (the engine's loading: no tensor held whole in fp32). rec is the whole
 * record's buffer (zero_quant_record_bytes of the tensor's ntotal values), zeroed by the caller; a
 * piece is n values from block b0 of the format (64 values; every piece but the tensor's last is
 * whole blocks): their codes go into rec, their blocks' absmax into am[b0..] for NF4 with double
 * quantization (am: ntotal's blocks), into the record itself otherwise (am unused). Once every
 * piece is in, zero__quant_record_finish writes the record's scales from am: the record is then
 * zero_quant_record_encode's of the whole tensor, byte for byte (zero_quant_record_encode is these
 * two calls on one piece). */
zero_status zero__quant_record_code(zero_qformat f, uint64_t ntotal, const float *x, uint64_t b0, uint64_t n, void *rec,
                                    float *am);
void zero__quant_record_finish(zero_qformat f, uint64_t ntotal, const float *am, void *rec);

#endif
