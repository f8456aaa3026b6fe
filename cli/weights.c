/* Models from files (presets, Hugging Face model directories, checkpoints, safetensors files) and
 * their weights into an engine (`--init-from` of train and sample), one tensor at a time. */
#include "weights.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "decoder/hf.h"

#define HF_PREFIX "transformer."
#define STAGE_BYTES (1u << 20) /* bf16/fp16 tensors are read and converted this much at a time */

/* A message kept until the ranks have agreed who reports it. */
typedef struct wmsg {
    char text[1536];
} wmsg;

__attribute__((format(printf, 2, 3))) static zero_status wfail(wmsg *w, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->text, sizeof w->text, fmt, ap);
    va_end(ap);
    return ZERO_ERR_FORMAT;
}

/* "[768, 2304]" */
static const char *fmt_shape(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t at = 0;
    at += (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

static const char *strip_prefix(const char *name) {
    return strncmp(name, HF_PREFIX, strlen(HF_PREFIX)) ? name : name + strlen(HF_PREFIX);
}

/* Tensors of a Hugging Face GPT-2 file that are not parameters: the causal-mask buffers of each
 * block and the LM head, which GPT-2 ties to wte (the model reads wte for it). */
static int ignorable(const char *name) {
    name = strip_prefix(name);
    if (!strcmp(name, "lm_head.weight")) return 1;
    if (strncmp(name, "h.", 2)) return 0;
    const char *dot = strchr(name + 2, '.');
    return dot && (!strcmp(dot, ".attn.bias") || !strcmp(dot, ".attn.masked_bias"));
}

/* Index of parameter `name` in f: the name itself, else with HF's "transformer." prefix. */
static int st_lookup(const zero_st_file *f, const char *name) {
    int i = zero_st_find(f, name);
    if (i >= 0) return i;
    char buf[512];
    snprintf(buf, sizeof buf, HF_PREFIX "%s", name);
    return zero_st_find(f, buf);
}

/* ------------------------------------------------------------------ checkpoints */

void cli_ckpt_params_free(cli_ckpt_params *ps) {
    if (!ps) return;
    free(ps->p);
    memset(ps, 0, sizeof *ps);
}

/* The parameter table comes from the checkpoint's engine manifest, which zero_ckpt_open has
 * validated (coverage of every unit, shapes, the masters' tensors): the names point into it. */
zero_status cli_ckpt_params_read(zero_ckpt *c, cli_ckpt_params *out, char *msg, size_t cap) {
    memset(out, 0, sizeof *out);
    const zero_manifest *m = zero_ckpt_engine_manifest(c);
    if (!m) {
        snprintf(msg, cap, "%s: the manifest lists no units with parameters: not a checkpoint of a zero_engine",
                 zero_ckpt_dir(c));
        return ZERO_ERR_FORMAT;
    }
    out->p = calloc((size_t)m->nparams, sizeof *out->p);
    if (!out->p) {
        snprintf(msg, cap, "out of memory");
        return ZERO_ERR_NOMEM;
    }
    for (int i = 0; i < m->nunits; i++) {
        const zero_manifest_unit *u = &m->units[i];
        uint64_t at[2] = {0, 0}; /* trainable and frozen parameters lie back to back in their tensors */
        for (int k = u->first_param; k < u->first_param + u->nparams; k++) {
            const zero_manifest_param *p = &m->params[k];
            cli_ckpt_param *q = &out->p[out->n++];
            q->name = p->name;
            q->unit = u->name;
            q->frozen = p->frozen != 0;
            q->offset = at[q->frozen];
            at[q->frozen] += p->numel;
            q->numel = p->numel;
            q->ndim = p->ndim;
            memcpy(q->shape, p->shape, sizeof q->shape);
        }
    }
    return ZERO_OK;
}

const char *cli_ckpt_param_tensor(const cli_ckpt_param *q, char *buf, size_t cap) {
    snprintf(buf, cap, "%s/%s", q->unit, q->frozen ? "frozen" : "master");
    return buf;
}

/* user.model.KEY as an int in 1..1e9 */
static int user_int(zero_ckpt *c, const char *key, int *out) {
    char path[64];
    double v;
    snprintf(path, sizeof path, "model.%s", key);
    if (zero_ckpt_user_number(c, path, &v) != ZERO_OK || v < 1 || v > 1e9 || v != (int)v) return -1;
    *out = (int)v;
    return 0;
}

void cli_model_free(cli_model *m) {
    if (!m) return;
    free(m->config_json);
    free(m->source);
    free(m->notes);
    m->config_json = m->source = m->notes = NULL;
}

int cli_model_same_shape(const dec_config *a, const dec_config *b) {
    return a->arch == b->arch && a->n_layer == b->n_layer && a->n_embd == b->n_embd && a->n_head == b->n_head &&
           a->n_kv_head == b->n_kv_head && a->head_dim == b->head_dim && a->n_inner == b->n_inner &&
           a->vocab == b->vocab && a->tied == b->tied && a->qkv_bias == b->qkv_bias && a->o_bias == b->o_bias &&
           a->mlp_bias == b->mlp_bias && a->qk_norm == b->qk_norm;
}

const char *cli_model_describe(const dec_config *c, char *buf, size_t cap) {
    snprintf(buf, cap, "%s L%d C%d H%d/%d D%d F%d V%d ctx%d%s", dec_arch_name(c->arch), c->n_layer, c->n_embd,
             c->n_head, c->n_kv_head, c->head_dim, c->n_inner, c->vocab, c->n_ctx, c->tied ? ", tied" : "");
    return buf;
}

static char *dup_str(const char *s) {
    if (!s) return NULL;
    char *d = malloc(strlen(s) + 1);
    if (d) strcpy(d, s);
    return d;
}

int cli_ckpt_model(zero_ckpt *c, cli_model *out, char *msg, size_t cap) {
    memset(out, 0, sizeof *out);
    out->kind = CLI_MODEL_CKPT;
    snprintf(out->name, sizeof out->name, "%s", zero_ckpt_dir(c));
    char *text = NULL;
    int rc = -1;
    const zero_status js = zero_ckpt_user_json(c, "model.config", &text);
    if (js == ZERO_OK) {
        zero_error err = {{0}};
        if (dec_config_from_json(&out->cfg, text, NULL, &err) == ZERO_OK) {
            out->config_json = text;
            text = NULL;
            rc = 0;
            /* the shape written beside the config must be the config's */
            const struct { const char *key; int have; } f[] = {{"n_layer", out->cfg.n_layer}, {"n_embd", out->cfg.n_embd},
                                                                {"n_head", out->cfg.n_head}, {"vocab", out->cfg.vocab}};
            for (size_t k = 0; k < sizeof f / sizeof f[0] && !rc; k++) {
                int v;
                if (!user_int(c, f[k].key, &v) && v != f[k].have) {
                    snprintf(msg, cap, "%s: the model it records is inconsistent: user.model.%s %d, its config.json %d",
                             zero_ckpt_dir(c), f[k].key, v, f[k].have);
                    rc = -1;
                }
            }
        } else {
            snprintf(msg, cap, "%s: the model it records: %s", zero_ckpt_dir(c), err.msg);
        }
        free(text);
    } else if (js == ZERO_ERR_NOMEM) {
        snprintf(msg, cap, "%s: out of memory reading the model it records", zero_ckpt_dir(c));
    } else {
        int L, C, H, ctx, V;
        if (user_int(c, "n_layer", &L) || user_int(c, "n_embd", &C) || user_int(c, "n_head", &H) ||
            user_int(c, "n_ctx", &ctx) || user_int(c, "vocab", &V)) {
            snprintf(msg, cap, "%s: the checkpoint does not record a `zero train` run (no user.model)", zero_ckpt_dir(c));
        } else {
            dec_config_gpt2(&out->cfg, L, C, H, ctx, V);
            rc = 0;
        }
    }
    const char *src = NULL;
    if (!rc && zero_ckpt_user_string(c, "source", &src) == ZERO_OK) out->source = dup_str(src);
    if (rc) cli_model_free(out);
    return rc;
}

zero_status cli_ckpt_verify_masters(zero_ckpt *c, char *msg, size_t cap) {
    const char *suffix = "/master", *suffix2 = "/frozen";
    const size_t ls = strlen(suffix);
    for (int r = 0; r < zero_ckpt_num_files(c); r++) {
        const char *name;
        zero_ckpt_file_info(c, r, &name, NULL);
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", zero_ckpt_dir(c), name);
        zero_error err = {{0}};
        zero_st_file *f = NULL;
        zero_status s = zero_st_open(&f, NULL, path, &err);
        if (s != ZERO_OK) {
            snprintf(msg, cap, "%s", err.msg);
            return s;
        }
        for (int i = 0; i < zero_st_count(f) && s == ZERO_OK; i++) {
            const char *tn = zero_st_tensor_at(f, i)->name;
            const size_t lt = strlen(tn);
            if (lt >= ls && (!strcmp(tn + lt - ls, suffix) || !strcmp(tn + lt - ls, suffix2))) s = zero_st_verify(f, i);
        }
        if (s != ZERO_OK) snprintf(msg, cap, "%s", zero_st_last_error(f));
        zero_st_close(f);
        if (s != ZERO_OK) return s;
    }
    return ZERO_OK;
}

/* ------------------------------------------------------------------ what model a source holds */

static int parse_meta_int(const zero_st_file *f, const char *key, int *out) {
    const char *v = zero_st_metadata(f, key);
    if (!v || !*v) return -1;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (*end || errno || x < 1 || x > 1000000000L) return -1;
    *out = (int)x;
    return 0;
}

/* n_layer = 1 + the largest N of the "h.N." tensors (0 when there are none). */
static int count_blocks(const zero_st_file *f) {
    int L = 0;
    for (int i = 0; i < zero_st_count(f); i++) {
        const char *n = strip_prefix(zero_st_tensor_at(f, i)->name);
        if (strncmp(n, "h.", 2)) continue;
        char *end;
        long l = strtol(n + 2, &end, 10);
        if (end != n + 2 && *end == '.' && l >= 0 && l < 100000 && l + 1 > L) L = (int)l + 1;
    }
    return L;
}

static int shape_from_st(const char *path, int heads, const char *flag, cli_model *out) {
    zero_error err = {{0}};
    zero_st_file *f = NULL;
    if (dec_hf_is_pickle(path)) {
        dec_hf_pickle_error(&err, path);
        return cli_error(CLI_RUNTIME, "%s: %s", flag, err.msg);
    }
    if (zero_st_open(&f, NULL, path, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "%s: %s", flag, err.msg);
    int L = 0, C = 0, H = 0, ctx = 0, V = 0, rc = CLI_OK;
    const char *conf = zero_st_metadata(f, "zero.config");
    if (conf) { /* `zero export`'s: the whole config.json */
        char *notes = NULL;
        if (dec_config_from_json(&out->cfg, conf, &notes, &err) != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "%s %s: metadata zero.config: %s", flag, path, err.msg);
        } else {
            out->config_json = dup_str(conf);
            out->notes = notes;
            if (heads > 0 && heads != out->cfg.n_head)
                rc = cli_error(CLI_USAGE, "--heads %d: the model in %s has attention heads %d (its metadata zero.config)",
                               heads, path, out->cfg.n_head);
        }
        goto out;
    }
    if (!parse_meta_int(f, "n_layer", &L) && !parse_meta_int(f, "n_embd", &C) && !parse_meta_int(f, "n_ctx", &ctx) &&
        !parse_meta_int(f, "vocab", &V)) {
        if (parse_meta_int(f, "n_head", &H)) H = 0;
    } else {
        const int wte = st_lookup(f, "wte.weight"), wpe = st_lookup(f, "wpe.weight");
        const zero_st_tensor *te = wte >= 0 ? zero_st_tensor_at(f, wte) : NULL;
        const zero_st_tensor *pe = wpe >= 0 ? zero_st_tensor_at(f, wpe) : NULL;
        if (!te || !pe || te->ndim != 2 || pe->ndim != 2 || te->shape[1] != pe->shape[1]) {
            rc = cli_error(CLI_RUNTIME,
                           "%s %s: no model shape: expected metadata zero.config or n_layer/n_embd/n_ctx/vocab, or "
                           "GPT-2 tensors 'wte.weight' (vocab, n_embd) and 'wpe.weight' (n_ctx, n_embd) (a Llama-family "
                           "model needs its directory with config.json)",
                           flag, path);
            goto out;
        }
        V = (int)(te->shape[0] < 1 << 30 ? te->shape[0] : 0);
        C = (int)(te->shape[1] < 1 << 30 ? te->shape[1] : 0);
        ctx = (int)(pe->shape[0] < 1 << 30 ? pe->shape[0] : 0);
        L = count_blocks(f);
        if (parse_meta_int(f, "n_head", &H)) H = 0;
    }
    if (heads > 0 && H > 0 && heads != H) { /* recorded: another count would be another model */
        rc = cli_error(CLI_USAGE, "--heads %d: the model in %s has attention heads %d (its metadata n_head)", heads, path, H);
        goto out;
    }
    if (heads > 0) H = heads;
    if (H <= 0) {
        if (C % 64) {
            rc = cli_error(CLI_USAGE, "%s %s: a model of width %d without n_head in its metadata: pass --heads H", flag,
                           path, C);
            goto out;
        }
        H = C / 64;
    }
    dec_config_gpt2(&out->cfg, L, C, H, ctx, V);
    if (dec_config_check(&out->cfg, &err) != ZERO_OK) {
        if (heads > 0) rc = cli_error(CLI_USAGE, "--heads %d: the model in %s (width %d) with it: %s", heads, path, C, err.msg);
        else rc = cli_error(CLI_RUNTIME, "%s %s: the model it holds: %s", flag, path, err.msg);
    }
out:
    zero_st_close(f);
    return rc;
}

int cli_model_from_name(const char *name, const char *flag, cli_model *out) {
    memset(out, 0, sizeof *out);
    zero_error err = {{0}};
    snprintf(out->name, sizeof out->name, "%s", name);
    if (dec_config_preset(&out->cfg, name, &err) == ZERO_OK) return CLI_OK;
    if (dec_hf_is_dir(name)) {
        out->kind = CLI_MODEL_HF;
        zero_status s = dec_hf_read_config(name, &out->cfg, &out->config_json, &out->notes, &err);
        if (s != ZERO_OK) return cli_error(s == ZERO_ERR_INVALID_ARG ? CLI_USAGE : CLI_RUNTIME, "%s %s", flag, err.msg);
        out->source = dup_str(name);
        return CLI_OK;
    }
    struct stat sb;
    if (!stat(name, &sb) && S_ISDIR(sb.st_mode))
        return cli_error(CLI_USAGE, "%s '%s': a directory without config.json: expected a preset or a Hugging Face model "
                         "directory", flag, name);
    return cli_error(CLI_USAGE, "%s %s", flag, err.msg + (strncmp(err.msg, "model ", 6) ? 0 : 6));
}

int cli_model_from_path(const char *path, int heads, const char *flag, cli_model *out) {
    memset(out, 0, sizeof *out);
    snprintf(out->name, sizeof out->name, "%s", path);
    struct stat sb;
    if (stat(path, &sb)) return cli_error(CLI_USAGE, "%s '%s': %s", flag, path, strerror(errno));
    zero_error err = {{0}};
    if (!S_ISDIR(sb.st_mode) && !S_ISREG(sb.st_mode)) /* a FIFO would be waited on (docs/SECURITY.md) */
        return cli_error(CLI_USAGE, "%s '%s': not a regular file or a directory: expected a checkpoint, a model "
                         "directory with config.json, or a safetensors file", flag, path);
    if (!S_ISDIR(sb.st_mode)) {
        out->kind = CLI_MODEL_FILE;
        return shape_from_st(path, heads, flag, out);
    }
    if (dec_hf_is_dir(path)) {
        /* the weights are what --init-from asks for: opened now (config.json and every file's
         * header, no tensor data), so that a directory without them, or with tensors that do not
         * fit its config.json, is refused before a model of its size is allocated */
        out->kind = CLI_MODEL_HF;
        dec_hf *h = NULL;
        if (dec_hf_open(&h, path, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "%s %s", flag, err.msg);
        out->cfg = *dec_hf_config(h);
        out->config_json = dup_str(dec_hf_config_json(h));
        out->notes = dup_str(dec_hf_notes(h));
        out->source = dup_str(path);
        dec_hf_close(h);
        if (!out->config_json || !out->source) return cli_error(CLI_RUNTIME, "%s %s: out of memory", flag, path);
        return cli_model_check_flags(out, NULL, 0, 0, heads, 0); /* config.json says the heads */
    }
    char p[4200];
    snprintf(p, sizeof p, "%s/pytorch_model.bin", path);
    if (!access(p, F_OK)) {
        dec_hf_pickle_error(&err, p);
        return cli_error(CLI_RUNTIME, "%s: %s", flag, err.msg);
    }
    zero_ckpt *c = NULL;
    if (zero_ckpt_open(&c, NULL, path, 0, &err) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "%s: %s (expected a checkpoint, a model directory with config.json, or a "
                         "safetensors file)", flag, err.msg);
    cli_ckpt_note(c);
    char msg[1024];
    int rc = CLI_OK;
    if (cli_ckpt_model(c, out, msg, sizeof msg)) {
        rc = cli_error(CLI_RUNTIME, "%s %s", flag, msg);
    } else {
        out->kind = CLI_MODEL_CKPT;
        snprintf(out->name, sizeof out->name, "%s", path);
        /* the record says how many heads the model has: another count would be another model */
        if (heads > 0 && heads != out->cfg.n_head)
            rc = cli_error(CLI_USAGE, "--heads %d: the model in %s has attention heads %d (its record)", heads,
                           zero_ckpt_dir(c), out->cfg.n_head);
    }
    zero_ckpt_close(c);
    return rc;
}

int cli_model_check_flags(const cli_model *m, const char *model_name, int layers, int dim, int heads, int vocab) {
    const dec_config *c = &m->cfg;
    const char *from = m->kind == CLI_MODEL_HF ? "config.json" : m->kind == CLI_MODEL_CKPT ? "its record" : "the file";
    const struct { const char *flag, *what; int given, have; } f[] = {
        {"--layers", "layers", layers, c->n_layer},
        {"--dim", "width", dim, c->n_embd},
        {"--heads", "attention heads", heads, c->n_head},
        {"--vocab", "vocabulary", vocab, c->vocab},
    };
    for (size_t k = 0; k < sizeof f / sizeof f[0]; k++)
        if (f[k].given > 0 && f[k].given != f[k].have)
            return cli_error(CLI_USAGE, "%s %d: the model in %s has %s %d (%s)", f[k].flag, f[k].given, m->name, f[k].what,
                             f[k].have, from);
    if (model_name) {
        cli_model named;
        int rc = cli_model_from_name(model_name, "--model", &named);
        if (rc != CLI_OK) return rc;
        const int same = cli_model_same_shape(&named.cfg, c);
        cli_model_free(&named);
        if (!same) {
            char a[256], b[256];
            dec_config nc = named.cfg;
            return cli_error(CLI_USAGE, "--model %s (%s): the model in %s is %s (%s)", model_name,
                             cli_model_describe(&nc, a, sizeof a), m->name, cli_model_describe(c, b, sizeof b), from);
        }
    }
    return CLI_OK;
}

int cli_model_check_seq(const cli_model *m, int T, int loaded, char *note, size_t cap) {
    const dec_config *c = &m->cfg;
    if (note && cap) note[0] = 0;
    if (T <= c->n_ctx) return CLI_OK;
    const int gpt2 = c->arch == DEC_ARCH_GPT2;
    const char *key = gpt2 ? "n_positions" : "max_position_embeddings";
    if (loaded) {
        /* GPT-2 has no weights for a position past its table. A RoPE model computes any
         * position, but was trained up to this one: a longer context is a change of the model
         * that its config.json should say (exports and checkpoints carry that file). */
        if (gpt2)
            return cli_error(CLI_USAGE,
                             "--seq %d: longer than the %d positions of the model in %s: expected at most %d "
                             "(%s: GPT-2 learns one embedding per position, wpe (%d, %d))",
                             T, c->n_ctx, m->name, c->n_ctx, key, c->n_ctx, c->n_embd);
        return cli_error(CLI_USAGE,
                         "--seq %d: longer than the %d positions of the model in %s: expected at most %d "
                         "(%s, the context it was trained for; to train longer, raise it in %s)",
                         T, c->n_ctx, m->name, c->n_ctx, key,
                         m->kind == CLI_MODEL_HF ? "a copy of the directory's config.json"
                                                 : "the config.json of its export (zero export -o DIR)");
    }
    if (m->kind == CLI_MODEL_HF && note && cap)
        snprintf(note, cap,
                 "--seq %d is longer than the %d positions (%s) of %s/config.json: the model is built with %d "
                 "(from scratch: %s; a checkpoint and an export record %d; --init-from refuses it)",
                 T, c->n_ctx, key, m->name, T, gpt2 ? "its position table grows" : "RoPE needs no table", T);
    return CLI_OK;
}

/* ------------------------------------------------------------------ loading */

/* Reads tensor t (F32, BF16 or F16) of f into dst as fp32, checking its CRC32C when the file
 * has one; stage: STAGE_BYTES of scratch for the half types. */
static zero_status read_tensor(zero_st_file *f, int i, float *dst, void *stage, wmsg *w) {
    const zero_st_tensor *t = zero_st_tensor_at(f, i);
    uint32_t crc = 0;
    zero_status s = ZERO_OK;
    if (t->zdtype == ZERO_DTYPE_FP32) {
        s = zero_st_read(f, i, 0, dst, (size_t)t->nbytes);
        if (s == ZERO_OK && t->has_crc) crc = zero_crc32c(0, dst, (size_t)t->nbytes);
    } else {
        for (uint64_t at = 0; at < t->nbytes && s == ZERO_OK; at += STAGE_BYTES) {
            const size_t n = (size_t)(t->nbytes - at < STAGE_BYTES ? t->nbytes - at : STAGE_BYTES);
            s = zero_st_read(f, i, at, stage, n);
            if (s != ZERO_OK) break;
            if (t->has_crc) crc = zero_crc32c(crc, stage, n);
            /* element by element: zero_convert's threads cost more than they save on a piece */
            const uint16_t *h = stage;
            float *d = dst + at / 2;
            if (t->zdtype == ZERO_DTYPE_BF16)
                for (size_t k = 0; k < n / 2; k++) d[k] = zero_bf16_to_fp32(h[k]);
            else
                for (size_t k = 0; k < n / 2; k++) d[k] = zero_fp16_to_fp32(h[k]);
        }
    }
    if (s != ZERO_OK) return wfail(w, "--init-from: %s", zero_st_last_error(f));
    if (t->has_crc && crc != t->crc)
        return wfail(w, "--init-from %s: tensor '%s': checksum mismatch (stored %08x, computed %08x): the file is "
                     "corrupt", zero_st_path(f), t->name, (unsigned)t->crc, (unsigned)crc);
    zero_error err;
    if (dec_check_finite(dst, (size_t)(t->nbytes / t->elem_size), 0, zero_st_path(f), t->name, &err) != ZERO_OK)
        return wfail(w, "--init-from %s", err.msg);
    return ZERO_OK;
}

static zero_status load_st(zero_engine *e, const char *path, wmsg *w) {
    zero_error err = {{0}};
    zero_st_file *f = NULL;
    if (zero_st_open(&f, NULL, path, &err) != ZERO_OK) return wfail(w, "--init-from: %s", err.msg);
    const int np = zero_engine_num_params(e);
    float *buf = NULL;
    void *stage = NULL;
    char s1[160], s2[160];
    zero_status s = ZERO_OK;
    /* every tensor of the file must be a parameter of this model or a known buffer */
    for (int i = 0; i < zero_st_count(f) && s == ZERO_OK; i++) {
        const char *n = zero_st_tensor_at(f, i)->name;
        if (!ignorable(n) && zero_engine_find_param(e, strip_prefix(n)) < 0)
            s = wfail(w, "--init-from %s: tensor '%s' is not a parameter of this model (another model, or flags that "
                      "do not match the file?)", path, n);
    }
    /* every parameter must be in the file, with its shape and a float dtype */
    uint64_t most = 0;
    for (int p = 0; p < np && s == ZERO_OK; p++) {
        zero_param_info pi;
        zero_engine_param_info(e, p, &pi);
        const int i = st_lookup(f, pi.name);
        if (i < 0) {
            s = wfail(w, "--init-from %s: missing tensor '%s' (expected shape %s)", path, pi.name,
                      fmt_shape(pi.shape, pi.ndim, s1, sizeof s1));
            break;
        }
        const zero_st_tensor *t = zero_st_tensor_at(f, i);
        int same = t->ndim == pi.ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == pi.shape[d];
        if (!same)
            s = wfail(w, "--init-from %s: tensor '%s' has shape %s; this model expects %s", path, t->name,
                      fmt_shape(t->shape, t->ndim, s1, sizeof s1), fmt_shape(pi.shape, pi.ndim, s2, sizeof s2));
        else if (t->zdtype != ZERO_DTYPE_FP32 && t->zdtype != ZERO_DTYPE_BF16 && t->zdtype != ZERO_DTYPE_FP16)
            s = wfail(w, "--init-from %s: tensor '%s' has dtype %s: expected F32, BF16 or F16", path, t->name, t->dtype);
        if (pi.numel > most) most = pi.numel;
    }
    if (s == ZERO_OK) {
        buf = malloc((size_t)(most ? most : 1) * sizeof(float));
        stage = malloc(STAGE_BYTES);
        if (!buf || !stage) s = wfail(w, "--init-from %s: out of memory for a tensor of %llu elements", path,
                                      (unsigned long long)most);
    }
    for (int p = 0; p < np && s == ZERO_OK; p++) {
        zero_param_info pi;
        zero_engine_param_info(e, p, &pi);
        s = read_tensor(f, st_lookup(f, pi.name), buf, stage, w);
        if (s == ZERO_OK && zero_engine_set_param(e, pi.name, buf) != ZERO_OK)
            s = wfail(w, "--init-from %s: %s", path, zero_engine_last_error(e));
    }
    free(stage);
    free(buf);
    zero_st_close(f);
    return s;
}

/* lora: 0 refuses a LoRA run's checkpoint; 1 reads one onto an engine registered by
 * dec_lora_register, leaving the frozen base tensors the checkpoint does not hold as they are (the
 * caller set them first: cli_init_from_lora). */
static zero_status load_ckpt(zero_engine *e, const char *path, int lora, wmsg *w) {
    zero_error err = {{0}};
    zero_ckpt *c = NULL;
    if (zero_ckpt_open(&c, NULL, path, 0, &err) != ZERO_OK) return wfail(w, "--init-from: %s", err.msg);
    cli_ckpt_params ps = {0};
    char m[1024], s1[160], s2[160];
    float *buf = NULL;
    zero_status s = cli_ckpt_params_read(c, &ps, m, sizeof m);
    if (s != ZERO_OK) s = wfail(w, "--init-from %s", m);
    const char *dir = zero_ckpt_dir(c);
    uint64_t most = 0;
    double lora_r;
    if (s == ZERO_OK && !lora && zero_ckpt_user_number(c, "lora.r", &lora_r) == ZERO_OK) /* adapters, not a whole model */
        s = wfail(w, "--init-from %s: a LoRA run's checkpoint (its adapters, r %g) is not supported here yet: export the "
                  "model with the adapters folded in (zero export %s -o DIR --merge) and give DIR, or continue the run "
                  "with --resume", dir, lora_r, dir);
    for (int k = 0; k < ps.n && s == ZERO_OK; k++)
        if (zero_engine_find_param(e, ps.p[k].name) < 0)
            s = wfail(w, "--init-from %s: parameter '%s' of the checkpoint is not one of this model's (another model?)",
                      dir, ps.p[k].name);
    const int np = zero_engine_num_params(e);
    int *which = calloc((size_t)np + 1, sizeof *which);
    if (!which && s == ZERO_OK) s = wfail(w, "out of memory");
    for (int p = 0; p < np && s == ZERO_OK; p++) {
        zero_param_info pi;
        zero_engine_param_info(e, p, &pi);
        int k = 0;
        while (k < ps.n && strcmp(ps.p[k].name, pi.name)) k++;
        if (k == ps.n) {
            s = wfail(w, "--init-from %s: missing tensor '%s' (expected shape %s)", dir, pi.name,
                      fmt_shape(pi.shape, pi.ndim, s1, sizeof s1));
            break;
        }
        const cli_ckpt_param *q = &ps.p[k];
        int same = q->ndim == pi.ndim;
        for (int d = 0; same && d < q->ndim; d++) same = q->shape[d] == pi.shape[d];
        if (!same)
            s = wfail(w, "--init-from %s: tensor '%s' has shape %s; this model expects %s", dir, q->name,
                      fmt_shape(q->shape, q->ndim, s1, sizeof s1), fmt_shape(pi.shape, pi.ndim, s2, sizeof s2));
        which[p] = k;
        if (pi.numel > most) most = pi.numel;
    }
    if (s == ZERO_OK && cli_ckpt_verify_masters(c, m, sizeof m) != ZERO_OK) s = wfail(w, "--init-from: %s", m);
    if (s == ZERO_OK && !(buf = malloc((size_t)(most ? most : 1) * sizeof(float))))
        s = wfail(w, "--init-from %s: out of memory for a tensor of %llu elements", dir, (unsigned long long)most);
    for (int p = 0; p < np && s == ZERO_OK; p++) {
        const cli_ckpt_param *q = &ps.p[which[p]];
        char tname[512];
        cli_ckpt_param_tensor(q, tname, sizeof tname);
        if (q->frozen && zero_ckpt_find(c, tname) < 0 && lora) continue; /* the base, set by the caller */
        if (q->frozen && zero_ckpt_find(c, tname) < 0) {
            s = wfail(w, "--init-from %s: the checkpoint holds the trainable parameters of a LoRA run, not '%s' of its "
                      "frozen base (saved without --save-frozen): export it with zero export --merge, or resume it", dir,
                      q->name);
            break;
        }
        if (zero_ckpt_read_range(c, tname, q->offset, q->offset + q->numel, buf) != ZERO_OK)
            s = wfail(w, "--init-from: %s", zero_ckpt_last_error(c));
        else if (zero_engine_set_param(e, q->name, buf) != ZERO_OK)
            s = wfail(w, "--init-from %s: %s", dir, zero_engine_last_error(e));
    }
    free(buf);
    free(which);
    cli_ckpt_params_free(&ps);
    zero_ckpt_close(c);
    return s;
}

static zero_status load_hf(zero_engine *e, const char *path, wmsg *w) {
    zero_error err = {{0}};
    dec_hf *h = NULL;
    zero_status s = dec_hf_open(&h, path, &err);
    if (s == ZERO_OK) s = dec_hf_load(h, e, &err);
    dec_hf_close(h);
    if (s != ZERO_OK) wfail(w, "--init-from %s", err.msg);
    return s;
}

int cli_init_from(zero_engine *e, const char *path) {
    wmsg w = {{0}};
    struct stat sb;
    zero_status s;
    zero_error err = {{0}};
    if (stat(path, &sb)) s = wfail(&w, "--init-from '%s': %s", path, strerror(errno));
    else if (S_ISDIR(sb.st_mode)) s = dec_hf_is_dir(path) ? load_hf(e, path, &w) : load_ckpt(e, path, 0, &w);
    else if (dec_hf_is_pickle(path)) s = (dec_hf_pickle_error(&err, path), wfail(&w, "--init-from: %s", err.msg));
    else s = load_st(e, path, &w);
    /* Agree, so that no rank trains on while another stops; the first failing rank reports. */
    return cli_ranks_agree(zero_engine_comm(e), s != ZERO_OK, "--init-from", w.text);
}

int cli_init_from_lora(zero_engine *e, const char *ckpt) {
    wmsg w = {{0}};
    const zero_status s = load_ckpt(e, ckpt, 1, &w);
    return cli_ranks_agree(zero_engine_comm(e), s != ZERO_OK, "--init-from", w.text);
}
