/* Tests for the embedded default database (store/rv_pgembed.c): first
 * start (initdb), reuse of a running cluster, restart after a crash with a
 * stale postmaster.pid (dead pid, and a pid reused by an unrelated live
 * process), stop, URL precedence, and the root-without-user message. */
#include <CUnit/Basic.h>
#include <libpq-fe.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "pg_helper.h"
#include "rv_pgembed.h"
#include "common/rv_test_util.h"

static char g_dir[256], g_home[300];

static int answers(const char *ci)
{
    return PQping(ci) == PQPING_OK;
}

static long postmaster_pid(const char *datadir)
{
    char p[1100];
    long pid = -1;
    snprintf(p, sizeof(p), "%s/postmaster.pid", datadir);
    FILE *f = fopen(p, "r");
    if (f) {
        if (fscanf(f, "%ld", &pid) != 1)
            pid = -1;
        fclose(f);
    }
    return pid;
}

/* Rewrites the first line (the pid) of postmaster.pid. */
static void set_pid_line(const char *datadir, long pid)
{
    char p[1100], buf[8192];
    snprintf(p, sizeof(p), "%s/postmaster.pid", datadir);
    FILE *f = fopen(p, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    char *nl = strchr(buf, '\n');
    f = fopen(p, "w");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    fprintf(f, "%ld%s", pid, nl ? nl : "\n");
    fclose(f);
}

static void kill_postmaster(const char *datadir)
{
    long pid = postmaster_pid(datadir);
    CU_ASSERT_FATAL(pid > 0);
    kill((pid_t)pid, SIGKILL);
    /* Its children exit when they notice the postmaster is gone. */
    for (int i = 0; i < 100 && kill((pid_t)pid, 0) == 0; i++)
        usleep(50000);
    usleep(300000);
}

static void test_start_reuse_stop(void)
{
    rv_pgembed *a = NULL, *b = NULL;
    rv_error e;
    rv_error_clear(&e);
    int rc = rv_pgembed_start(g_home, &a, &e);
    if (rc)
        fprintf(stderr, "%s\n", e.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(rv_pgembed_started_here(a), 1);
    CU_ASSERT(answers(rv_pgembed_conninfo(a)));
    /* Unix socket only, in <home>/pg. */
    PGconn *c = PQconnectdb(rv_pgembed_conninfo(a));
    PGresult *r = PQexec(c, "SHOW listen_addresses");
    CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 0), "");
    PQclear(r);
    PQfinish(c);
    char sock[512];
    struct stat sb;
    snprintf(sock, sizeof(sock), "%s/pg/.s.PGSQL.5432", g_home);
    CU_ASSERT(stat(sock, &sb) == 0 && S_ISSOCK(sb.st_mode));
    /* When root, the directory belongs to the cluster user, 0700. */
    snprintf(sock, sizeof(sock), "%s/pg", g_home);
    CU_ASSERT_EQUAL(stat(sock, &sb), 0);
    CU_ASSERT_EQUAL(sb.st_mode & 0777, 0700);
    if (geteuid() == 0)
        CU_ASSERT_NOT_EQUAL(sb.st_uid, 0);

    /* A second start while it runs reuses it and will not stop it. */
    CU_ASSERT_EQUAL_FATAL(rv_pgembed_start(g_home, &b, &e), 0);
    CU_ASSERT_EQUAL(rv_pgembed_started_here(b), 0);
    CU_ASSERT_STRING_EQUAL(rv_pgembed_conninfo(a), rv_pgembed_conninfo(b));
    CU_ASSERT_EQUAL(rv_pgembed_stop(b, &e), 0);
    CU_ASSERT(answers(rv_pgembed_conninfo(a)));

    char ci[1024];
    snprintf(ci, sizeof(ci), "%s", rv_pgembed_conninfo(a));
    CU_ASSERT_EQUAL(rv_pgembed_stop(a, &e), 0);
    CU_ASSERT(!answers(ci));

    /* A restart reuses the cluster (no initdb; data survives). */
    CU_ASSERT_EQUAL_FATAL(rv_pgembed_start(g_home, &a, &e), 0);
    c = PQconnectdb(rv_pgembed_conninfo(a));
    PQclear(PQexec(c, "CREATE TABLE survives (x int)"));
    PQfinish(c);
    CU_ASSERT_EQUAL(rv_pgembed_stop(a, &e), 0);
    CU_ASSERT_EQUAL_FATAL(rv_pgembed_start(g_home, &a, &e), 0);
    CU_ASSERT_EQUAL(rv_pgembed_started_here(a), 1);
    c = PQconnectdb(rv_pgembed_conninfo(a));
    r = PQexec(c, "SELECT to_regclass('survives') IS NOT NULL");
    CU_ASSERT_STRING_EQUAL(PQgetvalue(r, 0, 0), "t");
    PQclear(r);
    PQfinish(c);
    CU_ASSERT_EQUAL(rv_pgembed_stop(a, &e), 0);
}

static void test_stale_pid(void)
{
    rv_pgembed *a = NULL;
    rv_error e;
    rv_error_clear(&e);
    CU_ASSERT_EQUAL_FATAL(rv_pgembed_start(g_home, &a, &e), 0);
    char datadir[1024];
    snprintf(datadir, sizeof(datadir), "%s", rv_pgembed_datadir(a));
    rv_pgembed_detach(a);

    /* Crash: kill -9 the postmaster; postmaster.pid names a dead pid. */
    kill_postmaster(datadir);
    CU_ASSERT(postmaster_pid(datadir) > 0);
    int rc = rv_pgembed_start(g_home, &a, &e);
    if (rc)
        fprintf(stderr, "after kill -9: %s\n", e.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL(rv_pgembed_started_here(a), 1);
    CU_ASSERT(answers(rv_pgembed_conninfo(a)));
    rv_pgembed_detach(a);

    /* Crash again, and the pid has since been reused by a live unrelated
     * process (postgres alone would take it for a running postmaster). */
    kill_postmaster(datadir);
    pid_t sleeper = fork();
    if (sleeper == 0) {
        execlp("sleep", "sleep", "60", (char *)NULL);
        _exit(127);
    }
    set_pid_line(datadir, (long)sleeper);
    rc = rv_pgembed_start(g_home, &a, &e);
    if (rc)
        fprintf(stderr, "after pid reuse: %s\n", e.message);
    CU_ASSERT_EQUAL(rc, 0);
    kill(sleeper, SIGKILL);
    waitpid(sleeper, NULL, 0);
    if (!rc) {
        CU_ASSERT(answers(rv_pgembed_conninfo(a)));
        CU_ASSERT_EQUAL(rv_pgembed_stop(a, &e), 0);
    }
}

static void test_url_and_user(void)
{
    char *ci = NULL;
    rv_pgembed *pg = NULL;
    rv_error e;
    rv_error_clear(&e);
    /* A URL never starts a server. */
    CU_ASSERT_EQUAL(
        rv_pgembed_resolve("postgresql://example.invalid/db", "/nonexistent/home", &ci, &pg, &e),
        0);
    CU_ASSERT_PTR_NULL(pg);
    CU_ASSERT_STRING_EQUAL(ci, "postgresql://example.invalid/db");
    free(ci);
    setenv("REVERIE_DATABASE_URL", "host=/nowhere", 1);
    CU_ASSERT_EQUAL(rv_pgembed_resolve(NULL, "/nonexistent/home", &ci, &pg, &e), 0);
    CU_ASSERT_STRING_EQUAL(ci, "host=/nowhere");
    CU_ASSERT_PTR_NULL(pg);
    free(ci);
    unsetenv("REVERIE_DATABASE_URL");

    if (geteuid() == 0) {
        /* Root with no unprivileged user: a message that says what to do. */
        char home2[400];
        snprintf(home2, sizeof(home2), "%s/nouser", g_dir);
        setenv("REVERIE_PG_USER", "rv_no_such_user_x", 1);
        CU_ASSERT_NOT_EQUAL(rv_pgembed_start(home2, &pg, &e), 0);
        unsetenv("REVERIE_PG_USER");
        printf("\n  root without user: %s\n", e.message);
        CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "useradd"));
        CU_ASSERT_PTR_NOT_NULL(strstr(e.message, "REVERIE_DATABASE_URL"));
    }
}

int main(void)
{
    char bindir[1024];
    rv_error e;
    if (rv_pgembed_find_bindir(NULL, bindir, sizeof(bindir), &e) != 0) {
        printf("skipped: %s\n", e.message);
        return 77;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(g_dir, sizeof(g_dir), "%s/rvpg-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_dir))
        return 1;
    chmod(g_dir, 0711);
    snprintf(g_home, sizeof(g_home), "%s/home", g_dir);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("pgembed", NULL, NULL);
    CU_add_test(s, "start, reuse, stop, restart", test_start_reuse_stop);
    CU_add_test(s, "stale postmaster.pid after a crash", test_stale_pid);
    CU_add_test(s, "URL precedence, root without user", test_url_and_user);
    unsigned fails = rv_test_run();
    /* Leave nothing running or on disk: a fast shutdown (SIGINT) of any
     * postmaster still recorded there. */
    char datadir[1024];
    snprintf(datadir, sizeof(datadir), "%s/pg/data", g_home);
    long pid = postmaster_pid(datadir);
    if (pid > 0 && kill((pid_t)pid, SIGINT) == 0)
        for (int i = 0; i < 200 && kill((pid_t)pid, 0) == 0; i++)
            usleep(50000);
    rv_testpg_rmtree(g_dir);
    return fails ? 1 : 0;
}
