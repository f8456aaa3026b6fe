/* Private to the offload layer: what swap.c (swap files, the io backend) and pool.c (the
 * pipelined buffer pool) share. Both build on the io layer's public calls (and its settings
 * helper, for the io options). */
#ifndef ZERO_OFFLOAD_INTERNAL_H
#define ZERO_OFFLOAD_INTERNAL_H

#include "common/internal.h"
#include "io/internal.h" /* zero__io_settings: the offload I/O shares the io options */
#include "zero/io.h"
#include "zero/offload.h"

#endif
