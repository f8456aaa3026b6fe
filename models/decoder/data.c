/* models/decoder/data.c — training data for the decoder: text files and directories tokenized by byte,
 * ZEROTOK1 token files, the train/validation split and the world-size-independent sampling rule
 * (layouts and rules in data.h). */
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decoder/data.h"
#include "decoder/decoder_internal.h"

struct gpt2_data {
    uint16_t *tokens; /* all tokens: train then val */
    uint64_t n, n_train;
    int vocab;
    int text;
    int nfiles;
    char path[1024];
    char desc[256];
};

/* ---------------------------------------------------------------- reading */
/* Reads a whole file into a malloc'd buffer (*size bytes; NULL with size 0 for an empty file). */
static zero_status read_file(const char *path, unsigned char **out, uint64_t *size, zero_error *err) {
    *out = NULL;
    *size = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        dec__errorf(err, "cannot open data file '%s': %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    zero_status st = ZERO_OK;
    unsigned char *buf = NULL;
    long len = -1;
    if (fseek(f, 0, SEEK_END) == 0) len = ftell(f);
    if (len < 0 || fseek(f, 0, SEEK_SET) != 0) {
        dec__errorf(err, "cannot read data file '%s': %s", path, strerror(errno));
        st = ZERO_ERR_IO;
        goto done;
    }
    if (len > 0) {
        buf = malloc((size_t)len);
        if (!buf) {
            dec__errorf(err, "cannot allocate %ld bytes for data file '%s'", len, path);
            st = ZERO_ERR_NOMEM;
            goto done;
        }
        if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
            dec__errorf(err, "cannot read data file '%s': short read", path);
            free(buf);
            buf = NULL;
            st = ZERO_ERR_IO;
            goto done;
        }
    }
    *out = buf;
    *size = (uint64_t)len;
done:
    fclose(f);
    return st;
}

static uint32_t rd32(const unsigned char *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static uint64_t rd64(const unsigned char *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }
static void wr32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static void wr64(unsigned char *p, uint64_t v) {
    wr32(p, (uint32_t)v);
    wr32(p + 4, (uint32_t)(v >> 32));
}

static zero_status parse_token_file(gpt2_data *d, const unsigned char *buf, uint64_t size,
                                    zero_error *err) {
    if (size < 32) {
        dec__errorf(err, "token file '%s' is truncated: %llu bytes, expected a 32-byte header",
                     d->path, (unsigned long long)size);
        return ZERO_ERR_FORMAT;
    }
    const uint32_t version = rd32(buf + 8), vocab = rd32(buf + 12);
    const uint64_t count = rd64(buf + 16);
    if (version != 1) {
        dec__errorf(err, "token file '%s': version %u, expected 1", d->path, version);
        return ZERO_ERR_FORMAT;
    }
    if (vocab < 1 || vocab > 65536) {
        dec__errorf(err, "token file '%s': vocab %u, expected 1 .. 65536", d->path, vocab);
        return ZERO_ERR_FORMAT;
    }
    if (count == 0 || count > (size - 32) / 2 || size != 32 + 2 * count) {
        dec__errorf(err, "token file '%s': header says %llu tokens, the file holds %llu bytes "
                     "(expected 32 + 2 x count, count >= 1)",
                     d->path, (unsigned long long)count, (unsigned long long)size);
        return ZERO_ERR_FORMAT;
    }
    d->tokens = malloc(count * sizeof *d->tokens);
    if (!d->tokens) {
        dec__errorf(err, "cannot allocate %llu tokens for '%s'", (unsigned long long)count, d->path);
        return ZERO_ERR_NOMEM;
    }
    for (uint64_t i = 0; i < count; i++) {
        const uint16_t t = (uint16_t)(buf[32 + 2 * i] | buf[33 + 2 * i] << 8);
        if (t >= vocab) {
            dec__errorf(err, "token file '%s': token %u at index %llu, expected < vocab %u", d->path, t,
                         (unsigned long long)i, vocab);
            return ZERO_ERR_FORMAT;
        }
        d->tokens[i] = t;
    }
    d->n = count;
    d->vocab = (int)vocab;
    d->text = 0;
    return ZERO_OK;
}

/* Appends the bytes of a text file as tokens. */
static zero_status append_text(gpt2_data *d, uint64_t *cap, const char *path, const unsigned char *buf,
                               uint64_t size, zero_error *err) {
    const unsigned char *nul = size ? memchr(buf, 0, (size_t)size) : NULL;
    if (nul) {
        dec__errorf(err, "data file '%s' looks binary (NUL byte at offset %llu): expected a text "
                     "file or a token file (magic %s)", path, (unsigned long long)(nul - buf),
                     GPT2_TOKEN_MAGIC);
        return ZERO_ERR_FORMAT;
    }
    if (d->n + size > *cap) {
        uint64_t nc = *cap ? *cap : 1 << 16;
        while (nc < d->n + size) nc *= 2;
        uint16_t *t = realloc(d->tokens, nc * sizeof *t);
        if (!t) {
            dec__errorf(err, "cannot allocate %llu tokens for '%s'", (unsigned long long)nc, path);
            return ZERO_ERR_NOMEM;
        }
        d->tokens = t;
        *cap = nc;
    }
    for (uint64_t i = 0; i < size; i++) d->tokens[d->n + i] = buf[i];
    d->n += size;
    d->nfiles++;
    return ZERO_OK;
}

static int cmp_str(const void *a, const void *b) {
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static zero_status load_dir(gpt2_data *d, const char *dir, zero_error *err) {
    DIR *dp = opendir(dir);
    if (!dp) {
        dec__errorf(err, "cannot open data directory '%s': %s", dir, strerror(errno));
        return ZERO_ERR_IO;
    }
    zero_status st = ZERO_OK;
    char **names = NULL;
    size_t nn = 0, capn = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        if (de->d_name[0] == '.' || ends_with(de->d_name, ".dat")) continue;
        if (nn == capn) {
            capn = capn ? 2 * capn : 64;
            char **t = realloc(names, capn * sizeof *t);
            if (!t) goto nomem;
            names = t;
        }
        if (!(names[nn] = strdup(de->d_name))) goto nomem;
        nn++;
    }
    qsort(names, nn, sizeof *names, cmp_str);
    uint64_t cap = 0;
    for (size_t i = 0; i < nn && !st; i++) {
        char path[2048];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        /* lstat: Debian's fortunes ship every file twice, once as a *.u8 symlink. */
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        unsigned char *buf;
        uint64_t size;
        st = read_file(path, &buf, &size, err);
        if (!st) st = append_text(d, &cap, path, buf, size, err);
        free(buf);
    }
    if (!st && d->nfiles == 0) {
        dec__errorf(err, "data directory '%s' holds no text file (regular, not *.dat)", dir);
        st = ZERO_ERR_FORMAT;
    }
    goto done;
nomem:
    dec__errorf(err, "out of memory listing '%s'", dir);
    st = ZERO_ERR_NOMEM;
done:
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    closedir(dp);
    return st;
}

zero_status gpt2_data_open(gpt2_data **out, const char *path, double val_fraction, zero_error *err) {
    *out = NULL;
    if (!path) path = GPT2_DATA_DEFAULT_DIR;
    if (!(val_fraction >= 0.0 && val_fraction < 1.0)) {
        dec__errorf(err, "validation fraction %g: expected a number in [0, 1)", val_fraction);
        return ZERO_ERR_INVALID_ARG;
    }
    gpt2_data *d = calloc(1, sizeof *d);
    if (!d) {
        dec__errorf(err, "out of memory opening '%s'", path);
        return ZERO_ERR_NOMEM;
    }
    snprintf(d->path, sizeof d->path, "%s", path);
    d->vocab = 256;
    d->text = 1;
    zero_status st;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        dec__errorf(err, "cannot open data '%s': %s", path, strerror(errno));
        st = ZERO_ERR_IO;
    } else if (S_ISDIR(sb.st_mode)) {
        st = load_dir(d, path, err);
    } else {
        unsigned char *buf;
        uint64_t size;
        st = read_file(path, &buf, &size, err);
        if (!st && size == 0) {
            dec__errorf(err, "data file '%s' is empty: expected text or a token file", path);
            st = ZERO_ERR_FORMAT;
        } else if (!st && size >= 8 && !memcmp(buf, GPT2_TOKEN_MAGIC, 8)) {
            st = parse_token_file(d, buf, size, err);
        } else if (!st) {
            uint64_t cap = 0;
            st = append_text(d, &cap, path, buf, size, err);
        }
        free(buf);
    }
    if (!st && d->n == 0) {
        dec__errorf(err, "data '%s' is empty: expected at least one token", path);
        st = ZERO_ERR_FORMAT;
    }
    if (st) {
        gpt2_data_free(d);
        return st;
    }
    d->n_train = d->n - (uint64_t)floor(val_fraction * (double)d->n);
    if (d->text)
        snprintf(d->desc, sizeof d->desc, "text, %d file%s, %llu tokens (train %llu, val %llu)", d->nfiles,
                 d->nfiles == 1 ? "" : "s", (unsigned long long)d->n, (unsigned long long)d->n_train,
                 (unsigned long long)(d->n - d->n_train));
    else
        snprintf(d->desc, sizeof d->desc, "tokens (vocab %d), %llu tokens (train %llu, val %llu)",
                 d->vocab, (unsigned long long)d->n, (unsigned long long)d->n_train,
                 (unsigned long long)(d->n - d->n_train));
    *out = d;
    return ZERO_OK;
}

void gpt2_data_free(gpt2_data *d) {
    if (!d) return;
    free(d->tokens);
    free(d);
}

int gpt2_data_vocab(const gpt2_data *d) { return d->vocab; }
int gpt2_data_is_text(const gpt2_data *d) { return d->text; }
const char *gpt2_data_describe(const gpt2_data *d) { return d->desc; }

uint64_t gpt2_data_num_tokens(const gpt2_data *d, gpt2_split split) {
    return split == GPT2_SPLIT_VAL ? d->n - d->n_train : d->n_train;
}

const uint16_t *gpt2_data_tokens(const gpt2_data *d, gpt2_split split) {
    return split == GPT2_SPLIT_VAL ? d->tokens + d->n_train : d->tokens;
}

static zero_status check_split(const gpt2_data *d, gpt2_split split, int T, zero_error *err) {
    const uint64_t n = gpt2_data_num_tokens(d, split);
    if (T < 1 || n < (uint64_t)T + 1) {
        dec__errorf(err, "sequence length %d is longer than the data: the %s split of '%s' has %llu "
                     "tokens, expected at least T+1 = %lld (use a shorter sequence or more data)",
                     T, split == GPT2_SPLIT_VAL ? "validation" : "train", d->path,
                     (unsigned long long)n, (long long)T + 1);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

zero_status gpt2_data_check(const gpt2_data *d, int T, int model_vocab, zero_error *err) {
    zero_status st = check_split(d, GPT2_SPLIT_TRAIN, T, err);
    if (!st && d->n > d->n_train) st = check_split(d, GPT2_SPLIT_VAL, T, err);
    if (!st && d->vocab > model_vocab) {
        dec__errorf(err, "data '%s' has vocabulary %d: larger than the model's %d", d->path, d->vocab,
                     model_vocab);
        st = ZERO_ERR_INVALID_ARG;
    }
    return st;
}

/* Start of train sequence j of step `step`: uniform over the n - T possible windows. */
static uint64_t train_start(uint64_t seed, int64_t step, int64_t j, uint64_t windows) {
    const uint64_t h =
        dec__mix64(dec__mix64(dec__mix64(seed ^ 0x64617461ull) ^ (uint64_t)step) + (uint64_t)j);
    return (uint64_t)(((unsigned __int128)h * windows) >> 64);
}

zero_status gpt2_data_batch(const gpt2_data *d, gpt2_split split, uint64_t seed, int64_t step,
                            int64_t G, int64_t first, int n, int T, int32_t *inputs,
                            int32_t *targets, zero_error *err) {
    zero_status st = check_split(d, split, T, err);
    if (st) return st;
    if (step < 0 || first < 0 || n < 0 || first + n > G) {
        dec__errorf(err, "batch %lld, sequences %lld .. %lld of %lld: expected step >= 0 and "
                     "0 <= first <= first + n <= G", (long long)step, (long long)first,
                     (long long)first + n - 1, (long long)G);
        return ZERO_ERR_INVALID_ARG;
    }
    const uint16_t *tok = gpt2_data_tokens(d, split);
    const uint64_t ntok = gpt2_data_num_tokens(d, split);
    const uint64_t windows = (ntok - 1) / (uint64_t)T;
    for (int i = 0; i < n; i++) {
        const int64_t j = first + i;
        uint64_t start;
        if (split == GPT2_SPLIT_TRAIN)
            start = train_start(seed, step, j, ntok - (uint64_t)T);
        else
            start = (uint64_t)((((unsigned __int128)step * (uint64_t)G) + (uint64_t)j) % windows) *
                    (uint64_t)T;
        for (int t = 0; t < T; t++) {
            inputs[(size_t)i * T + t] = tok[start + t];
            targets[(size_t)i * T + t] = tok[start + t + 1];
        }
    }
    return ZERO_OK;
}

int64_t gpt2_data_val_batches(const gpt2_data *d, int64_t G, int T) {
    const uint64_t n = gpt2_data_num_tokens(d, GPT2_SPLIT_VAL);
    if (T < 1 || G < 1 || n < (uint64_t)T + 1) return 0;
    const int64_t w = (int64_t)((n - 1) / (uint64_t)T) / G;
    return w > 0 ? w : 1;
}

zero_status gpt2_data_write_tokens(const char *path, const uint16_t *tokens, uint64_t count, int vocab,
                                   zero_error *err) {
    if (vocab < 1 || vocab > 65536 || count == 0) {
        dec__errorf(err, "token file '%s': vocab %d and %llu tokens, expected vocab in 1 .. 65536 and "
                     "at least one token", path, vocab, (unsigned long long)count);
        return ZERO_ERR_INVALID_ARG;
    }
    for (uint64_t i = 0; i < count; i++) {
        if (tokens[i] >= vocab) {
            dec__errorf(err, "token %u at index %llu: expected < vocab %d", tokens[i],
                         (unsigned long long)i, vocab);
            return ZERO_ERR_INVALID_ARG;
        }
    }
    FILE *f = fopen(path, "wb");
    if (!f) {
        dec__errorf(err, "cannot create token file '%s': %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    unsigned char hdr[32] = {0}, chunk[8192];
    memcpy(hdr, GPT2_TOKEN_MAGIC, 8);
    wr32(hdr + 8, 1);
    wr32(hdr + 12, (uint32_t)vocab);
    wr64(hdr + 16, count);
    int ok = fwrite(hdr, 1, 32, f) == 32;
    for (uint64_t i = 0; ok && i < count;) {
        size_t k = 0;
        for (; k < sizeof chunk && i < count; i++, k += 2) {
            chunk[k] = (unsigned char)(tokens[i] & 0xff);
            chunk[k + 1] = (unsigned char)(tokens[i] >> 8);
        }
        ok = fwrite(chunk, 1, k, f) == k;
    }
    if (fclose(f) != 0) ok = 0;
    if (!ok) {
        dec__errorf(err, "cannot write token file '%s': %s", path, strerror(errno));
        remove(path);
        return ZERO_ERR_IO;
    }
    return ZERO_OK;
}
