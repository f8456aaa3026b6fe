/* Private helpers of the ckpt layer: the two CRC32C bodies (compared by the tests), text helpers,
 * the safetensors dtype table, the manifest, and the manifest as a cJSON tree for the engine. */
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

/* st_dtype.c: a safetensors dtype name's canonical spelling, element size and zero dtype
 * (ZERO_DTYPE_COUNT when there is none); 0 when the name is not a dtype of the format. */
int zero__st_dtype_lookup(const char *name, const char **canonical, size_t *size, zero_dtype *z);
/* Bytes of a tensor of that shape (and *numel, when not NULL); -1 for a negative dimension or a
 * size past 2^62. */
int64_t zero__st_shape_bytes(const int64_t *shape, int ndim, size_t elem, uint64_t *numel);

/* The writer's staging buffer and the reader's verification chunk. */
#define ZERO__ST_STAGE_BYTES (1u << 20)
/* Metadata key prefix of the per-tensor checksums: "crc32c.NAME" = 8 lowercase hex digits. */
#define ZERO__ST_CRC_PREFIX "crc32c."

/* manifest.c: manifest.json, as the ckpt layer sees it. The engine's own keys ride along. */
typedef struct zero__mtensor {
    char *name;
    zero_dtype dtype;
    uint64_t numel, align;
} zero__mtensor;

typedef struct zero__mfile {
    char *name;     /* "rank_00000.safetensors" */
    uint64_t bytes;
} zero__mfile;

typedef struct zero__manifest {
    int version;
    int64_t step;
    int world;
    char save_id[ZERO_CKPT_ID_CHARS + 1]; /* "" in a format_version 1 manifest (no ids then) */
    zero__mtensor *t;
    int nt;
    zero__mfile *f; /* world entries, rank order */
    cJSON *root;    /* the whole document */
    /* the engine's part ("writer": "zero"), validated; strings point into root */
    int has_engine;
    zero_manifest eng;
    zero_manifest_unit *units;
    zero_manifest_param *params;
    char *user_text; /* eng.user_json (cJSON's allocator) */
} zero__manifest;

/* The manifest's checksum: its last key, the CRC32C (8 lowercase hex digits) of every byte of
 * the text before that key. */
#define ZERO__MANIFEST_CRC_KEY "manifest_crc32c"

/* Keys the ckpt layer writes; the engine's JSON must not contain them. NULL-terminated. */
extern const char *const zero__manifest_reserved[];

/* The manifest text: the engine's object (NULL or "" = {}) with the layer's keys first and the
 * checksum last. On error returns a status and writes the message (naming the offending key)
 * into err. _engine: from the typed manifest, validated first (with the tensors declared). */
/* The layer's part of a manifest: what the commit knows of the save. */
typedef struct zero__mhead {
    int64_t step;
    int world;
    const char *save_id; /* ZERO_CKPT_ID_CHARS hex digits: every rank file carries it too */
    const zero__mtensor *t;
    int nt;
    const zero__mfile *f;
} zero__mhead;
zero_status zero__manifest_build(const char *engine_json, const zero__mhead *h, zero__sbuf *out, char *err, size_t cap);
zero_status zero__manifest_build_engine(const zero_manifest *m, const zero__mhead *h, zero__sbuf *out, char *err,
                                        size_t cap);
/* JSON values a safetensors header may hold (~8 per tensor: 250,000 tensors; the format itself
 * caps the header at ZERO_ST_MAX_HEADER bytes). */
#define ZERO__ST_MAX_VALUES (UINT64_C(1) << 21)
/* What a manifest.json may be (docs/SECURITY.md): a checkpoint can be downloaded too. A manifest
 * takes ~150 bytes and ~10 JSON values per tensor: these admit 200,000 tensors. */
#define ZERO__MANIFEST_MAX_BYTES (UINT64_C(256) << 20)
#define ZERO__MANIFEST_MAX_VALUES (UINT64_C(1) << 21)
/* Parses and checks text of len bytes (from `path`, for messages): strict JSON, format and
 * version, the checksum, the layer's keys, and the engine's part when there is one.
 * ZERO_ERR_FORMAT naming the field. */
zero_status zero__manifest_parse(const char *text, size_t len, const char *path, zero__manifest *m, char *err, size_t cap);
void zero__manifest_free(zero__manifest *m);
/* The value at a dotted path of the "user" object, or NULL. */
const cJSON *zero__manifest_user_at(const zero__manifest *m, const char *path);

/* "rank_%05d.safetensors" */
void zero__ckpt_rank_file(char *dst, size_t cap, int rank);

/* The names zero gives the entries of a save directory and of a step directory. */
#define ZERO__CKPT_COMMIT "COMMIT"
#define ZERO__CKPT_MANIFEST "manifest.json"
#define ZERO__CKPT_LATEST "latest"
#define ZERO__CKPT_LOCK "lock"
/* 1 when name is a step directory's: "step_" then 8 to 12 digits (*step), then nothing
 * (ZERO__STEP_EXACT), ".tmp" (a staging directory) or ".N", N in 1..999 (a later save of a step). */
enum { ZERO__STEP_EXACT = 0, ZERO__STEP_STAGING = 1, ZERO__STEP_NUMBERED = 2 };
int zero__ckpt_step_name(const char *name, int64_t *step, int *suffix);
/* 1 when id is ZERO_CKPT_ID_CHARS lowercase hex digits. */
int zero__ckpt_id_ok(const char *id);

/* The opened checkpoint's manifest as parsed (owned by c; do not free). For the engine's load. */
const cJSON *zero__ckpt_manifest_json(const zero_ckpt *c);

#endif
