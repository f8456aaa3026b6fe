/* cli/cli.h — the `zero` command's subcommands and shared helpers for parsing and errors.
 * The CLI uses only the public API (include/zero/); these helpers are the CLI's own. */
#ifndef ZERO_CLI_H
#define ZERO_CLI_H

#include <stdint.h>
#include <stdio.h>

#include "zero/zero.h"

/* Exit statuses of the command-line contract (DESIGN.md). */
enum { CLI_OK = 0, CLI_RUNTIME = 1, CLI_USAGE = 2 };

/* Subcommands: argv[0] is the subcommand name. Each returns an exit status. */
int cli_train(int argc, char **argv);
int cli_sample(int argc, char **argv);
int cli_estimate(int argc, char **argv);
int cli_plan(int argc, char **argv);
int cli_export(int argc, char **argv);
int cli_inspect(int argc, char **argv);
int cli_bench(int argc, char **argv);
int cli_bench_comm(int argc, char **argv);

/* Prints "zero: error: <msg>" (one line) to stderr and returns `code`. */
int cli_error(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parsers: on a bad value they print a one-line error naming the flag, the value and what was
 * expected, and return -1 (the caller returns CLI_USAGE). */
int cli_parse_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out);
int cli_parse_int(const char *flag, const char *v, int lo, int hi, int *out);
int cli_parse_double(const char *flag, const char *v, double lo, double hi, double *out);
/* Sizes with units: 24GiB, 512MiB, 1.5GB, 7e9, 1.5B (billions), 350M (millions), 4K. */
int cli_parse_size(const char *flag, const char *v, double *out);
/* The value after a flag: argv[*i + 1], advancing *i; error when missing. */
const char *cli_flag_value(int argc, char **argv, int *i);

/* Writes a double as JSON (finite: %.17g; NaN/Inf as null). */
void cli_json_double(FILE *f, double v);

#endif
