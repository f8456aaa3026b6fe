/* The step-time side of `zero plan` and `zero estimate`: the machine's rates (the file `zero bench
 * rates` writes, or documented defaults), --rates and --link-gbps, the model's FLOPs, and printing. */
#include "cli.h"

#include "decoder/decoder.h"
#include "decoder/lora.h"
#include "decoder/pref.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int cli_time_flag(cli_time_opts *t, int argc, char **argv, int *i) {
    const char *a = argv[*i], *v;
    if (!strcmp(a, "--rates")) {
        if (!(v = cli_flag_value(argc, argv, i))) return -1;
        if (!*v) {
            cli_error(CLI_USAGE, "--rates '': expected a rates file (zero bench rates), cpu or gpu");
            return -1;
        }
        t->rates = v;
        return 1;
    }
    if (!strcmp(a, "--link-gbps")) {
        if (!(v = cli_flag_value(argc, argv, i)) || cli_parse_double(a, v, 1e-6, 1e9, &t->link_gbps)) return -1;
        return 1;
    }
    return 0;
}

int cli_rates_default_path(char *buf, size_t cap) {
    const char *env = getenv("ZERO_RATES"), *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    int n;
    if (env && *env) n = snprintf(buf, cap, "%s", env);
    else if (xdg && *xdg) n = snprintf(buf, cap, "%s/zero/rates.json", xdg);
    else if (home && *home) n = snprintf(buf, cap, "%s/.cache/zero/rates.json", home);
    else return 0;
    return n > 0 && (size_t)n < cap;
}

/* The rates file's fields: JSON key, scale to the library's unit, where it goes. */
typedef struct rate_key {
    const char *key;
    double scale;
    size_t off;
} rate_key;

#define RK(k, s, f) {k, s, offsetof(zero_plan_rates, f)}
static const rate_key rate_keys[] = {
    RK("gemm_gflops", 1e9, compute_flops),
    RK("model_gflops", 1e9, compute_flops), /* after gemm_gflops: the model's own rate wins */
    RK("mem_gbps", 1e9, mem_bytes),
    RK("host_mem_gbps", 1e9, host_mem_bytes),
    RK("node_all_reduce_gbps", 1e9, node_all_reduce),
    RK("node_reduce_scatter_gbps", 1e9, node_reduce_scatter),
    RK("node_all_gather_gbps", 1e9, node_all_gather),
    RK("link_gbps", 1e9 / 8, link_bytes),
    RK("link_all_reduce_gbps", 1e9 / 8, link_all_reduce),
    RK("link_reduce_scatter_gbps", 1e9 / 8, link_reduce_scatter),
    RK("link_all_gather_gbps", 1e9 / 8, link_all_gather),
    RK("latency_us", 1e-6, latency),
    RK("host_link_gbps", 1e9, host_link_bytes),
    RK("disk_read_gbps", 1e9, disk_read_bytes),
    RK("disk_write_gbps", 1e9, disk_write_bytes),
    RK("q8_update_gelems", 1e9, q8_update_elems),
    RK("dequant_gelems", 1e9, dequant_elems),
    RK("overlap", 1, overlap),
    RK("link_all_reduce_progress", 1, progress_all_reduce),
    RK("link_reduce_scatter_progress", 1, progress_reduce_scatter),
    RK("link_all_gather_progress", 1, progress_all_gather),
};
#undef RK
#define NKEYS (sizeof rate_keys / sizeof rate_keys[0])

static double *field(zero_plan_rates *r, size_t off) { return (double *)((char *)r + off); }

/* The keys that are fractions in [0, 1], not rates. */
static int is_share(size_t off) {
    return off == offsetof(zero_plan_rates, overlap) || off == offsetof(zero_plan_rates, progress_all_reduce) ||
           off == offsetof(zero_plan_rates, progress_reduce_scatter) || off == offsetof(zero_plan_rates, progress_all_gather);
}

/* What zero bench rates writes besides the rates: a key of neither kind is a typo or another file. */
static const char *const info_keys[] = {"kind", "version", "measured_at", "host", "ranks", "ranks_per_node", "nodes",
                                        "threads_per_rank", "shape", "message_bytes"};

/* Reads a rates file into out->r over the defaults of its "kind" (cpu when absent). */
static int load(const char *path, cli_rates *out) {
    char *text = NULL;
    size_t n = 0;
    zero_error err;
    zero_status st = zero_read_file(path, 1 << 20, &text, &n, &err);
    if (st != ZERO_OK) return cli_error(CLI_USAGE, "--rates '%s': %s", path, err.msg);
    st = zero_json_check(text, n, 1 << 12, ZERO_JSON_MAX_DEPTH, &err);
    cJSON *j = st == ZERO_OK ? cJSON_ParseWithLength(text, n) : NULL;
    free(text);
    if (st != ZERO_OK) return cli_error(CLI_USAGE, "--rates '%s': %s", path, err.msg);
    if (!cJSON_IsObject(j)) {
        cJSON_Delete(j);
        return cli_error(CLI_USAGE, "--rates '%s': expected a JSON object of rates (zero bench rates writes one; "
                         "docs/PLANNING.md §9)", path);
    }
    int rc = CLI_OK;
    for (const cJSON *it = j->child; it; it = it->next) {
        int known = 0;
        for (size_t k = 0; k < NKEYS && !known; k++) known = !strcmp(it->string, rate_keys[k].key);
        for (size_t k = 0; k < sizeof info_keys / sizeof info_keys[0] && !known; k++) known = !strcmp(it->string, info_keys[k]);
        if (!known) {
            rc = cli_error(CLI_USAGE, "--rates '%s': unknown key \"%.100s\": expected the keys zero bench rates writes "
                           "(docs/PLANNING.md §9)", path, it->string);
            goto done;
        }
    }
    const cJSON *kind = cJSON_GetObjectItemCaseSensitive(j, "kind");
    int gpu = 0;
    if (kind && !cJSON_IsNull(kind)) {
        if (!cJSON_IsString(kind) || (strcmp(kind->valuestring, "cpu") && strcmp(kind->valuestring, "gpu"))) {
            rc = cli_error(CLI_USAGE, "--rates '%s': \"kind\": expected \"cpu\" or \"gpu\"", path);
            goto done;
        }
        gpu = !strcmp(kind->valuestring, "gpu");
    }
    zero_plan_rates_default(&out->r, gpu);
    out->gpu = gpu;
    for (size_t k = 0; k < NKEYS; k++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(j, rate_keys[k].key);
        if (!v || cJSON_IsNull(v)) continue;
        const double hi = is_share(rate_keys[k].off) ? 1 : 1e12;
        if (!cJSON_IsNumber(v) || !(v->valuedouble >= 0 && v->valuedouble <= hi)) {
            rc = cli_error(CLI_USAGE, "--rates '%s': \"%s\": expected a number in [0, %g]", path,
                           rate_keys[k].key, hi);
            goto done;
        }
        *field(&out->r, rate_keys[k].off) = v->valuedouble * rate_keys[k].scale;
        if (!strcmp(rate_keys[k].key, "link_gbps")) out->link_measured_gbps = v->valuedouble;
        if (rate_keys[k].off == offsetof(zero_plan_rates, compute_flops))
            snprintf(out->compute_from, sizeof out->compute_from, "%s", rate_keys[k].key);
        out->from_file++;
    }
    const cJSON *at = cJSON_GetObjectItemCaseSensitive(j, "measured_at");
    if (cJSON_IsString(at)) snprintf(out->measured_at, sizeof out->measured_at, "%s", at->valuestring);
    const cJSON *ranks = cJSON_GetObjectItemCaseSensitive(j, "ranks_per_node");
    if (cJSON_IsNumber(ranks)) out->ranks_per_node = ranks->valueint;
    const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(j, "nodes");
    if (cJSON_IsNumber(nodes)) out->nodes = nodes->valueint;
    snprintf(out->source, sizeof out->source, "%s", path);
done:
    cJSON_Delete(j);
    return rc;
}

int cli_rates_resolve(const cli_time_opts *t, int gpu, cli_rates *out) {
    memset(out, 0, sizeof *out);
    const char *want = t->rates;
    char path[4096];
    if (want && (!strcmp(want, "cpu") || !strcmp(want, "gpu"))) {
        out->gpu = !strcmp(want, "gpu");
        zero_plan_rates_default(&out->r, out->gpu);
    } else if (want) {
        int rc = load(want, out);
        if (rc != CLI_OK) return rc;
    } else if (cli_rates_default_path(path, sizeof path) && access(path, F_OK) == 0) {
        int rc = load(path, out);
        if (rc != CLI_OK) return rc;
    } else {
        out->gpu = gpu;
        zero_plan_rates_default(&out->r, gpu);
    }
    if (t->link_gbps > 0) {
        /* each collective keeps its measured share of the measured link */
        const double scale = out->link_measured_gbps > 0 ? t->link_gbps / out->link_measured_gbps : 0;
        out->r.link_all_reduce *= scale;
        out->r.link_reduce_scatter *= scale;
        out->r.link_all_gather *= scale;
        out->r.link_bytes = t->link_gbps * 1e9 / 8;
        snprintf(out->link_from, sizeof out->link_from, "--link-gbps");
    } else if (out->link_measured_gbps > 0) {
        snprintf(out->link_from, sizeof out->link_from, "measured");
    } else {
        snprintf(out->link_from, sizeof out->link_from, "default");
    }
    return CLI_OK;
}

/* A rate for humans: 3 significant digits, no exponent. */
static const char *num(double v, char *buf, size_t cap) {
    snprintf(buf, cap, v >= 1000 ? "%.0f" : "%.3g", v);
    return buf;
}

void cli_rates_note(FILE *f, const cli_rates *r, int nodes, int ranks_per_node, int gpu_asked) {
    char n1[32], n2[32], n3[32];
    const zero_plan_rates *x = &r->r;
    if (r->source[0])
        fprintf(f, "rates: measured by zero bench rates%s%s (%s)", r->measured_at[0] ? " at " : "", r->measured_at,
                r->source);
    else
        fprintf(f, "rates: defaults for a %s machine, not measured (zero bench rates measures this one; "
                   "docs/PLANNING.md §9)", r->gpu ? "GPU" : "CPU-only");
    fprintf(f, ": compute %s GFLOP/s%s and memory %s GB/s per rank", num(x->compute_flops / 1e9, n1, sizeof n1),
            !strcmp(r->compute_from, "model_gflops")  ? " (the model's forward + backward)"
            : !strcmp(r->compute_from, "gemm_gflops") ? " (GEMM on the model's shapes)"
                                                      : "",
            num(x->mem_bytes / 1e9, n2, sizeof n2));
    if (ranks_per_node > 1)
        fprintf(f, ", in-node busbw %s/%s/%s GB/s (all-reduce/reduce-scatter/all-gather)",
                num(x->node_all_reduce / 1e9, n1, sizeof n1), num(x->node_reduce_scatter / 1e9, n2, sizeof n2),
                num(x->node_all_gather / 1e9, n3, sizeof n3));
    if (nodes > 1) {
        fprintf(f, ", links %.4g Gbit/s", x->link_bytes * 8 / 1e9);
        if (!strcmp(r->link_from, "--link-gbps")) fprintf(f, " (--link-gbps)");
        else if (!strcmp(r->link_from, "measured")) fprintf(f, " (measured)");
        else fprintf(f, " (default: give --link-gbps)");
        fprintf(f, " + %.3g us a step, the backward's reductions moving at %.2g (all-reduce) / %.2g "
                   "(reduce-scatter) of their rate while it computes, stage 3's prefetched gathers at %.2g",
                x->latency * 1e6, x->progress_all_reduce, x->progress_reduce_scatter, x->progress_all_gather);
    }
    fprintf(f, ", overlap %.2g\n", x->overlap);
    if (r->source[0] && r->ranks_per_node > 0 && r->ranks_per_node != ranks_per_node)
        fprintf(f, "note: the rates were measured with %d rank%s per node, this plan has %d: per-rank rates "
                   "differ where ranks share cores or links\n",
                r->ranks_per_node, r->ranks_per_node == 1 ? "" : "s", ranks_per_node);
    if (r->source[0] && r->gpu != gpu_asked)
        fprintf(f, "note: the rates are of a %s machine, the plan is for a %s one (--rates %s for the defaults)\n",
                r->gpu ? "GPU" : "CPU-only", gpu_asked ? "GPU" : "CPU-only", gpu_asked ? "gpu" : "cpu");
    if (nodes > 1 && r->link_measured_gbps > 0 && !strcmp(r->link_from, "--link-gbps"))
        fprintf(f, "note: the rates file measured the links at %.4g Gbit/s; --link-gbps %.4g is used\n",
                r->link_measured_gbps, x->link_bytes * 8 / 1e9);
    if (nodes == 1 && !strcmp(r->link_from, "--link-gbps"))
        fprintf(f, "note: one node (--nodes 1): nothing crosses --link-gbps in the step time\n");
}

void cli_rates_json(FILE *f, const cli_rates *r) {
    fprintf(f, "{\"source\": ");
    if (r->source[0]) {
        cli_json_string(f, r->source);
    } else {
        fprintf(f, "\"defaults\"");
    }
    fprintf(f, ", \"kind\": \"%s\", \"link_from\": \"%s\", \"compute_from\": \"%s\", \"compute_gflops\": ",
            r->gpu ? "gpu" : "cpu", r->link_from, r->compute_from[0] ? r->compute_from : "default");
    cli_json_double(f, r->r.compute_flops / 1e9);
    for (size_t k = 0; k < NKEYS; k++) {
        if (rate_keys[k].off == offsetof(zero_plan_rates, compute_flops)) continue;
        fprintf(f, ", \"%s\": ", rate_keys[k].key);
        cli_json_double(f, *field((zero_plan_rates *)&r->r, rate_keys[k].off) / rate_keys[k].scale);
    }
    fputc('}', f);
}

/* The default tokens per sequence of a --params model (no shape, no --seq): GPT-2's context. */
#define PARAMS_DEFAULT_SEQ 1024

void cli_sizing_compute(const cli_sizing_opts *o, const cli_sizing_model *m, zero_plan_compute *out) {
    memset(out, 0, sizeof *out);
    /* zero train --objective dpo|orpo: the log-likelihood pass before each micro-batch's forward and
     * backward; ORPO's micro-batch computes its chosen sequences twice */
    out->fwd_only_passes = o->objective ? 1.0 : 0.0;
    out->seq_factor = o->objective == DEC_OBJ_ORPO ? 1.5 : 1.0;
    if (m->cfg) {
        /* Per token of a forward, for a decoder of L layers over T tokens (docs/PLANNING.md §9),
         * from its per-layer shapes: width C, H query heads and G key/value heads of D, MLP width F
         * (two first products with SwiGLU: gate and up), vocabulary V. The four matrix products
         * 2 (C (Q + 2 KV) + Q C + C FC + F C) with Q = H D, KV = G D; attention's scores and
         * weighted sum 2 x 2 T Q (the full T x T products, as models/decoder computes them); the
         * LM head 2 C V. Checkpointing recomputes every layer but the last, whose activations the
         * backward still holds. */
        const dec_config *c = m->cfg;
        const double C = c->n_embd, T = m->seq, V = c->vocab, L = c->n_layer, F = c->n_inner;
        const double Q = (double)c->n_head * c->head_dim, KV = (double)c->n_kv_head * c->head_dim;
        const double FC = dec_is_llama(c) ? 2 * F : F;
        const double layer = 2 * (C * (Q + 2 * KV) + Q * C + C * FC + F * C) + 4 * T * Q;
        out->fwd_flops_per_token = L * layer + 2 * C * V;
        out->recompute_flops_per_token = (L - 1) * layer;
        out->seq_len = m->seq;
        /* --quantize-base: the weights kept as records (dec_lora_quantizes), decoded in each pass;
         * an untied embedding table's lookup decodes a row a token only (not counted) */
        if (o->quant_base != ZERO_QFMT_NONE) {
            dec_param_desc d;
            for (int i = 0; i < dec_num_tensors(c) && !dec_tensor_desc(c, i, &d); i++)
                if (dec_lora_quantizes(c, &d, o->quant_embed) && (d.unit != DEC_UNIT_EMBEDDINGS || c->tied))
                    out->dequant_per_pass += (double)d.numel;
        }
        /* The backward's order (models/decoder): the head's (two products), after which the final
         * unit's gradient is complete; the layers from the last (each recomputed under
         * checkpointing, but the last), each then complete; the embeddings' (no products) last. */
        if (m->bwd) {
            int n = 0;
            m->bwd[n++] = (zero_plan_bwd_piece){2 * 2 * C * V, 0, c->n_layer + 1};
            for (int l = c->n_layer - 1; l >= 0; l--)
                m->bwd[n++] = (zero_plan_bwd_piece){2 * layer, l == c->n_layer - 1 ? 0 : layer, 1 + l};
            m->bwd[n++] = (zero_plan_bwd_piece){0, 0, DEC_UNIT_EMBEDDINGS};
            out->bwd = m->bwd;
            out->bwd_pieces = n;
        }
    } else {
        /* No shape: 2 FLOPs per parameter and token, attention unknown. */
        out->fwd_flops_per_token = 2.0 * (double)m->params;
        out->seq_len = o->seq ? o->seq : PARAMS_DEFAULT_SEQ;
    }
}

const char *cli_fmt_seconds(double s, char *buf, size_t cap) {
    if (s >= 100) snprintf(buf, cap, "%.0f s", s);
    else if (s >= 1) snprintf(buf, cap, "%.2f s", s);
    else if (s >= 1e-3) snprintf(buf, cap, "%.1f ms", s * 1e3);
    else snprintf(buf, cap, "%.1f us", s * 1e6);
    return buf;
}

void cli_json_time(FILE *f, const zero_plan_time *t) {
    const struct { const char *k; double v; } v[] = {
        {"compute", t->compute},         {"recompute", t->recompute},   {"comm_node", t->comm_node},
        {"comm_cross", t->comm_cross},   {"comm_hidden", t->comm_hidden}, {"comm_hidden_backward", t->comm_hidden_backward},
        {"comm_hidden_gathers", t->comm_hidden_gathers},
        {"optimizer", t->optimizer},
        {"host_copy", t->host_copy},     {"disk", t->disk},             {"dequant", t->dequant},
        {"total", t->total},
        {"cross_bytes", t->cross_bytes}, {"node_bytes", t->node_bytes}, {"disk_read", t->disk_read},
        {"disk_written", t->disk_written},
    };
    fputc('{', f);
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        fprintf(f, "%s\"%s\": ", i ? ", " : "", v[i].k);
        cli_json_double(f, v[i].v);
    }
    fprintf(f, ", \"collectives\": %d}", t->collectives);
}

void cli_print_time(FILE *f, const zero_plan_time *t) {
    char a[32], b[32], c[32], d[32], e[32], g[32];
    fprintf(f, "compute %s", cli_fmt_seconds(t->compute, a, sizeof a));
    if (t->recompute > 0) fprintf(f, " + recompute %s", cli_fmt_seconds(t->recompute, a, sizeof a));
    if (t->comm_node > 0) fprintf(f, " + in-node comm %s", cli_fmt_seconds(t->comm_node, b, sizeof b));
    if (t->comm_cross > 0)
        fprintf(f, " + across nodes %s (%s per node each way)", cli_fmt_seconds(t->comm_cross, c, sizeof c),
                cli_fmt_bytes(t->cross_bytes, g, sizeof g));
    if (t->comm_hidden_backward > 0)
        fprintf(f, " - behind the backward %s", cli_fmt_seconds(t->comm_hidden_backward, d, sizeof d));
    if (t->comm_hidden_gathers > 0)
        fprintf(f, " - gathers behind the compute %s", cli_fmt_seconds(t->comm_hidden_gathers, d, sizeof d));
    const double other = t->comm_hidden - t->comm_hidden_backward - t->comm_hidden_gathers;
    if (other > 0) fprintf(f, " - overlapped %s", cli_fmt_seconds(other, d, sizeof d));
    fprintf(f, " + update %s", cli_fmt_seconds(t->optimizer, e, sizeof e));
    if (t->host_copy > 0) fprintf(f, " + host copies %s", cli_fmt_seconds(t->host_copy, a, sizeof a));
    if (t->disk > 0) fprintf(f, " + NVMe %s", cli_fmt_seconds(t->disk, a, sizeof a));
    if (t->dequant > 0) fprintf(f, " + decoding the base %s", cli_fmt_seconds(t->dequant, a, sizeof a));
    fprintf(f, " = %s", cli_fmt_seconds(t->total, a, sizeof a));
}
