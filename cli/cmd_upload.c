/* `reverie upload`: send trace files, or a collector spool, to reveried.
 *
 *   reverie upload TRACE... [--job J] [--rank R] [--world-size W] [--server URL] [--token T]
 *                  [--json]
 *   reverie upload --spool DIR [--server URL] [--token T] [--json]
 *
 * The server and token default to REVERIE_SERVER and REVERIE_TOKEN. Each
 * stored trace prints its id ("duplicate of trace N" when the server had it
 * already); --json prints one JSON document instead, for scripts. A spooled
 * file is deleted only after the server answered 2xx. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "rv_cli.h"
#include "rv_spool.h"
#include "rv_upload.h"

#define UPLOAD_MAX_BYTES ((size_t)4 << 30)

static void usage(FILE *out)
{
    fprintf(out, "usage: reverie upload TRACE... [--job J] [--rank R] [--world-size W]\n"
                 "                      [--server URL] [--token T] [--json]\n"
                 "       reverie upload --spool DIR [--server URL] [--token T] [--json]\n\n"
                 "Posts Kineto/collector traces (.json or .json.gz) to URL/v1/traces and\n"
                 "prints each new trace id (or the trace it duplicates).\n"
                 "  --server URL  default $REVERIE_SERVER\n"
                 "  --token T     bearer token, default $REVERIE_TOKEN\n"
                 "  --job J       job name for the trace (default: the file name without\n"
                 "                .json.gz, .json and .pt.trace)\n"
                 "  --rank R      rank of the trace (default: the trace's distributedInfo)\n"
                 "  --world-size W  ranks in the job (default: the trace's distributedInfo);\n"
                 "                traces with a job name and a rank form a training job\n"
                 "                (GET /v1/training-jobs)\n"
                 "  --spool DIR   send every trace the collector spooled in DIR; each file\n"
                 "                is deleted after the server accepted it\n"
                 "  --attempts N  tries per trace (default 5)\n"
                 "  --json        one JSON document on stdout: [{file, id, duplicate, ...}]\n");
}

/* Drops suffix from the end of s (in place) when s is longer than it. */
static void drop_suffix(char *s, const char *suffix)
{
    size_t n = strlen(s), k = strlen(suffix);
    if (n > k && strcmp(s + n - k, suffix) == 0)
        s[n - k] = '\0';
}

/* The default job name: the file's base name without .json.gz or .json,
 * then without .pt.trace ("resnet50.pt.trace.json.gz" -> "resnet50"). */
static void default_job(const char *path, char *out, size_t cap)
{
    const char *base = strrchr(path, '/');
    snprintf(out, cap, "%s", base ? base + 1 : path);
    drop_suffix(out, ".gz");
    drop_suffix(out, ".json");
    drop_suffix(out, ".pt.trace");
}

/* One file's outcome: a line for people, or an object appended to rows. */
static void report(const char *file, size_t len, long status, const char *answer, json_t *rows)
{
    json_t *doc = json_loads(answer, 0, NULL);
    json_t *id = json_object_get(doc, "id");
    int dup = json_is_true(json_object_get(doc, "duplicate")) || status == 200;
    if (rows) {
        json_t *row = json_pack("{s:s, s:I, s:i, s:b}", "file", file, "bytes", (json_int_t)len,
                                "http_status", (int)status, "duplicate", dup);
        if (row) {
            json_object_set(row, "id", json_is_integer(id) ? id : json_null());
            json_array_append_new(rows, row);
        }
    } else if (!json_is_integer(id)) {
        printf("%s: uploaded (%zu bytes, HTTP %ld)\n", file, len, status);
    } else if (dup) {
        printf("%s: duplicate of trace %lld\n", file, (long long)json_integer_value(id));
    } else {
        printf("%s: trace %lld (%zu bytes)\n", file, (long long)json_integer_value(id), len);
    }
    json_decref(doc);
}

int rv_cmd_upload(int argc, char **argv)
{
    rv_upload_opts o;
    const char *job = NULL, *spool = NULL;
    int rank = -1, nfiles = 0, failed = 0, as_json = 0;
    char answer[RV_UPLOAD_ANSWER_MAX];
    json_t *rows = NULL;
    char **files = calloc((size_t)argc + 1, sizeof(char *));
    if (!files)
        return 1;
    rv_upload_opts_from_env(&o);
    o.prog = "reverie upload";
    o.answer = answer;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            free(files);
            return 0;
        } else if (strcmp(a, "--json") == 0) {
            as_json = 1;
        } else if (a[0] == '-' && a[1] == '-' && !val) {
            fprintf(stderr, "reverie upload: %s needs a value\n", a);
            free(files);
            return 2;
        } else if (strcmp(a, "--server") == 0) {
            o.server = val;
            i++;
        } else if (strcmp(a, "--token") == 0) {
            o.token = val;
            i++;
        } else if (strcmp(a, "--job") == 0) {
            job = val;
            i++;
        } else if (strcmp(a, "--rank") == 0) {
            rank = atoi(val ? val : "-1");
            i++;
        } else if (strcmp(a, "--world-size") == 0) {
            char *end = NULL;
            long w = val ? strtol(val, &end, 10) : 0;
            if (!val || !*val || *end || w < 1 || w > 1000000) {
                fprintf(stderr, "reverie upload: --world-size must be between 1 and 1000000\n");
                free(files);
                return 2;
            }
            o.world_size = (int)w;
            i++;
        } else if (strcmp(a, "--spool") == 0) {
            spool = val;
            i++;
        } else if (strcmp(a, "--attempts") == 0) {
            o.max_attempts = atoi(val ? val : "0");
            i++;
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "reverie upload: unknown option %s\n", a);
            usage(stderr);
            free(files);
            return 2;
        } else {
            files[nfiles++] = argv[i];
        }
    }
    if ((nfiles == 0) == (spool == NULL)) {
        fprintf(stderr, "reverie upload: give trace files or --spool DIR (one of them)\n");
        usage(stderr);
        free(files);
        return 2;
    }
    if (!rv_upload_available()) {
        fprintf(stderr, "reverie upload: this build has no libcurl, so upload is unavailable; "
                        "use curl --data-binary @TRACE URL/v1/traces\n");
        free(files);
        return 1;
    }
    if (!o.server || !*o.server) {
        fprintf(stderr, "reverie upload: no server: pass --server URL or set REVERIE_SERVER\n");
        free(files);
        return 2;
    }

    if (spool) {
        rv_spool_result res;
        rv_error err;
        rv_error_clear(&err);
        int rc = rv_spool_send_all(spool, &o, &res, &err);
        if (as_json)
            printf("{\"sent\": %d, \"failed\": %d, \"busy\": %d}\n", res.sent, res.failed,
                   res.skipped);
        else
            printf("%d sent, %d failed, %d busy (claimed by another sender)\n", res.sent,
                   res.failed, res.skipped);
        if (rc < 0)
            fprintf(stderr, "reverie upload: %s\n", err.message);
        free(files);
        return rc < 0 ? 1 : 0;
    }

    if (as_json && !(rows = json_array())) {
        free(files);
        return 1;
    }
    for (int i = 0; i < nfiles; i++) {
        void *data = NULL;
        size_t len = 0;
        long status = 0;
        char name[256];
        rv_error err;
        rv_error_clear(&err);
        default_job(files[i], name, sizeof(name));
        int rc = rv_upload_read_file(files[i], UPLOAD_MAX_BYTES, &data, &len, &err);
        if (rc == 0)
            rc = rv_upload_post(&o, job ? job : name, rank, data, len, &status, &err);
        free(data);
        if (rc < 0) {
            fprintf(stderr, "reverie upload: %s: %s\n", files[i], err.message);
            if (rows)
                json_array_append_new(rows,
                                      json_pack("{s:s, s:i, s:s}", "file", files[i], "http_status",
                                                (int)status, "error", err.message));
            failed++;
        } else {
            report(files[i], len, status, answer, rows);
        }
    }
    if (rows) {
        char *text = json_dumps(rows, JSON_INDENT(2));
        if (text)
            printf("%s\n", text);
        free(text);
        json_decref(rows);
    }
    free(files);
    return failed ? 1 : 0;
}
