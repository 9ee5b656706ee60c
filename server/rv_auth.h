/* Bearer-token authentication with scopes.
 *
 * Tokens look like "rvt_<8 hex id>_<40 hex secret>". Only the SHA-256 of the
 * whole token is stored (in the database, by `reverie token create`); the
 * server keeps an in-memory copy of the token table, refreshed from the
 * database by a background thread, so that checking a request never blocks
 * an HTTP thread on the database. */
#ifndef RV_AUTH_H
#define RV_AUTH_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_sha256.h"

#define RV_SCOPE_INGEST 1u /* POST /v1/traces */
#define RV_SCOPE_READ   2u /* GET everything, what-ifs (they only read) */
#define RV_SCOPE_ADMIN  4u /* DELETE, and implies every other scope */

#define RV_TOKEN_ID_LEN 8  /* hex chars of the public id */
#define RV_TOKEN_LEN    53 /* "rvt_" + 8 hex id + "_" + 40 hex */

typedef struct rv_auth rv_auth;

/* One row of the token table as the server sees it. */
typedef struct rv_auth_token {
    char id[RV_TOKEN_ID_LEN + 1];
    char hash_hex[RV_SHA256_HEX_LEN + 1]; /* sha256 of the whole token */
    unsigned scopes;
} rv_auth_token;

/* required: when 0, every request passes as principal "" (loopback default). */
rv_auth *rv_auth_new(int required);
void rv_auth_free(rv_auth *a);
int rv_auth_required(const rv_auth *a);

/* Replaces the in-memory table with a copy of toks[0..n). 0 or RV_ERR_NOMEM. */
int rv_auth_set_tokens(rv_auth *a, const rv_auth_token *toks, size_t n);

/* Checks an Authorization header value (may be NULL) against scope bits
 * (any of them suffices; admin satisfies all). Returns 0 and copies the token
 * id into principal, 401 when missing, unknown or followed by anything but
 * spaces ("Bearer TOKEN junk"), 403 when the token lacks the scope.
 * Constant-time comparison of hashes. */
int rv_auth_check(rv_auth *a, const char *authorization, unsigned scope, char *principal,
                  size_t principal_len);

/* Who the caller is: like rv_auth_check with any scope, and the token's
 * scope bits into *scopes (all of them when auth is not required). 0 or
 * 401. */
int rv_auth_whoami(rv_auth *a, const char *authorization, char *principal, size_t principal_len,
                   unsigned *scopes);

/* Makes a new random token (from getrandom) into token[RV_TOKEN_LEN + 1] and
 * its id into id[RV_TOKEN_ID_LEN + 1]. 0 or RV_ERR_IO. */
int rv_auth_token_generate(char *token, char *id);

/* "ingest,read" -> bits; 0 when empty or a name is unknown. */
unsigned rv_auth_parse_scopes(const char *csv);
/* bits -> "ingest,read,admin" into buf. */
void rv_auth_scopes_str(unsigned scopes, char *buf, size_t len);

#endif
