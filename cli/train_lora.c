/* LoRA in `zero train`: --lora SPEC and zero_extensions.lora, --lora-from ADAPTER_DIR (a PEFT
 * adapter), what a checkpoint records of the adapters and of their base, and the checks that a
 * resumed LoRA run is given the base it started from (docs/CLI.md, docs/CHECKPOINT.md). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "decoder/hf.h"
#include "decoder/peft.h"
#include "train.h"

#define LORA_KEYS "r=RANK, alpha=A, targets=NAME[,NAME...], dropout=P, rslora"

int train_lora_parse(const char *spec, zero_lora_config *out) {
    zero_lora_config l = *out;
    char buf[1024];
    if (strlen(spec) >= sizeof buf) return cli_error(CLI_USAGE, "--lora: %zu bytes: expected a shorter list", strlen(spec)), -1;
    snprintf(buf, sizeof buf, "%s", spec);
    int in_targets = 0, targets_given = 0;
    unsigned seen = 0;
    char targets[sizeof l.targets] = "";
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        char *eq = strchr(tok, '=');
        const char *v = eq ? eq + 1 : NULL;
        if (eq) *eq = 0;
        if (eq || !strcmp(tok, "rslora")) { /* a key given twice: the last would win without a word */
            static const char *const keys[] = {"r", "alpha", "dropout", "rslora", "targets"};
            for (unsigned k = 0; k < sizeof keys / sizeof keys[0]; k++) {
                if (strcmp(tok, keys[k])) continue;
                if (seen & 1u << k) return cli_error(CLI_USAGE, "--lora '%s': %s given twice: expected it once", spec, tok), -1;
                seen |= 1u << k;
            }
        }
        double x;
        if (!eq && !strcmp(tok, "rslora")) {
            l.rslora = 1;
            in_targets = 0;
        } else if (!eq && in_targets) { /* targets=q_proj,k_proj: the names after the first */
            if (strlen(targets) + strlen(tok) + 2 > sizeof targets)
                return cli_error(CLI_USAGE, "--lora: targets: the names take more than %zu bytes", sizeof targets - 1), -1;
            snprintf(targets + strlen(targets), sizeof targets - strlen(targets), ",%s", tok);
        } else if (!eq) {
            return cli_error(CLI_USAGE, "--lora '%s': '%s' is not KEY=VALUE: expected %s", spec, tok, LORA_KEYS), -1;
        } else if (!strcmp(tok, "r")) {
            in_targets = 0;
            if (cli_parse_int("--lora r", v, 1, 65536, &l.r)) return -1;
        } else if (!strcmp(tok, "alpha")) {
            in_targets = 0;
            if (cli_parse_double("--lora alpha", v, 1e-12, 1e9, &l.alpha)) return -1;
        } else if (!strcmp(tok, "dropout")) {
            in_targets = 0;
            if (cli_parse_double("--lora dropout", v, 0, 1, &x)) return -1;
            if (x >= 1) return cli_error(CLI_USAGE, "--lora dropout '%s': expected a probability in [0, 1)", v), -1;
            l.dropout = x;
        } else if (!strcmp(tok, "rslora")) {
            in_targets = 0;
            if (strcmp(v, "true") && strcmp(v, "false") && strcmp(v, "1") && strcmp(v, "0"))
                return cli_error(CLI_USAGE, "--lora rslora '%s': expected true or false", v), -1;
            l.rslora = !strcmp(v, "true") || !strcmp(v, "1");
        } else if (!strcmp(tok, "targets")) {
            if (!*v) return cli_error(CLI_USAGE, "--lora targets: expected module names (q_proj,v_proj, ...)"), -1;
            snprintf(targets, sizeof targets, "%s", v);
            in_targets = targets_given = 1;
        } else {
            return cli_error(CLI_USAGE, "--lora '%s': unknown key '%s': expected %s", spec, tok, LORA_KEYS), -1;
        }
    }
    if (l.r < 1) return cli_error(CLI_USAGE, "--lora '%s': expected r=RANK (the adapters' rank)", spec), -1;
    if (targets_given) snprintf(l.targets, sizeof l.targets, "%s", targets);
    *out = l;
    return 0;
}

/* The identity of the base in a model directory (runtime error: exit 1). */
static int fingerprint(const char *dir, char *out, size_t cap) {
    zero_error err = {{0}};
    dec_hf *h = NULL;
    zero_status s = dec_hf_open(&h, dir, &err);
    if (s == ZERO_OK) s = dec_hf_fingerprint(h, out, cap, &err);
    dec_hf_close(h);
    return s == ZERO_OK ? CLI_OK : cli_error(CLI_RUNTIME, "the LoRA base %s", err.msg);
}

int train_lora_prepare(train_opts *o) {
    zero_config *cfg = &o->cfg;
    zero_error err = {{0}};
    if (o->resume) { /* the checkpoint says (train_lora_resume) */
        if (!o->lora_on && (o->lora_spec || o->lora_from))
            return cli_error(CLI_USAGE, "--resume: the checkpoint is of a run without LoRA; --lora%s cannot be added to it",
                             o->lora_from ? "-from" : "");
        if (o->lora_on && (o->lora_spec || o->lora_from))
            return cli_error(CLI_USAGE, "--resume: the checkpoint records the run's LoRA settings: drop --lora%s",
                             o->lora_from ? "-from" : "");
        return CLI_OK;
    }
    if (o->lora_from && (o->lora_spec || cfg->lora.r > 0))
        return cli_error(CLI_USAGE, "--lora-from %s: its adapter_config.json gives r, alpha and targets: expected no %s too",
                         o->lora_from, o->lora_spec ? "--lora" : "zero_extensions.lora");
    o->lora_on = o->lora_from || cfg->lora.r > 0;
    if (!o->lora_on) return CLI_OK;
    const dec_config *m = &o->model_cfg;
    dec_lora *l = &o->lora;
    if (o->lora_from) {
        zero_status s = dec_peft_read_config(o->lora_from, m, l, &err);
        if (s != ZERO_OK) return cli_error(s == ZERO_ERR_IO ? CLI_RUNTIME : CLI_USAGE, "--lora-from: %s", err.msg);
    } else {
        dec_lora_default(l);
        l->r = cfg->lora.r;
        l->alpha = cfg->lora.alpha;
        l->dropout = cfg->lora.dropout;
        l->rslora = cfg->lora.rslora;
        if (dec_lora_targets(m, cfg->lora.targets, &l->targets, &err) != ZERO_OK)
            return cli_error(CLI_USAGE, "--lora: %s", err.msg);
    }
    l->seed = o->seed;
    if (dec_lora_check(m, l, &err) != ZERO_OK) return cli_error(CLI_USAGE, "--lora: %s", err.msg);
    /* the base: a model directory (its identity recorded), or a preset's random weights (its
     * seed says them) */
    if (o->init_from && !dec_hf_is_dir(o->init_from))
        return cli_error(CLI_USAGE, "--init-from %s with LoRA: a checkpoint or a safetensors file as the base is not "
                         "supported yet: give the base model's directory (config.json + safetensors)", o->init_from);
    if (o->init_from) return fingerprint(o->init_from, o->base_hash, sizeof o->base_hash);
    snprintf(o->base_hash, sizeof o->base_hash, "preset:%.32s:seed:%llu", o->src.name, (unsigned long long)o->seed);
    return CLI_OK;
}

/* user.KEY as a number, or `dflt` when absent */
static double num(zero_ckpt *c, const char *key, double dflt) {
    double v;
    return zero_ckpt_user_number(c, key, &v) == ZERO_OK ? v : dflt;
}

int train_lora_resume(train_opts *o, zero_ckpt *c) {
    const char *targets = NULL, *hash = NULL, *dir = NULL;
    const char *where = zero_ckpt_dir(c);
    if (zero_ckpt_user_string(c, "lora.targets", &targets) != ZERO_OK) {
        if (o->init_from)
            return cli_error(CLI_USAGE, "--resume and --init-from: expected one of them (--init-from gives a LoRA run "
                             "its base; %s is not of a LoRA run)", where);
        return CLI_OK;
    }
    zero_error err = {{0}};
    dec_lora *l = &o->lora;
    dec_lora_default(l);
    l->r = (int)num(c, "lora.r", 0);
    l->alpha = num(c, "lora.alpha", 0);
    l->dropout = num(c, "lora.dropout", 0);
    l->rslora = num(c, "lora.rslora", 0) != 0;
    l->seed = (uint64_t)num(c, "lora.seed", 0);
    if (dec_lora_targets(&o->model_cfg, targets, &l->targets, &err) != ZERO_OK || dec_lora_check(&o->model_cfg, l, &err))
        return cli_error(CLI_RUNTIME, "--resume %s: its LoRA record: %s", where, err.msg);
    o->lora_on = 1;
    if (zero_ckpt_user_string(c, "base.hash", &hash) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "--resume %s: the LoRA run records no base (user.base.hash)", where);
    snprintf(o->base_hash, sizeof o->base_hash, "%s", hash);
    if (num(c, "base.saved", 0) != 0) { /* --save-frozen: the checkpoint holds the base */
        o->base_saved = 1;
        if (o->init_from)
            return cli_error(CLI_USAGE, "--resume %s: the checkpoint holds its base (saved with --save-frozen): expected "
                             "no --init-from", where);
        return CLI_OK;
    }
    if (!strncmp(hash, "preset:", 7)) { /* a random base: the recorded seed makes it again */
        if (o->init_from)
            return cli_error(CLI_USAGE, "--resume %s: the run's base is the random model of %s: expected no --init-from",
                             where, hash);
        return CLI_OK;
    }
    (void)zero_ckpt_user_string(c, "base.dir", &dir);
    const char *base = o->init_from ? o->init_from : dir;
    if (!base || !dec_hf_is_dir(base))
        return cli_error(CLI_USAGE, "--resume %s: a LoRA run needs its base model: %s%s%s is not a model directory: "
                         "give it with --init-from DIR", where, base ? "'" : "", base ? base : "the recorded base", base ? "'" : "");
    char now[64];
    int rc = fingerprint(base, now, sizeof now);
    if (rc != CLI_OK) return rc;
    if (strcmp(now, hash))
        return cli_error(CLI_USAGE, "--resume %s: the base in %s (%s) is not the one the run started from (%s): give that "
                         "base with --init-from DIR", where, base, now, hash);
    static char base_copy[4096]; /* o->init_from outlives the checkpoint (train_prepare may run twice) */
    if (base != base_copy) snprintf(base_copy, sizeof base_copy, "%s", base);
    o->init_from = base_copy;
    return CLI_OK;
}

void train_lora_record(const train_opts *o, void *rootp) {
    if (!o->lora_on) return;
    cJSON *root = rootp, *l = cJSON_CreateObject(), *b = cJSON_CreateObject();
    char targets[256];
    cJSON_AddNumberToObject(l, "r", o->lora.r);
    cJSON_AddNumberToObject(l, "alpha", o->lora.alpha);
    cJSON_AddStringToObject(l, "targets", dec_lora_targets_string(&o->model_cfg, o->lora.targets, targets, sizeof targets));
    cJSON_AddNumberToObject(l, "dropout", o->lora.dropout);
    cJSON_AddNumberToObject(l, "rslora", o->lora.rslora);
    cJSON_AddNumberToObject(l, "seed", (double)o->lora.seed);
    cJSON_AddItemToObject(root, "lora", l);
    cJSON_AddStringToObject(b, "hash", o->base_hash);
    if (o->init_from && strncmp(o->base_hash, "preset:", 7)) {
        char *abs = realpath(o->init_from, NULL);
        cJSON_AddStringToObject(b, "dir", abs ? abs : o->init_from);
        free(abs);
    }
    cJSON_AddNumberToObject(b, "saved", o->cfg.save_frozen ? 1 : 0);
    cJSON_AddItemToObject(root, "base", b);
}

int train_lora_init(const train_opts *o, zero_engine *e) {
    zero_error err = {{0}};
    zero_status s = o->lora_from ? dec_peft_load(o->lora_from, &o->model_cfg, &o->lora, e, &err)
                                 : dec_lora_init(&o->model_cfg, &o->lora, e, &err);
    /* every rank reads the adapter; the ranks agree, the first failing one reports */
    char msg[sizeof err.msg + 32];
    snprintf(msg, sizeof msg, "%s%s", o->lora_from ? "--lora-from: " : "LoRA: ", err.msg);
    return cli_ranks_agree(zero_engine_comm(e), s != ZERO_OK, "LoRA", msg);
}
