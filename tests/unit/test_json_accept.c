/* tests/unit/test_json_accept.c — zero reads the JSON files of a Hugging Face model directory as the
 * tools that read them do: each case of tests/data/json_accept (tokenizer.json through tokenizers,
 * tokenizer_config.json and config.json through transformers, recorded by
 * scripts/check_json_acceptance.py) is accepted or refused as the tool did, with the tool's ids and
 * fields; the differences decided there are held to what they say (docs/TOKENIZER.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "decoder/decoder.h"
#include "harness.h"
#include "zero/common.h"
#include "zero/tokenizer.h"

/* The string scripts/check_json_acceptance.py encodes (its TEXT). */
static const char TEXT[] =
    "hello world <s> \xc3\xa9\xf0\x9f\x98\x80x \xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e\xf0\x9f\x99\x82";

static char g_dir[1024];

static char *read_case(const char *name, size_t *len) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s.json", g_dir, name);
    char *text = NULL;
    zero_error e;
    const zero_status st = zero_read_file(path, UINT64_C(1) << 24, &text, len, &e);
    ZT_CHECKF(st == ZERO_OK, "%s: %s", path, e.msg);
    return st == ZERO_OK ? text : NULL;
}

/* What zero makes of one case: 1 accepted (vals: its values, as the script writes them), 0 refused
 * (msg: why). */
static int run_case(const char *kind, const char *name, const char *base, size_t base_len, char *vals, size_t cap,
                    char *msg, size_t msg_cap) {
    size_t len = 0;
    char *text = read_case(name, &len);
    vals[0] = msg[0] = 0;
    if (!text) return -1;
    zero_error e = {{0}};
    int ok = 0;
    if (!strcmp(kind, "config")) {
        dec_config c;
        if (dec_config_from_json(&c, text, NULL, &e) == ZERO_OK) {
            snprintf(vals, cap, "%d %d %d %d %d", c.n_layer, c.n_embd, c.n_head, c.vocab, c.n_ctx);
            ok = 1;
        }
    } else {
        zero_tokenizer *t = NULL;
        const int is_tok = !strcmp(kind, "tokenizer");
        if (zero_tokenizer_load_json(&t, is_tok ? text : base, is_tok ? len : base_len, is_tok ? NULL : text, &e) ==
            ZERO_OK) {
            ok = 1;
            if (is_tok) {
                zero_token_ids ids = {0};
                ZT_OK(zero_tokenizer_encode(t, TEXT, strlen(TEXT), ZERO_TOK_ADD_SPECIAL, &ids));
                size_t at = 0;
                for (size_t i = 0; i < ids.n && at < cap; i++)
                    at += (size_t)snprintf(vals + at, cap - at, "%s%d", i ? " " : "", ids.ids[i]);
                zero_token_ids_free(&ids);
            } else {
                snprintf(vals, cap, "%d %d", zero_tokenizer_bos(t), zero_tokenizer_eos(t));
            }
            zero_tokenizer_free(t);
        }
    }
    if (!ok) snprintf(msg, msg_cap, "%s", e.msg);
    free(text);
    return ok;
}

/* transformers gives -1 (None) where the file names no token; zero then falls back (the template's
 * BOS, a guessed EOS: docs/TOKENIZER.md), so only the ids transformers has are compared. */
static int same_special(const char *want, const char *got) {
    int wb, we, gb, ge;
    if (sscanf(want, "%d %d", &wb, &we) != 2 || sscanf(got, "%d %d", &gb, &ge) != 2) return 0;
    return (wb < 0 || wb == gb) && (we < 0 || we == ge);
}

int main(void) {
    const char *src = getenv("ZERO_SOURCE_DIR");
    snprintf(g_dir, sizeof g_dir, "%s/tests/data/json_accept", src ? src : ".");
    char path[1200];
    snprintf(path, sizeof path, "%s/cases.tsv", g_dir);
    FILE *f = fopen(path, "r");
    ZT_CHECKF(f != NULL, "cannot open %s", path);
    if (!f) return zt_finish("test_json_accept");
    size_t base_len = 0;
    char *base = read_case("base", &base_len); /* the tokenizer.json beside each tokenizer_config.json */
    char line[4096], base_vals[3][2048] = {"", "", ""};
    int n = 0, same = 0, unsupported = 0, lenient = 0;
    while (fgets(line, sizeof line, f)) {
        if (line[0] == '#') continue;
        line[strcspn(line, "\n")] = 0;
        char *save = NULL;
        const char *name = strtok_r(line, "\t", &save), *kind = strtok_r(NULL, "\t", &save);
        const char *did = strtok_r(NULL, "\t", &save), *want = strtok_r(NULL, "\t", &save);
        const char *zero = strtok_r(NULL, "\t", &save);
        ZT_CHECKF(name && kind && did && want && zero, "cases.tsv: a line without five fields");
        if (!name || !kind || !did || !want || !zero) continue;
        const int k = !strcmp(kind, "tokenizer") ? 0 : !strcmp(kind, "tokenizer_config") ? 1 : 2;
        char vals[2048], msg[600];
        const int ok = run_case(kind, name, base, base_len, vals, sizeof vals, msg, sizeof msg);
        n++;
        if (!strcmp(name, "base") || !strcmp(name, "tc_base") || !strcmp(name, "cf_base"))
            snprintf(base_vals[k], sizeof base_vals[k], "%s", vals);
        if (!strcmp(zero, "same")) {
            same++;
            if (!strcmp(did, "accept")) {
                ZT_CHECKF(ok == 1, "%s: the tool accepts it, zero refuses: %s", name, msg);
                if (ok == 1)
                    ZT_CHECKF(k == 1 ? same_special(want, vals) : !strcmp(want, vals),
                              "%s: the tool gives '%s', zero '%s'", name, want, vals);
            } else {
                ZT_CHECKF(ok == 0, "%s: the tool refuses it, zero accepts it ('%s')", name, vals);
                if (ok == 0 && !strstr(msg, "not valid JSON") && !strstr(msg, "nested more than") &&
                    !strstr(msg, "merges"))
                    printf("  %s refused: %s\n", name, msg);
            }
        } else if (!strncmp(zero, "unsupported:", 12)) {
            unsupported++;
            ZT_CHECKF(!strcmp(did, "accept"), "%s: recorded as unsupported, but the tool refuses it", name);
            ZT_CHECKF(ok == 0 && strstr(msg, zero + 12) && strstr(msg, "not supported"),
                      "%s: expected zero to refuse it as not supported ('%s'), got %s", name, zero + 12,
                      ok ? vals : msg);
        } else if (!strncmp(zero, "lenient:", 8)) {
            lenient++;
            ZT_CHECKF(!strcmp(did, "refuse"), "%s: recorded as lenient, but the tool accepts it", name);
            ZT_CHECKF(ok == 1, "%s: recorded as read by zero (%s), but refused: %s", name, zero + 8, msg);
            if (ok == 1)
                ZT_CHECKF(!strcmp(vals, base_vals[k]), "%s: zero gives '%s', the base '%s'", name, vals, base_vals[k]);
        } else {
            ZT_FAIL("%s: zero's difference '%s': expected same, unsupported:... or lenient:...", name, zero);
        }
    }
    fclose(f);
    free(base);
    printf("  %d cases: %d as the tool, %d not supported, %d read where the tool refuses\n", n, same, unsupported,
           lenient);
    ZT_CHECK(n >= 60 && unsupported > 0 && lenient > 0);
    return zt_finish("test_json_accept");
}
