/* Private helpers of the common layer shared by every other layer (never installed).
 * Names are prefixed zero__ (double underscore): not part of the public API. */
#ifndef ZERO_COMMON_INTERNAL_H
#define ZERO_COMMON_INTERNAL_H

#include "zero/common.h"

#include <stdio.h>

#if defined(__GNUC__)
#define ZERO__PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define ZERO__PRINTF(a, b)
#endif

/* Sends a line to the installed log callback when level is enabled. */
void zero__log(zero_log_level level, const char *fmt, ...) ZERO__PRINTF(2, 3);
/* snprintf into an error buffer (the per-handle last-error text). */
void zero__errorf(char *dst, size_t cap, const char *fmt, ...) ZERO__PRINTF(3, 4);

#define ZERO__ERR(e, ...) zero__errorf((e)->msg, sizeof (e)->msg, __VA_ARGS__)

/* CPU feature bits (cpuid + xgetbv), cached. */
int zero__cpu_has_avx2_fma_f16c(void);
int zero__cpu_has_avx512(void);

#endif
