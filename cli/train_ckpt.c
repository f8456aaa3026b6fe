/* What `zero train` records in a checkpoint about the run (model shape, sequence length, seed,
 * global batch) and how --resume takes it back, so a resumed run is the same computation. */
#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "train.h"
#include "zero/ckpt.h"

char *train_user_json(const train_opts *o, int world) {
    cJSON *root = cJSON_CreateObject(), *m = cJSON_CreateObject();
    cJSON_AddNumberToObject(m, "n_layer", o->model_cfg.n_layer);
    cJSON_AddNumberToObject(m, "n_embd", o->model_cfg.n_embd);
    cJSON_AddNumberToObject(m, "n_head", o->model_cfg.n_head);
    cJSON_AddNumberToObject(m, "n_ctx", o->model_cfg.n_ctx);
    cJSON_AddNumberToObject(m, "vocab", o->model_cfg.vocab);
    cJSON_AddItemToObject(root, "model", m);
    cJSON_AddStringToObject(root, "model_name", o->model);
    cJSON_AddNumberToObject(root, "seq", o->T);
    cJSON_AddNumberToObject(root, "seed", (double)o->seed);
    cJSON_AddNumberToObject(root, "global_batch", (double)(world * o->cfg.micro_batch * o->cfg.grad_accum));
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

static int get_int(cJSON *obj, const char *key, int *out) {
    cJSON *v = cJSON_GetObjectItemCaseSensitive(obj, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < 1 || v->valuedouble > 1e9) return -1;
    *out = (int)v->valuedouble;
    return 0;
}

int train_resume_settings(train_opts *o) {
    zero_error err = {{0}};
    zero_ckpt *c = NULL;
    /* Verify every checksum first: a resharded load reads pieces of the old slices, which the
     * reader cannot check one by one (docs/CHECKPOINT.md), and a corrupt byte must not train on. */
    if (zero_ckpt_open(&c, NULL, o->resume, ZERO_CKPT_VERIFY, &err) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "--resume: %s", err.msg);
    cJSON *man = cJSON_Parse(zero_ckpt_manifest(c));
    cJSON *user = cJSON_GetObjectItemCaseSensitive(man, "user");
    cJSON *m = cJSON_GetObjectItemCaseSensitive(user, "model");
    gpt2_config saved;
    int T = 0, rc = CLI_OK;
    cJSON *seed = cJSON_GetObjectItemCaseSensitive(user, "seed");
    if (get_int(m, "n_layer", &saved.n_layer) || get_int(m, "n_embd", &saved.n_embd) || get_int(m, "n_head", &saved.n_head) ||
        get_int(m, "n_ctx", &saved.n_ctx) || get_int(m, "vocab", &saved.vocab) || get_int(user, "seq", &T) ||
        !cJSON_IsNumber(seed)) {
        rc = cli_error(CLI_RUNTIME, "--resume %s: the checkpoint does not record a `zero train` run (no user.model)",
                       zero_ckpt_dir(c));
        goto out;
    }
    const gpt2_config *cur = &o->model_cfg;
    const int explicit_shape = o->model_given || o->layers > 0 || o->dim > 0 || o->heads > 0 || o->vocab > 0;
    if (explicit_shape && (cur->n_layer != saved.n_layer || cur->n_embd != saved.n_embd ||
                           cur->n_head != saved.n_head || cur->vocab != saved.vocab)) {
        rc = cli_error(CLI_USAGE,
                       "--resume %s: the checkpoint is a model with %d layers, dim %d, %d heads, vocab %d; the flags ask "
                       "for %d layers, dim %d, %d heads, vocab %d",
                       zero_ckpt_dir(c), saved.n_layer, saved.n_embd, saved.n_head, saved.vocab, cur->n_layer,
                       cur->n_embd, cur->n_head, cur->vocab);
        goto out;
    }
    if (o->seq > 0 && o->seq != T) {
        rc = cli_error(CLI_USAGE, "--seq %d: the checkpoint's run uses sequences of %d tokens", o->seq, T);
        goto out;
    }
    o->model_cfg = saved;
    o->T = T;
    o->seed = (uint64_t)seed->valuedouble;
out:
    cJSON_Delete(man);
    zero_ckpt_close(c);
    return rc;
}
