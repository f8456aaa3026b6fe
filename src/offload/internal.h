/* Private to the offload layer: what swap.c (swap files, the io backend) and pool.c (the
 * pipelined buffer pool) share. Both build only on the io layer's public calls. */
#ifndef ZERO_OFFLOAD_INTERNAL_H
#define ZERO_OFFLOAD_INTERNAL_H

#include "common/internal.h"
#include "zero/io.h"
#include "zero/offload.h"

#endif
