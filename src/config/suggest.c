/* "Did you mean ...?" for unknown config keys: the nearest sibling by edit distance, else the
 * same name at another place of the schema (a key written at the wrong level). */
#include "config/internal.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define ZC_MAX_NAME 64

int zero__zc_edit_distance(const char *a, const char *b) {
    size_t n = strlen(a), m = strlen(b);
    if (n > ZC_MAX_NAME || m > ZC_MAX_NAME) return 1 << 20; /* no key is that long */
    /* three rows of the optimal-string-alignment DP: transpositions count as one edit */
    int rows[3][ZC_MAX_NAME + 1];
    int *pp = rows[0], *prev = rows[1], *cur = rows[2];
    for (size_t j = 0; j <= m; j++) prev[j] = (int)j;
    for (size_t i = 1; i <= n; i++) {
        cur[0] = (int)i;
        for (size_t j = 1; j <= m; j++) {
            int ca = tolower((unsigned char)a[i - 1]), cb = tolower((unsigned char)b[j - 1]);
            int best = prev[j - 1] + (ca != cb);
            if (prev[j] + 1 < best) best = prev[j] + 1;
            if (cur[j - 1] + 1 < best) best = cur[j - 1] + 1;
            if (i > 1 && j > 1 && ca == tolower((unsigned char)b[j - 2]) &&
                tolower((unsigned char)a[i - 2]) == cb && pp[j - 2] + 1 < best)
                best = pp[j - 2] + 1;
            cur[j] = best;
        }
        int *t = pp;
        pp = prev;
        prev = cur;
        cur = t;
    }
    return prev[m];
}

/* Close enough to suggest: a third of the longer name's length (at least one edit, at most
 * four), so "stgae" finds "stage" but "foo" does not find "aio". */
static int close_enough(const char *name, const char *key, int d) {
    size_t l = strlen(name) > strlen(key) ? strlen(name) : strlen(key);
    int lim = (int)(l / 3);
    if (lim < 1) lim = 1;
    if (lim > 4) lim = 4;
    return d <= lim;
}

const zc_key *zero__zc_nearest(const char *name, const zc_key *keys, unsigned type_bit) {
    const zc_key *best = NULL;
    int best_d = 1 << 30;
    for (const zc_key *k = keys; k && k->name; k++) {
        if (k->types && type_bit && !(k->types & type_bit)) continue;
        if (k->flags & ZC_NOSAVE) continue; /* suggest the current spelling, not an alias */
        int d = zero__zc_edit_distance(name, k->name);
        if (d < best_d && close_enough(name, k->name, d)) {
            best = k;
            best_d = d;
        }
    }
    return best;
}

static int find_in(const zc_key *keys, const char *name, const zc_key *skip, char *prefix,
                   size_t plen, size_t cap) {
    for (const zc_key *k = keys; k && k->name; k++) {
        size_t need = plen + (plen ? 1 : 0) + strlen(k->name);
        if (need + 1 > cap) continue;
        size_t at = plen;
        if (plen) prefix[at++] = '.';
        memcpy(prefix + at, k->name, strlen(k->name) + 1);
        if (keys != skip && !(k->flags & ZC_NOSAVE) && zero__zc_edit_distance(k->name, name) == 0)
            return 1;
        if (k->children && find_in(k->children, name, skip, prefix, need, cap)) return 1;
        prefix[plen] = '\0';
    }
    return 0;
}

int zero__zc_find_elsewhere(const char *name, const zc_key *skip, char *out, size_t cap) {
    if (cap == 0) return 0;
    out[0] = '\0';
    return find_in(zero__config_schema(), name, skip, out, 0, cap);
}
