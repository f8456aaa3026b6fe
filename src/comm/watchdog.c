/* The comm watchdog: one thread per process that ends a rank whose collective has waited too long
 * for the other ranks (ZERO_COMM_TIMEOUT) or waits on a node peer that has stopped
 * (ZERO_COMM_HEARTBEAT), and that beats this process's own heartbeat for the peers watching it.
 *
 * A rank that stops without dying (SIGSTOP, a debugger, a frozen container) closes no socket: its
 * peers would wait in their next collective forever. Every collective call (the non-blocking ones
 * run on the caller's thread when there is no progress thread) and every wait of a communicator of
 * more than one rank takes a slot with its start time; the thread looks at the slots every quarter
 * second. A stopped process stops all its threads, the watchdog's with them, so its heartbeat
 * stands still, while a slow one (a long collective, a loaded machine, a hung disk under one
 * thread) keeps beating: that tells the two apart, and a stopped peer ends the job in about
 * ZERO_COMM_HEARTBEAT seconds instead of ZERO_COMM_TIMEOUT. Peers on other nodes beat by UDP
 * datagrams (one socket per process, read and written by this thread each tick) into a count kept
 * here, judged as a page is once one has arrived (docs/COMM.md, "Stopped ranks"). Ending: one log line naming the call,
 * the process's scratch files removed (zero_scratch_remove_all), exit status 1, as PyTorch's watchdog does; the
 * launcher then takes the job down, the stopped rank with it. */
#define _GNU_SOURCE /* memfd_create */
#include "comm/internal.h"

#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define TICK_NS 250000000LL
/* A tick this late means this process (or the machine) was not running: what peers did meanwhile
 * was not seen, so their heartbeats are judged from now on. */
#define LATE_TICK_NS 2000000000LL
#define WATCH_SLOTS  8
#define BEAT_LISTS   16

static _Atomic int64_t g_watch_start[WATCH_SLOTS]; /* monotonic ns; 0 free, -1 being filled */
static _Atomic int64_t g_watch_limit[WATCH_SLOTS]; /* timeout, ns; 0 none */
static _Atomic int64_t g_watch_hb[WATCH_SLOTS];    /* heartbeat limit, ns; 0 none */
static _Atomic int g_watch_beat[WATCH_SLOTS];      /* the communicator's peer list (id), 0 none */
static const char *_Atomic g_watch_fn[WATCH_SLOTS];
static _Atomic int g_watch_rank[WATCH_SLOTS], g_watch_size[WATCH_SLOTS];

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static int g_up;                /* the thread runs */
static zero__beat_page *g_page; /* this process's heartbeat; NULL: none */
static int g_page_fd = -1;
static uint64_t g_nonce; /* this process's, in its page and its datagrams */
static int g_sock = -1;  /* UDP, non-blocking; -1: none */
static int g_port;       /* its port, host byte order */
static _Atomic uint64_t g_ticks; /* the count this process's datagrams carry (the watchdog thread's) */

typedef struct peer {
    const zero__beat_page *page; /* mapped read-only; NULL: a peer on another node (remote) */
    int rank, pid;
    uint64_t seen;   /* its count at the last change (remote: the highest that arrived) */
    int64_t changed; /* when it last changed, or when it could last be seen (monotonic ns) */
    int heard;       /* remote: a datagram of it has arrived, so its watchdog runs and reaches us */
    zero__beat_remote remote;
} peer;
typedef struct beat_list {
    int id; /* 0: free */
    int n;
    peer *p;
} beat_list;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* guards g_lists and g_next_id */
static beat_list g_lists[BEAT_LISTS];
static int g_next_id = 1;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static void die(void) {
    zero_scratch_remove_all();
    _exit(1);
}

/* Under g_mu: the first peer of list `id` whose heartbeat has stood still longer than hb, or NULL.
 * Only a peer whose watchdog thread runs is judged (one whose thread could not start never beats,
 * and would look stopped forever). */
static const peer *stopped_peer(int id, int64_t hb, int64_t now) {
    for (int l = 0; l < BEAT_LISTS; l++) {
        if (g_lists[l].id != id) continue;
        for (int i = 0; i < g_lists[l].n; i++) {
            const peer *q = &g_lists[l].p[i];
            const int judged = q->page ? atomic_load(&q->page->beating) : q->heard;
            if (judged && now - q->changed > hb) return q;
        }
    }
    return NULL;
}

/* Under g_mu: the datagrams that arrived since the last tick, to the remote peers whose nonce they
 * carry. A count no higher than the last one (a late or duplicated datagram: one goes to each of
 * the host's addresses) is no sign of life. */
static void udp_drain(int64_t now) {
    unsigned char b[64];
    for (;;) {
        const ssize_t n = recv(g_sock, b, sizeof b, MSG_DONTWAIT);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return;
        if (n != 24) continue;
        uint64_t w[3];
        memcpy(w, b, sizeof w);
        const uint64_t magic = be64toh(w[0]), nonce = be64toh(w[1]), count = be64toh(w[2]);
        if (magic != ZERO__BEAT_MAGIC) continue;
        for (int l = 0; l < BEAT_LISTS; l++)
            for (int i = 0; g_lists[l].id && i < g_lists[l].n; i++) {
                peer *p = &g_lists[l].p[i];
                if (p->page || p->remote.nonce != nonce || (p->heard && count <= p->seen)) continue;
                p->seen = count;
                p->heard = 1;
                p->changed = now;
            }
    }
}

/* Under g_mu: this tick's datagram to every address of every remote peer of list `id` (0: of
 * every list; errors ignored: an address that does not reach the peer is one of several, and a
 * peer never reached is never judged). */
static void udp_send(int id) {
    const uint64_t w[3] = {htobe64(ZERO__BEAT_MAGIC), htobe64(g_nonce), htobe64(atomic_load(&g_ticks))};
    for (int l = 0; l < BEAT_LISTS; l++)
        for (int i = 0; g_lists[l].id && (!id || g_lists[l].id == id) && i < g_lists[l].n; i++) {
            const peer *p = &g_lists[l].p[i];
            for (int a = 0; !p->page && a < p->remote.naddr; a++) {
                struct sockaddr_in to = {0};
                to.sin_family = AF_INET;
                to.sin_port = htons((uint16_t)p->remote.port);
                to.sin_addr.s_addr = p->remote.addr[a];
                sendto(g_sock, w, sizeof w, MSG_DONTWAIT | MSG_NOSIGNAL, (const struct sockaddr *)&to, sizeof to);
            }
        }
}

static void *watch_main(void *arg) {
    (void)arg;
    int64_t last = mono_ns();
    for (;;) {
        const struct timespec q = {0, TICK_NS};
        nanosleep(&q, NULL);
        const int64_t now = mono_ns();
        const int late = now - last > LATE_TICK_NS;
        last = now;
        if (g_page) atomic_fetch_add(&g_page->count, 1);
        atomic_fetch_add(&g_ticks, 1);
        pthread_mutex_lock(&g_mu);
        if (g_sock >= 0) {
            udp_drain(now);
            udp_send(0);
        }
        for (int l = 0; l < BEAT_LISTS; l++)
            for (int i = 0; g_lists[l].id && i < g_lists[l].n; i++) {
                peer *p = &g_lists[l].p[i];
                if (!p->page) {
                    if (late) p->changed = now;
                    continue;
                }
                const uint64_t c = atomic_load(&p->page->count);
                if (c != p->seen || late) {
                    p->seen = c;
                    p->changed = now;
                }
            }
        for (int k = 0; k < WATCH_SLOTS; k++) {
            const int64_t t0 = atomic_load(&g_watch_start[k]);
            if (t0 <= 0) continue;
            const int64_t limit = atomic_load(&g_watch_limit[k]), hb = atomic_load(&g_watch_hb[k]);
            const int rank = atomic_load(&g_watch_rank[k]), size = atomic_load(&g_watch_size[k]);
            const char *fn = atomic_load(&g_watch_fn[k]);
            if (limit > 0 && now - t0 > limit) {
                zero__log(ZERO_LOG_ERROR,
                          "rank %d of %d: %s has waited %.0f s for the other ranks, more than the %.0f s of "
                          "ZERO_COMM_TIMEOUT (zero_comm_options.timeout_s): a rank stopped or hung; ending this one",
                          rank, size, fn, (double)(now - t0) * 1e-9, (double)limit * 1e-9);
                die();
            }
            const peer *p = hb > 0 ? stopped_peer(atomic_load(&g_watch_beat[k]), hb, now) : NULL;
            if (p && p->page) {
                zero__log(ZERO_LOG_ERROR,
                          "rank %d of %d: %s has waited %.0f s for the other ranks, and rank %d (pid %d, on this node) "
                          "has shown no heartbeat for %.0f s, more than the %.0f s of ZERO_COMM_HEARTBEAT "
                          "(zero_comm_options.heartbeat_s): it is stopped (SIGSTOP, a debugger) or frozen; ending this "
                          "one",
                          rank, size, fn, (double)(now - t0) * 1e-9, p->rank, p->pid, (double)(now - p->changed) * 1e-9,
                          (double)hb * 1e-9);
                die();
            }
            if (p) {
                zero__log(ZERO_LOG_ERROR,
                          "rank %d of %d: %s has waited %.0f s for the other ranks, and rank %d (pid %d, on another "
                          "node: %s) has sent no heartbeat for %.0f s, more than the %.0f s of ZERO_COMM_HEARTBEAT "
                          "(zero_comm_options.heartbeat_s), after it had: it is stopped (SIGSTOP, a debugger) or "
                          "frozen, or the network between has gone; ending this one",
                          rank, size, fn, (double)(now - t0) * 1e-9, p->rank, p->pid, p->remote.host,
                          (double)(now - p->changed) * 1e-9, (double)hb * 1e-9);
                die();
            }
        }
        pthread_mutex_unlock(&g_mu);
    }
    return NULL;
}

/* This process's heartbeat: a page of its own memory (a memfd, so that it has no name to leave
 * behind) that node peers map through /proc/<pid>/fd (comm_beat.c). */
static void make_page(void) {
    const int fd = memfd_create("zero-heartbeat", MFD_CLOEXEC);
    if (fd < 0) return;
    void *p = MAP_FAILED;
    if (ftruncate(fd, ZERO__BEAT_PAGE_BYTES) == 0)
        p = mmap(NULL, ZERO__BEAT_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (p == MAP_FAILED) {
        close(fd);
        return;
    }
    zero__beat_page *g = p;
    g->magic = ZERO__BEAT_MAGIC;
    g->nonce = g_nonce;
    g->pid = (int64_t)getpid();
    g_page = g;
    g_page_fd = fd;
}

/* The socket peers on other nodes send to: any address (the peers are told this host's
 * addresses through MPI), a port of the kernel's choice. */
static void make_sock(void) {
    const int s = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (s < 0) return;
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    socklen_t len = sizeof a;
    if (bind(s, (const struct sockaddr *)&a, sizeof a) != 0 || getsockname(s, (struct sockaddr *)&a, &len) != 0) {
        close(s);
        return;
    }
    /* room for a tick's datagrams from every peer and address, with margin (best effort) */
    const int rcv = 1 << 20;
    setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof rcv);
    g_port = ntohs(a.sin_port);
    g_sock = s;
}

static void watch_start(void) {
    if (getrandom(&g_nonce, sizeof g_nonce, GRND_NONBLOCK) != (ssize_t)sizeof g_nonce)
        g_nonce = (uint64_t)mono_ns() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
    make_page();
    make_sock();
    pthread_t t;
    pthread_attr_t a;
    if (pthread_attr_init(&a)) return;
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    /* the watchdog must not take the signals the program handles (its threads inherit the mask) */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    g_up = pthread_create(&t, &a, watch_main, NULL) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&a);
    /* Beating from now on, not from the first tick: a process stopped within the first 0.25 s
     * (a tiny model reaches its third step sooner) would otherwise never be judged. */
    if (g_up && g_page) atomic_store(&g_page->beating, 1);
}

int zero__beat_self(int *fd, uint64_t *nonce) {
    pthread_once(&g_once, watch_start);
    if (!g_up || !g_page) return 0;
    *fd = g_page_fd;
    *nonce = g_page->nonce;
    return 1;
}

int zero__beat_udp(int *port, uint64_t *nonce) {
    pthread_once(&g_once, watch_start);
    if (!g_up || g_sock < 0) return 0;
    *port = g_port;
    *nonce = g_nonce;
    return 1;
}

int zero__beat_watch_remote(int id, const zero__beat_remote *r, int n) {
    if (n <= 0) return id;
    const int64_t now = mono_ns();
    int out = 0;
    pthread_mutex_lock(&g_mu);
    int l = 0;
    while (l < BEAT_LISTS && (id ? g_lists[l].id != id : g_lists[l].id != 0)) l++;
    peer *p = l < BEAT_LISTS ? realloc(g_lists[l].p, (size_t)(g_lists[l].n + n) * sizeof *p) : NULL;
    if (p) {
        for (int i = 0; i < n; i++)
            p[g_lists[l].n + i] = (peer){.rank = r[i].rank, .pid = r[i].pid, .changed = now, .remote = r[i]};
        g_lists[l].p = p;
        g_lists[l].n += n;
        if (!id) g_lists[l].id = g_next_id++;
        out = g_lists[l].id;
    }
    pthread_mutex_unlock(&g_mu);
    return out;
}

void zero__beat_hello(int id) {
    if (id <= 0) return;
    pthread_mutex_lock(&g_mu);
    if (g_sock >= 0) udp_send(id);
    pthread_mutex_unlock(&g_mu);
}

int zero__beat_watch(const zero__beat_page *const *page, const int *rank, const int *pid, int n) {
    peer *p = n > 0 ? calloc((size_t)n, sizeof *p) : NULL;
    int id = 0;
    const int64_t now = mono_ns();
    pthread_mutex_lock(&g_mu);
    for (int l = 0; p && l < BEAT_LISTS && !id; l++) {
        if (g_lists[l].id) continue;
        for (int i = 0; i < n; i++)
            p[i] = (peer){
                .page = page[i], .rank = rank[i], .pid = pid[i], .seen = atomic_load(&page[i]->count), .changed = now};
        id = g_next_id++;
        g_lists[l] = (beat_list){id, n, p};
    }
    pthread_mutex_unlock(&g_mu);
    if (!id) {
        free(p);
        for (int i = 0; i < n; i++) munmap((void *)page[i], ZERO__BEAT_PAGE_BYTES);
    }
    return id;
}

void zero__beat_forget(int id) {
    if (id <= 0) return;
    beat_list gone = {0, 0, NULL};
    pthread_mutex_lock(&g_mu);
    for (int l = 0; l < BEAT_LISTS; l++)
        if (g_lists[l].id == id) {
            gone = g_lists[l];
            g_lists[l] = (beat_list){0, 0, NULL};
        }
    pthread_mutex_unlock(&g_mu);
    for (int i = 0; i < gone.n; i++)
        if (gone.p[i].page) munmap((void *)gone.p[i].page, ZERO__BEAT_PAGE_BYTES);
    free(gone.p);
}

int zero__watch_enter(const zero_comm *c, const char *fn) {
    if (!c || c->size < 2 || (c->timeout_ns <= 0 && (c->heartbeat_ns <= 0 || !c->beat))) return -1;
    pthread_once(&g_once, watch_start);
    if (!g_up) return -1;
    for (int k = 0; k < WATCH_SLOTS; k++) {
        int64_t free_slot = 0;
        if (!atomic_compare_exchange_strong(&g_watch_start[k], &free_slot, -1)) continue;
        atomic_store(&g_watch_fn[k], fn);
        atomic_store(&g_watch_rank[k], c->rank);
        atomic_store(&g_watch_size[k], c->size);
        atomic_store(&g_watch_limit[k], c->timeout_ns);
        atomic_store(&g_watch_hb[k], c->heartbeat_ns);
        atomic_store(&g_watch_beat[k], c->beat);
        atomic_store(&g_watch_start[k], mono_ns());
        return k;
    }
    return -1; /* more calls at once than slots: this one unwatched */
}

void zero__watch_leave(int k) {
    if (k >= 0) atomic_store(&g_watch_start[k], 0);
}

/* A whole number of seconds in [0, 1e9] from the option (unless ZERO_COMM_FROM_ENV), else the
 * variable, else the default; in ns. */
static zero_status seconds(int64_t opt, const char *field, const char *var, int64_t dflt, const zero__cerr *e,
                           const char *fn, int64_t *ns) {
    int64_t s = dflt;
    if (opt != ZERO_COMM_FROM_ENV) {
        if (opt < 0 || opt > 1000000000) {
            zero__cerr_set(e, "%s: zero_comm_options.%s %lld: expected seconds in [0, 1e9] (0: never)", fn, field,
                           (long long)opt);
            return ZERO_ERR_INVALID_ARG;
        }
        s = opt;
    } else if (getenv(var)) {
        const char *v = getenv(var);
        char *end = NULL;
        errno = 0;
        const long long x = strtoll(v, &end, 10);
        if (*v < '0' || *v > '9' || *end || errno || x > 1000000000) {
            zero__cerr_set(e, "%s: %s '%s': expected whole seconds in [0, 1e9] (0: never)", fn, var, v);
            return ZERO_ERR_INVALID_ARG;
        }
        s = x;
    }
    *ns = s * 1000000000;
    return ZERO_OK;
}

zero_status zero__comm_watch_settings(const zero_comm_options *o, const zero__cerr *e, const char *fn,
                                      int64_t *timeout_ns, int64_t *heartbeat_ns) {
    zero_status s = seconds(o ? o->timeout_s : ZERO_COMM_FROM_ENV, "timeout_s", "ZERO_COMM_TIMEOUT",
                            ZERO__COMM_TIMEOUT_S, e, fn, timeout_ns);
    if (s == ZERO_OK)
        s = seconds(o ? o->heartbeat_s : ZERO_COMM_FROM_ENV, "heartbeat_s", "ZERO_COMM_HEARTBEAT",
                    ZERO__COMM_HEARTBEAT_S, e, fn, heartbeat_ns);
    return s;
}
