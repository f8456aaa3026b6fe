/* zero/trace.h — a per-process recorder of timed spans (compute, communication, I/O) written as
 * Chrome/Perfetto trace events, so a user can see whether communication overlaps computation.
 * The engine records its communication waits and in-flight collectives; a program adds its own
 * compute spans; a device's streams record what they run (the fake device: each operation on its
 * stream's track). Off by default: a disabled recorder costs one branch per span. Spans may be
 * recorded from any thread. */
#ifndef ZERO_TRACE_H
#define ZERO_TRACE_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Tracks (Perfetto "threads" of a rank's process). */
enum {
    ZERO_TRACE_COMPUTE = 0,  /* the program's forward/backward/optimizer */
    ZERO_TRACE_COMM_WAIT = 1, /* time blocked on communication: the exposed part */
    ZERO_TRACE_COMM = 2,     /* collectives from issue to completion: in flight */
    ZERO_TRACE_IO = 3,       /* offload and checkpoint I/O */
    ZERO_TRACE_DEVICE = 4,   /* + k: the device's stream k (k < ZERO_TRACE_STREAMS), what it runs */
};
#define ZERO_TRACE_STREAMS 16

void zero_trace_enable(int on);
int zero_trace_enabled(void);
/* Records the span [t0, t1] (seconds of zero_now()) named `name` (copied, at most 63 bytes). */
void zero_trace_span(int track, const char *name, double t0, double t1);
/* The recorded spans as Chrome trace events (comma-separated JSON objects, no brackets) with
 * pid = `pid`; malloc'd, *len set; NULL when out of memory. An empty recording gives "". */
char *zero_trace_events_json(int pid, size_t *len);
void zero_trace_clear(void);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_TRACE_H */
