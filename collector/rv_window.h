/* Which part of the run the collector keeps: a pure state machine, fed with
 * step ranges (NVTX ranges whose name matches a glob) and clock ticks.
 *
 * Step mode: skip the first `skip` steps after arming, keep the next
 * `iterations`; the window is [start of the first kept step, end of the last].
 * Time mode (duration_s > 0): keep [arm time, arm time + duration].
 * A capture is armed at start, or only by a trigger when wait_trigger is set;
 * a trigger after a finished capture arms a new one. */
#ifndef RV_WINDOW_H
#define RV_WINDOW_H

#include <stdint.h>

typedef enum rv_window_state {
    RV_WIN_IDLE = 0, /* waiting for a trigger */
    RV_WIN_WARMUP,   /* armed, skipping warm-up steps */
    RV_WIN_CAPTURE,  /* inside the window */
    RV_WIN_DONE      /* the window is complete */
} rv_window_state;

typedef struct rv_window_cfg {
    int skip;            /* REVERIE_SKIP, default 3 */
    int iterations;      /* REVERIE_ITERATIONS, default 5 */
    double duration_s;   /* REVERIE_DURATION_S; > 0 selects time mode */
    int wait_trigger;    /* 1: stay idle until a trigger */
    char step_glob[128]; /* REVERIE_STEP_RANGE, default "ProfilerStep#*" */
} rv_window_cfg;

typedef struct rv_window {
    rv_window_cfg cfg;
    int state;      /* rv_window_state */
    int steps_seen; /* steps ended since arming */
    int steps_kept;
    uint64_t arm_ns; /* when the capture was armed */
    uint64_t t0, t1; /* the window, valid once state >= CAPTURE (t1 once DONE) */
    uint64_t last_step_end;
} rv_window;

/* Defaults, then the REVERIE_* environment variables. Returns 0, or a
 * negative rv_err with a message in msg when a value is malformed (the
 * defaults stay in force for that variable). */
int rv_window_cfg_from_env(rv_window_cfg *cfg, char *msg, size_t msg_cap);
void rv_window_cfg_defaults(rv_window_cfg *cfg);

/* Starts the machine at time now (ns): armed unless cfg->wait_trigger. */
void rv_window_init(rv_window *w, const rv_window_cfg *cfg, uint64_t now);
/* A trigger: arms a new capture when idle or done; ignored while armed.
 * Returns 1 when it armed one. */
int rv_window_trigger(rv_window *w, uint64_t now);
/* True when the name matches the step glob. */
int rv_window_is_step(const rv_window *w, const char *name);
/* A step range [start, end] ended. Returns 1 when this completed the window. */
int rv_window_on_step(rv_window *w, uint64_t start, uint64_t end);
/* Clock tick. Returns 1 when this completed a time-mode window. */
int rv_window_on_tick(rv_window *w, uint64_t now);
/* Closes an unfinished capture at time now (process exit): the window then
 * covers the steps kept so far, or [arm, now] when none were. Returns 1 when
 * there is anything to write (the state was WARMUP or CAPTURE). */
int rv_window_close(rv_window *w, uint64_t now);
/* True while records should be collected (WARMUP or CAPTURE). */
static inline int rv_window_active(const rv_window *w)
{
    return w->state == RV_WIN_WARMUP || w->state == RV_WIN_CAPTURE;
}

#endif
