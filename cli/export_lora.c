/* `zero export --adapter | --merge` of a LoRA checkpoint: the adapters as PEFT's adapter directory,
 * or the full model with the adapters folded into the base weights, streamed a chunk at a time. */
#include "export_lora.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "decoder/hf.h"
#include "decoder/peft.h"

struct lora_export {
    int adapter;         /* --adapter, else --merge */
    dec_config cfg;
    dec_lora l;
    double s;            /* the scaling */
    const cli_ckpt_params *ps;
    dec_hf *base;        /* the base directory (merge without a saved base) */
    char base_dir[4096];
    /* the adapter pair of the base weight being merged */
    const cli_ckpt_param *cur, *qa, *qb;
    float *A, *B;
    /* a quantized base's run (zero_config_base_format of its record): the base weight being merged
     * as the run saw it, coded and decoded whole */
    zero_qformat qfmt;
    int qembed; /* its embeddings and LM head quantized too (zero_config.quant_embed) */
    const cli_ckpt_param *qcur;
    float *qvals;
};

static const cli_ckpt_param *find(const cli_ckpt_params *ps, const char *name) {
    for (int k = 0; k < ps->n; k++)
        if (!strcmp(ps->p[k].name, name)) return &ps->p[k];
    return NULL;
}

void export_lora_free(lora_export *x) {
    if (!x) return;
    dec_hf_close(x->base);
    free(x->A), free(x->B), free(x->qvals);
    free(x);
}

int export_lora_adapter(const lora_export *x) { return x && x->adapter; }
double export_lora_alpha_for_scale_over_r(const lora_export *x) { return x->s * x->l.r; }

int export_lora_open(zero_ckpt *c, const cli_ckpt_params *ps, const cli_model *m, int adapter, int merge,
                     const char *base, lora_export **out) {
    *out = NULL;
    const char *targets = NULL, *hash = NULL, *dir = NULL;
    const int lora = zero_ckpt_user_string(c, "lora.targets", &targets) == ZERO_OK;
    int frozen = 0, saved = 1;
    char t[512];
    for (int k = 0; k < ps->n; k++)
        if (ps->p[k].frozen) frozen = 1, saved &= zero_ckpt_find(c, cli_ckpt_param_tensor(&ps->p[k], t, sizeof t)) >= 0;
    if (adapter && merge) return cli_error(CLI_USAGE, "export: --adapter and --merge: expected one of them");
    if ((adapter || merge || base) && !lora)
        return cli_error(CLI_USAGE, "export: %s: %s is not the checkpoint of a LoRA run", adapter ? "--adapter" : merge ? "--merge" : "--base",
                         zero_ckpt_dir(c));
    if (!lora) {
        if (frozen && !saved)
            return cli_error(CLI_RUNTIME, "export: %s holds frozen parameters without their values (saved without "
                             "save_frozen)", zero_ckpt_dir(c));
        return CLI_OK; /* the plain export (frozen parameters read from "<unit>/frozen") */
    }
    if (!adapter && !merge)
        return cli_error(CLI_USAGE, "export: %s holds LoRA adapters: expected --adapter (PEFT's adapter directory) or "
                         "--merge (the full model with the adapters folded in)", zero_ckpt_dir(c));
    lora_export *x = calloc(1, sizeof *x);
    if (!x) return cli_error(CLI_RUNTIME, "export: out of memory");
    x->adapter = adapter;
    x->cfg = m->cfg;
    x->ps = ps;
    zero_error err = {{0}};
    double v;
    dec_lora_default(&x->l);
    x->l.r = zero_ckpt_user_number(c, "lora.r", &v) == ZERO_OK ? (int)v : 0;
    x->l.alpha = zero_ckpt_user_number(c, "lora.alpha", &v) == ZERO_OK ? v : 0;
    x->l.dropout = zero_ckpt_user_number(c, "lora.dropout", &v) == ZERO_OK ? v : 0;
    x->l.rslora = zero_ckpt_user_number(c, "lora.rslora", &v) == ZERO_OK && v != 0;
    int rc = CLI_OK;
    if (base && !(merge && !saved))
        rc = cli_error(CLI_USAGE, "export --base %s: only --merge of a checkpoint saved without --save-frozen reads a "
                       "base, and this export %s", base, merge ? "reads the one the checkpoint holds" : "writes the adapters");
    if (rc == CLI_OK &&
        (dec_lora_targets(&x->cfg, targets, &x->l.targets, &err) != ZERO_OK || dec_lora_check(&x->cfg, &x->l, &err) != ZERO_OK))
        rc = cli_error(CLI_RUNTIME, "export: %s: its LoRA record: %s", zero_ckpt_dir(c), err.msg);
    x->s = dec_lora_scaling(&x->l);
    char *conf = NULL;
    if (rc == CLI_OK && zero_ckpt_user_json(c, "run.config", &conf) == ZERO_OK) { /* the run's base format */
        zero_config rcfg;
        zero_config_default(&rcfg);
        if (zero_config_load_json_string(&rcfg, conf, &err) != ZERO_OK)
            rc = cli_error(CLI_RUNTIME, "export: %s: the record of its run: run.config: %s", zero_ckpt_dir(c), err.msg);
        x->qfmt = (zero_qformat)zero_config_base_format(&rcfg);
        x->qembed = rcfg.quant_embed;
    }
    free(conf);
    /* the base, for --merge without a saved one: the recorded or given directory, the run's */
    if (rc == CLI_OK && merge && !saved) {
        (void)zero_ckpt_user_string(c, "base.hash", &hash);
        (void)zero_ckpt_user_string(c, "base.dir", &dir);
        const char *b = base ? base : dir;
        char now[64] = "";
        if (hash && !strncmp(hash, "preset:", 7))
            rc = cli_error(CLI_RUNTIME, "export --merge: the run's base is the random model of %s and the checkpoint does "
                           "not hold it: train with --save-frozen to merge such a run", hash);
        else if (!b || !dec_hf_is_dir(b))
            rc = cli_error(CLI_USAGE, "export --merge: the checkpoint does not hold the base (saved without --save-frozen) "
                           "and %s%s%s is not a model directory: give the base with --base DIR", b ? "'" : "",
                           b ? b : "no base directory is recorded", b ? "'" : "");
        else if (dec_hf_open(&x->base, b, &err) != ZERO_OK || dec_hf_fingerprint(x->base, now, sizeof now, &err) != ZERO_OK)
            rc = cli_error(CLI_RUNTIME, "export --merge: the base %s", err.msg);
        else if (!hash || strcmp(now, hash))
            rc = cli_error(CLI_USAGE, "export --merge: the base in %s (%s) is not the one the run trained on (%s)", b, now,
                           hash ? hash : "not recorded");
        snprintf(x->base_dir, sizeof x->base_dir, "%s", b ? b : "");
    } else if (rc == CLI_OK && zero_ckpt_user_string(c, "base.dir", &dir) == ZERO_OK) {
        snprintf(x->base_dir, sizeof x->base_dir, "%s", dir);
    }
    if (rc != CLI_OK) {
        export_lora_free(x);
        return rc;
    }
    *out = x;
    return CLI_OK;
}

int export_lora_params(const lora_export *x, const cli_ckpt_params *ps, cli_ckpt_params *out) {
    memset(out, 0, sizeof *out);
    out->p = calloc((size_t)ps->n + 1, sizeof *out->p);
    if (!out->p) return cli_error(CLI_RUNTIME, "export: out of memory");
    for (int k = 0; k < ps->n; k++)
        if (dec_lora_is_param(ps->p[k].name) == x->adapter) out->p[out->n++] = ps->p[k];
    return CLI_OK;
}

const char *export_lora_name(const lora_export *x, const char *name, char *buf, size_t cap) {
    return x && x->adapter ? dec_peft_key(&x->cfg, name, buf, cap) : NULL;
}

static int read_ckpt(zero_ckpt *c, const cli_ckpt_param *q, uint64_t at, uint64_t n, float *buf) {
    char t[512];
    if (zero_ckpt_read_range(c, cli_ckpt_param_tensor(q, t, sizeof t), q->offset + at, q->offset + at + n, buf) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "export: %s", zero_ckpt_last_error(c));
    return CLI_OK;
}

/* The adapters of base weight q (NULL when it is not a target), loaded once per weight. */
static int adapters_of(lora_export *x, zero_ckpt *c, const cli_ckpt_param *q) {
    if (x->cur == q) return CLI_OK;
    x->cur = q;
    x->qa = x->qb = NULL;
    const size_t n = strlen(q->name);
    if (n < 8 || strcmp(q->name + n - 7, ".weight")) return CLI_OK;
    char an[600], bn[600];
    snprintf(an, sizeof an, "%.*s.lora_A.weight", (int)(n - 7), q->name);
    snprintf(bn, sizeof bn, "%.*s.lora_B.weight", (int)(n - 7), q->name);
    x->qa = find(x->ps, an);
    x->qb = find(x->ps, bn);
    if (!x->qa || !x->qb) return x->qa = x->qb = NULL, CLI_OK;
    free(x->A), free(x->B);
    x->A = malloc((size_t)x->qa->numel * sizeof(float));
    x->B = malloc((size_t)x->qb->numel * sizeof(float));
    if (!x->A || !x->B) return cli_error(CLI_RUNTIME, "export: out of memory");
    int rc = read_ckpt(c, x->qa, 0, x->qa->numel, x->A);
    return rc == CLI_OK ? read_ckpt(c, x->qb, 0, x->qb->numel, x->B) : rc;
}

/* 1 when the run kept base weight q quantized (dec_lora_quantizes). */
static int quantized(const lora_export *x, const cli_ckpt_param *q) {
    dec_param_desc d;
    for (int i = 0; i < dec_num_tensors(&x->cfg) && !dec_tensor_desc(&x->cfg, i, &d); i++)
        if (!strcmp(d.name, q->name)) return dec_lora_quantizes(&x->cfg, &d, x->qembed);
    return 0;
}

/* Base weight q as the quantized run computed with it: read whole from the base, coded in the
 * run's format and decoded (x->qvals), once per weight. */
static int dequantized(lora_export *x, const cli_ckpt_param *q) {
    if (x->qcur == q) return CLI_OK;
    x->qcur = NULL;
    free(x->qvals);
    x->qvals = malloc((size_t)q->numel * sizeof(float));
    void *rec = malloc((size_t)zero_quant_record_bytes(x->qfmt, q->numel));
    zero_error err = {{0}};
    zero_quant_view v;
    int rc = CLI_OK;
    if (!x->qvals || !rec) rc = cli_error(CLI_RUNTIME, "export: out of memory for '%s'", q->name);
    else if (dec_hf_read(x->base, q->name, 0, q->numel, x->qvals, &err) != ZERO_OK)
        rc = cli_error(CLI_RUNTIME, "export: %s", err.msg);
    else if (zero_quant_record_encode(x->qfmt, x->qvals, q->numel, rec) != ZERO_OK ||
             zero_quant_record_view(x->qfmt, rec, q->numel, &v) != ZERO_OK ||
             zero_quant_record_decode(&v, 0, q->numel, x->qvals) != ZERO_OK)
        rc = cli_error(CLI_RUNTIME, "export: coding '%s' as %s failed", q->name, zero_qformat_name(x->qfmt));
    free(rec);
    if (rc == CLI_OK) x->qcur = q;
    return rc;
}

int export_lora_read(lora_export *x, zero_ckpt *c, const cli_ckpt_param *q, uint64_t at, uint64_t n, float *buf) {
    if (x->adapter) return read_ckpt(c, q, at, n, buf);
    int rc;
    if (!x->base) { /* saved with --save-frozen */
        if ((rc = read_ckpt(c, q, at, n, buf)) != CLI_OK) return rc;
    } else if (x->qfmt != ZERO_QFMT_NONE && quantized(x, q)) {
        if ((rc = dequantized(x, q)) != CLI_OK) return rc;
        memcpy(buf, x->qvals + at, (size_t)n * sizeof *buf);
    } else {
        zero_error err = {{0}};
        if (dec_hf_read(x->base, q->name, at, at + n, buf, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "export: %s", err.msg);
    }
    if ((rc = adapters_of(x, c, q)) != CLI_OK || !x->qa) return rc;
    /* W += s B A: Linear (out, in) row-major, GPT-2's Conv1D (in, out) holds its transpose */
    const int r = (int)x->qa->shape[0];
    const uint64_t in = (uint64_t)x->qa->shape[1], out = (uint64_t)x->qb->shape[0];
    const int conv = !dec_is_llama(&x->cfg);
#pragma omp parallel for schedule(static) if (n >= 65536)
    for (uint64_t i = 0; i < n; i++) {
        const uint64_t e = at + i, o = conv ? e % out : e / in, k = conv ? e / out : e % in;
        double acc = 0;
        for (int j = 0; j < r; j++) acc += (double)x->B[o * (uint64_t)r + (uint64_t)j] * x->A[(uint64_t)j * in + k];
        buf[i] = (float)((double)buf[i] + x->s * acc);
    }
    return CLI_OK;
}

int export_lora_write_config(const lora_export *x, const char *dir) {
    char *text = dec_peft_config_json(&x->cfg, &x->l, x->base_dir[0] ? x->base_dir : NULL);
    if (!text) return cli_error(CLI_RUNTIME, "export: out of memory");
    char path[4200], tmp[4300];
    snprintf(path, sizeof path, "%s/adapter_config.json", dir);
    zero_error err;
    const int fd = zero_create_tmp(path, tmp, sizeof tmp, &err); /* a planted link is removed, never followed */
    if (fd < 0) {
        free(text);
        return cli_error(CLI_RUNTIME, "export: %s", err.msg);
    }
    FILE *f = fdopen(fd, "w");
    if (!f) close(fd);
    int bad = !f;
    if (f) {
        bad |= fputs(text, f) < 0 || fputc('\n', f) < 0 || fflush(f) != 0 || fsync(fileno(f)) != 0;
        bad |= fclose(f) != 0;
    }
    free(text);
    if (bad || rename(tmp, path)) {
        const int e = errno;
        remove(tmp);
        return cli_error(CLI_RUNTIME, "export: cannot write %s: %s", path, strerror(e ? e : EIO));
    }
    return CLI_OK;
}

const char *export_lora_base_dir(const lora_export *x) { return x && x->base_dir[0] ? x->base_dir : NULL; }
