/* Private to the quant layer and its tests. */
#ifndef ZERO_QUANT_INTERNAL_H
#define ZERO_QUANT_INTERNAL_H

/* The fast index of zero_quant_blockwise for the dynamic and linear maps against zero__q_index's
 * bisection on three values of every 16-bit key inside [-1, 1]: the number that differ (0). */
int zero__quant_index_check(void);

#endif
