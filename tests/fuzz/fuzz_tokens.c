/* libFuzzer target: a training data file as `zero train --data` reads it (a ZEROTOK1 token file,
 * or text whose bytes are tokens): gpt2_data_open, the checks against a model, and a batch of
 * each split; any input must give a status, never a crash. */
#include "fuzz.h"
#include "decoder/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    gpt2_data *d = NULL;
    zero_error err;
    if (gpt2_data_open(&d, path, GPT2_DATA_VAL_FRACTION, &err) == ZERO_OK) {
        const int T = 4, B = 2;
        if (gpt2_data_check(d, T, 65536, &err) == ZERO_OK) {
            int32_t in[B * T], tg[B * T];
            for (int s = 0; s < 2; s++)
                (void)gpt2_data_batch(d, s ? GPT2_SPLIT_VAL : GPT2_SPLIT_TRAIN, 1, 0, B, 0, B, T, in, tg, &err);
        }
        gpt2_data_free(d);
    }
    return 0;
}
