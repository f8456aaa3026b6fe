/* zero/zero.h — the whole public API of libzero: the Zero Redundancy Optimizer in C.
 * Include this one header. Each part is documented in its own header, starting with engine.h. */
#ifndef ZERO_ZERO_H
#define ZERO_ZERO_H

/* The version of this header (the one source of the version: CMake reads it from here). The
 * library a program runs with may be another build than the header it was compiled against (a
 * shared libzero.so.MAJOR): zero_version() says which, and ZERO_VERSION_CHECK() whether it can
 * serve this program. Call it once at start:
 *     if (!ZERO_VERSION_CHECK()) { fprintf(stderr, "libzero %s: built for %s\n", zero_version(),
 *                                          ZERO_VERSION_STRING); return 1; }
 */
#define ZERO_VERSION_MAJOR 0
#define ZERO_VERSION_MINOR 1
#define ZERO_VERSION_PATCH 0
#define ZERO_VERSION_STRING "0.1.0"
/* MAJOR * 10000 + MINOR * 100 + PATCH: 0.1.0 is 100. */
#define ZERO_VERSION_NUMBER (ZERO_VERSION_MAJOR * 10000 + ZERO_VERSION_MINOR * 100 + ZERO_VERSION_PATCH)

#include "zero/common.h"
#include "zero/ckpt.h"
#include "zero/comm.h"
#include "zero/config.h"
#include "zero/data.h"
#include "zero/device.h"
#include "zero/engine.h"
#include "zero/io.h"
#include "zero/offload.h"
#include "zero/optim.h"
#include "zero/partition.h"
#include "zero/plan.h"
#include "zero/tokenizer.h"
#include "zero/trace.h"
#include "zero/precision.h"
#include "zero/quant.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The version of the library linked at run time: "0.1.0" (static, never NULL). */
const char *zero_version(void);
/* The same as ZERO_VERSION_NUMBER of the library's own build. */
int zero_version_number(void);
/* 1 when the library linked at run time serves a program compiled against version `compiled`
 * (a ZERO_VERSION_NUMBER), else 0: the same MAJOR (while MAJOR is 0, also the same MINOR: 0.x
 * releases may change the API), and a library not older than the header. */
int zero_version_compatible(int compiled);
#define ZERO_VERSION_CHECK() zero_version_compatible(ZERO_VERSION_NUMBER)

#ifdef __cplusplus
}
#endif

#endif /* ZERO_ZERO_H */
