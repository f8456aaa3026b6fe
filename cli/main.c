/* The `zero` command: dispatches to a subcommand (train, sample, estimate, plan, export,
 * inspect, bench, plot). Uses only the public API of libzero. */
#include "cli.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "decoder/decoder.h"

typedef struct command {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
} command;

static const command commands[] = {
    {"train", cli_train, "train or fine-tune GPT-2 or a Llama-family model (fully or LoRA) with ZeRO stages 0-3"},
    {"sample", cli_sample, "generate text from a trained model"},
    {"estimate", cli_estimate, "per-rank memory of each stage and offload for a model"},
    {"plan", cli_plan, "the cheapest stage/offload/micro-batch that fits your hardware"},
    {"export", cli_export, "a checkpoint as a Hugging Face model directory, a PEFT adapter or one safetensors file"},
    {"inspect", cli_inspect, "summarize and verify a checkpoint"},
    {"tokenize", cli_tokenize, "text and JSONL through a tokenizer.json into a token file (or ids)"},
    {"bench", cli_bench, "benchmarks: adam | comm | io | rates | step | tokenize"},
    {"plot", cli_plot, "loss, lr, step time and memory of --log-json logs as a PNG or SVG"},
};
#define NCOMMANDS (sizeof commands / sizeof commands[0])

static void usage(FILE *f) {
    fprintf(f, "zero %s — the Zero Redundancy Optimizer in C\n\n", ZERO_VERSION_STRING);
    fprintf(f, "usage: zero <command> [options]   (zero <command> --help for its options)\n"
               "       zero --version [--verbose]   (--verbose: the BLAS, bf16 products, kernels and device backends)\n\ncommands:\n");
    for (size_t i = 0; i < NCOMMANDS; i++) fprintf(f, "  %-9s %s\n", commands[i].name, commands[i].summary);
}

/* The library never prints: its log lines (level from $ZERO_LOG, default warn) come here. */
static void log_to_stderr(void *ctx, zero_log_level level, const char *msg) {
    (void)ctx;
    if (cli_quiet_warnings && level != ZERO_LOG_ERROR) return;
    static const char *names[] = {"error", "warning", "info", "debug"};
    fprintf(stderr, "zero: %s: %s\n", names[level <= ZERO_LOG_DEBUG ? level : ZERO_LOG_DEBUG], msg);
}

static int version(int verbose) {
    printf("zero %s\n", ZERO_VERSION_STRING);
    if (!verbose) return CLI_OK;
    dec_compute_info ci;
    dec_compute_info_get(&ci);
    printf("blas: %s\nbf16 products: %s\nkernels: %s\n", ci.blas, ci.bf16_products, ci.kernels);
    printf("device backends: %s (docs/DEVICE.md)\n", zero_device_backends_built());
    if (strstr(zero_device_backends_built(), "cuda")) { /* loads the cuda module: nothing of CUDA runs before */
        char cuda[512];
        zero_device_describe("cuda", cuda, sizeof cuda);
        printf("cuda: %s\n", cuda);
    }
    const char *note = cli_blas_core_note();
    if (note) printf("note: %s\n", note);
    return CLI_OK;
}

/* What a command printed must have reached standard output: a full disk or a closed pipe behind
 * it makes the command fail, not report success with its output lost. */
static int finish(int rc) {
    errno = 0;
    if ((fflush(stdout) != 0 || ferror(stdout)) && rc == CLI_OK)
        return cli_error(CLI_RUNTIME, "cannot write to standard output: %s",
                         errno ? strerror(errno) : "a write failed (a full disk, a closed pipe)");
    return rc;
}

int main(int argc, char **argv) {
    cli_rank_monitor();
    cli_remove_scratch_on_stop(); /* --ranks: the launcher forwards these signals instead */
    cli_argc = argc;
    cli_argv = argv;
    zero_log_set_callback(log_to_stderr, NULL);
    if (argc < 2)
        return cli_error(CLI_USAGE, "expected a command: train, sample, estimate, plan, export, inspect, tokenize, "
                         "bench or plot (zero --help says what each does)");
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return finish(CLI_OK);
    }
    if (!strcmp(argv[1], "--version")) {
        if (argc > 3 || (argc == 3 && strcmp(argv[2], "--verbose") != 0))
            return cli_error(CLI_USAGE, "unexpected argument '%s' after --version: expected --verbose or nothing",
                             argv[2]);
        return finish(version(argc == 3));
    }
    for (size_t i = 0; i < NCOMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name)) return finish(commands[i].run(argc - 1, argv + 1));
    return cli_error(CLI_USAGE, "unknown command '%s': expected one of train, sample, estimate, plan, export, inspect, tokenize, bench, plot", argv[1]);
}
