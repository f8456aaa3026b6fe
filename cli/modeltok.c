/* A model's tokenizer for `zero train` and `zero sample`: found in the directory the model came
 * from (a model directory, or the source a checkpoint records), loaded, checked against the model. */
#include "modeltok.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"

int cli_model_tokenizer_dir(const cli_model *m, char *out, size_t cap) {
    if (!m->source || !m->source[0]) return 0;
    snprintf(out, cap, "%s", m->source);
    struct stat sb;
    if (stat(m->source, &sb) != 0 || !S_ISDIR(sb.st_mode)) return -1;
    char p[4200];
    snprintf(p, sizeof p, "%s/tokenizer.json", m->source);
    return access(p, F_OK) == 0 ? 1 : 0;
}

int cli_tokenizer_load(const char *path, const dec_config *cfg, const char *flag, zero_tokenizer **out) {
    zero_error err = {{0}};
    *out = NULL;
    if (zero_tokenizer_load(out, path, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "%s: %s", flag, err.msg);
    const int32_t n = zero_tokenizer_vocab_size(*out);
    if (n > cfg->vocab) {
        zero_tokenizer_free(*out);
        *out = NULL;
        return cli_error(CLI_RUNTIME,
                         "%s: the tokenizer in %s has ids up to %d (%d tokens): more than the model's vocabulary of %d "
                         "(config.json vocab_size): expected a tokenizer of this model",
                         flag, path, n - 1, n, cfg->vocab);
    }
    return CLI_OK;
}
