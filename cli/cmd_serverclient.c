/* `reverie whatif` and `reverie fleet`: ask a running reveried over HTTP.
 *
 *   reverie whatif TRACE_ID --whatif DOC|@FILE [--timeline] [--server URL] [--token T]
 *   reverie fleet --whatif DOC|@FILE [--whatif ...] [--platform ID] [--job GLOB]
 *                 [--since TIME] [--trace ID ...] [--async] [--server URL] [--token T]
 *
 * The server defaults to $REVERIE_SERVER, else http://127.0.0.1:8080; the
 * token to $REVERIE_TOKEN. The answer (JSON) goes to stdout; an error answer
 * goes to stderr and the exit code is 1. `fleet` waits for a queued job
 * unless --async. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "rv_cli.h"

#ifdef RV_HAVE_CURL
#include <curl/curl.h>
#include <jansson.h>

#include "util/rv_buf.h"

#define MAX_BODY (256u << 20)

/* curl's write callback: appends to the answer, capped at MAX_BODY. */
static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    return rv_buf_add(ud, p, sz * n) == 0 ? sz * n : 0; /* 0 aborts the transfer */
}

typedef struct client {
    const char *server, *token;
} client;

/* One request; returns the HTTP status (or -1) and *out (new, malloc'd). */
static long http(const client *c, const char *method, const char *path, const char *body,
                 char **out)
{
    CURL *h = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    char url[2048], auth[512];
    rv_buf b = RV_BUF_INIT(MAX_BODY);
    long status = -1;

    *out = NULL;
    if (!h)
        return -1;
    snprintf(url, sizeof(url), "%s%s", c->server, path);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &b);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT, 600L);
    if (c->token && *c->token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", c->token);
        hdrs = curl_slist_append(hdrs, auth);
    }
    if (body) {
        hdrs = curl_slist_append(hdrs, "Content-Type: application/json");
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, body);
    }
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    CURLcode rc = curl_easy_perform(h);
    if (rc == CURLE_OK)
        curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &status);
    else
        fprintf(stderr, "reverie: %s: %s\n", url, curl_easy_strerror(rc));
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    *out = rv_buf_take(&b, NULL); /* NULL when the answer passed the cap */
    return status;
}

/* Prints a 2xx answer to stdout, an error to stderr; returns the exit code. */
static int report(long status, const char *body)
{
    if (status >= 200 && status < 300) {
        printf("%s", body ? body : "");
        return 0;
    }
    if (status > 0)
        fprintf(stderr, "reverie: HTTP %ld: %s", status, body ? body : "");
    return 1;
}

/* Loads a what-if document from text or @file (new reference). */
static json_t *load_doc(const char *arg)
{
    json_error_t je;
    json_t *j = arg[0] == '@' ? json_load_file(arg + 1, 0, &je) : json_loads(arg, 0, &je);
    if (!j)
        fprintf(stderr, "reverie: --whatif: %s (line %d)\n", je.text, je.line);
    return j;
}

static void client_init(client *c)
{
    c->server = getenv("REVERIE_SERVER");
    if (!c->server || !*c->server)
        c->server = "http://127.0.0.1:8080";
    c->token = getenv("REVERIE_TOKEN");
}
#endif

int rv_cmd_whatif(int argc, char **argv)
{
#ifndef RV_HAVE_CURL
    fprintf(stderr, "reverie whatif: this build has no libcurl\n");
    return 1;
#else
    client c;
    const char *id = NULL, *doc_arg = NULL;
    int timeline = 0;

    client_init(&c);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (strcmp(a, "--whatif") == 0 && more)
            doc_arg = argv[++i];
        else if (strcmp(a, "--server") == 0 && more)
            c.server = argv[++i];
        else if (strcmp(a, "--token") == 0 && more)
            c.token = argv[++i];
        else if (strcmp(a, "--timeline") == 0)
            timeline = 1;
        else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: reverie whatif TRACE_ID --whatif DOC|@FILE [--timeline] "
                   "[--server URL] [--token T]\n");
            return 0;
        } else if (a[0] != '-' && !id)
            id = a;
        else if (a[0] == '{' || a[0] == '@') {
            /* A document given without its flag: say which flag it needs. */
            fprintf(stderr,
                    "reverie whatif: unexpected argument '%s': give the what-if document with "
                    "--whatif, e.g. reverie whatif %s --whatif '%s'\n",
                    a, id ? id : "TRACE_ID", a);
            return 2;
        } else {
            fprintf(stderr, "reverie whatif: unexpected argument '%s'\n", a);
            return 2;
        }
    }
    if (!id || atoll(id) <= 0) {
        fprintf(stderr, "usage: reverie whatif TRACE_ID --whatif DOC|@FILE [--server URL]\n");
        return 2;
    }
    json_t *doc = load_doc(doc_arg ? doc_arg : "{}");
    if (!doc)
        return 2;
    if (timeline)
        json_object_set_new(doc, "timeline", json_true());
    char *body = json_dumps(doc, JSON_COMPACT), *out = NULL, path[64];
    json_decref(doc);
    snprintf(path, sizeof(path), "/v1/traces/%lld/whatif", atoll(id));
    curl_global_init(CURL_GLOBAL_DEFAULT);
    long st = http(&c, "POST", path, body, &out);
    int rc = report(st, out);
    free(body);
    free(out);
    curl_global_cleanup();
    return rc;
#endif
}

int rv_cmd_fleet(int argc, char **argv)
{
#ifndef RV_HAVE_CURL
    fprintf(stderr, "reverie fleet: this build has no libcurl\n");
    return 1;
#else
    client c;
    json_t *req = json_object(), *sel = json_object(), *sc = json_array(), *ids = json_array();
    int async = 0, rc = 2;
    char *body = NULL, *out = NULL;

    client_init(&c);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int more = i + 1 < argc;
        if (strcmp(a, "--whatif") == 0 && more) {
            json_t *d = load_doc(argv[++i]);
            if (!d)
                goto out;
            json_array_append_new(sc, d);
        } else if (strcmp(a, "--platform") == 0 && more) {
            json_object_set_new(sel, "platform", json_integer(atoll(argv[++i])));
        } else if (strcmp(a, "--job") == 0 && more) {
            json_object_set_new(sel, "job", json_string(argv[++i]));
        } else if (strcmp(a, "--since") == 0 && more) {
            json_object_set_new(sel, "since", json_string(argv[++i]));
        } else if (strcmp(a, "--trace") == 0 && more) {
            json_array_append_new(ids, json_integer(atoll(argv[++i])));
        } else if (strcmp(a, "--server") == 0 && more) {
            c.server = argv[++i];
        } else if (strcmp(a, "--token") == 0 && more) {
            c.token = argv[++i];
        } else if (strcmp(a, "--async") == 0) {
            async = 1;
        } else if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            printf("usage: reverie fleet --whatif DOC|@FILE [--whatif ...] [--platform ID] "
                   "[--job GLOB] [--since TIME] [--trace ID ...] [--async] [--server URL] "
                   "[--token T]\n");
            rc = 0;
            goto out;
        } else if (a[0] == '{' || a[0] == '@') {
            fprintf(stderr,
                    "reverie fleet: unexpected argument '%s': give each scenario with "
                    "--whatif, e.g. reverie fleet --whatif '%s'\n",
                    a, a);
            goto out;
        } else {
            fprintf(stderr, "reverie fleet: unexpected argument '%s'\n", a);
            goto out;
        }
    }
    if (json_array_size(sc) == 0) {
        fprintf(stderr, "reverie fleet: give at least one --whatif\n");
        goto out;
    }
    if (json_array_size(ids))
        json_object_set(sel, "trace_ids", ids);
    json_object_set(req, "select", sel);
    json_object_set(req, "scenarios", sc);
    body = json_dumps(req, JSON_COMPACT);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    long st = http(&c, "POST", "/v1/fleet/whatif", body, &out);
    if (st == 202 && !async) {
        json_t *j = json_loads(out ? out : "", 0, NULL);
        long long job = (long long)json_integer_value(json_object_get(j, "job_id"));
        json_decref(j);
        char path[64];
        snprintf(path, sizeof(path), "/v1/jobs/%lld", job);
        fprintf(stderr, "reverie fleet: job %lld queued; waiting\n", job);
        for (;;) {
            free(out);
            st = http(&c, "GET", path, NULL, &out);
            if (st != 200)
                break;
            j = json_loads(out ? out : "", 0, NULL);
            const char *state = json_string_value(json_object_get(j, "state"));
            int fin = state && (strcmp(state, "done") == 0 || strcmp(state, "failed") == 0);
            int failed = state && strcmp(state, "failed") == 0;
            json_decref(j);
            if (fin) {
                if (failed)
                    st = 500;
                break;
            }
            usleep(500 * 1000);
        }
    }
    rc = report(st, out);
    curl_global_cleanup();
out:
    free(body);
    free(out);
    json_decref(ids);
    json_decref(sel);
    json_decref(sc);
    json_decref(req);
    return rc;
#endif
}
