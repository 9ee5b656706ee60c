/* The life cycle of reveried: start everything in order, serve until a
 * signal, stop everything in reverse order. reveried.c only parses the
 * configuration; tests can call rv_server_main too. */
#ifndef RV_SERVER_H
#define RV_SERVER_H

#include <stddef.h>
#include <stdint.h>

typedef struct rv_server_config {
    int port;
    const char *bind;
    const char *database_url; /* NULL: embedded PostgreSQL under home/pg */
    const char *home;
    const char *web_root; /* NULL: no dashboard */
    uint64_t upload_cap;
    uint64_t max_trace_bytes;
    uint64_t max_events;         /* events one trace may keep; 0 = the reader's cap */
    uint64_t max_archive_bytes;  /* all files of one archive upload, inflated; 0 = no cap */
    uint64_t disk_reserve_bytes; /* free space kept on the database's disk; 0 = off */
    unsigned db_timeout_ms;      /* deadline of one database call; 0 = none */
    size_t json_body_cap;
    unsigned conn_timeout_s, per_ip_limit, conn_limit;
    unsigned header_timeout_s, min_body_rate; /* see rv_http_config */
    const char *const *allowed_hosts;         /* Host names besides loopback; "*" = any */
    size_t nallowed_hosts;
    const char *const *cors_origins; /* origins given CORS headers; none = CORS off */
    size_t ncors_origins;
    unsigned http_threads, workers, queue;
    unsigned whatif_budget_ms, fleet_inline_max, fleet_workers;
    size_t graph_cache_bytes;    /* loaded-trace cache; 0 = off */
    uint64_t answer_spool_cap;   /* see rv_http_config.answer_spool_cap */
    unsigned timeline_max_tasks; /* tasks in one timeline answer (rv_app_config) */
    int require_auth;
    int migrate_only;
    const char *version;
} rv_server_config;

/* Runs the server until SIGTERM or SIGINT. Returns the process exit code
 * (0 after a clean stop; 1 when startup failed, with a message on stderr).
 * Blocks SIGINT, SIGTERM and ignores SIGPIPE for the whole process. */
int rv_server_main(const rv_server_config *c);

#endif
