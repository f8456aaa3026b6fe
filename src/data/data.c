/* src/data/data.c — data sets for fine-tuning: JSONL examples and JSON arrays of them ({"text"},
 * {"prompt","completion"}, {"messages"}, ShareGPT's {"conversations"}, Alpaca's {"instruction",
 * "input", "output"}) and text documents tokenized with a loss mask, EOS after each example, and
 * packing into rows of seq + 1 tokens (best-fit decreasing, padding with EOS that carries no loss). */
#include <cjson/cJSON.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "data/internal.h"
#include "tokenizer/internal.h"
#include "zero/data.h"
#include "zero/template.h"


struct zero_data {
    zero_tokenizer *tok;
    zero_data_opts o;
    zero_chat_format chat;
    zero_template *tmpl; /* the tokenizer's chat template, parsed at the first chat (ZERO_CHAT_MODEL) */
    int32_t *ids;
    uint8_t *mask;
    uint8_t *starts; /* after finish: 1 at the first token of each example (of each row-long piece) */
    size_t n, cap;
    struct ex { uint64_t off, len; } *ex;
    size_t nex, excap;
    uint64_t last_off, last_len;
    int finished;
    zero_data_stats st;
    zero_token_ids scratch;
    uint8_t *m;
    size_t mcap;
    char err[512];
};

void zero_data_opts_default(zero_data_opts *o) {
    memset(o, 0, sizeof *o);
}

zero_status zero_data_create(zero_data **out, zero_tokenizer *tok, const zero_data_opts *o, zero_error *err) {
    *out = NULL;
    if (!tok || (o && o->seq < 0)) {
        if (err) snprintf(err->msg, sizeof err->msg, "data: expected a tokenizer and seq >= 0");
        return ZERO_ERR_INVALID_ARG;
    }
    zero_data *d = calloc(1, sizeof *d);
    if (!d) {
        if (err) snprintf(err->msg, sizeof err->msg, "out of memory creating a data set");
        return ZERO_ERR_NOMEM;
    }
    d->tok = tok;
    if (o) d->o = *o;
    d->chat = d->o.chat;
    *out = d;
    return ZERO_OK;
}

void zero_data_free(zero_data *d) {
    if (!d) return;
    free(d->ids);
    free(d->mask);
    free(d->starts);
    free(d->ex);
    zero_token_ids_free(&d->scratch);
    zero_template_free(d->tmpl);
    free(d->m);
    free(d);
}

const char *zero_data_last_error(const zero_data *d) { return d ? d->err : ""; }

static int reserve(zero_data *d, size_t n) {
    if (d->n + n <= d->cap) return 0;
    size_t nc = d->cap ? 2 * d->cap : 1 << 16;
    while (nc < d->n + n) nc *= 2;
    int32_t *ni = realloc(d->ids, nc * sizeof *ni);
    if (!ni) return -1;
    d->ids = ni;
    uint8_t *nm = realloc(d->mask, nc);
    if (!nm) return -1;
    d->mask = nm;
    d->cap = nc;
    return 0;
}

static zero_status nomem(zero_data *d) {
    snprintf(d->err, sizeof d->err, "out of memory tokenizing data");
    return ZERO_ERR_NOMEM;
}

static int add_ex(zero_data *d, uint64_t off, uint64_t len) {
    if (d->nex == d->excap) {
        size_t nc = d->excap ? 2 * d->excap : 1024;
        struct ex *ne = realloc(d->ex, nc * sizeof *ne);
        if (!ne) return -1;
        d->ex = ne;
        d->excap = nc;
    }
    d->ex[d->nex++] = (struct ex){off, len};
    return 0;
}

/* Appends one example (ids, mask) and its EOS (mask eos_mask) unless it already ends with EOS.
 * Returns 1 (not added) when it is longer than a row. */
static int append(zero_data *d, const int32_t *ids, const uint8_t *mask, size_t n, uint8_t eos_mask, int chunk) {
    const int32_t eos = zero_tokenizer_eos(d->tok);
    const size_t total = n + (eos >= 0 && (n == 0 || ids[n - 1] != eos) ? 1 : 0);
    const uint64_t R = d->o.seq > 0 ? (uint64_t)d->o.seq + 1 : 0;
    if (R && total > R && !chunk) return 1;
    if (reserve(d, total)) return -1;
    const size_t off = d->n;
    if (n) {
        memcpy(d->ids + off, ids, n * sizeof *ids);
        memcpy(d->mask + off, mask, n);
    }
    if (total > n) {
        d->ids[off + n] = eos;
        d->mask[off + n] = eos_mask;
    }
    d->n += total;
    d->last_off = off;
    d->last_len = total;
    for (uint64_t a = 0; a < total; a += R ? R : total) /* documents longer than a row: whole rows */
        if (add_ex(d, off + a, R && total - a > R ? R : total - a)) return -1;
    d->st.examples++;
    return 0;
}

/* Encodes with the post-processor's template (BOS ...) and offsets; *start: the template tokens before the text. */
static zero_status encode_special(zero_data *d, const char *s, size_t n, size_t *start) {
    zero_tokenizer *t = d->tok;
    d->scratch.n = 0;
    zero_status st = zero_tokenizer_encode(t, s, n, ZERO_TOK_ADD_SPECIAL | ZERO_TOK_OFFSETS, &d->scratch);
    if (st) return st;
    size_t pre = 0;
    while (pre < (size_t)t->ntmpl && t->tmpl[pre] >= 0) pre++;
    *start = t->tmpl ? pre : 0;
    return ZERO_OK;
}

static int mask_reserve(zero_data *d, size_t n) {
    if (n <= d->mcap) return 0;
    uint8_t *nm = realloc(d->m, n);
    if (!nm) return -1;
    d->m = nm;
    d->mcap = n;
    return 0;
}

/* Loss on the tokens meeting [lo, hi) of the text; post-processor tokens carry none. */
static zero_status encode_masked(zero_data *d, const char *s, size_t n, size_t lo, size_t hi) {
    zero_tokenizer *t = d->tok;
    size_t pre;
    zero_status st = encode_special(d, s, n, &pre);
    if (st) return st;
    const zero_token_ids *o = &d->scratch;
    size_t post = 0;
    if (t->tmpl) {
        int k = 0;
        while (k < t->ntmpl && t->tmpl[k] >= 0) k++;
        post = (size_t)(t->ntmpl - k - 1);
    }
    if (mask_reserve(d, o->n + 1)) return ZERO_ERR_NOMEM;
    for (size_t i = 0; i < o->n; i++) {
        if (i < pre || i >= o->n - post) {
            d->m[i] = 0;
            continue;
        }
        const uint32_t a = o->offsets[i], e = i + 1 < o->n - post ? o->offsets[i + 1] : (uint32_t)n;
        d->m[i] = (uint8_t)zero__data_in_span(a, e, lo, hi);
    }
    return ZERO_OK;
}

zero_status zero_data_add_text(zero_data *d, const char *text, size_t len) {
    if (d->finished) {
        snprintf(d->err, sizeof d->err, "data: add after finish");
        return ZERO_ERR_STATE;
    }
    zero_status st = encode_masked(d, text, len, 0, len);
    if (st) return st == ZERO_ERR_NOMEM ? nomem(d) : st;
    d->st.bytes += len;
    if (append(d, d->scratch.ids, d->m, d->scratch.n, 1, 1) < 0) return nomem(d);
    return ZERO_OK;
}

static zero_status bad(zero_data *d, const char *where, const char *fmt, const char *a, const char *b) {
    char why[256];
    snprintf(why, sizeof why, fmt, a ? a : "", b ? b : "");
    if (d->o.skip_bad) {
        if (!d->st.skipped++) snprintf(d->st.first_skipped, sizeof d->st.first_skipped, "%.100s: %.150s", where, why);
        return ZERO_OK;
    }
    snprintf(d->err, sizeof d->err, "%.200s: %.230s (--skip-bad-examples skips and counts such lines)", where, why);
    return ZERO_ERR_FORMAT;
}

static const char *str_field(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* A chat: rendered in the chat format, loss on the assistant turns (docs/TOKENIZER.md). */
static zero_status add_chat(zero_data *d, const char *where, const zero_chat_message *m, const char *const *json,
                            int n, const char *tools, int *too_long) {
    if (d->chat == ZERO_CHAT_NONE && (d->chat = zero_chat_format_detect(d->tok)) == ZERO_CHAT_NONE) {
        snprintf(d->err, sizeof d->err, "%.200s: a chat, and the tokenizer implies no chat format: choose one of "
                 "chatml, llama3, mistral (--chat-template)", where);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_error cerr;
    d->scratch.n = 0;
    zero_status st;
    if (d->chat == ZERO_CHAT_MODEL) {
        const char *src = zero_tokenizer_chat_template(d->tok);
        if (!d->tmpl && !src) {
            snprintf(d->err, sizeof d->err, "%.200s: chat format model: the tokenizer has no chat template (choose "
                     "one of chatml, llama3, mistral: --chat-template)", where);
            return ZERO_ERR_INVALID_ARG;
        }
        /* the template's own faults are the tokenizer's, not the example's: never skipped */
        if (!d->tmpl && (st = zero_template_parse(&d->tmpl, src, strlen(src), &cerr))) {
            snprintf(d->err, sizeof d->err, "the tokenizer's %.300s (choose a built-in format with --chat-template "
                     "chatml|llama3|mistral)", cerr.msg);
            return st;
        }
        st = zero__chat_encode_template(d->tok, d->tmpl, m, json, n, tools, 0, &d->scratch, &d->m, &d->mcap, &cerr);
        if (st == ZERO_ERR_UNSUPPORTED) {
            snprintf(d->err, sizeof d->err, "%.150s: the tokenizer's %.230s (choose a built-in format with "
                     "--chat-template chatml|llama3|mistral)", where, cerr.msg);
            return st;
        }
    } else st = zero__chat_encode(d->tok, d->chat, m, json, n, tools, 0, &d->scratch, &d->m, &d->mcap, &cerr);
    if (st == ZERO_ERR_NOMEM) return nomem(d);
    if (st && strstr(cerr.msg, "needs the token")) { /* the tokenizer's, not the example's: never skipped */
        snprintf(d->err, sizeof d->err, "%.200s: %.300s", where, cerr.msg);
        return st;
    }
    if (st) return bad(d, where, "%.200s", cerr.msg, NULL);
    const int rc = append(d, d->scratch.ids, d->m, d->scratch.n, (uint8_t) !strcmp(m[n - 1].role, "assistant"), 0);
    if (rc < 0) return nomem(d);
    *too_long = rc > 0;
    return ZERO_OK;
}

/* prompt + completion as one text with the post-processor, loss on the tokens meeting the
 * completion. */
static zero_status add_prompt_completion(zero_data *d, const char *p, size_t pn, const char *c, size_t cn,
                                         int *too_long) {
    char *both = malloc(pn + cn + 1);
    if (!both) return nomem(d);
    memcpy(both, p, pn);
    memcpy(both + pn, c, cn);
    both[pn + cn] = 0;
    const zero_status st = encode_masked(d, both, pn + cn, pn, pn + cn);
    free(both);
    if (st) return nomem(d);
    const int rc = append(d, d->scratch.ids, d->m, d->scratch.n, 1, 0);
    if (rc < 0) return nomem(d);
    *too_long = rc > 0;
    return ZERO_OK;
}

/* ShareGPT's "from" names (FastChat: human, gpt; axolotl's chat_template roles add user,
 * assistant, system; chatgpt and model are other exporters' names for the assistant). */
static const char *sharegpt_role(const char *from) {
    static const char *const map[][2] = {{"human", "user"},      {"user", "user"},       {"gpt", "assistant"},
                                         {"assistant", "assistant"}, {"chatgpt", "assistant"}, {"model", "assistant"},
                                         {"system", "system"}};
    for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(from, map[i][0])) return map[i][1];
    return NULL;
}

/* {"conversations": [{"from", "value"}...], "system"?} as the chat it maps to: a "system" string
 * becomes the first turn (as axolotl's chat_template does). *out is malloc'd. */
static zero_status sharegpt_chat(zero_data *d, const char *where, const cJSON *o, zero_chat_message **out, int *nout) {
    const cJSON *conv = cJSON_GetObjectItemCaseSensitive(o, "conversations");
    const cJSON *sys = cJSON_GetObjectItemCaseSensitive(o, "system");
    char num[32];
    *out = NULL;
    if (!cJSON_IsArray(conv) || cJSON_GetArraySize(conv) == 0)
        return bad(d, where, "\"conversations\": expected a non-empty array of {\"from\", \"value\"} (ShareGPT)", NULL,
                   NULL);
    if (sys && !cJSON_IsNull(sys) && !cJSON_IsString(sys))
        return bad(d, where, "\"system\": expected a string beside \"conversations\"", NULL, NULL);
    const int has_sys = cJSON_IsString(sys), n = cJSON_GetArraySize(conv) + has_sys;
    zero_chat_message *m = calloc((size_t)n, sizeof *m);
    if (!m) return nomem(d);
    int i = 0;
    if (has_sys) m[i++] = (zero_chat_message){.role = "system", .content = sys->valuestring};
    for (const cJSON *e = conv->child; e; e = e->next, i++) {
        const char *from = str_field(e, "from"), *value = str_field(e, "value");
        snprintf(num, sizeof num, "%d", i - has_sys);
        if (!from || !value) {
            free(m);
            return bad(d, where, "conversations[%s]: expected {\"from\": ..., \"value\": \"...\"}", num, NULL);
        }
        if (!(m[i].role = sharegpt_role(from))) {
            char why[160];
            snprintf(why, sizeof why, "conversations[%s]: from '%.40s'", num, from);
            free(m);
            return bad(d, where, "%s is not one of human, user, gpt, assistant, chatgpt, model, system", why, NULL);
        }
        if (has_sys && i == 1 && !strcmp(m[i].role, "system")) {
            free(m);
            return bad(d, where, "a \"system\" field and a first turn from system: expected one system prompt", NULL,
                       NULL);
        }
        m[i].content = value;
    }
    *out = m;
    *nout = n;
    return ZERO_OK;
}

/* The Stanford Alpaca prompt (tatsu-lab/stanford_alpaca train.py), with the newline after
 * "### Response:" that axolotl's `alpaca` type and alpaca-lora write: the loss is on the output. */
#define ALPACA_INPUT                                                                                                   \
    "Below is an instruction that describes a task, paired with an input that provides further context. Write a "    \
    "response that appropriately completes the request.\n\n### Instruction:\n"
#define ALPACA_NO_INPUT                                                                                                \
    "Below is an instruction that describes a task. Write a response that appropriately completes the "              \
    "request.\n\n### Instruction:\n"

static zero_status add_alpaca(zero_data *d, const char *where, const cJSON *o, int *too_long) {
    const char *ins = str_field(o, "instruction"), *out = str_field(o, "output"), *in = str_field(o, "input");
    const cJSON *inv = cJSON_GetObjectItemCaseSensitive(o, "input");
    if (!ins || !out)
        return bad(d, where, "expected \"instruction\" and \"output\" as strings (Alpaca)", NULL, NULL);
    if (inv && !in && !cJSON_IsNull(inv)) return bad(d, where, "\"input\": expected a string or null (Alpaca)", NULL, NULL);
    const int with_input = in && *in; /* an empty input is the prompt without one, as Stanford's and axolotl's */
    const char *head = with_input ? ALPACA_INPUT : ALPACA_NO_INPUT;
    const size_t hn = strlen(head), n_ins = strlen(ins), n_in = with_input ? strlen(in) : 0;
    static const char input[] = "\n\n### Input:\n", response[] = "\n\n### Response:\n";
    const size_t pn = hn + n_ins + (with_input ? sizeof input - 1 + n_in : 0) + sizeof response - 1;
    char *p = malloc(pn + 1);
    if (!p) return nomem(d);
    snprintf(p, pn + 1, "%s%s%s%s%s", head, ins, with_input ? input : "", with_input ? in : "", response);
    const zero_status st = add_prompt_completion(d, p, pn, out, strlen(out), too_long);
    free(p);
    return st;
}

/* A key with a value: null is absent, as HF datasets writes a column that another example has
 * (and axolotl drops). */
static int present(const cJSON *o, const char *k) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return v && !cJSON_IsNull(v);
}

/* The shapes of an example, in the order their names appear in messages. */
enum { SHAPE_MESSAGES, SHAPE_SHAREGPT, SHAPE_ALPACA, SHAPE_PC, SHAPE_TEXT, SHAPE_COUNT };

zero_status zero_data_add_jsonl_line(zero_data *d, const char *line, size_t len, const char *where) {
    if (d->finished) {
        snprintf(d->err, sizeof d->err, "data: add after finish");
        return ZERO_ERR_STATE;
    }
    d->last_len = 0; /* zero_data_last_example: nothing, for a blank or skipped line */
    size_t k = 0;
    while (k < len && (line[k] == ' ' || line[k] == '\t' || line[k] == '\r' || line[k] == '\n')) k++;
    if (k == len) return ZERO_OK; /* blank lines are not examples */
    d->st.bytes += len;
    char num[32];
    if (len > ZERO_DATA_MAX_LINE) {
        snprintf(num, sizeof num, "%zu", len);
        return bad(d, where, "a line of %s bytes, longer than the 64 MiB a JSONL example may have", num, NULL);
    }
    zero_error je;
    if (zero_json_check(line, len, ZERO_DATA_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &je) != ZERO_OK)
        return bad(d, where, "%.200s", je.msg, NULL);
    cJSON *o = cJSON_ParseWithLength(line, len);
    zero_status st = ZERO_OK;
    if (!o) return bad(d, where, "out of memory parsing the line", NULL, NULL); /* zero_json_check took the rest */
    if (!cJSON_IsObject(o)) {
        st = bad(d, where, "expected a JSON object", NULL, NULL);
        goto done;
    }
    /* one shape an example: another's keys beside it would be dropped without a word */
    static const char *const shape_name[SHAPE_COUNT] = {"\"messages\"", "\"conversations\"", "\"instruction\"",
                                                        "\"prompt\"/\"completion\"", "\"text\""};
    int has[SHAPE_COUNT], nshapes = 0, shape = -1, second = -1;
    has[SHAPE_MESSAGES] = present(o, "messages");
    has[SHAPE_SHAREGPT] = present(o, "conversations");
    has[SHAPE_ALPACA] = present(o, "instruction");
    has[SHAPE_PC] = present(o, "prompt") || present(o, "completion");
    has[SHAPE_TEXT] = present(o, "text");
    for (int s = 0; s < SHAPE_COUNT; s++) {
        if (!has[s]) continue;
        if (nshapes++ == 0) shape = s;
        else if (second < 0) second = s;
    }
    if (nshapes > 1) {
        st = bad(d, where, "one shape an example, found %s and %s", shape_name[shape], shape_name[second]);
        goto done;
    }
    const uint64_t skipped0 = d->st.skipped; /* a bad example in skip mode: ZERO_OK, and counted */
    int too_long = 0;
    zero_chat_message *m = NULL; /* a chat: chat's messages, or sharegpt_chat's (malloc'd) */
    zero__chat chat = {0};
    int n = 0;
    if (shape >= 0 && shape != SHAPE_MESSAGES && present(o, "tools")) {
        st = bad(d, where, "\"tools\" beside %s: expected them beside \"messages\"", shape_name[shape], NULL);
        goto done;
    }
    switch (shape) {
    case SHAPE_MESSAGES: {
        char why[256];
        if ((st = zero__chat_read(o, &chat, why, sizeof why)) == ZERO_ERR_NOMEM) st = nomem(d);
        else if (st) st = bad(d, where, "%s", why, NULL);
        else {
            m = chat.msgs;
            n = chat.n;
        }
        break;
    }
    case SHAPE_SHAREGPT: st = sharegpt_chat(d, where, o, &m, &n); break;
    case SHAPE_ALPACA: st = add_alpaca(d, where, o, &too_long); break;
    case SHAPE_PC: {
        const char *p = str_field(o, "prompt"), *c = str_field(o, "completion");
        if (!p || !c) st = bad(d, where, "expected both \"prompt\" and \"completion\" as strings", NULL, NULL);
        else st = add_prompt_completion(d, p, strlen(p), c, strlen(c), &too_long);
        break;
    }
    case SHAPE_TEXT: {
        const char *x = str_field(o, "text");
        if (!x) {
            st = bad(d, where, "\"text\": expected a string", NULL, NULL);
            break;
        }
        if ((st = encode_masked(d, x, strlen(x), 0, strlen(x)))) {
            st = nomem(d);
            break;
        }
        const int rc = append(d, d->scratch.ids, d->m, d->scratch.n, 1, 0);
        if (rc < 0) st = nomem(d);
        too_long = rc > 0;
        break;
    }
    default:
        st = bad(d, where, "expected \"text\", \"prompt\" and \"completion\", \"messages\", \"conversations\" "
                 "(ShareGPT) or \"instruction\" and \"output\" (Alpaca)", NULL, NULL);
    }
    if (m) {
        if (st == ZERO_OK && d->st.skipped == skipped0)
            st = add_chat(d, where, m, chat.n ? (const char *const *)chat.json : NULL, n, chat.tools, &too_long);
        if (m != chat.msgs) free(m);
    }
    zero__chat_free(&chat);
    if (st == ZERO_OK && too_long) {
        char a[32], b[32];
        snprintf(a, sizeof a, "%zu", d->scratch.n + 1);
        snprintf(b, sizeof b, "%lld", (long long)d->o.seq + 1);
        st = bad(d, where, "the example has %s tokens with EOS, longer than a sequence (seq + 1 = %s)", a, b);
    }
done:
    cJSON_Delete(o);
    return st;
}

static int ends_with(const char *s, const char *suffix) {
    const size_t n = strlen(s), k = strlen(suffix);
    return n >= k && !strcmp(s + n - k, suffix);
}

typedef struct jsonl_ctx {
    zero_data *d;
    const char *path;
    int array; /* the file is one JSON array: examples are its elements */
} jsonl_ctx;

static zero_status jsonl_line(void *ctx, const char *line, size_t len, uint64_t lineno) {
    const jsonl_ctx *c = ctx;
    char where[512], num[32];
    snprintf(where, sizeof where, "%.400s:%llu", c->path, (unsigned long long)lineno);
    if (line) return zero_data_add_jsonl_line(c->d, line, len, where);
    c->d->st.bytes += len;
    snprintf(num, sizeof num, "%zu", len);
    return bad(c->d, where,
               c->array ? "an element of more than %s bytes, longer than the 64 MiB an example may have"
                        : "a line of more than %s bytes, longer than the 64 MiB a JSONL example may have",
               num, NULL);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

zero_status zero_data_add_file(zero_data *d, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) {
        snprintf(d->err, sizeof d->err, "cannot open data '%.400s': %s", path, strerror(errno));
        return ZERO_ERR_IO;
    }
    if (S_ISDIR(sb.st_mode)) {
        DIR *dp = opendir(path);
        if (!dp) {
            snprintf(d->err, sizeof d->err, "cannot open data directory '%.400s': %s", path, strerror(errno));
            return ZERO_ERR_IO;
        }
        char **names = NULL;
        size_t nn = 0, cap = 0;
        zero_status st = ZERO_OK;
        struct dirent *de;
        while ((de = readdir(dp)) && !st) {
            if (de->d_name[0] == '.' || ends_with(de->d_name, ".dat")) continue;
            if (nn == cap) {
                cap = cap ? 2 * cap : 64;
                char **t = realloc(names, cap * sizeof *t);
                if (!t) st = nomem(d);
                else names = t;
            }
            if (!st && !(names[nn++] = strdup(de->d_name))) st = nomem(d), nn--;
        }
        closedir(dp);
        if (nn) qsort(names, nn, sizeof *names, cmp_str);
        for (size_t i = 0; i < nn; i++) {
            char p[4096];
            struct stat s2;
            snprintf(p, sizeof p, "%s/%s", path, names[i]);
            if (!st && lstat(p, &s2) == 0 && S_ISREG(s2.st_mode)) st = zero_data_add_file(d, p);
            free(names[i]);
        }
        free(names);
        return st;
    }
    if (d->finished) {
        snprintf(d->err, sizeof d->err, "data: add after finish");
        return ZERO_ERR_STATE;
    }
    zero_error e;
    if (ends_with(path, ".jsonl") || ends_with(path, ".json")) {
        jsonl_ctx c = {d, path, 0};
        e.msg[0] = 0;
        const zero_status st =
            zero_data_foreach_example(path, ends_with(path, ".json"), ZERO_DATA_MAX_LINE, jsonl_line, &c, &c.array, &e);
        if (st && e.msg[0]) snprintf(d->err, sizeof d->err, "%s", e.msg);
        return st;
    }
    char *buf;
    size_t len = 0;
    zero_status st = zero_read_file(path, ZERO_DATA_MAX_TEXT, &buf, &len, &e);
    if (st) {
        snprintf(d->err, sizeof d->err, "data file: %.480s", e.msg);
        return st;
    }
    const char *nul = memchr(buf, 0, len); /* a token file or another binary file is not text */
    if (nul) {
        snprintf(d->err, sizeof d->err, "data file '%.300s' looks binary (NUL byte at offset %zu): expected text or "
                 "JSONL (a token file is read by zero train as it is, not tokenized again)", path, (size_t)(nul - buf));
        free(buf);
        return ZERO_ERR_FORMAT;
    }
    st = zero_data_add_text(d, buf, len);
    free(buf);
    return st;
}

static int cmp_u64(const void *a, const void *b) {
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Best-fit decreasing: examples by length, each into the open row with the least room that holds
 * it (a bitset over room sizes finds it), rows padded with EOS carrying no loss. */
static zero_status pack(zero_data *d) {
    const uint64_t R = (uint64_t)d->o.seq + 1;
    const size_t ne = d->nex;
    zero_status st = ZERO_OK;
    size_t *order = malloc((ne + 1) * sizeof *order);
    int64_t *bin_of = malloc((ne + 1) * sizeof *bin_of), *next = malloc((ne + 1) * sizeof *next);
    size_t nwords = (size_t)(R / 64 + 1);
    uint64_t *bits = calloc(nwords, sizeof *bits);
    int64_t *head = malloc((size_t)(R + 1) * sizeof *head); /* a stack of rows per room size */
    int64_t *rnext = malloc((ne + 1) * sizeof *rnext), *rfirst = malloc((ne + 1) * sizeof *rfirst),
            *rlast = malloc((ne + 1) * sizeof *rlast);
    uint64_t *room = malloc((ne + 1) * sizeof *room);
    int32_t *ids = NULL;
    uint8_t *mask = NULL;
    if (!order || !bin_of || !next || !bits || !head || !rnext || !rfirst || !rlast || !room) goto oom;
    for (size_t i = 0; i < ne; i++) order[i] = i;
    /* stable sort by length, descending: merge sort through next[] as scratch is overkill; use qsort
     * on (len, index) pairs packed in 64 bits (lengths < 2^32 since a row is) */
    uint64_t *keys = malloc((ne + 1) * sizeof *keys);
    if (!keys) goto oom;
    for (size_t i = 0; i < ne; i++) keys[i] = ((R - d->ex[i].len) << 32) | i;
    qsort(keys, ne, sizeof *keys, cmp_u64);
    for (size_t i = 0; i < ne; i++) order[i] = (size_t)(keys[i] & 0xFFFFFFFFu);
    free(keys);
    for (uint64_t r = 0; r <= R; r++) head[r] = -1;
    size_t nrows = 0;
    for (size_t k = 0; k < ne; k++) {
        const size_t e = order[k];
        const uint64_t len = d->ex[e].len;
        /* the smallest room >= len with an open row */
        int64_t found = -1;
        for (size_t w = (size_t)(len / 64); w < nwords && found < 0; w++) {
            uint64_t b = bits[w];
            if (w == len / 64) b &= ~0ull << (len % 64);
            if (b) found = (int64_t)(w * 64 + (size_t)__builtin_ctzll(b));
        }
        int64_t row;
        if (found >= 0) {
            row = head[found];
            head[found] = rnext[row];
            if (head[found] < 0) bits[found / 64] &= ~(1ull << (found % 64));
            next[rlast[row]] = (int64_t)e;
            rlast[row] = (int64_t)e;
        } else {
            row = (int64_t)nrows++;
            rfirst[row] = rlast[row] = (int64_t)e;
            room[row] = R;
        }
        next[e] = -1;
        room[row] -= len;
        rnext[row] = head[room[row]];
        head[room[row]] = row;
        bits[room[row] / 64] |= 1ull << (room[row] % 64);
    }
    const uint64_t total = nrows * R;
    ids = malloc((total + 1) * sizeof *ids);
    mask = malloc(total + 1);
    d->starts = calloc(total + 1, 1);
    if (!ids || !mask || !d->starts) goto oom;
    const int32_t eos = zero_tokenizer_eos(d->tok);
    uint64_t o = 0;
    for (size_t r = 0; r < nrows; r++) {
        const uint64_t start = o;
        for (int64_t e = rfirst[r]; e >= 0; e = next[e]) {
            if (!d->ex[e].len) continue;
            memcpy(ids + o, d->ids + d->ex[e].off, d->ex[e].len * sizeof *ids);
            memcpy(mask + o, d->mask + d->ex[e].off, d->ex[e].len);
            d->starts[o] = 1;
            o += d->ex[e].len;
        }
        /* the padding is a document of its own (a row's tail never attends to its last example) */
        if (o < start + R) d->starts[o] = 1;
        for (; o < start + R; o++) ids[o] = eos >= 0 ? eos : 0, mask[o] = 0;
    }
    d->st.padding = total - d->n;
    d->st.rows = nrows;
    free(d->ids);
    free(d->mask);
    d->ids = ids;
    d->mask = mask;
    d->n = d->cap = total;
    ids = NULL;
    mask = NULL;
    goto done;
oom:
    st = nomem(d);
    free(d->starts);
    d->starts = NULL;
done:
    free(order), free(bin_of), free(next), free(bits), free(head), free(rnext), free(rfirst), free(rlast), free(room);
    free(ids), free(mask);
    return st;
}

zero_status zero_data_finish(zero_data *d) {
    if (d->finished) return ZERO_OK;
    if (d->n == 0) {
        snprintf(d->err, sizeof d->err, "the data holds no example%s", d->st.skipped ? " (every one was skipped)" : "");
        return ZERO_ERR_FORMAT;
    }
    if (d->o.seq > 0) {
        zero_status st = pack(d);
        if (st) return st;
    } else { /* a stream: each example (document) where it was appended */
        if (!(d->starts = calloc(d->n, 1))) return nomem(d);
        for (size_t i = 0; i < d->nex; i++) d->starts[d->ex[i].off] = 1;
    }
    d->finished = 1;
    return ZERO_OK;
}

const int32_t *zero_data_tokens(const zero_data *d) { return d->ids; }
const uint8_t *zero_data_starts(const zero_data *d) { return d->finished ? d->starts : NULL; }
uint64_t zero_data_count(const zero_data *d) { return d->n; }

const uint8_t *zero_data_mask(const zero_data *d) {
    for (size_t i = 0; i < d->n; i++)
        if (!d->mask[i]) return d->mask;
    return NULL;
}

void zero_data_get_stats(const zero_data *d, zero_data_stats *s) {
    *s = d->st;
    s->tokens = d->n;
    s->trained = 0;
    for (size_t i = 0; i < d->n; i++) s->trained += d->mask[i];
}

const int32_t *zero_data_last_example(const zero_data *d, const uint8_t **mask, size_t *n) {
    *n = d->finished ? 0 : (size_t)d->last_len;
    if (mask) *mask = d->mask + d->last_off;
    return d->ids + d->last_off;
}

zero_status zero_data_write(zero_data *d, const char *path) {
    if (!d->finished) {
        snprintf(d->err, sizeof d->err, "data: write before finish");
        return ZERO_ERR_STATE;
    }
    zero_error err;
    const uint32_t row = d->o.seq > 0 ? (uint32_t)(d->o.seq + 1) : 0;
    zero_status st = zero_tokfile_write(path, d->ids, zero_data_mask(d), d->starts, d->n,
                                        (uint32_t)zero_tokenizer_vocab_size(d->tok), row, &err);
    if (st) snprintf(d->err, sizeof d->err, "%s", err.msg);
    return st;
}
