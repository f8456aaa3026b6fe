/* Private to the quant layer and its tests. */
#ifndef ZERO_QUANT_INTERNAL_H
#define ZERO_QUANT_INTERNAL_H

/* The fast index of zero_quant_blockwise for the dynamic and linear maps against zero__q_index's
 * bisection on three values of every 16-bit key inside [-1, 1]: the number that differ (0). */
int zero__quant_index_check(void);

/* The maps, built once (zero_quant_dynamic_map, zero_quant_linear_map): for the library's own
 * callers, which would otherwise build them again per call or keep copies. */
enum { ZERO__QMAP_SIGNED = 0, ZERO__QMAP_UNSIGNED = 1, ZERO__QMAP_LINEAR = 2 };
const float *zero__quant_map(int which);

#endif
