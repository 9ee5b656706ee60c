/* When long engine work must stop: a deadline and cancellation.
 *
 * The simulator's main loop, the what-if models' loop and the selectors'
 * matching check an rv_stop every few thousand steps, so a what-if past its
 * time budget, or one whose client went away, stops within milliseconds
 * instead of running to the end. All fields are optional; a zeroed rv_stop
 * (or a NULL pointer) never stops anything. */
#ifndef RV_STOP_H
#define RV_STOP_H

#include <stdint.h>

#include "util/rv_error.h"

typedef struct rv_stop {
    int64_t deadline_ms;        /* absolute CLOCK_MONOTONIC ms (rv_stop_now_ms); 0 = none */
    unsigned budget_ms;         /* the budget the deadline came from, named in the message */
    const volatile int *cancel; /* borrowed; non-zero = stop (server draining); NULL = none */
    /* Asked at the same points; non-zero = stop (the client went away).
     * Must be cheap (one syscall at most) and safe on the working thread. */
    int (*cancel_fn)(void *arg);
    void *cancel_arg;
} rv_stop;

/* CLOCK_MONOTONIC in milliseconds. */
int64_t rv_stop_now_ms(void);

/* 0 while the work may go on; RV_ERR_BUDGET with a message in *err (may be
 * NULL) once the deadline has passed ("the what-if ran past its time budget
 * of N ms") or a cancellation was asked ("the what-if was cancelled").
 * NULL s: 0. */
int rv_stop_check(const rv_stop *s, rv_error *err);

/* Every how many steps (tasks simulated, names matched) the loops check. */
#define RV_STOP_EVERY 4096

#endif
