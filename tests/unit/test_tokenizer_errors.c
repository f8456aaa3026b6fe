/* tests/unit/test_tokenizer_errors.c — every refusal of a tokenizer.json: malformed JSON, fields of
 * the wrong type, added tokens that share an id or a string, and each unsupported normalizer,
 * pre-tokenizer, model option, post-processor and decoder, each with a message that names the field;
 * and a small tokenizer that does load, built by hand, checked id by id (merges by rank, unk fusing,
 * byte fallback, Split behaviors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "zero/zero.h"

static const char BASE[] =
    "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,"
    "\"added_tokens\":[{\"id\":3,\"content\":\"<s>\",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,"
    "\"normalized\":false,\"special\":true}],"
    "\"normalizer\":null,"
    "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true},"
    "\"post_processor\":null,"
    "\"decoder\":{\"type\":\"ByteLevel\"},"
    "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":null,\"continuing_subword_prefix\":null,"
    "\"end_of_word_suffix\":null,\"fuse_unk\":false,\"byte_fallback\":false,\"ignore_merges\":false,"
    "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2},\"merges\":[\"a b\"]}}";

/* src with `from` replaced by `to` (once; the case fails when `from` is absent). */
static char *replaced(const char *src, const char *from, const char *to) {
    const char *p = strstr(src, from);
    if (!p) {
        fprintf(stderr, "test bug: '%s' not in '%.80s...'\n", from, src);
        exit(2);
    }
    const size_t a = (size_t)(p - src), fl = strlen(from), tl = strlen(to), n = strlen(src);
    char *s = malloc(n - fl + tl + 1);
    memcpy(s, src, a);
    memcpy(s + a, to, tl);
    memcpy(s + a + tl, p + fl, n - a - fl + 1);
    return s;
}

static char *variant(const char *from, const char *to) { return replaced(BASE, from, to); }

static void refused(const char *json, const char *config, const char *needle) {
    zero_tokenizer *t = (zero_tokenizer *)1;
    zero_error err;
    const zero_status st = zero_tokenizer_load_json(&t, json, strlen(json), config, &err);
    ZT_CHECKF(st == ZERO_ERR_FORMAT && t == NULL && strstr(err.msg, needle), "status %d, '%s' lacks '%s'", st,
              st ? err.msg : "(loaded)", needle);
    if (!st) zero_tokenizer_free(t);
}

static void refused_variant(const char *from, const char *to, const char *needle) {
    char *s = variant(from, to);
    refused(s, NULL, needle);
    free(s);
}

/* json (with config) loads; the tokenizer, or NULL after a failed check. */
static zero_tokenizer *loads(const char *json, const char *config) {
    zero_tokenizer *t = NULL;
    zero_error err;
    const zero_status st = zero_tokenizer_load_json(&t, json, strlen(json), config, &err);
    ZT_CHECKF(st == ZERO_OK, "refused: '%s'", st ? err.msg : "");
    return st ? NULL : t;
}

static void test_refusals(void) {
    refused("{\"model\": ", NULL, "not valid JSON");
    refused("[1, 2]", NULL, "expected a JSON object at the top");
    refused("{\"version\": \"1.0\"}", NULL, "model: missing");
    const char *MODEL = "\"type\":\"BPE\"";
    refused_variant(MODEL, "\"type\":\"Unigram\"", "model.type 'Unigram' is not supported (supported: BPE)");
    refused_variant(MODEL, "\"type\":\"WordPiece\"", "model.type 'WordPiece' is not supported");
    refused_variant("\"dropout\":null", "\"dropout\":0.1", "model.dropout is not supported");
    refused_variant("\"continuing_subword_prefix\":null", "\"continuing_subword_prefix\":\"##\"",
                    "model.continuing_subword_prefix is not supported");
    refused_variant("\"end_of_word_suffix\":null", "\"end_of_word_suffix\":\"</w>\"", "model.end_of_word_suffix is not supported");
    refused_variant("\"fuse_unk\":false", "\"fuse_unk\":\"no\"", "model.fuse_unk: expected true or false");
    refused_variant("\"byte_fallback\":false", "\"byte_fallback\":1", "model.byte_fallback: expected true or false");
    refused_variant("\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}", "\"vocab\":[\"a\"]", "model.vocab: expected an object");
    refused_variant("\"vocab\":{\"a\":0,", "\"vocab\":{\"a\":-1,", "model.vocab['a']: expected an id");
    refused_variant("\"vocab\":{\"a\":0,", "\"vocab\":{\"a\":1.5,", "model.vocab['a']: expected an id");
    refused_variant("\"b\":1,", "\"b\":0,", "model.vocab: id 0 is used by 'a' and 'b'");
    refused("{\"model\":{\"type\":\"BPE\",\"vocab\":{},\"merges\":[]}}", NULL, "model.vocab is empty");
    refused_variant("\"merges\":[\"a b\"]", "\"merges\":[\"ab\"]", "model.merges[0] 'ab': expected two tokens");
    refused_variant("\"merges\":[\"a b\"]", "\"merges\":[\"a b c\"]", "model.merges[0] 'a b c': expected two tokens");
    refused_variant("\"merges\":[\"a b\"]", "\"merges\":[[\"a\",\"c\"]]", "model.merges[0]: 'c' is not in model.vocab");
    refused_variant("\"merges\":[\"a b\"]", "\"merges\":[\"b a\"]", "model.merges[0]: 'ba' is not in model.vocab");
    refused_variant("\"merges\":[\"a b\"]", "\"merges\":[5]", "model.merges[0]: expected \"a b\" or [\"a\", \"b\"]");
    refused_variant("\"merges\":[\"a b\"]", "\"merges\":{}", "model.merges: expected an array");
    refused_variant("\"unk_token\":null", "\"unk_token\":\"<unk>\"", "model.unk_token '<unk>' is not in model.vocab");
    refused_variant("\"unk_token\":null", "\"unk_token\":7", "model.unk_token: expected a string");
    /* normalizers */
    const char *NORM = "\"normalizer\":null";
    refused_variant(NORM, "\"normalizer\":{\"type\":\"Lowercase\"}",
                    "normalizer.type 'Lowercase' is not supported (supported normalizers:");
    refused_variant(NORM, "\"normalizer\":{\"type\":\"Sequence\",\"normalizers\":[{\"type\":\"NFC\"},{\"type\":\"BertNormalizer\"}]}",
                    "normalizer.normalizers[1].type 'BertNormalizer' is not supported");
    refused_variant(NORM, "\"normalizer\":{\"type\":\"Precompiled\",\"precompiled_charsmap\":\"\"}",
                    "normalizer.type 'Precompiled' is not supported");
    refused_variant(NORM, "\"normalizer\":{\"type\":\"Sequence\"}", "normalizer.normalizers: expected an array");
    refused_variant(NORM, "\"normalizer\":{\"type\":\"Prepend\"}", "normalizer.prepend: expected a string");
    refused_variant(NORM, "\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"Regex\":\"[\"},\"content\":\"x\"}",
                    "normalizer.pattern.Regex '[' does not compile with PCRE2");
    refused_variant(NORM, "\"normalizer\":{\"type\":\"Replace\",\"pattern\":\" \",\"content\":\"x\"}",
                    "normalizer.pattern: expected {\"String\": ...} or {\"Regex\": ...}");
    refused_variant(NORM, "\"normalizer\":[]", "normalizer: expected an object");
    refused_variant(NORM, "\"normalizer\":{\"kind\":\"NFC\"}", "normalizer.type: expected a string");
    /* pre-tokenizers */
    const char *PRE = "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":true}";
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"Whitespace\"}",
                    "pre_tokenizer.type 'Whitespace' is not supported (supported pre-tokenizers:");
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\",\"invert\":false}]}",
                    "pre_tokenizer.pretokenizers[0].pattern.Regex '(' does not compile with PCRE2");
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Weird\",\"invert\":false}",
                    "pre_tokenizer.behavior 'Weird': expected Removed, Isolated");
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"ByteLevel\"},{\"type\":\"Digits\"}]}",
                    "pre_tokenizer.pretokenizers[1]: a pre-tokenizer after ByteLevel is not supported");
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"ab\"}",
                    "pre_tokenizer.replacement 'ab': expected one character");
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"sometimes\"}",
                    "pre_tokenizer.prepend_scheme 'sometimes': expected first, always or never");
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"Metaspace\",\"replacement\":\"_\",\"prepend_scheme\":\"first\",\"add_prefix_space\":false}",
                    "add_prefix_space false contradicts prepend_scheme 'first'");
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":\"yes\"}",
                    "pre_tokenizer.add_prefix_space: expected true or false");
    refused_variant(PRE, "\"pre_tokenizer\":{\"type\":\"UnicodeScripts\"}", "pre_tokenizer.type 'UnicodeScripts' is not supported");
    /* decoders */
    const char *DEC = "\"decoder\":{\"type\":\"ByteLevel\"}";
    refused_variant(DEC, "\"decoder\":{\"type\":\"WordPiece\",\"prefix\":\"##\"}",
                    "decoder.type 'WordPiece' is not supported (supported decoders:");
    refused_variant(DEC, "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Fuse\"},{\"type\":\"CTC\"}]}",
                    "decoder.decoders[1].type 'CTC' is not supported");
    refused_variant(DEC, "\"decoder\":{\"type\":\"Strip\",\"content\":\" \",\"start\":-1,\"stop\":0}",
                    "decoder.start/stop: expected counts >= 0");
    /* post-processors */
    const char *POST = "\"post_processor\":null";
    refused_variant(POST, "\"post_processor\":{\"type\":\"RobertaProcessing\",\"sep\":[\"</s>\",2],\"cls\":[\"<s>\",0]}",
                    "post_processor.type 'RobertaProcessing' is not supported (supported post-processors:");
    refused_variant(POST, "\"post_processor\":{\"type\":\"BertProcessing\"}", "post_processor.type 'BertProcessing' is not supported");
    refused_variant(POST, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Sequence\":{\"id\":\"B\",\"type_id\":0}}],\"special_tokens\":{}}",
                    "post_processor.single[0]: Sequence 'B': expected the sequence A");
    refused_variant(POST, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<x>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{}}",
                    "post_processor.special_tokens['<x>'].ids: expected an array of ids");
    refused_variant(POST, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<x>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"special_tokens\":{\"<x>\":{\"id\":\"<x>\",\"ids\":[99],\"tokens\":[\"<x>\"]}}}",
                    "post_processor: special token id 99 is not a token");
    refused_variant(POST, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<s>\",\"type_id\":0}}],\"special_tokens\":{\"<s>\":{\"id\":\"<s>\",\"ids\":[3],\"tokens\":[\"<s>\"]}}}",
                    "post_processor.single: expected the sequence $A");
    refused_variant(POST, "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"Pair\":{}}],\"special_tokens\":{}}",
                    "post_processor.single[0]: expected {\"SpecialToken\": ...} or {\"Sequence\": ...}");
    /* added tokens */
    refused_variant("\"added_tokens\":[{\"id\":3,", "\"added_tokens\":[{\"id\":\"3\",", "added_tokens[0].id: expected an id");
    refused_variant("\"content\":\"<s>\"", "\"text\":\"<s>\"", "added_tokens[0].content: expected a string");
    refused_variant("\"special\":true", "\"special\":\"true\"", "added_tokens[0].special: expected true or false");
    refused("{\"added_tokens\":{\"x\":1},\"model\":{\"vocab\":{\"a\":0},\"merges\":[]}}", NULL,
            "added_tokens: expected an array");
    /* one id is one string: an added token may repeat a vocabulary token (same id, same string), not
     * take another's id, nor give its string a second id */
    const char *ADDED_END = "\"special\":true}]";
    refused_variant(ADDED_END, "\"special\":true},{\"id\":1,\"content\":\"<x>\",\"special\":true}]",
                    "added_tokens[1]: added token '<x>' has id 1, which the vocabulary gives to 'b'");
    refused_variant(ADDED_END, "\"special\":true},{\"id\":3,\"content\":\"</s>\",\"special\":true}]",
                    "added_tokens[1]: added token '</s>' has id 3, which added_tokens[0] gives to '<s>'");
    refused_variant(ADDED_END, "\"special\":true},{\"id\":4,\"content\":\"<s>\",\"special\":true}]",
                    "added_tokens[1]: added token '<s>' has id 4, and id 3 in added_tokens[0]");
    refused_variant(ADDED_END, "\"special\":true},{\"id\":3,\"content\":\"<s>\",\"special\":true}]",
                    "added_tokens[1]: added token '<s>' with id 3 is listed twice (also added_tokens[0])");
    refused_variant(ADDED_END, "\"special\":true},{\"id\":4,\"content\":\"ab\",\"special\":false}]",
                    "added_tokens[1]: added token 'ab' has id 4, but the vocabulary gives it id 2");
    /* tokenizer_config.json: the special tokens and the chat template as transformers writes them,
     * anything else named with its type */
    const char *NOT_TOKEN = "expected a string, null or an AddedToken object {\"content\": ...}";
    refused(BASE, "{\"eos_token\": 5}", "tokenizer_config.json: eos_token is a number (5): ");
    refused(BASE, "{\"eos_token\": [\"<s>\"]}", "tokenizer_config.json: eos_token is an array: ");
    refused(BASE, "{\"eos_token\": true}", NOT_TOKEN);
    refused(BASE, "{\"eos_token\": {\"foo\": 1}}", "tokenizer_config.json: eos_token.content is missing: expected a string");
    refused(BASE, "{\"bos_token\": 7}", "tokenizer_config.json: bos_token is a number (7): expected a string, null");
    refused(BASE, "{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": 3}}",
            "tokenizer_config.json: bos_token.content is a number (3): expected a string");
    refused(BASE, "{\"bos_token\": {\"__type\": \"Token\", \"content\": \"<s>\"}}",
            "tokenizer_config.json: bos_token.__type 'Token': expected \"AddedToken\"");
    refused(BASE, "{\"chat_template\": 5}",
            "tokenizer_config.json: chat_template is a number (5): expected a string, null or a list of {\"name\": ..., "
            "\"template\": ...}");
    refused(BASE, "{\"chat_template\": [1, 2]}", "tokenizer_config.json: chat_template[0] is a number (1): expected {");
    refused(BASE, "{\"chat_template\": [{\"name\": \"default\"}]}",
            "tokenizer_config.json: chat_template[0].template is missing: expected a string");
    refused(BASE, "{\"chat_template\": [{\"name\": 1, \"template\": \"x\"}]}",
            "tokenizer_config.json: chat_template[0].name is a number (1): expected a string");
    refused(BASE, "{\"chat_template\": [{\"name\": \"default\", \"template\": \"x\"}, {\"name\": \"default\", \"template\": \"y\"}]}",
            "tokenizer_config.json: chat_template[1]: a second template named 'default'");
    /* tokenizer_config.json */
    refused(BASE, "{\"eos_token\": \"<nope>\"}", "tokenizer_config.json: eos_token '<nope>' is not a token");
    refused(BASE, "{\"bos_token\": {\"content\": \"<nope>\"}}", "tokenizer_config.json: bos_token '<nope>' is not a token");
    refused(BASE, "[]", "tokenizer_config.json is not a JSON object");
}

static void test_files(void) {
    char dir[] = "/tmp/test_tok_errors_XXXXXX";
    if (!mkdtemp(dir)) exit(2);
    char path[256];
    zero_tokenizer *t;
    zero_error err;
    ZT_EQ_INT(zero_tokenizer_load(&t, "/nonexistent/tokenizer.json", &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "cannot open tokenizer '/nonexistent/tokenizer.json'"), "%s", err.msg);
    ZT_EQ_INT(zero_tokenizer_load(&t, dir, &err), ZERO_ERR_IO);
    ZT_CHECKF(strstr(err.msg, "has no tokenizer.json"), "%s", err.msg);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    FILE *f = fopen(path, "w");
    char *bad = variant("\"type\":\"BPE\"", "\"type\":\"Unigram\"");
    fputs(bad, f);
    fclose(f);
    free(bad);
    /* the message names the file */
    ZT_EQ_INT(zero_tokenizer_load(&t, dir, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, path) && strstr(err.msg, ": model.type 'Unigram' is not supported"), "%s", err.msg);
    f = fopen(path, "w");
    fputs(BASE, f);
    fclose(f);
    ZT_OK(zero_tokenizer_load(&t, path, &err));
    zero_tokenizer_free(t);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    f = fopen(path, "w");
    fputs("{\"eos_token\": \"<nope>\"}", f);
    fclose(f);
    ZT_EQ_INT(zero_tokenizer_load(&t, dir, &err), ZERO_ERR_FORMAT);
    ZT_CHECKF(strstr(err.msg, path) && strstr(err.msg, "eos_token '<nope>'"), "%s", err.msg);
    unlink(path);
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    unlink(path);
    rmdir(dir);
}

static void expect_ids(zero_tokenizer *t, const char *text, const int32_t *want, size_t n) {
    zero_token_ids got = {0};
    ZT_OK(zero_tokenizer_encode(t, text, strlen(text), ZERO_TOK_ADD_SPECIAL, &got));
    int same = got.n == n && !memcmp(got.ids, want, n * sizeof *want);
    ZT_CHECKF(same, "'%s': %zu ids (first %d), expected %zu (first %d)", text, got.n, got.n ? got.ids[0] : -1, n,
              n ? want[0] : -1);
    zero_token_ids_free(&got);
}

/* What does load: an added token repeating its vocabulary entry (as a byte-level tokenizer may write
 * it, in bytes), the special tokens as strings, null or AddedToken objects, and chat templates as a
 * string or a list of named ones ("default" picked, else the first). */
static void test_accepted(void) {
    char *same = variant("\"special\":true}]", "\"special\":true},{\"id\":2,\"content\":\"ab\",\"special\":false}]");
    zero_tokenizer *t = loads(same, NULL);
    if (t) ZT_EQ_INT(zero_tokenizer_token_id(t, "ab"), 2);
    zero_tokenizer_free(t);
    free(same);
    /* "\u0120a" (UTF-8 c4 a0 61) in model.vocab is the byte-level form of " a" */
    char *spaced = variant("\"special\":true}]", "\"special\":true},{\"id\":4,\"content\":\" a\",\"special\":false}]");
    char *json = replaced(spaced, "\"ab\":2}", "\"ab\":2,\"\xc4\xa0" "a\":4}");
    if ((t = loads(json, NULL))) expect_ids(t, " a", (int32_t[]){4}, 1);
    zero_tokenizer_free(t);
    free(json);
    free(spaced);
    static const struct {
        const char *config;
        int32_t bos, eos;
        const char *tmpl;
    } OK[] = {
        {"{\"bos_token\": null, \"eos_token\": \"<s>\", \"chat_template\": null}", -1, 3, NULL},
        {"{\"bos_token\": {\"__type\": \"AddedToken\", \"content\": \"<s>\", \"lstrip\": false, \"normalized\": false, "
         "\"rstrip\": false, \"single_word\": false}, \"eos_token\": {\"content\": \"ab\"}}", 3, 2, NULL},
        {"{\"chat_template\": \"{{ '<|im_start|>' }}\"}", -1, -1, "{{ '<|im_start|>' }}"},
        {"{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"T\"}, {\"name\": \"default\", \"template\": \"D\"}]}",
         -1, -1, "D"},
        {"{\"chat_template\": [{\"name\": \"rag\", \"template\": \"R\"}, {\"name\": \"tool_use\", \"template\": \"T\"}]}",
         -1, -1, "R"},
        {"{\"chat_template\": []}", -1, -1, NULL},
    };
    for (size_t i = 0; i < sizeof OK / sizeof OK[0]; i++) {
        if (!(t = loads(BASE, OK[i].config))) continue;
        const char *got = zero_tokenizer_chat_template(t);
        ZT_CHECKF(zero_tokenizer_bos(t) == OK[i].bos && zero_tokenizer_eos(t) == OK[i].eos &&
                      (OK[i].tmpl ? got && !strcmp(got, OK[i].tmpl) : !got),
                  "%s: bos %d eos %d template '%s'", OK[i].config, zero_tokenizer_bos(t), zero_tokenizer_eos(t),
                  got ? got : "(none)");
        zero_tokenizer_free(t);
    }
}

/* A SentencePiece-style tokenizer written by hand: merges apply by rank (not left to right),
 * unknown characters fuse into one <unk>, bytes fall back to <0xXX>. */
static void test_hand_made(void) {
    static const char J[] =
        "{\"added_tokens\":[],\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"_\"},"
        "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\"_\"},\"behavior\":\"MergedWithNext\",\"invert\":false},"
        "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"_\"},\"content\":\" \"},"
        "{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]},"
        "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"fuse_unk\":true,\"byte_fallback\":false,"
        "\"vocab\":{\"<unk>\":0,\"a\":1,\"b\":2,\"c\":3,\"_\":4,\"ab\":5,\"bc\":6,\"abc\":7,\"_a\":8},"
        "\"merges\":[\"b c\",\"a b\",\"a bc\",\"_ a\"]}}";
    zero_tokenizer *t;
    zero_error err;
    ZT_OK(zero_tokenizer_load_json(&t, J, sizeof J - 1, NULL, &err));
    /* "abc": b c (rank 0) first, then a bc -> abc; "ab": ab */
    expect_ids(t, "abc", (int32_t[]){7}, 1);
    expect_ids(t, "ab", (int32_t[]){5}, 1);
    /* " abc" -> "_abc", one word (the "_" merged with what follows): b c (rank 0), then a bc (rank 2)
     * before _ a (rank 3), then nothing: "_" "abc" */
    expect_ids(t, " abc", (int32_t[]){4, 7}, 2);
    /* "ab ab": two words "ab" and "_ab": _ a (rank 3) only after a b (rank 1) took the a */
    expect_ids(t, "ab ab", (int32_t[]){5, 4, 5}, 3);
    /* unknown characters fuse into one <unk> with fuse_unk */
    expect_ids(t, "axyzb", (int32_t[]){1, 0, 2}, 3);
    char *text;
    size_t len;
    ZT_OK(zero_tokenizer_decode(t, (int32_t[]){8, 6, 4, 5}, 4, 0, &text, &len));
    ZT_CHECKF(!strcmp(text, " abc ab"), "'%s'", text);
    zero_tokenizer_free_text(text);
    zero_tokenizer_free(t);
}

int main(void) {
    test_refusals();
    test_accepted();
    test_files();
    test_hand_made();
    return zt_finish("test_tokenizer_errors");
}
