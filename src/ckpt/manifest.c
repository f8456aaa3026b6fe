/* manifest.json of a checkpoint step: built from the engine's JSON plus the layer's own keys
 * (format_version, step, world, files, tensors), and parsed back with every field checked. */
#include "ckpt/internal.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *const zero__manifest_reserved[] = {"format", "format_version", "step", "world", "files", "tensors", NULL};

void zero__ckpt_rank_file(char *dst, size_t cap, int rank) { snprintf(dst, cap, "rank_%05d.safetensors", rank); }

static zero_status fail(char *err, size_t cap, zero_status s, const char *fmt, ...) ZERO__PRINTF(4, 5);
static zero_status fail(char *err, size_t cap, zero_status s, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, cap, fmt, ap);
    va_end(ap);
    return s;
}

zero_status zero__manifest_build(const char *engine_json, int64_t step, int world, const zero__mtensor *t,
                                 int nt, const zero__mfile *f, zero__sbuf *out, char *err, size_t cap) {
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
                                         "(reserved: format, format_version, step, world, files, tensors)",
                                         it->string);
                    cJSON_Delete(eng);
                    return s;
                }
            }
        }
    }
    zero_status s = ZERO_ERR_NOMEM;
    cJSON *root = cJSON_CreateObject();
    cJSON *files = cJSON_CreateArray();
    cJSON *tens = cJSON_CreateArray();
    if (!root || !files || !tens) goto fail_nomem;
    /* Numbers: cJSON prints whole doubles below 1e15 exactly, far above any real count. */
    if (!cJSON_AddStringToObject(root, "format", "zero-checkpoint") ||
        !cJSON_AddNumberToObject(root, "format_version", ZERO_CKPT_FORMAT_VERSION) ||
        !cJSON_AddNumberToObject(root, "step", (double)step) || !cJSON_AddNumberToObject(root, "world", world))
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
    if (eng) {
        /* Move the engine's entries over, keeping their order. */
        while (eng->child) {
            cJSON *it = eng->child;
            cJSON_DetachItemViaPointer(eng, it);
            cJSON_AddItemToObject(root, it->string, it);
        }
    }
    char *text = cJSON_Print(root);
    if (!text) goto fail_nomem;
    zero__sbuf_put(out, text, strlen(text));
    zero__sbuf_put(out, "\n", 1);
    cJSON_free(text);
    if (out->failed) goto fail_nomem;
    s = ZERO_OK;
    goto done;
fail_nomem:
    fail(err, cap, s, "manifest: out of memory");
done:
    cJSON_Delete(files);
    cJSON_Delete(tens);
    cJSON_Delete(root);
    cJSON_Delete(eng);
    return s;
}

static int whole(const cJSON *n, uint64_t max, uint64_t *out) {
    if (!cJSON_IsNumber(n)) return 0;
    double v = n->valuedouble;
    if (!(v >= 0 && v <= (double)max) || v != (double)(uint64_t)v) return 0;
    *out = (uint64_t)v;
    return 1;
}

zero_status zero__manifest_parse(const char *text, const char *path, zero__manifest *m, char *err, size_t cap) {
    memset(m, 0, sizeof *m);
    const zero_status F = ZERO_ERR_FORMAT;
    m->root = cJSON_Parse(text);
    if (!m->root || !cJSON_IsObject(m->root)) return fail(err, cap, F, "%s: not a JSON object", path);
    const cJSON *fmt = cJSON_GetObjectItemCaseSensitive(m->root, "format");
    if (!cJSON_IsString(fmt) || strcmp(fmt->valuestring, "zero-checkpoint") != 0)
        return fail(err, cap, F, "%s: \"format\" is not \"zero-checkpoint\": not a zero checkpoint manifest", path);
    uint64_t v = 0;
    if (!whole(cJSON_GetObjectItemCaseSensitive(m->root, "format_version"), 1u << 30, &v))
        return fail(err, cap, F, "%s: \"format_version\" is missing or not a whole number", path);
    m->version = (int)v;
    if (m->version != ZERO_CKPT_FORMAT_VERSION)
        return fail(err, cap, F, "%s: format_version %d: this build reads format_version %d", path, m->version,
                    ZERO_CKPT_FORMAT_VERSION);
    if (!whole(cJSON_GetObjectItemCaseSensitive(m->root, "step"), (UINT64_C(1) << 53), &v))
        return fail(err, cap, F, "%s: \"step\" is missing or not a whole number", path);
    m->step = (int64_t)v;
    if (!whole(cJSON_GetObjectItemCaseSensitive(m->root, "world"), 1u << 24, &v) || v < 1)
        return fail(err, cap, F, "%s: \"world\" is missing or not a whole number in 1..2^24", path);
    m->world = (int)v;
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
    return ZERO_OK;
}

void zero__manifest_free(zero__manifest *m) {
    if (!m) return;
    for (int i = 0; i < m->nt; i++) zero_mem_free(NULL, m->t[i].name);
    for (int r = 0; m->f && r < m->world; r++) zero_mem_free(NULL, m->f[r].name);
    zero_mem_free(NULL, m->t);
    zero_mem_free(NULL, m->f);
    cJSON_Delete(m->root);
    memset(m, 0, sizeof *m);
}
