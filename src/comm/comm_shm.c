/* In-node collectives of the mpi backend, their life: creation (rank 0's settings, the node
 * split, the single-copy probe), the window attached at first use, destruction, the queries. */
#ifdef ZERO_HAVE_MPI
#include "comm/shm_impl.h"

/* ------------------------------------------------------------------ life */

static zero_status mpi_fail(const zero__cerr *e, int rc, const char *fn, const char *what) {
    char buf[160];
    snprintf(buf, sizeof buf, "%s: %s", fn, what);
    return zero__cerr_mpi(e, rc, buf);
}


void zero__shm_destroy(zero__shm *s, int mpi_alive) {
    if (!s) return;
    zero__shm_stop_thread(s);
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
    if (rank == 0) zero__shm_settings_text(opts, cfg.env, &cfg.from_opts);
    /* Every rank must take the same path through every collective: rank 0's settings rule. */
    int rc = MPI_Bcast(&cfg, (int)sizeof cfg, MPI_BYTE, 0, comm);
    if (rc != MPI_SUCCESS) return mpi_fail(e, rc, fn, "MPI_Bcast");
    shm_settings st;
    char msg[256];
    zero_status s = zero__shm_parse_settings(cfg.env, cfg.from_opts, size, &st, msg, sizeof msg);
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
    sh->cross_overlap = nnodes > 1 && st.cross_overlap;
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
        rc = zero__shm_cma_probe(comm, sh, rank, all, &ok);
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
zero_status zero__shm_attach(zero_comm *c, zero__shm *s, const char *fn) {
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
int zero__shm_local_rank(const zero__shm *s) { return s ? s->local : 0; }
int zero__shm_cma(const zero__shm *s) { return s ? s->cma : 0; }

int zero__shm_wants(const zero__shm *s, uint64_t bytes) {
    return s && bytes > 0 && bytes >= s->min_bytes;
}
#endif
