/* The span recorder behind zero/trace.h: a growing array of fixed-size records, turned into
 * Chrome trace events ("ph":"X", microseconds) on request. */
#include "zero/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    double t0, t1;
    int track;
    char name[64];
} span;

static int g_on;
static span *g_spans;
static size_t g_n, g_cap;

void zero_trace_enable(int on) { g_on = on; }
int zero_trace_enabled(void) { return g_on; }

void zero_trace_span(int track, const char *name, double t0, double t1) {
    if (!g_on) return;
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 1024;
        span *s = realloc(g_spans, cap * sizeof *s);
        if (!s) return; /* a trace is best effort: drop the span, never fail the run */
        g_spans = s;
        g_cap = cap;
    }
    span *s = &g_spans[g_n++];
    s->t0 = t0;
    s->t1 = t1 > t0 ? t1 : t0;
    s->track = track;
    snprintf(s->name, sizeof s->name, "%s", name ? name : "");
}

static const char *track_name(int t) {
    switch (t) {
    case ZERO_TRACE_COMPUTE: return "compute";
    case ZERO_TRACE_COMM_WAIT: return "comm wait";
    case ZERO_TRACE_COMM: return "comm in flight";
    case ZERO_TRACE_IO: return "io";
    }
    return "other";
}

char *zero_trace_events_json(int pid, size_t *len) {
    size_t cap = 1024 + g_n * 400, n = 0; /* a span is at most ~330 bytes of JSON */
    char *buf = malloc(cap);
    if (!buf) return NULL;
    /* name the process and its tracks */
    n += (size_t)snprintf(buf + n, cap - n, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":\"rank %d\"}}", pid, pid);
    for (int t = 0; t <= ZERO_TRACE_IO; t++)
        n += (size_t)snprintf(buf + n, cap - n, ",{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s\"}}",
                              pid, t, track_name(t));
    for (size_t i = 0; i < g_n; i++) {
        const span *s = &g_spans[i];
        char name[130];
        size_t k = 0;
        for (const char *c = s->name; *c && k < sizeof name - 2; c++) { /* JSON-escape */
            if (*c == '"' || *c == '\\') name[k++] = '\\';
            name[k++] = (unsigned char)*c < 0x20 ? ' ' : *c;
        }
        name[k] = 0;
        n += (size_t)snprintf(buf + n, cap - n, ",{\"ph\":\"X\",\"pid\":%d,\"tid\":%d,\"name\":\"%s\",\"cat\":\"%s\",\"ts\":%.3f,\"dur\":%.3f}",
                              pid, s->track, name, track_name(s->track), s->t0 * 1e6, (s->t1 - s->t0) * 1e6);
        if (n >= cap) break;
    }
    if (n >= cap) n = cap - 1;
    *len = n;
    return buf;
}

void zero_trace_clear(void) { g_n = 0; }
