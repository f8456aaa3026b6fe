/* Swap files of NVMe offload: the name and header, zeros to start with, and the ownership rule —
 * a file that is not a swap file, or is the swap file of a live process or another host, is never
 * touched (its bytes are read back unchanged); a stale swap file of a dead process of this host is
 * replaced; a failed creation (injected disk faults) leaves no file behind; remove unlinks. */
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"
#include "zero/zero.h"
#include "zero/offload.h"

static char dir[256];

static void path_of(char *buf, size_t cap, const char *job, int rank, const char *kind) {
    snprintf(buf, cap, "%s/zero_%s_rank%05d.%s.swp", dir, job, rank, kind);
}

static int exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static void write_file(const char *p, const void *data, size_t n) {
    int fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, data, n) != (ssize_t)n) ZT_FAIL("cannot write %s", p);
    if (fd >= 0) close(fd);
}

static size_t read_file(const char *p, void *buf, size_t cap) {
    int fd = open(p, O_RDONLY);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, cap);
    close(fd);
    return n < 0 ? 0 : (size_t)n;
}

static int files_in_dir(void) {
    int n = 0;
    DIR *d = opendir(dir);
    for (struct dirent *de; d && (de = readdir(d)) != NULL;)
        if (de->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

/* A header as swap.c writes it, with the fields a test wants to fake. */
static void fake_header(const char *p, const char *host, long long pid) {
    char h[4096];
    memset(h, 0, sizeof h);
    memcpy(h, "ZEROSWAP", 8);
    uint32_t v = 1, hb = 4096;
    uint64_t data = 4096;
    int64_t pid64 = pid;
    memcpy(h + 8, &v, 4);
    memcpy(h + 12, &hb, 4);
    memcpy(h + 16, &data, 8);
    memcpy(h + 32, &pid64, 8);
    snprintf(h + 48, 64, "%s", host);
    snprintf(h + 112, 64, "old");
    snprintf(h + 176, 16, "optim");
    write_file(p, h, sizeof h);
}

static void test_create_remove(zero_io *io) {
    zero_error err = {{0}};
    zero_swap *s = NULL;
    char p[512];
    path_of(p, sizeof p, "t1", 3, "optim");
    ZT_OK(zero_swap_create(&s, io, dir, "t1", 3, 4, "optim", 3 * 4096, &err));
    if (!s) {
        ZT_FAIL("create: %s", err.msg);
        return;
    }
    ZT_CHECKF(!strcmp(zero_swap_path(s), p), "path %s, expected %s", zero_swap_path(s), p);
    ZT_EQ_INT(zero_swap_data_bytes(s), 3 * 4096);
    struct stat st;
    ZT_OK(stat(p, &st));
    ZT_EQ_INT(st.st_size, 4096 + 3 * 4096);
    /* the header: magic, rank 3 of 4, this pid, the job and the kind */
    char h[4096];
    ZT_EQ_INT(read_file(p, h, sizeof h), 4096);
    ZT_CHECK(!memcmp(h, "ZEROSWAP", 8));
    int32_t rank, world;
    int64_t pid;
    memcpy(&rank, h + 24, 4);
    memcpy(&world, h + 28, 4);
    memcpy(&pid, h + 32, 8);
    ZT_EQ_INT(rank, 3);
    ZT_EQ_INT(world, 4);
    ZT_EQ_INT(pid, getpid());
    ZT_CHECK(!strcmp(h + 112, "t1") && !strcmp(h + 176, "optim"));
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_LIVE);
    /* the data area reads as zeros, and holds what is written at the header's offset */
    char *buf = zero_io_buffer_alloc(NULL, ZERO_MEM_BUFFERS, 3 * 4096);
    memset(buf, 0x5a, 3 * 4096);
    ZT_OK(zero_io_pread(zero_swap_file(s), buf, 3 * 4096, ZERO_SWAP_HEADER));
    int zeros = 1;
    for (int i = 0; i < 3 * 4096; i++) zeros &= buf[i] == 0;
    ZT_CHECK(zeros);
    memset(buf, 7, 4096);
    ZT_OK(zero_io_pwrite(zero_swap_file(s), buf, 4096, ZERO_SWAP_HEADER + 4096));
    zero_io_buffer_free(NULL, buf);
    /* a second swap file of the same name while the first lives: refused, the first intact */
    zero_swap *s2 = NULL;
    ZT_EQ_INT(zero_swap_create(&s2, io, dir, "t1", 3, 4, "optim", 4096, &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "which is running") && strstr(err.msg, p), "message: %s", err.msg);
    ZT_OK(stat(p, &st));
    ZT_EQ_INT(st.st_size, 4096 + 3 * 4096);
    ZT_OK(zero_swap_remove(s, &err));
    ZT_CHECK(!exists(p));
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_ABSENT);
    ZT_OK(zero_swap_remove(NULL, NULL));
}

static void test_foreign(zero_io *io) {
    zero_error err = {{0}};
    char p[512];
    path_of(p, sizeof p, "t2", 0, "param");
    const char text[] = "a user's file that happens to have our name\n";
    write_file(p, text, sizeof text);
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_FOREIGN);
    zero_swap *s = NULL;
    ZT_EQ_INT(zero_swap_create(&s, io, dir, "t2", 0, 1, "param", 8192, &err), ZERO_ERR_IO);
    ZT_CHECK(s == NULL);
    ZT_CHECKF(strstr(err.msg, "is not a zero swap file") && strstr(err.msg, "refusing to overwrite") && strstr(err.msg, p),
              "message: %s", err.msg);
    char back[128];
    ZT_EQ_INT(read_file(p, back, sizeof back), sizeof text);
    ZT_CHECK(!memcmp(back, text, sizeof text));
    /* our magic on a file too short to be a header is still not ours */
    write_file(p, "ZEROSWAP", 8);
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_FOREIGN);
    ZT_EQ_INT(zero_swap_create(&s, io, dir, "t2", 0, 1, "param", 8192, &err), ZERO_ERR_IO);
    ZT_EQ_INT(read_file(p, back, sizeof back), 8);
    /* another host's swap file: left alone */
    fake_header(p, "some-other-host.example", 12345);
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_REMOTE);
    ZT_EQ_INT(zero_swap_create(&s, io, dir, "t2", 0, 1, "param", 8192, &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "some-other-host.example") != NULL, "message: %s", err.msg);
    struct stat st;
    ZT_OK(stat(p, &st));
    ZT_EQ_INT(st.st_size, 4096);
    unlink(p);
}

static void test_stale(zero_io *io) {
    zero_error err = {{0}};
    char p[512], host[64];
    path_of(p, sizeof p, "t3", 1, "optim");
    gethostname(host, sizeof host);
    host[63] = 0;
    /* a pid that no longer runs: a child that exited and was reaped */
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    fake_header(p, host, (long long)child);
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_STALE);
    zero_swap *s = NULL;
    ZT_OK(zero_swap_create(&s, io, dir, "t3", 1, 2, "optim", 2 * 4096, &err));
    struct stat st;
    ZT_OK(stat(p, &st));
    ZT_EQ_INT(st.st_size, 3 * 4096); /* replaced: our header, our size */
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_LIVE);
    ZT_OK(zero_swap_remove(s, &err));
    ZT_CHECK(!exists(p));
}

static void test_bad_args(zero_io *io) {
    zero_error err = {{0}};
    zero_swap *s = NULL;
    ZT_EQ_INT(zero_swap_create(&s, io, dir, "a/b", 0, 1, "optim", 4096, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "a/b") != NULL, "message: %s", err.msg);
    ZT_EQ_INT(zero_swap_create(&s, io, dir, "ok", 0, 1, "", 4096, &err), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_swap_create(&s, io, dir, "ok", 0, 1, "optim", 4095, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "4095") != NULL, "message: %s", err.msg);
    ZT_EQ_INT(zero_swap_create(&s, io, dir, "ok", 2, 2, "optim", 4096, &err), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(files_in_dir(), 0);
}

/* Disk faults while creating: the status says which, and no file is left behind. */
static void test_faults(void) {
    struct {
        const char *spec;
        zero_status want;
        const char *text;
    } cases[] = {
        {"write:1:enospc", ZERO_ERR_NOSPACE, "No space left"}, /* the header */
        {"truncate:1:eio", ZERO_ERR_IO, "Input/output error"},
        {"open:1:eio", ZERO_ERR_IO, "Input/output error"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        zero_io *posix = NULL, *io = NULL;
        zero_error err = {{0}};
        ZT_OK(zero_io_create_posix(&posix, &err));
        ZT_OK(zero_io_create_fault(&io, posix, 1, cases[i].spec, &err));
        zero_swap *s = NULL;
        ZT_EQ_INT(zero_swap_create(&s, io, dir, "t4", 0, 1, "optim", 4096, &err), cases[i].want);
        ZT_CHECKF(strstr(err.msg, cases[i].text) && strstr(err.msg, "injected"), "%s: message %s", cases[i].spec, err.msg);
        ZT_EQ_INT(files_in_dir(), 0);
        zero_io_free(io);
    }
    /* O_DIRECT refused (the second open fails once): buffered I/O, still correct; then an unlink
     * that fails is reported, and the handle is freed all the same */
    zero_io *posix = NULL, *io = NULL;
    zero_error err = {{0}};
    ZT_OK(zero_io_create_posix(&posix, &err));
    ZT_OK(zero_io_create_fault(&io, posix, 1, "open:2:eio,unlink:1:eio", &err));
    zero_swap *s = NULL;
    ZT_OK(zero_swap_create(&s, io, dir, "t5", 0, 1, "optim", 4096, &err));
    ZT_EQ_INT(zero_swap_direct(s), 0);
    char buf[100] = "x", back[100];
    ZT_OK(zero_io_pwrite(zero_swap_file(s), buf, sizeof buf, ZERO_SWAP_HEADER + 1));
    ZT_OK(zero_io_pread(zero_swap_file(s), back, sizeof back, ZERO_SWAP_HEADER + 1));
    ZT_CHECK(!memcmp(buf, back, sizeof buf));
    char p[512];
    path_of(p, sizeof p, "t5", 0, "optim");
    ZT_EQ_INT(zero_swap_remove(s, &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "removing the swap file") && strstr(err.msg, p), "message: %s", err.msg);
    ZT_CHECK(exists(p));
    unlink(p);
    ZT_EQ_INT(files_in_dir(), 0);
    zero_io_free(io);
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/zero_test_offload_swap_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    zero_io *io = NULL;
    zero_error err = {{0}};
    if (zero_offload_io_create(&io, 8, &err) != ZERO_OK) {
        fprintf(stderr, "io: %s\n", err.msg);
        return 1;
    }
    test_create_remove(io);
    test_foreign(io);
    test_stale(io);
    test_bad_args(io);
    test_faults();
    /* a directory that does not exist yet is created (nvme_path may be new) */
    char sub[300];
    snprintf(sub, sizeof sub, "%s/new/dir", dir);
    zero_swap *s = NULL;
    ZT_OK(zero_swap_create(&s, io, sub, "t6", 0, 1, "param", 4096, &err));
    ZT_OK(zero_swap_remove(s, &err));
    rmdir(sub);
    snprintf(sub, sizeof sub, "%s/new", dir);
    rmdir(sub);
    zero_io_free(io);
    ZT_EQ_INT(files_in_dir(), 0);
    rmdir(dir);
    return zt_finish("test_offload_swap");
}
