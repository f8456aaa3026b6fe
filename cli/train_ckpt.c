/* What `zero train` records in a checkpoint about the run (the model's config.json and where it
 * came from, sequence length, seed, global batch, the chat format asked for) and how --resume
 * takes it back, so a resumed run is the same computation and export and sample need nothing but
 * the checkpoint (and the model directory it came from, for the tokenizer). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

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
    /* the chat format the run used: a name, or "model" and the template's text (resume and sample
     * --chat use the same one, or refuse) */
    const char *tmpl = o->tok ? zero_tokenizer_chat_template(o->tok) : NULL;
    const int model = tmpl && (o->chat == ZERO_CHAT_MODEL || (!o->chat_template && o->chat == ZERO_CHAT_NONE));
    if (o->chat_template || model)
        cJSON_AddStringToObject(root, "chat_template", model ? "model" : zero_chat_format_name(o->chat));
    if (model) cJSON_AddStringToObject(root, "chat_template_text", tmpl);
    cJSON_AddNumberToObject(root, "seq", o->T);
    cJSON_AddNumberToObject(root, "seed", (double)o->seed);
    cJSON_AddNumberToObject(root, "global_batch", (double)(world * o->cfg.micro_batch * o->cfg.grad_accum));
    train_lora_record(o, root);
    /* what else defines the run, for --resume to restore (train_resume_run) */
    cJSON *run = cJSON_CreateObject();
    char *conf_text = zero_config_to_json(&o->run_pre);
    cJSON *conf_json = conf_text ? cJSON_Parse(conf_text) : NULL;
    free(conf_text);
    if (conf_json) cJSON_AddItemToObject(run, "config", conf_json);
    const char *paths[2] = {o->data, o->val_data}, *keys[2] = {"data", "val_data"};
    for (int i = 0; i < 2; i++) {
        if (!paths[i]) continue;
        char *abs = realpath(paths[i], NULL);
        cJSON_AddStringToObject(run, keys[i], abs ? abs : paths[i]);
        free(abs);
    }
    if (o->data_digested) {
        char hex[16];
        snprintf(hex, sizeof hex, "%08x", (unsigned)o->data_crc);
        cJSON_AddStringToObject(run, "data_crc32c", hex);
        cJSON_AddNumberToObject(run, "data_bytes", (double)o->data_bytes);
    }
    cJSON_AddNumberToObject(run, "activation_checkpointing", o->checkpointing ? 1 : 0);
    if (o->obj != DEC_OBJ_LM) { /* a preference run: its objective, resumed as it was */
        cJSON_AddStringToObject(run, "objective", dec_objective_name(o->obj));
        cJSON_AddNumberToObject(run, "beta", o->beta);
        cJSON_AddNumberToObject(run, "label_smoothing", o->label_smoothing);
        if (o->dpo_reference) cJSON_AddStringToObject(run, "dpo_reference", o->dpo_reference);
    }
    cJSON_AddItemToObject(root, "run", run);
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

/* ------------------------------------------------------------------ the run's own settings */
static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int digest_file(const char *path, uint32_t *crc, uint64_t *bytes, char *err, size_t cap) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    static char buf[1 << 20];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) {
        *crc = zero_crc32c(*crc, buf, n);
        *bytes += n;
    }
    const int bad = ferror(f);
    fclose(f);
    if (bad) snprintf(err, cap, "%s: read error", path);
    return bad ? -1 : 0;
}

int train_data_digest(const char *path, uint32_t *crc, uint64_t *bytes, char *err, size_t cap) {
    *crc = 0;
    *bytes = 0;
    /* each read of the data for its digest, counted by tests/cli/test_data_digest.sh */
    if (zero_log_get_level() >= ZERO_LOG_DEBUG) fprintf(stderr, "zero: debug: reading the digest of the data %s\n", path);
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(sb.st_mode)) return digest_file(path, crc, bytes, err, cap);
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, cap, "%s: %s", path, strerror(errno));
        return -1;
    }
    char **names = NULL;
    size_t n = 0, capn = 0;
    int rc = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && !rc;) {
        char p[4096];
        struct stat st;
        /* the files the data reader takes: regular ones, not links */
        if (snprintf(p, sizeof p, "%s/%s", path, e->d_name) >= (int)sizeof p || lstat(p, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (n == capn) {
            capn = capn ? 2 * capn : 64;
            char **v = realloc(names, capn * sizeof *v);
            if (!v) rc = -1;
            else names = v;
        }
        if (!rc && !(names[n++] = strdup(e->d_name))) rc = -1;
    }
    closedir(d);
    if (rc) snprintf(err, cap, "%s: out of memory", path);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n && !rc; i++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        *crc = zero_crc32c(*crc, names[i], strlen(names[i]) + 1);
        rc = digest_file(p, crc, bytes, err, cap);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return rc;
}

/* The launcher's digest, for the ranks it starts: "CRC BYTES REALPATH" (trusted: the environment
 * is the user's, docs/SECURITY.md). */
#define DIGEST_ENV "ZERO_DATA_DIGEST"

static void digest_take(train_opts *o, uint32_t crc, uint64_t bytes, const char *abs) {
    o->data_crc = crc;
    o->data_bytes = bytes;
    o->data_digested = 1;
    snprintf(o->data_digest_of, sizeof o->data_digest_of, "%s", abs);
}

int train_data_digest_once(train_opts *o, char *err, size_t cap) {
    char *abs = realpath(o->data, NULL);
    if (abs && o->data_digested && !strcmp(abs, o->data_digest_of)) {
        free(abs);
        return 0;
    }
    const char *env = getenv(DIGEST_ENV);
    unsigned crc;
    unsigned long long bytes;
    int at = 0;
    if (abs && env && sscanf(env, "%8x %llu %n", &crc, &bytes, &at) == 2 && at > 0 && !strcmp(env + at, abs)) {
        digest_take(o, crc, bytes, abs);
        free(abs);
        return 0;
    }
    uint32_t c;
    uint64_t b;
    const int rc = train_data_digest(o->data, &c, &b, err, cap);
    if (!rc) digest_take(o, c, b, abs ? abs : o->data);
    free(abs);
    return rc;
}

void train_data_digest_pass_on(const train_opts *o) {
    if (!o->data_digested) return;
    char v[4200];
    snprintf(v, sizeof v, "%08x %llu %s", (unsigned)o->data_crc, (unsigned long long)o->data_bytes, o->data_digest_of);
    setenv(DIGEST_ENV, v, 1);
}

int train_data_digest_share(train_opts *o, zero_comm *comm) {
    if (!o->data || !(o->save || o->resume)) return CLI_OK;
    const int rank = zero_comm_rank(comm);
    int64_t v[3] = {0, 0, 0}; /* read, crc, bytes */
    char err[512];
    if (rank == 0 && train_data_digest_once(o, err, sizeof err) == 0)
        v[0] = 1, v[1] = (int64_t)o->data_crc, v[2] = (int64_t)o->data_bytes;
    if (zero_comm_broadcast(comm, v, 3, ZERO_DTYPE_INT64, 0) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "rank %d: sharing the data's digest: %s", rank, zero_comm_last_error(comm));
    /* rank 0 could not read it: each rank tries in train_prepare, and rank 0 says why */
    if (!v[0] || rank == 0) return CLI_OK;
    char *abs = realpath(o->data, NULL);
    digest_take(o, (uint32_t)v[1], (uint64_t)v[2], abs ? abs : o->data);
    free(abs);
    return CLI_OK;
}

/* A string of the record, kept by o (freed with it): the run's data, validation data, chat format. */
static const char *keep(train_opts *o, int slot, const char *v) {
    free(o->run_strings[slot]);
    o->run_strings[slot] = v ? strdup(v) : NULL;
    return o->run_strings[slot];
}

int train_resume_run(train_opts *o) {
    zero_error err = {{0}};
    o->ux.run_note[0] = 0;
    zero_ckpt *c = NULL;
    if (zero_ckpt_open(&c, NULL, o->resume, 0, &err) != ZERO_OK) return cli_error(CLI_RUNTIME, "--resume: %s", err.msg);
    int rc = CLI_OK;
    char *conf = NULL;
    /* the configuration: the base over which --config and the flags apply */
    if (zero_ckpt_user_json(c, "run.config", &conf) == ZERO_OK) {
        zero_config_default(&o->cfg);
        if (zero_config_load_json_string(&o->cfg, conf, &err) != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "--resume %s: the checkpoint's record of its run: run.config: %s", zero_ckpt_dir(c),
                           err.msg);
            goto out;
        }
        o->run_cfg = o->cfg;
        o->run_recorded = 1;
    }
    const char *v = NULL;
    if (!o->chat_template && zero_ckpt_user_string(c, "chat_template", &v) == ZERO_OK) {
        o->chat_template = keep(o, 2, v);
        if (!strcmp(v, "model") && zero_ckpt_user_string(c, "chat_template_text", &v) == ZERO_OK)
            o->chat_template_text = keep(o, 3, v);
    }
    double x = 0;
    if (!o->checkpointing && zero_ckpt_user_number(c, "run.activation_checkpointing", &x) == ZERO_OK && x == 1)
        o->checkpointing = 1;
    o->data_changed = NULL;
    if (zero_ckpt_user_string(c, "run.val_data", &v) == ZERO_OK) {
        if (!o->val_data || o->val_data == o->run_strings[1]) {
            o->val_data = keep(o, 1, v);
        } else {
            char *abs = realpath(o->val_data, NULL);
            if (!abs || strcmp(abs, v)) o->data_changed = "--val-data is not the run's";
            free(abs);
        }
    } else if (o->val_data) {
        o->data_changed = "--val-data: the run had none";
    }
    o->dpo_reference_in = zero_ckpt_user_string(c, "run.dpo_reference", &v) == ZERO_OK ? keep(o, 4, v) : NULL;
    if (!o->objective && zero_ckpt_user_string(c, "run.objective", &v) == ZERO_OK) { /* its objective goes on */
        o->objective = dec_objective_name(dec_objective_parse(v, &o->obj) == ZERO_OK ? o->obj : DEC_OBJ_LM);
        if (!o->beta_given && zero_ckpt_user_number(c, "run.beta", &x) == ZERO_OK) o->beta = x;
        if (o->label_smoothing == 0 && zero_ckpt_user_number(c, "run.label_smoothing", &x) == ZERO_OK) o->label_smoothing = x;
    }
    const char *rec = NULL, *hex = NULL;
    if (zero_ckpt_user_string(c, "run.data", &rec) != ZERO_OK) goto out; /* the built-in corpus, or an older record */
    const int given = o->data != NULL && o->data != o->run_strings[0]; /* not taken from the record by a pass before */
    if (!given) o->data = keep(o, 0, rec);
    if (zero_ckpt_user_string(c, "run.data_crc32c", &hex) != ZERO_OK || zero_ckpt_user_number(c, "run.data_bytes", &x) != ZERO_OK)
        goto out; /* recorded without a digest: nothing to compare */
    /* a rank's pass before MPI starts compares nothing: its pass for the world does, with the
     * digest rank 0 read (or the launcher, which compared it before it started the ranks) */
    if (o->prepare_world == 0) goto out;
    char e2[512], nowhex[16];
    char *abs = given ? realpath(o->data, NULL) : NULL;
    const int same_path = !given || (abs && !strcmp(abs, rec));
    free(abs);
    if (!same_path) {
        o->data_changed = "--data is not the run's";
        snprintf(o->ux.run_note, sizeof o->ux.run_note, "data %s -> %s (--data)", rec, o->data);
        goto out;
    }
    if (train_data_digest_once(o, e2, sizeof e2) != 0) {
        rc = given ? cli_error(CLI_USAGE, "--data: %s", e2)
                   : cli_error(CLI_RUNTIME, "--resume %s: the run's data %s: %s: give --data to train on other data",
                               zero_ckpt_dir(c), rec, e2);
        goto out;
    }
    const uint64_t bytes = o->data_bytes;
    snprintf(nowhex, sizeof nowhex, "%08x", (unsigned)o->data_crc);
    if (!strcmp(nowhex, hex) && (double)bytes == x) goto out;
    if (!given) {
        rc = cli_error(CLI_RUNTIME, "--resume %s: the run's data %s changed since the checkpoint (%.0f bytes, crc32c %s; now "
                       "%llu bytes, crc32c %s): give --data %s again to train on it as it is now", zero_ckpt_dir(c), rec, x,
                       hex, (unsigned long long)bytes, nowhex, rec);
        goto out;
    }
    o->data_changed = "the run's data changed since the checkpoint";
    snprintf(o->ux.run_note, sizeof o->ux.run_note, "data %s changed since the checkpoint (--data given again: trained as it is now)", rec);
out:
    free(conf);
    zero_ckpt_close(c);
    return rc;
}

void train_resume_changes(train_opts *o) {
    if (!o->run_recorded) return;
    char d[768];
    const int n = zero_config_diff(&o->run_cfg, &o->run_pre, d, sizeof d);
    if (n <= 0) return;
    const size_t len = strlen(o->ux.run_note);
    snprintf(o->ux.run_note + len, sizeof o->ux.run_note - len, "%sthe run's configuration, changed by --config or the flags: %s",
             len ? "; " : "", d);
}
