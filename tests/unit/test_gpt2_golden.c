/* The reference GPT-2 against PyTorch: initial weights, logits, loss, every gradient, and the
 * losses of 5 AdamW steps, from tests/data/gpt2_golden.bin (written by scripts/gpt2_golden.py).
 *
 * The fixture holds float64 results, so the tolerances measure this model's fp32 error:
 * loss 1e-5 relative; logits 1e-4 of the largest |logit|; each gradient tensor
 * |g - ref| <= 1e-4 * max|ref| + 1e-7 elementwise and relative L2 error <= 1e-4; the AdamW
 * trajectory 1e-4 relative per step (a minimal fp32 AdamW written here, torch's semantics). */
#include <stdint.h>

#include "decoder/decoder.h"
#include "harness.h"

typedef struct record {
    char name[96];
    int dtype; /* 0 fp32, 1 fp64, 2 int32 */
    int ndim;
    int64_t shape[4];
    size_t n;
    void *data;
} record;

static record recs[128];
static int nrecs;

static int load_fixture(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        ZT_FAIL("cannot open fixture %s", path);
        return -1;
    }
    char magic[8];
    uint32_t count;
    int ok = fread(magic, 1, 8, f) == 8 && !memcmp(magic, "ZGOLDEN1", 8) && fread(&count, 4, 1, f) == 1 &&
             count <= 128;
    for (uint32_t i = 0; ok && i < count; i++) {
        record *r = &recs[nrecs];
        uint32_t len, dt, nd;
        ok = fread(&len, 4, 1, f) == 1 && len < sizeof r->name && fread(r->name, 1, len, f) == len &&
             fread(&dt, 4, 1, f) == 1 && fread(&nd, 4, 1, f) == 1 && dt <= 2 && nd <= 4 &&
             fread(r->shape, 8, nd, f) == nd;
        if (!ok) break;
        r->name[len] = '\0';
        r->dtype = (int)dt;
        r->ndim = (int)nd;
        r->n = 1;
        for (uint32_t d = 0; d < nd; d++) r->n *= (size_t)r->shape[d];
        const size_t es = dt == 1 ? 8 : 4;
        r->data = malloc(r->n * es + 1);
        ok = r->data && fread(r->data, es, r->n, f) == r->n;
        nrecs++;
    }
    fclose(f);
    ZT_CHECKF(ok, "fixture %s is corrupt", path);
    return ok ? 0 : -1;
}

static const record *find(const char *name) {
    for (int i = 0; i < nrecs; i++)
        if (!strcmp(recs[i].name, name)) return &recs[i];
    ZT_FAIL("fixture has no record '%s'", name);
    return NULL;
}

/* Minimal AdamW as torch.optim.AdamW computes it, in fp32 with double scalars. */
static void adamw(float *p, float *m, float *v, const float *g, const unsigned char *decay, size_t n,
                  int step, const double *hp) {
    const double lr = hp[0], b1 = hp[1], b2 = hp[2], eps = hp[3], wd = hp[4];
    const double bc1 = 1.0 - pow(b1, step), bc2 = 1.0 - pow(b2, step);
    for (size_t i = 0; i < n; i++) {
        if (decay[i]) p[i] *= (float)(1.0 - lr * wd);
        m[i] = (float)(b1 * m[i] + (1.0 - b1) * g[i]);
        v[i] = (float)(b2 * v[i] + (1.0 - b2) * (double)g[i] * g[i]);
        const double denom = sqrt(v[i]) / sqrt(bc2) + eps;
        p[i] -= (float)(lr / bc1 * m[i] / denom);
    }
}

int main(void) {
    const char *src = getenv("ZERO_SOURCE_DIR");
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/gpt2_golden.bin", src ? src : ".");
    if (load_fixture(path)) return zt_finish("test_gpt2_golden");
    const record *rc = find("config");
    if (!rc) return zt_finish("test_gpt2_golden");
    const int32_t *cv = rc->data;
    dec_config cfg;
    dec_config_gpt2(&cfg, cv[0], cv[1], cv[2], cv[3], cv[4]);
    const int B = cv[5], T = cv[6];
    const uint64_t seed = (uint64_t)cv[7];
    dec_config tiny;
    ZT_OK(dec_config_preset(&tiny, "tiny", NULL));
    ZT_CHECK(!memcmp(&tiny, &cfg, sizeof cfg)); /* the fixture is the tiny preset */

    const int U = dec_num_units(&cfg);
    const uint64_t P = dec_num_params(&cfg);
    float *flat = calloc(P, 4), *gflat = calloc(P, 4), *m1 = calloc(P, 4), *v1 = calloc(P, 4);
    unsigned char *decay = calloc(P, 1);
    float *params[64], *grads[64];
    for (int u = 0; u < U; u++) {
        params[u] = flat + dec_unit_offset(&cfg, u);
        grads[u] = gflat + dec_unit_offset(&cfg, u);
        dec_init_unit(&cfg, u, seed, params[u]);
    }

    /* initial weights: the C init rule and the script's re-implementation agree exactly */
    for (int i = 0; i < dec_num_tensors(&cfg); i++) {
        dec_param_desc d;
        ZT_OK(dec_tensor_desc(&cfg, i, &d));
        char name[160];
        snprintf(name, sizeof name, "init.%s", d.name);
        const record *r = find(name);
        if (!r) continue;
        const float *p = params[d.unit] + d.offset;
        for (size_t k = 0; k < r->n; k++)
            ZT_CHECKF(p[k] == ((float *)r->data)[k], "%s[%zu]: %.9g vs %.9g", name, k, p[k],
                      ((float *)r->data)[k]);
        if (!(d.flags & ZERO_PARAM_NO_DECAY)) memset(decay + dec_unit_offset(&cfg, d.unit) + d.offset, 1, d.numel);
    }

    dec_model *m = NULL;
    zero_error err = {{0}};
    ZT_OK(dec_create(&m, &cfg, B, T, 0, &err));
    const record *tok = find("tokens"), *tgt = find("targets"), *rl = find("logits"), *rloss = find("loss");
    if (!m || !tok || !tgt || !rl || !rloss) return zt_finish("test_gpt2_golden");
    float *logits = malloc(sizeof(float) * B * T * cfg.vocab);
    float loss = 0;
    ZT_OK(dec_forward_backward(m, (const float *const *)params, grads, tok->data, tgt->data, B, T, 1.0f, 0,
                                &loss, logits));
    const double ref_loss = ((double *)rloss->data)[0];
    ZT_CHECKF(fabs(loss - ref_loss) <= 1e-5 * fabs(ref_loss), "loss %.9g vs torch %.9g", loss, ref_loss);
    printf("loss %.9f torch %.9f (rel %.2e)\n", loss, ref_loss, fabs(loss - ref_loss) / ref_loss);

    double lmax = 0, ldiff = 0;
    for (size_t i = 0; i < rl->n; i++) lmax = fmax(lmax, fabs(((float *)rl->data)[i]));
    for (size_t i = 0; i < rl->n; i++) ldiff = fmax(ldiff, fabs(logits[i] - ((float *)rl->data)[i]));
    ZT_CHECKF(ldiff <= 1e-4 * lmax, "logits: max |diff| %.3g, max |logit| %.3g", ldiff, lmax);
    printf("logits: max |diff| %.3g of max |logit| %.3g\n", ldiff, lmax);

    double worst = 0;
    char worst_name[96] = "";
    for (int i = 0; i < dec_num_tensors(&cfg); i++) {
        dec_param_desc d;
        dec_tensor_desc(&cfg, i, &d);
        char name[160];
        snprintf(name, sizeof name, "grad.%s", d.name);
        const record *r = find(name);
        if (!r) continue;
        ZT_EQ_INT(r->n, d.numel);
        const float *g = grads[d.unit] + d.offset, *ref = r->data;
        double gmax = 0, e2 = 0, r2 = 0, emax = 0;
        for (size_t k = 0; k < d.numel; k++) gmax = fmax(gmax, fabs(ref[k]));
        for (size_t k = 0; k < d.numel; k++) {
            const double e = fabs((double)g[k] - ref[k]);
            emax = fmax(emax, e);
            e2 += e * e;
            r2 += (double)ref[k] * ref[k];
        }
        const double rel2 = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2);
        ZT_CHECKF(emax <= 1e-4 * gmax + 1e-7, "%s: max |diff| %.3g, max |ref| %.3g", name, emax, gmax);
        ZT_CHECKF(rel2 <= 1e-4, "%s: relative L2 error %.3g", name, rel2);
        if (rel2 > worst) {
            worst = rel2;
            snprintf(worst_name, sizeof worst_name, "%s", d.name);
        }
    }
    printf("gradients: worst relative L2 error %.3g (%s)\n", worst, worst_name);

    /* 5 AdamW steps on the same batch */
    const record *hp = find("adamw.hparams"), *al = find("adamw.loss");
    if (hp && al) {
        for (int s = 0; s <= 5; s++) {
            memset(gflat, 0, P * 4);
            ZT_OK(dec_forward_backward(m, (const float *const *)params, grads, tok->data, tgt->data, B, T,
                                        1.0f, 0, &loss, NULL));
            const double ref = ((double *)al->data)[s];
            ZT_CHECKF(fabs(loss - ref) <= 1e-4 * fabs(ref), "AdamW loss %d: %.9g vs torch %.9g", s, loss, ref);
            printf("adamw step %d: loss %.7f torch %.7f\n", s, loss, ref);
            if (s < 5) adamw(flat, m1, v1, gflat, decay, P, s + 1, hp->data);
        }
    }

    dec_free(m);
    free(logits), free(flat), free(gflat), free(m1), free(v1), free(decay);
    for (int i = 0; i < nrecs; i++) free(recs[i].data);
    return zt_finish("test_gpt2_golden");
}
