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
