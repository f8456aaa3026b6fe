/* tests/fuzz/fuzz.h — what the libFuzzer targets share: the input as a C string, and as a file
 * (the readers under test open paths), written once per input into a private temporary file;
 * an empty directory; the test data fixtures (tests/data, ZERO_FUZZ_DATA). */
#ifndef ZERO_FUZZ_H
#define ZERO_FUZZ_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The temporary names of this run (removed at exit). */
static char fuzz_path_[96], fuzz_spath_[96], fuzz_dpath_[64];

static inline const char *fuzz_tmpdir(void) { return access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp"; }

/* A NUL-terminated copy of the input (malloc'd; the caller frees it). */
static inline char *fuzz_cstring(const uint8_t *data, size_t size) {
    char *s = malloc(size + 1);
    if (!s) abort();
    memcpy(s, data, size);
    s[size] = 0;
    return s;
}

static inline void fuzz_write(const char *path, const uint8_t *data, size_t size) {
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size) || fclose(f) != 0) abort();
}

/* The path of a file that holds exactly the input (the same file for every input of a run). */
static inline const char *fuzz_file(const uint8_t *data, size_t size) {
    if (!fuzz_path_[0]) {
        snprintf(fuzz_path_, sizeof fuzz_path_, "%s/zero_fuzz_XXXXXX", fuzz_tmpdir());
        int fd = mkstemp(fuzz_path_);
        if (fd < 0) abort();
        close(fd);
    }
    fuzz_write(fuzz_path_, data, size);
    return fuzz_path_;
}

/* As fuzz_file, for readers that go by the name's suffix (".jsonl"): one suffix per target. */
static inline const char *fuzz_file_suffix(const uint8_t *data, size_t size, const char *suffix) {
    if (!fuzz_spath_[0]) {
        snprintf(fuzz_spath_, sizeof fuzz_spath_, "%s/zero_fuzz_XXXXXX%s", fuzz_tmpdir(), suffix);
        int fd = mkstemps(fuzz_spath_, (int)strlen(suffix));
        if (fd < 0) abort();
        close(fd);
    }
    fuzz_write(fuzz_spath_, data, size);
    return fuzz_spath_;
}

/* An empty private directory (for readers that check names inside one). */
static inline const char *fuzz_dir(void) {
    if (!fuzz_dpath_[0]) {
        snprintf(fuzz_dpath_, sizeof fuzz_dpath_, "%s/zero_fuzz_dir_XXXXXX", fuzz_tmpdir());
        if (!mkdtemp(fuzz_dpath_)) abort();
    }
    return fuzz_dpath_;
}

#ifdef ZERO_FUZZ_DATA
/* A whole file of the source tree's test data (tests/data/REL), malloc'd and NUL-terminated. */
static inline char *fuzz_fixture(const char *rel, size_t *len) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", ZERO_FUZZ_DATA, rel);
    FILE *f = fopen(path, "rb");
    if (!f) abort();
    char *buf = NULL;
    size_t n = 0, cap = 0, got;
    do {
        if (cap - n < 65536) {
            cap = cap ? 2 * cap : 65536;
            if (!(buf = realloc(buf, cap + 1))) abort();
        }
        got = fread(buf + n, 1, cap - n, f);
        n += got;
    } while (got > 0);
    fclose(f);
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}
#endif

__attribute__((destructor)) static void fuzz_cleanup(void) {
    if (fuzz_path_[0]) unlink(fuzz_path_);
    if (fuzz_spath_[0]) unlink(fuzz_spath_);
    if (fuzz_dpath_[0]) rmdir(fuzz_dpath_);
}

#endif
