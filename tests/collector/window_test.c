/* The capture window state machine (no CUDA needed). */
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "rv_window.h"
#include "common/rv_test_util.h"

#define S 1000000000ull

static void test_defaults_and_env(void)
{
    rv_window_cfg c;
    char msg[256];
    unsetenv("REVERIE_SKIP");
    unsetenv("REVERIE_ITERATIONS");
    unsetenv("REVERIE_DURATION_S");
    unsetenv("REVERIE_STEP_RANGE");
    unsetenv("REVERIE_TRIGGER_FILE");
    unsetenv("REVERIE_ON_DEMAND");
    CU_ASSERT_EQUAL(rv_window_cfg_from_env(&c, msg, sizeof(msg)), 0);
    CU_ASSERT_EQUAL(c.skip, 3);
    CU_ASSERT_EQUAL(c.iterations, 5);
    CU_ASSERT_STRING_EQUAL(c.step_glob, "ProfilerStep#*");
    CU_ASSERT_EQUAL(c.wait_trigger, 0);

    setenv("REVERIE_SKIP", "10", 1);
    setenv("REVERIE_ITERATIONS", "2", 1);
    setenv("REVERIE_STEP_RANGE", "train_step_*", 1);
    setenv("REVERIE_TRIGGER_FILE", "/tmp/x", 1);
    CU_ASSERT_EQUAL(rv_window_cfg_from_env(&c, msg, sizeof(msg)), 0);
    CU_ASSERT_EQUAL(c.skip, 10);
    CU_ASSERT_EQUAL(c.iterations, 2);
    CU_ASSERT_STRING_EQUAL(c.step_glob, "train_step_*");
    CU_ASSERT_EQUAL(c.wait_trigger, 1);

    /* A bad value is reported and the default stays. */
    setenv("REVERIE_ITERATIONS", "many", 1);
    CU_ASSERT(rv_window_cfg_from_env(&c, msg, sizeof(msg)) < 0);
    CU_ASSERT(strstr(msg, "REVERIE_ITERATIONS") != NULL);
    CU_ASSERT_EQUAL(c.iterations, 5);
    setenv("REVERIE_DURATION_S", "-1", 1);
    CU_ASSERT(rv_window_cfg_from_env(&c, msg, sizeof(msg)) < 0);
    setenv("REVERIE_DURATION_S", "2.5", 1);
    setenv("REVERIE_ITERATIONS", "4", 1);
    CU_ASSERT_EQUAL(rv_window_cfg_from_env(&c, msg, sizeof(msg)), 0);
    CU_ASSERT_DOUBLE_EQUAL(c.duration_s, 2.5, 1e-12);
    unsetenv("REVERIE_SKIP");
    unsetenv("REVERIE_ITERATIONS");
    unsetenv("REVERIE_DURATION_S");
    unsetenv("REVERIE_STEP_RANGE");
    unsetenv("REVERIE_TRIGGER_FILE");
}

static void test_steps(void)
{
    rv_window_cfg c;
    rv_window w;
    rv_window_cfg_defaults(&c);
    c.skip = 2;
    c.iterations = 3;
    rv_window_init(&w, &c, 10 * S);
    CU_ASSERT_EQUAL(w.state, RV_WIN_WARMUP);
    CU_ASSERT(rv_window_is_step(&w, "ProfilerStep#12"));
    CU_ASSERT(!rv_window_is_step(&w, "aten::mm"));
    CU_ASSERT(!rv_window_is_step(&w, NULL));
    /* A step that began before arming is not whole: ignored. */
    CU_ASSERT_EQUAL(rv_window_on_step(&w, 9 * S, 11 * S), 0);
    CU_ASSERT_EQUAL(w.steps_seen, 0);
    int done = 0;
    for (int i = 0; i < 10 && !done; i++) {
        done = rv_window_on_step(&w, (11 + (uint64_t)i) * S, (11 + (uint64_t)i) * S + S / 2);
        if (i < 2)
            CU_ASSERT_EQUAL(w.state, RV_WIN_WARMUP);
        if (i == 2)
            CU_ASSERT_EQUAL(w.state, RV_WIN_CAPTURE);
        if (done)
            CU_ASSERT_EQUAL(i, 4);
    }
    CU_ASSERT_EQUAL(w.state, RV_WIN_DONE);
    CU_ASSERT_EQUAL(w.t0, 13 * S);
    CU_ASSERT_EQUAL(w.t1, 15 * S + S / 2);
    CU_ASSERT_EQUAL(w.steps_kept, 3);
    /* Done stays done; steps after it change nothing. */
    CU_ASSERT_EQUAL(rv_window_on_step(&w, 20 * S, 21 * S), 0);
    CU_ASSERT_EQUAL(w.t1, 15 * S + S / 2);
    /* A trigger re-arms a fresh capture. */
    CU_ASSERT_EQUAL(rv_window_trigger(&w, 30 * S), 1);
    CU_ASSERT_EQUAL(w.state, RV_WIN_WARMUP);
    CU_ASSERT_EQUAL(w.steps_seen, 0);
    CU_ASSERT_EQUAL(rv_window_trigger(&w, 31 * S), 0); /* already armed */
}

static void test_trigger_and_duration(void)
{
    rv_window_cfg c;
    rv_window w;
    rv_window_cfg_defaults(&c);
    c.wait_trigger = 1;
    c.duration_s = 2.0;
    rv_window_init(&w, &c, 5 * S);
    CU_ASSERT_EQUAL(w.state, RV_WIN_IDLE);
    CU_ASSERT(!rv_window_active(&w));
    CU_ASSERT_EQUAL(rv_window_on_tick(&w, 100 * S), 0);
    CU_ASSERT_EQUAL(rv_window_trigger(&w, 50 * S), 1);
    CU_ASSERT_EQUAL(w.state, RV_WIN_CAPTURE);
    CU_ASSERT_EQUAL(w.t0, 50 * S);
    CU_ASSERT_EQUAL(rv_window_on_step(&w, 50 * S, 51 * S), 0); /* time mode ignores steps */
    CU_ASSERT_EQUAL(rv_window_on_tick(&w, 51 * S), 0);
    CU_ASSERT_EQUAL(rv_window_on_tick(&w, 52 * S + 1), 1);
    CU_ASSERT_EQUAL(w.state, RV_WIN_DONE);
    CU_ASSERT_EQUAL(w.t1, 52 * S);
}

static void test_close(void)
{
    rv_window_cfg c;
    rv_window w;
    rv_window_cfg_defaults(&c);
    c.skip = 1;
    c.iterations = 10;
    /* No steps at all: the whole armed span. */
    rv_window_init(&w, &c, 7 * S);
    CU_ASSERT_EQUAL(rv_window_close(&w, 9 * S), 1);
    CU_ASSERT_EQUAL(w.t0, 7 * S);
    CU_ASSERT_EQUAL(w.t1, 9 * S);
    CU_ASSERT_EQUAL(rv_window_close(&w, 10 * S), 0); /* nothing more to write */
    /* Some steps kept: the window ends with the last whole step. */
    rv_window_init(&w, &c, 0);
    rv_window_on_step(&w, 1 * S, 2 * S);
    rv_window_on_step(&w, 2 * S, 3 * S);
    rv_window_on_step(&w, 3 * S, 4 * S);
    CU_ASSERT_EQUAL(rv_window_close(&w, 4 * S + S / 2), 1);
    CU_ASSERT_EQUAL(w.t0, 2 * S);
    CU_ASSERT_EQUAL(w.t1, 4 * S);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("collector_window", NULL, NULL);
    CU_add_test(s, "defaults and environment", test_defaults_and_env);
    CU_add_test(s, "skip then keep N steps", test_steps);
    CU_add_test(s, "trigger and time window", test_trigger_and_duration);
    CU_add_test(s, "close at exit", test_close);
    return rv_test_run() ? 1 : 0;
}
