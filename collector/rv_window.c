/* Capture window state machine. See rv_window.h. */
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_error.h"
#include "rv_window.h"

void rv_window_cfg_defaults(rv_window_cfg *cfg)
{
    memset(cfg, 0, sizeof(*cfg));
    cfg->skip = 3;
    cfg->iterations = 5;
    snprintf(cfg->step_glob, sizeof(cfg->step_glob), "ProfilerStep#*");
}

static int env_int(const char *name, int lo, int hi, int *out, char *msg, size_t cap)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return 0;
    char *end;
    errno = 0;
    long x = strtol(v, &end, 10);
    if (errno || *end || x < lo || x > hi) {
        snprintf(msg, cap, "%s=%s is not an integer in [%d, %d]", name, v, lo, hi);
        return RV_ERR_INVALID;
    }
    *out = (int)x;
    return 0;
}

int rv_window_cfg_from_env(rv_window_cfg *cfg, char *msg, size_t msg_cap)
{
    int rc = 0, r;
    rv_window_cfg_defaults(cfg);
    if (msg_cap)
        msg[0] = '\0';
    if ((r = env_int("REVERIE_SKIP", 0, 1000000, &cfg->skip, msg, msg_cap)) < 0)
        rc = r;
    if ((r = env_int("REVERIE_ITERATIONS", 1, 1000000, &cfg->iterations, msg, msg_cap)) < 0)
        rc = r;
    const char *d = getenv("REVERIE_DURATION_S");
    if (d && *d) {
        char *end;
        double x = strtod(d, &end);
        if (*end || !(x > 0 && x < 1e7)) {
            snprintf(msg, msg_cap, "REVERIE_DURATION_S=%s is not a positive number", d);
            rc = RV_ERR_INVALID;
        } else {
            cfg->duration_s = x;
        }
    }
    const char *g = getenv("REVERIE_STEP_RANGE");
    if (g && *g)
        snprintf(cfg->step_glob, sizeof(cfg->step_glob), "%s", g);
    const char *t = getenv("REVERIE_TRIGGER_FILE");
    const char *od = getenv("REVERIE_ON_DEMAND");
    if ((t && *t) || (od && strcmp(od, "1") == 0))
        cfg->wait_trigger = 1;
    return rc;
}

static void arm(rv_window *w, uint64_t now)
{
    w->state = RV_WIN_WARMUP;
    w->steps_seen = 0;
    w->steps_kept = 0;
    w->arm_ns = now;
    w->t0 = w->t1 = 0;
    w->last_step_end = 0;
    if (w->cfg.duration_s > 0) {
        w->state = RV_WIN_CAPTURE;
        w->t0 = now;
    }
}

void rv_window_init(rv_window *w, const rv_window_cfg *cfg, uint64_t now)
{
    memset(w, 0, sizeof(*w));
    w->cfg = *cfg;
    if (w->cfg.iterations < 1)
        w->cfg.iterations = 1;
    if (w->cfg.skip < 0)
        w->cfg.skip = 0;
    w->state = RV_WIN_IDLE;
    if (!cfg->wait_trigger)
        arm(w, now);
}

int rv_window_trigger(rv_window *w, uint64_t now)
{
    if (rv_window_active(w))
        return 0;
    arm(w, now);
    return 1;
}

int rv_window_is_step(const rv_window *w, const char *name)
{
    return name && fnmatch(w->cfg.step_glob, name, 0) == 0;
}

int rv_window_on_step(rv_window *w, uint64_t start, uint64_t end)
{
    if (!rv_window_active(w) || w->cfg.duration_s > 0)
        return 0;
    /* Steps that began before the capture was armed are not whole. */
    if (start < w->arm_ns || end < start)
        return 0;
    w->steps_seen++;
    if (w->steps_seen <= w->cfg.skip)
        return 0;
    if (w->state == RV_WIN_WARMUP) {
        w->state = RV_WIN_CAPTURE;
        w->t0 = start;
    }
    w->steps_kept++;
    if (start < w->t0)
        w->t0 = start;
    if (end > w->last_step_end)
        w->last_step_end = end;
    if (w->steps_kept >= w->cfg.iterations) {
        w->t1 = w->last_step_end;
        w->state = RV_WIN_DONE;
        return 1;
    }
    return 0;
}

int rv_window_on_tick(rv_window *w, uint64_t now)
{
    if (w->state != RV_WIN_CAPTURE || w->cfg.duration_s <= 0)
        return 0;
    uint64_t dur = (uint64_t)(w->cfg.duration_s * 1e9);
    if (now < w->t0 + dur)
        return 0;
    w->t1 = w->t0 + dur;
    w->state = RV_WIN_DONE;
    return 1;
}

int rv_window_close(rv_window *w, uint64_t now)
{
    if (!rv_window_active(w))
        return 0;
    if (w->steps_kept > 0) {
        w->t1 = w->last_step_end;
    } else if (w->cfg.duration_s > 0) {
        w->t1 = now;
    } else {
        /* No whole step in the window: keep everything since arming. */
        w->t0 = w->arm_ns;
        w->t1 = now;
    }
    w->state = RV_WIN_DONE;
    return 1;
}
