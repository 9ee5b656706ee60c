/* API tokens: the token format and scope names, the api_tokens rows
 * (create, verify, revoke, list) and last use, noted by the server without
 * touching the database and written by the next token list
 * (rv_db_tokens.h). */
#include "rv_db_tokens.h"
#include "rv_db_internal.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#define PENDING_MAX 4096

static const char *const scope_names[] = {"ingest", "read", "admin"};

unsigned rv_db_scopes_parse(const char *csv)
{
    unsigned bits = 0;
    const char *p = csv;

    if (!p || !*p)
        return 0;
    while (*p) {
        size_t n = strcspn(p, ",");
        unsigned bit = 0;
        for (unsigned i = 0; i < 3 && !bit; i++)
            if (n == strlen(scope_names[i]) && strncmp(p, scope_names[i], n) == 0)
                bit = 1u << i;
        if (!bit)
            return 0;
        bits |= bit;
        p += n;
        if (*p == ',')
            p++;
    }
    return bits;
}

void rv_db_scopes_str(unsigned scopes, char *buf, size_t len)
{
    size_t off = 0;

    if (len)
        buf[0] = '\0';
    for (unsigned i = 0; i < 3; i++) {
        if (!(scopes & (1u << i)))
            continue;
        int n = snprintf(buf + off, len - off, "%s%s", off ? "," : "", scope_names[i]);
        if (n < 0 || (size_t)n >= len - off)
            return;
        off += (size_t)n;
    }
}

int rv_db_token_generate(char *token, char *id)
{
    unsigned char rnd[24];
    size_t got = 0;

    while (got < sizeof(rnd)) {
        ssize_t n = getrandom(rnd + got, sizeof(rnd) - got, 0);
        if (n <= 0)
            return RV_ERR_IO;
        got += (size_t)n;
    }
    char *p = token;
    p += sprintf(p, "rvt_");
    for (int i = 0; i < 4; i++)
        p += sprintf(p, "%02x", rnd[i]);
    *p++ = '_';
    for (int i = 4; i < 24; i++)
        p += sprintf(p, "%02x", rnd[i]);
    memcpy(id, token + 4, RV_DB_TOKEN_ID_LEN);
    id[RV_DB_TOKEN_ID_LEN] = '\0';
    return 0;
}

/* ---- noted uses ----------------------------------------------------------- */

static pthread_mutex_t pending_mu = PTHREAD_MUTEX_INITIALIZER;
static char pending[PENDING_MAX][65];
static size_t npending;

static int is_hash(const char *s)
{
    size_t n = 0;
    if (!s)
        return 0;
    while (n < 64 && ((s[n] >= '0' && s[n] <= '9') || (s[n] >= 'a' && s[n] <= 'f')))
        n++;
    return n == 64 && s[64] == '\0';
}

/* Adds h unless it is pending already; the caller holds pending_mu. */
static void pending_add(const char *h)
{
    for (size_t i = 0; i < npending; i++)
        if (memcmp(pending[i], h, 64) == 0)
            return;
    if (npending < PENDING_MAX)
        memcpy(pending[npending++], h, 65);
}

void rv_db_token_note_use(const char *token_sha256)
{
    if (!is_hash(token_sha256))
        return;
    pthread_mutex_lock(&pending_mu);
    pending_add(token_sha256);
    pthread_mutex_unlock(&pending_mu);
}

/* Moves the pending hashes into a text[] literal (new; "{}" when none) and
 * *n; NULL on OOM (they stay pending). */
static char *pending_take(size_t *n)
{
    pthread_mutex_lock(&pending_mu);
    char *lit = malloc(npending * 65 + 3);
    if (lit) {
        char *p = lit;
        *p++ = '{';
        for (size_t i = 0; i < npending; i++) {
            if (i)
                *p++ = ',';
            memcpy(p, pending[i], 64);
            p += 64;
        }
        *p++ = '}';
        *p = '\0';
        *n = npending;
        npending = 0;
    }
    pthread_mutex_unlock(&pending_mu);
    return lit;
}

/* Puts the hashes of a literal from pending_take back (the write failed). */
static void pending_restore(const char *lit, size_t n)
{
    pthread_mutex_lock(&pending_mu);
    for (size_t i = 0; i < n; i++) {
        char h[65];
        memcpy(h, lit + 1 + i * 65, 64);
        h[64] = '\0';
        pending_add(h);
    }
    pthread_mutex_unlock(&pending_mu);
}

/* ---- rows ----------------------------------------------------------------- */

/* The table's scope names as written by rv_db_token_create; read leniently
 * (as before the store had a strict parser), so an odd row keeps the scopes
 * it names. */
static unsigned scopes_from_csv(const char *csv)
{
    unsigned s = 0;
    for (unsigned i = 0; i < 3; i++)
        if (strstr(csv, scope_names[i]))
            s |= 1u << i;
    return s;
}

static void fill_token(rv_db_token *t, PGresult *r, int row)
{
    memset(t, 0, sizeof(*t));
    t->id = strtoll(PQgetvalue(r, row, 0), NULL, 10);
    snprintf(t->name, sizeof(t->name), "%s", PQgetvalue(r, row, 1));
    snprintf(t->token_sha256, sizeof(t->token_sha256), "%s", PQgetvalue(r, row, 2));
    t->scopes = scopes_from_csv(PQgetvalue(r, row, 3));
    t->revoked = PQnfields(r) > 4 && PQgetvalue(r, row, 4)[0] == 't';
}

int rv_db_token_create(rv_db *db, const char *name, unsigned scopes, const char *token_sha256,
                       int64_t *id, rv_error *err)
{
    char names[40], arr[48];
    rv_db_scopes_str(scopes, names, sizeof(names));
    snprintf(arr, sizeof(arr), "{%s}", names);
    const char *vals[] = {name ? name : "", token_sha256, arr};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r = rv_db__q(pc, "create token",
                           "INSERT INTO api_tokens (name, token_sha256, scopes) VALUES ($1, $2, "
                           "$3::text[]) RETURNING id",
                           3, vals, PGRES_TUPLES_OK, err);
    if (r && id)
        *id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    int rc = r ? 0 : RV_ERR_IO;
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_token_verify(rv_db *db, const char *token_sha256, rv_db_token *out, rv_error *err)
{
    const char *vals[] = {token_sha256};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = 0;
    PGresult *r = rv_db__qp(pc, RV_DB__ST_TOKEN_VERIFY, vals, NULL, NULL, 0, PGRES_TUPLES_OK, err);
    if (!r)
        rc = RV_ERR_IO;
    else if (PQntuples(r) == 0)
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "unknown or revoked token");
    else if (out)
        fill_token(out, r, 0);
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

int rv_db_token_revoke(rv_db *db, int64_t id, rv_error *err)
{
    char id_s[24];
    rv_db__id_text(id_s, id);
    const char *vals[] = {id_s};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    PGresult *r =
        rv_db__q(pc, "revoke token",
                 "UPDATE api_tokens SET revoked_at = coalesce(revoked_at, now()) WHERE id = $1", 1,
                 vals, PGRES_COMMAND_OK, err);
    int rc = !r ? RV_ERR_IO
             : strcmp(PQcmdTuples(r), "0") == 0
                 ? rv_error_set(err, RV_ERR_NOTFOUND, -1, -1, "no token with id %s", id_s)
                 : 0;
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

/* The noted uses are written by a data-modifying WITH of the same
 * statement, which runs to completion whether or not the SELECT reads it. */
#define TOUCH_USED                                                                                 \
    "WITH used AS (UPDATE api_tokens SET last_used_at = now() WHERE token_sha256 = "               \
    "ANY($1::text[]) AND revoked_at IS NULL RETURNING 1) "

int rv_db_token_list(rv_db *db, int include_revoked, rv_db_token **rows, size_t *n, rv_error *err)
{
    size_t nused = 0;
    *rows = NULL;
    *n = 0;
    char *used = pending_take(&nused);
    if (!used)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    const char *vals[] = {used};
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc) {
        pending_restore(used, nused);
        free(used);
        return RV_ERR_IO;
    }
    int rc = 0;
    PGresult *r = rv_db__q(
        pc, "token list",
        include_revoked ? TOUCH_USED "SELECT id, name, token_sha256, array_to_string(scopes, ','), "
                                     "revoked_at IS NOT NULL FROM api_tokens ORDER BY id"
                        : TOUCH_USED "SELECT id, name, token_sha256, array_to_string(scopes, ','), "
                                     "false FROM api_tokens WHERE revoked_at IS NULL ORDER BY id",
        1, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        pending_restore(used, nused);
    } else {
        size_t k = (size_t)PQntuples(r);
        *rows = calloc(k + 1, sizeof(**rows));
        if (!*rows) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        } else {
            for (size_t i = 0; i < k; i++)
                fill_token(&(*rows)[i], r, (int)i);
            *n = k;
        }
    }
    PQclear(r);
    rv_db__release(db, pc);
    free(used);
    return rc;
}

void rv_db_token_list_free(rv_db_token *rows, size_t n)
{
    (void)n;
    free(rows);
}
