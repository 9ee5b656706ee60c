/* Shared between the files of the HTTP layer; not part of its interface,
 * which is rv_http.h. The layer is one module in four files:
 *   rv_http.c        the daemon, the life of a request (libmicrohttpd's
 *                    callbacks, bodies, the worker hand-off), the accessors
 *   rv_http_guard.c  what every client is held to: connection records, the
 *                    deadline watchdog, the connection limit, the query and
 *                    header caps, Host, CORS, Content-Length and -Type
 *   rv_http_resp.c   answers: JSON, buffers, fds, the error shape, gzip,
 *                    queueing
 *   rv_http_route.c  what a path maps to: route matching, static files
 * rv_http__ names cross these files and nothing else calls them. */
#ifndef RV_HTTP_INTERNAL_H
#define RV_HTTP_INTERNAL_H

#include <microhttpd.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "rv_auth.h"
#include "util/rv_buf.h"
#include "rv_http.h"

/* Per request: query parameters, and headers, past which it is answered
 * 414 / 431; and the bytes of the query's, and the headers', keys and
 * values. */
#define RV_HTTP_MAX_KV           64
#define RV_HTTP_MAX_KV_BYTES     16384
#define RV_HTTP_MAX_RESP_HEADERS 8 /* rv_req_add_header */

/* Where a connection is with its current request, for the watchdog. */
typedef enum rv_conn_phase {
    RV_CONN_IDLE = 0, /* no request line yet (a new or kept-alive connection) */
    RV_CONN_HEAD,     /* request line received, header block not complete */
    RV_CONN_BODY,     /* headers handled, body arriving */
    RV_CONN_BUSY,     /* being answered: the client has no deadline */
} rv_conn_phase;

/* One open connection (MHD's socket context); in rv_http.conns while open.
 * The fd stays valid while the record is listed: libmicrohttpd notifies
 * MHD_CONNECTION_NOTIFY_CLOSED before it closes the socket. */
typedef struct rv_conn {
    struct rv_conn *prev, *next;
    int fd;
    rv_conn_phase phase;
    struct timespec since;  /* start of the current deadline */
    uint64_t body_bytes;    /* received in RV_CONN_BODY */
    int refused;            /* over the connection limit: 503 sent */
    int killed;             /* shut down by the watchdog, or evicted */
    unsigned char addr[16]; /* the client's address (IPv4 in the first 4 bytes) */
    int addr_len;           /* 4, 16, or 0 when unknown (never limited per address) */
} rv_conn;

struct rv_http {
    rv_http_config cfg;
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu;
    int inflight;  /* requests with a live context */
    int suspended; /* requests handed to the worker pool */
    /* Bytes of the answers of live requests (mu guards them): in memory,
     * and in spool files (rv_http__bound_answer). */
    uint64_t answers_mem, answers_spooled;

    /* Connections and their watchdog (cmu guards conns, nconns, stop). */
    pthread_mutex_t cmu;
    pthread_cond_t ccv;
    rv_conn *conns;
    unsigned nconns;
    int watch_stop;
    pthread_t watch_tid;
    int watch_started;
    int bind_wildcard; /* bound to 0.0.0.0 or :: */
};

typedef struct rv_http_kv {
    char *key, *value;
} rv_http_kv;

typedef enum rv_req_state { RV_REQ_BODY = 0, RV_REQ_WORK, RV_REQ_DONE } rv_req_state;

struct rv_req {
    rv_http *h;
    struct MHD_Connection *conn;
    const rv_route *route;
    rv_route_match match;
    char method[8];
    char *path;
    rv_http_kv query[RV_HTTP_MAX_KV];
    size_t nquery;
    rv_http_kv headers[RV_HTTP_MAX_KV];
    size_t nheaders;
    size_t query_bytes, header_bytes;
    int query_over;         /* the query did not fit the caps: 414 */
    int header_over;        /* the headers did not: 431 */
    char over_key[64];      /* the first key that did not fit */
    char bad_query[64];     /* a query key whose key or value is not UTF-8 text */
    int ncontent_length;    /* Content-Length headers seen */
    int has_te;             /* Transfer-Encoding seen */
    int nte, nhost;         /* Transfer-Encoding and Host headers seen */
    int te_other;           /* a Transfer-Encoding that is not exactly "chunked" */
    char bad_name[48];      /* a header name that is not an RFC 9110 token (trimmed) */
    int http11;             /* the request line says HTTP/1.1 */
    const char *cors_allow; /* the request's Origin when it is a CORS origin */
    rv_conn *cc;            /* the connection's record; NULL if untracked */
    char principal[RV_TOKEN_ID_LEN + 8];
    char peer[64];
    struct timespec t0;
    rv_req_state state;
    const char *metric_route;

    /* Body. */
    int body_kind;
    rv_buf body;     /* a JSON body, capped at limit */
    size_t body_len; /* bytes counted against limit, kept or not */
    int spool_fd;
    char *spool_path;
    uint64_t spool_size;
    uint64_t limit;   /* cap for this body */
    uint64_t dropped; /* bytes read and dropped after an error */
    int body_status;  /* non-zero: answer this error once the body is read */
    char body_code[32];
    char body_msg[200];

    /* Response. */
    int status;
    char *resp_buf;
    size_t resp_len;
    int resp_fd;
    uint64_t resp_fd_size;
    uint64_t held_mem, held_spool; /* counted in h->answers_mem / answers_spooled */
    char content_type[80];
    rv_http_kv resp_headers[RV_HTTP_MAX_RESP_HEADERS];
    int nresp_headers;
    int has_response;
    rv_req_after_fn after; /* rv_req_after: runs once the answer is handed back */
    void *after_arg;
};

/* ---- rv_http_guard.c: connections, deadlines, request checks ---- */

/* Initializes and frees h's connection list, its lock and the watchdog's
 * condition variable. guard_free also frees any record left (call it
 * after MHD_stop_daemon, when every connection was notified closed). */
void rv_http__guard_init(rv_http *h);
void rv_http__guard_free(rv_http *h);
/* Starts the watchdog thread (on failure the client deadlines are off, and
 * a line says so on stderr); watch_stop stops and joins it. */
void rv_http__watch_start(rv_http *h);
void rv_http__watch_stop(rv_http *h);

/* libmicrohttpd's MHD_OPTION_NOTIFY_CONNECTION and
 * MHD_OPTION_URI_LOG_CALLBACK; cls is the rv_http. */
void rv_http__on_connection(void *cls, struct MHD_Connection *mc, void **socket_context,
                            enum MHD_ConnectionNotificationCode code);
void *rv_http__on_uri(void *cls, const char *uri, struct MHD_Connection *mc);

/* The record of mc (borrowed), or NULL when untracked. */
rv_conn *rv_http__conn_of(struct MHD_Connection *mc);
/* Moves c (may be NULL) to phase p; restart: its deadline starts now. */
void rv_http__conn_set(rv_http *h, rv_conn *c, rv_conn_phase p, int restart);
/* Counts n body bytes received on c (may be NULL) for the rate check. */
void rv_http__conn_body(rv_http *h, rv_conn *c, size_t n);

/* Copies the query parameters and headers of r's connection into r, within
 * the caps (noting what did not fit for req_screen). */
void rv_http__collect(rv_req *r);
/* The checks before routing (caps, smuggling, Host, query text) and the
 * CORS origin; sets an error, or a preflight's answer, on r. */
void rv_http__screen(rv_req *r);
/* Sets r's body cap from its route's body kind and checks Content-Length
 * against it and Content-Type / Content-Encoding against the route; sets
 * a 413 or 415 on r when one fails. */
void rv_http__check_body(rv_req *r);

/* ---- rv_http_resp.c: answers ---- */

/* Writes a whole JSON error answer straight to fd, on which nothing of the
 * current request's answer has been written (best effort, never blocks).
 * The texts must need no JSON escaping; extra_headers ("Name: v\r\n") may
 * be NULL. */
void rv_http__raw_error(int fd, unsigned status, const char *code, const char *field,
                        const char *msg, const char *extra_headers);
/* Frees r's response body (buffer or fd). */
void rv_http__clear_response(rv_req *r);
/* Compresses r's answer with gzip when it is worth it and the client takes it. */
void rv_http__gzip(rv_req *r);
/* Bounds the bytes answers hold while clients read them (see
 * rv_http_config.answer_*): counts r's answer in memory, or moves it to
 * an unlinked spool file, or replaces it with a 503 past the spool cap.
 * release_answer uncounts it (from req_free). */
void rv_http__bound_answer(rv_req *r);
void rv_http__release_answer(rv_req *r);
/* Queues r's answer (a 500 when the handler set none) on its connection. */
enum MHD_Result rv_http__queue(rv_req *r);

/* ---- rv_http_route.c: paths ---- */

/* Answers r (no route matched) from web_root, or with a 404. */
void rv_http__serve_static(rv_req *r);

#endif
