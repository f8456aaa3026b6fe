/* `zero bench tokenize`: encoding speed of a tokenizer.json on the fortunes corpus (MB/s), and the
 * ratio to Hugging Face tokenizers (one thread) on the same lines in the same run when Python has it. */
#include "cli.h"

#include <dirent.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define FORTUNES "/usr/share/games/fortunes"

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero bench tokenize --tokenizer DIR|tokenizer.json [--data FILE|DIR] [--reps N] [--no-python]\n"
            "                           [--json]\n"
            "\n"
            "Encodes every line of the corpus (default: the fortunes corpus, " FORTUNES ",\n"
            "its regular files in name order) with zero's tokenizer, one thread, and reports MB/s (the\n"
            "best of N passes after a warm-up, so both sides run with their word caches filled). Where\n"
            "python3 (ZERO_PYTHON overrides it) imports `tokenizers`, the same lines are encoded by\n"
            "Tokenizer.encode_batch with RAYON_NUM_THREADS=1 in the same run; ratio = its time / ours,\n"
            "and both token counts are printed (they must agree).\n"
            "\n"
            "  --tokenizer DIR|FILE   a tokenizer.json or a directory holding one (required)\n"
            "  --data FILE|DIR        another corpus\n"
            "  --reps N               timed passes (default 3)\n"
            "  --no-python            skip the comparison (ratio null)\n"
            "  --json                 {\"bytes\", \"lines\", \"tokens\", \"seconds\", \"mbps\", \"hf_tokens\",\n"
            "                         \"hf_seconds\", \"hf_mbps\", \"ratio\"}\n");
}

typedef struct corpus {
    char *buf;
    size_t n, cap;
    char **files;
    int nfiles;
} corpus;

static int add_file(corpus *c, const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return -1;
    int rc = 0;
    char chunk[1 << 16];
    size_t k;
    while ((k = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (c->n + k + 1 > c->cap) {
            size_t nc = c->cap ? 2 * c->cap : 1 << 22;
            while (nc < c->n + k + 1) nc *= 2;
            char *nb = realloc(c->buf, nc);
            if (!nb) {
                rc = -1;
                break;
            }
            c->buf = nb;
            c->cap = nc;
        }
        memcpy(c->buf + c->n, chunk, k);
        c->n += k;
    }
    fclose(f);
    if (!rc) {
        char **nf = realloc(c->files, (size_t)(c->nfiles + 1) * sizeof *nf);
        if (!nf || !(nf[c->nfiles] = strdup(path))) return -1;
        c->files = nf;
        c->nfiles++;
    }
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int load_corpus(corpus *c, const char *path) {
    struct stat sb;
    if (stat(path, &sb) != 0) return -1;
    if (!S_ISDIR(sb.st_mode)) return add_file(c, path);
    DIR *dp = opendir(path);
    if (!dp) return -1;
    char **names = NULL;
    size_t nn = 0;
    struct dirent *de;
    while ((de = readdir(dp))) {
        const size_t k = strlen(de->d_name);
        if (de->d_name[0] == '.' || (k > 4 && !strcmp(de->d_name + k - 4, ".dat"))) continue;
        char **t = realloc(names, (nn + 1) * sizeof *t);
        if (!t) break;
        names = t;
        if (!(names[nn] = strdup(de->d_name))) break;
        nn++;
    }
    closedir(dp);
    if (nn) qsort(names, nn, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < nn; i++) {
        char p[4096];
        struct stat s2;
        snprintf(p, sizeof p, "%s/%s", path, names[i]);
        if (!rc && lstat(p, &s2) == 0 && S_ISREG(s2.st_mode)) rc = add_file(c, p);
        free(names[i]);
    }
    free(names);
    return rc;
}

static const char PY_SCRIPT[] =
    "import os, sys, time\n"
    "os.environ['RAYON_NUM_THREADS'] = '1'\n"
    "os.environ['TOKENIZERS_PARALLELISM'] = 'false'\n"
    "try:\n"
    "    from tokenizers import Tokenizer\n"
    "except Exception:\n"
    "    sys.exit(3)\n"
    "tok = Tokenizer.from_file(sys.argv[1])\n"
    "reps = int(sys.argv[2])\n"
    "data = b''.join(open(p, 'rb').read() for p in sys.argv[3:])\n"
    "lines = [l.decode('utf-8', 'replace') for l in data.split(b'\\n')]\n"
    "if data.endswith(b'\\n'):\n"
    "    lines.pop()\n"
    "tok.encode_batch(lines[:1000], add_special_tokens=False)\n"
    "enc = tok.encode_batch(lines, add_special_tokens=False)\n"
    "best = float('inf')\n"
    "for _ in range(reps):\n"
    "    t0 = time.perf_counter()\n"
    "    enc = tok.encode_batch(lines, add_special_tokens=False)\n"
    "    best = min(best, time.perf_counter() - t0)\n"
    "print(sum(len(e.ids) for e in enc), repr(best))\n";

/* Runs the Python side: *tokens and *secs, 0 on success. */
static int bench_python(const char *tokfile, int reps, const corpus *c, long long *tokens, double *secs) {
    const char *py = getenv("ZERO_PYTHON");
    if (!py || !*py) py = "python3";
    if (strchr(py, '\'') || strchr(tokfile, '\'')) return -1;
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' -c 'import tokenizers' >/dev/null 2>&1", py);
    if (system(cmd) != 0) return -1;
    const char *tmpdir = getenv("TMPDIR");
    char path[512];
    snprintf(path, sizeof path, "%s/zero_bench_tok_XXXXXX.py", tmpdir && *tmpdir ? tmpdir : "/tmp");
    int fd = mkstemps(path, 3);
    if (fd < 0) return -1;
    FILE *f = fdopen(fd, "w");
    if (!f) {
        close(fd);
        unlink(path);
        return -1;
    }
    fputs(PY_SCRIPT, f);
    fclose(f);
    size_t len = strlen(py) + strlen(path) + strlen(tokfile) + 64;
    for (int i = 0; i < c->nfiles; i++) len += strlen(c->files[i]) + 3;
    char *full = malloc(len);
    int rc = -1;
    if (full) {
        int k = snprintf(full, len, "'%s' '%s' '%s' %d", py, path, tokfile, reps);
        for (int i = 0; i < c->nfiles; i++) {
            if (strchr(c->files[i], '\'')) goto done;
            k += snprintf(full + k, len - (size_t)k, " '%s'", c->files[i]);
        }
        snprintf(full + k, len - (size_t)k, " 2>/dev/null");
        FILE *p = popen(full, "r");
        if (p) {
            char line[256];
            if (fgets(line, sizeof line, p) && sscanf(line, "%lld %lf", tokens, secs) == 2 && *secs > 0) rc = 0;
            pclose(p);
        }
    }
done:
    free(full);
    unlink(path);
    return rc;
}

int cli_bench_tokenize(int argc, char **argv) {
    const char *tokpath = NULL, *data = FORTUNES;
    int json = 0, python = 1;
    int64_t reps = 3;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return CLI_OK;
        } else if (!strcmp(a, "--tokenizer")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return CLI_USAGE;
            tokpath = v;
        } else if (!strcmp(a, "--data")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return CLI_USAGE;
            data = v;
        } else if (!strcmp(a, "--reps")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_i64("--reps", v, 1, 100, &reps)) return CLI_USAGE;
        } else if (!strcmp(a, "--no-python")) {
            python = 0;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else {
            return cli_error(CLI_USAGE, "bench tokenize: unknown option '%s' (zero bench tokenize --help)", a);
        }
    }
    if (!tokpath) return cli_error(CLI_USAGE, "bench tokenize: expected --tokenizer DIR|tokenizer.json");
    struct stat sb;
    if (stat(tokpath, &sb) != 0) return cli_error(CLI_USAGE, "bench tokenize: --tokenizer '%s' does not exist", tokpath);
    char tokfile[4096];
    snprintf(tokfile, sizeof tokfile, S_ISDIR(sb.st_mode) ? "%s/tokenizer.json" : "%s", tokpath);
    zero_tokenizer *tok;
    zero_error err;
    if (zero_tokenizer_load(&tok, tokpath, &err)) return cli_error(CLI_RUNTIME, "%s", err.msg);
    corpus c = {0};
    if (load_corpus(&c, data) || c.n == 0) {
        zero_tokenizer_free(tok);
        return cli_error(CLI_RUNTIME, "bench tokenize: cannot read the corpus '%s' (expected text files; Debian's "
                         "fortunes package provides the default)", data);
    }
    zero_token_ids ids = {0};
    long long tokens = 0, lines = 0;
    double best = INFINITY;
    int rc = CLI_OK;
    for (int64_t r = -1; r < reps && !rc; r++) { /* r = -1: the warm-up pass */
        tokens = lines = 0;
        const double t0 = zero_now();
        size_t start = 0;
        for (size_t k = 0; k <= c.n; k++) {
            if (k < c.n && c.buf[k] != '\n') continue;
            if (k == c.n && start == c.n) break;
            ids.n = 0;
            if (zero_tokenizer_encode(tok, c.buf + start, k - start, 0, &ids)) {
                rc = cli_error(CLI_RUNTIME, "bench tokenize: %s", zero_tokenizer_last_error(tok));
                break;
            }
            tokens += (long long)ids.n;
            lines++;
            start = k + 1;
        }
        const double dt = zero_now() - t0;
        if (r >= 0 && dt < best) best = dt;
    }
    zero_token_ids_free(&ids);
    zero_tokenizer_free(tok);
    long long hf_tokens = -1;
    double hf = NAN;
    if (!rc && python && bench_python(tokfile, (int)reps, &c, &hf_tokens, &hf)) hf = NAN, hf_tokens = -1;
    if (!rc) {
        const double mbps = (double)c.n / best / 1e6, ratio = hf / best;
        if (json) {
            printf("{\"bytes\": %zu, \"lines\": %lld, \"tokens\": %lld, \"seconds\": ", c.n, lines, tokens);
            cli_json_double(stdout, best);
            printf(", \"mbps\": ");
            cli_json_double(stdout, mbps);
            if (hf_tokens >= 0) printf(", \"hf_tokens\": %lld", hf_tokens);
            else printf(", \"hf_tokens\": null");
            printf(", \"hf_seconds\": ");
            cli_json_double(stdout, hf);
            printf(", \"hf_mbps\": ");
            cli_json_double(stdout, (double)c.n / hf / 1e6);
            printf(", \"ratio\": ");
            cli_json_double(stdout, ratio);
            printf("}\n");
        } else {
            printf("zero bench tokenize: %s, %.2f MB in %lld lines (%d files), one thread\n", tokfile, (double)c.n / 1e6,
                   lines, c.nfiles);
            printf("zero:       %10lld tokens  %8.3f s  %8.2f MB/s\n", tokens, best, mbps);
            if (hf_tokens >= 0)
                printf("tokenizers: %10lld tokens  %8.3f s  %8.2f MB/s   ratio %.2fx%s\n", hf_tokens, hf,
                       (double)c.n / hf / 1e6, ratio, hf_tokens == tokens ? "" : "   (token counts differ!)");
            else
                printf("tokenizers: %s; ratio null\n", python ? "not available (python3 cannot import tokenizers)"
                                                              : "skipped (--no-python)");
        }
        if (hf_tokens >= 0 && hf_tokens != tokens)
            rc = cli_error(CLI_RUNTIME, "bench tokenize: zero made %lld tokens, tokenizers %lld: they must agree", tokens,
                           hf_tokens);
    }
    for (int i = 0; i < c.nfiles; i++) free(c.files[i]);
    free(c.files);
    free(c.buf);
    return rc;
}
