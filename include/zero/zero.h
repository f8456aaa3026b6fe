/* zero/zero.h — the whole public API of libzero: the Zero Redundancy Optimizer in C.
 * Include this one header. Each part is documented in its own header, starting with engine.h. */
#ifndef ZERO_ZERO_H
#define ZERO_ZERO_H

#define ZERO_VERSION_MAJOR 0
#define ZERO_VERSION_MINOR 1
#define ZERO_VERSION_STRING "0.1.0"

#include "zero/common.h"
#include "zero/ckpt.h"
#include "zero/comm.h"
#include "zero/config.h"
#include "zero/data.h"
#include "zero/engine.h"
#include "zero/io.h"
#include "zero/offload.h"
#include "zero/optim.h"
#include "zero/partition.h"
#include "zero/plan.h"
#include "zero/tokenizer.h"
#include "zero/trace.h"
#include "zero/precision.h"

#endif /* ZERO_ZERO_H */
