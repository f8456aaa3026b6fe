/* `zero export CKPT -o FILE`: a sharded checkpoint (any world size) as one consolidated
 * safetensors file with the parameters' own names (Hugging Face GPT-2's for the reference model),
 * streamed a chunk at a time, so memory stays a few MiB whatever the model's size. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "weights.h"

/* Elements read from the checkpoint, converted and written at a time: the export's memory. */
#define CHUNK (256u * 1024u)

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero export CKPT -o FILE [--dtype fp32|bf16|fp16] [--json]\n"
            "\n"
            "Writes the fp32 master weights of checkpoint CKPT (a save directory, whose `latest` is\n"
            "followed, or one step directory), saved by any number of ranks at any stage, as one\n"
            "safetensors file with the parameters' names and shapes: for the reference GPT-2 those of\n"
            "Hugging Face's GPT-2 model.safetensors (wte.weight, h.0.attn.c_attn.weight, ... in the\n"
            "Conv1D (in, out) layout, no transpose). Metadata: format=pt, and n_layer, n_embd, n_head,\n"
            "n_ctx, vocab when the checkpoint records its model, so that `zero sample` and\n"
            "`zero train --init-from FILE` rebuild it. The checksums of every master tensor are\n"
            "verified before anything is written; FILE appears complete or not at all.\n"
            "\n"
            "  -o, --output FILE          the safetensors file to write (replaced atomically)\n"
            "  --dtype fp32|bf16|fp16     stored dtype (default fp32; bf16/fp16 round to nearest even)\n"
            "  --json                     print a JSON summary instead of a line of text\n"
            "Details: docs/CHECKPOINT.md (Export and import), docs/CLI.md.\n");
}

typedef struct export_opts {
    const char *ckpt, *out;
    zero_dtype dtype;
    int json;
} export_opts;

static int parse(int argc, char **argv, export_opts *o) {
    memset(o, 0, sizeof *o);
    o->dtype = ZERO_DTYPE_FP32;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            return 1;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            o->out = v;
        } else if (!strcmp(a, "--dtype")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            if (zero_dtype_parse(v, &o->dtype) != ZERO_OK ||
                (o->dtype != ZERO_DTYPE_FP32 && o->dtype != ZERO_DTYPE_BF16 && o->dtype != ZERO_DTYPE_FP16)) {
                cli_error(CLI_USAGE, "--dtype '%s': expected fp32, bf16 or fp16", v);
                return -1;
            }
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (a[0] == '-' && a[1]) {
            cli_error(CLI_USAGE, "unknown option '%s' for export (zero export --help lists them)", a);
            return -1;
        } else if (o->ckpt) {
            cli_error(CLI_USAGE, "export takes one checkpoint, got '%s' and '%s'", o->ckpt, a);
            return -1;
        } else {
            o->ckpt = a;
        }
    }
    if (!o->ckpt) {
        cli_error(CLI_USAGE, "export: expected a checkpoint directory (zero export CKPT -o FILE)");
        return -1;
    }
    if (!o->out) {
        cli_error(CLI_USAGE, "export: expected -o FILE, the safetensors file to write");
        return -1;
    }
    return 0;
}

/* Declares every parameter and the metadata. */
static zero_status declare(zero_st_writer *w, zero_ckpt *c, const cli_ckpt_params *ps, zero_dtype dt) {
    zero_status s = zero_st_writer_set_metadata(w, "format", "pt");
    gpt2_config g;
    if (s == ZERO_OK && !cli_ckpt_model(c, &g)) {
        const struct { const char *key; int v; } meta[] = {
            {"n_layer", g.n_layer}, {"n_embd", g.n_embd}, {"n_head", g.n_head}, {"n_ctx", g.n_ctx}, {"vocab", g.vocab}};
        for (size_t k = 0; k < sizeof meta / sizeof meta[0] && s == ZERO_OK; k++) {
            char v[32];
            snprintf(v, sizeof v, "%d", meta[k].v);
            s = zero_st_writer_set_metadata(w, meta[k].key, v);
        }
    }
    char step[32];
    snprintf(step, sizeof step, "%lld", (long long)zero_ckpt_step(c));
    if (s == ZERO_OK) s = zero_st_writer_set_metadata(w, "zero.step", step);
    for (int k = 0; k < ps->n && s == ZERO_OK; k++) s = zero_st_writer_add(w, ps->p[k].name, dt, ps->p[k].shape, ps->p[k].ndim);
    return s;
}

/* Streams every parameter: CHUNK elements read (fp32), converted, appended. */
static int stream(zero_st_writer *w, zero_ckpt *c, const cli_ckpt_params *ps, zero_dtype dt) {
    float *buf = malloc(CHUNK * sizeof(float));
    uint16_t *half = dt != ZERO_DTYPE_FP32 ? malloc(CHUNK * sizeof(uint16_t)) : NULL;
    int rc = CLI_OK;
    if (!buf || (dt != ZERO_DTYPE_FP32 && !half)) rc = cli_error(CLI_RUNTIME, "export: out of memory");
    for (int k = 0; k < ps->n && rc == CLI_OK; k++) {
        const cli_ckpt_param *q = &ps->p[k];
        char tname[512];
        snprintf(tname, sizeof tname, "%s/master", q->unit);
        for (uint64_t at = 0; at < q->numel && rc == CLI_OK; at += CHUNK) {
            const uint64_t n = q->numel - at < CHUNK ? q->numel - at : CHUNK;
            if (zero_ckpt_read_range(c, tname, q->offset + at, q->offset + at + n, buf) != ZERO_OK) {
                rc = cli_error(CLI_RUNTIME, "export: %s", zero_ckpt_last_error(c));
                break;
            }
            const void *src = buf;
            if (half) { /* element by element: zero_convert's threads cost more than they save on a chunk */
                if (dt == ZERO_DTYPE_BF16)
                    for (uint64_t i = 0; i < n; i++) half[i] = zero_fp32_to_bf16(buf[i]);
                else
                    for (uint64_t i = 0; i < n; i++) half[i] = zero_fp32_to_fp16(buf[i]);
                src = half;
            }
            if (zero_st_writer_write(w, src, (size_t)n * zero_dtype_size(dt)) != ZERO_OK)
                rc = cli_error(CLI_RUNTIME, "export: %s", zero_st_writer_last_error(w));
        }
    }
    free(half);
    free(buf);
    return rc;
}

int cli_export(int argc, char **argv) {
    export_opts o;
    int p = parse(argc, argv, &o);
    if (p == 1) {
        usage(stdout);
        return CLI_OK;
    }
    if (p < 0) return CLI_USAGE;
    zero_error err = {{0}};
    zero_ckpt *c = NULL;
    if (zero_ckpt_open(&c, NULL, o.ckpt, 0, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "%s", err.msg);
    cli_ckpt_params ps = {0};
    zero_st_writer *w = NULL;
    char msg[1024];
    int rc = CLI_OK;
    uint64_t numel = 0;
    const double t0 = zero_now();
    if (cli_ckpt_params_read(c, &ps, msg, sizeof msg) != ZERO_OK || cli_ckpt_verify_masters(c, msg, sizeof msg) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "export: %s", msg);
        goto out;
    }
    if (zero_st_writer_create(&w, NULL, o.out, &err) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "export: %s", err.msg);
        goto out;
    }
    if (declare(w, c, &ps, o.dtype) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "export: %s", zero_st_writer_last_error(w));
        goto out;
    }
    if ((rc = stream(w, c, &ps, o.dtype)) != CLI_OK) goto out;
    if (zero_st_writer_finish(w) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "export: %s", zero_st_writer_last_error(w));
        goto out;
    }
    for (int k = 0; k < ps.n; k++) numel += ps.p[k].numel;
    const uint64_t bytes = zero_st_writer_file_size(w);
    const double secs = zero_now() - t0;
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "checkpoint", zero_ckpt_dir(c));
        cJSON_AddNumberToObject(j, "step", (double)zero_ckpt_step(c));
        cJSON_AddNumberToObject(j, "world", zero_ckpt_world(c));
        cJSON_AddStringToObject(j, "output", o.out);
        cJSON_AddStringToObject(j, "dtype", zero_dtype_name(o.dtype));
        cJSON_AddNumberToObject(j, "tensors", ps.n);
        cJSON_AddNumberToObject(j, "params", (double)numel);
        cJSON_AddNumberToObject(j, "bytes", (double)bytes);
        cJSON_AddNumberToObject(j, "seconds", secs);
        cJSON_AddNumberToObject(j, "chunk_bytes", (double)CHUNK * sizeof(float));
        cJSON_AddNumberToObject(j, "rss_peak", (double)zero_rss_peak_bytes());
        char *text = cJSON_PrintUnformatted(j);
        if (text) printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(j);
    } else {
        char b1[32], b2[32];
        printf("exported step %lld of %s (%d rank%s): %d tensors, %llu parameters, %s -> %s (%s) in %.2f s, peak RSS %s\n",
               (long long)zero_ckpt_step(c), zero_ckpt_dir(c), zero_ckpt_world(c), zero_ckpt_world(c) == 1 ? "" : "s",
               ps.n, (unsigned long long)numel, zero_dtype_name(o.dtype), o.out, cli_fmt_bytes((double)bytes, b1, sizeof b1),
               secs, cli_fmt_bytes((double)zero_rss_peak_bytes(), b2, sizeof b2));
    }
out:
    zero_st_writer_free(w);
    cli_ckpt_params_free(&ps);
    zero_ckpt_close(c);
    return rc;
}
