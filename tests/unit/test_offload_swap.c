/* Swap files of NVMe offload: the name and header, zeros to start with, and the ownership rule —
 * a file that is not a swap file, or is the swap file of a live process or another host, is never
 * touched (its bytes are read back unchanged); a stale swap file of a dead process of this host is
 * replaced; a failed creation (injected disk faults) leaves no file behind; remove unlinks.
 * Liveness is the owner's flock (format 2), not its pid: a file whose lock is free is stale even
 * when its pid runs, one whose lock is held is live even when its pid is gone; the sweep removes
 * exactly the stale files of this user (none through a link, none not 0600, none of another host
 * or without a header); zero_scratch_remove_all removes the files of the live handles. */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
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

/* A header as swap.c writes it (format `version`, mode 0600 as zero creates it), with the fields a
 * test wants to fake. */
static void fake_header_v(const char *p, uint32_t version, const char *host, long long pid) {
    char h[4096];
    memset(h, 0, sizeof h);
    memcpy(h, "ZEROSWAP", 8);
    uint32_t v = version, hb = 4096;
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
    chmod(p, 0600);
}

static void fake_header(const char *p, const char *host, long long pid) { fake_header_v(p, 1, host, pid); }

static void this_host(char *host) {
    gethostname(host, 64);
    host[63] = 0;
}

/* A pid that no longer runs: a child that exited and was reaped. */
static pid_t dead_pid(void) {
    pid_t child = fork();
    if (child == 0) _exit(0);
    waitpid(child, NULL, 0);
    return child;
}

/* A child that holds an exclusive flock on p until killed; -1 when it could not. */
static pid_t hold_lock(const char *p) {
    int ready[2];
    if (pipe(ready) != 0) return -1;
    pid_t child = fork();
    if (child == 0) {
        int fd = open(p, O_RDONLY);
        char ok = fd >= 0 && flock(fd, LOCK_EX) == 0;
        if (write(ready[1], &ok, 1) != 1) _exit(1);
        for (;;) pause();
    }
    char ok = 0;
    close(ready[1]);
    if (read(ready[0], &ok, 1) != 1 || !ok) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
        child = -1;
    }
    close(ready[0]);
    return child;
}

static void end_child(pid_t child) {
    kill(child, SIGKILL);
    waitpid(child, NULL, 0);
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
    this_host(host);
    fake_header(p, host, (long long)dead_pid());
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

/* Format 2: the lock says whether the owner runs, whatever the pid field says. */
static void test_lock(zero_io *io) {
    zero_error err = {{0}};
    char p[512], host[64];
    this_host(host);
    path_of(p, sizeof p, "t7", 0, "optim");
    /* the pid runs (it is this process), the lock is free: stale, and replaced */
    fake_header_v(p, 2, host, (long long)getpid());
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_STALE);
    zero_swap *s = NULL;
    ZT_OK(zero_swap_create(&s, io, dir, "t7", 0, 1, "optim", 4096, &err));
    /* the file zero creates is format 2 and holds its lock: another open cannot take it */
    uint32_t version = 0;
    char h[16];
    ZT_EQ_INT(read_file(p, h, sizeof h), sizeof h);
    memcpy(&version, h + 8, 4);
    ZT_EQ_INT(version, 2);
    int fd = open(p, O_RDONLY);
    ZT_CHECK(fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) != 0);
    if (fd >= 0) close(fd);
    ZT_OK(zero_swap_remove(s, &err));
    /* the pid is gone, the lock is held (by another process): live, refused, left alone */
    fake_header_v(p, 2, host, (long long)dead_pid());
    pid_t holder = hold_lock(p);
    ZT_CHECK(holder > 0);
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_LIVE);
    ZT_EQ_INT(zero_swap_create(&s, io, dir, "t7", 0, 1, "optim", 4096, &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "which is running") != NULL, "message: %s", err.msg);
    zero_swap_swept w;
    ZT_OK(zero_swap_sweep(dir, &w, &err));
    ZT_EQ_INT(w.removed, 0);
    ZT_CHECK(exists(p));
    /* its holder killed outright: the kernel dropped the lock, the sweep removes it */
    end_child(holder);
    ZT_EQ_INT(zero_swap_probe(p), ZERO_SWAP_STALE);
    ZT_OK(zero_swap_sweep(dir, &w, &err));
    ZT_EQ_INT(w.removed, 1);
    ZT_EQ_INT(w.bytes, 4096);
    ZT_CHECKF(!strcmp(w.first, "zero_t7_rank00000.optim.swp"), "first %s", w.first);
    ZT_CHECK(!exists(p));
}

/* The sweep removes the stale swap files of any job, and nothing else. */
static void test_sweep(zero_io *io) {
    zero_error err = {{0}};
    char host[64], p[512], keep[16][512];
    int nkeep = 0;
    this_host(host);
    /* stale: two formats, two jobs */
    path_of(p, sizeof p, "dead1", 0, "optim");
    fake_header_v(p, 2, host, (long long)getpid());
    path_of(p, sizeof p, "dead2", 1, "param");
    fake_header_v(p, 1, host, (long long)dead_pid());
    /* a live one: this process's own swap file */
    zero_swap *live = NULL;
    ZT_OK(zero_swap_create(&live, io, dir, "alive", 0, 1, "optim", 8192, &err));
    /* not to be touched: a user's file with our name, a file being created (no header yet), a
     * stale header readable by others, another host's, and a link to a stale swap file outside */
    path_of(keep[nkeep++], sizeof keep[0], "usr", 0, "optim");
    write_file(keep[nkeep - 1], "mine\n", 5);
    chmod(keep[nkeep - 1], 0600);
    path_of(keep[nkeep++], sizeof keep[0], "new", 0, "optim");
    write_file(keep[nkeep - 1], "", 0);
    chmod(keep[nkeep - 1], 0600);
    path_of(keep[nkeep++], sizeof keep[0], "shared", 0, "optim");
    fake_header_v(keep[nkeep - 1], 2, host, (long long)dead_pid());
    chmod(keep[nkeep - 1], 0640);
    path_of(keep[nkeep++], sizeof keep[0], "remote", 0, "optim");
    fake_header_v(keep[nkeep - 1], 2, "some-other-host.example", 1);
    char outside[300];
    snprintf(outside, sizeof outside, "%s.outside.swp", dir);
    fake_header_v(outside, 2, host, (long long)dead_pid());
    path_of(keep[nkeep++], sizeof keep[0], "link", 0, "optim");
    ZT_OK(symlink(outside, keep[nkeep - 1]));
    if (geteuid() == 0) { /* another user's stale swap file */
        path_of(keep[nkeep++], sizeof keep[0], "other", 0, "optim");
        fake_header_v(keep[nkeep - 1], 2, host, (long long)dead_pid());
        ZT_OK(chown(keep[nkeep - 1], 65534, 65534));
    } else {
        printf("SKIP the sweep and another user's file: needs root to chown\n");
    }
    zero_swap_swept w;
    ZT_OK(zero_swap_sweep(dir, &w, &err));
    ZT_EQ_INT(w.removed, 2);
    ZT_EQ_INT(w.bytes, 2 * 4096);
    path_of(p, sizeof p, "dead1", 0, "optim");
    ZT_CHECK(!exists(p));
    path_of(p, sizeof p, "dead2", 1, "param");
    ZT_CHECK(!exists(p));
    ZT_CHECK(exists(zero_swap_path(live)));
    for (int i = 0; i < nkeep; i++) {
        struct stat st;
        ZT_CHECKF(lstat(keep[i], &st) == 0, "%s was removed", keep[i]);
        unlink(keep[i]);
    }
    ZT_CHECK(exists(outside));
    unlink(outside);
    /* a directory that does not exist holds nothing to sweep */
    char none[300];
    snprintf(none, sizeof none, "%s/none", dir);
    ZT_OK(zero_swap_sweep(none, &w, &err));
    ZT_EQ_INT(w.removed, 0);
    /* zero_scratch_remove_all (what a stop signal's handler calls) removes the live file, only it;
     * the handle is still freed cleanly afterwards */
    write_file(keep[0], "mine\n", 5);
    ZT_EQ_INT(zero_scratch_remove_all(), 1);
    ZT_CHECK(!exists(zero_swap_path(live)));
    ZT_CHECK(exists(keep[0]));
    ZT_EQ_INT(zero_scratch_remove_all(), 0);
    ZT_OK(zero_swap_remove(live, &err));
    unlink(keep[0]);
    ZT_EQ_INT(files_in_dir(), 0);
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
    test_lock(io);
    test_sweep(io);
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
