/* The control channel: before each data collective every rank announces what it is about to do
 * (a fixed-size record all-gathered on a private duplicate communicator, or, in the default
 * mode after the first step, only folded into a running hash compared once per step). Ranks
 * that disagree get ZERO_ERR_DIVERGED naming the unit (or the hashes) and the ranks on every
 * rank, instead of a hang in a mismatched collective. The same channel carries the step's
 * norm/overflow reduction. */
#include "engine/internal.h"
#include "zero/trace.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *op_name(int op) {
    switch (op) {
    case CTRL_GATHER: return "gather";
    case CTRL_REDUCE: return "grad_ready";
    case CTRL_STEP: return "step";
    case CTRL_NORM: return "step";
    case CTRL_READ: return "read_unit";
    case CTRL_SAVE: return "save";
    case CTRL_LOAD: return "load";
    case CTRL_AGREE: return "agreement (save, load, offload)";
    }
    return "?";
}

static void describe(const zero_engine *e, const ctrl_rec *r, char *buf, size_t cap) {
    if (r->unit >= 0 && r->unit < e->nunits)
        snprintf(buf, cap, "%s of unit '%s'", op_name(r->op), e->units[r->unit].name);
    else
        snprintf(buf, cap, "%s", op_name(r->op));
}

/* Folds one announcement into the running hash (FNV-1a over its three fields). */
static uint64_t fold(uint64_t h, int op, int unit, int64_t seq) {
    const uint64_t v[3] = {(uint64_t)(uint32_t)op, (uint64_t)(uint32_t)unit, (uint64_t)seq};
    for (int i = 0; i < 3; i++)
        for (int k = 0; k < 8; k++) h = (h ^ ((v[i] >> (8 * k)) & 0xff)) * 0x100000001b3ull;
    return h;
}

/* The ranks' hashes differ while the announcement itself agrees: the sequences of collectives
 * between the last exchange and this one differed. */
static zero_status hash_diverged(zero_engine *e, const ctrl_rec *me) {
    char msg[900];
    size_t len = (size_t)snprintf(msg, sizeof msg,
                                  "ranks diverged before collective #%lld (%s): the collectives since the last check differ (",
                                  (long long)me->seq, op_name(me->op));
    for (int r = 0; r < e->world && len < sizeof msg; r++)
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank %d %016llx", r ? ", " : "", r,
                                (unsigned long long)e->ctrl_all[r].hash);
    if (len < sizeof msg)
        snprintf(msg + len, sizeof msg - len,
                 "); set \"zero_extensions\": {\"check_divergence\": \"collective\"} to name the first call that differs");
    return zero__eng_fail(e, ZERO_ERR_DIVERGED, "%s", msg);
}

zero_status zero__ctrl_exchange(zero_engine *e, int op, int unit, double a, double b) {
    /* a stage-3 gather under parameter offload carries the status of the shard's read */
    const int payload = op == CTRL_NORM || op == CTRL_READ || op == CTRL_AGREE || (op == CTRL_GATHER && e->off.par);
    const int mode = e->cfg.check_divergence;
    const int64_t seq = e->ctrl_seq++;
    e->ctrl_hash = fold(e->ctrl_hash, op, unit, seq);
    int exchange = payload || mode == ZERO_DIVERGENCE_COLLECTIVE;
    if (mode == ZERO_DIVERGENCE_STEP)
        exchange |= e->steps_run == 0 || op == CTRL_STEP || op == CTRL_SAVE || op == CTRL_LOAD;
    if (!exchange) return ZERO_OK;
    ctrl_rec me = {op, unit, seq, a, b, e->ctrl_hash};
    double t0 = zero_now();
    zero_status s = zero_comm_all_gather(e->ctrl, &me, e->ctrl_all, sizeof me, ZERO_DTYPE_UINT8);
    zero__eng_waited(e, "control exchange", t0);
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "control exchange before %s failed: %s", op_name(op),
                              zero_comm_last_error(e->ctrl));
    int agree = 1, same_hash = 1;
    for (int r = 0; r < e->world; r++) {
        const ctrl_rec *o = &e->ctrl_all[r];
        if (o->op != me.op || o->unit != me.unit || o->seq != me.seq) agree = 0;
        if (o->hash != me.hash) same_hash = 0;
    }
    if (agree && (same_hash || mode == ZERO_DIVERGENCE_OFF)) return ZERO_OK;
    if (agree) return hash_diverged(e, &me);
    /* Group ranks by what they announced: "ranks 0,2: gather of unit 'h.1'; rank 1: step". */
    char msg[900];
    size_t len = (size_t)snprintf(msg, sizeof msg, "ranks diverged at collective #%lld: ", (long long)me.seq);
    char *seen = calloc((size_t)e->world, 1);
    for (int r = 0; r < e->world && seen && len < sizeof msg; r++) {
        if (seen[r]) continue;
        char what[200];
        describe(e, &e->ctrl_all[r], what, sizeof what);
        len += (size_t)snprintf(msg + len, sizeof msg - len, "%srank%s", r ? "; " : "", "s");
        int first = 1;
        for (int q = r; q < e->world && len < sizeof msg; q++) {
            const ctrl_rec *x = &e->ctrl_all[q], *y = &e->ctrl_all[r];
            if (seen[q] || x->op != y->op || x->unit != y->unit) continue;
            seen[q] = 1;
            len += (size_t)snprintf(msg + len, sizeof msg - len, "%s%d", first ? " " : ",", q);
            first = 0;
        }
        if (len < sizeof msg) len += (size_t)snprintf(msg + len, sizeof msg - len, " called %s", what);
    }
    free(seen);
    return zero__eng_fail(e, ZERO_ERR_DIVERGED, "%s", msg);
}

zero_status zero__eng_agree(zero_engine *e, zero_status mine, const char *what) {
    zero_status s = zero__ctrl_exchange(e, CTRL_AGREE, -1, (double)mine, 0);
    if (s != ZERO_OK) return s;
    for (int r = 0; r < e->world; r++) {
        zero_status o = (zero_status)(int)e->ctrl_all[r].a;
        if (o != ZERO_OK) {
            if (mine != ZERO_OK) return mine;
            return zero__eng_fail(e, o, "%s failed on rank %d: %s", what, r, zero_status_string(o));
        }
    }
    return ZERO_OK;
}

zero_status zero__eng_check_unit(zero_engine *e, int unit, const char *what) {
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "%s: finalize the engine first", what);
    if (e->broken) return zero__eng_fail(e, ZERO_ERR_STATE, "%s: the engine failed earlier; free it", what);
    if (unit < 0 || unit >= e->nunits)
        return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "%s: unit %d: expected 0..%d", what, unit, e->nunits - 1);
    if (e->qstage_param >= 0) /* its record would be missing: it is coded when its last element is set */
        return zero__eng_fail(e, ZERO_ERR_STATE, "%s: the quantized parameter '%s' was set up to element %llu of %llu "
                              "only: set the rest first", what, e->params[e->qstage_param].name,
                              (unsigned long long)e->qfill, (unsigned long long)e->params[e->qstage_param].numel);
    return ZERO_OK;
}

void zero__eng_waited(zero_engine *e, const char *what, double t0) {
    const double t1 = zero_now();
    e->comm_wait += t1 - t0;
    zero_trace_span(ZERO_TRACE_COMM_WAIT, what, t0, t1);
}

zero_status zero_engine_progress(zero_engine *e) {
    if (!e) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized || e->broken) return ZERO_OK; /* nothing can be in flight */
    int busy = 0;
    for (int i = 0; i < e->nunits && !busy; i++)
        busy = e->units[i].prefetch || e->units[i].fprefetch || e->units[i].reduce;
    if (busy && zero_comm_progress(e->data) != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "progress of the collectives in flight failed: %s",
                              zero_comm_last_error(e->data));
    return ZERO_OK;
}

zero_status zero__eng_wait(zero_engine *e, zero_request **req, double t_issue, const char *what) {
    if (!*req) return ZERO_OK;
    double t0 = zero_now();
    zero_status s = zero_request_wait(*req);
    zero__eng_waited(e, "wait for collective", t0);
    zero_trace_span(ZERO_TRACE_COMM, what, t_issue, zero_now());
    *req = NULL;
    if (s != ZERO_OK)
        return zero__eng_fail(e, ZERO_ERR_COMM, "waiting for a collective failed: %s", zero_comm_last_error(e->data));
    return ZERO_OK;
}
