/* libFuzzer target: a safetensors file (header, metadata, offsets, checksums): zero_st_open, then
 * every tensor read whole (checksums verified) and in part; any input must give a status. */
#include "fuzz.h"
#include "zero/zero.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_file(data, size);
    zero_st_file *f = NULL;
    zero_error err;
    if (zero_st_open(&f, NULL, path, &err) == ZERO_OK) {
        for (int i = 0; i < zero_st_count(f); i++) {
            const zero_st_tensor *t = zero_st_tensor_at(f, i);
            if (!t || t->nbytes > (1u << 20)) continue;
            void *buf = malloc(t->nbytes ? t->nbytes : 1);
            if (!buf) abort();
            (void)zero_st_read(f, i, 0, buf, t->nbytes);
            if (t->nbytes > 2) (void)zero_st_read(f, i, 1, buf, t->nbytes - 2);
            free(buf);
        }
        zero_st_close(f);
    }
    return 0;
}
