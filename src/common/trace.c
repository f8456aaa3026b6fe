/* The span recorder behind zero/trace.h: a growing array of fixed-size records, turned into
 * Chrome trace events ("ph":"X", microseconds) on request. */
#include "zero/trace.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct span {
    double t0, t1;
    int track;
    char name[64];
} span;

static atomic_int g_on;
static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER; /* the spans: device streams record too */
static span *g_spans;
static size_t g_n, g_cap;
static unsigned g_streams; /* bit k: a span of device stream k was recorded (its track is named) */

void zero_trace_enable(int on) { atomic_store_explicit(&g_on, on, memory_order_relaxed); }
int zero_trace_enabled(void) { return atomic_load_explicit(&g_on, memory_order_relaxed); }

void zero_trace_span(int track, const char *name, double t0, double t1) {
    if (!zero_trace_enabled()) return;
    if (track < 0 || track >= ZERO_TRACE_DEVICE + ZERO_TRACE_STREAMS) return;
    pthread_mutex_lock(&g_mu);
    if (g_n == g_cap) {
        size_t cap = g_cap ? 2 * g_cap : 1024;
        span *s = realloc(g_spans, cap * sizeof *s);
        if (!s) { /* a trace is best effort: drop the span, never fail the run */
            pthread_mutex_unlock(&g_mu);
            return;
        }
        g_spans = s;
        g_cap = cap;
    }
    span *s = &g_spans[g_n++];
    s->t0 = t0;
    s->t1 = t1 > t0 ? t1 : t0;
    s->track = track;
    snprintf(s->name, sizeof s->name, "%s", name ? name : "");
    if (track >= ZERO_TRACE_DEVICE) g_streams |= 1u << (track - ZERO_TRACE_DEVICE);
    pthread_mutex_unlock(&g_mu);
}

static const char *track_name(int t, char *buf, size_t cap) {
    switch (t) {
    case ZERO_TRACE_COMPUTE: return "compute";
    case ZERO_TRACE_COMM_WAIT: return "comm wait";
    case ZERO_TRACE_COMM: return "comm in flight";
    case ZERO_TRACE_IO: return "io";
    }
    if (t >= ZERO_TRACE_DEVICE && t < ZERO_TRACE_DEVICE + ZERO_TRACE_STREAMS) {
        snprintf(buf, cap, "device stream %d", t - ZERO_TRACE_DEVICE);
        return buf;
    }
    return "other";
}

char *zero_trace_events_json(int pid, size_t *len) {
    pthread_mutex_lock(&g_mu);
    size_t cap = 1024 + (ZERO_TRACE_STREAMS + g_n) * 400, n = 0; /* a span is at most ~330 bytes of JSON */
    char *buf = malloc(cap);
    char tn[32];
    if (!buf) {
        pthread_mutex_unlock(&g_mu);
        return NULL;
    }
    /* name the process and its tracks */
    n += (size_t)snprintf(buf + n, cap - n, "{\"ph\":\"M\",\"pid\":%d,\"name\":\"process_name\",\"args\":{\"name\":\"rank %d\"}}", pid, pid);
    for (int t = 0; t < ZERO_TRACE_DEVICE + ZERO_TRACE_STREAMS; t++)
        if (t < ZERO_TRACE_DEVICE || (g_streams >> (t - ZERO_TRACE_DEVICE) & 1u))
            n += (size_t)snprintf(buf + n, cap - n,
                                  ",{\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"name\":\"thread_name\",\"args\":{\"name\":\"%s\"}}",
                                  pid, t, track_name(t, tn, sizeof tn));
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
                              pid, s->track, name, track_name(s->track, tn, sizeof tn), s->t0 * 1e6, (s->t1 - s->t0) * 1e6);
        if (n >= cap) break;
    }
    if (n >= cap) n = cap - 1;
    pthread_mutex_unlock(&g_mu);
    *len = n;
    return buf;
}

void zero_trace_clear(void) {
    pthread_mutex_lock(&g_mu);
    g_n = 0;
    g_streams = 0;
    pthread_mutex_unlock(&g_mu);
}
