#include "pg_helper.h"

#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rv_pgembed.h"

static rv_testpg *g_live;

static int rm_one(const char *p, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(p) == 0 ? 0 : 0;
}

int rv_testpg_rmtree(const char *dir)
{
    return nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
}

static void at_exit_stop(void)
{
    if (g_live)
        rv_testpg_stop(g_live);
}

int rv_testpg_start(rv_testpg *t)
{
    char bindir[1024];
    rv_error e;

    memset(t, 0, sizeof(*t));
    rv_error_clear(&e);
    if (rv_pgembed_find_bindir(NULL, bindir, sizeof(bindir), &e) != 0) {
        printf("skipped: %s\n", e.message);
        return 77;
    }
    const char *tmp = getenv("TMPDIR");
    snprintf(t->dir, sizeof(t->dir), "%s/rvdb-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(t->dir)) {
        perror("mkdtemp");
        return 1;
    }
    /* The cluster may run as another user (we may be root): let it pass. */
    chmod(t->dir, 0711);
    snprintf(t->home, sizeof(t->home), "%s/home", t->dir);
    rv_pgembed *pg = NULL;
    if (rv_pgembed_start(t->home, &pg, &e) != 0) {
        fprintf(stderr, "cannot start a test PostgreSQL: %s\n", e.message);
        rv_testpg_rmtree(t->dir);
        t->dir[0] = '\0';
        return 1;
    }
    t->pg = pg;
    snprintf(t->conninfo, sizeof(t->conninfo), "%s", rv_pgembed_conninfo(pg));
    if (!g_live)
        atexit(at_exit_stop);
    g_live = t;
    return 0;
}

void rv_testpg_stop(rv_testpg *t)
{
    rv_error e;
    if (t->pg) {
        if (rv_pgembed_stop(t->pg, &e) != 0)
            fprintf(stderr, "test PostgreSQL stop: %s\n", e.message);
        t->pg = NULL;
    }
    if (t->dir[0]) {
        rv_testpg_rmtree(t->dir);
        t->dir[0] = '\0';
    }
    if (g_live == t)
        g_live = NULL;
}
