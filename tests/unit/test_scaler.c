/* Tests of the loss scaler: overflow/no-overflow sequences with scales derived by hand from the
 * rules in include/zero/precision.h (hysteresis, window, floor, consecutive hysteresis). */
#include "harness.h"
#include "zero/zero.h"

/* Feeds `seq` ('o' overflow, '.' good step) and checks the scale after each step. */
static void run(zero_loss_scaler *s, const char *seq, const double *want, const char *what) {
    for (int i = 0; seq[i]; i++) {
        zero_loss_scaler_update(s, seq[i] == 'o');
        ZT_CHECKF(s->scale == want[i], "%s: after step %d ('%c') scale %g, expected %g", what, i, seq[i],
                  s->scale, want[i]);
    }
}

static void test_hysteresis(void) {
    zero_loss_scaler s;
    /* 2^4, window 2, hysteresis 2, min 1:
     * it0 good: (0+1)%2 != 0        -> 16     it1 good: (1+1)%2 == 0 -> 32, shift back to 2
     * it2 overflow: shift 2 -> 1    -> 32     it3 overflow: shift 1  -> 16
     * it4 good: (4-3)%2 != 0        -> 16     it5 good: (5-3)%2 == 0 -> 32, shift back to 2
     * it6 overflow: shift 2 -> 1    -> 32     it7 good: no refill (window not reached) -> 32
     * it8 overflow: shift is 1      -> 16 */
    zero_loss_scaler_init(&s, 0, 4, 2, 2, 1, 0);
    ZT_CHECK(s.dynamic && s.scale == 16 && s.delayed_shift == 2 && s.iter == 0 && s.last_overflow_iter == -1);
    static const double want[] = {16, 32, 32, 16, 16, 32, 32, 32, 16};
    run(&s, "..oo..o.o", want, "hysteresis");
    ZT_EQ_INT(s.iter, 9);
    ZT_EQ_INT(s.last_overflow_iter, 8);
    ZT_EQ_INT(s.delayed_shift, 1);
    /* consecutive hysteresis: every good step refills the shift, so it7 restores 2 and it8 keeps 32 */
    zero_loss_scaler_init(&s, 0, 4, 2, 2, 1, 1);
    static const double want_c[] = {16, 32, 32, 16, 16, 32, 32, 32, 32};
    run(&s, "..oo..o.o", want_c, "consecutive");
    ZT_EQ_INT(s.delayed_shift, 1);
}

static void test_window(void) {
    zero_loss_scaler s;
    /* window 3, hysteresis 1: doubles on iterations 2, 5, 8 ((iter+1) % 3 == 0); an overflow at
     * iter 6 halves and restarts the count: next doubling at iter 9 ((9-6) % 3 == 0). */
    zero_loss_scaler_init(&s, 0, 10, 3, 1, 1, 0);
    static const double want[] = {1024, 1024, 2048, 2048, 2048, 4096, 2048, 2048, 2048, 4096};
    run(&s, "......o...", want, "window");
    /* DeepSpeed's defaults: 2^16, window 1000, hysteresis 2: the 1000th good step doubles */
    zero_loss_scaler_init(&s, 0, 16, 1000, 2, 1, 0);
    for (int i = 0; i < 999; i++) zero_loss_scaler_update(&s, 0);
    ZT_CHECK(s.scale == 65536.0);
    zero_loss_scaler_update(&s, 0);
    ZT_CHECK(s.scale == 131072.0);
    /* one overflow only uses up hysteresis; the second halves */
    zero_loss_scaler_update(&s, 1);
    ZT_CHECK(s.scale == 131072.0);
    zero_loss_scaler_update(&s, 1);
    ZT_CHECK(s.scale == 65536.0);
}

static void test_floor(void) {
    zero_loss_scaler s;
    /* 2^2 with min 1, hysteresis 1: 4 -> 2 -> 1 -> 1 -> 1 */
    zero_loss_scaler_init(&s, 0, 2, 1000, 1, 1, 0);
    static const double want[] = {2, 1, 1, 1};
    run(&s, "oooo", want, "floor");
    /* at the floor an overflow does not use up hysteresis (scale == min: halve, clamped) */
    zero_loss_scaler_init(&s, 0, 0, 1000, 3, 1, 0);
    zero_loss_scaler_update(&s, 1);
    ZT_CHECK(s.scale == 1.0);
    ZT_EQ_INT(s.delayed_shift, 3);
    /* a floor that is not a power of two is reached exactly: 8 -> 4 -> 3 -> 3 */
    zero_loss_scaler_init(&s, 0, 3, 1000, 1, 3, 0);
    static const double want3[] = {4, 3, 3};
    run(&s, "ooo", want3, "floor3");
    /* min_scale <= 0 falls back to DeepSpeed's default floor of 1 */
    zero_loss_scaler_init(&s, 0, 1, 1000, 1, 0, 0);
    ZT_CHECK(s.min_scale == 1.0);
}

static void test_static_and_none(void) {
    zero_loss_scaler s;
    zero_loss_scaler_init(&s, 128, 16, 2, 2, 1, 0);
    ZT_CHECK(!s.dynamic && s.scale == 128);
    for (int i = 0; i < 50; i++) zero_loss_scaler_update(&s, i % 3 == 0);
    ZT_CHECK(s.scale == 128);
    ZT_EQ_INT(s.iter, 50);
    zero_loss_scaler_init_none(&s);
    ZT_CHECK(!s.dynamic && s.scale == 1);
    for (int i = 0; i < 20; i++) zero_loss_scaler_update(&s, i % 2);
    ZT_CHECK(s.scale == 1);
    /* out-of-range arguments are brought into range, never left to divide by zero */
    zero_loss_scaler_init(&s, 0, 5, 0, 0, 1, 0);
    ZT_EQ_INT(s.window, 1);
    ZT_EQ_INT(s.hysteresis, 1);
    zero_loss_scaler_update(&s, 0); /* window 1: every good step doubles */
    ZT_CHECK(s.scale == 64);
    zero_loss_scaler_update(NULL, 1);
    zero_loss_scaler_init(NULL, 0, 0, 0, 0, 0, 0);
}

int main(void) {
    test_hysteresis();
    test_window();
    test_floor();
    test_static_and_none();
    return zt_finish("test_scaler");
}
