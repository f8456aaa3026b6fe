/* libFuzzer target: a chat template (the input, untrusted: a model directory's chat_template.jinja)
 * parsed and rendered over a fixed chat with small limits on output, memory and steps. Any input
 * must give a status, never a crash, a hang or an unbounded allocation. */
#include "fuzz.h"
#include "zero/template.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static const char ctx[] =
        "{\"messages\": [{\"role\": \"system\", \"content\": \"sys\"}, {\"role\": \"user\", "
        "\"content\": \"h\\u00e9 \\ud83d\\ude00\"}, {\"role\": \"assistant\", \"content\": \" a \"}], "
        "\"add_generation_prompt\": true, \"bos_token\": \"<s>\", \"eos_token\": \"</s>\", "
        "\"tools\": [{\"type\": \"function\", \"function\": {\"name\": \"f\", \"x\": [1, 2.5, null]}}]}";
    zero_template *t = NULL;
    zero_error err;
    if (zero_template_parse(&t, (const char *)data, size, &err) != ZERO_OK) return 0;
    zero_template_opts o;
    zero_template_opts_default(&o);
    o.now = 1796117400;
    o.max_output = 1 << 20;
    o.max_memory = 64 << 20;
    o.max_steps = 200000;
    zero_template_output out;
    if (zero_template_render(t, ctx, sizeof ctx - 1, &o, &out, &err) == ZERO_OK) {
        if (out.len > o.max_output || strlen(out.text) > out.len) abort();
        for (size_t i = 0; i < out.nspans; i++)
            if (out.spans[i][0] > out.spans[i][1] || out.spans[i][1] > out.len) abort();
        zero_template_output_free(&out);
    }
    zero_template_free(t);
    return 0;
}
