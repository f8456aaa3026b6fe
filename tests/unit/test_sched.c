/* Tests of the learning-rate schedules: values worked out by hand from DeepSpeed's formulas
 * (deepspeed/runtime/lr_schedules.py), step 0 being the first update. */
#include "harness.h"
#include "zero/zero.h"

static zero_sched sched(zero_sched_type t, double lo, double hi, int64_t warm, int log_warmup, int64_t total) {
    zero_sched s;
    memset(&s, 0, sizeof s);
    s.type = t;
    s.warmup_min_lr = lo;
    s.warmup_max_lr = hi;
    s.warmup_num_steps = warm;
    s.warmup_type_log = log_warmup;
    s.total_num_steps = total;
    return s;
}

static void test_names(void) {
    static const char *names[] = {"constant", "WarmupLR", "WarmupDecayLR", "WarmupCosineLR"};
    for (int t = 0; t < 4; t++) {
        zero_sched_type o = (zero_sched_type)99;
        ZT_CHECK(!strcmp(zero_sched_name((zero_sched_type)t), names[t]));
        ZT_OK(zero_sched_parse(names[t], &o));
        ZT_EQ_INT(o, t);
    }
    zero_sched_type o = ZERO_SCHED_WARMUP_LR;
    ZT_OK(zero_sched_parse("warmupcosinelr", &o));
    ZT_EQ_INT(o, ZERO_SCHED_WARMUP_COSINE_LR);
    ZT_OK(zero_sched_parse("none", &o));
    ZT_EQ_INT(o, ZERO_SCHED_CONSTANT);
    ZT_EQ_INT(zero_sched_parse("OneCycle", &o), ZERO_ERR_UNSUPPORTED);
    ZT_EQ_INT(zero_sched_parse("WarmupLinearLR", &o), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(zero_sched_parse(NULL, &o), ZERO_ERR_INVALID_ARG);
    ZT_EQ_INT(o, ZERO_SCHED_CONSTANT);
    ZT_CHECK(!strcmp(zero_sched_name((zero_sched_type)9), "invalid"));
}

static void test_constant(void) {
    zero_sched s = sched(ZERO_SCHED_CONSTANT, 0, 0, 0, 0, 0);
    ZT_NEAR(zero_sched_lr(&s, 3e-4, 0), 3e-4, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 3e-4, 123456), 3e-4, 1e-15);
    ZT_NEAR(zero_sched_lr(NULL, 0.25, 7), 0.25, 1e-15);
    s.type = (zero_sched_type)42;
    ZT_CHECK(isnan(zero_sched_lr(&s, 0.25, 7)));
}

static void test_warmup_lr(void) {
    /* log warmup over 10 steps, 0 -> 0.01: lr = 0.01 * log(step+1) / log(10) */
    zero_sched s = sched(ZERO_SCHED_WARMUP_LR, 0.0, 0.01, 10, 1, 0);
    ZT_NEAR(zero_sched_lr(&s, 1, 0), 0.0, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 1), 0.0030102999566398, 1e-13); /* log10(2) / 100 */
    ZT_NEAR(zero_sched_lr(&s, 1, 4), 0.0069897000433602, 1e-13); /* log10(5) / 100 */
    ZT_NEAR(zero_sched_lr(&s, 1, 9), 0.01, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 10), 0.01, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 1000000), 0.01, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, -1), 0.0, 1e-15); /* before the first step: the minimum */
    /* linear over 4 steps, 0.001 -> 0.005: +0.001 a step */
    s = sched(ZERO_SCHED_WARMUP_LR, 0.001, 0.005, 4, 0, 0);
    static const double lin[] = {0.001, 0.002, 0.003, 0.004, 0.005, 0.005};
    for (int i = 0; i < 6; i++) ZT_NEAR(zero_sched_lr(&s, 1, i), lin[i], 1e-15);
    /* warmup_num_steps below 2 is raised to 2, as DeepSpeed does */
    s = sched(ZERO_SCHED_WARMUP_LR, 0.0, 0.1, 1, 0, 0);
    ZT_NEAR(zero_sched_lr(&s, 1, 0), 0.0, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 1), 0.05, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 2), 0.1, 1e-15);
    /* an unset (negative) warmup_max_lr is the optimizer's lr */
    s = sched(ZERO_SCHED_WARMUP_LR, 0.0, -1, 4, 0, 0);
    ZT_NEAR(zero_sched_lr(&s, 0.1, 2), 0.05, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 0.1, 4), 0.1, 1e-15);
}

static void test_warmup_decay_lr(void) {
    /* linear warmup 4 steps to 0.008, then linear to 0 at step 12: (12 - step) / 8 */
    zero_sched s = sched(ZERO_SCHED_WARMUP_DECAY_LR, 0.0, 0.008, 4, 0, 12);
    ZT_NEAR(zero_sched_lr(&s, 1, 0), 0.0, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 3), 0.006, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 4), 0.008, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 6), 0.006, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 8), 0.004, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 11), 0.001, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 12), 0.0, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 50), 0.0, 1e-15); /* never negative */
    /* log warmup, min 0.002: step 1 = 0.002 + 0.006 * log(2)/log(4) = 0.005 */
    s = sched(ZERO_SCHED_WARMUP_DECAY_LR, 0.002, 0.008, 4, 1, 12);
    ZT_NEAR(zero_sched_lr(&s, 1, 1), 0.005, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 8), 0.002 + 0.006 * 0.5, 1e-15); /* decay applies to min + delta*gamma */
    /* total <= warmup: no decay window, DeepSpeed divides by max(1, T - W) */
    s = sched(ZERO_SCHED_WARMUP_DECAY_LR, 0.0, 0.008, 4, 0, 3);
    ZT_NEAR(zero_sched_lr(&s, 1, 4), 0.0, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 1, 2), 0.004, 1e-15);
}

static void test_warmup_cosine_lr(void) {
    /* base 0.1; linear warmup 4 steps from ratio 0.2; cosine to ratio 0.1 at step 14 */
    zero_sched s = sched(ZERO_SCHED_WARMUP_COSINE_LR, 0, 0, 4, 0, 14);
    s.warmup_min_ratio = 0.2;
    s.cos_min_ratio = 0.1;
    ZT_NEAR(zero_sched_lr(&s, 0.1, -1), 0.0, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 0.1, 0), 0.02, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 0.1, 2), 0.06, 1e-15);  /* 0.2 + 0.5 * 0.8 */
    ZT_NEAR(zero_sched_lr(&s, 0.1, 3), 0.08, 1e-15);  /* 0.2 + 0.75 * 0.8 */
    /* step 4: progress (4-4+1)/10 = 0.1: 0.1 + 0.9 * (1 + cos(0.1 pi)) / 2 = 0.977975432332819 */
    ZT_NEAR(zero_sched_lr(&s, 0.1, 4), 0.0977975432332819, 1e-15);
    ZT_NEAR(zero_sched_lr(&s, 0.1, 8), 0.055, 1e-15); /* progress 0.5: cos = 0 */
    ZT_NEAR(zero_sched_lr(&s, 0.1, 13), 0.01, 1e-15); /* progress 1: the floor */
    ZT_NEAR(zero_sched_lr(&s, 0.1, 500), 0.01, 1e-15); /* stays at the floor */
    /* log warmup over 10 steps from ratio 0: step 1 = log(2)/log(10) */
    s = sched(ZERO_SCHED_WARMUP_COSINE_LR, 0, 0, 10, 1, 100);
    ZT_NEAR(zero_sched_lr(&s, 0.1, 1), 0.030102999566398, 1e-13);
    ZT_NEAR(zero_sched_lr(&s, 0.1, 0), 0.0, 1e-15);
}

int main(void) {
    test_names();
    test_constant();
    test_warmup_lr();
    test_warmup_decay_lr();
    test_warmup_cosine_lr();
    return zt_finish("test_sched");
}
