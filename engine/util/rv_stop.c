/* Deadlines and cancellation for long engine loops. See rv_stop.h. */
#include "util/rv_stop.h"

#include <stddef.h>
#include <time.h>

int64_t rv_stop_now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rv_stop_check(const rv_stop *s, rv_error *err)
{
    if (!s)
        return 0;
    /* The flag is set by another thread (a draining server): read it
     * atomically. */
    if ((s->cancel && __atomic_load_n(s->cancel, __ATOMIC_RELAXED)) ||
        (s->cancel_fn && s->cancel_fn(s->cancel_arg)))
        return rv_error_set(err, RV_ERR_BUDGET, -1, -1,
                            "the what-if was cancelled (the client went away or the server is "
                            "shutting down)");
    if (s->deadline_ms > 0 && rv_stop_now_ms() > s->deadline_ms) {
        if (s->budget_ms)
            return rv_error_set(err, RV_ERR_BUDGET, -1, -1,
                                "the what-if ran past its time budget of %u ms", s->budget_ms);
        return rv_error_set(err, RV_ERR_BUDGET, -1, -1, "the what-if ran past its deadline");
    }
    return 0;
}
