/* A fixed pool of worker threads with a bounded FIFO queue, for the slow
 * work that must stay off the libmicrohttpd threads (database, trace parsing,
 * simulation). Submitting never blocks: a full queue is an error the caller
 * turns into 503. */
#ifndef RV_WORKERS_H
#define RV_WORKERS_H

#include <stddef.h>

typedef struct rv_workers rv_workers;
typedef void (*rv_work_fn)(void *arg);

/* Starts nthreads threads (>= 1) and a queue of queue_cap (>= 1) pending jobs.
 * Returns a new pool or NULL. */
rv_workers *rv_workers_new(unsigned nthreads, size_t queue_cap);

/* Queues fn(arg). Returns 0, or -1 when the queue is full or the pool stops
 * (fn is then not called and arg stays the caller's). */
int rv_workers_submit(rv_workers *w, rv_work_fn fn, void *arg);

/* Jobs queued or running right now. */
size_t rv_workers_busy(rv_workers *w);

/* Runs every queued job, joins the threads and frees the pool. NULL-safe. */
void rv_workers_free(rv_workers *w);

#endif
