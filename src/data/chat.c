/* src/data/chat.c — chats into ids with a loss mask: the model's own chat template (rendered by the
 * template layer; the assistant spans from its {% generation %} blocks or by rendering each assistant
 * turn twice), or the built-in formats (ChatML, Llama 3, Mistral [INST]) rendered here in C. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "data/internal.h"
#include "tokenizer/internal.h"
#include "zero/data.h"
#include "zero/template.h"

static const char *NAMES[] = {"none", "chatml", "llama3", "mistral", "model"};

zero_status zero_chat_format_parse(const char *name, zero_chat_format *out) {
    for (int i = 1; i < 5; i++)
        if (name && !strcmp(name, NAMES[i])) {
            *out = (zero_chat_format)i;
            return ZERO_OK;
        }
    return ZERO_ERR_INVALID_ARG;
}

const char *zero_chat_format_name(zero_chat_format f) { return f >= 0 && f <= 4 ? NAMES[f] : "invalid"; }

zero_chat_format zero_chat_format_detect(const zero_tokenizer *tok) {
    if (zero_tokenizer_chat_template(tok)) return ZERO_CHAT_MODEL;
    return zero_chat_format_builtin(tok);
}

zero_chat_format zero_chat_format_builtin(const zero_tokenizer *tok) {
    const char *tmpl = zero_tokenizer_chat_template(tok);
    if (tmpl && strstr(tmpl, "<|im_start|>")) return ZERO_CHAT_CHATML;
    if (tmpl && strstr(tmpl, "<|start_header_id|>")) return ZERO_CHAT_LLAMA3;
    if (tmpl && strstr(tmpl, "[INST]")) return ZERO_CHAT_MISTRAL;
    if (zero_tokenizer_token_id(tok, "<|im_start|>") >= 0) return ZERO_CHAT_CHATML;
    if (zero_tokenizer_token_id(tok, "<|start_header_id|>") >= 0) return ZERO_CHAT_LLAMA3;
    if (zero_tokenizer_token_id(tok, "[INST]") >= 0) return ZERO_CHAT_MISTRAL;
    return ZERO_CHAT_NONE;
}

typedef struct rtext {
    char *s;
    size_t n, cap;
    size_t (*spans)[2];
    size_t nspans, spans_cap;
} rtext;

static int radd(rtext *r, const char *s, size_t n) {
    if (r->n + n + 1 > r->cap) {
        size_t nc = r->cap ? 2 * r->cap : 1024;
        while (nc < r->n + n + 1) nc *= 2;
        char *ns = realloc(r->s, nc);
        if (!ns) return -1;
        r->s = ns;
        r->cap = nc;
    }
    memcpy(r->s + r->n, s, n);
    r->n += n;
    r->s[r->n] = 0;
    return 0;
}
static int rstr(rtext *r, const char *s) { return radd(r, s, strlen(s)); }

static int rspan(rtext *r, size_t a, size_t b) {
    if (r->nspans == r->spans_cap) {
        size_t nc = r->spans_cap ? 2 * r->spans_cap : 16;
        size_t(*ns)[2] = realloc(r->spans, nc * sizeof *ns);
        if (!ns) return -1;
        r->spans = ns;
        r->spans_cap = nc;
    }
    r->spans[r->nspans][0] = a;
    r->spans[r->nspans++][1] = b;
    return 0;
}

/* Jinja's trim: Python's str.strip() (whitespace by str.isspace()). */
static void py_strip(const char *s, size_t n, size_t *a, size_t *b) {
    size_t i = 0, j = n;
    while (i < n) {
        int len;
        if (zero__tk_utf8_valid(s + i, n - i) == 0 || !zero__tk_is_py_space(zero__tk_utf8_decode(s + i, n - i, &len)))
            break;
        i += (size_t)len;
    }
    while (j > i) {
        size_t q = j - 1;
        while (q > i && ((unsigned char)s[q] & 0xC0) == 0x80) q--;
        int len;
        if (zero__tk_utf8_valid(s + q, j - q) != j - q || !zero__tk_is_py_space(zero__tk_utf8_decode(s + q, j - q, &len)))
            break;
        j = q;
    }
    *a = i;
    *b = j;
}

static const char *tok_str(const zero_tokenizer *tok, int32_t id) {
    const char *s = id >= 0 ? zero_tokenizer_token(tok, id, NULL) : NULL;
    return s ? s : "";
}

static zero_status need(const zero_tokenizer *tok, zero_chat_format fmt, const char *token, zero_error *err) {
    if (zero_tokenizer_token_id(tok, token) >= 0) return ZERO_OK;
    snprintf(err->msg, sizeof err->msg, "chat format %s needs the token %s, which the tokenizer does not have "
             "(choose another format: chatml, llama3, mistral)", zero_chat_format_name(fmt), token);
    return ZERO_ERR_INVALID_ARG;
}

static int role_ok(const char *r) { return r && (!strcmp(r, "system") || !strcmp(r, "user") || !strcmp(r, "assistant")); }

/* The keys of an assistant message that are its turn as much as its content is: trained, and
 * changed in the rendering that locates the turn (assistant_span). */
static const char *const TURN_KEYS[] = {"tool_calls", "reasoning_content"};

static int put(cJSON *o, const char *key, cJSON *v);

/* 1 when a string or key of v holds the byte c. */
static int holds(const cJSON *v, char c) {
    if (v->string && strchr(v->string, c)) return 1;
    if (cJSON_IsString(v)) return strchr(v->valuestring, c) != NULL;
    for (const cJSON *x = v->child; x; x = x->next)
        if (holds(x, c)) return 1;
    return 0;
}

/* An assistant message o in the form that locates its turn: content and reasoning_content the
 * sentinel alt; each tool call's name alt, its arguments alt (a string) or {} (an object), its id alt
 * as many times as it has characters (templates check an id's length). The shape stays: what the
 * template tests (tool_calls defined, arguments a string, the number of calls) answers as before. */
static int turn_variant(cJSON *o, const char *alt) {
    int ok = put(o, "content", cJSON_CreateString(alt));
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(o, "reasoning_content");
    if (ok && cJSON_IsString(rc)) ok = put(o, "reasoning_content", cJSON_CreateString(alt));
    cJSON *tc = cJSON_GetObjectItemCaseSensitive(o, "tool_calls");
    for (cJSON *c = cJSON_IsArray(tc) ? tc->child : NULL; ok && c; c = c->next) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(c, "id");
        if (cJSON_IsString(id)) {
            char ids[256];
            size_t n = 0;
            for (const char *q = id->valuestring; *q && n < sizeof ids - 1; q++)
                if (((unsigned char)*q & 0xC0) != 0x80) ids[n++] = alt[0];
            ids[n] = 0;
            ok = put(c, "id", cJSON_CreateString(ids));
        }
        cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        if (!ok || !cJSON_IsObject(f)) continue;
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        ok = put(f, "name", cJSON_CreateString(alt)) &&
             (!a || put(f, "arguments", cJSON_IsString(a) ? cJSON_CreateString(alt) : cJSON_CreateObject()));
    }
    return ok;
}

/* Message i's JSON as an object, or NULL with err set; NULL json is an empty object. */
static cJSON *message_json(const char *json, int i, zero_error *err) {
    cJSON *o = json ? cJSON_Parse(json) : cJSON_CreateObject();
    if (!cJSON_IsObject(o)) {
        snprintf(err->msg, sizeof err->msg, "message %d: its JSON is not an object", i);
        cJSON_Delete(o);
        return NULL;
    }
    return o;
}

/* What the built-in formats render: system, user and assistant messages of a content string; tool
 * turns, tool calls and reasoning are the model template's. */
static zero_status builtin_check(zero_chat_format fmt, const zero_chat_message *m, const char *const *json, int n,
                                 const char *tools, zero_error *err) {
    const char *fname = zero_chat_format_name(fmt);
    if (tools) {
        snprintf(err->msg, sizeof err->msg, "a tools list in the built-in chat format %s is not supported yet (the "
                 "model's chat template renders it: --chat-template model)", fname);
        return ZERO_ERR_UNSUPPORTED;
    }
    for (int i = 0; i < n; i++) {
        if (m[i].role && !strcmp(m[i].role, "tool")) {
            snprintf(err->msg, sizeof err->msg, "message %d: role 'tool' in the built-in chat format %s is not "
                     "supported yet (the model's chat template renders it: --chat-template model)", i, fname);
            return ZERO_ERR_UNSUPPORTED;
        }
        if (!json || !json[i]) continue;
        cJSON *o = message_json(json[i], i, err);
        if (!o) return ZERO_ERR_INVALID_ARG;
        for (size_t k = 0; k < sizeof TURN_KEYS / sizeof TURN_KEYS[0]; k++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, TURN_KEYS[k]);
            if (v && !cJSON_IsNull(v)) {
                snprintf(err->msg, sizeof err->msg, "message %d: %s in the built-in chat format %s is not supported "
                         "yet (the model's chat template renders it: --chat-template model)", i, TURN_KEYS[k], fname);
                cJSON_Delete(o);
                return ZERO_ERR_UNSUPPORTED;
            }
        }
        cJSON_Delete(o);
    }
    return ZERO_OK;
}

static zero_status render(const zero_tokenizer *tok, zero_chat_format fmt, const zero_chat_message *m, int n, int gen,
                          rtext *r, zero_error *err) {
    for (int i = 0; i < n; i++)
        if (!role_ok(m[i].role) || !m[i].content) {
            snprintf(err->msg, sizeof err->msg, "message %d: role '%.40s': expected system, user or assistant with a "
                     "content string", i, m[i].role ? m[i].role : "(none)");
            return ZERO_ERR_INVALID_ARG;
        }
    zero_status st;
    if (fmt == ZERO_CHAT_CHATML) {
        if ((st = need(tok, fmt, "<|im_start|>", err)) || (st = need(tok, fmt, "<|im_end|>", err))) return st;
        for (int i = 0; i < n; i++) {
            const int asst = !strcmp(m[i].role, "assistant");
            if (rstr(r, "<|im_start|>") || rstr(r, m[i].role) || rstr(r, "\n")) goto nomem;
            const size_t a = r->n;
            if (rstr(r, m[i].content) || rstr(r, "<|im_end|>") || (asst && rspan(r, a, r->n)) || rstr(r, "\n"))
                goto nomem;
        }
        if (gen && rstr(r, "<|im_start|>assistant\n")) goto nomem;
    } else if (fmt == ZERO_CHAT_LLAMA3) {
        if ((st = need(tok, fmt, "<|start_header_id|>", err)) || (st = need(tok, fmt, "<|end_header_id|>", err)) ||
            (st = need(tok, fmt, "<|eot_id|>", err)))
            return st;
        if (rstr(r, tok_str(tok, zero_tokenizer_bos(tok)))) goto nomem;
        for (int i = 0; i < n; i++) {
            const int asst = !strcmp(m[i].role, "assistant");
            if (rstr(r, "<|start_header_id|>") || rstr(r, m[i].role) || rstr(r, "<|end_header_id|>\n\n")) goto nomem;
            size_t ca, cb;
            py_strip(m[i].content, strlen(m[i].content), &ca, &cb);
            const size_t a = r->n;
            if (radd(r, m[i].content + ca, cb - ca) || rstr(r, "<|eot_id|>") || (asst && rspan(r, a, r->n))) goto nomem;
        }
        if (gen && rstr(r, "<|start_header_id|>assistant<|end_header_id|>\n\n")) goto nomem;
    } else if (fmt == ZERO_CHAT_MISTRAL) {
        const char *sys = NULL;
        int i = 0;
        if (n > 0 && !strcmp(m[0].role, "system")) sys = m[0].content, i = 1;
        if (rstr(r, tok_str(tok, zero_tokenizer_bos(tok)))) goto nomem;
        for (int k = 0; i < n; i++, k++) {
            const char *want = k % 2 == 0 ? "user" : "assistant";
            if (strcmp(m[i].role, want)) {
                snprintf(err->msg, sizeof err->msg, "message %d: role '%s': the mistral format needs user and assistant "
                         "turns alternating, starting with user (a system message only first)", i, m[i].role);
                return ZERO_ERR_INVALID_ARG;
            }
            if (k % 2 == 0) {
                if (rstr(r, "[INST] ") || (k == 0 && sys && (rstr(r, sys) || rstr(r, "\n\n"))) || rstr(r, m[i].content) ||
                    rstr(r, " [/INST]"))
                    goto nomem;
            } else {
                const size_t a = r->n;
                if (rstr(r, m[i].content) || rstr(r, tok_str(tok, zero_tokenizer_eos(tok))) || rspan(r, a, r->n))
                    goto nomem;
            }
        }
    } else {
        snprintf(err->msg, sizeof err->msg, "no chat format: expected one of chatml, llama3, mistral");
        return ZERO_ERR_INVALID_ARG;
    }
    if (!r->s && radd(r, "", 0)) goto nomem;
    return ZERO_OK;
nomem:
    snprintf(err->msg, sizeof err->msg, "out of memory rendering a chat");
    return ZERO_ERR_NOMEM;
}

/* 1 when the token starting at a (ending where the next starts, or at e) meets [lo, hi). */
int zero__data_in_span(uint32_t a, uint32_t e, size_t lo, size_t hi) {
    if (e <= a) return lo <= a && a < hi;
    return a < hi && e > lo;
}

/* ---------------------------------------------------------------- the model's template */
/* Sets key of o to v (a new item, o's own), where the key is or at the end. */
static int put(cJSON *o, const char *key, cJSON *v) {
    if (!v) return 0;
    if (cJSON_GetObjectItemCaseSensitive(o, key)) return cJSON_ReplaceItemInObjectCaseSensitive(o, key, v);
    return cJSON_AddItemToObject(o, key, v);
}

/* The context transformers gives a chat template: messages (each message's JSON with its role and
 * content), tools, add_generation_prompt, bos_token and eos_token as tokenizer_config.json writes
 * them; message k in turn_variant's form (alt) when k >= 0. NULL with err
 * set when a message's JSON is not an object or memory runs out. */
static char *chat_context(const zero_tokenizer *tok, const zero_chat_message *m, const char *const *json, int n,
                          const char *tools, int gen, int k, const char *alt, zero_error *err) {
    cJSON *c = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(c, "messages");
    int ok = c && arr;
    for (int i = 0; ok && i < n; i++) {
        cJSON *o = message_json(json ? json[i] : NULL, i, err);
        if (!o) {
            cJSON_Delete(c);
            return NULL;
        }
        ok = cJSON_AddItemToArray(arr, o) && put(o, "role", cJSON_CreateString(m[i].role)) &&
             (i == k || !m[i].content || put(o, "content", cJSON_CreateString(m[i].content))) &&
             (i != k || turn_variant(o, alt));
    }
    if (ok && tools) {
        cJSON *tl = cJSON_Parse(tools);
        if (!tl || !cJSON_IsArray(tl)) {
            snprintf(err->msg, sizeof err->msg, "tools: expected a JSON array of function schemas");
            cJSON_Delete(tl);
            cJSON_Delete(c);
            return NULL;
        }
        ok = cJSON_AddItemToObject(c, "tools", tl);
    }
    ok = ok && cJSON_AddBoolToObject(c, "add_generation_prompt", gen);
    const char *bos = zero_tokenizer_config_token(tok, 0), *eos = zero_tokenizer_config_token(tok, 1);
    if (ok && bos) ok = cJSON_AddStringToObject(c, "bos_token", bos) != NULL;
    if (ok && eos) ok = cJSON_AddStringToObject(c, "eos_token", eos) != NULL;
    char *s = ok ? cJSON_PrintUnformatted(c) : NULL;
    cJSON_Delete(c);
    if (!s) snprintf(err->msg, sizeof err->msg, "out of memory rendering a chat");
    return s;
}

static zero_status render_model(const zero_tokenizer *tok, const zero_template *t, const zero_chat_message *m,
                                const char *const *json, int n, const char *tools, int gen, int k, const char *alt,
                                zero_template_output *out, zero_error *err) {
    err->msg[0] = 0;
    char *ctx = chat_context(tok, m, json, n, tools, gen, k, alt, err);
    if (!ctx) return strstr(err->msg, "out of memory") ? ZERO_ERR_NOMEM : ZERO_ERR_INVALID_ARG;
    zero_template_opts o;
    zero_template_opts_default(&o);
    zero_status st = zero_template_render(t, ctx, strlen(ctx), &o, out, err);
    free(ctx);
    return st;
}

/* An assistant turn in the rendering: [lo, hi) the bytes that change when the turn does, cap > hi
 * the end of the chat rendered up to the turn (the end of its rendering) or 0. */
typedef struct turn_span {
    size_t lo, hi, cap;
    int first; /* 1: up to the first special token in [hi, cap), not the last */
} turn_span;

/* Length of the rendering of the first n messages (with the generation prompt: gen) when it is a
 * prefix of r, else 0 (the template renders a shorter chat otherwise, or refuses it). */
static size_t prefix_render(const zero_tokenizer *tok, const zero_template *t, const zero_chat_message *m,
                            const char *const *json, int n, const char *tools, int gen, const zero_template_output *r) {
    zero_template_output o;
    zero_error e;
    if (render_model(tok, t, m, json, n, tools, gen, -1, NULL, &o, &e) != ZERO_OK) return 0;
    const size_t len = o.len <= r->len && !memcmp(o.text, r->text, o.len) ? o.len : 0;
    zero_template_output_free(&o);
    return len;
}

/* The span of assistant message k in the rendering r: the bytes that change when its content,
 * reasoning and tool calls are replaced by a one-character sentinel none of them holds
 * (turn_variant; from the first to the last byte that differ). A turn with tool calls or reasoning
 * also reaches back to where the chat before it, with the generation prompt, ends and forward to where
 * the chat up to it ends (cap): the scaffolding around its calls, when those renderings are prefixes;
 * where the chat up to it renders otherwise (Qwen 3 shows an empty <think> in a last turn), forward to
 * the first special token after it (its end of turn). */
static zero_status assistant_span(const zero_tokenizer *tok, const zero_template *t, const zero_chat_message *m,
                                  const char *const *json, int n, const char *tools, int k,
                                  const zero_template_output *r, turn_span *sp, zero_error *err) {
    static const char *const sentinels[] = {"\x7f", "\x1e", "\x1f", "\x1d", "\x1c"};
    cJSON *mj = json && json[k] ? cJSON_Parse(json[k]) : NULL;
    const char *alt = NULL;
    for (size_t i = 0; i < sizeof sentinels / sizeof sentinels[0] && !alt; i++)
        if (mj ? !holds(mj, sentinels[i][0]) : !m[k].content || !strchr(m[k].content, sentinels[i][0]))
            alt = sentinels[i];
    int more = 0; /* tool calls or reasoning */
    for (size_t i = 0; mj && i < sizeof TURN_KEYS / sizeof TURN_KEYS[0]; i++) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(mj, TURN_KEYS[i]);
        more |= v && !cJSON_IsNull(v);
    }
    cJSON_Delete(mj);
    if (!alt) {
        snprintf(err->msg, sizeof err->msg, "message %d: its strings hold every control character zero marks "
                 "assistant turns with (0x1c-0x1f, 0x7f)", k);
        return ZERO_ERR_INVALID_ARG;
    }
    zero_template_output o;
    zero_status st = render_model(tok, t, m, json, n, tools, 0, k, alt, &o, err);
    if (st) return st;
    size_t p = 0;
    while (p < r->len && p < o.len && r->text[p] == o.text[p]) p++;
    size_t s = 0;
    while (s < r->len - p && s < o.len - p && r->text[r->len - 1 - s] == o.text[o.len - 1 - s]) s++;
    zero_template_output_free(&o);
    *sp = (turn_span){p, r->len - s, 0, 0};
    if (more) {
        const size_t a = prefix_render(tok, t, m, json, k, tools, 1, r), b = prefix_render(tok, t, m, json, k + 1, tools, 0, r);
        if (a && a < sp->lo) sp->lo = a;
        if (b > sp->hi) sp->cap = b;
        else if (sp->hi < r->len) sp->cap = r->len, sp->first = 1;
    }
    return ZERO_OK;
}

zero_status zero__chat_encode_template(zero_tokenizer *tok, const zero_template *t, const zero_chat_message *msgs,
                                       const char *const *json, int n, const char *tools, int gen, zero_token_ids *ids,
                                       uint8_t **mask, size_t *mask_cap, zero_error *err) {
    for (int i = 0; i < n; i++)
        if (!(role_ok(msgs[i].role) || (msgs[i].role && !strcmp(msgs[i].role, "tool"))) ||
            (!msgs[i].content && !(json && json[i]))) {
            snprintf(err->msg, sizeof err->msg, "message %d: role '%.40s': expected system, user, assistant or tool "
                     "with a content string", i, msgs[i].role ? msgs[i].role : "(none)");
            return ZERO_ERR_INVALID_ARG;
        }
    zero_template_output r;
    zero_status st = render_model(tok, t, msgs, json, n, tools, gen, -1, NULL, &r, err);
    if (st) return st;
    turn_span *spans = NULL;
    size_t nspans = 0;
    int extend = 0; /* 1: each span also takes the special token that starts where it ends */
    if (zero_template_has_generation(t)) {
        spans = calloc(r.nspans + 1, sizeof *spans);
        if (!spans) st = ZERO_ERR_NOMEM;
        for (size_t k = 0; spans && k < r.nspans; k++) spans[nspans++] = (turn_span){r.spans[k][0], r.spans[k][1], 0, 0};
    } else if (mask) {
        extend = 1;
        spans = calloc((size_t)n + 1, sizeof *spans);
        if (!spans) st = ZERO_ERR_NOMEM;
        for (int k = 0; !st && k < n; k++)
            if (!strcmp(msgs[k].role, "assistant")) {
                st = assistant_span(tok, t, msgs, json, n, tools, k, &r, &spans[nspans], err);
                nspans += !st;
            }
    }
    const size_t first = ids->n;
    if (!st && (st = zero_tokenizer_encode(tok, r.text, r.len, ZERO_TOK_OFFSETS, ids)))
        snprintf(err->msg, sizeof err->msg, "%s", zero_tokenizer_last_error(tok));
    if (!st && mask) {
        if (ids->n > *mask_cap) {
            uint8_t *nm = realloc(*mask, ids->cap);
            if (!nm) st = ZERO_ERR_NOMEM;
            else {
                *mask = nm;
                *mask_cap = ids->cap;
            }
        }
        /* a capped span runs on to the end of the last special token that starts in [hi, cap): the
         * turn's end marker, not the newline after it */
        for (size_t k = 0; !st && k < nspans; k++) {
            size_t last = spans[k].hi;
            for (size_t i = first; spans[k].cap && i < ids->n; i++)
                if (ids->offsets[i] >= spans[k].hi && ids->offsets[i] < spans[k].cap &&
                    zero_tokenizer_is_special(tok, ids->ids[i])) {
                    last = i + 1 < ids->n ? ids->offsets[i + 1] : r.len;
                    if (spans[k].first) break;
                }
            spans[k].cap = last;
        }
        for (size_t i = first; !st && i < ids->n; i++) {
            const uint32_t a = ids->offsets[i], e = i + 1 < ids->n ? ids->offsets[i + 1] : (uint32_t)r.len;
            uint8_t v = 0;
            for (size_t k = 0; k < nspans && !v; k++)
                v = (uint8_t)(zero__data_in_span(a, e, spans[k].lo, spans[k].cap > spans[k].hi ? spans[k].cap : spans[k].hi) ||
                              (extend && a == spans[k].hi && zero_tokenizer_is_special(tok, ids->ids[i])));
            (*mask)[i] = v;
        }
    }
    if (st == ZERO_ERR_NOMEM) snprintf(err->msg, sizeof err->msg, "out of memory encoding a chat");
    free(spans);
    zero_template_output_free(&r);
    return st;
}

/* ---------------------------------------------------------------- a chat's JSON */
/* tool_calls as OpenAI writes them: [{"type": "function", "function": {"name": "...", "arguments": {...} or
 * "..."}}] (an "id" and other keys as they come). */
static int tool_calls_ok(const cJSON *tc) {
    if (!cJSON_IsArray(tc)) return 0;
    for (const cJSON *c = tc->child; c; c = c->next) {
        const cJSON *f = cJSON_GetObjectItemCaseSensitive(c, "function");
        const cJSON *a = cJSON_GetObjectItemCaseSensitive(f, "arguments");
        if (!cJSON_IsObject(c) || !cJSON_IsObject(f) || !cJSON_IsString(cJSON_GetObjectItemCaseSensitive(f, "name")) ||
            !(cJSON_IsObject(a) || cJSON_IsString(a)))
            return 0;
    }
    return 1;
}

#define WHY(...) (snprintf(why, cap, __VA_ARGS__), ZERO_ERR_INVALID_ARG)

/* Message i of a chat (e) into m and *json. */
static zero_status read_message(const cJSON *e, int i, zero_chat_message *m, char **json, char *why, size_t cap) {
    const cJSON *r = cJSON_GetObjectItemCaseSensitive(e, "role"), *cv = cJSON_GetObjectItemCaseSensitive(e, "content");
    const cJSON *tc = cJSON_GetObjectItemCaseSensitive(e, "tool_calls");
    const cJSON *rc = cJSON_GetObjectItemCaseSensitive(e, "reasoning_content");
    const int calls = tc && !cJSON_IsNull(tc);
    m->role = cJSON_IsString(r) ? r->valuestring : NULL;
    m->content = cJSON_IsString(cv) ? cv->valuestring : NULL;
    if (!cJSON_IsObject(e) || !m->role) return WHY("messages[%d]: expected {\"role\": ..., \"content\": \"...\"}", i);
    if (!role_ok(m->role) && strcmp(m->role, "tool"))
        return WHY("messages[%d]: role '%.40s' is not system, user, assistant or tool", i, m->role);
    if (calls && strcmp(m->role, "assistant"))
        return WHY("messages[%d]: tool_calls on a %s message: expected them on assistant messages", i, m->role);
    if (!m->content && !(calls && (!cv || cJSON_IsNull(cv))))
        return WHY("messages[%d]: expected {\"role\": ..., \"content\": \"...\"} (content null or absent only beside "
                   "tool_calls)", i);
    if (calls && !tool_calls_ok(tc))
        return WHY("messages[%d]: tool_calls: expected [{\"type\": \"function\", \"function\": {\"name\": \"...\", "
                   "\"arguments\": {...} or \"...\"}}]", i);
    if (rc && !cJSON_IsNull(rc) && !cJSON_IsString(rc)) return WHY("messages[%d]: reasoning_content: expected a string", i);
    /* role and content alone: the fields say it all */
    if (cJSON_GetArraySize(e) > 1 + (cv != NULL) && !(*json = cJSON_PrintUnformatted(e))) return ZERO_ERR_NOMEM;
    return ZERO_OK;
}

zero_status zero__chat_read(const cJSON *o, zero__chat *c, char *why, size_t cap) {
    memset(c, 0, sizeof *c);
    const cJSON *msgs = cJSON_GetObjectItemCaseSensitive(o, "messages"), *tl = cJSON_GetObjectItemCaseSensitive(o, "tools");
    if (!cJSON_IsArray(msgs) || cJSON_GetArraySize(msgs) == 0)
        return WHY("\"messages\": expected a non-empty array of {\"role\", \"content\"}");
    const int n = cJSON_GetArraySize(msgs);
    c->msgs = calloc((size_t)n, sizeof *c->msgs);
    c->json = calloc((size_t)n, sizeof *c->json);
    c->n = n;
    zero_status st = c->msgs && c->json ? ZERO_OK : ZERO_ERR_NOMEM;
    int i = 0;
    for (const cJSON *e = msgs->child; e && !st; e = e->next, i++) st = read_message(e, i, &c->msgs[i], &c->json[i], why, cap);
    if (!st && tl && !cJSON_IsNull(tl)) {
        int ok = cJSON_IsArray(tl);
        for (const cJSON *e = ok ? tl->child : NULL; e; e = e->next) ok &= cJSON_IsObject(e);
        if (!ok)
            st = WHY("\"tools\": expected an array of function schemas ([{\"type\": \"function\", \"function\": "
                     "{\"name\": ...}}])");
        else if (!(c->tools = cJSON_PrintUnformatted(tl)))
            st = ZERO_ERR_NOMEM;
    }
    if (st == ZERO_ERR_NOMEM) snprintf(why, cap, "out of memory reading a chat");
    if (st) zero__chat_free(c);
    return st;
}
#undef WHY

void zero__chat_free(zero__chat *c) {
    for (int i = 0; c->json && i < c->n; i++) free(c->json[i]);
    free(c->json);
    free(c->msgs);
    free(c->tools);
    memset(c, 0, sizeof *c);
}

zero_status zero_chat_encode_json(zero_tokenizer *tok, zero_chat_format fmt, const char *chat, size_t len,
                                  int add_generation_prompt, zero_token_ids *ids, uint8_t **mask, size_t *mask_cap,
                                  zero_error *err) {
    if (!chat || zero_json_check(chat, len, ZERO_DATA_MAX_VALUES, ZERO_JSON_MAX_DEPTH, err) != ZERO_OK)
        return ZERO_ERR_INVALID_ARG;
    cJSON *o = cJSON_ParseWithLength(chat, len);
    if (!cJSON_IsObject(o)) {
        snprintf(err->msg, sizeof err->msg, "a chat: expected a JSON object {\"messages\": [...], \"tools\"?: [...]}");
        cJSON_Delete(o);
        return o ? ZERO_ERR_INVALID_ARG : ZERO_ERR_NOMEM;
    }
    zero__chat c;
    zero_status st = zero__chat_read(o, &c, err->msg, sizeof err->msg);
    if (!st) {
        st = zero__chat_encode(tok, fmt, c.msgs, (const char *const *)c.json, c.n, c.tools, add_generation_prompt, ids,
                               mask, mask_cap, err);
        zero__chat_free(&c);
    }
    cJSON_Delete(o);
    return st;
}

zero_status zero_chat_encode(zero_tokenizer *tok, zero_chat_format fmt, const zero_chat_message *msgs, int n,
                             int add_generation_prompt, zero_token_ids *ids, uint8_t **mask, size_t *mask_cap,
                             zero_error *err) {
    return zero__chat_encode(tok, fmt, msgs, NULL, n, NULL, add_generation_prompt, ids, mask, mask_cap, err);
}

zero_status zero__chat_encode(zero_tokenizer *tok, zero_chat_format fmt, const zero_chat_message *msgs,
                              const char *const *json, int n, const char *tools, int add_generation_prompt,
                              zero_token_ids *ids, uint8_t **mask, size_t *mask_cap, zero_error *err) {
    if (fmt == ZERO_CHAT_MODEL) {
        const char *src = zero_tokenizer_chat_template(tok);
        zero_template *t = NULL;
        if (!src) {
            snprintf(err->msg, sizeof err->msg, "chat format model: the tokenizer has no chat template (choose a "
                     "built-in format: chatml, llama3, mistral)");
            return ZERO_ERR_INVALID_ARG;
        }
        zero_status st = zero_template_parse(&t, src, strlen(src), err);
        if (st) return st;
        st = zero__chat_encode_template(tok, t, msgs, json, n, tools, add_generation_prompt, ids, mask, mask_cap, err);
        zero_template_free(t);
        return st;
    }
    rtext r = {0};
    zero_status st = builtin_check(fmt, msgs, json, n, tools, err);
    if (st) return st;
    st = render(tok, fmt, msgs, n, add_generation_prompt, &r, err);
    if (st) goto done;
    const size_t first = ids->n;
    if ((st = zero_tokenizer_encode(tok, r.s, r.n, ZERO_TOK_OFFSETS, ids))) {
        snprintf(err->msg, sizeof err->msg, "%s", zero_tokenizer_last_error(tok));
        goto done;
    }
    if (mask) {
        if (ids->n > *mask_cap) {
            uint8_t *nm = realloc(*mask, ids->cap);
            if (!nm) {
                snprintf(err->msg, sizeof err->msg, "out of memory encoding a chat");
                st = ZERO_ERR_NOMEM;
                goto done;
            }
            *mask = nm;
            *mask_cap = ids->cap;
        }
        for (size_t i = first; i < ids->n; i++) {
            const uint32_t a = ids->offsets[i], e = i + 1 < ids->n ? ids->offsets[i + 1] : (uint32_t)r.n;
            uint8_t v = 0;
            for (size_t k = 0; k < r.nspans && !v; k++) v = (uint8_t)zero__data_in_span(a, e, r.spans[k][0], r.spans[k][1]);
            (*mask)[i] = v;
        }
    }
done:
    free(r.s);
    free(r.spans);
    return st;
}
