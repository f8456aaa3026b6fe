/* `zero estimate`: per-rank bytes of stages 0-3 x offload none/cpu/nvme for a model (a preset, a
 * Hugging Face model directory or a shape), and the model flags and description that `zero plan`
 * shares (declared in cli/cli.h). */
#include "cli.h"

#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "decoder/pref.h"
#include "train.h"
#include "weights.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---------------------------------------------------------------- shared with `zero plan` */

void cli_sizing_opts_default(cli_sizing_opts *o) {
    memset(o, 0, sizeof *o);
    o->nodes = 1;
    o->precision = ZERO_DTYPE_FP32;
    o->optimizer = ZERO_OPTIM_ADAMW;
    o->frozen_dtype = ZERO_DTYPE_COUNT;
    o->host_mem = -1;
}

int cli_sizing_resolve(cli_sizing_opts *o) {
    if (o->gpus && o->ranks && o->gpus != o->ranks)
        return cli_error(CLI_USAGE, "--gpus %d and --ranks %d: expected one of them, or the same number (each GPU is a rank)",
                         o->gpus, o->ranks);
    if (o->gpus && !(o->device_mem > 0))
        return cli_error(CLI_USAGE, "--gpus %d: expected --gpu-memory too (each GPU's memory, e.g. 24GiB)", o->gpus);
    if (o->gpus) o->ranks = o->gpus;
    return CLI_OK;
}

int cli_sizing_flag(cli_sizing_opts *o, int argc, char **argv, int *i) {
    const char *a = argv[*i];
    const char *v;
    struct { const char *flag; int *dst; int lo, hi; } ints[] = {
        {"--layers", &o->layers, 1, 4096},  {"--dim", &o->dim, 1, 1 << 16},
        {"--heads", &o->heads, 1, 1 << 12}, {"--seq", &o->seq, 1, 1 << 20},
        {"--vocab", &o->vocab, 1, 1 << 24}, {"--ranks", &o->ranks, 1, 1 << 20},
        {"--nodes", &o->nodes, 1, 1 << 20}, {"--gpus", &o->gpus, 1, 1 << 20},
    };
    for (size_t k = 0; k < sizeof ints / sizeof ints[0]; k++) {
        if (strcmp(a, ints[k].flag)) continue;
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        return cli_parse_int(a, v, ints[k].lo, ints[k].hi, ints[k].dst) ? -1 : 1;
    }
    if (!strcmp(a, "--model")) {
        if (!(o->model = cli_flag_value(argc, argv, i))) return -1;
        return 1;
    }
    if (!strcmp(a, "--objective")) { /* zero train --objective: the passes of a step */
        dec_objective ob;
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        if (dec_objective_parse(v, &ob) != ZERO_OK) {
            cli_error(CLI_USAGE, "--objective '%s': expected lm, dpo or orpo", v);
            return -1;
        }
        o->objective = (int)ob;
        return 1;
    }
    if (!strcmp(a, "--params")) {
        if (!(v = cli_flag_value(argc, argv, i)) || cli_parse_size(a, v, &o->params)) return -1;
        if (o->params < 1 || o->params > 1e15) {
            cli_error(CLI_USAGE, "--params '%s': expected a parameter count in [1, 1e15]", v);
            return -1;
        }
        return 1;
    }
    if (!strcmp(a, "--precision")) {
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        if (zero_dtype_parse(v, &o->precision) != ZERO_OK ||
            (o->precision != ZERO_DTYPE_FP32 && o->precision != ZERO_DTYPE_BF16 &&
             o->precision != ZERO_DTYPE_FP16)) {
            cli_error(CLI_USAGE, "--precision '%s': expected fp32, bf16 or fp16", v);
            return -1;
        }
        return 1;
    }
    if (!strcmp(a, "--optimizer")) {
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        if (zero_optim_parse(v, &o->optimizer) != ZERO_OK) {
            cli_error(CLI_USAGE, "--optimizer '%s': expected adamw, adam, sgd or lion", v);
            return -1;
        }
        return 1;
    }
    if (!strcmp(a, "--micro-batch")) {
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        return cli_parse_i64(a, v, 1, 65536, &o->micro_batch) ? -1 : 1;
    }
    if (!strcmp(a, "--lora")) {
        if (!(o->lora = cli_flag_value(argc, argv, i))) return -1;
        return 1;
    }
    if (!strcmp(a, "--frozen-dtype")) {
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        if (zero_dtype_parse(v, &o->frozen_dtype) != ZERO_OK ||
            (o->frozen_dtype != ZERO_DTYPE_FP32 && o->frozen_dtype != ZERO_DTYPE_BF16 &&
             o->frozen_dtype != ZERO_DTYPE_FP16)) {
            cli_error(CLI_USAGE, "--frozen-dtype '%s': expected fp32, bf16 or fp16", v);
            return -1;
        }
        return 1;
    }
    /* --device-mem: the older name of --gpu-memory */
    if (!strcmp(a, "--gpu-memory") || !strcmp(a, "--device-mem") || !strcmp(a, "--host-mem")) {
        double *dst = !strcmp(a, "--host-mem") ? &o->host_mem : &o->device_mem;
        if (!(v = cli_flag_value(argc, argv, i)) || cli_parse_size(a, v, dst)) return -1;
        return 1;
    }
    if (!strcmp(a, "--json")) {
        o->json = 1;
        return 1;
    }
    if (!strcmp(a, "--deterministic")) {
        o->deterministic = 1;
        return 1;
    }
    if (!strcmp(a, "--optimizer-states")) {
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        if (strcmp(v, "fp32") && strcmp(v, "int8")) {
            cli_error(CLI_USAGE, "--optimizer-states '%s': expected fp32 or int8", v);
            return -1;
        }
        o->optim_states = strcmp(v, "int8") ? ZERO_OPTIM_STATES_FP32 : ZERO_OPTIM_STATES_INT8;
        return 1;
    }
    if (!strcmp(a, "--quantize-embeddings")) {
        o->quant_embed = 1;
        return 1;
    }
    if (!strcmp(a, "--quantize-base")) {
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        if (strcmp(v, "nf4") && strcmp(v, "int8") && strcmp(v, "none")) {
            cli_error(CLI_USAGE, "--quantize-base '%s': expected nf4, int8 or none", v);
            return -1;
        }
        o->quant_base = !strcmp(v, "nf4") ? ZERO_QFMT_NF4_DQ : !strcmp(v, "int8") ? ZERO_QFMT_INT8 : ZERO_QFMT_NONE;
        return 1;
    }
    if (a[0] != '-' && a[0]) { /* zero estimate DIR */
        if (o->model) {
            cli_error(CLI_USAGE, "'%s': a second model (already '%s'): expected one preset or directory", a, o->model);
            return -1;
        }
        o->model = a;
        return 1;
    }
    return 0;
}

static uint64_t sizing_activation(void *ctx, int64_t micro_batch, int checkpointing) {
    /* ORPO's passes hold its chosen sequences twice: 3 sequences per pair */
    const cli_sizing_model *m = ctx;
    return dec_activation_bytes(m->cfg, (int)(m->orpo ? micro_batch / 2 * 3 : micro_batch), m->seq, checkpointing);
}

/* The default number of equal units of a --params model without --layers (docs/PLANNING.md). */
#define PARAMS_DEFAULT_UNITS 32

/* --lora: every unit's base frozen and its adapters added (PEFT's r (in + out) per target and
 * layer), as `zero train --lora` registers them. */
static int lora_units(const cli_sizing_opts *o, const dec_config *cfg, int have_shape, cli_sizing_model *out) {
    if (!o->lora)
        return cli_error(CLI_USAGE, "%s: expected --lora too (the frozen parameters are LoRA's base)",
                         o->quant_base != ZERO_QFMT_NONE ? "--quantize-base" : "--frozen-dtype");
    if (o->quant_embed && o->quant_base == ZERO_QFMT_NONE)
        return cli_error(CLI_USAGE, "--quantize-embeddings: expected --quantize-base nf4 or int8 too (the embeddings "
                         "take the base's format)");
    if (o->quant_base != ZERO_QFMT_NONE && !dec_is_llama(cfg))
        return cli_error(CLI_USAGE, "--quantize-base: a quantized base of GPT-2 (Conv1D weights) is not supported yet");
    if (!have_shape || o->params > 0)
        return cli_error(CLI_USAGE, "--lora: expected a model with a shape (a preset, a model directory, or --layers "
                         "and --dim), not --params");
    zero_lora_config lc;
    memset(&lc, 0, sizeof lc);
    lc.alpha = 8; /* PEFT's default */
    if (train_lora_parse(o->lora, &lc)) return CLI_USAGE;
    dec_lora l;
    zero_error err = {{0}};
    dec_lora_default(&l);
    l.r = lc.r, l.alpha = lc.alpha, l.dropout = lc.dropout, l.rslora = lc.rslora;
    if (dec_lora_targets(cfg, lc.targets, &l.targets, &err) != ZERO_OK || dec_lora_check(cfg, &l, &err) != ZERO_OK)
        return cli_error(CLI_USAGE, "--lora: %s", err.msg);
    out->unit_frozen = malloc((size_t)out->num_units * sizeof *out->unit_frozen);
    if (!out->unit_frozen) return cli_error(CLI_RUNTIME, "out of memory");
    out->trainable = 0;
    out->frozen_params = 0;
    /* the frozen part as the engine lays it out: elements of the frozen dtype, a quantized weight
     * as its record (zero train --quantize-base: dec_lora_quantizes, zero_quant_place) */
    const size_t slot = zero_dtype_size(o->frozen_dtype == ZERO_DTYPE_COUNT ? o->precision : o->frozen_dtype);
    for (int u = 0; u < out->num_units; u++) {
        const uint64_t a = dec_lora_unit_numel(cfg, &l, u);
        out->frozen_params += out->unit_numel[u];
        uint64_t f = out->unit_numel[u];
        if (o->quant_base != ZERO_QFMT_NONE) {
            dec_param_desc d;
            uint64_t start;
            f = 0;
            for (int i = 0; i < dec_num_tensors(cfg) && !dec_tensor_desc(cfg, i, &d); i++)
                if (d.unit == u)
                    f = zero_quant_place(dec_lora_quantizes(cfg, &d, o->quant_embed) ? (zero_qformat)o->quant_base : ZERO_QFMT_NONE, d.numel,
                                         slot, f, &start);
        }
        out->unit_frozen[u] = f;
        out->unit_numel[u] = f + a;
        out->trainable += a;
    }
    out->params += out->trainable;
    out->lora_r = l.r, out->lora_alpha = l.alpha, out->lora_rslora = l.rslora;
    dec_lora_targets_string(cfg, l.targets, out->lora_targets, sizeof out->lora_targets);
    return CLI_OK;
}

int cli_sizing_model_build(const cli_sizing_opts *o, cli_sizing_model *out) {
    memset(out, 0, sizeof *out);
    if (o->ranks < 1) return cli_error(CLI_USAGE, "--ranks: expected the number of ranks (>= 1)");
    if (o->ranks % o->nodes)
        return cli_error(CLI_USAGE, "--ranks %d on --nodes %d: expected a multiple of the nodes",
                         o->ranks, o->nodes);
    if (o->model && o->params > 0)
        return cli_error(CLI_USAGE, "--model %s and --params: expected one of them, not both", o->model);
    if (!o->model && !(o->params > 0) && !(o->layers && o->dim))
        return cli_error(CLI_USAGE, "expected --model NAME, a model directory, --params N, or a shape (--layers and --dim)");

    dec_config cfg;
    dec_config_gpt2(&cfg, 0, 0, 0, 1024, 50257);
    zero_error err = {{0}};
    int have_shape = 1;
    if (o->model) {
        cli_model src;
        int rc = cli_model_from_name(o->model, "--model", &src);
        if (rc != CLI_OK) return rc;
        if (src.kind == CLI_MODEL_HF) {
            rc = cli_model_check_flags(&src, NULL, o->layers, o->dim, o->heads, o->vocab);
            out->from_dir = 1;
            char p[4200], q[4200];
            snprintf(p, sizeof p, "%s/model.safetensors", o->model);
            snprintf(q, sizeof q, "%s/model.safetensors.index.json", o->model);
            out->has_weights = !access(p, R_OK) || !access(q, R_OK);
        }
        cfg = src.cfg;
        cli_model_free(&src);
        if (rc != CLI_OK) return rc;
        snprintf(out->name, sizeof out->name, "%s", o->model);
    } else {
        snprintf(out->name, sizeof out->name, "%s", o->params > 0 ? "params" : "custom");
        /* A bare parameter count has no shape: units only, activations unknown. */
        have_shape = o->layers && o->dim;
        const char *idle = o->dim ? "dim" : o->heads ? "heads" : o->vocab ? "vocab" : o->seq ? "seq" : NULL;
        if (o->params > 0 && !have_shape && idle)
            return cli_error(CLI_USAGE, "--params with --%s but not --layers and --dim: a shape needs both (it gives "
                             "the activations), and without one --%s would change nothing", idle, idle);
    }
    if (!out->from_dir) {
        if (o->layers) cfg.n_layer = o->layers;
        if (o->vocab) cfg.vocab = o->vocab;
        if (o->dim || o->heads || (!o->model && have_shape)) {
            if (o->dim) cfg.n_embd = o->dim;
            if (o->heads) cfg.n_head = o->heads;
            else if (!o->model) cfg.n_head = cfg.n_embd % 64 ? 1 : cfg.n_embd / 64;
            if (have_shape && cfg.n_embd % cfg.n_head)
                return cli_error(CLI_USAGE, "model shape: n_embd %d: expected a multiple of n_head %d", cfg.n_embd, cfg.n_head);
            if (cfg.n_head) cfg.head_dim = cfg.n_embd / cfg.n_head;
            if (cfg.arch == DEC_ARCH_GPT2) cfg.n_kv_head = cfg.n_head, cfg.n_inner = 4 * cfg.n_embd;
            else if (cfg.n_kv_head < 1 || cfg.n_head % cfg.n_kv_head) cfg.n_kv_head = cfg.n_head;
        }
    }
    /* the sequence of the activation figure: --seq, else the context up to 4096 tokens */
    int seq = o->seq ? o->seq : (cfg.n_ctx < 4096 ? cfg.n_ctx : 4096);
    if (seq > cfg.n_ctx) cfg.n_ctx = seq; /* a longer sequence needs more position rows */
    if (have_shape && dec_config_check(&cfg, &err) != ZERO_OK)
        return cli_error(CLI_USAGE, "model shape: %s", err.msg);

    if (o->params > 0 && have_shape) {
        /* --params with a shape: the shape's units (their activations, its pieces), the count
         * given shared among them as the shape shares its own */
        const uint64_t total = (uint64_t)llround(o->params), own = dec_num_params(&cfg);
        const int n = dec_num_units(&cfg);
        out->unit_numel = malloc((size_t)n * sizeof *out->unit_numel);
        if (!out->unit_numel) return cli_error(CLI_RUNTIME, "out of memory");
        uint64_t given = 0;
        for (int u = 0; u < n; u++) {
            out->unit_numel[u] = (uint64_t)((double)total * (double)dec_unit_numel(&cfg, u) / (double)own);
            if (!out->unit_numel[u]) out->unit_numel[u] = 1;
            given += out->unit_numel[u];
        }
        if (given < total) out->unit_numel[n - 1] += total - given; /* the rounding, to the head */
        else if (given > total && out->unit_numel[n - 1] > given - total) out->unit_numel[n - 1] -= given - total;
        out->num_units = n;
        out->params = 0;
        for (int u = 0; u < n; u++) out->params += out->unit_numel[u];
    } else if (o->params > 0) {
        const uint64_t total = (uint64_t)llround(o->params);
        int n = o->layers ? o->layers : PARAMS_DEFAULT_UNITS;
        if ((uint64_t)n > total) n = (int)total;
        out->unit_numel = malloc((size_t)n * sizeof *out->unit_numel);
        if (!out->unit_numel) return cli_error(CLI_RUNTIME, "out of memory");
        for (int u = 0; u < n; u++) out->unit_numel[u] = total / (uint64_t)n + ((uint64_t)u < total % (uint64_t)n);
        out->num_units = n;
        out->params = total;
    } else {
        const int n = dec_num_units(&cfg);
        out->unit_numel = malloc((size_t)n * sizeof *out->unit_numel);
        if (!out->unit_numel) return cli_error(CLI_RUNTIME, "out of memory");
        for (int u = 0; u < n; u++) out->unit_numel[u] = dec_unit_numel(&cfg, u);
        out->num_units = n;
        out->params = dec_num_params(&cfg);
    }
    if (o->lora || o->frozen_dtype != ZERO_DTYPE_COUNT || o->quant_base != ZERO_QFMT_NONE) {
        int rc = lora_units(o, &cfg, have_shape, out);
        if (rc != CLI_OK) {
            cli_sizing_model_free(out);
            return rc;
        }
    }
    if (have_shape) {
        out->cfg = malloc(sizeof *out->cfg);
        if (!out->cfg) return cli_error(CLI_RUNTIME, "out of memory");
        *out->cfg = cfg;
        out->bwd = malloc((size_t)(cfg.n_layer + 2) * sizeof *out->bwd);
        if (!out->bwd) return cli_error(CLI_RUNTIME, "out of memory");
        out->layers = cfg.n_layer;
        out->dim = cfg.n_embd;
        out->heads = cfg.n_head;
        out->n_ctx = cfg.n_ctx;
        out->vocab = cfg.vocab;
        out->seq = seq;
    }
    out->plan.num_units = out->num_units;
    out->plan.unit_numel = out->unit_numel;
    out->plan.unit_frozen = out->unit_frozen;
    out->orpo = o->objective == DEC_OBJ_ORPO;
    out->plan.activation = have_shape ? sizing_activation : NULL;
    out->plan.activation_ctx = out;
    return CLI_OK;
}

void cli_sizing_model_free(cli_sizing_model *m) {
    if (!m) return;
    free(m->unit_numel);
    free(m->unit_frozen);
    free(m->cfg);
    free(m->bwd);
    m->bwd = NULL;
    m->unit_numel = NULL;
    m->unit_frozen = NULL;
    m->cfg = NULL;
}

const char *cli_fmt_bytes(double b, char *buf, size_t cap) {
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (fabs(b) >= 1024 && u < 5) b /= 1024, u++;
    if (u == 0) snprintf(buf, cap, "%.0f B", b);
    else snprintf(buf, cap, "%.2f %s", b, units[u]);
    return buf;
}

/* ---------------------------------------------------------------- zero estimate */

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero estimate (--model NAME|DIR | DIR | --params N | --layers L --dim C) --ranks R [options]\n"
            "\n"
            "Per-rank bytes of the model states for ZeRO stages 0-3 x offload none/cpu/nvme, split\n"
            "into device memory, host memory and NVMe; the transient buffers; the activations of a\n"
            "micro-batch with and without activation checkpointing; the traffic of a step; the\n"
            "predicted step time without and with checkpointing (docs/PLANNING.md §9).\n"
            "On a CPU-only run \"device\" is the rank's RAM. Sizes accept units (7e9, 1.5B, 350M).\n"
            "\n"
            "  --model NAME|DIR     a preset (tiny, small, gpt2, gpt2-medium, gpt2-large, gpt2-xl,\n"
            "                       llama-3.2-1b, llama-3.2-3b, llama-3.1-8b, qwen2.5-0.5b, qwen2.5-7b,\n"
            "                       qwen3-8b, mistral-7b, smollm2-135m, smollm2-1.7b) or a Hugging Face\n"
            "                       model directory (its config.json; also as a plain argument)\n"
            "  --params N           a model of N parameters in --layers (32) equal units; with --layers\n"
            "                       and --dim, that shape's units and activations, N shared as it shares\n"
            "  --layers L --dim C --heads H --vocab V   the shape (overrides a preset's; a directory's\n"
            "                       must agree with its config.json)\n"
            "  --seq T              tokens per sequence for the activation figure (the context, at most 4096)\n"
            "  --ranks R            data-parallel ranks (required)\n"
            "  --nodes M            machines the ranks are spread over (1)\n"
            "  --precision P        fp32 (default), bf16, fp16: the working dtype\n"
            "  --optimizer O        adamw (default), adam, sgd (momentum 0.9), lion\n"
            "  --micro-batch B      sequences per micro-batch for the activation figure and the step time (1)\n"
            "  --objective lm|dpo|orpo  zero train's: dpo and orpo add a forward pass to each micro-batch (its\n"
            "                       time and stage 3's gathers), orpo computes 3 sequences a pair (its activations)\n"
            "  --gpus N             the ranks are N GPUs (as --ranks N); needs --gpu-memory\n"
            "  --gpu-memory X       each GPU's memory (also --device-mem X): every row then says whether it\n"
            "                       fits (device + transient + activations, 10%% kept free, as zero plan)\n"
            "  --host-mem Y         host RAM per node, with --gpu-memory: the rows' host bytes are checked too\n"
            "  --lora r=R[,alpha=A,targets=NAME,...]   LoRA as zero train --lora: the base frozen (no gradient,\n"
            "                       master or optimizer state), the adapters trained (docs/PLANNING.md, LoRA)\n"
            "  --frozen-dtype DT    the frozen base's dtype with --lora: fp32, bf16, fp16 (default: the working dtype)\n"
            "  --deterministic      zero train --deterministic: the grids join the gradients and the mode's\n"
            "                       fixed-point sums and buffers the transient (docs/ENGINE.md §11)\n"
            "  --quantize-embeddings      with --quantize-base: the embeddings and LM head in its format too\n"
            "  --quantize-base nf4|int8   with --lora: zero train --quantize-base, the base's linear weights in\n"
            "                       NF4 (double-quantized scales) or int8, counted to the byte (docs/QUANT.md)\n"
            "  --optimizer-states fp32|int8   zero train --optimizer-states: AdamW's moments in 8 bits (units of\n"
            "                       4,096 elements and more; the NVMe rows left out: docs/QUANT.md)\n"
            "  --link-gbps G        each node's network link in Gbit/s each way, for the step time\n"
            "                       (default: the rates file's measured link, else 10)\n"
            "  --rates FILE|cpu|gpu the machine's rates for the step time (as zero plan; default: the\n"
            "                       file of zero bench rates when it exists, else the CPU defaults)\n"
            "  --json               one JSON object: {\"params\", \"ranks\", \"nodes\", \"precision\",\n"
            "                       \"rows\": [{\"stage\", \"offload\", \"device_bytes\", \"host_bytes\",\n"
            "                       \"nvme_bytes\", \"transient_bytes\", \"step_seconds\",\n"
            "                       \"step_seconds_checkpointed\", ...}], \"rates\", ...}\n"
            "Formulas and their sources: docs/PLANNING.md.\n");
}

typedef struct est_row {
    int stage;
    int hpz; /* zero_hpz_partition_size: 1, or the ranks per node (the stage 3 + hpZ row) */
    int qwz; /* the stage 3 + qwZ row: zero_quantized_weights, blocks of the default 2048 */
    int qgz; /* ... + qgZ: zero_quantized_gradients too (the row "qwZ+qgZ") */
    zero_offload_device opt, param;
    zero_plan_mem mem;
    zero_plan_traffic traffic;
    zero_plan_time time[2]; /* the step without [0] and with [1] activation checkpointing */
    /* --gpu-memory (a GPU machine given): the need at the micro-batch without [0] and with [1]
     * activation checkpointing, and whether each fits (zero_plan_fit, the planner's rule) */
    zero_plan_candidate fit[2];
    int fits[2];
} est_row;

/* The table's rows: stage 0 has no offload; at stage 3 "cpu" and "nvme" move the parameter
 * shard too (ZeRO-Infinity), at stages 1-2 only master + optimizer states; stage 3 + hpZ (groups
 * of the ranks per node) on several nodes of several ranks; stage 3 + qwZ (int8 weight gathers), and
 * + qgZ (int8 gradient reduce-scatter across nodes), on several ranks. */
static const struct { int stage; zero_offload_device opt, param; int hpz, qwz, qgz; } row_kinds[] = {
    {0, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0, 0, 0},
    {1, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0, 0, 0}, {1, ZERO_OFFLOAD_CPU, ZERO_OFFLOAD_NONE, 0, 0, 0},
    {1, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NONE, 0, 0, 0},
    {2, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0, 0, 0}, {2, ZERO_OFFLOAD_CPU, ZERO_OFFLOAD_NONE, 0, 0, 0},
    {2, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NONE, 0, 0, 0},
    {3, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0, 0, 0}, {3, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 1, 0, 0},
    {3, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0, 1, 0}, {3, ZERO_OFFLOAD_NONE, ZERO_OFFLOAD_NONE, 0, 1, 1},
    {3, ZERO_OFFLOAD_CPU, ZERO_OFFLOAD_CPU, 0, 0, 0},
    {3, ZERO_OFFLOAD_NVME, ZERO_OFFLOAD_NVME, 0, 0, 0},
};
#define MAXROWS ((int)(sizeof row_kinds / sizeof row_kinds[0]))

static void json_u64_or_null(FILE *f, int known, uint64_t v) {
    if (known) fprintf(f, "%llu", (unsigned long long)v);
    else fputs("null", f);
}

/* The rows' step times and what they rest on. */
static void json_row_time(const est_row *r) {
    printf(", \"step_seconds\": ");
    cli_json_double(stdout, r->time[0].total);
    printf(", \"step_seconds_checkpointed\": ");
    cli_json_double(stdout, r->time[1].total);
    printf(", \"time\": ");
    cli_json_time(stdout, &r->time[0]);
    printf(", \"time_checkpointed\": ");
    cli_json_time(stdout, &r->time[1]);
}

static void json_time_inputs(const cli_rates *rates, const zero_plan_compute *c) {
    printf(", \"fwd_flops_per_token\": ");
    cli_json_double(stdout, c->fwd_flops_per_token);
    printf(", \"recompute_flops_per_token\": ");
    cli_json_double(stdout, c->recompute_flops_per_token);
    printf(", \"time_seq\": %lld, \"link_gbps\": ", (long long)c->seq_len);
    cli_json_double(stdout, rates->r.link_bytes * 8 / 1e9);
    printf(", \"rates\": ");
    cli_rates_json(stdout, rates);
}

static void print_json(const cli_sizing_opts *o, const cli_sizing_model *m, const est_row *rows, int nrows,
                       int64_t mb, int act_known, uint64_t act, uint64_t act_ckpt, const cli_rates *rates,
                       const zero_plan_compute *compute) {
    fputs("{\"model\": ", stdout);
    cJSON *name = cJSON_CreateString(m->name); /* a directory's path, escaped */
    char *quoted = name ? cJSON_PrintUnformatted(name) : NULL;
    fputs(quoted ? quoted : "null", stdout);
    cJSON_free(quoted);
    cJSON_Delete(name);
    printf(", \"arch\": ");
    if (m->cfg) printf("\"%s\"", dec_arch_name(m->cfg->arch));
    else printf("null");
    printf(", \"params\": %llu, \"padded_params\": %llu, \"units\": %d, "
           "\"largest_unit\": %llu, \"ranks\": %d, \"nodes\": %d, \"precision\": \"%s\", "
           "\"optimizer\": \"%s\", \"state_count\": %d, \"micro_batch\": %lld, \"seq\": ",
           (unsigned long long)m->params, (unsigned long long)rows[0].mem.padded,
           m->num_units, (unsigned long long)rows[0].mem.largest_unit, o->ranks, o->nodes,
           zero_dtype_name(o->precision), zero_optim_name(o->optimizer), rows[0].mem.state_count,
           (long long)mb);
    json_u64_or_null(stdout, act_known, (uint64_t)m->seq);
    printf(", \"objective\": \"%s\", \"gpus\": %d, \"gpu_memory\": ", dec_objective_name((dec_objective)o->objective),
           o->gpus);
    cli_json_double(stdout, o->device_mem);
    printf(", \"host_mem\": ");
    if (o->host_mem >= 0) cli_json_double(stdout, o->host_mem);
    else printf("null");
    if (m->unit_frozen) {
        printf(", \"lora\": {\"r\": %d, \"alpha\": ", m->lora_r);
        cli_json_double(stdout, m->lora_alpha);
        printf(", \"rslora\": %s, \"targets\": \"%s\", \"trainable_params\": %llu, \"frozen_params\": %llu, "
               "\"frozen_elements\": %llu, \"trainable_padded\": %llu, \"frozen_padded\": %llu, \"frozen_dtype\": \"%s\", "
               "\"quantize_base\": \"%s\"}",
               m->lora_rslora ? "true" : "false", m->lora_targets, (unsigned long long)m->trainable,
               (unsigned long long)m->frozen_params, (unsigned long long)rows[0].mem.frozen,
               (unsigned long long)rows[0].mem.padded, (unsigned long long)rows[0].mem.frozen_padded,
               zero_dtype_name(o->frozen_dtype == ZERO_DTYPE_COUNT ? o->precision : o->frozen_dtype),
               zero_qformat_name((zero_qformat)o->quant_base));
    }
    printf(", \"activation_bytes\": ");
    json_u64_or_null(stdout, act_known, act);
    printf(", \"activation_checkpointed_bytes\": ");
    json_u64_or_null(stdout, act_known, act_ckpt);
    printf(", \"rows\": [");
    for (int i = 0; i < nrows; i++) {
        const est_row *r = &rows[i];
        const uint64_t *b = r->mem.bytes;
        printf("%s\n  {\"stage\": %d, \"hpz_partition_size\": %d, \"quantized_weights\": %s, \"quantized_gradients\": %s, "
               "\"offload\": \"%s\", \"offload_param\": \"%s\", "
               "\"device_bytes\": %llu, \"host_bytes\": %llu, \"pinned_bytes\": %llu, \"grad_staging_bytes\": %llu, "
               "\"staging_bytes\": %llu, "
               "\"nvme_bytes\": %llu, \"transient_bytes\": %llu, \"accumulator_bytes\": %llu, \"params_bytes\": %llu, "
               "\"grads_bytes\": %llu, \"master_bytes\": %llu, \"optim_bytes\": %llu, \"pool_bytes\": %llu, ",
               i ? "," : "", r->stage, r->hpz, r->qwz ? "true" : "false", r->qgz ? "true" : "false",
               zero_plan_offload_name(r->opt),
               zero_plan_offload_name(r->param),
               (unsigned long long)r->mem.device, (unsigned long long)r->mem.host, (unsigned long long)r->mem.pinned,
               (unsigned long long)r->mem.grad_staging, (unsigned long long)r->mem.staging,
               (unsigned long long)r->mem.nvme, (unsigned long long)r->mem.transient,
               (unsigned long long)r->mem.accumulator,
               (unsigned long long)b[ZERO_MEM_PARAMS], (unsigned long long)b[ZERO_MEM_GRADS],
               (unsigned long long)b[ZERO_MEM_MASTER], (unsigned long long)b[ZERO_MEM_OPTIM],
               (unsigned long long)r->mem.pool);
        if (o->device_mem > 0) { /* a GPU machine given: the planner's fitting rule at the micro-batch */
            printf("\"fits\": %s, \"fits_checkpointed\": %s, \"need_device\": ", r->fits[0] ? "true" : "false",
                   r->fits[1] ? "true" : "false");
            cli_json_double(stdout, r->fit[0].need_device);
            printf(", \"need_device_checkpointed\": ");
            cli_json_double(stdout, r->fit[1].need_device);
            printf(", \"need_host\": ");
            cli_json_double(stdout, r->fit[0].need_host);
            printf(", ");
        }
        printf("\"unsupported\": ");
        if (r->mem.unsupported) cli_json_string(stdout, r->mem.unsupported);
        else printf("null");
        printf(", \"traffic_bytes\": ");
        cli_json_double(stdout, r->traffic.volume);
        printf(", \"traffic_counted_bytes\": ");
        cli_json_double(stdout, r->traffic.counted);
        json_row_time(r);
        printf("}");
    }
    printf("\n]");
    json_time_inputs(rates, compute);
    printf("}\n");
}

static void print_text(const cli_sizing_opts *o, const cli_sizing_model *m, const est_row *rows, int nrows,
                       int64_t mb, int act_known, uint64_t act, uint64_t act_ckpt, const cli_rates *rates,
                       const zero_plan_compute *compute) {
    char a[32], b[32], c[32], d[32], e[32];
    const zero_plan_mem *m0 = &rows[0].mem;
    printf("model %s: %llu parameters in %d units (largest %llu elements padded)", m->name,
           (unsigned long long)m->params, m->num_units, (unsigned long long)m0->largest_unit);
    if (m->layers)
        printf(", %s L=%d C=%d H=%d/%d V=%d ctx=%d", dec_arch_name(m->cfg->arch), m->layers, m->dim, m->heads,
               m->cfg->n_kv_head, m->vocab, m->n_ctx);
    printf("\n%d rank%s on %d node%s, %s working dtype, %s (%d state%s per parameter, %s)\n", o->ranks,
           o->ranks == 1 ? "" : "s", o->nodes, o->nodes == 1 ? "" : "s", zero_dtype_name(o->precision),
           zero_optim_name(o->optimizer), m0->state_count, m0->state_count == 1 ? "" : "s",
           o->optim_states == ZERO_OPTIM_STATES_INT8
               ? "8-bit: a byte each and 4 bytes per 256, in units of 4,096 elements and more"
               : "fp32");
    if (m->unit_frozen) {
        const char *fd = zero_dtype_name(o->frozen_dtype == ZERO_DTYPE_COUNT ? o->precision : o->frozen_dtype);
        char how[200];
        if (o->quant_base == ZERO_QFMT_NONE) snprintf(how, sizeof how, "in %s", fd);
        else
            snprintf(how, sizeof how, "with the layers' linear weights%s in %s (%llu bytes with the rest in %s)",
                     o->quant_embed ? ", the embeddings and the LM head" : "",
                     o->quant_base == ZERO_QFMT_INT8 ? "int8" : "NF4, double-quantized scales",
                     (unsigned long long)(m0->frozen * zero_dtype_size(o->frozen_dtype == ZERO_DTYPE_COUNT ? o->precision
                                                                                                          : o->frozen_dtype)),
                     fd);
        printf("LoRA r=%d alpha=%g%s on %s: %llu trainable parameters (%.3f%%); the base's %llu frozen %s: no "
               "gradient, master or optimizer state, whole on every rank at stages 0-2, 1/%d at stage 3\n",
               m->lora_r, m->lora_alpha, m->lora_rslora ? " (rsLoRA)" : "", m->lora_targets,
               (unsigned long long)m->trainable, 100.0 * (double)m->trainable / (double)m->params,
               (unsigned long long)m->frozen_params, how, o->ranks);
    }
    const int gpu = o->device_mem > 0;
    if (gpu)
        printf("\nper-rank bytes on %d GPU%s of %s (host: a rank's host memory, pinned: of it page-locked;\n"
               "fits: device + transient + activations at micro-batch %lld within %s usable per GPU%s%s):\n",
               o->ranks, o->ranks == 1 ? "" : "s", cli_fmt_bytes(o->device_mem, a, sizeof a), (long long)mb,
               cli_fmt_bytes(0.9 * o->device_mem, b, sizeof b), o->host_mem >= 0 ? ", host within " : ", host not checked",
               o->host_mem >= 0 ? cli_fmt_bytes(0.9 * o->host_mem, c, sizeof c) : "");
    else
        printf("\nper-rank model states (device = the rank's RAM on a CPU-only run; host and pinned on a GPU machine):\n");
    printf("stage  offload      device        host          pinned        nvme          transient     %s"
           "step, micro-batch %lld: plain / checkpointed\n", gpu ? "fits   " : "", (long long)mb);
    int any_hpz = 0, any_qwz = 0;
    for (int i = 0; i < nrows; i++) {
        const est_row *r = &rows[i];
        char off[32];
        any_hpz |= r->hpz > 1;
        any_qwz |= r->qwz;
        if (r->hpz > 1) snprintf(off, sizeof off, "hpZ %d", r->hpz);
        else if (r->qwz) snprintf(off, sizeof off, r->qgz ? "qwZ+qgZ" : "qwZ");
        else snprintf(off, sizeof off, "%s%s", zero_plan_offload_name(r->opt), r->param != ZERO_OFFLOAD_NONE ? "+p" : "");
        char t0[32], t1[32], p[32];
        const char *fit = !gpu ? "" : r->fits[0] ? "yes    " : r->fits[1] ? "ckpt   " : "no     ";
        printf("%-6d %-12s %-13s %-13s %-13s %-13s %-13s %s%s / %s\n", r->stage, off,
               cli_fmt_bytes((double)r->mem.device, a, sizeof a),
               cli_fmt_bytes((double)r->mem.host, b, sizeof b),
               cli_fmt_bytes((double)r->mem.pinned, p, sizeof p),
               cli_fmt_bytes((double)r->mem.nvme, c, sizeof c),
               cli_fmt_bytes((double)r->mem.transient, d, sizeof d), fit, cli_fmt_seconds(r->time[0].total, t0, sizeof t0),
               cli_fmt_seconds(r->time[1].total, t1, sizeof t1));
    }
    printf("(\"+p\": the parameter shard is offloaded too; host includes the NVMe swap pools; with the optimizer\n"
           " on cpu or nvme the gradient shard is in pinned host memory too, where the host optimizer reads it;\n"
           " transient: gathered units and in-flight gradient buffers, on the device%s%s%s)\n",
           gpu ? ";\n fits: yes, ckpt (only with activation checkpointing) or no; NVMe is not sized here (zero plan --nvme)"
               : "",
           any_hpz ? ";\n hpZ H: zero_hpz_partition_size H, the ranks per node: a secondary parameter shard per node" : "",
           any_qwz ? ";\n qwZ: zero_quantized_weights, the parameters' all-gathers as int8 (--quantized-weights);\n"
                     " qgZ: zero_quantized_gradients, the gradients' reduce-scatter as int8 across nodes (--quantized-gradients)"
                   : "");
    for (int i = 0; i < nrows; i++) /* rows the engine refuses (the ownership plan's rule) */
        if (rows[i].mem.unsupported)
            printf("(stage %d %s%s: %s: the row is what it would take)\n", rows[i].stage, zero_plan_offload_name(rows[i].opt),
                   rows[i].param != ZERO_OFFLOAD_NONE ? "+p" : "", rows[i].mem.unsupported);
    if (o->deterministic)
        printf("(deterministic: the gradients include the grids; the transient the mode's buffers, %s at stage 0, %s at "
               "stage 3: docs/ENGINE.md §11; the step time leaves out its extra passes and the first step's redo)\n",
               cli_fmt_bytes((double)rows[0].mem.accumulator, a, sizeof a),
               cli_fmt_bytes((double)rows[nrows - 1].mem.accumulator, b, sizeof b));
    if (act_known)
        printf("\nactivations per rank, micro-batch %lld x %d tokens: %s; with activation "
               "checkpointing: %s\n",
               (long long)mb, m->seq, cli_fmt_bytes((double)act, a, sizeof a),
               cli_fmt_bytes((double)act_ckpt, b, sizeof b));
    else
        printf("\nactivations: unknown for a bare --params model (give --layers and --dim)\n");
    const est_row *r0 = &rows[0], *r3 = &rows[nrows - 1];
    printf(m->unit_frozen ? "traffic per step per rank: stages 0-2: 2Psi of the adapters = %s (each rank sends %s); "
                            "stage 3: 3Psi of the adapters + 2 gathers of the frozen base = %s (sends %s)\n"
                          : "traffic per step per rank: stages 0-2: 2Psi = %s (each rank sends %s); "
                            "stage 3: 3Psi = %s (sends %s)\n",
           cli_fmt_bytes(r0->traffic.volume, a, sizeof a), cli_fmt_bytes(r0->traffic.sent, b, sizeof b),
           cli_fmt_bytes(r3->traffic.volume, c, sizeof c), cli_fmt_bytes(r3->traffic.sent, e, sizeof e));
    printf("step time (the table's last column): micro-batch %lld x %lld tokens per rank, %.4g GFLOP per token "
           "forward (x %.4g with the backward%s), %.4g recomputed with checkpointing\n",
           (long long)mb, (long long)compute->seq_len, compute->fwd_flops_per_token / 1e9,
           3.0 - (m0->numel ? (double)m0->frozen / (double)m0->numel : 0.0),
           m->unit_frozen ? ": the frozen weights have no weight gradient" : "", compute->recompute_flops_per_token / 1e9);
    cli_rates_note(stdout, rates, o->nodes, o->ranks / o->nodes, rates->gpu);
}

int cli_estimate(int argc, char **argv) {
    cli_sizing_opts o;
    cli_sizing_opts_default(&o);
    cli_time_opts topt = {NULL, 0};
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return CLI_OK;
        }
        int r = cli_sizing_flag(&o, argc, argv, &i);
        if (r == 0) r = cli_time_flag(&topt, argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r == 0)
            return cli_error(CLI_USAGE, "estimate: unknown option '%s' (zero estimate --help)", argv[i]);
    }
    if (cli_sizing_resolve(&o) != CLI_OK) return CLI_USAGE;
    if (o.host_mem >= 0 && !(o.device_mem > 0))
        return cli_error(CLI_USAGE, "estimate: --host-mem without --gpu-memory: expected both (the fit of each row on a GPU "
                         "machine), or neither");
    cli_rates rates;
    int rc = cli_rates_resolve(&topt, o.device_mem > 0, &rates);
    if (rc != CLI_OK) return rc;
    cli_sizing_model m;
    rc = cli_sizing_model_build(&o, &m);
    if (rc != CLI_OK) return rc;
    const int64_t mb = o.micro_batch ? o.micro_batch : 1;
    zero_plan_compute compute;
    cli_sizing_compute(&o, &m, &compute);

    est_row rows[MAXROWS];
    int nrows = 0;
    for (int k = 0; k < MAXROWS; k++) {
        /* hpZ's group is a node: the row needs several nodes (else nothing crosses) of several ranks;
         * the engine does not combine it with frozen parameters yet */
        if (row_kinds[k].hpz && (o.nodes < 2 || o.ranks / o.nodes < 2 || m.unit_frozen)) continue;
        if (row_kinds[k].qwz && o.ranks < 2) continue; /* one rank gathers nothing */
        if (row_kinds[k].qgz && o.nodes < 2) continue;  /* on one node the reduction stays exact */
        const int i = nrows++;
        zero_plan_setup s;
        zero_plan_setup_default(&s);
        s.ranks = o.ranks;
        s.stage = row_kinds[k].stage;
        s.precision = o.precision;
        s.optimizer = o.optimizer;
        s.offload_optimizer = row_kinds[k].opt;
        s.offload_param = row_kinds[k].param;
        s.hpz_partition_size = row_kinds[k].hpz ? o.ranks / o.nodes : 1;
        s.quant_weights_block = row_kinds[k].qwz ? 2048 : 0;
        s.quant_grads_block = row_kinds[k].qgz ? 2048 : 0;
        s.quant_base = o.quant_base != ZERO_QFMT_NONE;
        s.frozen_dtype = o.frozen_dtype;
        s.deterministic = o.deterministic;
        s.optim_states = o.optim_states;
        rows[i].stage = s.stage;
        rows[i].hpz = s.hpz_partition_size;
        rows[i].qwz = row_kinds[k].qwz;
        rows[i].qgz = row_kinds[k].qgz;
        rows[i].opt = s.offload_optimizer;
        rows[i].param = s.offload_param;
        zero_error err = {{0}};
        if (zero_plan_estimate(&m.plan, &s, &rows[i].mem, &err) != ZERO_OK) {
            cli_sizing_model_free(&m);
            return cli_error(CLI_USAGE, "estimate: %s", err.msg);
        }
        zero_plan_traffic_frozen(s.stage, s.ranks, rows[i].mem.padded, s.precision, rows[i].mem.frozen_padded,
                                 s.frozen_dtype, &rows[i].traffic);
        zero_plan_traffic_qwz(s.stage, s.ranks, rows[i].mem.padded, s.precision, rows[i].mem.frozen_padded,
                              s.frozen_dtype, s.quant_weights_block, s.quant_base, &rows[i].traffic);
        zero_plan_traffic_qgz(s.stage, s.ranks, rows[i].mem.padded, s.precision, s.quant_grads_block, &rows[i].traffic);
        for (int ckpt = 0; ckpt < 2; ckpt++) {
            if (zero_plan_step_time(&m.plan, &compute, &s, o.nodes, mb, ckpt, &rates.r, &rows[i].time[ckpt], &err) !=
                ZERO_OK) {
                cli_sizing_model_free(&m);
                return cli_error(CLI_USAGE, "estimate: %s", err.msg);
            }
        }
    }
    const int act_known = m.plan.activation != NULL;
    const uint64_t act = act_known ? m.plan.activation(m.plan.activation_ctx, mb, 0) : 0;
    const uint64_t act_ckpt = act_known ? m.plan.activation(m.plan.activation_ctx, mb, 1) : 0;
    if (o.device_mem > 0) {
        /* the planner's fitting rule on the GPU machine given: each rank's device need against
         * --gpu-memory, the host bytes of a node's ranks against --host-mem (not checked without
         * it), the planner's 10% headroom; NVMe is not sized here (zero plan --nvme) */
        zero_plan_request req;
        zero_plan_request_default(&req);
        req.base.ranks = o.ranks;
        req.nodes = o.nodes;
        req.device_mem = o.device_mem;
        req.host_mem = o.host_mem >= 0 ? o.host_mem : INFINITY;
        req.nvme_mem = INFINITY;
        for (int i = 0; i < nrows; i++)
            for (int ckpt = 0; ckpt < 2; ckpt++) {
                memset(&rows[i].fit[ckpt], 0, sizeof rows[i].fit[ckpt]);
                rows[i].fits[ckpt] = zero_plan_fit(&req, &rows[i].mem, ckpt ? act_ckpt : act, &rows[i].fit[ckpt], NULL);
            }
    }
    if (o.json) print_json(&o, &m, rows, nrows, mb, act_known, act, act_ckpt, &rates, &compute);
    else print_text(&o, &m, rows, nrows, mb, act_known, act, act_ckpt, &rates, &compute);
    cli_sizing_model_free(&m);
    return CLI_OK;
}
