/* API tokens (store/rv_db_tokens.c).
 *
 * Only the SHA-256 of a token is stored. Scopes are bits here and names
 * ('ingest', 'read', 'admin') in the table. The token format and the scope
 * names live here so that `reverie token` needs the store only; the
 * server's rv_auth.h uses the same values (checked at compile time in
 * server/rv_auth.c).
 *
 * Last use: the server checks requests against an in-memory copy of the
 * table and must never wait on the database for it, so a successful check
 * only notes the use (rv_db_token_note_use, a few instructions under a
 * mutex); the token refresher's rv_db_token_list writes the noted uses to
 * api_tokens.last_used_at in the same statement that reads the table. */
#ifndef RV_DB_TOKENS_H
#define RV_DB_TOKENS_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"

typedef struct rv_db rv_db;

#define RV_DB_SCOPE_INGEST 1u /* upload traces */
#define RV_DB_SCOPE_READ   2u /* everything that only reads, what-ifs included */
#define RV_DB_SCOPE_ADMIN  4u /* deletes, and implies every other scope */

#define RV_DB_TOKEN_ID_LEN 8  /* hex chars of the public id */
#define RV_DB_TOKEN_LEN    53 /* "rvt_" + 8 hex id + "_" + 40 hex secret */

typedef struct rv_db_token {
    int64_t id;
    char name[128];
    char token_sha256[65];
    unsigned scopes;
    int revoked;
} rv_db_token;

/* "ingest,read" -> bits; 0 when empty or a name is unknown. */
unsigned rv_db_scopes_parse(const char *csv);
/* bits -> "ingest,read,admin" into buf[len] (truncated to fit). */
void rv_db_scopes_str(unsigned scopes, char *buf, size_t len);
/* A new random token "rvt_<8 hex id>_<40 hex secret>" (getrandom) into
 * token[RV_DB_TOKEN_LEN + 1], its public id into id[RV_DB_TOKEN_ID_LEN + 1].
 * 0 or RV_ERR_IO. */
int rv_db_token_generate(char *token, char *id);

/* Stores a token's hash (borrowed, 64 lowercase hex) with its name and
 * scopes; *id (may be NULL) = its row id. */
int rv_db_token_create(rv_db *db, const char *name, unsigned scopes, const char *token_sha256,
                       int64_t *id, rv_error *err);
/* Looks a token hash up: 0 and *out filled when it exists and is not revoked
 * (last_used_at is updated at once), RV_ERR_NOTFOUND otherwise. */
int rv_db_token_verify(rv_db *db, const char *token_sha256, rv_db_token *out, rv_error *err);
int rv_db_token_revoke(rv_db *db, int64_t id, rv_error *err);
/* All tokens (revoked ones only when include_revoked). *rows new. Writes
 * the uses noted since the last call to last_used_at first (same
 * statement); noted uses stay pending when the statement fails. */
int rv_db_token_list(rv_db *db, int include_revoked, rv_db_token **rows, size_t *n, rv_error *err);
void rv_db_token_list_free(rv_db_token *rows, size_t n);

/* Notes that a request was authenticated with the token of this hash
 * (borrowed, 64 hex; anything else is ignored). Never touches the
 * database and never blocks on it: safe on an HTTP thread. Process-wide
 * (the HTTP layer has no database handle), at most 4096 distinct pending
 * hashes (more are dropped until the next flush). */
void rv_db_token_note_use(const char *token_sha256);

#endif
