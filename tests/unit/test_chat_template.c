/* tests/unit/test_chat_template.c — the Jinja renderer against transformers: the published chat
 * templates of tests/data/chat_template (10 models) over its conversations, text byte for byte and
 * ids through the tokenizer fixtures (scripts/make_chat_template_fixtures.py); errors and limits. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "zero/data.h"
#include "zero/template.h"
#include "zero/tokenizer.h"

static char dir[2048];

static char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *p = malloc((size_t)sz + 1);
    if (!p || fread(p, 1, (size_t)sz, f) != (size_t)sz) exit(2);
    p[sz] = 0;
    fclose(f);
    if (n) *n = (size_t)sz;
    return p;
}

/* Renders src with ctx; returns the status, the text in *out (malloc'd) and the error in err. */
static zero_status render(const char *src, const char *ctx, char **out, zero_error *err) {
    zero_template *t = NULL;
    zero_status st = zero_template_parse(&t, src, strlen(src), err);
    if (st) return st;
    zero_template_output o;
    zero_template_opts opts;
    zero_template_opts_default(&opts);
    opts.now = 1796117400;
    st = zero_template_render(t, ctx, strlen(ctx), &opts, &o, err);
    zero_template_free(t);
    if (st) return st;
    *out = o.text;
    o.text = NULL;
    zero_template_output_free(&o);
    return ZERO_OK;
}

static void expect_text(const char *src, const char *ctx, const char *want) {
    char *out = NULL;
    zero_error err = {{0}};
    zero_status st = render(src, ctx, &out, &err);
    ZT_CHECKF(st == ZERO_OK && !strcmp(out, want), "template %s: got [%s] (%s), want [%s]", src, st ? "error" : out,
              err.msg, want);
    free(out);
}

static void expect_error(const char *src, const char *ctx, const char *want) {
    char *out = NULL;
    zero_error err = {{0}};
    zero_status st = render(src, ctx, &out, &err);
    ZT_CHECKF(st != ZERO_OK && strstr(err.msg, want), "template %s: status %d, message [%s], want [%s]", src, st,
              err.msg, want);
    free(out);
}

static void test_fixtures(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/conversations.jsonl", dir);
    char *convs = slurp(path, NULL);
    cJSON *conv[64];
    int nconv = 0;
    for (char *line = strtok(convs, "\n"); line && nconv < 64; line = strtok(NULL, "\n"))
        conv[nconv++] = cJSON_Parse(line);
    snprintf(path, sizeof path, "%s/expected.jsonl", dir);
    size_t n;
    char *exp = slurp(path, &n);
    int renders = 0, errors = 0, type_errors = 0, ids_checked = 0;
    const char *names[] = {"llama-3.1",    "llama-3.2", "qwen2.5", "qwen3",   "mistral-v0.3",
                           "mistral-nemo", "smollm2",   "gemma-2", "gemma-3", "phi-3.5"};
    zero_template *tmpl[10] = {0};
    zero_tokenizer *toks[4] = {0};
    const char *tokn[4] = {"llama3", "qwen2", "mistral", "smollm2"};
    for (int i = 0; i < 10; i++) {
        snprintf(path, sizeof path, "%s/%s.jinja", dir, names[i]);
        size_t len;
        char *src = slurp(path, &len);
        zero_error err;
        ZT_CHECKF(zero_template_parse(&tmpl[i], src, len, &err) == ZERO_OK, "%s: %s", names[i], err.msg);
        free(src);
    }
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/../tokenizer/%s", dir, tokn[i]);
        zero_error err;
        ZT_CHECKF(zero_tokenizer_load(&toks[i], path, &err) == ZERO_OK, "%s: %s", path, err.msg);
    }
    for (char *line = strtok(exp, "\n"); line; line = strtok(NULL, "\n")) {
        cJSON *r = cJSON_Parse(line);
        const char *name = cJSON_GetObjectItem(r, "template")->valuestring;
        int ti = -1;
        for (int i = 0; i < 10; i++)
            if (!strcmp(names[i], name)) ti = i;
        const int ci = cJSON_GetObjectItem(r, "conv")->valueint;
        if (ti < 0 || !tmpl[ti] || ci >= nconv) {
            ZT_FAIL("fixture line names %s conv %d", name, ci);
            cJSON_Delete(r);
            continue;
        }
        cJSON *ctx = cJSON_Duplicate(conv[ci], 1);
        cJSON_AddBoolToObject(ctx, "add_generation_prompt",
                              cJSON_IsTrue(cJSON_GetObjectItem(r, "add_generation_prompt")));
        const cJSON *bos = cJSON_GetObjectItem(r, "bos_token"), *eos = cJSON_GetObjectItem(r, "eos_token");
        if (cJSON_IsString(bos)) cJSON_AddStringToObject(ctx, "bos_token", bos->valuestring);
        if (cJSON_IsString(eos)) cJSON_AddStringToObject(ctx, "eos_token", eos->valuestring);
        char *ctxs = cJSON_PrintUnformatted(ctx);
        zero_template_opts o;
        zero_template_opts_default(&o);
        o.now = (int64_t)cJSON_GetObjectItem(r, "now")->valuedouble;
        zero_template_output out;
        zero_error err = {{0}};
        zero_status st = zero_template_render(tmpl[ti], ctxs, strlen(ctxs), &o, &out, &err);
        const cJSON *want = cJSON_GetObjectItem(r, "text"), *werr = cJSON_GetObjectItem(r, "error");
        const cJSON *wtype = cJSON_GetObjectItem(r, "error_type");
        if (werr && cJSON_IsString(wtype) && strcmp(wtype->valuestring, "TemplateError") != 0) {
            /* Python's own error (a None added to a string): the render fails here too, in its words */
            type_errors++;
            ZT_CHECKF(st == ZERO_ERR_FORMAT, "%s conv %d: expected an error as Python's %s [%s], got %s", name, ci,
                      wtype->valuestring, werr->valuestring, st ? err.msg : out.text);
        } else if (werr) {
            errors++;
            ZT_CHECKF(st != ZERO_OK && strstr(err.msg, werr->valuestring),
                      "%s conv %d: expected the error [%s], got %s", name, ci, werr->valuestring,
                      st ? err.msg : out.text);
        } else {
            renders++;
            ZT_CHECKF(st == ZERO_OK && out.len == strlen(want->valuestring) &&
                          !memcmp(out.text, want->valuestring, out.len),
                      "%s conv %d agp %d: got\n[%s] (%s)\nwant\n[%s]", name, ci,
                      cJSON_IsTrue(cJSON_GetObjectItem(r, "add_generation_prompt")), st ? "" : out.text, err.msg,
                      want->valuestring);
            const cJSON *ids = cJSON_GetObjectItem(r, "ids"), *tk = cJSON_GetObjectItem(r, "tokenizer");
            if (!st && ids) {
                int k = -1;
                for (int i = 0; i < 4; i++)
                    if (!strcmp(tokn[i], tk->valuestring)) k = i;
                zero_token_ids got = {0};
                ZT_OK(zero_tokenizer_encode(toks[k], out.text, out.len, 0, &got));
                int same = got.n == (size_t)cJSON_GetArraySize(ids);
                for (size_t i = 0; same && i < got.n; i++)
                    same = got.ids[i] == cJSON_GetArrayItem(ids, (int)i)->valueint;
                ZT_CHECKF(same, "%s conv %d: ids through %s differ (%zu vs %d)", name, ci, tk->valuestring, got.n,
                          cJSON_GetArraySize(ids));
                zero_token_ids_free(&got);
                ids_checked++;
            }
        }
        if (!st) zero_template_output_free(&out);
        free(ctxs);
        cJSON_Delete(ctx);
        cJSON_Delete(r);
    }
    printf("fixtures: %d renders equal transformers' text, %d errors equal its exceptions (and %d Python errors "
           "fail), %d id sequences equal\n",
           renders, errors, type_errors, ids_checked);
    ZT_CHECK(renders >= 350 && errors >= 30 && type_errors >= 4 && ids_checked >= 250);
    for (int i = 0; i < 10; i++) zero_template_free(tmpl[i]);
    for (int i = 0; i < 4; i++) zero_tokenizer_free(toks[i]);
    for (int i = 0; i < nconv; i++) cJSON_Delete(conv[i]);
    free(convs);
    free(exp);
}

static void test_language(void) {
    const char *ctx = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"x\": 7, \"s\": \" Ab c \", "
                      "\"d\": {\"b\": 1, \"a\": [1, 2.5, null, true]}}";
    /* whitespace control: trim_blocks, lstrip_blocks, '-' */
    expect_text("  {% if true %}\nA\n  {% endif %}\nB", ctx, "A\nB");
    expect_text("a  {%- if true -%}  b  {%- endif -%}  c", ctx, "abc");
    expect_text("{{ 'x' }}\n{{ 'y' }}\n", ctx, "x\ny");
    expect_text("{# c #}\nA{#- c -#}  B", ctx, "AB");
    /* expressions */
    expect_text("{{ x + 1 }} {{ x // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ x / 2 }} {{ 2 ** 10 }} {{ 'a' ~ x }}", ctx,
                "8 3 -4 2 3.5 1024 a7");
    expect_text("{{ s|trim }}|{{ s.strip() }}|{{ s.lstrip() }}|{{ s.upper() }}|{{ s|lower }}|{{ 'hello world'|title }}",
                ctx, "Ab c|Ab c|Ab c | AB C | ab c |Hello World");
    expect_text(
        "{{ 'a,b,,c'.split(',') }} {{ ' a  b '.split() }} {{ 'abc'[::-1] }} {{ 'héllo'[1:3] }} {{ [1,2,3][-1] }}", ctx,
        "['a', 'b', '', 'c'] ['a', 'b'] cba él 3");
    expect_text("{{ d|tojson }} {{ d.a|tojson(indent=2) }}", ctx,
                "{\"b\": 1, \"a\": [1, 2.5, null, true]} [\n  1,\n  2.5,\n  null,\n  true\n]");
    expect_text("{{ {'é': '日本\\n'}|tojson }} {{ d|tojson(separators=(',', ':'), sort_keys=true) }}", ctx,
                "{\"é\": \"日本\\n\"} {\"a\":[1,2.5,null,true],\"b\":1}");
    /* Python's full case mapping, json.dumps' ensure_ascii and a string indent (transformers' renders) */
    expect_text("{{ 'straße ﬁx ŉ'|upper }}|{{ 'İx'|lower }}|{{ 'Straße'.upper() }}", ctx, "STRASSE FIX ʼN|i̇x|STRASSE");
    expect_text(
        "{{ {'a': 'é😀', 'b': [1]}|tojson(ensure_ascii=true) }}|{{ {'a': [1, {'b': 2}]}|tojson(indent='\t') }}|"
        "{{ [1]|tojson(indent='') }}",
        ctx,
        "{\"a\": \"\\u00e9\\ud83d\\ude00\", \"b\": [1]}|{\n\t\"a\": [\n\t\t1,\n\t\t{\n\t\t\t\"b\": 2\n\t\t}\n\t]\n}|"
        "[\n1\n]");
    expect_text("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}{% for k in d %}{{ k }}{% endfor %}", ctx,
                "b=1;a=[1, 2.5, None, True];ba");
    expect_text(
        "{% for i in range(5) if i is odd %}{{ loop.index }}/{{ loop.length }}{{ ',' if not loop.last }}{% endfor %}",
        ctx, "1/2,2/2");
    expect_text("{% for i in [] %}x{% else %}empty{% endfor %}", ctx, "empty");
    expect_text("{% for i in range(10) %}{% if i == 3 %}{% break %}{% endif %}{% if i == 1 %}{% continue %}{% endif "
                "%}{{ i }}{% endfor %}",
                ctx, "02");
    expect_text("{% set ns = namespace(n=0) %}{% for i in range(4) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
                ctx, "6");
    expect_text("{% set v = 1 %}{% for i in range(3) %}{% set v = i %}{% endfor %}{{ v }}", ctx, "1");
    expect_text(
        "{% macro greet(name, p='Hi') %}{{ p }} {{ name }}{% endmacro %}{{ greet('A') }}/{{ greet('B', p='Yo') }}", ctx,
        "Hi A/Yo B");
    expect_text("{% set b %}in {{ x }}{% endset %}[{{ b }}]", ctx, "[in 7]");
    expect_text("{{ y is defined }} {{ x is number }} {{ s is string }} {{ d is mapping }} {{ none is none }} {{ x is "
                "divisibleby 7 }}",
                ctx, "False True True True True True");
    expect_text("{{ 'b' in 'abc' }} {{ 3 not in [1, 2] }} {{ 'a' in d }} {{ 1 < x <= 7 }} {{ x if x > 9 else 'no' }}",
                ctx, "True True True True no");
    expect_text("{{ messages|selectattr('role', 'equalto', 'user')|map(attribute='content')|join(', ') }}", ctx, "hi");
    expect_text("{{ [3, 1]|first }}{{ [3, 1]|last }}{{ 'abc'|length }}{{ y|default('dflt') }}{{ '5'|int + 1 }}{{ "
                "'a-b'.replace('-', '+') }}",
                ctx, "313dflt6a+b");
    expect_text("{{ '{} and {}'.format(1, 'two') }} {{ d.get('zz', 'none') }} {{ 'Abc'.startswith(('x', 'A')) }}", ctx,
                "1 and two none True");
    expect_text("{{ 0.1 + 0.2 }} {{ 1e20 * 10 }} {{ 2.0 }} {{ 1 == 1.0 }} {{ true + 1 }}", ctx,
                "0.30000000000000004 1e+21 2.0 True 2");
    expect_text("{{ strftime_now('%Y-%m-%d') }}", ctx, "2026-12-01");
    expect_text("{% generation %}A{% endgeneration %}", ctx, "A");
    /* errors: the template's own message, constructs outside the subset named with their line */
    expect_error("a\n{{ raise_exception('Roles must alternate') }}", ctx,
                 "chat template line 2: the template raised an exception: Roles must alternate");
    expect_error("x\n\n{{ s|wordwrap(3) }}", ctx, "chat template line 3: filter 'wordwrap' is not supported yet");
    expect_error("{% include 'other.jinja' %}", ctx, "chat template line 1: tag 'include' is not supported yet");
    expect_error("{{ x is prime }}", ctx, "test 'prime' is not supported yet");
    expect_error("{{ s.zfill(3) }}", ctx, "method string.zfill() is not supported yet");
    expect_error("{% if x %}unclosed", ctx, "never closed");
    expect_error("{{ 'a' + 1 }}", ctx, "'+' between a string and a integer");
    expect_error("{{ nope.attr }}", ctx, "'nope' is undefined");
    expect_error("{{ range(1000000) }}", ctx, "at most 100000");
    expect_error("{% break %}", ctx, "outside a for loop");
    expect_error("{{ x", ctx, "unexpected end of template");
    expect_error("{{ 1 / 0 }}", ctx, "division by zero");
}

static void test_generation_spans(void) {
    const char *src =
        "{% for m in messages %}<{{ m.role }}>{% if m.role == 'assistant' %}{% generation %}{{ m.content }}"
        "</s>{% endgeneration %}{% else %}{{ m.content }}{% endif %}{% endfor %}";
    zero_template *t;
    zero_error err;
    ZT_OK(zero_template_parse(&t, src, strlen(src), &err));
    ZT_CHECK(zero_template_has_generation(t));
    const char *ctx =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"q\"}, {\"role\": \"assistant\", \"content\": \"a1\"},"
        " {\"role\": \"user\", \"content\": \"q2\"}, {\"role\": \"assistant\", \"content\": \"é\"}]}";
    zero_template_output o;
    ZT_OK(zero_template_render(t, ctx, strlen(ctx), NULL, &o, &err));
    ZT_CHECK(!strcmp(o.text, "<user>q<assistant>a1</s><user>q2<assistant>é</s>"));
    ZT_EQ_INT(o.nspans, 2);
    if (o.nspans == 2) {
        ZT_EQ_INT(o.spans[0][0], 18);
        ZT_EQ_INT(o.spans[0][1], 24);
        ZT_EQ_INT(o.spans[1][0], 43);
        ZT_EQ_INT(o.spans[1][1], 49);
    }
    zero_template_output_free(&o);
    zero_template_free(t);
}

static void test_limits(void) {
    zero_template *t;
    zero_error err;
    const char *loop = "{% for i in range(100000) %}{% for j in range(100000) %}{{ j }}{% endfor %}{% endfor %}";
    ZT_OK(zero_template_parse(&t, loop, strlen(loop), &err));
    zero_template_opts o;
    zero_template_opts_default(&o);
    o.max_output = 1 << 20;
    zero_template_output out;
    ZT_CHECK(zero_template_render(t, "{}", 2, &o, &out, &err) == ZERO_ERR_NOSPACE && strstr(err.msg, "output"));
    o.max_output = UINT64_C(1) << 40;
    o.max_steps = 100000;
    ZT_CHECK(zero_template_render(t, "{}", 2, &o, &out, &err) == ZERO_ERR_NOSPACE && strstr(err.msg, "steps"));
    zero_template_free(t);
    const char *rec = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}";
    ZT_OK(zero_template_parse(&t, rec, strlen(rec), &err));
    ZT_CHECK(zero_template_render(t, "{}", 2, NULL, &out, &err) != ZERO_OK && strstr(err.msg, "deep"));
    zero_template_free(t);
    char deep[4000];
    size_t k = 0;
    k += (size_t)snprintf(deep, sizeof deep, "{{ ");
    for (int i = 0; i < 1000; i++) deep[k++] = '(';
    deep[k++] = '1';
    for (int i = 0; i < 1000; i++) deep[k++] = ')';
    memcpy(deep + k, " }}", 4);
    ZT_CHECK(zero_template_parse(&t, deep, strlen(deep), &err) == ZERO_ERR_UNSUPPORTED && strstr(err.msg, "nested"));
}

/* A fixture tokenizer with the chat template of file tmpl (relative to dir) and the given config. */
static zero_tokenizer *tok_with(const char *tokname, const char *tmpl, const char *bos, const char *eos) {
    char path[4096];
    snprintf(path, sizeof path, "%s/../tokenizer/%s/tokenizer.json", dir, tokname);
    size_t n;
    char *json = slurp(path, &n);
    snprintf(path, sizeof path, "%s/%s", dir, tmpl);
    char *src = slurp(path, NULL);
    cJSON *cfg = cJSON_CreateObject();
    if (bos) cJSON_AddStringToObject(cfg, "bos_token", bos);
    if (eos) cJSON_AddStringToObject(cfg, "eos_token", eos);
    cJSON_AddStringToObject(cfg, "chat_template", src);
    char *cfgs = cJSON_PrintUnformatted(cfg);
    zero_tokenizer *t = NULL;
    zero_error err;
    ZT_CHECKF(zero_tokenizer_load_json(&t, json, n, cfgs, &err) == ZERO_OK, "%s: %s", tokname, err.msg);
    free(json);
    free(src);
    free(cfgs);
    cJSON_Delete(cfg);
    return t;
}

/* {% generation %} masks: the built-in formats written with generation blocks, run as the model's
 * template, give transformers' ids and return_assistant_tokens_mask (tests/data/tokenizer/NAME.chat.ids). */
static void test_generation_masks(void) {
    const char *toks[] = {"qwen2", "smollm2", "llama3", "mistral"};
    const char *tmpls[] = {"gen-chatml.jinja", "gen-chatml.jinja", "gen-llama3.jinja", "gen-mistral.jinja"};
    const char *bos[] = {NULL, "<|im_start|>", "<|begin_of_text|>", "<s>"};
    const char *eos[] = {"<|im_end|>", "<|im_end|>", "<|end_of_text|>", "</s>"};
    char path[4096];
    snprintf(path, sizeof path, "%s/../tokenizer/chats.jsonl", dir);
    char *chats = slurp(path, NULL);
    int checked = 0;
    for (int t = 0; t < 4; t++) {
        zero_tokenizer *tok = tok_with(toks[t], tmpls[t], bos[t], eos[t]);
        ZT_CHECK(zero_chat_format_detect(tok) == ZERO_CHAT_MODEL);
        snprintf(path, sizeof path, "%s/../tokenizer/%s.chat.ids", dir, toks[t]);
        char *want = slurp(path, NULL);
        char *save1 = NULL, *save2 = NULL;
        char *chats_copy = chats ? strdup(chats) : NULL; /* strtok_r cuts it: freed as a whole below */
        char *cl = strtok_r(chats_copy, "\n", &save1), *wl = strtok_r(want, "\n", &save2);
        for (; cl && wl; cl = strtok_r(NULL, "\n", &save1), wl = strtok_r(NULL, "\n", &save2)) {
            cJSON *c = cJSON_Parse(cl), *ms = cJSON_GetObjectItem(c, "messages");
            zero_chat_message m[16];
            int nm = 0;
            for (cJSON *e = ms->child; e && nm < 16; e = e->next)
                m[nm++] = (zero_chat_message){cJSON_GetObjectItem(e, "role")->valuestring,
                                              cJSON_GetObjectItem(e, "content")->valuestring};
            zero_token_ids ids = {0};
            uint8_t *mask = NULL;
            size_t cap = 0;
            zero_error err;
            ZT_CHECKF(zero_chat_encode(tok, ZERO_CHAT_MODEL, m, nm, 0, &ids, &mask, &cap, &err) == ZERO_OK, "%s: %s",
                      toks[t], err.msg);
            int32_t wid[4096];
            uint8_t wm[4096];
            size_t ni = 0, nmk = 0;
            int in_mask = 0;
            for (char *p = wl; *p;) {
                while (*p == ' ') p++;
                if (!*p) break;
                if (*p == '|') {
                    in_mask = 1;
                    p++;
                    continue;
                }
                char *e;
                long v = strtol(p, &e, 10);
                if (in_mask) wm[nmk++] = (uint8_t)v;
                else wid[ni++] = (int32_t)v;
                p = e;
            }
            int same = ids.n == ni && nmk == ni;
            for (size_t i = 0; same && i < ni; i++) same = ids.ids[i] == wid[i] && mask[i] == wm[i];
            ZT_CHECKF(same, "%s: ids/mask differ from transformers' (%zu vs %zu tokens)", toks[t], ids.n, ni);
            checked++;
            zero_token_ids_free(&ids);
            free(mask);
            cJSON_Delete(c);
        }
        free(chats_copy);
        free(want);
        zero_tokenizer_free(tok);
    }
    ZT_EQ_INT(checked, 12);
    free(chats);
}

/* Without {% generation %}: each assistant turn's rendered content and the special token after it. */
static void masked_text(const char *tokname, const char *tmpl, const char *bos, const char *eos, const char *want) {
    zero_tokenizer *tok = tok_with(tokname, tmpl, bos, eos);
    zero_chat_message m[] = {{"system", "Answer in one word."},
                             {"user", "Sky colour?"},
                             {"assistant", " Blue "},
                             {"user", "Grass?"},
                             {"assistant", "Green 🌿"}};
    zero_token_ids ids = {0};
    uint8_t *mask = NULL;
    size_t cap = 0;
    zero_error err;
    ZT_CHECKF(zero_chat_encode(tok, ZERO_CHAT_MODEL, m, 5, 0, &ids, &mask, &cap, &err) == ZERO_OK, "%s: %s", tmpl,
              err.msg);
    char got[1024] = "";
    size_t k = 0;
    for (size_t i = 0; i < ids.n; i++) {
        if (!mask[i]) {
            if (k && got[k - 1] != '|') got[k++] = '|';
            continue;
        }
        char *s;
        size_t n;
        zero_tokenizer_decode(tok, &ids.ids[i], 1, 0, &s, &n);
        /* the decoded pieces of consecutive masked tokens, joined; '|' between runs */
        size_t j = i + 1;
        while (j < ids.n && mask[j]) j++;
        zero_tokenizer_free_text(s);
        zero_tokenizer_decode(tok, &ids.ids[i], j - i, 0, &s, &n);
        memcpy(got + k, s, n);
        k += n;
        zero_tokenizer_free_text(s);
        i = j - 1;
    }
    got[k] = 0;
    ZT_CHECKF(!strcmp(got, want), "%s: masked [%s], want [%s]", tmpl, got, want);
    zero_token_ids_free(&ids);
    free(mask);
    zero_tokenizer_free(tok);
}

/* The trained text of conversation ci of conversations.jsonl: runs of masked tokens joined by '|'. */
static void masked_chat(const char *tokname, const char *tmpl, const char *bos, const char *eos, int ci,
                        const char *want) {
    char path[4096];
    snprintf(path, sizeof path, "%s/conversations.jsonl", dir);
    char *convs = slurp(path, NULL), *line = convs;
    for (int i = 0; i < ci && line; i++) line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL;
    ZT_CHECK(line != NULL);
    if (!line) return;
    *strchr(line, '\n') = 0;
    zero_tokenizer *tok = tok_with(tokname, tmpl, bos, eos);
    zero_token_ids ids = {0};
    uint8_t *mask = NULL;
    size_t cap = 0;
    zero_error err;
    ZT_CHECKF(zero_chat_encode_json(tok, ZERO_CHAT_MODEL, line, strlen(line), 0, &ids, &mask, &cap, &err) == ZERO_OK,
              "%s: %s", tmpl, err.msg);
    char got[4096] = "";
    size_t k = 0;
    for (size_t i = 0; i < ids.n; i++) {
        size_t j = i;
        while (j < ids.n && mask[j]) j++;
        if (j == i) continue;
        char *t;
        size_t n;
        zero_tokenizer_decode(tok, &ids.ids[i], j - i, 0, &t, &n);
        if (k && k + 1 < sizeof got) got[k++] = '|';
        if (k + n < sizeof got) memcpy(got + k, t, n), k += n;
        zero_tokenizer_free_text(t);
        i = j;
    }
    got[k] = 0;
    ZT_CHECKF(!strcmp(got, want), "%s conv %d: trained [%s], want [%s]", tmpl, ci, got, want);
    zero_token_ids_free(&ids);
    free(mask);
    zero_tokenizer_free(tok);
    free(convs);
}

static void test_turn_masks(void) {
    /* tool calls are the assistant's turn: trained with their scaffolding and end of turn; tool
     * results, the tools list and headers are not; reasoning is trained where the template shows it */
    masked_chat("qwen2", "qwen2.5.jinja", NULL, "<|im_end|>", 13,
                "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 2}}\n"
                "</tool_call><|im_end|>|It is 21.5 °C and clear.<|im_end|>");
    masked_chat("qwen2", "qwen3.jinja", NULL, "<|im_end|>", 18,
                "<think>\nA tool knows.\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": "
                "{\"city\": \"Lima\"}}\n</tool_call><|im_end|>|<think>\nSay it.\n</think>\n\nFoggy.<|im_end|>");
    masked_chat("llama3", "llama-3.1.jinja", "<|begin_of_text|>", "<|eot_id|>", 15,
                "{\"name\": \"get_weather\", \"parameters\": \"{\\\"city\\\": \\\"Oslo\\\", \\\"days\\\": 3}\"}"
                "<|eot_id|>|Snow, about -4 °C.<|eot_id|>");
    masked_text("qwen2", "qwen2.5.jinja", NULL, "<|im_end|>", " Blue <|im_end|>|Green 🌿<|im_end|>|");
    masked_text("smollm2", "smollm2.jinja", "<|im_start|>", "<|im_end|>", " Blue <|im_end|>|Green 🌿<|im_end|>|");
    masked_text("llama3", "llama-3.1.jinja", "<|begin_of_text|>", "<|eot_id|>", "Blue<|eot_id|>|Green 🌿<|eot_id|>");
    masked_text("mistral", "mistral-v0.3.jinja", "<s>", "</s>", "Blue</s>|Green 🌿</s>");
    masked_text("qwen2", "qwen3.jinja", NULL, "<|im_end|>", " Blue <|im_end|>|Green 🌿<|im_end|>|");
}

/* The loss masks of tests/data/chat_template/masks.jsonl (the rule over transformers' renders and
 * tokenizers' offsets, scripts/make_chat_template_fixtures.py): every chat of conversations.jsonl
 * that a template with a fixture tokenizer renders — tool calls, tool results, tools, reasoning,
 * other keys included — through zero_chat_encode_json and through zero_data as zero train reads a
 * JSONL line (then EOS, trained after an assistant turn). */
static void test_fixture_masks(void) {
    char path[4096];
    snprintf(path, sizeof path, "%s/conversations.jsonl", dir);
    char *convs = slurp(path, NULL);
    char *conv[64];
    int nconv = 0;
    for (char *line = strtok(convs, "\n"); line && nconv < 64; line = strtok(NULL, "\n")) conv[nconv++] = line;
    snprintf(path, sizeof path, "%s/masks.jsonl", dir);
    char *exp = slurp(path, NULL);
    int checked = 0, tool_chats = 0, trained_calls = 0;
    char *save = NULL;
    for (char *line = strtok_r(exp, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cJSON *r = cJSON_Parse(line);
        const char *name = cJSON_GetObjectItem(r, "template")->valuestring;
        const int ci = cJSON_GetObjectItem(r, "conv")->valueint;
        const cJSON *bos = cJSON_GetObjectItem(r, "bos_token"), *eos = cJSON_GetObjectItem(r, "eos_token");
        const cJSON *wids = cJSON_GetObjectItem(r, "ids"), *wmask = cJSON_GetObjectItem(r, "mask");
        char tmpl[256];
        snprintf(tmpl, sizeof tmpl, "%s.jinja", name);
        zero_tokenizer *tok =
            tok_with(cJSON_GetObjectItem(r, "tokenizer")->valuestring, tmpl,
                     cJSON_IsString(bos) ? bos->valuestring : NULL, cJSON_IsString(eos) ? eos->valuestring : NULL);
        zero_token_ids ids = {0};
        uint8_t *mask = NULL;
        size_t cap = 0;
        zero_error err = {{0}};
        const zero_status st =
            zero_chat_encode_json(tok, ZERO_CHAT_MODEL, conv[ci], strlen(conv[ci]), 0, &ids, &mask, &cap, &err);
        const size_t n = (size_t)cJSON_GetArraySize(wids);
        int same = st == ZERO_OK && ids.n == n, first_diff = -1;
        for (size_t i = 0; same && i < n; i++)
            if (ids.ids[i] != cJSON_GetArrayItem(wids, (int)i)->valueint ||
                mask[i] != cJSON_GetArrayItem(wmask, (int)i)->valueint)
                same = 0, first_diff = (int)i;
        ZT_CHECKF(same, "%s conv %d: ids and mask differ from the fixture's (%s; %zu vs %zu tokens, first at %d)", name,
                  ci, st ? err.msg : "", ids.n, n, first_diff);
        /* the data path: the same ids and mask, then EOS */
        zero_data_opts o;
        zero_data_opts_default(&o);
        zero_data *d;
        ZT_OK(zero_data_create(&d, tok, &o, &err));
        ZT_CHECKF(zero_data_add_jsonl_line(d, conv[ci], strlen(conv[ci]), "c.jsonl:1") == ZERO_OK, "%s conv %d: %s",
                  name, ci, zero_data_last_error(d));
        const uint8_t *dm;
        size_t dn;
        const int32_t *di = zero_data_last_example(d, &dm, &dn);
        const int32_t eos_id = zero_tokenizer_eos(tok);
        const size_t with_eos = n + (n == 0 || ids.ids[n - 1] != eos_id); /* EOS unless the chat ends with it */
        ZT_CHECKF(st == ZERO_OK && di && dn == with_eos && !memcmp(di, ids.ids, n * sizeof *di) && !memcmp(dm, mask, n),
                  "%s conv %d: zero_data's example differs", name, ci);
        zero_data_free(d);
        /* the templates that render tool calls (SmolLM2's, Gemma's and Phi's drop them) */
        static const char *const callers = "llama-3.1 qwen2.5 qwen3 mistral-v0.3 mistral-nemo";
        if (strstr(conv[ci], "\"tool_calls\"") && strstr(callers, name)) {
            tool_chats++;
            /* the tool call is trained: the tokens of the call's name carry loss */
            int32_t kept[8192];
            size_t nk = 0;
            for (size_t i = 0; i < ids.n && nk < 8192; i++)
                if (mask[i]) kept[nk++] = ids.ids[i];
            char *txt;
            size_t tl;
            zero_tokenizer_decode(tok, kept, nk, 0, &txt, &tl);
            const int call = strstr(txt, "get_weather\"") != NULL;
            ZT_CHECKF(call, "%s conv %d: the tool call is not trained: [%s]", name, ci, txt);
            trained_calls += call;
            zero_tokenizer_free_text(txt);
        }
        checked++;
        zero_token_ids_free(&ids);
        free(mask);
        zero_tokenizer_free(tok);
        cJSON_Delete(r);
    }
    printf("masks: %d chats' ids and loss masks equal the fixture's (%d with tool calls, %d of them train the call)\n",
           checked, tool_chats, trained_calls);
    ZT_CHECK(checked >= 110 && tool_chats >= 15 && trained_calls == tool_chats);
    free(convs);
    free(exp);
}

static void test_chat_errors(void) {
    /* a template outside the subset is the tokenizer's fault, named with its line; raise_exception
     * is the chat's, with the template's message */
    zero_tokenizer *tok = tok_with("qwen2", "gemma-2.jinja", NULL, "<|im_end|>");
    zero_chat_message m[] = {{"system", "s"}, {"user", "u"}};
    zero_token_ids ids = {0};
    zero_error err;
    ZT_CHECK(zero_chat_encode(tok, ZERO_CHAT_MODEL, m, 2, 1, &ids, NULL, NULL, &err) == ZERO_ERR_FORMAT &&
             strstr(err.msg, "chat template line 1: the template raised an exception: System role not supported"));
    zero_tokenizer_free(tok);
    zero_data_opts o;
    zero_data_opts_default(&o);
    tok = tok_with("qwen2", "phi-3.5.jinja", NULL, "<|im_end|>");
    zero_data *d;
    ZT_OK(zero_data_create(&d, tok, &o, &err));
    const char *line =
        "{\"messages\": [{\"role\": \"user\", \"content\": \"u\"}, {\"role\": \"assistant\", \"content\": \"a\"}]}";
    ZT_OK(zero_data_add_jsonl_line(d, line, strlen(line), "x.jsonl:1"));
    const uint8_t *mk;
    size_t n;
    const int32_t *ids2 = zero_data_last_example(d, &mk, &n);
    ZT_CHECK(ids2 && n > 3);
    zero_data_free(d);
    zero_tokenizer_free(tok);
}

int main(void) {
    const char *src = getenv("ZERO_SOURCE_DIR");
    snprintf(dir, sizeof dir, "%s/tests/data/chat_template", src ? src : ".");
    test_language();
    test_generation_spans();
    test_limits();
    test_fixtures();
    test_generation_masks();
    test_turn_masks();
    test_fixture_masks();
    test_chat_errors();
    return zt_finish("test_chat_template");
}
