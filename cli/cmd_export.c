/* `zero export CKPT -o DIR|FILE.safetensors|FILE.gguf`: a sharded checkpoint (any world size) as a
 * Hugging Face model directory (config.json, model.safetensors or shards with their index, the
 * source's tokenizer files), as one safetensors file, or as a GGUF file for llama.cpp (the plan of
 * models/decoder/gguf.h), streamed a chunk at a time, so memory stays a few MiB whatever the
 * model's size. */
#include "cli.h"

#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "decoder/gguf.h"
#include "decoder/hf.h"
#include "export_lora.h"
#include "weights.h"
#include "zero/gguf.h"

/* Elements read from the checkpoint, converted and written at a time: the export's memory. */
#define CHUNK (256u * 1024u)
/* transformers' default max_shard_size, "5GB" */
#define DEFAULT_SHARD 5e9

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero export CKPT -o DIR|FILE.safetensors [--dtype fp32|bf16|fp16] [--max-shard-size SIZE] [--json]\n"
            "       zero export CKPT|MODEL_DIR --format gguf -o FILE.gguf [--type f32|f16|bf16|q8_0] [--json]\n"
            "\n"
            "Writes the fp32 master weights of checkpoint CKPT (a save directory, whose `latest` is\n"
            "followed, or one step directory), saved by any number of ranks at any stage:\n"
            "  - as a Hugging Face model directory DIR that transformers opens with from_pretrained:\n"
            "    config.json (the imported one, or one made for a model trained from scratch),\n"
            "    model.safetensors, or model-0000k-of-0000n.safetensors and model.safetensors.index.json\n"
            "    past --max-shard-size, and the tokenizer files of the directory the model came from;\n"
            "  - or, when the name ends in .safetensors, as that one file (the parameters' own names,\n"
            "    metadata zero.config holding the config.json).\n"
            "The checksums of every master tensor are verified before anything is written; each file\n"
            "appears complete or not at all.\n"
            "\n"
            "  -o, --output DIR|FILE      where to write\n"
            "  --dtype fp32|bf16|fp16     stored dtype (default: the source's torch_dtype, else fp32;\n"
            "                             bf16/fp16 round to nearest even)\n"
            "  --max-shard-size SIZE      largest weight file of a directory (default 5GB, as transformers)\n"
            "  --json                     print a JSON summary instead of a line of text\n"
            "  --format hf|safetensors|gguf  what to write (default: gguf for -o *.gguf, safetensors for\n"
            "                             -o *.safetensors, else a model directory)\n"
            "  --type f32|f16|bf16|q8_0   GGUF: the matrices' type (default bf16 for a bf16 model, else f16; f32 for\n"
            "                             an --adapter, llama.cpp's LoRA adapter (llama-cli --lora FILE);\n"
            "                             norms and biases stay f32; q8_0: blocks of 32, rows not a multiple of\n"
            "                             32 in f16, as llama.cpp's converter does), with the tokenizer, its\n"
            "                             merges, special ids and chat template in the metadata\n"
            "A LoRA run's checkpoint (zero train --lora) exports as one of:\n"
            "  --adapter                  PEFT's adapter directory DIR (adapter_config.json, adapter_model.safetensors)\n"
            "                             that peft.PeftModel.from_pretrained loads onto the base\n"
            "  --merge                    the full model, each targeted weight W + s B A (s = alpha/r, or alpha/sqrt(r))\n"
            "  --base DIR                 the base model directory for --merge (default: the one the run recorded;\n"
            "                             not needed when the run saved it with --save-frozen)\n"
            "Details: docs/CHECKPOINT.md (Export and import), docs/CLI.md.\n");
}

typedef enum export_format { FMT_AUTO = 0, FMT_HF, FMT_SAFETENSORS, FMT_GGUF } export_format;

typedef struct export_opts {
    const char *ckpt, *out, *base;
    zero_dtype dtype;
    int dtype_given, json, adapter, merge;
    double max_shard;
    export_format format;
    const char *gguf_type; /* --type, or NULL */
} export_opts;

static int ends_with(const char *s, const char *suffix) {
    const size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static int parse(int argc, char **argv, export_opts *o) {
    memset(o, 0, sizeof *o);
    o->dtype = ZERO_DTYPE_FP32;
    o->max_shard = DEFAULT_SHARD;
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
            o->dtype_given = 1;
        } else if (!strcmp(a, "--max-shard-size")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_size(a, v, &o->max_shard)) return -1;
            if (o->max_shard < 1) {
                cli_error(CLI_USAGE, "--max-shard-size '%s': expected at least 1 byte", v);
                return -1;
            }
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--adapter")) {
            o->adapter = 1;
        } else if (!strcmp(a, "--merge")) {
            o->merge = 1;
        } else if (!strcmp(a, "--base")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            o->base = v;
        } else if (!strcmp(a, "--format")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            o->format = !strcmp(v, "hf") ? FMT_HF : !strcmp(v, "safetensors") ? FMT_SAFETENSORS : !strcmp(v, "gguf") ? FMT_GGUF : -1;
            if ((int)o->format < 0) {
                cli_error(CLI_USAGE, "--format '%s': expected hf, safetensors or gguf", v);
                return -1;
            }
        } else if (!strcmp(a, "--type")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            if (strcmp(v, "f32") && strcmp(v, "f16") && strcmp(v, "bf16") && strcmp(v, "q8_0")) {
                cli_error(CLI_USAGE, "--type '%s': expected f32, f16, bf16 or q8_0", v);
                return -1;
            }
            o->gguf_type = v;
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
        cli_error(CLI_USAGE, "export: expected a checkpoint directory (zero export CKPT -o DIR)");
        return -1;
    }
    if (!o->out) {
        cli_error(CLI_USAGE, "export: expected -o DIR (a Hugging Face model directory), -o FILE.safetensors or -o FILE.gguf");
        return -1;
    }
    if (o->format == FMT_AUTO)
        o->format = ends_with(o->out, ".gguf") ? FMT_GGUF : ends_with(o->out, ".safetensors") ? FMT_SAFETENSORS : FMT_HF;
    if (o->gguf_type && o->format != FMT_GGUF) {
        cli_error(CLI_USAGE, "--type %s: a GGUF file's type (--format gguf, or -o FILE.gguf); --dtype sets the others'",
                  o->gguf_type);
        return -1;
    }
    if (o->format == FMT_GGUF && o->dtype_given) {
        cli_error(CLI_USAGE, "--format gguf takes --type f32|f16|bf16|q8_0, not --dtype");
        return -1;
    }
    return 0;
}

/* The name a parameter has in a Hugging Face checkpoint: GPT2LMHeadModel keeps its body under
 * "transformer." (the decoder's GPT-2 names are the body's own). */
static void hf_name(const dec_config *c, const char *name, char *buf, size_t cap) {
    if (c && c->arch == DEC_ARCH_GPT2 && strcmp(name, "lm_head.weight")) snprintf(buf, cap, "transformer.%s", name);
    else snprintf(buf, cap, "%s", name);
}

/* Elements [at, at + n) of parameter q in fp32: the checkpoint's, or (LoRA --merge) the base with
 * the adapters merged. */
static int read_param(zero_ckpt *c, lora_export *lx, const cli_ckpt_param *q, uint64_t at, uint64_t n, float *buf) {
    if (lx) return export_lora_read(lx, c, q, at, n, buf);
    char tname[512];
    cli_ckpt_param_tensor(q, tname, sizeof tname);
    if (zero_ckpt_read_range(c, tname, q->offset + at, q->offset + at + n, buf) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "export: %s", zero_ckpt_last_error(c));
    return CLI_OK;
}

/* Streams parameters [k0, k1): CHUNK elements read (fp32), converted, appended. */
static int stream(zero_st_writer *w, zero_ckpt *c, const cli_ckpt_params *ps, int k0, int k1, zero_dtype dt, lora_export *lx) {
    float *buf = malloc(CHUNK * sizeof(float));
    uint16_t *half = dt != ZERO_DTYPE_FP32 ? malloc(CHUNK * sizeof(uint16_t)) : NULL;
    int rc = CLI_OK;
    if (!buf || (dt != ZERO_DTYPE_FP32 && !half)) rc = cli_error(CLI_RUNTIME, "export: out of memory");
    for (int k = k0; k < k1 && rc == CLI_OK; k++) {
        const cli_ckpt_param *q = &ps->p[k];
        for (uint64_t at = 0; at < q->numel && rc == CLI_OK; at += CHUNK) {
            const uint64_t n = q->numel - at < CHUNK ? q->numel - at : CHUNK;
            if ((rc = read_param(c, lx, q, at, n, buf)) != CLI_OK) break;
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

/* One safetensors file of parameters [k0, k1) at path; meta: the file's metadata. */
static int write_file(const char *path, zero_ckpt *c, const cli_ckpt_params *ps, int k0, int k1, zero_dtype dt,
                      const dec_config *cfg, const char *const *meta, int nmeta, uint64_t *bytes, lora_export *lx) {
    zero_error err = {{0}};
    zero_st_writer *w = NULL;
    if (zero_st_writer_create(&w, NULL, path, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "export: %s", err.msg);
    zero_status s = ZERO_OK;
    for (int i = 0; i + 1 < nmeta && s == ZERO_OK; i += 2) s = zero_st_writer_set_metadata(w, meta[i], meta[i + 1]);
    for (int k = k0; k < k1 && s == ZERO_OK; k++) {
        char name[512];
        if (!export_lora_name(lx, ps->p[k].name, name, sizeof name)) hf_name(cfg, ps->p[k].name, name, sizeof name);
        s = zero_st_writer_add(w, name, dt, ps->p[k].shape, ps->p[k].ndim);
    }
    int rc = s == ZERO_OK ? CLI_OK : cli_error(CLI_RUNTIME, "export: %s", zero_st_writer_last_error(w));
    if (rc == CLI_OK) rc = stream(w, c, ps, k0, k1, dt, lx);
    if (rc == CLI_OK && zero_st_writer_finish(w) != ZERO_OK)
        rc = cli_error(CLI_RUNTIME, "export: %s", zero_st_writer_last_error(w));
    if (rc == CLI_OK) *bytes += zero_st_writer_file_size(w);
    zero_st_writer_free(w);
    return rc;
}

/* Opens path.tmp for a file a rename publishes as path (zero_create_tmp: a symbolic link planted
 * there is removed, never followed; the file is created exclusively, mode 0666 less the umask). */
static FILE *create_tmp(const char *path, char *tmp, size_t cap) {
    zero_error err;
    const int fd = zero_create_tmp(path, tmp, cap, &err);
    if (fd < 0) {
        cli_error(CLI_RUNTIME, "export: %s", err.msg);
        return NULL;
    }
    FILE *f = fdopen(fd, "wb");
    if (!f) {
        cli_error(CLI_RUNTIME, "export: cannot write %s: %s", tmp, strerror(errno));
        close(fd);
        unlink(tmp);
    }
    return f;
}

/* Writes text to path through path.tmp and a rename. */
static int write_text(const char *path, const char *text) {
    char tmp[4300];
    FILE *f = create_tmp(path, tmp, sizeof tmp);
    if (!f) return CLI_RUNTIME;
    int bad = fputs(text, f) < 0 || fputc('\n', f) < 0;
    bad |= fflush(f) != 0 || fsync(fileno(f)) != 0;
    bad |= fclose(f) != 0;
    if (bad || rename(tmp, path)) {
        const int e = errno;
        unlink(tmp);
        return cli_error(CLI_RUNTIME, "export: cannot write %s: %s", path, strerror(e ? e : EIO));
    }
    return CLI_OK;
}

/* The tokenizer (and generation) files a model directory carries, copied as they are. */
static const char *const tokenizer_files[] = {
    "tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "vocab.json", "merges.txt",
    "tokenizer.model", "added_tokens.json", "chat_template.jinja", "chat_template.json", "generation_config.json",
};

/* Copies a file of the source directory (already checked by zero_path_in_dir) to `to`. */
static int copy_file(const char *from, const char *to) {
    FILE *in = fopen(from, "rb");
    if (!in) return cli_error(CLI_RUNTIME, "export: cannot read %s: %s", from, strerror(errno));
    char tmp[4300];
    FILE *out = create_tmp(to, tmp, sizeof tmp);
    if (!out) {
        fclose(in);
        return CLI_RUNTIME;
    }
    char buf[65536];
    size_t n;
    int bad = 0;
    while (!bad && (n = fread(buf, 1, sizeof buf, in)) > 0) bad = fwrite(buf, 1, n, out) != n;
    bad |= ferror(in);
    fclose(in);
    bad |= fflush(out) != 0 || fsync(fileno(out)) != 0;
    bad |= fclose(out) != 0;
    if (bad || rename(tmp, to)) {
        unlink(tmp);
        return cli_error(CLI_RUNTIME, "export: cannot copy %s to %s", from, to);
    }
    return CLI_OK;
}

/* Weight files of an earlier export into the same directory that this one did not write:
 * transformers would read a stale model.safetensors before a new index. */
static void remove_stale(const char *dir, char (*written)[64], int nwritten) {
    DIR *d = opendir(dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *n = e->d_name;
        const int weights = !strcmp(n, "model.safetensors") || !strcmp(n, "model.safetensors.index.json") ||
                            (!strncmp(n, "model-", 6) && ends_with(n, ".safetensors") && strstr(n, "-of-"));
        if (!weights) continue;
        int mine = 0;
        for (int i = 0; i < nwritten && !mine; i++) mine = !strcmp(written[i], n);
        if (mine) continue;
        char p[4200];
        snprintf(p, sizeof p, "%s/%s", dir, n);
        unlink(p);
    }
    closedir(d);
}

static const char *torch_dtype_of(zero_dtype dt) {
    return dt == ZERO_DTYPE_BF16 ? "bfloat16" : dt == ZERO_DTYPE_FP16 ? "float16" : "float32";
}

/* The dtype config.json says the weights are in (the source's), or fp32. */
static zero_dtype source_dtype(const char *config_json) {
    cJSON *j = config_json ? cJSON_Parse(config_json) : NULL;
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(j, "torch_dtype");
    if (!cJSON_IsString(d)) d = cJSON_GetObjectItemCaseSensitive(j, "dtype");
    zero_dtype dt = ZERO_DTYPE_FP32;
    if (cJSON_IsString(d)) {
        if (!strcmp(d->valuestring, "bfloat16")) dt = ZERO_DTYPE_BF16;
        else if (!strcmp(d->valuestring, "float16")) dt = ZERO_DTYPE_FP16;
    }
    cJSON_Delete(j);
    return dt;
}

typedef struct result {
    int files;
    uint64_t bytes;
    int tokenizer_files;
} result;

/* --adapter: DIR/adapter_model.safetensors (PEFT's keys) and DIR/adapter_config.json. */
static int export_adapter(const export_opts *o, zero_ckpt *c, const cli_ckpt_params *ps, zero_dtype dt, result *res,
                          lora_export *lx) {
    struct stat sb;
    if (ends_with(o->out, ".safetensors") || (!stat(o->out, &sb) && !S_ISDIR(sb.st_mode)))
        return cli_error(CLI_USAGE, "export --adapter: -o '%s': expected a directory (PEFT's adapter directory)", o->out);
    if (stat(o->out, &sb) && mkdir(o->out, 0777))
        return cli_error(CLI_RUNTIME, "export: cannot create %s: %s", o->out, strerror(errno));
    char path[4200];
    snprintf(path, sizeof path, "%s/adapter_model.safetensors", o->out);
    const char *meta[] = {"format", "pt"};
    int rc = write_file(path, c, ps, 0, ps->n, dt, NULL, meta, 2, &res->bytes, lx);
    res->files = 1;
    return rc == CLI_OK ? export_lora_write_config(lx, o->out) : rc;
}

#define NTOK (sizeof tokenizer_files / sizeof tokenizer_files[0])

/* The tokenizer files export_dir will copy from the model's source directory, found and checked
 * before anything is written (from[i]: the file, "" when the directory has none): a file that
 * cannot be copied fails the export while the directory still holds the earlier export whole. 1
 * when there is a source directory to copy from. */
static int tokenizer_sources(const cli_model *m, char (*from)[4200], int *rc) {
    struct stat ss;
    *rc = CLI_OK;
    if (!m->source || stat(m->source, &ss) || !S_ISDIR(ss.st_mode)) return 0;
    for (size_t i = 0; i < NTOK; i++) {
        zero_error perr;
        /* a file the source directory names: never a symbolic link leading out of it */
        if (zero_path_in_dir(m->source, tokenizer_files[i], from[i], sizeof from[i], &perr) != ZERO_OK) {
            *rc = cli_error(CLI_RUNTIME, "export: %s", perr.msg);
            return 1;
        }
        if (access(from[i], F_OK)) {
            from[i][0] = 0;
            continue;
        }
        if (access(from[i], R_OK)) {
            *rc = cli_error(CLI_RUNTIME, "export: cannot read %s: %s", from[i], strerror(errno));
            return 1;
        }
    }
    return 1;
}

static int export_dir(const export_opts *o, zero_ckpt *c, const cli_ckpt_params *ps, const cli_model *m, zero_dtype dt,
                      result *res, lora_export *lx) {
    struct stat sb;
    int rc = CLI_OK;
    char from[NTOK][4200];
    const int copy_tokenizer = tokenizer_sources(m, from, &rc);
    if (rc != CLI_OK) return rc;
    if (!stat(o->out, &sb) && !S_ISDIR(sb.st_mode))
        return cli_error(CLI_USAGE, "-o '%s': exists and is not a directory (a file must be named *.safetensors)", o->out);
    if (stat(o->out, &sb) && mkdir(o->out, 0777))
        return cli_error(CLI_RUNTIME, "export: cannot create %s: %s", o->out, strerror(errno));
    /* shards: greedy in registration order, a new one when the next tensor would pass the limit */
    const size_t es = zero_dtype_size(dt);
    int *first = malloc(((size_t)ps->n + 1) * sizeof *first);
    char(*names)[64] = calloc((size_t)ps->n + 2, sizeof *names);
    if (!first || !names) {
        free(first), free(names);
        return cli_error(CLI_RUNTIME, "export: out of memory");
    }
    int nsh = 0;
    uint64_t cur = 0, total = 0;
    for (int k = 0; k < ps->n; k++) {
        const uint64_t b = ps->p[k].numel * es;
        if (k == 0 || (cur > 0 && (double)(cur + b) > o->max_shard)) first[nsh++] = k, cur = 0;
        cur += b;
        total += b;
    }
    first[nsh] = ps->n;
    for (int s = 0; s < nsh; s++) {
        if (nsh == 1) snprintf(names[s], sizeof names[s], "model.safetensors");
        else snprintf(names[s], sizeof names[s], "model-%05d-of-%05d.safetensors", s + 1, nsh);
    }
    char step[32];
    snprintf(step, sizeof step, "%lld", (long long)zero_ckpt_step(c));
    const char *meta[] = {"format", "pt", "zero.step", step};
    for (int s = 0; s < nsh && rc == CLI_OK; s++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", o->out, names[s]);
        rc = write_file(path, c, ps, first[s], first[s + 1], dt, &m->cfg, meta, 4, &res->bytes, lx);
        res->files++;
    }
    int nwritten = nsh;
    if (rc == CLI_OK && nsh > 1) { /* the index: {"metadata": {"total_size"}, "weight_map": {name: file}} */
        cJSON *idx = cJSON_CreateObject(), *md = cJSON_AddObjectToObject(idx, "metadata");
        cJSON_AddNumberToObject(md, "total_size", (double)total);
        cJSON *map = cJSON_AddObjectToObject(idx, "weight_map");
        for (int s = 0; s < nsh; s++)
            for (int k = first[s]; k < first[s + 1]; k++) {
                char name[512];
                hf_name(&m->cfg, ps->p[k].name, name, sizeof name);
                cJSON_AddStringToObject(map, name, names[s]);
            }
        char *text = cJSON_Print(idx);
        char path[4200];
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", o->out);
        rc = text ? write_text(path, text) : cli_error(CLI_RUNTIME, "export: out of memory");
        snprintf(names[nwritten++], sizeof names[0], "model.safetensors.index.json");
        cJSON_free(text);
        cJSON_Delete(idx);
    }
    if (rc == CLI_OK) { /* config.json: the imported one with the stored dtype, or a fresh one */
        char *text = dec_config_to_json(&m->cfg, m->config_json, torch_dtype_of(dt));
        char path[4200];
        snprintf(path, sizeof path, "%s/config.json", o->out);
        rc = text ? write_text(path, text) : cli_error(CLI_RUNTIME, "export: out of memory");
        free(text);
    }
    if (rc == CLI_OK) remove_stale(o->out, names, nwritten);
    if (rc == CLI_OK && m->source && !copy_tokenizer)
        fprintf(stderr, "zero: note: the model's source directory %s is gone: no tokenizer files copied\n", m->source);
    int copied[NTOK] = {0};
    for (size_t i = 0; rc == CLI_OK && copy_tokenizer && i < NTOK; i++) {
        char to[4200];
        if (!from[i][0]) continue;
        snprintf(to, sizeof to, "%s/%s", o->out, tokenizer_files[i]);
        rc = copy_file(from[i], to);
        copied[i] = rc == CLI_OK;
        res->tokenizer_files++;
    }
    /* an earlier export's tokenizer files that this model does not have would be read as its own */
    for (size_t i = 0; rc == CLI_OK && i < NTOK; i++) {
        char to[4200];
        snprintf(to, sizeof to, "%s/%s", o->out, tokenizer_files[i]);
        if (!copied[i] && unlink(to) != 0 && errno != ENOENT)
            rc = cli_error(CLI_RUNTIME, "export: cannot remove the stale %s: %s", to, strerror(errno));
    }
    free(first);
    free(names);
    return rc;
}

/* ---------------------------------------------------------------- GGUF */
/* The parameter named `name`, or NULL. */
static const cli_ckpt_param *param_named(const cli_ckpt_params *ps, const char *name) {
    for (int k = 0; k < ps->n; k++)
        if (!strcmp(ps->p[k].name, name)) return &ps->p[k];
    return NULL;
}

/* Where a GGUF export reads its parameters: a checkpoint (its parameter table; LoRA merged or not),
 * or a Hugging Face model directory (`zero export DIR --format gguf`). */
typedef struct gsrc {
    zero_ckpt *c;
    lora_export *lx;
    dec_hf *hf;
} gsrc;

/* Elements [at, at + n) of the parameter of t (q: its checkpoint entry; NULL for a directory). */
static int gsrc_read(const gsrc *s, const dec_gguf_tensor *t, const cli_ckpt_param *q, uint64_t at, uint64_t n, float *buf) {
    if (!s->hf) return read_param(s->c, s->lx, q, at, n, buf);
    zero_error err = {{0}};
    if (dec_hf_read(s->hf, t->src, at, at + n, buf, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "export: %s", err.msg);
    return CLI_OK;
}

/* Rows [r0, r1) of planned tensor t as GGUF stores them, into out ((r1 - r0) * cols floats); whole
 * is the transposed source (DEC_GGUF_TRANSPOSE) or the source vector (a permuted bias), read once. */
static int gguf_rows(const gsrc *s, const dec_gguf_tensor *t, const cli_ckpt_param *q, int64_t r0, int64_t r1,
                     const float *whole, float *out) {
    const int64_t C = t->cols;
    switch (t->order) {
    case DEC_GGUF_VALUES:
        memcpy(out, t->values + r0 * C, (size_t)((r1 - r0) * C) * sizeof(float));
        return CLI_OK;
    case DEC_GGUF_TRANSPOSE: /* source (cols, rows): row r is column r */
        for (int64_t r = r0; r < r1; r++)
            for (int64_t j = 0; j < C; j++) out[(r - r0) * C + j] = whole[j * t->rows + r];
        return CLI_OK;
    case DEC_GGUF_ROPE_PERM:
        if (t->ndim == 1) { /* a bias: its entries are permuted as a weight's rows */
            for (int64_t j = 0; j < C; j++) out[j] = whole[dec_gguf_perm_row(j, C, t->heads)];
            return CLI_OK;
        }
        for (int64_t r = r0; r < r1; r++) {
            const int rc = gsrc_read(s, t, q, (uint64_t)(dec_gguf_perm_row(r, t->rows, t->heads) * C), (uint64_t)C,
                                     out + (r - r0) * C);
            if (rc != CLI_OK) return rc;
        }
        return CLI_OK;
    case DEC_GGUF_ROWS:
        break;
    }
    return gsrc_read(s, t, q, (uint64_t)(r0 * C), (uint64_t)((r1 - r0) * C), out);
}

/* --adapter: the plan's tensors become the adapters of its LoRA targets, llama.cpp's way:
 * NAME.lora_a = A (r, in), NAME.lora_b = B (out, r), B's rows in the base weight's order. */
static int adapter_plan(const cli_ckpt_params *ps, const cli_model *m, dec_gguf_plan *plan) {
    dec_gguf_tensor *t = calloc(2 * (size_t)plan->n + 1, sizeof *t);
    if (!t) return cli_error(CLI_RUNTIME, "export: out of memory");
    int n = 0;
    for (int i = 0; i < plan->n; i++) {
        const dec_gguf_tensor *b = &plan->t[i];
        const size_t len = strlen(b->src);
        if (b->ndim != 2 || len < 8 || strcmp(b->src + len - 7, ".weight")) continue;
        char an[128], bn[128];
        const int keep = len - 7 < 100 ? (int)(len - 7) : 100; /* the decoder's names are far shorter */
        snprintf(an, sizeof an, "%.*s.lora_A.weight", keep, b->src);
        snprintf(bn, sizeof bn, "%.*s.lora_B.weight", keep, b->src);
        const cli_ckpt_param *qa = param_named(ps, an), *qb = param_named(ps, bn);
        if (!qa || !qb) continue;
        if (b->order == DEC_GGUF_TRANSPOSE) {
            free(t);
            return cli_error(CLI_USAGE, "export --format gguf --adapter of %s (Conv1D weights) is not supported yet "
                             "(--merge writes the merged model)", dec_arch_name(m->cfg.arch));
        }
        dec_gguf_tensor *a = &t[n++], *bt = &t[n++];
        *a = *b, *bt = *b;
        snprintf(a->name, sizeof a->name, "%.56s.lora_a", b->name); /* GGUF names: below 64 bytes */
        snprintf(bt->name, sizeof bt->name, "%.56s.lora_b", b->name);
        snprintf(a->src, sizeof a->src, "%s", an);
        snprintf(bt->src, sizeof bt->src, "%s", bn);
        a->rows = qa->shape[0], a->cols = qa->shape[1], a->order = DEC_GGUF_ROWS;
        bt->rows = qb->shape[0], bt->cols = qb->shape[1]; /* the base's row order (its q/k interleaving) */
    }
    free(plan->t);
    plan->t = t, plan->n = n;
    return CLI_OK;
}

static int export_gguf(const export_opts *o, const gsrc *s, const cli_ckpt_params *ps, const cli_model *m, result *res,
                       zero_gguf_type *type_out, int *ntensors) {
    lora_export *lx = s->lx;
    zero_error err = {{0}};
    dec_gguf_plan plan;
    if (dec_gguf_plan_make(&m->cfg, &plan, &err) != ZERO_OK) return cli_error(CLI_USAGE, "export --format gguf: %s", err.msg);
    const int adapter = export_lora_adapter(lx);
    if (adapter && adapter_plan(ps, m, &plan) != CLI_OK) {
        dec_gguf_plan_free(&plan);
        return CLI_USAGE;
    }
    /* the type: asked, or the source's 16-bit one (an adapter: f32, as PEFT keeps them) */
    const zero_gguf_type type = o->gguf_type ? (!strcmp(o->gguf_type, "f32")    ? ZERO_GGUF_F32
                                                : !strcmp(o->gguf_type, "bf16") ? ZERO_GGUF_BF16
                                                : !strcmp(o->gguf_type, "q8_0") ? ZERO_GGUF_Q8_0
                                                                                : ZERO_GGUF_F16)
                                : adapter                                                ? ZERO_GGUF_F32
                                : source_dtype(m->config_json) == ZERO_DTYPE_BF16 ? ZERO_GGUF_BF16
                                                                                  : ZERO_GGUF_F16;
    *type_out = type;
    *ntensors = plan.n;
    const uint32_t file_type = type == ZERO_GGUF_F32 ? 0 : type == ZERO_GGUF_F16 ? 1 : type == ZERO_GGUF_Q8_0 ? 7 : 32;
    int rc = CLI_OK;
    const cli_ckpt_param **src = calloc((size_t)plan.n + 1, sizeof *src);
    zero_gguf_type *types = calloc((size_t)plan.n + 1, sizeof *types);
    zero_tokenizer *tok = NULL;
    zero_gguf_writer *w = NULL;
    float *buf = NULL, *whole = NULL;
    void *enc = NULL;
    if (!src || !types) rc = cli_error(CLI_RUNTIME, "export: out of memory");
    /* every source parameter, with the shape the plan expects, before anything is written */
    int64_t widest = 1;
    for (int i = 0; i < plan.n && rc == CLI_OK; i++) {
        const dec_gguf_tensor *t = &plan.t[i];
        widest = t->cols > widest ? t->cols : widest;
        types[i] = t->ndim == 1 ? ZERO_GGUF_F32 : type;
        if (types[i] == ZERO_GGUF_Q8_0 && t->cols % ZERO_GGUF_Q8_0_BLOCK) types[i] = ZERO_GGUF_F16;
        if (t->order == DEC_GGUF_VALUES) continue;
        if (s->hf) { /* a directory: its tensor holds the values (reading the last one tells) */
            float last;
            rc = gsrc_read(s, t, NULL, (uint64_t)(t->rows * t->cols - 1), 1, &last);
            continue;
        }
        src[i] = param_named(ps, t->src);
        if (!src[i] || src[i]->numel != (uint64_t)(t->rows * t->cols))
            rc = cli_error(CLI_RUNTIME, "export --format gguf: the checkpoint %s parameter '%s' of %lld values (for %s)",
                           src[i] ? "has the" : "lacks the", t->src, (long long)(t->rows * t->cols), t->name);
    }
    if (rc == CLI_OK && !adapter && (!m->source || zero_tokenizer_load(&tok, m->source, &err) != ZERO_OK))
        rc = cli_error(CLI_RUNTIME, "export --format gguf: the model's tokenizer: %s",
                       m->source ? err.msg : "the checkpoint records no source directory holding tokenizer.json");
    if (rc == CLI_OK && zero_gguf_writer_create(&w, NULL, o->out, &err) != ZERO_OK)
        rc = cli_error(CLI_RUNTIME, "export: %s", err.msg);
    if (rc == CLI_OK) {
        const char *slash = m->source ? strrchr(m->source, '/') : NULL;
        const char *name = slash && slash[1] ? slash + 1 : m->source ? m->source : m->name;
        if (adapter) { /* llama.cpp's LoRA adapter: the base's architecture, alpha over r as the scale */
            if (zero_gguf_set_string(w, "general.architecture", plan.arch) || zero_gguf_set_string(w, "general.type", "adapter") ||
                zero_gguf_set_string(w, "general.name", name) || zero_gguf_set_string(w, "adapter.type", "lora") ||
                zero_gguf_set_f32(w, "adapter.lora.alpha", (float)export_lora_alpha_for_scale_over_r(lx)))
                rc = cli_error(CLI_RUNTIME, "export: %s", zero_gguf_writer_last_error(w));
        } else if (dec_gguf_metadata(&m->cfg, &plan, tok, name, file_type, w, &err) != ZERO_OK) {
            rc = cli_error(strstr(err.msg, "not supported yet") ? CLI_USAGE : CLI_RUNTIME, "export --format gguf: %s", err.msg);
        }
    }
    for (int i = 0; i < plan.n && rc == CLI_OK; i++) {
        const dec_gguf_tensor *t = &plan.t[i];
        const int64_t shape[2] = {t->rows, t->cols};
        if (zero_gguf_add_tensor(w, t->name, types[i], t->ndim == 1 ? shape + 1 : shape, t->ndim) != ZERO_OK)
            rc = cli_error(CLI_RUNTIME, "export: %s", zero_gguf_writer_last_error(w));
    }
    /* rows a chunk at a time: CHUNK values, or one row when it is wider */
    const int64_t chunk_rows_max = (int64_t)CHUNK / widest > 0 ? (int64_t)CHUNK / widest : 1;
    if (rc == CLI_OK && (!(buf = malloc((size_t)(chunk_rows_max * widest) * sizeof(float))) ||
                         !(enc = malloc((size_t)(chunk_rows_max * widest) * sizeof(float)))))
        rc = cli_error(CLI_RUNTIME, "export: out of memory");
    for (int i = 0; i < plan.n && rc == CLI_OK; i++) {
        const dec_gguf_tensor *t = &plan.t[i];
        const int64_t per = chunk_rows_max * widest / t->cols;
        if (t->order == DEC_GGUF_TRANSPOSE || (t->order == DEC_GGUF_ROPE_PERM && t->ndim == 1)) {
            free(whole);
            if (!(whole = malloc((size_t)(t->rows * t->cols) * sizeof(float))))
                rc = cli_error(CLI_RUNTIME, "export: out of memory for %s (%lld values)", t->src, (long long)(t->rows * t->cols));
            else rc = gsrc_read(s, t, src[i], 0, (uint64_t)(t->rows * t->cols), whole);
        }
        for (int64_t r0 = 0; r0 < t->rows && rc == CLI_OK; r0 += per) {
            const int64_t r1 = r0 + per < t->rows ? r0 + per : t->rows, n = (r1 - r0) * t->cols;
            if ((rc = gguf_rows(s, t, src[i], r0, r1, whole, buf)) != CLI_OK) break;
            const void *out = enc;
            if (types[i] == ZERO_GGUF_F32) out = buf;
            else if (types[i] == ZERO_GGUF_Q8_0) zero_gguf_q8_0_encode(buf, (size_t)n, enc);
            else
                for (int64_t j = 0; j < n; j++)
                    ((uint16_t *)enc)[j] = types[i] == ZERO_GGUF_BF16 ? zero_fp32_to_bf16(buf[j]) : zero_fp32_to_fp16(buf[j]);
            if (zero_gguf_write(w, out, (size_t)zero_gguf_type_bytes(types[i], (uint64_t)n)) != ZERO_OK)
                rc = cli_error(CLI_RUNTIME, "export: %s", zero_gguf_writer_last_error(w));
        }
    }
    if (rc == CLI_OK && zero_gguf_finish(w) != ZERO_OK) rc = cli_error(CLI_RUNTIME, "export: %s", zero_gguf_writer_last_error(w));
    if (rc == CLI_OK) res->bytes = zero_gguf_writer_file_size(w), res->files = 1;
    zero_gguf_writer_free(w);
    zero_tokenizer_free(tok);
    free(buf), free(enc), free(whole), free(src), free(types);
    dec_gguf_plan_free(&plan);
    return rc;
}

/* `zero export DIR --format gguf`: a Hugging Face model directory converted as it is. */
static int export_dir_gguf(const export_opts *o) {
    if (o->format != FMT_GGUF)
        return cli_error(CLI_USAGE, "export: '%s' is a model directory, not a checkpoint: --format gguf (or -o FILE.gguf) "
                         "converts it; a directory or safetensors export is made from a checkpoint", o->ckpt);
    if (o->adapter || o->merge || o->base)
        return cli_error(CLI_USAGE, "export: %s: expected a LoRA run's checkpoint, not the model directory '%s'",
                         o->adapter ? "--adapter" : o->merge ? "--merge" : "--base", o->ckpt);
    if (cli_path_within(o->out, o->ckpt))
        return cli_error(CLI_USAGE, "export: -o '%s' is inside the model directory '%s', which the export reads: expected a "
                         "path outside it", o->out, o->ckpt);
    cli_model m;
    memset(&m, 0, sizeof m);
    int rc = cli_model_from_path(o->ckpt, 0, "export", &m);
    if (rc != CLI_OK) return rc;
    zero_error err = {{0}};
    dec_hf *hf = NULL;
    result res = {0, 0, 0};
    zero_gguf_type gtype = ZERO_GGUF_F16;
    int n = 0;
    const double t0 = zero_now();
    if (dec_hf_open(&hf, o->ckpt, &err) != ZERO_OK) rc = cli_error(CLI_RUNTIME, "export: %s", err.msg);
    const gsrc src = {NULL, NULL, hf};
    if (rc == CLI_OK) rc = export_gguf(o, &src, NULL, &m, &res, &gtype, &n);
    if (rc == CLI_OK) {
        char b1[32], b2[32];
        const uint64_t numel = dec_num_params(&m.cfg);
        if (o->json)
            printf("{\"source\":\"%s\",\"output\":\"%s\",\"format\":\"gguf\",\"architecture\":\"%s\",\"type\":\"%s\","
                   "\"files\":1,\"tensors\":%d,\"params\":%llu,\"bytes\":%llu,\"seconds\":%.3f,\"rss_peak\":%llu}\n",
                   o->ckpt, o->out, dec_arch_name(m.cfg.arch), zero_gguf_type_name(gtype), n, (unsigned long long)numel,
                   (unsigned long long)res.bytes, zero_now() - t0, (unsigned long long)zero_rss_peak_bytes());
        else
            printf("converted %s: %d tensors, %llu parameters, %s -> %s (%s) in %.2f s, peak RSS %s\n", o->ckpt, n,
                   (unsigned long long)numel, zero_gguf_type_name(gtype), o->out, cli_fmt_bytes((double)res.bytes, b1, sizeof b1),
                   zero_now() - t0, cli_fmt_bytes((double)zero_rss_peak_bytes(), b2, sizeof b2));
    }
    dec_hf_close(hf);
    cli_model_free(&m);
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
    if (cli_path_within(o.out, o.ckpt))
        return cli_error(CLI_USAGE, "export: -o '%s' is inside the checkpoint '%s': expected a path outside it (the "
                         "export would overwrite or mix with its files)", o.out, o.ckpt);
    if (dec_hf_is_dir(o.ckpt)) return export_dir_gguf(&o);
    if (zero_ckpt_open(&c, NULL, o.ckpt, 0, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "%s", err.msg);
    cli_ckpt_note(c);
    cli_ckpt_params ps = {0}, lps = {0}, *sel = &ps;
    lora_export *lx = NULL;
    zero_dtype dt = ZERO_DTYPE_FP32;
    cli_model m;
    memset(&m, 0, sizeof m);
    char msg[1024];
    int rc = CLI_OK, have_model = 0;
    uint64_t numel = 0;
    result res = {0, 0, 0};
    const double t0 = zero_now();
    const int to_file = o.format == FMT_SAFETENSORS;
    zero_gguf_type gtype = ZERO_GGUF_F16;
    int gtensors = 0;
    if (cli_ckpt_params_read(c, &ps, msg, sizeof msg) != ZERO_OK || cli_ckpt_verify_masters(c, msg, sizeof msg) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "export: %s", msg);
        goto out;
    }
    have_model = !cli_ckpt_model(c, &m, msg, sizeof msg);
    /* a LoRA run's checkpoint: --adapter or --merge (cli/export_lora.c) */
    if (have_model && (rc = export_lora_open(c, &ps, &m, o.adapter, o.merge, o.base, &lx)) != CLI_OK) goto out;
    if (!have_model && (o.adapter || o.merge || o.base)) {
        rc = cli_error(CLI_RUNTIME, "export: %s: %s", o.adapter ? "--adapter" : o.merge ? "--merge" : "--base", msg);
        goto out;
    }
    /* the model directories the export reads (the source of the model, a LoRA run's base) stay as they are */
    const char *reads[2] = {have_model ? m.source : NULL, export_lora_base_dir(lx)};
    for (int k = 0; k < 2 && rc == CLI_OK; k++)
        if (reads[k] && cli_path_within(o.out, reads[k]))
            rc = cli_error(CLI_USAGE, "export: -o '%s' is inside %s '%s', which the export reads: expected a path outside it",
                           o.out, k ? "the LoRA run's base" : "the model's source directory", reads[k]);
    if (rc != CLI_OK) goto out;
    if (lx && (rc = export_lora_params(lx, &ps, &lps)) != CLI_OK) goto out;
    if (lx) sel = &lps;
    if (export_lora_adapter(lx) && o.format != FMT_GGUF) { /* PEFT's adapter directory */
        dt = o.dtype_given ? o.dtype : ZERO_DTYPE_FP32; /* PEFT keeps its adapters in fp32 */
        rc = export_adapter(&o, c, sel, dt, &res, lx);
        if (rc != CLI_OK) goto out;
        goto report;
    }
    if (!to_file && !have_model) {
        rc = cli_error(CLI_RUNTIME, "export: %s: a %s needs its config.json (give -o FILE.safetensors for the bare "
                       "tensors)", msg, o.format == FMT_GGUF ? "GGUF file" : "model directory");
        goto out;
    }
    if (o.format == FMT_GGUF) { /* a LoRA run's: --merge or --adapter (export_lora_open refused neither) */
        const gsrc src = {c, lx, NULL};
        if ((rc = export_gguf(&o, &src, export_lora_adapter(lx) ? &ps : sel, &m, &res, &gtype, &gtensors)) != CLI_OK) goto out;
        goto report;
    }
    dt = o.dtype_given ? o.dtype : have_model ? source_dtype(m.config_json) : ZERO_DTYPE_FP32;
    if (to_file) {
        char step[32], v[5][32];
        snprintf(step, sizeof step, "%lld", (long long)zero_ckpt_step(c));
        const char *meta[16] = {"format", "pt", "zero.step", step};
        int nmeta = 4;
        char *conf = have_model ? dec_config_to_json(&m.cfg, m.config_json, torch_dtype_of(dt)) : NULL;
        if (have_model && m.cfg.arch == DEC_ARCH_GPT2) { /* GPT-2 readers of earlier exports */
            const char *keys[5] = {"n_layer", "n_embd", "n_head", "n_ctx", "vocab"};
            const int vals[5] = {m.cfg.n_layer, m.cfg.n_embd, m.cfg.n_head, m.cfg.n_ctx, m.cfg.vocab};
            for (int k = 0; k < 5; k++) {
                snprintf(v[k], sizeof v[k], "%d", vals[k]);
                meta[nmeta++] = keys[k];
                meta[nmeta++] = v[k];
            }
        }
        if (conf) {
            meta[nmeta++] = "zero.config";
            meta[nmeta++] = conf;
        }
        /* the file keeps the decoder's own names (no "transformer." prefix), as earlier exports */
        rc = write_file(o.out, c, sel, 0, sel->n, dt, NULL, meta, nmeta, &res.bytes, lx);
        res.files = 1;
        free(conf);
    } else {
        rc = export_dir(&o, c, sel, &m, dt, &res, lx);
    }
    if (rc != CLI_OK) goto out;
report:
    for (int k = 0; k < sel->n; k++) numel += sel->p[k].numel;
    const double secs = zero_now() - t0;
    if (o.json) {
        cJSON *j = cJSON_CreateObject();
        cJSON_AddStringToObject(j, "checkpoint", zero_ckpt_dir(c));
        cJSON_AddNumberToObject(j, "step", (double)zero_ckpt_step(c));
        cJSON_AddNumberToObject(j, "world", zero_ckpt_world(c));
        cJSON_AddStringToObject(j, "output", o.out);
        cJSON_AddStringToObject(j, "format", o.format == FMT_GGUF   ? "gguf"
                                             : export_lora_adapter(lx) ? "peft"
                                             : to_file              ? "safetensors"
                                                                    : "hf");
        if (have_model) cJSON_AddStringToObject(j, "architecture", dec_arch_name(m.cfg.arch));
        if (o.format == FMT_GGUF) cJSON_AddStringToObject(j, "type", zero_gguf_type_name(gtype));
        else cJSON_AddStringToObject(j, "dtype", zero_dtype_name(dt));
        cJSON_AddNumberToObject(j, "files", res.files);
        cJSON_AddNumberToObject(j, "tokenizer_files", res.tokenizer_files);
        cJSON_AddNumberToObject(j, "tensors", o.format == FMT_GGUF ? gtensors : sel->n);
        cJSON_AddNumberToObject(j, "params", (double)numel);
        cJSON_AddNumberToObject(j, "bytes", (double)res.bytes);
        cJSON_AddNumberToObject(j, "seconds", secs);
        cJSON_AddNumberToObject(j, "chunk_bytes", (double)CHUNK * sizeof(float));
        cJSON_AddNumberToObject(j, "rss_peak", (double)zero_rss_peak_bytes());
        char *text = cJSON_PrintUnformatted(j);
        if (text) printf("%s\n", text);
        cJSON_free(text);
        cJSON_Delete(j);
    } else {
        char b1[32], b2[32];
        printf("exported step %lld of %s (%d rank%s): %d tensors, %llu parameters, %s -> %s (%s in %d file%s%s) in "
               "%.2f s, peak RSS %s\n",
               (long long)zero_ckpt_step(c), zero_ckpt_dir(c), zero_ckpt_world(c), zero_ckpt_world(c) == 1 ? "" : "s",
               o.format == FMT_GGUF ? gtensors : sel->n, (unsigned long long)numel,
               o.format == FMT_GGUF ? zero_gguf_type_name(gtype) : zero_dtype_name(dt), o.out,
               cli_fmt_bytes((double)res.bytes, b1, sizeof b1),
               res.files, res.files == 1 ? "" : "s", to_file ? "" : res.tokenizer_files ? ", tokenizer files copied" : "",
               secs, cli_fmt_bytes((double)zero_rss_peak_bytes(), b2, sizeof b2));
    }
out:
    export_lora_free(lx);
    cli_model_free(&m);
    free(lps.p);
    cli_ckpt_params_free(&ps);
    zero_ckpt_close(c);
    return rc;
}
