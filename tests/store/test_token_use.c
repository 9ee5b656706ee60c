/* The last use of an API token, through the production path: reveried's
 * token refresher loads the table with rv_db_token_list into rv_auth
 * (server/rv_server.c refresh_tokens), a request is checked by
 * rv_auth_check (server/rv_http.c), and the next refresh writes
 * api_tokens.last_used_at. Needs PostgreSQL (skips with 77 without). */
#include <CUnit/Basic.h>
#include <libpq-fe.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pg_helper.h"
#include "rv_auth.h"
#include "rv_db.h"
#include "util/rv_sha256.h"
#include "common/rv_test_util.h"

static rv_testpg g_pg;
static rv_db *g_db;

/* What the server's refresher does every second. */
static int refresh(rv_auth *a)
{
    rv_db_token *rows = NULL;
    size_t n = 0;
    rv_error e;
    if (rv_db_token_list(g_db, 0, &rows, &n, &e) != 0) {
        fprintf(stderr, "token list: %s\n", e.message);
        return -1;
    }
    rv_auth_token *toks = calloc(n + 1, sizeof(*toks));
    for (size_t i = 0; i < n && toks; i++) {
        snprintf(toks[i].id, sizeof(toks[i].id), "%lld", (long long)rows[i].id);
        snprintf(toks[i].hash_hex, sizeof(toks[i].hash_hex), "%s", rows[i].token_sha256);
        toks[i].scopes = rows[i].scopes;
    }
    int rc = toks ? rv_auth_set_tokens(a, toks, n) : -1;
    free(toks);
    rv_db_token_list_free(rows, n);
    return rc;
}

/* last_used_at of token row id: 1 set, 0 NULL, -1 no row. */
static int used(int64_t id)
{
    char sql[128];
    snprintf(sql, sizeof(sql),
             "SELECT (last_used_at IS NOT NULL)::int FROM api_tokens WHERE id = %lld",
             (long long)id);
    PGconn *c = PQconnectdb(g_pg.conninfo);
    PGresult *r = PQexec(c, sql);
    int v =
        PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1 ? atoi(PQgetvalue(r, 0, 0)) : -1;
    PQclear(r);
    PQfinish(c);
    return v;
}

/* A new token with these scopes: its text into tok, its row id back. */
static int64_t make_token(const char *name, unsigned scopes, char tok[RV_TOKEN_LEN + 1])
{
    char pub[RV_TOKEN_ID_LEN + 1], hash[RV_SHA256_HEX_LEN + 1];
    int64_t id = 0;
    rv_error e;
    CU_ASSERT_EQUAL_FATAL(rv_auth_token_generate(tok, pub), 0);
    rv_sha256_hex(tok, strlen(tok), hash);
    CU_ASSERT_EQUAL_FATAL(rv_db_token_create(g_db, name, scopes, hash, &id, &e), 0);
    return id;
}

static void test_last_used(void)
{
    char reader[RV_TOKEN_LEN + 1], uploader[RV_TOKEN_LEN + 1], idle[RV_TOKEN_LEN + 1];
    char hdr[128], principal[32];
    int64_t r_id = make_token("reader", RV_SCOPE_READ, reader);
    int64_t u_id = make_token("uploader", RV_SCOPE_INGEST, uploader);
    int64_t i_id = make_token("idle", RV_SCOPE_READ, idle);
    rv_auth *a = rv_auth_new(1);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_EQUAL_FATAL(refresh(a), 0);

    /* Requests: one allowed, one known token without the scope, one
     * unknown token. None waits for the database. */
    snprintf(hdr, sizeof(hdr), "Bearer %s", reader);
    CU_ASSERT_EQUAL(rv_auth_check(a, hdr, RV_SCOPE_READ, principal, sizeof(principal)), 0);
    snprintf(hdr, sizeof(hdr), "Bearer %s", uploader);
    CU_ASSERT_EQUAL(rv_auth_check(a, hdr, RV_SCOPE_READ, principal, sizeof(principal)), 403);
    snprintf(hdr, sizeof(hdr), "Bearer rvt_00000000_%040d", 0);
    CU_ASSERT_EQUAL(rv_auth_check(a, hdr, RV_SCOPE_READ, principal, sizeof(principal)), 401);
    CU_ASSERT_EQUAL(used(r_id), 0);
    CU_ASSERT_EQUAL(used(u_id), 0);

    /* The next refresh writes the uses down. */
    CU_ASSERT_EQUAL(refresh(a), 0);
    CU_ASSERT_EQUAL(used(r_id), 1);
    CU_ASSERT_EQUAL(used(u_id), 1);
    CU_ASSERT_EQUAL(used(i_id), 0);
    rv_auth_free(a);
}

int main(void)
{
    int rc = rv_testpg_start(&g_pg);
    if (rc)
        return rc;
    const char *src = getenv("RV_SOURCE_DIR");
    char mig[4096];
    snprintf(mig, sizeof(mig), "%s/migrations", src ? src : ".");
    rv_error e;
    if (rv_db_open(g_pg.conninfo, 2, &g_db, &e) != 0 || rv_db_migrate(g_db, mig, &e) != 0) {
        fprintf(stderr, "%s\n", e.message);
        return 1;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("token_use", NULL, NULL);
    CU_add_test(s, "last_used_at after authenticated requests", test_last_used);
    unsigned fails = rv_test_run();
    rv_db_close(g_db);
    rv_testpg_stop(&g_pg);
    return fails ? 1 : 0;
}
