/* libFuzzer target: a DeepSpeed-style JSON config (zero_config_load_json_string), then resolved
 * for 1 to 4 ranks and written back as JSON; any input must give a status, never a crash. */
#include "fuzz.h"
#include "zero/zero.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstring(data, size);
    zero_config cfg;
    zero_config_default(&cfg);
    zero_error err;
    if (zero_config_load_json_string(&cfg, text, &err) == ZERO_OK) {
        for (int world = 1; world <= 4; world++) {
            zero_config c = cfg;
            if (zero_config_resolve(&c, world, &err) == ZERO_OK) {
                char *json = zero_config_to_json(&c);
                free(json);
            }
        }
    }
    free(text);
    return 0;
}
