/* Tar archives member by member (rv_tar.h). The format is POSIX ustar:
 * 512-byte header blocks (name at 0, size in octal at 124, checksum at 148,
 * type at 156, "ustar" at 257, name prefix at 345), each file's bytes
 * padded to 512, two zero blocks at the end. GNU writes names over 100
 * bytes as a 'L' member holding the name of the next one. */
#include "util/rv_tar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define BLOCK 512

struct rv_tar {
    rv_tar_read_fn fn;
    void *ctx;
    gzFile gz;    /* rv_tar_open_file's stream, or NULL */
    uint64_t pos; /* bytes of the tar stream consumed */
    char longname[RV_TAR_NAME_MAX];
    int have_long;
    int ended;
};

static long gz_read(void *ctx, void *buf, size_t n)
{
    int k = gzread((gzFile)ctx, buf, (unsigned)(n > (1u << 30) ? 1u << 30 : n));
    return k < 0 ? -1 : k;
}

int rv_tar_open_fn(rv_tar_read_fn fn, void *ctx, rv_tar **out, rv_error *err)
{
    rv_tar *t = calloc(1, sizeof(*t));
    *out = NULL;
    if (!t)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    t->fn = fn;
    t->ctx = ctx;
    *out = t;
    return 0;
}

int rv_tar_open_file(const char *path, rv_tar **out, rv_error *err)
{
    *out = NULL;
    /* gzread passes bytes that are not gzip through unchanged. */
    gzFile gz = gzopen(path, "rb");
    if (!gz)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open the archive");
    rv_tar *t = calloc(1, sizeof(*t));
    if (!t) {
        gzclose(gz);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    t->fn = gz_read;
    t->ctx = gz;
    t->gz = gz;
    *out = t;
    return 0;
}

void rv_tar_close(rv_tar *t)
{
    if (!t)
        return;
    if (t->gz)
        gzclose(t->gz);
    free(t);
}

/* Exactly n bytes into buf (NULL: skipped): 0, or RV_ERR_PARSE when the
 * stream ends first. */
static int read_full(rv_tar *t, void *buf, uint64_t n, rv_error *err)
{
    char scratch[4096];
    uint64_t done = 0;

    while (done < n) {
        size_t want = (size_t)(n - done);
        if (!buf && want > sizeof(scratch))
            want = sizeof(scratch);
        long k = t->fn(t->ctx, buf ? (char *)buf + done : scratch, want);
        if (k < 0)
            return rv_error_placed(
                err, rv_error_set(err, RV_ERR_PARSE, (int64_t)(t->pos + done), -1,
                                  "archive: at byte %llu: the data cannot be read (damaged gzip?)",
                                  (unsigned long long)(t->pos + done)));
        if (k == 0)
            return rv_error_placed(err,
                                   rv_error_set(err, RV_ERR_PARSE, (int64_t)(t->pos + done), -1,
                                                "archive: at byte %llu: it ends inside a member",
                                                (unsigned long long)(t->pos + done)));
        done += (uint64_t)k;
    }
    t->pos += n;
    return 0;
}

/* An octal field (spaces and NULs end it); -1 when it holds anything else
 * or does not fit. Base-256 (GNU, high bit set) sizes are refused. */
static int64_t octal(const uint8_t *f, size_t n)
{
    int64_t v = 0;
    size_t i = 0;

    while (i < n && f[i] == ' ')
        i++;
    if (i < n && (f[i] & 0x80))
        return -1;
    for (; i < n && f[i] >= '0' && f[i] <= '7'; i++) {
        if (v > (INT64_MAX >> 3))
            return -1;
        v = v * 8 + (f[i] - '0');
    }
    for (; i < n; i++)
        if (f[i] != ' ' && f[i] != '\0')
            return -1;
    return v;
}

static int zero_block(const uint8_t *b)
{
    for (size_t i = 0; i < BLOCK; i++)
        if (b[i])
            return 0;
    return 1;
}

/* The header's checksum: the sum of its bytes with the checksum field read
 * as spaces (unsigned; some old writers used signed bytes, accepted too). */
static int checksum_ok(const uint8_t *b)
{
    int64_t want = octal(b + 148, 8);
    int64_t u = 0, s = 0;

    for (size_t i = 0; i < BLOCK; i++) {
        uint8_t c = i >= 148 && i < 156 ? ' ' : b[i];
        u += c;
        s += (int8_t)c;
    }
    return want >= 0 && (want == u || want == s);
}

/* The member's name: the pending GNU long name, else prefix "/" name. */
static void member_name(rv_tar *t, const uint8_t *b, char *name)
{
    if (t->have_long) {
        memcpy(name, t->longname, RV_TAR_NAME_MAX);
        t->have_long = 0;
        return;
    }
    char nm[101], pre[156];
    memcpy(nm, b, 100);
    nm[100] = '\0';
    memcpy(pre, b + 345, 155);
    pre[155] = '\0';
    if (memcmp(b + 257, "ustar", 5) == 0 && pre[0])
        snprintf(name, RV_TAR_NAME_MAX, "%s/%s", pre, nm);
    else
        snprintf(name, RV_TAR_NAME_MAX, "%s", nm);
}

int rv_tar_next(rv_tar *t, size_t max, char *name, uint8_t **data, size_t *len, rv_error *err)
{
    uint8_t b[BLOCK];
    int rc;

    if (data)
        *data = NULL;
    *len = 0;
    name[0] = '\0';
    while (!t->ended) {
        uint64_t at = t->pos;
        long k = t->fn(t->ctx, b, 1);
        if (k == 0 && at == 0)
            return rv_error_set(err, RV_ERR_PARSE, 0, -1, "archive: it is empty");
        if (k == 0) /* some writers leave out the two zero blocks */
            return rv_error_placed(
                err, rv_error_set(err, RV_ERR_PARSE, (int64_t)at, -1,
                                  "archive: at byte %llu: it ends without its end blocks",
                                  (unsigned long long)at));
        if (k < 0)
            return rv_error_placed(
                err, rv_error_set(err, RV_ERR_PARSE, (int64_t)at, -1,
                                  "archive: at byte %llu: the data cannot be read (damaged gzip?)",
                                  (unsigned long long)at));
        t->pos += 1;
        if ((rc = read_full(t, b + 1, BLOCK - 1, err)) != 0)
            return rc;
        if (zero_block(b)) {
            t->ended = 1;
            break;
        }
        if (!checksum_ok(b))
            return rv_error_placed(
                err, rv_error_set(err, RV_ERR_PARSE, (int64_t)at, -1,
                                  "archive: at byte %llu: not a tar header (bad checksum); send a "
                                  ".tar or .tar.gz of the rank traces",
                                  (unsigned long long)at));
        int64_t size = octal(b + 124, 12);
        if (size < 0)
            return rv_error_placed(
                err, rv_error_set(err, RV_ERR_PARSE, (int64_t)at + 124, -1,
                                  "archive: at byte %llu: the member size is not octal",
                                  (unsigned long long)at + 124));
        uint64_t padded = ((uint64_t)size + BLOCK - 1) / BLOCK * BLOCK;
        char type = (char)b[156];
        if (type == 'L') {
            /* The next member's long name. */
            if (size >= RV_TAR_NAME_MAX)
                return rv_error_placed(
                    err, rv_error_set(err, RV_ERR_LIMIT, (int64_t)at, -1,
                                      "archive: at byte %llu: a member name over %d bytes",
                                      (unsigned long long)at, RV_TAR_NAME_MAX - 1));
            if ((rc = read_full(t, t->longname, (uint64_t)size, err)) != 0 ||
                (rc = read_full(t, NULL, padded - (uint64_t)size, err)) != 0)
                return rc;
            t->longname[size] = '\0';
            t->have_long = 1;
            continue;
        }
        if (type != '0' && type != '\0' && type != '7') {
            /* Directories, links, PAX headers: nothing to ingest. */
            if ((rc = read_full(t, NULL, padded, err)) != 0)
                return rc;
            t->have_long = 0;
            continue;
        }
        member_name(t, b, name);
        if ((uint64_t)size > max) {
            return rv_error_set(err, RV_ERR_LIMIT, (int64_t)at, -1,
                                "archive: member '%.200s' is %lld bytes, over the limit of %zu",
                                name, (long long)size, max);
        }
        if (!data) {
            /* Only its name and size: the bytes are read past, not kept. */
            if ((rc = read_full(t, NULL, padded, err)) != 0)
                return rc;
            *len = (size_t)size;
            return 1;
        }
        uint8_t *buf = malloc(size ? (size_t)size : 1);
        if (!buf)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        if ((rc = read_full(t, buf, (uint64_t)size, err)) != 0 ||
            (rc = read_full(t, NULL, padded - (uint64_t)size, err)) != 0) {
            free(buf);
            return rc;
        }
        *data = buf;
        *len = (size_t)size;
        return 1;
    }
    return 0;
}
