/* libFuzzer target: a PEFT adapter_config.json as `zero train --lora-from DIR` reads it
 * (dec_peft_read_config, against the base's config.json: GPT-2, Llama, Qwen3 by the input's size),
 * then written back (dec_peft_config_json); any input must give a status, never a crash. */
#include "decoder/decoder.h"
#include "decoder/peft.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static dec_config cfg[4];
    static int ready;
    static const char *const bases[4] = {"gpt2", "llama3_bias", "llama_gqa4", "qwen3"};
    zero_error err;
    for (int k = 0; k < 4 && !ready; k++) {
        char rel[256];
        snprintf(rel, sizeof rel, "decoder/%s/config.json", bases[k]);
        char *text = fuzz_fixture(rel, NULL);
        if (dec_config_from_json(&cfg[k], text, NULL, &err) != ZERO_OK) abort();
        free(text);
    }
    ready = 1;
    const char *dir = fuzz_dir();
    char path[256];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    fuzz_write(path, data, size);
    const dec_config *c = &cfg[size % 4];
    dec_lora l;
    if (dec_peft_read_config(dir, c, &l, &err) == ZERO_OK) {
        char *out = dec_peft_config_json(c, &l, NULL);
        free(out);
    }
    unlink(path);
    return 0;
}
