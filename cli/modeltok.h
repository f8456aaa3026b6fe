/* cli/modeltok.h — a model's tokenizer for `zero train` and `zero sample`: the tokenizer.json of
 * the directory the model came from, loaded and checked against the model's vocabulary. */
#ifndef ZERO_CLI_MODELTOK_H
#define ZERO_CLI_MODELTOK_H

#include <stddef.h>

#include "weights.h"
#include "zero/tokenizer.h"

/* Where m's tokenizer is: its source directory (a Hugging Face model directory, or the one the run
 * of a checkpoint came from) when it holds tokenizer.json. Returns 1 and writes the directory into
 * out; 0 when the model has no source directory or that directory has no tokenizer.json; -1 when
 * the source directory is gone (out: the recorded path). */
int cli_model_tokenizer_dir(const cli_model *m, char *out, size_t cap);
/* Loads the tokenizer at path (a directory with tokenizer.json, or the file) and checks that its
 * ids fit the model's vocabulary (vocab_size >= the tokenizer's largest id + 1). On failure prints
 * one error line (flag: what the message starts with) and returns CLI_RUNTIME. */
int cli_tokenizer_load(const char *path, const dec_config *cfg, const char *flag, zero_tokenizer **out);

#endif
