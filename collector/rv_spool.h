/* The spool: traces waiting for the server, one file each, in a directory.
 *
 * A file is written atomically (temporary name, fsync, rename) as
 *   <job>.r<rank>.<host>.<pid>.<seq>.json.gz
 * with the job percent-encoded, so a later sender can recover the job and
 * rank. A sender claims a file by renaming it to "<name>.<pid>.claim"
 * (rename is atomic, so two processes never send the same file), deletes it
 * after a 2xx, and renames it back otherwise. Claims left by a process that
 * died are taken over. */
#ifndef RV_SPOOL_H
#define RV_SPOOL_H

#include <stddef.h>

#include "util/rv_error.h"
#include "rv_upload.h"

/* Default directory when REVERIE_SPOOL_DIR is unset. */
#define RV_SPOOL_DEFAULT_DIR "./reverie-spool"

/* REVERIE_SPOOL_DIR or the default (borrowed). */
const char *rv_spool_dir_from_env(void);

/* Writes data (borrowed) into dir (created when missing). On success returns
 * 0 and the final path in path (cap bytes). */
int rv_spool_write(const char *dir, const char *job, int rank, const void *data, size_t len,
                   char *path, size_t cap, rv_error *err);

/* Writes data to exactly `path`, atomically (tmp + fsync + rename). */
int rv_spool_write_file(const char *path, const void *data, size_t len, rv_error *err);

/* Parses job and rank back out of a spool file name (basename or path).
 * Returns 0, or RV_ERR_PARSE when the name is not a spool name. */
int rv_spool_parse_name(const char *name, char *job, size_t job_cap, int *rank);

typedef struct rv_spool_result {
    int sent, failed, skipped; /* skipped: claimed by a live process */
} rv_spool_result;

/* Sends every spooled file in dir, oldest first; deletes each one after a
 * 2xx. Returns 0 when all were sent (or there were none), RV_ERR_IO when some
 * stayed behind; *res (may be NULL) counts them. A missing dir is empty. */
int rv_spool_send_all(const char *dir, const rv_upload_opts *o, rv_spool_result *res,
                      rv_error *err);

#endif
