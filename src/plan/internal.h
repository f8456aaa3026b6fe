/* Private helpers of the plan layer (never installed): error text into an optional zero_error
 * and the model check shared by the estimate and the search. */
#ifndef ZERO_PLAN_INTERNAL_H
#define ZERO_PLAN_INTERNAL_H

#include "common/internal.h"
#include "zero/plan.h"

/* Writes the message into err->msg; err may be NULL (the caller did not want the text). */
#define zero__plan_err(err, ...)                                                                   \
    do {                                                                                           \
        zero_error *zero__e = (err);                                                               \
        if (zero__e) zero__errorf(zero__e->msg, sizeof zero__e->msg, __VA_ARGS__);                \
    } while (0)

/* Bytes of the fp32 chunk the engine's step converts half-precision gradients through. */
#define ZERO__PLAN_STEP_CHUNK ((uint64_t)16384 * 4)

/* Deterministic mode (src/engine/determ.c): elements per grid block, the most elements the step
 * converts to fp32 at a time (half precision), and the bytes of one rank's record of the gradient
 * norm (a flag and 256 128-bit sums). */
#define ZERO__PLAN_DET_BLOCK 32 /* elements per grid block (src/engine: ZERO_DQ_BLOCK) */
#define ZERO__PLAN_DET_CHUNK ((uint64_t)1 << 18)
#define ZERO__PLAN_DET_NORM_BYTES ((uint64_t)8 * 513)

/* A device rank's pinned buffers (docs/DEVICE.md): the two upload buffers of ZeRO-Offload's step
 * (src/engine: ZERO__UPL_BYTES) and the chunk of the blocking device collectives' staging
 * (src/comm: zero__comm_dev_chunk_bytes). */
#define ZERO__PLAN_UPL_BYTES ((uint64_t)1 << 20)
#define ZERO__PLAN_DEV_CHUNK ((uint64_t)4 << 20)

/* ZERO_ERR_INVALID_ARG with a message for a missing model, no units or an empty unit. */
zero_status zero__plan_check_model(const zero_plan_model *m, zero_error *err);

#endif
