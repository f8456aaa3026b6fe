/* Tests of sharded checkpoints: W simulated ranks save, every new world size 1..4 reads its shards
 * back exactly; refusals (no COMMIT, version, missing/truncated/corrupt files); a fault at every
 * I/O call of a save leaves the previous checkpoint loadable and `latest` on it; a rank that
 * never finishes leaves nothing loadable. `test_ckpt --write DIR` writes a sample for the CLI test. */
#include "ckpt/internal.h"
#include "harness.h"
#include "zero/zero.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char g_dir[512];

/* On tmpfs when there is one: the hundreds of saves below fsync ~10 times each, which a real
 * disk turns into seconds; the code paths are the same. */
static void make_dir(void) {
    struct stat st;
    const char *base = getenv("ZERO_BUILD_DIR");
    if (stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0) base = "/dev/shm";
    snprintf(g_dir, sizeof g_dir, "%s/zt_ckpt_XXXXXX", base && *base ? base : "/tmp");
    if (!mkdtemp(g_dir)) {
        fprintf(stderr, "mkdtemp %s: %s\n", g_dir, strerror(errno));
        exit(1);
    }
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static void rm_rf(const char *p) {
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", p);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", p);
}

static void read_text(const char *p, char *buf, size_t cap) {
    buf[0] = 0;
    FILE *f = fopen(p, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

static uint64_t rng_state = 0x243F6A8885A308D3ull;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* ------------------------------------------------------------------ a fake engine's state */
typedef struct tspec {
    const char *name;
    zero_dtype dt;
    uint64_t numel, align;
} tspec;

static const tspec k_t[] = {
    {"h.0/master", ZERO_DTYPE_FP32, 1000, 16},
    {"h.0/exp_avg", ZERO_DTYPE_FP32, 1000, 16},
    {"h.0/exp_avg_sq", ZERO_DTYPE_FP32, 1000, 16},
    {"ln_f/master", ZERO_DTYPE_FP32, 37, 16},   /* smaller than world*align: the last ranks hold nothing */
    {"wte/params", ZERO_DTYPE_BF16, 5000, 32},
    {"empty/master", ZERO_DTYPE_FP32, 0, 16},
    {"data/ids", ZERO_DTYPE_INT64, 10, 8},
};
#define NT (int)(sizeof k_t / sizeof k_t[0])

/* Element j of tensor i in the save made with `seed`: exact in fp32 and in bf16. */
static float value(int i, uint64_t j, int seed) {
    if (k_t[i].dt == ZERO_DTYPE_BF16) return (float)((int)((j * 7 + (uint64_t)seed) % 201) - 100);
    return (float)((j * 7 + (uint64_t)i * 13 + (uint64_t)seed * 101) % 100003) * 0.25f;
}
static int64_t ivalue(uint64_t j, int seed) { return (int64_t)(j * 1000003u) - seed; }

static const char *k_engine_json =
    "{\"stage\": 2, \"precision\": \"bf16\", \"optimizer\": {\"type\": \"AdamW\", \"lr\": 0.0003},"
    " \"units\": [{\"name\": \"h.0\", \"numel\": 1000, \"params\": [{\"name\": \"h.0.w\", \"shape\": [10, 100], \"offset\": 0}]},"
    " {\"name\": \"ln_f\", \"numel\": 37, \"params\": [{\"name\": \"ln_f.g\", \"shape\": [37], \"offset\": 0}]},"
    " {\"name\": \"wte\", \"numel\": 5000, \"params\": [{\"name\": \"wte\", \"shape\": [50, 100], \"offset\": 0}]}],"
    " \"rng\": {\"seed\": 1234}}";

/* The id every simulated rank of one save shares (an engine makes one with zero_ckpt_new_id on
 * rank 0 and broadcasts it): the same step and seed give the same save. */
static const char *save_id(int64_t step, int seed) {
    static char id[ZERO_CKPT_ID_CHARS + 1];
    snprintf(id, sizeof id, "%016llx%016llx", (unsigned long long)step, (unsigned long long)seed);
    return id;
}

/* Rank r of W writes its slices in random chunks. Returns the writer (finished or not). */
static zero_status rank_save(zero_io *io, const char *dir, int64_t step, int r, int W, int seed,
                             zero_ckpt_writer **out, char *msg, size_t cap) {
    zero_error err;
    zero_ckpt_writer *w = NULL;
    *out = NULL;
    zero_status s = zero_ckpt_writer_begin(&w, io, dir, step, r, W, save_id(step, seed), &err);
    if (s != ZERO_OK) {
        snprintf(msg, cap, "%s", err.msg);
        return s;
    }
    *out = w;
    for (int i = 0; i < NT && s == ZERO_OK; i++) s = zero_ckpt_writer_add(w, k_t[i].name, k_t[i].dt, k_t[i].numel, k_t[i].align);
    for (int i = 0; i < NT && s == ZERO_OK; i++) {
        zero_shard sh;
        zero_partition_shard(k_t[i].numel, W, r, k_t[i].align, &sh);
        ZT_EQ_INT(zero_ckpt_writer_slice(w, i), sh.valid);
        size_t esz = zero_dtype_size(k_t[i].dt);
        unsigned char *b = malloc(sh.valid * esz + 1);
        for (uint64_t j = 0; j < sh.valid; j++) {
            uint64_t g = sh.offset + j;
            if (k_t[i].dt == ZERO_DTYPE_FP32) ((float *)b)[j] = value(i, g, seed);
            else if (k_t[i].dt == ZERO_DTYPE_BF16) ((uint16_t *)b)[j] = zero_fp32_to_bf16(value(i, g, seed));
            else ((int64_t *)b)[j] = ivalue(g, seed);
        }
        size_t at = 0, n = sh.valid * esz;
        while (at < n && s == ZERO_OK) {
            size_t c = 1 + (size_t)(rnd() % 3000);
            if (c > n - at) c = n - at;
            s = zero_ckpt_writer_write(w, b + at, c);
            at += c;
        }
        free(b);
    }
    if (s == ZERO_OK) s = zero_ckpt_writer_finish(w);
    if (s != ZERO_OK) snprintf(msg, cap, "%s", zero_ckpt_writer_last_error(w));
    return s;
}

/* A whole save by W simulated ranks sharing one file system, as the engine does it: every rank
 * writes and finishes; only when all succeeded (the engine's agreement) does rank 0 commit. */
static zero_status save_all(zero_io *io, const char *dir, int64_t step, int W, int seed, char *msg, size_t cap) {
    zero_ckpt_writer *w[8] = {0};
    zero_status s = ZERO_OK;
    msg[0] = 0;
    for (int r = 0; r < W; r++) {
        char m[1024];
        zero_status e = rank_save(io, dir, step, r, W, seed, &w[r], m, sizeof m);
        if (e != ZERO_OK && s == ZERO_OK) {
            s = e;
            snprintf(msg, cap, "%s", m);
        }
    }
    if (s == ZERO_OK) {
        s = zero_ckpt_commit(w[0], k_engine_json);
        if (s != ZERO_OK) snprintf(msg, cap, "%s", zero_ckpt_writer_last_error(w[0]));
    }
    for (int r = 0; r < W; r++) zero_ckpt_writer_free(w[r]);
    return s;
}

/* Reads everything back as a world of Wn ranks would (each its own shard), plus whole tensors
 * and random ranges; returns the number of wrong elements. */
static long check_all(zero_ckpt *c, int Wn, int seed) {
    long bad = 0;
    for (int i = 0; i < NT; i++) {
        uint64_t numel = k_t[i].numel;
        float *buf = malloc((numel + 1) * sizeof(float));
        int64_t *ib = malloc((numel + 1) * sizeof(int64_t));
        for (int r = 0; r < Wn; r++) {
            zero_shard sh;
            zero_partition_shard(numel, Wn, r, k_t[i].align, &sh);
            zero_status s;
            if (k_t[i].dt == ZERO_DTYPE_INT64) {
                s = zero_ckpt_read_range_raw(c, k_t[i].name, sh.offset < numel ? sh.offset : numel,
                                             sh.offset + sh.valid < numel ? sh.offset + sh.valid : numel, ib);
                for (uint64_t j = 0; s == ZERO_OK && j < sh.valid; j++) bad += ib[j] != ivalue(sh.offset + j, seed);
            } else {
                uint64_t lo = sh.offset < numel ? sh.offset : numel;
                s = zero_ckpt_read_range(c, k_t[i].name, lo, lo + sh.valid, buf);
                for (uint64_t j = 0; s == ZERO_OK && j < sh.valid; j++) bad += buf[j] != value(i, sh.offset + j, seed);
            }
            if (s != ZERO_OK) {
                ZT_FAIL("read %s for rank %d of %d: %s", k_t[i].name, r, Wn, zero_ckpt_last_error(c));
                bad++;
            }
        }
        for (int k = 0; k < 5 && numel && k_t[i].dt != ZERO_DTYPE_INT64; k++) {
            uint64_t lo = rnd() % numel, hi = lo + rnd() % (numel - lo + 1);
            ZT_OK(zero_ckpt_read_range(c, k_t[i].name, lo, hi, buf));
            for (uint64_t j = lo; j < hi; j++) bad += buf[j - lo] != value(i, j, seed);
        }
        free(buf);
        free(ib);
    }
    return bad;
}

static zero_ckpt *open_ok(const char *path) {
    zero_ckpt *c = NULL;
    zero_error err;
    zero_status s = zero_ckpt_open(&c, NULL, path, 0, &err);
    ZT_CHECKF(s == ZERO_OK, "open %s: %s", path, err.msg);
    return c;
}

/* ------------------------------------------------------------------ reshard round trips */
static void test_reshard(void) {
    char dir[700], msg[1024];
    for (int W = 1; W <= 4; W++) {
        snprintf(dir, sizeof dir, "%s/rs%d", g_dir, W);
        ZT_CHECKF(save_all(NULL, dir, 100 + W, W, W, msg, sizeof msg) == ZERO_OK, "save W=%d: %s", W, msg);
        char latest[128], p[800];
        snprintf(p, sizeof p, "%s/latest", dir);
        read_text(p, latest, sizeof latest);
        char want[64];
        snprintf(want, sizeof want, "step_%08d\n", 100 + W);
        ZT_CHECKF(!strcmp(latest, want), "latest '%s'", latest);
        snprintf(p, sizeof p, "%s/step_%08d.tmp", dir, 100 + W);
        ZT_CHECK(!exists(p)); /* the staging directory was published */
        zero_ckpt *c = open_ok(dir);
        if (!c) continue;
        ZT_EQ_INT(zero_ckpt_step(c), 100 + W);
        ZT_EQ_INT(zero_ckpt_world(c), W);
        ZT_EQ_INT(zero_ckpt_num_files(c), W);
        ZT_EQ_INT(zero_ckpt_num_tensors(c), NT);
        for (int Wn = 1; Wn <= 4; Wn++) ZT_CHECKF(check_all(c, Wn, W) == 0, "saved by %d, read by %d", W, Wn);
        ZT_OK(zero_ckpt_verify(c));
        /* manifest: the layer's keys and the engine's, side by side */
        cJSON *m = cJSON_Parse(zero_ckpt_manifest(c));
        ZT_CHECK(m && cJSON_GetObjectItem(m, "format_version")->valueint == ZERO_CKPT_FORMAT_VERSION);
        /* the save's id, in the manifest and in every rank file (every rank of one save: one id) */
        ZT_CHECK(m && !strcmp(cJSON_GetObjectItem(m, "save_id")->valuestring, save_id(100 + W, W)));
        ZT_CHECK(!strcmp(zero_ckpt_save_id(c), save_id(100 + W, W)));
        ZT_CHECK(!zero_ckpt_note(c)[0]);
        ZT_CHECK(m && cJSON_GetObjectItem(m, "stage")->valueint == 2);
        ZT_CHECK(m && cJSON_GetArraySize(cJSON_GetObjectItem(m, "units")) == 3);
        ZT_CHECK(m && cJSON_GetArraySize(cJSON_GetObjectItem(m, "files")) == W);
        cJSON_Delete(m);
        ZT_CHECK(zero__ckpt_manifest_json(c) != NULL);
        zero_ckpt_tensor ti;
        ZT_OK(zero_ckpt_tensor_info(c, zero_ckpt_find(c, "wte/params"), &ti));
        ZT_CHECK(ti.dtype == ZERO_DTYPE_BF16 && ti.numel == 5000 && ti.align == 32);
        const char *fname;
        uint64_t fbytes;
        zero_ckpt_file_info(c, W - 1, &fname, &fbytes);
        char fp[900];
        snprintf(fp, sizeof fp, "%s/%s", zero_ckpt_dir(c), fname);
        struct stat st;
        ZT_CHECK(stat(fp, &st) == 0 && (uint64_t)st.st_size == fbytes);
        /* out of range, unknown name, int read as float */
        float f[4];
        ZT_EQ_INT(zero_ckpt_read_range(c, "h.0/master", 999, 1001, f), ZERO_ERR_INVALID_ARG);
        ZT_CHECK(strstr(zero_ckpt_last_error(c), "1001") != NULL);
        ZT_EQ_INT(zero_ckpt_read_range(c, "nope", 0, 1, f), ZERO_ERR_INVALID_ARG);
        ZT_EQ_INT(zero_ckpt_read_range(c, "data/ids", 0, 1, f), ZERO_ERR_INVALID_ARG);
        ZT_CHECK(strstr(zero_ckpt_last_error(c), "read_range_raw") != NULL);
        ZT_OK(zero_ckpt_read_range(c, "empty/master", 0, 0, NULL));
        zero_ckpt_close(c);
        /* the step directory opens directly too, also with full verification */
        snprintf(p, sizeof p, "%s/step_%08d", dir, 100 + W);
        zero_error err;
        ZT_OK(zero_ckpt_open(&c, NULL, p, ZERO_CKPT_VERIFY, &err));
        zero_ckpt_close(c);
    }
}

/* ------------------------------------------------------------------ refusals */
static void expect_refused(const char *path, unsigned flags, const char *n1, const char *n2) {
    zero_ckpt *c = NULL;
    zero_error err;
    err.msg[0] = 0;
    zero_status s = zero_ckpt_open(&c, NULL, path, flags, &err);
    ZT_CHECKF(s == ZERO_ERR_FORMAT && !c, "open %s: status %d (%s)", path, s, err.msg);
    ZT_CHECKF(strstr(err.msg, n1) && (!n2 || strstr(err.msg, n2)), "message '%s' lacks '%s'/'%s'", err.msg, n1, n2 ? n2 : "");
    zero_ckpt_close(c);
}

static void test_refusals(void) {
    char dir[700], msg[1024], step[800], p[900];
    snprintf(dir, sizeof dir, "%s/ref", g_dir);
    snprintf(step, sizeof step, "%s/step_00000009", dir);
    const char *rank1 = "rank_00001.safetensors";
    /* no COMMIT */
    ZT_OK(save_all(NULL, dir, 9, 2, 5, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/COMMIT", step);
    unlink(p);
    expect_refused(dir, 0, "no COMMIT", step);
    expect_refused(step, 0, "no COMMIT", NULL);
    /* another format_version */
    rm_rf(dir);
    ZT_OK(save_all(NULL, dir, 9, 2, 5, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/manifest.json", step);
    char text[65536];
    read_text(p, text, sizeof text);
    char *v = strstr(text, "\"format_version\":\t2");
    ZT_CHECKF(v != NULL, "manifest layout: %.200s", text);
    if (v) v[strlen("\"format_version\":\t")] = '7';
    FILE *f = fopen(p, "wb");
    fputs(text, f);
    fclose(f);
    expect_refused(dir, 0, "format_version 7", "reads format_versions 1 and 2");
    /* a missing rank file */
    rm_rf(dir);
    ZT_OK(save_all(NULL, dir, 9, 2, 5, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/%s", step, rank1);
    char moved[1000];
    snprintf(moved, sizeof moved, "%s.away", p);
    ZT_CHECK(rename(p, moved) == 0);
    expect_refused(dir, 0, "missing", rank1);
    /* truncated */
    ZT_CHECK(rename(moved, p) == 0);
    struct stat st;
    stat(p, &st);
    ZT_CHECK(truncate(p, st.st_size - 3) == 0);
    expect_refused(dir, 0, "truncated", rank1);
    /* one byte of data changed: found by a full verification, and by a read of that whole slice */
    rm_rf(dir);
    ZT_OK(save_all(NULL, dir, 9, 2, 5, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/%s", step, rank1);
    stat(p, &st);
    f = fopen(p, "r+b");
    fseek(f, st.st_size - 200, SEEK_SET); /* inside wte/params, the bf16 tensor before the last ones */
    int ch = fgetc(f);
    fseek(f, st.st_size - 200, SEEK_SET);
    fputc(ch ^ 0x40, f);
    fclose(f);
    expect_refused(dir, ZERO_CKPT_VERIFY, "checksum mismatch", rank1);
    zero_ckpt *c = open_ok(dir); /* without VERIFY it opens: checksums are checked as data is read */
    if (c) {
        ZT_OK(zero_ckpt_verify(c) == ZERO_ERR_FORMAT ? ZERO_OK : ZERO_ERR_INTERNAL);
        ZT_CHECK(strstr(zero_ckpt_last_error(c), rank1) && strstr(zero_ckpt_last_error(c), "'wte/params'"));
        float *buf = malloc(5000 * sizeof(float));
        ZT_EQ_INT(zero_ckpt_read_range(c, "wte/params", 0, 5000, buf), ZERO_ERR_FORMAT);
        ZT_CHECKF(strstr(zero_ckpt_last_error(c), rank1) && strstr(zero_ckpt_last_error(c), "'wte/params'") &&
                      strstr(zero_ckpt_last_error(c), "checksum mismatch"),
                  "'%s'", zero_ckpt_last_error(c));
        ZT_OK(zero_ckpt_read_range(c, "wte/params", 0, 100, buf)); /* rank 0's part is intact */
        free(buf);
        zero_ckpt_close(c);
    }
    /* not a checkpoint at all, and a path that does not exist */
    expect_refused(g_dir, 0, "neither a step directory", NULL);
    zero_error err;
    ZT_EQ_INT(zero_ckpt_open(&c, NULL, "/nonexistent/ckpt", 0, &err), ZERO_ERR_IO);
    ZT_CHECK(strstr(err.msg, "/nonexistent/ckpt") && strstr(err.msg, "No such file"));
    /* latest naming something odd */
    rm_rf(dir);
    ZT_OK(save_all(NULL, dir, 9, 1, 5, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/latest", dir);
    f = fopen(p, "wb");
    fputs("../../etc\n", f);
    fclose(f);
    expect_refused(dir, 0, "does not hold the name of a step directory", NULL);
    /* the message never quotes what the refused file holds */
    zero_ckpt *c2 = NULL;
    ZT_CHECK(zero_ckpt_open(&c2, NULL, dir, 0, &err) != ZERO_OK && !strstr(err.msg, "etc"));
    rm_rf(dir);
}

/* ------------------------------------------------------------------ writer misuse */
static void test_misuse(void) {
    char dir[700], msg[1024];
    snprintf(dir, sizeof dir, "%s/mis", g_dir);
    zero_error err;
    zero_ckpt_writer *w = NULL;
    ZT_EQ_INT(zero_ckpt_writer_begin(&w, NULL, dir, 1, 2, 2, save_id(1, 1), &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(err.msg, "rank 2") != NULL);
    ZT_EQ_INT(zero_ckpt_writer_begin(&w, NULL, dir, -1, 0, 1, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_ckpt_writer_begin(&w, NULL, "", 1, 0, 1, NULL, &err), ZERO_ERR_INVALID_ARG);
    /* more than one rank: the save's id must be given (the same on every rank), and well formed */
    ZT_EQ_INT(zero_ckpt_writer_begin(&w, NULL, dir, 1, 0, 2, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECK(strstr(err.msg, "save id NULL") != NULL);
    ZT_EQ_INT(zero_ckpt_writer_begin(&w, NULL, dir, 1, 0, 2, "0123456789ABCDEF0123456789abcdef", &err), ZERO_ERR_INVALID_ARG);
    zero_ckpt_writer *w0 = NULL, *w1 = NULL;
    ZT_OK(rank_save(NULL, dir, 3, 0, 2, 1, &w0, msg, sizeof msg));
    ZT_OK(rank_save(NULL, dir, 3, 1, 2, 1, &w1, msg, sizeof msg));
    ZT_EQ_INT(zero_ckpt_commit(w1, NULL), ZERO_ERR_STATE);
    ZT_EQ_INT(zero_ckpt_commit(w0, "[1, 2]"), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_ckpt_commit(w0, "{\"world\": 3}"), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_ckpt_writer_last_error(w0), "'world'") != NULL, "'%s'", zero_ckpt_writer_last_error(w0));
    ZT_OK(zero_ckpt_commit(w0, NULL));
    ZT_CHECK(!strcmp(zero_ckpt_writer_committed_name(w0), "step_00000003"));
    ZT_EQ_INT(zero_ckpt_commit(w0, NULL), ZERO_ERR_STATE);
    zero_ckpt_writer_free(w0);
    zero_ckpt_writer_free(w1);
    ZT_OK(zero_ckpt_writer_begin(&w, NULL, dir, 4, 0, 1, NULL, &err));
    ZT_EQ_INT(zero_ckpt_writer_add(w, "x", ZERO_DTYPE_FP32, 10, 0), ZERO_ERR_INVALID_ARG);
    ZT_OK(zero_ckpt_writer_add(w, "x", ZERO_DTYPE_FP32, 10, 4));
    ZT_EQ_INT(zero_ckpt_writer_add(w, "x", ZERO_DTYPE_FP32, 10, 4), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_ckpt_commit(w, NULL), ZERO_ERR_STATE); /* before finish */
    float z[10] = {0};
    ZT_OK(zero_ckpt_writer_write(w, z, 20));
    ZT_EQ_INT(zero_ckpt_writer_finish(w), ZERO_ERR_STATE); /* 20 bytes missing */
    ZT_CHECK(strstr(zero_ckpt_writer_last_error(w), "'x' lacks 20 bytes") != NULL);
    zero_ckpt_writer_free(w);
    rm_rf(dir);
}

/* ------------------------------------------------------------------ faults at every call */
/* After a save attempt: `latest` names step 1 (failed save) or 2 (successful one), and the save
 * directory opens the newest committed step: step 2 also when the save failed after publishing it
 * (a note says so). */
static void check_after(const char *dir, zero_status s, const char *msg, const char *spec) {
    char p[800], latest[128];
    snprintf(p, sizeof p, "%s/step_00000002/COMMIT", dir);
    const int published = exists(p);
    snprintf(p, sizeof p, "%s/latest", dir);
    read_text(p, latest, sizeof latest);
    int durable_only = s != ZERO_OK && strstr(msg, "making latest durable") != NULL;
    int want = s == ZERO_OK ? 2 : 1;
    if (durable_only) want = 2; /* only the last directory fsync failed: latest already moved */
    char w[64];
    snprintf(w, sizeof w, "step_%08d\n", want);
    ZT_CHECKF(!strcmp(latest, w), "%s: latest is '%s', expected '%s' (save: %d %s)", spec, latest, w, s, msg);
    zero_ckpt *c = NULL;
    zero_error err;
    ZT_CHECKF(zero_ckpt_open(&c, NULL, dir, ZERO_CKPT_VERIFY, &err) == ZERO_OK, "%s: the checkpoint does not load: %s", spec, err.msg);
    const int opens = published ? 2 : want;
    if (c) {
        ZT_EQ_INT(zero_ckpt_step(c), opens);
        ZT_CHECKF(check_all(c, 3, opens == 2 ? 22 : 11) == 0, "%s: wrong data", spec);
        ZT_CHECKF(!zero_ckpt_note(c)[0] == (opens == want), "%s: note '%s'", spec, zero_ckpt_note(c));
        if (opens != want) ZT_CHECKF(strstr(zero_ckpt_note(c), "committed after it") != NULL, "%s: %s", spec, zero_ckpt_note(c));
        zero_ckpt_close(c);
    }
    /* what a failed save leaves is refused, unless it got as far as its COMMIT (then it is whole) */
    snprintf(p, sizeof p, "%s/step_00000002.tmp", dir);
    char cm[900];
    snprintf(cm, sizeof cm, "%s/COMMIT", p);
    if (s != ZERO_OK && exists(p) && !exists(cm)) expect_refused(p, 0, "no ", NULL);
    if (s != ZERO_OK && exists(cm)) {
        ZT_CHECKF(zero_ckpt_open(&c, NULL, p, ZERO_CKPT_VERIFY, &err) == ZERO_OK, "%s: %s", spec, err.msg);
        if (c) ZT_EQ_INT(check_all(c, 2, 22), 0);
        zero_ckpt_close(c);
    }
}

static void test_faults(void) {
    char dir[700], msg[1024];
    snprintf(dir, sizeof dir, "%s/flt", g_dir);
    zero_error err;
    /* how many calls of each kind a save of step 2 over a saved step 1 makes */
    uint64_t calls[ZERO_IO_OP_COUNT];
    zero_io *inner = NULL, *io = NULL;
    ZT_OK(save_all(NULL, dir, 1, 3, 11, msg, sizeof msg));
    ZT_OK(zero_io_create_posix(&inner, &err));
    ZT_OK(zero_io_create_fault(&io, inner, 1, "", &err));
    ZT_OK(save_all(io, dir, 2, 3, 22, msg, sizeof msg));
    for (int k = 0; k < ZERO_IO_OP_COUNT; k++) calls[k] = zero_io_fault_calls(io, (zero_io_op)k);
    zero_io_free(io);
    printf("a 3-rank save makes %llu writes, %llu fsyncs, %llu renames, %llu opens, %llu mkdirs, %llu unlinks\n",
           (unsigned long long)calls[ZERO_IO_OP_WRITE], (unsigned long long)calls[ZERO_IO_OP_FSYNC],
           (unsigned long long)calls[ZERO_IO_OP_RENAME], (unsigned long long)calls[ZERO_IO_OP_OPEN],
           (unsigned long long)calls[ZERO_IO_OP_MKDIR], (unsigned long long)calls[ZERO_IO_OP_UNLINK]);
    ZT_CHECK(calls[ZERO_IO_OP_WRITE] >= 9 && calls[ZERO_IO_OP_FSYNC] >= 8 && calls[ZERO_IO_OP_RENAME] >= 6);
    const zero_io_op kinds[] = {ZERO_IO_OP_WRITE, ZERO_IO_OP_FSYNC, ZERO_IO_OP_RENAME, ZERO_IO_OP_OPEN,
                                ZERO_IO_OP_CLOSE, ZERO_IO_OP_MKDIR, ZERO_IO_OP_UNLINK, ZERO_IO_OP_READ};
    int failures = 0, attempts = 0;
    for (size_t k = 0; k < sizeof kinds / sizeof kinds[0]; k++) {
        for (uint64_t n = 1; n <= calls[kinds[k]]; n++) {
            rm_rf(dir);
            ZT_OK(save_all(NULL, dir, 1, 3, 11, msg, sizeof msg));
            char spec[64];
            snprintf(spec, sizeof spec, "%s:%llu:%s", zero_io_op_name(kinds[k]), (unsigned long long)n, n % 2 ? "eio" : "enospc");
            ZT_OK(zero_io_create_posix(&inner, &err));
            ZT_OK(zero_io_create_fault(&io, inner, 1, spec, &err));
            zero_status s = save_all(io, dir, 2, 3, 22, msg, sizeof msg);
            int injected = zero_io_fault_injected(io) > 0;
            zero_io_free(io);
            attempts++;
            failures += s != ZERO_OK;
            if (s != ZERO_OK)
                ZT_CHECKF(s == ZERO_ERR_IO || s == ZERO_ERR_NOSPACE, "%s: status %d: %s", spec, s, msg);
            /* every write, fsync, rename and open of a save matters: the save must report it */
            if (injected && (kinds[k] == ZERO_IO_OP_WRITE || kinds[k] == ZERO_IO_OP_RENAME || kinds[k] == ZERO_IO_OP_OPEN))
                ZT_CHECKF(s != ZERO_OK, "%s: the fault was injected but the save reported success", spec);
            check_after(dir, s, msg, spec);
            /* the next clean save succeeds and removes what the failed one left */
            ZT_CHECKF(save_all(NULL, dir, 3, 3, 33, msg, sizeof msg) == ZERO_OK, "%s: save after: %s", spec, msg);
            char p[800];
            snprintf(p, sizeof p, "%s/step_00000002.tmp", dir);
            ZT_CHECKF(!exists(p), "%s: the failed save's staging directory survived the next save", spec);
        }
    }
    printf("faults: %d save attempts, %d reported failure\n", attempts, failures);
    rm_rf(dir);
}

/* ------------------------------------------------------------------ a rank that never finishes */
static void test_dead_rank(void) {
    char dir[700], msg[1024], p[900];
    snprintf(dir, sizeof dir, "%s/dead", g_dir);
    ZT_OK(save_all(NULL, dir, 1, 3, 11, msg, sizeof msg));
    zero_ckpt_writer *w[3] = {0};
    ZT_OK(rank_save(NULL, dir, 2, 0, 3, 22, &w[0], msg, sizeof msg));
    ZT_OK(rank_save(NULL, dir, 2, 1, 3, 22, &w[1], msg, sizeof msg));
    /* rank 2 dies mid-write: its temporary file stays, it never finishes */
    zero_error err;
    ZT_OK(zero_ckpt_writer_begin(&w[2], NULL, dir, 2, 2, 3, save_id(2, 22), &err));
    snprintf(p, sizeof p, "%s/step_00000002.tmp/rank_00002.safetensors.tmp", dir);
    ZT_CHECK(exists(p));
    /* an engine that committed anyway is refused, naming the missing rank */
    ZT_EQ_INT(zero_ckpt_commit(w[0], k_engine_json), ZERO_ERR_STATE);
    ZT_CHECKF(strstr(zero_ckpt_writer_last_error(w[0]), "rank 2 did not finish") != NULL, "'%s'",
              zero_ckpt_writer_last_error(w[0]));
    char latest[128];
    snprintf(p, sizeof p, "%s/latest", dir);
    read_text(p, latest, sizeof latest);
    ZT_CHECK(!strcmp(latest, "step_00000001\n"));
    snprintf(p, sizeof p, "%s/step_00000002.tmp", dir);
    expect_refused(p, 0, "no manifest.json and no COMMIT", NULL);
    snprintf(p, sizeof p, "%s/step_00000002", dir);
    ZT_CHECK(!exists(p));
    zero_ckpt *c = open_ok(dir);
    if (c) {
        ZT_EQ_INT(zero_ckpt_step(c), 1);
        ZT_EQ_INT(check_all(c, 2, 11), 0);
        zero_ckpt_close(c);
    }
    /* the same step again: both ranks finished the first attempt, rank 1 fails the second; its
     * file from the first attempt must not let a (wrong) commit through */
    for (int r = 0; r < 3; r++) zero_ckpt_writer_free(w[r]);
    memset(w, 0, sizeof w);
    ZT_OK(rank_save(NULL, dir, 2, 0, 2, 22, &w[0], msg, sizeof msg));
    ZT_OK(rank_save(NULL, dir, 2, 1, 2, 22, &w[1], msg, sizeof msg));
    zero_ckpt_writer_free(w[0]);
    zero_ckpt_writer_free(w[1]);
    ZT_OK(rank_save(NULL, dir, 2, 0, 2, 23, &w[0], msg, sizeof msg));
    ZT_OK(zero_ckpt_writer_begin(&w[1], NULL, dir, 2, 1, 2, save_id(2, 23), &err));
    zero_ckpt_writer_free(w[1]);
    w[1] = NULL;
    ZT_EQ_INT(zero_ckpt_commit(w[0], k_engine_json), ZERO_ERR_STATE);
    ZT_CHECKF(strstr(zero_ckpt_writer_last_error(w[0]), "rank 1 did not finish") != NULL, "'%s'",
              zero_ckpt_writer_last_error(w[0]));
    /* the process "exits": the writers are dropped; a later save (with fewer ranks) cleans up */
    for (int r = 0; r < 3; r++) zero_ckpt_writer_free(w[r]);
    ZT_OK(save_all(NULL, dir, 3, 2, 33, msg, sizeof msg));
    snprintf(p, sizeof p, "%s/step_00000002.tmp", dir);
    ZT_CHECK(!exists(p));
    snprintf(p, sizeof p, "%s/step_00000001", dir);
    ZT_CHECK(exists(p)); /* older committed checkpoints are kept */
    rm_rf(dir);
}

/* ------------------------------------------------------------------ saving a step again */
static void test_resave(void) {
    char dir[700], msg[1024], p[900];
    snprintf(dir, sizeof dir, "%s/again", g_dir);
    ZT_OK(save_all(NULL, dir, 5, 4, 1, msg, sizeof msg));
    /* a failed attempt at step 5 with 4 ranks leaves rank 3's file in the staging directory... */
    zero_ckpt_writer *w[4] = {0};
    for (int r = 0; r < 4; r++) ZT_OK(rank_save(NULL, dir, 5, r, 4, 9, &w[r], msg, sizeof msg));
    for (int r = 0; r < 4; r++) zero_ckpt_writer_free(w[r]);
    /* ...which a 2-rank save of the same step must not pick up */
    ZT_OK(save_all(NULL, dir, 5, 2, 2, msg, sizeof msg));
    char latest[128];
    snprintf(p, sizeof p, "%s/latest", dir);
    read_text(p, latest, sizeof latest);
    ZT_CHECKF(!strcmp(latest, "step_00000005.1\n"), "latest '%s'", latest);
    snprintf(p, sizeof p, "%s/step_00000005", dir);
    ZT_CHECK(!exists(p)); /* the older save of step 5 was removed once latest moved on */
    snprintf(p, sizeof p, "%s/step_00000005.1/rank_00003.safetensors", dir);
    ZT_CHECK(!exists(p));
    zero_ckpt *c = open_ok(dir);
    if (c) {
        ZT_EQ_INT(zero_ckpt_world(c), 2);
        ZT_EQ_INT(check_all(c, 3, 2), 0);
        zero_ckpt_close(c);
    }
    rm_rf(dir);
}

/* ------------------------------------------------------------------ sample for the CLI test */
static int write_sample(const char *dir) {
    char msg[1024];
    zero_status s = save_all(NULL, dir, 42, 2, 7, msg, sizeof msg);
    if (s != ZERO_OK) fprintf(stderr, "test_ckpt --write %s: %s\n", dir, msg);
    return s == ZERO_OK ? 0 : 1;
}

/* ------------------------------------------------------------------ the engine's typed manifest */
static zero_manifest_unit g_units[2];
static zero_manifest_param g_params[3];

/* Two units ("a": w[2,3] + b[4]; "c": g[5]), AdamW-like with one state, bf16. */
static void sample_manifest(zero_manifest *m) {
    memset(m, 0, sizeof *m);
    g_units[0] = (zero_manifest_unit){"a", 10, 0, 2};
    g_units[1] = (zero_manifest_unit){"c", 5, 2, 1};
    g_params[0] = (zero_manifest_param){"a.w", 2, {2, 3}, 0, 6, 0, 0};
    g_params[1] = (zero_manifest_param){"a.b", 1, {4}, 6, 4, 1, 0};
    g_params[2] = (zero_manifest_param){"c.g", 1, {5}, 0, 5, 1, 0};
    m->stage = 3;
    m->precision = ZERO_DTYPE_BF16;
    m->align = 16;
    m->engine_step = 7;
    m->optimizer = "AdamW";
    m->states = 1;
    m->scaler = (zero_manifest_scaler){65536, 2, 7, -1};
    m->nunits = 2;
    m->units = g_units;
    m->nparams = 3;
    m->params = g_params;
    m->user_json = "{\"model\": {\"n_layer\": 2, \"name\": \"x\"}, \"seed\": 5}";
}

/* zero_manifest_validate refuses each field out of range, naming it. */
static void test_manifest_validate(void) {
    zero_manifest m;
    zero_error err;
    sample_manifest(&m);
    ZT_OK(zero_manifest_validate(&m, &err));
#define BAD(edit, needle)                                                                          \
    do {                                                                                           \
        sample_manifest(&m);                                                                       \
        edit;                                                                                      \
        ZT_EQ_INT(zero_manifest_validate(&m, &err), ZERO_ERR_INVALID_ARG);                         \
        ZT_CHECKF(strstr(err.msg, needle) != NULL, "%s: message '%s' lacks '%s'", #edit, err.msg, needle); \
    } while (0)
    BAD(m.stage = 4, "stage 4");
    BAD(m.precision = ZERO_DTYPE_INT32, "precision");
    BAD(m.align = 0, "align 0");
    BAD(m.engine_step = -1, "engine_step -1");
    BAD(m.optimizer = "", "optimizer.type");
    BAD(m.states = 3, "optimizer.states 3");
    BAD(m.scaler.scale = 0, "loss_scaler.scale");
    BAD(m.scaler.scale = NAN, "loss_scaler.scale");
    BAD(m.scaler.delayed_shift = -1, "delayed_shift -1");
    BAD(m.scaler.iter = -1, "loss_scaler.iter -1");
    BAD(m.scaler.last_overflow_iter = -2, "last_overflow_iter -2");
    BAD(m.nunits = 0, "at least one unit");
    BAD(g_units[1].name = "a", "unit 'a' is listed twice");
    BAD(g_units[1].numel = 0, "numel 0");
    BAD(g_params[1].offset = 7, "offset 7: expected 6 (a unit's parameters lie back to back from 0: a gap)");
    BAD(g_params[1].offset = 5, "an overlap");
    BAD(g_params[1].shape[0] = 5, "ends past unit 'a'");
    BAD(g_params[1].shape[0] = 3, "cover 9 of its 10");
    BAD(g_params[2].name = "a.w", "'a.w' is listed twice");
    BAD(g_params[0].ndim = 0, "0 dimensions");
    BAD(g_params[0].ndim = 9, "9 dimensions");
    BAD(g_params[0].shape[1] = 0, "dimension 1 is 0");
    BAD(g_units[1].first_param = 1, "parameters [1, 2)");
    BAD(m.user_json = "[1]", "not a JSON object");
    BAD(m.user_json = "{} {}", "bytes after the JSON value");
    BAD(m.user_json = "{\"a\": }", "not valid JSON");
#undef BAD
}

/* The typed manifest through a commit and back: every field, the user's object by path, and a
 * commit whose tensors are not the units' refused. */
static void test_manifest_roundtrip(void) {
    char dir[700];
    snprintf(dir, sizeof dir, "%s/typed", g_dir);
    zero_manifest m;
    sample_manifest(&m);
    for (int attempt = 0; attempt < 2; attempt++) {
        zero_error err;
        zero_ckpt_writer *w = NULL;
        ZT_OK(zero_ckpt_writer_begin(&w, NULL, dir, 7, 0, 1, NULL, &err));
        if (!w) return;
        const char *names[4] = {"a/master", "a/exp_avg", "c/master", attempt ? "c/other" : "c/exp_avg"};
        const uint64_t numel[4] = {10, 10, 5, attempt ? 6 : 5};
        for (int i = 0; i < 4; i++) ZT_OK(zero_ckpt_writer_add(w, names[i], ZERO_DTYPE_FP32, numel[i], 16));
        float v[10] = {0};
        for (int i = 0; i < 4; i++) ZT_OK(zero_ckpt_writer_write(w, v, numel[i] * 4));
        ZT_OK(zero_ckpt_writer_finish(w));
        if (attempt) { /* a state of another size: the engine's tensors must be its units' */
            ZT_EQ_INT(zero_ckpt_commit_engine(w, &m), ZERO_ERR_INVALID_ARG);
            ZT_CHECKF(strstr(zero_ckpt_writer_last_error(w), "tensor 'c/other'") != NULL, "%s", zero_ckpt_writer_last_error(w));
            zero_ckpt_writer_free(w);
            break;
        }
        ZT_OK(zero_ckpt_commit_engine(w, &m));
        zero_ckpt_writer_free(w);
        zero_ckpt *c = open_ok(dir);
        if (!c) return;
        const zero_manifest *r = zero_ckpt_engine_manifest(c);
        ZT_CHECK(r != NULL);
        if (r) {
            ZT_EQ_INT(r->stage, 3);
            ZT_EQ_INT(r->precision, ZERO_DTYPE_BF16);
            ZT_EQ_INT(r->align, 16);
            ZT_EQ_INT(r->engine_step, 7);
            ZT_CHECK(!strcmp(r->optimizer, "AdamW") && r->states == 1);
            ZT_CHECK(r->scaler.scale == 65536 && r->scaler.delayed_shift == 2 && r->scaler.iter == 7 &&
                     r->scaler.last_overflow_iter == -1);
            ZT_EQ_INT(r->nunits, 2);
            ZT_EQ_INT(r->nparams, 3);
            for (int k = 0; k < 3 && r->nparams == 3; k++) {
                const zero_manifest_param *a = &r->params[k], *b = &g_params[k];
                ZT_CHECK(!strcmp(a->name, b->name) && a->ndim == b->ndim && a->offset == b->offset &&
                         a->numel == b->numel && a->no_decay == b->no_decay && !memcmp(a->shape, b->shape, sizeof a->shape));
            }
            ZT_CHECK(r->units[1].first_param == 2 && r->units[1].nparams == 1 && !strcmp(r->units[1].name, "c"));
        }
        double x = 0;
        const char *str = NULL;
        ZT_OK(zero_ckpt_user_number(c, "model.n_layer", &x));
        ZT_CHECK(x == 2);
        ZT_OK(zero_ckpt_user_number(c, "seed", &x));
        ZT_CHECK(x == 5);
        ZT_OK(zero_ckpt_user_string(c, "model.name", &str));
        ZT_CHECK(str && !strcmp(str, "x"));
        ZT_EQ_INT(zero_ckpt_user_number(c, "model.name", &x), ZERO_ERR_FORMAT);
        ZT_EQ_INT(zero_ckpt_user_number(c, "model.missing", &x), ZERO_ERR_FORMAT);
        ZT_EQ_INT(zero_ckpt_user_number(c, "seed.deeper", &x), ZERO_ERR_FORMAT);
        zero_ckpt_summary sm;
        zero_ckpt_summary_get(c, &sm);
        ZT_CHECK(sm.stage == 3 && sm.units == 2 && sm.params == 3 && sm.param_elements == 15 && !strcmp(sm.precision, "bf16"));
        zero_ckpt_close(c);
    }
    /* the generic commit refuses JSON that claims to be the engine's part */
    zero_error err;
    zero_ckpt_writer *w = NULL;
    char d2[760];
    snprintf(d2, sizeof d2, "%s/untyped", dir);
    ZT_OK(zero_ckpt_writer_begin(&w, NULL, d2, 1, 0, 1, NULL, &err));
    if (!w) return;
    ZT_OK(zero_ckpt_writer_finish(w));
    ZT_EQ_INT(zero_ckpt_commit(w, "{\"writer\": \"zero\", \"stage\": 1}"), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_ckpt_writer_last_error(w), "zero_ckpt_commit_engine") != NULL, "%s", zero_ckpt_writer_last_error(w));
    zero_ckpt_writer_free(w);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write")) return write_sample(argv[2]);
    make_dir();
    test_reshard();
    test_refusals();
    test_misuse();
    test_dead_rank();
    test_resave();
    test_faults();
    test_manifest_validate();
    test_manifest_roundtrip();
    rm_rf(g_dir);
    return zt_finish("test_ckpt");
}
