/* zero/template.h — chat templates: the subset of Jinja that Hugging Face chat templates use, parsed
 * and rendered in C, in the environment transformers renders them in (docs/TOKENIZER.md).
 *
 *   zero_template *t;  zero_template_parse(&t, src, strlen(src), &err);   // a construct outside
 *   zero_template_opts o;  zero_template_opts_default(&o);                 //   the subset: an error
 *   zero_template_output out;                                              //   naming it and its line
 *   zero_template_render(t, "{\"messages\": [...], \"add_generation_prompt\": true}", len, &o, &out, &err);
 *   ... out.text, out.len; out.spans: the {% generation %} blocks ...
 *   zero_template_output_free(&out);  zero_template_free(t);
 *
 * The environment is transformers' (trim_blocks, lstrip_blocks, loop controls, no trailing newline
 * kept): tojson is json.dumps(ensure_ascii=False), raise_exception(msg) fails the render with the
 * template's message, strftime_now(fmt) formats opts.now, range() is bounded as its sandbox bounds it.
 * A template is untrusted input: its output, memory and steps are bounded (opts), its nesting too.
 */
#ifndef ZERO_TEMPLATE_H
#define ZERO_TEMPLATE_H

#include <stddef.h>
#include <stdint.h>

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct zero_template zero_template;

/* What a template source may be: at most 1 MiB, blocks and expressions nested at most 128 deep. */
#define ZERO_TEMPLATE_MAX_SOURCE (UINT64_C(1) << 20)
#define ZERO_TEMPLATE_MAX_DEPTH  128

/* Parses a template (len bytes, not NUL-terminated necessarily). A syntax error or a construct
 * outside the subset is ZERO_ERR_FORMAT / ZERO_ERR_UNSUPPORTED with "chat template line N: ..." in
 * err ("filter 'wordwrap' is not supported yet"); nothing is kept. */
zero_status zero_template_parse(zero_template **out, const char *src, size_t len, zero_error *err);
void zero_template_free(zero_template *t); /* NULL is a no-op */
/* 1 when the template has {% generation %} blocks (the spans that carry loss). */
int zero_template_has_generation(const zero_template *t);

typedef struct zero_template_opts {
    int64_t now;         /* strftime_now's time (Unix seconds, formatted as UTC); 0: the current local time */
    uint64_t max_output; /* bytes of output (default 256 MiB) */
    uint64_t max_memory; /* bytes of values made while rendering (default 1 GiB) */
    uint64_t max_steps;  /* statements, loop iterations and calls (default 2^28) */
} zero_template_opts;
void zero_template_opts_default(zero_template_opts *o);

typedef struct zero_template_output {
    char *text; /* NUL-terminated, len bytes */
    size_t len;
    size_t (*spans)[2]; /* the output of each {% generation %} block: [begin, end) bytes */
    size_t nspans;
} zero_template_output;

/* Renders with the variables of the JSON object context (len bytes): "messages", "bos_token",
 * "add_generation_prompt", "tools", ... A number without a fraction or exponent is an integer. On
 * error (ZERO_ERR_FORMAT: the template failed, raise_exception included; ZERO_ERR_INVALID_ARG: the
 * context is not a JSON object; ZERO_ERR_NOSPACE: a limit was reached; ZERO_ERR_NOMEM) out is
 * zeroed and err says why, with the template's line. */
zero_status zero_template_render(const zero_template *t, const char *context, size_t len, const zero_template_opts *o,
                                 zero_template_output *out, zero_error *err);
void zero_template_output_free(zero_template_output *out);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_TEMPLATE_H */
