/* What an upload must pass before it costs anything, and who is asking:
 * the caller's token and scopes (ownership of training jobs, what a
 * duplicate answer may show) and the free-space reserve of the database's
 * disk (docs/internals/server.md, "Limits"). */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/statvfs.h>

#include "rv_api_internal.h"
#include "rv_auth.h"

void rv_api_caller(rv_app *a, rv_req *r, char *who, size_t cap, unsigned *scopes)
{
    *scopes = RV_SCOPE_INGEST | RV_SCOPE_READ | RV_SCOPE_ADMIN;
    who[0] = '\0';
    if (!a->auth)
        return;
    if (rv_auth_whoami(a->auth, rv_req_header(r, "Authorization"), who, cap, scopes) != 0) {
        who[0] = '\0';
        *scopes = 0;
    }
}

int64_t rv_api_disk_free(const rv_app *a)
{
    struct statvfs sv;
    if (!a->cfg.disk_path || statvfs(a->cfg.disk_path, &sv) != 0)
        return -1;
    /* What an unprivileged process (PostgreSQL) may still write. */
    return (int64_t)((uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize);
}

int rv_api_disk_low(const rv_app *a, uint64_t incoming, int64_t *free_bytes)
{
    int64_t f = rv_api_disk_free(a);
    if (free_bytes)
        *free_bytes = f;
    if (f < 0 || a->cfg.disk_reserve == 0)
        return 0;
    /* The upload will be stored compressed, with its snapshot: about its
     * size as sent, twice for margin (WAL writes it once more). */
    return (uint64_t)f < a->cfg.disk_reserve + 2 * incoming;
}

int rv_api_disk_guard(rv_req *r, rv_app *a, uint64_t incoming)
{
    int64_t f = 0;
    if (!rv_api_disk_low(a, incoming, &f))
        return 0;
    rv_req_error(r, 507, "insufficient_storage", NULL,
                 "the database's disk has %lld bytes free; storing %llu more bytes would go "
                 "below this server's reserve of %llu bytes (--disk-reserve): uploads are "
                 "refused until space is freed (delete traces or grow the disk); reads and "
                 "what-ifs still work",
                 (long long)f, (unsigned long long)incoming,
                 (unsigned long long)a->cfg.disk_reserve);
    rv_req_add_header(r, "Retry-After", "60");
    return -1;
}

uint64_t rv_api_spool_room(const rv_app *a)
{
    struct statvfs sv;
    if (!a->cfg.disk_reserve || !a->cfg.spool_dir || statvfs(a->cfg.spool_dir, &sv) != 0)
        return UINT64_MAX;
    uint64_t f = (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
    return f > a->cfg.disk_reserve ? f - a->cfg.disk_reserve : 0;
}

void rv_api_spool_full(rv_req *r, const rv_app *a, uint64_t room)
{
    rv_req_error(r, 507, "insufficient_storage", NULL,
                 "the answer is spooled to disk on its way out and only %llu bytes may be "
                 "written there above this server's free-space reserve of %llu bytes "
                 "(--disk-reserve); retry later, or ask with Accept-Encoding: gzip",
                 (unsigned long long)room, (unsigned long long)a->cfg.disk_reserve);
    rv_req_add_header(r, "Retry-After", "60");
}
