/* One piece of work run on a second thread while the caller goes on (the
 * baseline's reports, the prediction's reports, the ops' costing), or run
 * at once on the caller's thread when no thread can be started: the
 * result is the same either way, only the wall time differs. */
#ifndef RV_BG_H
#define RV_BG_H

#include <pthread.h>

typedef struct rv_bg {
    pthread_t th;
    int running; /* a thread runs it; rv_bg_join waits for it */
} rv_bg;

/* Starts fn(arg) (arg borrowed until rv_bg_join), on a thread when one
 * can be made, else right here. */
void rv_bg_start(rv_bg *b, void *(*fn)(void *), void *arg);

/* Waits until the work is done. Safe to call again, and on a zeroed b. */
void rv_bg_join(rv_bg *b);

#endif
