/* The comm watchdog without MPI: a fake node peer (a heartbeat page this test beats or not) and a
 * call that waits on it, in a child process each, since the watchdog ends the process it judges.
 * A peer whose heartbeat stands still past heartbeat_s ends the waiting process with exit status 1,
 * one log line naming the call, the peer and the seconds, and its swap file removed; a peer that
 * keeps beating is waited for past that (a slow rank is not a stopped one), as is one whose
 * watchdog never beat (it cannot be judged); the plain timeout still ends a wait. The same for a
 * fake peer on another node, which beats by UDP datagrams to the watchdog's socket: judged once
 * one has arrived, never while none does (a firewall), and not by datagrams of another nonce. */
#define _GNU_SOURCE /* memfd_create */
#include "comm/internal.h"
#include "harness.h"
#include "zero/offload.h"
#include "zero/zero.h"

#include <arpa/inet.h>
#include <endian.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char dir[128];

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void sleep_s(double s) {
    struct timespec q = {(time_t)s, (long)((s - (double)(time_t)s) * 1e9)};
    while (nanosleep(&q, &q) != 0) {}
}

/* The log of the child, where the test reads it back. */
static FILE *g_log;
static void to_file(void *ctx, zero_log_level level, const char *msg) {
    (void)ctx;
    (void)level;
    fprintf(g_log, "%s\n", msg);
    fflush(g_log);
}

typedef struct fake_peer {
    zero__beat_page *w;       /* the peer's side: this test writes it */
    const zero__beat_page *r; /* mapped again, read-only, as comm_beat.c maps a peer's page */
    volatile int beat_for_ms; /* a thread bumps the count every 100 ms for this long */
} fake_peer;

static int make_peer(fake_peer *p, int beating) {
    const int fd = memfd_create("fake-peer", 0);
    if (fd < 0 || ftruncate(fd, ZERO__BEAT_PAGE_BYTES) != 0) return -1;
    void *w = mmap(NULL, ZERO__BEAT_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    void *r = mmap(NULL, ZERO__BEAT_PAGE_BYTES, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (w == MAP_FAILED || r == MAP_FAILED) return -1;
    p->w = w;
    p->r = r;
    p->w->magic = ZERO__BEAT_MAGIC;
    p->w->pid = 424242;
    atomic_store(&p->w->beating, beating);
    return 0;
}

static void *beater(void *arg) {
    fake_peer *p = arg;
    for (int ms = 0; ms < p->beat_for_ms; ms += 100) {
        atomic_fetch_add(&p->w->count, 1);
        sleep_s(0.1);
    }
    return NULL;
}

/* In a child: a 2-rank communicator whose rank 1 is the fake peer, a swap file of its own, and one
 * watched wait of wait_s seconds; exits 0 when the wait ended by itself. Returns the child's
 * status and how long it ran; the child's log goes to log_path. */
static int run_child(int64_t timeout_s, int64_t heartbeat_s, int beating, int beat_for_ms, double wait_s,
                     const char *log_path, double *took, char *swap_path, size_t cap) {
    const double t0 = now_s();
    const pid_t child = fork();
    if (child == 0) {
        g_log = fopen(log_path, "w");
        zero_log_set_callback(to_file, NULL);
        fake_peer p = {0};
        if (!g_log || make_peer(&p, beating) != 0) _exit(3);
        zero_io *io = NULL;
        zero_swap *s = NULL;
        zero_error err = {{0}};
        if (zero_io_create_posix(&io, &err) || zero_swap_create(&s, io, dir, "wd", 0, 2, "optim", 4096, &err)) _exit(4);
        zero_comm *c = zero__comm_new(&zero__comm_self_ops, 0, 2); /* the self table: nothing but the fields */
        const zero__beat_page *page = p.r;
        const int rank = 1, pid = 424242;
        c->timeout_ns = timeout_s * 1000000000;
        c->heartbeat_ns = heartbeat_s * 1000000000;
        c->beat = zero__beat_watch(&page, &rank, &pid, 1);
        if (c->beat <= 0) _exit(5);
        pthread_t t;
        p.beat_for_ms = beat_for_ms;
        if (pthread_create(&t, NULL, beater, &p) != 0) _exit(6);
        const int slot = zero__watch_enter(c, "all_gather");
        if (slot < 0) _exit(7);
        sleep_s(wait_s);
        zero__watch_leave(slot);
        pthread_join(t, NULL);
        zero_swap_remove(s, NULL);
        _exit(0);
    }
    /* the child's swap file name: the one swap file of job "wd" in dir */
    snprintf(swap_path, cap, "%s/zero_wd_rank00000.optim.swp", dir);
    int status = 0;
    waitpid(child, &status, 0);
    *took = now_s() - t0;
    return status;
}

#define FAKE_NONCE 0x0123456789abcdefull

typedef struct fake_remote {
    int port;                 /* the watchdog's, on 127.0.0.1 */
    volatile int beat_for_ms; /* a datagram every 100 ms for this long */
} fake_remote;

static void *remote_beater(void *arg) {
    const fake_remote *f = arg;
    const int s = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in to = {0};
    to.sin_family = AF_INET;
    to.sin_port = htons((uint16_t)f->port);
    to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    for (int ms = 0, k = 1; s >= 0 && ms < f->beat_for_ms; ms += 100, k++) {
        const uint64_t w[3] = {htobe64(ZERO__BEAT_MAGIC), htobe64(FAKE_NONCE), htobe64((uint64_t)k)};
        sendto(s, w, sizeof w, 0, (const struct sockaddr *)&to, sizeof to);
        sleep_s(0.1);
    }
    if (s >= 0) close(s);
    return NULL;
}

/* As run_child, with rank 1 a fake peer on another node that sends datagrams for beat_for_ms. The
 * watchdog is told to send its own to its own port: they carry its nonce, not the peer's, so
 * they must not count as the peer's. */
static int run_remote_child(int64_t heartbeat_s, int beat_for_ms, double wait_s, const char *log_path, double *took) {
    const double t0 = now_s();
    const pid_t child = fork();
    if (child == 0) {
        g_log = fopen(log_path, "w");
        zero_log_set_callback(to_file, NULL);
        int port = 0;
        uint64_t nonce = 0;
        if (!g_log || !zero__beat_udp(&port, &nonce) || port <= 0) _exit(3);
        zero_comm *c = zero__comm_new(&zero__comm_self_ops, 0, 2);
        zero__beat_remote r = {.nonce = FAKE_NONCE, .naddr = 1, .port = port, .rank = 1, .pid = 424242};
        r.addr[0] = htonl(INADDR_LOOPBACK);
        snprintf(r.host, sizeof r.host, "fakehost");
        c->timeout_ns = 0;
        c->heartbeat_ns = heartbeat_s * 1000000000;
        c->beat = zero__beat_watch_remote(0, &r, 1);
        if (c->beat <= 0) _exit(5);
        fake_remote f = {port, beat_for_ms};
        pthread_t t;
        if (pthread_create(&t, NULL, remote_beater, &f) != 0) _exit(6);
        const int slot = zero__watch_enter(c, "all_reduce");
        if (slot < 0) _exit(7);
        sleep_s(wait_s);
        zero__watch_leave(slot);
        pthread_join(t, NULL);
        _exit(0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    *took = now_s() - t0;
    return status;
}

static int file_has(const char *path, const char *text) {
    char buf[2048] = "";
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    const size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return strstr(buf, text) != NULL;
}

static int exists(const char *p) {
    struct stat st;
    return lstat(p, &st) == 0;
}

int main(void) {
    snprintf(dir, sizeof dir, "/tmp/zero_test_watchdog_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char log[256], swp[256];
    snprintf(log, sizeof log, "%s/log", dir);
    double took;

    /* a stopped peer: its heartbeat stands still from the start; heartbeat 1 s, no timeout */
    int st = run_child(0, 1, 1, 0, 30, log, &took, swp, sizeof swp);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1, "stopped peer: status %#x, expected exit 1", st);
    ZT_CHECKF(took >= 1.0 && took < 5.0, "stopped peer: ended after %.2f s, expected 1 s to 5 s", took);
    ZT_CHECKF(file_has(log, "rank 0 of 2: all_gather has waited") &&
                  file_has(log, "rank 1 (pid 424242, on this node) has shown no heartbeat for") &&
                  file_has(log, "more than the 1 s of ZERO_COMM_HEARTBEAT"),
              "stopped peer: the log line");
    ZT_CHECKF(!exists(swp), "stopped peer: the ended process's swap file %s was left", swp);

    /* a slow peer: it beats for 3.5 s while this rank waits 3 s, three times the heartbeat limit */
    st = run_child(0, 1, 1, 3500, 3, log, &took, swp, sizeof swp);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "slow peer: status %#x, expected exit 0 (waited for)", st);
    ZT_CHECKF(took >= 3.0, "slow peer: ran %.2f s", took);
    ZT_CHECK(!exists(swp));

    /* a peer without a watchdog thread (it could not start): not judged */
    st = run_child(0, 1, 0, 0, 2.5, log, &took, swp, sizeof swp);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "peer without a watchdog: status %#x, expected exit 0", st);

    /* heartbeat off (0), the timeout (1 s) still ends the wait, with its own line */
    st = run_child(1, 0, 1, 0, 30, log, &took, swp, sizeof swp);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1, "timeout: status %#x, expected exit 1", st);
    ZT_CHECKF(took >= 1.0 && took < 5.0, "timeout: ended after %.2f s", took);
    ZT_CHECKF(file_has(log, "more than the 1 s of ZERO_COMM_TIMEOUT"), "timeout: the log line");
    ZT_CHECK(!exists(swp));

    /* a peer on another node that beat for 0.5 s, then stopped: judged 1 s after its last datagram */
    st = run_remote_child(1, 500, 30, log, &took);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 1, "stopped remote peer: status %#x, expected exit 1", st);
    ZT_CHECKF(took >= 1.4 && took < 5.0, "stopped remote peer: ended after %.2f s, expected 1.4 s to 5 s", took);
    ZT_CHECKF(file_has(log, "rank 0 of 2: all_reduce has waited") &&
                  file_has(log, "rank 1 (pid 424242, on another node: fakehost) has sent no heartbeat for") &&
                  file_has(log, "more than the 1 s of ZERO_COMM_HEARTBEAT"),
              "stopped remote peer: the log line");
    /* a remote peer that keeps beating is waited for, three times the limit */
    st = run_remote_child(1, 3500, 3, log, &took);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "slow remote peer: status %#x, expected exit 0", st);
    ZT_CHECKF(took >= 3.0, "slow remote peer: ran %.2f s", took);
    /* one whose datagrams never arrive (a firewall; only the watchdog's own, of another nonce, do)
     * is never judged */
    st = run_remote_child(1, 0, 2.5, log, &took);
    ZT_CHECKF(WIFEXITED(st) && WEXITSTATUS(st) == 0, "unheard remote peer: status %#x, expected exit 0", st);

    /* this process's own page says it beats as soon as the watchdog runs, not from its first tick
     * 0.25 s later: a rank stopped at once must be judged too (a tiny model's third step came
     * sooner, and such a rank was waited for the whole timeout) */
    int fd = -1;
    uint64_t nonce = 0;
    ZT_CHECK(zero__beat_self(&fd, &nonce));
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    const int f = open(self, O_RDONLY);
    const zero__beat_page *mine = f >= 0 ? mmap(NULL, ZERO__BEAT_PAGE_BYTES, PROT_READ, MAP_SHARED, f, 0) : MAP_FAILED;
    ZT_CHECK(mine != MAP_FAILED);
    if (mine != MAP_FAILED) {
        ZT_EQ_INT(atomic_load(&mine->beating), 1);
        ZT_CHECK(mine->magic == ZERO__BEAT_MAGIC && mine->nonce == nonce && mine->pid == getpid());
        const uint64_t c0 = atomic_load(&mine->count);
        sleep_s(0.6);
        ZT_CHECKF(atomic_load(&mine->count) >= c0 + 2, "the count moved from %llu to %llu in 0.6 s",
                  (unsigned long long)c0, (unsigned long long)atomic_load(&mine->count));
    }
    if (f >= 0) close(f);

    /* the settings: defaults, variables, options over variables, bad values named */
    zero_comm_options o;
    zero_comm_options_default(&o);
    int64_t t = 0, h = 0;
    unsetenv("ZERO_COMM_TIMEOUT");
    unsetenv("ZERO_COMM_HEARTBEAT");
    ZT_OK(zero__comm_watch_settings(&o, NULL, "init_mpi", &t, &h));
    ZT_EQ_INT(t, 1800000000000LL);
    ZT_EQ_INT(h, 60000000000LL);
    setenv("ZERO_COMM_HEARTBEAT", "7", 1);
    ZT_OK(zero__comm_watch_settings(&o, NULL, "init_mpi", &t, &h));
    ZT_EQ_INT(h, 7000000000LL);
    o.heartbeat_s = 0;
    ZT_OK(zero__comm_watch_settings(&o, NULL, "init_mpi", &t, &h));
    ZT_EQ_INT(h, 0);
    zero_error err = {{0}};
    const zero__cerr e = {NULL, &err};
    o.heartbeat_s = -3;
    ZT_EQ_INT(zero__comm_watch_settings(&o, &e, "init_mpi", &t, &h), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "zero_comm_options.heartbeat_s -3") != NULL, "%s", err.msg);
    zero_comm_options_default(&o);
    setenv("ZERO_COMM_HEARTBEAT", "1m", 1);
    ZT_EQ_INT(zero__comm_watch_settings(&o, &e, "init_mpi", &t, &h), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "ZERO_COMM_HEARTBEAT '1m'") != NULL, "%s", err.msg);
    unsetenv("ZERO_COMM_HEARTBEAT");

    unlink(log);
    rmdir(dir);
    return zt_finish("test_comm_watchdog");
}
