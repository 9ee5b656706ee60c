/* `reverie upload`: send trace files, or a collector spool, to reveried.
 *
 *   reverie upload TRACE... [--job J] [--rank R] [--server URL] [--token T]
 *   reverie upload --spool DIR [--server URL] [--token T]
 *
 * The server and token default to REVERIE_SERVER and REVERIE_TOKEN. A
 * spooled file is deleted only after the server answered 2xx. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"
#include "rv_spool.h"
#include "rv_upload.h"

#define UPLOAD_MAX_BYTES ((size_t)4 << 30)

static void usage(FILE *out)
{
    fprintf(out, "usage: reverie upload TRACE... [--job J] [--rank R] [--server URL] [--token T]\n"
                 "       reverie upload --spool DIR [--server URL] [--token T]\n\n"
                 "Posts Kineto/collector traces (.json or .json.gz) to URL/v1/traces.\n"
                 "  --server URL  default $REVERIE_SERVER\n"
                 "  --token T     bearer token, default $REVERIE_TOKEN\n"
                 "  --job J       job name for the trace (default: the file name)\n"
                 "  --rank R      rank of the trace (default: none)\n"
                 "  --spool DIR   send every trace the collector spooled in DIR; each file\n"
                 "                is deleted after the server accepted it\n"
                 "  --attempts N  tries per trace (default 5)\n");
}

int rv_cmd_upload(int argc, char **argv)
{
    rv_upload_opts o;
    const char *job = NULL, *spool = NULL;
    int rank = -1, nfiles = 0, failed = 0;
    char **files = calloc((size_t)argc + 1, sizeof(char *));
    if (!files)
        return 1;
    rv_upload_opts_from_env(&o);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *val = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            free(files);
            return 0;
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
        printf("%d sent, %d failed, %d busy (claimed by another sender)\n", res.sent, res.failed,
               res.skipped);
        if (rc < 0)
            fprintf(stderr, "reverie upload: %s\n", err.message);
        free(files);
        return rc < 0 ? 1 : 0;
    }

    for (int i = 0; i < nfiles; i++) {
        void *data = NULL;
        size_t len = 0;
        long status = 0;
        rv_error err;
        rv_error_clear(&err);
        const char *base = strrchr(files[i], '/');
        base = base ? base + 1 : files[i];
        int rc = rv_upload_read_file(files[i], UPLOAD_MAX_BYTES, &data, &len, &err);
        if (rc == 0)
            rc = rv_upload_post(&o, job ? job : base, rank, data, len, &status, &err);
        free(data);
        if (rc < 0) {
            fprintf(stderr, "reverie upload: %s: %s\n", files[i], err.message);
            failed++;
        } else {
            printf("%s: uploaded (%zu bytes, HTTP %ld)\n", files[i], len, status);
        }
    }
    free(files);
    return failed ? 1 : 0;
}
