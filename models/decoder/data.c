/* models/decoder/data.c — the decoder's training data: text by byte, text and JSONL through a
 * tokenizer (zero_data), token files through zero_tokfile, loss masks as ignored targets, the
 * train/validation split and the world-size-independent sampling rule (rules in data.h). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decoder/data.h"
#include "decoder/decoder_internal.h"

struct dec_data {
    dec_data_kind kind;
    uint32_t row;            /* 0: a stream; R: packed rows of R tokens */
    int64_t vocab;
    uint64_t n, n_train;     /* tokens: all, and the train split's (a stream) */
    uint64_t rows, rows_train; /* packed rows: all, and the train split's */
    /* the tokens, by kind */
    unsigned char *bytes;    /* DEC_DATA_BYTES: n bytes */
    zero_data *zd;           /* DEC_DATA_TOKENIZED: its ids and mask (NULL: every token counts) */
    zero_data *pair_zd;      /* preference pairs: the tokenizer's data set (one example at a time) */
    const int32_t *ids;
    const uint8_t *mask;
    const uint8_t *starts;   /* DEC_DATA_TOKENIZED: 1 at each example's first token */
    int pairs;               /* preference pairs: rows 2p (chosen) and 2p + 1 (rejected), sampled by pair */
    int32_t *pair_ids;       /* their tokens and masks (owned) */
    uint8_t *pair_mask;
    zero_tokfile *tf;        /* DEC_DATA_TOKFILE */
    int has_mask, has_docs;
    /* scratch for one sequence's mask and starts, and the train rows' permutation of one epoch */
    uint8_t *mbuf, *sbuf;
    int32_t *tbuf;
    size_t mcap;
    uint32_t *perm;
    uint64_t perm_epoch, perm_seed;
    int perm_valid;
    uint64_t skipped;
    char first_skipped[256];
    int nfiles;
    int val_only;            /* val_fraction 1: a separate validation file, no train split */
    char path[1024];
    char desc[512];
};

void dec_data_opts_default(dec_data_opts *o) {
    memset(o, 0, sizeof *o);
    o->val_fraction = DEC_DATA_VAL_FRACTION;
}

/* ---------------------------------------------------------------- text as bytes */
/* Reads a whole file into a malloc'd buffer (*size bytes; NULL with size 0 for an empty file). A
 * data file is untrusted (docs/SECURITY.md): zero_read_file refuses one that is not a regular file
 * (a FIFO, a device) or is larger than a text document may be (ZERO_DATA_MAX_TEXT) before it
 * allocates anything. */
static zero_status read_file(const char *path, unsigned char **out, uint64_t *size, zero_error *err) {
    *out = NULL;
    *size = 0;
    char *buf = NULL;
    size_t len = 0;
    zero_error rerr = {{0}};
    zero_status st = zero_read_file(path, ZERO_DATA_MAX_TEXT, &buf, &len, &rerr);
    if (st) {
        dec__errorf(err, "data file: %s%s", rerr.msg,
                    st == ZERO_ERR_FORMAT && strstr(rerr.msg, "bytes, more than")
                        ? " (split a larger corpus into a directory of smaller files)"
                        : "");
        return st;
    }
    if (len == 0) {
        free(buf);
        buf = NULL;
    }
    *out = (unsigned char *)buf;
    *size = len;
    return ZERO_OK;
}

static zero_status check_text(const char *path, const unsigned char *buf, uint64_t size, zero_error *err) {
    const unsigned char *nul = size ? memchr(buf, 0, (size_t)size) : NULL;
    if (nul) {
        dec__errorf(err, "data file '%s' looks binary (NUL byte at offset %llu): expected a text file, JSONL or a "
                    "token file (magic ZEROTOK1 or ZEROTOK2)", path, (unsigned long long)(nul - buf));
        return ZERO_ERR_FORMAT;
    }
    return ZERO_OK;
}

/* Appends the bytes of a text file as tokens. */
static zero_status append_bytes(dec_data *d, uint64_t *cap, const char *path, const unsigned char *buf,
                                uint64_t size, zero_error *err) {
    zero_status st = check_text(path, buf, size, err);
    if (st) return st;
    if (d->n + size > *cap) {
        uint64_t nc = *cap ? *cap : 1 << 16;
        while (nc < d->n + size) nc *= 2;
        unsigned char *t = realloc(d->bytes, nc);
        if (!t) {
            dec__errorf(err, "cannot allocate %llu bytes for '%s'", (unsigned long long)nc, path);
            return ZERO_ERR_NOMEM;
        }
        d->bytes = t;
        *cap = nc;
    }
    if (size) memcpy(d->bytes + d->n, buf, (size_t)size);
    d->n += size;
    d->nfiles++;
    return ZERO_OK;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

static int is_jsonl(const char *name) { return ends_with(name, ".jsonl") || ends_with(name, ".json"); }

/* The names of a directory's entries that are data (not hidden, not *.dat), sorted; *n of them. */
static zero_status list_dir(const char *dir, char ***out, size_t *n, zero_error *err) {
    *out = NULL;
    *n = 0;
    DIR *dp = opendir(dir);
    if (!dp) {
        dec__errorf(err, "cannot open data directory '%s': %s", dir, strerror(errno));
        return ZERO_ERR_IO;
    }
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
    closedir(dp);
    if (nn) qsort(names, nn, sizeof *names, cmp_str);
    *out = names;
    *n = nn;
    return ZERO_OK;
nomem:
    for (size_t i = 0; i < nn; i++) free(names[i]);
    free(names);
    closedir(dp);
    dec__errorf(err, "out of memory listing '%s'", dir);
    return ZERO_ERR_NOMEM;
}

static void free_names(char **names, size_t n) {
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
}

/* The regular files of a directory (lstat: Debian's fortunes ship every file twice, once as a
 * *.u8 symlink), concatenated as bytes. */
static zero_status load_dir_bytes(dec_data *d, const char *dir, zero_error *err) {
    char **names;
    size_t nn;
    zero_status st = list_dir(dir, &names, &nn, err);
    if (st) return st;
    uint64_t cap = 0;
    for (size_t i = 0; i < nn && !st; i++) {
        char path[2048];
        struct stat sb;
        snprintf(path, sizeof path, "%s/%s", dir, names[i]);
        if (lstat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) continue;
        unsigned char *buf;
        uint64_t size;
        st = read_file(path, &buf, &size, err);
        if (!st) st = append_bytes(d, &cap, path, buf, size, err);
        free(buf);
    }
    free_names(names, nn);
    if (!st && d->nfiles == 0) {
        dec__errorf(err, "data directory '%s' holds no text file (regular, not *.dat)", dir);
        st = ZERO_ERR_FORMAT;
    }
    return st;
}

/* ---------------------------------------------------------------- text and JSONL through a tokenizer */
static zero_status load_tokenized(dec_data *d, const dec_data_opts *o, int is_dir, zero_error *err) {
    int packed = !is_dir && is_jsonl(o->path);
    if (is_dir) { /* JSONL inside: the whole directory is examples, packed */
        char **names;
        size_t nn;
        zero_status st = list_dir(o->path, &names, &nn, err);
        if (st) return st;
        for (size_t i = 0; i < nn; i++) packed |= is_jsonl(names[i]);
        free_names(names, nn);
    }
    if (packed && o->seq < 1) {
        dec__errorf(err, "data '%s': JSONL examples are packed into sequences: expected a sequence length", o->path);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_data_opts zo;
    zero_data_opts_default(&zo);
    zo.chat = o->chat;
    zo.skip_bad = o->skip_bad;
    zo.seq = packed ? o->seq : 0;
    zero_status st = zero_data_create(&d->zd, o->tok, &zo, err);
    if (st) return st;
    if (!is_dir && !packed) { /* one text document: refuse binary files as the byte path does */
        unsigned char *buf;
        uint64_t size;
        if ((st = read_file(o->path, &buf, &size, err))) return st;
        if (!size) {
            dec__errorf(err, "data file '%s' is empty: expected text, JSONL or a token file", o->path);
            st = ZERO_ERR_FORMAT;
        } else {
            st = check_text(o->path, buf, size, err);
        }
        if (!st && zero_data_add_text(d->zd, (const char *)buf, (size_t)size)) st = ZERO_ERR_NOMEM;
        free(buf);
        if (st == ZERO_ERR_NOMEM) dec__errorf(err, "%s", zero_data_last_error(d->zd));
        if (st) return st;
    } else if ((st = zero_data_add_file(d->zd, o->path))) {
        dec__errorf(err, "%s", zero_data_last_error(d->zd));
        return st;
    }
    if ((st = zero_data_finish(d->zd))) {
        dec__errorf(err, "data '%s': %s", o->path, zero_data_last_error(d->zd));
        return st;
    }
    zero_data_stats s;
    zero_data_get_stats(d->zd, &s);
    d->ids = zero_data_tokens(d->zd);
    d->mask = zero_data_mask(d->zd);
    d->has_mask = d->mask != NULL;
    d->starts = zero_data_starts(d->zd);
    d->has_docs = d->starts != NULL;
    d->n = zero_data_count(d->zd);
    d->row = packed ? (uint32_t)(o->seq + 1) : 0;
    d->vocab = zero_tokenizer_vocab_size(o->tok);
    d->skipped = s.skipped;
    snprintf(d->first_skipped, sizeof d->first_skipped, "%s", s.first_skipped);
    d->nfiles = (int)s.examples;
    return ZERO_OK;
}

/* ---------------------------------------------------------------- preference pairs */
typedef struct pair_ctx {
    dec_data *d;
    zero_data *zd;
    const char *path;
    int R, skip;
    size_t cap;     /* pairs the arrays hold */
    zero_error *err;
} pair_ctx;

/* The JSON example of a prompt and one completion: {"prompt", "completion"} for text, {"messages":
 * prompt + completion} for conversations (TRL's two forms); NULL with why set for another shape. */
static char *pair_example(const cJSON *prompt, const cJSON *comp, const char *field, char *why, size_t cap) {
    cJSON *o = cJSON_CreateObject();
    if (cJSON_IsString(prompt) && cJSON_IsString(comp)) {
        if (!*comp->valuestring) snprintf(why, cap, "\"%s\" is empty", field);
        cJSON_AddStringToObject(o, "prompt", prompt->valuestring);
        cJSON_AddStringToObject(o, "completion", comp->valuestring);
    } else if (cJSON_IsArray(prompt) && cJSON_IsArray(comp)) {
        if (!cJSON_GetArraySize(comp)) snprintf(why, cap, "\"%s\" holds no message", field);
        cJSON *msgs = cJSON_AddArrayToObject(o, "messages");
        for (const cJSON *m = prompt->child; m; m = m->next) cJSON_AddItemToArray(msgs, cJSON_Duplicate(m, 1));
        for (const cJSON *m = comp->child; m; m = m->next) cJSON_AddItemToArray(msgs, cJSON_Duplicate(m, 1));
    } else {
        snprintf(why, cap, "\"prompt\" and \"%s\": expected two strings, or two lists of messages (TRL's "
                 "conversational form)", field);
    }
    char *text = why[0] ? NULL : cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    return text;
}

static zero_status pair_line(void *vctx, const char *line, size_t len, uint64_t lineno) {
    pair_ctx *c = vctx;
    dec_data *d = c->d;
    char why[400] = "", where[1200];
    snprintf(where, sizeof where, "%s:%llu", c->path, (unsigned long long)lineno);
    if (!line) snprintf(why, sizeof why, "a line of %zu bytes: expected at most %llu", len, (unsigned long long)ZERO_DATA_MAX_LINE);
    else if (!len || strspn(line, " \t\r") == len) return ZERO_OK; /* a blank line */
    cJSON *j = line ? cJSON_ParseWithLength(line, len) : NULL;
    if (line && !cJSON_IsObject(j)) snprintf(why, sizeof why, "not a JSON object");
    const cJSON *pr = cJSON_GetObjectItemCaseSensitive(j, "prompt"), *ch = cJSON_GetObjectItemCaseSensitive(j, "chosen"),
                *rj = cJSON_GetObjectItemCaseSensitive(j, "rejected");
    if (!why[0] && (!pr || !ch || !rj))
        snprintf(why, sizeof why, "expected \"prompt\", \"chosen\" and \"rejected\" (missing \"%s\")",
                 !pr ? "prompt" : !ch ? "chosen" : "rejected");
    char *text[2] = {NULL, NULL};
    for (int k = 0; k < 2 && !why[0]; k++) text[k] = pair_example(pr, k ? rj : ch, k ? "rejected" : "chosen", why, sizeof why);
    if (!why[0] && !strcmp(text[0], text[1])) snprintf(why, sizeof why, "\"chosen\" and \"rejected\" are the same");
    const size_t R = (size_t)c->R, at = d->rows;
    if (!why[0] && d->rows / 2 == c->cap) {
        const size_t nc = c->cap ? 2 * c->cap : 256;
        int32_t *ni = realloc(d->pair_ids, nc * 2 * R * sizeof *ni);
        if (ni) d->pair_ids = ni;
        uint8_t *nm = ni ? realloc(d->pair_mask, nc * 2 * R) : NULL;
        if (!nm) {
            free(text[0]), free(text[1]), cJSON_Delete(j);
            dec__errorf(c->err, "out of memory reading preference pairs");
            return ZERO_ERR_NOMEM;
        }
        d->pair_mask = nm, c->cap = nc;
    }
    for (int k = 0; k < 2 && !why[0]; k++) { /* tokenized as zero_data tokenizes the example */
        const zero_status st = zero_data_add_jsonl_line(c->zd, text[k], strlen(text[k]), where);
        const uint8_t *mask;
        size_t n = 0;
        const int32_t *ids = st ? NULL : zero_data_last_example(c->zd, &mask, &n);
        const char *field = k ? "rejected" : "chosen";
        size_t counted = 0;
        for (size_t i = 1; i < n; i++) counted += mask[i];
        if (st) snprintf(why, sizeof why, "\"%s\": %s", field, zero_data_last_error(c->zd));
        else if (n > R) snprintf(why, sizeof why, "\"%s\": prompt and completion are %zu tokens, longer than a sequence "
                                 "of %zu + 1 (--seq)", field, n, R - 1);
        else if (!counted) snprintf(why, sizeof why, "\"%s\": its completion has no token that counts", field);
        if (why[0]) break;
        int32_t *row = d->pair_ids + (at + (size_t)k) * R;
        uint8_t *m = d->pair_mask + (at + (size_t)k) * R;
        memcpy(row, ids, n * sizeof *row);
        memcpy(m, mask, n);
        for (size_t i = n; i < R; i++) row[i] = ids[n - 1], m[i] = 0; /* padded with its last token (EOS), no loss */
    }
    free(text[0]), free(text[1]);
    cJSON_Delete(j);
    if (why[0]) {
        if (!c->skip) {
            dec__errorf(c->err, "%s: %s", where, why);
            return ZERO_ERR_FORMAT;
        }
        if (!d->skipped++) snprintf(d->first_skipped, sizeof d->first_skipped, "%.100s: %.150s", where, why);
        return ZERO_OK;
    }
    d->rows += 2;
    return ZERO_OK;
}

/* A JSONL (or JSON array) of {"prompt", "chosen", "rejected"}: each pair as two rows of seq + 1
 * tokens, the chosen then the rejected completion after the prompt, loss on the completions. */
static zero_status load_pairs(dec_data *d, const dec_data_opts *o, zero_error *err) {
    if (o->seq < 1 || !o->tok) {
        dec__errorf(err, "preference pairs '%s': expected a tokenizer and a sequence length", o->path);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_data_opts zo;
    zero_data_opts_default(&zo);
    zo.chat = o->chat;
    zero_status st = zero_data_create(&d->pair_zd, o->tok, &zo, err);
    if (st) return st;
    pair_ctx c = {d, d->pair_zd, o->path, o->seq + 1, o->skip_bad, 0, err};
    zero_error ferr = {{0}};
    d->pairs = 1;
    st = zero_data_foreach_example(o->path, 1, ZERO_DATA_MAX_LINE, pair_line, &c, NULL, &ferr);
    if (st && ferr.msg[0]) dec__errorf(err, "%s", ferr.msg);
    if (st) return st;
    if (!d->rows) {
        dec__errorf(err, "'%s' holds no preference pair%s", o->path, d->skipped ? " (every one was skipped)" : "");
        return ZERO_ERR_FORMAT;
    }
    d->row = (uint32_t)(o->seq + 1);
    d->ids = d->pair_ids, d->mask = d->pair_mask;
    d->has_mask = 1;
    d->n = d->rows * d->row;
    d->vocab = zero_tokenizer_vocab_size(o->tok);
    d->nfiles = (int)(d->rows / 2);
    return ZERO_OK;
}

/* ---------------------------------------------------------------- opening */
int dec_data_is_token_file(const char *path) {
    struct stat sb; /* a regular file only: opening a FIFO would wait for a writer */
    if (!path || stat(path, &sb) != 0 || !S_ISREG(sb.st_mode)) return 0;
    FILE *f = fopen(path, "rb");
    char magic[8] = {0};
    const size_t got = f ? fread(magic, 1, 8, f) : 0;
    if (f) fclose(f);
    return got == 8 && (!memcmp(magic, "ZEROTOK1", 8) || !memcmp(magic, "ZEROTOK2", 8));
}

zero_status dec_data_open(dec_data **out, const dec_data_opts *o, zero_error *err) {
    *out = NULL;
    dec_data_opts def;
    if (!o) {
        dec_data_opts_default(&def);
        o = &def;
    }
    const char *path = o->path ? o->path : DEC_DATA_DEFAULT_DIR;
    if (!(o->val_fraction >= 0.0 && o->val_fraction <= 1.0)) {
        dec__errorf(err, "validation fraction %g: expected a number in [0, 1]", o->val_fraction);
        return ZERO_ERR_INVALID_ARG;
    }
    dec_data *d = calloc(1, sizeof *d);
    if (!d) {
        dec__errorf(err, "out of memory opening '%s'", path);
        return ZERO_ERR_NOMEM;
    }
    snprintf(d->path, sizeof d->path, "%s", path);
    d->val_only = o->val_fraction == 1.0;
    d->kind = DEC_DATA_BYTES;
    d->vocab = 256;
    zero_status st = ZERO_OK;
    struct stat sb;
    if (stat(path, &sb) != 0) {
        dec__errorf(err, "cannot open data '%s': %s", path, strerror(errno));
        st = ZERO_ERR_IO;
        goto done;
    }
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) { /* a FIFO, a device, a socket */
        dec__errorf(err, "data '%s' is not a regular file or a directory: expected a text, JSONL or token file, or "
                    "a directory of them", path);
        st = ZERO_ERR_FORMAT;
        goto done;
    }
    if (!S_ISDIR(sb.st_mode) && dec_data_is_token_file(path)) {
        d->kind = DEC_DATA_TOKFILE;
        if ((st = zero_tokfile_open(&d->tf, path, err))) goto done;
        d->n = zero_tokfile_count(d->tf);
        d->vocab = zero_tokfile_vocab(d->tf);
        d->row = zero_tokfile_row(d->tf);
        d->has_mask = zero_tokfile_has_mask(d->tf);
        d->has_docs = zero_tokfile_has_starts(d->tf);
        goto split;
    }
    if (o->pairs) {
        d->kind = DEC_DATA_TOKENIZED;
        if (S_ISDIR(sb.st_mode)) {
            dec__errorf(err, "preference pairs '%s': expected a JSONL file (or one JSON array), not a directory", path);
            st = ZERO_ERR_INVALID_ARG;
        } else {
            st = load_pairs(d, &(dec_data_opts){.path = path, .tok = o->tok, .seq = o->seq, .chat = o->chat,
                                                .skip_bad = o->skip_bad},
                            err);
        }
    } else if (o->tok) {
        d->kind = DEC_DATA_TOKENIZED;
        st = load_tokenized(d, &(dec_data_opts){.path = path, .tok = o->tok, .seq = o->seq, .chat = o->chat,
                                                 .skip_bad = o->skip_bad},
                            S_ISDIR(sb.st_mode), err);
    } else if (S_ISDIR(sb.st_mode)) {
        st = load_dir_bytes(d, path, err);
    } else {
        unsigned char *buf;
        uint64_t size, cap = 0;
        st = read_file(path, &buf, &size, err);
        if (!st && size == 0) {
            dec__errorf(err, "data file '%s' is empty: expected text or a token file", path);
            st = ZERO_ERR_FORMAT;
        } else if (!st) {
            st = append_bytes(d, &cap, path, buf, size, err);
        }
        free(buf);
    }
    if (!st && d->n == 0) {
        dec__errorf(err, "data '%s' is empty: expected at least one token", path);
        st = ZERO_ERR_FORMAT;
    }
split:
    if (st) goto done;
    if (d->pairs) { /* whole pairs in each split */
        d->rows_train = d->rows - 2 * (uint64_t)floor(o->val_fraction * (double)(d->rows / 2));
        d->n_train = d->rows_train * d->row;
    } else if (d->row) {
        d->rows = d->n / d->row;
        d->rows_train = d->rows - (uint64_t)floor(o->val_fraction * (double)d->rows);
        d->n_train = d->rows_train * d->row;
    } else {
        d->n_train = d->n - (uint64_t)floor(o->val_fraction * (double)d->n);
    }
    {
        const unsigned long long n = d->n, tr = d->n_train, va = d->n - d->n_train;
        char skip[320] = "";
        if (d->skipped)
            snprintf(skip, sizeof skip, ", %llu bad example%s skipped", (unsigned long long)d->skipped,
                     d->skipped == 1 ? "" : "s");
        if (d->pairs)
            snprintf(d->desc, sizeof d->desc, "preference pairs (vocab %lld), %llu pairs of %u-token rows (train %llu, val %llu)%s",
                     (long long)d->vocab, (unsigned long long)(d->rows / 2), d->row,
                     (unsigned long long)(d->rows_train / 2), (unsigned long long)((d->rows - d->rows_train) / 2), skip);
        else if (d->val_only && d->row)
            snprintf(d->desc, sizeof d->desc, "%s (vocab %lld%s), %llu rows of %u tokens, all for validation%s",
                     d->kind == DEC_DATA_TOKFILE ? "packed token file" : "JSONL through the tokenizer",
                     (long long)d->vocab, d->has_mask ? ", loss mask" : "", (unsigned long long)d->rows, d->row, skip);
        else if (d->val_only)
            snprintf(d->desc, sizeof d->desc, "%s, %llu tokens, all for validation",
                     d->kind == DEC_DATA_BYTES      ? "text"
                     : d->kind == DEC_DATA_TOKFILE ? "tokens"
                                                   : "text through the tokenizer",
                     n);
        else if (d->kind == DEC_DATA_BYTES)
            snprintf(d->desc, sizeof d->desc, "text, %d file%s, %llu tokens (train %llu, val %llu)", d->nfiles,
                     d->nfiles == 1 ? "" : "s", n, tr, va);
        else if (d->row)
            snprintf(d->desc, sizeof d->desc, "%s (vocab %lld%s), %llu rows of %u tokens (train %llu, val %llu)%s",
                     d->kind == DEC_DATA_TOKFILE ? "packed token file" : "JSONL through the tokenizer",
                     (long long)d->vocab, d->has_mask ? ", loss mask" : "", (unsigned long long)d->rows, d->row,
                     (unsigned long long)d->rows_train, (unsigned long long)(d->rows - d->rows_train), skip);
        else if (d->kind == DEC_DATA_TOKFILE)
            snprintf(d->desc, sizeof d->desc, "tokens (vocab %lld%s), %llu tokens (train %llu, val %llu)",
                     (long long)d->vocab, d->has_mask ? ", loss mask" : "", n, tr, va);
        else
            snprintf(d->desc, sizeof d->desc, "text through the tokenizer (vocab %lld), %llu tokens (train %llu, val %llu)",
                     (long long)d->vocab, n, tr, va);
    }
done:
    if (st) {
        dec_data_free(d);
        return st;
    }
    *out = d;
    return ZERO_OK;
}

void dec_data_free(dec_data *d) {
    if (!d) return;
    free(d->bytes);
    zero_data_free(d->zd);
    zero_data_free(d->pair_zd);
    zero_tokfile_close(d->tf);
    free(d->mbuf);
    free(d->sbuf);
    free(d->pair_ids);
    free(d->pair_mask);
    free(d->tbuf);
    free(d->perm);
    free(d);
}

dec_data_kind dec_data_kind_of(const dec_data *d) { return d->kind; }
int64_t dec_data_vocab(const dec_data *d) { return d->vocab; }
uint32_t dec_data_row(const dec_data *d) { return d->row; }
int dec_data_has_mask(const dec_data *d) { return d->has_mask; }
int dec_data_has_docs(const dec_data *d) { return d->has_docs; }
int dec_data_pairs(const dec_data *d) { return d->pairs; }
const char *dec_data_describe(const dec_data *d) { return d->desc; }

uint64_t dec_data_skipped(const dec_data *d, const char **first) {
    if (first) *first = d->first_skipped;
    return d->skipped;
}

uint64_t dec_data_num_tokens(const dec_data *d, dec_split split) {
    return split == DEC_SPLIT_VAL ? d->n - d->n_train : d->n_train;
}

uint64_t dec_data_num_rows(const dec_data *d, dec_split split) {
    return split == DEC_SPLIT_VAL ? d->rows - d->rows_train : d->rows_train;
}

/* ---------------------------------------------------------------- checks and batches */
static zero_status check_split(const dec_data *d, dec_split split, int T, zero_error *err) {
    const uint64_t n = dec_data_num_tokens(d, split);
    if (T < 1 || n < (uint64_t)T + 1) {
        dec__errorf(err, "sequence length %d is longer than the data: the %s split of '%s' has %llu "
                    "tokens, expected at least T+1 = %lld (use a shorter sequence or more data)",
                    T, split == DEC_SPLIT_VAL ? "validation" : "train", d->path, (unsigned long long)n,
                    (long long)T + 1);
        return ZERO_ERR_INVALID_ARG;
    }
    return ZERO_OK;
}

zero_status dec_data_check(const dec_data *d, int T, int64_t model_vocab, zero_error *err) {
    zero_status st = ZERO_OK;
    if (d->row) {
        if (T < 1 || (uint64_t)T + 1 != d->row) {
            dec__errorf(err, "'%s' holds packed rows of %u tokens, sequences of %u: expected --seq %u (got %d)",
                        d->path, d->row, d->row - 1, d->row - 1, T);
            return ZERO_ERR_INVALID_ARG;
        }
        if (d->val_only && d->rows == 0) { /* cannot be: a packed file holds a row; said all the same */
            dec__errorf(err, "'%s' holds no row to validate on", d->path);
            return ZERO_ERR_INVALID_ARG;
        }
        if (!d->val_only && d->rows_train == 0) {
            dec__errorf(err, "'%s' has %llu rows: none left for training after the validation split", d->path,
                        (unsigned long long)d->rows);
            return ZERO_ERR_INVALID_ARG;
        }
    } else {
        if (!d->val_only) st = check_split(d, DEC_SPLIT_TRAIN, T, err);
        if (!st && d->n > d->n_train) st = check_split(d, DEC_SPLIT_VAL, T, err);
    }
    if (!st && d->vocab > model_vocab) {
        dec__errorf(err, "data '%s' has vocabulary %lld: larger than the model's %lld", d->path, (long long)d->vocab,
                    (long long)model_vocab);
        st = ZERO_ERR_INVALID_ARG;
    }
    return st;
}

/* Tokens [first, first + n) and their mask (all 1 without one) into tok and mask. */
static zero_status fetch(dec_data *d, uint64_t first, uint64_t n, int32_t *tok, uint8_t *mask, zero_error *err) {
    switch (d->kind) {
    case DEC_DATA_BYTES:
        for (uint64_t i = 0; i < n; i++) tok[i] = d->bytes[first + i];
        memset(mask, 1, (size_t)n);
        return ZERO_OK;
    case DEC_DATA_TOKENIZED:
        memcpy(tok, d->ids + first, (size_t)n * sizeof *tok);
        if (d->mask) memcpy(mask, d->mask + first, (size_t)n);
        else memset(mask, 1, (size_t)n);
        return ZERO_OK;
    case DEC_DATA_TOKFILE: {
        zero_status st = zero_tokfile_read(d->tf, first, n, tok, mask);
        if (st) dec__errorf(err, "%s", zero_tokfile_last_error(d->tf));
        return st;
    }
    }
    return ZERO_ERR_INVALID_ARG;
}

/* Start of train sequence j of step `step` of a stream: uniform over the n - T possible windows. */
static uint64_t train_start(uint64_t seed, int64_t step, int64_t j, uint64_t windows) {
    const uint64_t h =
        dec__mix64(dec__mix64(dec__mix64(seed ^ 0x64617461ull) ^ (uint64_t)step) + (uint64_t)j);
    return (uint64_t)(((unsigned __int128)h * windows) >> 64);
}

/* Train row (pair) of global sequence (pair) number g of packed data: position g mod N of epoch g /
 * N's shuffle of the N train rows (pairs). */
static zero_status train_row(dec_data *d, uint64_t seed, unsigned __int128 g, uint64_t *row, zero_error *err) {
    const uint64_t N = d->pairs ? d->rows_train / 2 : d->rows_train;
    const uint64_t epoch = (uint64_t)(g / N), pos = (uint64_t)(g % N);
    if (N > UINT32_MAX) {
        dec__errorf(err, "'%s': %llu train rows, expected at most 2^32 - 1", d->path, (unsigned long long)N);
        return ZERO_ERR_INVALID_ARG;
    }
    if (!d->perm_valid || d->perm_epoch != epoch || d->perm_seed != seed) {
        if (!d->perm && !(d->perm = malloc(N * sizeof *d->perm))) {
            dec__errorf(err, "cannot allocate the order of %llu rows", (unsigned long long)N);
            return ZERO_ERR_NOMEM;
        }
        for (uint64_t i = 0; i < N; i++) d->perm[i] = (uint32_t)i;
        uint64_t state = dec__mix64(dec__mix64(seed ^ 0x726f7773ull) ^ epoch);
        for (uint64_t i = N - 1; i > 0; i--) { /* Fisher-Yates: i swaps with a uniform k in [0, i] */
            const uint64_t k = (uint64_t)(((unsigned __int128)dec__next(&state) * (i + 1)) >> 64);
            const uint32_t t = d->perm[i];
            d->perm[i] = d->perm[k];
            d->perm[k] = t;
        }
        d->perm_epoch = epoch;
        d->perm_seed = seed;
        d->perm_valid = 1;
    }
    *row = d->perm[pos];
    return ZERO_OK;
}

/* Starts of tokens [first, first + n) into starts. */
static zero_status fetch_starts(dec_data *d, uint64_t first, uint64_t n, uint8_t *starts, zero_error *err) {
    if (d->kind == DEC_DATA_TOKENIZED) {
        memcpy(starts, d->starts + first, (size_t)n);
        return ZERO_OK;
    }
    zero_status st = zero_tokfile_read_starts(d->tf, first, n, starts);
    if (st) dec__errorf(err, "%s", zero_tokfile_last_error(d->tf));
    return st;
}

/* The pair (over all pairs) of global sequence number g of a split. */
static zero_status pair_of(dec_data *d, dec_split split, uint64_t seed, unsigned __int128 g, uint64_t *p, zero_error *err) {
    const unsigned __int128 gp = g / 2;
    if (split == DEC_SPLIT_TRAIN) return train_row(d, seed, gp, p, err);
    *p = d->rows_train / 2 + (uint64_t)(gp % ((d->rows - d->rows_train) / 2));
    return ZERO_OK;
}

zero_status dec_data_pair_of(dec_data *d, dec_split split, uint64_t seed, int64_t step, int64_t G, int64_t j,
                             uint64_t *pair, zero_error *err) {
    if (!d->pairs || step < 0 || j < 0 || j >= G || (split == DEC_SPLIT_VAL && d->rows == d->rows_train) ||
        (split == DEC_SPLIT_TRAIN && !d->rows_train)) {
        dec__errorf(err, "'%s': sequence %lld of batch %lld: not a pair of a non-empty split", d->path, (long long)j,
                    (long long)step);
        return ZERO_ERR_INVALID_ARG;
    }
    return pair_of(d, split, seed, (unsigned __int128)(uint64_t)step * (uint64_t)G + (uint64_t)j, pair, err);
}

uint64_t dec_data_num_pairs(const dec_data *d) { return d->pairs ? d->rows / 2 : 0; }

zero_status dec_data_pair_rows(dec_data *d, uint64_t pair, int T, int32_t *inputs, int32_t *targets, zero_error *err) {
    if (!d->pairs || pair >= d->rows / 2 || (uint64_t)T + 1 != d->row) {
        dec__errorf(err, "'%s': pair %llu of sequences of %d: expected a pair below %llu and rows of %d", d->path,
                    (unsigned long long)pair, T, (unsigned long long)(d->rows / 2), T + 1);
        return ZERO_ERR_INVALID_ARG;
    }
    for (int k = 0; k < 2; k++) {
        const int32_t *row = d->ids + (2 * pair + (uint64_t)k) * d->row;
        const uint8_t *m = d->mask + (2 * pair + (uint64_t)k) * d->row;
        for (int t = 0; t < T; t++) {
            inputs[(size_t)k * T + t] = row[t];
            targets[(size_t)k * T + t] = m[t + 1] ? row[t + 1] : -1;
        }
    }
    return ZERO_OK;
}

zero_status dec_data_batch(dec_data *d, dec_split split, uint64_t seed, int64_t step, int64_t G, int64_t first,
                           int n, int T, int32_t *inputs, int32_t *targets, int32_t *docs, zero_error *err) {
    zero_status st = dec_data_check(d, T, d->vocab, err);
    if (st) return st;
    if (docs && !d->has_docs) {
        dec__errorf(err, "'%s' does not record where its examples start: no document masking (a token file "
                    "written by `zero tokenize` of this version records them)", d->path);
        return ZERO_ERR_INVALID_ARG;
    }
    if (step < 0 || first < 0 || n < 0 || G < 1 || first + n > G) {
        dec__errorf(err, "batch %lld, sequences %lld .. %lld of %lld: expected step >= 0 and "
                    "0 <= first <= first + n <= G", (long long)step, (long long)first, (long long)first + n - 1,
                    (long long)G);
        return ZERO_ERR_INVALID_ARG;
    }
    if (d->pairs && (G % 2 || first % 2 || n % 2)) {
        dec__errorf(err, "preference pairs: sequences %lld .. +%d of %lld: expected whole pairs (even numbers)",
                    (long long)first, n, (long long)G);
        return ZERO_ERR_INVALID_ARG;
    }
    if (split == DEC_SPLIT_TRAIN && d->val_only) {
        dec__errorf(err, "'%s' is validation data only: it has no train split", d->path);
        return ZERO_ERR_INVALID_ARG;
    }
    if (split == DEC_SPLIT_VAL && dec_data_val_batches(d, G, T) == 0) {
        dec__errorf(err, "'%s' has no validation sequence of %d tokens", d->path, T);
        return ZERO_ERR_INVALID_ARG;
    }
    if ((size_t)T + 1 > d->mcap) {
        uint8_t *m = realloc(d->mbuf, (size_t)T + 1);
        if (m) d->mbuf = m;
        uint8_t *sb = m ? realloc(d->sbuf, (size_t)T + 1) : NULL;
        if (sb) d->sbuf = sb;
        int32_t *t = sb ? realloc(d->tbuf, ((size_t)T + 1) * sizeof *t) : NULL;
        if (!t) {
            dec__errorf(err, "out of memory");
            return ZERO_ERR_NOMEM;
        }
        d->tbuf = t;
        d->mcap = (size_t)T + 1;
    }
    const uint64_t ntok = dec_data_num_tokens(d, split);
    for (int i = 0; i < n; i++) {
        const int64_t j = first + i;
        const unsigned __int128 g = (unsigned __int128)(uint64_t)step * (uint64_t)G + (uint64_t)j;
        uint64_t start;
        if (d->pairs) { /* sequences 2i and 2i + 1 are pair i's chosen and rejected rows */
            uint64_t p;
            if ((st = pair_of(d, split, seed, g, &p, err))) return st;
            start = (2 * p + (uint64_t)(j % 2)) * d->row;
        } else if (d->row) {
            uint64_t r;
            if (split == DEC_SPLIT_TRAIN) {
                if ((st = train_row(d, seed, g, &r, err))) return st;
            } else {
                r = d->rows_train + (uint64_t)(g % (d->rows - d->rows_train));
            }
            start = r * d->row;
        } else if (split == DEC_SPLIT_TRAIN) {
            start = train_start(seed, step, j, ntok - (uint64_t)T);
        } else {
            start = d->n_train + (uint64_t)(g % ((ntok - 1) / (uint64_t)T)) * (uint64_t)T;
        }
        int32_t *in = inputs + (size_t)i * T, *tg = targets + (size_t)i * T;
        /* the T+1 tokens: inputs are the first T, targets the last T (shifted by one) */
        if ((st = fetch(d, start, (uint64_t)T + 1, d->tbuf, d->mbuf, err))) return st;
        for (int t = 0; t < T; t++) {
            in[t] = d->tbuf[t];
            tg[t] = d->mbuf[t + 1] ? d->tbuf[t + 1] : -1;
        }
        if (docs) { /* each token's document; the first token of a document is no target of the one before */
            if ((st = fetch_starts(d, start, (uint64_t)T + 1, d->sbuf, err))) return st;
            int32_t *dc = docs + (size_t)i * T;
            for (int t = 0; t < T; t++) {
                dc[t] = t == 0 || d->sbuf[t] ? t : dc[t - 1];
                if (d->sbuf[t + 1]) tg[t] = -1;
            }
        }
    }
    return ZERO_OK;
}

int64_t dec_data_val_batches(const dec_data *d, int64_t G, int T) {
    if (T < 1 || G < 1) return 0;
    int64_t w;
    if (d->row) {
        if ((uint64_t)T + 1 != d->row) return 0;
        w = (int64_t)(d->rows - d->rows_train); /* pairs: 2 sequences each, and G counts sequences */
    } else {
        const uint64_t n = dec_data_num_tokens(d, DEC_SPLIT_VAL);
        if (n < (uint64_t)T + 1) return 0;
        w = (int64_t)((n - 1) / (uint64_t)T);
    }
    if (w == 0) return 0;
    return w / G > 0 ? w / G : 1;
}
