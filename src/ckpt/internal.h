/* Private helpers of the ckpt layer: the two CRC32C bodies (compared by the tests), a growing
 * string buffer for JSON text, and the manifest as a cJSON tree for the engine. */
#ifndef ZERO_CKPT_INTERNAL_H
#define ZERO_CKPT_INTERNAL_H

#include "common/internal.h"
#include "zero/ckpt.h"

#include <cjson/cJSON.h>

/* crc32c.c: the table-driven reference and the SSE4.2 body (the reference where the CPU lacks it). */
uint32_t zero__crc32c_scalar(uint32_t crc, const void *data, size_t n);
uint32_t zero__crc32c_hw(uint32_t crc, const void *data, size_t n);
int zero__crc32c_hw_available(void);

/* A growing, NUL-terminated text buffer (zero_mem_alloc'd). On allocation failure `failed` is
 * set and later appends do nothing, so callers check once at the end. */
typedef struct zero__sbuf {
    char *p;
    size_t len, cap;
    int failed;
} zero__sbuf;

void zero__sbuf_put(zero__sbuf *b, const char *s, size_t n);
void zero__sbuf_printf(zero__sbuf *b, const char *fmt, ...) ZERO__PRINTF(2, 3);
/* Appends s as a JSON string literal (quotes and escapes). */
void zero__sbuf_json_string(zero__sbuf *b, const char *s);
void zero__sbuf_free(zero__sbuf *b);

/* A zero_mem_alloc'd copy of s (NULL on failure). */
char *zero__strdup(const char *s);

/* The opened checkpoint's manifest as parsed (owned by c; do not free). For the engine's load. */
const cJSON *zero__ckpt_manifest_json(const zero_ckpt *c);

#endif
