/* Tests of safetensors and CRC32C: published CRC vectors and scalar == SSE4.2; writer round trips
 * in every chunking; files made by numpy by hand and by the reference implementation; corrupt
 * files refused by name; thousands of random flips and truncations: an error or the right data. */
#include "ckpt/internal.h"
#include "harness.h"
#include "zero/zero.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512];

/* On tmpfs when there is one: thousands of small files and fsyncs; the code paths are the same. */
static void make_dir(void) {
    struct stat st;
    const char *base = getenv("ZERO_BUILD_DIR");
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    snprintf(g_dir, sizeof g_dir, "%s/zt_st_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_dir, strerror(errno));
        exit(1);
    }
}

static void path_of(char *dst, size_t cap, const char *name) { snprintf(dst, cap, "%s/%s", g_dir, name); }

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static void write_raw(const char *p, const void *data, size_t n) {
    FILE *f = fopen(p, "wb");
    if (!f || fwrite(data, 1, n, f) != n) {
        fprintf(stderr, "cannot write %s\n", p);
        exit(1);
    }
    fclose(f);
}

static unsigned char *read_raw(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    if (fread(b, 1, (size_t)sz, f) != (size_t)sz) sz = 0;
    fclose(f);
    *n = (size_t)sz;
    return b;
}

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ------------------------------------------------------------------ crc32c */
static void test_crc(void) {
    ZT_EQ_INT(zero_crc32c(0, "123456789", 9), 0xE3069283u);
    ZT_EQ_INT(zero__crc32c_scalar(0, "123456789", 9), 0xE3069283u);
    unsigned char b[32];
    /* RFC 3720 (iSCSI) B.4 vectors */
    memset(b, 0, 32);
    ZT_EQ_INT(zero_crc32c(0, b, 32), 0x8A9136AAu);
    memset(b, 0xff, 32);
    ZT_EQ_INT(zero_crc32c(0, b, 32), 0x62A8AB43u);
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)i;
    ZT_EQ_INT(zero_crc32c(0, b, 32), 0x46DD794Eu);
    for (int i = 0; i < 32; i++) b[i] = (unsigned char)(31 - i);
    ZT_EQ_INT(zero_crc32c(0, b, 32), 0x113FDB5Cu);
    ZT_EQ_INT(zero_crc32c(0, b, 0), 0);
    /* scalar == hardware at every length and misalignment; chaining equals one pass */
    enum { N = 100000 }; /* past the 3 x 8 KiB blocks of the interleaved hardware body */
    unsigned char *d = malloc(N + 8);
    for (int i = 0; i < N + 8; i++) d[i] = (unsigned char)rnd();
    int bad = 0;
    for (int len = 0; len < 300; len++)
        for (int a = 0; a < 8; a++) bad += zero__crc32c_scalar(0, d + a, (size_t)len) != zero__crc32c_hw(0, d + a, (size_t)len);
    ZT_EQ_INT(bad, 0);
    ZT_EQ_INT(zero__crc32c_scalar(0, d, N), zero__crc32c_hw(0, d, N));
    const size_t longs[] = {24575, 24576, 24577, 24583, 49152, 49159, 73727, 99992};
    for (size_t k = 0; k < sizeof longs / sizeof longs[0]; k++)
        for (int a = 0; a < 8; a += 3)
            ZT_CHECKF(zero__crc32c_scalar(0x1234u, d + a, longs[k]) == zero__crc32c_hw(0x1234u, d + a, longs[k]),
                      "length %zu, misaligned by %d", longs[k], a);
    uint32_t whole = zero_crc32c(0, d, N);
    for (int cut = 0; cut <= N; cut += 9973) ZT_EQ_INT(zero_crc32c(zero_crc32c(0, d, (size_t)cut), d + cut, (size_t)(N - cut)), whole);
    printf("crc32c: hardware body %s\n", zero__crc32c_hw_available() ? "available (compared)" : "absent (scalar used twice)");
    free(d);
}

/* ------------------------------------------------------------------ round trips */
typedef struct spec {
    const char *name;
    zero_dtype dt;
    int ndim;
    int64_t shape[3];
} spec;

static const spec k_specs[] = {
    {"embed.weight", ZERO_DTYPE_FP32, 2, {300, 1100}}, /* 1.3 MB: larger than the staging buffer */
    {"scalar", ZERO_DTYPE_FP32, 0, {0}},
    {"empty", ZERO_DTYPE_BF16, 2, {0, 7}},
    {"h.0.attn \"q\"\\k", ZERO_DTYPE_BF16, 1, {333}}, /* a name that needs escaping */
    {"half", ZERO_DTYPE_FP16, 3, {2, 3, 5}},
    {"ids", ZERO_DTYPE_INT64, 1, {17}},
    {"count", ZERO_DTYPE_INT32, 1, {1}},
    {"bytes", ZERO_DTYPE_UINT8, 1, {4099}},
    {"tail_empty", ZERO_DTYPE_FP32, 1, {0}},
};
#define NSPECS (int)(sizeof k_specs / sizeof k_specs[0])

static uint64_t spec_bytes(const spec *s) {
    uint64_t n = zero_dtype_size(s->dt);
    for (int d = 0; d < s->ndim; d++) n *= (uint64_t)s->shape[d];
    return n;
}

/* The data stream of all tensors: byte i has a value no chunking could fake. */
static unsigned char stream_byte(uint64_t i) { return (unsigned char)((i * 131u + (i >> 9) * 7u) ^ 0x5a); }

static uint64_t total_bytes(void) {
    uint64_t t = 0;
    for (int i = 0; i < NSPECS; i++) t += spec_bytes(&k_specs[i]);
    return t;
}

/* Writes the spec'd file, feeding the data in chunks of `chunk` bytes (0: one tensor at a time). */
static zero_status write_spec_file(const char *path, size_t chunk, zero_io *io) {
    zero_st_writer *w = NULL;
    zero_error err;
    zero_status s = zero_st_writer_create(&w, io, path, &err);
    if (s != ZERO_OK) return s;
    for (int i = 0; i < NSPECS && s == ZERO_OK; i++) s = zero_st_writer_add(w, k_specs[i].name, k_specs[i].dt, k_specs[i].shape, k_specs[i].ndim);
    if (s == ZERO_OK) s = zero_st_writer_set_metadata(w, "format", "pt");
    if (s == ZERO_OK) s = zero_st_writer_set_metadata(w, "note", "line\nbreak \"quoted\"");
    uint64_t total = total_bytes();
    unsigned char *all = malloc(total);
    for (uint64_t i = 0; i < total; i++) all[i] = stream_byte(i);
    uint64_t at = 0;
    for (int i = 0; s == ZERO_OK && at < total; i++) {
        size_t c = chunk ? chunk : (size_t)spec_bytes(&k_specs[i % NSPECS]);
        if (c > total - at) c = (size_t)(total - at);
        s = zero_st_writer_write(w, all + at, c);
        at += c;
    }
    if (s == ZERO_OK) s = zero_st_writer_finish(w);
    if (s == ZERO_OK) {
        struct stat st;
        ZT_CHECK(stat(path, &st) == 0 && (uint64_t)st.st_size == zero_st_writer_file_size(w));
    }
    if (s != ZERO_OK && io == NULL) fprintf(stderr, "writer: %s\n", zero_st_writer_last_error(w));
    zero_st_writer_free(w);
    free(all);
    return s;
}

static void check_spec_file(const char *path) {
    zero_st_file *f = NULL;
    zero_error err;
    ZT_OK(zero_st_open(&f, NULL, path, &err));
    if (!f) {
        ZT_FAIL("open %s: %s", path, err.msg);
        return;
    }
    ZT_EQ_INT(zero_st_count(f), NSPECS);
    ZT_CHECK(zero_st_metadata(f, "format") && !strcmp(zero_st_metadata(f, "format"), "pt"));
    ZT_CHECK(zero_st_metadata(f, "note") && !strcmp(zero_st_metadata(f, "note"), "line\nbreak \"quoted\""));
    ZT_CHECK(zero_st_metadata(f, "missing") == NULL);
    ZT_EQ_INT(zero_st_metadata_count(f), 2 + NSPECS);
    uint64_t base = 0;
    for (int i = 0; i < NSPECS; i++) {
        int k = zero_st_find(f, k_specs[i].name);
        ZT_CHECKF(k >= 0, "tensor %s missing", k_specs[i].name);
        if (k < 0) continue;
        const zero_st_tensor *t = zero_st_tensor_at(f, k);
        ZT_CHECK(!strcmp(t->dtype, zero_st_dtype_name(k_specs[i].dt)));
        ZT_EQ_INT(t->zdtype, k_specs[i].dt);
        ZT_EQ_INT(t->ndim, k_specs[i].ndim);
        for (int d = 0; d < t->ndim; d++) ZT_EQ_INT(t->shape[d], k_specs[i].shape[d]);
        ZT_EQ_INT(t->nbytes, spec_bytes(&k_specs[i]));
        ZT_CHECK(t->has_crc);
        ZT_OK(zero_st_verify(f, k));
        unsigned char *b = malloc(t->nbytes + 1);
        ZT_OK(zero_st_read(f, k, 0, b, t->nbytes));
        size_t bad = 0;
        for (uint64_t j = 0; j < t->nbytes; j++) bad += b[j] != stream_byte(base + j);
        ZT_CHECKF(bad == 0, "%s: %zu bytes differ", t->name, bad);
        ZT_EQ_INT(t->crc, zero_crc32c(0, b, t->nbytes));
        if (t->nbytes > 10) { /* a byte range inside */
            ZT_OK(zero_st_read(f, k, 3, b, 7));
            for (int j = 0; j < 7; j++) bad += b[j] != stream_byte(base + 3 + (uint64_t)j);
            ZT_EQ_INT(bad, 0);
        }
        ZT_EQ_INT(zero_st_read(f, k, t->nbytes, b, 1), ZERO_ERR_INVALID_ARG);
        ZT_CHECK(strstr(zero_st_last_error(f), t->name) != NULL);
        free(b);
        base += spec_bytes(&k_specs[i]);
    }
    ZT_EQ_INT(zero_st_find(f, "nope"), -1);
    /* header layout: length then '{', data start 8-aligned, the whole file accounted for */
    size_t n = 0;
    unsigned char *raw = read_raw(path, &n);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--) hl = (hl << 8) | raw[i];
    ZT_EQ_INT((8 + hl) % 8, 0);
    ZT_EQ_INT(raw[8], '{');
    ZT_EQ_INT(8 + hl + total_bytes(), n);
    ZT_EQ_INT(zero_st_file_size(f), n);
    free(raw);
    zero_st_close(f);
}

static void test_roundtrip(void) {
    char p[600], tmp[700];
    path_of(p, sizeof p, "rt.safetensors");
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    const size_t chunks[] = {0, 1, 7, 4096, 1u << 20, (1u << 20) + 3, 3u << 20};
    for (size_t c = 0; c < sizeof chunks / sizeof chunks[0]; c++) {
        ZT_OK(write_spec_file(p, chunks[c], NULL));
        ZT_CHECK(!exists(tmp));
        check_spec_file(p);
    }
    /* an empty file: no tensor at all */
    zero_st_writer *w = NULL;
    zero_error err;
    ZT_OK(zero_st_writer_create(&w, NULL, p, &err));
    ZT_OK(zero_st_writer_finish(w));
    zero_st_writer_free(w);
    zero_st_file *f = NULL;
    ZT_OK(zero_st_open(&f, NULL, p, &err));
    ZT_EQ_INT(zero_st_count(f), 0);
    zero_st_close(f);
}

static void test_writer_errors(void) {
    char p[600], tmp[700];
    path_of(p, sizeof p, "werr.safetensors");
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    write_raw(p, "previous", 8);
    zero_st_writer *w = NULL;
    zero_error err;
    ZT_OK(zero_st_writer_create(&w, NULL, p, &err));
    int64_t sh[2] = {2, 3}, neg[1] = {-1};
    ZT_OK(zero_st_writer_add(w, "a", ZERO_DTYPE_FP32, sh, 2));
    ZT_EQ_INT(zero_st_writer_add(w, "a", ZERO_DTYPE_FP32, sh, 2), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_st_writer_last_error(w), "declared twice") != NULL);
    ZT_EQ_INT(zero_st_writer_add(w, "b", ZERO_DTYPE_COUNT, sh, 2), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_st_writer_add(w, "b", ZERO_DTYPE_FP32, neg, 1), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_st_writer_add(w, "b", ZERO_DTYPE_FP32, sh, 9), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_st_writer_add(w, "__metadata__", ZERO_DTYPE_FP32, sh, 2), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_st_writer_add(w, "", ZERO_DTYPE_FP32, sh, 2), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_st_writer_set_metadata(w, "crc32c.a", "0"), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_st_writer_add(w, "b", ZERO_DTYPE_UINT8, sh, 1));
    float v[6] = {1, 2, 3, 4, 5, 6};
    ZT_OK(zero_st_writer_write(w, v, 10));
    ZT_EQ_INT(zero_st_writer_add(w, "c", ZERO_DTYPE_FP32, sh, 2), ZERO_ERR_STATE);
    ZT_EQ_INT(zero_st_writer_set_metadata(w, "k", "v"), ZERO_ERR_STATE);
    ZT_EQ_INT(zero_st_writer_write(w, v, 100), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_st_writer_last_error(w), "past the end") != NULL);
    ZT_EQ_INT(zero_st_writer_finish(w), ZERO_ERR_STATE);
    ZT_CHECKF(strstr(zero_st_writer_last_error(w), "tensor 'a' lacks 14 bytes") != NULL, "'%s'",
              zero_st_writer_last_error(w));
    ZT_CHECK(exists(tmp));
    zero_st_writer_free(w); /* unfinished: the temporary goes, the old file stays */
    ZT_CHECK(!exists(tmp));
    size_t n = 0;
    unsigned char *raw = read_raw(p, &n);
    ZT_CHECK(n == 8 && !memcmp(raw, "previous", 8));
    free(raw);
    /* a directory that does not exist */
    char bad[700];
    snprintf(bad, sizeof bad, "%s/no/such/dir/x.safetensors", g_dir);
    ZT_EQ_INT(zero_st_writer_create(&w, NULL, bad, &err), ZERO_ERR_IO);
    ZT_CHECK(strstr(err.msg, "no/such/dir") != NULL);
}

/* Every write of a file fails in turn: the writer reports it and PATH keeps its old contents. */
static void test_writer_faults(void) {
    char p[600];
    path_of(p, sizeof p, "wfault.safetensors");
    zero_error err;
    zero_io *count = NULL, *inner = NULL;
    ZT_OK(zero_io_create_posix(&inner, &err));
    ZT_OK(zero_io_create_fault(&count, inner, 1, "", &err));
    ZT_OK(write_spec_file(p, 65536, count));
    uint64_t writes = zero_io_fault_calls(count, ZERO_IO_OP_WRITE);
    uint64_t fsyncs = zero_io_fault_calls(count, ZERO_IO_OP_FSYNC);
    zero_io_free(count);
    ZT_CHECK(writes >= 3 && fsyncs == 2);
    size_t n0 = 0;
    unsigned char *before = read_raw(p, &n0);
    const char *kinds[] = {"write", "fsync", "rename", "close", "open"};
    const uint64_t counts[] = {writes, fsyncs, 1, 1, 1};
    for (int k = 0; k < 5; k++) {
        for (uint64_t i = 1; i <= counts[k]; i++) {
            char spec[64];
            snprintf(spec, sizeof spec, "%s:%llu:%s", kinds[k], (unsigned long long)i, i % 2 ? "eio" : "enospc");
            zero_io *io = NULL;
            ZT_OK(zero_io_create_posix(&inner, &err));
            ZT_OK(zero_io_create_fault(&io, inner, 1, spec, &err));
            zero_status s = write_spec_file(p, 65536, io);
            zero_io_free(io);
            /* fsync #2 is the directory's, after the rename: the new file is in place */
            int after_rename = k == 1 && i == 2;
            ZT_CHECKF(s == (i % 2 ? ZERO_ERR_IO : ZERO_ERR_NOSPACE), "%s: status %d", spec, s);
            size_t n = 0;
            unsigned char *now = read_raw(p, &n);
            if (!after_rename) ZT_CHECKF(n == n0 && !memcmp(now, before, n0), "%s: the old file changed", spec);
            free(now);
            check_spec_file(p);
        }
    }
    free(before);
}

/* ------------------------------------------------------------------ the independent fixture */
static void test_fixture(void) {
    const char *src = getenv("ZERO_SOURCE_DIR");
    char p[1024];
    snprintf(p, sizeof p, "%s/tests/data/safetensors_numpy.safetensors", src && *src ? src : ".");
    zero_st_file *f = NULL;
    zero_error err;
    ZT_OK(zero_st_open(&f, NULL, p, &err));
    if (!f) {
        ZT_FAIL("fixture %s: %s", p, err.msg);
        return;
    }
    ZT_EQ_INT(zero_st_count(f), 7);
    /* file order is data order, whatever the JSON order (it is sorted by name there) */
    const char *order[] = {"ids", "wte", "scalar", "empty", "h.0.bf16", "half", "mask"};
    for (int i = 0; i < 7; i++) ZT_CHECKF(!strcmp(zero_st_tensor_at(f, i)->name, order[i]), "tensor %d is %s", i, zero_st_tensor_at(f, i)->name);
    ZT_CHECK(!strcmp(zero_st_metadata(f, "format"), "pt"));
    int k = zero_st_find(f, "wte");
    const zero_st_tensor *t = zero_st_tensor_at(f, k);
    ZT_CHECK(t->zdtype == ZERO_DTYPE_FP32 && t->ndim == 2 && t->shape[0] == 3 && t->shape[1] == 4);
    ZT_CHECK(t->has_crc && t->crc == 0x9d39701bu);
    ZT_OK(zero_st_verify(f, k));
    float w[12];
    ZT_OK(zero_st_read(f, k, 0, w, sizeof w));
    for (int i = 0; i < 12; i++) ZT_EQ_INT(w[i] == (float)i * 0.25f - 1.5f, 1);
    t = zero_st_tensor_at(f, zero_st_find(f, "scalar"));
    ZT_CHECK(t->ndim == 0 && t->numel == 1 && !t->has_crc);
    float sc = 0;
    ZT_OK(zero_st_read(f, zero_st_find(f, "scalar"), 0, &sc, 4));
    ZT_EQ_INT(sc == 3.5f, 1);
    t = zero_st_tensor_at(f, zero_st_find(f, "empty"));
    ZT_CHECK(t->numel == 0 && t->nbytes == 0);
    t = zero_st_tensor_at(f, zero_st_find(f, "h.0.bf16"));
    ZT_CHECK(t->zdtype == ZERO_DTYPE_BF16 && t->numel == 5);
    uint16_t h[5];
    ZT_OK(zero_st_read(f, zero_st_find(f, "h.0.bf16"), 0, h, sizeof h));
    const float bf_src[5] = {1.0f, -2.5f, 3.14159265f, 1e-3f, 65504.0f};
    const uint16_t bf_bits[5] = {0x3f80, 0xc020, 0x4049, 0x3a83, 0x4780};
    for (int i = 0; i < 5; i++) {
        ZT_EQ_INT(h[i], bf_bits[i]);
        ZT_EQ_INT(h[i], zero_fp32_to_bf16(bf_src[i]));
    }
    uint16_t hf[4];
    ZT_OK(zero_st_read(f, zero_st_find(f, "half"), 0, hf, sizeof hf));
    const float hf_val[4] = {0.5f, -0.25f, 1000.0f, 6.103515625e-05f};
    for (int i = 0; i < 4; i++) ZT_EQ_INT(zero_fp16_to_fp32(hf[i]) == hf_val[i], 1);
    int64_t ids[3];
    ZT_OK(zero_st_read(f, zero_st_find(f, "ids"), 0, ids, sizeof ids));
    ZT_CHECK(ids[0] == -1 && ids[1] == 0 && ids[2] == (int64_t)1 << 40);
    unsigned char m[4];
    ZT_OK(zero_st_read(f, zero_st_find(f, "mask"), 0, m, 4));
    ZT_CHECK(m[0] == 0 && m[1] == 1 && m[2] == 254 && m[3] == 255);
    zero_st_close(f);
}

/* A file written by the reference implementation (tests/data/make_safetensors_hf_fixture.py). */
static void test_hf_fixture(void) {
    const char *src = getenv("ZERO_SOURCE_DIR");
    char p[1024];
    snprintf(p, sizeof p, "%s/tests/data/safetensors_hf.safetensors", src && *src ? src : ".");
    zero_st_file *f = NULL;
    zero_error err;
    ZT_OK(zero_st_open(&f, NULL, p, &err));
    if (!f) {
        ZT_FAIL("fixture %s: %s", p, err.msg);
        return;
    }
    ZT_EQ_INT(zero_st_count(f), 6);
    ZT_CHECK(!strcmp(zero_st_metadata(f, "source"), "huggingface safetensors"));
    const zero_st_tensor *t = zero_st_tensor_at(f, zero_st_find(f, "wpe"));
    ZT_CHECK(t && t->ndim == 3 && t->shape[0] == 2 && t->shape[1] == 3 && t->shape[2] == 4 && !t->has_crc);
    float w[24];
    ZT_OK(zero_st_read(f, zero_st_find(f, "wpe"), 0, w, sizeof w));
    for (int i = 0; i < 24; i++) ZT_EQ_INT(w[i] == (float)i * 0.125f - 1.0f, 1);
    uint16_t g[3];
    ZT_OK(zero_st_read(f, zero_st_find(f, "ln.g"), 0, g, sizeof g));
    ZT_CHECK(zero_fp16_to_fp32(g[0]) == 1.0f && zero_fp16_to_fp32(g[1]) == -0.5f && zero_fp16_to_fp32(g[2]) == 2.0f);
    int64_t tok[3];
    ZT_OK(zero_st_read(f, zero_st_find(f, "tokens"), 0, tok, sizeof tok));
    ZT_CHECK(tok[0] == 7 && tok[1] == -7 && tok[2] == (int64_t)1 << 33);
    t = zero_st_tensor_at(f, zero_st_find(f, "step"));
    ZT_CHECK(t && !strcmp(t->dtype, "F64") && t->zdtype == ZERO_DTYPE_COUNT && t->ndim == 0 && t->nbytes == 8);
    double st = 0;
    ZT_OK(zero_st_read(f, zero_st_find(f, "step"), 0, &st, 8));
    ZT_EQ_INT(st == 12.0, 1);
    unsigned char fl[5];
    ZT_OK(zero_st_read(f, zero_st_find(f, "flags"), 0, fl, 5));
    ZT_CHECK(fl[0] == 3 && fl[1] == 0 && fl[2] == 255 && fl[3] == 128 && fl[4] == 1);
    t = zero_st_tensor_at(f, zero_st_find(f, "none"));
    ZT_CHECK(t && t->numel == 0 && t->ndim == 2 && t->shape[1] == 5);
    zero_st_close(f);
}

/* ------------------------------------------------------------------ corrupt files */
/* A file from a header text (padded here) and n data bytes of value 0x11. */
static void make_file(const char *p, const char *header, size_t ndata) {
    size_t hl = strlen(header), padded = (hl + 7) / 8 * 8;
    unsigned char *b = calloc(1, 8 + padded + ndata + 1);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    memcpy(b + 8, header, hl);
    memset(b + 8 + hl, ' ', padded - hl);
    memset(b + 8 + padded, 0x11, ndata);
    write_raw(p, b, 8 + padded + ndata);
    free(b);
}

static void expect_refused(const char *p, const char *what, const char *needle) {
    zero_st_file *f = NULL;
    zero_error err;
    err.msg[0] = 0;
    zero_status s = zero_st_open(&f, NULL, p, &err);
    ZT_CHECKF(s == ZERO_ERR_FORMAT && f == NULL, "%s: status %d (%s)", what, s, err.msg);
    ZT_CHECKF(strstr(err.msg, p) != NULL && strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", what,
              err.msg, needle);
    zero_st_close(f);
}

static void test_corrupt(void) {
    char p[600];
    path_of(p, sizeof p, "bad.safetensors");
    const char *A = "\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}";
    char h[1024];
    struct {
        const char *header;
        size_t ndata;
        const char *what, *needle;
    } cases[] = {
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 4, "data cut short", "past the data"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 12, "trailing data", "after the header"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,80]}}", 8, "offsets out of range", "need"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, "hole", "hole"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", 12, "overlap", "overlap"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,16]}}", 16, "duplicate", "appears twice in one object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[8,0]}}", 8, "reversed offsets", "end before"},
        {"{\"a\":{\"dtype\":\"F31\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "unknown dtype", "F31"},
        {"{\"a\":{\"dtype\":\"F16\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "dtype/shape mismatch", "needs 4 bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2.5],\"data_offsets\":[0,8]}}", 8, "fractional shape", "whole number"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", 8, "negative shape", "whole number"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4611686018427387904,4],\"data_offsets\":[0,8]}}", 8, "shape past 2^53",
         "shape entry 0 is 4611686018427387904: expected a whole number in [0, 2^53]"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2,\"x\"],\"data_offsets\":[0,8]}}", 8, "a string in the shape",
         "shape entry 1 is \"x\""},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0]}}", 8, "one offset", "two whole numbers"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[-8,0]}}", 8, "a negative offset",
         "data_offsets [-8,0]: expected two whole numbers"},
        {"{\"a\\u001b[31m\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "a control character in a name",
         "tensor name 'a\\x1b[31m' holds a control character"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2]}}", 8, "no offsets", "data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,2],\"data_offsets\":[0,8]}}", 8, "too many dims", "dimensions"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296],\"data_offsets\":[0,8]}}", 8, "overflowing shape", "bytes pass 2^62"},
        {"{\"a\":[1,2]}", 8, "tensor not an object", "not an object"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}", 8, "bad JSON", "not valid JSON"},
        {"[1,2,3]", 0, "not an object", "start with '{'"},
        {"{\"__metadata__\":{\"k\":1}}", 0, "metadata not strings", "not a string"},
        {"{\"__metadata__\":[]}", 0, "metadata not an object", "not an object of strings"},
        {"{\"__metadata__\":{\"crc32c.a\":\"12\"}, \"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "short crc", "8 hex digits"},
        {"{\"__metadata__\":{\"crc32c.zz\":\"12345678\"}, \"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 8, "crc of nothing", "existing tensor"},
        {"{} x", 0, "garbage after JSON", "bytes after the JSON value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        make_file(p, cases[i].header, cases[i].ndata);
        expect_refused(p, cases[i].what, cases[i].needle);
    }
    /* a valid one of the same form opens (the cases above fail for their stated reason) */
    snprintf(h, sizeof h, "{%s}", A);
    make_file(p, h, 8);
    zero_st_file *f = NULL;
    zero_error err;
    ZT_OK(zero_st_open(&f, NULL, p, &err));
    zero_st_close(f);
    /* a checksum that does not match is found by verify, naming file and tensor */
    snprintf(h, sizeof h, "{\"__metadata__\":{\"crc32c.a\":\"deadbeef\"},%s}", A);
    make_file(p, h, 8);
    ZT_OK(zero_st_open(&f, NULL, p, &err));
    if (f) {
        ZT_EQ_INT(zero_st_verify(f, 0), ZERO_ERR_FORMAT);
        ZT_CHECK(strstr(zero_st_last_error(f), p) && strstr(zero_st_last_error(f), "'a'") &&
                 strstr(zero_st_last_error(f), "checksum mismatch"));
        zero_st_close(f);
    }
    /* header lengths that cannot be */
    unsigned char b[64];
    memset(b, ' ', sizeof b);
    const uint64_t lens[] = {0, 1, 57, 1ull << 40, ~0ull};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        for (int j = 0; j < 8; j++) b[j] = (unsigned char)(lens[i] >> (8 * j));
        write_raw(p, b, sizeof b);
        expect_refused(p, "bad header length", "header length");
    }
    write_raw(p, b, 5);
    expect_refused(p, "5-byte file", "too small");
    write_raw(p, b, 0);
    expect_refused(p, "empty file", "too small");
    /* a missing file is an I/O error naming it */
    ZT_EQ_INT(zero_st_open(&f, NULL, "/nonexistent/x.safetensors", &err), ZERO_ERR_IO);
    ZT_CHECK(strstr(err.msg, "/nonexistent/x.safetensors") && strstr(err.msg, "No such file"));
}

/* ------------------------------------------------------------------ random damage */
static void test_fuzz(void) {
    char good[600], p[600];
    path_of(good, sizeof good, "fuzz_src.safetensors");
    path_of(p, sizeof p, "fuzz.safetensors");
    zero_st_writer *w = NULL;
    zero_error err;
    ZT_OK(zero_st_writer_create(&w, NULL, good, &err));
    int64_t s1[2] = {3, 5}, s2[1] = {9}, s3[1] = {4};
    ZT_OK(zero_st_writer_add(w, "w", ZERO_DTYPE_FP32, s1, 2));
    ZT_OK(zero_st_writer_add(w, "b", ZERO_DTYPE_BF16, s2, 1));
    ZT_OK(zero_st_writer_add(w, "i", ZERO_DTYPE_INT64, s3, 1));
    ZT_OK(zero_st_writer_set_metadata(w, "format", "pt"));
    unsigned char data[60 + 18 + 32];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (unsigned char)(i * 37 + 11);
    ZT_OK(zero_st_writer_write(w, data, sizeof data));
    ZT_OK(zero_st_writer_finish(w));
    zero_st_writer_free(w);
    size_t n = 0;
    unsigned char *orig = read_raw(good, &n);
    unsigned char *b = malloc(n);
    int opened = 0, caught = 0, iters = 3000;
    for (int it = 0; it < iters; it++) {
        memcpy(b, orig, n);
        size_t len = n;
        int mode = (int)(rnd() % 4);
        if (mode == 0) {
            len = (size_t)(rnd() % n); /* truncation */
        } else {
            int flips = 1 + (int)(rnd() % (mode == 3 ? 8 : 1));
            for (int k = 0; k < flips; k++) {
                /* aim half of the flips at the 8-byte length and the header */
                size_t at = (rnd() & 1) ? (size_t)(rnd() % n) : (size_t)(rnd() % (n - sizeof data));
                b[at] ^= (unsigned char)(1u << (rnd() % 8));
            }
        }
        write_raw(p, b, len);
        zero_st_file *f = NULL;
        zero_status s = zero_st_open(&f, NULL, p, &err);
        if (s != ZERO_OK) {
            ZT_CHECKF(s == ZERO_ERR_FORMAT && f == NULL && err.msg[0], "iteration %d: status %d", it, s);
            continue;
        }
        opened++;
        for (int k = 0; k < zero_st_count(f); k++) {
            const zero_st_tensor *t = zero_st_tensor_at(f, k);
            unsigned char got[128];
            if (t->nbytes > sizeof got) continue;
            ZT_OK(zero_st_read(f, k, 0, got, t->nbytes));
            if (zero_st_verify(f, k) != ZERO_OK) {
                caught++;
                continue;
            }
            /* verified against its checksum, or a single flip spent on the header: the original bytes */
            if (!t->has_crc && mode == 3) continue;
            size_t off = !strcmp(t->name, "w") ? 0 : !strcmp(t->name, "b") ? 60 : !strcmp(t->name, "i") ? 78 : 999;
            size_t want = off == 0 ? 60 : off == 60 ? 18 : 32;
            ZT_CHECKF(off != 999 && t->nbytes == want && !memcmp(got, data + off, want),
                      "iteration %d: tensor '%s' (%llu bytes) opened and verified with wrong data", it, t->name,
                      (unsigned long long)t->nbytes);
        }
        zero_st_close(f);
    }
    printf("fuzz: %d damaged files, %d opened, %d tensors caught by checksum\n", iters, opened, caught);
    ZT_CHECK(opened > 0 && caught > 0);
    free(b);
    free(orig);
}

int main(void) {
    make_dir();
    test_crc();
    test_roundtrip();
    test_writer_errors();
    test_writer_faults();
    test_fixture();
    test_hf_fixture();
    test_corrupt();
    test_fuzz();
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", g_dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", g_dir);
    return zt_finish("test_safetensors");
}
