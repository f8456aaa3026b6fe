/* zero_config -> DeepSpeed-style JSON, driven by the same schema as the loader, so that what is
 * written loads back into an equal config. */
#include "config/internal.h"

#include <stdlib.h>
#include <string.h>

int zero__zc_save_table(const zc_key *keys, const zero_config *cfg, unsigned type_bit, cJSON *obj) {
    for (const zc_key *k = keys; k->name; k++) {
        if (k->types && type_bit && !(k->types & type_bit)) continue;
        if (k->flags & (ZC_NO_EFFECT | ZC_OFF_ONLY | ZC_NOSAVE)) continue;
        if (k->set_bit && !(cfg->set_fields & k->set_bit)) continue;
        if (k->save) {
            if (k->save(k, cfg, obj)) return -1;
            continue;
        }
        if ((k->flags & ZC_AUTO) && (cfg->auto_fields & k->auto_bit)) {
            if (!cJSON_AddStringToObject(obj, k->name, "auto")) return -1;
            continue;
        }
        const char *f = (const char *)cfg + k->off;
        double v;
        switch (k->kind) {
        case ZC_OBJECT: {
            cJSON *child = cJSON_CreateObject();
            if (!child || zero__zc_save_table(k->children, cfg, 0, child)) {
                cJSON_Delete(child);
                return -1;
            }
            if (!child->child) cJSON_Delete(child); /* nothing stored under it */
            else cJSON_AddItemToObject(obj, k->name, child);
            continue;
        }
        case ZC_BOOL: {
            int b = *(const int *)f;
            if ((k->flags & ZC_UNSET_NEG) && b < 0) continue;
            if (!cJSON_AddBoolToObject(obj, k->name, b != 0)) return -1;
            continue;
        }
        case ZC_INT: v = *(const int *)f; break;
        case ZC_I64: v = (double)*(const int64_t *)f; break;
        case ZC_F32: v = *(const float *)f; break;
        case ZC_F64: v = *(const double *)f; break;
        default: continue;
        }
        if ((k->flags & ZC_UNSET0) && v == 0) continue;
        if ((k->flags & ZC_UNSET_NEG) && v == -1) continue;
        if (!cJSON_AddNumberToObject(obj, k->name, v)) return -1;
    }
    return 0;
}

char *zero_config_to_json(const zero_config *cfg) {
    if (!cfg) return NULL;
    cJSON *root = cJSON_CreateObject();
    if (!root) return NULL;
    char *out = NULL;
    if (zero__zc_save_table(zero__config_schema(), cfg, 0, root) == 0) {
        char *text = cJSON_Print(root);
        if (text) {
            /* the contract is free(): do not hand out memory from cJSON's (replaceable) hooks */
            size_t n = strlen(text) + 1;
            out = malloc(n);
            if (out) memcpy(out, text, n);
            cJSON_free(text);
        }
    }
    cJSON_Delete(root);
    return out;
}

/* Appends "path a -> b" for every leaf where x and y differ (a missing side is "(none)"). */
static void diff_into(const cJSON *x, const cJSON *y, const char *path, char *out, size_t cap, size_t *len, int *n) {
    const int xo = cJSON_IsObject(x), yo = cJSON_IsObject(y);
    if (xo || yo) {
        for (int side = 0; side < 2; side++) { /* x's keys, then y's keys that x lacks */
            const cJSON *from = side ? y : x;
            for (const cJSON *k = from && cJSON_IsObject(from) ? from->child : NULL; k; k = k->next) {
                if (side && cJSON_IsObject(x) && cJSON_GetObjectItemCaseSensitive(x, k->string)) continue;
                char sub[256];
                snprintf(sub, sizeof sub, "%s%s%s", path, *path ? "." : "", k->string);
                diff_into(xo ? cJSON_GetObjectItemCaseSensitive(x, k->string) : NULL,
                          yo ? cJSON_GetObjectItemCaseSensitive(y, k->string) : NULL, sub, out, cap, len, n);
            }
        }
        return;
    }
    char *a = x ? cJSON_PrintUnformatted(x) : NULL, *b = y ? cJSON_PrintUnformatted(y) : NULL;
    if (!a || !b || strcmp(a, b) != 0) {
        /* numbers shown as a person writes them (a float field prints 0.0020000000949949026) */
        char na[32], nb[32];
        const int xn = x && cJSON_IsNumber(x), yn = y && cJSON_IsNumber(y);
        if (xn) snprintf(na, sizeof na, "%.7g", x->valuedouble);
        if (yn) snprintf(nb, sizeof nb, "%.7g", y->valuedouble);
        if (*len < cap)
            *len += (size_t)snprintf(out + *len, cap - *len, "%s%s %s -> %s", *n ? "; " : "", path,
                                     xn  ? na
                                     : a ? a
                                         : "(none)",
                                     yn  ? nb
                                     : b ? b
                                         : "(none)");
        ++*n;
    }
    cJSON_free(a);
    cJSON_free(b);
}

int zero_config_diff(const zero_config *from, const zero_config *to, char *out, size_t cap) {
    if (cap) out[0] = 0;
    if (!from || !to) return -1;
    cJSON *x = cJSON_CreateObject(), *y = cJSON_CreateObject();
    int n = -1;
    if (x && y && zero__zc_save_table(zero__config_schema(), from, 0, x) == 0 &&
        zero__zc_save_table(zero__config_schema(), to, 0, y) == 0) {
        size_t len = 0;
        n = 0;
        diff_into(x, y, "", out, cap, &len, &n);
    }
    cJSON_Delete(x);
    cJSON_Delete(y);
    return n;
}
