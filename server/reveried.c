/* reveried: the Reverie HTTP JSON API server.
 *
 * Configuration comes from flags, then environment variables, then defaults
 * (flags win). Startup: REVERIE_HOME folders, the database (an embedded
 * PostgreSQL under REVERIE_HOME when no URL is given), migrations, worker
 * pool, HTTP daemon, background threads (token refresh, fleet jobs). SIGTERM
 * or SIGINT: stop accepting, finish requests in flight, stop the workers,
 * stop the embedded database. */
#include <errno.h>
#include <getopt.h>
#include <malloc.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rv_api.h"
#include "rv_auth.h"
#include "rv_http.h"
#include "rv_metrics.h"
#include "rv_pgembed.h"
#include "rv_server.h"
#include "rv_workers.h"

#define VERSION "0.1.0"

static void usage(FILE *out)
{
    fprintf(
        out,
        "usage: reveried [OPTIONS]\n"
        "\n"
        "The Reverie API server. Every option also reads an environment variable;\n"
        "a flag wins over the variable, the variable over the default.\n"
        "\n"
        "  -p, --port N            REVERIE_PORT            TCP port (default 8080; 0 = any free "
        "port)\n"
        "  -b, --bind ADDR         REVERIE_BIND            IPv4/IPv6 literal to listen on\n"
        "                                                  (default 127.0.0.1)\n"
        "  -d, --database URL      REVERIE_DATABASE_URL    PostgreSQL URL; when unset, reveried\n"
        "                                                  starts its own PostgreSQL under\n"
        "                                                  REVERIE_HOME/pg (initdb on first run)\n"
        "  -H, --home DIR          REVERIE_HOME            state folder: spool, embedded\n"
        "                                                  database, logs (default ./var)\n"
        "      --web DIR           REVERIE_WEB             dashboard files served at /\n"
        "                                                  (default ./web when it exists)\n"
        "      --upload-cap MIB    REVERIE_UPLOAD_CAP_MB   max trace upload as sent (default 512)\n"
        "      --max-trace MIB     REVERIE_MAX_TRACE_MB    max decompressed trace (default 4096)\n"
        "      --max-events N      REVERIE_MAX_EVENTS      max events one trace keeps (default\n"
        "                                                  5000000; bounds ingest and what-if\n"
        "                                                  memory)\n"
        "      --max-archive MIB   REVERIE_MAX_ARCHIVE_MB  max bytes a training-job archive\n"
        "                                                  inflates to, all files (default 2048)\n"
        "      --disk-reserve MIB  REVERIE_DISK_RESERVE_MB free space kept on the database's\n"
        "                                                  disk: uploads past it get 507\n"
        "                                                  (default 1024; 0 = off)\n"
        "      --db-timeout-ms MS  REVERIE_DB_TIMEOUT_MS   deadline of one database call; past\n"
        "                                                  it 503 (default 4000; 0 = none)\n"
        "      --json-cap KIB      REVERIE_JSON_CAP_KB     max JSON request body (default 1024)\n"
        "      --timeout S         REVERIE_TIMEOUT_S       idle connection timeout (default 30)\n"
        "      --header-timeout-s S  REVERIE_HEADER_TIMEOUT_S  time a connection gets to send a\n"
        "                                                  whole request head, from opening or\n"
        "                                                  its previous answer (default 10)\n"
        "      --min-body-rate B   REVERIE_MIN_BODY_RATE   bytes/s a request body must average\n"
        "                                                  once header-timeout-s have passed\n"
        "                                                  (default 1024)\n"
        "      --per-ip N          REVERIE_PER_IP_LIMIT    connections per client address; past\n"
        "                                                  it that address's longest-idle one\n"
        "                                                  is closed (default 64)\n"
        "      --max-conn N        REVERIE_MAX_CONNECTIONS connections in all; past it the\n"
        "                                                  longest-idle one is closed, 503 when\n"
        "                                                  none is idle (default 1000)\n"
        "      --answer-spool MIB  REVERIE_ANSWER_SPOOL_MB large answers waiting for their\n"
        "                                                  readers, kept in spool files; past it\n"
        "                                                  503 (default 1024)\n"
        "      --timeline-max-tasks N  REVERIE_TIMELINE_MAX_TASKS  tasks in one timeline answer;\n"
        "                                                  past it 422 (default 200000)\n"
        "      --allowed-host NAME REVERIE_ALLOWED_HOSTS   a Host name requests may use besides\n"
        "                                                  localhost, loopback and bind addresses\n"
        "                                                  (repeatable; comma-separated in the\n"
        "                                                  variable; * = any Host)\n"
        "      --cors-origin ORIGIN  REVERIE_CORS_ORIGINS  an origin (https://host[:port]) whose\n"
        "                                                  pages may call the API (repeatable;\n"
        "                                                  comma-separated; default: none)\n"
        "      --http-threads N    REVERIE_HTTP_THREADS    HTTP event-loop threads (default: "
        "CPUs)\n"
        "      --workers N         REVERIE_WORKERS         worker threads for parsing, database\n"
        "                                                  and simulation (default: 2 x CPUs)\n"
        "      --queue N           REVERIE_QUEUE           pending requests before 503 (default "
        "256)\n"
        "      --whatif-budget MS  REVERIE_WHATIF_BUDGET_MS  time budget of one what-if (default "
        "10000)\n"
        "      --fleet-inline N    REVERIE_FLEET_INLINE    traces x scenarios a fleet what-if\n"
        "                                                  answers inline; more becomes a job\n"
        "                                                  (default 16)\n"
        "      --fleet-workers N   REVERIE_FLEET_WORKERS   threads taking fleet jobs (default "
        "CPUs)\n"
        "      --graph-cache MIB   REVERIE_GRAPH_CACHE_MB  memory for traces kept loaded between\n"
        "                                                  what-ifs (default 1024; 0 = off)\n"
        "      --require-auth      REVERIE_REQUIRE_AUTH=1  require bearer tokens even on loopback\n"
        "      --insecure-no-auth  REVERIE_INSECURE_NO_AUTH=1  serve a non-loopback address\n"
        "                                                  without tokens (not recommended)\n"
        "      --migrate-only      apply database migrations and exit\n"
        "  -h, --help              this text\n"
        "      --version           print the version\n"
        "\n"
        "Authentication: on a loopback address (127.0.0.1, ::1) no token is needed\n"
        "by default. On any other address every /v1 request needs\n"
        "`Authorization: Bearer TOKEN` with the right scope (ingest, read, admin),\n"
        "unless --insecure-no-auth. Create tokens with `reverie token create`.\n"
        "/healthz, /readyz, /metrics and the dashboard files are always public.\n"
        "\n"
        "Signals: SIGTERM/SIGINT stop accepting connections, finish the requests in\n"
        "flight, stop the workers and the embedded database, and exit 0.\n");
}

static int env_or(const char *name, const char *flag, const char **out)
{
    if (flag) {
        *out = flag;
        return 1;
    }
    const char *v = getenv(name);
    if (v && *v) {
        *out = v;
        return 1;
    }
    return 0;
}

/* Parses a non-negative integer setting; exits with a message when bad. */
static unsigned long long num_setting(const char *name, const char *flag, const char *env,
                                      unsigned long long def, unsigned long long max)
{
    const char *s;
    char *end;

    if (!env_or(env, flag, &s))
        return def;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || !*s || *end || v > max || s[0] == '-') {
        fprintf(stderr, "reveried: %s '%s' must be an integer between 0 and %llu\n", name, s, max);
        exit(2);
    }
    return v;
}

static int truthy(const char *env)
{
    const char *v = getenv(env);
    return v && (strcmp(v, "1") == 0 || strcasecmp(v, "true") == 0 || strcasecmp(v, "yes") == 0);
}

#define MAX_NAMES 32

/* A setting that takes several names (flags repeat, variables use commas). */
typedef struct name_list {
    const char *v[MAX_NAMES];
    size_t n;
    char *copies[MAX_NAMES]; /* the strings v points into (kept for the process) */
    size_t ncopies;
} name_list;

/* Adds the comma-separated names in s (copied; they live as long as the
 * process). Exits with a message past MAX_NAMES or on an empty list. */
/* The names given by flags and variables; static, as they live as long as
 * the process. */
static name_list hosts, origins;

static void list_add(const char *what, name_list *l, const char *s)
{
    char *copy = s && l->ncopies < MAX_NAMES ? strdup(s) : NULL, *save = NULL;
    size_t before = l->n;

    if (!s)
        return;
    if (!copy) {
        fprintf(stderr, "reveried: out of memory\n");
        exit(1);
    }
    for (char *t = strtok_r(copy, ", ", &save); t; t = strtok_r(NULL, ", ", &save)) {
        if (l->n == MAX_NAMES) {
            fprintf(stderr, "reveried: %s: at most %d names\n", what, MAX_NAMES);
            free(copy);
            exit(2);
        }
        l->v[l->n++] = t;
    }
    if (l->n == before) {
        fprintf(stderr, "reveried: %s: no name given\n", what);
        free(copy);
        exit(2);
    }
    l->copies[l->ncopies++] = copy;
}

static int is_loopback(const char *bind)
{
    return strcmp(bind, "127.0.0.1") == 0 || strncmp(bind, "127.", 4) == 0 ||
           strcmp(bind, "::1") == 0 || strcmp(bind, "localhost") == 0;
}

typedef struct flags {
    const char *diskreserve, *maxarchive, *hdrtimeout, *dbtimeout, *maxevents, *hthreads, *fworkers,
        *maxtrace, *workers, *minrate, *finline, *maxconn, *timeout, *budget, *aspool, *upload,
        *gcache, *perip, *tlmax, *queue, *home, *port, *json, *bind, *web, *db;
    int require_auth, no_auth, migrate_only;
} flags;

/* Reads the command line into f (its strings borrowed from argv): -1 to
 * go on, else the exit status (--help, --version, a usage error). */
static int parse_flags(int argc, char **argv, flags *f)
{
    enum {
        O_WEB = 256,
        O_UPLOAD,
        O_MAXTRACE,
        O_MAXEVENTS,
        O_MAXARCHIVE,
        O_DISKRESERVE,
        O_DBTIMEOUT,
        O_JSON,
        O_TIMEOUT,
        O_PERIP,
        O_MAXCONN,
        O_HDRTIMEOUT,
        O_MINRATE,
        O_ALLOWHOST,
        O_CORS,
        O_HTHREADS,
        O_WORKERS,
        O_QUEUE,
        O_BUDGET,
        O_FLEET_INLINE,
        O_GRAPH_CACHE,
        O_FLEET_WORKERS,
        O_REQAUTH,
        O_NOAUTH,
        O_MIGRATE,
        O_VERSION,
        O_ANSWER_SPOOL,
        O_TL_MAX
    };
    static const struct option opts[] = {
        {"port", required_argument, NULL, 'p'},
        {"bind", required_argument, NULL, 'b'},
        {"database", required_argument, NULL, 'd'},
        {"home", required_argument, NULL, 'H'},
        {"web", required_argument, NULL, O_WEB},
        {"upload-cap", required_argument, NULL, O_UPLOAD},
        {"max-trace", required_argument, NULL, O_MAXTRACE},
        {"max-events", required_argument, NULL, O_MAXEVENTS},
        {"max-archive", required_argument, NULL, O_MAXARCHIVE},
        {"disk-reserve", required_argument, NULL, O_DISKRESERVE},
        {"db-timeout-ms", required_argument, NULL, O_DBTIMEOUT},
        {"json-cap", required_argument, NULL, O_JSON},
        {"timeout", required_argument, NULL, O_TIMEOUT},
        {"per-ip", required_argument, NULL, O_PERIP},
        {"max-conn", required_argument, NULL, O_MAXCONN},
        {"header-timeout-s", required_argument, NULL, O_HDRTIMEOUT},
        {"min-body-rate", required_argument, NULL, O_MINRATE},
        {"allowed-host", required_argument, NULL, O_ALLOWHOST},
        {"cors-origin", required_argument, NULL, O_CORS},
        {"http-threads", required_argument, NULL, O_HTHREADS},
        {"workers", required_argument, NULL, O_WORKERS},
        {"queue", required_argument, NULL, O_QUEUE},
        {"whatif-budget", required_argument, NULL, O_BUDGET},
        {"fleet-inline", required_argument, NULL, O_FLEET_INLINE},
        {"graph-cache", required_argument, NULL, O_GRAPH_CACHE},
        {"fleet-workers", required_argument, NULL, O_FLEET_WORKERS},
        {"require-auth", no_argument, NULL, O_REQAUTH},
        {"insecure-no-auth", no_argument, NULL, O_NOAUTH},
        {"migrate-only", no_argument, NULL, O_MIGRATE},
        {"answer-spool", required_argument, NULL, O_ANSWER_SPOOL},
        {"timeline-max-tasks", required_argument, NULL, O_TL_MAX},
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, O_VERSION},
        {NULL, 0, NULL, 0},
    };
    int c;
    memset(f, 0, sizeof(*f));
    f->require_auth = truthy("REVERIE_REQUIRE_AUTH");
    f->no_auth = truthy("REVERIE_INSECURE_NO_AUTH");
    while ((c = getopt_long(argc, argv, "p:b:d:H:h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': f->port = optarg; break;
        case 'b': f->bind = optarg; break;
        case 'd': f->db = optarg; break;
        case 'H': f->home = optarg; break;
        case O_WEB: f->web = optarg; break;
        case O_UPLOAD: f->upload = optarg; break;
        case O_MAXTRACE: f->maxtrace = optarg; break;
        case O_MAXEVENTS: f->maxevents = optarg; break;
        case O_MAXARCHIVE: f->maxarchive = optarg; break;
        case O_DISKRESERVE: f->diskreserve = optarg; break;
        case O_DBTIMEOUT: f->dbtimeout = optarg; break;
        case O_JSON: f->json = optarg; break;
        case O_TIMEOUT: f->timeout = optarg; break;
        case O_PERIP: f->perip = optarg; break;
        case O_MAXCONN: f->maxconn = optarg; break;
        case O_HDRTIMEOUT: f->hdrtimeout = optarg; break;
        case O_MINRATE: f->minrate = optarg; break;
        case O_ALLOWHOST: list_add("--allowed-host", &hosts, optarg); break;
        case O_CORS: list_add("--cors-origin", &origins, optarg); break;
        case O_HTHREADS: f->hthreads = optarg; break;
        case O_WORKERS: f->workers = optarg; break;
        case O_QUEUE: f->queue = optarg; break;
        case O_BUDGET: f->budget = optarg; break;
        case O_FLEET_INLINE: f->finline = optarg; break;
        case O_GRAPH_CACHE: f->gcache = optarg; break;
        case O_FLEET_WORKERS: f->fworkers = optarg; break;
        case O_REQAUTH: f->require_auth = 1; break;
        case O_NOAUTH: f->no_auth = 1; break;
        case O_MIGRATE: f->migrate_only = 1; break;
        case O_ANSWER_SPOOL: f->aspool = optarg; break;
        case O_TL_MAX: f->tlmax = optarg; break;
        case 'h': usage(stdout); return 0;
        case O_VERSION: printf("reveried %s\n", VERSION); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "reveried: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }

    return -1;
}

/* The server's settings from the flags, else the environment, else the
 * defaults: -1 to go on, else the exit status after saying why. */
static int config_of(const flags *f, rv_server_config *sc)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    if (ncpu < 1)
        ncpu = 2;
    sc->port = (int)num_setting("port", f->port, "REVERIE_PORT", 8080, 65535);
    sc->bind = "127.0.0.1";
    env_or("REVERIE_BIND", f->bind, &sc->bind);
    sc->database_url = NULL;
    env_or("REVERIE_DATABASE_URL", f->db, &sc->database_url);
    sc->home = "./var";
    static char defhome[4096];
    if (!env_or("REVERIE_HOME", f->home, &sc->home) && !sc->database_url &&
        rv_pgembed_default_home(defhome, sizeof(defhome))) {
        /* Root in a directory the database user cannot search (a checkout
         * under /root): state goes where it can, and the start-up says so. */
        sc->home = defhome;
        printf("reveried: home %s (./var is out of the database user's reach; set "
               "REVERIE_HOME to choose)\n",
               defhome);
        fflush(stdout);
    }
    sc->web_root = NULL;
    if (!env_or("REVERIE_WEB", f->web, &sc->web_root)) {
        struct stat st;
        if (stat("web", &st) == 0 && S_ISDIR(st.st_mode))
            sc->web_root = "web";
    }
    sc->upload_cap = num_setting("upload cap", f->upload, "REVERIE_UPLOAD_CAP_MB", 512, 65536)
                     << 20;
    sc->max_trace_bytes =
        num_setting("max trace", f->maxtrace, "REVERIE_MAX_TRACE_MB", 4096, 1 << 20) << 20;
    sc->max_events =
        num_setting("max events", f->maxevents, "REVERIE_MAX_EVENTS", 5000000, 64ULL * 1024 * 1024);
    sc->max_archive_bytes =
        num_setting("max archive", f->maxarchive, "REVERIE_MAX_ARCHIVE_MB", 2048, 1 << 20) << 20;
    sc->disk_reserve_bytes =
        num_setting("disk reserve", f->diskreserve, "REVERIE_DISK_RESERVE_MB", 1024, 1ULL << 40)
        << 20;
    sc->db_timeout_ms = (unsigned)num_setting("database timeout", f->dbtimeout,
                                              "REVERIE_DB_TIMEOUT_MS", 4000, 3600000);
    sc->json_body_cap =
        (size_t)num_setting("json cap", f->json, "REVERIE_JSON_CAP_KB", 1024, 1 << 20) << 10;
    sc->conn_timeout_s =
        (unsigned)num_setting("timeout", f->timeout, "REVERIE_TIMEOUT_S", 30, 86400);
    sc->header_timeout_s = (unsigned)num_setting("header timeout", f->hdrtimeout,
                                                 "REVERIE_HEADER_TIMEOUT_S", 10, 3600);
    sc->min_body_rate =
        (unsigned)num_setting("min body rate", f->minrate, "REVERIE_MIN_BODY_RATE", 1024, 1u << 30);
    if (hosts.n == 0 && getenv("REVERIE_ALLOWED_HOSTS"))
        list_add("REVERIE_ALLOWED_HOSTS", &hosts, getenv("REVERIE_ALLOWED_HOSTS"));
    if (origins.n == 0 && getenv("REVERIE_CORS_ORIGINS"))
        list_add("REVERIE_CORS_ORIGINS", &origins, getenv("REVERIE_CORS_ORIGINS"));
    sc->allowed_hosts = hosts.v;
    sc->nallowed_hosts = hosts.n;
    sc->cors_origins = origins.v;
    sc->ncors_origins = origins.n;
    sc->per_ip_limit =
        (unsigned)num_setting("per-ip limit", f->perip, "REVERIE_PER_IP_LIMIT", 64, 100000);
    sc->conn_limit = (unsigned)num_setting("max connections", f->maxconn, "REVERIE_MAX_CONNECTIONS",
                                           1000, 100000);
    sc->answer_spool_cap =
        num_setting("answer spool", f->aspool, "REVERIE_ANSWER_SPOOL_MB", 1024, 1 << 20) << 20;
    sc->timeline_max_tasks = (unsigned)num_setting("timeline max tasks", f->tlmax,
                                                   "REVERIE_TIMELINE_MAX_TASKS", 200000, 1u << 26);
    sc->http_threads = (unsigned)num_setting("http threads", f->hthreads, "REVERIE_HTTP_THREADS",
                                             (unsigned long long)ncpu, 256);
    sc->workers = (unsigned)num_setting("workers", f->workers, "REVERIE_WORKERS",
                                        2ULL * (unsigned long long)ncpu, 1024);
    sc->queue = (unsigned)num_setting("queue", f->queue, "REVERIE_QUEUE", 256, 1000000);
    sc->whatif_budget_ms = (unsigned)num_setting("what-if budget", f->budget,
                                                 "REVERIE_WHATIF_BUDGET_MS", 10000, 3600000);
    sc->fleet_inline_max =
        (unsigned)num_setting("fleet inline", f->finline, "REVERIE_FLEET_INLINE", 16, 1000000);
    sc->fleet_workers = (unsigned)num_setting("fleet workers", f->fworkers, "REVERIE_FLEET_WORKERS",
                                              ncpu < 64 ? (unsigned long long)ncpu : 64, 64);
    sc->graph_cache_bytes =
        (size_t)num_setting("graph cache", f->gcache, "REVERIE_GRAPH_CACHE_MB", 1024, 1 << 20)
        << 20;
    if (sc->http_threads == 0 || sc->workers == 0 || sc->queue == 0 || sc->upload_cap == 0 ||
        sc->json_body_cap == 0 || sc->header_timeout_s == 0 || sc->min_body_rate == 0 ||
        sc->answer_spool_cap == 0 || sc->timeline_max_tasks == 0) {
        fprintf(stderr, "reveried: thread counts, queue and caps must be at least 1\n");
        return 2;
    }
    if (is_loopback(sc->bind)) {
        sc->require_auth = f->require_auth;
    } else if (f->no_auth) {
        sc->require_auth = 0;
        fprintf(stderr,
                "reveried: WARNING: serving %s without authentication "
                "(--insecure-no-auth)\n",
                sc->bind);
    } else {
        sc->require_auth = 1;
    }
    sc->migrate_only = f->migrate_only;
    sc->version = VERSION;
    return -1;
}

int main(int argc, char **argv)
{
    flags f;
    rv_server_config sc = {0};
    /* A what-if allocates and frees the same large arrays every time
     * (graph clone, simulation, report scratch: ~50 MB on a 100k-task
     * trace). Kept by the allocator instead of handed back, the next
     * what-if reuses them without page faults (a third of a warm answer's
     * time): arrays up to 64 MiB come from the heaps (a worker's heap
     * grows no larger, so bigger ones are mmapped anyway), a heap keeps up
     * to 256 MiB free, and a worker's emptied 64 MiB heap is not unmapped
     * (the top pad). The memory stays the process's high-water mark. */
    mallopt(M_MMAP_THRESHOLD, 64 << 20);
    mallopt(M_TRIM_THRESHOLD, 256 << 20);
    mallopt(M_TOP_PAD, 64 << 20);
    /* One heap for all threads: the workers' own heaps took 23 page
     * faults per what-if on a 106k-task trace (their freed arrays came
     * back unmapped), 10.4 ms against 8.3 ms at the median; small blocks
     * come from each thread's cache without the heap's lock, and four
     * clients at once ran as fast (docs/internals/request-path.md). */
    mallopt(M_ARENA_MAX, 1);
    int rc = parse_flags(argc, argv, &f);
    if (rc < 0)
        rc = config_of(&f, &sc);
    return rc < 0 ? rv_server_main(&sc) : rc;
}
