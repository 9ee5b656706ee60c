/* Worker pool: one mutex, two condition variables, a ring buffer of jobs. */
#include "rv_workers.h"

#include <pthread.h>
#include <stdlib.h>

typedef struct job {
    rv_work_fn fn;
    void *arg;
} job;

struct rv_workers {
    pthread_mutex_t mu;
    pthread_cond_t has_work;
    job *ring;
    size_t cap, head, len;
    size_t running;
    int stopping;
    unsigned nthreads;
    pthread_t *threads;
};

static void *worker_main(void *p)
{
    rv_workers *w = p;

    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->len == 0 && !w->stopping)
            pthread_cond_wait(&w->has_work, &w->mu);
        if (w->len == 0 && w->stopping)
            break;
        job j = w->ring[w->head];
        w->head = (w->head + 1) % w->cap;
        w->len--;
        w->running++;
        pthread_mutex_unlock(&w->mu);
        j.fn(j.arg);
        pthread_mutex_lock(&w->mu);
        w->running--;
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

rv_workers *rv_workers_new(unsigned nthreads, size_t queue_cap)
{
    rv_workers *w = calloc(1, sizeof(*w));

    if (!w || nthreads == 0 || queue_cap == 0)
        goto fail;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->has_work, NULL);
    w->cap = queue_cap;
    w->ring = calloc(queue_cap, sizeof(*w->ring));
    w->threads = calloc(nthreads, sizeof(*w->threads));
    if (!w->ring || !w->threads)
        goto fail;
    for (unsigned i = 0; i < nthreads; i++) {
        if (pthread_create(&w->threads[i], NULL, worker_main, w) != 0)
            break;
        w->nthreads++;
    }
    if (w->nthreads == 0)
        goto fail;
    return w;
fail:
    if (w) {
        free(w->ring);
        free(w->threads);
        free(w);
    }
    return NULL;
}

int rv_workers_submit(rv_workers *w, rv_work_fn fn, void *arg)
{
    int rc = -1;

    pthread_mutex_lock(&w->mu);
    if (!w->stopping && w->len < w->cap) {
        w->ring[(w->head + w->len) % w->cap] = (job){fn, arg};
        w->len++;
        pthread_cond_signal(&w->has_work);
        rc = 0;
    }
    pthread_mutex_unlock(&w->mu);
    return rc;
}

size_t rv_workers_busy(rv_workers *w)
{
    size_t n;

    pthread_mutex_lock(&w->mu);
    n = w->len + w->running;
    pthread_mutex_unlock(&w->mu);
    return n;
}

void rv_workers_free(rv_workers *w)
{
    if (!w)
        return;
    pthread_mutex_lock(&w->mu);
    w->stopping = 1;
    pthread_cond_broadcast(&w->has_work);
    pthread_mutex_unlock(&w->mu);
    for (unsigned i = 0; i < w->nthreads; i++)
        pthread_join(w->threads[i], NULL);
    pthread_cond_destroy(&w->has_work);
    pthread_mutex_destroy(&w->mu);
    free(w->ring);
    free(w->threads);
    free(w);
}
