/* Settings of the shared-memory collectives: zero_comm_options, or rank 0's ZERO_COMM_* variables
 * for the fields left to them, as text broadcast from rank 0 and parsed alike on every rank. */
#ifdef ZERO_HAVE_MPI
#include "comm/shm_impl.h"

/* ------------------------------------------------------------------ settings */



static const char *const g_env_names[ZERO__SHM_NENV] = {
    "ZERO_COMM_SHM",        "ZERO_COMM_SHM_MIN_BYTES", "ZERO_COMM_SHM_CHUNK",
    "ZERO_COMM_FAKE_NODES", "ZERO_COMM_CMA",           "ZERO_COMM_CMA_MIN_BYTES",
    "ZERO_COMM_ASYNC",      "ZERO_COMM_CROSS_OVERLAP"};
/* The same settings as zero_comm_options fields, for messages about values a program set. */
static const char *const g_opt_names[ZERO__SHM_NENV] = {
    "zero_comm_options.shm",        "zero_comm_options.shm_min_bytes", "zero_comm_options.shm_chunk",
    "zero_comm_options.fake_nodes", "zero_comm_options.cma",           "zero_comm_options.cma_min_bytes",
    "zero_comm_options.async",      "zero_comm_options.cross_overlap"};

/* Rank 0's settings as text in the variables' syntax: a field a program set, written out (its
 * bit in *from_opts), or else the variable ("" when unset). */
void zero__shm_settings_text(const zero_comm_options *o, char env[ZERO__SHM_NENV][ZERO__SHM_ENV_BYTES], unsigned *from_opts) {
    const long long num[ZERO__SHM_NENV] = {o->shm, o->shm_min_bytes, o->shm_chunk, o->fake_nodes,
                                           o->cma, o->cma_min_bytes, o->async, o->cross_overlap};
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
zero_status zero__shm_parse_settings(char env[ZERO__SHM_NENV][ZERO__SHM_ENV_BYTES], unsigned from_opts, int nranks,
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
    st->cross_overlap = 0;
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
    if (parse_switch(env[7], names[7], "non-blocking cross-node steps", &st->cross_overlap, err, cap)) return ZERO_ERR_INVALID_ARG;
    /* The largest default chunk still leaves 8 bytes per rank for very large worlds. */
    while (st->chunk < 8u * (size_t)nranks) st->chunk *= 2;
    return ZERO_OK;
}
#endif
