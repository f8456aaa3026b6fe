/* Small text helpers of the ckpt layer: a growing string buffer with a
 * JSON string escaper, used to write safetensors headers and manifests. */
#include "ckpt/internal.h"

#include <stdarg.h>
#include <string.h>

void zero__sbuf_put(zero__sbuf *b, const char *s, size_t n) {
    if (b->failed) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = zero_mem_alloc(NULL, ZERO_MEM_BUFFERS, cap);
        if (!p) {
            b->failed = 1;
            return;
        }
        if (b->p) memcpy(p, b->p, b->len);
        zero_mem_free(NULL, b->p);
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void zero__sbuf_printf(zero__sbuf *b, const char *fmt, ...) {
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= sizeof tmp) {
        b->failed = 1;
        return;
    }
    zero__sbuf_put(b, tmp, (size_t)n);
}

void zero__sbuf_json_string(zero__sbuf *b, const char *s) {
    zero__sbuf_put(b, "\"", 1);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') {
            char e[2] = {'\\', (char)*p};
            zero__sbuf_put(b, e, 2);
        } else if (*p < 0x20) {
            zero__sbuf_printf(b, "\\u%04x", *p);
        } else {
            zero__sbuf_put(b, (const char *)p, 1);
        }
    }
    zero__sbuf_put(b, "\"", 1);
}

void zero__sbuf_free(zero__sbuf *b) {
    zero_mem_free(NULL, b->p);
    memset(b, 0, sizeof *b);
}
