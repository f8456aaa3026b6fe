/* In-node collectives of the mpi backend: ranks that share memory reduce and gather through an
 * MPI-3 shared-memory window, or large messages by reading each other's buffers directly
 * (process_vm_readv); between nodes the same-local-rank peers use MPI (hierarchical). */
#ifdef ZERO_HAVE_MPI
#include "comm/internal.h"

#include <limits.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#ifdef __linux__
#include <errno.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>
#endif

/*
 * Window layout: every local rank t owns one segment of the node's window,
 *   [shm_ctl: 128 bytes][buffer 0][buffer 1]      (each buffer `chunk` bytes)
 * A collective runs in rounds. In round e a rank writes its pieces into its buffer e % 2, enters
 * barrier e, then reads the pieces its peers wrote. Content written before barrier e is read
 * only between barriers e and e + 1 (every reader finishes before it enters barrier e + 1), and
 * the buffer is written again only after barrier e + 1: two buffers make one barrier per round
 * enough, and the round counter (the barrier epoch) runs on across calls.
 *
 * Memory model: the window is plain shared memory (MPI_WIN_UNIFIED is checked) accessed with
 * loads and stores; the barrier is a (seq_cst, so also release) store of the rank's epoch and
 * acquire loads of its peers', so every store a rank made before entering barrier e
 * happens-before every load its peers make after leaving it. C11 atomics order both the
 * compiler and the CPU: the role MPI_Win_sync plays for a window accessed through MPI calls.
 * A waiter spins, then yields, then sleeps on a futex in the window (ranks may outnumber
 * cores); the arriving rank wakes sleepers. Nothing else in the window is atomic: a buffer has
 * one writer per round, and its readers read it only after the barrier.
 */
#define ZERO__SHM_NBUF 2
#define ZERO__SHM_DEFAULT_CHUNK ((size_t)1 << 20)
#define ZERO__SHM_DEFAULT_MIN ((uint64_t)16 << 10) /* measured: docs/BENCHMARKS.md */
#define ZERO__SHM_ENV_BYTES 64 /* longest environment value forwarded from rank 0 */
#define ZERO__SHM_NENV 7
/* Single copy (CMA): reduce-scatters and all-gathers from this many bytes read the peers'
 * buffers directly, all-reduces from ZERO__SHM_CMA_AR_FACTOR times as many (measured:
 * docs/BENCHMARKS.md; below, the window is as fast or faster); a reduce-scatter reads them in
 * pieces of at most ZERO__SHM_CMA_PIECE bytes in all (one per peer), which stay in cache until
 * the reduction reads them. */
#define ZERO__SHM_CMA_DEFAULT_MIN ((uint64_t)1 << 20)
#define ZERO__SHM_CMA_AR_FACTOR 16
#define ZERO__SHM_CMA_PIECE ((size_t)256 << 10)

_Static_assert(ATOMIC_LLONG_LOCK_FREE == 2, "the barrier needs lock-free 64-bit atomics across processes");

typedef struct shm_ctl {
    _Atomic unsigned long long arrived; /* barriers this rank has entered */
    /* The low 32 bits of `arrived` (a futex word), and how many peers sleep on it. */
    _Atomic uint32_t arrived32;
    _Atomic uint32_t sleepers;
    char pad0[64 - sizeof(unsigned long long) - 2 * sizeof(uint32_t)];
    /* Sequence number of the last collective that failed on this rank (its cross-node step, or
     * a single-copy read: fail_kind), so that its node peers fail that call too instead of
     * returning garbage; fail_peer and fail_errno say which read failed and why. */
    _Atomic unsigned long long failed;
    /* Single copy: this rank's buffers for the current call (the reduction's source, the
     * gather's source), published before the call's first barrier. */
    _Atomic uintptr_t addr[2];
    _Atomic int fail_kind, fail_peer, fail_errno;
    char pad1[64 - sizeof(unsigned long long) - 2 * sizeof(uintptr_t) - 3 * sizeof(int)];
} shm_ctl;
_Static_assert(sizeof(shm_ctl) == 128, "one control block per rank, its own cache lines");

struct zero__shm {
    MPI_Comm node;   /* the ranks sharing this window, in the order of their communicator ranks */
    MPI_Comm cross;  /* the ranks of the same local rank on every node, by node; NULL with 1 node */
    MPI_Win win;     /* MPI_WIN_NULL until the first collective that uses it */
    int nnodes, nlocal, local, node_index;
    int *world_of;   /* [m * nlocal + t]: communicator rank of local rank t on node m */
    shm_ctl **ctl;   /* [t]: local rank t's control block */
    unsigned char **seg; /* [t]: local rank t's first buffer */
    const void **srcs;   /* nlocal source pointers handed to the reduction kernel */
    size_t chunk;        /* bytes of one buffer */
    unsigned char *scratch; /* cross-node staging (nnodes > 1), scratch_bytes */
    size_t scratch_bytes;
    unsigned long long epoch; /* barriers this rank has passed */
    unsigned long long seq;   /* collectives run through the window */
    uint64_t min_bytes;
    zero_impl impl;
    /* Single copy (CMA): on when allowed and the probe at creation passed on every rank. */
    int cma;
    uint64_t cma_min;
    int *pid;                   /* [t]: local rank t's process id */
    /* [t] and [nlocal + t]: local rank t's published buffers (reduction source, gather source)
     * for the current call. */
    const unsigned char **from;
    unsigned char *cma_scratch; /* the pieces a reduce-scatter reads, cma_scratch_bytes */
    size_t cma_scratch_bytes;
    int cma_err, cma_peer;      /* the first failed read of the current call (errno; 0: none) */
    /* The progress thread (ZERO_COMM_ASYNC): started by the first job, runs the queue in order.
     * While jobs are pending only the thread touches the collectives' state above (epoch, seq,
     * scratch, from, cma_err); the caller's blocking collectives first wait for the queue to
     * empty. `wc` is the thread's view of the communicator, for its error texts. */
    int async;
    int no_thread; /* test hook (zero__shm_set_async): as if the thread could not be started */
    int thread_up, stopping;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t work, done; /* a job was posted (or stop); a job has run */
    zero__shm_job *head, *tail;
    unsigned pending;          /* posted and not yet run */
    zero_comm wc;
};

/* ------------------------------------------------------------------ settings */

typedef struct shm_settings {
    int enabled;
    uint64_t min_bytes;
    size_t chunk;
    int fake_nodes; /* 0: the real node split */
    int fake_cyclic;
    int cma;
    uint64_t cma_min;
    int async; /* 0, 1, or ASYNC_AUTO */
} shm_settings;
enum { ASYNC_AUTO = 2 };

static const char *const g_env_names[ZERO__SHM_NENV] = {
    "ZERO_COMM_SHM",        "ZERO_COMM_SHM_MIN_BYTES", "ZERO_COMM_SHM_CHUNK",
    "ZERO_COMM_FAKE_NODES", "ZERO_COMM_CMA",           "ZERO_COMM_CMA_MIN_BYTES",
    "ZERO_COMM_ASYNC"};
/* The same settings as zero_comm_options fields, for messages about values a program set. */
static const char *const g_opt_names[ZERO__SHM_NENV] = {
    "zero_comm_options.shm",        "zero_comm_options.shm_min_bytes", "zero_comm_options.shm_chunk",
    "zero_comm_options.fake_nodes", "zero_comm_options.cma",           "zero_comm_options.cma_min_bytes",
    "zero_comm_options.async"};

/* Rank 0's settings as text in the variables' syntax: a field a program set, written out (its
 * bit in *from_opts), or else the variable ("" when unset). */
static void settings_text(const zero_comm_options *o, char env[ZERO__SHM_NENV][ZERO__SHM_ENV_BYTES], unsigned *from_opts) {
    const long long num[ZERO__SHM_NENV] = {o->shm, o->shm_min_bytes, o->shm_chunk, o->fake_nodes,
                                           o->cma, o->cma_min_bytes, o->async};
    *from_opts = 0;
    for (int i = 0; i < ZERO__SHM_NENV; i++) {
        if (num[i] == ZERO_COMM_FROM_ENV) {
            const char *v = getenv(g_env_names[i]);
            if (v) snprintf(env[i], ZERO__SHM_ENV_BYTES, "%s", v);
            continue;
        }
        *from_opts |= 1u << i;
        if (i == 3 && num[i] == 0) continue; /* no fake nodes: the real split */
        if (i == 6 && num[i] == 2) snprintf(env[i], ZERO__SHM_ENV_BYTES, "auto");
        else snprintf(env[i], ZERO__SHM_ENV_BYTES, "%lld%s", num[i], i == 3 && o->fake_cyclic == 1 ? ":cyclic" : "");
    }
}

/* Non-negative decimal integer with an optional K/M/G suffix (powers of 1024); -1 if not one. */
static long long parse_size(const char *v) {
    char *end = NULL;
    if (!v || *v < '0' || *v > '9') return -1;
    unsigned long long x = strtoull(v, &end, 10);
    unsigned long long mul = 1;
    if (*end == 'K' || *end == 'k') mul = 1ull << 10, end++;
    else if (*end == 'M' || *end == 'm') mul = 1ull << 20, end++;
    else if (*end == 'G' || *end == 'g') mul = 1ull << 30, end++;
    if (*end || x > (unsigned long long)LLONG_MAX / mul) return -1;
    return (long long)(x * mul);
}

/* A 0/1 variable (`v` as rank 0 sees it, "" when unset: *out keeps its default); -1 with the
 * message in err on any other value. */
static int parse_switch(const char *v, const char *name, const char *on, int *out, char *err, size_t cap) {
    if (!v[0]) return 0;
    if (!strcmp(v, "0") || !strcmp(v, "1")) {
        *out = v[0] == '1';
        return 0;
    }
    zero__errorf(err, cap, "%s '%s': expected 0 (off) or 1 (%s)", name, v, on);
    return -1;
}

/* A byte-count variable, as parse_switch. */
static int parse_bytes(const char *v, const char *name, uint64_t *out, char *err, size_t cap) {
    if (!v[0]) return 0;
    long long x = parse_size(v);
    if (x < 0) {
        zero__errorf(err, cap, "%s '%s': expected a byte count (suffix K, M or G allowed)", name, v);
        return -1;
    }
    *out = (uint64_t)x;
    return 0;
}

/* Parses the variables (as rank 0 sees them: env[i] = "" when unset) into *st; on a bad
 * value writes why into err and returns ZERO_ERR_INVALID_ARG. */
static zero_status parse_settings(char env[ZERO__SHM_NENV][ZERO__SHM_ENV_BYTES], unsigned from_opts, int nranks,
                                  shm_settings *st, char *err, size_t cap) {
    const char *names[ZERO__SHM_NENV];
    for (int i = 0; i < ZERO__SHM_NENV; i++) names[i] = (from_opts >> i) & 1u ? g_opt_names[i] : g_env_names[i];
    st->enabled = 1;
    st->min_bytes = ZERO__SHM_DEFAULT_MIN;
    st->chunk = ZERO__SHM_DEFAULT_CHUNK;
    st->fake_nodes = 0;
    st->fake_cyclic = 0;
    st->cma = 1;
    st->cma_min = ZERO__SHM_CMA_DEFAULT_MIN;
    st->async = ASYNC_AUTO;
    if (parse_switch(env[0], names[0], "on, the default", &st->enabled, err, cap) ||
        parse_bytes(env[1], names[1], &st->min_bytes, err, cap))
        return ZERO_ERR_INVALID_ARG;
    if (env[2][0]) {
        long long v = parse_size(env[2]);
        /* Every piece of a round must fit: one 8-byte element per rank at least. */
        long long least = 64 > 8ll * nranks ? 64 : 8ll * nranks;
        least = (least + 63) / 64 * 64;
        if (v < least || v > (1ll << 30) || v % 64) {
            zero__errorf(err, cap, "%s '%s': expected a multiple of 64 bytes from %lld "
                         "(8 bytes per rank) to 1G", names[2], env[2], least);
            return ZERO_ERR_INVALID_ARG;
        }
        st->chunk = (size_t)v;
    }
    if (env[3][0]) {
        char *end = NULL;
        long k = strtol(env[3], &end, 10);
        int cyclic = 0;
        if (end != env[3] && !strcmp(end, ":cyclic")) cyclic = 1;
        else if (end == env[3] || *end) k = -1;
        if (k < 1 || k > INT_MAX) {
            zero__errorf(err, cap, "%s '%s': expected K or K:cyclic with K >= 1 "
                         "fake nodes", names[3], env[3]);
            return ZERO_ERR_INVALID_ARG;
        }
        /* A small sub-communicator of a run with K fake nodes: one rank per node at most. */
        st->fake_nodes = k > nranks ? nranks : (int)k;
        st->fake_cyclic = cyclic;
    }
    if (parse_switch(env[4], names[4], "on where the system allows it, the default", &st->cma, err,
                     cap) ||
        parse_bytes(env[5], names[5], &st->cma_min, err, cap))
        return ZERO_ERR_INVALID_ARG;
    if (env[6][0] && strcmp(env[6], "auto")) {
        if (strcmp(env[6], "0") && strcmp(env[6], "1")) {
            zero__errorf(err, cap, "%s '%s': expected 0 (off), 1 (a progress thread) or auto "
                         "(the default: on where every rank of the node has a spare core)", names[6], env[6]);
            return ZERO_ERR_INVALID_ARG;
        }
        st->async = env[6][0] == '1';
    }
    /* The largest default chunk still leaves 8 bytes per rank for very large worlds. */
    while (st->chunk < 8u * (size_t)nranks) st->chunk *= 2;
    return ZERO_OK;
}

/* ------------------------------------------------------------------ life */

static zero_status mpi_fail(const zero__cerr *e, int rc, const char *fn, const char *what) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s: %s", fn, what);
    return zero__cerr_mpi(e, rc, buf);
}

static void stop_thread(zero__shm *s);

void zero__shm_destroy(zero__shm *s, int mpi_alive) {
    if (!s) return;
    stop_thread(s);
    if (mpi_alive) {
        if (s->win != MPI_WIN_NULL) MPI_Win_free(&s->win);
        if (s->cross != MPI_COMM_NULL) MPI_Comm_free(&s->cross);
        if (s->node != MPI_COMM_NULL) MPI_Comm_free(&s->node);
    }
    zero_mem_free(NULL, s->scratch);
    zero_mem_free(NULL, s->world_of);
    zero_mem_free(NULL, s->ctl);
    zero_mem_free(NULL, s->seg);
    zero_mem_free(NULL, s->srcs);
    zero_mem_free(NULL, s->pid);
    zero_mem_free(NULL, s->from);
    zero_mem_free(NULL, s->cma_scratch);
    zero_mem_free(NULL, s);
}

/* The node split: the real one (MPI_COMM_TYPE_SHARED), cut further into fake nodes when
 * ZERO_COMM_FAKE_NODES asks (contiguous blocks of ranks, or rank % K with :cyclic). */
static int split_node(MPI_Comm comm, int rank, int size, const shm_settings *st, MPI_Comm *node,
                      const char **what) {
    MPI_Comm real = MPI_COMM_NULL;
    int rc;
    *what = "MPI_Comm_split_type";
    if ((rc = MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &real)) != MPI_SUCCESS)
        return rc;
    if (!st->fake_nodes) {
        *node = real;
        return MPI_Comm_set_errhandler(real, MPI_ERRORS_RETURN);
    }
    int k = st->fake_nodes;
    int color = st->fake_cyclic ? rank % k : (int)((long long)rank * k / size);
    *what = "MPI_Comm_split";
    rc = MPI_Comm_split(real, color, rank, node);
    MPI_Comm_free(&real);
    if (rc == MPI_SUCCESS) rc = MPI_Comm_set_errhandler(*node, MPI_ERRORS_RETURN);
    return rc;
}

/* Reads n bytes at `remote` in process pid into dst: 0, or an errno (a short read is EFAULT). */
static int cma_read_pid(int pid, void *dst, const void *remote, size_t n) {
#ifdef __linux__
    struct iovec l = {dst, n}, r = {(void *)(uintptr_t)remote, n};
    /* Through syscall(2): the libc wrapper needs _GNU_SOURCE. */
    long got = syscall(SYS_process_vm_readv, (long)pid, &l, 1ul, &r, 1ul, 0ul);
    if (got < 0) return errno ? errno : EFAULT;
    return (size_t)got == n ? 0 : EFAULT;
#else
    (void)pid, (void)dst, (void)remote, (void)n;
    return ENOSYS;
#endif
}

/* Collective over comm (each node's ranks in sh->node): learns every local rank's pid, then
 * each rank reads a word its next local peer holds; the single-copy path is used only if every
 * rank of comm succeeded (a ptrace policy, a seccomp filter, separate pid namespaces or a kernel
 * without CMA make it fail: EPERM, ENOSYS, ESRCH), so that all ranks take the same path. */
static int cma_probe(MPI_Comm comm, zero__shm *sh, int rank, long long *all, int *ok_all) {
    const int L = sh->nlocal;
    *ok_all = 0;
    /* The word: my communicator rank, mixed so that a stale or zero page cannot pass. */
    volatile unsigned long long word = 0x9e3779b97f4a7c15ull ^ (unsigned long long)rank;
    long long mine[2] = {(long long)getpid(), (long long)(uintptr_t)&word};
    int ok = 1;
    int rc = MPI_Allgather(mine, 2, MPI_LONG_LONG, all, 2, MPI_LONG_LONG, sh->node);
    if (rc != MPI_SUCCESS) ok = 0;
    if (ok) {
        const int t = (sh->local + 1) % L;
        unsigned long long got = 0;
        const unsigned long long want =
            0x9e3779b97f4a7c15ull ^ (unsigned long long)sh->world_of[sh->node_index * L + t];
        ok = !cma_read_pid((int)all[2 * t], &got, (const void *)(uintptr_t)all[2 * t + 1], sizeof got) &&
             got == want;
        for (int u = 0; u < L; u++) sh->pid[u] = (int)all[2 * u];
    }
    /* Also keeps `word` alive until every peer has read it. */
    int rc2 = MPI_Allreduce(&ok, ok_all, 1, MPI_INT, MPI_MIN, comm);
    (void)word;
    return rc != MPI_SUCCESS ? rc : rc2;
}

/* CPUs this process may run on (its affinity mask); 0 when unknown. */
static long allowed_cpus(void) {
#ifdef __linux__
    unsigned long mask[64]; /* 4096 CPUs */
    long n = syscall(SYS_sched_getaffinity, 0, sizeof mask, mask);
    long c = 0;
    for (long i = 0; i < n / (long)sizeof mask[0]; i++) c += __builtin_popcountl(mask[i]);
    return c;
#else
    return 0;
#endif
}

/* A thread-count variable as this rank sees it: its first number, 0 when unset or not one. */
static long env_threads(const char *name) {
    const char *v = getenv(name);
    char *end = NULL;
    long t = v ? strtol(v, &end, 10) : 0;
    return v && end != v && t > 0 ? t : 0;
}

/* ZERO_COMM_ASYNC=auto: whether this rank has a core to spare for a progress thread beside its
 * compute threads (the larger of OMP_NUM_THREADS and OPENBLAS_NUM_THREADS; OMP_NUM_THREADS
 * unset: OpenMP takes every core and none is spare). A rank whose affinity mask is the whole
 * node shares it with its nlocal - 1 node peers; one bound to fewer CPUs has them to itself. A
 * local choice: ranks may differ (zero__shm_job). */
static int spare_core(int nlocal) {
    long threads = env_threads("OMP_NUM_THREADS"), blas = env_threads("OPENBLAS_NUM_THREADS");
    if (!threads) return 0;
    if (blas > threads) threads = blas;
    long online = sysconf(_SC_NPROCESSORS_ONLN), mine = allowed_cpus();
    if (mine <= 0 || mine > online) mine = online;
    long sharing = mine < online ? 1 : nlocal;
    return mine > 0 && mine >= sharing * (threads + 1);
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

zero_status zero__shm_create(MPI_Comm comm, int rank, int size, const zero__cerr *e, const zero_comm_options *opts,
                             const char *fn, zero__shm **out) {
    *out = NULL;
    struct {
        char env[ZERO__SHM_NENV][ZERO__SHM_ENV_BYTES];
        unsigned from_opts;
    } cfg;
    memset(&cfg, 0, sizeof cfg);
    if (rank == 0) settings_text(opts, cfg.env, &cfg.from_opts);
    /* Every rank must take the same path through every collective: rank 0's settings rule. */
    int rc = MPI_Bcast(&cfg, (int)sizeof cfg, MPI_BYTE, 0, comm);
    if (rc != MPI_SUCCESS) return mpi_fail(e, rc, fn, "MPI_Bcast");
    shm_settings st;
    char msg[256];
    zero_status s = parse_settings(cfg.env, cfg.from_opts, size, &st, msg, sizeof msg);
    if (s) {
        zero__cerr_set(e, "%s: %s", fn, msg);
        return s;
    }
    if (!st.enabled || size < 2) return ZERO_OK;

    zero__shm *sh = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof *sh);
    int *pairs = NULL, *leaders = NULL;
    if (!sh) goto nomem;
    sh->node = sh->cross = MPI_COMM_NULL;
    sh->win = MPI_WIN_NULL;
    const char *what = "";
    if ((rc = split_node(comm, rank, size, &st, &sh->node, &what)) != MPI_SUCCESS) {
        s = mpi_fail(e, rc, fn, what);
        goto fail;
    }
    int local = 0, nlocal = 0;
    MPI_Comm_rank(sh->node, &local);
    MPI_Comm_size(sh->node, &nlocal);
    /* A node is named by its first rank; every rank learns every (node, local rank) pair. */
    int mine[2] = {rank, local};
    if ((rc = MPI_Bcast(&mine[0], 1, MPI_INT, 0, sh->node)) != MPI_SUCCESS) {
        s = mpi_fail(e, rc, fn, "MPI_Bcast");
        goto fail;
    }
    pairs = zero_mem_alloc(NULL, ZERO_MEM_COMM, 2 * sizeof(int) * (size_t)size);
    leaders = zero_mem_alloc(NULL, ZERO_MEM_COMM, sizeof(int) * (size_t)size);
    if (!pairs || !leaders) goto nomem;
    if ((rc = MPI_Allgather(mine, 2, MPI_INT, pairs, 2, MPI_INT, comm)) != MPI_SUCCESS) {
        s = mpi_fail(e, rc, fn, "MPI_Allgather");
        goto fail;
    }
    int nnodes = 0;
    for (int r = 0; r < size; r++)
        if (pairs[2 * r] == r) leaders[nnodes++] = r;
    qsort(leaders, (size_t)nnodes, sizeof *leaders, cmp_int);
    /* The hierarchical algorithms need the same number of ranks on every node; otherwise (and
     * when no two ranks share a node) the plain MPI path serves every call. All ranks hold the
     * same table, so they all decide alike. */
    if (nlocal < 2 || nnodes * nlocal != size) goto none;
    int node_index = -1;
    for (int m = 0; m < nnodes; m++) {
        int members = 0;
        for (int r = 0; r < size; r++) members += pairs[2 * r] == leaders[m];
        if (members != nlocal) goto none;
        if (leaders[m] == mine[0]) node_index = m;
    }
    sh->world_of = zero_mem_alloc(NULL, ZERO_MEM_COMM, sizeof(int) * (size_t)size);
    sh->ctl = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof(shm_ctl *) * (size_t)nlocal);
    sh->seg = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof(unsigned char *) * (size_t)nlocal);
    sh->srcs = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof(void *) * (size_t)nlocal);
    if (!sh->world_of || !sh->ctl || !sh->seg || !sh->srcs) goto nomem;
    for (int i = 0; i < size; i++) sh->world_of[i] = -1;
    for (int r = 0; r < size; r++) {
        int m = 0;
        while (m < nnodes && leaders[m] != pairs[2 * r]) m++;
        int t = pairs[2 * r + 1];
        if (m == nnodes || t < 0 || t >= nlocal || sh->world_of[m * nlocal + t] != -1) goto none;
        sh->world_of[m * nlocal + t] = r;
    }
    sh->nnodes = nnodes;
    sh->nlocal = nlocal;
    sh->local = local;
    sh->node_index = node_index;
    sh->chunk = st.chunk;
    sh->min_bytes = st.min_bytes;
    sh->impl = zero_impl_best();
    sh->cma_min = st.cma_min;
    /* The thread never calls MPI (MPI_THREAD_FUNNELED): one node only. */
    sh->async = nnodes == 1 && (st.async == 1 || (st.async == ASYNC_AUTO && spare_core(nlocal)));
    if (st.cma) {
        sh->pid = zero_mem_calloc(NULL, ZERO_MEM_COMM, sizeof(int) * (size_t)nlocal);
        sh->from = zero_mem_calloc(NULL, ZERO_MEM_COMM, 2 * sizeof(unsigned char *) * (size_t)nlocal);
        /* At least one element of the widest type per peer. */
        sh->cma_scratch_bytes = ZERO__SHM_CMA_PIECE > 8u * (size_t)nlocal ? ZERO__SHM_CMA_PIECE
                                                                           : 8u * (size_t)nlocal;
        sh->cma_scratch = zero_mem_alloc(NULL, ZERO_MEM_COMM, sh->cma_scratch_bytes);
        long long *all = zero_mem_alloc(NULL, ZERO_MEM_COMM, 2 * sizeof(long long) * (size_t)nlocal);
        /* Out of memory anywhere fails the creation everywhere, before the probe's collectives. */
        int have = sh->pid && sh->from && sh->cma_scratch && all, have_all = 0;
        if ((rc = MPI_Allreduce(&have, &have_all, 1, MPI_INT, MPI_MIN, comm)) != MPI_SUCCESS) {
            zero_mem_free(NULL, all);
            s = mpi_fail(e, rc, fn, "MPI_Allreduce");
            goto fail;
        }
        if (!have_all) {
            zero_mem_free(NULL, all);
            goto nomem;
        }
        int ok = 0;
        rc = cma_probe(comm, sh, rank, all, &ok);
        zero_mem_free(NULL, all);
        if (rc != MPI_SUCCESS) {
            s = mpi_fail(e, rc, fn, "the single-copy probe's collectives");
            goto fail;
        }
        sh->cma = ok;
    }
    if (nnodes > 1) {
        if ((rc = MPI_Comm_split(comm, local, node_index, &sh->cross)) != MPI_SUCCESS ||
            (rc = MPI_Comm_set_errhandler(sh->cross, MPI_ERRORS_RETURN)) != MPI_SUCCESS) {
            s = mpi_fail(e, rc, fn, "MPI_Comm_split (cross-node peers)");
            goto fail;
        }
        sh->scratch_bytes = ZERO__SHM_NBUF * st.chunk;
        if (!(sh->scratch = zero_mem_alloc(NULL, ZERO_MEM_COMM, sh->scratch_bytes))) goto nomem;
    }
    zero_mem_free(NULL, pairs);
    zero_mem_free(NULL, leaders);
    *out = sh;
    return ZERO_OK;

none:
    zero_mem_free(NULL, pairs);
    zero_mem_free(NULL, leaders);
    zero__shm_destroy(sh, 1);
    return ZERO_OK;
nomem:
    zero__cerr_set(e, "%s: out of memory for the shared-memory collectives' tables", fn);
    s = ZERO_ERR_NOMEM;
fail:
    zero_mem_free(NULL, pairs);
    zero_mem_free(NULL, leaders);
    zero__shm_destroy(sh, 1);
    return s;
}

/* Allocates the window at the first collective that uses it (every rank of the communicator
 * makes that call, in the same order), so that communicators which only ever move small
 * messages (the engine's control channel) hold no shared memory. */
static zero_status attach(zero_comm *c, zero__shm *s, const char *fn) {
    if (s->win != MPI_WIN_NULL) return ZERO_OK;
    MPI_Info info = MPI_INFO_NULL;
    /* Each rank's segment page-aligned on its own (NUMA first touch by its owner). */
    if (MPI_Info_create(&info) == MPI_SUCCESS) MPI_Info_set(info, "alloc_shared_noncontig", "true");
    size_t seg = sizeof(shm_ctl) + ZERO__SHM_NBUF * s->chunk;
    void *base = NULL;
    int rc = MPI_Win_allocate_shared((MPI_Aint)seg, 1, info, s->node, &base, &s->win);
    if (info != MPI_INFO_NULL) MPI_Info_free(&info);
    char what[96];
    if (rc != MPI_SUCCESS) {
        s->win = MPI_WIN_NULL;
        snprintf(what, sizeof what, "%s: MPI_Win_allocate_shared (set ZERO_COMM_SHM=0 to do without)", fn);
        return zero__comm_mpi_error(c, rc, what);
    }
    MPI_Win_set_errhandler(s->win, MPI_ERRORS_RETURN);
    int *model = NULL, flag = 0;
    MPI_Win_get_attr(s->win, MPI_WIN_MODEL, &model, &flag);
    if (!flag || !model || *model != MPI_WIN_UNIFIED) {
        /* Same answer on every rank of the node: the MPI library's, for this window kind. */
        ZERO__COMM_ERR(c, "%s: the shared-memory window is not MPI_WIN_UNIFIED: loads and stores "
                       "would not see each other (set ZERO_COMM_SHM=0)", fn);
        return ZERO_ERR_COMM;
    }
    for (int t = 0; t < s->nlocal; t++) {
        MPI_Aint sz = 0;
        int du = 0;
        void *p = NULL;
        if ((rc = MPI_Win_shared_query(s->win, t, &sz, &du, &p)) != MPI_SUCCESS) {
            snprintf(what, sizeof what, "%s: MPI_Win_shared_query", fn);
            return zero__comm_mpi_error(c, rc, what);
        }
        s->ctl[t] = p;
        s->seg[t] = (unsigned char *)p + sizeof(shm_ctl);
    }
    shm_ctl *me = s->ctl[s->local];
    atomic_init(&me->arrived, 0);
    atomic_init(&me->arrived32, 0);
    atomic_init(&me->sleepers, 0);
    atomic_init(&me->failed, 0);
    atomic_init(&me->addr[0], 0);
    atomic_init(&me->addr[1], 0);
    atomic_init(&me->fail_kind, 0);
    atomic_init(&me->fail_peer, 0);
    atomic_init(&me->fail_errno, 0);
    /* Nobody reads a control block before its owner has initialized it. */
    if ((rc = MPI_Barrier(s->node)) != MPI_SUCCESS) {
        snprintf(what, sizeof what, "%s: MPI_Barrier", fn);
        return zero__comm_mpi_error(c, rc, what);
    }
    return ZERO_OK;
}

int zero__shm_nodes(const zero__shm *s) { return s ? s->nnodes : 0; }
int zero__shm_attached(const zero__shm *s) { return s && s->win != MPI_WIN_NULL; }
int zero__shm_local_size(const zero__shm *s) { return s ? s->nlocal : 0; }
int zero__shm_cma(const zero__shm *s) { return s ? s->cma : 0; }

int zero__shm_wants(const zero__shm *s, uint64_t bytes) {
    return s && bytes > 0 && bytes >= s->min_bytes;
}

/* ------------------------------------------------------------------ barrier */

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Spins this many times on a peer's counter before yielding, and yields this many times before
 * sleeping: a peer that is running arrives within microseconds; one that is not (ranks
 * outnumber cores) needs this core, and a sleeping waiter costs it nothing. */
#define ZERO__SHM_SPINS 2000
#define ZERO__SHM_YIELDS 8

#ifdef __linux__
/* Sleeps while *w == v (a futex shared between processes: no FUTEX_PRIVATE_FLAG). */
static void futex_wait(_Atomic uint32_t *w, uint32_t v) {
    syscall(SYS_futex, (uint32_t *)(void *)w, FUTEX_WAIT, v, NULL, NULL, 0);
}
static void futex_wake_all(_Atomic uint32_t *w) {
    syscall(SYS_futex, (uint32_t *)(void *)w, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}
#endif

static void wait_for(shm_ctl *peer, unsigned long long e) {
    for (unsigned i = 0; i < ZERO__SHM_SPINS; i++) {
        if (atomic_load_explicit(&peer->arrived, memory_order_acquire) >= e) return;
        cpu_relax();
    }
    for (unsigned i = 0; i < ZERO__SHM_YIELDS; i++) {
        if (atomic_load_explicit(&peer->arrived, memory_order_acquire) >= e) return;
        sched_yield();
    }
#ifdef __linux__
    /* Register as a sleeper, then re-check, then sleep only while the word still holds what was
     * seen: with the arriving side's store-then-read (all seq_cst), either this side sees the
     * arrival or that side sees the sleeper and wakes it. */
    while (atomic_load(&peer->arrived) < e) {
        atomic_fetch_add(&peer->sleepers, 1);
        uint32_t seen = atomic_load(&peer->arrived32);
        if (atomic_load(&peer->arrived) < e) futex_wait(&peer->arrived32, seen);
        atomic_fetch_sub(&peer->sleepers, 1);
    }
    atomic_thread_fence(memory_order_acquire);
#else
    while (atomic_load_explicit(&peer->arrived, memory_order_acquire) < e) sched_yield();
#endif
}

static void barrier(zero__shm *s) {
    zero__stream_fence(); /* the pieces written with streaming stores, before the epoch */
    const unsigned long long e = ++s->epoch;
    shm_ctl *me = s->ctl[s->local];
    atomic_store(&me->arrived, e); /* seq_cst: also a release of everything written before */
#ifdef __linux__
    atomic_store(&me->arrived32, (uint32_t)e);
    if (atomic_load(&me->sleepers) > 0) futex_wake_all(&me->arrived32);
#endif
    for (int t = 0; t < s->nlocal; t++)
        if (t != s->local) wait_for(s->ctl[t], e);
}

/* Local rank t's buffer that holds what was written before barrier `epoch`. */
static inline unsigned char *buf_at(const zero__shm *s, int t, unsigned long long epoch) {
    return s->seg[t] + (size_t)(epoch % ZERO__SHM_NBUF) * s->chunk;
}

/* ------------------------------------------------------------------ layouts */

/* How a collective's vector is cut among the local ranks (t) and the nodes (g): block (t, g)
 * starts at element `off` of the full vector and has `len` elements.
 *  - BLOCKS: reduce-scatter and all-gather; block (t, g) is that of communicator rank
 *    world_of[g][t], `count` elements (groups = nnodes in the hierarchical algorithms, 1 when
 *    the window carries the whole collective).
 *  - PARTS: all-reduce; the vector in nlocal balanced parts (lengths differ by at most one),
 *    part t reduced by local rank t; one group. */
enum { LAYOUT_BLOCKS, LAYOUT_PARTS };
typedef struct shm_layout {
    int kind;
    int groups;
    size_t count;
    size_t es;
} shm_layout;

static void block_at(const zero__shm *s, const shm_layout *ly, int t, int g, size_t *off, size_t *len) {
    if (ly->kind == LAYOUT_PARTS) {
        size_t L = (size_t)s->nlocal;
        *off = ly->count * (size_t)t / L;
        *len = ly->count * (size_t)(t + 1) / L - *off;
    } else {
        *off = (size_t)s->world_of[g * s->nlocal + t] * ly->count;
        *len = ly->count;
    }
}

/* Elements per piece when a buffer holds `pieces` pieces: cache-line multiples when possible. */
static size_t piece_elems(const zero__shm *s, int pieces, size_t es) {
    size_t c = s->chunk / ((size_t)pieces * es), line = 64 / es;
    return c >= line ? c / line * line : c;
}

/* Non-temporal stores (zero__copy_stream):
 *  - into the window, always: a peer core reads the piece next, and pulling freshly written
 *    (dirty) lines out of the writer's cache cost up to 2x in the all-gather here (measured,
 *    docs/BENCHMARKS.md);
 *  - into recv when the collective's result exceeds this many bytes: it will not stay in cache
 *    anyway, and skipping the read-for-ownership of recv's lines speeds the copy-out. */
#define ZERO__SHM_STREAM_BYTES ((size_t)16 << 20)

/* Streaming stores are fenced once per barrier (barrier()) and once at the end of every
 * collective (before recv is handed back, perhaps to other threads), not once per piece. */
static void copy_out(void *dst, const void *src, size_t n, int stream) {
    if (stream) zero__copy_stream_unfenced(dst, src, n);
    else memcpy(dst, src, n);
}

/* Length of the piece [lo, lo + c) of a block of len elements clipped to [., hi). */
static inline size_t piece_len(size_t lo, size_t c, size_t len, size_t hi) {
    size_t end = len < hi ? len : hi;
    if (lo >= end) return 0;
    return end - lo < c ? end - lo : c;
}

/* ------------------------------------------------------------------ node-local phases */

/* Node-local reduce-scatter of elements [a, b) of every block: for each group g, out + g*ostride
 * receives the reduction over the node's ranks (in local rank order) of block (local, g) of
 * their `send`, elements [a, b). */
static void local_rs(zero__shm *s, const shm_layout *ly, zero_op op, zero_dtype dt, const void *send,
                     void *out, size_t ostride, size_t a, size_t b) {
    const int L = s->nlocal, G = ly->groups, me = s->local;
    const size_t es = ly->es, c = piece_elems(s, L * G, es);
    const unsigned char *in = send;
    /* The result: a block of `count` (reduce-scatter), or staging for the cross-node step. */
    const int stream =
        ly->kind == LAYOUT_BLOCKS && G == 1 && ly->count * es > ZERO__SHM_STREAM_BYTES;
    for (size_t lo = a; lo < b; lo += c) {
        unsigned char *mine = buf_at(s, me, s->epoch + 1);
        for (int t = 0; t < L; t++) {
            if (t == me) continue; /* this rank's own blocks are read from `send` directly */
            for (int g = 0; g < G; g++) {
                size_t off, len;
                block_at(s, ly, t, g, &off, &len);
                size_t n = piece_len(lo, c, len, b);
                if (n)
                    zero__copy_stream_unfenced(mine + (size_t)(t * G + g) * c * es,
                                                   in + (off + lo) * es, n * es);
            }
        }
        barrier(s);
        for (int g = 0; g < G; g++) {
            size_t off, len;
            block_at(s, ly, me, g, &off, &len);
            size_t n = piece_len(lo, c, len, b);
            if (!n) continue;
            for (int t = 0; t < L; t++)
                s->srcs[t] = t == me ? (const void *)(in + (off + lo) * es)
                                     : (const void *)(buf_at(s, t, s->epoch) + (size_t)(me * G + g) * c * es);
            zero__shm_reduce(dt, op, s->srcs, L, (unsigned char *)out + (g * ostride + lo - a) * es, n,
                             stream, s->impl);
        }
    }
}

/* Node-local all-gather of elements [a, b) of every block: block (t, g) of recv receives local
 * rank t's in + g*istride, elements [a, b). */
static void local_ag(zero__shm *s, const shm_layout *ly, const void *in, size_t istride, void *recv,
                     size_t a, size_t b) {
    const int L = s->nlocal, G = ly->groups, me = s->local;
    const size_t es = ly->es, c = piece_elems(s, G, es);
    const unsigned char *src = in;
    unsigned char *dst = recv;
    const size_t result = ly->kind == LAYOUT_PARTS ? ly->count : ly->count * (size_t)L * (size_t)G;
    const int stream = result * es > ZERO__SHM_STREAM_BYTES;
    for (size_t lo = a; lo < b; lo += c) {
        unsigned char *mine = buf_at(s, me, s->epoch + 1);
        for (int g = 0; g < G; g++) {
            size_t off, len;
            block_at(s, ly, me, g, &off, &len);
            size_t n = piece_len(lo, c, len, b);
            if (n)
                zero__copy_stream_unfenced(mine + (size_t)g * c * es,
                                               src + (g * istride + lo - a) * es, n * es);
        }
        barrier(s);
        for (int t = 0; t < L; t++) {
            for (int g = 0; g < G; g++) {
                size_t off, len;
                block_at(s, ly, t, g, &off, &len);
                size_t n = piece_len(lo, c, len, b);
                if (!n) continue;
                const unsigned char *from = t == me ? src + (g * istride + lo - a) * es
                                                    : buf_at(s, t, s->epoch) + (size_t)g * c * es;
                unsigned char *to = dst + (off + lo) * es;
                if (to != from) copy_out(to, from, n * es, stream); /* in place: already there */
            }
        }
    }
}

/* ------------------------------------------------------------------ cross-node steps */

enum { FAIL_CROSS, FAIL_CMA };

static inline int world_rank(const zero__shm *s, int t) {
    return s->world_of[s->node_index * s->nlocal + t];
}

/* After a collective's last barrier: did a node peer's cross-node step or single-copy read fail
 * in this call? */
static zero_status peers_status(zero_comm *c, zero__shm *s, zero_status mine, const char *fn) {
    if (mine) return mine;
    for (int t = 0; t < s->nlocal; t++) {
        if (t == s->local) continue;
        shm_ctl *p = s->ctl[t];
        if (atomic_load_explicit(&p->failed, memory_order_acquire) != s->seq) continue;
        if (atomic_load_explicit(&p->fail_kind, memory_order_relaxed) == FAIL_CMA) {
            const int u = atomic_load_explicit(&p->fail_peer, memory_order_relaxed);
            const int e = atomic_load_explicit(&p->fail_errno, memory_order_relaxed);
            ZERO__COMM_ERR(c, "%s: local rank %d of this node (rank %d) could not read local rank %d's "
                           "buffer (rank %d) with process_vm_readv: %s (errno %d); set ZERO_COMM_CMA=0 "
                           "to do without", fn, t, world_rank(s, t), u,
                           u >= 0 && u < s->nlocal ? world_rank(s, u) : -1, strerror(e), e);
        } else {
            ZERO__COMM_ERR(c, "%s: the cross-node step failed on local rank %d of this node (rank %d); "
                           "see its error", fn, t, world_rank(s, t));
        }
        return ZERO_ERR_COMM;
    }
    return ZERO_OK;
}

/* Publishes this rank's failure of the current call (the first one counts) for peers_status;
 * the node-local protocol still runs to its end so that the node peers are not left waiting in
 * a barrier. */
static void mark_failed(zero__shm *s, int kind, int peer, int err) {
    shm_ctl *me = s->ctl[s->local];
    if (atomic_load_explicit(&me->failed, memory_order_relaxed) == s->seq) return;
    atomic_store_explicit(&me->fail_kind, kind, memory_order_relaxed);
    atomic_store_explicit(&me->fail_peer, peer, memory_order_relaxed);
    atomic_store_explicit(&me->fail_errno, err, memory_order_relaxed);
    atomic_store_explicit(&me->failed, s->seq, memory_order_release);
}

/* Records a failed cross-node MPI call. */
static zero_status cross_failed(zero_comm *c, zero__shm *s, int rc, const char *what) {
    mark_failed(s, FAIL_CROSS, -1, 0);
    return zero__comm_mpi_error(c, rc, what);
}

/* ------------------------------------------------------------------ single copy (CMA) */

/*
 * Large messages skip the window's copy: each rank reads the pieces it needs straight from its
 * node peers' buffers with process_vm_readv (Linux cross-memory attach; the kernel copies from
 * the peer's pages once). Per call, a rank publishes its buffers' addresses in its control
 * block and enters a barrier; after it, the peers' inputs are final (their owners are inside
 * the call) and their addresses known; a rank reads only what no rank writes during the step
 * (reduce-scatter: block t of every send, read by local rank t alone, while each rank writes
 * only its own recv, which is, in place, its own block), and a barrier at the end of the step
 * keeps every owner in the call (its buffers alive and unchanged) until every reader is done.
 * The window's buffers are not used; its control blocks carry the addresses, the barrier and
 * the failure flags.
 */

/* Whether a message of `bytes` (the ring rule's size) takes the single-copy path; `factor`
 * scales the threshold (ZERO__SHM_CMA_AR_FACTOR for all-reduce, else 1). */
static int use_cma(const zero__shm *s, uint64_t bytes, uint64_t factor) {
    return s->cma && (bytes / factor >= s->cma_min);
}

/* Starts a single-copy collective: publishes its buffers (a: the reduction's source, b: the
 * gather's source) for the first barrier (cma_sync) to hand out. */
static void cma_begin(zero__shm *s, const void *a, const void *b) {
    shm_ctl *me = s->ctl[s->local];
    atomic_store_explicit(&me->addr[0], (uintptr_t)a, memory_order_relaxed);
    atomic_store_explicit(&me->addr[1], (uintptr_t)b, memory_order_relaxed);
    s->cma_err = 0;
    s->cma_peer = -1;
}

/* A barrier that starts a step, and every peer's published addresses into s->from (never after
 * the call's last barrier: the owners rewrite them in their next call, which starts after it). */
static void cma_sync(zero__shm *s) {
    barrier(s);
    for (int k = 0; k < 2; k++)
        for (int t = 0; t < s->nlocal; t++)
            s->from[k * s->nlocal + t] =
                (const unsigned char *)atomic_load_explicit(&s->ctl[t]->addr[k], memory_order_relaxed);
}

/* Reads n bytes at peer t's address `remote` into dst; the first failure of the call is kept
 * (and published) and later reads are skipped, their destinations left as they were. */
static int cma_read(zero__shm *s, int t, void *dst, const unsigned char *remote, size_t n) {
    if (s->cma_err) return -1;
    int e = cma_read_pid(s->pid[t], dst, remote, n);
    if (!e) return 0;
    s->cma_err = e;
    s->cma_peer = t;
    mark_failed(s, FAIL_CMA, t, e);
    return -1;
}

/* This rank's own failed read of the current call, as an error (ZERO_OK when none). */
static zero_status cma_status(zero_comm *c, zero__shm *s, const char *fn) {
    if (!s->cma_err) return ZERO_OK;
    const int t = s->cma_peer;
    ZERO__COMM_ERR(c, "%s: process_vm_readv of local rank %d's buffer (rank %d, pid %d) failed: %s "
                   "(errno %d); set ZERO_COMM_CMA=0 to do without", fn, t, world_rank(s, t), s->pid[t],
                   strerror(s->cma_err), s->cma_err);
    return ZERO_ERR_COMM;
}

/* local_rs by single copy, between cma_sync and a barrier: s->from[t] is local rank t's
 * send. For each piece, the peers' slices go into the private scratch (cache-sized) and the
 * same L-way left-to-right reduction as local_rs's combines them with this rank's own slice,
 * in local rank order: the same bits as the window path. */
static void cma_local_rs(zero__shm *s, const shm_layout *ly, zero_op op, zero_dtype dt,
                         const void *send, void *out, size_t ostride, size_t a, size_t b) {
    const int L = s->nlocal, G = ly->groups, me = s->local;
    const size_t es = ly->es, line = 64 / es;
    size_t c = s->cma_scratch_bytes / ((size_t)(L - 1) * es);
    if (c >= line) c = c / line * line;
    /* Streaming stores for a large result, and for an all-reduce's part on one node, which the
     * peers read next (as the window's pieces: no dirty lines to pull out of this cache). */
    const int stream =
        (ly->kind == LAYOUT_BLOCKS && G == 1 && ly->count * es > ZERO__SHM_STREAM_BYTES) ||
        (ly->kind == LAYOUT_PARTS && s->nnodes == 1);
    for (int g = 0; g < G; g++) {
        size_t off, len;
        block_at(s, ly, me, g, &off, &len);
        for (size_t lo = a; lo < b; lo += c) {
            const size_t n = piece_len(lo, c, len, b);
            if (!n) break;
            int k = 0;
            for (int t = 0; t < L; t++) {
                if (t == me) {
                    s->srcs[t] = (const unsigned char *)send + (off + lo) * es;
                    continue;
                }
                unsigned char *piece = s->cma_scratch + (size_t)k++ * c * es;
                if (cma_read(s, t, piece, s->from[t] + (off + lo) * es, n * es)) return;
                s->srcs[t] = piece;
            }
            zero__shm_reduce(dt, op, s->srcs, L, (unsigned char *)out + (g * ostride + lo - a) * es, n,
                             stream, s->impl);
        }
    }
}

/* local_ag by single copy, between cma_sync and a barrier: s->from[nlocal + t] is local rank t's
 * `in`; each peer's slice is read straight into its place in recv. */
static void cma_local_ag(zero__shm *s, const shm_layout *ly, const void *in, size_t istride,
                         void *recv, size_t a, size_t b) {
    const int L = s->nlocal, G = ly->groups, me = s->local;
    const size_t es = ly->es;
    const size_t result = ly->kind == LAYOUT_PARTS ? ly->count : ly->count * (size_t)L * (size_t)G;
    const int stream = result * es > ZERO__SHM_STREAM_BYTES;
    for (int i = 1; i <= L; i++) {
        const int t = (me + i) % L; /* peers first, each from a different one; mine last */
        for (int g = 0; g < G; g++) {
            size_t off, len;
            block_at(s, ly, t, g, &off, &len);
            const size_t n = piece_len(a, b - a, len, b);
            if (!n) continue;
            unsigned char *to = (unsigned char *)recv + (off + a) * es;
            if (t == me) {
                const unsigned char *from = (const unsigned char *)in + g * istride * es;
                if (to != from) copy_out(to, from, n * es, stream);
            } else if (cma_read(s, t, to, s->from[L + t] + g * istride * es, n * es)) {
                return;
            }
        }
    }
}

/* ------------------------------------------------------------------ collectives */

/* The cross-node step of a hierarchical all-reduce: the first n elements of the staging buffer
 * summed over the nodes, in place; after a failure (*st set) the node-local protocol goes on. */
static void cross_all_reduce(zero_comm *c, zero__shm *s, size_t n, zero_dtype dt, zero_op op, zero_status *st) {
    if (*st) return;
    int rc = MPI_Allreduce(MPI_IN_PLACE, s->scratch, (int)n, zero__comm_mpi_type(dt), zero__comm_mpi_op(dt, op),
                           s->cross);
    if (rc != MPI_SUCCESS) *st = cross_failed(c, s, rc, "all_reduce: MPI_Allreduce (cross-node)");
}

static zero_status run_all_reduce(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                  size_t count, zero_dtype dt, zero_op op) {
    zero_status st = attach(c, s, "all_reduce");
    if (st) return st;
    s->seq++;
    const shm_layout ly = {LAYOUT_PARTS, 1, count, zero_dtype_size(dt)};
    const size_t es = ly.es, span = s->scratch_bytes / es;
    const size_t longest = (count + (size_t)s->nlocal - 1) / (size_t)s->nlocal;
    size_t off, mylen;
    block_at(s, &ly, s->local, 0, &off, &mylen);
    if (use_cma(s, (uint64_t)count * es, ZERO__SHM_CMA_AR_FACTOR)) {
        /* Single copy: reduce my part (from every rank's send) into its place in recv, then
         * gather the others' parts from their recv; with several nodes, span by span through
         * the staging buffer and MPI. */
        unsigned char *mine = (unsigned char *)recv + off * es;
        cma_begin(s, send, s->nnodes == 1 ? mine : s->scratch);
        cma_sync(s);
        if (s->nnodes == 1) {
            cma_local_rs(s, &ly, op, dt, send, mine, 0, 0, longest);
            cma_sync(s);
            cma_local_ag(s, &ly, mine, 0, recv, 0, longest);
            barrier(s);
        } else {
            for (size_t a = 0; a < longest; a += span) {
                const size_t b = longest - a < span ? longest : a + span;
                cma_local_rs(s, &ly, op, dt, send, s->scratch, 0, a, b);
                cross_all_reduce(c, s, piece_len(a, b - a, mylen, b), dt, op, &st);
                cma_sync(s);
                cma_local_ag(s, &ly, s->scratch, 0, recv, a, b);
                barrier(s); /* before the staging buffer is rewritten */
            }
        }
        zero__stream_fence();
        if (!st) st = cma_status(c, s, "all_reduce");
        return peers_status(c, s, st, "all_reduce");
    }
    if (s->nnodes == 1) {
        /* Reduce my part straight into its place in recv (in place: over my part of send, which
         * only I read), then gather every part from there. */
        unsigned char *mine = (unsigned char *)recv + off * es;
        local_rs(s, &ly, op, dt, send, mine, 0, 0, longest);
        local_ag(s, &ly, mine, 0, recv, 0, longest);
        zero__stream_fence();
        return ZERO_OK;
    }
    for (size_t a = 0; a < longest; a += span) {
        const size_t b = longest - a < span ? longest : a + span;
        local_rs(s, &ly, op, dt, send, s->scratch, 0, a, b);
        cross_all_reduce(c, s, piece_len(a, b - a, mylen, b), dt, op, &st);
        local_ag(s, &ly, s->scratch, 0, recv, a, b);
    }
    zero__stream_fence();
    return peers_status(c, s, st, "all_reduce");
}

/* The cross-node step of a hierarchical reduce-scatter: the staging buffer's node blocks of n
 * elements reduced over the nodes, this node's block into out; as cross_all_reduce. */
static void cross_reduce_scatter(zero_comm *c, zero__shm *s, void *out, size_t n, zero_dtype dt, zero_op op,
                                 zero_status *st) {
    if (*st) return;
    int rc = MPI_Reduce_scatter_block(s->scratch, out, (int)n, zero__comm_mpi_type(dt), zero__comm_mpi_op(dt, op),
                                      s->cross);
    if (rc != MPI_SUCCESS) *st = cross_failed(c, s, rc, "reduce_scatter: MPI_Reduce_scatter_block (cross-node)");
}

static zero_status run_reduce_scatter(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                      size_t count, zero_dtype dt, zero_op op) {
    zero_status st = attach(c, s, "reduce_scatter");
    if (st) return st;
    s->seq++;
    const size_t es = zero_dtype_size(dt);
    const uint64_t bytes = (uint64_t)count * es * (uint64_t)s->nlocal * (uint64_t)s->nnodes;
    if (use_cma(s, bytes, 1)) {
        /* Single copy: each rank reads its blocks from the peers' send while they read theirs
         * from its own; in place, each rank writes only its own block, read by itself alone. */
        cma_begin(s, send, NULL);
        cma_sync(s);
        if (s->nnodes == 1) {
            const shm_layout ly = {LAYOUT_BLOCKS, 1, count, es};
            cma_local_rs(s, &ly, op, dt, send, recv, 0, 0, count);
        } else {
            const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, count, es};
            const size_t span = s->scratch_bytes / ((size_t)s->nnodes * es);
            for (size_t a = 0; a < count; a += span) {
                const size_t b = count - a < span ? count : a + span;
                cma_local_rs(s, &ly, op, dt, send, s->scratch, b - a, a, b);
                cross_reduce_scatter(c, s, (unsigned char *)recv + a * es, b - a, dt, op, &st);
            }
        }
        barrier(s); /* no rank returns (and may rewrite its send) while a peer reads it */
        zero__stream_fence();
        if (!st) st = cma_status(c, s, "reduce_scatter");
        return peers_status(c, s, st, "reduce_scatter");
    }
    if (s->nnodes == 1) {
        const shm_layout ly = {LAYOUT_BLOCKS, 1, count, es};
        local_rs(s, &ly, op, dt, send, recv, 0, 0, count);
        zero__stream_fence();
        return ZERO_OK;
    }
    const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, count, es};
    const size_t span = s->scratch_bytes / ((size_t)s->nnodes * es);
    for (size_t a = 0; a < count; a += span) {
        const size_t b = count - a < span ? count : a + span;
        local_rs(s, &ly, op, dt, send, s->scratch, b - a, a, b);
        cross_reduce_scatter(c, s, (unsigned char *)recv + a * es, b - a, dt, op, &st);
    }
    /* Nothing after the cross-node step reads the window: one more barrier lets every node
     * peer see a failure flag set in the last span. */
    barrier(s);
    return peers_status(c, s, st, "reduce_scatter");
}

static zero_status run_all_gather(zero_comm *c, zero__shm *s, const void *send, void *recv,
                                  size_t count, zero_dtype dt) {
    zero_status st = attach(c, s, "all_gather");
    if (st) return st;
    s->seq++;
    const size_t es = zero_dtype_size(dt);
    const uint64_t bytes = (uint64_t)count * es * (uint64_t)s->nlocal * (uint64_t)s->nnodes;
    if (use_cma(s, bytes, 1)) {
        /* Single copy: every rank reads each peer's block straight into its recv. */
        if (s->nnodes == 1) {
            const shm_layout ly = {LAYOUT_BLOCKS, 1, count, es};
            cma_begin(s, NULL, send);
            cma_sync(s);
            cma_local_ag(s, &ly, send, 0, recv, 0, count);
            barrier(s);
        } else {
            const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, count, es};
            const size_t span = s->scratch_bytes / ((size_t)s->nnodes * es);
            cma_begin(s, NULL, s->scratch);
            for (size_t a = 0; a < count; a += span) {
                const size_t b = count - a < span ? count : a + span;
                if (!st) {
                    MPI_Datatype t = zero__comm_mpi_type(dt);
                    int rc = MPI_Allgather((const unsigned char *)send + a * es, (int)(b - a), t,
                                           s->scratch, (int)(b - a), t, s->cross);
                    if (rc != MPI_SUCCESS)
                        st = cross_failed(c, s, rc, "all_gather: MPI_Allgather (cross-node)");
                }
                cma_sync(s);
                cma_local_ag(s, &ly, s->scratch, b - a, recv, a, b);
                barrier(s); /* before the staging buffer is rewritten */
            }
        }
        zero__stream_fence();
        if (!st) st = cma_status(c, s, "all_gather");
        return peers_status(c, s, st, "all_gather");
    }
    if (s->nnodes == 1) {
        const shm_layout ly = {LAYOUT_BLOCKS, 1, count, es};
        local_ag(s, &ly, send, 0, recv, 0, count);
        zero__stream_fence();
        return ZERO_OK;
    }
    const shm_layout ly = {LAYOUT_BLOCKS, s->nnodes, count, es};
    const size_t span = s->scratch_bytes / ((size_t)s->nnodes * es);
    for (size_t a = 0; a < count; a += span) {
        const size_t b = count - a < span ? count : a + span;
        if (!st) {
            MPI_Datatype t = zero__comm_mpi_type(dt);
            int rc = MPI_Allgather((const unsigned char *)send + a * es, (int)(b - a), t, s->scratch,
                                   (int)(b - a), t, s->cross);
            if (rc != MPI_SUCCESS) st = cross_failed(c, s, rc, "all_gather: MPI_Allgather (cross-node)");
        }
        local_ag(s, &ly, s->scratch, b - a, recv, a, b);
    }
    zero__stream_fence();
    return peers_status(c, s, st, "all_gather");
}
/* ------------------------------------------------------------------ progress thread */

/*
 * With ZERO_COMM_ASYNC on (one node), a non-blocking collective is a job on a FIFO queue that a
 * thread of this process runs, so the caller computes while its share of the collective (the
 * copies, the reduction, the waits for the node peers) happens. Order: every rank runs its
 * collectives through the window in the order it called them — the queue in posting order,
 * and a blocking collective (on the caller's thread) only once the queue is empty — so the
 * ranks' sequences still match call for call. Memory: the caller's stores to a job's buffers
 * happen before the post (mutex), the thread's writes of recv before the caller sees the job
 * done (mutex), and while jobs are pending the caller's thread does not touch the collectives'
 * state in zero__shm. The thread never calls MPI (the window is attached on the caller's thread
 * before the first post), so MPI_THREAD_FUNNELED suffices.
 */

int zero__shm_async(const zero__shm *s) { return s && s->async; }

void zero__shm_set_async(zero__shm *s, int mode) {
    if (!s || s->thread_up) return;
    s->async = mode != 0 && s->nnodes == 1;
    s->no_thread = mode == 2;
}

static zero_status run_job(zero_comm *c, zero__shm *s, const zero__shm_job *j) {
    switch (j->kind) {
    case ZERO__SHM_ALL_REDUCE: return run_all_reduce(c, s, j->send, j->recv, j->count, j->dt, j->op);
    case ZERO__SHM_REDUCE_SCATTER: return run_reduce_scatter(c, s, j->send, j->recv, j->count, j->dt, j->op);
    case ZERO__SHM_ALL_GATHER: return run_all_gather(c, s, j->send, j->recv, j->count, j->dt);
    }
    return ZERO_ERR_INVALID_ARG;
}

static void *progress_main(void *arg) {
    zero__shm *s = arg;
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (!s->head && !s->stopping) pthread_cond_wait(&s->work, &s->mu);
        zero__shm_job *j = s->head;
        if (!j) break; /* stopping, and nothing left */
        s->head = j->next;
        if (!s->head) s->tail = NULL;
        pthread_mutex_unlock(&s->mu);
        s->wc.err[0] = '\0';
        zero_status st = run_job(&s->wc, s, j);
        pthread_mutex_lock(&s->mu);
        j->status = st;
        if (st) { /* the text, cut to the job's room */
            memcpy(j->err, s->wc.err, sizeof j->err - 1);
            j->err[sizeof j->err - 1] = '\0';
        }
        j->done = 1;
        s->pending--;
        pthread_cond_broadcast(&s->done);
    }
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Starts the thread (first post); 0 when it cannot be (the caller then runs jobs itself). */
static int start_thread(zero_comm *c, zero__shm *s) {
    if (s->no_thread || pthread_mutex_init(&s->mu, NULL)) return 0;
    if (pthread_cond_init(&s->work, NULL)) goto no_work;
    if (pthread_cond_init(&s->done, NULL)) goto no_done;
    s->wc = *c;
    /* Signals stay with the program's threads: the thread starts with them blocked, all but
     * those of a fault in the thread itself, which must reach the program's (or MPI's) handler. */
    sigset_t all, old;
    sigfillset(&all);
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGILL);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&s->thread, NULL, progress_main, s);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) goto no_thread;
    s->thread_up = 1;
    return 1;
no_thread:
    pthread_cond_destroy(&s->done);
no_done:
    pthread_cond_destroy(&s->work);
no_work:
    pthread_mutex_destroy(&s->mu);
    return 0;
}

/* Waits for every posted job to run (the caller's thread then owns the collectives' state). */
static void drain(zero__shm *s) {
    if (!s->thread_up) return;
    pthread_mutex_lock(&s->mu);
    while (s->pending) pthread_cond_wait(&s->done, &s->mu);
    pthread_mutex_unlock(&s->mu);
}

/* Runs what is queued, then ends and joins the thread. */
static void stop_thread(zero__shm *s) {
    if (!s->thread_up) return;
    pthread_mutex_lock(&s->mu);
    s->stopping = 1;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    pthread_join(s->thread, NULL);
    pthread_cond_destroy(&s->done);
    pthread_cond_destroy(&s->work);
    pthread_mutex_destroy(&s->mu);
    s->thread_up = 0;
}

zero_status zero__shm_post(zero_comm *c, zero__shm *s, zero__shm_job *j) {
    static const char *const names[] = {"all_reduce", "reduce_scatter", "all_gather"};
    j->next = NULL;
    j->done = 0;
    j->status = ZERO_OK;
    j->err[0] = '\0';
    /* On this thread, in call order: the window's allocation is collective MPI. */
    zero_status st = attach(c, s, names[j->kind]);
    if (st) return st;
    if (!s->thread_up && (!s->async || !start_thread(c, s))) {
        s->async = 0;
        j->status = run_job(c, s, j);
        if (j->status) { /* the error is the request's, as for a thread's job */
            memcpy(j->err, c->err, sizeof j->err - 1);
            j->err[sizeof j->err - 1] = '\0';
        }
        j->done = 1;
        return ZERO_OK;
    }
    pthread_mutex_lock(&s->mu);
    if (s->tail) s->tail->next = j;
    else s->head = j;
    s->tail = j;
    s->pending++;
    pthread_cond_signal(&s->work);
    pthread_mutex_unlock(&s->mu);
    return ZERO_OK;
}

zero_status zero__shm_job_wait(zero_comm *c, zero__shm *s, zero__shm_job *j) {
    if (s->thread_up) {
        pthread_mutex_lock(&s->mu);
        while (!j->done) pthread_cond_wait(&s->done, &s->mu);
        pthread_mutex_unlock(&s->mu);
    }
    if (j->status && j->err[0]) ZERO__COMM_ERR(c, "%s", j->err);
    return j->status;
}

int zero__shm_job_done(zero__shm *s, zero__shm_job *j) {
    if (!s->thread_up) return j->done;
    pthread_mutex_lock(&s->mu);
    int d = j->done;
    pthread_mutex_unlock(&s->mu);
    return d;
}

zero_status zero__shm_run(zero_comm *c, zero__shm *s, const zero__shm_job *j) {
    drain(s);
    return run_job(c, s, j);
}
#endif
