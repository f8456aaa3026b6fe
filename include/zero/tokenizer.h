/* zero/tokenizer.h — Hugging Face tokenizer.json in C: byte-level BPE (GPT-2, Llama 3, Qwen 2/3,
 * SmolLM2) and SentencePiece-style BPE (Llama 2, Mistral, TinyLlama), encoding and decoding.
 *
 * What is supported and what is refused: docs/TOKENIZER.md. A tokenizer.json that asks for anything
 * else is refused at load with a message naming the field ("pre_tokenizer.type 'Whitespace' is not
 * supported: ...").
 *
 *   zero_tokenizer *tok;  zero_error err;
 *   if (zero_tokenizer_load(&tok, "models/qwen", &err)) { puts(err.msg); ... }   // DIR or FILE
 *   zero_token_ids ids = {0};
 *   zero_tokenizer_encode(tok, text, strlen(text), ZERO_TOK_ADD_SPECIAL, &ids);  // appends
 *   char *s; size_t n;
 *   zero_tokenizer_decode(tok, ids.ids, ids.n, 0, &s, &n);  ... zero_tokenizer_free_text(s);
 *   zero_token_ids_free(&ids);  zero_tokenizer_free(tok);
 *
 * Exactness: encode gives the ids of HF `tokenizers` (Tokenizer.encode(text, add_special_tokens)).
 * The input is bytes; invalid UTF-8 is read as Python's bytes.decode("utf-8", "replace") reads
 * it (each maximal invalid subpart becomes U+FFFD), since HF only takes strings. For valid UTF-8
 * without added-token strings, decode(encode(x)) == x.
 *
 * Threads: a handle keeps scratch buffers and a cache; use it from one thread at a time (one handle
 * per thread for parallel encoding).
 */
#ifndef ZERO_TOKENIZER_H
#define ZERO_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zero_tokenizer zero_tokenizer;

/* Loads `path`: a tokenizer.json file, or a directory holding one (and optionally
 * tokenizer_config.json, whose bos_token, eos_token and chat_template are read). */
zero_status zero_tokenizer_load(zero_tokenizer **out, const char *path, zero_error *err);
/* Loads tokenizer.json from memory (len bytes). `config` is tokenizer_config.json's text or NULL. */
zero_status zero_tokenizer_load_json(zero_tokenizer **out, const char *json, size_t len, const char *config,
                                     zero_error *err);
void zero_tokenizer_free(zero_tokenizer *tok); /* NULL is a no-op */
/* The message of the last failed call on this handle ("" when none). */
const char *zero_tokenizer_last_error(const zero_tokenizer *tok);

/* "byte-level BPE" or "SentencePiece BPE". */
const char *zero_tokenizer_kind(const zero_tokenizer *tok);
/* Largest id + 1 over the model's vocabulary and the added tokens: the embedding rows a model needs. */
int32_t zero_tokenizer_vocab_size(const zero_tokenizer *tok);
/* Id of a token by its content (vocabulary or added token), -1 when absent. */
int32_t zero_tokenizer_token_id(const zero_tokenizer *tok, const char *token);
/* Content of token `id` as tokenizer.json spells it (NUL-terminated; *len its bytes when len is not
 * NULL); NULL for an id that names no token. */
const char *zero_tokenizer_token(const zero_tokenizer *tok, int32_t id, size_t *len);
/* 1 when `id` is an added token marked special (skipped by ZERO_TOK_SKIP_SPECIAL). */
int zero_tokenizer_is_special(const zero_tokenizer *tok, int32_t id);
/* 1 when `id` is one of tokenizer.json's added_tokens (special or not). */
int zero_tokenizer_is_added(const zero_tokenizer *tok, int32_t id);
/* Beginning- and end-of-sequence ids, -1 when the tokenizer has none. BOS: tokenizer_config.json's
 * bos_token, else the first special token of the post-processor's single template. EOS:
 * tokenizer_config.json's eos_token, else the first of </s>, <|end_of_text|>, <|endoftext|>, <eos>,
 * <|im_end|>, <|eot_id|> that is a token. */
int32_t zero_tokenizer_bos(const zero_tokenizer *tok);
int32_t zero_tokenizer_eos(const zero_tokenizer *tok);
/* tokenizer_config.json's pad_token, -1 when absent or not a token. */
int32_t zero_tokenizer_pad(const zero_tokenizer *tok);
/* The model's unk_token (tokenizer.json's model.unk_token), -1 when absent. */
int32_t zero_tokenizer_unk(const zero_tokenizer *tok);
/* The model's chat template (Jinja source, rendered by zero/template.h): chat_template.jinja beside
 * tokenizer.json when there is one, else tokenizer_config.json's chat_template — the string, or of a
 * list of named templates the one named "default", else the first; NULL when absent. */
const char *zero_tokenizer_chat_template(const zero_tokenizer *tok);
/* The model's merges, by rank: merge `rank` joins tokens *a and *b (ZERO_ERR_INVALID_ARG for a rank
 * outside [0, zero_tokenizer_num_merges)). */
int32_t zero_tokenizer_num_merges(const zero_tokenizer *tok);
zero_status zero_tokenizer_merge(const zero_tokenizer *tok, int32_t rank, int32_t *a, int32_t *b);
/* The pre-tokenizers, in order, as one line: each "Type(key=value,...)" joined by " | ", e.g.
 * "Split(Regex:<pattern>,Isolated,invert=0) | ByteLevel(add_prefix_space=0,use_regex=0)",
 * "Digits(individual_digits=1) | ByteLevel(add_prefix_space=0,use_regex=1)" ("" when none):
 * what a converter compares to recognize a tokenizer family (zero export --format gguf). */
const char *zero_tokenizer_pre_tokenizer(const zero_tokenizer *tok);
/* The normalizers, in order, as one line in the same form, e.g. Llama 2's
 * "Prepend(prepend=X) | Replace(String: ,content=X)", X the metaspace U+2581 in UTF-8 ("" when none). */
const char *zero_tokenizer_normalizer(const zero_tokenizer *tok);
/* tokenizer_config.json's bos_token (eos 0) or eos_token (eos 1) as written there (the content of an
 * AddedToken object), NULL when absent or null: what transformers passes a chat template. */
const char *zero_tokenizer_config_token(const zero_tokenizer *tok, int eos);

/* A growable list of ids, and optionally each token's start offset in the encoded text (bytes).
 * Zero-initialize it; encode appends; free with zero_token_ids_free. */
typedef struct zero_token_ids {
    int32_t *ids;
    uint32_t *offsets; /* filled only with ZERO_TOK_OFFSETS; tokens added by the post-processor
                          get the offset where they stand: 0 before the text, len after it */
    size_t n, cap;
} zero_token_ids;
void zero_token_ids_free(zero_token_ids *v);

enum {
    ZERO_TOK_ADD_SPECIAL = 1,  /* encode: apply the post-processor (e.g. BOS), HF's add_special_tokens=True */
    ZERO_TOK_OFFSETS = 2,      /* encode: fill offsets[] too */
    ZERO_TOK_SKIP_SPECIAL = 4, /* decode: leave out special added tokens (HF's skip_special_tokens) */
};

/* Encodes len bytes of text and appends the ids (and offsets) to *out. Fails only when out of
 * memory (ZERO_ERR_NOMEM) or a text longer than 4 GiB (ZERO_ERR_INVALID_ARG). */
zero_status zero_tokenizer_encode(zero_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                  zero_token_ids *out);
/* Decodes n ids into *text (malloc'd, NUL-terminated, *len bytes; free with
 * zero_tokenizer_free_text). An id that names no token is ZERO_ERR_INVALID_ARG. */
zero_status zero_tokenizer_decode(zero_tokenizer *tok, const int32_t *ids, size_t n, unsigned flags, char **text,
                                  size_t *len);
void zero_tokenizer_free_text(char *text);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_TOKENIZER_H */
