/* libFuzzer target: a Hugging Face config.json as `--init-from DIR` reads it (dec_config_from_json),
 * then written back (dec_config_to_json) and sized; any input must give a status, never a crash. */
#include "decoder/decoder.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstring(data, size);
    dec_config cfg;
    char *notes = NULL;
    zero_error err;
    if (dec_config_from_json(&cfg, text, &notes, &err) == ZERO_OK) {
        (void)dec_num_params(&cfg);
        (void)dec_activation_bytes(&cfg, 1, 8, 1);
        (void)dec_config_check_seq(&cfg, 8, &err);
        char *out = dec_config_to_json(&cfg, text, "bfloat16");
        dec_config back;
        if (out && dec_config_from_json(&back, out, NULL, &err) != ZERO_OK) abort(); /* what zero writes, it reads */
        free(out);
    }
    free(notes);
    free(text);
    return 0;
}
