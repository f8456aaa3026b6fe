/* zero/gguf.h — GGUF (version 3), the file llama.cpp, Ollama and LM Studio read: a streaming writer
 * of its metadata and tensors, and the Q8_0 block format.
 *
 *   zero_gguf_writer *w;  zero_gguf_writer_create(&w, NULL, "model.gguf", &err);
 *   zero_gguf_set_string(w, "general.architecture", "llama");  ...        // metadata first
 *   zero_gguf_add_tensor(w, "token_embd.weight", ZERO_GGUF_F16, shape, 2);  // then every tensor
 *   zero_gguf_write(w, bytes, n); ...                                       // then the data, in order
 *   zero_gguf_finish(w);  zero_gguf_writer_free(w);
 *
 * Layout (little-endian; docs/CHECKPOINT.md, "GGUF"): u32 magic "GGUF", u32 version 3, u64 tensor
 * count, u64 metadata count; each metadata pair: string key, u32 value type, value (a string is u64
 * length + bytes; an array is u32 item type, u64 count, items); each tensor: string name, u32 number
 * of dimensions, u64 dimensions innermost first (a (rows, cols) matrix is written [cols, rows]), u32
 * type, u64 offset of its data from the start of the data section; then zero padding to the
 * alignment (general.alignment, 32) and the tensors' data, each starting at a multiple of it.
 */
#ifndef ZERO_GGUF_H
#define ZERO_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "zero/common.h"
#include "zero/io.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Tensor types (ggml's numbering). Q8_0: blocks of 32 values, an fp16 scale d = max|x| / 127 and 32
 * int8 codes round(x / d) (34 bytes a block); the innermost dimension must be a multiple of 32. */
typedef enum zero_gguf_type {
    ZERO_GGUF_F32 = 0,
    ZERO_GGUF_F16 = 1,
    ZERO_GGUF_Q8_0 = 8,
    ZERO_GGUF_BF16 = 30,
} zero_gguf_type;

#define ZERO_GGUF_ALIGNMENT  32
#define ZERO_GGUF_Q8_0_BLOCK 32
#define ZERO_GGUF_MAX_DIMS   4

/* "F32", "F16", "Q8_0", "BF16"; NULL for another value. */
const char *zero_gguf_type_name(zero_gguf_type t);
/* Bytes of n values of type t (n a multiple of 32 for Q8_0); 0 for an unknown type. */
uint64_t zero_gguf_type_bytes(zero_gguf_type t, uint64_t n);
/* Q8_0 of x[0, n) into out (n a multiple of 32; n/32 blocks of 34 bytes), as ggml's reference
 * quantizes: per block d = max|x| / 127, codes round(x * (1/d)) (0 for an all-zero block), d
 * stored as fp16. And back: each value d * code. */
void zero_gguf_q8_0_encode(const float *x, size_t n, void *out);
void zero_gguf_q8_0_decode(const void *in, size_t n, float *x);

typedef struct zero_gguf_writer zero_gguf_writer;

/* Starts PATH (written as PATH.tmp until finish; a link planted there is removed, never
 * followed). io: the backend (not owned); NULL uses zero_io_create_default. */
zero_status zero_gguf_writer_create(zero_gguf_writer **out, zero_io *io, const char *path, zero_error *err);
/* Metadata, before any tensor is declared; keys unique and not empty. */
zero_status zero_gguf_set_u32(zero_gguf_writer *w, const char *key, uint32_t v);
zero_status zero_gguf_set_i32(zero_gguf_writer *w, const char *key, int32_t v);
zero_status zero_gguf_set_f32(zero_gguf_writer *w, const char *key, float v);
zero_status zero_gguf_set_bool(zero_gguf_writer *w, const char *key, int v);
zero_status zero_gguf_set_string(zero_gguf_writer *w, const char *key, const char *v);
/* Arrays: n strings (each lens[i] bytes, or NUL-terminated when lens is NULL), n int32, n float32. */
zero_status zero_gguf_set_strings(zero_gguf_writer *w, const char *key, const char *const *v, const size_t *lens,
                                  uint64_t n);
zero_status zero_gguf_set_i32s(zero_gguf_writer *w, const char *key, const int32_t *v, uint64_t n);
zero_status zero_gguf_set_f32s(zero_gguf_writer *w, const char *key, const float *v, uint64_t n);
/* Declares the next tensor: shape outermost first, as PyTorch and safetensors give it (written
 * innermost first); ndim 1..4; names unique, not empty, below 64 bytes (ggml's limit). Declaring
 * ends the metadata; the data follows in declaration order. */
zero_status zero_gguf_add_tensor(zero_gguf_writer *w, const char *name, zero_gguf_type type, const int64_t *shape,
                                 int ndim);
/* Appends the next n bytes of tensor data (the declared tensors' encoded bytes back to back, in any
 * chunking; the writer adds the padding between them). The first write writes the header. */
zero_status zero_gguf_write(zero_gguf_writer *w, const void *data, size_t n);
/* Requires every declared byte written; fsyncs, renames PATH.tmp to PATH, fsyncs the directory.
 * After a failure the writer can only be freed. */
zero_status zero_gguf_finish(zero_gguf_writer *w);
void zero_gguf_writer_free(zero_gguf_writer *w); /* NULL is a no-op; an unfinished PATH.tmp is removed */
const char *zero_gguf_writer_last_error(const zero_gguf_writer *w);
/* Size of the whole file (known once the header is written). */
uint64_t zero_gguf_writer_file_size(const zero_gguf_writer *w);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_GGUF_H */
