/* `zero plan`: the fastest ZeRO stage, offload, micro-batch and activation checkpointing that fit
 * the given hardware, each rung's memory and predicted step time, why, and a DeepSpeed-style config. */
#include "cli.h"

#include "decoder/decoder.h"
#include "train.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero plan (--model NAME|DIR | DIR | --params N | --layers L --dim C) --ranks R\n"
            "                 [--device-mem X] --host-mem Y [--nvme Z] [--link-gbps G] [options]\n"
            "       zero plan (...model...) --gpus N --gpu-memory X --host-mem Y [options]\n"
            "\n"
            "Walks the ladder stage 0; 1; 2; 2 + optimizer on cpu; 3; 3 + hpZ (on several nodes: a\n"
            "secondary parameter shard per node); 3 + optimizer on cpu; 3 + optimizer and parameters\n"
            "on cpu; then the same with NVMe. Each rung that fits runs\n"
            "without or with activation checkpointing at the largest micro-batch up to --micro-batch\n"
            "that fits, whichever is faster per sequence; the plan picks the fastest rung that fits\n"
            "by its predicted step time (docs/PLANNING.md §9) and says why. When nothing fits it\n"
            "says what is missing and by how much, and exits with status 1.\n"
            "\n"
            "  --model NAME|DIR | DIR | --params N | --layers L --dim C [--heads --seq --vocab]   (as estimate)\n"
            "  --ranks R             data-parallel ranks (required); --nodes M machines (1): R/M\n"
            "                        ranks per node share its memory and its network link\n"
            "  --gpus N              the ranks are N GPUs (as --ranks N; needs --gpu-memory)\n"
            "  --gpu-memory X        device (GPU) memory per rank, e.g. 24GiB (also --device-mem X);\n"
            "                        leave it out on a CPU-only machine: each rank then gets its\n"
            "                        share of --host-mem. On a GPU machine each rung shows a rank's\n"
            "                        device bytes, host bytes and, of those, the pinned (page-locked)\n"
            "                        ones: offloaded states, NVMe pools, the gradient's staging copy\n"
            "  --host-mem Y          host RAM per node (required)\n"
            "  --nvme Z              free NVMe space per node (NVMe offload is considered only with it)\n"
            "  --nvme-path DIR       where the config puts NVMe offload files (./zero_nvme)\n"
            "  --link-gbps G         each node's network link in Gbit/s each way (default: the rates\n"
            "                        file's measured link, else 10)\n"
            "  --rates FILE|cpu|gpu  the machine's rates for the step time: a file of zero bench rates\n"
            "                        (default: $ZERO_RATES, $XDG_CACHE_HOME/zero/rates.json or\n"
            "                        ~/.cache/zero/rates.json when it exists), or the documented\n"
            "                        defaults of a CPU-only or GPU machine (default: by --device-mem)\n"
            "  --headroom F          fraction of each memory kept free (0.1)\n"
            "  --precision P         fp32 (default), bf16, fp16;  --optimizer adamw|adam|sgd|lion\n"
            "  --micro-batch B       the largest micro-batch to consider (8)\n"
            "  --objective lm|dpo|orpo  zero train's objective: its passes in the step time (as zero estimate)\n"
            "  --lora r=R[,alpha=A,targets=NAME,...]  a LoRA fine-tune (as zero train --lora): the base\n"
            "                        frozen, the adapters trained; the config gets zero_extensions.lora. When\n"
            "                        nothing fits with a 16-bit or fp32 base of the Llama family, the plan\n"
            "                        tries its linear weights in NF4 (QLoRA) and says so\n"
            "  --frozen-dtype DT     the frozen base's dtype with --lora: fp32, bf16, fp16\n"
            "  --quantize-base nf4|int8  with --lora: the base's linear weights quantized (zero train's)\n"
            "  --quantize-embeddings     with --quantize-base: the embeddings and LM head quantized too\n"
            "  --deterministic       for zero train --deterministic: counts the mode's grids and buffers\n"
            "                        and writes zero_extensions.deterministic into the config\n"
            "  -o FILE               write the plan as a DeepSpeed-style config (zero train --config)\n"
            "  --json                the plan as one JSON object (every rung with \"fits\" and\n"
            "                        \"step_seconds\"; \"chosen\": the index of the chosen one)\n"
            "Sizes accept units: 24GiB, 512MiB, 1.5GB, 7e9, 1.5B. Formulas: docs/PLANNING.md.\n");
}

/* DeepSpeed's spelling of the optimizer types. */
static const char *ds_optimizer(zero_optim_type t) {
    switch (t) {
    case ZERO_OPTIM_ADAMW: return "AdamW";
    case ZERO_OPTIM_ADAM: return "Adam";
    case ZERO_OPTIM_SGD: return "SGD";
    case ZERO_OPTIM_LION: return "Lion";
    }
    return "AdamW";
}

static void rung_name(const zero_plan_candidate *c, char *buf, size_t cap) {
    if (c->offload_param != ZERO_OFFLOAD_NONE)
        snprintf(buf, cap, "stage %d + optimizer and parameters on %s", c->stage,
                 zero_plan_offload_name(c->offload_param));
    else if (c->offload_optimizer != ZERO_OFFLOAD_NONE)
        snprintf(buf, cap, "stage %d + optimizer on %s", c->stage,
                 zero_plan_offload_name(c->offload_optimizer));
    else if (c->hpz_partition_size > 1)
        snprintf(buf, cap, "stage %d + hpZ %d", c->stage, c->hpz_partition_size);
    else
        snprintf(buf, cap, "stage %d", c->stage);
}

/* The rung with the way it runs: "stage 1 + checkpointing, micro-batch 8". */
static void run_name(const zero_plan_candidate *c, char *buf, size_t cap) {
    char r[96];
    rung_name(c, r, sizeof r);
    snprintf(buf, cap, "%s%s, micro-batch %lld", r, c->checkpointing ? " + checkpointing" : "",
             (long long)c->micro_batch);
}

/* Tokens per second of all ranks at c's step time (0 when the time is 0). */
static double tokens_per_s(const zero_plan_candidate *c, int ranks, int64_t seq) {
    return c->step_seconds > 0 ? (double)ranks * (double)c->micro_batch * (double)seq / c->step_seconds : 0;
}

/* Tokens per second for humans: whole above 100, three digits below. */
static const char *fmt_tps(double v, char *buf, size_t cap) {
    snprintf(buf, cap, v >= 100 ? "%.0f" : "%.3g", v);
    return buf;
}

/* The one line that says why the chosen rung is the fastest: its time and the runner-up's. */
static void time_reason(char *buf, size_t cap, const zero_plan_result *res, int ranks, int nodes,
                        const cli_rates *rates, int64_t seq) {
    const zero_plan_candidate *k = &res->cand[res->chosen];
    int next;
    char a[128], b[128], t1[32], t2[32], p1[32], p2[32], where[64], ties[256] = "";
    run_name(k, a, sizeof a);
    if (nodes > 1) snprintf(where, sizeof where, " on %.4g Gbit/s links", rates->r.link_bytes * 8 / 1e9);
    else snprintf(where, sizeof where, " on one node");
    /* Rungs as fast as the choice (stage 2 beside stage 1: the same traffic and update) are named
     * as ties; "next" is the fastest slower one. */
    next = -1;
    for (int i = 0; i < res->count; i++) {
        const zero_plan_candidate *c = &res->cand[i];
        if (i == res->chosen || !c->fits) continue;
        if (c->sample_seconds == k->sample_seconds) {
            char n[128];
            run_name(c, n, sizeof n);
            size_t len = strlen(ties);
            snprintf(ties + len, sizeof ties - len, "%s%s", len ? ", " : " (as fast: ", n);
        } else if (next < 0 || c->sample_seconds < res->cand[next].sample_seconds) {
            next = i;
        }
    }
    if (ties[0]) strncat(ties, ")", sizeof ties - strlen(ties) - 1);
    if (next < 0) {
        snprintf(buf, cap, "%s: %s: %s/step (%s tokens/s)%s%s", ties[0] ? "fastest that fits" : "the only rung that fits",
                 a, cli_fmt_seconds(k->step_seconds, t1, sizeof t1), fmt_tps(tokens_per_s(k, ranks, seq), p1, sizeof p1),
                 where, ties);
        return;
    }
    run_name(&res->cand[next], b, sizeof b);
    snprintf(buf, cap, "fastest that fits: %s: %s/step (%s tokens/s); next: %s: %s/step (%s tokens/s)%s%s", a,
             cli_fmt_seconds(k->step_seconds, t1, sizeof t1), fmt_tps(tokens_per_s(k, ranks, seq), p1, sizeof p1), b,
             cli_fmt_seconds(res->cand[next].step_seconds, t2, sizeof t2),
             fmt_tps(tokens_per_s(&res->cand[next], ranks, seq), p2, sizeof p2), where, ties);
}

/* Every rung: fits, how it runs, its need per rank (device; on a GPU machine also the host bytes
 * of a rank, and of those the page-locked ones) and its predicted step. */
static void print_rungs(const zero_plan_result *res, int ranks, int64_t seq, int cpu_only) {
    char name[96], need[32], t[32], h[32], p[32];
    printf("rungs (need per rank: %s + transient + activations%s; tokens/s of all ranks):\n",
           cpu_only ? "RAM" : "device memory", cpu_only ? "" : "; host: a rank's host memory, pinned: of it page-locked");
    if (cpu_only)
        printf("  %-44s %-5s %-12s %-14s %-12s %s\n", "rung", "fits", "micro-batch", "need", "step", "tokens/s");
    else
        printf("  %-44s %-5s %-12s %-14s %-13s %-13s %-12s %s\n", "rung", "fits", "micro-batch", "device", "host",
               "pinned", "step", "tokens/s");
    for (int i = 0; i < res->count; i++) {
        const zero_plan_candidate *c = &res->cand[i];
        char mb[32];
        rung_name(c, name, sizeof name);
        snprintf(mb, sizeof mb, "%lld%s", (long long)c->micro_batch, c->checkpointing ? " + ckpt" : "");
        const double tps = tokens_per_s(c, ranks, seq);
        if (cpu_only)
            printf("  %-44s %-5s %-12s %-14s %-12s %.*f%s\n", name, c->fits ? "yes" : "no", mb,
                   cli_fmt_bytes(c->need_device, need, sizeof need), cli_fmt_seconds(c->step_seconds, t, sizeof t),
                   tps < 100 ? 2 : 0, tps, i == res->chosen ? "   <- chosen" : "");
        else
            printf("  %-44s %-5s %-12s %-14s %-13s %-13s %-12s %.*f%s\n", name, c->fits ? "yes" : "no", mb,
                   cli_fmt_bytes(c->need_device, need, sizeof need), cli_fmt_bytes((double)c->mem.host, h, sizeof h),
                   cli_fmt_bytes((double)c->mem.pinned, p, sizeof p), cli_fmt_seconds(c->step_seconds, t, sizeof t),
                   tps < 100 ? 2 : 0, tps, i == res->chosen ? "   <- chosen" : "");
    }
}

static void json_rung_time(const zero_plan_candidate *r, int ranks, int64_t seq) {
    printf(", \"step_seconds\": ");
    cli_json_double(stdout, r->step_seconds);
    printf(", \"sample_seconds\": ");
    cli_json_double(stdout, r->sample_seconds);
    printf(", \"tokens_per_s\": ");
    cli_json_double(stdout, tokens_per_s(r, ranks, seq));
    printf(", \"time\": ");
    cli_json_time(stdout, &r->time);
    printf(", \"variants\": [");
    for (int v = 0; v < 2; v++) {
        printf("%s{\"activation_checkpointing\": %s, \"fits\": %s, \"micro_batch\": ", v ? ", " : "",
               v ? "true" : "false", r->variant_micro_batch[v] ? "true" : "false");
        if (r->variant_micro_batch[v]) printf("%lld, \"step_seconds\": ", (long long)r->variant_micro_batch[v]);
        else printf("null, \"step_seconds\": ");
        if (r->variant_micro_batch[v]) cli_json_double(stdout, r->variant_seconds[v]);
        else printf("null");
        printf("}");
    }
    printf("]");
}

/* The plan's time fields: the chosen rung (index into "rungs"), its step, and the inputs. */
static void json_plan_time(const zero_plan_result *res, const cli_rates *rates, const zero_plan_request *req,
                           int ranks) {
    printf(", \"chosen\": ");
    if (res->chosen >= 0) printf("%d, \"chosen_name\": \"", res->chosen);
    else printf("null, \"chosen_name\": null");
    if (res->chosen >= 0) {
        char n[160];
        run_name(&res->cand[res->chosen], n, sizeof n);
        printf("%s\"", n);
    }
    const zero_plan_candidate *k = res->chosen >= 0 ? &res->cand[res->chosen] : NULL;
    printf(", \"step_seconds\": ");
    if (k) cli_json_double(stdout, k->step_seconds);
    else printf("null");
    printf(", \"tokens_per_s\": ");
    if (k) cli_json_double(stdout, tokens_per_s(k, ranks, req->compute.seq_len));
    else printf("null");
    printf(", \"time\": ");
    if (k) cli_json_time(stdout, &k->time);
    else printf("null");
    printf(", \"seq\": %lld, \"fwd_flops_per_token\": ", (long long)req->compute.seq_len);
    cli_json_double(stdout, req->compute.fwd_flops_per_token);
    printf(", \"recompute_flops_per_token\": ");
    cli_json_double(stdout, req->compute.recompute_flops_per_token);
    printf(", \"link_gbps\": ");
    cli_json_double(stdout, rates->r.link_bytes * 8 / 1e9);
    printf(", \"rates\": ");
    cli_rates_json(stdout, rates);
}

/* "what is missing": the shortfalls of c joined with "; ". */
static void missing_text(const zero_plan_candidate *c, const zero_plan_result *res, int cpu_only,
                         char *buf, size_t cap) {
    char a[32], b[32], d[32];
    size_t n = 0;
    buf[0] = '\0';
    if (c->missing_device > 0)
        n += (size_t)snprintf(buf + n, cap - n, "%s of %s per rank (%s usable: %s missing)",
                              cli_fmt_bytes(c->need_device, a, sizeof a),
                              cpu_only ? "RAM" : "device memory",
                              cli_fmt_bytes(res->usable_device, b, sizeof b),
                              cli_fmt_bytes(c->missing_device, d, sizeof d));
    if (c->missing_host > 0 && n < cap)
        n += (size_t)snprintf(buf + n, cap - n, "%s%s of host memory per node (%s usable: %s missing)",
                              n ? "; " : "", cli_fmt_bytes(c->need_host, a, sizeof a),
                              cli_fmt_bytes(res->usable_host, b, sizeof b),
                              cli_fmt_bytes(c->missing_host, d, sizeof d));
    if (c->missing_nvme > 0 && n < cap)
        snprintf(buf + n, cap - n, "%s%s of NVMe per node (%s usable: %s missing)", n ? "; " : "",
                 cli_fmt_bytes(c->need_nvme, a, sizeof a), cli_fmt_bytes(res->usable_nvme, b, sizeof b),
                 cli_fmt_bytes(c->missing_nvme, d, sizeof d));
}

#define MAX_REASONS 16
typedef struct reasons {
    int n;
    char text[MAX_REASONS][512];
} reasons;

static void reason(reasons *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void reason(reasons *r, const char *fmt, ...) {
    if (r->n >= MAX_REASONS) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->text[r->n++], sizeof r->text[0], fmt, ap);
    va_end(ap);
}

/* Writes the DeepSpeed-style config of candidate c to path (through a temporary file and a
 * rename, so a failed write never leaves a half file under the name). */
static int write_config(const char *path, const cli_sizing_opts *o, const cli_sizing_model *m,
                        const zero_plan_candidate *c, int states_int8, const char *nvme_path) {
    char tmp[4096];
    zero_error err;
    /* zero_create_tmp: a link planted at PATH.tmp is removed, never followed (docs/SECURITY.md) */
    const int fd = zero_create_tmp(path, tmp, sizeof tmp, &err);
    if (fd < 0) return cli_error(CLI_RUNTIME, "-o '%s': %s", path, err.msg);
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(tmp);
        return cli_error(CLI_RUNTIME, "-o '%s': %s", path, strerror(errno));
    }
    fprintf(f, "{\n  \"train_micro_batch_size_per_gpu\": %lld,\n  \"gradient_accumulation_steps\": 1,\n",
            (long long)c->micro_batch);
    fprintf(f, "  \"optimizer\": {\"type\": \"%s\"", ds_optimizer(o->optimizer));
    if (o->optimizer == ZERO_OPTIM_SGD) fprintf(f, ", \"params\": {\"momentum\": 0.9}");
    fprintf(f, "},\n");
    if (o->precision == ZERO_DTYPE_BF16) fprintf(f, "  \"bf16\": {\"enabled\": true},\n");
    if (o->precision == ZERO_DTYPE_FP16) fprintf(f, "  \"fp16\": {\"enabled\": true},\n");
    /* zero_extensions: what zero train needs besides DeepSpeed's keys, each written only when set */
    const char *sep = "";
    if (o->deterministic || states_int8 || m->unit_frozen) fprintf(f, "  \"zero_extensions\": {");
    if (o->deterministic) fprintf(f, "%s\"deterministic\": true", sep), sep = ", ";
    if (states_int8) fprintf(f, "%s\"optimizer_states\": \"int8\"", sep), sep = ", ";
    if (m->unit_frozen) {
        zero_lora_config lc;
        memset(&lc, 0, sizeof lc);
        lc.alpha = 8;
        (void)train_lora_parse(o->lora, &lc); /* parsed once already (cli_sizing_model_build) */
        fprintf(f, "%s\"lora\": {\"r\": %d, \"alpha\": %.17g, \"targets\": ", sep, m->lora_r, m->lora_alpha);
        cli_json_string(f, m->lora_targets);
        if (lc.dropout > 0) fprintf(f, ", \"dropout\": %.17g", lc.dropout);
        if (m->lora_rslora) fprintf(f, ", \"rslora\": true");
        fprintf(f, "}");
        if (o->quant_base != ZERO_QFMT_NONE)
            fprintf(f, ", \"quantize_base\": \"%s\"", o->quant_base == ZERO_QFMT_INT8 ? "int8" : "nf4");
        if (o->quant_base != ZERO_QFMT_NONE && o->quant_embed) fprintf(f, ", \"quantize_embeddings\": true");
        if (o->frozen_dtype != ZERO_DTYPE_COUNT)
            fprintf(f, ", \"frozen_dtype\": \"%s\"", zero_dtype_name(o->frozen_dtype));
        sep = ", ";
    }
    if (sep[0]) fprintf(f, "},\n");
    fprintf(f, "  \"zero_optimization\": {\n    \"stage\": %d", c->stage);
    if (c->hpz_partition_size > 1) fprintf(f, ",\n    \"zero_hpz_partition_size\": %d", c->hpz_partition_size);
    const zero_offload_device dev[2] = {c->offload_optimizer, c->offload_param};
    const char *key[2] = {"offload_optimizer", "offload_param"};
    for (int k = 0; k < 2; k++) {
        if (dev[k] == ZERO_OFFLOAD_NONE) continue;
        fprintf(f, ",\n    \"%s\": {\"device\": \"%s\"", key[k], zero_plan_offload_name(dev[k]));
        if (dev[k] == ZERO_OFFLOAD_NVME) {
            fprintf(f, ", \"nvme_path\": ");
            cli_json_string(f, nvme_path);
        }
        fprintf(f, "}");
    }
    fprintf(f, "\n  }\n}\n");
    int bad = ferror(f);
    if (fclose(f) != 0) bad = 1;
    if (bad || rename(tmp, path) != 0) {
        int e = errno;
        remove(tmp);
        return cli_error(CLI_RUNTIME, "-o '%s': %s", path, strerror(e ? e : EIO));
    }
    return CLI_OK;
}

int cli_plan(int argc, char **argv) {
    cli_sizing_opts o;
    cli_sizing_opts_default(&o);
    double nvme = 0, headroom = 0.1;
    cli_time_opts topt = {NULL, 0};
    const char *out_path = NULL, *nvme_path = "./zero_nvme";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return CLI_OK;
        }
        int r = cli_sizing_flag(&o, argc, argv, &i);
        if (r == 0) r = cli_time_flag(&topt, argc, argv, &i);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "--nvme")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_size(a, v, &nvme)) return CLI_USAGE;
        } else if (!strcmp(a, "--headroom")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_double(a, v, 0, 0.95, &headroom))
                return CLI_USAGE;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(out_path = cli_flag_value(argc, argv, &i))) return CLI_USAGE;
        } else if (!strcmp(a, "--nvme-path")) {
            if (!(nvme_path = cli_flag_value(argc, argv, &i))) return CLI_USAGE;
        } else {
            return cli_error(CLI_USAGE, "plan: unknown option '%s' (zero plan --help)", a);
        }
    }
    if (cli_sizing_resolve(&o) != CLI_OK) return CLI_USAGE;
    const double device = o.device_mem, host = o.host_mem;
    if (out_path && o.model && cli_path_within(out_path, o.model))
        return cli_error(CLI_USAGE, "plan: -o '%s' is inside the model directory '%s': expected a path outside it (it "
                         "would overwrite or mix with its files)", out_path, o.model);
    if (out_path && !strcmp(nvme_path, ""))
        return cli_error(CLI_USAGE, "plan: --nvme-path '': expected the directory of the NVMe swap files");
    if (host < 0) return cli_error(CLI_USAGE, "plan: --host-mem: expected the host RAM per node (e.g. 64GiB)");
    if (device == 0 && host == 0)
        return cli_error(CLI_USAGE, "plan: --host-mem 0 without --device-mem: a CPU-only machine needs its RAM size");
    const double link = topt.link_gbps;
    cli_rates rates;
    int rc = cli_rates_resolve(&topt, device > 0, &rates);
    if (rc != CLI_OK) return rc;
    cli_sizing_model m;
    rc = cli_sizing_model_build(&o, &m);
    if (rc != CLI_OK) return rc;

    zero_plan_request req;
    zero_plan_request_default(&req);
    req.base.ranks = o.ranks;
    req.base.precision = o.precision;
    req.base.optimizer = o.optimizer;
    req.base.deterministic = o.deterministic;
    req.base.frozen_dtype = o.frozen_dtype;
    req.nodes = o.nodes;
    req.device_mem = device;
    req.host_mem = host;
    req.nvme_mem = nvme;
    req.headroom = headroom;
    if (o.micro_batch) req.max_micro_batch = o.micro_batch;
    req.rates = rates.r;
    cli_sizing_compute(&o, &m, &req.compute);
    zero_plan_result res;
    zero_error err = {{0}};
    if (zero_plan_search(&m.plan, &req, &res, &err) != ZERO_OK) {
        cli_sizing_model_free(&m);
        return cli_error(CLI_USAGE, "plan: %s", err.msg);
    }
    /* LoRA on a 16-bit (or fp32) base that does not fit anywhere: the base's linear weights in NF4
     * (QLoRA, zero train --quantize-base nf4), where the model has them (the Llama family); the
     * plan says so and writes it (docs/PLANNING.md §6) */
    uint64_t base_bytes_before = 0;
    const size_t wf = zero_dtype_size(o.frozen_dtype == ZERO_DTYPE_COUNT ? o.precision : o.frozen_dtype);
    if (res.chosen < 0 && o.lora && o.quant_base == ZERO_QFMT_NONE && m.cfg && dec_is_llama(m.cfg)) {
        cli_sizing_opts oq = o;
        oq.quant_base = ZERO_QFMT_NF4_DQ;
        cli_sizing_model mq;
        rc = cli_sizing_model_build(&oq, &mq);
        if (rc != CLI_OK) {
            cli_sizing_model_free(&m);
            return rc;
        }
        zero_plan_compute cq;
        cli_sizing_compute(&oq, &mq, &cq);
        zero_plan_request rq = req;
        rq.compute = cq;
        zero_plan_result q;
        if (zero_plan_search(&mq.plan, &rq, &q, &err) != ZERO_OK) {
            cli_sizing_model_free(&m);
            cli_sizing_model_free(&mq);
            return cli_error(CLI_USAGE, "plan: %s", err.msg);
        }
        if (q.chosen >= 0) {
            base_bytes_before = res.cand[0].mem.frozen * wf;
            cli_sizing_model_free(&m);
            m = mq; /* its plan points into the heap arrays it owns, not into itself */
            m.plan.activation_ctx = &m;
            req = rq;
            res = q;
            o.quant_base = oq.quant_base;
        } else {
            cli_sizing_model_free(&mq);
        }
    }
    const int cpu_only = device == 0;
    const int act_known = m.plan.activation != NULL;
    char a[32], b[32], c[32], d[32], e[32], name[96];

    /* The reasons, rung by rung up to the choice (or through the whole ladder). */
    reasons why = {0};
    const int q8 = res.optim_states == ZERO_OPTIM_STATES_INT8;
    if (q8)
        reason(&why, "no rung fits with fp32 optimizer states: the rungs below keep %s's moments in 8 bits (zero train "
                     "--optimizer-states int8: 2.03 bytes a parameter instead of 8: docs/QUANT.md)",
               zero_optim_name(o.optimizer));
    if (m.unit_frozen) {
        const uint64_t base = res.cand[0].mem.frozen * wf;
        if (base_bytes_before)
            reason(&why, "no rung fits with the base in %s (%s): the rungs below keep its layers' linear weights in NF4 "
                         "with double-quantized scales, %s for the base (zero train --quantize-base nf4, QLoRA; the "
                         "norms, embeddings and LM head stay in %s: docs/QUANT.md)",
                   zero_dtype_name(o.frozen_dtype == ZERO_DTYPE_COUNT ? o.precision : o.frozen_dtype),
                   cli_fmt_bytes((double)base_bytes_before, a, sizeof a), cli_fmt_bytes((double)base, b, sizeof b),
                   zero_dtype_name(o.frozen_dtype == ZERO_DTYPE_COUNT ? o.precision : o.frozen_dtype));
        char share[64] = "";
        if (o.ranks > 1) snprintf(share, sizeof share, ": whole on every rank at stages 0-2, 1/%d at stage 3", o.ranks);
        reason(&why, "LoRA r=%d on %s: %llu trainable parameters (%.3f%%), each with a gradient, fp32 master and "
                     "optimizer states; the frozen base, %s%s, has none%s",
               m.lora_r, m.lora_targets, (unsigned long long)m.trainable,
               100.0 * (double)m.trainable / (double)(m.trainable + m.frozen_params),
               cli_fmt_bytes((double)base, c, sizeof c),
               o.quant_base == ZERO_QFMT_NONE ? "" : o.quant_base == ZERO_QFMT_INT8 ? " (linear weights in int8)"
                                                                                     : " (linear weights in NF4)",
               share);
    }
    for (int i = 0; i < res.skipped_count; i++) {
        zero_plan_candidate sk;
        memset(&sk, 0, sizeof sk);
        sk.stage = res.skipped[i].stage;
        sk.hpz_partition_size = res.skipped[i].hpz_partition_size;
        sk.offload_optimizer = res.skipped[i].offload_optimizer;
        sk.offload_param = res.skipped[i].offload_param;
        rung_name(&sk, name, sizeof name);
        reason(&why, "%s not considered: %s", name, res.skipped[i].why);
    }
    const int last = res.chosen >= 0 ? res.chosen : res.count - 1;
    for (int i = 0; i <= last; i++) {
        const zero_plan_candidate *k = &res.cand[i];
        rung_name(k, name, sizeof name);
        if (!k->fits) {
            char miss[400];
            missing_text(k, &res, cpu_only, miss, sizeof miss);
            reason(&why, "%s does not fit%s: it needs %s", name,
                   act_known ? " even at micro-batch 1 with activation checkpointing" : "", miss);
        }
    }
    if (res.chosen >= 0) {
        const zero_plan_candidate *k = &res.cand[res.chosen];
        rung_name(k, name, sizeof name);
        char line[512];
        time_reason(line, sizeof line, &res, o.ranks, o.nodes, &rates, req.compute.seq_len);
        reason(&why, "%s", line);
        reason(&why, "%s fits: %s model states + %s transient + %s activations = %s of %s usable per rank%s",
               name, cli_fmt_bytes((double)k->mem.device + (cpu_only ? (double)k->mem.host : 0), a, sizeof a),
               cli_fmt_bytes((double)k->mem.transient, b, sizeof b),
               cli_fmt_bytes((double)k->activation, c, sizeof c), cli_fmt_bytes(k->need_device, d, sizeof d),
               cli_fmt_bytes(res.usable_device, e, sizeof e), act_known ? "" : " (activations unknown: not counted)");
        if (k->offload_optimizer == ZERO_OFFLOAD_CPU)
            reason(&why, "offload to cpu: the host keeps %s per node, %s pinned per rank (master weights and optimizer "
                         "states%s, and the %s gradient shard the host optimizer reads); each step "
                         "copies the gradient shard to the host and the updated parameters back",
                   cli_fmt_bytes(k->need_host, a, sizeof a), cli_fmt_bytes((double)k->mem.pinned, b, sizeof b),
                   k->offload_param == ZERO_OFFLOAD_CPU ? ", the parameter shard" : "",
                   cli_fmt_bytes((double)k->mem.grad_staging, c, sizeof c));
        if (k->offload_optimizer == ZERO_OFFLOAD_NVME)
            reason(&why, "offload to NVMe: %s per node on the drive (master weights and optimizer "
                         "states%s), swapped through a %s host pool per rank%s%s; each step reads and "
                         "writes them once",
                   cli_fmt_bytes(k->need_nvme, a, sizeof a),
                   k->offload_param == ZERO_OFFLOAD_NVME ? ", and the parameter shard" : "",
                   cli_fmt_bytes((double)k->mem.pool, b, sizeof b), cpu_only ? "" : " (pinned), beside the pinned gradient shard of ",
                   cpu_only ? "" : cli_fmt_bytes((double)k->mem.grad_staging, c, sizeof c));
        if (act_known) {
            const int64_t *vm = k->variant_micro_batch;
            const double *vs = k->variant_seconds;
            if (k->checkpointing && !vm[0]) {
                reason(&why, "activation checkpointing on: without it micro-batch 1 needs %s of activations and "
                             "does not fit; the recompute costs %s a step",
                       cli_fmt_bytes((double)m.plan.activation(m.plan.activation_ctx, 1, 0), a, sizeof a),
                       cli_fmt_seconds(k->time.recompute, b, sizeof b));
            } else if (k->checkpointing) {
                reason(&why, "activation checkpointing on: micro-batch %lld with it (%s/step, %s a sequence) "
                             "is faster than %lld without (%s/step, %s a sequence)",
                       (long long)vm[1], cli_fmt_seconds(vs[1], a, sizeof a),
                       cli_fmt_seconds(vs[1] / (double)vm[1], b, sizeof b), (long long)vm[0],
                       cli_fmt_seconds(vs[0], c, sizeof c), cli_fmt_seconds(vs[0] / (double)vm[0], d, sizeof d));
            } else if (vm[1] && vm[1] > vm[0]) {
                reason(&why, "activation checkpointing off: micro-batch %lld fits without it (%s a sequence); "
                             "with it %lld would (%s a sequence: the recompute costs more than it saves)",
                       (long long)vm[0], cli_fmt_seconds(vs[0] / (double)vm[0], a, sizeof a), (long long)vm[1],
                       cli_fmt_seconds(vs[1] / (double)vm[1], b, sizeof b));
            } else {
                reason(&why, "activation checkpointing off: micro-batch %lld fits without it",
                       (long long)k->micro_batch);
            }
            if (k->micro_batch < req.max_micro_batch)
                reason(&why, "micro-batch %lld: the largest that fits (%lld would need %s of activations)",
                       (long long)k->micro_batch, (long long)k->micro_batch + 1,
                       cli_fmt_bytes((double)m.plan.activation(m.plan.activation_ctx, k->micro_batch + 1,
                                                               k->checkpointing), a, sizeof a));
            else
                reason(&why, "micro-batch %lld: the largest considered (--micro-batch)", (long long)k->micro_batch);
        } else {
            reason(&why, "micro-batch %lld: activations unknown for a bare --params model (give --layers "
                         "and --dim to size them)", (long long)k->micro_batch);
        }
    }

    const zero_plan_candidate *k = &res.cand[res.closest];
    zero_plan_traffic t;
    if (m.unit_frozen)
        zero_plan_traffic_frozen(k->stage, o.ranks, k->mem.padded, o.precision, k->mem.frozen_padded, o.frozen_dtype, &t);
    else
        zero_plan_traffic_of(k->stage, o.ranks, k->mem.padded, o.precision, &t);
    const double secs = zero_plan_link_seconds(&t, link);
    char missing[600] = "";
    if (res.chosen < 0) missing_text(k, &res, cpu_only, missing, sizeof missing);

    if (o.json) {
        printf("{\"model\": \"%s\", \"params\": %llu, \"ranks\": %d, \"nodes\": %d, \"precision\": \"%s\", "
               "\"optimizer\": \"%s\", \"device_mem\": ",
               m.name, (unsigned long long)m.params, o.ranks, o.nodes, zero_dtype_name(o.precision),
               zero_optim_name(o.optimizer));
        cli_json_double(stdout, device);
        printf(", \"host_mem\": ");
        cli_json_double(stdout, host);
        printf(", \"nvme_mem\": ");
        cli_json_double(stdout, nvme);
        printf(", \"headroom\": ");
        cli_json_double(stdout, headroom);
        printf(", \"optimizer_states\": \"%s\"", q8 ? "int8" : "fp32");
        if (m.unit_frozen) {
            printf(", \"lora\": {\"r\": %d, \"alpha\": ", m.lora_r);
            cli_json_double(stdout, m.lora_alpha);
            printf(", \"targets\": ");
            cli_json_string(stdout, m.lora_targets);
            printf(", \"trainable_params\": %llu, \"frozen_params\": %llu, \"frozen_bytes\": %llu}",
                   (unsigned long long)m.trainable, (unsigned long long)m.frozen_params,
                   (unsigned long long)(res.cand[0].mem.frozen * wf));
        } else {
            printf(", \"lora\": null");
        }
        printf(", \"quantize_base\": \"%s\", \"quantize_base_chosen\": %s",
               o.quant_base == ZERO_QFMT_NONE ? "none" : o.quant_base == ZERO_QFMT_INT8 ? "int8" : "nf4",
               base_bytes_before ? "true" : "false");
        printf(", \"skipped\": [");
        for (int i = 0; i < res.skipped_count; i++) {
            printf("%s{\"stage\": %d, \"offload_optimizer\": \"%s\", \"offload_param\": \"%s\", "
                   "\"hpz_partition_size\": %d, \"why\": ", i ? ", " : "", res.skipped[i].stage,
                   zero_plan_offload_name(res.skipped[i].offload_optimizer),
                   zero_plan_offload_name(res.skipped[i].offload_param), res.skipped[i].hpz_partition_size);
            cli_json_string(stdout, res.skipped[i].why);
            printf("}");
        }
        printf("]");
        printf(", \"fits\": %s, \"stage\": %d, \"hpz_partition_size\": %d, \"offload_optimizer\": \"%s\", "
               "\"offload_param\": \"%s\", \"micro_batch\": %lld, \"activation_checkpointing\": %s, ",
               res.chosen >= 0 ? "true" : "false", k->stage, k->hpz_partition_size, zero_plan_offload_name(k->offload_optimizer),
               zero_plan_offload_name(k->offload_param), (long long)k->micro_batch,
               k->checkpointing ? "true" : "false");
        printf("\"device_bytes\": %llu, \"host_bytes\": %llu, \"pinned_bytes\": %llu, \"nvme_bytes\": %llu, "
               "\"transient_bytes\": %llu, \"activation_bytes\": ",
               (unsigned long long)k->mem.device, (unsigned long long)k->mem.host, (unsigned long long)k->mem.pinned,
               (unsigned long long)k->mem.nvme, (unsigned long long)k->mem.transient);
        if (act_known) printf("%llu", (unsigned long long)k->activation);
        else printf("null");
        printf(", \"need_device\": ");
        cli_json_double(stdout, k->need_device);
        printf(", \"need_host\": ");
        cli_json_double(stdout, k->need_host);
        printf(", \"need_nvme\": ");
        cli_json_double(stdout, k->need_nvme);
        printf(", \"missing\": {\"device\": ");
        cli_json_double(stdout, k->missing_device);
        printf(", \"host\": ");
        cli_json_double(stdout, k->missing_host);
        printf(", \"nvme\": ");
        cli_json_double(stdout, k->missing_nvme);
        printf("}, \"traffic_bytes\": ");
        cli_json_double(stdout, t.volume);
        printf(", \"traffic_sent_bytes\": ");
        cli_json_double(stdout, t.sent);
        printf(", \"traffic_seconds\": ");
        if (link > 0) cli_json_double(stdout, secs);
        else printf("null");
        printf(", \"config\": ");
        if (out_path && res.chosen >= 0) cli_json_string(stdout, out_path);
        else printf("null");
        json_plan_time(&res, &rates, &req, o.ranks);
        printf(", \"rungs\": [");
        for (int i = 0; i < res.count; i++) {
            const zero_plan_candidate *r = &res.cand[i];
            rung_name(r, name, sizeof name);
            printf("%s{\"name\": \"%s\", \"stage\": %d, \"hpz_partition_size\": %d, \"offload_optimizer\": \"%s\", "
                   "\"offload_param\": \"%s\", \"fits\": %s, \"micro_batch\": %lld, \"activation_checkpointing\": %s, "
                   "\"need_device\": ",
                   i ? ", " : "", name, r->stage, r->hpz_partition_size, zero_plan_offload_name(r->offload_optimizer),
                   zero_plan_offload_name(r->offload_param), r->fits ? "true" : "false",
                   (long long)r->micro_batch, r->checkpointing ? "true" : "false");
            cli_json_double(stdout, r->need_device);
            printf(", \"device_bytes\": %llu, \"host_bytes\": %llu, \"pinned_bytes\": %llu, \"grad_staging_bytes\": %llu, "
                   "\"staging_bytes\": %llu, \"nvme_bytes\": %llu, \"transient_bytes\": %llu, \"activation_bytes\": %llu",
                   (unsigned long long)r->mem.device, (unsigned long long)r->mem.host, (unsigned long long)r->mem.pinned,
                   (unsigned long long)r->mem.grad_staging, (unsigned long long)r->mem.staging, (unsigned long long)r->mem.nvme,
                   (unsigned long long)r->mem.transient, (unsigned long long)r->activation);
            printf(", \"need_host\": ");
            cli_json_double(stdout, r->need_host);
            printf(", \"need_nvme\": ");
            cli_json_double(stdout, r->need_nvme);
            json_rung_time(r, o.ranks, req.compute.seq_len);
            printf("}");
        }
        printf("], \"reasons\": [");
        for (int i = 0; i < why.n; i++) {
            printf("%s", i ? ", " : "");
            cli_json_string(stdout, why.text[i]);
        }
        printf("]}\n");
    } else {
        printf("plan for %s (%llu parameters): %d rank%s on %d node%s, %s, %s\n", m.name,
               (unsigned long long)m.params, o.ranks, o.ranks == 1 ? "" : "s", o.nodes,
               o.nodes == 1 ? "" : "s", zero_dtype_name(o.precision), zero_optim_name(o.optimizer));
        if (cpu_only)
            printf("hardware: CPU only, %s RAM per node: %s usable per rank",
                   cli_fmt_bytes(host, a, sizeof a), cli_fmt_bytes(res.usable_device, b, sizeof b));
        else
            printf("hardware: %s device memory per rank, %s host memory per node: %s and %s usable",
                   cli_fmt_bytes(device, a, sizeof a), cli_fmt_bytes(host, b, sizeof b),
                   cli_fmt_bytes(res.usable_device, c, sizeof c), cli_fmt_bytes(res.usable_host, d, sizeof d));
        printf(" (%.0f%% kept free)", headroom * 100);
        if (nvme > 0) printf("; NVMe %s per node", cli_fmt_bytes(nvme, a, sizeof a));
        else printf("; no NVMe (NVMe offload not considered)");
        printf("\n");
        cli_rates_note(stdout, &rates, o.nodes, res.ranks_per_node, device > 0);
        printf("\n");
        print_rungs(&res, o.ranks, req.compute.seq_len, cpu_only);
        printf("\n");
        if (res.chosen >= 0) {
            rung_name(k, name, sizeof name);
            printf("choice: %s, micro-batch %lld, activation checkpointing %s%s%s\n", name,
                   (long long)k->micro_batch, k->checkpointing ? "on" : "off",
                   q8 ? ", optimizer states int8 (--optimizer-states int8)" : "",
                   base_bytes_before ? ", the base's linear weights in NF4 (--quantize-base nf4)" : "");
        } else {
            printf("nothing fits\n");
        }
        printf("why:\n");
        for (int i = 0; i < why.n; i++) printf("  - %s\n", why.text[i]);
        if (res.chosen >= 0) {
            printf("step time of the choice: ");
            cli_print_time(stdout, &k->time);
            printf("%s\n", rates.r.overlap > 0           ? ""
                            : k->time.comm_hidden_backward > 0 ? " (only the backward's reductions overlap compute: overlap 0)"
                                                                : " (communication not overlapped with compute: overlap 0)");
        }
        printf("traffic per step per rank: %s = %s (each rank sends %s)", k->stage == 3 ? "3 Psi" : "2 Psi",
               cli_fmt_bytes(t.volume, a, sizeof a), cli_fmt_bytes(t.sent, b, sizeof b));
        if (o.nodes > 1)
            printf("; across nodes %s per node each way: %s on %.4g Gbit/s links (in the step time above)\n",
                   cli_fmt_bytes(k->time.cross_bytes, c, sizeof c), cli_fmt_seconds(k->time.comm_cross, d, sizeof d),
                   rates.r.link_bytes * 8 / 1e9);
        else if (link > 0)
            printf(": %.3g s on a %g Gbit/s link of each rank's own (one node: not in the step time; give --nodes)\n",
                   secs, link);
        else printf("\n");
    }
    if (res.chosen < 0) {
        rung_name(k, name, sizeof name);
        rc = cli_error(CLI_RUNTIME, "plan: nothing fits: the closest, %s at micro-batch 1%s, needs %s%s",
                       name, k->checkpointing ? " with activation checkpointing" : "", missing,
                       nvme > 0 ? "" : "; NVMe offload was not considered (give --nvme)");
        cli_sizing_model_free(&m);
        return rc;
    }
    if (out_path) {
        rc = write_config(out_path, &o, &m, k, res.optim_states == ZERO_OPTIM_STATES_INT8, nvme_path);
        if (rc != CLI_OK) {
            cli_sizing_model_free(&m);
            return rc;
        }
        if (!o.json) {
            /* The flags that make `zero train` build the model the plan sized: the shape
             * overrides and the sequence length (train's default is shorter than the context). */
            if (!m.layers) {
                printf("config: %s (a --params model has no shape: run zero train --config %s "
                       "--ranks %d with your model's flags%s)\n", out_path, out_path, o.ranks,
                       k->checkpointing ? " and --activation-checkpointing" : "");
                cli_sizing_model_free(&m);
                return CLI_OK;
            }
            printf("config: %s; run: zero train --config %s", out_path, out_path);
            if (m.from_dir) {
                /* a model directory: its weights (fine-tuning), or its shape from scratch */
                printf(" %s %s", m.has_weights ? "--init-from" : "--model", o.model);
            } else {
                /* A custom shape starts from gpt2's vocabulary and context, as the planner's does. */
                printf(" --model %s", o.model ? o.model : "gpt2");
                if (o.layers) printf(" --layers %d", m.layers);
                if (o.dim) printf(" --dim %d", m.dim);
                if (o.heads || (!o.model && o.dim)) printf(" --heads %d", m.heads);
                if (o.vocab) printf(" --vocab %d", m.vocab);
            }
            printf(" --seq %d", m.seq);
            printf(" --ranks %d%s\n", o.ranks, k->checkpointing ? " --activation-checkpointing" : "");
        }
    }
    cli_sizing_model_free(&m);
    return CLI_OK;
}
