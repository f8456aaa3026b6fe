/* libFuzzer target: a training data file as `zero train --data` reads it (dec_data_open): a token
 * file (ZEROTOK1/2), text whose bytes are tokens, or — an input starting with '{' — JSONL packed
 * through a real tokenizer with its loss masks; the checks against a model and a batch of each
 * split. Any input must give a status, never a crash. */
#include "fuzz.h"
#include "decoder/data.h"
#include "zero/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static zero_tokenizer *tok;
    zero_error err;
    if (!tok) {
        char path[1024];
        snprintf(path, sizeof path, "%s/tokenizer/qwen2/tokenizer.json", ZERO_FUZZ_DATA);
        if (zero_tokenizer_load(&tok, path, &err) != ZERO_OK) abort();
    }
    const int jsonl = size > 0 && data[0] == '{';
    dec_data_opts o;
    dec_data_opts_default(&o);
    o.path = jsonl ? fuzz_file_suffix(data, size, ".jsonl") : fuzz_file(data, size);
    const int T = 4, B = 2;
    if (jsonl) {
        o.tok = tok;
        o.seq = T;
        o.skip_bad = (int)(size % 2);
    }
    dec_data *d = NULL;
    if (dec_data_open(&d, &o, &err) == ZERO_OK) {
        const int64_t V = jsonl ? zero_tokenizer_vocab_size(tok) : 65536;
        if (dec_data_check(d, T, V, &err) == ZERO_OK) {
            int32_t in[B * T], tg[B * T];
            for (int s = 0; s < 2; s++) {
                if (dec_data_batch(d, s ? DEC_SPLIT_VAL : DEC_SPLIT_TRAIN, 1, 0, B, 0, B, T, in, tg, NULL, &err) !=
                    ZERO_OK)
                    continue;
                for (int i = 0; i < B * T; i++)
                    if (in[i] < 0 || in[i] >= V || tg[i] < -1 || tg[i] >= V) abort();
            }
        }
        dec_data_free(d);
    }
    return 0;
}
