/* `zero train`: trains or fine-tunes the decoder with ZeRO on one or more ranks: flags over a
 * DeepSpeed-style JSON config over defaults, a progress line per step, --log-json records, and a
 * closing summary of the memory ZeRO saved and the traffic against the 2Ψ/3Ψ rule. */
#include "cli.h"
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero train [options]\n"
            "  --config FILE              DeepSpeed-style JSON (flags override it)\n"
            "  --stage 0-3                ZeRO stage (default 0, or the config's)\n"
            "  --ranks N                  launch N local ranks through mpiexec (under mpirun: the MPI world)\n"
            "  --model NAME|DIR           a preset (default small; tiny, gpt2..gpt2-xl, llama-3.2-1b, llama-3.2-3b,\n"
            "                             llama-3.1-8b, qwen2.5-0.5b, qwen2.5-7b, qwen3-8b, mistral-7b, smollm2-135m,\n"
            "                             smollm2-1.7b) or a model directory's config.json (random weights)\n"
            "  --oversubscribe            allow more than 8 ranks per CPU this process may use\n"
            "  --hostfile FILE            launch the ranks on the hosts of an OpenMPI hostfile ('NAME slots=N' lines)\n"
            "  --elastic MIN:MAX          restart a failed job from --save's latest checkpoint on the hosts that still\n"
            "                             answer (MIN to MAX of them; --max-restarts N, default 3; docs/CLI.md)\n"
            "  --layers N --dim C --heads H --vocab V   override the preset\n"
            "  --data FILE|DIR            text or JSONL ({\"text\"}, {\"prompt\",\"completion\"}, {\"messages\"}, ShareGPT,\n"
            "                             Alpaca; a *.json file may be one JSON array of them), tokenized\n"
            "                             with the model directory's tokenizer.json (without one: a byte per token),\n"
            "                             a token file (zero tokenize), or a directory of text files (default: the\n"
            "                             fortunes corpus)\n"
            "  --val-data FILE|DIR        validate on this data (any form --data takes, tokenized alike) instead\n"
            "                             of the last 5%% of --data, which then all trains\n"
            "  --chat-template NAME       the format of {\"messages\"}: model (the tokenizer's own chat template: the\n"
            "                             default when it has one), or a built-in chatml, llama3, mistral\n"
            "  --skip-bad-examples        skip and count bad JSONL lines instead of refusing the data at the first\n"
            "  --objective lm|dpo|orpo    lm (default): next-token loss; dpo, orpo: preference tuning on a JSONL of\n"
            "                             {\"prompt\", \"chosen\", \"rejected\"} (TRL's format; --micro-batch counts\n"
            "                             sequences, two a pair); --beta B (0.1: DPO's beta, ORPO's lambda),\n"
            "                             --label-smoothing E (DPO; 0)\n"
            "  --doc-mask on|off|auto     packed examples attend to themselves only, positions from 0 at each (default\n"
            "                             auto: on for JSONL packed into rows, off for a stream of text documents)\n"
            "  --steps N                  optimizer steps of the whole run (default 100; 0: initialize, report and\n"
            "                             --save the initial state, e.g. a model directory as a checkpoint)\n"
            "  --micro-batch B            sequences per rank per micro-batch (default 4)\n"
            "  --grad-accum K             micro-batches per step (default 1)\n"
            "  --seq T                    tokens per sequence (default: a packed token file's, else min(256, the\n"
            "                             model's context))\n"
            "  --lr X                     learning rate (default 1e-3, or the config's)\n"
            "  --seed S                   initialization and data seed (default 1)\n"
            "  --precision fp32|bf16|fp16 working precision (default fp32)\n"
            "  --optimizer-states fp32|int8  AdamW's moments in fp32 (default) or 8 bits (bitsandbytes' 8-bit\n"
            "                             Adam: 2 bytes a parameter instead of 8; docs/QUANT.md)\n"
            "  --quantize-base nf4|int8|none  with --lora: the frozen base's linear weights in NF4 (double-\n"
            "                             quantized scales) or int8, quantized while loading (QLoRA; docs/QUANT.md)\n"
            "  --quantize-embeddings      with --quantize-base: the token embeddings and the LM head in its format too\n"
            "  --quantized-weights        stage 3: all-gather the parameters as int8 (ZeRO++ qwZ,\n"
            "                             zero_optimization.zero_quantized_weights; docs/ENGINE.md)\n"
            "  --quantized-gradients      stages 2-3: reduce-scatter the gradients as int8 across nodes (ZeRO++\n"
            "                             qgZ, zero_optimization.zero_quantized_gradients; docs/ENGINE.md)\n"
            "  --activation-checkpointing keep block inputs only; recompute in backward\n"
            "  --deterministic            bitwise the same run for any --ranks, --stage and offload at the same\n"
            "                             global batch and seed (fixed-point gradient sums; docs/CLI.md)\n"
            "  --det-atom A               deterministic mode: sequences per atom (default 1; any A dividing\n"
            "                             --micro-batch; runs agree bitwise at the same A)\n"
            "  --val-every N              validation loss every N steps (default steps/5; 0: only at the end)\n"
            "  --val-batches N            validation batches each time (default 2)\n"
            "  --log-json FILE|-          one JSON object per step, then {\"done\": true, ...}\n"
            "  --tensorboard DIR          TensorBoard event files in DIR (loss, eval loss, lr, grad norm, tokens/s,\n"
            "                             memory); the config's tensorboard section writes to output_path/job_name\n"
            "  --print-every N            a progress line every N steps (default: the config's steps_per_print, else 1)\n"
            "  --offload-optimizer none|cpu|nvme:DIR, --offload-param none|cpu|nvme:DIR, --save DIR, --save-every N,\n"
            "  --save-total-limit N, --resume DIR, --trace FILE   (docs/CLI.md)\n"
            "  --device cpu|fake|cuda     the device every rank's engine keeps its states on (default: $ZERO_DEVICE,\n"
            "                             else cpu); fake: the test device of docs/DEVICE.md (the model computes on the host)\n"
            "  --device-memory SIZE       the device's memory per rank, e.g. 24GiB (default: $ZERO_DEVICE_MEMORY, else\n"
            "                             the backend's: fake 24 GiB); a run whose plan needs more is refused first\n"
            "  --init-from DIR|CKPT|FILE  start from the weights of a Hugging Face model directory (config.json +\n"
            "                             safetensors), a checkpoint or a safetensors file (with LoRA: the base's directory)\n"
            "  --lora r=R,alpha=A,targets=q_proj,v_proj[,dropout=P][,rslora]   train LoRA adapters, the base frozen\n"
            "                             (as zero_extensions.lora; targets q_proj k_proj v_proj o_proj gate_proj up_proj\n"
            "                             down_proj, GPT-2 c_attn c_proj c_fc)\n"
            "  --lora-from ADAPTER_DIR    start from a PEFT adapter (its adapter_config.json gives r, alpha, targets)\n"
            "  --save-frozen              checkpoints also hold the frozen base (default: the trainable part only)\n");
}

/* --elastic MIN:MAX (or N: N:N), hosts. */
static int parse_elastic(const char *v, int *mn, int *mx) {
    char *end;
    errno = 0;
    const long a = strtol(v, &end, 10);
    long b = a;
    int ok = end != v && !errno;
    if (ok && *end == ':') {
        const char *s = end + 1;
        b = strtol(s, &end, 10);
        ok = end != s && !errno;
    }
    if (!ok || *end || a < 1 || b < a || b > 4096) {
        cli_error(CLI_USAGE, "--elastic '%s': expected MIN:MAX hosts, whole numbers with 1 <= MIN <= MAX (or one N: N:N)",
                  v);
        return -1;
    }
    *mn = (int)a;
    *mx = (int)b;
    return 0;
}

/* Parses argv into o and cfg (flags applied over the JSON config). Returns -1 on a usage error
 * (already printed), 1 for --help. */
static int parse(int argc, char **argv, train_opts *o) {
    memset(o, 0, sizeof *o);
    o->model = "small";
    o->steps = 100;
    o->seed = 1;
    o->val_every = -1;
    o->val_batches = 2;
    o->beta = 0.1;
    o->layers = o->dim = o->heads = o->vocab = o->seq = -1;
    o->stage = o->micro_batch = o->grad_accum = -1;
    o->lr = -1;
    o->max_restarts = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        int ux;
#define VAL() \
    if (!(v = cli_flag_value(argc, argv, &i))) return -1
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) return 1;
        else if (!strcmp(a, "--config")) { VAL(); o->config = v; }
        else if (!strcmp(a, "--stage")) { VAL(); if (cli_parse_int(a, v, 0, 3, &o->stage)) return -1; }
        else if (!strcmp(a, "--ranks")) { VAL(); if (cli_parse_int(a, v, 1, 4096, &o->ranks)) return -1; }
        else if (!strcmp(a, "--oversubscribe")) {} /* read by cli_launch_ranks */
        else if (!strcmp(a, "--hostfile")) { VAL(); o->hostfile = v; }
        else if (!strcmp(a, "--elastic")) { VAL(); o->elastic = v; if (parse_elastic(v, &o->elastic_min, &o->elastic_max)) return -1; }
        else if (!strcmp(a, "--max-restarts")) { VAL(); if (cli_parse_int(a, v, 0, 1000, &o->max_restarts)) return -1; }
        else if (!strcmp(a, "--model")) { VAL(); o->model = v; o->model_given = 1; }
        else if (!strcmp(a, "--layers")) { VAL(); if (cli_parse_int(a, v, 1, 1000, &o->layers)) return -1; }
        else if (!strcmp(a, "--dim")) { VAL(); if (cli_parse_int(a, v, 1, 1 << 16, &o->dim)) return -1; }
        else if (!strcmp(a, "--heads")) { VAL(); if (cli_parse_int(a, v, 1, 1024, &o->heads)) return -1; }
        else if (!strcmp(a, "--vocab")) { VAL(); if (cli_parse_int(a, v, 1, 1 << 20, &o->vocab)) return -1; }
        else if (!strcmp(a, "--seq")) { VAL(); if (cli_parse_int(a, v, 1, 1 << 20, &o->seq)) return -1; }
        else if (!strcmp(a, "--data")) { VAL(); o->data = v; }
        else if (!strcmp(a, "--val-data")) { VAL(); o->val_data = v; }
        else if (!strcmp(a, "--chat-template")) { VAL(); o->chat_template = v; }
        else if (!strcmp(a, "--skip-bad-examples")) o->skip_bad = 1;
        else if (!strcmp(a, "--steps")) { VAL(); if (cli_parse_i64(a, v, 0, INT64_MAX / 2, &o->steps)) return -1; }
        else if (!strcmp(a, "--micro-batch")) { VAL(); if (cli_parse_int(a, v, 1, 1 << 20, &o->micro_batch)) return -1; }
        else if (!strcmp(a, "--grad-accum")) { VAL(); if (cli_parse_int(a, v, 1, 1 << 20, &o->grad_accum)) return -1; }
        else if (!strcmp(a, "--lr")) { VAL(); if (cli_parse_double(a, v, 0, ZERO_LR_MAX, &o->lr)) return -1; }
        else if (!strcmp(a, "--seed")) { VAL(); int64_t s; if (cli_parse_i64(a, v, 0, INT64_MAX, &s)) return -1; o->seed = (uint64_t)s; o->seed_given = 1; }
        else if (!strcmp(a, "--precision")) { VAL(); o->precision = v; }
        else if (!strcmp(a, "--activation-checkpointing")) o->checkpointing = 1;
        else if (!strcmp(a, "--deterministic")) o->deterministic = 1;
        else if (!strcmp(a, "--optimizer-states")) { VAL(); o->optim_states = v; }
        else if (!strcmp(a, "--quantize-base")) { VAL(); o->quantize_base = v; }
        else if (!strcmp(a, "--quantize-embeddings")) o->quantize_embeddings = 1;
        else if (!strcmp(a, "--quantized-weights")) o->quantized_weights = 1;
        else if (!strcmp(a, "--quantized-gradients")) o->quantized_grads = 1;
        else if (!strcmp(a, "--doc-mask")) { VAL(); o->doc_mask = v; }
        else if (!strcmp(a, "--objective")) { VAL(); o->objective = v; }
        else if (!strcmp(a, "--beta")) { VAL(); if (cli_parse_double(a, v, 1e-9, 1e9, &o->beta)) return -1; o->beta_given = 1; }
        else if (!strcmp(a, "--label-smoothing")) { VAL(); if (cli_parse_double(a, v, 0.0, 0.4999999, &o->label_smoothing)) return -1; }
        else if (!strcmp(a, "--det-atom")) { VAL(); if (cli_parse_int(a, v, 1, 1 << 20, &o->det_atom)) return -1; }
        else if (!strcmp(a, "--val-every")) { VAL(); int64_t x; if (cli_parse_i64(a, v, 0, INT64_MAX / 2, &x)) return -1; o->val_every = x; }
        else if (!strcmp(a, "--val-batches")) { VAL(); if (cli_parse_int(a, v, 1, 1 << 20, &o->val_batches)) return -1; }
        else if (!strcmp(a, "--log-json")) { VAL(); o->log_json = v; }
        else if (!strcmp(a, "--tensorboard")) { VAL(); o->tensorboard = v; }
        else if (!strcmp(a, "--offload-optimizer")) { VAL(); o->offload_optimizer = v; }
        else if (!strcmp(a, "--offload-param")) { VAL(); o->offload_param = v; }
        else if (!strcmp(a, "--save")) { VAL(); o->save = v; }
        else if (!strcmp(a, "--save-every")) { VAL(); if (cli_parse_i64(a, v, 1, INT64_MAX / 2, &o->save_every)) return -1; }
        else if (!strcmp(a, "--save-total-limit")) { VAL(); if (cli_parse_int(a, v, 1, 1 << 30, &o->save_total_limit)) return -1; }
        else if (!strcmp(a, "--resume")) { VAL(); o->resume = v; }
        else if (!strcmp(a, "--init-from")) { VAL(); o->init_from = v; }
        else if (!strcmp(a, "--trace")) { VAL(); o->trace = v; }
        else if (!strcmp(a, "--lora")) { VAL(); o->lora_spec = v; }
        else if (!strcmp(a, "--lora-from")) { VAL(); o->lora_from = v; }
        else if (!strcmp(a, "--save-frozen")) o->save_frozen = 1;
        else if (!strcmp(a, "--device")) { VAL(); o->device = v; }
        else if (!strcmp(a, "--device-memory")) { VAL(); o->device_memory = v; }
        else if ((ux = ux_flag(o, argc, argv, &i)) != 0) { if (ux < 0) return -1; }
        else {
            cli_error(CLI_USAGE, "train: unknown option '%s' (zero train --help lists them)", a);
            return -1;
        }
#undef VAL
    }
    return 0;
}

/* The launcher's flags: where they may be given, what they need; the hostfile's hosts (*hosts,
 * malloc'd, and *nhosts; NULL and 0 without one) and the world of the first start (their slots
 * over at most MAX hosts). */
static int launch_checks(train_opts *o, int launched, int *world, cli_host **hosts, int *nhosts) {
    /* a rank of an elastic restart: the launcher's note "K WORLD_BEFORE" (cli/launch_elastic.c) */
    const char *er = launched ? getenv("ZERO_ELASTIC_RESTART") : NULL;
    if (er && (sscanf(er, "%d %d", &o->elastic_restart, &o->elastic_world) != 2 || o->elastic_restart < 1 ||
               o->elastic_world < 1))
        return cli_error(CLI_USAGE, "ZERO_ELASTIC_RESTART='%s': expected 'RESTART WORLD_BEFORE', set by zero's "
                         "launcher (--elastic)", er);
    if (launched && (o->hostfile || o->elastic))
        return cli_error(CLI_USAGE, "%s: zero's own launcher starts and restarts the ranks: run zero train %s without "
                         "mpirun/srun", o->elastic ? "--elastic" : "--hostfile", o->elastic ? "--elastic" : "--hostfile");
    if (o->max_restarts >= 0 && !o->elastic)
        return cli_error(CLI_USAGE, "--max-restarts %d: expected --elastic MIN:MAX too", o->max_restarts);
    if (o->hostfile && o->ranks > 0)
        return cli_error(CLI_USAGE, "--ranks %d and --hostfile %s: the hostfile's slots give the ranks: expected one of them",
                         o->ranks, o->hostfile);
    if (o->elastic && !o->save)
        return cli_error(CLI_USAGE, "--elastic %s: expected --save DIR too (a restart continues from the latest checkpoint "
                         "there)", o->elastic);
    if (o->hostfile) {
        const int n = cli_hostfile_read("--hostfile", o->hostfile, hosts);
        if (n < 0) return CLI_USAGE;
        *nhosts = n;
        const int take = o->elastic && o->elastic_max < n ? o->elastic_max : n;
        *world = 0;
        for (int i = 0; i < take; i++) *world += (*hosts)[i].slots;
    }
    const int have = o->hostfile ? *nhosts : 1;
    if (o->elastic && o->elastic_min > have)
        return cli_error(CLI_USAGE, "--elastic %s: MIN %d is more hosts than the job has (%d%s%s)", o->elastic,
                         o->elastic_min, have, o->hostfile ? " in --hostfile " : ": this machine, without --hostfile",
                         o->hostfile ? o->hostfile : "");
    return CLI_OK;
}

int cli_train(int argc, char **argv) {
    train_opts o;
    int p = parse(argc, argv, &o);
    if (p == 1) {
        usage(stdout);
        return CLI_OK;
    }
    if (p < 0) return CLI_USAGE;
    /* Outside an MPI launcher, --ranks N > 1 re-runs this command under mpiexec, after the
     * checks that do not need MPI so that usage errors exit 2 from here. */
    const int launched = zero_comm_mpi_launched();
    int world = o.ranks > 0 ? o.ranks : 1, nhosts = 0;
    cli_host *hosts = NULL;
    int rc = launch_checks(&o, launched, &world, &hosts, &nhosts);
    if (rc != CLI_OK) {
        free(hosts);
        return rc;
    }
    cli_quiet_warnings = 1; /* the run repeats these checks and warns then, once */
    rc = train_prepare(&o, launched ? 0 : world);
    cli_quiet_warnings = 0;
    if (rc == CLI_OK && !launched && (o.hostfile || o.elastic)) {
        train_data_digest_pass_on(&o); /* read once here: the ranks take it, not read it again */
        const cli_elastic_opts eo = {.hostfile = o.hostfile, .hosts = hosts, .nhosts = nhosts, .ranks = world,
                                     .elastic = o.elastic != NULL,
                                     .min_hosts = o.elastic_min, .max_hosts = o.elastic ? o.elastic_max : 4096,
                                     .max_restarts = o.max_restarts >= 0 ? o.max_restarts : 3, .save = o.save};
        rc = cli_launch_elastic(&eo);
    } else if (rc == CLI_OK && !launched && o.ranks > 1) {
        train_data_digest_pass_on(&o);   /* read once here: the ranks take it, not read it again */
        rc = cli_launch_ranks(o.ranks); /* returns on failure only */
    }
    else if (rc == CLI_OK) {
        free(hosts);
        return train_run(&o, launched); /* releases what it used */
    }
    free(hosts);
    train_release(&o);
    return rc;
}
