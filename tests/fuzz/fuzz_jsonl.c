/* libFuzzer target: a JSONL data file as `zero tokenize` and `zero train` read it
 * (zero_data_add_file: {"text"}, {"prompt","completion"}, {"messages"} in the chat formats,
 * ShareGPT's {"conversations"}, Alpaca's {"instruction", "output"}), through one of three real
 * tokenizers, packed or not, strict or skipping bad lines; then the same file read as a *.json
 * file is (one JSON array of examples when it starts with '['), with a small element bound; then
 * the same bytes as a text document. Any input must give a status, never a crash or a hang. */
#include "fuzz.h"
#include "zero/data.h"
#include "zero/tokenizer.h"

static zero_status add_item(void *ctx, const char *text, size_t len, uint64_t lineno) {
    (void)lineno;
    return text ? zero_data_add_jsonl_line(ctx, text, len, "fuzz.json") : ZERO_OK; /* NULL: past the bound */
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static zero_tokenizer *tok[3];
    static const char *const dirs[3] = {"tokenizer/qwen2/tokenizer.json", "tokenizer/llama3/tokenizer.json",
                                        "tokenizer/mistral/tokenizer.json"};
    zero_error err;
    for (int k = 0; k < 3; k++) {
        if (tok[k]) continue;
        char path[1024];
        snprintf(path, sizeof path, "%s/%s", ZERO_FUZZ_DATA, dirs[k]);
        if (zero_tokenizer_load(&tok[k], path, &err) != ZERO_OK) abort();
    }
    /* the setting from the input's size, so that every seed stays a real file */
    zero_data_opts o;
    zero_data_opts_default(&o);
    o.skip_bad = (int)(size / 3 % 2);
    o.seq = size / 6 % 2 ? 24 : 0;
    zero_data *d = NULL;
    if (zero_data_create(&d, tok[size % 3], &o, &err) != ZERO_OK) abort();
    if (zero_data_add_file(d, fuzz_file_suffix(data, size, ".jsonl")) == ZERO_OK && zero_data_finish(d) == ZERO_OK) {
        const uint8_t *mask = zero_data_mask(d);
        const uint64_t n = zero_data_count(d);
        const int32_t *ids = zero_data_tokens(d);
        for (uint64_t i = 0; i < n; i++)
            if (ids[i] < 0 || ids[i] >= zero_tokenizer_vocab_size(tok[size % 3]) || (mask && mask[i] > 1)) abort();
    }
    zero_data_free(d);
    o.skip_bad = 1;
    if (zero_data_create(&d, tok[(size + 2) % 3], &o, &err) != ZERO_OK) abort();
    (void)zero_data_foreach_example(fuzz_file_suffix(data, size, ".jsonl"), 1, 4096, add_item, d, NULL, &err);
    (void)zero_data_finish(d);
    zero_data_free(d);
    if (zero_data_create(&d, tok[(size + 1) % 3], &o, &err) != ZERO_OK) abort();
    (void)zero_data_add_text(d, (const char *)data, size);
    zero_data_free(d);
    return 0;
}
