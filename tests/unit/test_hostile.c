/* tests/unit/test_hostile.c — hostile sizes (docs/SECURITY.md, "Resource bounds"): each case runs in
 * a fresh process (this program again, with the case's name) that builds its input — a sparse
 * file that claims the size, a FIFO a writer feeds, or text in memory — then calls the reader,
 * which must refuse it with the status and the message expected while its peak RSS grows by less
 * than the case's bound over what building the input took. Outside sanitizers the address space
 * is also capped (RLIMIT_AS: what the process has + 256 MiB), so an allocation of the claimed size
 * fails the case. The table it prints is docs/SECURITY.md's. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "decoder/data.h"
#include "decoder/decoder.h"
#include "decoder/hf.h"
#include "harness.h"
#include "zero/zero.h"

#if defined(__SANITIZE_ADDRESS__)
#define ZT_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ZT_ASAN 1
#endif
#endif
#ifndef ZT_ASAN
#define ZT_ASAN 0
#endif

#define MiB (UINT64_C(1) << 20)
#define GB UINT64_C(1000000000)

static const char *g_dir; /* the case's private directory */
static char *g_text;      /* in-memory input */
static size_t g_len;
static pid_t g_writer = -1; /* the FIFO's writer */

static void path_of(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", g_dir, name); }

/* A file of `size` bytes that starts with head and is a hole after it (nothing written there). */
static void sparse(const char *name, const void *head, size_t n, uint64_t size) {
    char p[4096];
    path_of(p, sizeof p, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || (n && write(fd, head, n) != (ssize_t)n) || ftruncate(fd, (off_t)size) != 0) {
        fprintf(stderr, "sparse %s: %s\n", p, strerror(errno));
        exit(3);
    }
    close(fd);
}

static void small(const char *name, const char *text) { sparse(name, text, strlen(text), strlen(text)); }

static void copy_fixture(const char *rel, const char *name) {
    char src[4096];
    snprintf(src, sizeof src, "%s/tests/data/%s", getenv("ZERO_SOURCE_DIR") ? getenv("ZERO_SOURCE_DIR") : ".", rel);
    FILE *f = fopen(src, "rb");
    if (!f) {
        fprintf(stderr, "fixture %s: %s\n", src, strerror(errno));
        exit(3);
    }
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    small(name, buf);
}

static zero_tokenizer *fixture_tokenizer(void) {
    char p[4096];
    snprintf(p, sizeof p, "%s/tests/data/tokenizer/qwen2", getenv("ZERO_SOURCE_DIR") ? getenv("ZERO_SOURCE_DIR") : ".");
    zero_tokenizer *t = NULL;
    zero_error err;
    if (zero_tokenizer_load(&t, p, &err) != ZERO_OK) {
        fprintf(stderr, "tokenizer: %s\n", err.msg);
        exit(3);
    }
    return t;
}

static char *repeat(const char *head, const char *unit, size_t times, const char *tail, size_t *len) {
    const size_t hn = strlen(head), un = strlen(unit), tn = strlen(tail), n = hn + un * times + tn;
    char *s = malloc(n + 1);
    if (!s) exit(3);
    memcpy(s, head, hn);
    for (size_t i = 0; i < times; i++) memcpy(s + hn + i * un, unit, un);
    memcpy(s + hn + un * times, tail, tn + 1);
    if (len) *len = n;
    return s;
}

/* ------------------------------------------------------------------ the cases */
/* Each: prepare (not measured) and run (measured), returning the status; the message in err. */

static void p_st_header(void) {
    unsigned char h[8];
    for (int i = 0; i < 8; i++) h[i] = (unsigned char)(GB >> (8 * i));
    sparse("big.safetensors", h, 8, GB + 8);
}
static zero_status r_st_header(zero_error *e) {
    char p[4096];
    path_of(p, sizeof p, "big.safetensors");
    zero_st_file *f = NULL;
    zero_status s = zero_st_open(&f, NULL, p, e);
    zero_st_close(f);
    return s;
}

static void p_st_shape(void) {
    const char *hdr = "{\"w\":{\"dtype\":\"F32\",\"shape\":[4294967296,4294967296,4],\"data_offsets\":[0,8]}}";
    unsigned char b[256] = {0};
    const size_t n = strlen(hdr);
    for (int i = 0; i < 8; i++) b[i] = (unsigned char)((uint64_t)n >> (8 * i));
    memcpy(b + 8, hdr, n);
    sparse("shape.safetensors", b, 8 + n + 8, 8 + n + 8);
}
static zero_status r_st_shape(zero_error *e) {
    char p[4096];
    path_of(p, sizeof p, "shape.safetensors");
    zero_st_file *f = NULL;
    zero_status s = zero_st_open(&f, NULL, p, e);
    zero_st_close(f);
    return s;
}

static void p_st_values(void) { /* a header within the format's 100 MB: a shape of 16M dims */
    const char *head = "{\"w\":{\"dtype\":\"F32\",\"shape\":[", *tail = "0],\"data_offsets\":[0,0]}}";
    const size_t reps = 16u << 20, n = strlen(head) + 2 * reps + strlen(tail);
    unsigned char h[8];
    for (int i = 0; i < 8; i++) h[i] = (unsigned char)((uint64_t)n >> (8 * i));
    char p[4096], block[2 << 16];
    for (size_t i = 0; i < sizeof block; i += 2) block[i] = '0', block[i + 1] = ',';
    path_of(p, sizeof p, "values.safetensors");
    FILE *f = fopen(p, "wb"); /* written a block at a time: the input is not in this process's memory */
    int ok = f && fwrite(h, 1, 8, f) == 8 && fputs(head, f) >= 0;
    for (size_t done = 0; ok && done < 2 * reps; done += sizeof block) ok = fwrite(block, 1, sizeof block, f) == sizeof block;
    if (!ok || fputs(tail, f) < 0 || fclose(f)) exit(3);
}
static zero_status r_st_values(zero_error *e) {
    char p[4096];
    path_of(p, sizeof p, "values.safetensors");
    zero_st_file *f = NULL;
    zero_status s = zero_st_open(&f, NULL, p, e);
    zero_st_close(f);
    return s;
}

static void p_config_1g(void) {
    char p[4096];
    path_of(p, sizeof p, "model");
    mkdir(p, 0700);
    sparse("model/config.json", "{\"model_type\": \"llama\",", 24, GB);
}
static zero_status r_config_1g(zero_error *e) {
    char p[4096];
    path_of(p, sizeof p, "model");
    dec_hf *h = NULL;
    zero_status s = dec_hf_open(&h, p, e);
    dec_hf_close(h);
    return s;
}

static void p_deep(void) { g_text = repeat("", "[", 1000000, "", &g_len); }
static zero_status r_deep_config(zero_error *e) {
    dec_config c;
    return dec_config_from_json(&c, g_text, NULL, e);
}

static void p_index_1g(void) {
    char p[4096];
    path_of(p, sizeof p, "model");
    mkdir(p, 0700);
    copy_fixture("decoder/llama_gqa4/config.json", "model/config.json");
    sparse("model/model.safetensors.index.json", "{\"weight_map\": {", 16, GB);
}
static zero_status r_index_1g(zero_error *e) { return r_config_1g(e); }

static void p_index_names(void) { /* a million distinct shard names */
    const size_t n = 1000000;
    g_text = malloc(n * 40 + 64);
    if (!g_text) exit(3);
    size_t at = (size_t)sprintf(g_text, "{\"weight_map\": {");
    for (size_t i = 0; i < n; i++) at += (size_t)sprintf(g_text + at, "%s\"t%zu\": \"s%zu\"", i ? ", " : "", i, i);
    at += (size_t)sprintf(g_text + at, "}}");
    g_len = at;
}
static void p_index_files(void) { /* 4097 distinct shard names, each twice */
    g_text = malloc(4097 * 2 * 40 + 64);
    if (!g_text) exit(3);
    size_t at = (size_t)sprintf(g_text, "{\"weight_map\": {");
    for (size_t i = 0; i < 2 * 4097; i++)
        at += (size_t)sprintf(g_text + at, "%s\"t%zu\": \"s%zu\"", i ? ", " : "", i, i % 4097);
    at += (size_t)sprintf(g_text + at, "}}");
    g_len = at;
}
static zero_status r_index_names(zero_error *e) {
    char **names = NULL;
    int n = 0;
    zero_status s = dec_hf_index_files(g_dir, "model.safetensors.index.json", g_text, g_len, &names, &n, e);
    dec_hf_names_free(names, n);
    return s;
}

static void p_tok_1g(void) {
    const char *head = "{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [";
    sparse("tokenizer.json", head, strlen(head), GB + GB / 2); /* room for 10^8 merges */
}
static zero_status r_tok_dir(zero_error *e) {
    zero_tokenizer *t = NULL;
    zero_status s = zero_tokenizer_load(&t, g_dir, e);
    zero_tokenizer_free(t);
    return s;
}

static void p_tok_merges(void) { /* 9M merges in 54 MB: within the byte limit, past the values' */
    g_text = repeat("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 1, \"ab\": 2}, \"merges\": [", "\"a b\",",
                    9u << 20, "\"a b\"]}}", &g_len);
}
static zero_status r_tok_json(zero_error *e) {
    zero_tokenizer *t = NULL;
    zero_status s = zero_tokenizer_load_json(&t, g_text, g_len, NULL, e);
    zero_tokenizer_free(t);
    return s;
}

static void p_tok_id31(void) {
    g_text = strdup("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 2147483648}, \"merges\": []}}");
    g_len = strlen(g_text);
}
static void p_tok_id24(void) {
    g_text = strdup("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0, \"b\": 16777215}, \"merges\": []}}");
    g_len = strlen(g_text);
}
static void p_tok_added31(void) {
    g_text = strdup("{\"added_tokens\": [{\"id\": 2147483647, \"content\": \"<x>\"}], \"model\": {\"type\": \"BPE\", "
                    "\"vocab\": {\"a\": 0}, \"merges\": []}}");
    g_len = strlen(g_text);
}

static zero_tokenizer *g_tok;
static void p_line_deep(void) {
    g_tok = fixture_tokenizer();
    g_text = repeat("{\"text\": ", "[", 1000000, "", &g_len);
}
static zero_status r_line_deep(zero_error *e) {
    zero_data *d = NULL;
    zero_status s = zero_data_create(&d, g_tok, NULL, e);
    if (!s && (s = zero_data_add_jsonl_line(d, g_text, g_len, "deep.jsonl:1")))
        snprintf(e->msg, sizeof e->msg, "%s", zero_data_last_error(d));
    zero_data_free(d);
    return s;
}

static void p_line_10g(void) {
    g_tok = fixture_tokenizer();
    sparse("line.jsonl", "{\"text\": \"", 10, 10 * GB);
}
static zero_status r_line_file(const char *name, zero_error *e) {
    zero_data *d = NULL;
    char p[4096];
    path_of(p, sizeof p, name);
    zero_status s = zero_data_create(&d, g_tok, NULL, e);
    if (!s && (s = zero_data_add_file(d, p))) snprintf(e->msg, sizeof e->msg, "%s", zero_data_last_error(d));
    zero_data_free(d);
    return s;
}
static zero_status r_line_10g(zero_error *e) { return r_line_file("line.jsonl", e); }
/* A *.json file that is one JSON array whose first element is a 10 GB string: streamed, refused
 * at the element bound as a JSONL line is. */
static void p_array_10g(void) {
    g_tok = fixture_tokenizer();
    sparse("array.json", "[{\"text\": \"", 11, 10 * GB);
}
static zero_status r_array_10g(zero_error *e) { return r_line_file("array.json", e); }

/* A FIFO whose writer streams 10 GB without a newline: the reader must stop, not wait for it. */
static void p_line_fifo(void) {
    g_tok = fixture_tokenizer();
    char p[4096];
    path_of(p, sizeof p, "fifo.jsonl");
    if (mkfifo(p, 0600) != 0) exit(3);
    g_writer = fork();
    if (g_writer == 0) {
        signal(SIGPIPE, SIG_IGN);
        int fd = open(p, O_WRONLY);
        static char block[1 << 20];
        memset(block, 'x', sizeof block);
        for (uint64_t sent = 0; fd >= 0 && sent < 10 * GB;) {
            ssize_t w = write(fd, block, sizeof block);
            if (w <= 0) break; /* EPIPE: the reader is gone */
            sent += (uint64_t)w;
        }
        _exit(0);
    }
}
static zero_status r_line_fifo(zero_error *e) { return r_line_file("fifo.jsonl", e); }

static void p_manifest(void) {
    char p[4096];
    path_of(p, sizeof p, "step_00000001");
    mkdir(p, 0700);
    small("step_00000001/COMMIT", "");
    sparse("step_00000001/manifest.json", "{\"format\": \"zero-checkpoint\",", 29, GB);
}
static zero_status r_manifest(zero_error *e) {
    char p[4096];
    path_of(p, sizeof p, "step_00000001");
    zero_ckpt *c = NULL;
    zero_status s = zero_ckpt_open(&c, NULL, p, 0, e);
    zero_ckpt_close(c);
    return s;
}

static void p_tokfile(void) {
    unsigned char h[64] = {0};
    memcpy(h, "ZEROTOK2", 8);
    h[8] = 2;                      /* version */
    h[12] = 0xff, h[13] = 0xff;    /* vocab 65535 */
    h[23] = 0x10;                  /* count 2^60 */
    h[24] = 2;                     /* token bytes */
    sparse("huge.tok", h, 64, 64 + 1024);
}
static zero_status r_tokfile(zero_error *e) {
    char p[4096];
    path_of(p, sizeof p, "huge.tok");
    zero_tokfile *f = NULL;
    zero_status s = zero_tokfile_open(&f, p, e);
    zero_tokfile_close(f);
    return s;
}

static zero_status r_tokfile_fifo(zero_error *e) {
    char p[4096];
    path_of(p, sizeof p, "fifo.txt");
    zero_tokfile *f = NULL;
    zero_status s = zero_tokfile_open(&f, p, e);
    zero_tokfile_close(f);
    return s;
}

static void p_ds_config(void) { sparse("ds_config.json", "{\"train_batch_size\": 8,", 23, GB); }
static zero_status r_ds_config(zero_error *e) {
    char p[4096];
    path_of(p, sizeof p, "ds_config.json");
    zero_config c;
    zero_config_default(&c);
    return zero_config_load_json_file(&c, p, e);
}

/* zero train --data: a text file past what a file may hold, as bytes and through a tokenizer; a
 * FIFO no one writes (opening it would wait for ever) */
static void p_data_5g(void) { sparse("big.txt", "once upon a time", 16, 5 * GB); }
static void p_data_5g_tok(void) {
    g_tok = fixture_tokenizer();
    p_data_5g();
}
static void p_data_fifo(void) {
    char p[4096];
    path_of(p, sizeof p, "fifo.txt");
    if (mkfifo(p, 0600) != 0) exit(3);
}
static zero_status r_data(const char *name, zero_error *e) {
    dec_data_opts o;
    dec_data_opts_default(&o);
    char p[4096];
    path_of(p, sizeof p, name);
    o.path = p;
    o.tok = g_tok;
    o.seq = 16;
    dec_data *d = NULL;
    zero_status s = dec_data_open(&d, &o, e);
    dec_data_free(d);
    return s;
}
static zero_status r_data_5g(zero_error *e) { return r_data("big.txt", e); }
static zero_status r_data_fifo(zero_error *e) { return r_data("fifo.txt", e); }

typedef struct hcase {
    const char *name, *what;
    void (*prepare)(void);
    zero_status (*run)(zero_error *e);
    zero_status want;
    const char *needle;
    uint64_t bound; /* bytes the peak RSS may grow by */
} hcase;

static const hcase cases[] = {
    {"st_header_1g", "safetensors header claiming 1 GB (sparse file)", p_st_header, r_st_header, ZERO_ERR_FORMAT,
     "header length 1000000000 is impossible", 4 * MiB},
    {"st_shape_2p64", "tensor of shape [2^32, 2^32, 4] F32", p_st_shape, r_st_shape, ZERO_ERR_FORMAT, "pass 2^62",
     4 * MiB},
    {"st_values", "safetensors header of 33 MB (the format allows 100): a shape of 16M dims", p_st_values, r_st_values, ZERO_ERR_FORMAT,
     "more than 2097152 values", 40 * MiB},
    {"config_1g", "config.json of 1 GB (sparse)", p_config_1g, r_config_1g, ZERO_ERR_FORMAT, "more than the 4194304",
     4 * MiB},
    {"config_deep", "config.json nested 10^6 deep", p_deep, r_deep_config, ZERO_ERR_FORMAT, "nested more than 127",
     4 * MiB},
    {"index_1g", "model.safetensors.index.json of 1 GB", p_index_1g, r_index_1g, ZERO_ERR_FORMAT,
     "more than the 67108864", 4 * MiB},
    {"index_entries", "index of 10^6 entries", p_index_names, r_index_names, ZERO_ERR_FORMAT,
     "more than 524288 values", 4 * MiB},
    {"index_files", "index naming 4097 distinct files", p_index_files, r_index_names, ZERO_ERR_FORMAT,
     "more than 4096 weight files", 8 * MiB},
    {"tokenizer_1g", "tokenizer.json of 1.5 GB (10^8 merges)", p_tok_1g, r_tok_dir, ZERO_ERR_FORMAT,
     "more than the 134217728", 4 * MiB},
    {"tokenizer_merges", "tokenizer.json with 9.4M merges in 57 MB", p_tok_merges, r_tok_json, ZERO_ERR_FORMAT,
     "more than 4194304 values", 4 * MiB},
    {"vocab_2p31", "vocabulary id 2^31", p_tok_id31, r_tok_json, ZERO_ERR_FORMAT, "expected an id in [0, 2^24)",
     4 * MiB},
    {"vocab_sparse", "2 tokens, ids 0 and 2^24-1", p_tok_id24, r_tok_json, ZERO_ERR_FORMAT, "dense", 4 * MiB},
    {"added_2p31", "added token id 2^31-1", p_tok_added31, r_tok_json, ZERO_ERR_FORMAT, "expected an id in [0, 2^24)",
     4 * MiB},
    {"jsonl_deep", "JSONL line nested 10^6 deep", p_line_deep, r_line_deep, ZERO_ERR_FORMAT, "nested more than 127",
     4 * MiB},
    {"jsonl_10g_line", "JSONL line of 10 GB (sparse file)", p_line_10g, r_line_10g, ZERO_ERR_FORMAT,
     "longer than the 64 MiB", 72 * MiB},
    {"jsonl_fifo", "JSONL line streaming through a FIFO", p_line_fifo, r_line_fifo, ZERO_ERR_FORMAT,
     "longer than the 64 MiB", 72 * MiB},
    {"json_array_10g", "JSON array file, an element of 10 GB (sparse file)", p_array_10g, r_array_10g, ZERO_ERR_FORMAT,
     "an element of more than", 72 * MiB},
    {"data_text_5g", "train --data: a text file of 5 GB (sparse), as bytes", p_data_5g, r_data_5g, ZERO_ERR_FORMAT,
     "more than the 4294967295", 4 * MiB},
    {"data_text_5g_tok", "train --data: a text file of 5 GB (sparse), through a tokenizer", p_data_5g_tok, r_data_5g,
     ZERO_ERR_FORMAT, "more than the 4294967295", 4 * MiB},
    {"data_fifo", "train --data: a FIFO no one writes", p_data_fifo, r_data_fifo, ZERO_ERR_FORMAT,
     "not a regular file", 4 * MiB},
    {"manifest_1g", "checkpoint manifest.json of 1 GB", p_manifest, r_manifest, ZERO_ERR_FORMAT,
     "is more than the 268435456", 4 * MiB},
    {"tokfile_2p60", "token file claiming 2^60 tokens", p_tokfile, r_tokfile, ZERO_ERR_FORMAT, "header says", 4 * MiB},
    {"tokfile_fifo", "token file: a FIFO no one writes", p_data_fifo, r_tokfile_fifo, ZERO_ERR_FORMAT,
     "is not a regular file", 4 * MiB},
    {"ds_config_1g", "DeepSpeed config of 1 GB", p_ds_config, r_ds_config, ZERO_ERR_CONFIG, "larger than 16777216",
     40 * MiB},
};
#define NCASES (sizeof cases / sizeof cases[0])

static long maxrss_kib(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

/* The child: prepare, cap the address space, run, report "status before after ms message". */
static int child(const char *name, const char *dir) {
    g_dir = dir;
    for (size_t i = 0; i < NCASES; i++) {
        if (strcmp(cases[i].name, name)) continue;
        cases[i].prepare();
        if (!ZT_ASAN) {
            long pages = 0;
            FILE *f = fopen("/proc/self/statm", "r");
            if (f && fscanf(f, "%ld", &pages) == 1) {
                const rlim_t lim = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + (rlim_t)(256 * MiB);
                struct rlimit rl = {lim, lim};
                setrlimit(RLIMIT_AS, &rl);
            }
            if (f) fclose(f);
        }
        const long before = maxrss_kib();
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        zero_error e;
        e.msg[0] = 0;
        const zero_status s = cases[i].run(&e);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        const long after = maxrss_kib();
        for (char *c = e.msg; *c; c++)
            if (*c == '\n') *c = ' ';
        printf("%d %ld %ld %.1f %s\n", (int)s, before, after,
               (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6, e.msg);
        if (g_writer > 0) waitpid(g_writer, NULL, 0);
        return 0;
    }
    return 2;
}

static void rm_rf(const char *dir) {
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
}

int main(int argc, char **argv) {
    if (argc == 4 && !strcmp(argv[1], "--case")) return child(argv[2], argv[3]);
    char self[4096];
    const ssize_t sn = readlink("/proc/self/exe", self, sizeof self - 1);
    ZT_CHECK(sn > 0);
    if (sn <= 0) return zt_finish("test_hostile");
    self[sn] = 0;
    const char *tmp = getenv("TMPDIR") && *getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
    if (ZT_ASAN) { /* ASan keeps freed blocks resident in its quarantine: a buffer grown by doubling would
                      count each size it had; the cases measure the allocations alive at once */
        char opts[2048];
        const char *old = getenv("ASAN_OPTIONS");
        snprintf(opts, sizeof opts, "%s%squarantine_size_mb=0", old ? old : "", old && *old ? ":" : "");
        setenv("ASAN_OPTIONS", opts, 1);
    }
    printf("| case | input | refused with | peak RSS growth | time |\n| --- | --- | --- | --- | --- |\n");
    for (size_t i = 0; i < NCASES; i++) {
        const hcase *c = &cases[i];
        char dir[4096], cmd[8400], line[1024] = "";
        snprintf(dir, sizeof dir, "%s/zt_hostile_XXXXXX", tmp);
        ZT_CHECK(mkdtemp(dir) != NULL);
        snprintf(cmd, sizeof cmd, "'%s' --case %s '%s'", self, c->name, dir);
        FILE *p = popen(cmd, "r");
        ZT_CHECK(p != NULL);
        if (p && !fgets(line, sizeof line, p)) line[0] = 0;
        const int rc = p ? pclose(p) : -1;
        rm_rf(dir);
        int st = 0;
        long before = 0, after = 0;
        double ms = 0;
        int used = 0;
        ZT_CHECKF(rc == 0 && sscanf(line, "%d %ld %ld %lf %n", &st, &before, &after, &ms, &used) == 4,
                  "%s: the case process failed (status %d, output '%s')", c->name, rc, line);
        const char *msg = line + used;
        line[strcspn(line, "\n")] = 0;
        const uint64_t grew = after > before ? (uint64_t)(after - before) * 1024 : 0;
        /* under ASan a realloc copies (the old and the new block live at once) and shadow memory
           adds an eighth: twice the bound, and 16 MiB for the runtime */
        const uint64_t bound = ZT_ASAN ? 2 * c->bound + 16 * MiB : c->bound;
        ZT_CHECKF(st == (int)c->want, "%s: status %d, expected %d (%s)", c->name, st, (int)c->want, msg);
        ZT_CHECKF(strstr(msg, c->needle) != NULL, "%s: message '%s' lacks '%s'", c->name, msg, c->needle);
        ZT_CHECKF(grew <= bound, "%s: peak RSS grew by %llu KiB, more than %llu KiB", c->name,
                  (unsigned long long)(grew >> 10), (unsigned long long)(bound >> 10));
        printf("| `%s` | %s | %s | %llu KiB | %.0f ms |\n", c->name, c->what, zero_status_string((zero_status)st),
               (unsigned long long)(grew >> 10), ms);
        printf("    %s\n", msg);
    }
    return zt_finish("test_hostile");
}
