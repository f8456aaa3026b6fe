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
#include "trainer/trainer.h"
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
    for (size_t i = 0; i < sizeof o->run_strings / sizeof o->run_strings[0]; i++) {
        free(o->run_strings[i]);
        o->run_strings[i] = NULL;
    }
    o->dpo_reference_in = NULL;
    free(o->dpo_reference);
    o->dpo_reference = NULL;
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
    if (o->quantize_embeddings) cfg->quant_embed = 1;
    if (o->quantized_weights) cfg->quant_weights = 1;
    if (o->quantized_grads) cfg->quant_grads = 1;
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
        /* deterministic: a pass is an atom of whole pairs (2 sequences unless --det-atom says more) */
        if (cfg->deterministic && cfg->deterministic_atom == 1 && o->det_atom <= 0) cfg->deterministic_atom = 2;
        if (cfg->deterministic && cfg->deterministic_atom % 2)
            return cli_error(CLI_USAGE, "--objective %s: --det-atom %d: expected an even number of sequences (an atom "
                             "holds whole pairs)", dec_objective_name(o->obj), cfg->deterministic_atom);
        /* a resumed DPO run goes on against the reference of its start, which its record keeps */
        if (o->obj == DEC_OBJ_DPO && o->resume && !o->dpo_reference_in)
            return cli_error(CLI_USAGE, "--resume %s: the checkpoint records no DPO reference (the run's start's "
                             "log-likelihoods): resuming it is not supported (start the DPO run again)", o->resume);
        if (o->obj == DEC_OBJ_DPO && o->resume && o->data_changed)
            return cli_error(CLI_USAGE, "--resume %s: %s: a DPO run's reference is of the pairs it started on: expected "
                             "the run's data as it was", o->resume, o->data_changed);
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

/* Largest per-rank figures: [params, grads, master, optim, buffers, total, activations, rss] —
 * the states wherever they live — and on a device its own: the states' and all bytes at their
 * peak in device memory, and in pinned host memory. */
enum { M_PARAMS, M_GRADS, M_MASTER, M_OPTIM, M_BUFFERS, M_TOTAL, M_ACT, M_RSS, M_DEV_STATES, M_DEV_PEAK, M_PIN_STATES,
       M_PIN_PEAK, M_COUNT };

/* The run (models/trainer runs its steps) and what the command shows of it. */
typedef struct run_state {
    train_opts *o;
    zero_comm *comm;
    zero_engine *e;
    dec_model *model;
    trn_session *trn;   /* the training loop's session */
    int rank, world;
    FILE *json, *human; /* rank 0 only */
    cli_tb *tb;         /* rank 0 with TensorBoard on: the event file */
    char tb_path[4096];
    zero_ckpt_lock *lock; /* rank 0 with --save: the save directory is this run's */
    char *user_json;    /* what a checkpoint records of the run (train_user_json) */
    int offload;        /* NVMe offload is on: step records carry its I/O */
    uint64_t padded;    /* Σ padded unit sizes (their trainable parts) */
    uint64_t fpadded;   /* Σ padded frozen parts (LoRA's base) */
    double init_s;      /* seconds from the engine's creation to the initial weights in place */
    int64_t init_rss;   /* the largest per-rank peak RSS by then */
    /* the step hook's: the last step's figures, for the summary */
    int64_t m[M_COUNT];
    zero_comm_counters c;
    double last_loss, val;
    int rc; /* the hook's exit status when it stopped the run */
} run_state;

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

static int fail(run_state *r, const char *what, const char *msg) {
    return cli_error(CLI_RUNTIME, "rank %d: %s: %s", r->rank, what, msg);
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
        /* the planner's unit: its trainable elements and its frozen part as the engine lays it
         * out (a quantized base's records in frozen-dtype slots, not its parameter count) */
        numel[u] = ui.trainable + ui.frozen;
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
        if (o->cfg.quant_weights)
            zero_plan_traffic_qwz(o->cfg.stage, r->world, r->padded, o->cfg.precision, r->fpadded, o->cfg.frozen_dtype,
                                  o->cfg.quant_weights_block, o->cfg.quant_base != ZERO_QFMT_NONE, &tr);
        if (o->cfg.quant_grads)
            zero_plan_traffic_qgz(o->cfg.stage, r->world, r->padded, o->cfg.precision, o->cfg.quant_grads_block, &tr);
        int psi = 2; /* the rule per step, as the ownership plan schedules it (zero/plan.h) */
        const double rule = zero_plan_traffic_per_step(o->cfg.stage, r->world, (int)o->cfg.grad_accum, &tr, &psi);
        double got = (double)(c->bytes[0] + c->bytes[1] + c->bytes[2]) / (double)steps_run;
        fmt_bytes(t1, sizeof t1, got);
        fmt_bytes(t2, sizeof t2, rule);
        fprintf(f, "traffic per step per rank (sent + received): %s; ZeRO's %dΨ rule%s gives %s (ratio %.3f)\n", t1, psi,
                o->cfg.quant_weights && o->cfg.quant_grads ? " with qwZ's and qgZ's int8 messages"
                : o->cfg.quant_weights                      ? " with qwZ's int8 gathers"
                : o->cfg.quant_grads                        ? " with qgZ's int8 reduce-scatter"
                                                            : "",
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

/* After each step (every rank: the memory and traffic figures are collective): rank 0 writes
 * the --log-json record, the TensorBoard scalars and the progress line. */
static int on_step(void *ctx, const trn_step_report *s) {
    run_state *r = ctx;
    train_opts *o = r->o;
    r->last_loss = s->loss;
    if (s->has_val) r->val = s->val;
    if (max_mem(r, r->m)) {
        r->rc = fail(r, "memory report", zero_comm_last_error(r->comm));
        return 1;
    }
    zero_comm_counters eval;
    zero_engine_comm_counters(r->e, &r->c);
    trn_eval_counters(r->trn, &eval);
    for (int k = 0; k < ZERO_COLL_COUNT; k++) r->c.bytes[k] -= eval.bytes[k];
    for (int p = 0; p < ZERO_COMM_PATH_COUNT; p++) r->c.path_bytes[p] -= eval.path_bytes[p];
    if (r->rank != 0) return 0;
    const int64_t *m = r->m;
    const double tps = (double)s->tokens / s->seconds;
    if (r->json) {
        fprintf(r->json, "{\"step\":%lld,\"loss\":", (long long)s->step);
        cli_json_double(r->json, s->loss);
        if (s->has_val) {
            fputs(",\"val_loss\":", r->json);
            cli_json_double(r->json, s->val);
        }
        if (s->pref) { /* what TRL logs: rewards/chosen, rejected, margins, accuracies */
            const double P = s->pairs;
            fprintf(r->json,
                    ",\"rewards_chosen\":%.9g,\"rewards_rejected\":%.9g,\"reward_margin\":%.9g,"
                    "\"reward_accuracy\":%.9g",
                    s->sums.chosen / P, s->sums.rejected / P, s->sums.margin / P, s->sums.correct / P);
        }
        fprintf(r->json, ",\"lr\":%.9g,\"grad_norm\":", s->st.lr);
        cli_json_double(r->json, s->st.grad_norm);
        fprintf(r->json, ",\"loss_scale\":%.9g,\"skipped\":%s,\"step_ms\":%.3f,\"tokens_per_s\":%.1f,\"comm_wait_ms\":%.3f,",
                s->st.loss_scale, s->st.skipped ? "true" : "false", s->seconds * 1e3, tps, s->st.comm_wait_ms);
        if (o->cfg.deterministic) fprintf(r->json, "\"redone\":%s,", s->redone ? "true" : "false");
        json_mem(r->json, m);
        fputc(',', r->json);
        json_comm(r->json, &r->c);
        if (s->has_io)
            fprintf(r->json, ",\"offload\":{\"read\":%lld,\"written\":%lld,\"io_wait_ms\":%.3f}", (long long)s->io[0],
                    (long long)s->io[1], (double)s->io[2] * 1e-3);
        fputs("}\n", r->json);
        fflush(r->json);
    }
    if (r->tb) {
        /* HF Trainer's names, so that dashboards made for its runs show zero's too; the step
         * is the optimizer step, as in --log-json */
        const int64_t s1 = s->step;
        int bad = cli_tb_scalar(r->tb, "train/loss", s1, s->loss) ||
                  cli_tb_scalar(r->tb, "train/learning_rate", s1, s->st.lr) ||
                  cli_tb_scalar(r->tb, "train/grad_norm", s1, s->st.grad_norm) ||
                  cli_tb_scalar(r->tb, "train/tokens_per_s", s1, tps) ||
                  cli_tb_scalar(r->tb, "memory/peak_bytes", s1, (double)(m[M_TOTAL] + m[M_ACT])) ||
                  cli_tb_scalar(r->tb, "memory/rss_peak_bytes", s1, (double)m[M_RSS]) ||
                  (s->has_val && cli_tb_scalar(r->tb, "eval/loss", s1, s->val));
        if (bad || cli_tb_flush(r->tb)) {
            ux_progress_clear(o);
            r->rc = cli_error(CLI_RUNTIME, "tensorboard '%s': write failed: %s", r->tb_path,
                              strerror(errno ? errno : ENOMEM));
            return 1;
        }
    }
    const ux_step us = {.step = s->step, .loss = s->loss, .val = r->val, .lr = s->st.lr, .grad_norm = s->st.grad_norm,
                        .loss_scale = s->st.loss_scale, .step_s = s->seconds, .tokens_per_s = tps,
                        .io_wait_ms = (double)s->io[2] * 1e-3, .skipped = s->st.skipped, .has_val = s->has_val,
                        .has_io = s->has_io, .mem_bytes = m[M_TOTAL] + m[M_ACT]};
    ux_progress_step(o, &us);
    return 0;
}

static void on_saved(void *ctx, int64_t step, const char *prune_error) {
    run_state *r = ctx;
    if (r->rank != 0) return;
    ux_progress_clear(r->o);
    fprintf(r->human, "saved step %lld to %s\n", (long long)step, r->o->save);
    if (prune_error) fprintf(stderr, "zero: warning: --save-total-limit: %s\n", prune_error);
}

static int train_loop(run_state *r) {
    train_opts *o = r->o;
    const double t_start = zero_now();
    r->last_loss = r->val = NAN;
    const int64_t first_step = zero_engine_step_count(r->e);
    if (r->rank == 0) ux_progress_begin(o, r->human, first_step);
    if (max_mem(r, r->m)) return fail(r, "memory report", zero_comm_last_error(r->comm));
    zero_engine_comm_counters(r->e, &r->c);
    const trn_hooks hooks = {r, on_step, on_saved};
    if (trn_run(r->trn, &hooks) != ZERO_OK) {
        if (r->rc != CLI_OK) return r->rc; /* the hook said it */
        if (r->rank == 0) ux_progress_clear(o);
        return trn_error_quiet(r->trn) ? CLI_RUNTIME : cli_error(CLI_RUNTIME, "%s", trn_last_error(r->trn));
    }
    if (o->trace) {
        int rc = write_trace(r);
        if (rc != CLI_OK) return rc;
    }
    if (r->rank == 0) {
        const int64_t *m = r->m;
        const int64_t steps_run = o->steps > first_step ? o->steps - first_step : 0;
        const double elapsed = zero_now() - t_start;
        summary(r, m, &r->c, steps_run);
        if (r->json) {
            fprintf(r->json, "{\"done\":true,\"steps\":%lld,\"ranks\":%d,\"stage\":%d,\"tokens\":%lld,\"elapsed_s\":%.3f,\"loss\":",
                    (long long)o->steps, r->world, o->cfg.stage, (long long)(trn_global_batch(r->trn) * o->T * steps_run), elapsed);
            cli_json_double(r->json, r->last_loss);
            fputs(",\"val_loss\":", r->json);
            cli_json_double(r->json, r->val);
            fprintf(r->json, ",\"params\":%llu,\"stage0_model_states\":%llu,\"init_s\":%.3f,\"init_rss_peak\":%lld,",
                    (unsigned long long)dec_num_params(&o->model_cfg), (unsigned long long)stage0_states(r), r->init_s,
                    (long long)r->init_rss);
            json_mem(r->json, m);
            fputc(',', r->json);
            json_comm(r->json, &r->c);
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
    /* The engine keeps the rule of deferred cross-node steps (it waits each request at the same
     * point of its schedule on every rank): on unless ZERO_COMM_CROSS_OVERLAP says (docs/COMM.md) */
    zero_comm_options copts;
    zero_comm_options_default(&copts);
    if (!getenv("ZERO_COMM_CROSS_OVERLAP")) copts.cross_overlap = 1;
    zero_status s = mpi ? zero_comm_init_mpi_with(&r.comm, NULL, &copts, &err) : zero_comm_init_self_with(&r.comm, &err);
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
    /* deterministic: the BLAS gives the same bits for the same shapes and thread count only, so
     * every GEMM runs on one thread, whatever the rank's share of the cores (the model's own
     * kernels give the same bits on any thread count: docs/MODEL.md) */
    if (o->cfg.deterministic) dec_set_blas_threads(1);
    /* the loop (models/trainer): the objective's micro-batches, validation, saves */
    trn_setup ts;
    trn_setup_default(&ts);
    char from[1100] = "";
    if (o->resume) snprintf(from, sizeof from, " (--resume %s)", o->resume);
    else if (o->init_from) snprintf(from, sizeof from, " (--init-from %s)", o->init_from);
    ts.comm = r.comm, ts.engine = r.e, ts.data = o->dataset, ts.val = o->valset;
    ts.cfg = &o->cfg, ts.T = o->T, ts.docs = o->docs, ts.objective = o->obj, ts.beta = o->beta;
    ts.label_smoothing = o->label_smoothing, ts.seed = o->seed, ts.lora = o->lora_on, ts.steps = o->steps;
    ts.val_every = o->val_every, ts.val_batches = o->val_batches, ts.save = o->save, ts.save_every = o->save_every;
    ts.save_total_limit = o->save_total_limit, ts.save_json = r.user_json, ts.weights_from = from;
    if (dec_create(&r.model, &o->model_cfg, trn_model_batch(&ts), o->T, o->checkpointing, &err) != ZERO_OK ||
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
    ts.model = r.model;
    ts.reference = o->dpo_reference_in;
    if (trn_create(&r.trn, &ts, &err) != ZERO_OK) {
        rc = cli_error(CLI_RUNTIME, "%s", err.msg);
        goto out;
    }
    if (o->obj == DEC_OBJ_DPO) { /* the reference first: the run's record keeps it, for --resume */
        if (trn_prepare(r.trn) != ZERO_OK) {
            rc = cli_error(CLI_RUNTIME, "%s", trn_last_error(r.trn));
            goto out;
        }
        free(o->dpo_reference);
        free(r.user_json);
        o->dpo_reference = trn_reference_text(r.trn);
        r.user_json = o->dpo_reference ? train_user_json(o, r.world) : NULL;
        if (!r.user_json) {
            rc = cli_error(CLI_RUNTIME, "out of memory");
            goto out;
        }
        trn_set_save_json(r.trn, r.user_json);
    }
    const int64_t G = trn_global_batch(r.trn); /* sequences per step, all ranks */
    if (r.rank == 0) {
        const int json_stdout = o->log_json && !strcmp(o->log_json, "-");
        r.human = json_stdout ? stderr : stdout;
        /* an elastic restart goes on with the log of the job it restarts */
        if (o->log_json) r.json = json_stdout ? stdout : fopen(o->log_json, o->elastic_restart ? "a" : "w");
        if (o->log_json && !r.json) {
            rc = cli_error(CLI_RUNTIME, "--log-json '%s': cannot open for writing", o->log_json);
            goto out;
        }
        if (r.json && o->elastic_restart) {
            fprintf(r.json, "{\"elastic_restart\":%d,\"world_before\":%d,\"world\":%d,\"from_step\":%lld}\n",
                    o->elastic_restart, o->elastic_world, r.world, (long long)zero_engine_step_count(r.e));
            fflush(r.json);
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
                    (unsigned long long)pairs, (double)pairs / ((double)G / 2), (long long)(G / 2),
                    o->obj != DEC_OBJ_DPO ? ""
                    : o->dpo_reference_in
                        ? "; the reference: the run's initial weights', from the checkpoint's record"
                        : "; the reference: the initial weights, computed once before the first step");
        } else if (dec_data_row(o->dataset)) { /* packed rows: seen once per epoch, in a new order each */
            const uint64_t rows = dec_data_num_rows(o->dataset, DEC_SPLIT_TRAIN);
            fprintf(r.human, "epoch: %llu train rows, %.2f steps of %lld rows%s\n", (unsigned long long)rows,
                    (double)rows / (double)G, (long long)G,
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
            char how[160];
            if (qf == ZERO_QFMT_NONE) snprintf(how, sizeof how, "%s", fd);
            else
                snprintf(how, sizeof how, "linear weights%s %s, the rest %s",
                         o->cfg.quant_embed ? ", embeddings and LM head" : "",
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
    rc = train_loop(&r);
out:
    if (r.json && r.json != stdout) { /* the log's records reached the disk, or the run fails saying so */
        const int bad = ferror(r.json) | (fclose(r.json) != 0);
        if (bad && rc == CLI_OK)
            rc = cli_error(CLI_RUNTIME, "--log-json '%s': write failed: %s", o->log_json, strerror(errno ? errno : EIO));
    }
    if (r.tb && cli_tb_close(r.tb) && rc == CLI_OK)
        rc = cli_error(CLI_RUNTIME, "tensorboard '%s': write failed: %s", r.tb_path, strerror(errno ? errno : EIO));
    trn_free(r.trn);
    free(r.user_json);
    dec_free(r.model);
    zero_engine_free(r.e);
    train_release(o);
    zero_ckpt_lock_release(r.lock);
    zero_comm_free(r.comm);
    return rc;
}
