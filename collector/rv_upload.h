/* Sends traces to reveried: POST $server/v1/traces?job=J&rank=R with the
 * gzip bytes as the body (Content-Type application/json, Content-Encoding
 * gzip), an optional bearer token, bounded retries with exponential backoff.
 *
 * Built with libcurl when it was found (RV_HAVE_CURL); without it every
 * upload fails with RV_ERR_UNSUPPORTED and rv_upload_available() is 0. The
 * functions are blocking: the collector calls them from its own thread. */
#ifndef RV_UPLOAD_H
#define RV_UPLOAD_H

#include <stddef.h>

#include "util/rv_error.h"

typedef struct rv_upload_opts {
    const char *server;     /* base URL, e.g. "http://127.0.0.1:8080" (borrowed) */
    const char *token;      /* bearer token or NULL (borrowed) */
    int max_attempts;       /* total tries; 0 = 5 */
    int backoff_ms;         /* first wait; doubles per try, capped at 30 s; 0 = 500 */
    long timeout_s;         /* per attempt; 0 = 120 */
    long connect_timeout_s; /* 0 = 10 */
    int quiet;              /* 1: no per-attempt lines on stderr */
    const char *prog;       /* program named in messages; NULL = "reverie-collector" */
    char *answer;           /* NULL, or RV_UPLOAD_ANSWER_MAX bytes that get the start of the
                               last answer's body, NUL-terminated (borrowed) */
    int world_size;         /* > 0: sent as world_size (the job's rank count); 0 = omitted */
} rv_upload_opts;

#define RV_UPLOAD_ANSWER_MAX 4096

/* Defaults, then REVERIE_SERVER, REVERIE_TOKEN, REVERIE_UPLOAD_ATTEMPTS,
 * REVERIE_UPLOAD_BACKOFF_MS, REVERIE_UPLOAD_TIMEOUT_S. The strings are
 * borrowed from the environment. */
void rv_upload_opts_from_env(rv_upload_opts *o);

/* 1 when this build can upload (libcurl present). */
int rv_upload_available(void);

/* Posts len bytes of data (borrowed). job may be NULL or "", rank < 0 omits
 * it. gzip bodies (magic 1f 8b) get Content-Encoding: gzip. Returns 0 on a
 * 2xx answer; RV_ERR_IO when the server stayed unreachable or kept failing,
 * RV_ERR_INVALID on a 4xx that retrying cannot fix. *status (may be NULL)
 * gets the last HTTP status, 0 when none arrived. */
int rv_upload_post(const rv_upload_opts *o, const char *job, int rank, const void *data, size_t len,
                   long *status, rv_error *err);

/* Reads a whole file (at most max bytes) into a new buffer (caller frees). */
int rv_upload_read_file(const char *path, size_t max, void **data, size_t *len, rv_error *err);

#endif
