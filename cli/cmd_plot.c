/* `zero plot LOG.jsonl... -o FILE.png|svg`: the records of `zero train --log-json` as four panels
 * (loss and validation loss, learning rate, step time, memory per rank against the step), one
 * colour per run so that several runs overlay; drawn with Cairo (PNG or SVG by the extension). */
#include "cli.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef ZERO_HAVE_CAIRO
#include <cairo-svg.h>
#include <cairo.h>
#endif

#define MAX_RUNS 12
#define MIB      (1024.0 * 1024.0)

static void usage(FILE *f) {
    fprintf(f,
            "usage: zero plot LOG.jsonl... -o FILE.png|FILE.svg [--width W] [--height H] [--title T] [--json]\n"
            "\n"
            "Draws the records of `zero train --log-json` against the step, one colour per log (up to %d,\n"
            "overlaid; the legend names each by its file name), in four panels:\n"
            "  loss          training loss (solid) and validation loss (dashed, dots: \"val_loss\" or\n"
            "                \"eval_loss\" records)\n"
            "  learning rate \"lr\"\n"
            "  step time     \"step_ms\"\n"
            "  memory        per rank, MiB: zero's accounted bytes (mem.total + mem.activations, solid)\n"
            "                and the peak RSS (\"rss_peak\", dashed)\n"
            "The extension of -o chooses PNG (W x H pixels) or SVG (W x H points).\n"
            "  -o, --output FILE  the picture (written as FILE.tmp, then renamed)\n"
            "  --width W          1200 (200..10000)\n"
            "  --height H         900 (150..10000)\n"
            "  --title T          a line above the panels (default: none)\n"
            "  --json             also print what was drawn: per log its points and ranges\n",
            MAX_RUNS);
}

/* ---------------------------------------------------------------- the logs */
typedef struct series {
    double *x, *y;
    int n, cap;
} series;

enum { S_LOSS, S_VAL, S_LR, S_MS, S_MEM, S_RSS, S_COUNT };
static const char *const series_name[S_COUNT] = {"loss", "val_loss", "lr", "step_ms", "mem_mib", "rss_peak_mib"};

typedef struct run {
    char name[64];
    series s[S_COUNT];
    int records;
} run;

static int push(series *s, double x, double y) {
    if (!isfinite(x) || !isfinite(y)) return 0; /* a null (non-finite) value leaves a gap */
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 256;
        double *nx = realloc(s->x, (size_t)cap * sizeof *nx);
        if (nx) s->x = nx;
        double *ny = nx ? realloc(s->y, (size_t)cap * sizeof *ny) : NULL;
        if (!nx || !ny) return -1;
        s->y = ny;
        s->cap = cap;
    }
    s->x[s->n] = x;
    s->y[s->n] = y;
    s->n++;
    return 0;
}

static void run_free(run *r) {
    for (int k = 0; k < S_COUNT; k++) {
        free(r->s[k].x);
        free(r->s[k].y);
    }
}

static double num(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

/* Reads one log into r. Returns CLI_OK or the status of the error printed. */
static int read_log(const char *path, run *r) {
    FILE *f = fopen(path, "r");
    if (!f)
        return cli_error(errno == ENOENT ? CLI_USAGE : CLI_RUNTIME, "plot: cannot open '%s': %s", path,
                         strerror(errno));
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    snprintf(r->name, sizeof r->name, "%.*s", (int)strcspn(base, "."), base);
    if (!r->name[0]) snprintf(r->name, sizeof r->name, "%s", base);
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    long lineno = 0;
    int rc = CLI_OK;
    while (rc == CLI_OK && (len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r' || line[len - 1] == ' ')) line[--len] = 0;
        if (len == 0) continue;
        if ((size_t)len != strlen(line)) {
            rc = cli_error(CLI_RUNTIME, "plot: %s line %ld: a NUL byte: expected JSON records of zero train --log-json",
                           path, lineno);
            break;
        }
        cJSON *o = cJSON_Parse(line);
        if (!cJSON_IsObject(o)) {
            rc = cli_error(CLI_RUNTIME,
                           "plot: %s line %ld: not a JSON object (expected the records of zero train --log-json)", path,
                           lineno);
            cJSON_Delete(o);
            break;
        }
        if (cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "done"))) { /* the run's totals */
            cJSON_Delete(o);
            continue;
        }
        const cJSON *st = cJSON_GetObjectItemCaseSensitive(o, "step");
        if (!cJSON_IsNumber(st) || !isfinite(st->valuedouble) || st->valuedouble < 0) {
            rc = cli_error(CLI_RUNTIME,
                           "plot: %s line %ld: no \"step\" (a number >= 0): expected the records of zero train "
                           "--log-json",
                           path, lineno);
            cJSON_Delete(o);
            break;
        }
        const double x = st->valuedouble;
        double val = num(o, "val_loss");
        if (isnan(val)) val = num(o, "eval_loss");
        const cJSON *mem = cJSON_GetObjectItemCaseSensitive(o, "mem");
        double accounted = NAN;
        if (cJSON_IsObject(mem)) {
            accounted = num(mem, "total");
            const double act = num(mem, "activations");
            if (isfinite(act)) accounted += act;
        }
        const double y[S_COUNT] = {num(o, "loss"),          val, num(o, "lr"), num(o, "step_ms"), accounted / MIB,
                                   num(o, "rss_peak") / MIB};
        for (int k = 0; k < S_COUNT && rc == CLI_OK; k++)
            if (push(&r->s[k], x, y[k]) != 0) rc = cli_error(CLI_RUNTIME, "plot: out of memory reading %s", path);
        r->records++;
        cJSON_Delete(o);
    }
    if (rc == CLI_OK && ferror(f)) rc = cli_error(CLI_RUNTIME, "plot: reading %s: %s", path, strerror(errno));
    free(line);
    fclose(f);
    if (rc == CLI_OK && r->records == 0)
        rc =
            cli_error(CLI_RUNTIME, "plot: %s has no step records (expected the output of zero train --log-json)", path);
    return rc;
}

/* ---------------------------------------------------------------- drawing */
#ifdef ZERO_HAVE_CAIRO
static const double palette[][3] = {
    {0.12, 0.47, 0.71}, {0.84, 0.15, 0.16}, {0.17, 0.63, 0.17}, {1.00, 0.50, 0.05},
    {0.58, 0.40, 0.74}, {0.55, 0.34, 0.29}, {0.89, 0.47, 0.76}, {0.50, 0.50, 0.50},
    {0.74, 0.74, 0.13}, {0.09, 0.75, 0.81}, {0.00, 0.00, 0.50}, {0.40, 0.00, 0.20},
};

typedef struct panel {
    const char *title;
    int solid, dashed; /* series drawn solid and dashed (-1: none) */
    const char *key;   /* what solid and dashed mean, or NULL */
} panel;

static const panel panels[4] = {
    {"loss", S_LOSS, S_VAL, "solid: training, dashed: validation"},
    {"learning rate", S_LR, -1, NULL},
    {"step time (ms)", S_MS, -1, NULL},
    {"memory per rank (MiB)", S_MEM, S_RSS, "solid: accounted, dashed: RSS peak"},
};

/* Ticks of a "nice" step (1, 2 or 5 times a power of ten) covering [lo, hi]: the first tick and
 * their number, 0 when the range is too narrow for its magnitude to step through in doubles. */
static int ticks(double lo, double hi, int want, double *first, double *step) {
    double raw = (hi - lo) / want, p = pow(10, floor(log10(raw))), m = raw / p;
    *step = (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
    *first = ceil(lo / *step) * *step;
    if (!isfinite(*step) || !isfinite(*first) || *step <= 0 || *first + *step == *first) return 0;
    double n = floor((hi - *first) / *step) + 1;
    return n > 0 && n <= 4 * want ? (int)n : 0;
}

static void range_of(const run *runs, int nruns, int k, double *lo, double *hi) {
    for (int i = 0; i < nruns; i++)
        for (int j = 0; j < runs[i].s[k].n; j++) {
            double v = runs[i].s[k].y[j];
            if (v < *lo) *lo = v;
            if (v > *hi) *hi = v;
        }
}

static void text(cairo_t *cr, double x, double y, const char *s, double align) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s, &e);
    cairo_move_to(cr, x - align * e.x_advance, y);
    cairo_show_text(cr, s);
}

static void draw_series(cairo_t *cr, const series *s, double x0, double y0, double w, double h, double xlo, double xhi,
                        double ylo, double yhi, int dashed, int marks) {
    const double dash[2] = {6, 4};
    cairo_set_dash(cr, dash, dashed ? 2 : 0, 0);
    for (int j = 0; j < s->n; j++) {
        double px = x0 + (s->x[j] - xlo) / (xhi - xlo) * w, py = y0 + h - (s->y[j] - ylo) / (yhi - ylo) * h;
        if (j == 0) cairo_move_to(cr, px, py);
        else cairo_line_to(cr, px, py);
    }
    cairo_stroke(cr);
    cairo_set_dash(cr, dash, 0, 0);
    if (marks || s->n == 1) /* validation points are few, and a lone point makes no line: mark each */
        for (int j = 0; j < s->n; j++) {
            cairo_arc(cr, x0 + (s->x[j] - xlo) / (xhi - xlo) * w, y0 + h - (s->y[j] - ylo) / (yhi - ylo) * h, 2.5, 0,
                      2 * M_PI);
            cairo_fill(cr);
        }
}

static void draw_panel(cairo_t *cr, const panel *pn, const run *runs, int nruns, double px, double py, double pw,
                       double ph, double xlo, double xhi, double font) {
    const double left = 7 * font, right = font, top = 2 * font, bottom = 2.6 * font;
    const double x0 = px + left, y0 = py + top, w = pw - left - right, h = ph - top - bottom;
    double ylo = INFINITY, yhi = -INFINITY;
    range_of(runs, nruns, pn->solid, &ylo, &yhi);
    if (pn->dashed >= 0) range_of(runs, nruns, pn->dashed, &ylo, &yhi);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, font * 1.1);
    text(cr, x0, py + 1.3 * font, pn->title, 0);
    cairo_set_font_size(cr, font);
    if (pn->key) text(cr, x0 + w, py + 1.3 * font, pn->key, 1);
    if (!(ylo <= yhi)) { /* nothing to draw: every log lacks this series */
        text(cr, x0 + w / 2, y0 + h / 2, "(not in the logs)", 0.5);
        return;
    }
    if (!isfinite(yhi - ylo) || !isfinite(2 * yhi) || !isfinite(2 * ylo)) { /* near the end of the doubles */
        text(cr, x0 + w / 2, y0 + h / 2, "(values too large to draw)", 0.5);
        return;
    }
    double pad = (yhi - ylo) * 0.05;
    if (pad == 0) pad = fabs(yhi) > 0 ? fabs(yhi) * 0.1 : 1;
    ylo -= pad;
    yhi += pad;
    /* grid and tick labels */
    cairo_set_line_width(cr, 1);
    char buf[32];
    double y1, ys, x1, xs;
    const int ny = ticks(ylo, yhi, 5, &y1, &ys), nx = ticks(xlo, xhi, 6, &x1, &xs);
    for (int t = 0; t < ny; t++) {
        const double v = y1 + t * ys;
        double y = y0 + h - (v - ylo) / (yhi - ylo) * h;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, x0, y);
        cairo_line_to(cr, x0 + w, y);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        snprintf(buf, sizeof buf, "%.4g", fabs(v) < ys * 1e-6 ? 0.0 : v);
        text(cr, x0 - 0.4 * font, y + 0.35 * font, buf, 1);
    }
    for (int t = 0; t < nx; t++) {
        const double v = x1 + t * xs;
        double x = x0 + (v - xlo) / (xhi - xlo) * w;
        cairo_set_source_rgb(cr, 0.88, 0.88, 0.88);
        cairo_move_to(cr, x, y0);
        cairo_line_to(cr, x, y0 + h);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0.2, 0.2, 0.2);
        snprintf(buf, sizeof buf, "%.6g", v);
        text(cr, x, y0 + h + 1.2 * font, buf, 0.5);
    }
    text(cr, x0 + w, y0 + h + 2.3 * font, "step", 1);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_rectangle(cr, x0, y0, w, h);
    cairo_stroke(cr);
    /* the data, clipped to the frame */
    cairo_save(cr);
    cairo_rectangle(cr, x0, y0, w, h);
    cairo_clip(cr);
    cairo_set_line_width(cr, 1.6);
    for (int i = 0; i < nruns; i++) {
        cairo_set_source_rgb(cr, palette[i][0], palette[i][1], palette[i][2]);
        draw_series(cr, &runs[i].s[pn->solid], x0, y0, w, h, xlo, xhi, ylo, yhi, 0, 0);
        if (pn->dashed >= 0)
            draw_series(cr, &runs[i].s[pn->dashed], x0, y0, w, h, xlo, xhi, ylo, yhi, 1, pn->dashed == S_VAL);
    }
    cairo_restore(cr);
}

static void draw(cairo_t *cr, const run *runs, int nruns, double W, double H, const char *title) {
    const double font = fmax(8, fmin(W, H) / 70);
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    double top = font;
    if (title && *title) {
        cairo_set_source_rgb(cr, 0, 0, 0);
        cairo_set_font_size(cr, font * 1.3);
        text(cr, W / 2, top + 1.2 * font, title, 0.5);
        top += 2 * font;
    }
    /* legend: a line of each run's colour and name */
    cairo_set_font_size(cr, font);
    double lx = 2 * font;
    for (int i = 0; i < nruns; i++) {
        cairo_text_extents_t e;
        cairo_text_extents(cr, runs[i].name, &e);
        if (lx + 3 * font + e.x_advance > W - font && lx > 2 * font) {
            lx = 2 * font;
            top += 1.5 * font;
        }
        cairo_set_source_rgb(cr, palette[i][0], palette[i][1], palette[i][2]);
        cairo_set_line_width(cr, 3);
        cairo_move_to(cr, lx, top + 0.6 * font);
        cairo_line_to(cr, lx + 2 * font, top + 0.6 * font);
        cairo_stroke(cr);
        cairo_set_source_rgb(cr, 0, 0, 0);
        text(cr, lx + 2.5 * font, top + font, runs[i].name, 0);
        lx += 4 * font + e.x_advance;
    }
    top += 2 * font;
    double xlo = INFINITY, xhi = -INFINITY;
    for (int i = 0; i < nruns; i++)
        for (int k = 0; k < S_COUNT; k++)
            for (int j = 0; j < runs[i].s[k].n; j++) {
                xlo = fmin(xlo, runs[i].s[k].x[j]);
                xhi = fmax(xhi, runs[i].s[k].x[j]);
            }
    if (!(xlo < xhi)) { /* one step: a range around it (wide enough to exist in doubles) */
        const double d = isfinite(xlo) ? fmax(1, fabs(xlo) * 1e-6) : 1;
        xlo = isfinite(xlo) ? xlo - d : 0;
        xhi = xlo + 2 * d;
    }
    const double pw = W / 2, ph = (H - top) / 2;
    for (int p = 0; p < 4; p++) {
        const int col = p % 2, row = p / 2; /* two panels a row */
        draw_panel(cr, &panels[p], runs, nruns, col * pw, top + row * ph, pw, ph, xlo, xhi, font);
    }
}

/* Draws into path (PNG or SVG) through path.tmp, renamed when complete. */
static int render(const char *path, int svg, const run *runs, int nruns, int W, int H, const char *title) {
    size_t n = strlen(path) + 5;
    zero_error perr;
    if (zero_check_replaceable(path, &perr) != ZERO_OK) return cli_error(CLI_USAGE, "plot: -o %s", perr.msg);
    char *tmp = malloc(n);
    if (!tmp) return cli_error(CLI_RUNTIME, "plot: out of memory");
    snprintf(tmp, n, "%s.tmp", path);
    cairo_surface_t *s =
        svg ? cairo_svg_surface_create(tmp, W, H) : cairo_image_surface_create(CAIRO_FORMAT_ARGB32, W, H);
    cairo_t *cr = cairo_create(s);
    draw(cr, runs, nruns, W, H, title);
    cairo_status_t st = cairo_status(cr);
    cairo_destroy(cr);
    if (st == CAIRO_STATUS_SUCCESS && !svg) st = cairo_surface_write_to_png(s, tmp);
    cairo_surface_finish(s);
    if (st == CAIRO_STATUS_SUCCESS) st = cairo_surface_status(s);
    cairo_surface_destroy(s);
    int rc = CLI_OK;
    if (st != CAIRO_STATUS_SUCCESS)
        rc = cli_error(CLI_RUNTIME, "plot: writing %s: %s", tmp, cairo_status_to_string(st));
    else if (rename(tmp, path) != 0)
        rc = cli_error(CLI_RUNTIME, "plot: renaming %s to %s: %s", tmp, path, strerror(errno));
    if (rc != CLI_OK) unlink(tmp);
    free(tmp);
    return rc;
}
#endif

static void print_json(const run *runs, int nruns, const char *out, int W, int H) {
    printf("{\"output\":\"");
    for (const char *c = out; *c; c++)
        printf(*c == '"' || *c == '\\' ? "\\%c" : (unsigned char)*c < 0x20 ? "?" : "%c", *c);
    printf("\",\"width\":%d,\"height\":%d,\"runs\":[", W, H);
    for (int i = 0; i < nruns; i++) {
        printf("%s{\"name\":\"", i ? "," : "");
        for (const char *c = runs[i].name; *c; c++) printf(*c == '"' || *c == '\\' ? "\\%c" : "%c", *c);
        printf("\",\"records\":%d", runs[i].records);
        for (int k = 0; k < S_COUNT; k++) {
            const series *s = &runs[i].s[k];
            printf(",\"%s\":{\"points\":%d", series_name[k], s->n);
            if (s->n) {
                printf(",\"first\":[");
                cli_json_double(stdout, s->x[0]);
                putchar(',');
                cli_json_double(stdout, s->y[0]);
                printf("],\"last\":[");
                cli_json_double(stdout, s->x[s->n - 1]);
                putchar(',');
                cli_json_double(stdout, s->y[s->n - 1]);
                putchar(']');
            }
            putchar('}');
        }
        putchar('}');
    }
    printf("]}\n");
}

int cli_plot(int argc, char **argv) {
    const char *out = NULL, *title = NULL, *logs[MAX_RUNS];
    int nlogs = 0, W = 1200, H = 900, json = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return CLI_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return CLI_USAGE;
            out = v;
        } else if (!strcmp(a, "--width")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_int(a, v, 200, 10000, &W)) return CLI_USAGE;
        } else if (!strcmp(a, "--height")) {
            if (!(v = cli_flag_value(argc, argv, &i)) || cli_parse_int(a, v, 150, 10000, &H)) return CLI_USAGE;
        } else if (!strcmp(a, "--title")) {
            if (!(v = cli_flag_value(argc, argv, &i))) return CLI_USAGE;
            title = v;
        } else if (!strcmp(a, "--json")) {
            json = 1;
        } else if (a[0] == '-' && a[1]) {
            return cli_error(CLI_USAGE, "plot: unknown option '%s': expected -o, --width, --height, --title or --json",
                             a);
        } else if (nlogs == MAX_RUNS) {
            return cli_error(CLI_USAGE, "plot: more than %d logs: plot at most %d runs in one picture", MAX_RUNS,
                             MAX_RUNS);
        } else {
            logs[nlogs++] = a;
        }
    }
    if (nlogs == 0)
        return cli_error(CLI_USAGE, "plot: expected at least one log of zero train --log-json (zero plot --help)");
    if (!out) return cli_error(CLI_USAGE, "plot: expected -o FILE.png or -o FILE.svg");
    const char *dot = strrchr(out, '.'), *slash = strrchr(out, '/');
    const int svg = dot && (!slash || dot > slash) && !strcasecmp(dot, ".svg");
    if (!(dot && (!slash || dot > slash) && (svg || !strcasecmp(dot, ".png"))))
        return cli_error(CLI_USAGE, "plot: -o '%s': expected a file name ending in .png or .svg", out);
    for (int i = 0; i < nlogs; i++)
        if (cli_same_path(out, logs[i]))
            return cli_error(CLI_USAGE,
                             "plot: -o '%s' is the log '%s': expected another path (it would be "
                             "overwritten)",
                             out, logs[i]);
    /* the output's directory must exist now: a typo costs a second, not the reading of the logs */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%.*s", slash ? (int)(slash - out) + (slash == out) : 1, slash ? out : ".");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return cli_error(CLI_USAGE, "plot: -o '%s': the directory '%s' does not exist", out, dir);
#ifndef ZERO_HAVE_CAIRO
    (void)title;
    (void)json;
    (void)W;
    (void)H;
    return cli_error(CLI_RUNTIME,
                     "plot is not supported in this build: it needs Cairo (install libcairo2-dev and rebuild)");
#else
    run *runs = calloc(MAX_RUNS, sizeof *runs);
    if (!runs) return cli_error(CLI_RUNTIME, "plot: out of memory");
    int rc = CLI_OK;
    for (int i = 0; i < nlogs && rc == CLI_OK; i++) rc = read_log(logs[i], &runs[i]);
    if (rc == CLI_OK) rc = render(out, svg, runs, nlogs, W, H, title);
    if (rc == CLI_OK && json) print_json(runs, nlogs, out, W, H);
    for (int i = 0; i < nlogs; i++) run_free(&runs[i]);
    free(runs);
    return rc;
#endif
}
