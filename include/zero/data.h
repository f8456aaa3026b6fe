/* zero/data.h — fine-tuning data: text, JSONL (or JSON array) examples and chats tokenized into ids with a loss mask,
 * packed into sequences, and the token file that stores them (ZEROTOK2; ZEROTOK1 still read).
 *
 *   zero_data_opts o;  zero_data_opts_default(&o);  o.seq = 512;
 *   zero_data *d;  zero_data_create(&d, tok, &o);
 *   zero_data_add_file(d, "chats.jsonl");          // file:line errors, or skipped and counted
 *   zero_data_finish(d);                           // EOS, packing into rows of seq + 1 tokens
 *   zero_data_write(d, "train.tok");  zero_data_free(d);
 *
 *   zero_tokfile *f;  zero_tokfile_open(&f, "train.tok", &err);
 *   zero_tokfile_read(f, first, n, tokens, mask);  zero_tokfile_close(f);
 *
 * Token file layout (little-endian; docs/TOKENIZER.md):
 *   ZEROTOK1 (written by earlier versions, read only): 32-byte header
 *     0 char[8] "ZEROTOK1" | 8 u32 version 1 | 12 u32 vocab (1..65536) | 16 u64 count | 24 u64 0
 *     32 u16 tokens[count]
 *   ZEROTOK2: 64-byte header
 *     0 char[8] "ZEROTOK2" | 8 u32 version 2 | 12 u32 vocab (1..2^31-1) | 16 u64 count (>= 1)
 *     24 u32 token_bytes (2 or 4) | 28 u32 flags (bit 0: a loss mask follows; bit 1: document
 *     starts follow) | 32 u32 row (0: a stream of examples; R: packed rows of R tokens, count a
 *     multiple of R) | 36 u8[28] 0
 *     64 tokens[count] of token_bytes each | then, with flag bit 0, u8 mask[count] (1: the token is
 *     a target that counts in the loss, 0: it does not) | then, with flag bit 1, u8 starts[count]
 *     (1: the token is the first of an example, or of a row-long piece of a longer one, or of a
 *     row's padding; 0: it continues the one before). The file is exactly that long.
 */
#ifndef ZERO_DATA_H
#define ZERO_DATA_H

#include <stdint.h>

#include "zero/common.h"
#include "zero/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- token files */
typedef struct zero_tokfile zero_tokfile;

/* Opens a token file (ZEROTOK1 or ZEROTOK2), checks its header against its size and reads it once
 * through: every token < vocab, every mask byte 0 or 1 (ZERO_ERR_FORMAT naming the first that is
 * not), so that training does not meet a bad one late. */
zero_status zero_tokfile_open(zero_tokfile **out, const char *path, zero_error *err);
void zero_tokfile_close(zero_tokfile *f); /* NULL is a no-op */
const char *zero_tokfile_last_error(const zero_tokfile *f);
uint64_t zero_tokfile_count(const zero_tokfile *f);  /* tokens */
uint32_t zero_tokfile_vocab(const zero_tokfile *f);  /* every token is < vocab */
uint32_t zero_tokfile_row(const zero_tokfile *f);    /* 0: a stream; R: packed rows of R tokens */
int zero_tokfile_has_mask(const zero_tokfile *f);
int zero_tokfile_has_starts(const zero_tokfile *f); /* 1: the file records where its examples start */
int zero_tokfile_version(const zero_tokfile *f);     /* 1 or 2 */
/* Reads tokens [first, first + n) into tokens (and their mask into mask when not NULL; all 1 when
 * the file has none). A token >= vocab or a mask byte other than 0/1 is ZERO_ERR_FORMAT. */
zero_status zero_tokfile_read(zero_tokfile *f, uint64_t first, uint64_t n, int32_t *tokens, uint8_t *mask);
/* Reads the starts of tokens [first, first + n) (1 at an example's first token; all 0 when the
 * file records none). A byte other than 0/1 is ZERO_ERR_FORMAT. */
zero_status zero_tokfile_read_starts(zero_tokfile *f, uint64_t first, uint64_t n, uint8_t *starts);
/* Writes a ZEROTOK2 file (2-byte tokens when vocab <= 65536, else 4); mask and starts may be NULL;
 * row 0 or a divisor of count. Written to PATH.tmp and renamed: PATH is complete or untouched. */
zero_status zero_tokfile_write(const char *path, const int32_t *tokens, const uint8_t *mask, const uint8_t *starts,
                               uint64_t count, uint32_t vocab, uint32_t row, zero_error *err);

/* ---------------------------------------------------------------- chat formats */
typedef enum zero_chat_format {
    ZERO_CHAT_NONE = 0,
    ZERO_CHAT_CHATML = 1,  /* <|im_start|>role\ncontent<|im_end|>\n (Qwen, SmolLM) */
    ZERO_CHAT_LLAMA3 = 2,  /* <|start_header_id|>role<|end_header_id|>\n\ncontent<|eot_id|> after BOS */
    ZERO_CHAT_MISTRAL = 3, /* BOS [INST] user [/INST]assistant EOS ... */
    ZERO_CHAT_MODEL = 4,   /* the tokenizer's own chat template, rendered by zero/template.h */
} zero_chat_format;

/* "chatml", "llama3", "mistral", "model" -> the format; ZERO_ERR_INVALID_ARG for another name. */
zero_status zero_chat_format_parse(const char *name, zero_chat_format *out);
const char *zero_chat_format_name(zero_chat_format f);
/* The format a tokenizer implies: ZERO_CHAT_MODEL when it has a chat template, else
 * zero_chat_format_builtin's. */
zero_chat_format zero_chat_format_detect(const zero_tokenizer *tok);
/* The built-in format a tokenizer implies: its chat template's markers, else its special tokens
 * (<|im_start|>: chatml, <|start_header_id|>: llama3, [INST]: mistral); ZERO_CHAT_NONE if none. */
zero_chat_format zero_chat_format_builtin(const zero_tokenizer *tok);

typedef struct zero_chat_message {
    const char *role; /* "system", "user" or "assistant" */
    const char *content;
} zero_chat_message;

/* Renders and tokenizes a conversation (with add_generation_prompt: the assistant header after
 * it, for sampling). Appends ids to *ids and, when mask is not NULL, one byte per id to *mask:
 * 1 for the tokens of assistant turns (their content and end marker). Bad roles or order are
 * ZERO_ERR_INVALID_ARG with the reason in err. ZERO_CHAT_MODEL renders the tokenizer's template
 * (messages, add_generation_prompt, bos_token and eos_token of tokenizer_config.json): the mask is
 * its {% generation %} blocks, or, without them, each assistant message's span (the bytes that change
 * when its content does) and the special token that follows it (docs/TOKENIZER.md); a template
 * outside the subset is ZERO_ERR_UNSUPPORTED, raise_exception ZERO_ERR_FORMAT, both with the line. */
zero_status zero_chat_encode(zero_tokenizer *tok, zero_chat_format fmt, const zero_chat_message *msgs, int n,
                             int add_generation_prompt, zero_token_ids *ids, uint8_t **mask, size_t *mask_cap,
                             zero_error *err);
/* zero_chat_encode of a chat as a JSONL line holds it: chat is a JSON object (len bytes) with
 * "messages" and, optionally, "tools" (the functions the model may call, OpenAI's and transformers'
 * form: [{"type": "function", "function": {"name", "description", "parameters"}}]). A message has a
 * string role (system, user, assistant, or tool: a tool's result) and a string content (null or
 * absent only on an assistant message with tool_calls); the model's template gets every other key as
 * the JSON value it is (tool_calls [{"type": "function", "function": {"name", "arguments": {...} or
 * "..."}}], tool_call_id, name, reasoning_content, ...). The mask: each assistant turn's tool calls and
 * reasoning are trained as its content is (the bytes that change when its content, tool_calls and
 * reasoning_content change), tool results are not. The built-in formats refuse tools, tool turns,
 * tool_calls and reasoning_content (ZERO_ERR_UNSUPPORTED, "... is not supported yet"); a malformed chat
 * is ZERO_ERR_INVALID_ARG naming the message and key. */
zero_status zero_chat_encode_json(zero_tokenizer *tok, zero_chat_format fmt, const char *chat, size_t len,
                                  int add_generation_prompt, zero_token_ids *ids, uint8_t **mask, size_t *mask_cap,
                                  zero_error *err);

/* ---------------------------------------------------------------- data sets */
typedef struct zero_data_opts {
    zero_chat_format chat;  /* ZERO_CHAT_NONE: detect from the tokenizer when a chat is met */
    int64_t seq;            /* > 0: pack examples into rows of seq + 1 tokens; 0: one stream */
    int skip_bad;           /* 1: skip bad examples and count them; 0: the first one is an error */
} zero_data_opts;
void zero_data_opts_default(zero_data_opts *o);

typedef struct zero_data_stats {
    uint64_t examples;   /* examples kept */
    uint64_t skipped;    /* bad examples skipped (skip_bad) */
    uint64_t tokens;     /* tokens in the data (padding included) */
    uint64_t trained;    /* tokens with mask 1 */
    uint64_t padding;    /* padding tokens added by packing */
    uint64_t rows;       /* packed rows (0 for a stream) */
    uint64_t bytes;      /* input bytes read */
    char first_skipped[256]; /* "file:line: reason" of the first skipped example */
} zero_data_stats;

typedef struct zero_data zero_data;

/* What a data file may hold (docs/SECURITY.md): a JSONL line (one example) of at most 64 MiB and
 * 2^16 JSON values, a text document of at most 4 GiB (what the tokenizer takes). */
#define ZERO_DATA_MAX_LINE (UINT64_C(64) << 20)
#define ZERO_DATA_MAX_VALUES (UINT64_C(1) << 16)
#define ZERO_DATA_MAX_TEXT ((UINT64_C(4) << 30) - 1)

/* Calls fn for each line of the file at path, numbered from 1: the line without its '\n'
 * (NUL-terminated in a buffer that is valid during the call; the last line counts without a
 * '\n' too). The file is read 64 KiB at a time and memory is one line: a line longer than
 * max_line is not held — as soon as more than max_line bytes of it are read, fn gets line NULL
 * and that count (> max_line), and the rest of the line is skipped unread into memory. A status
 * other than ZERO_OK from fn stops the reading and is returned; ZERO_ERR_IO (err says why) when
 * the file cannot be read. A FIFO or a pipe is read as it streams. */
typedef zero_status (*zero_line_fn)(void *ctx, const char *line, size_t len, uint64_t lineno);
zero_status zero_data_foreach_line(const char *path, uint64_t max_line, zero_line_fn fn, void *ctx, zero_error *err);
/* Calls fn for each example of a data file: each line, as zero_data_foreach_line does; or, when
 * json_array is 1 and the first byte of the file that is not whitespace (within its first 64 KiB)
 * is '[', each element of that one JSON array (what HF datasets' to_json(lines=False) and FastChat
 * write), with the line the element starts on. An element is streamed as a line is: memory is one
 * element, and one longer than max gets fn(NULL, count > max) and is skipped unread into memory.
 * The array's own grammar (brackets, commas, nothing after its ']') is checked as it streams:
 * ZERO_ERR_FORMAT with "PATH:LINE: reason" in err; each element's grammar is fn's to check.
 * *is_array (may be NULL) tells which reading was chosen, before the first call of fn. */
zero_status zero_data_foreach_example(const char *path, int json_array, uint64_t max, zero_line_fn fn, void *ctx,
                                      int *is_array, zero_error *err);

zero_status zero_data_create(zero_data **out, zero_tokenizer *tok, const zero_data_opts *o, zero_error *err);
void zero_data_free(zero_data *d);
const char *zero_data_last_error(const zero_data *d);
/* Adds a file: *.jsonl / *.json are examples ({"text"}, {"prompt","completion"}, {"messages"},
 * ShareGPT's {"conversations"}, Alpaca's {"instruction","input","output"}: docs/TOKENIZER.md), one
 * a line, or the elements of one JSON array for a *.json file that starts with '['
 * (zero_data_foreach_example); anything else is plain text, one document per file of at most
 * ZERO_DATA_MAX_TEXT bytes (a directory: its regular files in name order, as zero train reads).
 * Errors name the file and line. */
zero_status zero_data_add_file(zero_data *d, const char *path);
/* Adds one JSONL line (for callers that read their own input); `where` names it in errors. A bad
 * example with skip_bad is skipped and counted (ZERO_OK); a line longer than ZERO_DATA_MAX_LINE,
 * or whose JSON holds more than ZERO_DATA_MAX_VALUES values or nests deeper than
 * ZERO_JSON_MAX_DEPTH, is a bad example, refused before it is parsed. */
zero_status zero_data_add_jsonl_line(zero_data *d, const char *line, size_t len, const char *where);
/* Adds a text document. */
zero_status zero_data_add_text(zero_data *d, const char *text, size_t len);
/* Packs (seq > 0) and fixes the stream; no example can be added after. */
zero_status zero_data_finish(zero_data *d);
const int32_t *zero_data_tokens(const zero_data *d);
const uint8_t *zero_data_mask(const zero_data *d); /* NULL when every token counts */
/* After finish: 1 at the first token of each example (of each row-long piece of a longer one, and
 * of each row's padding), 0 elsewhere; zero_data_count bytes. */
const uint8_t *zero_data_starts(const zero_data *d);
uint64_t zero_data_count(const zero_data *d);
void zero_data_get_stats(const zero_data *d, zero_data_stats *s);
/* The ids (and mask) of the last example added, before packing: for `zero tokenize --print`. */
const int32_t *zero_data_last_example(const zero_data *d, const uint8_t **mask, size_t *n);
/* Writes the finished data as a token file (the mask only when some token has mask 0; the
 * examples' starts always). */
zero_status zero_data_write(zero_data *d, const char *path);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_DATA_H */
