/* models/decoder/data.h — what `zero train --data` reads, as sequences for the decoder: text as
 * bytes or through the model's tokenizer, JSONL examples with loss masks packed into rows, token
 * files (ZEROTOK1/ZEROTOK2 through zero_tokfile_*), the train/validation split, masked targets
 * (-1), and the sampling rule that makes a step the same computation for any number of ranks.
 *
 * Sources (dec_data_open; docs/MODEL.md, Data):
 *  - a token file, recognized by its magic (ZEROTOK1 or ZEROTOK2, layouts in zero/data.h): read
 *    through zero_tokfile_read a sequence at a time (never loaded whole), uint32 ids, its loss
 *    mask when it has one; a file of packed rows (row R > 0) gives its rows as the sequences.
 *  - with a tokenizer (the model directory's tokenizer.json): a *.jsonl / *.json file, or a
 *    directory holding one, is read as JSONL examples by zero_data and packed into rows of T+1
 *    tokens (masks: docs/TOKENIZER.md); any other text file, or a directory of them, is one stream
 *    of documents (BOS/EOS as the tokenizer adds them).
 *  - without a tokenizer: a text file, or a directory's regular text files (not symlinks, not
 *    hidden, not *.dat: the fortune index files) in byte order of their names, concatenated; one
 *    token per byte (vocabulary 256); a NUL byte means "binary": refused. path NULL opens
 *    DEC_DATA_DEFAULT_DIR, the corpus of Debian's `fortunes` package.
 *
 * Masks: target t of a sequence starting at token s is token s+t+1; it counts in the loss when
 * mask[s+t+1] is 1, else it is -1 (ignored by the decoder's loss). Data without a mask counts
 * every target. With documents (docs of dec_data_batch), a target that starts an example is -1
 * too.
 *
 * Split: a stream's last floor(val_fraction * n) tokens are the validation split; packed data's
 * last floor(val_fraction * rows) rows. val_fraction 1 opens a separate validation file (zero
 * train --val-data): all of it is the validation split, and it has no train split.
 *
 * Sampling: step s of a run with seed `seed` uses G = world * B * K sequences, numbered
 * j = 0 .. G-1; rank r's micro-batch k holds j = (r*K + k)*B .. +B-1 (dec_data_first).
 *  - stream, train: sequence j starts at mulhi(mix(mix(mix(seed ^ 0x64617461) ^ s) + j), n_train - T)
 *    (uniform, with replacement);
 *  - packed, train: the train rows in epochs: sequence number g = s*G + j is position g mod N of
 *    the permutation of epoch g / N (N train rows; a Fisher-Yates shuffle seeded by seed and the
 *    epoch), so every row is seen once per epoch;
 *  - validation: sequence j of validation batch s is window (s*G + j) mod W of the split: tokens
 *    [w*T, w*T + T] of a stream (W = (n_val - 1) / T), or its row w (W = val rows).
 * Every sequence depends on (seed, s, j) only: runs with 1 and 4 ranks and the same G see the
 * same global batch, and with the loss's denominator the global count of counted targets
 * (zero train), compute the same step.
 */
#ifndef ZERO_MODELS_DECODER_DATA_H
#define ZERO_MODELS_DECODER_DATA_H

#include <stdint.h>

#include "zero/data.h"
#include "zero/tokenizer.h"
#include "zero/zero.h"

#ifdef __cplusplus
extern "C" {
#endif

#define DEC_DATA_DEFAULT_DIR "/usr/share/games/fortunes"
#define DEC_DATA_VAL_FRACTION 0.05

typedef enum dec_split { DEC_SPLIT_TRAIN = 0, DEC_SPLIT_VAL = 1 } dec_split;

typedef enum dec_data_kind {
    DEC_DATA_BYTES = 0, /* text, one token per byte */
    DEC_DATA_TOKENIZED, /* text or JSONL through a tokenizer (in memory) */
    DEC_DATA_TOKFILE,   /* a token file (read on demand) */
} dec_data_kind;

typedef struct dec_data_opts {
    const char *path;      /* a file or directory; NULL: DEC_DATA_DEFAULT_DIR */
    zero_tokenizer *tok;   /* NULL: text is bytes; else text and JSONL are tokenized with it (not owned,
                              used only inside dec_data_open) */
    int seq;               /* T: JSONL examples are packed into rows of T + 1 tokens (needed with tok) */
    zero_chat_format chat; /* the format of {"messages"} examples (NONE: from the tokenizer) */
    int skip_bad;          /* skip bad JSONL examples and count them, instead of failing at the first */
    double val_fraction;   /* in [0, 1]: the validation split (DEC_DATA_VAL_FRACTION; 1: all, no train split) */
    int pairs;             /* 1: preference pairs (a JSONL of {"prompt", "chosen", "rejected"}, below) */
} dec_data_opts;
void dec_data_opts_default(dec_data_opts *o);

typedef struct dec_data dec_data;

/* Opens o->path (see above). Errors (err says which file and why): missing or unreadable
 * (ZERO_ERR_IO), empty, binary, a corrupt token file (ZERO_ERR_FORMAT), a bad JSONL example as
 * "FILE:LINE: reason" (ZERO_ERR_FORMAT; skipped with skip_bad), a tokenizer without seq for
 * JSONL (ZERO_ERR_INVALID_ARG). */
zero_status dec_data_open(dec_data **out, const dec_data_opts *o, zero_error *err);
void dec_data_free(dec_data *d); /* NULL is a no-op */
/* 1 when path is a file that starts with a token file's magic (ZEROTOK1 or ZEROTOK2): what
 * dec_data_open reads without a tokenizer. */
int dec_data_is_token_file(const char *path);

dec_data_kind dec_data_kind_of(const dec_data *d);
/* Every token is below it: 256 for bytes, the tokenizer's vocabulary size, a token file's header. */
int64_t dec_data_vocab(const dec_data *d);
/* 0: a stream of tokens; R: packed rows of R tokens, each a sequence (T = R - 1). */
uint32_t dec_data_row(const dec_data *d);
/* 1 when some target may not count (the data carries a loss mask). */
int dec_data_has_mask(const dec_data *d);
/* 1 for preference pairs: each pair is two rows of T + 1 tokens, the prompt then the chosen (row
 * 2p) or the rejected (2p + 1) completion (TRL's standard form: strings, or lists of messages
 * rendered through the chat format), loss on the completions only, padded with EOS without loss;
 * an empty or identical completion, a missing field or a pair longer than a row is a bad example
 * naming its line. Splits hold whole pairs; batch sequences 2i and 2i + 1 are one pair, sampled
 * in epochs over the pairs. */
int dec_data_pairs(const dec_data *d);
/* Preference pairs: how many (both splits), the pair of sequence j of batch `step` (the rule of
 * dec_data_batch: its index over all pairs), and pair p's chosen and rejected sequences as two
 * sequences of inputs and targets (2T values each). */
uint64_t dec_data_num_pairs(const dec_data *d);
zero_status dec_data_pair_of(dec_data *d, dec_split split, uint64_t seed, int64_t step, int64_t G, int64_t j,
                             uint64_t *pair, zero_error *err);
zero_status dec_data_pair_rows(dec_data *d, uint64_t pair, int T, int32_t *inputs, int32_t *targets, zero_error *err);
/* 1 when the data records where each example starts (through a tokenizer; a token file written
 * with its starts): what document masking needs (dec_data_batch's docs). */
int dec_data_has_docs(const dec_data *d);
uint64_t dec_data_num_tokens(const dec_data *d, dec_split split);
/* Packed data: the rows of a split (0 for a stream). */
uint64_t dec_data_num_rows(const dec_data *d, dec_split split);
/* Bad JSONL examples skipped (skip_bad) and the first one's "FILE:LINE: reason". */
uint64_t dec_data_skipped(const dec_data *d, const char **first);
/* A short description: "text, 2 files, 2541234 tokens (train 2414173, val 127061)". */
const char *dec_data_describe(const dec_data *d);

/* Checks that sequences of T tokens fit (a stream's non-empty splits need T+1 tokens each; packed
 * rows must be T+1 tokens long and leave at least one train row, unless the data is validation
 * only) and that the data's vocabulary fits the model's. */
zero_status dec_data_check(const dec_data *d, int T, int64_t model_vocab, zero_error *err);

/* Sequences first .. first+n-1 (of the G of a batch: first + n <= G) of batch `step` of the
 * split (rule above): inputs and targets get n*T values each, row-major; a target whose mask is
 * 0 is -1. docs (NULL, or n*T values; needs dec_data_has_docs): each input's document, as
 * dec_set_docs takes it (the position of its example's first token in the sequence; a sequence
 * that starts inside an example starts a document), and a target that is an example's first
 * token is -1 (no example predicts the next one's start). Not const: token files are read and
 * the epoch's permutation is kept. */
zero_status dec_data_batch(dec_data *d, dec_split split, uint64_t seed, int64_t step, int64_t G, int64_t first,
                           int n, int T, int32_t *inputs, int32_t *targets, int32_t *docs, zero_error *err);
/* First sequence of rank r's micro-batch k with micro-batch B and accumulation K. */
static inline int64_t dec_data_first(int rank, int B, int K, int k) { return ((int64_t)rank * K + k) * B; }
/* Validation batches of G sequences before the windows repeat: max(1, W / G); 0 when the
 * validation split holds no sequence of T tokens. */
int64_t dec_data_val_batches(const dec_data *d, int64_t G, int T);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_DECODER_DATA_H */
