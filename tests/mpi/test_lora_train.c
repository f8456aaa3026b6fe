/* LoRA against PEFT: on every adapter fixture of scripts/make_lora_fixtures.py (PEFT adapters on
 * the decoder fixtures: GPT-2's Conv1D with every module, every Llama projection with rsLoRA,
 * biases and llama3 RoPE, Qwen3's q/k norms), loaded with --lora-from's reader (dec_peft_*) onto
 * the base (dec_hf_load, the base frozen), five full-batch AdamW steps over the adapters through
 * the engine on this MPI world give PEFT's losses within 1e-4 relative and step 0's gradient norm
 * PEFT's, at stages 0-3 (and with 2 micro-batches at stage 2), the global batch of 12 sequences
 * split over the ranks. Memory: every rank's model-state bytes equal the formula to the byte
 * (frozen base whole at stages 0-2, its shard at 3; gradients, masters and AdamW states of the
 * adapters only) and the planner's estimate for the same units; with the base stored in bf16
 * beside fp32 adapters (exact for the bf16 fixtures) the losses are the same and the base's
 * bytes halve. Runs on 1-4 ranks. */
#include <stdint.h>

#include "decoder/decoder_internal.h"
#include "lora_fixture.h"

static const char *const fixtures[] = {"gpt2", "llama_gqa4", "llama3_bias", "qwen3", "gemma2", "gemma3", "phi3", "phi3_longrope"};

/* The base fixture loaded frozen, the PEFT adapter on it. NULL on failure. */
static zero_engine *lora_engine(zero_comm *comm, const char *name, const lgolden *g, int stage, int B, int K,
                                zero_dtype frozen, dec_config *cfg_out, dec_lora *l_out) {
    zero_config c;
    zero_config_default(&c);
    c.stage = stage;
    c.micro_batch = B;
    c.grad_accum = K;
    c.frozen_dtype = frozen;
    lgolden_optim(g, &c);
    return lora_fixture_engine(comm, name, g->base, name, &c, cfg_out, l_out);
}

/* Model states against the formula and the planner, to the byte. */
static void check_memory(zero_engine *e, const dec_config *c, const dec_lora *l, int stage, int W, zero_dtype frozen) {
    const int nu = dec_num_units(c);
    uint64_t Pt = 0, Pf = 0, numel[64], fz[64];
    for (int u = 0; u < nu && u < 64; u++) {
        const uint64_t t = dec_lora_unit_numel(c, l, u), f = dec_unit_numel(c, u);
        Pt += zero_partition_padded(t, W, 16);
        Pf += zero_partition_padded(f, W, 16);
        numel[u] = t + f;
        fz[u] = f;
    }
    const uint64_t wf = zero_dtype_size(frozen == ZERO_DTYPE_COUNT ? ZERO_DTYPE_FP32 : frozen);
    const uint64_t St = Pt / (uint64_t)W, Sf = Pf / (uint64_t)W;
    zero_mem_stats m;
    zero_engine_mem_stats(e, &m);
    if (strcmp(zero_engine_device(e), "cpu")) return; /* on a device its side table holds them: test_engine_device */
    ZT_EQ_INT(m.current[ZERO_MEM_PARAMS], stage == 3 ? St * 4 + Sf * wf : Pt * 4 + Pf * wf);
    ZT_EQ_INT(m.current[ZERO_MEM_GRADS], (stage <= 1 ? Pt : St) * 4);
    ZT_EQ_INT(m.current[ZERO_MEM_MASTER], 0); /* fp32: the adapters' working copy is the master */
    ZT_EQ_INT(m.current[ZERO_MEM_OPTIM], 2 * (stage == 0 ? Pt : St) * 4);
    zero_plan_model pm = {nu, numel, NULL, NULL, fz};
    zero_plan_setup s;
    zero_plan_setup_from_config(&s, zero_engine_config(e), W);
    zero_plan_mem pmem;
    ZT_OK(zero_plan_estimate(&pm, &s, &pmem, NULL));
    for (int k = ZERO_MEM_PARAMS; k <= ZERO_MEM_OPTIM; k++) ZT_EQ_INT(pmem.bytes[k], m.current[k]);
}

static void train(zero_comm *world, const char *name, const lgolden *g, int stage, int K, zero_dtype frozen,
                  double *worst, size_t wtile) {
    const int W = zero_comm_size(world), rank = zero_comm_rank(world);
    if (ZT_FB % (W * K)) {
        if (rank == 0) printf("SKIP %s stage %d accumulation %d: 12 sequences do not split over %d x %d\n", name, stage, K,
                              W, K);
        return;
    }
    const int B = ZT_FB / (W * K);
    dec_config c;
    dec_lora l;
    zero_engine *e = lora_engine(world, name, g, stage, B, K, frozen, &c, &l);
    dec_model *m = NULL;
    zero_error err = {{0}};
    if (!e || dec_create(&m, &c, B, ZT_FT, 0, &err) || dec_set_lora(m, &l, &err)) {
        ZT_FAIL("%s: %s", name, err.msg);
        dec_free(m);
        zero_engine_free(e);
        return;
    }
    dec__set_head_wtile(m, wtile);
    const double denom = (double)dec_count_targets(g->targets, (size_t)ZT_FB * ZT_FT);
    double worst_here = 0;
    for (int s = 0; s <= 5; s++) {
        double mine = 0;
        for (int k = 0; k < K; k++) {
            const size_t first = (size_t)(rank * K + k) * B * ZT_FT;
            float lo = 0;
            if (dec_engine_micro_batch(m, e, g->tokens + first, g->targets + first, B, ZT_FT, denom, &lo) ||
                zero_engine_micro_batch_done(e)) {
                ZT_FAIL("%s stage %d step %d: %s / %s", name, stage, s, dec_last_error(m), zero_engine_last_error(e));
                goto out;
            }
            mine += lo / K;
        }
        float mine_f = (float)mine, sum = 0;
        ZT_OK(zero_comm_all_reduce(world, &mine_f, &sum, 1, ZERO_DTYPE_FP32, ZERO_OP_SUM));
        const double loss = (double)sum / W, rel = fabs(loss - g->adamw[s]) / g->adamw[s];
        ZT_CHECKF(rel <= 1e-4, "%s stage %d on %d ranks x %d (base %s): step %d loss %.9g vs PEFT %.9g (rel %.3g)", name,
                  stage, W, K, frozen == ZERO_DTYPE_BF16 ? "bf16" : "fp32", s, loss, g->adamw[s], rel);
        worst_here = fmax(worst_here, rel);
        if (s == 5) break;
        zero_step_stats st;
        if (zero_engine_step(e, &st)) {
            ZT_FAIL("%s stage %d step %d: %s", name, stage, s, zero_engine_last_error(e));
            goto out;
        }
        if (s == 0) {
            const double rn = fabs(st.grad_norm - g->grad_norm) / g->grad_norm;
            ZT_CHECKF(rn <= 1e-4, "%s stage %d: gradient norm %.9g vs PEFT %.9g (rel %.3g)", name, stage, st.grad_norm,
                      g->grad_norm, rn);
        }
    }
    check_memory(e, &c, &l, stage, W, frozen);
    if (rank == 0)
        printf("%-12s stage %d, %d rank%s x %d, base %s%s: 6 losses within %.1e of PEFT's (%.5f -> %.5f)\n", name, stage,
               W, W > 1 ? "s" : "", K, frozen == ZERO_DTYPE_BF16 ? "bf16" : "fp32",
               wtile ? ", the head widened 7 rows at a time" : "", worst_here, g->adamw[0], g->adamw[5]);
    *worst = fmax(*worst, worst_here);
out:
    dec_free(m);
    zero_engine_free(e);
}

int main(void) {
    zero_comm *world = NULL;
    if (zero_comm_init_mpi(&world, NULL) != ZERO_OK) {
        fprintf(stderr, "cannot create the communicator\n");
        return 1;
    }
    zt_rank = zero_comm_rank(world);
    double worst = 0;
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        lgolden g;
        if (lgolden_load(fixtures[i], &g)) continue;
        for (int stage = 0; stage <= 3; stage++) train(world, fixtures[i], &g, stage, 1, ZERO_DTYPE_COUNT, &worst, 0);
        train(world, fixtures[i], &g, 2, 2, ZERO_DTYPE_COUNT, &worst, 0);
        /* the bf16-stored bases lose nothing in a bf16 frozen copy; its embeddings and final unit
         * are read as kept under the fp32 products, the head widened a tile at a time (also 7
         * rows a tile: many tiles on the fixtures' small vocabularies) */
        if (strcmp(g.base, "llama_gqa4") && strcmp(g.base, "gemma2") && strcmp(g.base, "phi3")) { /* not fp32 */
            train(world, fixtures[i], &g, 3, 1, ZERO_DTYPE_BF16, &worst, 0);
            train(world, fixtures[i], &g, 1, 1, ZERO_DTYPE_BF16, &worst, 7);
        }
    }
    if (zt_rank == 0) printf("worst relative difference from PEFT's AdamW losses: %.2e\n", worst);
    zero_comm_free(world);
    return zt_finish("test_lora_train");
}
