/* GPT-2 data: byte tokenizer, token files (round trip and corrupt headers), directories, the
 * fortunes corpus, bad inputs with their messages, and the sampling rule: the global batch of a
 * step is the same for any split of G = world * B * K sequences over ranks and micro-batches. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder/data.h"
#include "harness.h"

static char dir[256];

static void write_bytes(const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static const char *at(const char *name) {
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static void test_text(void) {
    const char *text = "hello, world\nsecond line\n";
    write_bytes("a.txt", text, strlen(text));
    gpt2_data *d = NULL;
    zero_error err = {{0}};
    ZT_OK(gpt2_data_open(&d, at("a.txt"), 0.2, &err));
    if (!d) return;
    const uint64_t n = strlen(text);
    ZT_EQ_INT(gpt2_data_vocab(d), 256);
    ZT_CHECK(gpt2_data_is_text(d));
    ZT_EQ_INT(gpt2_data_num_tokens(d, GPT2_SPLIT_VAL), (uint64_t)(0.2 * n));
    ZT_EQ_INT(gpt2_data_num_tokens(d, GPT2_SPLIT_TRAIN) + gpt2_data_num_tokens(d, GPT2_SPLIT_VAL), n);
    const uint16_t *t = gpt2_data_tokens(d, GPT2_SPLIT_TRAIN);
    for (uint64_t i = 0; i < gpt2_data_num_tokens(d, GPT2_SPLIT_TRAIN); i++) ZT_EQ_INT(t[i], (unsigned char)text[i]);
    /* the validation split is the end of the text */
    ZT_EQ_INT(gpt2_data_tokens(d, GPT2_SPLIT_VAL)[gpt2_data_num_tokens(d, GPT2_SPLIT_VAL) - 1], '\n');
    ZT_OK(gpt2_data_check(d, 4, 256, &err));
    /* val has 5 tokens: T = 4 fits (needs T+1), T = 5 does not */
    ZT_EQ_INT(gpt2_data_check(d, 5, 256, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "longer than the data") && strstr(err.msg, "validation"), "message: %s", err.msg);
    ZT_EQ_INT(gpt2_data_check(d, 4, 200, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "vocabulary 256"), "message: %s", err.msg);
    int32_t in[8], tg[8];
    ZT_EQ_INT(gpt2_data_batch(d, GPT2_SPLIT_TRAIN, 1, 0, 1, 0, 1, 20, in, tg, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "sequence length 20"), "message: %s", err.msg);
    gpt2_data_free(d);
    gpt2_data_free(NULL);
}

static void test_bad_files(void) {
    gpt2_data *d = NULL;
    zero_error err = {{0}};
    ZT_EQ_INT(gpt2_data_open(&d, at("missing.txt"), 0.05, &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "missing.txt"), "message: %s", err.msg);
    write_bytes("empty.txt", "", 0);
    ZT_EQ_INT(gpt2_data_open(&d, at("empty.txt"), 0.05, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "empty"), "message: %s", err.msg);
    write_bytes("bin.dat2", "abc\0def", 7);
    ZT_EQ_INT(gpt2_data_open(&d, at("bin.dat2"), 0.05, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "binary") && strstr(err.msg, "offset 3"), "message: %s", err.msg);
    ZT_EQ_INT(gpt2_data_open(&d, at("a.txt"), 1.0, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(d == NULL);

    /* token files: header damage of every kind */
    unsigned char f[32 + 6] = "ZEROTOK1";
    const uint32_t one = 1, vocab = 10;
    const uint64_t count = 3;
    memcpy(f + 8, &one, 4);
    memcpy(f + 12, &vocab, 4);
    memcpy(f + 16, &count, 8);
    f[32] = 1, f[34] = 9, f[36] = 4;
    write_bytes("ok.tok", f, sizeof f);
    ZT_OK(gpt2_data_open(&d, at("ok.tok"), 0.0, &err));
    if (d) {
        ZT_EQ_INT(gpt2_data_vocab(d), 10);
        ZT_CHECK(!gpt2_data_is_text(d));
        ZT_EQ_INT(gpt2_data_tokens(d, GPT2_SPLIT_TRAIN)[1], 9);
        gpt2_data_free(d);
        d = NULL;
    }
    write_bytes("short.tok", f, sizeof f - 2);
    ZT_EQ_INT(gpt2_data_open(&d, at("short.tok"), 0.0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "3 tokens"), "message: %s", err.msg);
    write_bytes("hdr.tok", f, 20);
    ZT_EQ_INT(gpt2_data_open(&d, at("hdr.tok"), 0.0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "truncated"), "message: %s", err.msg);
    f[34] = 10; /* token == vocab */
    write_bytes("range.tok", f, sizeof f);
    ZT_EQ_INT(gpt2_data_open(&d, at("range.tok"), 0.0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "token 10 at index 1"), "message: %s", err.msg);
    f[34] = 9;
    f[8] = 2;
    write_bytes("ver.tok", f, sizeof f);
    ZT_EQ_INT(gpt2_data_open(&d, at("ver.tok"), 0.0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "version 2"), "message: %s", err.msg);
    const uint16_t big[2] = {3, 70};
    ZT_EQ_INT(gpt2_data_write_tokens(at("w.tok"), big, 2, 50, &err), ZERO_ERR_INVALID_ARG);
}

static void test_directory(void) {
    char sub[300];
    snprintf(sub, sizeof sub, "%s/corpus", dir);
    mkdir(sub, 0755);
    write_bytes("corpus/b", "BBB", 3);
    write_bytes("corpus/a", "AA", 2);
    write_bytes("corpus/a.dat", "\0\0\0", 3); /* fortune index files: skipped */
    write_bytes("corpus/.hidden", "HH", 2);
    char target[512], link[512];
    snprintf(target, sizeof target, "%s/corpus/a", dir);
    snprintf(link, sizeof link, "%s/corpus/a.u8", dir);
    ZT_OK(symlink(target, link)); /* symlinks: skipped (Debian ships each fortune file twice) */
    gpt2_data *d = NULL;
    zero_error err = {{0}};
    ZT_OK(gpt2_data_open(&d, sub, 0.0, &err));
    if (!d) return;
    ZT_EQ_INT(gpt2_data_num_tokens(d, GPT2_SPLIT_TRAIN), 5);
    const uint16_t *t = gpt2_data_tokens(d, GPT2_SPLIT_TRAIN);
    ZT_CHECK(t[0] == 'A' && t[1] == 'A' && t[2] == 'B' && t[4] == 'B');
    ZT_CHECKF(strstr(gpt2_data_describe(d), "2 files"), "describe: %s", gpt2_data_describe(d));
    gpt2_data_free(d);
    write_bytes("corpus/c", "x\0y", 3);
    ZT_EQ_INT(gpt2_data_open(&d, sub, 0.0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "corpus/c"), "message: %s", err.msg);
}

static void test_fortunes(void) {
    gpt2_data *d = NULL;
    zero_error err = {{0}};
    ZT_OK(gpt2_data_open(&d, NULL, GPT2_DATA_VAL_FRACTION, &err));
    if (!d) {
        ZT_FAIL("default corpus: %s (install Debian's fortunes package: make deps)", err.msg);
        return;
    }
    const uint64_t n = gpt2_data_num_tokens(d, GPT2_SPLIT_TRAIN) + gpt2_data_num_tokens(d, GPT2_SPLIT_VAL);
    ZT_CHECKF(n > 1000000, "fortunes: %llu tokens", (unsigned long long)n);
    ZT_EQ_INT(gpt2_data_num_tokens(d, GPT2_SPLIT_VAL), (uint64_t)(0.05 * n));
    ZT_OK(gpt2_data_check(d, 1024, 256, &err));
    printf("fortunes: %s\n", gpt2_data_describe(d));
    gpt2_data_free(d);
}

/* Token i of the file is i: a sequence's first input says where it starts. */
static void test_sampling(void) {
    enum { N = 50000, T = 16 };
    uint16_t *tok = malloc(N * 2);
    for (int i = 0; i < N; i++) tok[i] = (uint16_t)i;
    zero_error err = {{0}};
    ZT_OK(gpt2_data_write_tokens(at("seq.tok"), tok, N, 65536, &err));
    gpt2_data *d = NULL;
    ZT_OK(gpt2_data_open(&d, at("seq.tok"), 0.1, &err));
    if (!d) return;
    const int64_t n_train = (int64_t)gpt2_data_num_tokens(d, GPT2_SPLIT_TRAIN);
    ZT_EQ_INT(n_train, 45000);
    /* G = 8 sequences per step split three ways: (world 1, B 2, K 4), (world 4, B 2, K 1),
     * (world 2, B 1, K 4) — the sequences, numbered j, are the same */
    const struct { int W, B, K; } ways[3] = {{1, 2, 4}, {4, 2, 1}, {2, 1, 4}};
    int32_t ref[8 * T], got[8 * T], in[8 * T], tg[8 * T];
    double mean = 0;
    int nstart = 0;
    for (int64_t step = 0; step < 50; step++) {
        for (int w = 0; w < 3; w++) {
            for (int r = 0; r < ways[w].W; r++) {
                for (int k = 0; k < ways[w].K; k++) {
                    const int64_t first = gpt2_data_first(r, ways[w].B, ways[w].K, k);
                    ZT_OK(gpt2_data_batch(d, GPT2_SPLIT_TRAIN, 1234, step, 8, first, ways[w].B, T, in, tg, &err));
                    memcpy(got + first * T, in, sizeof(int32_t) * ways[w].B * T);
                    for (int i = 0; i < ways[w].B * T; i++) ZT_EQ_INT(tg[i], in[i] + 1);
                }
            }
            if (w == 0) memcpy(ref, got, sizeof ref);
            else ZT_CHECKF(!memcmp(ref, got, sizeof ref), "step %lld: split %d differs", (long long)step, w);
        }
        for (int j = 0; j < 8; j++) {
            const int32_t s = ref[j * T];
            ZT_CHECK(s >= 0 && s + T < n_train); /* inside the train split, T+1 tokens */
            for (int t = 1; t < T; t++) ZT_EQ_INT(ref[j * T + t], s + t);
            mean += s;
            nstart++;
        }
    }
    /* starts are uniform over [0, n_train - T): mean within 4 standard errors */
    mean /= nstart;
    const double mu = (n_train - T - 1) / 2.0, se = (n_train - T) / sqrt(12.0 * nstart);
    ZT_CHECKF(fabs(mean - mu) < 4 * se, "mean start %.0f, expected %.0f +- %.0f", mean, mu, 4 * se);
    /* another seed, another step: other sequences */
    ZT_OK(gpt2_data_batch(d, GPT2_SPLIT_TRAIN, 1235, 49, 8, 0, 8, T, in, tg, &err));
    ZT_CHECK(memcmp(in, ref, sizeof in) != 0);
    ZT_EQ_INT(gpt2_data_batch(d, GPT2_SPLIT_TRAIN, 1, 0, 8, 6, 3, T, in, tg, &err), ZERO_ERR_INVALID_ARG);

    /* validation: windows in order, batch s sequence j = window (s*G + j) mod W */
    const int64_t W = (5000 - 1) / T;
    ZT_EQ_INT(gpt2_data_val_batches(d, 8, T), W / 8);
    for (int64_t s = 0; s < 3; s++) {
        ZT_OK(gpt2_data_batch(d, GPT2_SPLIT_VAL, 99, s * 20, 8, 0, 8, T, in, tg, &err));
        for (int j = 0; j < 8; j++) {
            const int64_t w = (s * 20 * 8 + j) % W;
            ZT_EQ_INT(in[j * T], 45000 + w * T);
            ZT_EQ_INT(tg[j * T + T - 1], 45000 + w * T + T);
        }
    }
    gpt2_data_free(d);
    free(tok);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/zero_test_gpt2_data_%d", (int)getpid());
    mkdir(dir, 0755);
    test_text();
    test_bad_files();
    test_directory();
    test_fortunes();
    test_sampling();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return zt_finish("test_gpt2_data");
}
