/* src/data/internal.h — what the data layer's files share: the chat encoders with a chat's JSON
 * (tool calls, tool turns, tools, reasoning) and the span test of the loss mask. */
#ifndef ZERO_DATA_INTERNAL_H
#define ZERO_DATA_INTERNAL_H

#include <cjson/cJSON.h>

#include "zero/data.h"
#include "zero/template.h"

/* A chat read from its JSON ({"messages": [...], "tools"?: [...]}): msgs[i] holds message i's role
 * and content (content NULL: an assistant turn of tool calls alone); json[i] is NULL, or the message's
 * JSON when it has keys beyond role and content (the model's template gets them as they are); tools
 * the "tools" array's JSON, or NULL. Strings point into the cJSON tree the chat was read from
 * (msgs) or are the chat's own (json, tools). */
typedef struct zero__chat {
    zero_chat_message *msgs;
    char **json;
    int n;
    char *tools;
} zero__chat;

/* Reads o's "messages" (and "tools") into *c: ZERO_ERR_INVALID_ARG with the reason in why (cap bytes:
 * "messages[2]: tool_calls: expected ..."), ZERO_ERR_NOMEM; *c is empty then. */
zero_status zero__chat_read(const cJSON *o, zero__chat *c, char *why, size_t cap);
void zero__chat_free(zero__chat *c);

/* zero_chat_encode with json (NULL, or one entry a message, each NULL or the message's JSON) and
 * tools (NULL or a JSON array). */
zero_status zero__chat_encode(zero_tokenizer *tok, zero_chat_format fmt, const zero_chat_message *msgs,
                              const char *const *json, int n, const char *tools, int add_generation_prompt,
                              zero_token_ids *ids, uint8_t **mask, size_t *mask_cap, zero_error *err);
/* The same with the model's template parsed once (t), as zero_data renders every chat of a file. */
zero_status zero__chat_encode_template(zero_tokenizer *tok, const zero_template *t, const zero_chat_message *msgs,
                                       const char *const *json, int n, const char *tools, int gen, zero_token_ids *ids,
                                       uint8_t **mask, size_t *mask_cap, zero_error *err);

/* 1 when the token starting at byte a (ending where the next starts, or at e) meets [lo, hi). */
int zero__data_in_span(uint32_t a, uint32_t e, size_t lo, size_t hi);

#endif
