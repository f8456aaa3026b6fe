/* `zero tokenize`: text and JSONL (examples, prompt/completion, chats) through a Hugging Face
 * tokenizer.json into a token file with a loss mask (ZEROTOK2), or ids printed line by line. */
#include "cli.h"

#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "zero/data.h"

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero tokenize --tokenizer DIR|tokenizer.json INPUT... (-o OUT | --print) [--seq T]\n"
            "                     [--chat-template model|chatml|llama3|mistral] [--skip-bad-examples]\n"
            "                     [--no-special] [--json]\n"
            "\n"
            "Tokenizes INPUT files with a Hugging Face tokenizer.json (byte-level BPE: GPT-2, Llama 3,\n"
            "Qwen 2/3, SmolLM2; SentencePiece-style BPE: Llama 2, Mistral, TinyLlama). *.jsonl / *.json\n"
            "inputs hold one example a line (a *.json file may instead be one JSON array of them):\n"
            "{\"text\"}, {\"prompt\", \"completion\"} (loss on the completion), {\"messages\": [{\"role\",\n"
            "\"content\"}...]} or ShareGPT's {\"conversations\": [{\"from\", \"value\"}...]} (loss on assistant\n"
            "turns), Alpaca's {\"instruction\", \"input\", \"output\"} (the Alpaca prompt; loss on the output);\n"
            "any other file (or a directory of files) is plain text, one document a file. EOS follows each\n"
            "example. With the model's chat template, messages keep their other keys (tool_calls,\n"
            "tool_call_id, name, reasoning_content, ...), role \"tool\" and a top-level \"tools\" list are\n"
            "passed to it, and tool calls are trained with their assistant turn.\n"
            "\n"
            "  --tokenizer DIR|FILE     a model directory with tokenizer.json (tokenizer_config.json is read\n"
            "                           too: bos/eos, chat template), or a tokenizer.json\n"
            "  -o, --output OUT         write a ZEROTOK2 token file (loss mask included when some token has\n"
            "                           none), replaced atomically\n"
            "  --print                  instead: one line of space-separated ids per input line (the line\n"
            "                           without its newline; with the post-processor's BOS ...; a JSONL line\n"
            "                           or an element of a JSON array: its example with EOS; a blank or\n"
            "                           skipped line: an empty line)\n"
            "  --seq T                  pack examples into rows of T + 1 tokens (best fit, EOS padding with\n"
            "                           no loss); an example longer than T + 1 is a bad example\n"
            "  --chat-template NAME     model (the tokenizer's own chat template), chatml, llama3 or mistral\n"
            "                           (default: model when the tokenizer has a template, else from its tokens)\n"
            "  --skip-bad-examples      skip and count bad JSONL lines instead of failing on the first\n"
            "  --no-special             --print: without the post-processor (no BOS)\n"
            "  --json                   a JSON summary; with --print, one {\"ids\", \"mask\"} object a line\n"
            "Details: docs/TOKENIZER.md.\n");
}

typedef struct opts {
    const char *tokenizer, *out;
    const char **inputs;
    int ninputs;
    int print, json, skip_bad, no_special;
    int64_t seq;
    zero_chat_format chat;
} opts;

static int is_jsonl(const char *p) {
    const size_t n = strlen(p);
    return (n >= 6 && !strcmp(p + n - 6, ".jsonl")) || (n >= 5 && !strcmp(p + n - 5, ".json"));
}

static int parse(int argc, char **argv, opts *o) {
    memset(o, 0, sizeof *o);
    o->inputs = calloc((size_t)argc, sizeof *o->inputs);
    if (!o->inputs) return -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            return 1;
        } else if (!strcmp(a, "--tokenizer")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            o->tokenizer = v;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            o->out = v;
        } else if (!strcmp(a, "--seq")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_i64("--seq", v, 1, 1 << 24, &o->seq)) return -1;
        } else if (!strcmp(a, "--chat-template")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return -1;
            if (zero_chat_format_parse(v, &o->chat)) {
                cli_error(CLI_USAGE, "--chat-template '%s': expected model or one of the built-in formats chatml, llama3, "
                          "mistral (Jinja templates are not executed)", v);
                return -1;
            }
        } else if (!strcmp(a, "--print")) {
            o->print = 1;
        } else if (!strcmp(a, "--json")) {
            o->json = 1;
        } else if (!strcmp(a, "--skip-bad-examples")) {
            o->skip_bad = 1;
        } else if (!strcmp(a, "--no-special")) {
            o->no_special = 1;
        } else if (a[0] == '-' && a[1]) {
            cli_error(CLI_USAGE, "unknown option '%s' for tokenize (zero tokenize --help lists them)", a);
            return -1;
        } else {
            o->inputs[o->ninputs++] = a;
        }
    }
    if (!o->tokenizer) {
        cli_error(CLI_USAGE, "tokenize: expected --tokenizer DIR|tokenizer.json");
        return -1;
    }
    if (!o->ninputs) {
        cli_error(CLI_USAGE, "tokenize: expected at least one INPUT file");
        return -1;
    }
    if (!!o->print == !!o->out) {
        cli_error(CLI_USAGE, "tokenize: expected exactly one of -o OUT and --print");
        return -1;
    }
    if (o->print && o->seq) {
        cli_error(CLI_USAGE, "tokenize: --seq packs a token file: it does not go with --print");
        return -1;
    }
    if (o->out && o->no_special) {
        cli_error(CLI_USAGE, "tokenize: --no-special goes with --print: a token file holds what zero train reads (the "
                  "tokenizer's BOS/EOS around each document and example)");
        return -1;
    }
    if (o->out && cli_path_within(o->out, o->tokenizer)) {
        cli_error(CLI_USAGE, "tokenize: -o '%s' is %s the tokenizer '%s': expected another path (it would be "
                  "overwritten)", o->out, cli_same_path(o->out, o->tokenizer) ? "the file of" : "inside", o->tokenizer);
        return -1;
    }
    int examples = 0; /* an input that may hold JSONL examples: a .jsonl/.json file or a directory */
    for (int i = 0; i < o->ninputs; i++) {
        struct stat sb;
        if (stat(o->inputs[i], &sb) != 0) {
            cli_error(CLI_USAGE, "tokenize: input '%s' does not exist", o->inputs[i]);
            return -1;
        }
        if (o->print && S_ISDIR(sb.st_mode)) {
            cli_error(CLI_USAGE, "tokenize: --print takes files, '%s' is a directory", o->inputs[i]);
            return -1;
        }
        if (S_ISREG(sb.st_mode) && sb.st_size == 0) {
            cli_error(CLI_USAGE, "tokenize: input '%s' is empty: expected text or JSONL", o->inputs[i]);
            return -1;
        }
        if (o->out && cli_path_within(o->out, o->inputs[i])) {
            cli_error(CLI_USAGE, "tokenize: -o '%s' %s input '%s': expected another path (it would be overwritten or "
                      "read)", o->out, S_ISDIR(sb.st_mode) ? "is inside the" : "is the", o->inputs[i]);
            return -1;
        }
        examples |= is_jsonl(o->inputs[i]) || S_ISDIR(sb.st_mode);
    }
    if (!examples && (o->chat != ZERO_CHAT_NONE || o->skip_bad)) {
        cli_error(CLI_USAGE, "tokenize: %s applies to JSONL examples, and no input is JSONL (*.jsonl, *.json) or a "
                  "directory", o->chat != ZERO_CHAT_NONE ? "--chat-template" : "--skip-bad-examples");
        return -1;
    }
    struct stat sb;
    if (stat(o->tokenizer, &sb) != 0) {
        cli_error(CLI_USAGE, "tokenize: --tokenizer '%s' does not exist", o->tokenizer);
        return -1;
    }
    return 0;
}

static void print_ids(const int32_t *ids, const uint8_t *mask, size_t n, int json) {
    if (json) {
        fputs("{\"ids\": [", stdout);
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
        fputs("], \"mask\": [", stdout);
        for (size_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", mask ? mask[i] : 1);
        fputs("]}\n", stdout);
        return;
    }
    for (size_t i = 0; i < n; i++) printf(i ? " %d" : "%d", ids[i]);
    putchar('\n');
}

/* Progress on stderr for inputs of 8 MiB and more, at most once a second. */
typedef struct progress {
    double total, done, t0, last;
    int on, ended;
} progress;
static void progress_tick(progress *p, double add) {
    p->done += add;
    if (!p->on || p->ended) return;
    const double now = zero_now();
    if (now - p->last < 1.0 && p->done < p->total) return;
    p->last = now;
    p->ended = p->done >= p->total;
    fprintf(stderr, "zero: tokenize: %.1f of %.1f MiB (%.1f MB/s)\n", p->done / 1048576.0, p->total / 1048576.0,
            p->done / 1e6 / (now - p->t0 > 1e-9 ? now - p->t0 : 1e-9));
}

/* --print: one line of ids per input line, read a line at a time (memory: one line). */
typedef struct print_ctx {
    const opts *o;
    const char *path;
    zero_tokenizer *tok;
    zero_data *d; /* JSONL input; NULL for text */
    zero_token_ids *ids;
    int array; /* a *.json file that is one JSON array: a line of ids per element */
} print_ctx;

static zero_status print_line(void *ctx, const char *line, size_t len, uint64_t lineno) {
    print_ctx *c = ctx;
    char where[1200];
    snprintf(where, sizeof where, "%s:%llu", c->path, (unsigned long long)lineno);
    if (!line) {
        cli_error(CLI_RUNTIME, "tokenize: %s: %s of more than %zu bytes, longer than the %llu MiB %s may have", where,
                  c->array ? "an element" : "a line", len, (unsigned long long)(ZERO_DATA_MAX_LINE >> 20),
                  c->array ? "an example" : "a line");
        return ZERO_ERR_FORMAT;
    }
    if (c->d) {
        if (zero_data_add_jsonl_line(c->d, line, len, where)) {
            cli_error(CLI_RUNTIME, "tokenize: %s", zero_data_last_error(c->d));
            return ZERO_ERR_FORMAT;
        }
        const uint8_t *mask;
        size_t n;
        const int32_t *x = zero_data_last_example(c->d, &mask, &n);
        print_ids(x, mask, n, c->o->json);
        return ZERO_OK;
    }
    c->ids->n = 0;
    if (zero_tokenizer_encode(c->tok, line, len, c->o->no_special ? 0 : ZERO_TOK_ADD_SPECIAL, c->ids)) {
        cli_error(CLI_RUNTIME, "tokenize: %s", zero_tokenizer_last_error(c->tok));
        return ZERO_ERR_FORMAT;
    }
    print_ids(c->ids->ids, NULL, c->ids->n, c->o->json);
    return ZERO_OK;
}

static int run_print(const opts *o, zero_tokenizer *tok) {
    zero_data_opts dopt;
    zero_data_opts_default(&dopt);
    dopt.chat = o->chat;
    dopt.skip_bad = o->skip_bad;
    zero_error err;
    zero_token_ids ids = {0};
    int rc = CLI_OK;
    for (int i = 0; i < o->ninputs && !rc; i++) {
        const int jl = is_jsonl(o->inputs[i]);
        print_ctx c = {o, o->inputs[i], tok, NULL, &ids, 0};
        if (jl && zero_data_create(&c.d, tok, &dopt, &err)) {
            rc = cli_error(CLI_RUNTIME, "tokenize: %s", err.msg);
            break;
        }
        err.msg[0] = 0;
        const size_t len = strlen(o->inputs[i]);
        const int json = len >= 5 && !strcmp(o->inputs[i] + len - 5, ".json");
        const zero_status st =
            zero_data_foreach_example(o->inputs[i], json, ZERO_DATA_MAX_LINE, print_line, &c, &c.array, &err);
        if (st) rc = err.msg[0] ? cli_error(CLI_RUNTIME, "tokenize: %s", err.msg) : CLI_RUNTIME;
        if (jl && !rc && o->skip_bad) {
            zero_data_stats st2;
            zero_data_get_stats(c.d, &st2);
            if (st2.skipped)
                fprintf(stderr, "zero: warning: %s: skipped %llu bad example%s (first: %s)\n", o->inputs[i],
                        (unsigned long long)st2.skipped, st2.skipped == 1 ? "" : "s", st2.first_skipped);
        }
        zero_data_free(c.d);
    }
    zero_token_ids_free(&ids);
    if (fflush(stdout) != 0) return cli_error(CLI_RUNTIME, "tokenize: cannot write to stdout");
    return rc;
}

static int run_file(const opts *o, zero_tokenizer *tok) {
    zero_data_opts dopt;
    zero_data_opts_default(&dopt);
    dopt.chat = o->chat;
    dopt.skip_bad = o->skip_bad;
    dopt.seq = o->seq;
    zero_error err;
    zero_data *d;
    if (zero_data_create(&d, tok, &dopt, &err)) return cli_error(CLI_RUNTIME, "tokenize: %s", err.msg);
    progress p = {0};
    for (int i = 0; i < o->ninputs; i++) {
        struct stat sb;
        if (stat(o->inputs[i], &sb) == 0 && S_ISREG(sb.st_mode)) p.total += (double)sb.st_size;
    }
    p.on = p.total >= 8.0 * 1048576.0;
    p.t0 = p.last = zero_now();
    int rc = CLI_OK;
    for (int i = 0; i < o->ninputs && !rc; i++) {
        /* a directory, a JSONL file (a line at a time) or a text document: what zero train reads */
        struct stat sb;
        if (zero_data_add_file(d, o->inputs[i])) rc = cli_error(CLI_RUNTIME, "tokenize: %s", zero_data_last_error(d));
        else if (stat(o->inputs[i], &sb) == 0 && S_ISREG(sb.st_mode)) progress_tick(&p, (double)sb.st_size);
    }
    if (!rc && zero_data_finish(d)) rc = cli_error(CLI_RUNTIME, "tokenize: %s", zero_data_last_error(d));
    if (!rc && zero_data_write(d, o->out)) rc = cli_error(CLI_RUNTIME, "tokenize: %s", zero_data_last_error(d));
    if (!rc) {
        zero_data_stats st;
        zero_data_get_stats(d, &st);
        const double secs = zero_now() - p.t0;
        const int masked = zero_data_mask(d) != NULL;
        if (o->json) {
            printf("{\"output\": \"%s\", \"tokens\": %llu, \"trained\": %llu, \"examples\": %llu, \"skipped\": %llu, "
                   "\"rows\": %llu, \"row\": %lld, \"padding\": %llu, \"vocab\": %d, \"mask\": %s, \"bytes\": %llu, "
                   "\"seconds\": ",
                   o->out, (unsigned long long)st.tokens, (unsigned long long)st.trained,
                   (unsigned long long)st.examples, (unsigned long long)st.skipped, (unsigned long long)st.rows,
                   (long long)(o->seq ? o->seq + 1 : 0), (unsigned long long)st.padding, zero_tokenizer_vocab_size(tok),
                   masked ? "true" : "false", (unsigned long long)st.bytes);
            cli_json_double(stdout, secs);
            printf("}\n");
        } else {
            printf("zero tokenize: wrote %s: %llu tokens (%llu with loss), %llu examples", o->out,
                   (unsigned long long)st.tokens, (unsigned long long)st.trained, (unsigned long long)st.examples);
            if (o->seq)
                printf(", %llu rows of %lld (%llu padding)", (unsigned long long)st.rows, (long long)o->seq + 1,
                       (unsigned long long)st.padding);
            printf(", vocab %d, %s, %.1f MB in %.2f s\n", zero_tokenizer_vocab_size(tok), masked ? "loss mask" : "no mask",
                   (double)st.bytes / 1e6, secs);
        }
        if (st.skipped)
            fprintf(stderr, "zero: warning: skipped %llu bad example%s (first: %s)\n", (unsigned long long)st.skipped,
                    st.skipped == 1 ? "" : "s", st.first_skipped);
    }
    zero_data_free(d);
    return rc;
}

int cli_tokenize(int argc, char **argv) {
    opts o;
    const int pr = parse(argc, argv, &o);
    if (pr) {
        free(o.inputs);
        if (pr > 0) {
            usage(stdout);
            return CLI_OK;
        }
        return CLI_USAGE;
    }
    zero_tokenizer *tok;
    zero_error err;
    zero_status st = zero_tokenizer_load(&tok, o.tokenizer, &err);
    if (st) {
        free(o.inputs);
        return cli_error(CLI_RUNTIME, "%s", err.msg);
    }
    const int rc = o.print ? run_print(&o, tok) : run_file(&o, tok);
    zero_tokenizer_free(tok);
    free(o.inputs);
    return rc;
}
