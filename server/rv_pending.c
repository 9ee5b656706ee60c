#include "rv_pending.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#define HASH_LEN 64 /* a request hash: 64 lowercase hex characters */
#define MAX_CAP  4096

struct rv_pending_entry {
    int used;
    int64_t trace_id;
    char hash[HASH_LEN + 1];
    char *body;
    size_t len;
};

struct rv_pending {
    pthread_mutex_t mu;
    size_t cap;
    rv_pending_entry *e;
};

rv_pending *rv_pending_new(size_t cap)
{
    if (cap == 0 || cap > MAX_CAP)
        return NULL;
    rv_pending *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->e = calloc(cap, sizeof(*p->e));
    if (!p->e) {
        free(p);
        return NULL;
    }
    p->cap = cap;
    pthread_mutex_init(&p->mu, NULL);
    return p;
}

void rv_pending_free(rv_pending *p)
{
    if (!p)
        return;
    for (size_t i = 0; i < p->cap; i++)
        free(p->e[i].body);
    pthread_mutex_destroy(&p->mu);
    free(p->e);
    free(p);
}

rv_pending_entry *rv_pending_add(rv_pending *p, int64_t trace_id, const char *request_hash,
                                 char *body, size_t len)
{
    rv_pending_entry *got = NULL;
    if (!p || !body || strlen(request_hash) != HASH_LEN)
        return NULL;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->cap && !got; i++)
        if (!p->e[i].used)
            got = &p->e[i];
    if (got) {
        got->used = 1;
        got->trace_id = trace_id;
        memcpy(got->hash, request_hash, HASH_LEN + 1);
        got->body = body;
        got->len = len;
    }
    pthread_mutex_unlock(&p->mu);
    return got;
}

const char *rv_pending_body(const rv_pending_entry *e, size_t *len)
{
    *len = e->len;
    return e->body;
}

int rv_pending_get(rv_pending *p, int64_t trace_id, const char *request_hash, char **body,
                   size_t *len)
{
    int rc = -1;
    *body = NULL;
    *len = 0;
    if (!p)
        return -1;
    pthread_mutex_lock(&p->mu);
    for (size_t i = 0; i < p->cap; i++) {
        const rv_pending_entry *e = &p->e[i];
        if (!e->used || e->trace_id != trace_id || strcmp(e->hash, request_hash) != 0)
            continue;
        char *copy = malloc(e->len + 1);
        if (copy) {
            memcpy(copy, e->body, e->len);
            copy[e->len] = '\0';
            *body = copy;
            *len = e->len;
            rc = 0;
        }
        break;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

void rv_pending_done(rv_pending *p, rv_pending_entry *e)
{
    if (!p || !e)
        return;
    pthread_mutex_lock(&p->mu);
    char *body = e->body;
    memset(e, 0, sizeof(*e));
    pthread_mutex_unlock(&p->mu);
    free(body);
}
