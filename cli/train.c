/* The training loop of `zero train`: builds the engine and the model, runs the steps with the
 * data rule of models/decoder/data.h, reports progress and --log-json records, and ends with what
 * ZeRO saved against stage 0 and the traffic against ZeRO's rule. */
#include "train.h"
#include "decoder/pref.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "decoder/hf.h"
#include "modeltok.h"
#include "tensorboard.h"
#include "weights.h"
#include "zero/offload.h"

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

/* zero_config.doc_mask against the data: AUTO is on for examples packed into rows whose starts
 * are known; ON needs the starts (of --data, and of --val-data when given). */
static int resolve_docs(train_opts *o) {
    const int mode = o->cfg.doc_mask;
    const char *flag = o->doc_mask ? "--doc-mask on" : "zero_extensions.document_mask";
    o->docs = 0;
    if (mode == ZERO_DOC_MASK_OFF) return CLI_OK;
    if (mode == ZERO_DOC_MASK_AUTO) {
        o->docs = dec_data_row(o->dataset) > 0 && dec_data_has_docs(o->dataset) &&
                  (!o->valset || dec_data_has_docs(o->valset));
        return CLI_OK;
    }
    const char *bad = !dec_data_has_docs(o->dataset) ? o->data : o->valset && !dec_data_has_docs(o->valset) ? o->val_data : NULL;
    if (bad)
        return cli_error(CLI_USAGE, "%s: %s does not record where its examples start (text read as bytes, or a token "
                         "file written before they were recorded): expected JSONL or text through a tokenizer, or a "
                         "token file from `zero tokenize` (or --doc-mask off)", flag, bad);
    o->docs = 1;
    return CLI_OK;
}

/* --data (and --val-data): a token file as it is; text and JSONL through the model directory's
 * tokenizer; text as bytes for a model without one (a preset, or a byte-level model). */
static int open_data(train_opts *o) {
    zero_error err = {{0}};
    const dec_config *m = &o->model_cfg;
    const char *what = o->data ? o->data : "the fortunes corpus";
    zero_tokenizer_free(o->tok);
    o->tok = NULL;
    o->tokdir[0] = 0;
    const int val_text = o->val_data && !dec_data_is_token_file(o->val_data);
    if (dec_data_is_token_file(o->data) && !val_text) {
        if (o->chat_template || o->skip_bad)
            return cli_error(CLI_USAGE, "%s: --data %s is a token file (already tokenized): nothing to apply it to",
                             o->chat_template ? "--chat-template" : "--skip-bad-examples", o->data);
    } else {
        if (val_text && dec_data_is_token_file(o->data)) what = o->val_data; /* the text the tokenizer is for */
        char dir[1024];
        const int found = cli_model_tokenizer_dir(&o->src, dir, sizeof dir);
        if (found > 0) {
            int rc = cli_tokenizer_load(dir, m, "--data", &o->tok);
            if (rc != CLI_OK) return rc;
            snprintf(o->tokdir, sizeof o->tokdir, "%s", dir);
        } else if (m->vocab != 256 && o->src.source) {
            return cli_error(CLI_USAGE,
                             "%s %s is text: the model's directory %s %s, and a model of vocabulary %d does not read "
                             "bytes (give a model directory with its tokenizer files, or a token file: zero tokenize)",
                             what == o->val_data ? "--val-data" : "--data", what, dir,
                             found < 0 ? "is gone (its tokenizer with it)" : "has no tokenizer.json", m->vocab);
        } else if (o->chat_template || o->skip_bad) {
            return cli_error(CLI_USAGE, "%s: the model has no tokenizer (tokenizer.json in its directory): --data %s is "
                             "read as bytes", o->chat_template ? "--chat-template" : "--skip-bad-examples", what);
        }
    }
    /* --resume of a run that trained with the model's template: the same template, or a refusal */
    if (o->chat_template_text && o->chat == ZERO_CHAT_MODEL) {
        const char *have = o->tok ? zero_tokenizer_chat_template(o->tok) : NULL;
        if (!have || strcmp(have, o->chat_template_text)) {
            char diff[256] = "it has none";
            if (have) cli_first_difference(have, o->chat_template_text, diff, sizeof diff);
            return cli_error(CLI_USAGE, "--resume %s: the chat template of the tokenizer in %s is not the one the run "
                             "trained with, which its run record holds (%s): give --chat-template NAME to choose "
                             "another", o->resume, o->tokdir[0] ? o->tokdir : "the model's directory", diff);
        }
    }
    dec_data_opts d;
    dec_data_opts_default(&d);
    d.path = o->data;
    d.tok = o->tok;
    d.seq = o->T;
    d.chat = o->chat;
    d.skip_bad = o->skip_bad;
    d.pairs = o->obj != DEC_OBJ_LM;
    if (d.pairs && !o->tok)
        return cli_error(CLI_USAGE, "--objective %s: preference pairs are text: the model needs its tokenizer.json "
                         "(--init-from a model directory)", dec_objective_name(o->obj));
    if (o->val_data) d.val_fraction = 0; /* validation has its own file: all of --data trains */
    if (dec_data_open(&o->dataset, &d, &err) != ZERO_OK) return cli_error(CLI_USAGE, "--data: %s", err.msg);
    if (o->val_data) { /* read as --data is: the same tokenizer, chat format, sequence and skipping */
        d.path = o->val_data;
        d.val_fraction = 1;
        if (dec_data_open(&o->valset, &d, &err) != ZERO_OK) return cli_error(CLI_USAGE, "--val-data: %s", err.msg);
    }
    return resolve_docs(o);
}

void train_release(train_opts *o) {
    dec_data_free(o->dataset);
    o->dataset = NULL;
    dec_data_free(o->valset);
    o->valset = NULL;
    zero_tokenizer_free(o->tok);
    o->tok = NULL;
    cli_model_free(&o->src);
    o->chat_template_text = NULL;
    for (int i = 0; i < 4; i++) {
        free(o->run_strings[i]);
        o->run_strings[i] = NULL;
    }
}

/* A note joins config.json's (src.notes): rank 0 prints them once at the start of the run. */
static int add_note(cli_model *src, const char *note) {
    const size_t have = src->notes ? strlen(src->notes) : 0, n = have + strlen(note) + 3;
    char *joined = malloc(n);
    if (!joined) return cli_error(CLI_RUNTIME, "out of memory");
    snprintf(joined, n, "%s%s%s", have ? src->notes : "", have ? "; " : "", note);
    free(src->notes);
    src->notes = joined;
    return CLI_OK;
}

static int is_dir(const char *path) {
    struct stat sb;
    return !stat(path, &sb) && S_ISDIR(sb.st_mode);
}

/* `problems` (one a line) as one error line: "FILE: N problems: A; B; ...". */
static int config_problems(const char *path, const char *problems) {
    int n = 0;
    for (const char *p = problems; *p; p += strcspn(p, "\n") + 1) n++;
    const size_t cap = strlen(problems) + 16 * (size_t)n + 1;
    char *line = malloc(cap);
    if (!line) return cli_error(CLI_RUNTIME, "out of memory");
    size_t len = 0;
    int i = 0;
    for (const char *p = problems; *p; p += strcspn(p, "\n") + 1) {
        const int k = (int)strcspn(p, "\n");
        len += (size_t)(n == 1 ? snprintf(line + len, cap - len, "%.*s", k, p)
                               : snprintf(line + len, cap - len, "%s(%d) %.*s", i ? "; " : "", i + 1, k, p));
        i++;
    }
    const int rc = n == 1 ? cli_error(CLI_USAGE, "%s: %s", path, line)
                          : cli_error(CLI_USAGE, "%s: %d problems: %s", path, n, line);
    free(line);
    return rc;
}

int train_prepare(train_opts *o, int world) {
    zero_error err = {{0}};
    zero_config *cfg = &o->cfg;
    zero_config_default(cfg);
    o->prepare_world = world;
    int rc;
    if ((rc = train_device_resolve(o)) != CLI_OK) return rc; /* --device, --device-memory: nothing runs first */
    /* --resume: the checkpoint's run is the base (its configuration, data, chat format), which the
     * config file and the flags below then change, each change said at the start */
    if ((rc = ux_check_inputs(o)) != CLI_OK) return rc; /* the paths given, --resume's first */
    if (o->resume && (rc = train_resume_run(o)) != CLI_OK) return rc;
    if (o->config) {
        /* every problem of the file in one line, however many (err holds as many as fit) */
        char *all = NULL;
        zero_status s = zero_config_load_json_file_report(cfg, o->config, &all, &err);
        if (s != ZERO_OK && all) {
            rc = config_problems(o->config, all);
            free(all);
            return rc;
        }
        if (s != ZERO_OK) return cli_error(s == ZERO_ERR_IO ? CLI_RUNTIME : CLI_USAGE, "%s: %s", o->config, err.msg);
    }
    if (o->stage >= 0) cfg->stage = o->stage;
    /* the flags replace the config's micro-batch and accumulation; a train_batch_size it gives stays
     * and must agree (resolve derives the missing one, as DeepSpeed does, or names the mismatch) */
    if (o->micro_batch > 0) cfg->micro_batch = o->micro_batch;
    if (o->grad_accum > 0) cfg->grad_accum = o->grad_accum;
    if (o->micro_batch < 0 && !(cfg->auto_fields & ZERO_AUTO_MICRO_BATCH) && cfg->micro_batch <= 0) cfg->micro_batch = 4;
    if (o->lr >= 0) cfg->optim.lr = (float)o->lr;
    if (o->deterministic) cfg->deterministic = 1;
    if (o->det_atom > 0) cfg->deterministic_atom = o->det_atom;
    if (cfg->deterministic_atom > 1 && !cfg->deterministic)
        return cli_error(CLI_USAGE, "--det-atom %d (zero_extensions.deterministic_atom): only with --deterministic",
                         cfg->deterministic_atom);
    if (o->precision) {
        zero_dtype dt;
        if (zero_dtype_parse(o->precision, &dt) != ZERO_OK ||
            (dt != ZERO_DTYPE_FP32 && dt != ZERO_DTYPE_BF16 && dt != ZERO_DTYPE_FP16))
            return cli_error(CLI_USAGE, "--precision '%s': expected fp32, bf16 or fp16", o->precision);
        cfg->precision = dt;
    }
    if (o->optim_states) {
        if (strcmp(o->optim_states, "fp32") && strcmp(o->optim_states, "int8"))
            return cli_error(CLI_USAGE, "--optimizer-states '%s': expected fp32 or int8", o->optim_states);
        cfg->optim_states = strcmp(o->optim_states, "int8") ? ZERO_OPTIM_STATES_FP32 : ZERO_OPTIM_STATES_INT8;
    }
    if (o->quantize_base) {
        if (strcmp(o->quantize_base, "nf4") && strcmp(o->quantize_base, "int8") && strcmp(o->quantize_base, "none"))
            return cli_error(CLI_USAGE, "--quantize-base '%s': expected nf4, int8 or none", o->quantize_base);
        cfg->quant_base = !strcmp(o->quantize_base, "nf4")    ? ZERO_QFMT_NF4
                          : !strcmp(o->quantize_base, "int8") ? ZERO_QFMT_INT8
                                                              : ZERO_QFMT_NONE;
    }
    if (o->doc_mask) {
        if (strcmp(o->doc_mask, "on") && strcmp(o->doc_mask, "off") && strcmp(o->doc_mask, "auto"))
            return cli_error(CLI_USAGE, "--doc-mask '%s': expected on, off or auto", o->doc_mask);
        cfg->doc_mask = !strcmp(o->doc_mask, "on")    ? ZERO_DOC_MASK_ON
                        : !strcmp(o->doc_mask, "off") ? ZERO_DOC_MASK_OFF
                                                      : ZERO_DOC_MASK_AUTO;
    }
    if (o->objective && dec_objective_parse(o->objective, &o->obj) != ZERO_OK)
        return cli_error(CLI_USAGE, "--objective '%s': expected lm, dpo or orpo", o->objective);
    if (o->obj != DEC_OBJ_LM) {
        if (!(o->beta > 0) || !isfinite(o->beta))
            return cli_error(CLI_USAGE, "--beta %g: expected a number > 0", o->beta);
        if (!(o->label_smoothing >= 0 && o->label_smoothing < 0.5) || (o->label_smoothing > 0 && o->obj != DEC_OBJ_DPO))
            return cli_error(CLI_USAGE, "--label-smoothing %g: expected a number in [0, 0.5), with --objective dpo",
                             o->label_smoothing);
        if (cfg->micro_batch % 2 || cfg->micro_batch > 2048)
            return cli_error(CLI_USAGE, "--objective %s: --micro-batch %lld: expected an even number of sequences (a "
                             "pair is two: chosen and rejected), at most 2048", dec_objective_name(o->obj),
                             (long long)cfg->micro_batch);
        const char *no = cfg->deterministic ? "--deterministic" : o->obj == DEC_OBJ_DPO && o->resume ? "--resume" :
                         o->obj == DEC_OBJ_DPO && o->val_data ? "--val-data" : NULL;
        if (no)
            return cli_error(CLI_USAGE, "--objective %s with %s is not supported yet", dec_objective_name(o->obj), no);
    } else if (o->beta_given || o->label_smoothing > 0) {
        return cli_error(CLI_USAGE, "--beta and --label-smoothing: the preference objectives' (--objective dpo|orpo)");
    }
    /* the configuration as asked, before --steps fills an "auto" total and the world resolves the
     * batch: what a checkpoint records of the run (the batch is recorded as the global batch) */
    o->run_pre = *cfg;
    o->run_pre.train_batch_size = o->run_pre.micro_batch = o->run_pre.grad_accum = 0;
    o->run_pre.auto_fields &= ~(unsigned)(ZERO_AUTO_TRAIN_BATCH | ZERO_AUTO_MICRO_BATCH | ZERO_AUTO_GRAD_ACCUM);
    train_resume_changes(o);
    if (cfg->auto_fields & ZERO_AUTO_SCHED_TOTAL_NUM_STEPS) cfg->sched.total_num_steps = o->steps;
    const char *offl[2] = {o->offload_optimizer, o->offload_param};
    zero_offload_config *oc[2] = {&cfg->offload_optimizer, &cfg->offload_param};
    for (int i = 0; i < 2; i++) {
        if (!offl[i]) continue;
        if (!strcmp(offl[i], "none") || !strcmp(offl[i], "cpu")) {
            oc[i]->device = strcmp(offl[i], "cpu") ? ZERO_OFFLOAD_NONE : ZERO_OFFLOAD_CPU;
            continue;
        }
        if (strncmp(offl[i], "nvme:", 5) || !offl[i][5] || strlen(offl[i] + 5) >= sizeof oc[i]->nvme_path)
            return cli_error(CLI_USAGE, "--offload-%s '%s': expected none, cpu or nvme:DIR (DIR shorter than %zu bytes)",
                             i ? "param" : "optimizer", offl[i], sizeof oc[i]->nvme_path);
        oc[i]->device = ZERO_OFFLOAD_NVME;
        snprintf(oc[i]->nvme_path, sizeof oc[i]->nvme_path, "%s", offl[i] + 5);
    }
    if (o->save_every && !o->save) return cli_error(CLI_USAGE, "--save-every %lld: expected --save DIR too", (long long)o->save_every);
    if (o->save_total_limit && !o->save)
        return cli_error(CLI_USAGE, "--save-total-limit %d: expected --save DIR too", o->save_total_limit);
    if (o->lora_spec && train_lora_parse(o->lora_spec, &cfg->lora)) return CLI_USAGE;
    if (o->save_frozen) cfg->save_frozen = 1;
    /* --resume with --init-from: only for a LoRA run's base (train_lora_resume) */
    o->chat = ZERO_CHAT_NONE;
    if (o->chat_template && zero_chat_format_parse(o->chat_template, &o->chat) != ZERO_OK)
        return cli_error(CLI_USAGE, "--chat-template '%s': expected model (the tokenizer's own template) or one of the "
                         "built-in formats chatml, llama3, mistral", o->chat_template);
    if ((rc = ux_check_outputs(o)) != CLI_OK) return rc; /* fail now, not after the run */
    if (world > 0) {
        zero_status s = zero_config_resolve(cfg, world, &err);
        if (s != ZERO_OK)
            return cli_error(CLI_USAGE, "%s%s%s%s", o->config ? o->config : "", o->config ? ": " : "", err.msg,
                             o->micro_batch > 0 || o->grad_accum > 0
                                 ? " (--micro-batch and --grad-accum replace the config's; its train_batch_size stays)"
                                 : "");
    }

    dec_config *m = &o->model_cfg;
    if (o->init_from && access(o->init_from, R_OK))
        return cli_error(CLI_USAGE, "--init-from '%s': %s", o->init_from, strerror(errno));
    cli_model_free(&o->src);
    const int shape_flags = o->model_given || o->layers > 0 || o->dim > 0 || o->vocab > 0;
    if (o->init_from && dec_hf_is_dir(o->init_from)) {
        /* a model directory: config.json says what the model is; flags may only agree with it */
        if ((rc = cli_model_from_path(o->init_from, 0, "--init-from", &o->src)) != CLI_OK) return rc;
        if ((rc = cli_model_check_flags(&o->src, o->model_given ? o->model : NULL, o->layers, o->dim, o->heads,
                                        o->vocab)) != CLI_OK)
            return rc;
    } else if (o->init_from && (!shape_flags || is_dir(o->init_from))) {
        /* a checkpoint or a file: it says what model it holds (--heads may help a GPT-2 file); a
         * checkpoint's record says it all, and flags may only agree with it */
        if ((rc = cli_model_from_path(o->init_from, o->heads, "--init-from", &o->src)) != CLI_OK) return rc;
        if (o->src.kind == CLI_MODEL_CKPT &&
            (rc = cli_model_check_flags(&o->src, o->model_given ? o->model : NULL, o->layers, o->dim, o->heads,
                                        o->vocab)) != CLI_OK)
            return rc;
    } else {
        if ((rc = cli_model_from_name(o->model, "--model", &o->src)) != CLI_OK) return rc;
        if (o->src.kind == CLI_MODEL_HF) {
            if ((rc = cli_model_check_flags(&o->src, NULL, o->layers, o->dim, o->heads, o->vocab)) != CLI_OK) return rc;
        } else {
            dec_config *c = &o->src.cfg;
            if (o->layers > 0) c->n_layer = o->layers;
            if (o->vocab > 0) c->vocab = o->vocab;
            if (o->dim > 0 || o->heads > 0) {
                if (o->dim > 0) c->n_embd = o->dim;
                if (o->heads > 0) c->n_head = o->heads;
                /* as transformers derives them: head_dim = dim / heads; GPT-2's MLP is 4 dim wide */
                if (c->n_embd % c->n_head)
                    return cli_error(CLI_USAGE, "model: n_embd %d: expected a multiple of n_head %d", c->n_embd, c->n_head);
                c->head_dim = c->n_embd / c->n_head;
                if (c->arch == DEC_ARCH_GPT2) c->n_kv_head = c->n_head, c->n_inner = 4 * c->n_embd;
                else if (o->heads > 0 && c->n_head % c->n_kv_head) c->n_kv_head = c->n_head;
            }
        }
    }
    if (o->src.kind == CLI_MODEL_FILE || o->src.kind == CLI_MODEL_CKPT || o->src.kind == CLI_MODEL_HF)
        snprintf(o->src.name, sizeof o->src.name, "%s", o->init_from ? o->init_from : o->model);
    *m = o->src.cfg;
    /* A token file of packed rows was cut at its sequence length (`zero tokenize --seq T` writes
     * rows of T + 1 tokens): without --seq the run takes it, as a pre-tokenized dataset is trained
     * at the length it was packed to; another --seq is refused by dec_data_check, naming both. A
     * stream file has no length of its own. A resumed run keeps its checkpoint's (below). */
    uint32_t row = 0;
    if (o->seq <= 0 && !o->resume && dec_data_is_token_file(o->data)) {
        if (!o->dataset && (rc = open_data(o)) != CLI_OK) return rc;
        row = dec_data_row(o->dataset);
    }
    o->T = o->seq > 0 ? o->seq : row > 1 && row - 1 <= 1u << 20 ? (int)(row - 1) : (m->n_ctx < 256 ? m->n_ctx : 256);
    char note[512];
    if ((rc = cli_model_check_seq(&o->src, o->T, o->init_from != NULL, note, sizeof note)) != CLI_OK) return rc;
    if (note[0] && (rc = add_note(&o->src, note)) != CLI_OK) return rc; /* printed with config.json's */
    /* from scratch the positions grow to fit; o->src keeps the source's (a checkpoint records the
     * source's config.json only when the model is still the one it describes) */
    if (o->T > m->n_ctx) m->n_ctx = o->T;
    if (o->resume) { /* the checkpoint says what model, sequence length and seed the run has */
        int rc2 = train_resume_settings(o);
        if (rc2 != CLI_OK) return rc2;
    }
    if (dec_config_check(m, &err) != ZERO_OK) return cli_error(CLI_USAGE, "model: %s", err.msg);
    if (dec_config_check_seq(m, o->T, &err) != ZERO_OK) return cli_error(CLI_USAGE, "--seq %d: %s", o->T, err.msg);
    if ((rc = train_lora_prepare(o)) != CLI_OK) return rc;
    if (cfg->quant_base != ZERO_QFMT_NONE && !o->lora_on) /* nothing but a frozen base is quantized */
        return cli_error(CLI_USAGE, "--quantize-base %s (zero_extensions.quantize_base): a quantized base is frozen and "
                                    "not trained; train adapters on it with --lora or --lora-from",
                         zero_qformat_name((zero_qformat)cfg->quant_base));
    if (o->lora_on && cfg->deterministic) /* frozen parameters and the per-rank dropout keys: not yet */
        return cli_error(CLI_USAGE, "--deterministic with LoRA (--lora, --lora-from or zero_extensions.lora) is not "
                                    "supported yet");
    ux_resume_batch(o, world);
    if (cfg->deterministic && cfg->micro_batch % cfg->deterministic_atom)
        return cli_error(CLI_USAGE, "--det-atom %d (zero_extensions.deterministic_atom): the micro-batch of %lld sequences is "
                                    "not a multiple of it",
                         cfg->deterministic_atom, (long long)cfg->micro_batch);
    if ((rc = ux_check_memory(o, world)) != CLI_OK) return rc; /* before anything is allocated */
    if ((rc = train_device_check(o, world)) != CLI_OK) return rc;

    if (!o->dataset && (rc = open_data(o)) != CLI_OK) return rc;
    if (dec_data_check(o->dataset, o->T, m->vocab, &err) != ZERO_OK) return cli_error(CLI_USAGE, "--data: %s", err.msg);
    /* the data's digest, which a checkpoint records so that --resume knows it again: one read of
     * the data a run (train_data_digest_once), not one a rank and a pass over the flags */
    if (o->save && o->data && world > 0) {
        char e2[512];
        if (train_data_digest_once(o, e2, sizeof e2) != 0) return cli_error(CLI_RUNTIME, "--data: %s", e2);
    }
    if (o->valset && dec_data_check(o->valset, o->T, m->vocab, &err) != ZERO_OK)
        return cli_error(CLI_USAGE, "--val-data: %s", err.msg);
    if (o->val_every < 0) o->val_every = o->steps >= 5 ? o->steps / 5 : 0;
    return CLI_OK;
}

/* ------------------------------------------------------------------ run */

typedef struct run_state {
    train_opts *o;
    zero_comm *comm;
    zero_engine *e;
    dec_model *model;
    int rank, world;
    FILE *json, *human; /* rank 0 only */
    cli_tb *tb;         /* rank 0 with TensorBoard on: the event file */
    char tb_path[4096];
    zero_ckpt_lock *lock; /* rank 0 with --save: the save directory is this run's */
    int32_t *inputs, *targets;
    int32_t *docs; /* the inputs' documents (o->docs), else NULL */
    int64_t G;          /* sequences per step, all ranks */
    zero_comm_counters eval; /* traffic of validation passes, kept out of the training figures */
    char *user_json;    /* what a checkpoint records of the run (train_user_json) */
    int offload;        /* NVMe offload is on: step records carry its I/O */
    int64_t off_prev[3]; /* this rank's offload bytes read, written and µs waited so far */
    uint64_t padded;    /* Σ padded unit sizes (their trainable parts) */
    uint64_t fpadded;   /* Σ padded frozen parts (LoRA's base) */
    double init_s;      /* seconds from the engine's creation to the initial weights in place */
    int64_t init_rss;   /* the largest per-rank peak RSS by then */
    /* preference objectives (--objective dpo|orpo) */
    double *ref;        /* DPO: the reference model's summed log-likelihoods, 2 per pair (all pairs) */
    int32_t *xin, *xtg; /* ORPO: a micro-batch and its chosen sequences again (3 per pair) */
    dec_pref_sums pref; /* the last step's sums over the global batch */
    double pref_pairs;  /* ... and its pairs */
} run_state;

/* Largest per-rank figures: [params, grads, master, optim, buffers, total, activations, rss] —
 * the states wherever they live — and on a device its own: the states' and all bytes at their
 * peak in device memory, and in pinned host memory. */
enum { M_PARAMS, M_GRADS, M_MASTER, M_OPTIM, M_BUFFERS, M_TOTAL, M_ACT, M_RSS, M_DEV_STATES, M_DEV_PEAK, M_PIN_STATES,
       M_PIN_PEAK, M_COUNT };

static int max_mem(run_state *r, int64_t out[M_COUNT]) {
    zero_mem_stats es, ms, sp;
    zero_engine_mem_stats(r->e, &es);
    dec_mem_stats(r->model, &ms);
    /* on a device the states live in its memory and in pinned host memory: counted where they are */
    const zero_mem_space spaces[2] = {ZERO_SPACE_DEVICE, ZERO_SPACE_HOST_PINNED};
    int64_t states[2] = {0, 0}, peak[2] = {0, 0};
    for (int k = 0; k < 2; k++) {
        zero_engine_device_mem_stats(r->e, spaces[k], &sp);
        for (int c = 0; c < ZERO_MEM_COUNT; c++) es.peak[c] += sp.peak[c];
        es.total_peak += sp.total_peak;
        for (int c = ZERO_MEM_PARAMS; c <= ZERO_MEM_OPTIM; c++) states[k] += (int64_t)sp.peak[c];
        peak[k] = (int64_t)sp.total_peak;
    }
    int64_t mine[M_COUNT] = {
        (int64_t)es.peak[ZERO_MEM_PARAMS], (int64_t)es.peak[ZERO_MEM_GRADS],   (int64_t)es.peak[ZERO_MEM_MASTER],
        (int64_t)es.peak[ZERO_MEM_OPTIM],  (int64_t)es.peak[ZERO_MEM_BUFFERS], (int64_t)es.total_peak,
        (int64_t)ms.total_peak,            (int64_t)zero_rss_peak_bytes(),     states[0],
        peak[0],                           states[1],                          peak[1]};
    return zero_comm_all_reduce(r->comm, mine, out, M_COUNT, ZERO_DTYPE_INT64, ZERO_OP_MAX) == ZERO_OK ? 0 : -1;
}

/* NVMe offload since the last call: the largest per-rank bytes read, bytes written and µs of I/O
 * wait (out may be NULL: only restart the count). */
static int offload_delta(run_state *r, int64_t out[3]) {
    zero_engine_offload_info in;
    zero_engine_offload_info_get(r->e, &in);
    const int64_t now[3] = {(int64_t)in.io.bytes_read, (int64_t)in.io.bytes_written, (int64_t)(in.io.io_wait_s * 1e6)};
    int64_t mine[3];
    for (int k = 0; k < 3; k++) {
        mine[k] = now[k] - r->off_prev[k];
        r->off_prev[k] = now[k];
    }
    if (!out) return 0;
    return zero_comm_all_reduce(r->comm, mine, out, 3, ZERO_DTYPE_INT64, ZERO_OP_MAX) == ZERO_OK ? 0 : -1;
}

static double mean_over_ranks(run_state *r, double x) {
    float mine = (float)x, mean = 0;
    if (zero_comm_all_reduce(r->comm, &mine, &mean, 1, ZERO_DTYPE_FP32, ZERO_OP_AVG) != ZERO_OK) return NAN;
    return mean;
}

static int fail(run_state *r, const char *what, const char *msg) {
    return cli_error(CLI_RUNTIME, "rank %d: %s: %s", r->rank, what, msg);
}

/* Deterministic mode: a sum over sequences that is the same whatever the ranks' shares. Each term
 * is rounded once to a multiple of 2^-bits (a loss of a few units keeps some 50 bits) and the
 * integers are summed, which is associative; acc[1] counts the terms that did not fit. */
#define DET_LOSS_BITS 32 /* a step's terms l_a = (sequence's loss sum) / (global count / G): < 2^30 */
#define DET_VAL_BITS 24  /* validation terms: a sequence's mean loss times its count: < 2^38 */
static void det_add(int64_t acc[2], double x, int bits) {
    const double q = ldexp(x, bits);
    if (!isfinite(q) || fabs(q) >= 0x1p62) acc[1]++;
    else acc[0] += llrint(q);
}

/* Where validation reads: --val-data's file, else --data's held-out split. */
static dec_data *val_source(const train_opts *o) { return o->valset ? o->valset : o->dataset; }

/* The documents of the sequences from token `at` of the step's buffers, for the passes that follow. */
static void set_docs(run_state *r, size_t at) { dec_set_docs(r->model, r->docs ? r->docs + at : NULL); }

/* ---------------------------------------------------------------- preference objectives */
/* out[i] = the sum over the ranks of v[i], in rank order, in double: each rank's values travel as
 * their bits in a slot of their own (the communicator sums integers; one rank writes a slot). */
static int allsum_f64(run_state *r, const double *v, size_t n, double *out) {
    const size_t W = (size_t)r->world;
    int64_t *mine = calloc(W * n + 1, sizeof *mine), *all = calloc(W * n + 1, sizeof *all);
    int bad = !mine || !all;
    if (!bad) {
        memcpy(mine + (size_t)r->rank * n, v, n * sizeof *v);
        bad = zero_comm_all_reduce(r->comm, mine, all, W * n, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK;
    }
    for (size_t i = 0; !bad && i < n; i++) {
        double sum = 0, x;
        for (size_t k = 0; k < W; k++) memcpy(&x, all + k * n + i, sizeof x), sum += x;
        out[i] = sum;
    }
    free(mine), free(all);
    return bad ? -1 : 0;
}

/* The summed log-likelihood of each of the B sequences of the last pass (-its cross-entropy), and
 * the counted targets of each. */
static void seq_stats(run_state *r, const int32_t *tg, int B, double *ll, double *cnt) {
    const int T = r->o->T;
    dec_seq_losses(r->model, B, T, ll);
    for (int b = 0; b < B; b++) {
        ll[b] = -ll[b];
        cnt[b] = (double)dec_count_targets(tg + (size_t)b * T, (size_t)T);
    }
}

/* DPO's reference: every pair's log-likelihoods under the initial weights, before the first step
 * (TRL's precompute_ref_log_probs; with LoRA the initial model is the base: B starts at 0). The
 * pairs are dealt to the ranks a micro-batch at a time (each rank's passes are collective at stage
 * 3: every rank makes as many), then summed. */
static int pref_reference(run_state *r) {
    train_opts *o = r->o;
    const int B = (int)o->cfg.micro_batch, T = o->T, per = B / 2;
    const uint64_t P = dec_data_num_pairs(o->dataset);
    zero_error err = {{0}};
    double *mine = calloc(2 * P + 1, sizeof *mine), ll[2 * 1024], cnt[2 * 1024];
    r->ref = calloc(2 * P + 1, sizeof *r->ref);
    if (!mine || !r->ref) {
        free(mine);
        return fail(r, "DPO reference", "out of memory for the reference log-likelihoods");
    }
    const uint64_t chunks = (P + (uint64_t)per - 1) / (uint64_t)per, rounds = (chunks + (uint64_t)r->world - 1) / (uint64_t)r->world;
    dec_set_seq_weights(r->model, NULL);
    dec_set_docs(r->model, NULL);
    for (uint64_t rd = 0; rd < rounds; rd++) {
        const uint64_t ch = rd * (uint64_t)r->world + (uint64_t)r->rank;
        int n = 0;
        for (int i = 0; i < per && ch < chunks && ch * (uint64_t)per + (uint64_t)i < P; i++, n++)
            if (dec_data_pair_rows(o->dataset, ch * (uint64_t)per + (uint64_t)i, T, r->inputs + (size_t)2 * i * T,
                                   r->targets + (size_t)2 * i * T, &err) != ZERO_OK) {
                free(mine);
                return fail(r, "DPO reference", err.msg);
            }
        if (!n) { /* no pair left for this rank: a pass without targets keeps the ranks in step */
            for (size_t k = 0; k < (size_t)2 * T; k++) r->inputs[k] = 0, r->targets[k] = -1;
        }
        float l;
        if (dec_engine_eval(r->model, r->e, r->inputs, r->targets, n ? 2 * n : 2, T, &l) != ZERO_OK) {
            free(mine);
            return fail(r, "DPO reference", zero_engine_last_error(r->e));
        }
        seq_stats(r, r->targets, 2 * n, ll, cnt);
        for (int i = 0; i < 2 * n; i++) mine[2 * ch * (uint64_t)per + (uint64_t)i] = ll[i];
    }
    /* each pair's values come from the one rank that computed them: their bits summed with zeros */
    const int bad = zero_comm_all_reduce(r->comm, mine, r->ref, 2 * P, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK;
    free(mine);
    return bad ? fail(r, "DPO reference", zero_comm_last_error(r->comm)) : CLI_OK;
}

/* The last counted target of a sequence (its EOS), or -1: every token up to it is the sequence's,
 * prompt included. */
static int last_target(const int32_t *tg, int T) {
    int last = -1;
    for (int t = 0; t < T; t++)
        if (tg[t] >= 0) last = t;
    return last;
}

/* One micro-batch of pairs (B sequences: chosen, rejected, ...) of batch `step` of a split: the
 * policy's log-likelihoods (a forward pass), the objective's weights; with backward, the weighted
 * pass that adds the gradient. Adds the batch's sums into *sums. */
static int pref_micro_batch(run_state *r, dec_split split, int64_t step, int k, int32_t *in, int32_t *tg, double tokens,
                            int backward, dec_pref_sums *sums) {
    train_opts *o = r->o;
    const int B = (int)o->cfg.micro_batch, K = (int)o->cfg.grad_accum, T = o->T, n = B / 2;
    const int orpo = o->obj == DEC_OBJ_ORPO, nseq = orpo ? 3 * n : B;
    zero_error err = {{0}};
    double ll[3 * 1024], cnt[3 * 1024], lc[1024], lr[1024], rc[1024], rr[1024], nc[1024], nr[1024];
    float wc[1024], wr[1024], wall[1024], w[3 * 1024];
    float l;
    if (orpo) { /* ORPO's NLL is over the whole chosen sequences: each again, every token a target */
        memcpy(r->xin, in, (size_t)B * T * sizeof *in);
        memcpy(r->xtg, tg, (size_t)B * T * sizeof *tg);
        for (int i = 0; i < n; i++) {
            const int32_t *ci = in + (size_t)2 * i * T, *ct = tg + (size_t)2 * i * T;
            int32_t *xi = r->xin + (size_t)(B + i) * T, *xt = r->xtg + (size_t)(B + i) * T;
            const int last = last_target(ct, T);
            memcpy(xi, ci, (size_t)T * sizeof *xi);
            for (int t = 0; t < T; t++) xt[t] = t < last ? ci[t + 1] : t == last ? ct[t] : -1;
        }
        in = r->xin, tg = r->xtg;
    }
    dec_set_seq_weights(r->model, NULL);
    if (dec_engine_eval(r->model, r->e, in, tg, nseq, T, &l) != ZERO_OK)
        return fail(r, "preference pass", zero_engine_last_error(r->e));
    seq_stats(r, tg, nseq, ll, cnt);
    const int64_t first = dec_data_first(r->rank, B, K, k);
    for (int i = 0; i < n; i++) {
        lc[i] = ll[2 * i], lr[i] = ll[2 * i + 1], nc[i] = cnt[2 * i], nr[i] = cnt[2 * i + 1];
        if (r->ref) {
            uint64_t p;
            if (dec_data_pair_of(o->dataset, split, o->seed, step, r->G, first + 2 * i, &p, &err) != ZERO_OK)
                return fail(r, "preference pairs", err.msg);
            rc[i] = r->ref[2 * p], rr[i] = r->ref[2 * p + 1];
        }
    }
    const dec_pref_opts po = {o->obj, o->beta, o->label_smoothing};
    if (dec_pref_weights(&po, n, lc, lr, rc, rr, nc, nr, orpo ? ll + B : NULL, (double)r->G / 2, tokens, wc, wr, wall,
                         sums) != ZERO_OK)
        return fail(r, "preference objective", "a completion without a counted token, or a probability of 1");
    if (!backward) return CLI_OK;
    for (int i = 0; i < n; i++) {
        w[2 * i] = wc[i], w[2 * i + 1] = wr[i];
        if (orpo) w[B + i] = wall[i];
    }
    dec_set_seq_weights(r->model, w);
    /* the loss is sum w CE, the weights hold the global batch's mean: a denominator of 1 */
    if (dec_engine_micro_batch(r->model, r->e, in, tg, nseq, T, 1.0, &l) != ZERO_OK)
        return fail(r, "forward/backward", zero_engine_last_error(r->e));
    dec_set_seq_weights(r->model, NULL);
    if (zero_engine_micro_batch_done(r->e) != ZERO_OK) return fail(r, "micro-batch", zero_engine_last_error(r->e));
    return CLI_OK;
}

/* The chosen sequences' tokens of the step's micro-batches (every token, the prompt's included),
 * all ranks: ORPO's NLL is their mean. */
static int chosen_tokens(run_state *r, const int32_t *tg, int nseq, double *out) {
    int64_t mine = 0, all = 0;
    for (int s = 0; s < nseq; s += 2) mine += last_target(tg + (size_t)s * r->o->T, r->o->T) + 1;
    if (zero_comm_all_reduce(r->comm, &mine, &all, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
        return fail(r, "counting the targets", zero_comm_last_error(r->comm));
    *out = (double)all;
    return CLI_OK;
}

/* The mean loss of a step's (or a validation batch's) global sums: the preference term's mean over
 * the pairs, plus ORPO's NLL over the chosen tokens. */
static int pref_reduce(run_state *r, dec_pref_sums *s, double tokens, double pairs, double *loss) {
    double v[6] = {s->loss, s->nll, s->chosen, s->rejected, s->margin, s->correct}, g[6];
    if (allsum_f64(r, v, 6, g)) return fail(r, "the preference loss", zero_comm_last_error(r->comm));
    *s = (dec_pref_sums){g[0], g[1], g[2], g[3], g[4], g[5]};
    *loss = s->loss / pairs + (r->o->obj == DEC_OBJ_ORPO ? s->nll / tokens : 0.0);
    return CLI_OK;
}

/* Mean validation loss over val_batches batches of G sequences (every rank its share): the mean
 * over every counted target of the batches, whatever the number of ranks. */
static int validate(run_state *r, double *out) {
    train_opts *o = r->o;
    const int B = (int)o->cfg.micro_batch, K = (int)o->cfg.grad_accum;
    zero_error err = {{0}};
    dec_data *vd = val_source(o);
    int64_t nb = dec_data_val_batches(vd, r->G, o->T);
    zero_comm_counters before, after;
    zero_engine_comm_counters(r->e, &before);
    if (nb > o->val_batches) nb = o->val_batches;
    if (o->obj != DEC_OBJ_LM) { /* the preference loss of the validation pairs */
        dec_pref_sums sums = {0};
        double tokens = 0, all_tokens = 0;
        for (int64_t b = 0; b < nb; b++) {
            for (int k = 0; k < K; k++) {
                int32_t *in = r->inputs + (size_t)k * B * o->T, *tg = r->targets + (size_t)k * B * o->T;
                if (dec_data_batch(vd, DEC_SPLIT_VAL, o->seed, b, r->G, dec_data_first(r->rank, B, K, k), B, o->T, in, tg,
                                   NULL, &err) != ZERO_OK)
                    return fail(r, "validation data", err.msg);
            }
            if (chosen_tokens(r, r->targets, B * K, &tokens) != CLI_OK) return CLI_RUNTIME;
            all_tokens += tokens;
            for (int k = 0; k < K; k++)
                if (pref_micro_batch(r, DEC_SPLIT_VAL, b, k, r->inputs + (size_t)k * B * o->T,
                                     r->targets + (size_t)k * B * o->T, tokens, 0, &sums) != CLI_OK)
                    return CLI_RUNTIME;
        }
        zero_engine_comm_counters(r->e, &after);
        for (int k = 0; k < ZERO_COLL_COUNT; k++) r->eval.bytes[k] += after.bytes[k] - before.bytes[k];
        return pref_reduce(r, &sums, all_tokens > 0 ? all_tokens : 1, (double)r->G / 2 * (double)(nb > 0 ? nb : 1), out);
    }
    double sum = 0;
    int64_t counted = 0, dsum[2] = {0, 0};
    for (int64_t b = 0; b < nb; b++)
        for (int k = 0; k < K; k++) {
            int32_t *vdocs = r->docs && dec_data_has_docs(vd) ? r->docs : NULL;
            if (dec_data_batch(vd, DEC_SPLIT_VAL, o->seed, b, r->G, dec_data_first(r->rank, B, K, k), B, o->T,
                               r->inputs, r->targets, vdocs, &err) != ZERO_OK)
                return fail(r, "validation data", err.msg);
            if (o->cfg.deterministic) { /* one sequence at a time, summed exactly (det_add) */
                for (int a = 0; a < B; a++) {
                    const int32_t *in = r->inputs + (size_t)a * o->T, *tg = r->targets + (size_t)a * o->T;
                    float l;
                    dec_set_docs(r->model, vdocs ? vdocs + (size_t)a * o->T : NULL);
                    if (dec_engine_eval(r->model, r->e, in, tg, 1, o->T, &l) != ZERO_OK)
                        return fail(r, "validation", zero_engine_last_error(r->e));
                    const int64_t c = dec_count_targets(tg, (size_t)o->T);
                    if (c) det_add(dsum, (double)l * (double)c, DET_VAL_BITS);
                    counted += c;
                }
                continue;
            }
            float l;
            dec_set_docs(r->model, vdocs);
            if (dec_engine_eval(r->model, r->e, r->inputs, r->targets, B, o->T, &l) != ZERO_OK)
                return fail(r, "validation", zero_engine_last_error(r->e));
            const int64_t c = dec_count_targets(r->targets, (size_t)B * o->T);
            sum += c ? (double)l * (double)c : 0.0; /* the micro-batch's mean times its count */
            counted += c;
        }
    zero_engine_comm_counters(r->e, &after);
    for (int k = 0; k < ZERO_COLL_COUNT; k++) r->eval.bytes[k] += after.bytes[k] - before.bytes[k];
    for (int p = 0; p < ZERO_COMM_PATH_COUNT; p++) r->eval.path_bytes[p] += after.path_bytes[p] - before.path_bytes[p];
    if (o->cfg.deterministic) {
        int64_t all[3], mine[3] = {dsum[0], dsum[1], counted};
        if (zero_comm_all_reduce(r->comm, mine, all, 3, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
            return fail(r, "validation", zero_comm_last_error(r->comm));
        *out = all[2] && !all[1] ? ldexp((double)all[0], -DET_VAL_BITS) / (double)all[2] : NAN;
        return CLI_OK;
    }
    float mine = (float)sum, total = 0;
    int64_t all = 0;
    if (zero_comm_all_reduce(r->comm, &mine, &total, 1, ZERO_DTYPE_FP32, ZERO_OP_SUM) != ZERO_OK ||
        zero_comm_all_reduce(r->comm, &counted, &all, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
        return fail(r, "validation", zero_comm_last_error(r->comm));
    *out = all ? (double)total / (double)all : NAN;
    return CLI_OK;
}

static void fmt_bytes(char *buf, size_t cap, double b) {
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) b /= 1024, i++;
    snprintf(buf, cap, i ? "%.1f %s" : "%.0f %s", b, u[i]);
}

static void json_mem(FILE *f, const int64_t m[M_COUNT]) {
    fprintf(f, "\"mem\":{\"params\":%lld,\"grads\":%lld,\"master\":%lld,\"optim\":%lld,\"buffers\":%lld,\"total\":%lld,"
               "\"activations\":%lld},\"rss_peak\":%lld",
            (long long)m[M_PARAMS], (long long)m[M_GRADS], (long long)m[M_MASTER], (long long)m[M_OPTIM],
            (long long)m[M_BUFFERS], (long long)m[M_TOTAL], (long long)m[M_ACT], (long long)m[M_RSS]);
    if (m[M_DEV_PEAK] || m[M_PIN_PEAK]) /* a device run: its memory, and the pinned host memory it copies through */
        fprintf(f, ",\"device_mem\":{\"states\":%lld,\"peak\":%lld,\"pinned_states\":%lld,\"pinned_peak\":%lld}",
                (long long)m[M_DEV_STATES], (long long)m[M_DEV_PEAK], (long long)m[M_PIN_STATES], (long long)m[M_PIN_PEAK]);
}

static void json_comm(FILE *f, const zero_comm_counters *c) {
    fprintf(f, "\"comm\":{\"all_reduce\":%llu,\"reduce_scatter\":%llu,\"all_gather\":%llu}",
            (unsigned long long)c->bytes[ZERO_COLL_ALL_REDUCE], (unsigned long long)c->bytes[ZERO_COLL_REDUCE_SCATTER],
            (unsigned long long)c->bytes[ZERO_COLL_ALL_GATHER]);
    /* the same bytes by the path they took: shared memory inside a node, MPI between nodes */
    fprintf(f, ",\"comm_paths\":{\"mpi\":%llu,\"shm\":%llu,\"cross_node\":%llu}",
            (unsigned long long)c->path_bytes[ZERO_COMM_PATH_MPI], (unsigned long long)c->path_bytes[ZERO_COMM_PATH_SHM],
            (unsigned long long)c->path_bytes[ZERO_COMM_PATH_CROSS_NODE]);
}

/* The model-state bytes stage 0 would need per rank for this model (its frozen parameters
 * frozen too), precision and optimizer. */
static uint64_t stage0_states(run_state *r) {
    const int n = zero_engine_num_units(r->e);
    uint64_t *numel = calloc(2 * (size_t)n, sizeof *numel), *frozen = numel + n;
    for (int u = 0; u < n; u++) {
        zero_unit_info ui;
        zero_engine_unit_info(r->e, u, &ui);
        numel[u] = ui.numel;
        frozen[u] = ui.frozen;
    }
    zero_plan_model pm = {n, numel, NULL, NULL, frozen};
    zero_plan_setup s;
    zero_plan_setup_from_config(&s, &r->o->cfg, r->world);
    s.stage = 0;
    s.offload_optimizer = s.offload_param = ZERO_OFFLOAD_NONE; /* stage 0 offloads nothing */
    zero_plan_mem pmem;
    zero_error err;
    uint64_t v = zero_plan_estimate(&pm, &s, &pmem, &err) == ZERO_OK ? pmem.model_states : 0;
    free(numel);
    return v;
}

static void summary(run_state *r, const int64_t m[M_COUNT], const zero_comm_counters *c, int64_t steps_run) {
    train_opts *o = r->o;
    FILE *f = r->human;
    char a[32], b[32], t1[32], t2[32];
    const int64_t states = m[M_PARAMS] + m[M_GRADS] + m[M_MASTER] + m[M_OPTIM];
    const uint64_t s0 = stage0_states(r);
    fmt_bytes(a, sizeof a, (double)states);
    fmt_bytes(b, sizeof b, (double)s0);
    fprintf(f, "model states per rank: %s at stage %d on %d rank%s (params ", a, o->cfg.stage, r->world, r->world > 1 ? "s" : "");
    fmt_bytes(a, sizeof a, (double)m[M_PARAMS]);
    fprintf(f, "%s, grads ", a);
    fmt_bytes(a, sizeof a, (double)m[M_GRADS]);
    fprintf(f, "%s, master ", a);
    fmt_bytes(a, sizeof a, (double)m[M_MASTER]);
    fprintf(f, "%s, optimizer ", a);
    fmt_bytes(a, sizeof a, (double)m[M_OPTIM]);
    fprintf(f, "%s); stage 0 would need %s: ZeRO saved %.1f%%\n", a, b,
            s0 ? 100.0 * (1.0 - (double)states / (double)s0) : 0.0);
    if (r->offload) {
        zero_engine_offload_info in;
        zero_engine_offload_info_get(r->e, &in);
        fmt_bytes(a, sizeof a, (double)(in.optim_file_bytes + in.param_file_bytes));
        fmt_bytes(b, sizeof b, (double)in.pool_bytes);
        fprintf(f, "NVMe offload (rank 0): %s in swap files, %s of I/O buffers in RAM, %s%s\n", a, b, in.backend,
                in.direct ? ", O_DIRECT" : "");
    }
    if (steps_run > 0 && r->world > 1) {
        zero_plan_traffic tr;
        zero_plan_traffic_frozen(o->cfg.stage, r->world, r->padded, o->cfg.precision, r->fpadded, o->cfg.frozen_dtype, &tr);
        int psi = 2; /* the rule per step, as the ownership plan schedules it (zero/plan.h) */
        const double rule = zero_plan_traffic_per_step(o->cfg.stage, r->world, (int)o->cfg.grad_accum, &tr, &psi);
        double got = (double)(c->bytes[0] + c->bytes[1] + c->bytes[2]) / (double)steps_run;
        fmt_bytes(t1, sizeof t1, got);
        fmt_bytes(t2, sizeof t2, rule);
        fprintf(f, "traffic per step per rank (sent + received): %s; ZeRO's %dΨ rule gives %s (ratio %.3f)\n", t1, psi,
                t2, rule > 0 ? got / rule : 0.0);
    }
}

/* --trace: every rank's spans, gathered to rank 0, written as one Chrome/Perfetto trace (pid = rank). */
static int write_trace(run_state *r) {
    size_t len = 0;
    char *mine = zero_trace_events_json(r->rank, &len);
    int64_t n = mine ? (int64_t)len : 0, maxn = 0;
    if (zero_comm_all_reduce(r->comm, &n, &maxn, 1, ZERO_DTYPE_INT64, ZERO_OP_MAX) != ZERO_OK) {
        free(mine);
        return fail(r, "trace", zero_comm_last_error(r->comm));
    }
    char *pad = calloc((size_t)maxn + 1, 1), *all = r->rank == 0 ? calloc((size_t)(maxn + 1) * (size_t)r->world, 1) : NULL;
    int rc = CLI_OK;
    if (!pad || (r->rank == 0 && !all)) rc = fail(r, "trace", "out of memory");
    if (pad && mine) memcpy(pad, mine, len);
    /* equal blocks: every rank sends maxn+1 bytes (NUL-padded) */
    char *recv = all ? all : calloc((size_t)(maxn + 1) * (size_t)r->world, 1);
    if (rc == CLI_OK && zero_comm_all_gather(r->comm, pad, recv, (size_t)maxn + 1, ZERO_DTYPE_UINT8) != ZERO_OK)
        rc = fail(r, "trace", zero_comm_last_error(r->comm));
    if (rc == CLI_OK && r->rank == 0) {
        FILE *f = fopen(r->o->trace, "w");
        if (!f) {
            rc = cli_error(CLI_RUNTIME, "--trace '%s': cannot open for writing", r->o->trace);
        } else {
            fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
            for (int k = 0, first = 1; k < r->world; k++) {
                const char *ev = recv + (size_t)k * (size_t)(maxn + 1);
                if (!*ev) continue;
                fprintf(f, "%s%s", first ? "" : ",", ev);
                first = 0;
            }
            fputs("]}\n", f);
            if (fclose(f) != 0) rc = cli_error(CLI_RUNTIME, "--trace '%s': write failed", r->o->trace);
        }
    }
    if (recv != all) free(recv);
    free(all);
    free(pad);
    free(mine);
    return rc;
}

/* Deterministic mode: the step's K micro-batches of B sequences as B*K/A micro-batches of A
 * sequences each (the engine's atoms, A = --det-atom; its gradient_accumulation_steps is B*K/A),
 * and the step's loss summed exactly over every atom of every rank: *loss is the same for any
 * world size. */
static int det_micro_batches(run_state *r, int64_t total, double *loss) {
    const train_opts *o = r->o;
    const int B = (int)o->cfg.micro_batch, K = (int)o->cfg.grad_accum, T = o->T, A = o->cfg.deterministic_atom;
    int64_t acc[2] = {0, 0}, all[2];
    for (int k = 0; k < K; k++)
        for (int a = 0; a < B; a += A) {
            const size_t at = ((size_t)k * B + (size_t)a) * T;
            float l;
            const double tc = zero_now();
            set_docs(r, at);
            if (dec_engine_micro_batch(r->model, r->e, r->inputs + at, r->targets + at, A, T, (double)total, &l) != ZERO_OK)
                return fail(r, "forward/backward", zero_engine_last_error(r->e));
            zero_trace_span(ZERO_TRACE_COMPUTE, "forward+backward", tc, zero_now());
            if (zero_engine_micro_batch_done(r->e) != ZERO_OK) return fail(r, "micro-batch", zero_engine_last_error(r->e));
            det_add(acc, l, DET_LOSS_BITS);
        }
    if (zero_comm_all_reduce(r->comm, acc, all, 2, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
        return fail(r, "the step's loss", zero_comm_last_error(r->comm));
    /* l_a is the atom's share of the global sum / count times the number of atoms, G / A: the
     * loss is their mean */
    *loss = all[1] ? NAN : ldexp((double)all[0], -DET_LOSS_BITS) / (double)(r->G / o->cfg.deterministic_atom);
    return CLI_OK;
}

/* The first step's loss is not finite: the forward pass of this rank's first micro-batch again,
 * with the model's probe, says where it stops being finite (the weights the run started from:
 * the step, its gradients not finite, was skipped). Weights whose forward overflows are refused
 * by the lowest rank that finds it (the others fail quietly); none found: the run goes on and
 * the rules of untrained() judge it. */
static int refuse_overflowing_weights(run_state *r) {
    const train_opts *o = r->o;
    const int B = o->cfg.deterministic ? o->cfg.deterministic_atom : (int)o->cfg.micro_batch;
    zero_error err = {{0}};
    set_docs(r, 0);
    const zero_status s = dec_engine_locate_overflow(r->model, r->e, r->inputs, B, o->T, &err);
    if (s != ZERO_OK && s != ZERO_ERR_FORMAT) return fail(r, "locating the overflow", err.msg);
    const int64_t mine = s == ZERO_ERR_FORMAT ? r->world - r->rank : 0; /* the lowest rank wins the MAX */
    int64_t top = 0;
    if (zero_comm_all_reduce(r->comm, &mine, &top, 1, ZERO_DTYPE_INT64, ZERO_OP_MAX) != ZERO_OK)
        return fail(r, "locating the overflow", zero_comm_last_error(r->comm));
    if (!top) return CLI_OK;
    if (r->world - top != r->rank) return CLI_RUNTIME;
    ux_progress_clear(r->o);
    char from[1100] = "";
    if (o->resume) snprintf(from, sizeof from, " (--resume %s)", o->resume);
    else if (o->init_from) snprintf(from, sizeof from, " (--init-from %s)", o->init_from);
    return cli_error(CLI_RUNTIME,
                     "the forward pass of the first batch is not finite: %s: expected weights%s whose "
                     "forward pass is finite%s",
                     err.msg, from, o->cfg.precision == ZERO_DTYPE_FP16 ? " (fp16 holds magnitudes up to 65504)" : "");
}

/* A run that trains nothing fails (exit 1), saying why in `why`; returns 1 then. Judged after
 * every step from the same numbers on every rank: `skipped` steps in a row end at this one,
 * `at_min` of them at the dynamic loss scale's minimum, `applied` steps of this run updated the
 * model, and `last` says this is the run's last step.
 *  - A dynamic fp16 scale that overflows at its minimum `hysteresis` times in a row can come down
 *    no further: DeepSpeed stops such a run ("Current loss scale already at minimum"), at once.
 *    A healthy run does not get there: the scale comes down from 2^16 only until the gradients
 *    fit (--model tiny and small skip no step; a start at 2^32 skips 16 then trains), far above
 *    the default floor of 1, where the unscaled gradients themselves overflow fp16. A floor set
 *    higher is met sooner, as in DeepSpeed, which stops at the first such overflow once the
 *    hysteresis is spent (counting them in a row is never stricter).
 *  - At the last step: no step of this run updated the model (any precision; a dynamic scale
 *    still coming down counts too: nothing was trained), or the loss is not finite. */
static int untrained(const run_state *r, const zero_step_stats *st, int64_t skipped, int64_t at_min, int64_t applied,
                     int64_t step, int last, double loss, char *why, size_t cap) {
    const zero_config *c = &r->o->cfg;
    const zero_loss_scaler *sc = zero_engine_scaler(r->e);
    const double now = zero_engine_loss_scale(r->e);
    if (sc->dynamic && at_min >= sc->hysteresis) {
        char tail[48] = "";
        if (skipped > at_min) snprintf(tail, sizeof tail, ", the last %lld", (long long)at_min);
        snprintf(why, cap,
                 "step %lld: %lld steps in a row overflowed%s at the minimum loss scale %g (fp16.min_loss_scale), "
                 "which can come down no further: nothing is being trained; lower the learning rate (%g)",
                 (long long)step + 1, (long long)skipped, tail, sc->min_scale, st->lr);
        return 1;
    }
    if (!last) return 0;
    if (!applied) { /* then every step of the run was skipped: `skipped` counts them */
        const long long n = (long long)skipped;
        if (c->precision != ZERO_DTYPE_FP16)
            snprintf(why, cap,
                     "every one of the %lld steps of this run was skipped (their gradients were not finite): "
                     "nothing was trained; lower the learning rate (%g)",
                     n, st->lr);
        else if (!sc->dynamic)
            snprintf(why, cap,
                     "every one of the %lld steps of this run overflowed at the static fp16 loss scale %g: "
                     "nothing was trained; lower fp16.loss_scale, or set it to 0 for a dynamic scale",
                     n, sc->scale);
        else
            snprintf(why, cap,
                     "every one of the %lld steps of this run overflowed (the dynamic loss scale came down "
                     "to %g): nothing was trained; run more steps, start the scale lower (fp16.initial_scale_power) "
                     "or lower the learning rate (%g)",
                     n, now, st->lr);
        return 1;
    }
    if (!isfinite(loss)) {
        snprintf(why, cap, "the loss of the last step (%lld) is %s: the model diverged; lower the learning rate (%g)",
                 (long long)step + 1, isnan(loss) ? "NaN" : "infinite", st->lr);
        return 1;
    }
    return 0;
}

static int train_loop(run_state *r) {
    train_opts *o = r->o;
    const int B = (int)o->cfg.micro_batch, K = (int)o->cfg.grad_accum, T = o->T;
    zero_error err = {{0}};
    const double t_start = zero_now();
    double last_loss = NAN, val = NAN;
    int64_t m[M_COUNT];
    zero_comm_counters c;
    const int64_t first_step = zero_engine_step_count(r->e);
    if (r->rank == 0) ux_progress_begin(o, r->human, first_step);
    if (r->offload) offload_delta(r, NULL); /* the initialization's I/O is not a step's */
    if (max_mem(r, m)) return fail(r, "memory report", zero_comm_last_error(r->comm));
    zero_engine_comm_counters(r->e, &c);
    int64_t skipped = 0, at_min = 0, applied = 0; /* untrained()'s counts */
    for (int64_t step = zero_engine_step_count(r->e); step < o->steps; step++) {
        const double t0 = zero_now();
        double loss = 0;
        /* The step's tokens first: the loss is the mean over the counted targets of the whole
         * global batch (every rank's every micro-batch), whatever the number of ranks. */
        int64_t counted = 0, total = 0;
        for (int k = 0; k < K; k++) {
            int32_t *in = r->inputs + (size_t)k * B * T, *tg = r->targets + (size_t)k * B * T;
            if (dec_data_batch(o->dataset, DEC_SPLIT_TRAIN, o->seed, step, r->G, dec_data_first(r->rank, B, K, k), B, T,
                               in, tg, r->docs ? r->docs + (size_t)k * B * T : NULL, &err) != ZERO_OK)
                return fail(r, "training data", err.msg);
            counted += dec_count_targets(tg, (size_t)B * T);
        }
        if (zero_comm_all_reduce(r->comm, &counted, &total, 1, ZERO_DTYPE_INT64, ZERO_OP_SUM) != ZERO_OK)
            return fail(r, "counting the targets", zero_comm_last_error(r->comm));
        zero_step_stats st;
        int redone = 0; /* deterministic: the step computed again after its gradients outgrew their grids */
        for (;;) {
            loss = 0;
            if (o->cfg.deterministic) {
                int rc = det_micro_batches(r, total, &loss);
                if (rc != CLI_OK) return rc;
            }
            if (o->obj != DEC_OBJ_LM) { /* a preference objective: pairs, weighted passes */
                double tokens = 0;
                if (chosen_tokens(r, r->targets, B * K, &tokens) != CLI_OK) return CLI_RUNTIME;
                memset(&r->pref, 0, sizeof r->pref);
                for (int k = 0; k < K; k++) {
                    if (o->lora_on) dec_lora_set_key(r->model, train_lora_key(o, step, k, r->rank));
                    const double tc = zero_now();
                    if (pref_micro_batch(r, DEC_SPLIT_TRAIN, step, k, r->inputs + (size_t)k * B * T,
                                         r->targets + (size_t)k * B * T, tokens, 1, &r->pref) != CLI_OK)
                        return CLI_RUNTIME;
                    zero_trace_span(ZERO_TRACE_COMPUTE, "forward+backward", tc, zero_now());
                }
                r->pref_pairs = (double)r->G / 2;
                if (pref_reduce(r, &r->pref, tokens, r->pref_pairs, &loss) != CLI_OK) return CLI_RUNTIME;
            }
            for (int k = 0; k < K && !o->cfg.deterministic && o->obj == DEC_OBJ_LM; k++) {
                const int32_t *in = r->inputs + (size_t)k * B * T, *tg = r->targets + (size_t)k * B * T;
                float l;
                const double tc = zero_now();
                if (o->lora_on) dec_lora_set_key(r->model, train_lora_key(o, step, k, r->rank));
                set_docs(r, (size_t)k * B * T);
                if (dec_engine_micro_batch(r->model, r->e, in, tg, B, T, (double)total, &l) != ZERO_OK)
                    return fail(r, "forward/backward", zero_engine_last_error(r->e));
                zero_trace_span(ZERO_TRACE_COMPUTE, "forward+backward", tc, zero_now());
                if (zero_engine_micro_batch_done(r->e) != ZERO_OK)
                    return fail(r, "micro-batch", zero_engine_last_error(r->e));
                loss += l / K;
            }
            const double ts = zero_now();
            if (zero_engine_step(r->e, &st) != ZERO_OK) return fail(r, "step", zero_engine_last_error(r->e));
            zero_trace_span(ZERO_TRACE_COMPUTE, st.redo ? "optimizer step (redo)" : "optimizer step", ts, zero_now());
            if (!st.redo) break;
            if (redone++) /* the same atoms gave other gradients: the grids cannot settle */
                return fail(r, "step", "deterministic: the step's gradients outgrew their grids twice in a row");
        }
        const double dt = zero_now() - t0;
        int64_t io[3] = {0, 0, 0};
        if (r->offload && offload_delta(r, io)) return fail(r, "offload report", zero_comm_last_error(r->comm));
        last_loss = o->cfg.deterministic ? loss : mean_over_ranks(r, loss);
        if (step == first_step && !isfinite(last_loss)) {
            int rc = refuse_overflowing_weights(r);
            if (rc != CLI_OK) return rc;
        }
        const zero_loss_scaler *sc = zero_engine_scaler(r->e);
        skipped = st.skipped ? skipped + 1 : 0;
        at_min = st.skipped && sc->dynamic && st.loss_scale <= sc->min_scale ? at_min + 1 : 0;
        applied += !st.skipped;
        char why[512];
        const int stop =
            untrained(r, &st, skipped, at_min, applied, step, step + 1 == o->steps, last_loss, why, sizeof why);
        int do_val = !stop && ((o->val_every > 0 && (step + 1) % o->val_every == 0) || step + 1 == o->steps);
        if (do_val && dec_data_val_batches(val_source(o), r->G, T) > 0) {
            const double tv = zero_now();
            int rc = validate(r, &val);
            if (rc != CLI_OK) return rc;
            zero_trace_span(ZERO_TRACE_COMPUTE, "validation", tv, zero_now());
        } else {
            do_val = 0;
        }
        /* a run stopped by untrained() does not save: the checkpoints it saved before stay as they are */
        if (o->save && !stop && ((o->save_every && (step + 1) % o->save_every == 0) || step + 1 == o->steps)) {
            const double tw = zero_now();
            if (zero_engine_save(r->e, o->save, r->user_json) != ZERO_OK) return fail(r, "checkpoint", zero_engine_last_error(r->e));
            zero_trace_span(ZERO_TRACE_IO, "save checkpoint", tw, zero_now());
            if (r->rank == 0) {
                ux_progress_clear(o);
                fprintf(r->human, "saved step %lld to %s\n", (long long)(step + 1), o->save);
                zero_error perr;
                /* the save is done whatever retention finds: what it cannot remove is said, not fatal */
                if (o->save_total_limit && zero_ckpt_prune(o->save, o->save_total_limit, NULL, &perr) != ZERO_OK)
                    fprintf(stderr, "zero: warning: --save-total-limit: %s\n", perr.msg);
            }
        }
        if (r->offload) offload_delta(r, NULL); /* validation and saves are not the step's I/O */
        if (max_mem(r, m)) return fail(r, "memory report", zero_comm_last_error(r->comm));
        zero_engine_comm_counters(r->e, &c);
        for (int k = 0; k < ZERO_COLL_COUNT; k++) c.bytes[k] -= r->eval.bytes[k];
        for (int p = 0; p < ZERO_COMM_PATH_COUNT; p++) c.path_bytes[p] -= r->eval.path_bytes[p];
        if (r->rank != 0) {
            if (stop) return CLI_RUNTIME; /* rank 0 says why */
            continue;
        }
        const double tps = (double)r->G * T / dt;
        if (r->json) {
            fprintf(r->json, "{\"step\":%lld,\"loss\":", (long long)(step + 1));
            cli_json_double(r->json, last_loss);
            if (do_val) {
                fputs(",\"val_loss\":", r->json);
                cli_json_double(r->json, val);
            }
            if (o->obj != DEC_OBJ_LM) { /* what TRL logs: rewards/chosen, rejected, margins, accuracies */
                const double P = r->pref_pairs;
                fprintf(r->json, ",\"rewards_chosen\":%.9g,\"rewards_rejected\":%.9g,\"reward_margin\":%.9g,"
                        "\"reward_accuracy\":%.9g", r->pref.chosen / P, r->pref.rejected / P, r->pref.margin / P,
                        r->pref.correct / P);
            }
            fprintf(r->json, ",\"lr\":%.9g,\"grad_norm\":", st.lr);
            cli_json_double(r->json, st.grad_norm);
            fprintf(r->json, ",\"loss_scale\":%.9g,\"skipped\":%s,\"step_ms\":%.3f,\"tokens_per_s\":%.1f,\"comm_wait_ms\":%.3f,",
                    st.loss_scale, st.skipped ? "true" : "false", dt * 1e3, tps, st.comm_wait_ms);
            if (o->cfg.deterministic) fprintf(r->json, "\"redone\":%s,", redone ? "true" : "false");
            json_mem(r->json, m);
            fputc(',', r->json);
            json_comm(r->json, &c);
            if (r->offload)
                fprintf(r->json, ",\"offload\":{\"read\":%lld,\"written\":%lld,\"io_wait_ms\":%.3f}", (long long)io[0],
                        (long long)io[1], (double)io[2] * 1e-3);
            fputs("}\n", r->json);
            fflush(r->json);
        }
        if (r->tb) {
            /* HF Trainer's names, so that dashboards made for its runs show zero's too; the step
             * is the optimizer step, as in --log-json */
            const int64_t s1 = step + 1;
            int bad = cli_tb_scalar(r->tb, "train/loss", s1, last_loss) ||
                      cli_tb_scalar(r->tb, "train/learning_rate", s1, st.lr) ||
                      cli_tb_scalar(r->tb, "train/grad_norm", s1, st.grad_norm) ||
                      cli_tb_scalar(r->tb, "train/tokens_per_s", s1, tps) ||
                      cli_tb_scalar(r->tb, "memory/peak_bytes", s1, (double)(m[M_TOTAL] + m[M_ACT])) ||
                      cli_tb_scalar(r->tb, "memory/rss_peak_bytes", s1, (double)m[M_RSS]) ||
                      (do_val && cli_tb_scalar(r->tb, "eval/loss", s1, val));
            if (bad || cli_tb_flush(r->tb)) {
                ux_progress_clear(o);
                return cli_error(CLI_RUNTIME, "tensorboard '%s': write failed: %s", r->tb_path,
                                 strerror(errno ? errno : ENOMEM));
            }
        }
        const ux_step us = {.step = step + 1, .loss = last_loss, .val = val, .lr = st.lr, .grad_norm = st.grad_norm,
                            .loss_scale = st.loss_scale, .step_s = dt, .tokens_per_s = tps,
                            .io_wait_ms = (double)io[2] * 1e-3, .skipped = st.skipped, .has_val = do_val,
                            .has_io = r->offload, .mem_bytes = m[M_TOTAL] + m[M_ACT]};
        ux_progress_step(o, &us);
        if (stop) {
            ux_progress_clear(o);
            return cli_error(CLI_RUNTIME, "%s", why);
        }
    }
    if (o->steps == 0 && o->save) { /* --steps 0: the initial state, e.g. a model directory as a checkpoint */
        if (zero_engine_save(r->e, o->save, r->user_json) != ZERO_OK) return fail(r, "checkpoint", zero_engine_last_error(r->e));
        if (r->rank == 0) fprintf(r->human, "saved step 0 to %s\n", o->save);
    }
    if (o->trace) {
        int rc = write_trace(r);
        if (rc != CLI_OK) return rc;
    }
    if (r->rank == 0) {
        const int64_t steps_run = o->steps > first_step ? o->steps - first_step : 0;
        const double elapsed = zero_now() - t_start;
        summary(r, m, &c, steps_run);
        if (r->json) {
            fprintf(r->json, "{\"done\":true,\"steps\":%lld,\"ranks\":%d,\"stage\":%d,\"tokens\":%lld,\"elapsed_s\":%.3f,\"loss\":",
                    (long long)o->steps, r->world, o->cfg.stage, (long long)(r->G * T * steps_run), elapsed);
            cli_json_double(r->json, last_loss);
            fputs(",\"val_loss\":", r->json);
            cli_json_double(r->json, val);
            fprintf(r->json, ",\"params\":%llu,\"stage0_model_states\":%llu,\"init_s\":%.3f,\"init_rss_peak\":%lld,",
                    (unsigned long long)dec_num_params(&o->model_cfg), (unsigned long long)stage0_states(r), r->init_s,
                    (long long)r->init_rss);
            json_mem(r->json, m);
            fputc(',', r->json);
            json_comm(r->json, &c);
            fprintf(r->json, ",\"backend\":\"%s\",\"progress_thread\":%s}\n", zero_comm_backend(r->comm),
                    zero_comm_progress_thread(r->comm) ? "true" : "false");
            fflush(r->json);
        }
        ux_progress_end(o);
    }
    return CLI_OK;
}

int train_run(train_opts *o, int mpi) {
    run_state r = {0};
    r.o = o;
    zero_error err = {{0}};
    zero_status s = mpi ? zero_comm_init_mpi_with(&r.comm, NULL, NULL, &err) : zero_comm_init_self_with(&r.comm, &err);
    if (s != ZERO_OK) { /* every rank fails alike (rank 0's settings rule): the launcher's rank 0 says it */
        const char *lr = getenv("OMPI_COMM_WORLD_RANK") ? getenv("OMPI_COMM_WORLD_RANK") : getenv("PMI_RANK");
        if (mpi && lr && strcmp(lr, "0")) cli_quiet_errors = 1;
        return cli_error(CLI_RUNTIME, "cannot start the communicator: %s", err.msg);
    }
    r.rank = zero_comm_rank(r.comm);
    r.world = zero_comm_size(r.comm);
    cli_ignore_sigpipe(r.world);
    int rc = CLI_OK;
    if (o->ranks > 0 && o->ranks != r.world) {
        rc = cli_error(CLI_USAGE, "--ranks %d: the MPI world has %d ranks", o->ranks, r.world);
        goto out;
    }
    /* Every rank repeats the deterministic checks for the real world size; rank 0 reports, and
     * rank 0 alone prints warnings (ZERO_LOG=info or debug: every rank, to diagnose one). */
    cli_quiet_errors = r.rank != 0;
    cli_quiet_warnings = r.rank != 0 && zero_log_get_level() < ZERO_LOG_INFO;
    rc = mpi && r.world > 1 ? train_data_digest_share(o, r.comm) : CLI_OK;
    if (rc == CLI_OK) rc = train_prepare(o, r.world);
    cli_quiet_errors = 0;
    if (rc != CLI_OK) goto out;
    /* --save: the directory belongs to this run (rank 0 holds its lock until the run ends, however
     * it ends), and holds nothing a save would follow or remove: both said before anything trains */
    if (o->save) {
        const int bad = r.rank == 0 && (zero_ckpt_lock_acquire(&r.lock, o->save, &err) != ZERO_OK ||
                                        zero_ckpt_save_dir_check(o->save, &err) != ZERO_OK);
        char msg[sizeof err.msg + 16];
        snprintf(msg, sizeof msg, "--save: %s", err.msg);
        if ((rc = cli_ranks_agree(r.comm, bad, "--save", msg)) != CLI_OK) goto out;
    }

    const double t_init = zero_now();
    /* deterministic: the engine's micro-batch is an atom of A sequences, B*K/A of them per step */
    zero_config ecfg = o->cfg;
    if (ecfg.deterministic) {
        ecfg.grad_accum = o->cfg.micro_batch * o->cfg.grad_accum / o->cfg.deterministic_atom;
        ecfg.micro_batch = o->cfg.deterministic_atom;
    }
    /* every rank's engine on the device the flags or the environment named (train_device_resolve) */
    zero_engine_options eo;
    zero_engine_options_default(&eo);
    eo.device.backend = o->dev.backend;
    eo.device.capacity = o->dev.capacity;
    if ((s = zero_engine_create_with(&r.e, r.comm, &ecfg, &eo, &err)) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "cannot create the engine: %s", err.msg);
        goto out;
    }
    /* LoRA: the base registered frozen, the adapters beside it (cli/train_lora.c). A model
     * directory sets every base parameter (dec_hf_load refuses one with a tensor missing), so the
     * random initialization is skipped for it: no unit-sized buffer, no values made to be
     * overwritten (and under --quantize-base, no records coded twice) */
    if ((o->lora_on ? dec_lora_register(&o->model_cfg, &o->lora, r.e, &err)
                    : dec_engine_register(&o->model_cfg, r.e, &err)) != ZERO_OK ||
        zero_engine_finalize(r.e) != ZERO_OK ||
        (!o->base_saved && !(o->init_from && dec_hf_is_dir(o->init_from)) &&
         dec_engine_init(&o->model_cfg, r.e, o->seed, &err) != ZERO_OK)) {
        rc = cli_error(CLI_RUNTIME, "model setup: %s", err.msg[0] ? err.msg : zero_engine_last_error(r.e));
        goto out;
    }
    if (o->init_from && (rc = cli_init_from(r.e, o->init_from)) != CLI_OK) goto out;
    if (o->lora_on && (rc = train_lora_init(o, r.e)) != CLI_OK) goto out;
    r.init_s = zero_now() - t_init;
    const int64_t rss = (int64_t)zero_rss_peak_bytes();
    if (zero_comm_all_reduce(r.comm, &rss, &r.init_rss, 1, ZERO_DTYPE_INT64, ZERO_OP_MAX) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "rank %d: %s", r.rank, zero_comm_last_error(r.comm));
        goto out;
    }
    r.offload = o->cfg.offload_optimizer.device == ZERO_OFFLOAD_NVME || o->cfg.offload_param.device == ZERO_OFFLOAD_NVME;
    r.user_json = train_user_json(o, r.world);
    if (!r.user_json) {
        rc = cli_error(CLI_RUNTIME, "out of memory");
        goto out;
    }
    if (o->resume) {
        if (zero_engine_load(r.e, o->resume, NULL) != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "--resume: %s", zero_engine_last_error(r.e));
            goto out;
        }
        if (r.rank == 0)
            fprintf(stderr, "resumed from %s at step %lld of %lld\n", o->resume, (long long)zero_engine_step_count(r.e),
                    (long long)o->steps);
    }
    if (o->trace) zero_trace_enable(1);
    const int B = (int)o->cfg.micro_batch;
    /* deterministic: the BLAS gives the same bits for the same shapes and thread count only, so
     * every GEMM runs on one thread, whatever the rank's share of the cores (the model's own
     * kernels give the same bits on any thread count: docs/MODEL.md) */
    if (o->cfg.deterministic) dec_set_blas_threads(1);
    if (dec_create(&r.model, &o->model_cfg, o->cfg.deterministic ? o->cfg.deterministic_atom : o->obj == DEC_OBJ_ORPO ? B / 2 * 3 : B, o->T, o->checkpointing, &err) != ZERO_OK ||
        (o->lora_on && dec_set_lora(r.model, &o->lora, &err) != ZERO_OK)) {
        rc = cli_error(CLI_RUNTIME, "model: %s", err.msg);
        goto out;
    }
    for (int u = 0; u < zero_engine_num_units(r.e); u++) {
        zero_unit_info ui;
        zero_engine_unit_info(r.e, u, &ui);
        r.padded += ui.padded;
        r.fpadded += ui.frozen_padded;
    }
    r.G = (int64_t)r.world * B * o->cfg.grad_accum;
    /* a step's K micro-batches at once (the loss denominator counts them all first) */
    r.inputs = malloc((size_t)B * o->T * (size_t)o->cfg.grad_accum * sizeof *r.inputs);
    r.targets = malloc((size_t)B * o->T * (size_t)o->cfg.grad_accum * sizeof *r.targets);
    if (o->docs) r.docs = malloc((size_t)B * o->T * (size_t)o->cfg.grad_accum * sizeof *r.docs);
    if (o->obj == DEC_OBJ_ORPO) {
        r.xin = malloc((size_t)B * 3 / 2 * o->T * sizeof *r.xin);
        r.xtg = malloc((size_t)B * 3 / 2 * o->T * sizeof *r.xtg);
        if (!r.xin || !r.xtg) {
            rc = cli_error(CLI_RUNTIME, "out of memory");
            goto out;
        }
    }
    if (!r.inputs || !r.targets || (o->docs && !r.docs)) {
        rc = cli_error(CLI_RUNTIME, "out of memory");
        goto out;
    }
    if (r.rank == 0) {
        const int json_stdout = o->log_json && !strcmp(o->log_json, "-");
        r.human = json_stdout ? stderr : stdout;
        if (o->log_json) r.json = json_stdout ? stdout : fopen(o->log_json, "w");
        if (o->log_json && !r.json) {
            rc = cli_error(CLI_RUNTIME, "--log-json '%s': cannot open for writing", o->log_json);
            goto out;
        }
        if (o->tensorboard || o->cfg.tensorboard.enabled) {
            char dir[2048], err[4200];
            const zero_tensorboard_config *t = &o->cfg.tensorboard;
            const char *job = t->job_name[0] ? t->job_name : "DeepSpeedJobName"; /* DeepSpeed's default */
            if (o->tensorboard) snprintf(dir, sizeof dir, "%s", o->tensorboard);
            else if (t->output_path[0]) snprintf(dir, sizeof dir, "%s/%s", t->output_path, job);
            else snprintf(dir, sizeof dir, "%s", job);
            r.tb = cli_tb_open(dir, r.tb_path, sizeof r.tb_path, err, sizeof err);
            if (!r.tb) {
                rc = cli_error(CLI_RUNTIME, "%s: %s", o->tensorboard ? "--tensorboard" : "tensorboard", err);
                goto out;
            }
        }
        char pb[32], det[48] = "";
        fmt_bytes(pb, sizeof pb, (double)dec_num_params(&o->model_cfg));
        if (o->cfg.deterministic && o->cfg.deterministic_atom > 1)
            snprintf(det, sizeof det, " deterministic (atoms of %d sequences)", o->cfg.deterministic_atom);
        else if (o->cfg.deterministic) snprintf(det, sizeof det, " deterministic");
        fprintf(r.human, "zero train: %s (%llu params), stage %d, %d rank%s, %s%s, micro-batch %lld x %lld, seq %d, %s\n",
                o->src.name, (unsigned long long)dec_num_params(&o->model_cfg), o->cfg.stage, r.world, r.world > 1 ? "s" : "",
                zero_dtype_name(o->cfg.precision), det, (long long)o->cfg.micro_batch, (long long)o->cfg.grad_accum, o->T,
                dec_data_describe(o->dataset));
        if (o->src.notes) fprintf(r.human, "note: %s\n", o->src.notes);
        if (o->valset) fprintf(r.human, "validation: %s, %s\n", o->val_data, dec_data_describe(o->valset));
        ux_print_start(o, r.human, r.world);
        if (o->tok) fprintf(r.human, "tokenizer: %s (%s, %d tokens)\n", o->tokdir, zero_tokenizer_kind(o->tok),
                            zero_tokenizer_vocab_size(o->tok));
        else if (o->data && dec_data_kind_of(o->dataset) == DEC_DATA_BYTES && (ends_with(o->data, ".jsonl") || ends_with(o->data, ".json")))
            fprintf(r.human, "note: %s is read as bytes: the model has no tokenizer.json\n", o->data);
        if (o->obj != DEC_OBJ_LM) { /* preference pairs: seen once per epoch */
            const uint64_t pairs = dec_data_num_rows(o->dataset, DEC_SPLIT_TRAIN) / 2;
            fprintf(r.human, "objective: %s (%s %g%s%s), %llu train pairs, %.2f steps of %lld pairs%s\n",
                    dec_objective_name(o->obj), o->obj == DEC_OBJ_DPO ? "beta" : "lambda", o->beta,
                    o->label_smoothing > 0 ? ", label smoothing " : "", o->label_smoothing > 0 ? "on" : "",
                    (unsigned long long)pairs, (double)pairs / ((double)r.G / 2), (long long)(r.G / 2),
                    o->obj == DEC_OBJ_DPO ? "; the reference: the initial weights, computed once before the first step"
                                          : "");
        } else if (dec_data_row(o->dataset)) { /* packed rows: seen once per epoch, in a new order each */
            const uint64_t rows = dec_data_num_rows(o->dataset, DEC_SPLIT_TRAIN);
            fprintf(r.human, "epoch: %llu train rows, %.2f steps of %lld rows%s\n", (unsigned long long)rows,
                    (double)rows / (double)r.G, (long long)r.G,
                    o->docs ? "; each example attends to itself only (--doc-mask on)"
                            : "; examples attend across the row (--doc-mask off)");
        } else if (o->docs) {
            fprintf(r.human, "documents: each attends to itself only (--doc-mask on)\n");
        }
        const char *first;
        const uint64_t skipped = dec_data_skipped(o->dataset, &first);
        if (skipped)
            fprintf(stderr, "zero: warning: %s: skipped %llu bad example%s (first: %s)\n", o->data,
                    (unsigned long long)skipped, skipped == 1 ? "" : "s", first);
        const uint64_t vskipped = o->valset ? dec_data_skipped(o->valset, &first) : 0;
        if (vskipped)
            fprintf(stderr, "zero: warning: %s: skipped %llu bad example%s (first: %s)\n", o->val_data,
                    (unsigned long long)vskipped, vskipped == 1 ? "" : "s", first);
        if (o->lora_on) {
            char tg[256];
            const uint64_t na = dec_lora_num_params(&o->model_cfg, &o->lora);
            const int qf = zero_config_base_format(&o->cfg);
            const char *fd = zero_dtype_name(o->cfg.frozen_dtype == ZERO_DTYPE_COUNT ? o->cfg.precision : o->cfg.frozen_dtype);
            char how[96];
            if (qf == ZERO_QFMT_NONE) snprintf(how, sizeof how, "%s", fd);
            else
                snprintf(how, sizeof how, "linear weights %s, the rest %s",
                         qf == ZERO_QFMT_NF4_DQ ? "NF4 with double-quantized scales" : qf == ZERO_QFMT_NF4 ? "NF4" : "int8", fd);
            fprintf(r.human, "LoRA r=%d alpha=%g%s on %s: %llu trainable parameters (%.3f%%), the base frozen (%s)%s\n",
                    o->lora.r, o->lora.alpha, o->lora.rslora ? " (rsLoRA)" : "",
                    dec_lora_targets_string(&o->model_cfg, o->lora.targets, tg, sizeof tg), (unsigned long long)na,
                    100.0 * (double)na / (double)(na + dec_num_params(&o->model_cfg)), how,
                    o->lora_from ? ", from the adapter in --lora-from" : "");
        }
        if (o->init_from) {
            char rb[32];
            fmt_bytes(rb, sizeof rb, (double)r.init_rss);
            fprintf(r.human, "initialized from %s in %.2f s (peak RSS %s per rank so far)\n", o->init_from, r.init_s, rb);
        }
    }
    if (o->obj == DEC_OBJ_DPO && (rc = pref_reference(&r)) != CLI_OK) goto out;
    rc = train_loop(&r);
out:
    if (r.json && r.json != stdout) { /* the log's records reached the disk, or the run fails saying so */
        const int bad = ferror(r.json) | (fclose(r.json) != 0);
        if (bad && rc == CLI_OK)
            rc = cli_error(CLI_RUNTIME, "--log-json '%s': write failed: %s", o->log_json, strerror(errno ? errno : EIO));
    }
    if (r.tb && cli_tb_close(r.tb) && rc == CLI_OK)
        rc = cli_error(CLI_RUNTIME, "tensorboard '%s': write failed: %s", r.tb_path, strerror(errno ? errno : EIO));
    free(r.inputs);
    free(r.targets);
    free(r.docs);
    free(r.ref);
    free(r.xin), free(r.xtg);
    free(r.user_json);
    dec_free(r.model);
    zero_engine_free(r.e);
    train_release(o);
    zero_ckpt_lock_release(r.lock);
    zero_comm_free(r.comm);
    return rc;
}
