/* Shared helpers of the `zero` command: one-line errors and strict parsers for flag values. */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int cli_quiet_errors;

void cli_first_difference(const char *a, const char *b, char *out, size_t cap) {
    size_t i = 0, line = 1, start = 0;
    for (; a[i] && a[i] == b[i]; i++)
        if (a[i] == '\n') line++, start = i + 1;
    const size_t na = strcspn(a + start, "\n"), nb = strcspn(b + start, "\n");
    snprintf(out, cap, "line %zu: '%.*s%s' here, '%.*s%s' in the record", line, (int)(na < 40 ? na : 40), a + start,
             na > 40 ? "..." : "", (int)(nb < 40 ? nb : 40), b + start, nb > 40 ? "..." : "");
}

int cli_error(int code, const char *fmt, ...) {
    if (cli_quiet_errors) return code;
    /* one write of the whole line, so the lines of several ranks do not interleave */
    char line[2048];
    int n = snprintf(line, sizeof line, "zero: error: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    size_t len = strlen(line);
    line[len++] = '\n';
    fwrite(line, 1, len, stderr);
    fflush(stderr);
    return code;
}

void cli_ckpt_note(const zero_ckpt *c) {
    if (!cli_quiet_warnings && zero_ckpt_note(c)[0]) fprintf(stderr, "zero: note: %s\n", zero_ckpt_note(c));
}

int cli_ranks_agree(zero_comm *comm, int failed, const char *what, const char *msg) {
    const int64_t rank = zero_comm_rank(comm), world = zero_comm_size(comm);
    int64_t mine = failed ? world - rank : 0, first = 0; /* the largest: the lowest failing rank */
    if (zero_comm_all_reduce(comm, &mine, &first, 1, ZERO_DTYPE_INT64, ZERO_OP_MAX) != ZERO_OK)
        return cli_error(CLI_RUNTIME, "rank %lld: %s: %s", (long long)rank, what, zero_comm_last_error(comm));
    if (!first) return CLI_OK;
    if (world - first == rank) return cli_error(CLI_RUNTIME, "%s", msg);
    return CLI_RUNTIME;
}

int cli_parse_i64(const char *flag, const char *v, int64_t lo, int64_t hi, int64_t *out) {
    char *end = NULL;
    errno = 0;
    long long x = v ? strtoll(v, &end, 10) : 0;
    /* strtoll skips leading spaces: ' 1' is not what a flag's value is written as */
    if (!v || !*v || isspace((unsigned char)*v) || *end || errno || x < lo || x > hi) {
        cli_error(CLI_USAGE, "%s '%s': expected an integer in [%lld, %lld]", flag, v ? v : "",
                  (long long)lo, (long long)hi);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_parse_int(const char *flag, const char *v, int lo, int hi, int *out) {
    int64_t x;
    if (cli_parse_i64(flag, v, lo, hi, &x)) return -1;
    *out = (int)x;
    return 0;
}

int cli_parse_double(const char *flag, const char *v, double lo, double hi, double *out) {
    char *end = NULL;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || isspace((unsigned char)*v) || *end || errno || !isfinite(x) || x < lo || x > hi) {
        cli_error(CLI_USAGE, "%s '%s': expected a number in [%g, %g]", flag, v ? v : "", lo, hi);
        return -1;
    }
    *out = x;
    return 0;
}

int cli_parse_size(const char *flag, const char *v, double *out) {
    char *end = NULL;
    errno = 0;
    double x = v ? strtod(v, &end) : 0;
    if (!v || !*v || end == v || errno || !isfinite(x) || x < 0) goto bad;
    static const struct { const char *suffix; double mult; } units[] = {
        {"", 1},          {"K", 1e3},        {"M", 1e6},        {"B", 1e9},        {"G", 1e9},
        {"T", 1e12},      {"KB", 1e3},       {"MB", 1e6},       {"GB", 1e9},       {"TB", 1e12},
        {"KiB", 1024.0},  {"MiB", 1048576.0}, {"GiB", 1073741824.0}, {"TiB", 1099511627776.0},
    };
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
        if (!strcasecmp(end, units[i].suffix) && (units[i].suffix[0] || !*end)) {
            *out = x * units[i].mult;
            return 0;
        }
    }
bad:
    cli_error(CLI_USAGE, "%s '%s': expected a size such as 24GiB, 512MiB, 1.5GB, 7e9 or 1.5B", flag,
              v ? v : "");
    return -1;
}

const char *cli_flag_value(int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_error(CLI_USAGE, "%s: expected a value after it", argv[*i]);
        return NULL;
    }
    *i += 1;
    return argv[*i];
}

/* path made canonical for comparing: realpath when it exists, else its directory's realpath and
 * its last name (a file about to be written). 0, or -1 when neither resolves. */
static int canon(const char *path, char *out, size_t cap) {
    char buf[PATH_MAX];
    if (realpath(path, buf)) return (size_t)snprintf(out, cap, "%s", buf) < cap ? 0 : -1;
    char d[PATH_MAX];
    if ((size_t)snprintf(d, sizeof d, "%s", path) >= sizeof d) return -1;
    size_t n = strlen(d);
    while (n > 1 && d[n - 1] == '/') d[--n] = 0;
    char *slash = strrchr(d, '/');
    const char *base = slash ? slash + 1 : d;
    const char *dir = slash ? (slash == d ? "/" : d) : ".";
    if (slash) *slash = 0;
    if (!*base || !strcmp(base, ".") || !strcmp(base, "..") || !realpath(dir, buf)) return -1;
    return (size_t)snprintf(out, cap, "%s%s%s", buf, strcmp(buf, "/") ? "/" : "", base) < cap ? 0 : -1;
}

int cli_same_path(const char *a, const char *b) {
    struct stat sa, sb;
    const int ea = stat(a, &sa) == 0, eb = stat(b, &sb) == 0;
    if (ea && eb) return sa.st_dev == sb.st_dev && sa.st_ino == sb.st_ino;
    if (ea || eb) return 0;
    char ca[PATH_MAX], cb[PATH_MAX];
    return !canon(a, ca, sizeof ca) && !canon(b, cb, sizeof cb) && !strcmp(ca, cb);
}

const char *cli_path_under(const char *path, const char *dir, char *rest, size_t cap) {
    char cp[PATH_MAX], cd[PATH_MAX];
    struct stat sd;
    if (stat(dir, &sd) || !S_ISDIR(sd.st_mode) || !realpath(dir, cd) || canon(path, cp, sizeof cp)) return NULL;
    const size_t n = strlen(cd);
    if (!strcmp(cp, cd)) return snprintf(rest, cap, "%s", ""), rest;
    if (strncmp(cp, cd, n) || (n > 1 && cp[n] != '/')) return NULL;
    snprintf(rest, cap, "%s", cp + n + (n > 1));
    return rest;
}

int cli_path_within(const char *path, const char *in) {
    char rest[PATH_MAX];
    return cli_same_path(path, in) || cli_path_under(path, in, rest, sizeof rest) != NULL;
}

void cli_ignore_sigpipe(int world) {
    if (world > 1) signal(SIGPIPE, SIG_IGN);
}

/* Async-signal-safe: unlink(2), sigaction, sigprocmask and raise only. */
static void stop_removing_scratch(int sig) {
    zero_scratch_remove_all();
    signal(sig, SIG_DFL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, sig);
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    raise(sig); /* dies of it: the monitor and the shell see the same status as before */
    _exit(128 + sig);
}

void cli_remove_scratch_on_stop(void) {
    static const int sigs[] = {SIGTERM, SIGINT, SIGHUP};
    for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(sigs[i], NULL, &old) != 0 || old.sa_handler == SIG_IGN) continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = stop_removing_scratch;
        sigemptyset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
}

void cli_json_string(FILE *f, const char *s) {
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\') fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20) fprintf(f, "\\u%04x", (unsigned char)*s);
        else fputc(*s, f);
    }
    fputc('"', f);
}

void cli_json_double(FILE *f, double v) {
    if (isfinite(v)) fprintf(f, "%.17g", v);
    else fputs("null", f);
}
