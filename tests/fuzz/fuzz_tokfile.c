/* libFuzzer target: a token file (ZEROTOK1 or ZEROTOK2: header, tokens, mask, rows) as
 * zero_tokfile_open checks it, then ranges read; any input must give a status, never a crash. */
#include "fuzz.h"
#include "zero/data.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    zero_tokfile *f = NULL;
    zero_error err;
    if (zero_tokfile_open(&f, fuzz_file(data, size), &err) != ZERO_OK) return 0;
    const uint64_t n = zero_tokfile_count(f);
    int32_t tok[64];
    uint8_t mask[64];
    const uint64_t spans[3][2] = {{0, n < 64 ? n : 64}, {n > 7 ? n - 7 : 0, n > 7 ? 7 : n}, {n / 2, n - n / 2 < 5 ? n - n / 2 : 5}};
    for (int k = 0; k < 3; k++) {
        if (zero_tokfile_read(f, spans[k][0], spans[k][1], tok, mask) != ZERO_OK) continue;
        for (uint64_t i = 0; i < spans[k][1]; i++)
            if (tok[i] < 0 || (uint32_t)tok[i] >= zero_tokfile_vocab(f) || mask[i] > 1) abort(); /* what open promised */
    }
    (void)zero_tokfile_read(f, n, 1, tok, mask); /* past the end: a status */
    zero_tokfile_close(f);
    return 0;
}
