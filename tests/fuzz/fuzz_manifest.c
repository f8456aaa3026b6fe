/* libFuzzer target: a checkpoint's manifest.json as the ckpt layer parses and checks it
 * (zero__manifest_parse); any input must give a status and a message, never a crash. */
#include "ckpt/internal.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstring(data, size);
    zero__manifest m;
    memset(&m, 0, sizeof m);
    char err[512];
    (void)zero__manifest_parse(text, size, "manifest.json", &m, err, sizeof err);
    zero__manifest_free(&m); /* after a failed parse too: it must leave m freeable */
    free(text);
    return 0;
}
