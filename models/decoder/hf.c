/* models/decoder/hf.c — reading a Hugging Face model directory: config.json, the weight files
 * (single or sharded with an index), name mapping, and the streamed, per-rank load into an engine. */
#include "decoder/hf.h"
#include "decoder/lora.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "decoder/decoder_internal.h"
#include "zero/ckpt.h"

#define CHUNK ((uint64_t)1 << 20) /* elements per engine write (4 MiB of fp32) */

struct dec_hf {
    char dir[4096];
    dec_config cfg;
    char *json, *notes;
    const char *dtype;
    int nfiles;
    zero_st_file **files;
};

static int is_file(const char *path) {
    struct stat sb;
    return !stat(path, &sb) && S_ISREG(sb.st_mode);
}

int dec_hf_is_dir(const char *dir) {
    char p[4200];
    struct stat sb;
    if (stat(dir, &sb) || !S_ISDIR(sb.st_mode)) return 0;
    snprintf(p, sizeof p, "%s/config.json", dir);
    /* a config.json of any kind (a directory, a link that loops): the reader then says what is wrong
     * with it, instead of the directory being taken for a checkpoint */
    return lstat(p, &sb) == 0;
}

int dec_hf_is_pickle(const char *path) {
    unsigned char b[4] = {0};
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    const size_t n = fread(b, 1, sizeof b, f);
    fclose(f);
    /* torch.save since 1.6 writes a zip archive; older ones a raw pickle (protocol 2+: 0x80) */
    return (n >= 4 && b[0] == 'P' && b[1] == 'K' && b[2] == 3 && b[3] == 4) || (n >= 2 && b[0] == 0x80 && b[1] <= 5);
}

void dec_hf_pickle_error(zero_error *err, const char *what) {
    dec__errorf(err,
                "%s is a PyTorch pickle (pytorch_model.bin), which zero does not read (unpickling can run "
                "arbitrary code): convert the model to safetensors first, e.g. python3 -c \"from transformers "
                "import AutoModelForCausalLM as M; M.from_pretrained('IN').save_pretrained('OUT')\" (writes "
                "OUT/config.json and OUT/model.safetensors)",
                what);
}

/* A file the directory holds, read whole when it is at most max bytes (zero_read_file). */
static char *slurp(const char *path, uint64_t max, size_t *len, zero_error *err) {
    char *text = NULL;
    zero_error e2;
    if (zero_read_file(path, max, &text, len, &e2) != ZERO_OK) dec__errorf(err, "%s", e2.msg);
    return text;
}


zero_status dec_hf_read_config(const char *dir, dec_config *cfg, char **json, char **notes, zero_error *err) {
    if (json) *json = NULL;
    if (notes) *notes = NULL;
    char p[4200];
    zero_error pe;
    const zero_status ps = zero_path_in_dir(dir, "config.json", p, sizeof p, &pe);
    if (ps != ZERO_OK) {
        dec__errorf(err, "%s", pe.msg);
        return ps;
    }
    if (!is_file(p)) {
        dec__errorf(err, "%s: no config.json: expected a Hugging Face model directory", dir);
        return ZERO_ERR_IO;
    }
    char *text = slurp(p, DEC_HF_CONFIG_MAX_BYTES, NULL, err);
    if (!text) return ZERO_ERR_FORMAT;
    zero_error e2 = {{0}};
    zero_status st = dec_config_from_json(cfg, text, notes, &e2);
    if (st) {
        /* "config.json: FIELD VALUE: ..." -> "DIR/config.json: FIELD VALUE: ..." */
        const char *m = strncmp(e2.msg, "config.json", 11) ? e2.msg : e2.msg + 11;
        dec__errorf(err, "%s/config.json%s%s", dir, m == e2.msg ? ": " : "", m);
        free(text);
        return st;
    }
    if (json) *json = text;
    else free(text);
    return ZERO_OK;
}

const dec_config *dec_hf_config(const dec_hf *h) { return &h->cfg; }
const char *dec_hf_config_json(const dec_hf *h) { return h->json; }
const char *dec_hf_notes(const dec_hf *h) { return h->notes; }
const char *dec_hf_dtype(const dec_hf *h) { return h->dtype; }
int dec_hf_num_files(const dec_hf *h) { return h->nfiles; }

void dec_hf_close(dec_hf *h) {
    if (!h) return;
    for (int i = 0; i < h->nfiles; i++) zero_st_close(h->files[i]);
    free(h->files);
    free(h->json);
    free(h->notes);
    free(h);
}

static const char *dtype_word(const char *s) {
    if (!s) return NULL;
    if (!strcmp(s, "float32") || !strcmp(s, "F32")) return "float32";
    if (!strcmp(s, "bfloat16") || !strcmp(s, "BF16")) return "bfloat16";
    if (!strcmp(s, "float16") || !strcmp(s, "F16")) return "float16";
    return NULL;
}

static zero_status open_file(dec_hf *h, const char *name, zero_error *err) {
    char p[8400];
    zero_error pe;
    zero_status st = zero_path_in_dir(h->dir, name, p, sizeof p, &pe);
    if (st != ZERO_OK) {
        dec__errorf(err, "%s", pe.msg);
        return st;
    }
    if (dec_hf_is_pickle(p)) {
        dec_hf_pickle_error(err, p);
        return ZERO_ERR_FORMAT;
    }
    zero_st_file **fs = realloc(h->files, (size_t)(h->nfiles + 1) * sizeof *fs);
    if (!fs) {
        dec__errorf(err, "out of memory");
        return ZERO_ERR_NOMEM;
    }
    h->files = fs;
    st = zero_st_open(&h->files[h->nfiles], NULL, p, err);
    if (st == ZERO_OK) h->nfiles++;
    return st;
}

void dec_hf_names_free(char **names, int n) {
    for (int i = 0; names && i < n; i++) free(names[i]);
    free(names);
}

static uint32_t name_hash(const char *s) {
    uint32_t x = 2166136261u; /* FNV-1a */
    for (; *s; s++) x = (x ^ (unsigned char)*s) * 16777619u;
    return x;
}

zero_status dec_hf_index_files(const char *dir, const char *what, const char *text, size_t len, char ***names,
                               int *n, zero_error *err) {
    *names = NULL;
    *n = 0;
    zero_error je;
    if (zero_json_check(text, len, DEC_HF_INDEX_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &je) != ZERO_OK) {
        dec__errorf(err, "%s: %s: refused before parsing", what, je.msg);
        return ZERO_ERR_FORMAT;
    }
    cJSON *idx = cJSON_ParseWithLength(text, len);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
    if (!cJSON_IsObject(map) || !map->child) {
        cJSON_Delete(idx);
        dec__errorf(err, "%s: expected an object with a non-empty \"weight_map\"", what);
        return ZERO_ERR_FORMAT;
    }
    /* the distinct names through an open-addressed set of twice the most files: linear in the
     * entries, whatever their number */
    enum { SLOTS = 2 * DEC_HF_MAX_FILES };
    int *slot = malloc(SLOTS * sizeof *slot);
    char **out = calloc(DEC_HF_MAX_FILES, sizeof *out);
    int k = 0;
    zero_status st = ZERO_OK;
    if (!slot || !out) {
        dec__errorf(err, "out of memory");
        st = ZERO_ERR_NOMEM;
    }
    for (int i = 0; slot && i < SLOTS; i++) slot[i] = -1;
    for (const cJSON *e = map->child; e && st == ZERO_OK; e = e->next) {
        if (!cJSON_IsString(e)) {
            dec__errorf(err, "%s: weight_map[\"%.100s\"]: expected a file name", what, e->string);
            st = ZERO_ERR_FORMAT;
            break;
        }
        uint32_t h = name_hash(e->valuestring) % SLOTS;
        while (slot[h] >= 0 && strcmp(out[slot[h]], e->valuestring)) h = (h + 1) % SLOTS;
        if (slot[h] >= 0) continue;
        if (k >= DEC_HF_MAX_FILES) {
            dec__errorf(err, "%s: more than %d weight files", what, DEC_HF_MAX_FILES);
            st = ZERO_ERR_FORMAT;
            break;
        }
        char p[8400];
        zero_error pe;
        if ((st = zero_path_in_dir(dir, e->valuestring, p, sizeof p, &pe)) != ZERO_OK) {
            dec__errorf(err, "%s: weight_map[\"%.100s\"]: %s", what, e->string, pe.msg);
            break;
        }
        if (!(out[k] = strdup(e->valuestring))) {
            dec__errorf(err, "out of memory");
            st = ZERO_ERR_NOMEM;
            break;
        }
        slot[h] = k++;
    }
    free(slot);
    cJSON_Delete(idx);
    if (st != ZERO_OK) {
        dec_hf_names_free(out, k);
        return st;
    }
    *names = out;
    *n = k;
    return ZERO_OK;
}

/* ---------------------------------------------------------------- one tensor, one file */
/* The name a tensor is the parameter of: GPT-2's body is saved with or without "transformer.". */
static const char *param_key(const dec_hf *h, const char *name) {
    return h->cfg.arch == DEC_ARCH_GPT2 && !strncmp(name, "transformer.", 12) ? name + 12 : name;
}

static const char *base_name(const char *path) {
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* The slot of `key` in check_tensors' open-addressed table of (file, tensor): its own, or the
 * empty one where it would go. */
static size_t slot_of(const dec_hf *h, int (*slot)[2], size_t nslots, const char *key) {
    size_t k = name_hash(key) % nslots;
    while (slot[k][0] >= 0 && strcmp(param_key(h, zero_st_tensor_at(h->files[slot[k][0]], slot[k][1])->name), key))
        k = (k + 1) % nslots;
    return k;
}

/* Each tensor of the weight files once: a name in two files, or GPT-2's "transformer.X" beside
 * "X", is refused, because which copy a loader takes would be a matter of order (transformers
 * takes the one the index names; zero would take the first file's). With an index (its
 * weight_map already checked by dec_hf_index_files), every entry must name the file that holds
 * its tensor and every tensor of a shard must have an entry, so that the index and the shards
 * describe one model. Linear in tensors plus entries: an open-addressed table of the tensors. */
static zero_status check_tensors(dec_hf *h, const char *index_path, const char *index_text, size_t index_len,
                                 zero_error *err) {
    size_t total = 0;
    for (int f = 0; f < h->nfiles; f++) total += (size_t)zero_st_count(h->files[f]);
    const size_t nslots = 2 * total + 1;
    int(*slot)[2] = malloc(nslots * sizeof *slot); /* (file, tensor), file -1: empty */
    unsigned char *listed = calloc(nslots, 1);     /* the index has the tensor's entry */
    cJSON *idx = NULL;
    zero_status st = ZERO_OK;
    if (!slot || !listed) {
        dec__errorf(err, "out of memory for the table of %zu tensors", total);
        st = ZERO_ERR_NOMEM;
        goto out;
    }
    for (size_t k = 0; k < nslots; k++) slot[k][0] = -1;
    for (int f = 0; f < h->nfiles && !st; f++)
        for (int i = 0; i < zero_st_count(h->files[f]); i++) {
            const char *n = zero_st_tensor_at(h->files[f], i)->name, *key = param_key(h, n);
            const size_t k = slot_of(h, slot, nslots, key);
            if (slot[k][0] < 0) {
                slot[k][0] = f;
                slot[k][1] = i;
                continue;
            }
            const zero_st_file *g = h->files[slot[k][0]];
            const char *m = zero_st_tensor_at(g, slot[k][1])->name;
            if (!strcmp(m, n))
                dec__errorf(err, "%s: tensor '%s' is in %s and %s: expected one", h->dir, n, base_name(zero_st_path(g)),
                            base_name(zero_st_path(h->files[f])));
            else
                dec__errorf(err, "%s: tensors '%s' (%s) and '%s' (%s) are both the parameter '%s': expected one",
                            h->dir, m, base_name(zero_st_path(g)), n, base_name(zero_st_path(h->files[f])), key);
            st = ZERO_ERR_FORMAT;
            break;
        }
    if (st || !index_text) goto out;
    idx = cJSON_ParseWithLength(index_text, index_len);
    const cJSON *map = cJSON_GetObjectItemCaseSensitive(idx, "weight_map");
    size_t nlisted = 0;
    for (const cJSON *e = map ? map->child : NULL; e; e = e->next) {
        const size_t k = slot_of(h, slot, nslots, param_key(h, e->string));
        const zero_st_file *g = slot[k][0] >= 0 ? h->files[slot[k][0]] : NULL;
        if (!g || strcmp(zero_st_tensor_at(g, slot[k][1])->name, e->string)) {
            dec__errorf(err, "%s: the index lists '%.200s', which no shard holds", index_path, e->string);
            st = ZERO_ERR_FORMAT;
            break;
        }
        if (strcmp(base_name(zero_st_path(g)), e->valuestring)) {
            dec__errorf(err, "%s: the index maps '%s' to %.200s but %.200s does not hold it (%s does)", index_path,
                        e->string, e->valuestring, e->valuestring, base_name(zero_st_path(g)));
            st = ZERO_ERR_FORMAT;
            break;
        }
        listed[k] = 1;
        nlisted++;
    }
    for (size_t k = 0; !st && nlisted < total && k < nslots; k++)
        if (slot[k][0] >= 0 && !listed[k]) {
            const zero_st_file *g = h->files[slot[k][0]];
            dec__errorf(err, "%s: tensor '%s' is not in the index %s (it lists what each shard holds)", zero_st_path(g),
                        zero_st_tensor_at(g, slot[k][1])->name, index_path);
            st = ZERO_ERR_FORMAT;
        }
out:
    cJSON_Delete(idx);
    free(listed);
    free(slot);
    return st;
}

zero_status dec_hf_open(dec_hf **out, const char *dir, zero_error *err) {
    *out = NULL;
    dec_hf *h = calloc(1, sizeof *h);
    if (!h) {
        dec__errorf(err, "out of memory");
        return ZERO_ERR_NOMEM;
    }
    snprintf(h->dir, sizeof h->dir, "%s", dir);
    zero_status st = dec_hf_read_config(dir, &h->cfg, &h->json, &h->notes, err);
    if (st) goto fail;
    char p[4200], q[4200];
    zero_error pe;
    if ((st = zero_path_in_dir(dir, "model.safetensors.index.json", p, sizeof p, &pe)) != ZERO_OK ||
        (st = zero_path_in_dir(dir, "model.safetensors", q, sizeof q, &pe)) != ZERO_OK) {
        dec__errorf(err, "%s", pe.msg);
        goto fail;
    }
    if (is_file(p)) {
        size_t len = 0;
        char *text = slurp(p, DEC_HF_INDEX_MAX_BYTES, &len, err);
        if (!text) {
            st = ZERO_ERR_FORMAT;
            goto fail;
        }
        char **names = NULL;
        int n = 0;
        st = dec_hf_index_files(dir, p, text, len, &names, &n, err);
        for (int i = 0; i < n && st == ZERO_OK; i++) st = open_file(h, names[i], err);
        dec_hf_names_free(names, n);
        if (!st) st = check_tensors(h, p, text, len, err);
        free(text);
        if (st) goto fail;
    } else if (is_file(q)) {
        if ((st = open_file(h, "model.safetensors", err)) || (st = check_tensors(h, NULL, NULL, 0, err))) goto fail;
    } else {
        const char *pick[] = {"pytorch_model.bin", "pytorch_model.bin.index.json"};
        for (int i = 0; i < 2; i++) {
            snprintf(q, sizeof q, "%s/%s", dir, pick[i]);
            if (is_file(q)) {
                dec_hf_pickle_error(err, q);
                st = ZERO_ERR_FORMAT;
                goto fail;
            }
        }
        dec__errorf(err, "%s: no model.safetensors or model.safetensors.index.json (the weights of the model)", dir);
        st = ZERO_ERR_IO;
        goto fail;
    }
    cJSON *cj = cJSON_Parse(h->json);
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(cj, "torch_dtype");
    if (!cJSON_IsString(dt)) dt = cJSON_GetObjectItemCaseSensitive(cj, "dtype");
    h->dtype = dtype_word(cJSON_IsString(dt) ? dt->valuestring : NULL);
    cJSON_Delete(cj);
    if (!h->dtype && h->nfiles && zero_st_count(h->files[0]) > 0) h->dtype = dtype_word(zero_st_tensor_at(h->files[0], 0)->dtype);
    *out = h;
    return ZERO_OK;
fail:
    dec_hf_close(h);
    return st;
}

/* ---------------------------------------------------------------- names */
/* Tensors of a checkpoint that are not parameters: GPT-2's causal-mask buffers, RoPE's cached
 * inverse frequencies, and the LM head of a tied model (transformers ties it on load; dec_hf_load
 * checks that it equals the embeddings). */
static int ignorable(const dec_config *c, const char *name) {
    if (!strncmp(name, "transformer.", 12)) name += 12;
    if (c->tied && !strcmp(name, "lm_head.weight")) return 1;
    const size_t n = strlen(name);
    if (n > 20 && !strcmp(name + n - 20, ".rotary_emb.inv_freq")) return 1;
    if (c->arch != DEC_ARCH_GPT2 || strncmp(name, "h.", 2)) return 0;
    const char *dot = strchr(name + 2, '.');
    return dot && (!strcmp(dot, ".attn.bias") || !strcmp(dot, ".attn.masked_bias"));
}

/* The file and index of parameter `name`: GPT-2's body also under "transformer.". */
static int locate(const dec_hf *h, const char *name, int *fi) {
    char alt[256];
    const char *cand[2] = {name, NULL};
    if (h->cfg.arch == DEC_ARCH_GPT2 && strcmp(name, "lm_head.weight")) {
        snprintf(alt, sizeof alt, "transformer.%s", name);
        cand[1] = alt;
    }
    for (int k = 0; k < 2 && cand[k]; k++)
        for (int f = 0; f < h->nfiles; f++) {
            const int i = zero_st_find(h->files[f], cand[k]);
            if (i >= 0) {
                *fi = f;
                return i;
            }
        }
    return -1;
}

static const char *fmt_shape(const int64_t *shape, int ndim, char *buf, size_t cap) {
    size_t at = (size_t)snprintf(buf, cap, "[");
    for (int d = 0; d < ndim && at < cap; d++)
        at += (size_t)snprintf(buf + at, cap - at, "%s%lld", d ? ", " : "", (long long)shape[d]);
    if (at < cap) snprintf(buf + at, cap - at, "]");
    return buf;
}

/* Every parameter has a tensor of its shape and a float dtype; every tensor is a parameter or
 * ignorable. Fills where[p] = (file, index), and head[] with the lm_head.weight a tied model's
 * files hold (file -1: none). */
static zero_status match(dec_hf *h, zero_engine *e, int (*where)[2], int head[2], zero_error *err) {
    const int np = zero_engine_num_params(e);
    char s1[160], s2[160];
    head[0] = -1;
    for (int f = 0; f < h->nfiles; f++)
        for (int i = 0; i < zero_st_count(h->files[f]); i++) {
            const char *n = zero_st_tensor_at(h->files[f], i)->name;
            const char *bare = param_key(h, n);
            if (h->cfg.tied && !strcmp(bare, "lm_head.weight")) {
                head[0] = f;
                head[1] = i;
            }
            if (!ignorable(&h->cfg, n) && zero_engine_find_param(e, bare) < 0) {
                dec__errorf(err, "%s: tensor '%s' is not a parameter of this %s (config.json and the weights "
                            "disagree?)", zero_st_path(h->files[f]), n, dec_arch_name(h->cfg.arch));
                return ZERO_ERR_FORMAT;
            }
        }
    for (int p = 0; p < np; p++) {
        zero_param_info pi;
        zero_engine_param_info(e, p, &pi);
        if (dec_lora_is_param(pi.name)) { /* LoRA adapters are not in the base model */
            where[p][0] = -1;
            continue;
        }
        int f = -1;
        const int i = locate(h, pi.name, &f);
        if (i < 0) {
            dec__errorf(err, "%s: missing tensor '%s' (expected shape %s)", h->dir, pi.name,
                        fmt_shape(pi.shape, pi.ndim, s1, sizeof s1));
            return ZERO_ERR_FORMAT;
        }
        const zero_st_tensor *t = zero_st_tensor_at(h->files[f], i);
        int same = t->ndim == pi.ndim;
        for (int d = 0; same && d < t->ndim; d++) same = t->shape[d] == pi.shape[d];
        if (!same) {
            dec__errorf(err, "%s: tensor '%s' has shape %s; config.json makes it %s", zero_st_path(h->files[f]),
                        t->name, fmt_shape(t->shape, t->ndim, s1, sizeof s1),
                        fmt_shape(pi.shape, pi.ndim, s2, sizeof s2));
            return ZERO_ERR_FORMAT;
        }
        if (t->zdtype != ZERO_DTYPE_FP32 && t->zdtype != ZERO_DTYPE_BF16 && t->zdtype != ZERO_DTYPE_FP16) {
            dec__errorf(err, "%s: tensor '%s' has dtype %s: expected F32, BF16 or F16", zero_st_path(h->files[f]),
                        t->name, t->dtype);
            return ZERO_ERR_FORMAT;
        }
        where[p][0] = f;
        where[p][1] = i;
    }
    return ZERO_OK;
}

/* ---------------------------------------------------------------- loading */
/* Reads elements [a, b) of tensor i of f as fp32 into dst (stage: scratch of CHUNK halves). */
static zero_status read_elems(zero_st_file *f, int i, uint64_t a, uint64_t b, float *dst, uint16_t *stage,
                              uint32_t *crc, zero_error *err) {
    const zero_st_tensor *t = zero_st_tensor_at(f, i);
    const size_t es = t->elem_size;
    zero_status st;
    if (t->zdtype == ZERO_DTYPE_FP32) {
        st = zero_st_read(f, i, a * es, dst, (size_t)((b - a) * es));
        if (!st && crc) *crc = zero_crc32c(*crc, dst, (size_t)((b - a) * es));
    } else {
        st = zero_st_read(f, i, a * es, stage, (size_t)((b - a) * es));
        if (!st && crc) *crc = zero_crc32c(*crc, stage, (size_t)((b - a) * es));
        if (!st) {
            const size_t n = (size_t)(b - a);
            if (t->zdtype == ZERO_DTYPE_BF16)
                for (size_t k = 0; k < n; k++) dst[k] = zero_bf16_to_fp32(stage[k]);
            else
                for (size_t k = 0; k < n; k++) dst[k] = zero_fp16_to_fp32(stage[k]);
        }
    }
    if (st) dec__errorf(err, "%s", zero_st_last_error(f));
    else st = dec_check_finite(dst, (size_t)(b - a), a, zero_st_path(f), t->name, err);
    return st;
}

/* A tied model whose files also hold lm_head.weight: transformers makes the head and the
 * embeddings one tensor, so which of the two copies survives the load is a matter of order; zero
 * skips the head, which is only right when it holds the embeddings' values. Both are read whole
 * (on every rank, so that every rank comes to the same answer) and compared as fp32 bits: an
 * export that saved both copies passes, an untied head under a tied config.json is refused. */
static zero_status check_tied_head(dec_hf *h, zero_engine *e, int (*where)[2], const int head[2], float *buf,
                                   uint16_t *stage, zero_error *err) {
    const char *emb = h->cfg.arch == DEC_ARCH_GPT2 ? "wte.weight" : "model.embed_tokens.weight";
    const int p = zero_engine_find_param(e, emb);
    if (head[0] < 0 || p < 0 || where[p][0] < 0) return ZERO_OK;
    zero_st_file *fh = h->files[head[0]], *fe = h->files[where[p][0]];
    const zero_st_tensor *th = zero_st_tensor_at(fh, head[1]), *te = zero_st_tensor_at(fe, where[p][1]);
    const char *why = "config.json ties the LM head to the embeddings (tie_word_embeddings)";
    char s1[160], s2[160];
    int same = th->ndim == te->ndim;
    for (int d = 0; same && d < th->ndim; d++) same = th->shape[d] == te->shape[d];
    if (!same) {
        dec__errorf(err, "%s: %s but %s has shape %s and %s %s", zero_st_path(fh), why, th->name,
                    fmt_shape(th->shape, th->ndim, s1, sizeof s1), te->name,
                    fmt_shape(te->shape, te->ndim, s2, sizeof s2));
        return ZERO_ERR_FORMAT;
    }
    if (th->zdtype != ZERO_DTYPE_FP32 && th->zdtype != ZERO_DTYPE_BF16 && th->zdtype != ZERO_DTYPE_FP16) {
        dec__errorf(err, "%s: tensor '%s' has dtype %s: expected F32, BF16 or F16", zero_st_path(fh), th->name,
                    th->dtype);
        return ZERO_ERR_FORMAT;
    }
    const uint64_t half = CHUNK / 2;
    float *a = buf, *b = buf + half;
    for (uint64_t x = 0; x < te->numel;) {
        const uint64_t n = te->numel - x < half ? te->numel - x : half;
        zero_status st = read_elems(fh, head[1], x, x + n, a, stage, NULL, err);
        if (!st) st = read_elems(fe, where[p][1], x, x + n, b, stage, NULL, err);
        if (st) return st;
        for (uint64_t k = 0; k < n; k++)
            if (memcmp(&a[k], &b[k], sizeof a[k])) {
                dec__errorf(err, "%s: %s but %s differs from %s (element %llu: %.9g, not %.9g): untie them in "
                            "config.json or remove %s", zero_st_path(fh), why, th->name, te->name,
                            (unsigned long long)(x + k), (double)a[k], (double)b[k], th->name);
                return ZERO_ERR_FORMAT;
            }
        x += n;
    }
    return ZERO_OK;
}

zero_status dec_hf_load(dec_hf *h, zero_engine *e, zero_error *err) {
    const int np = zero_engine_num_params(e), nu = zero_engine_num_units(e);
    int(*where)[2] = calloc((size_t)(np > 0 ? np : 1), sizeof *where);
    float *buf = malloc(CHUNK * sizeof(float));
    uint16_t *stage = malloc(CHUNK * sizeof(uint16_t));
    zero_status st = ZERO_OK;
    if (!where || !buf || !stage) {
        dec__errorf(err, "out of memory for the load buffers");
        st = ZERO_ERR_NOMEM;
        goto out;
    }
    int head[2] = {-1, -1};
    if ((st = match(h, e, where, head, err)) || (st = check_tied_head(h, e, where, head, buf, stage, err))) goto out;
    for (int u = 0; u < nu && !st; u++) {
        uint64_t at = 0;   /* the unit element buf[0] holds */
        uint64_t fill = 0; /* buf holds unit elements [at, at + fill) */
        for (int p = 0; p < np && !st; p++) {
            zero_param_info pi;
            zero_engine_param_info(e, p, &pi);
            if (pi.unit != u || where[p][0] < 0) continue;
            /* the elements this rank keeps of the parameter: its shard's part at stage 3, all of
             * them otherwise */
            const uint64_t a = pi.offset + pi.own_lo, b = pi.offset + pi.own_hi;
            if (a >= b) continue;
            if (fill && at + fill != a) { /* not adjacent to what buf holds: hand that over first */
                if (zero_engine_set_unit_range(e, u, at, at + fill, buf)) {
                    dec__errorf(err, "%s", zero_engine_last_error(e));
                    st = ZERO_ERR_STATE;
                    break;
                }
                fill = 0;
            }
            if (!fill) at = a;
            zero_st_file *f = h->files[where[p][0]];
            const int ti = where[p][1];
            const zero_st_tensor *t = zero_st_tensor_at(f, ti);
            /* a tensor read whole is checked against the checksum zero's writer stores */
            const int whole = a == pi.offset && b == pi.offset + pi.numel && t->has_crc;
            uint32_t crc = 0;
            for (uint64_t x = a; x < b && !st;) {
                const uint64_t n = b - x < CHUNK - fill ? b - x : CHUNK - fill;
                st = read_elems(f, ti, x - pi.offset, x - pi.offset + n, buf + fill, stage, whole ? &crc : NULL, err);
                fill += n;
                x += n;
                if (!st && fill == CHUNK) {
                    if (zero_engine_set_unit_range(e, u, at, at + fill, buf)) {
                        dec__errorf(err, "%s", zero_engine_last_error(e));
                        st = ZERO_ERR_STATE;
                    }
                    at += fill;
                    fill = 0;
                }
            }
            if (!st && whole && crc != t->crc) {
                dec__errorf(err, "%s: tensor '%s': checksum mismatch (stored %08x, computed %08x): the file is corrupt",
                            zero_st_path(f), t->name, (unsigned)t->crc, (unsigned)crc);
                st = ZERO_ERR_FORMAT;
            }
        }
        if (!st && fill && zero_engine_set_unit_range(e, u, at, at + fill, buf)) {
            dec__errorf(err, "%s", zero_engine_last_error(e));
            st = ZERO_ERR_STATE;
        }
    }
out:
    free(stage);
    free(buf);
    free(where);
    return st;
}

/* ---------------------------------------------------------------- a base model's identity */
static uint64_t fnv(uint64_t h, const void *p, size_t n) {
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

zero_status dec_hf_fingerprint(dec_hf *h, char *out, size_t cap, zero_error *err) {
    uint64_t x = fnv(0xcbf29ce484222325ull, h->json, strlen(h->json));
    unsigned char buf[2 * DEC_HF_FINGERPRINT_BYTES];
    for (int f = 0; f < h->nfiles; f++)
        for (int i = 0; i < zero_st_count(h->files[f]); i++) {
            const zero_st_tensor *t = zero_st_tensor_at(h->files[f], i);
            x = fnv(x, t->name, strlen(t->name) + 1);
            x = fnv(x, t->dtype, strlen(t->dtype) + 1);
            x = fnv(x, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
            x = fnv(x, &t->nbytes, sizeof t->nbytes);
            /* its first and last bytes (all of a small tensor) */
            const uint64_t n = t->nbytes < DEC_HF_FINGERPRINT_BYTES ? t->nbytes : DEC_HF_FINGERPRINT_BYTES;
            zero_status st = n ? zero_st_read(h->files[f], i, 0, buf, (size_t)n) : ZERO_OK;
            if (!st && n) st = zero_st_read(h->files[f], i, t->nbytes - n, buf + n, (size_t)n);
            if (st) {
                dec__errorf(err, "%s", zero_st_last_error(h->files[f]));
                return st;
            }
            x = fnv(x, buf, (size_t)(2 * n));
        }
    snprintf(out, cap, "fnv1a64:%016llx", (unsigned long long)x);
    return ZERO_OK;
}

zero_status dec_hf_read(dec_hf *h, const char *name, uint64_t lo, uint64_t hi, float *dst, zero_error *err) {
    int f = -1;
    const int i = locate(h, name, &f);
    if (i < 0) {
        dec__errorf(err, "%s: no tensor '%s'", h->dir, name);
        return ZERO_ERR_FORMAT;
    }
    const zero_st_tensor *t = zero_st_tensor_at(h->files[f], i);
    if (hi > t->numel || lo > hi) {
        dec__errorf(err, "%s: tensor '%s' has %llu elements: [%llu, %llu) is outside", h->dir, name,
                    (unsigned long long)t->numel, (unsigned long long)lo, (unsigned long long)hi);
        return ZERO_ERR_INVALID_ARG;
    }
    if (t->zdtype != ZERO_DTYPE_FP32 && t->zdtype != ZERO_DTYPE_BF16 && t->zdtype != ZERO_DTYPE_FP16) {
        dec__errorf(err, "%s: tensor '%s' has dtype %s: expected F32, BF16 or F16", zero_st_path(h->files[f]), name, t->dtype);
        return ZERO_ERR_FORMAT;
    }
    uint16_t stage[4096];
    zero_status st = ZERO_OK;
    for (uint64_t a = lo; a < hi && !st; a += 4096) {
        const uint64_t b = hi - a < 4096 ? hi : a + 4096;
        st = read_elems(h->files[f], i, a, b, dst + (a - lo), stage, NULL, err);
    }
    return st;
}
