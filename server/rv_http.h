/* HTTP layer of reveried: a libmicrohttpd daemon (thread pool + epoll), a
 * route table, one request context per request, body handling with hard caps
 * (JSON bodies in memory, uploads streamed to a spool file), the one error
 * shape, JSON responses, static files, and the hand-off of slow handlers to
 * the worker pool with MHD_suspend_connection / MHD_resume_connection.
 *
 * Handlers never see libmicrohttpd. A handler runs either on an MHD thread
 * (routes marked RV_ROUTE_INLINE: must not block) or on a worker thread
 * (everything else: may talk to the database and run the simulator). It
 * fills exactly one response with the rv_req_respond_* / rv_req_error calls;
 * a handler that responds with nothing gets a 500 "internal" error. */
#ifndef RV_HTTP_H
#define RV_HTTP_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <jansson.h>

#include "util/rv_error.h"

typedef struct rv_http rv_http;
typedef struct rv_req rv_req;
struct rv_workers;
struct rv_metrics;
struct rv_auth;

/* How a route takes its request body. */
typedef enum rv_body_kind {
    RV_BODY_NONE = 0, /* a body is read and thrown away */
    RV_BODY_JSON,     /* application/json, in memory, capped by json_body_cap */
    RV_BODY_UPLOAD,   /* a trace: streamed to a spool file, capped by upload_cap */
} rv_body_kind;

/* Route flags. */
#define RV_ROUTE_INLINE 1u /* run on the MHD thread: cheap and non-blocking */

/* A handler fills the response of r. app is rv_http_config.app (borrowed). */
typedef void (*rv_handler)(rv_req *r, void *app);

typedef struct rv_route {
    const char *method;  /* "GET", "POST", "DELETE" */
    const char *pattern; /* "/v1/traces/{id}/whatif": {name} matches one segment */
    rv_handler fn;
    int body;         /* rv_body_kind */
    unsigned scope;   /* RV_SCOPE_* bits the caller needs (any of); 0 = public */
    unsigned flags;   /* RV_ROUTE_* */
    const char *name; /* metrics label, e.g. "traces_whatif" */
} rv_route;

#define RV_ROUTE_MAX_PARAMS 4
#define RV_ROUTE_PARAM_MAX  128

/* The result of matching a method and path against a route table. */
typedef struct rv_route_match {
    int index;  /* route index, or -1 */
    int status; /* 0 on a match, 404 (no such path) or 405 (path exists, not the method) */
    int nparams;
    char names[RV_ROUTE_MAX_PARAMS][32];
    char values[RV_ROUTE_MAX_PARAMS][RV_ROUTE_PARAM_MAX];
} rv_route_match;

/* Matches method + path (already percent-decoded, no query string) against
 * routes[0..n). Pure function, no allocation; a segment longer than
 * RV_ROUTE_PARAM_MAX - 1 never matches a parameter. Fuzzed by fuzz_route.c. */
void rv_route_find(const rv_route *routes, size_t n, const char *method, const char *path,
                   rv_route_match *m);

typedef struct rv_http_config {
    const char *bind;        /* IPv4 or IPv6 literal; default "127.0.0.1" */
    int port;                /* 0 = any free port (see rv_http_port) */
    unsigned threads;        /* MHD thread-pool size; 0 = number of CPUs */
    unsigned conn_timeout_s; /* idle connection timeout; 0 means 30 */
    unsigned per_ip_limit;   /* concurrent connections per client IP; 0 means 64 */
    unsigned conn_limit;     /* total connections; past it 503 and close; 0 means 1000 */
    /* A request head (request line and headers) must be complete within
     * header_timeout_s of the connection opening or of its previous answer;
     * a body must then average at least min_body_rate bytes/s once
     * header_timeout_s have passed. 0 means 10 s and 1024 B/s. */
    unsigned header_timeout_s;
    unsigned min_body_rate;
    /* Host names (besides loopback names and addresses, the bind address,
     * and any IP literal on a wildcard bind) that requests may carry in
     * Host; "*" turns the check off. Borrowed. */
    const char *const *allowed_hosts;
    size_t nallowed_hosts;
    /* Origins ("https://dash.example") that get CORS headers and preflight
     * answers; none by default (no Access-Control-* header at all). */
    const char *const *cors_origins;
    size_t ncors_origins;
    /* Answers waiting for slow readers: one larger than answer_mem_one
     * bytes, or one that would take the answers held in memory past
     * answer_mem_total, is moved to an unlinked file in spool_dir; past
     * answer_spool_cap bytes in such files a new large answer is a 503.
     * 0 means 256 KiB, 64 MiB and 1 GiB. */
    uint64_t answer_mem_one, answer_mem_total, answer_spool_cap;
    uint64_t upload_cap;    /* bytes per trace upload (compressed as sent) */
    size_t json_body_cap;   /* bytes per JSON request body */
    const char *spool_dir;  /* where uploads are streamed; must exist */
    const char *web_root;   /* static files; NULL = none */
    const rv_route *routes; /* borrowed for the daemon's lifetime */
    size_t nroutes;
    struct rv_workers *workers; /* borrowed: runs non-inline handlers */
    struct rv_metrics *metrics; /* borrowed; may be NULL */
    struct rv_auth *auth;       /* borrowed; NULL = no authentication */
    void *app;                  /* passed to every handler */
} rv_http_config;

/* Starts the daemon (cfg and what it points to are borrowed for the daemon's
 * lifetime). Returns 0 and *out, or a negative rv_err with err filled. */
int rv_http_start(const rv_http_config *cfg, rv_http **out, rv_error *err);

/* The TCP port the daemon listens on (useful with port 0). */
int rv_http_port(const rv_http *h);

/* Graceful stop: stop accepting, let requests in flight finish for up to
 * grace_ms, then stop the daemon and free it. The worker pool must still run
 * while this waits (the caller stops it afterwards). NULL-safe. */
void rv_http_stop(rv_http *h, unsigned grace_ms);

/* ---- inside a handler ---- */

const char *rv_req_path(const rv_req *r);
/* When the request's head arrived, in CLOCK_MONOTONIC ms (rv_stop_now_ms's
 * clock): budgets count from it. */
int64_t rv_req_started_ms(const rv_req *r);
/* 1 when the client has closed or reset its connection (one non-blocking
 * peek at the socket; safe on the worker thread while the handler runs),
 * so long work can stop: rv_run_opts.cancel_fn. */
int rv_req_client_gone(const rv_req *r);
/* A path parameter by name ({id}); NULL when the route has none. Borrowed. */
const char *rv_req_param(const rv_req *r, const char *name);
/* A query parameter (decoded); NULL when absent. Borrowed. */
const char *rv_req_query(const rv_req *r, const char *key);
/* A request header (case-insensitive name); NULL when absent. Borrowed. */
const char *rv_req_header(const rv_req *r, const char *name);

/* The JSON body (RV_BODY_JSON routes): returns a new reference, or NULL with
 * a 400 already set on r (so the handler just returns). An empty body gives
 * NULL with 400 "body_required". */
json_t *rv_req_json(rv_req *r);
/* The spool file of an RV_BODY_UPLOAD route (borrowed path) and its size.
 * The file is deleted after the response. */
const char *rv_req_spool(const rv_req *r, uint64_t *size);

/* Responses. Each replaces any earlier one. */
/* Takes body (a json_t reference; NULL means an empty object). */
void rv_req_respond_json(rv_req *r, int status, json_t *body);
/* Takes buf (malloc'd; freed by the HTTP layer). */
void rv_req_respond_buf(rv_req *r, int status, const char *content_type, char *buf, size_t len);
/* Takes fd (closed by the HTTP layer); sends size bytes from offset 0. */
void rv_req_respond_fd(rv_req *r, int status, const char *content_type, int fd, uint64_t size);
/* The one error shape: {"error":{"code","message","field"}}. field may be NULL. */
void rv_req_error(rv_req *r, int status, const char *code, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));
/* Maps an rv_error (from the engine or the database) to a 4xx/5xx error. */
void rv_req_error_rv(rv_req *r, const rv_error *e);
/* Adds a response header (copied). Up to 8 per response. */
void rv_req_add_header(rv_req *r, const char *name, const char *value);
/* Work that need not hold the answer back (a cache write): fn(arg) runs
 * once the answer is handed back to the connection, on the handler's
 * worker, which takes no other request until it returns (routes run
 * inline, without workers, run it before answering). fn owns arg and runs
 * exactly once; one per request (a second call runs the first at once). */
typedef void (*rv_req_after_fn)(void *arg);
void rv_req_after(rv_req *r, rv_req_after_fn fn, void *arg);

/* ---- small helpers shared by handlers ---- */

/* Parses a non-negative decimal integer query parameter; returns def when
 * absent, -1 (with a 400 set on r) when malformed or above max. */
int64_t rv_req_query_int(rv_req *r, const char *key, int64_t def, int64_t max);

/* Content type for a file name by its extension ("text/html; charset=utf-8"). */
const char *rv_http_mime(const char *path);

/* True when a relative URL path is safe to map into a directory: no "..",
 * no backslash, no NUL, no empty or "." segment abuse. Fuzzed. */
int rv_http_path_safe(const char *path);

#endif
