/* libFuzzer target: a model.safetensors.index.json (dec_hf_index_files): the weight files it names,
 * each checked as a plain name inside the directory; any input must give a status, never a crash. */
#include "decoder/hf.h"
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = fuzz_cstring(data, size);
    char **names = NULL;
    int n = 0;
    zero_error err;
    if (dec_hf_index_files(fuzz_dir(), "model.safetensors.index.json", text, size, &names, &n, &err) == ZERO_OK) {
        for (int i = 0; i < n; i++)
            if (!names[i][0] || strchr(names[i], '/') || !strcmp(names[i], "..")) abort(); /* the rule held */
        dec_hf_names_free(names, n);
    }
    free(text);
    return 0;
}
