/* `zero sample` of a LoRA model (cli/sample_lora.h): which base and which adapters, checked as
 * `zero train --resume` checks them (the base must be the one the run recorded), then loaded. */
#include "sample_lora.h"

#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "decoder/hf.h"
#include "decoder/peft.h"

/* user.KEY as a number, or `dflt` when absent */
static double num(zero_ckpt *c, const char *key, double dflt) {
    double v;
    return zero_ckpt_user_number(c, key, &v) == ZERO_OK ? v : dflt;
}

/* The base of a LoRA run's checkpoint c: saved in it, a preset's seed, or a model directory (the
 * given one, else the recorded one) whose fingerprint is the recorded one. */
static int ckpt_base(zero_ckpt *c, const char *base, sample_lora *x) {
    const char *where = zero_ckpt_dir(c), *hash = NULL, *dir = NULL;
    if (zero_ckpt_user_string(c, "base.hash", &hash) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "sample: %s: the LoRA run records no base (user.base.hash)", where);
    if (num(c, "base.saved", 0) != 0) { /* --save-frozen */
        if (base)
            return cli_error(CLI_USAGE,
                             "sample: --resume %s holds its base (saved with --save-frozen): expected no "
                             "--init-from %s",
                             where, base);
        return CLI_OK;
    }
    if (!strncmp(hash, "preset:", 7)) { /* "preset:NAME:seed:S": the seed makes the base again */
        const char *s = strstr(hash, ":seed:");
        char *end = NULL;
        if (s) x->seed = strtoull(s + 6, &end, 10);
        if (!s || end == s + 6 || *end)
            return cli_error(CLI_RUNTIME, "sample: %s: user.base.hash '%s': expected preset:NAME:seed:S", where, hash);
        if (base)
            return cli_error(CLI_USAGE,
                             "sample: --resume %s: the run's base is the random model of %s: expected no "
                             "--init-from %s",
                             where, hash, base);
        x->preset = 1;
        return CLI_OK;
    }
    (void)zero_ckpt_user_string(c, "base.dir", &dir);
    const char *b = base ? base : dir;
    if (!b || !dec_hf_is_dir(b))
        return cli_error(CLI_USAGE,
                         "sample: %s is a LoRA run's checkpoint without its base (saved without "
                         "--save-frozen) and %s%s%s is not a model directory: give the base with --resume %s "
                         "--init-from DIR",
                         where, b ? "'" : "", b ? b : "no base directory is recorded", b ? "'" : "", where);
    zero_error err = {{0}};
    dec_hf *h = NULL;
    char now[64] = "";
    zero_status s = dec_hf_open(&h, b, &err);
    if (s == ZERO_OK) s = dec_hf_fingerprint(h, now, sizeof now, &err);
    dec_hf_close(h);
    if (s != ZERO_OK) return cli_error(CLI_RUNTIME, "sample: the LoRA base %s", err.msg);
    if (strcmp(now, hash) != 0)
        return cli_error(CLI_USAGE,
                         "sample: the base in %s (%s) is not the one the run of %s trained on (%s): give that "
                         "base with --init-from DIR",
                         b, now, where, hash);
    snprintf(x->base, sizeof x->base, "%s", b);
    return CLI_OK;
}

int sample_lora_prepare(const cli_model *src, const char *model, const char *base, const char *lora_from,
                        sample_lora *out) {
    memset(out, 0, sizeof *out);
    dec_lora_default(&out->l);
    zero_ckpt *c = NULL;
    zero_error err = {{0}};
    const char *targets = NULL;
    const int lora_ck = src->kind == CLI_MODEL_CKPT && zero_ckpt_open(&c, NULL, model, 0, &err) == ZERO_OK &&
                        zero_ckpt_user_string(c, "lora.targets", &targets) == ZERO_OK;
    int rc = CLI_OK;
    if (lora_from && lora_ck) {
        rc = cli_error(CLI_USAGE,
                       "sample: --lora-from %s: %s is a LoRA run's checkpoint with its own adapters: "
                       "expected the base model (--init-from DIR) to apply them to",
                       lora_from, model);
    } else if (lora_from && base) {
        rc = cli_error(CLI_USAGE,
                       "sample: --lora-from %s: expected the base as --init-from DIR alone (not --resume %s "
                       "--init-from %s)",
                       lora_from, model, base);
    } else if (lora_from) {
        const zero_status s = dec_peft_read_config(lora_from, &src->cfg, &out->l, &err);
        if (s != ZERO_OK)
            rc = cli_error(s == ZERO_ERR_IO ? CLI_RUNTIME : CLI_USAGE, "sample: --lora-from: %s", err.msg);
        out->on = rc == CLI_OK;
        out->adapter = lora_from;
        snprintf(out->base, sizeof out->base, "%s", model);
    } else if (lora_ck) {
        out->l.r = (int)num(c, "lora.r", 0);
        out->l.alpha = num(c, "lora.alpha", 0);
        out->l.dropout = num(c, "lora.dropout", 0);
        out->l.rslora = num(c, "lora.rslora", 0) != 0;
        if (dec_lora_targets(&src->cfg, targets, &out->l.targets, &err) != ZERO_OK ||
            dec_lora_check(&src->cfg, &out->l, &err) != ZERO_OK)
            rc = cli_error(CLI_RUNTIME, "sample: %s: its LoRA record: %s", model, err.msg);
        if (rc == CLI_OK) rc = ckpt_base(c, base, out);
        out->on = rc == CLI_OK;
        out->ckpt = model;
    } else if (base) {
        rc = cli_error(CLI_USAGE,
                       "sample: --resume %s and --init-from %s: expected one model (--init-from beside "
                       "--resume gives a LoRA run's checkpoint its base; %s is not one)",
                       model, base, model);
    }
    zero_ckpt_close(c);
    return rc;
}

zero_status sample_lora_register(const sample_lora *x, const dec_config *cfg, zero_engine *e, zero_error *err) {
    return x->on ? dec_lora_register(cfg, &x->l, e, err) : dec_engine_register(cfg, e, err);
}

int sample_lora_load(const sample_lora *x, const dec_config *cfg, zero_engine *e, const char *model) {
    if (!x->on) return cli_init_from(e, model);
    zero_error err = {{0}};
    int rc = CLI_OK;
    if (x->preset && dec_engine_init(cfg, e, x->seed, &err) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "sample: the LoRA run's base (seed %llu): %s", (unsigned long long)x->seed,
                         err.msg);
    if (x->base[0] && (rc = cli_init_from(e, x->base)) != CLI_OK) return rc;
    if (x->ckpt) return cli_init_from_lora(e, x->ckpt);
    if (dec_peft_load(x->adapter, cfg, &x->l, e, &err) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "sample: --lora-from: %s", err.msg);
    return CLI_OK;
}
