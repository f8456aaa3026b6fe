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
    gpt2_config saved;
    int T = 0, rc = CLI_OK;
    double seed = 0;
    if (get_int(c, "model.n_layer", &saved.n_layer) || get_int(c, "model.n_embd", &saved.n_embd) ||
        get_int(c, "model.n_head", &saved.n_head) || get_int(c, "model.n_ctx", &saved.n_ctx) ||
        get_int(c, "model.vocab", &saved.vocab) || get_int(c, "seq", &T) || zero_ckpt_user_number(c, "seed", &seed) != ZERO_OK) {
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
    o->seed = (uint64_t)seed;
out:
    zero_ckpt_close(c);
    return rc;
}
