/* A tar archive read member by member (ustar, with GNU long names), plain
 * or gzip-compressed: the upload of a training job's ranks in one file.
 *
 * Memory is one member at a time (at most the caller's cap); the archive
 * itself is streamed. Directories, links and other non-file members are
 * skipped; PAX headers are skipped too (their long names are not read, so
 * a member then keeps its ustar name). */
#ifndef RV_TAR_H
#define RV_TAR_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"

#define RV_TAR_NAME_MAX 4096

/* Reads up to n bytes into buf: the count (0 at the end), or -1 on error. */
typedef long (*rv_tar_read_fn)(void *ctx, void *buf, size_t n);

typedef struct rv_tar rv_tar;

/* Over a file (gzip detected by its magic bytes). *out new (rv_tar_close). */
int rv_tar_open_file(const char *path, rv_tar **out, rv_error *err);
/* Over a reader of the uncompressed tar stream (ctx borrowed). */
int rv_tar_open_fn(rv_tar_read_fn fn, void *ctx, rv_tar **out, rv_error *err);

/* The next regular file: its name (NUL-terminated, into name[RV_TAR_NAME_MAX])
 * and its bytes (*data new, caller frees; at most max bytes, else
 * RV_ERR_LIMIT with the member named). Returns 1 with a member, 0 at the
 * end of the archive, or a negative rv_err (RV_ERR_PARSE for a damaged
 * header or a truncated archive, saying at which byte). data NULL: the
 * member's bytes are read past and not kept, *len is its size (a first
 * pass that sums what an archive inflates to). */
int rv_tar_next(rv_tar *t, size_t max, char *name, uint8_t **data, size_t *len, rv_error *err);

/* NULL-safe. */
void rv_tar_close(rv_tar *t);

#endif
