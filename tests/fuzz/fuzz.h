/* tests/fuzz/fuzz.h — what the libFuzzer targets share: the input as a C string, and as a file
 * (the readers under test open paths), written once per input into a private temporary file. */
#ifndef ZERO_FUZZ_H
#define ZERO_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A NUL-terminated copy of the input (malloc'd; the caller frees it). */
static inline char *fuzz_cstring(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

/* The path of a file that holds exactly the input (the same file for every input of a run). */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
    static char path[64];
    if (!path[0]) {
        snprintf(path, sizeof path, "%s/zero_fuzz_XXXXXX", access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp");
        int fd = mkstemp(path);
        if (fd < 0) abort();
        close(fd);
    }
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
    return path;
}

/* The temporary file goes when the fuzzer exits. */
__attribute__((destructor)) static void fuzz_cleanup(void) {
    const char *p = fuzz_file((const uint8_t *)"", 0);
    unlink(p);
}

#endif
