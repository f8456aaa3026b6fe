/* cli/weights.h — model weights from files: `--init-from` (a consolidated safetensors file with
 * Hugging Face GPT-2 names, or a checkpoint) into an engine, for `zero train` and `zero sample`. */
#ifndef ZERO_CLI_WEIGHTS_H
#define ZERO_CLI_WEIGHTS_H

#include "gpt2/gpt2.h"
#include "zero/zero.h"

/* Sets every parameter of the model registered on e (after finalize) from `path`. Every rank
 * calls it. Returns an exit status (the error already printed). */
int cli_init_from(zero_engine *e, const gpt2_config *m, const char *path);

#endif
