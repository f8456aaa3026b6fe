/* libFuzzer target: a tokenizer_config.json beside a real tokenizer.json (the Llama 3 fixture):
 * bos/eos tokens, chat_template, the chat format they imply, a chat rendered in it; any input
 * must give a status, never a crash. */
#include "fuzz.h"
#include "zero/data.h"
#include "zero/tokenizer.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static char *json;
    static size_t json_len;
    if (!json) json = fuzz_fixture("tokenizer/llama3/tokenizer.json", &json_len);
    char *config = fuzz_cstring(data, size);
    zero_tokenizer *t = NULL;
    zero_error err;
    if (zero_tokenizer_load_json(&t, json, json_len, config, &err) == ZERO_OK) {
        (void)zero_tokenizer_bos(t);
        (void)zero_tokenizer_eos(t);
        (void)zero_tokenizer_chat_template(t);
        const zero_chat_format fmt = zero_chat_format_detect(t);
        const zero_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}, {"assistant", "Hello."}};
        zero_token_ids ids = {0};
        uint8_t *mask = NULL;
        size_t cap = 0;
        if (fmt != ZERO_CHAT_NONE) (void)zero_chat_encode(t, fmt, msgs, 3, 1, &ids, &mask, &cap, &err);
        free(mask);
        zero_token_ids_free(&ids);
        zero_tokenizer_free(t);
    }
    free(config);
    return 0;
}
