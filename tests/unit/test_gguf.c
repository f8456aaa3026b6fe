/* Tests of the GGUF writer (zero/gguf.h): a small file against its bytes assembled by hand from the
 * format's definition; the same file whatever the chunking of the data; Q8_0 against a plain
 * reference of ggml's rule and its error bound; every refusal (metadata after a tensor, a key or a
 * tensor twice, a Q8_0 row not a multiple of 32, names, short and long data); every write, fsync and
 * rename failing in turn leaves the old file whole and no temporary behind. */
#include "ckpt/internal.h"
#include "harness.h"
#include "zero/gguf.h"
#include "zero/zero.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512];

static void path_of(char *dst, size_t cap, const char *name) { snprintf(dst, cap, "%s/%s", g_dir, name); }

static unsigned char *read_all(const char *p, size_t *n) {
    FILE *f = fopen(p, "rb");
    *n = 0;
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    *n = (size_t)ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc(*n + 1);
    if (fread(b, 1, *n, f) != *n) *n = 0;
    fclose(f);
    return b;
}

/* ---- the expected bytes, assembled here */
typedef struct img {
    unsigned char b[4096];
    size_t n;
} img;
static void u32(img *m, uint32_t v) {
    for (int i = 0; i < 4; i++) m->b[m->n++] = (unsigned char)(v >> (8 * i));
}
static void u64(img *m, uint64_t v) {
    for (int i = 0; i < 8; i++) m->b[m->n++] = (unsigned char)(v >> (8 * i));
}
static void str(img *m, const char *s) {
    u64(m, strlen(s));
    memcpy(m->b + m->n, s, strlen(s));
    m->n += strlen(s);
}
static void pad(img *m) {
    while (m->n % 32) m->b[m->n++] = 0;
}

/* A file: metadata of every kind, an F32 vector of 3, an F16 (2, 3) matrix, a Q8_0 (1, 32) row. */
static const float vec[3] = {1.5f, -2.0f, 0.25f}, mat[6] = {1, 2, 3, 4, 5, -0.5f};
static float row[32];

static zero_status write_file(const char *p, zero_io *io, size_t chunk) {
    zero_error err;
    zero_gguf_writer *w = NULL;
    zero_status s = zero_gguf_writer_create(&w, io, p, &err);
    if (s) return s;
    const char *names[2] = {"a", "bc"};
    const int32_t ints[2] = {-1, 7};
    const int64_t sv[1] = {3}, sm[2] = {2, 3}, sr[2] = {1, 32};
    if (!s) s = zero_gguf_set_string(w, "general.architecture", "llama");
    if (!s) s = zero_gguf_set_u32(w, "x.u32", 42);
    if (!s) s = zero_gguf_set_i32(w, "x.i32", -5);
    if (!s) s = zero_gguf_set_f32(w, "x.f32", 0.5f);
    if (!s) s = zero_gguf_set_bool(w, "x.bool", 1);
    if (!s) s = zero_gguf_set_strings(w, "x.strings", names, NULL, 2);
    if (!s) s = zero_gguf_set_i32s(w, "x.ints", ints, 2);
    if (!s) s = zero_gguf_add_tensor(w, "v", ZERO_GGUF_F32, sv, 1);
    if (!s) s = zero_gguf_add_tensor(w, "m", ZERO_GGUF_F16, sm, 2);
    if (!s) s = zero_gguf_add_tensor(w, "q", ZERO_GGUF_Q8_0, sr, 2);
    unsigned char data[12 + 12 + 34];
    memcpy(data, vec, 12);
    for (int i = 0; i < 6; i++) {
        const uint16_t h = zero_fp32_to_fp16(mat[i]);
        data[12 + 2 * i] = (unsigned char)h, data[13 + 2 * i] = (unsigned char)(h >> 8);
    }
    zero_gguf_q8_0_encode(row, 32, data + 24);
    for (size_t at = 0; !s && at < sizeof data; at += chunk)
        s = zero_gguf_write(w, data + at, sizeof data - at < chunk ? sizeof data - at : chunk);
    if (!s) s = zero_gguf_finish(w);
    zero_gguf_writer_free(w);
    return s;
}

static void expected(img *m) {
    m->n = 0;
    u32(m, 0x46554747u), u32(m, 3), u64(m, 3), u64(m, 7);
    str(m, "general.architecture"), u32(m, 8), str(m, "llama");
    str(m, "x.u32"), u32(m, 4), u32(m, 42);
    str(m, "x.i32"), u32(m, 5), u32(m, (uint32_t)-5);
    str(m, "x.f32"), u32(m, 6), u32(m, 0x3F000000u);
    str(m, "x.bool"), u32(m, 7), m->b[m->n++] = 1;
    str(m, "x.strings"), u32(m, 9), u32(m, 8), u64(m, 2), str(m, "a"), str(m, "bc");
    str(m, "x.ints"), u32(m, 9), u32(m, 5), u64(m, 2), u32(m, (uint32_t)-1), u32(m, 7);
    str(m, "v"), u32(m, 1), u64(m, 3), u32(m, 0), u64(m, 0);
    str(m, "m"), u32(m, 2), u64(m, 3), u64(m, 2), u32(m, 1), u64(m, 32);  /* 12 bytes, then aligned */
    str(m, "q"), u32(m, 2), u64(m, 32), u64(m, 1), u32(m, 8), u64(m, 64); /* after 12 bytes at 32 */
    pad(m);
    const size_t data = m->n;
    memcpy(m->b + m->n, vec, 12), m->n += 12;
    pad(m);
    for (int i = 0; i < 6; i++) {
        const uint16_t h = zero_fp32_to_fp16(mat[i]);
        m->b[m->n++] = (unsigned char)h, m->b[m->n++] = (unsigned char)(h >> 8);
    }
    pad(m);
    /* Q8_0 by ggml's rule, written out: d = max|x| / 127, codes round(x / d) halves away */
    float amax = 0;
    for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(row[j]));
    const float d = amax / 127.0f, id = 1.0f / d;
    const uint16_t h = zero_fp32_to_fp16(d);
    m->b[m->n++] = (unsigned char)h, m->b[m->n++] = (unsigned char)(h >> 8);
    for (int j = 0; j < 32; j++) {
        const float x = row[j] * id;
        m->b[m->n++] = (unsigned char)(int8_t)(x < 0 ? -floorf(-x + 0.5f) : floorf(x + 0.5f));
    }
    ZT_CHECK(data % 32 == 0);
}

static void test_layout(void) {
    for (int j = 0; j < 32; j++) row[j] = (float)((j * 37) % 19) - 9.0f + (j == 5 ? 0.5f : 0.0f);
    img want;
    expected(&want);
    char p[600];
    path_of(p, sizeof p, "a.gguf");
    const size_t chunks[] = {1, 7, 34, 4096};
    for (int c = 0; c < 4; c++) {
        ZT_OK(write_file(p, NULL, chunks[c]));
        size_t n;
        unsigned char *got = read_all(p, &n);
        ZT_CHECKF(n == want.n && !memcmp(got, want.b, n), "chunks of %zu: %zu bytes, expected %zu, or other bytes",
                  chunks[c], n, want.n);
        free(got);
    }
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    ZT_CHECK(access(tmp, F_OK) != 0);
    printf("gguf: a file of 7 keys and 3 tensors is the %zu bytes assembled by hand, in any chunking\n", want.n);
}

static void test_q8_0(void) {
    enum { N = 32 * 64 };
    float *x = malloc(N * sizeof *x), *y = malloc(N * sizeof *y);
    unsigned char *q = malloc(N / 32 * 34);
    uint64_t s = 1;
    for (int i = 0; i < N; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = ((float)(s >> 40) / (float)(1 << 24) - 0.5f) * (float)(1 + (i >> 5));
    }
    for (int i = 0; i < 32; i++) x[i] = 0.0f; /* an all-zero block: d 0, codes 0 */
    zero_gguf_q8_0_encode(x, N, q);
    zero_gguf_q8_0_decode(q, N, y);
    double worst = 0;
    for (int b = 0; b < N / 32; b++) {
        const float d = zero_fp16_to_fp32((uint16_t)(q[b * 34] | q[b * 34 + 1] << 8));
        for (int j = 0; j < 32; j++) {
            const int i = b * 32 + j;
            if (d == 0) {
                ZT_CHECK(y[i] == 0.0f && x[i] == 0.0f);
                continue;
            }
            worst = fmax(worst, fabs((double)y[i] - x[i]) / d);
            ZT_CHECK(abs((int8_t)q[b * 34 + 2 + j]) <= 127);
        }
    }
    /* half a step of the fp32 scale, plus the fp16 rounding of the scale over 127 steps */
    ZT_CHECKF(worst <= 0.5 + 127.0 / 2048 + 1e-6, "q8_0 error %.4f of a step", worst);
    ZT_EQ_INT(zero_gguf_type_bytes(ZERO_GGUF_Q8_0, 64), 68);
    ZT_EQ_INT(zero_gguf_type_bytes(ZERO_GGUF_BF16, 3), 6);
    printf("gguf: q8_0 of %d values within %.3f of a step\n", N, worst);
    free(x), free(y), free(q);
}

static void test_refusals(void) {
    char p[600];
    path_of(p, sizeof p, "r.gguf");
    zero_error err;
    zero_gguf_writer *w = NULL;
    const int64_t s31[2] = {2, 31}, s2[1] = {2}, s0[1] = {0};
    ZT_OK(zero_gguf_writer_create(&w, NULL, p, &err));
    ZT_OK(zero_gguf_set_u32(w, "k", 1));
    ZT_EQ_INT(zero_gguf_set_u32(w, "k", 2), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_gguf_writer_last_error(w), "'k' set twice") != NULL);
    ZT_EQ_INT(zero_gguf_set_u32(w, "", 2), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_gguf_add_tensor(w, "q", ZERO_GGUF_Q8_0, s31, 2), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(zero_gguf_writer_last_error(w), "multiple of 32") != NULL);
    ZT_EQ_INT(zero_gguf_add_tensor(w, "z", ZERO_GGUF_F32, s0, 1), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_gguf_add_tensor(w, "t", (zero_gguf_type)2, s2, 1), ZERO_ERR_INVALID_ARG);
    char longname[80];
    memset(longname, 'n', 70), longname[70] = 0;
    ZT_EQ_INT(zero_gguf_add_tensor(w, longname, ZERO_GGUF_F32, s2, 1), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_gguf_add_tensor(w, "t", ZERO_GGUF_F32, s2, 1));
    ZT_EQ_INT(zero_gguf_add_tensor(w, "t", ZERO_GGUF_F32, s2, 1), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_gguf_set_u32(w, "late", 1), ZERO_ERR_STATE);
    const float v[3] = {1, 2, 3};
    ZT_OK(zero_gguf_write(w, v, 4));
    ZT_EQ_INT(zero_gguf_finish(w), ZERO_ERR_STATE); /* 4 of 8 bytes */
    ZT_CHECK(strstr(zero_gguf_writer_last_error(w), "lacking 4 of its 8 bytes") != NULL);
    ZT_EQ_INT(zero_gguf_write(w, v, 8), ZERO_ERR_INVALID_ARG); /* past the end */
    ZT_OK(zero_gguf_write(w, v + 1, 4));
    ZT_OK(zero_gguf_finish(w));
    ZT_EQ_INT(zero_gguf_write(w, v, 4), ZERO_ERR_STATE);
    zero_gguf_writer_free(w);
    ZT_EQ_INT(zero_gguf_writer_create(&w, NULL, "", &err), ZERO_ERR_INVALID_ARG);
    /* freed unfinished: no temporary, no file */
    path_of(p, sizeof p, "unfinished.gguf");
    ZT_OK(zero_gguf_writer_create(&w, NULL, p, &err));
    zero_gguf_writer_free(w);
    char tmp[700];
    snprintf(tmp, sizeof tmp, "%s.tmp", p);
    ZT_CHECK(access(p, F_OK) != 0 && access(tmp, F_OK) != 0);
}

/* Every write, fsync and the rename failing in turn: an error, the old file as it was. */
static void test_faults(void) {
    char p[600];
    path_of(p, sizeof p, "f.gguf");
    ZT_OK(write_file(p, NULL, 4096));
    size_t n0;
    unsigned char *before = read_all(p, &n0);
    const char *specs[] = {"write:1:eio", "write:2:enospc", "fsync:1:eio", "rename:1:eio", "open:1:enospc"};
    for (int k = 0; k < 5; k++) {
        zero_error err;
        zero_io *inner = NULL, *io = NULL;
        ZT_OK(zero_io_create_posix(&inner, &err));
        ZT_OK(zero_io_create_fault(&io, inner, 1, specs[k], &err));
        for (int j = 0; j < 32; j++) row[j] += 1.0f; /* another file's contents */
        const zero_status s = write_file(p, io, 7);
        zero_io_free(io);
        ZT_CHECKF(s == ZERO_ERR_IO || s == ZERO_ERR_NOSPACE, "%s: status %d", specs[k], s);
        size_t n;
        unsigned char *now = read_all(p, &n);
        ZT_CHECKF(n == n0 && !memcmp(now, before, n), "%s: the old file changed", specs[k]);
        free(now);
        char tmp[700];
        snprintf(tmp, sizeof tmp, "%s.tmp", p);
        ZT_CHECKF(access(tmp, F_OK) != 0, "%s: the temporary file stayed", specs[k]);
    }
    free(before);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "/tmp/zt_gguf_XXXXXX");
    if (!mkdtemp(g_dir)) return 1;
    test_layout();
    test_q8_0();
    test_refusals();
    test_faults();
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", g_dir);
    if (system(cmd)) fprintf(stderr, "could not remove %s\n", g_dir);
    return zt_finish("test_gguf");
}
