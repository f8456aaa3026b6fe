/* models/decoder/data.h — training data for the decoder: a byte-level tokenizer over text
 * files, pre-tokenized uint16 token files, the train/validation split, and the sampling rule that
 * makes a step the same computation for any number of ranks.
 *
 * Sources (gpt2_data_open):
 *  - a text file: one token per byte (vocabulary 256). A NUL byte means "binary": rejected.
 *  - a directory: its regular text files (not symlinks, not hidden, not *.dat: the fortune
 *    index files) in byte order of their names, concatenated. NULL opens GPT2_DATA_DEFAULT_DIR,
 *    the corpus of Debian's `fortunes` package.
 *  - a token file, recognized by its magic. Byte layout (little-endian):
 *      offset  0  char[8]  magic "ZEROTOK1"
 *      offset  8  uint32   version (1)
 *      offset 12  uint32   vocab: every token is < vocab (1 .. 65536)
 *      offset 16  uint64   count: number of tokens
 *      offset 24  uint64   reserved (0)
 *      offset 32  uint16   tokens[count]   (the file is exactly 32 + 2 count bytes)
 *
 * Split: the last floor(val_fraction * n) tokens are the validation split, the rest train.
 *
 * Sampling (docs/MODEL.md): a sequence is T+1 consecutive tokens (inputs = the first T, targets
 * = the last T). Step s of a run with seed `seed` uses G = world * B * K sequences, numbered
 * j = 0 .. G-1; rank r's micro-batch k holds j = (r*K + k)*B .. +B-1.
 *  - train: sequence j starts at splitmix(seed, s, j) mod (n_train - T) (uniform, with
 *    replacement), so the G sequences of a step depend on (seed, s, j) only: runs with 1 and 4
 *    ranks and the same G see the same global batch.
 *  - val: non-overlapping windows in order: sequence j of validation batch s is window
 *    (s*G + j) mod W, tokens [w*T, w*T + T] of the split, W = (n_val - 1) / T.
 */
#ifndef ZERO_MODELS_GPT2_DATA_H
#define ZERO_MODELS_GPT2_DATA_H

#include <stdint.h>

#include "zero/zero.h"

#ifdef __cplusplus
extern "C" {
#endif

#define GPT2_DATA_DEFAULT_DIR "/usr/share/games/fortunes"
#define GPT2_TOKEN_MAGIC "ZEROTOK1"
#define GPT2_DATA_VAL_FRACTION 0.05

typedef enum gpt2_split { GPT2_SPLIT_TRAIN = 0, GPT2_SPLIT_VAL = 1 } gpt2_split;

typedef struct gpt2_data gpt2_data;

/* Opens path (see above; NULL: the fortunes corpus) and splits off the last val_fraction
 * (0 <= val_fraction < 1) as validation. Errors (err says which file and why): missing or
 * unreadable (ZERO_ERR_IO), empty, binary, or a corrupt token file (ZERO_ERR_FORMAT). */
zero_status gpt2_data_open(gpt2_data **out, const char *path, double val_fraction, zero_error *err);
void gpt2_data_free(gpt2_data *d); /* NULL is a no-op */

int gpt2_data_vocab(const gpt2_data *d);      /* 256 for text; the header's for token files */
int gpt2_data_is_text(const gpt2_data *d);
uint64_t gpt2_data_num_tokens(const gpt2_data *d, gpt2_split split);
/* The tokens of a split (read-only; num_tokens of them). */
const uint16_t *gpt2_data_tokens(const gpt2_data *d, gpt2_split split);
/* A short description: "text, 2 files, 2541234 tokens (train 2414173, val 127061)". */
const char *gpt2_data_describe(const gpt2_data *d);

/* Checks that sequences of T tokens fit (each split needs at least T+1 tokens; the validation
 * split only when it is not empty) and that the data's vocabulary fits the model's. */
zero_status gpt2_data_check(const gpt2_data *d, int T, int model_vocab, zero_error *err);

/* Sequences first .. first+n-1 (of the G of a batch: first + n <= G) of batch `step` of the
 * split (rule above): inputs and targets get n*T tokens each, row-major. */
zero_status gpt2_data_batch(const gpt2_data *d, gpt2_split split, uint64_t seed, int64_t step,
                            int64_t G, int64_t first, int n, int T, int32_t *inputs,
                            int32_t *targets, zero_error *err);
/* First sequence of rank r's micro-batch k with micro-batch B and accumulation K. */
static inline int64_t gpt2_data_first(int rank, int B, int K, int k) {
    return ((int64_t)rank * K + k) * B;
}
/* Validation batches of G sequences before the windows repeat: max(1, W / G). */
int64_t gpt2_data_val_batches(const gpt2_data *d, int64_t G, int T);

/* Writes a token file (layout above). Every token must be < vocab. */
zero_status gpt2_data_write_tokens(const char *path, const uint16_t *tokens, uint64_t count, int vocab,
                                   zero_error *err);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_GPT2_DATA_H */
