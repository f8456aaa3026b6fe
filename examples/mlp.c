/* examples/mlp.c — the smallest complete program on the ZeRO engine: a 4-layer MLP learns
 * y = sin(x0) * cos(x1) on any number of ranks.  Build: make build;  run: mpirun --oversubscribe -np 3
 * build/examples/mlp [stage [steps]] (default: stage 3, 200 steps; as root add --allow-run-as-root).
 * Every rank prints nothing but rank 0, which prints the loss and the memory. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zero/zero.h>

enum { LAYERS = 4, BATCH = 16 };
static const int dims[LAYERS + 1] = {2, 64, 64, 32, 1};

/* A deterministic sample generator: sample i is the same on every rank. */
static void sample(long i, float x[2], float *y) {
    unsigned long h = (unsigned long)i * 2654435761ul + 12345;
    x[0] = (float)((h % 10007) / 10007.0 * 6.0 - 3.0);
    x[1] = (float)(((h / 10007) % 10009) / 10009.0 * 6.0 - 3.0);
    *y = sinf(x[0]) * cosf(x[1]);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        if ((call) != ZERO_OK) {                                                                   \
            fprintf(stderr, "mlp: %s: %s\n", #call, zero_engine_last_error(e));                    \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int main(int argc, char **argv) {
    zero_comm *comm = NULL;
    zero_error err;
    if (zero_comm_init_mpi_with(&comm, NULL, NULL, &err) != ZERO_OK && zero_comm_init_self_with(&comm, &err) != ZERO_OK) {
        fprintf(stderr, "mlp: %s\n", err.msg);
        return 1;
    }
    const int rank = zero_comm_rank(comm), world = zero_comm_size(comm);

    zero_config cfg;
    zero_config_default(&cfg);
    cfg.stage = argc > 1 ? atoi(argv[1]) : 3;
    const int STEPS = argc > 2 ? atoi(argv[2]) : 200;
    cfg.micro_batch = BATCH;
    cfg.optim.lr = 3e-3f;
    if (zero_config_resolve(&cfg, world, &err) != ZERO_OK) {
        fprintf(stderr, "mlp: %s\n", err.msg);
        return 2;
    }
    zero_engine *e = NULL;
    if (zero_engine_create_with(&e, comm, &cfg, NULL, &err) != ZERO_OK) {
        fprintf(stderr, "mlp: %s\n", err.msg);
        return 1;
    }

    /* One unit per layer: weight (out x in), then bias. */
    for (int l = 0; l < LAYERS; l++) {
        char name[32];
        snprintf(name, sizeof name, "fc%d", l);
        int u = zero_engine_add_unit(e, name);
        int64_t w[2] = {dims[l + 1], dims[l]}, b[1] = {dims[l + 1]};
        snprintf(name, sizeof name, "fc%d.weight", l);
        CHECK(zero_engine_add_param(e, u, name, w, 2, 0));
        snprintf(name, sizeof name, "fc%d.bias", l);
        CHECK(zero_engine_add_param(e, u, name, b, 1, ZERO_PARAM_NO_DECAY));
    }
    CHECK(zero_engine_finalize(e));
    for (int l = 0; l < LAYERS; l++) { /* the same initial values on every rank */
        int n = dims[l + 1] * dims[l] + dims[l + 1];
        float *v = calloc((size_t)n, sizeof *v);
        for (int i = 0; i < dims[l + 1] * dims[l]; i++)
            v[i] = (float)(((i * 7919 + l * 104729) % 2001) / 1000.0 - 1.0) * sqrtf(3.0f / (float)dims[l]);
        CHECK(zero_engine_set_unit(e, l, v));
        free(v);
    }

    /* Activations: a[l] is the input of layer l, for the BATCH samples of this rank. */
    float *a[LAYERS + 1], *d = malloc(BATCH * 64 * sizeof(float)), *dn = malloc(BATCH * 64 * sizeof(float));
    for (int l = 0; l <= LAYERS; l++) a[l] = malloc(BATCH * 64 * sizeof(float));
    float target[BATCH];
    for (int step = 0; step < STEPS; step++) {
        long first = ((long)step * world + rank) * BATCH; /* disjoint samples per rank */
        for (int b = 0; b < BATCH; b++) sample(first + b, &a[0][b * 64], &target[b]);
        for (int l = 0; l < LAYERS; l++) { /* forward: gather, use, release */
            const float *p = zero_engine_gather(e, l);
            if (!p) return 1;
            for (int b = 0; b < BATCH; b++)
                for (int o = 0; o < dims[l + 1]; o++) {
                    float s = p[dims[l + 1] * dims[l] + o];
                    for (int i = 0; i < dims[l]; i++) s += p[o * dims[l] + i] * a[l][b * 64 + i];
                    a[l + 1][b * 64 + o] = l + 1 < LAYERS && s < 0 ? 0 : s; /* ReLU but last */
                }
            CHECK(zero_engine_release(e, l));
        }
        double loss = 0;
        for (int b = 0; b < BATCH; b++) {
            float r = a[LAYERS][b * 64] - target[b];
            loss += 0.5 * r * r / BATCH;
            d[b * 64] = r / BATCH; /* d(mean loss)/dy */
        }
        for (int l = LAYERS - 1; l >= 0; l--) { /* backward: gather, add into grad, grad_ready */
            const float *p = zero_engine_gather(e, l);
            float *g = p ? zero_engine_grad(e, l) : NULL;
            if (!g) return 1;
            for (int b = 0; b < BATCH; b++)
                for (int o = 0; o < dims[l + 1]; o++) {
                    float dv = d[b * 64 + o];
                    g[dims[l + 1] * dims[l] + o] += dv;
                    for (int i = 0; i < dims[l]; i++) g[o * dims[l] + i] += dv * a[l][b * 64 + i];
                }
            for (int b = 0; l > 0 && b < BATCH; b++)
                for (int i = 0; i < dims[l]; i++) {
                    float s = 0;
                    for (int o = 0; o < dims[l + 1]; o++) s += p[o * dims[l] + i] * d[b * 64 + o];
                    dn[b * 64 + i] = a[l][b * 64 + i] > 0 ? s : 0;
                }
            CHECK(zero_engine_grad_ready(e, l));
            CHECK(zero_engine_release(e, l));
            float *t = d; d = dn; dn = t;
        }
        zero_step_stats st;
        CHECK(zero_engine_step(e, &st));
        float mine = (float)loss, mean = 0;
        zero_comm_all_reduce(comm, &mine, &mean, 1, ZERO_DTYPE_FP32, ZERO_OP_AVG);
        if (rank == 0 && (step % 20 == 0 || step == STEPS - 1))
            printf("step %3d  loss %.5f  grad_norm %.4f\n", step, mean, st.grad_norm);
    }
    zero_mem_stats m;
    zero_engine_mem_stats(e, &m);
    if (rank == 0)
        printf("stage %d on %d ranks: per-rank params %zu B, grads %zu B, optimizer %zu B\n", cfg.stage, world,
               m.current[ZERO_MEM_PARAMS], m.current[ZERO_MEM_GRADS], m.current[ZERO_MEM_OPTIM]);
    for (int l = 0; l <= LAYERS; l++) free(a[l]);
    free(d);
    free(dn);
    zero_engine_free(e);
    zero_comm_free(comm);
    return 0;
}
