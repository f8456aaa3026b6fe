/* What `zero train` records in a checkpoint about the run (the model's config.json and where it
 * came from, sequence length, seed, global batch, the chat format asked for) and how --resume
 * takes it back, so a resumed run is the same computation and export and sample need nothing but
 * the checkpoint (and the model directory it came from, for the tokenizer). */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train.h"
#include "zero/ckpt.h"

char *train_user_json(const train_opts *o, int world) {
    const dec_config *c = &o->model_cfg;
    cJSON *root = cJSON_CreateObject(), *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "arch", dec_arch_name(c->arch));
    cJSON_AddNumberToObject(m, "n_layer", c->n_layer);
    cJSON_AddNumberToObject(m, "n_embd", c->n_embd);
    cJSON_AddNumberToObject(m, "n_head", c->n_head);
    cJSON_AddNumberToObject(m, "n_ctx", c->n_ctx);
    cJSON_AddNumberToObject(m, "vocab", c->vocab);
    /* The config.json export writes: the imported one, or one made from the configuration (a
     * preset, or an imported GPT-2 whose position table grew). */
    const int keep = o->src.config_json && dec_config_equal(c, &o->src.cfg);
    char *conf = dec_config_to_json(c, keep ? o->src.config_json : NULL, NULL);
    cJSON *cj = conf ? cJSON_Parse(conf) : NULL;
    free(conf);
    if (cj) cJSON_AddItemToObject(m, "config", cj);
    cJSON_AddItemToObject(root, "model", m);
    cJSON_AddStringToObject(root, "model_name", o->src.name);
    if (o->src.source) { /* absolute: export and sample find the tokenizer files there from anywhere */
        char *abs = realpath(o->src.source, NULL);
        cJSON_AddStringToObject(root, "source", abs ? abs : o->src.source);
        free(abs);
    }
    if (o->chat_template) cJSON_AddStringToObject(root, "chat_template", zero_chat_format_name(o->chat));
    cJSON_AddNumberToObject(root, "seq", o->T);
    cJSON_AddNumberToObject(root, "seed", (double)o->seed);
    cJSON_AddNumberToObject(root, "global_batch", (double)(world * o->cfg.micro_batch * o->cfg.grad_accum));
    train_lora_record(o, root);
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* user.KEY as an int in 1..1e9 */
static int get_int(zero_ckpt *c, const char *key, int *out) {
    double v;
    if (zero_ckpt_user_number(c, key, &v) != ZERO_OK || v < 1 || v > 1e9) return -1;
    *out = (int)v;
    return 0;
}

int train_resume_settings(train_opts *o) {
    zero_error err = {{0}};
    zero_ckpt *c = NULL;
    /* Verify every checksum first: a resharded load reads pieces of the old slices, which the
     * reader cannot check one by one (docs/CHECKPOINT.md), and a corrupt byte must not train on.
     * The open checks the manifest's own checksum and its engine part. */
    if (zero_ckpt_open(&c, NULL, o->resume, ZERO_CKPT_VERIFY, &err) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "--resume: %s", err.msg);
    cli_ckpt_note(c);
    cli_model saved;
    char msg[1024];
    int T = 0, rc = CLI_OK;
    double seed = 0;
    if (cli_ckpt_model(c, &saved, msg, sizeof msg)) {
        rc = cli_error(CLI_RUNTIME, "--resume %s: the checkpoint does not record a `zero train` run (no user.model)",
                       zero_ckpt_dir(c));
        goto out;
    }
    /* what the run recorded, each checked: a value out of range names its field */
    double gb = 0; /* absent from checkpoints of older runs: nothing to keep */
    const zero_status gst = zero_ckpt_user_number(c, "global_batch", &gb);
    const char *field = get_int(c, "seq", &T) ? "user.seq: expected a whole number in [1, 1e9]"
                        : zero_ckpt_user_number(c, "seed", &seed) != ZERO_OK || seed < 0 || seed > 0x1p53 || seed != floor(seed)
                            ? "user.seed: expected a whole number in [0, 2^53]"
                        : gst == ZERO_OK && (gb < 1 || gb > 1e12 || gb != floor(gb))
                            ? "user.global_batch: expected a whole number in [1, 1e12]"
                            : NULL;
    if (field) {
        rc = cli_error(CLI_RUNTIME, "--resume %s: the checkpoint's record of its run: %s", zero_ckpt_dir(c), field);
        cli_model_free(&saved);
        goto out;
    }
    const dec_config *cur = &o->model_cfg;
    const int explicit_shape = o->model_given || o->layers > 0 || o->dim > 0 || o->heads > 0 || o->vocab > 0;
    if (explicit_shape && !cli_model_same_shape(cur, &saved.cfg)) {
        char a[256], b[256];
        rc = cli_error(CLI_USAGE, "--resume %s: the checkpoint is a model %s; the flags ask for %s", zero_ckpt_dir(c),
                       cli_model_describe(&saved.cfg, a, sizeof a), cli_model_describe(cur, b, sizeof b));
        cli_model_free(&saved);
        goto out;
    }
    if (o->seq > 0 && o->seq != T) {
        rc = cli_error(CLI_USAGE, "--seq %d: the checkpoint's run uses sequences of %d tokens", o->seq, T);
        cli_model_free(&saved);
        goto out;
    }
    if (o->seed_given && (double)o->seed != seed) {
        rc = cli_error(CLI_USAGE, "--seed %llu: the checkpoint's run uses seed %.0f (its data order follows it)",
                       (unsigned long long)o->seed, seed);
        cli_model_free(&saved);
        goto out;
    }
    if (o->steps < zero_ckpt_step(c)) {
        rc = cli_error(CLI_USAGE, "--steps %lld: the checkpoint is at step %lld: expected at least that many (--steps "
                       "counts the steps done)", (long long)o->steps, (long long)zero_ckpt_step(c));
        cli_model_free(&saved);
        goto out;
    }
    const char *name = NULL;
    if (zero_ckpt_user_string(c, "model_name", &name) == ZERO_OK) snprintf(saved.name, sizeof saved.name, "%s", name);
    cli_model_free(&o->src);
    o->src = saved;
    o->model_cfg = saved.cfg;
    o->T = T;
    o->seed = (uint64_t)seed;
    o->ux.resume_global = gst == ZERO_OK ? (int64_t)gb : 0;
    rc = train_lora_resume(o, c);
out:
    zero_ckpt_close(c);
    return rc;
}
