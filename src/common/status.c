/* Status strings and the process-wide logging sink.
 * The library never prints: log lines go to the callback the program installs, or nowhere. */
#include "common/internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *zero_status_string(zero_status s) {
    switch (s) {
    case ZERO_OK: return "ok";
    case ZERO_ERR_INVALID_ARG: return "invalid argument";
    case ZERO_ERR_NOMEM: return "out of memory";
    case ZERO_ERR_IO: return "I/O error";
    case ZERO_ERR_COMM: return "communication error";
    case ZERO_ERR_UNSUPPORTED: return "not supported yet";
    case ZERO_ERR_STATE: return "call out of order";
    case ZERO_ERR_CONFIG: return "configuration error";
    case ZERO_ERR_FORMAT: return "bad file format";
    case ZERO_ERR_DIVERGED: return "ranks diverged";
    case ZERO_ERR_NOSPACE: return "no space left on device";
    case ZERO_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

static zero_log_fn g_log_fn;
static void *g_log_ctx;
static int g_log_level = -1; /* -1: not read from ZERO_LOG yet */

void zero_log_set_callback(zero_log_fn fn, void *ctx) {
    g_log_fn = fn;
    g_log_ctx = ctx;
}

void zero_log_set_level(zero_log_level level) { g_log_level = (int)level; }

zero_log_level zero_log_get_level(void) {
    if (g_log_level < 0) {
        const char *v = getenv("ZERO_LOG");
        g_log_level = ZERO_LOG_WARN;
        if (v) {
            if (!strcmp(v, "error")) g_log_level = ZERO_LOG_ERROR;
            else if (!strcmp(v, "warn")) g_log_level = ZERO_LOG_WARN;
            else if (!strcmp(v, "info")) g_log_level = ZERO_LOG_INFO;
            else if (!strcmp(v, "debug")) g_log_level = ZERO_LOG_DEBUG;
        }
    }
    return (zero_log_level)g_log_level;
}

void zero__log(zero_log_level level, const char *fmt, ...) {
    if (!g_log_fn || (int)level > (int)zero_log_get_level()) return;
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    g_log_fn(g_log_ctx, level, buf);
}

void zero__errorf(char *dst, size_t cap, const char *fmt, ...) {
    if (!dst || cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(dst, cap, fmt, ap);
    va_end(ap);
}

void zero_options_default(zero_options *o) {
    if (!o) return;
    memset(o, 0, sizeof *o);
    o->log_level = (int)zero_log_get_level();
    o->hugepages = zero__mem_hugepages();
    o->impl = ZERO_IMPL_AUTO;
    const char *v = getenv("ZERO_IMPL");
    if (v && !strcmp(v, "scalar")) o->impl = ZERO_IMPL_SCALAR;
    else if (v && !strcmp(v, "avx2")) o->impl = ZERO_IMPL_AVX2;
    else if (v && !strcmp(v, "avx512")) o->impl = ZERO_IMPL_AVX512;
}

zero_status zero_options_set(const zero_options *o, zero_error *err) {
    if (!o) {
        if (err) ZERO__ERR(err, "zero_options_set: options are NULL");
        return ZERO_ERR_INVALID_ARG;
    }
    if (o->log_level < ZERO_LOG_ERROR || o->log_level > ZERO_LOG_DEBUG) {
        if (err) ZERO__ERR(err, "zero_options.log_level %d: expected ZERO_LOG_ERROR (0) .. ZERO_LOG_DEBUG (3)", o->log_level);
        return ZERO_ERR_INVALID_ARG;
    }
    if (o->hugepages != 0 && o->hugepages != 1) {
        if (err) ZERO__ERR(err, "zero_options.hugepages %d: expected 0 (off) or 1 (on)", o->hugepages);
        return ZERO_ERR_INVALID_ARG;
    }
    if (o->impl < ZERO_IMPL_AUTO || o->impl > ZERO_IMPL_AVX512 || !zero_impl_available((zero_impl)o->impl)) {
        if (err) ZERO__ERR(err, "zero_options.impl %d: expected auto, scalar, or an implementation this CPU has", o->impl);
        return ZERO_ERR_INVALID_ARG;
    }
    if (zero__mem_set_hugepages(o->hugepages) != 0) {
        if (err) ZERO__ERR(err, "zero_options.hugepages %d: the library already allocated large blocks with %d: set it first",
                           o->hugepages, 1 - o->hugepages);
        return ZERO_ERR_STATE;
    }
    zero_log_set_level((zero_log_level)o->log_level);
    zero__impl_force((zero_impl)o->impl);
    return ZERO_OK;
}
