/* Bearer tokens: generation, SHA-256 hashing, scope checks against an
 * in-memory copy of the token table. */
#include "rv_auth.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>

#include "rv_db_tokens.h"
#include "util/rv_error.h"

/* The store keeps scopes and tokens in the same shape (rv_db_tokens.h). */
_Static_assert(RV_SCOPE_INGEST == RV_DB_SCOPE_INGEST && RV_SCOPE_READ == RV_DB_SCOPE_READ &&
                   RV_SCOPE_ADMIN == RV_DB_SCOPE_ADMIN,
               "scope bits differ between rv_auth.h and rv_db_tokens.h");
_Static_assert(RV_TOKEN_LEN == RV_DB_TOKEN_LEN && RV_TOKEN_ID_LEN == RV_DB_TOKEN_ID_LEN,
               "token format differs between rv_auth.h and rv_db_tokens.h");

struct rv_auth {
    int required;
    pthread_rwlock_t lock;
    rv_auth_token *toks;
    size_t ntoks;
};

/* -------------------------------------------------------------- tokens */

rv_auth *rv_auth_new(int required)
{
    rv_auth *a = calloc(1, sizeof(*a));

    if (!a)
        return NULL;
    a->required = required;
    pthread_rwlock_init(&a->lock, NULL);
    return a;
}

void rv_auth_free(rv_auth *a)
{
    if (!a)
        return;
    pthread_rwlock_destroy(&a->lock);
    free(a->toks);
    free(a);
}

int rv_auth_required(const rv_auth *a)
{
    return a && a->required;
}

int rv_auth_set_tokens(rv_auth *a, const rv_auth_token *toks, size_t n)
{
    rv_auth_token *copy = NULL;

    if (n) {
        copy = malloc(n * sizeof(*copy));
        if (!copy)
            return RV_ERR_NOMEM;
        memcpy(copy, toks, n * sizeof(*copy));
    }
    pthread_rwlock_wrlock(&a->lock);
    free(a->toks);
    a->toks = copy;
    a->ntoks = n;
    pthread_rwlock_unlock(&a->lock);
    return 0;
}

static int hash_equal(const char *x, const char *y)
{
    unsigned char diff = 0;

    for (int i = 0; i < RV_SHA256_HEX_LEN; i++)
        diff |= (unsigned char)(x[i] ^ y[i]);
    return diff == 0;
}

int rv_auth_check(rv_auth *a, const char *authorization, unsigned scope, char *principal,
                  size_t principal_len)
{
    char hash[RV_SHA256_HEX_LEN + 1];
    int rc = 401;

    if (principal_len)
        principal[0] = '\0';
    if (!a || !a->required)
        return 0;
    if (!authorization || strncasecmp(authorization, "Bearer ", 7) != 0)
        return 401;
    const char *tok = authorization + 7;
    while (*tok == ' ')
        tok++;
    /* RFC 6750's token68 alphabet: a byte outside it (a control byte, a
     * quote, a non-ASCII byte) is never part of a token. */
    size_t len =
        strspn(tok, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/");
    len += strspn(tok + len, "=");
    if (len != RV_TOKEN_LEN)
        return 401;
    /* "Bearer TOKEN" and nothing else: trailing words are not ignored. */
    if (tok[len + strspn(tok + len, " \t")] != '\0')
        return 401;
    rv_sha256_hex(tok, len, hash);
    pthread_rwlock_rdlock(&a->lock);
    for (size_t i = 0; i < a->ntoks; i++) {
        if (!hash_equal(hash, a->toks[i].hash_hex))
            continue;
        unsigned have = a->toks[i].scopes;
        rc = (have & RV_SCOPE_ADMIN) || (have & scope) ? 0 : 403;
        snprintf(principal, principal_len, "%s", a->toks[i].id);
        break;
    }
    pthread_rwlock_unlock(&a->lock);
    /* A known token, whatever its scopes: its last use goes to the
     * database with the next token refresh, never from this thread. */
    if (rc != 401)
        rv_db_token_note_use(hash);
    return rc;
}

int rv_auth_whoami(rv_auth *a, const char *authorization, char *principal, size_t principal_len,
                   unsigned *scopes)
{
    *scopes = RV_SCOPE_INGEST | RV_SCOPE_READ | RV_SCOPE_ADMIN;
    int rc = rv_auth_check(a, authorization, *scopes, principal, principal_len);
    if (rc != 0 || !a || !a->required)
        return rc;
    *scopes = 0;
    pthread_rwlock_rdlock(&a->lock);
    for (size_t i = 0; i < a->ntoks; i++)
        if (strcmp(a->toks[i].id, principal) == 0)
            *scopes = a->toks[i].scopes;
    pthread_rwlock_unlock(&a->lock);
    return *scopes ? 0 : 401;
}

/* Tokens and scope lists are the store's (store/rv_db_tokens.c): the
 * server, the CLI and the database agree on one format. */
int rv_auth_token_generate(char *token, char *id)
{
    return rv_db_token_generate(token, id);
}

unsigned rv_auth_parse_scopes(const char *csv)
{
    return rv_db_scopes_parse(csv);
}

void rv_auth_scopes_str(unsigned scopes, char *buf, size_t len)
{
    rv_db_scopes_str(scopes, buf, len);
}
