/* A tiny libcurl client for the server tests: one call = one request. */
#ifndef RV_TEST_HTTP_CLIENT_H
#define RV_TEST_HTTP_CLIENT_H

#include <stddef.h>

typedef struct tc_resp {
    long status;
    char *body; /* NUL-terminated, malloc'd */
    size_t len;
    size_t cap; /* bytes allocated for body */
    char ctype[128];
} tc_resp;

typedef struct tc_req {
    const char *method; /* default GET, or POST when body is set */
    const char *url;
    const char *ctype; /* Content-Type; NULL = none */
    const void *body;
    size_t len;
    const char *file;       /* upload this file instead of body */
    const char *headers[8]; /* extra "Name: value" lines, NULL-terminated */
    int expect_continue;    /* send Expect: 100-continue (default: never) */
    int chunked;            /* send Transfer-Encoding: chunked (no Content-Length) */
} tc_req;

/* Performs the request; returns 0 and fills *out (free with tc_resp_free),
 * or -1 when the transfer failed (no HTTP status; *out holds nothing). */
int tc_do(const tc_req *q, tc_resp *out);
void tc_resp_free(tc_resp *r);

/* Convenience: GET url with an optional bearer token. Returns the status. */
long tc_get(const char *url, const char *token, tc_resp *out);

#endif
