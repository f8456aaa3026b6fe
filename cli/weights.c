/* Loading model weights from files into an engine (`--init-from`). */
#include "weights.h"

#include "cli.h"

int cli_init_from(zero_engine *e, const gpt2_config *m, const char *path) {
    (void)e;
    (void)m;
    return cli_error(CLI_RUNTIME, "--init-from %s: loading weights is not supported yet", path);
}
