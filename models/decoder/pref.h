/* models/decoder/pref.h — preference objectives over pairs of sequences (a chosen and a rejected
 * completion of one prompt), as TRL defines them (docs/MODEL.md, "Preference tuning"):
 *
 *   DPO (sigmoid):  z = beta ((lc - rc) - (lr - rr)),  loss = -(1 - eps) log s(z) - eps log s(-z)
 *                   rewards: chosen beta (lc - rc), rejected beta (lr - rr)
 *   ORPO:           a = l / n (the mean log-likelihood of a completion's tokens),
 *                   log_odds = (ac - ar) - (log(1 - e^ac) - log(1 - e^ar)),
 *                   loss = NLL - lambda mean log s(log_odds), NLL the mean cross-entropy of every token of
 *                   the chosen sequences, prompt included (TRL's ORPO: "computed over the full prompt
 *                   and response")
 *                   rewards: chosen beta ac, rejected beta ar (TRL's, with beta = lambda)
 *
 * l: a sequence's summed log-likelihood of its completion tokens (the policy's: -dec_seq_losses),
 * r: the reference model's, n: its counted tokens, s: the logistic function. The loss is the mean
 * over the global batch's pairs; the decoder's backward takes it as per-sequence weights of the
 * summed cross-entropy (dec_set_seq_weights): w = d loss / d CE of that sequence.
 */
#ifndef ZERO_MODELS_DECODER_PREF_H
#define ZERO_MODELS_DECODER_PREF_H

#include "zero/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum dec_objective { DEC_OBJ_LM = 0, DEC_OBJ_DPO = 1, DEC_OBJ_ORPO = 2 } dec_objective;

/* "lm", "dpo", "orpo" -> the objective; ZERO_ERR_INVALID_ARG for another name. */
zero_status dec_objective_parse(const char *name, dec_objective *out);
const char *dec_objective_name(dec_objective o);

typedef struct dec_pref_opts {
    dec_objective obj;      /* DPO or ORPO */
    double beta;            /* DPO's beta; ORPO's lambda (TRL calls both beta; default 0.1) */
    double label_smoothing; /* DPO's eps in [0, 0.5) (conservative DPO; default 0) */
} dec_pref_opts;

/* What a batch of pairs gives: sums over its pairs (divide by the pairs for TRL's means). */
typedef struct dec_pref_sums {
    double loss; /* the preference term's sum (DPO's loss; ORPO's -lambda log s(log_odds)) */
    double nll;  /* ORPO: the chosen sequences' summed cross-entropy, every token (0 for DPO) */
    double chosen, rejected, margin, correct; /* rewards, their margin, pairs with margin > 0 */
} dec_pref_sums;

/* For n pairs: lc, lr the policy's summed log-likelihoods of the completions, rc, rr the
 * reference's (DPO; NULL for ORPO), nc, nr the completions' counted tokens (ORPO), lall the summed
 * log-likelihood of every token of the chosen sequences (ORPO's NLL; NULL for DPO). pairs: the
 * global batch's pairs, tokens: the global count of the tokens of lall (ORPO). Writes the
 * sequences' weights wc[i], wr[i] (d loss / d their completions' summed cross-entropy) and, for
 * ORPO, *wall (d loss / d the chosen sequences' whole summed cross-entropy: 1 / tokens), and adds
 * this batch's sums into *sums. ZERO_ERR_INVALID_ARG for n < 0, pairs < 1, a completion without a
 * counted token, or (ORPO) a mean log-likelihood that is not below 0. */
zero_status dec_pref_weights(const dec_pref_opts *o, int n, const double *lc, const double *lr, const double *rc,
                             const double *rr, const double *nc, const double *nr, const double *lall, double pairs,
                             double tokens, float *wc, float *wr, float *wall, dec_pref_sums *sums);

#ifdef __cplusplus
}
#endif
#endif /* ZERO_MODELS_DECODER_PREF_H */
