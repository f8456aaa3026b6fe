/* tests/unit/test_data.c — the data layer: chat renderings and assistant masks equal transformers'
 * apply_chat_template (fixtures), prompt/completion, ShareGPT and Alpaca ids and masks, JSON array
 * files, EOS, bad lines, packing, token files. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"
#include "zero/zero.h"
#include "zero/data.h"

static char dir[2048], tmpdir[256];

static char *slurp(const char *name, size_t *len) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(2);
    }
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (!b || fread(b, 1, (size_t)n, f) != (size_t)n) exit(2);
    b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* Line `k` (0-based) of buf: "ids | mask" parsed into ids[] and mask[]; returns the id count (-1: no line). */
static int fixture_row(const char *buf, int k, int32_t *ids, uint8_t *mask, int *nmask) {
    const char *p = buf;
    for (int i = 0; i < k; i++) {
        p = strchr(p, '\n');
        if (!p) return -1;
        p++;
    }
    if (!*p) return -1;
    int n = 0, m = 0, in_mask = 0;
    while (*p && *p != '\n') {
        if (*p == ' ') {
            p++;
            continue;
        }
        if (*p == '|') {
            in_mask = 1;
            p++;
            continue;
        }
        char *end;
        long v = strtol(p, &end, 10);
        if (in_mask) mask[m++] = (uint8_t)v;
        else ids[n++] = (int32_t)v;
        p = end;
    }
    *nmask = m;
    return n;
}

static zero_tokenizer *load(const char *name) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    zero_tokenizer *t = NULL;
    zero_error err;
    if (zero_tokenizer_load(&t, path, &err)) {
        fprintf(stderr, "load %s: %s\n", path, err.msg);
        exit(2);
    }
    return t;
}

static int32_t ids_buf[4096];
static uint8_t mask_buf[4096];

static void test_chats(void) {
    static const char *names[] = {"qwen2", "smollm2", "llama3", "mistral"};
    static const zero_chat_format fmts[] = {ZERO_CHAT_CHATML, ZERO_CHAT_CHATML, ZERO_CHAT_LLAMA3, ZERO_CHAT_MISTRAL};
    size_t cn;
    char *chats = slurp("chats.jsonl", &cn);
    for (int t = 0; t < 4; t++) {
        zero_tokenizer *tok = load(names[t]);
        ZT_EQ_INT(zero_chat_format_detect(tok), fmts[t]);
        char file[256];
        size_t fn;
        snprintf(file, sizeof file, "%s.chat.ids", names[t]);
        char *fix = slurp(file, &fn);
        const char *line = chats;
        for (int k = 0; line && *line; k++) {
            const char *nl = strchr(line, '\n');
            cJSON *o = cJSON_ParseWithLength(line, nl ? (size_t)(nl - line) : strlen(line));
            cJSON *msgs = cJSON_GetObjectItem(o, "messages");
            zero_chat_message m[16];
            int n = 0;
            for (cJSON *e = msgs->child; e && n < 16; e = e->next, n++) {
                m[n].role = cJSON_GetObjectItem(e, "role")->valuestring;
                m[n].content = cJSON_GetObjectItem(e, "content")->valuestring;
            }
            zero_token_ids got = {0};
            uint8_t *mask = NULL;
            size_t mcap = 0;
            zero_error err;
            ZT_OK(zero_chat_encode(tok, fmts[t], m, n, 0, &got, &mask, &mcap, &err));
            int nm;
            const int ne = fixture_row(fix, k, ids_buf, mask_buf, &nm);
            ZT_CHECKF(ne == (int)got.n && !memcmp(got.ids, ids_buf, got.n * sizeof *ids_buf),
                      "%s chat %d: %zu ids, expected %d (apply_chat_template)", names[t], k, got.n, ne);
            ZT_CHECKF(nm == (int)got.n && !memcmp(mask, mask_buf, got.n), "%s chat %d: assistant mask differs", names[t], k);
            /* with add_generation_prompt: the same ids, then the assistant header */
            zero_token_ids gen = {0};
            ZT_OK(zero_chat_encode(tok, fmts[t], m, n, 1, &gen, NULL, NULL, &err));
            ZT_CHECK(gen.n >= got.n && !memcmp(gen.ids, got.ids, got.n * sizeof *got.ids));
            ZT_CHECK(fmts[t] == ZERO_CHAT_MISTRAL ? gen.n == got.n : gen.n > got.n);
            zero_token_ids_free(&gen);
            zero_token_ids_free(&got);
            free(mask);
            cJSON_Delete(o);
            line = nl ? nl + 1 : NULL;
        }
        free(fix);
        zero_tokenizer_free(tok);
    }
    free(chats);
    /* refusals: a format whose markers the tokenizer lacks; a role out of order for mistral */
    zero_tokenizer *tok = load("gpt2");
    ZT_EQ_INT(zero_chat_format_detect(tok), ZERO_CHAT_NONE);
    zero_chat_message m[2] = {{"user", "hi"}, {"assistant", "yo"}};
    zero_token_ids ids = {0};
    zero_error err;
    ZT_EQ_INT(zero_chat_encode(tok, ZERO_CHAT_CHATML, m, 2, 0, &ids, NULL, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "needs the token <|im_start|>"), "%s", err.msg);
    zero_tokenizer_free(tok);
    tok = load("mistral");
    zero_chat_message bad[2] = {{"assistant", "yo"}, {"user", "hi"}};
    ZT_EQ_INT(zero_chat_encode(tok, ZERO_CHAT_MISTRAL, bad, 2, 0, &ids, NULL, NULL, &err), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(err.msg, "alternating"), "%s", err.msg);
    zero_token_ids_free(&ids);
    zero_tokenizer_free(tok);
    zero_chat_format f;
    ZT_OK(zero_chat_format_parse("llama3", &f));
    ZT_EQ_INT(f, ZERO_CHAT_LLAMA3);
    ZT_EQ_INT(zero_chat_format_parse("jinja", &f), ZERO_ERR_INVALID_ARG);
}

static void test_prompt_completion(void) {
    static const char *names[] = {"gpt2",    "llama3",    "qwen2",       "smollm2",   "llama2",
                                  "mistral", "metaspace", "gpt2_prefix", "llama2_spm", "tekken"};
    size_t pn;
    char *pcs = slurp("pc.jsonl", &pn);
    for (int t = 0; t < (int)(sizeof names / sizeof names[0]); t++) {
        zero_tokenizer *tok = load(names[t]);
        char file[256];
        size_t fn;
        snprintf(file, sizeof file, "%s.pc.ids", names[t]);
        char *fix = slurp(file, &fn);
        zero_data *d;
        zero_error err;
        ZT_OK(zero_data_create(&d, tok, NULL, &err));
        const char *line = pcs;
        for (int k = 0; line && *line; k++) {
            const char *nl = strchr(line, '\n');
            ZT_OK(zero_data_add_jsonl_line(d, line, nl ? (size_t)(nl - line) : strlen(line), "pc.jsonl"));
            const uint8_t *mask;
            size_t n;
            const int32_t *ids = zero_data_last_example(d, &mask, &n);
            int nm;
            const int ne = fixture_row(fix, k, ids_buf, mask_buf, &nm);
            /* the example is the fixture's ids, then EOS with loss */
            ZT_CHECKF((int)n == ne + 1 && !memcmp(ids, ids_buf, (size_t)ne * sizeof *ids),
                      "%s prompt/completion %d: %zu ids, expected %d + EOS", names[t], k, n, ne);
            ZT_CHECKF(!memcmp(mask, mask_buf, (size_t)ne), "%s prompt/completion %d: mask differs", names[t], k);
            ZT_EQ_INT(ids[n - 1], zero_tokenizer_eos(tok));
            ZT_EQ_INT(mask[n - 1], 1);
            line = nl ? nl + 1 : NULL;
        }
        zero_data_free(d);
        free(fix);
        zero_tokenizer_free(tok);
    }
    free(pcs);
}

static void write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(p, 1, n, f);
    fclose(f);
}

/* The stream zero_data_add_file makes of FILE (seq 0): each fixture row's ids and mask, then EOS
 * unless the row ends with it (its mask: eos_mask). Returns 0 when equal, else says where. */
static int stream_equals_fixture(zero_tokenizer *tok, const char *file, const char *fixture, uint8_t eos_mask,
                                 const char *what) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    zero_data *d;
    zero_error err;
    ZT_OK(zero_data_create(&d, tok, NULL, &err));
    if (zero_data_add_file(d, path) != ZERO_OK || zero_data_finish(d) != ZERO_OK) {
        ZT_FAIL("%s: %s", what, zero_data_last_error(d));
        zero_data_free(d);
        return -1;
    }
    size_t fn;
    char *fix = slurp(fixture, &fn);
    const int32_t *ids = zero_data_tokens(d), eos = zero_tokenizer_eos(tok);
    const uint8_t *mask = zero_data_mask(d);
    const uint64_t n = zero_data_count(d);
    uint64_t at = 0;
    int rows = 0, bad = 0, nm;
    for (int ne; !bad && (ne = fixture_row(fix, rows, ids_buf, mask_buf, &nm)) >= 0; rows++) {
        const int add = ids_buf[ne - 1] != eos;
        if (add) ids_buf[ne] = eos, mask_buf[ne] = eos_mask;
        if (at + (uint64_t)(ne + add) > n || memcmp(ids + at, ids_buf, (size_t)(ne + add) * sizeof *ids) ||
            (mask ? memcmp(mask + at, mask_buf, (size_t)(ne + add)) != 0 : memchr(mask_buf, 0, (size_t)(ne + add)) != NULL)) {
            ZT_FAIL("%s: example %d differs from %s (tokens %llu..)", what, rows, fixture, (unsigned long long)at);
            bad = 1;
        }
        at += (uint64_t)(ne + add);
    }
    if (!bad && at != n) ZT_FAIL("%s: %llu tokens, the fixture's %d examples make %llu", what, (unsigned long long)n, rows,
                                 (unsigned long long)at);
    zero_data_stats st;
    zero_data_get_stats(d, &st);
    ZT_EQ_INT(st.examples, rows);
    free(fix);
    zero_data_free(d);
    return bad;
}

/* ShareGPT and Alpaca, as JSONL and as one JSON array: the ids and masks the fixture script computed
 * with transformers (apply_chat_template on the messages axolotl maps ShareGPT to) and tokenizers
 * (the Alpaca prompt + output, loss on the output, checked there against Stanford's rule). */
static void test_sharegpt_alpaca(void) {
    static const char *chat[] = {"qwen2", "smollm2", "llama3", "mistral"};
    for (int t = 0; t < 4; t++) {
        zero_tokenizer *tok = load(chat[t]);
        char fx[256], what[256];
        snprintf(fx, sizeof fx, "%s.sharegpt.ids", chat[t]);
        snprintf(what, sizeof what, "%s sharegpt.jsonl", chat[t]);
        stream_equals_fixture(tok, "sharegpt.jsonl", fx, 1, what);
        snprintf(what, sizeof what, "%s sharegpt.json", chat[t]);
        stream_equals_fixture(tok, "sharegpt.json", fx, 1, what);
        zero_tokenizer_free(tok);
    }
    static const char *all[] = {"gpt2", "llama3", "qwen2", "smollm2", "llama2", "mistral", "metaspace", "gpt2_prefix"};
    for (int t = 0; t < 8; t++) {
        zero_tokenizer *tok = load(all[t]);
        char fx[256], what[256];
        snprintf(fx, sizeof fx, "%s.alpaca.ids", all[t]);
        snprintf(what, sizeof what, "%s alpaca.jsonl", all[t]);
        stream_equals_fixture(tok, "alpaca.jsonl", fx, 1, what);
        snprintf(what, sizeof what, "%s alpaca.json", all[t]);
        stream_equals_fixture(tok, "alpaca.json", fx, 1, what);
        zero_tokenizer_free(tok);
    }
    /* a ShareGPT line is the {"messages"} line it maps to, token for token */
    zero_tokenizer *tok = load("mistral");
    zero_data *a, *b;
    zero_error err;
    ZT_OK(zero_data_create(&a, tok, NULL, &err));
    ZT_OK(zero_data_create(&b, tok, NULL, &err));
    const char *sg = "{\"system\": \"S\", \"conversations\": [{\"from\": \"human\", \"value\": \"q\"}, {\"from\": \"model\", "
                     "\"value\": \"r\"}, {\"from\": \"user\", \"value\": \"q2\"}]}";
    const char *ms = "{\"messages\": [{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"q\"}, "
                     "{\"role\": \"assistant\", \"content\": \"r\"}, {\"role\": \"user\", \"content\": \"q2\"}]}";
    ZT_OK(zero_data_add_jsonl_line(a, sg, strlen(sg), "a"));
    ZT_OK(zero_data_add_jsonl_line(b, ms, strlen(ms), "b"));
    const uint8_t *ma, *mb;
    size_t na, nb;
    const int32_t *ia = zero_data_last_example(a, &ma, &na), *ib = zero_data_last_example(b, &mb, &nb);
    ZT_CHECK(na > 4 && na == nb && !memcmp(ia, ib, na * sizeof *ia) && !memcmp(ma, mb, na));
    ZT_EQ_INT(ma[na - 1], 0); /* the last turn is the user's: its EOS carries no loss */
    /* mistral's order rule holds for ShareGPT too: gpt first is a bad example with its line */
    const char *gpt_first = "{\"conversations\": [{\"from\": \"gpt\", \"value\": \"r\"}, {\"from\": \"human\", \"value\": \"q\"}]}";
    ZT_EQ_INT(zero_data_add_jsonl_line(a, gpt_first, strlen(gpt_first), "m.jsonl:4"), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(zero_data_last_error(a), "m.jsonl:4: ") && strstr(zero_data_last_error(a), "alternating"), "%s",
              zero_data_last_error(a));
    zero_data_free(a);
    zero_data_free(b);
    zero_tokenizer_free(tok);
}

typedef struct item_log {
    int n, refused;
    uint64_t lines[16];
    size_t lens[16];
    char first[64];
} item_log;

static zero_status log_item(void *ctx, const char *text, size_t len, uint64_t lineno) {
    item_log *l = ctx;
    if (l->n < 16) l->lines[l->n] = lineno, l->lens[l->n] = text ? len : 0;
    if (!text) l->refused++;
    if (l->n == 0 && text) snprintf(l->first, sizeof l->first, "%.*s", (int)(len < 63 ? len : 63), text);
    l->n++;
    return ZERO_OK;
}

/* The JSON array reader: elements cut right around strings, brackets and block boundaries, the
 * line each starts on, one longer than the bound refused without being held, and the array's own
 * grammar refused with its line. */
static void test_json_arrays(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/a.json", tmpdir);
    /* element 2 spans two 64 KiB blocks; strings hold ',', ']', '{' and escaped quotes */
    const size_t big = 100000;
    char *text = malloc(big + 256);
    int k = sprintf(text, "\n  [ {\"text\": \"a],\\\"{b\"} ,\n{\"text\": \"");
    memset(text + k, 'x', big);
    k += (int)big;
    k += sprintf(text + k, "\"}\n,\n\n[1, {\"c\": [2]}], \"s\\\\\" ]  \n");
    write_bytes(path, text, (size_t)k);
    item_log l = {0};
    zero_error err;
    int is_array;
    ZT_OK(zero_data_foreach_example(path, 1, 1 << 20, log_item, &l, &is_array, &err));
    ZT_EQ_INT(is_array, 1);
    ZT_EQ_INT(l.n, 4);
    ZT_EQ_INT(l.refused, 0);
    ZT_CHECKF(!strcmp(l.first, "{\"text\": \"a],\\\"{b\"}"), "first element: %s", l.first);
    ZT_EQ_INT(l.lines[0], 2);
    ZT_EQ_INT(l.lines[1], 3);
    ZT_EQ_INT(l.lens[1], big + 12);
    ZT_EQ_INT(l.lines[2], 6);
    ZT_EQ_INT(l.lens[2], 15);
    ZT_EQ_INT(l.lines[3], 6);
    ZT_EQ_INT(l.lens[3], 5);
    /* with a bound below element 2: refused (NULL, a count past the bound) as soon as it passes
     * it, and the elements after it still come */
    memset(&l, 0, sizeof l);
    ZT_OK(zero_data_foreach_example(path, 1, 1000, log_item, &l, NULL, &err));
    ZT_EQ_INT(l.n, 4);
    ZT_EQ_INT(l.refused, 1);
    ZT_EQ_INT(l.lens[1], 0);
    ZT_EQ_INT(l.lines[1], 3);
    ZT_EQ_INT(l.lens[2], 15);
    /* json_array 0 (a *.jsonl file): lines, whatever the first byte */
    memset(&l, 0, sizeof l);
    ZT_OK(zero_data_foreach_example(path, 0, 1 << 20, log_item, &l, &is_array, &err));
    ZT_EQ_INT(is_array, 0);
    ZT_EQ_INT(l.n, 6);
    free(text);
    /* the array's grammar: each refusal names the file, the line and what is wrong */
    static const struct { const char *text, *needle; } bad[] = {
        {"[{\"text\": \"a\"},\n]", "a.json:2: a ',' before ']'"},
        {"[\n,{\"text\": \"a\"}]", "a.json:2: expected an element before ','"},
        {"[{\"text\": \"a\"},,{}]", "a.json:1: expected an element before ','"},
        {"[{\"text\": \"a\"}\n", "a.json:2: the array ends before its closing ']'"},
        {"[{\"text\": \"a]", "the array ends before its closing ']'"},
        {"[{\"text\": \"a\"}]\n\n{\"text\": \"b\"}\n", "a.json:3: bytes after the array's closing ']'"},
        {"[{\"text\": \"a\"}][]", "bytes after the array's closing ']'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        write_bytes(path, bad[i].text, strlen(bad[i].text));
        memset(&l, 0, sizeof l);
        err.msg[0] = 0;
        ZT_EQ_INT(zero_data_foreach_example(path, 1, 1 << 20, log_item, &l, NULL, &err), ZERO_ERR_FORMAT);
        ZT_CHECKF(strstr(err.msg, bad[i].needle), "array %zu: '%s' lacks '%s'", i, err.msg, bad[i].needle);
    }
    /* through zero_data: an element's own errors are bad examples named by the line it starts on,
     * skipped and counted with skip_bad; [] holds no example */
    zero_tokenizer *tok = load("qwen2");
    const char *arr = "[\n  {\"text\": \"ok\"},\n  {\"text\": \"a\", \"text\": \"b\"},\n  3,\n  {\"instruction\": \"i\", "
                      "\"output\": \"o\"}\n]\n";
    write_bytes(path, arr, strlen(arr));
    zero_data *d;
    zero_data_opts o;
    zero_data_opts_default(&o);
    ZT_OK(zero_data_create(&d, tok, &o, &err));
    ZT_EQ_INT(zero_data_add_file(d, path), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(zero_data_last_error(d), "a.json:3: ") && strstr(zero_data_last_error(d), "appears twice"), "%s",
              zero_data_last_error(d));
    zero_data_free(d);
    o.skip_bad = 1;
    ZT_OK(zero_data_create(&d, tok, &o, &err));
    ZT_OK(zero_data_add_file(d, path));
    zero_data_stats st;
    zero_data_get_stats(d, &st);
    ZT_EQ_INT(st.examples, 2);
    ZT_EQ_INT(st.skipped, 2);
    ZT_CHECKF(strstr(st.first_skipped, "a.json:3: "), "%s", st.first_skipped);
    zero_data_free(d);
    write_bytes(path, " [ ] ", 5);
    ZT_OK(zero_data_create(&d, tok, &o, &err));
    ZT_OK(zero_data_add_file(d, path));
    ZT_EQ_INT(zero_data_finish(d), ZERO_ERR_FORMAT);
    zero_data_free(d);
    zero_tokenizer_free(tok);
    unlink(path);
}

static void test_text_and_bad_lines(void) {
    zero_tokenizer *tok = load("llama3");
    zero_data *d;
    zero_error err;
    zero_data_opts o;
    zero_data_opts_default(&o);
    o.seq = 16;
    ZT_OK(zero_data_create(&d, tok, &o, &err));
    /* {"text"}: BOS (no loss), the text, EOS */
    const char *line = "{\"text\": \"Hello world\"}";
    ZT_OK(zero_data_add_jsonl_line(d, line, strlen(line), "x.jsonl:1"));
    const uint8_t *mask;
    size_t n;
    const int32_t *ids = zero_data_last_example(d, &mask, &n);
    zero_token_ids ref = {0};
    ZT_OK(zero_tokenizer_encode(tok, "Hello world", 11, ZERO_TOK_ADD_SPECIAL, &ref));
    ZT_CHECK(n == ref.n + 1 && !memcmp(ids, ref.ids, ref.n * sizeof *ids));
    ZT_EQ_INT(mask[0], 0);
    for (size_t i = 1; i < n; i++) ZT_EQ_INT(mask[i], 1);
    zero_token_ids_free(&ref);
    /* every bad line: refused with file:line and the reason */
    static const struct { const char *line, *needle; } bad[] = {
        {"{\"text\": \"unterminated", "x.jsonl:7: not valid JSON at column 10 (byte 9): a string that does not end"},
        {"{\"text\": \"a\"}{\"text\": \"b\"}", "bytes after the JSON value"},
        {"{\"text\": \"a\", \"text\": \"b\"}", "the key \"text\" appears twice"},
        {"{\"text\": \"a\xff\"}", "0xff inside a string is not UTF-8"},
        {"{\"text\": \"a\\u0000b\"}", "NUL character"},
        {"{\"prompt\": \"a\", \"completion\": \"b\", \"text\": \"c\"}", "found \"prompt\"/\"completion\" and \"text\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"prompt\": \"a\", \"completion\": \"b\"}",
         "found \"messages\" and \"prompt\"/\"completion\""},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"text\": \"c\"}", "found \"messages\" and \"text\""},
        {"[1, 2]", "x.jsonl:7: expected a JSON object"},
        {"{\"txt\": \"a\"}", "expected \"text\", \"prompt\" and \"completion\", \"messages\", \"conversations\" "
                           "(ShareGPT) or \"instruction\" and \"output\" (Alpaca)"},
        {"{\"messages\": [], \"conversations\": []}", "found \"messages\" and \"conversations\""},
        {"{\"instruction\": \"a\", \"output\": \"b\", \"text\": \"c\"}", "found \"instruction\" and \"text\""},
        {"{\"conversations\": [], \"prompt\": \"a\", \"completion\": \"b\"}",
         "found \"conversations\" and \"prompt\"/\"completion\""},
        {"{\"conversations\": [{\"from\": \"tool\", \"value\": \"x\"}]}",
         "conversations[0]: from 'tool' is not one of human, user, gpt, assistant, chatgpt, model, system"},
        {"{\"conversations\": [{\"from\": \"human\", \"value\": \"x\"}, {\"from\": \"Human\", \"value\": \"y\"}]}",
         "conversations[1]: from 'Human' is not one of"},
        {"{\"conversations\": []}", "\"conversations\": expected a non-empty array of {\"from\", \"value\"}"},
        {"{\"conversations\": {\"from\": \"human\", \"value\": \"x\"}}", "\"conversations\": expected a non-empty array"},
        {"{\"conversations\": [{\"role\": \"user\", \"content\": \"x\"}]}", "conversations[0]: expected {\"from\""},
        {"{\"conversations\": [{\"from\": \"human\", \"value\": null}]}", "conversations[0]: expected {\"from\""},
        {"{\"system\": 1, \"conversations\": [{\"from\": \"human\", \"value\": \"x\"}]}",
         "\"system\": expected a string beside \"conversations\""},
        {"{\"system\": \"a\", \"conversations\": [{\"from\": \"system\", \"value\": \"b\"}]}",
         "a \"system\" field and a first turn from system"},
        {"{\"instruction\": \"a\"}", "expected \"instruction\" and \"output\" as strings (Alpaca)"},
        {"{\"instruction\": 1, \"output\": \"b\"}", "expected \"instruction\" and \"output\" as strings (Alpaca)"},
        {"{\"instruction\": \"a\", \"input\": 3, \"output\": \"b\"}", "\"input\": expected a string or null"},
        {"{\"instruction\": \"a\", \"output\": \"one two three four five six seven eight nine ten eleven\"}",
         "longer than a sequence (seq + 1 = 17)"},
        {"{\"prompt\": \"a\"}", "expected both \"prompt\" and \"completion\""},
        {"{\"messages\": []}", "\"messages\": expected a non-empty array"},
        {"{\"messages\": [{\"role\": \"user\"}]}", "messages[0]: expected {\"role\""},
        {"{\"messages\": [{\"role\": \"robot\", \"content\": \"x\"}]}",
         "messages[0]: role 'robot' is not system, user, assistant or tool"},
        /* tool turns, tool calls and tools: the model's template renders them, the built-in formats not yet */
        {"{\"messages\": [{\"role\": \"tool\", \"content\": \"x\"}]}",
         "message 0: role 'tool' in the built-in chat format llama3 is not supported yet"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": []}",
         "a tools list in the built-in chat format llama3 is not supported yet"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": null, \"tool_calls\": [{\"type\": \"function\", "
         "\"function\": {\"name\": \"f\", \"arguments\": \"{}\"}}]}]}",
         "message 0: tool_calls in the built-in chat format llama3 is not supported yet"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"reasoning_content\": \"r\"}]}",
         "message 0: reasoning_content in the built-in chat format llama3 is not supported yet"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\", \"tool_calls\": []}]}",
         "messages[0]: tool_calls on a user message: expected them on assistant messages"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": null}]}",
         "messages[0]: expected {\"role\": ..., \"content\": \"...\"} (content null or absent only beside tool_calls)"},
        {"{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": 3}}]}]}",
         "messages[0]: tool_calls: expected [{\"type\": \"function\", \"function\": {\"name\""},
        {"{\"messages\": [{\"role\": \"assistant\", \"tool_calls\": [{\"function\": {\"name\": \"f\"}}]}]}",
         "messages[0]: tool_calls: expected"},
        {"{\"messages\": [{\"role\": \"assistant\", \"content\": \"a\", \"reasoning_content\": 1}]}",
         "messages[0]: reasoning_content: expected a string"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": {}}",
         "\"tools\": expected an array of function schemas"},
        {"{\"messages\": [{\"role\": \"user\", \"content\": \"x\"}], \"tools\": [1]}",
         "\"tools\": expected an array of function schemas"},
        {"{\"prompt\": \"a\", \"completion\": \"b\", \"tools\": []}",
         "\"tools\" beside \"prompt\"/\"completion\": expected them beside \"messages\""},
        {"{\"text\": \"one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen\"}",
         "longer than a sequence (seq + 1 = 17)"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ZT_EQ_INT(zero_data_add_jsonl_line(d, bad[i].line, strlen(bad[i].line), "x.jsonl:7"), ZERO_ERR_FORMAT);
        ZT_CHECKF(strstr(zero_data_last_error(d), bad[i].needle) && strstr(zero_data_last_error(d), "x.jsonl:7:"),
                  "bad line %zu: '%s' lacks '%s'", i, zero_data_last_error(d), bad[i].needle);
    }
    /* blank lines are not examples */
    ZT_OK(zero_data_add_jsonl_line(d, "  \r", 3, "x.jsonl:8"));
    zero_data_free(d);
    /* skip mode: counted, the first one remembered */
    o.skip_bad = 1;
    ZT_OK(zero_data_create(&d, tok, &o, &err));
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) ZT_OK(zero_data_add_jsonl_line(d, bad[i].line, strlen(bad[i].line), "y.jsonl:3"));
    zero_data_stats st;
    zero_data_get_stats(d, &st);
    ZT_EQ_INT(st.skipped, sizeof bad / sizeof bad[0]);
    ZT_EQ_INT(st.examples, 0);
    ZT_CHECKF(strstr(st.first_skipped, "y.jsonl:3: not valid JSON"), "%s", st.first_skipped);
    ZT_EQ_INT(zero_data_finish(d), ZERO_ERR_FORMAT);
    ZT_CHECK(strstr(zero_data_last_error(d), "every one was skipped"));
    zero_data_free(d);
    /* a chat with a tokenizer that implies no format: an error naming the built-in formats */
    zero_tokenizer_free(tok);
    tok = load("gpt2");
    o.skip_bad = 0;
    ZT_OK(zero_data_create(&d, tok, &o, &err));
    line = "{\"messages\": [{\"role\": \"user\", \"content\": \"hi\"}]}";
    ZT_EQ_INT(zero_data_add_jsonl_line(d, line, strlen(line), "c.jsonl:1"), ZERO_ERR_INVALID_ARG);
    ZT_CHECKF(strstr(zero_data_last_error(d), "chatml, llama3, mistral"), "%s", zero_data_last_error(d));
    zero_data_free(d);
    zero_tokenizer_free(tok);
}

/* Packing keeps every example whole in one row, pads with EOS without loss, and loses no token. */
static void test_packing(void) {
    zero_tokenizer *tok = load("smollm2");
    size_t n;
    char *text = slurp("fortunes.txt", &n);
    zero_data_opts o;
    zero_data_opts_default(&o);
    zero_data *stream, *packed;
    zero_error err;
    ZT_OK(zero_data_create(&stream, tok, &o, &err));
    o.seq = 63;
    ZT_OK(zero_data_create(&packed, tok, &o, &err));
    size_t start = 0, nex = 0;
    uint64_t lens[512];
    for (size_t i = 0; i < n; i++) {
        if (text[i] != '\n') continue;
        cJSON *j = cJSON_CreateObject();
        char *line = malloc(i - start + 1);
        memcpy(line, text + start, i - start);
        line[i - start] = 0;
        cJSON_AddStringToObject(j, (nex % 2) ? "text" : "completion", line);
        if (!(nex % 2)) cJSON_AddStringToObject(j, "prompt", "Q: ");
        char *js = cJSON_PrintUnformatted(j);
        ZT_OK(zero_data_add_jsonl_line(stream, js, strlen(js), "s"));
        ZT_OK(zero_data_add_jsonl_line(packed, js, strlen(js), "p"));
        size_t k;
        zero_data_last_example(packed, NULL, &k);
        if (nex < 512) lens[nex] = k;
        nex++;
        free(js);
        free(line);
        cJSON_Delete(j);
        start = i + 1;
    }
    ZT_OK(zero_data_finish(stream));
    ZT_OK(zero_data_finish(packed));
    zero_data_stats ss, ps;
    zero_data_get_stats(stream, &ss);
    zero_data_get_stats(packed, &ps);
    ZT_EQ_INT(ps.examples, nex);
    ZT_EQ_INT(ps.tokens % 64, 0);
    ZT_EQ_INT(ps.rows, ps.tokens / 64);
    ZT_EQ_INT(ps.trained, ss.trained);             /* no trained token lost or added */
    ZT_EQ_INT(ps.tokens - ps.padding, ss.tokens);  /* padding is the only addition */
    /* every row: whole examples (each ends with EOS), then EOS padding with no loss */
    const int32_t *ids = zero_data_tokens(packed), eos = zero_tokenizer_eos(tok);
    const uint8_t *mask = zero_data_mask(packed);
    ZT_CHECK(mask != NULL);
    uint64_t pad = 0;
    for (uint64_t r = 0; r < ps.rows; r++) {
        uint64_t e = 64;
        while (e > 0 && ids[r * 64 + e - 1] == eos && mask[r * 64 + e - 1] == 0) e--, pad++;
        ZT_CHECKF(e > 0 && ids[r * 64 + e - 1] == eos && mask[r * 64 + e - 1] == 1, "row %llu ends its last example with EOS", (unsigned long long)r);
    }
    ZT_CHECKF(pad >= ps.padding, "padding %llu, found %llu", (unsigned long long)ps.padding, (unsigned long long)pad);
    /* best fit decreasing beats one row per example and is within 15% of the token lower bound */
    ZT_CHECK(ps.rows < nex);
    ZT_CHECKF(ps.rows * 64 <= (uint64_t)(1.15 * (double)ss.tokens) + 64, "rows %llu for %llu tokens",
              (unsigned long long)ps.rows, (unsigned long long)ss.tokens);
    /* the examples' starts: in the stream, one per example at its place, in order; in the rows,
     * each row's first token, and runs that are the examples' lengths (as a multiset) then the
     * padding's run */
    const uint8_t *sst = zero_data_starts(stream), *pst = zero_data_starts(packed);
    ZT_CHECK(sst != NULL && pst != NULL);
    {
        uint64_t at = 0, k = 0, bad = 0;
        for (uint64_t i = 0; i < ss.tokens; i++) {
            if (!sst[i]) continue;
            if (k > 0 && k - 1 < 512 && i - at != lens[k - 1]) bad++;
            at = i, k++;
        }
        ZT_EQ_INT(k, nex);
        ZT_EQ_INT(bad, 0);
    }
    uint64_t *seen = calloc(256, sizeof *seen), *want = calloc(256, sizeof *want), runs = 0;
    for (size_t e = 0; e < nex && e < 512; e++) want[lens[e] < 255 ? lens[e] : 255]++;
    for (uint64_t r = 0; r < ps.rows; r++) {
        ZT_CHECKF(pst[r * 64] == 1, "row %llu starts a document", (unsigned long long)r);
        for (uint64_t t = 0; t < 64;) {
            uint64_t e = t + 1;
            while (e < 64 && !pst[r * 64 + e]) e++;
            if (mask[r * 64 + e - 1] || ids[r * 64 + t] != eos) seen[e - t < 255 ? e - t : 255]++, runs++; /* not padding */
            t = e;
        }
    }
    ZT_EQ_INT(runs, nex);
    if (nex <= 512) ZT_CHECK(!memcmp(seen, want, 256 * sizeof *seen));
    free(seen), free(want);
    /* written and read back */
    char path[512];
    snprintf(path, sizeof path, "%s/packed.tok", tmpdir);
    ZT_OK(zero_data_write(packed, path));
    zero_tokfile *f;
    ZT_OK(zero_tokfile_open(&f, path, &err));
    ZT_EQ_INT(zero_tokfile_version(f), 2);
    ZT_EQ_INT(zero_tokfile_row(f), 64);
    ZT_EQ_INT(zero_tokfile_has_mask(f), 1);
    ZT_EQ_INT(zero_tokfile_count(f), ps.tokens);
    int32_t *rt = malloc(ps.tokens * sizeof *rt);
    uint8_t *rm = malloc(ps.tokens);
    ZT_OK(zero_tokfile_read(f, 0, ps.tokens, rt, rm));
    ZT_CHECK(!memcmp(rt, ids, ps.tokens * sizeof *rt) && !memcmp(rm, mask, ps.tokens));
    ZT_EQ_INT(zero_tokfile_has_starts(f), 1);
    ZT_OK(zero_tokfile_read_starts(f, 0, ps.tokens, rm));
    ZT_CHECK(!memcmp(rm, pst, ps.tokens));
    free(rt);
    free(rm);
    zero_tokfile_close(f);
    unlink(path);
    zero_data_free(stream);
    zero_data_free(packed);
    zero_tokenizer_free(tok);
    free(text);
}

static void put32(unsigned char *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i));
}

static void test_tokfile(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/t.tok", tmpdir);
    zero_error err;
    zero_tokfile *f;
    /* 4-byte tokens (vocab > 65536), no mask, a stream */
    int32_t toks[5] = {0, 70000, 5, 128255, 1};
    ZT_OK(zero_tokfile_write(path, toks, NULL, NULL, 5, 128256, 0, &err));
    ZT_OK(zero_tokfile_open(&f, path, &err));
    int32_t got[5];
    uint8_t m[5];
    ZT_OK(zero_tokfile_read(f, 1, 4, got, m));
    ZT_CHECK(!memcmp(got, toks + 1, 4 * sizeof *got) && m[0] == 1 && m[3] == 1);
    ZT_EQ_INT(zero_tokfile_read(f, 3, 3, got, NULL), ZERO_ERR_INVALID_ARG);
    zero_tokfile_close(f);
    /* ZEROTOK1 is still read */
    unsigned char v1[32 + 6] = "ZEROTOK1";
    put32(v1 + 8, 1);
    put32(v1 + 12, 256);
    put32(v1 + 16, 3);
    v1[32] = 'a', v1[34] = 'b', v1[36] = 255;
    write_bytes(path, v1, sizeof v1);
    ZT_OK(zero_tokfile_open(&f, path, &err));
    ZT_EQ_INT(zero_tokfile_version(f), 1);
    ZT_OK(zero_tokfile_read(f, 0, 3, got, NULL));
    ZT_CHECK(got[0] == 'a' && got[1] == 'b' && got[2] == 255);
    zero_tokfile_close(f);
    /* writer refusals */
    int32_t big[2] = {3, 9};
    ZT_EQ_INT(zero_tokfile_write(path, big, NULL, NULL, 2, 9, 0, &err), ZERO_ERR_INVALID_ARG);
    uint8_t badmask[2] = {1, 2};
    ZT_EQ_INT(zero_tokfile_write(path, big, badmask, NULL, 2, 10, 0, &err), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_tokfile_write(path, big, NULL, NULL, 2, 10, 3, &err), ZERO_ERR_INVALID_ARG);
    /* header faults, each with its message */
    int32_t good[4] = {1, 2, 3, 4};
    uint8_t gm[4] = {0, 1, 1, 0};
    ZT_OK(zero_tokfile_write(path, good, gm, NULL, 4, 10, 2, &err));
    size_t n;
    char *img;
    {
        FILE *fp = fopen(path, "rb");
        fseek(fp, 0, SEEK_END);
        n = (size_t)ftell(fp);
        fseek(fp, 0, SEEK_SET);
        img = malloc(n);
        if (fread(img, 1, n, fp) != n) exit(2);
        fclose(fp);
    }
    ZT_EQ_INT(n, 64 + 8 + 4);
    static const struct { int off; uint32_t val; int trunc; const char *needle; } faults[] = {
        {0, 0x4B4F5458, 0, "not a token file"},   /* magic */
        {8, 3, 0, "version 3, expected 2"},
        {12, 0, 0, "vocab 0"},
        {16, 5, 0, "header says 5 tokens"},
        {24, 3, 0, "token_bytes 3"},
        {28, 5, 0, "unknown flags"},
        {32, 3, 0, "not whole rows of 3"},
        {0, 0, 70, "header says 4 tokens"},
        {0, 0, 40, "truncated"},
        {64, 11, 0, "token 11 at index 0"},
        {72, 0x02, 0, "mask byte 2 at index 0"},
    };
    for (size_t i = 0; i < sizeof faults / sizeof faults[0]; i++) {
        char *c = malloc(n);
        memcpy(c, img, n);
        if (!faults[i].trunc) {
            if (faults[i].off == 64) c[64] = (char)faults[i].val, c[65] = 0;
            else if (faults[i].off == 72) c[72] = (char)faults[i].val;
            else put32((unsigned char *)c + faults[i].off, faults[i].val);
        }
        write_bytes(path, c, faults[i].trunc ? (size_t)faults[i].trunc : n);
        free(c);
        /* refused when opened, the tokens and mask bytes too: not when a batch reaches them */
        zero_status st = zero_tokfile_open(&f, path, &err);
        ZT_CHECKF(st == ZERO_ERR_FORMAT && f == NULL && strstr(err.msg, faults[i].needle),
                  "fault %zu: status %d, '%s' lacks '%s'", i, st, err.msg, faults[i].needle);
        if (st == ZERO_OK) zero_tokfile_close(f);
    }
    free(img);
    /* the examples' starts: written, read back, a bad byte refused when opened */
    const uint8_t starts[4] = {1, 0, 1, 1};
    ZT_OK(zero_tokfile_write(path, good, gm, starts, 4, 10, 2, &err));
    ZT_OK(zero_tokfile_open(&f, path, &err));
    uint8_t back[4] = {9, 9, 9, 9};
    ZT_EQ_INT(zero_tokfile_has_starts(f), 1);
    ZT_OK(zero_tokfile_read_starts(f, 1, 3, back));
    ZT_CHECK(back[0] == 0 && back[1] == 1 && back[2] == 1 && back[3] == 9);
    ZT_EQ_INT(zero_tokfile_read_starts(f, 2, 3, back), ZERO_ERR_INVALID_ARG);
    zero_tokfile_close(f);
    {
        FILE *fp = fopen(path, "r+b");
        fseek(fp, 64 + 8 + 4 + 1, SEEK_SET); /* tokens, mask, then starts[1] */
        fputc(7, fp);
        fclose(fp);
    }
    ZT_EQ_INT(zero_tokfile_open(&f, path, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, "starts byte 7 at index 1") != NULL, "%s", err.msg);
    const uint8_t bad_starts[4] = {1, 2, 0, 0};
    ZT_EQ_INT(zero_tokfile_write(path, good, gm, bad_starts, 4, 10, 2, &err), ZERO_ERR_INVALID_ARG);
    /* without starts: none read */
    ZT_OK(zero_tokfile_write(path, good, gm, NULL, 4, 10, 2, &err));
    ZT_OK(zero_tokfile_open(&f, path, &err));
    ZT_EQ_INT(zero_tokfile_has_starts(f), 0);
    ZT_OK(zero_tokfile_read_starts(f, 0, 4, back));
    ZT_CHECK(!back[0] && !back[1] && !back[2] && !back[3]);
    zero_tokfile_close(f);
    unlink(path);
}

int main(void) {
    const char *src = getenv("ZERO_SOURCE_DIR");
    snprintf(dir, sizeof dir, "%s/tests/data/tokenizer", src ? src : ".");
    snprintf(tmpdir, sizeof tmpdir, "/tmp/test_data_XXXXXX");
    if (!mkdtemp(tmpdir)) return 2;
    test_chats();
    test_prompt_completion();
    test_text_and_bad_lines();
    test_sharegpt_alpaca();
    test_json_arrays();
    test_packing();
    test_tokfile();
    rmdir(tmpdir);
    return zt_finish("test_data");
}
