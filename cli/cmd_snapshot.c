/* Trace loading shared by the commands, and `reverie snapshot TRACE OUT`:
 * the binary snapshot the trace store keeps (engine/rv_snapshot.h), so a
 * what-if on a large trace need not re-parse its JSON. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_cli.h"
#include "reader/rv_kineto.h"
#include "reader/rv_snapshot.h"

/* Snapshots above this are refused: the store's own cap on a trace. */
#define SNAPSHOT_FILE_CAP ((size_t)1 << 32)

int rv_cli_load_trace(const char *path, rv_trace **out, rv_error *err)
{
    FILE *f = fopen(path, "rb");
    unsigned char magic[4] = {0};
    *out = NULL;
    if (!f)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open: %s", strerror(errno));
    size_t got = fread(magic, 1, sizeof(magic), f);
    if (got < 4 || memcmp(magic, "RVSN", 4) != 0) {
        fclose(f);
        return rv_kineto_read_file(path, NULL, out, err);
    }
    int rc = 0;
    uint8_t *buf = NULL;
    if (fseek(f, 0, SEEK_END) != 0) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "cannot seek: %s", strerror(errno));
        goto out;
    }
    long len = ftell(f);
    if (len < 0 || (size_t)len > SNAPSHOT_FILE_CAP) {
        rc = rv_error_set(err, RV_ERR_LIMIT, -1, -1, "snapshot too large (%ld bytes)", len);
        goto out;
    }
    rewind(f);
    buf = malloc((size_t)len + 1);
    if (!buf) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    if (fread(buf, 1, (size_t)len, f) != (size_t)len) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "short read");
        goto out;
    }
    rc = rv_snapshot_decode(buf, (size_t)len, out, err);
out:
    free(buf);
    fclose(f);
    return rc;
}

int rv_cmd_snapshot(int argc, char **argv)
{
    if (argc != 3 || argv[1][0] == '-') {
        fprintf(argc == 2 && !strcmp(argv[1], "--help") ? stdout : stderr,
                "usage: reverie snapshot TRACE OUT.rvsnap\n\n"
                "Writes the parsed trace as a binary snapshot; every command that takes\n"
                "a TRACE also takes a snapshot, and loads it without parsing JSON.\n");
        return argc == 2 && !strcmp(argv[1], "--help") ? 0 : 2;
    }
    rv_trace *t = NULL;
    uint8_t *data = NULL;
    size_t len = 0;
    rv_error err;
    int status = 1;
    rv_error_clear(&err);
    if (rv_kineto_read_file(argv[1], NULL, &t, &err) != 0 ||
        rv_snapshot_encode(t, 1, &data, &len, &err) != 0) {
        fprintf(stderr, "reverie: %s: %s\n", argv[1], err.message);
        goto out;
    }
    FILE *f = fopen(argv[2], "wb");
    if (!f || fwrite(data, 1, len, f) != len || fclose(f) != 0) {
        fprintf(stderr, "reverie: cannot write %s: %s\n", argv[2], strerror(errno));
        goto out;
    }
    printf("%s: %zu events, %zu bytes\n", argv[2], t->nevents, len);
    status = 0;
out:
    free(data);
    rv_trace_free(t);
    return status;
}
