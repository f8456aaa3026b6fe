/* Checkpoints of the engine: every rank streams the valid slice of its fp32 master and optimizer
 * states per unit into its rank file (src/ckpt), rank 0 commits after every rank finished; load
 * reads, per rank, only the element ranges its stage and world size need, from whatever world
 * size and stage saved them. Working parameters are re-derived from the master, exactly as the
 * step's write-back derives them, so a resume is bitwise identical. Arrays under NVMe offload
 * stream between the swap files and the checkpoint a tile at a time (memory: the pool). */
#include "engine/internal.h"
#include "zero/ckpt.h"

#include <cjson/cJSON.h>
#include <stdlib.h>
#include <string.h>

#define CHUNK 65536 /* elements streamed at a time: load and save memory is bounded by this */

static const char *state_name(const zero_engine *e, int k) {
    switch (e->cfg.optim.type) {
    case ZERO_OPTIM_ADAMW:
    case ZERO_OPTIM_ADAM: return k == 0 ? "exp_avg" : "exp_avg_sq";
    case ZERO_OPTIM_SGD: return "momentum_buffer";
    case ZERO_OPTIM_LION: return "exp_avg";
    }
    return "state";
}

/* Array k of unit u's update range (-1: the master; else optimizer state k), at unit element
 * u->v.lo, or NULL when it lives in a swap file. */
static float *array_of(const eunit *u, int k) { return k < 0 ? u->v.master : u->v.state[k]; }

static char *build_manifest(const zero_engine *e, const char *user_json) {
    cJSON *root = cJSON_CreateObject(), *units = cJSON_CreateArray(), *opt = cJSON_CreateObject(),
          *sc = cJSON_CreateObject();
    cJSON_AddStringToObject(root, "writer", "zero");
    cJSON_AddNumberToObject(root, "stage", e->cfg.stage);
    cJSON_AddStringToObject(root, "precision", zero_dtype_name(e->wdt));
    cJSON_AddNumberToObject(root, "align", (double)e->align);
    cJSON_AddNumberToObject(root, "engine_step", (double)e->step);
    cJSON_AddStringToObject(opt, "type", zero_optim_name(e->cfg.optim.type));
    cJSON_AddNumberToObject(opt, "states", e->nstates);
    cJSON_AddItemToObject(root, "optimizer", opt);
    cJSON_AddNumberToObject(sc, "scale", e->scaler.scale);
    cJSON_AddNumberToObject(sc, "delayed_shift", e->scaler.delayed_shift);
    cJSON_AddNumberToObject(sc, "iter", (double)e->scaler.iter);
    cJSON_AddNumberToObject(sc, "last_overflow_iter", (double)e->scaler.last_overflow_iter);
    cJSON_AddItemToObject(root, "loss_scaler", sc);
    for (int i = 0; i < e->nunits; i++) {
        const eunit *u = &e->units[i];
        cJSON *ju = cJSON_CreateObject(), *ps = cJSON_CreateArray();
        cJSON_AddStringToObject(ju, "name", u->name);
        cJSON_AddNumberToObject(ju, "numel", (double)u->numel);
        for (int p = u->first_param; p < u->first_param + u->nparams; p++) {
            const eparam *q = &e->params[p];
            cJSON *jp = cJSON_CreateObject(), *sh = cJSON_CreateArray();
            cJSON_AddStringToObject(jp, "name", q->name);
            for (int d = 0; d < q->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)q->shape[d]));
            cJSON_AddItemToObject(jp, "shape", sh);
            cJSON_AddNumberToObject(jp, "offset", (double)q->offset);
            cJSON_AddBoolToObject(jp, "no_decay", (q->flags & ZERO_PARAM_NO_DECAY) != 0);
            cJSON_AddItemToArray(ps, jp);
        }
        cJSON_AddItemToObject(ju, "params", ps);
        cJSON_AddItemToArray(units, ju);
    }
    cJSON_AddItemToObject(root, "units", units);
    if (user_json) {
        cJSON *uj = cJSON_Parse(user_json);
        if (uj) cJSON_AddItemToObject(root, "user", uj);
    }
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return text;
}

/* Streams this rank's partition slice of `src` (an array of the update range, at unit element
 * u->v.lo). */
static zero_status write_slice(zero_ckpt_writer *w, const eunit *u, const float *src) {
    const eview *v = &u->v;
    const float *p = src + (v->slo - v->lo);
    const uint64_t valid = v->shi - v->slo;
    for (uint64_t i = 0; i < valid; i += CHUNK) {
        uint64_t n = valid - i < CHUNK ? valid - i : CHUNK;
        zero_status s = zero_ckpt_writer_write(w, p + i, (size_t)n * 4);
        if (s != ZERO_OK) return s;
    }
    return ZERO_OK;
}

/* An offloaded array on its way to or from a checkpoint, a tile at a time. */
typedef struct stream_ctx {
    zero_ckpt_writer *w;
    int k;            /* -1: master; else state k */
    zero_status ck;   /* the checkpoint side's failure (its message is the writer's/reader's) */
} stream_ctx;

static float *tile_array(const etile *x, int k) { return k < 0 ? x->master : k == 0 ? x->s0 : x->s1; }

static zero_status save_tile(zero_engine *e, etile *x, void *ctx) {
    (void)e;
    stream_ctx *c = ctx;
    c->ck = zero_ckpt_writer_write(c->w, tile_array(x, c->k), (size_t)x->n * 4);
    return c->ck;
}

static zero_status save_local(zero_engine *e, const char *dir, zero_ckpt_writer **wout) {
    zero_error err = {{0}};
    zero_ckpt_writer *w = NULL;
    zero_status s = zero__off_quiesce(e);
    if (s != ZERO_OK) return s;
    s = zero_ckpt_writer_begin(&w, NULL, dir, e->step, e->rank, e->world, &err);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "save: %s", err.msg);
    *wout = w;
    char name[512];
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) {
        eunit *u = &e->units[i];
        snprintf(name, sizeof name, "%s/master", u->name);
        s = zero_ckpt_writer_add(w, name, ZERO_DTYPE_FP32, u->numel, e->align);
        for (int k = 0; k < e->nstates && s == ZERO_OK; k++) {
            snprintf(name, sizeof name, "%s/%s", u->name, state_name(e, k));
            s = zero_ckpt_writer_add(w, name, ZERO_DTYPE_FP32, u->numel, e->align);
        }
    }
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) {
        eunit *u = &e->units[i];
        for (int k = -1; k < e->nstates && s == ZERO_OK; k++) {
            float *ram = array_of(u, k);
            if (u->valid == 0) continue; /* this rank's slice is all padding: nothing to write */
            if (ram) {
                s = write_slice(w, u, ram);
                continue;
            }
            stream_ctx c = {w, k, ZERO_OK};
            eopass p = {i, i + 1, 0, UINT64_MAX, k < 0 ? ARR_MASTER : k == 0 ? ARR_S0 : ARR_S1, 0, save_tile, &c};
            s = zero__off_run(e, &p);
            if (c.ck != ZERO_OK) s = c.ck;
            else if (s != ZERO_OK) return s; /* the offload's message */
        }
    }
    if (s == ZERO_OK) s = zero_ckpt_writer_finish(w);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "save: %s", zero_ckpt_writer_last_error(w));
    return ZERO_OK;
}

zero_status zero_engine_save(zero_engine *e, const char *dir, const char *user_json) {
    if (!e || !dir) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "save: finalize the engine first");
    if (e->broken) return zero__eng_fail(e, ZERO_ERR_STATE, "save: the engine failed earlier; free it");
    if (e->mb || e->mb_open) return zero__eng_fail(e, ZERO_ERR_STATE, "save: a step is in progress: save between steps");
    if (user_json) {
        cJSON *probe = cJSON_Parse(user_json);
        int ok = cJSON_IsObject(probe);
        cJSON_Delete(probe);
        if (!ok) return zero__eng_fail(e, ZERO_ERR_INVALID_ARG, "save: user_json is not a JSON object");
    }
    zero_status s = zero__ctrl_exchange(e, CTRL_SAVE, -1, 0, 0);
    if (s != ZERO_OK) return s;
    zero_ckpt_writer *w = NULL;
    zero_status mine = save_local(e, dir, &w);
    s = zero__eng_agree(e, mine, "save");
    if (s == ZERO_OK && e->rank == 0) {
        char *manifest = build_manifest(e, user_json);
        mine = manifest ? zero_ckpt_commit(w, manifest) : ZERO_ERR_NOMEM;
        if (mine != ZERO_OK) zero__eng_fail(e, mine, "save: commit: %s", zero_ckpt_writer_last_error(w));
        free(manifest);
    } else {
        mine = s;
    }
    if (s == ZERO_OK) s = zero__eng_agree(e, mine, "save commit");
    zero_ckpt_writer_free(w);
    return s;
}

/* ------------------------------------------------------------------ load */

static zero_status check_manifest(zero_engine *e, cJSON *m) {
    cJSON *units = cJSON_GetObjectItemCaseSensitive(m, "units");
    if (!cJSON_IsArray(units) || cJSON_GetArraySize(units) != e->nunits)
        return zero__eng_fail(e, ZERO_ERR_FORMAT, "load: the checkpoint has %d units; this model has %d",
                              cJSON_IsArray(units) ? cJSON_GetArraySize(units) : 0, e->nunits);
    int i = 0;
    cJSON *ju;
    cJSON_ArrayForEach(ju, units) {
        const eunit *u = &e->units[i++];
        const char *name = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(ju, "name"));
        cJSON *numel = cJSON_GetObjectItemCaseSensitive(ju, "numel");
        if (!name || strcmp(name, u->name) || !cJSON_IsNumber(numel) || (uint64_t)numel->valuedouble != u->numel)
            return zero__eng_fail(e, ZERO_ERR_FORMAT,
                                  "load: the checkpoint's unit %d is '%s' of %.0f elements; this model's is '%s' of %llu "
                                  "(another model?)",
                                  i - 1, name ? name : "?", cJSON_IsNumber(numel) ? numel->valuedouble : -1.0, u->name,
                                  (unsigned long long)u->numel);
    }
    cJSON *opt = cJSON_GetObjectItemCaseSensitive(m, "optimizer");
    const char *type = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(opt, "type"));
    if (!type || strcmp(type, zero_optim_name(e->cfg.optim.type)))
        return zero__eng_fail(e, ZERO_ERR_FORMAT, "load: the checkpoint's optimizer is '%s'; this run uses '%s'",
                              type ? type : "?", zero_optim_name(e->cfg.optim.type));
    return ZERO_OK;
}

/* Reads elements [lo, hi) of tensor `name` into dst (fp32). */
static zero_status read_range(zero_engine *e, zero_ckpt *c, const char *name, uint64_t lo, uint64_t hi, float *dst) {
    if (hi <= lo) return ZERO_OK;
    zero_status s = zero_ckpt_read_range(c, name, lo, hi, dst);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "load: %s", zero_ckpt_last_error(c));
    return ZERO_OK;
}

typedef struct load_ctx {
    zero_ckpt *c;
    const char *name;
    int k; /* -1: master, else state k; -2: derive the working copy from the master */
} load_ctx;

static zero_status load_tile(zero_engine *e, etile *x, void *ctx) {
    const load_ctx *l = ctx;
    if (l->k == -2) {
        zero_convert(x->master, ZERO_DTYPE_FP32, x->work, e->wdt, x->n, ZERO_IMPL_AUTO);
        return ZERO_OK;
    }
    const uint64_t lo = x->u->offset + x->first;
    return read_range(e, l->c, l->name, lo, lo + x->n, tile_array(x, l->k));
}

/* Loads array k (-1: master) of unit u: into RAM when it lives there, else through the pool. */
static zero_status load_array(zero_engine *e, zero_ckpt *c, eunit *u, int k, const char *name, uint64_t lo, uint64_t hi) {
    float *ram = array_of(u, k);
    if (ram) return read_range(e, c, name, lo, hi, ram + (lo - u->v.lo));
    load_ctx l = {c, name, k};
    const int ui = (int)(u - e->units);
    eopass p = {ui, ui + 1, 0, UINT64_MAX, 0, k < 0 ? ARR_MASTER : k == 0 ? ARR_S0 : ARR_S1, load_tile, &l};
    return zero__off_run(e, &p);
}

static zero_status load_unit(zero_engine *e, zero_ckpt *c, eunit *u, float *chunk) {
    char name[512];
    const eview *v = &u->v;
    const uint64_t lo = v->lo, hi = v->hi; /* what the rank updates: master and states */
    snprintf(name, sizeof name, "%s/master", u->name);
    zero_status s = load_array(e, c, u, -1, name, lo, hi);
    for (int k = 0; k < e->nstates && s == ZERO_OK; k++) {
        char sn[512];
        snprintf(sn, sizeof sn, "%s/%s", u->name, state_name(e, k));
        s = load_array(e, c, u, k, sn, lo, hi);
    }
    if (s != ZERO_OK) return s;
    /* working parameters: where they are the update range's (stages 0 and 3), derived from the
     * master; kept whole beside a sharded update (stages 1-2), the whole unit is read (and
     * converted) a chunk at a time */
    const int half = e->wdt != ZERO_DTYPE_FP32;
    if (!e->own.regather) {
        if (!half) return ZERO_OK; /* the master is the working copy */
        if (v->master && v->work) {
            zero_convert(v->master, ZERO_DTYPE_FP32, v->work, e->wdt, hi - lo, ZERO_IMPL_AUTO);
            return ZERO_OK;
        }
        load_ctx l = {c, name, -2};
        const int ui = (int)(u - e->units);
        eopass p = {ui, ui + 1, 0, UINT64_MAX, ARR_MASTER, ARR_WORK, load_tile, &l};
        return zero__off_run(e, &p);
    }
    if (!half) return read_range(e, c, name, 0, u->numel, (float *)v->wp);
    for (uint64_t i = 0; i < u->numel && s == ZERO_OK; i += CHUNK) {
        uint64_t n = u->numel - i < CHUNK ? u->numel - i : CHUNK;
        s = read_range(e, c, name, i, i + n, chunk);
        if (s == ZERO_OK) zero_convert(chunk, ZERO_DTYPE_FP32, zero__wptr(e, v->wp, i), e->wdt, n, ZERO_IMPL_AUTO);
    }
    return s;
}

static zero_status load_local(zero_engine *e, const char *path, char **user_json) {
    zero_error err = {{0}};
    zero_ckpt *c = NULL;
    zero_status s = zero__gather_drain(e); /* as set_range: no prefetch in flight or held */
    if (s != ZERO_OK) return s;
    s = zero_ckpt_open(&c, NULL, path, 0, &err);
    if (s != ZERO_OK) return zero__eng_fail(e, s, "load: %s", err.msg);
    cJSON *m = cJSON_Parse(zero_ckpt_manifest(c));
    float *chunk = zero__buf_get(e, CHUNK * 4, 0);
    if (!m) s = zero__eng_fail(e, ZERO_ERR_FORMAT, "load: %s: manifest.json does not parse", zero_ckpt_dir(c));
    else if (!chunk) s = zero__eng_fail(e, ZERO_ERR_NOMEM, "load: out of memory");
    else s = check_manifest(e, m);
    for (int i = 0; i < e->nunits && s == ZERO_OK; i++) s = load_unit(e, c, &e->units[i], chunk);
    if (s == ZERO_OK) {
        cJSON *sc = cJSON_GetObjectItemCaseSensitive(m, "loss_scaler");
        cJSON *scale = cJSON_GetObjectItemCaseSensitive(sc, "scale");
        if (e->wdt == ZERO_DTYPE_FP16 && e->scaler.dynamic && cJSON_IsNumber(scale)) {
            e->scaler.scale = scale->valuedouble;
            e->scaler.delayed_shift = cJSON_GetObjectItemCaseSensitive(sc, "delayed_shift")->valueint;
            e->scaler.iter = (int64_t)cJSON_GetObjectItemCaseSensitive(sc, "iter")->valuedouble;
            e->scaler.last_overflow_iter = (int64_t)cJSON_GetObjectItemCaseSensitive(sc, "last_overflow_iter")->valuedouble;
        }
        e->step = zero_ckpt_step(c);
        if (user_json) {
            cJSON *uj = cJSON_GetObjectItemCaseSensitive(m, "user");
            *user_json = uj ? cJSON_PrintUnformatted(uj) : NULL;
        }
    }
    zero__buf_put(e, chunk);
    cJSON_Delete(m);
    zero_ckpt_close(c);
    return s;
}

zero_status zero_engine_load(zero_engine *e, const char *path, char **user_json) {
    if (user_json) *user_json = NULL;
    if (!e || !path) return ZERO_ERR_INVALID_ARG;
    if (!e->finalized) return zero__eng_fail(e, ZERO_ERR_STATE, "load: finalize the engine first");
    if (e->broken) return zero__eng_fail(e, ZERO_ERR_STATE, "load: the engine failed earlier; free it");
    if (e->mb || e->mb_open) return zero__eng_fail(e, ZERO_ERR_STATE, "load: a step is in progress: load between steps");
    zero_status s = zero__ctrl_exchange(e, CTRL_LOAD, -1, 0, 0);
    if (s != ZERO_OK) return s;
    zero_status mine = load_local(e, path, user_json);
    s = zero__eng_agree(e, mine, "load");
    if (s != ZERO_OK && user_json) {
        free(*user_json);
        *user_json = NULL;
    }
    return s;
}
