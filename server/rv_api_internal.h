/* Shared between the rv_api_*.c files; not part of the server's interface. */
#ifndef RV_API_INTERNAL_H
#define RV_API_INTERNAL_H

#include <jansson.h>

#include "rv_api.h"
#include "graph/rv_graph.h"
#include "rv_http.h"
#include "run/rv_run_result.h"
#include "simulate/rv_sim.h"
#include "trace/rv_trace.h"

/* Handlers (see the route table in rv_api.c). */
void rv_api_trace_upload(rv_req *r, void *app);
void rv_api_trace_list(rv_req *r, void *app);
void rv_api_trace_get(rv_req *r, void *app);
/* A hardware-table row as GET /v1/hardware lists it (new reference). */
struct rv_hw;
json_t *rv_api_hw_json(const struct rv_hw *t);
void rv_api_trace_delete(rv_req *r, void *app);
void rv_api_trace_original(rv_req *r, void *app);
void rv_api_trace_timeline(rv_req *r, void *app);
void rv_api_trace_whatif(rv_req *r, void *app);
/* POST .../advise: the plan search (rv_api_advise.c). */
void rv_api_trace_advise(rv_req *r, void *app);
void rv_api_training_advise(rv_req *r, void *app);
/* GET .../diff?with=ID2 and POST .../diff with a what-if (rv_api_diff.c). */
void rv_api_trace_diff_get(rv_req *r, void *app);
void rv_api_trace_diff_post(rv_req *r, void *app);
void rv_api_fleet_whatif(rv_req *r, void *app);
void rv_api_job_get(rv_req *r, void *app);
void rv_api_job_cancel(rv_req *r, void *app);
void rv_api_platform_list(rv_req *r, void *app);
/* Answers an accepted upload: 201 (200 for a duplicate) with the stored
 * trace's row, "id", "duplicate" and a Location header; counts it. */
struct rv_db_ingest_result;
void rv_api_upload_answer(rv_req *r, rv_app *a, const struct rv_db_ingest_result *res,
                          size_t bytes);
void rv_api_platform_overheads(rv_req *r, void *app);
void rv_api_platform_kmodels(rv_req *r, void *app);
void rv_api_whatif_kinds(rv_req *r, void *app);
void rv_api_trace_export(rv_req *r, void *app);
/* Training jobs: list, one, what-if on all its ranks (rv_api_training.c). */
void rv_api_training_list(rv_req *r, void *app);
void rv_api_training_get(rv_req *r, void *app);
void rv_api_training_whatif(rv_req *r, void *app);
void rv_api_training_upload(rv_req *r, void *app);
/* Every stored rank of training job id, loaded and built into one job
 * (owned; rv_api_job_free, also after a failure). 0, or -1 with the
 * refusal answered. */
typedef struct rv_api_job {
    struct rv_db_training_job *j;
    struct rv_loaded *l; /* nl of them, in rank order */
    size_t nl;
    struct rv_job_rank *ranks;
    char (*labels)[32];
    struct rv_job *job;
} rv_api_job;
int rv_api_job_load(rv_req *r, rv_app *a, int64_t id, rv_api_job *jl);
void rv_api_job_free(rv_api_job *jl);

/* Who is asking (rv_api_guard.c): the token id into who (cap bytes; ""
 * without authentication) and its scope bits (all of them when the server
 * runs without authentication; 0 for no valid token). */
void rv_api_caller(rv_app *a, rv_req *r, char *who, size_t cap, unsigned *scopes);
/* Free bytes on the database's disk (statvfs of cfg.disk_path), -1 when
 * unknown. */
int64_t rv_api_disk_free(const rv_app *a);
/* 1 when storing incoming more bytes would go below cfg.disk_reserve;
 * *free_bytes (may be NULL) gets rv_api_disk_free. */
int rv_api_disk_low(const rv_app *a, uint64_t incoming, int64_t *free_bytes);
/* 0, or -1 with 507 insufficient_storage and Retry-After set on r when
 * rv_api_disk_low: an upload is refused before the disk fills. */
int rv_api_disk_guard(rv_req *r, rv_app *a, uint64_t incoming);

/* Bytes the spool folder may still take above cfg.disk_reserve
 * (UINT64_MAX when the reserve is off or the folder cannot be read). */
uint64_t rv_api_spool_room(const rv_app *a);
/* Answers 507 insufficient_storage with Retry-After: an answer that would
 * be spooled does not fit in room bytes. */
void rv_api_spool_full(rv_req *r, const rv_app *a, uint64_t room);

/* A stored original, inflated or not, mapped read-only from an unlinked
 * spool file (rv_api_traces.c). */
typedef struct rv_api_mapped {
    const uint8_t *bytes;
    size_t len;
} rv_api_mapped;
/* Streams trace id's original (mode: RV_DB_ORIGINAL_*) into a spool file,
 * inflated at most to cfg.max_trace_bytes (RV_ERR_LIMIT past it, field
 * max_trace_bytes) and to what the spool folder may take above the disk
 * reserve (RV_ERR_LIMIT, field disk_reserve), and maps it into *m
 * (rv_api_unmap). 0 or a negative rv_err with err filled. */
int rv_api_original_map(rv_app *a, int64_t id, int mode, rv_api_mapped *m, rv_error *err);
/* NULL-safe; leaves *m empty. */
void rv_api_unmap(rv_api_mapped *m);

/* The {name} path parameter as a positive trace/job id; -1 with a 404 set. */
int64_t rv_api_id_param(rv_req *r, const char *name);

/* Answers GET .../{id} with what get (a rv_db reader) returns for it, or
 * with its error (404 for no such id). */
struct rv_db;
void rv_api_get_by_id(rv_req *r, rv_app *a,
                      int (*get)(struct rv_db *, int64_t, json_t **, rv_error *));

/* What get returns for the path's {id}: 0 with *out (new reference), or -1
 * with the request answered (bad id, or get's error). */
int rv_api_fetch_by_id(rv_req *r, rv_app *a,
                       int (*get)(struct rv_db *, int64_t, json_t **, rv_error *), int64_t *id,
                       json_t **out);

/* A stored trace, parsed, with its graph and baseline simulation. */
typedef struct rv_loaded {
    int64_t id;
    const rv_trace *trace; /* shared through the cache: read only */
    const rv_graph *graph; /* read only; what-ifs work on a clone */
    const rv_sim *base;
    struct rv_gentry *entry; /* the cache entry holding them */
    struct rv_gcache *cache;
} rv_loaded;

/* Loads trace id (from the loaded-trace cache, else from the database,
 * building graph + baseline and caching them). Returns 0, or a negative
 * rv_err with *err filled (RV_ERR_NOTFOUND for no such id). Release with
 * rv_api_loaded_free. */
int rv_api_load(rv_app *a, int64_t id, rv_loaded *out, rv_error *err);
void rv_api_loaded_free(rv_loaded *l);

/* Execution traces (rv_api_et.c). PUT /v1/traces/{id}/et attaches an ET
 * to a stored Kineto trace. */
void rv_api_trace_et_attach(rv_req *r, void *app);
/* POST /v1/traces with an ET body: stores it as an ET-alone trace. 0, or
 * -1 with r answered with the refusal. */
struct rv_db_ingest_meta;
int rv_api_trace_upload_et(rv_req *r, rv_app *a, struct rv_db_ingest_meta *meta);
/* The graph an ET-alone trace's what-if runs on, when it is not the
 * stored one: held in the loaded-trace cache under a key derived from the
 * trace and the GPU (entry), or owned here when it rests on the platform's
 * kernel models, which change with every upload (trace, graph, base).
 * Release with rv_api_et_model_free. */
struct rv_gentry;
typedef struct rv_api_et_model {
    rv_trace *trace;
    rv_graph *graph;
    rv_sim *base;
    struct rv_gentry *entry;
    struct rv_gcache *cache;
} rv_api_et_model;
/* For an ET-alone trace: the what-if's "gpu" (else the upload's) is the
 * GPU its kernels are modelled on: l is pointed at a graph built on it (in
 * *m) when that is not the stored one, and "gpu" leaves doc. Without
 * either GPU: RV_ERR_UNSUPPORTED naming "gpu". Other traces: 0, nothing
 * changed. */
int rv_api_et_resolve(rv_app *a, rv_loaded *l, json_t *doc, rv_api_et_model *m, rv_error *err);
/* The cache key of trace id's execution trace modelled on hardware row hw. */
int64_t rv_api_et_key(int64_t id, const struct rv_hw *hw);
void rv_api_et_model_free(rv_api_et_model *m);

/* Runs one what-if document (borrowed) on a loaded trace through the
 * engine's rv_run, with the server's time budget. oh (borrowed, may be
 * NULL) is the platform's overhead table, needed when the document says
 * "host_overheads": "platform". Returns 0 and *out (new;
 * rv_run_result_free), or a negative rv_err with *err (field names the bad
 * part; RV_ERR_BUDGET when the budget ran out). */
struct rv_oh_table;
struct rv_run_result;
/* keep_predicted: 1 keeps the predicted graph and simulation;
 * RV_API_RUN_SUMMARY computes only the figures of a fleet row (no reports,
 * not renderable). */
#define RV_API_RUN_SUMMARY 2
/* etm (zeroed by the caller, freed with rv_api_et_model_free after *out):
 * for an execution trace alone, the graph modelled on the document's GPU
 * (rv_api_et_resolve); NULL runs the stored graph. */
int rv_api_whatif_run(rv_app *a, const rv_loaded *l, const json_t *doc,
                      const struct rv_oh_table *oh, int keep_predicted, rv_api_et_model *etm,
                      struct rv_run_result **out, rv_error *err);
/* What a what-if request read before its run, so that the run reads
 * nothing again: the document parsed once (w) and the platform's kernel
 * models read once (acc, tgt; NULL when not read). Zero it; every member
 * is owned; rv_api_whatif_pre_free. */
struct rv_whatif;
struct rv_kmodel;
struct rv_kmodel_acc;
typedef struct rv_api_whatif_pre {
    struct rv_whatif *w;
    struct rv_kmodel_acc *acc;
    struct rv_kmodel *tgt;
} rv_api_whatif_pre;
/* NULL-safe; leaves *p zeroed. */
void rv_api_whatif_pre_free(rv_api_whatif_pre *p);
/* rv_api_whatif_run for request r (borrowed, may be NULL): the run also
 * stops, with RV_ERR_BUDGET, when r's client goes away or the server
 * drains (rv_run_opts.cancel, cancel_fn). pre (borrowed, may be NULL):
 * what r read already; its document must be doc's, parsed. */
int rv_api_whatif_run_req(rv_app *a, rv_req *r, const rv_loaded *l, const json_t *doc,
                          const struct rv_oh_table *oh, int keep_predicted, rv_api_et_model *etm,
                          rv_api_whatif_pre *pre, struct rv_run_result **out, rv_error *err);

/* 1 when the document (borrowed) asks for "host_overheads": "platform". */
int rv_api_doc_uses_platform(const json_t *doc);
/* The kernel models summed over the stored platforms of GPU gpu (a
 * hardware-table name): *out new (free()), NULL when they have none;
 * version (may be NULL) receives what they were read at. */
struct rv_kmodel;
int rv_api_gpu_kmodel(rv_app *a, const char *gpu, struct rv_kmodel **out, char *version, size_t cap,
                      rv_error *err);

/* 1 when the document (borrowed) asks for "kernel_models": "platform". */
int rv_api_doc_uses_platform_kmodels(const json_t *doc);
/* 1 when the answer to the document follows the platform's statistics or
 * kernel models, which change with every upload: such answers are cached
 * only under a version of what they used. */
int rv_api_doc_platform_dependent(const json_t *doc);

/* The request's what-if document: its JSON body, which must be an object.
 * New reference, or NULL with the error answered. */
json_t *rv_api_whatif_doc(rv_req *r);

/* The overhead table a "host_overheads": "platform" document (borrowed)
 * uses for trace_id, from stored statistics (*out new; rv_oh_table_free),
 * and their version (into version, cap bytes; may be NULL): with "gpu"
 * another GPU than the trace's, a stored platform of that GPU when the
 * store has one (the target machine's host), else the trace's own
 * platform (rv_db_host_overheads). A platform without statistics is
 * RV_ERR_UNSUPPORTED with field host_overheads and a message that says
 * so; no such trace is RV_ERR_NOTFOUND. */
int rv_api_platform_table(rv_app *a, int64_t trace_id, const json_t *doc, struct rv_oh_table **out,
                          char *version, size_t cap, rv_error *err);

/* Only the version rv_api_platform_table would read (into version, cap
 * bytes), for a cache key before the trace is loaded. */
int rv_api_platform_version(rv_app *a, int64_t trace_id, const json_t *doc, char *version,
                            size_t cap, rv_error *err);

/* Fleet jobs: init once (names this replica), then call run_one from the
 * fleet threads; it returns 1 after working a job, 0 when the queue is empty. */
void rv_api_fleet_init(rv_app *a);
int rv_api_fleet_run_one(rv_app *a);

/* Lowercase hex SHA-256 of the canonical form of doc (sorted keys, compact)
 * prefixed by the engine model version, so a model change misses the cache,
 * and followed by inputs (may be NULL): the version of other data the answer
 * depends on (the platform's overhead statistics). */
void rv_api_request_hash(const json_t *doc, const char *inputs, char *out);

/* The answer cache (server/rv_api_cache.c), keyed by trace and request
 * hash. get: an answer whose row is still being written, else the stored
 * row; 0 and *body (new, NUL-terminated, free()) of *len bytes, or -1 (a
 * miss; a failed read counts as one). put: stores body (borrowed, len
 * bytes of text) and its figures (sum may be NULL) for r's route; the row
 * is written after r's answer is sent, held for get meanwhile, or at once
 * when it cannot be held. */
int rv_api_cache_get(rv_app *a, int64_t trace_id, const char *hash, char **body, size_t *len);
void rv_api_cache_put(rv_req *r, rv_app *a, int64_t trace_id, const char *hash, const char *body,
                      size_t len, const rv_run_summary *sum);

#endif
