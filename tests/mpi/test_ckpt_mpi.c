/* Sharded checkpoints across real MPI ranks: each rank writes its own file, rank 0 commits after
 * an agreement; every rank reads back the shards of every world size 1..4; a write fault on one
 * rank, or a rank that never finishes, leaves the previous checkpoint as `latest`. */
#include "harness.h"
#include "zero/zero.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static zero_error zt_cerr; /* why the last zero_comm_init_*_with failed */

static zero_comm *W;
static int R, N;

typedef struct tspec {
    const char *name;
    zero_dtype dt;
    uint64_t numel, align;
} tspec;

static const tspec k_t[] = {
    {"h.0/master", ZERO_DTYPE_FP32, 777, 16},
    {"h.0/exp_avg", ZERO_DTYPE_FP32, 777, 16},
    {"ln_f/master", ZERO_DTYPE_FP32, 30, 16},
    {"wte/params", ZERO_DTYPE_BF16, 3001, 32},
};
#define NT (int)(sizeof k_t / sizeof k_t[0])

static float value(int i, uint64_t j, int seed) {
    if (k_t[i].dt == ZERO_DTYPE_BF16) return (float)((int)((j * 5 + (uint64_t)seed) % 255) - 127);
    return (float)((j * 3 + (uint64_t)i * 17 + (uint64_t)seed * 1009) % 65521) * 0.5f;
}

/* Every rank's status agreed: the worst (most negative) wins. */
static zero_status agree(zero_status s) {
    int32_t v = -(int32_t)s; /* statuses are <= 0: MAX of the negation finds any failure */
    zero_status c = zero_comm_all_reduce(W, &v, &v, 1, ZERO_DTYPE_INT32, ZERO_OP_MAX);
    return c != ZERO_OK ? c : (zero_status)(-v);
}

/* How a save goes: fault_spec (or NULL) applies to this rank's I/O; a rank that `dies` never
 * finishes its file. Returns the agreed status of the whole save. */
static zero_status save(const char *dir, int64_t step, int seed, const char *fault_spec, int dies) {
    zero_error err;
    zero_io *io = NULL, *inner = NULL;
    ZT_OK(zero_io_create_posix(&inner, &err));
    ZT_OK(zero_io_create_fault(&io, inner, 1, fault_spec, &err));
    zero_ckpt_writer *w = NULL;
    char id[ZERO_CKPT_ID_CHARS + 1]; /* one save's id on every rank, as the engine broadcasts it */
    snprintf(id, sizeof id, "%016llx%016llx", (unsigned long long)step, (unsigned long long)seed);
    zero_status s = zero_ckpt_writer_begin(&w, io, dir, step, R, N, id, &err);
    for (int i = 0; i < NT && s == ZERO_OK; i++) s = zero_ckpt_writer_add(w, k_t[i].name, k_t[i].dt, k_t[i].numel, k_t[i].align);
    for (int i = 0; i < NT && s == ZERO_OK; i++) {
        zero_shard sh;
        zero_partition_shard(k_t[i].numel, N, R, k_t[i].align, &sh);
        size_t esz = zero_dtype_size(k_t[i].dt);
        unsigned char *b = malloc(sh.valid * esz + 1);
        for (uint64_t j = 0; j < sh.valid; j++) {
            if (k_t[i].dt == ZERO_DTYPE_FP32) ((float *)b)[j] = value(i, sh.offset + j, seed);
            else ((uint16_t *)b)[j] = zero_fp32_to_bf16(value(i, sh.offset + j, seed));
        }
        /* half of the slice now and the rest in a second piece, as an engine streaming shards */
        size_t n = sh.valid * esz, h = n / 2;
        s = zero_ckpt_writer_write(w, b, h);
        if (s == ZERO_OK && !(dies && i == NT - 1)) s = zero_ckpt_writer_write(w, b + h, n - h);
        free(b);
    }
    if (s == ZERO_OK && !dies) s = zero_ckpt_writer_finish(w);
    if (dies && s == ZERO_OK) s = ZERO_ERR_IO; /* what the survivors' agreement sees: no success */
    s = agree(s);
    if (s == ZERO_OK && R == 0) {
        s = zero_ckpt_commit(w, "{\"stage\": 1, \"units\": []}");
        if (s != ZERO_OK) fprintf(stderr, "commit: %s\n", zero_ckpt_writer_last_error(w));
    }
    int32_t c = (int32_t)s;
    ZT_OK(zero_comm_broadcast(W, &c, 1, ZERO_DTYPE_INT32, 0));
    zero_ckpt_writer_free(w);
    zero_io_free(io);
    return (zero_status)c;
}

/* Each rank checks the new ranks r' = R, R+N, ... of every new world size 1..4. */
static void check(const char *dir, int64_t step, int seed) {
    zero_ckpt *c = NULL;
    zero_error err;
    zero_status s = zero_ckpt_open(&c, NULL, dir, 0, &err);
    ZT_CHECKF(s == ZERO_OK, "open %s: %s", dir, err.msg);
    if (!c) return;
    ZT_EQ_INT(zero_ckpt_step(c), step);
    ZT_EQ_INT(zero_ckpt_world(c), N);
    long bad = 0;
    for (int Wn = 1; Wn <= 4; Wn++) {
        for (int r = R; r < Wn; r += N) {
            for (int i = 0; i < NT; i++) {
                zero_shard sh;
                zero_partition_shard(k_t[i].numel, Wn, r, k_t[i].align, &sh);
                uint64_t lo = sh.offset < k_t[i].numel ? sh.offset : k_t[i].numel;
                float *b = malloc((sh.valid + 1) * sizeof(float));
                ZT_OK(zero_ckpt_read_range(c, k_t[i].name, lo, lo + sh.valid, b));
                for (uint64_t j = 0; j < sh.valid; j++) bad += b[j] != value(i, sh.offset + j, seed);
                free(b);
            }
        }
    }
    ZT_CHECKF(bad == 0, "%ld wrong elements", bad);
    zero_ckpt_close(c);
}

static void read_latest(const char *dir, char *buf, size_t cap) {
    char p[600];
    snprintf(p, sizeof p, "%s/latest", dir);
    buf[0] = 0;
    FILE *f = fopen(p, "rb");
    if (!f) return;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
}

int main(void) {
    if (zero_comm_init_mpi_with(&W, NULL, NULL, &zt_cerr) != ZERO_OK) {
        fprintf(stderr, "zero_comm_init_mpi: %s\n", zt_cerr.msg);
        return 1;
    }
    R = zero_comm_rank(W);
    N = zero_comm_size(W);
    zt_rank = R;
    /* one directory for all ranks: rank 0 makes it and tells the others */
    char dir[256] = {0};
    if (R == 0) {
        struct stat st;
        const char *base = stat("/dev/shm", &st) == 0 && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        snprintf(dir, sizeof dir, "%s/zt_ckpt_mpi_XXXXXX", base);
        if (!mkdtemp(dir)) dir[0] = 0;
    }
    ZT_OK(zero_comm_broadcast(W, dir, sizeof dir, ZERO_DTYPE_UINT8, 0));
    ZT_CHECK(dir[0] != 0);
    char latest[64];

    ZT_OK(save(dir, 10, 1, NULL, 0));
    read_latest(dir, latest, sizeof latest);
    ZT_CHECK(!strcmp(latest, "step_00000010\n"));
    check(dir, 10, 1);
    ZT_OK(zero_comm_barrier(W));

    /* the last rank's second data write fails: nobody commits, step 10 stays latest */
    char spec[64];
    snprintf(spec, sizeof spec, "%s", R == N - 1 ? "write:2:eio" : "");
    ZT_CHECK(save(dir, 20, 2, spec, 0) != ZERO_OK);
    read_latest(dir, latest, sizeof latest);
    ZT_CHECKF(!strcmp(latest, "step_00000010\n"), "latest '%s' after a failed save", latest);
    check(dir, 10, 1);
    ZT_OK(zero_comm_barrier(W));

    /* the last rank dies mid-save: no COMMIT, step 10 stays latest */
    ZT_CHECK(save(dir, 30, 3, NULL, R == N - 1) != ZERO_OK);
    read_latest(dir, latest, sizeof latest);
    ZT_CHECKF(!strcmp(latest, "step_00000010\n"), "latest '%s' after a rank died", latest);
    check(dir, 10, 1);
    ZT_OK(zero_comm_barrier(W));

    /* a good save afterwards commits and removes the failed saves' staging directories */
    ZT_OK(save(dir, 40, 4, NULL, 0));
    check(dir, 40, 4);
    char p[600];
    snprintf(p, sizeof p, "%s/step_00000020.tmp", dir);
    ZT_CHECK(access(p, F_OK) != 0);
    snprintf(p, sizeof p, "%s/step_00000030.tmp", dir);
    ZT_CHECK(access(p, F_OK) != 0);
    ZT_OK(zero_comm_barrier(W));
    if (R == 0) {
        char cmd[400];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
        if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    }
    zero_comm_free(W);
    return zt_finish("test_ckpt_mpi");
}
