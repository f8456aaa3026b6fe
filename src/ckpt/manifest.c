/* manifest.json of a checkpoint step: built from the engine's part (typed, or any JSON object)
 * plus the layer's own keys (format_version, step, world, files, tensors) and signed with a
 * checksum of its own; parsed back strictly, with every field of the engine's part checked in
 * one place (zero_manifest_validate and the tensor cross-check below). */
#include "ckpt/internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const zero__manifest_reserved[] = {"format", "format_version", "step", "world", "save_id", "files",
                                               "tensors", ZERO__MANIFEST_CRC_KEY, NULL};

/* The engine's part is recognized by this writer tag. */
#define ENGINE_WRITER "zero"

void zero__ckpt_rank_file(char *dst, size_t cap, int rank) { snprintf(dst, cap, "rank_%05d.safetensors", rank); }

static zero_status fail(char *err, size_t cap, zero_status s, const char *fmt, ...) ZERO__PRINTF(4, 5);
static zero_status fail(char *err, size_t cap, zero_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return s;
}

static const char *precision_name(zero_dtype dt) {
    switch (dt) {
    case ZERO_DTYPE_FP32: return "fp32";
    case ZERO_DTYPE_BF16: return "bf16";
    case ZERO_DTYPE_FP16: return "fp16";
    default: return NULL;
    }
}

/* ------------------------------------------------------------------ validation (one place) */

#define MAX_WHOLE (UINT64_C(1) << 53) /* numbers are JSON doubles: whole values up to 2^53 are exact */

/* A strict parse: one JSON value and nothing after it but whitespace. NULL with a message
 * otherwise (`what` names the text). */
static cJSON *parse_strict(const char *text, const char *what, char *err, size_t cap) {
    const char *end = NULL;
    cJSON *v = cJSON_ParseWithOpts(text, &end, 1);
    if (v) return v;
    cJSON *loose = cJSON_ParseWithOpts(text, &end, 0);
    if (loose) {
        cJSON_Delete(loose);
        fail(err, cap, ZERO_ERR_FORMAT, "%s: bytes after the JSON value, at offset %zu", what, (size_t)(end - text));
    } else {
        const char *at = cJSON_GetErrorPtr();
        fail(err, cap, ZERO_ERR_FORMAT, "%s: not valid JSON (at offset %zu)", what, at && at >= text ? (size_t)(at - text) : 0);
    }
    return NULL;
}

zero_status zero_manifest_validate(const zero_manifest *m, zero_error *e) {
    char tmp[512];
    char *err = e ? e->msg : tmp;
    const size_t cap = e ? sizeof e->msg : sizeof tmp;
    const zero_status B = ZERO_ERR_INVALID_ARG;
    if (!m) return fail(err, cap, B, "manifest: NULL");
    if (m->stage < 0 || m->stage > 3) return fail(err, cap, B, "manifest: stage %d: expected 0..3", m->stage);
    if (!precision_name(m->precision))
        return fail(err, cap, B, "manifest: precision %d: expected fp32, bf16 or fp16", (int)m->precision);
    if (m->align < 1 || m->align > (UINT64_C(1) << 30))
        return fail(err, cap, B, "manifest: align %llu: expected 1..2^30 elements", (unsigned long long)m->align);
    if (m->engine_step < 0 || (uint64_t)m->engine_step > MAX_WHOLE)
        return fail(err, cap, B, "manifest: engine_step %lld: expected 0..2^53", (long long)m->engine_step);
    if (!m->optimizer || !*m->optimizer || strlen(m->optimizer) > 31)
        return fail(err, cap, B, "manifest: optimizer.type: expected a name of 1 to 31 characters");
    if (m->states < 0 || m->states > 2) return fail(err, cap, B, "manifest: optimizer.states %d: expected 0..2", m->states);
    const zero_manifest_scaler *sc = &m->scaler;
    if (!(sc->scale > 0) || !isfinite(sc->scale))
        return fail(err, cap, B, "manifest: loss_scaler.scale %g: expected a finite number > 0", sc->scale);
    if (sc->delayed_shift < 0 || sc->delayed_shift > (1 << 30))
        return fail(err, cap, B, "manifest: loss_scaler.delayed_shift %d: expected 0..2^30", sc->delayed_shift);
    if (sc->iter < 0 || (uint64_t)sc->iter > MAX_WHOLE)
        return fail(err, cap, B, "manifest: loss_scaler.iter %lld: expected 0..2^53", (long long)sc->iter);
    if (sc->last_overflow_iter < -1 || sc->last_overflow_iter > (int64_t)MAX_WHOLE)
        return fail(err, cap, B, "manifest: loss_scaler.last_overflow_iter %lld: expected -1..2^53",
                    (long long)sc->last_overflow_iter);
    if (m->nunits < 1 || !m->units) return fail(err, cap, B, "manifest: units: expected at least one unit");
    if (m->nparams < m->nunits || !m->params)
        return fail(err, cap, B, "manifest: %d parameters for %d units: expected at least one per unit", m->nparams, m->nunits);
    int next = 0;
    for (int i = 0; i < m->nunits; i++) {
        const zero_manifest_unit *u = &m->units[i];
        if (!u->name || !*u->name) return fail(err, cap, B, "manifest: units[%d]: expected a name", i);
        for (int j = 0; j < i; j++)
            if (!strcmp(m->units[j].name, u->name)) return fail(err, cap, B, "manifest: unit '%s' is listed twice", u->name);
        if (u->numel < 1 || u->numel > MAX_WHOLE)
            return fail(err, cap, B, "manifest: unit '%s': numel %llu: expected 1..2^53", u->name, (unsigned long long)u->numel);
        if (u->first_param != next || u->nparams < 1 || u->nparams > m->nparams - next)
            return fail(err, cap, B, "manifest: unit '%s': parameters [%d, %d): expected the next %s from %d", u->name,
                        u->first_param, u->first_param + u->nparams, "ones, at least one,", next);
        uint64_t at = 0; /* the parameters tile [0, numel) in order */
        for (int k = u->first_param; k < u->first_param + u->nparams; k++) {
            const zero_manifest_param *p = &m->params[k];
            if (!p->name || !*p->name) return fail(err, cap, B, "manifest: unit '%s': parameter %d has no name", u->name, k);
            for (int j = 0; j < k; j++)
                if (!strcmp(m->params[j].name, p->name))
                    return fail(err, cap, B, "manifest: parameter '%s' is listed twice", p->name);
            if (p->ndim < 1 || p->ndim > ZERO_ST_MAX_DIMS)
                return fail(err, cap, B, "manifest: parameter '%s': %d dimensions: expected 1..%d", p->name, p->ndim,
                            ZERO_ST_MAX_DIMS);
            uint64_t n = 1;
            for (int d = 0; d < p->ndim; d++) {
                if (p->shape[d] < 1 || (uint64_t)p->shape[d] > MAX_WHOLE / n)
                    return fail(err, cap, B, "manifest: parameter '%s': dimension %d is %lld: expected >= 1 (and %s)", p->name,
                                d, (long long)p->shape[d], "the product <= 2^53");
                n *= (uint64_t)p->shape[d];
            }
            if (p->offset != at)
                return fail(err, cap, B,
                            "manifest: parameter '%s' of unit '%s': offset %llu: expected %llu (a unit's parameters lie back "
                            "to back from 0: %s)",
                            p->name, u->name, (unsigned long long)p->offset, (unsigned long long)at,
                            p->offset > at ? "a gap" : "an overlap");
            if (n > u->numel - at)
                return fail(err, cap, B, "manifest: parameter '%s' (%llu elements at %llu) ends past unit '%s' of %llu", p->name,
                            (unsigned long long)n, (unsigned long long)at, u->name, (unsigned long long)u->numel);
            at += n;
        }
        if (at != u->numel)
            return fail(err, cap, B, "manifest: unit '%s': its parameters cover %llu of its %llu elements", u->name,
                        (unsigned long long)at, (unsigned long long)u->numel);
        next += u->nparams;
    }
    if (next != m->nparams)
        return fail(err, cap, B, "manifest: %d parameters, of which the units hold %d", m->nparams, next);
    if (m->user_json) {
        cJSON *u = parse_strict(m->user_json, "manifest: user_json", err, cap);
        const int ok = cJSON_IsObject(u);
        cJSON_Delete(u);
        if (!u) return B;
        if (!ok) return fail(err, cap, B, "manifest: user_json is not a JSON object");
    }
    return ZERO_OK;
}

/* Elements of unit u's trainable part (its parameters that are not frozen) and frozen part. */
static void unit_parts(const zero_manifest *m, const zero_manifest_unit *u, uint64_t *trainable, uint64_t *frozen) {
    *trainable = *frozen = 0;
    for (int k = u->first_param; k < u->first_param + u->nparams; k++) *(m->params[k].frozen ? frozen : trainable) += m->params[k].numel;
}

/* The tensors the engine declares (any order): per unit with a trainable part its master and
 * `states` optimizer states, F32, the trainable part's size — a state may be 8-bit instead: U8
 * indices of that size (the alignment a multiple of 256) beside "<state>.absmax", F32, one per 256,
 * aligned to 1 (docs/QUANT.md) — and optionally (deterministic mode)
 * "<unit>/det_grid", F32, ceil(trainable part / ZERO_CKPT_DET_GRID_BLOCK); with frozen parameters
 * optionally "<unit>/frozen" (F32, BF16 or F16, the frozen part's size); all of the manifest's align. */
static zero_status check_tensors(const zero_manifest *m, const zero__mtensor *t, int nt, char *err, size_t cap) {
    const zero_status F = ZERO_ERR_FORMAT;
    int want_nt = 0;
    for (int k = 0; k < m->nunits; k++) {
        uint64_t tr, fr;
        unit_parts(m, &m->units[k], &tr, &fr);
        want_nt += tr ? 1 + m->states : 0;
    }
    int nfrozen = 0, ngrids = 0, nabsmax = 0;
    for (int i = 0; i < nt; i++) {
        const char *slash = strrchr(t[i].name, '/');
        const zero_manifest_unit *u = NULL;
        for (int k = 0; slash && k < m->nunits && !u; k++)
            if (strlen(m->units[k].name) == (size_t)(slash - t[i].name) && !strncmp(m->units[k].name, t[i].name, (size_t)(slash - t[i].name)))
                u = &m->units[k];
        if (!u) return fail(err, cap, F, "tensor '%s' belongs to no unit", t[i].name);
        uint64_t tr, fr;
        unit_parts(m, u, &tr, &fr);
        const int fz = !strcmp(slash + 1, "frozen"), dg = !strcmp(slash + 1, "det_grid");
        const size_t nl = strlen(slash + 1);
        const int am = nl > 7 && !strcmp(slash + 1 + nl - 7, ".absmax"); /* an 8-bit state's block scales */
        const int q8 = !fz && !dg && !am && t[i].dtype == ZERO_DTYPE_UINT8 && strcmp(slash + 1, "master") != 0;
        const uint64_t want = fz   ? fr
                              : dg ? (tr + ZERO_CKPT_DET_GRID_BLOCK - 1) / ZERO_CKPT_DET_GRID_BLOCK
                              : am ? (tr + ZERO_CKPT_Q8_BLOCK - 1) / ZERO_CKPT_Q8_BLOCK
                                   : tr;
        const int dt_ok = fz ? t[i].dtype == ZERO_DTYPE_FP32 || t[i].dtype == ZERO_DTYPE_BF16 || t[i].dtype == ZERO_DTYPE_FP16
                             : q8 || t[i].dtype == ZERO_DTYPE_FP32;
        const uint64_t align = am ? 1 : m->align;
        if (!dt_ok || want == 0 || t[i].numel != want || t[i].align != align || (q8 && m->align % ZERO_CKPT_Q8_BLOCK))
            return fail(err, cap, F, "tensor '%s' is %s[%llu] aligned to %llu: unit '%s' expects %s[%llu] aligned to %llu",
                        t[i].name, zero_st_dtype_name(t[i].dtype) ? zero_st_dtype_name(t[i].dtype) : "?",
                        (unsigned long long)t[i].numel, (unsigned long long)t[i].align, u->name,
                        fz ? "F32/BF16/F16" : q8 ? "U8 (alignment a multiple of 256)" : "F32", (unsigned long long)want,
                        (unsigned long long)align);
        /* an 8-bit state and its scales come in pairs */
        char partner[600];
        if (am) snprintf(partner, sizeof partner, "%.*s", (int)(strlen(t[i].name) - 7), t[i].name);
        else snprintf(partner, sizeof partner, "%s.absmax", t[i].name);
        int paired = !(am || q8);
        for (int j = 0; j < nt && !paired; j++)
            paired = !strcmp(t[j].name, partner) && (am ? t[j].dtype == ZERO_DTYPE_UINT8 : t[j].dtype == ZERO_DTYPE_FP32);
        if (!paired)
            return fail(err, cap, F, "tensor '%s' (an 8-bit optimizer state's %s) has no '%s'", t[i].name,
                        am ? "block scales" : "indices", partner);
        nfrozen += fz;
        ngrids += dg;
        nabsmax += am;
    }
    if (nt != want_nt + nfrozen + ngrids + nabsmax)
        return fail(err, cap, F, "%d tensors for %d units with %d optimizer states: expected %d (and a \"frozen\" one per unit "
                    "with frozen parameters, and a \"det_grid\" one per unit, when saved)", nt, m->nunits, m->states, want_nt);
    for (int k = 0; k < m->nunits; k++) {
        uint64_t tr, fr;
        unit_parts(m, &m->units[k], &tr, &fr);
        if (!tr) continue; /* frozen parameters only: no master */
        char want[600];
        snprintf(want, sizeof want, "%s/master", m->units[k].name);
        int found = 0;
        for (int i = 0; i < nt && !found; i++) found = !strcmp(t[i].name, want);
        if (!found) return fail(err, cap, F, "unit '%s' has no tensor '%s'", m->units[k].name, want);
    }
    return ZERO_OK;
}

/* ------------------------------------------------------------------ building */

/* The engine's typed manifest as a JSON object (the keys zero_engine_save has always written). */
static cJSON *engine_json(const zero_manifest *m) {
    cJSON *root = cJSON_CreateObject(), *opt = cJSON_CreateObject(), *sc = cJSON_CreateObject(), *units = cJSON_CreateArray();
    if (!root || !opt || !sc || !units) goto nomem;
    cJSON_AddStringToObject(root, "writer", ENGINE_WRITER);
    cJSON_AddNumberToObject(root, "stage", m->stage);
    cJSON_AddStringToObject(root, "precision", precision_name(m->precision));
    cJSON_AddNumberToObject(root, "align", (double)m->align);
    cJSON_AddNumberToObject(root, "engine_step", (double)m->engine_step);
    cJSON_AddStringToObject(opt, "type", m->optimizer);
    cJSON_AddNumberToObject(opt, "states", m->states);
    cJSON_AddItemToObject(root, "optimizer", opt);
    opt = NULL;
    cJSON_AddNumberToObject(sc, "scale", m->scaler.scale);
    cJSON_AddNumberToObject(sc, "delayed_shift", m->scaler.delayed_shift);
    cJSON_AddNumberToObject(sc, "iter", (double)m->scaler.iter);
    cJSON_AddNumberToObject(sc, "last_overflow_iter", (double)m->scaler.last_overflow_iter);
    cJSON_AddItemToObject(root, "loss_scaler", sc);
    sc = NULL;
    for (int i = 0; i < m->nunits; i++) {
        const zero_manifest_unit *u = &m->units[i];
        cJSON *ju = cJSON_CreateObject(), *ps = cJSON_CreateArray();
        if (!ju || !ps) {
            cJSON_Delete(ju);
            cJSON_Delete(ps);
            goto nomem;
        }
        cJSON_AddItemToArray(units, ju);
        cJSON_AddStringToObject(ju, "name", u->name);
        cJSON_AddNumberToObject(ju, "numel", (double)u->numel);
        for (int k = u->first_param; k < u->first_param + u->nparams; k++) {
            const zero_manifest_param *q = &m->params[k];
            cJSON *jp = cJSON_CreateObject(), *sh = cJSON_CreateArray();
            if (!jp || !sh) {
                cJSON_Delete(jp);
                cJSON_Delete(sh);
                cJSON_Delete(ps);
                goto nomem;
            }
            cJSON_AddItemToArray(ps, jp);
            cJSON_AddStringToObject(jp, "name", q->name);
            for (int d = 0; d < q->ndim; d++) cJSON_AddItemToArray(sh, cJSON_CreateNumber((double)q->shape[d]));
            cJSON_AddItemToObject(jp, "shape", sh);
            cJSON_AddNumberToObject(jp, "offset", (double)q->offset);
            cJSON_AddBoolToObject(jp, "no_decay", q->no_decay != 0);
            if (q->frozen) cJSON_AddBoolToObject(jp, "frozen", 1);
        }
        cJSON_AddItemToObject(ju, "params", ps);
    }
    cJSON_AddItemToObject(root, "units", units);
    units = NULL;
    if (m->user_json) {
        cJSON *uj = cJSON_Parse(m->user_json); /* validated already */
        if (!uj) goto nomem;
        cJSON_AddItemToObject(root, "user", uj);
    }
    return root;
nomem:
    cJSON_Delete(root);
    cJSON_Delete(opt);
    cJSON_Delete(sc);
    cJSON_Delete(units);
    return NULL;
}

/* The manifest text: the layer's keys, then the engine's (moved out of `eng`, which is freed),
 * then the checksum as the last key. */
static zero_status build(cJSON *eng, const zero__mhead *h, zero__sbuf *out, char *err, size_t cap) {
    const int64_t step = h->step;
    const int world = h->world, nt = h->nt;
    const zero__mtensor *t = h->t;
    const zero__mfile *f = h->f;
    zero_status s = ZERO_ERR_NOMEM;
    cJSON *root = cJSON_CreateObject();
    cJSON *files = cJSON_CreateArray();
    cJSON *tens = cJSON_CreateArray();
    char *text = NULL;
    if (!root || !files || !tens) goto fail_nomem;
    /* Numbers: cJSON prints whole doubles below 1e15 exactly, far above any real count. */
    if (!cJSON_AddStringToObject(root, "format", "zero-checkpoint") ||
        !cJSON_AddNumberToObject(root, "format_version", ZERO_CKPT_FORMAT_VERSION) ||
        !cJSON_AddNumberToObject(root, "step", (double)step) || !cJSON_AddNumberToObject(root, "world", world) ||
        !cJSON_AddStringToObject(root, "save_id", h->save_id))
        goto fail_nomem;
    for (int r = 0; r < world; r++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) goto fail_nomem;
        cJSON_AddItemToArray(files, o);
        if (!cJSON_AddStringToObject(o, "name", f[r].name) || !cJSON_AddNumberToObject(o, "rank", r) ||
            !cJSON_AddNumberToObject(o, "bytes", (double)f[r].bytes))
            goto fail_nomem;
    }
    cJSON_AddItemToObject(root, "files", files);
    files = NULL;
    for (int i = 0; i < nt; i++) {
        cJSON *o = cJSON_CreateObject();
        if (!o) goto fail_nomem;
        cJSON_AddItemToArray(tens, o);
        if (!cJSON_AddStringToObject(o, "name", t[i].name) ||
            !cJSON_AddStringToObject(o, "dtype", zero_st_dtype_name(t[i].dtype)) ||
            !cJSON_AddNumberToObject(o, "numel", (double)t[i].numel) ||
            !cJSON_AddNumberToObject(o, "align", (double)t[i].align))
            goto fail_nomem;
    }
    cJSON_AddItemToObject(root, "tensors", tens);
    tens = NULL;
    while (eng && eng->child) { /* the engine's entries, in their order */
        cJSON *it = eng->child;
        cJSON_DetachItemViaPointer(eng, it);
        cJSON_AddItemToObject(root, it->string, it);
    }
    text = cJSON_Print(root);
    if (!text) goto fail_nomem;
    /* "{ ... <last member>\n}": the checksum member goes after the last one; the CRC covers every
     * byte before its key (docs/CHECKPOINT.md, "manifest.json") */
    size_t n = strlen(text);
    while (n > 0 && text[n - 1] != '}') n--;
    if (n < 2) goto fail_nomem;
    n--;
    while (n > 0 && (text[n - 1] == '\n' || text[n - 1] == '\t' || text[n - 1] == ' ')) n--;
    zero__sbuf_put(out, text, n);
    zero__sbuf_put(out, ",\n\t", 3);
    if (!out->failed) {
        const uint32_t crc = zero_crc32c(0, out->p, out->len);
        zero__sbuf_printf(out, "\"%s\":\t\"%08x\"\n}\n", ZERO__MANIFEST_CRC_KEY, crc);
    }
    if (out->failed) goto fail_nomem;
    s = ZERO_OK;
    goto done;
fail_nomem:
    fail(err, cap, s, "manifest: out of memory");
done:
    cJSON_free(text);
    cJSON_Delete(files);
    cJSON_Delete(tens);
    cJSON_Delete(root);
    cJSON_Delete(eng);
    return s;
}

zero_status zero__manifest_build(const char *engine_json, const zero__mhead *h, zero__sbuf *out, char *err, size_t cap) {
    cJSON *eng = NULL;
    if (engine_json && *engine_json) {
        eng = cJSON_Parse(engine_json);
        if (!eng || !cJSON_IsObject(eng)) {
            cJSON_Delete(eng);
            return fail(err, cap, ZERO_ERR_INVALID_ARG, "manifest: the engine's JSON is not a JSON object");
        }
        for (const cJSON *it = eng->child; it; it = it->next) {
            for (int k = 0; zero__manifest_reserved[k]; k++) {
                if (!strcmp(it->string, zero__manifest_reserved[k])) {
                    zero_status s = fail(err, cap, ZERO_ERR_INVALID_ARG,
                                         "manifest: the engine's JSON uses the key '%s', which the checkpoint layer writes "
                                         "(reserved: format, format_version, step, world, save_id, files, tensors, %s)",
                                         it->string, ZERO__MANIFEST_CRC_KEY);
                    cJSON_Delete(eng);
                    return s;
                }
            }
        }
        const cJSON *wr = cJSON_GetObjectItemCaseSensitive(eng, "writer");
        if (cJSON_IsString(wr) && !strcmp(wr->valuestring, ENGINE_WRITER)) {
            cJSON_Delete(eng);
            return fail(err, cap, ZERO_ERR_INVALID_ARG,
                        "manifest: \"writer\": \"" ENGINE_WRITER "\" is the engine's part: commit it with zero_ckpt_commit_engine");
        }
    }
    return build(eng, h, out, err, cap);
}

zero_status zero__manifest_build_engine(const zero_manifest *m, const zero__mhead *h, zero__sbuf *out, char *err,
                                        size_t cap) {
    const int64_t step = h->step;
    zero_error e;
    zero_status s = zero_manifest_validate(m, &e);
    if (s != ZERO_OK) return fail(err, cap, s, "%s", e.msg);
    if (m->engine_step != step)
        return fail(err, cap, ZERO_ERR_INVALID_ARG, "manifest: engine_step %lld: the checkpoint is of step %lld",
                    (long long)m->engine_step, (long long)step);
    if ((s = check_tensors(m, h->t, h->nt, err, cap)) != ZERO_OK) {
        char tmp[512];
        snprintf(tmp, sizeof tmp, "%s", err);
        return fail(err, cap, ZERO_ERR_INVALID_ARG, "manifest: %s", tmp);
    }
    cJSON *eng = engine_json(m);
    if (!eng) return fail(err, cap, ZERO_ERR_NOMEM, "manifest: out of memory");
    return build(eng, h, out, err, cap);
}

/* ------------------------------------------------------------------ parsing */

static int whole(const cJSON *n, uint64_t max, uint64_t *out) {
    if (!cJSON_IsNumber(n)) return 0;
    double v = n->valuedouble;
    if (!(v >= 0 && v <= (double)max) || v != (double)(uint64_t)v) return 0;
    *out = (uint64_t)v;
    return 1;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

/* The checksum: "manifest_crc32c", the root's last member, is the CRC32C of every byte before
 * its key. */
static zero_status check_crc(const char *text, const cJSON *root, const char *path, char *err, size_t cap) {
    const zero_status F = ZERO_ERR_FORMAT;
    const cJSON *last = root->child;
    while (last && last->next) last = last->next;
    if (!last || !last->string || strcmp(last->string, ZERO__MANIFEST_CRC_KEY) != 0)
        return fail(err, cap, F, "%s: no \"%s\" as the last key: the manifest lost its checksum (altered, or written "
                    "by an older zero: save it again)", path, ZERO__MANIFEST_CRC_KEY);
    const char *v = cJSON_IsString(last) ? last->valuestring : NULL;
    unsigned stored = 0;
    int ok = v && strlen(v) == 8;
    for (int i = 0; ok && i < 8; i++) {
        char c = v[i];
        ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        stored = stored * 16 + (unsigned)(c <= '9' ? c - '0' : c - 'a' + 10);
    }
    if (!ok) return fail(err, cap, F, "%s: \"%s\" is not 8 lowercase hex digits", path, ZERO__MANIFEST_CRC_KEY);
    const char *key = NULL, *p = text;
    while ((p = strstr(p, "\"" ZERO__MANIFEST_CRC_KEY "\"")) != NULL) key = p++;
    const uint32_t got = zero_crc32c(0, text, (size_t)(key - text));
    if (got != stored)
        return fail(err, cap, F, "%s: checksum mismatch (stored %08x, its bytes give %08x): the manifest was altered", path,
                    stored, got);
    return ZERO_OK;
}

static zero_status parse_engine(zero__manifest *m, const char *path, char *err, size_t cap) {
    const zero_status F = ZERO_ERR_FORMAT;
    const cJSON *r = m->root;
    zero_manifest *e = &m->eng;
    uint64_t v = 0;
    const cJSON *x = get(r, "stage");
    if (!whole(x, 3, &v)) return fail(err, cap, F, "%s: \"stage\": expected 0, 1, 2 or 3", path);
    e->stage = (int)v;
    x = get(r, "precision");
    const char *pn = cJSON_IsString(x) ? x->valuestring : "";
    if (!strcmp(pn, "fp32")) e->precision = ZERO_DTYPE_FP32;
    else if (!strcmp(pn, "bf16")) e->precision = ZERO_DTYPE_BF16;
    else if (!strcmp(pn, "fp16")) e->precision = ZERO_DTYPE_FP16;
    else return fail(err, cap, F, "%s: \"precision\": expected \"fp32\", \"bf16\" or \"fp16\"", path);
    if (!whole(get(r, "align"), UINT64_C(1) << 30, &e->align))
        return fail(err, cap, F, "%s: \"align\": expected a whole number >= 1", path);
    if (!whole(get(r, "engine_step"), MAX_WHOLE, &v)) return fail(err, cap, F, "%s: \"engine_step\": expected a whole number", path);
    e->engine_step = (int64_t)v;
    const cJSON *opt = get(r, "optimizer");
    x = get(opt, "type");
    if (!cJSON_IsString(x)) return fail(err, cap, F, "%s: \"optimizer.type\": expected a string", path);
    e->optimizer = x->valuestring;
    if (!whole(get(opt, "states"), 2, &v)) return fail(err, cap, F, "%s: \"optimizer.states\": expected 0, 1 or 2", path);
    e->states = (int)v;
    const cJSON *sc = get(r, "loss_scaler");
    x = get(sc, "scale");
    if (!cJSON_IsNumber(x)) return fail(err, cap, F, "%s: \"loss_scaler.scale\": expected a number", path);
    e->scaler.scale = x->valuedouble;
    if (!whole(get(sc, "delayed_shift"), 1u << 30, &v))
        return fail(err, cap, F, "%s: \"loss_scaler.delayed_shift\": expected a whole number", path);
    e->scaler.delayed_shift = (int)v;
    if (!whole(get(sc, "iter"), MAX_WHOLE, &v)) return fail(err, cap, F, "%s: \"loss_scaler.iter\": expected a whole number", path);
    e->scaler.iter = (int64_t)v;
    x = get(sc, "last_overflow_iter");
    if (cJSON_IsNumber(x) && x->valuedouble == -1) e->scaler.last_overflow_iter = -1;
    else if (whole(x, MAX_WHOLE, &v)) e->scaler.last_overflow_iter = (int64_t)v;
    else return fail(err, cap, F, "%s: \"loss_scaler.last_overflow_iter\": expected -1 or a whole number", path);
    const cJSON *units = get(r, "units");
    if (!cJSON_IsArray(units) || cJSON_GetArraySize(units) < 1)
        return fail(err, cap, F, "%s: \"units\": expected an array of at least one unit", path);
    int nu = cJSON_GetArraySize(units), np = 0;
    for (const cJSON *u = units->child; u; u = u->next) {
        const cJSON *ps = get(u, "params");
        if (!cJSON_IsArray(ps)) return fail(err, cap, F, "%s: units[]: \"params\": expected an array", path);
        np += cJSON_GetArraySize(ps);
    }
    m->units = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)nu * sizeof *m->units);
    m->params = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)(np ? np : 1) * sizeof *m->params);
    if (!m->units || !m->params) return fail(err, cap, ZERO_ERR_NOMEM, "%s: out of memory", path);
    int iu = 0, ip = 0;
    for (const cJSON *u = units->child; u; u = u->next, iu++) {
        zero_manifest_unit *mu = &m->units[iu];
        x = get(u, "name");
        if (!cJSON_IsString(x)) return fail(err, cap, F, "%s: units[%d].name: expected a string", path, iu);
        mu->name = x->valuestring;
        if (!whole(get(u, "numel"), MAX_WHOLE, &mu->numel))
            return fail(err, cap, F, "%s: unit '%s': \"numel\": expected a whole number", path, mu->name);
        mu->first_param = ip;
        int k = 0;
        for (const cJSON *p = get(u, "params")->child; p; p = p->next, k++, ip++) {
            zero_manifest_param *q = &m->params[ip];
            x = get(p, "name");
            if (!cJSON_IsString(x)) return fail(err, cap, F, "%s: unit '%s': params[%d].name: expected a string", path, mu->name, k);
            q->name = x->valuestring;
            const cJSON *sh = get(p, "shape");
            q->ndim = cJSON_IsArray(sh) ? cJSON_GetArraySize(sh) : -1;
            if (q->ndim < 1 || q->ndim > ZERO_ST_MAX_DIMS)
                return fail(err, cap, F, "%s: parameter '%s': \"shape\": expected an array of 1 to %d dimensions", path, q->name,
                            ZERO_ST_MAX_DIMS);
            int d = 0;
            q->numel = 1;
            for (const cJSON *dim = sh->child; dim; dim = dim->next, d++) {
                if (!whole(dim, MAX_WHOLE, &v) || v < 1)
                    return fail(err, cap, F, "%s: parameter '%s': shape[%d]: expected a whole number >= 1", path, q->name, d);
                q->shape[d] = (int64_t)v;
                q->numel = v <= MAX_WHOLE / q->numel ? q->numel * v : MAX_WHOLE + 1;
            }
            if (!whole(get(p, "offset"), MAX_WHOLE, &q->offset))
                return fail(err, cap, F, "%s: parameter '%s': \"offset\": expected a whole number", path, q->name);
            x = get(p, "no_decay");
            if (!cJSON_IsBool(x)) return fail(err, cap, F, "%s: parameter '%s': \"no_decay\": expected true or false", path, q->name);
            q->no_decay = cJSON_IsTrue(x);
            x = get(p, "frozen"); /* written only for a frozen parameter */
            if (x && !cJSON_IsBool(x)) return fail(err, cap, F, "%s: parameter '%s': \"frozen\": expected true or false", path, q->name);
            q->frozen = cJSON_IsTrue(x);
        }
        mu->nparams = k;
    }
    e->nunits = nu;
    e->units = m->units;
    e->nparams = np;
    e->params = m->params;
    const cJSON *user = get(r, "user");
    if (user) {
        if (!cJSON_IsObject(user)) return fail(err, cap, F, "%s: \"user\": expected an object", path);
        m->user_text = cJSON_PrintUnformatted(user);
        if (!m->user_text) return fail(err, cap, ZERO_ERR_NOMEM, "%s: out of memory", path);
        e->user_json = m->user_text;
    }
    /* the one validation, then what only a reader can check */
    zero_error ve;
    if (zero_manifest_validate(e, &ve) != ZERO_OK)
        return fail(err, cap, F, "%s: %s", path, ve.msg + (strncmp(ve.msg, "manifest: ", 10) ? 0 : 10));
    if (e->engine_step != m->step)
        return fail(err, cap, F, "%s: \"engine_step\" %lld: the checkpoint is of step %lld", path, (long long)e->engine_step,
                    (long long)m->step);
    char te[512];
    if (check_tensors(e, m->t, m->nt, te, sizeof te) != ZERO_OK) return fail(err, cap, F, "%s: %s", path, te);
    m->has_engine = 1;
    return ZERO_OK;
}

zero_status zero__manifest_parse(const char *text, size_t len, const char *path, zero__manifest *m, char *err, size_t cap) {
    memset(m, 0, sizeof *m);
    const zero_status F = ZERO_ERR_FORMAT;
    if (strlen(text) != len) return fail(err, cap, F, "%s: a NUL byte at offset %zu", path, strlen(text));
    zero_error je;
    if (zero_json_check(text, len, ZERO__MANIFEST_MAX_VALUES, ZERO_JSON_MAX_DEPTH, &je) != ZERO_OK)
        return fail(err, cap, F, "%s: %s", path, je.msg);
    char what[1100];
    snprintf(what, sizeof what, "%s", path);
    m->root = parse_strict(text, what, err, cap);
    if (!m->root) return F;
    if (!cJSON_IsObject(m->root)) return fail(err, cap, F, "%s: not a JSON object", path);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m->root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "zero-checkpoint") != 0)
        return fail(err, cap, F, "%s: \"format\" is not \"zero-checkpoint\": not a zero checkpoint manifest", path);
    uint64_t v = 0;
    if (!whole(cJSON_GetObjectItemCaseSensitive(m->root, "format_version"), 1u << 30, &v))
        return fail(err, cap, F, "%s: \"format_version\" is missing or not a whole number", path);
    m->version = (int)v;
    /* version 1 is version 2 without the save's id (its rank files are then not bound to it) */
    if (m->version != ZERO_CKPT_FORMAT_VERSION && m->version != 1)
        return fail(err, cap, F, "%s: format_version %d: this build reads format_versions 1 and %d", path, m->version,
                    ZERO_CKPT_FORMAT_VERSION);
    zero_status s = check_crc(text, m->root, path, err, cap);
    if (s != ZERO_OK) return s;
    if (!whole(cJSON_GetObjectItemCaseSensitive(m->root, "step"), (UINT64_C(1) << 53), &v))
        return fail(err, cap, F, "%s: \"step\" is missing or not a whole number", path);
    m->step = (int64_t)v;
    if (!whole(cJSON_GetObjectItemCaseSensitive(m->root, "world"), 1u << 24, &v) || v < 1)
        return fail(err, cap, F, "%s: \"world\" is missing or not a whole number in 1..2^24", path);
    m->world = (int)v;
    const cJSON *id = cJSON_GetObjectItemCaseSensitive(m->root, "save_id");
    if (m->version >= 2 && (!cJSON_IsString(id) || !zero__ckpt_id_ok(id->valuestring)))
        return fail(err, cap, F, "%s: \"save_id\" is missing or not %d lowercase hex digits", path, ZERO_CKPT_ID_CHARS);
    if (m->version >= 2) snprintf(m->save_id, sizeof m->save_id, "%s", id->valuestring);
    const cJSON *files = cJSON_GetObjectItemCaseSensitive(m->root, "files");
    if (!cJSON_IsArray(files) || cJSON_GetArraySize(files) != m->world)
        return fail(err, cap, F, "%s: \"files\" must list one file per rank (%d)", path, m->world);
    m->f = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)m->world * sizeof *m->f);
    if (!m->f) return fail(err, cap, ZERO_ERR_NOMEM, "%s: out of memory", path);
    int r = 0;
    for (const cJSON *it = files->child; it; it = it->next, r++) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        char want[64];
        zero__ckpt_rank_file(want, sizeof want, r);
        if (!cJSON_IsString(name) || strcmp(name->valuestring, want) != 0 ||
            !whole(cJSON_GetObjectItemCaseSensitive(it, "bytes"), UINT64_C(1) << 53, &m->f[r].bytes))
            return fail(err, cap, F, "%s: files[%d] must be {\"name\": \"%s\", \"bytes\": <size>}", path, r, want);
        m->f[r].name = zero__strdup(want);
        if (!m->f[r].name) return fail(err, cap, ZERO_ERR_NOMEM, "%s: out of memory", path);
    }
    const cJSON *tens = cJSON_GetObjectItemCaseSensitive(m->root, "tensors");
    if (!cJSON_IsArray(tens)) return fail(err, cap, F, "%s: \"tensors\" is missing or not an array", path);
    int nt = cJSON_GetArraySize(tens);
    if (nt) {
        m->t = zero_mem_calloc(NULL, ZERO_MEM_BUFFERS, (size_t)nt * sizeof *m->t);
        if (!m->t) return fail(err, cap, ZERO_ERR_NOMEM, "%s: out of memory", path);
    }
    for (const cJSON *it = tens->child; it; it = it->next) {
        zero__mtensor *t = &m->t[m->nt];
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(it, "name");
        const cJSON *dt = cJSON_GetObjectItemCaseSensitive(it, "dtype");
        int d = -1;
        for (int k = 0; cJSON_IsString(dt) && k < ZERO_DTYPE_COUNT; k++)
            if (zero_st_dtype_name((zero_dtype)k) && !strcmp(zero_st_dtype_name((zero_dtype)k), dt->valuestring)) d = k;
        if (!cJSON_IsString(name) || !*name->valuestring || d < 0 ||
            !whole(cJSON_GetObjectItemCaseSensitive(it, "numel"), UINT64_C(1) << 53, &t->numel) ||
            !whole(cJSON_GetObjectItemCaseSensitive(it, "align"), UINT64_C(1) << 32, &t->align) || t->align < 1)
            return fail(err, cap, F,
                        "%s: tensors[%d] must be {\"name\", \"dtype\" (F32|BF16|F16|I32|I64|U8), \"numel\", \"align\" >= 1}",
                        path, m->nt);
        t->dtype = (zero_dtype)d;
        t->name = zero__strdup(name->valuestring);
        if (!t->name) return fail(err, cap, ZERO_ERR_NOMEM, "%s: out of memory", path);
        m->nt++;
        for (int k = 0; k < m->nt - 1; k++)
            if (!strcmp(m->t[k].name, t->name)) return fail(err, cap, F, "%s: tensor '%s' is listed twice", path, t->name);
    }
    const cJSON *wr = cJSON_GetObjectItemCaseSensitive(m->root, "writer");
    if (cJSON_IsString(wr) && !strcmp(wr->valuestring, ENGINE_WRITER)) return parse_engine(m, path, err, cap);
    return ZERO_OK;
}

void zero__manifest_free(zero__manifest *m) {
    if (!m) return;
    for (int i = 0; i < m->nt; i++) zero_mem_free(NULL, m->t[i].name);
    for (int r = 0; m->f && r < m->world; r++) zero_mem_free(NULL, m->f[r].name);
    zero_mem_free(NULL, m->t);
    zero_mem_free(NULL, m->f);
    zero_mem_free(NULL, m->units);
    zero_mem_free(NULL, m->params);
    cJSON_free(m->user_text);
    cJSON_Delete(m->root);
    memset(m, 0, sizeof *m);
}

/* ------------------------------------------------------------------ the user's object */

const cJSON *zero__manifest_user_at(const zero__manifest *m, const char *path) {
    const cJSON *v = m && m->root && path ? cJSON_GetObjectItemCaseSensitive(m->root, "user") : NULL;
    char key[256];
    while (cJSON_IsObject(v) && *path) {
        const char *dot = strchr(path, '.');
        size_t n = dot ? (size_t)(dot - path) : strlen(path);
        if (n == 0 || n >= sizeof key) return NULL;
        memcpy(key, path, n);
        key[n] = 0;
        v = cJSON_GetObjectItemCaseSensitive(v, key);
        path += n + (dot ? 1 : 0);
    }
    return *path ? NULL : v;
}
