/* The decoder's training data (models/decoder/data.h): text by byte, token files through
 * zero_tokfile (ZEROTOK1 read as before, ZEROTOK2 with uint32 ids, masks and packed rows), JSONL
 * and text through a tokenizer, masked targets (-1 where mask[t+1] is 0), bad inputs with their
 * messages, and the sampling rule: the global batch of a step is the same for any split of
 * G = world * B * K sequences over ranks and micro-batches; packed rows are seen once per epoch. */
#include <stdint.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder/data.h"
#include "harness.h"

static char dir[256], fix[512];

static void write_bytes(const char *name, const void *p, size_t n) {
    char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

static const char *at(const char *name) {
    static char path[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(path[k], sizeof path[k], "%s/%s", dir, name);
    return path[k];
}

static zero_status open_path(dec_data **d, const char *path, double vf, zero_tokenizer *tok, int seq, int skip,
                             zero_error *err) {
    dec_data_opts o;
    dec_data_opts_default(&o);
    o.path = path;
    o.val_fraction = vf;
    o.tok = tok;
    o.seq = seq;
    o.skip_bad = skip;
    return dec_data_open(d, &o, err);
}

static void test_text(void) {
    const char *text = "hello, world\nsecond line\n"; /* 25 bytes: train 20, val 5 */
    write_bytes("a.txt", text, strlen(text));
    dec_data *d = NULL;
    zero_error err = {{0}};
    ZT_OK(open_path(&d, at("a.txt"), 0.2, NULL, 0, 0, &err));
    if (!d) return;
    const uint64_t n = strlen(text);
    ZT_EQ_INT(dec_data_vocab(d), 256);
    ZT_EQ_INT(dec_data_kind_of(d), DEC_DATA_BYTES);
    ZT_EQ_INT(dec_data_row(d), 0);
    ZT_CHECK(!dec_data_has_mask(d));
    ZT_EQ_INT(dec_data_num_tokens(d, DEC_SPLIT_VAL), 5);
    ZT_EQ_INT(dec_data_num_tokens(d, DEC_SPLIT_TRAIN), n - 5);
    int32_t in[8], tg[8];
    /* the validation split is the end of the text: its one window of T = 4 */
    ZT_EQ_INT(dec_data_val_batches(d, 1, 4), 1);
    ZT_OK(dec_data_batch(d, DEC_SPLIT_VAL, 1, 0, 1, 0, 1, 4, in, tg, NULL, &err));
    for (int t = 0; t < 4; t++) {
        ZT_EQ_INT(in[t], (unsigned char)text[20 + t]);
        ZT_EQ_INT(tg[t], (unsigned char)text[21 + t]);
    }
    /* train sequences are windows of the first 20 bytes, targets shifted by one */
    for (int64_t s = 0; s < 20; s++) {
        ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 7, s, 2, 0, 2, 4, in, tg, NULL, &err));
        for (int j = 0; j < 2; j++) {
            int found = 0;
            for (int st = 0; st + 5 <= 20 && !found; st++) {
                int ok = 1;
                for (int t = 0; t < 4; t++) ok &= in[4 * j + t] == text[st + t] && tg[4 * j + t] == text[st + t + 1];
                found = ok;
            }
            ZT_CHECKF(found, "step %lld: sequence %d is not a window of the train split", (long long)s, j);
        }
    }
    ZT_OK(dec_data_check(d, 4, 256, &err));
    /* val has 5 tokens: T = 4 fits (needs T+1), T = 5 does not */
    ZT_EQ_INT(dec_data_check(d, 5, 256, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "longer than the data") && strstr(err.msg, "validation"), "message: %s", err.msg);
    ZT_EQ_INT(dec_data_check(d, 4, 200, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "vocabulary 256"), "message: %s", err.msg);
    ZT_EQ_INT(dec_data_batch(d, DEC_SPLIT_TRAIN, 1, 0, 1, 0, 1, 20, in, tg, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "sequence length 20"), "message: %s", err.msg);
    ZT_EQ_INT(dec_data_batch(d, DEC_SPLIT_TRAIN, 1, 0, 8, 6, 3, 4, in, tg, NULL, &err), ZERO_ERR_INVALID_ARG);
    dec_data_free(d);
    dec_data_free(NULL);
}

/* A ZEROTOK1 file written byte by byte (the format earlier versions wrote). */
static void write_tok1(const char *name, const uint16_t *t, uint64_t count, uint32_t vocab, size_t cut) {
    unsigned char buf[32 + 2 * 64] = "ZEROTOK1";
    const uint32_t one = 1;
    memcpy(buf + 8, &one, 4);
    memcpy(buf + 12, &vocab, 4);
    memcpy(buf + 16, &count, 8);
    for (uint64_t i = 0; i < count; i++) buf[32 + 2 * i] = (unsigned char)t[i], buf[33 + 2 * i] = (unsigned char)(t[i] >> 8);
    write_bytes(name, buf, 32 + 2 * count - cut);
}

static void test_bad_files(void) {
    dec_data *d = NULL;
    zero_error err = {{0}};
    ZT_EQ_INT(open_path(&d, at("missing.txt"), 0.05, NULL, 0, 0, &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "missing.txt"), "message: %s", err.msg);
    write_bytes("empty.txt", "", 0);
    ZT_EQ_INT(open_path(&d, at("empty.txt"), 0.05, NULL, 0, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "empty"), "message: %s", err.msg);
    write_bytes("bin.dat2", "abc\0def", 7);
    ZT_EQ_INT(open_path(&d, at("bin.dat2"), 0.05, NULL, 0, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "binary") && strstr(err.msg, "offset 3"), "message: %s", err.msg);
    ZT_EQ_INT(open_path(&d, at("a.txt"), -0.5, NULL, 0, 0, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(d == NULL);

    /* ZEROTOK1 (read through zero_tokfile as before) and its header faults */
    const uint16_t t3[3] = {1, 9, 4};
    write_tok1("ok.tok", t3, 3, 10, 0);
    ZT_CHECK(dec_data_is_token_file(at("ok.tok")));
    ZT_CHECK(!dec_data_is_token_file(at("a.txt")) && !dec_data_is_token_file(dir) && !dec_data_is_token_file(NULL));
    ZT_OK(open_path(&d, at("ok.tok"), 0.0, NULL, 0, 0, &err));
    if (d) {
        int32_t in[2], tg[2];
        ZT_EQ_INT(dec_data_vocab(d), 10);
        ZT_EQ_INT(dec_data_kind_of(d), DEC_DATA_TOKFILE);
        ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 3, 0, 1, 0, 1, 2, in, tg, NULL, &err)); /* the only window */
        ZT_CHECK(in[0] == 1 && in[1] == 9 && tg[0] == 9 && tg[1] == 4);
        dec_data_free(d);
        d = NULL;
    }
    write_tok1("short.tok", t3, 3, 10, 2);
    ZT_EQ_INT(open_path(&d, at("short.tok"), 0.0, NULL, 0, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "3 tokens"), "message: %s", err.msg);
    write_tok1("hdr.tok", t3, 3, 10, 18);
    ZT_EQ_INT(open_path(&d, at("hdr.tok"), 0.0, NULL, 0, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "truncated"), "message: %s", err.msg);
    const uint16_t bad[3] = {1, 10, 4}; /* token == vocab: found when the file is opened */
    write_tok1("range.tok", bad, 3, 10, 0);
    ZT_EQ_INT(open_path(&d, at("range.tok"), 0.0, NULL, 0, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "token 10 at index 1"), "message: %s", err.msg);
    if (d) {
        dec_data_free(d);
        d = NULL;
    }
    unsigned char v2[32 + 6];
    write_tok1("ver.tok", t3, 3, 10, 0);
    FILE *f = fopen(at("ver.tok"), "rb");
    ZT_CHECK(f && fread(v2, 1, sizeof v2, f) == sizeof v2);
    if (f) fclose(f);
    v2[8] = 2;
    write_bytes("ver.tok", v2, sizeof v2);
    ZT_EQ_INT(open_path(&d, at("ver.tok"), 0.0, NULL, 0, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "version 2"), "message: %s", err.msg);
    /* a token file's vocabulary against the model's */
    ZT_OK(open_path(&d, at("ok.tok"), 0.0, NULL, 0, 0, &err));
    if (d) {
        ZT_EQ_INT(dec_data_check(d, 2, 9, &err), ZERO_ERR_INVALID_ARG);
        ZT_CHECKF(strstr(err.msg, "vocabulary 10") && strstr(err.msg, "model's 9"), "message: %s", err.msg);
        dec_data_free(d);
    }
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
    dec_data *d = NULL;
    zero_error err = {{0}};
    ZT_OK(open_path(&d, sub, 0.0, NULL, 0, 0, &err));
    if (!d) return;
    ZT_EQ_INT(dec_data_num_tokens(d, DEC_SPLIT_TRAIN), 5);
    int32_t in[4], tg[4];
    ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 1, 0, 1, 0, 1, 4, in, tg, NULL, &err)); /* "AABBB": one window */
    ZT_CHECK(in[0] == 'A' && in[1] == 'A' && in[2] == 'B' && tg[3] == 'B');
    ZT_CHECKF(strstr(dec_data_describe(d), "2 files"), "describe: %s", dec_data_describe(d));
    dec_data_free(d);
    write_bytes("corpus/c", "x\0y", 3);
    ZT_EQ_INT(open_path(&d, sub, 0.0, NULL, 0, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "corpus/c"), "message: %s", err.msg);
}

static void test_fortunes(void) {
    dec_data *d = NULL;
    zero_error err = {{0}};
    ZT_OK(dec_data_open(&d, NULL, &err));
    if (!d) {
        ZT_FAIL("default corpus: %s (install Debian's fortunes package: make deps)", err.msg);
        return;
    }
    const uint64_t n = dec_data_num_tokens(d, DEC_SPLIT_TRAIN) + dec_data_num_tokens(d, DEC_SPLIT_VAL);
    ZT_CHECKF(n > 1000000, "fortunes: %llu tokens", (unsigned long long)n);
    ZT_EQ_INT(dec_data_num_tokens(d, DEC_SPLIT_VAL), (uint64_t)(0.05 * n));
    ZT_OK(dec_data_check(d, 1024, 256, &err));
    printf("fortunes: %s\n", dec_data_describe(d));
    dec_data_free(d);
}

/* A stream token file whose token i is i + 1000 (uint32 ids past 65535), with a mask that drops
 * every token divisible by 7: a sequence's first input says where it starts, and the targets that
 * must be -1 are known. */
static void test_stream(void) {
    enum { N = 100000, T = 16 };
    int32_t *tok = malloc(N * sizeof *tok);
    uint8_t *mask = malloc(N);
    for (int i = 0; i < N; i++) tok[i] = i + 1000, mask[i] = (i + 1000) % 7 != 0;
    zero_error err = {{0}};
    ZT_OK(zero_tokfile_write(at("seq.tok"), tok, mask, NULL, N, N + 1000, 0, &err));
    dec_data *d = NULL;
    ZT_OK(open_path(&d, at("seq.tok"), 0.1, NULL, 0, 0, &err));
    if (!d) goto out;
    ZT_CHECK(dec_data_has_mask(d));
    ZT_EQ_INT(dec_data_vocab(d), N + 1000);
    const int64_t n_train = (int64_t)dec_data_num_tokens(d, DEC_SPLIT_TRAIN);
    ZT_EQ_INT(n_train, 90000);
    /* G = 8 sequences per step split three ways: (world 1, B 2, K 4), (world 4, B 2, K 1),
     * (world 2, B 1, K 4) — the sequences, numbered j, are the same */
    const struct { int W, B, K; } ways[3] = {{1, 2, 4}, {4, 2, 1}, {2, 1, 4}};
    int32_t ref[8 * T], got[8 * T], in[8 * T], tg[8 * T];
    double mean = 0;
    int nstart = 0, dropped = 0;
    for (int64_t step = 0; step < 50; step++) {
        for (int w = 0; w < 3; w++) {
            for (int r = 0; r < ways[w].W; r++) {
                for (int k = 0; k < ways[w].K; k++) {
                    const int64_t first = dec_data_first(r, ways[w].B, ways[w].K, k);
                    ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 1234, step, 8, first, ways[w].B, T, in, tg, NULL, &err));
                    memcpy(got + first * T, in, sizeof(int32_t) * ways[w].B * T);
                    for (int i = 0; i < ways[w].B * T; i++) {
                        ZT_EQ_INT(tg[i], (in[i] + 1) % 7 ? in[i] + 1 : -1);
                        dropped += tg[i] < 0;
                    }
                }
            }
            if (w == 0) memcpy(ref, got, sizeof ref);
            else ZT_CHECKF(!memcmp(ref, got, sizeof ref), "step %lld: split %d differs", (long long)step, w);
        }
        for (int j = 0; j < 8; j++) {
            const int32_t s = ref[j * T] - 1000;
            ZT_CHECK(s >= 0 && s + T < n_train); /* inside the train split, T+1 tokens */
            for (int t = 1; t < T; t++) ZT_EQ_INT(ref[j * T + t], s + t + 1000);
            mean += s;
            nstart++;
        }
    }
    ZT_CHECK(dropped > 0);
    /* starts are uniform over [0, n_train - T): mean within 4 standard errors */
    mean /= nstart;
    const double mu = (n_train - T - 1) / 2.0, se = (n_train - T) / sqrt(12.0 * nstart);
    ZT_CHECKF(fabs(mean - mu) < 4 * se, "mean start %.0f, expected %.0f +- %.0f", mean, mu, 4 * se);
    /* another seed, another step: other sequences */
    ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 1235, 49, 8, 0, 8, T, in, tg, NULL, &err));
    ZT_CHECK(memcmp(in, ref, sizeof in) != 0);

    /* validation: windows in order, batch s sequence j = window (s*G + j) mod W */
    const int64_t W = (10000 - 1) / T;
    ZT_EQ_INT(dec_data_val_batches(d, 8, T), W / 8);
    for (int64_t s = 0; s < 3; s++) {
        ZT_OK(dec_data_batch(d, DEC_SPLIT_VAL, 99, s * 50, 8, 0, 8, T, in, tg, NULL, &err));
        for (int j = 0; j < 8; j++) {
            const int64_t w = (s * 50 * 8 + j) % W;
            ZT_EQ_INT(in[j * T], 1000 + 90000 + w * T);
            const int32_t last = (int32_t)(1000 + 90000 + w * T + T);
            ZT_EQ_INT(tg[j * T + T - 1], last % 7 ? last : -1);
        }
    }
    dec_data_free(d);
out:
    free(tok);
    free(mask);
}

/* Packed rows: 40 rows of R = T + 1 tokens, token = its index, a mask; 10% (4 rows) validation. */
static void test_packed(void) {
    enum { T = 8, R = T + 1, ROWS = 40, N = ROWS * R };
    int32_t tok[N];
    uint8_t mask[N];
    for (int i = 0; i < N; i++) tok[i] = i, mask[i] = (i * 5 + 3) % 4 != 0;
    zero_error err = {{0}};
    ZT_OK(zero_tokfile_write(at("rows.tok"), tok, mask, NULL, N, N, R, &err));
    dec_data *d = NULL;
    ZT_OK(open_path(&d, at("rows.tok"), 0.1, NULL, 0, 0, &err));
    if (!d) return;
    ZT_EQ_INT(dec_data_row(d), R);
    ZT_EQ_INT(dec_data_num_rows(d, DEC_SPLIT_TRAIN), 36);
    ZT_EQ_INT(dec_data_num_rows(d, DEC_SPLIT_VAL), 4);
    ZT_CHECKF(strstr(dec_data_describe(d), "40 rows of 9 tokens"), "describe: %s", dec_data_describe(d));
    ZT_EQ_INT(dec_data_check(d, T + 1, N, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "rows of 9 tokens") && strstr(err.msg, "--seq 8"), "message: %s", err.msg);
    ZT_OK(dec_data_check(d, T, N, &err));
    /* G = 6: steps 0-5 are epoch 0 (36 rows), 6-11 epoch 1; split three ways alike */
    const struct { int W, B, K; } ways[3] = {{1, 6, 1}, {2, 3, 1}, {3, 1, 2}};
    int32_t in[6 * T], tg[6 * T], row_of[2][36];
    for (int64_t step = 0; step < 12; step++) {
        int32_t ref[6] = {0};
        for (int w = 0; w < 3; w++) {
            for (int r = 0; r < ways[w].W; r++)
                for (int k = 0; k < ways[w].K; k++) {
                    const int64_t first = dec_data_first(r, ways[w].B, ways[w].K, k);
                    ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 5, step, 6, first, ways[w].B, T, in, tg, NULL, &err));
                    for (int b = 0; b < ways[w].B; b++) {
                        const int32_t s = in[b * T];
                        ZT_CHECKF(s % R == 0 && s / R < 36, "sequence starts at token %d: not a train row", s);
                        for (int t = 0; t < T; t++) {
                            ZT_EQ_INT(in[b * T + t], s + t);
                            ZT_EQ_INT(tg[b * T + t], mask[s + t + 1] ? s + t + 1 : -1);
                        }
                        if (w == 0) ref[first + b] = s / R;
                        else ZT_EQ_INT(s / R, ref[first + b]);
                    }
                }
        }
        for (int j = 0; j < 6; j++) row_of[step / 6][(step % 6) * 6 + j] = ref[j];
    }
    for (int e = 0; e < 2; e++) { /* every train row once per epoch */
        int seen[36] = {0};
        for (int i = 0; i < 36; i++) seen[row_of[e][i]]++;
        for (int r = 0; r < 36; r++) ZT_CHECKF(seen[r] == 1, "epoch %d: row %d seen %d times", e, r, seen[r]);
    }
    ZT_CHECK(memcmp(row_of[0], row_of[1], sizeof row_of[0]) != 0); /* each epoch its own order */
    int identity = 1;
    for (int i = 0; i < 36; i++) identity &= row_of[0][i] == i;
    ZT_CHECK(!identity);
    /* G = 5 does not divide 36: global sequences 0..35 are still epoch 0, each row once */
    int seen[36] = {0};
    for (int64_t step = 0; step * 5 < 36; step++) {
        ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 5, step, 5, 0, 5, T, in, tg, NULL, &err));
        for (int j = 0; j < 5 && step * 5 + j < 36; j++) {
            seen[in[j * T] / R]++;
            ZT_EQ_INT(in[j * T] / R, row_of[0][step * 5 + j]);
        }
    }
    for (int r = 0; r < 36; r++) ZT_EQ_INT(seen[r], 1);
    /* validation: row 36 + (s*G + j) mod 4 */
    ZT_EQ_INT(dec_data_val_batches(d, 6, T), 1);
    ZT_EQ_INT(dec_data_val_batches(d, 2, T), 2);
    ZT_OK(dec_data_batch(d, DEC_SPLIT_VAL, 5, 1, 6, 0, 6, T, in, tg, NULL, &err));
    for (int j = 0; j < 6; j++) ZT_EQ_INT(in[j * T], (36 + (6 + j) % 4) * R);
    dec_data_free(d);
    /* no validation row: the batches say so */
    ZT_OK(open_path(&d, at("rows.tok"), 0.02, NULL, 0, 0, &err));
    if (d) {
        ZT_EQ_INT(dec_data_num_rows(d, DEC_SPLIT_VAL), 0);
        ZT_EQ_INT(dec_data_val_batches(d, 6, T), 0);
        ZT_EQ_INT(dec_data_batch(d, DEC_SPLIT_VAL, 5, 0, 6, 0, 6, T, in, tg, NULL, &err), ZERO_ERR_INVALID_ARG);
        dec_data_free(d);
    }
}

/* JSONL and text through a tokenizer: the rows are zero_data's packing, the masks its masks. */
static void test_tokenized(void) {
    char tokdir[600], chats[600], text[600];
    snprintf(tokdir, sizeof tokdir, "%s/qwen2", fix);
    snprintf(chats, sizeof chats, "%s/chats.jsonl", fix);
    snprintf(text, sizeof text, "%s/fortunes.txt", fix);
    zero_tokenizer *tok = NULL;
    zero_error err = {{0}};
    ZT_OK(zero_tokenizer_load(&tok, tokdir, &err));
    if (!tok) return;
    enum { T = 95 }; /* the chats are 50, 83 and 35 tokens: two rows */
    /* the reference: zero_data on its own */
    zero_data_opts zo;
    zero_data_opts_default(&zo);
    zo.seq = T;
    zero_data *zd = NULL;
    ZT_OK(zero_data_create(&zd, tok, &zo, &err));
    ZT_OK(zero_data_add_file(zd, chats));
    ZT_OK(zero_data_finish(zd));
    const uint64_t rows = zero_data_count(zd) / (T + 1);
    const int32_t *ids = zero_data_tokens(zd);
    const uint8_t *mask = zero_data_mask(zd);
    ZT_CHECK(mask != NULL && rows >= 2);
    dec_data *d = NULL;
    ZT_OK(open_path(&d, chats, 0.0, tok, T, 0, &err));
    if (d) {
        ZT_EQ_INT(dec_data_kind_of(d), DEC_DATA_TOKENIZED);
        ZT_EQ_INT(dec_data_row(d), T + 1);
        ZT_EQ_INT(dec_data_vocab(d), zero_tokenizer_vocab_size(tok));
        ZT_EQ_INT(dec_data_num_rows(d, DEC_SPLIT_TRAIN), rows);
        ZT_CHECK(dec_data_has_mask(d));
        int32_t *in = malloc(rows * T * sizeof *in), *tg = malloc(rows * T * sizeof *tg);
        ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 3, 0, (int64_t)rows, 0, (int)rows, T, in, tg, NULL, &err));
        int matched = 0, ignored = 0;
        for (uint64_t j = 0; j < rows; j++)
            for (uint64_t r = 0; r < rows; r++) {
                const int32_t *row = ids + r * (T + 1);
                int same = 1;
                for (int t = 0; t < T && same; t++)
                    same = in[j * T + t] == row[t] && tg[j * T + t] == (mask[r * (T + 1) + t + 1] ? row[t + 1] : -1);
                matched += same;
            }
        for (uint64_t i = 0; i < rows * T; i++) ignored += tg[i] < 0;
        ZT_EQ_INT(matched, rows); /* one epoch: every packed row once, with its mask */
        ZT_CHECK(ignored > 0);
        free(in);
        free(tg);
        dec_data_free(d);
    }
    zero_data_free(zd);
    /* JSONL needs a sequence length */
    ZT_EQ_INT(open_path(&d, chats, 0.0, tok, 0, 0, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "sequence length"), "message: %s", err.msg);
    /* a directory with a JSONL file is packed examples */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/jsonl", dir);
    mkdir(sub, 0755);
    const char *good = "{\"text\": \"hello there\"}\n{\"prompt\": \"Q?\", \"completion\": \" A.\"}\n";
    write_bytes("jsonl/a.jsonl", good, strlen(good));
    ZT_OK(open_path(&d, sub, 0.0, tok, 15, 0, &err));
    if (d) {
        ZT_EQ_INT(dec_data_row(d), 16);
        dec_data_free(d);
    }
    /* bad lines: refused with file:line, or skipped and counted */
    const char *badl = "{\"text\": \"ok\"}\n{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}\nnot json\n";
    write_bytes("bad.jsonl", badl, strlen(badl));
    ZT_EQ_INT(open_path(&d, at("bad.jsonl"), 0.0, tok, 15, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "bad.jsonl:2:") && strstr(err.msg, "robot"), "message: %s", err.msg);
    ZT_OK(open_path(&d, at("bad.jsonl"), 0.0, tok, 15, 1, &err));
    if (d) {
        const char *first;
        ZT_EQ_INT(dec_data_skipped(d, &first), 2);
        ZT_CHECKF(strstr(first, "bad.jsonl:2:"), "first skipped: %s", first);
        ZT_CHECKF(strstr(dec_data_describe(d), "2 bad examples skipped"), "describe: %s", dec_data_describe(d));
        dec_data_free(d);
    }
    /* every line bad and skipped: no data */
    write_bytes("allbad.jsonl", "nope\n", 5);
    ZT_EQ_INT(open_path(&d, at("allbad.jsonl"), 0.0, tok, 15, 1, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "no example"), "message: %s", err.msg);
    /* text: one stream of the document's ids (BOS as the tokenizer adds it, EOS after) */
    ZT_OK(open_path(&d, text, 0.0, tok, 63, 0, &err));
    if (d) {
        ZT_EQ_INT(dec_data_row(d), 0);
        zero_token_ids ref = {0};
        FILE *f = fopen(text, "rb");
        char *buf = malloc(1 << 20);
        const size_t len = f ? fread(buf, 1, 1 << 20, f) : 0;
        if (f) fclose(f);
        ZT_OK(zero_tokenizer_encode(tok, buf, len, ZERO_TOK_ADD_SPECIAL, &ref));
        const size_t n = ref.n + (ref.ids[ref.n - 1] != zero_tokenizer_eos(tok));
        ZT_EQ_INT(dec_data_num_tokens(d, DEC_SPLIT_TRAIN), n);
        int32_t in[8], tg[8];
        ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 1, 0, 1, 0, 1, 8, in, tg, NULL, &err));
        int found = 0;
        for (size_t s = 0; s + 9 <= ref.n && !found; s++) found = !memcmp(in, ref.ids + s, sizeof in) && tg[0] == ref.ids[s + 1];
        ZT_CHECK(found);
        zero_token_ids_free(&ref);
        free(buf);
        dec_data_free(d);
    }
    write_bytes("bin.txt", "ab\0c", 4);
    ZT_EQ_INT(open_path(&d, at("bin.txt"), 0.0, tok, 15, 0, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "binary"), "message: %s", err.msg);
    zero_tokenizer_free(tok);
}

/* val_fraction 1 (zero train --val-data): all of it is the validation split, in order from the
 * first token or row; it has no train split, and a train batch of it is refused. */
static void test_val_only(void) {
    const char *text = "hello, world\nsecond line\n"; /* 25 bytes: 6 windows of 4 */
    write_bytes("v.txt", text, strlen(text));
    dec_data *d = NULL;
    zero_error err = {{0}};
    ZT_EQ_INT(open_path(&d, at("v.txt"), 1.5, NULL, 0, 0, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "expected a number in [0, 1]"), "message: %s", err.msg);
    ZT_OK(open_path(&d, at("v.txt"), 1.0, NULL, 0, 0, &err));
    if (!d) return;
    ZT_EQ_INT(dec_data_num_tokens(d, DEC_SPLIT_VAL), 25);
    ZT_EQ_INT(dec_data_num_tokens(d, DEC_SPLIT_TRAIN), 0);
    ZT_CHECKF(strstr(dec_data_describe(d), "25 tokens, all for validation"), "describe: %s", dec_data_describe(d));
    ZT_OK(dec_data_check(d, 4, 256, &err)); /* no train split, and none asked for */
    ZT_EQ_INT(dec_data_check(d, 25, 256, &err), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(dec_data_val_batches(d, 2, 4), 3);
    int32_t in[8], tg[8];
    ZT_OK(dec_data_batch(d, DEC_SPLIT_VAL, 1, 2, 2, 0, 2, 4, in, tg, NULL, &err)); /* windows 4 and 5 */
    for (int t = 0; t < 8; t++) {
        ZT_EQ_INT(in[t], (unsigned char)text[16 + t]);
        ZT_EQ_INT(tg[t], (unsigned char)text[17 + t]);
    }
    ZT_EQ_INT(dec_data_batch(d, DEC_SPLIT_TRAIN, 1, 0, 1, 0, 1, 4, in, tg, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "validation data only"), "message: %s", err.msg);
    dec_data_free(d);
    /* packed rows: every row validates, row 0 first, even fewer than 20 of them */
    enum { T = 4, R = T + 1, ROWS = 3, N = ROWS * R };
    int32_t tok[N];
    for (int i = 0; i < N; i++) tok[i] = i;
    ZT_OK(zero_tokfile_write(at("vrows.tok"), tok, NULL, NULL, N, N, R, &err));
    ZT_OK(open_path(&d, at("vrows.tok"), 1.0, NULL, 0, 0, &err));
    if (!d) return;
    ZT_EQ_INT(dec_data_num_rows(d, DEC_SPLIT_VAL), 3);
    ZT_EQ_INT(dec_data_num_rows(d, DEC_SPLIT_TRAIN), 0);
    ZT_OK(dec_data_check(d, T, N, &err));
    ZT_EQ_INT(dec_data_val_batches(d, 3, T), 1);
    int32_t pin[3 * T], ptg[3 * T];
    ZT_OK(dec_data_batch(d, DEC_SPLIT_VAL, 9, 0, 3, 0, 3, T, pin, ptg, NULL, &err));
    for (int j = 0; j < 3; j++)
        for (int t = 0; t < T; t++) ZT_EQ_INT(pin[j * T + t], j * R + t);
    dec_data_free(d);
}

/* Documents (dec_data_batch's docs): each input's document as its first token's position, a target
 * that starts an example -1; for packed rows and for a stream's windows (which may start inside an
 * example), against the starts written. A file without starts refuses docs, naming it. */
static void test_docs(void) {
    enum { T = 8, R = T + 1, ROWS = 12, N = ROWS * R };
    int32_t tok[N], in[4 * T], tg[4 * T], dc[4 * T];
    uint8_t starts[N];
    zero_error err = {{0}};
    for (int i = 0; i < N; i++) tok[i] = i, starts[i] = i % R == 0 || (i * 7 + 2) % 5 == 0;
    for (int packed = 0; packed < 2; packed++) {
        const char *name = packed ? "docrows.tok" : "docstream.tok";
        ZT_OK(zero_tokfile_write(at(name), tok, NULL, starts, N, N, packed ? R : 0, &err));
        dec_data *d = NULL;
        ZT_OK(open_path(&d, at(name), 0.0, NULL, 0, 0, &err));
        if (!d) return;
        ZT_EQ_INT(dec_data_has_docs(d), 1);
        int checked = 0;
        for (int step = 0; step < 6; step++) {
            ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 3, step, 4, 0, 4, T, in, tg, dc, &err));
            for (int j = 0; j < 4; j++) {
                const int s = in[j * T]; /* the sequence's first token (tokens are their indices) */
                int doc = 0;
                for (int t = 0; t < T; t++) {
                    if (t > 0 && starts[s + t]) doc = t;
                    ZT_EQ_INT(dc[j * T + t], doc);
                    ZT_EQ_INT(tg[j * T + t], starts[s + t + 1] ? -1 : s + t + 1);
                    checked++;
                }
            }
        }
        ZT_CHECK(checked == 6 * 4 * T);
        dec_data_free(d);
    }
    ZT_OK(zero_tokfile_write(at("nodocs.tok"), tok, NULL, NULL, N, N, R, &err));
    dec_data *d = NULL;
    ZT_OK(open_path(&d, at("nodocs.tok"), 0.0, NULL, 0, 0, &err));
    if (!d) return;
    ZT_EQ_INT(dec_data_has_docs(d), 0);
    ZT_EQ_INT(dec_data_batch(d, DEC_SPLIT_TRAIN, 3, 0, 4, 0, 4, T, in, tg, dc, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "nodocs.tok") && strstr(err.msg, "does not record where its examples start"), "%s",
              err.msg);
    ZT_OK(dec_data_batch(d, DEC_SPLIT_TRAIN, 3, 0, 4, 0, 4, T, in, tg, NULL, &err));
    dec_data_free(d);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/zero_test_decoder_data_%d", (int)getpid());
    mkdir(dir, 0755);
    const char *src = getenv("ZERO_SOURCE_DIR");
    snprintf(fix, sizeof fix, "%s/tests/data/tokenizer", src ? src : ".");
    test_text();
    test_bad_files();
    test_directory();
    test_fortunes();
    test_stream();
    test_packed();
    test_docs();
    test_tokenized();
    test_val_only();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    return zt_finish("test_decoder_data");
}
