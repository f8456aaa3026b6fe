/* examples/finetune.c — a program that fine-tunes a Hugging Face model directory through the
 * library, without the `zero` command: the model (config.json, its safetensors, tokenizer.json),
 * chat or text JSONL packed into rows, the ZeRO engine on any number of ranks, and the training
 * loop of models/trainer (trainer/trainer.h), whose hook prints each step.
 *
 *   build/examples/finetune MODEL_DIR DATA.jsonl [--steps N] [--seq T] [--micro-batch B] [--lr X]
 *                           [--stage S] [--seed N] [--lora R] [--objective lm|dpo|orpo] [--beta B]
 *                           [--config DS_CONFIG.json] [--save DIR]
 *   mpirun -np 2 build/examples/finetune ...      (as root add --allow-run-as-root)
 *
 * Defaults: 10 steps, T 128, micro-batch 4, lr 1e-4 (AdamW), stage 1, seed 1 (the data's order),
 * a full fine-tune (--lora R: LoRA adapters of rank R, the base frozen), the causal LM objective
 * (--objective dpo|orpo: preference pairs, --beta 0.1). A DeepSpeed config's
 * settings apply first, the flags after, as with `zero train --config`; `zero train --init-from
 * MODEL_DIR --data DATA.jsonl` with the same settings trains the same steps
 * (tests/cli/test_example_finetune.sh). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zero/zero.h>

#include "decoder/data.h"
#include "decoder/decoder.h"
#include "decoder/hf.h"
#include "decoder/lora.h"
#include "decoder/pref.h"
#include "trainer/trainer.h"

static int on_step(void *ctx, const trn_step_report *r) {
    const int *rank = ctx;
    if (*rank == 0) {
        printf("step %lld loss %.17g grad_norm %.17g lr %.9g", (long long)r->step, r->loss, r->st.grad_norm, r->st.lr);
        if (r->has_val) printf(" val_loss %.17g", r->val);
        printf(" (%.0f tokens/s)\n", (double)r->tokens / r->seconds);
        fflush(stdout);
    }
    return 0;
}

static void on_saved(void *ctx, int64_t step, const char *prune_error) {
    (void)prune_error;
    if (*(const int *)ctx == 0) printf("saved step %lld\n", (long long)step);
}

static int usage(void) {
    fprintf(stderr, "usage: finetune MODEL_DIR DATA.jsonl [--steps N] [--seq T] [--micro-batch B] [--lr X] [--stage S] "
                    "[--seed N] [--lora R] [--objective lm|dpo|orpo] [--beta B] [--config FILE] [--save DIR]\n");
    return 2;
}

/* A flag's value as a number in [lo, hi]: 0, or -1 with the message printed. */
static int number(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end;
    errno = 0;
    const double x = strtod(v, &end);
    if (errno || end == v || *end || !(x >= lo && x <= hi)) {
        fprintf(stderr, "finetune: error: %s '%s': expected a number in [%g, %g]\n", flag, v, lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 3) return usage();
    const char *dir = argv[1], *data_path = argv[2], *config = NULL, *save = NULL, *objective = "lm";
    double steps = 10, seq = 128, mb = 4, lr = 1e-4, stage = 1, seed = 1, lora_r = 0, beta = 0.1;
    for (int i = 3; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) return usage();
        int bad = 0;
        if (!strcmp(a, "--steps")) bad = number(a, v, 0, 1e9, &steps);
        else if (!strcmp(a, "--seq")) bad = number(a, v, 1, 1 << 20, &seq);
        else if (!strcmp(a, "--micro-batch")) bad = number(a, v, 1, 1 << 16, &mb);
        else if (!strcmp(a, "--lr")) bad = number(a, v, 0, 1e3, &lr);
        else if (!strcmp(a, "--stage")) bad = number(a, v, 0, 3, &stage);
        else if (!strcmp(a, "--seed")) bad = number(a, v, 0, 1e15, &seed);
        else if (!strcmp(a, "--lora")) bad = number(a, v, 1, 4096, &lora_r);
        else if (!strcmp(a, "--objective")) objective = v;
        else if (!strcmp(a, "--beta")) bad = number(a, v, 1e-9, 1e9, &beta);
        else if (!strcmp(a, "--config")) config = v;
        else if (!strcmp(a, "--save")) save = v;
        else return usage();
        if (bad) return 2;
        i++;
    }
    dec_objective obj;
    if (dec_objective_parse(objective, &obj) != ZERO_OK) {
        fprintf(stderr, "finetune: error: --objective '%s': expected lm, dpo or orpo\n", objective);
        return 2;
    }
    zero_error err = {{0}};
    zero_comm *comm = NULL;
    if (zero_comm_init_mpi_with(&comm, NULL, NULL, &err) != ZERO_OK &&
        zero_comm_init_self_with(&comm, &err) != ZERO_OK) {
        fprintf(stderr, "finetune: error: %s\n", err.msg);
        return 1;
    }
    const int rank = zero_comm_rank(comm);
    zero_config cfg;
    zero_config_default(&cfg);
    zero_engine *e = NULL;
    dec_hf *hf = NULL;
    zero_tokenizer *tok = NULL;
    dec_data *data = NULL;
    dec_model *model = NULL;
    trn_session *t = NULL;
    int rc = 1;
    /* the configuration: a DeepSpeed config, then the flags, resolved for the world */
    if (config && zero_config_load_json_file(&cfg, config, &err) != ZERO_OK) goto out;
    cfg.stage = (int)stage;
    cfg.micro_batch = (int64_t)mb;
    cfg.optim.lr = (float)lr;
    cfg.lora.r = (int)lora_r; /* LoRA: the base frozen, adapters of rank r on the config's targets */
    if (cfg.auto_fields & ZERO_AUTO_SCHED_TOTAL_NUM_STEPS) cfg.sched.total_num_steps = (int64_t)steps;
    if (zero_config_resolve(&cfg, zero_comm_size(comm), &err) != ZERO_OK) goto out;
    /* the model directory: its configuration, tokenizer and weights */
    if (dec_hf_open(&hf, dir, &err) != ZERO_OK || zero_tokenizer_load(&tok, dir, &err) != ZERO_OK) goto out;
    const dec_config *mc = dec_hf_config(hf);
    dec_lora lora;
    dec_lora_default(&lora);
    if (lora_r > 0) { /* the config's alpha, dropout, rsLoRA and targets (PEFT's q_proj,v_proj when none) */
        lora.r = cfg.lora.r, lora.alpha = cfg.lora.alpha, lora.dropout = cfg.lora.dropout,
        lora.rslora = cfg.lora.rslora;
        lora.seed = (uint64_t)seed;
        if (dec_lora_targets(mc, cfg.lora.targets, &lora.targets, &err) != ZERO_OK ||
            dec_lora_check(mc, &lora, &err) != ZERO_OK)
            goto out;
    }
    /* the data: JSONL examples (chat messages through the model's template) packed into rows of T + 1 */
    dec_data_opts d;
    dec_data_opts_default(&d);
    d.path = data_path, d.tok = tok, d.seq = (int)seq;
    d.pairs = obj != DEC_OBJ_LM; /* DPO and ORPO: {"prompt", "chosen", "rejected"} pairs, two rows each */
    if (dec_data_open(&data, &d, &err) != ZERO_OK || dec_data_check(data, (int)seq, mc->vocab, &err) != ZERO_OK)
        goto out;
    /* the engine: the model registered, sharded over the ranks, the weights loaded unit by unit */
    if (zero_engine_create_with(&e, comm, &cfg, NULL, &err) != ZERO_OK) goto out;
    if ((lora_r > 0 ? dec_lora_register(mc, &lora, e, &err) : dec_engine_register(mc, e, &err)) != ZERO_OK ||
        zero_engine_finalize(e) != ZERO_OK || dec_hf_load(hf, e, &err) != ZERO_OK ||
        (lora_r > 0 && dec_lora_init(mc, &lora, e, &err) != ZERO_OK)) {
        if (!err.msg[0]) snprintf(err.msg, sizeof err.msg, "%s", zero_engine_last_error(e));
        goto out;
    }
    /* the loop */
    trn_setup s;
    trn_setup_default(&s);
    s.comm = comm, s.engine = e, s.data = data, s.cfg = &cfg, s.T = (int)seq, s.steps = (int64_t)steps;
    s.seed = (uint64_t)seed;                                    /* the data's order */
    s.docs = dec_data_row(data) > 0 && dec_data_has_docs(data); /* each packed example attends to itself */
    s.save = save;
    s.lora = lora_r > 0;
    s.objective = obj, s.beta = beta; /* the objective: a row of the trainer's table */
    if (dec_create(&model, mc, trn_model_batch(&s), (int)seq, 0, &err) != ZERO_OK ||
        (lora_r > 0 && dec_set_lora(model, &lora, &err) != ZERO_OK))
        goto out;
    s.model = model;
    if (trn_create(&t, &s, &err) != ZERO_OK) goto out;
    const trn_hooks hooks = {(void *)&rank, on_step, on_saved};
    if (trn_run(t, &hooks) != ZERO_OK) {
        if (!trn_error_quiet(t)) fprintf(stderr, "finetune: error: %s\n", trn_last_error(t));
        err.msg[0] = 0;
        goto out;
    }
    rc = 0;
out:
    if (rc && err.msg[0]) fprintf(stderr, "finetune: error: %s\n", err.msg);
    trn_free(t);
    dec_free(model);
    zero_engine_free(e);
    dec_data_free(data);
    zero_tokenizer_free(tok);
    dec_hf_close(hf);
    zero_comm_free(comm);
    return rc;
}
