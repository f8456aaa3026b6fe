/* models/decoder/pref.c — DPO's and ORPO's losses and the per-sequence weights of their gradients
 * (formulas: pref.h). */
#include <math.h>
#include <string.h>

#include "decoder/pref.h"

zero_status dec_objective_parse(const char *name, dec_objective *out) {
    static const char *const names[] = {"lm", "dpo", "orpo"};
    for (int i = 0; name && i < 3; i++)
        if (!strcmp(name, names[i])) {
            *out = (dec_objective)i;
            return ZERO_OK;
        }
    return ZERO_ERR_INVALID_ARG;
}

const char *dec_objective_name(dec_objective o) { return o == DEC_OBJ_DPO ? "dpo" : o == DEC_OBJ_ORPO ? "orpo" : "lm"; }

/* log s(x), computed without overflow. */
static double log_sigmoid(double x) { return x >= 0 ? -log1p(exp(-x)) : x - log1p(exp(x)); }
static double sigmoid(double x) { return x >= 0 ? 1.0 / (1.0 + exp(-x)) : exp(x) / (1.0 + exp(x)); }

zero_status dec_pref_weights(const dec_pref_opts *o, int n, const double *lc, const double *lr, const double *rc,
                             const double *rr, const double *nc, const double *nr, const double *lall, double pairs,
                             double tokens, float *wc, float *wr, float *wall, dec_pref_sums *sums) {
    if (n < 0 || !(pairs >= 1) || (o->obj == DEC_OBJ_DPO && n && (!rc || !rr)) ||
        (o->obj == DEC_OBJ_ORPO && (!(tokens >= 1) || (n && (!lall || !wall)))))
        return ZERO_ERR_INVALID_ARG;
    const double b = o->beta;
    for (int i = 0; i < n; i++) {
        if (o->obj == DEC_OBJ_DPO) {
            const double rwc = b * (lc[i] - rc[i]), rwr = b * (lr[i] - rr[i]), z = rwc - rwr, e = o->label_smoothing;
            /* d loss / d z = -(1 - e) s(-z) + e s(z); d z / d lc = beta; lc = -CE */
            const double g = -(1.0 - e) * sigmoid(-z) + e * sigmoid(z);
            wc[i] = (float)(-b * g / pairs);
            wr[i] = (float)(b * g / pairs);
            sums->loss += -(1.0 - e) * log_sigmoid(z) - e * log_sigmoid(-z);
            sums->chosen += rwc, sums->rejected += rwr, sums->margin += z;
            sums->correct += z > 0;
        } else {
            if (!(nc[i] >= 1) || !(nr[i] >= 1)) return ZERO_ERR_INVALID_ARG;
            const double ac = lc[i] / nc[i], ar = lr[i] / nr[i];
            if (!(ac < 0) || !(ar < 0)) return ZERO_ERR_INVALID_ARG;
            const double lo = (ac - ar) - (log(-expm1(ac)) - log(-expm1(ar)));
            /* loss = NLL / tokens - lambda log s(lo) / pairs; d lo / d ac = 1 / (1 - e^ac), d ac / d lc = 1/nc */
            const double g = b * sigmoid(-lo) / pairs;
            wc[i] = (float)(g / (-expm1(ac) * nc[i]));
            wr[i] = (float)(-g / (-expm1(ar) * nr[i]));
            wall[i] = (float)(1.0 / tokens);
            sums->loss += -b * log_sigmoid(lo);
            sums->nll += -lall[i];
            sums->chosen += b * ac, sums->rejected += b * ar, sums->margin += b * (ac - ar);
            sums->correct += ac > ar;
        }
    }
    return ZERO_OK;
}
