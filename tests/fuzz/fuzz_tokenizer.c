/* libFuzzer target: a tokenizer.json (zero_tokenizer_load_json), then text with added tokens,
 * invalid UTF-8 and long runs encoded and decoded, and every id looked up; any input must give a
 * status, never a crash or a hang. */
#include "fuzz.h"
#include "zero/tokenizer.h"

static const char *const texts[] = {
    "Hello world! It's 2024, 12345 cafés.",
    "  leading spaces\tand\ttabs\n\nnewlines   ",
    "<|endoftext|><s></s><|im_start|>user\nhi<|im_end|>",
    "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e \xf0\x9f\x8e\x89 \xd9\x85\xd8\xb1\xd8\xad\xd8\xa8\xd8\xa7",
    "\xff\xfe bad \xc3\x28 utf8 \xe2\x82",
    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
    "",
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    zero_tokenizer *t = NULL;
    zero_error err;
    if (zero_tokenizer_load_json(&t, (const char *)data, size, NULL, &err) != ZERO_OK) return 0;
    zero_token_ids ids = {0};
    for (size_t k = 0; k < sizeof texts / sizeof texts[0]; k++) {
        for (unsigned flags = 0; flags < 4; flags++) {
            ids.n = 0;
            if (zero_tokenizer_encode(t, texts[k], strlen(texts[k]), flags, &ids) != ZERO_OK) continue;
            for (size_t i = 0; i < ids.n; i++)
                if (ids.ids[i] < 0 || ids.ids[i] >= zero_tokenizer_vocab_size(t)) abort(); /* ids name tokens */
            char *s = NULL;
            size_t n = 0;
            if (zero_tokenizer_decode(t, ids.ids, ids.n, flags & 1 ? ZERO_TOK_SKIP_SPECIAL : 0, &s, &n) == ZERO_OK)
                zero_tokenizer_free_text(s);
        }
    }
    const int32_t V = zero_tokenizer_vocab_size(t);
    for (int32_t id = -1; id <= V && id < 4096; id++) {
        size_t n;
        const char *tok = zero_tokenizer_token(t, id, &n);
        if (tok && zero_tokenizer_token_id(t, tok) < 0 && strlen(tok) == n) abort(); /* a token finds its id */
        (void)zero_tokenizer_is_special(t, id);
        char *s = NULL;
        if (zero_tokenizer_decode(t, &id, 1, 0, &s, &n) == ZERO_OK) zero_tokenizer_free_text(s);
    }
    (void)zero_tokenizer_bos(t);
    (void)zero_tokenizer_eos(t);
    zero_token_ids_free(&ids);
    zero_tokenizer_free(t);
    return 0;
}
