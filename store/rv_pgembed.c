/* The embedded default database: finding the PostgreSQL binaries, creating
 * and starting a private cluster under $REVERIE_HOME (as an unprivileged
 * user when run as root), crash recovery of a stale postmaster.pid, and
 * picking a URL or the cluster for a process (rv_pgembed.h). */
#include "rv_pgembed.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <libpq-fe.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#define PG_PORT         "5432"
#define DB_NAME         "reverie"
#define START_TIMEOUT_S "60"
/* Parent of the homes chosen when ./var is out of the database user's reach. */
#define RV_FALLBACK_ROOT "/var/lib/reverie"

struct rv_pgembed {
    char home[PATH_MAX];
    char pgdir[PATH_MAX];
    char datadir[PATH_MAX];
    char bindir[PATH_MAX];
    char *conninfo;
    char admin[PATH_MAX * 2 + 128]; /* conninfo of database "postgres" */
    int started_here;
    int adopted;      /* found running, left by a process that is gone */
    int owner_fd;     /* pg.owner, flock'ed while this handle owns the cluster */
    int run_as_other; /* 1 when commands run as uid/gid below (we are root) */
    uid_t uid;
    gid_t gid;
    char user[64];
};

/* ---- small helpers -------------------------------------------------------- */

/* out = a + "/" + b; -1 (and out = "") when it does not fit. */
static int path_join(char *out, size_t cap, const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    if (la + 1 + lb + 1 > cap) {
        if (cap)
            out[0] = '\0';
        return -1;
    }
    memmove(out, a, la);
    out[la] = '/';
    memcpy(out + la + 1, b, lb + 1);
    return 0;
}

static int is_exec(const char *dir, const char *name)
{
    char p[PATH_MAX];
    return path_join(p, sizeof(p), dir, name) == 0 && access(p, X_OK) == 0;
}

static int bindir_ok(const char *dir)
{
    return is_exec(dir, "initdb") && is_exec(dir, "pg_ctl") && is_exec(dir, "postgres");
}

int rv_pgembed_find_bindir(const char *major, char *out, size_t cap, rv_error *err)
{
    const char *env = getenv("REVERIE_PG_BINDIR");
    if (env && *env) {
        if (!bindir_ok(env))
            return rv_error_set(err, RV_ERR_NOTFOUND, -1, -1,
                                "REVERIE_PG_BINDIR=%s has no initdb, pg_ctl and postgres", env);
        snprintf(out, cap, "%s", env);
        return 0;
    }
    char p[PATH_MAX];
    if (major && snprintf(p, sizeof(p), "/usr/lib/postgresql/%s/bin", major) > 0 && bindir_ok(p)) {
        snprintf(out, cap, "%s", p);
        return 0;
    }
    /* Highest numeric version under /usr/lib/postgresql (Debian layout). */
    long best = -1;
    DIR *d = opendir("/usr/lib/postgresql");
    if (d) {
        struct dirent *de;
        while ((de = readdir(d))) {
            char *end;
            long v = strtol(de->d_name, &end, 10);
            if (end == de->d_name || *end || v <= best)
                continue;
            if (snprintf(p, sizeof(p), "/usr/lib/postgresql/%s/bin", de->d_name) > 0 &&
                bindir_ok(p)) {
                best = v;
                snprintf(out, cap, "%s", p);
            }
        }
        closedir(d);
    }
    if (best >= 0)
        return 0;
    FILE *f = popen("pg_config --bindir 2>/dev/null", "r");
    if (f) {
        char line[PATH_MAX] = "";
        if (fgets(line, sizeof(line), f))
            line[strcspn(line, "\r\n")] = '\0';
        pclose(f);
        if (*line && bindir_ok(line)) {
            snprintf(out, cap, "%s", line);
            return 0;
        }
    }
    return rv_error_set(err, RV_ERR_NOTFOUND, -1, -1,
                        "no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin "
                        "and `pg_config --bindir`): install them (Debian: apt-get install "
                        "postgresql), set REVERIE_PG_BINDIR, or set REVERIE_DATABASE_URL to use "
                        "an existing server");
}

/* Closes every descriptor above stderr, so the postmaster does not inherit
 * the caller's sockets and pipes. */
static void close_other_fds(void)
{
    long max = sysconf(_SC_OPEN_MAX);
    if (max < 0 || max > 65536)
        max = 65536;
#ifdef SYS_close_range
    if (syscall(SYS_close_range, 3, ~0U, 0) == 0)
        return;
#endif
    for (long fd = 3; fd < max; fd++)
        close((int)fd);
}

/* In a forked child: become the cluster user. Returns 0 or -1. */
static int drop_privileges(const rv_pgembed *pg)
{
    if (!pg->run_as_other)
        return 0;
    if (initgroups(pg->user, pg->gid) != 0 || setgid(pg->gid) != 0 || setuid(pg->uid) != 0)
        return -1;
    if (setuid(0) == 0) /* must not be able to get root back */
        return -1;
    return 0;
}

/* Runs argv (argv[0] a full path) as the cluster user with stdout and
 * stderr appended to logpath (NULL: /dev/null). Returns the exit status, or
 * -1 when it could not run or was killed. */
static int run_cmd(const rv_pgembed *pg, char *const argv[], const char *logpath)
{
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        close_other_fds();
        if (drop_privileges(pg) != 0)
            _exit(126);
        int in = open("/dev/null", O_RDONLY);
        int outfd = logpath ? open(logpath, O_WRONLY | O_APPEND | O_CREAT, 0600)
                            : open("/dev/null", O_WRONLY);
        if (in < 0 || outfd < 0)
            _exit(126);
        dup2(in, 0);
        dup2(outfd, 1);
        dup2(outfd, 2);
        if (chdir(pg->pgdir) != 0)
            _exit(126);
        /* Libpq and server variables of the caller must not leak in. */
        unsetenv("PGDATA");
        unsetenv("PGHOST");
        unsetenv("PGPORT");
        unsetenv("PGOPTIONS");
        if (pg->run_as_other) {
            struct passwd *pw = getpwuid(pg->uid);
            if (pw && pw->pw_dir)
                setenv("HOME", pw->pw_dir, 1);
            setenv("USER", pg->user, 1);
            setenv("LOGNAME", pg->user, 1);
        }
        execv(argv[0], argv);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Last lines of a log file, for error messages. */
static void log_tail(const char *path, char *out, size_t cap)
{
    out[0] = '\0';
    FILE *f = fopen(path, "r");
    if (!f)
        return;
    if (fseek(f, 0, SEEK_END) == 0) {
        long sz = ftell(f);
        long from = sz > (long)cap - 1 ? sz - (long)cap + 1 : 0;
        fseek(f, from, SEEK_SET);
    }
    size_t n = fread(out, 1, cap - 1, f);
    out[n] = '\0';
    fclose(f);
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\n')
            out[i] = ' ';
}

/* Checks in a child with the cluster user's rights that it can use dir
 * (search only when search_only, else read, write and search); on failure
 * writes the first component it cannot search to blocked. */
static int user_can_reach_as(const rv_pgembed *pg, const char *dir, int search_only, char *blocked,
                             size_t cap)
{
    int fds[2];
    blocked[0] = '\0';
    if (pipe(fds) != 0)
        return -1;
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return -1;
    }
    if (pid == 0) {
        close(fds[0]);
        if (drop_privileges(pg) != 0)
            _exit(2);
        char p[PATH_MAX];
        snprintf(p, sizeof(p), "%s", dir);
        for (char *s = p + 1;; s++) {
            if (*s == '/' || *s == '\0') {
                char c = *s;
                *s = '\0';
                if (access(p, X_OK) != 0) {
                    ssize_t w = write(fds[1], p, strlen(p));
                    (void)w;
                    _exit(1);
                }
                *s = c;
                if (!c)
                    break;
            }
        }
        _exit(access(dir, search_only ? X_OK : R_OK | W_OK | X_OK) == 0 ? 0 : 1);
    }
    close(fds[1]);
    ssize_t n = read(fds[0], blocked, cap - 1);
    blocked[n > 0 ? n : 0] = '\0';
    close(fds[0]);
    int st;
    while (waitpid(pid, &st, 0) < 0)
        if (errno != EINTR)
            return -1;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

static int user_can_reach(const rv_pgembed *pg, const char *dir, char *blocked, size_t cap)
{
    return user_can_reach_as(pg, dir, 0, blocked, cap);
}

static int mkdir_p(const char *dir, mode_t mode)
{
    char p[PATH_MAX];
    snprintf(p, sizeof(p), "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = '\0';
        if (mkdir(p, mode) != 0 && errno != EEXIST)
            return -1;
        *s = '/';
    }
    return mkdir(p, mode) != 0 && errno != EEXIST ? -1 : 0;
}

/* Appends a libpq keyword='value' pair with the value quoted. */
static void conn_kv(char *out, size_t cap, const char *key, const char *val)
{
    size_t n = strlen(out);
    n += (size_t)snprintf(out + n, n < cap ? cap - n : 0, "%s%s='", n ? " " : "", key);
    for (const char *s = val; *s && n + 3 < cap; s++) {
        if (*s == '\'' || *s == '\\')
            out[n++] = '\\';
        out[n++] = *s;
    }
    if (n + 2 <= cap) {
        out[n++] = '\'';
        out[n] = '\0';
    }
}

/* Single-quotes s for /bin/sh (pg_ctl passes -o through a shell). */
static void sh_quote(char *out, size_t cap, const char *s)
{
    size_t n = 0;
    out[n++] = '\'';
    for (; *s && n + 5 < cap; s++) {
        if (*s == '\'') {
            memcpy(out + n, "'\\''", 4);
            n += 4;
        } else {
            out[n++] = *s;
        }
    }
    out[n++] = '\'';
    out[n] = '\0';
}

/* ---- cluster life cycle ----------------------------------------------------- */

static int read_pid_file(const char *datadir, long *pid)
{
    char p[PATH_MAX];
    path_join(p, sizeof(p), datadir, "postmaster.pid");
    FILE *f = fopen(p, "r");
    if (!f)
        return -1;
    int ok = fscanf(f, "%ld", pid) == 1;
    fclose(f);
    return ok ? 0 : -1;
}

/* True when pid is a running postgres process (a zombie is not: a killed
 * postmaster whose parent has not reaped it still has a /proc entry). */
static int pid_is_postgres(long pid)
{
    char p[64], comm[64] = "", stat[512] = "";
    snprintf(p, sizeof(p), "/proc/%ld/comm", pid);
    FILE *f = fopen(p, "r");
    if (!f)
        return 0;
    if (!fgets(comm, sizeof(comm), f))
        comm[0] = '\0';
    fclose(f);
    if (strncmp(comm, "postgres", 8) != 0 && strncmp(comm, "postmaster", 10) != 0)
        return 0;
    snprintf(p, sizeof(p), "/proc/%ld/stat", pid);
    f = fopen(p, "r");
    if (f) {
        if (!fgets(stat, sizeof(stat), f))
            stat[0] = '\0';
        fclose(f);
    }
    const char *end = strrchr(stat, ')');
    return !(end && (end[1] == ' ') && (end[2] == 'Z' || end[2] == 'X'));
}

/* Removes postmaster.pid and the socket lock when the pid they name is not
 * a live postgres: left behind by a crash (kill -9, power loss), perhaps with
 * the pid since reused by an unrelated process, which postgres itself would
 * take for a live postmaster. */
static void clear_stale_pid(rv_pgembed *pg)
{
    long pid;
    if (read_pid_file(pg->datadir, &pid) != 0)
        return;
    if (pid > 0 && pid_is_postgres(pid))
        return;
    char p[PATH_MAX];
    path_join(p, sizeof(p), pg->datadir, "postmaster.pid");
    unlink(p);
    path_join(p, sizeof(p), pg->pgdir, ".s.PGSQL." PG_PORT ".lock");
    unlink(p);
}

static int server_answers(const char *conninfo_postgres_db)
{
    return PQping(conninfo_postgres_db) == PQPING_OK;
}

static int wait_answer(const char *ci, int seconds)
{
    for (int i = 0; i < seconds * 10; i++) {
        PGPing r = PQping(ci);
        if (r == PQPING_OK)
            return 0;
        if (r == PQPING_NO_ATTEMPT)
            return -1;
        usleep(100 * 1000);
    }
    return -1;
}

static int ensure_database(const char *admin_ci, rv_error *err)
{
    PGconn *c = PQconnectdb(admin_ci);
    int rc = 0;
    if (PQstatus(c) != CONNECTION_OK) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "embedded postgres: cannot connect: %s",
                          PQerrorMessage(c));
        goto out;
    }
    PGresult *r = PQexec(c, "SELECT 1 FROM pg_database WHERE datname = '" DB_NAME "'");
    int exists = PQresultStatus(r) == PGRES_TUPLES_OK && PQntuples(r) == 1;
    PQclear(r);
    if (!exists) {
        r = PQexec(c, "CREATE DATABASE " DB_NAME " ENCODING 'UTF8' TEMPLATE template0");
        /* Another process may have won the race (SQLSTATE 42P04,
         * duplicate_database); that is fine. */
        const char *state = PQresultErrorField(r, PG_DIAG_SQLSTATE);
        if (PQresultStatus(r) != PGRES_COMMAND_OK && !(state && strcmp(state, "42P04") == 0))
            rc = rv_error_set(err, RV_ERR_IO, -1, -1,
                              "embedded postgres: CREATE DATABASE failed: %s",
                              PQresultErrorMessage(r));
        PQclear(r);
    }
out:
    PQfinish(c);
    return rc;
}

static int setup_user(rv_pgembed *pg, rv_error *err)
{
    if (geteuid() != 0) {
        pg->run_as_other = 0;
        pg->uid = geteuid();
        pg->gid = getegid();
        return 0;
    }
    const char *name = getenv("REVERIE_PG_USER");
    if (!name || !*name)
        name = "postgres";
    struct passwd *pw = getpwnam(name);
    if (!pw || pw->pw_uid == 0)
        return rv_error_set(
            err, RV_ERR_UNSUPPORTED, -1, -1,
            "PostgreSQL refuses to run as root and there is no system user '%s'. Either "
            "`useradd --system --user-group %s`, or set REVERIE_PG_USER to an unprivileged "
            "user, or run as non-root, or set REVERIE_DATABASE_URL",
            name, name);
    pg->run_as_other = 1;
    pg->uid = pw->pw_uid;
    pg->gid = pw->pw_gid;
    snprintf(pg->user, sizeof(pg->user), "%s", name);
    return 0;
}

static int init_cluster(rv_pgembed *pg, rv_error *err)
{
    char log[PATH_MAX], tail[600];
    path_join(log, sizeof(log), pg->pgdir, "initdb.log");
    char initdb[PATH_MAX];
    path_join(initdb, sizeof(initdb), pg->bindir, "initdb");
    char *argv[] = {initdb,
                    "-D",
                    pg->datadir,
                    "-U",
                    "postgres",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                    "--no-instructions",
                    NULL};
    int st = run_cmd(pg, argv, log);
    if (st != 0) {
        log_tail(log, tail, sizeof(tail));
        return rv_error_set(err, RV_ERR_IO, -1, -1, "initdb -D %s failed (status %d): %s",
                            pg->datadir, st, tail);
    }
    /* Unix socket only, in pg/. The file belongs to the cluster user, so
     * write it from a child with that user's rights. */
    char conf[PATH_MAX];
    path_join(conf, sizeof(conf), pg->datadir, "postgresql.conf");
    pid_t pid = fork();
    if (pid == 0) {
        if (drop_privileges(pg) != 0)
            _exit(1);
        FILE *f = fopen(conf, "a");
        if (!f)
            _exit(1);
        fprintf(f, "\n# Added by reverie (store/rv_pgembed.c): private cluster, Unix "
                   "socket only.\nlisten_addresses = ''\nunix_socket_permissions = 0700\n"
                   "port = " PG_PORT "\n");
        _exit(fclose(f) == 0 ? 0 : 1);
    }
    int ws = 0;
    if (pid < 0 || waitpid(pid, &ws, 0) < 0 || !WIFEXITED(ws) || WEXITSTATUS(ws) != 0)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot append to %s", conf);
    return 0;
}

static int start_server(rv_pgembed *pg, rv_error *err)
{
    char pgctl[PATH_MAX], log[PATH_MAX], ctllog[PATH_MAX], q[PATH_MAX * 4 + 8];
    char opts[PATH_MAX * 4 + 64], tail[600];
    path_join(pgctl, sizeof(pgctl), pg->bindir, "pg_ctl");
    path_join(log, sizeof(log), pg->pgdir, "postgres.log");
    path_join(ctllog, sizeof(ctllog), pg->pgdir, "pg_ctl.log");
    sh_quote(q, sizeof(q), pg->pgdir);
    snprintf(opts, sizeof(opts), "-c listen_addresses='' -p " PG_PORT " -k %s", q);
    char *argv[] = {pgctl, "start",         "-D", pg->datadir, "-l", log, "-w",
                    "-t",  START_TIMEOUT_S, "-o", opts,        NULL};
    int st = run_cmd(pg, argv, ctllog);
    if (st != 0) {
        log_tail(log, tail, sizeof(tail));
        return rv_error_set(err, RV_ERR_IO, -1, -1,
                            "pg_ctl start -D %s failed (status %d); end of %s: %s", pg->datadir, st,
                            log, tail);
    }
    return 0;
}

/* Takes the cluster's ownership: an exclusive flock on home/pg.owner, held
 * (descriptor kept, close-on-exec, closed in every child we start) until
 * the handle is freed. A process that was killed released it, so a cluster
 * found running with the lock free was left behind by a process that is
 * gone. 1 when taken, 0 when another live handle owns the cluster. */
static int take_ownership(rv_pgembed *pg)
{
    char p[PATH_MAX], line[32];
    if (pg->owner_fd >= 0)
        return 1;
    if (path_join(p, sizeof(p), pg->home, "pg.owner") != 0)
        return 0;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return 0;
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        close(fd);
        return 0;
    }
    /* For people: who owns it. */
    int n = snprintf(line, sizeof(line), "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) == 0 && write(fd, line, (size_t)n) < 0)
        line[0] = '\0';
    pg->owner_fd = fd;
    return 1;
}

static int lock_home(const char *home)
{
    char p[PATH_MAX];
    if (path_join(p, sizeof(p), home, "pg.lock") != 0)
        return -1;
    int fd = open(p, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    while (flock(fd, LOCK_EX) != 0)
        if (errno != EINTR) {
            close(fd);
            return -1;
        }
    return fd;
}

int rv_pgembed_default_home(char *out, size_t cap)
{
    rv_pgembed probe = {0};
    char cwd[PATH_MAX], blocked[PATH_MAX];
    uint64_t h = 14695981039346656037ULL;

    snprintf(out, cap, "./var");
    if (geteuid() != 0 || setup_user(&probe, NULL) != 0 || !getcwd(cwd, sizeof(cwd)))
        return 0;
    if (user_can_reach_as(&probe, cwd, 1, blocked, sizeof(blocked)) == 0)
        return 0;
    /* The database user cannot search the checkout: one home per checkout
     * under RV_FALLBACK_ROOT, named by a hash (FNV-1a) of its path. */
    for (const unsigned char *c = (const unsigned char *)cwd; *c; c++)
        h = (h ^ *c) * 1099511628211ULL;
    if (mkdir_p(RV_FALLBACK_ROOT, 0755) != 0)
        return 0;
    snprintf(out, cap, "%s/%012llx", RV_FALLBACK_ROOT, (unsigned long long)(h & 0xffffffffffffULL));
    return 1;
}

/* The binaries to run: those of the cluster's own major version when a
 * cluster exists (major gets it, "" for none), refusing when only another
 * version's are installed. 0, or an error with err filled. */
static int pick_binaries(rv_pgembed *pg, char *major, size_t cap, rv_error *err)
{
    char vfile[PATH_MAX];
    int rc;
    path_join(vfile, sizeof(vfile), pg->datadir, "PG_VERSION");
    FILE *vf = fopen(vfile, "r");
    if (vf) {
        if (!fgets(major, (int)cap, vf))
            major[0] = '\0';
        major[strcspn(major, "\r\n")] = '\0';
        fclose(vf);
    }
    rc = rv_pgembed_find_bindir(*major ? major : NULL, pg->bindir, sizeof(pg->bindir), err);
    if (rc)
        return rc;
    if (*major) {
        char want[PATH_MAX];
        snprintf(want, sizeof(want), "/%s/", major);
        if (!getenv("REVERIE_PG_BINDIR") && strncmp(pg->bindir, "/usr/lib/postgresql/", 20) == 0 &&
            !strstr(pg->bindir, want)) {
            rc = rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                              "the cluster in %s was made by PostgreSQL %s, whose binaries are "
                              "not installed (found %s): install postgresql-%s or upgrade the "
                              "cluster with pg_upgrade",
                              pg->datadir, major, pg->bindir, major);
            return rc;
        }
    }
    return 0;
}

int rv_pgembed_start(const char *home, rv_pgembed **out, rv_error *err)
{
    rv_pgembed *pg = NULL;
    char admin[PATH_MAX * 2 + 128] = "", ci[PATH_MAX * 2 + 128] = "", blocked[PATH_MAX];
    char defhome[PATH_MAX];
    int lockfd = -1, rc;
    struct stat sb;

    *out = NULL;
    if (!home || !*home)
        home = getenv("REVERIE_HOME");
    if (!home || !*home) {
        rv_pgembed_default_home(defhome, sizeof(defhome));
        home = defhome;
    }
    pg = calloc(1, sizeof(*pg));
    if (!pg)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    pg->owner_fd = -1;
    if (mkdir_p(home, 0755) != 0 || !realpath(home, pg->home)) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "cannot create data directory %s: %s", home,
                          strerror(errno));
        goto out;
    }
    if (path_join(pg->pgdir, sizeof(pg->pgdir), pg->home, "pg") != 0 ||
        path_join(pg->datadir, sizeof(pg->datadir), pg->pgdir, "data") != 0) {
        rc = rv_error_set(err, RV_ERR_INVALID, -1, -1, "data directory path too long");
        goto out;
    }
    /* The socket path must fit sockaddr_un. */
    if (strlen(pg->pgdir) + sizeof("/.s.PGSQL." PG_PORT) >
        sizeof(((struct sockaddr_un *)0)->sun_path)) {
        rc = rv_error_set(err, RV_ERR_INVALID, -1, -1,
                          "socket directory %s is too long for a Unix socket path (max %zu "
                          "bytes): set REVERIE_HOME to a shorter path",
                          pg->pgdir, sizeof(((struct sockaddr_un *)0)->sun_path) - 12);
        goto out;
    }
    rc = setup_user(pg, err);
    if (rc)
        goto out;
    lockfd = lock_home(pg->home);
    if (lockfd < 0) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "cannot lock %s/pg.lock: %s", pg->home,
                          strerror(errno));
        goto out;
    }
    if (mkdir(pg->pgdir, 0700) != 0 && errno != EEXIST) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "cannot create %s: %s", pg->pgdir,
                          strerror(errno));
        goto out;
    }
    if (stat(pg->pgdir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "%s is not a directory", pg->pgdir);
        goto out;
    }
    if (sb.st_uid != pg->uid) {
        if (!pg->run_as_other || chown(pg->pgdir, pg->uid, pg->gid) != 0) {
            rc = rv_error_set(err, RV_ERR_IO, -1, -1,
                              "%s is owned by uid %u, not by the cluster user (uid %u): fix "
                              "its owner or choose another REVERIE_HOME",
                              pg->pgdir, (unsigned)sb.st_uid, (unsigned)pg->uid);
            goto out;
        }
    }
    chmod(pg->pgdir, 0700);
    if (pg->run_as_other && user_can_reach(pg, pg->pgdir, blocked, sizeof(blocked)) != 0) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1,
                          "the '%s' user (which runs the embedded PostgreSQL because you are "
                          "root) cannot reach %s%s%s: give it search permission on every "
                          "parent (e.g. chmod o+x %s), or set REVERIE_HOME to a directory it "
                          "can reach, or set REVERIE_DATABASE_URL",
                          pg->user, pg->pgdir, *blocked ? ", blocked at " : "", blocked,
                          *blocked ? blocked : pg->home);
        goto out;
    }

    char major[16] = "";
    if ((rc = pick_binaries(pg, major, sizeof(major), err)) != 0)
        goto out;

    conn_kv(admin, sizeof(admin), "host", pg->pgdir);
    conn_kv(admin, sizeof(admin), "port", PG_PORT);
    conn_kv(admin, sizeof(admin), "user", "postgres");
    snprintf(ci, sizeof(ci), "%s", admin);
    conn_kv(admin, sizeof(admin), "dbname", "postgres");
    conn_kv(ci, sizeof(ci), "dbname", DB_NAME);

    if (!*major) {
        rc = init_cluster(pg, err);
        if (rc)
            goto out;
    }
    snprintf(pg->admin, sizeof(pg->admin), "%s", admin);
    if (server_answers(admin)) {
        /* Running: another live process's (we are its guest, and leave it
         * running), or an orphan left by a process killed without a
         * chance to stop it, which we adopt: we stop it when we stop. */
        pg->started_here = pg->adopted = take_ownership(pg);
    } else {
        clear_stale_pid(pg);
        rc = start_server(pg, err);
        if (rc)
            goto out;
        pg->started_here = 1;
        take_ownership(pg);
        if (wait_answer(admin, 30) != 0) {
            rc = rv_error_set(err, RV_ERR_IO, -1, -1,
                              "embedded postgres started but does not answer on %s", pg->pgdir);
            goto out;
        }
    }
    rc = ensure_database(admin, err);
    if (rc)
        goto out;
    pg->conninfo = strdup(ci);
    if (!pg->conninfo) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    *out = pg;
    pg = NULL;
out:
    if (lockfd >= 0)
        close(lockfd);
    if (pg) {
        /* Do not leave a server we started behind when setup failed. */
        if (pg->started_here) {
            rv_pgembed_stop(pg, NULL);
        } else {
            rv_pgembed_detach(pg);
        }
    }
    return rc;
}

const char *rv_pgembed_conninfo(const rv_pgembed *pg)
{
    return pg->conninfo;
}

const char *rv_pgembed_datadir(const rv_pgembed *pg)
{
    return pg->datadir;
}

int rv_pgembed_started_here(const rv_pgembed *pg)
{
    return pg->started_here;
}

int rv_pgembed_adopted(const rv_pgembed *pg)
{
    return pg->adopted;
}

int rv_pgembed_alive(const rv_pgembed *pg)
{
    long pid;
    return read_pid_file(pg->datadir, &pid) == 0 && pid > 0 && pid_is_postgres(pid);
}

int rv_pgembed_restart(rv_pgembed *pg, rv_error *err)
{
    int rc = 0;
    int lockfd = lock_home(pg->home);
    if (lockfd < 0)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot lock %s/pg.lock: %s", pg->home,
                            strerror(errno));
    PGPing ping = PQping(pg->admin);
    if (ping == PQPING_OK)
        goto out; /* another process restarted it first */
    if (ping != PQPING_REJECT || !rv_pgembed_alive(pg)) {
        clear_stale_pid(pg);
        rc = start_server(pg, err);
        if (rc)
            goto out;
        pg->started_here = 1;
        take_ownership(pg);
    }
    /* Started, or found starting up (crash recovery): wait for it. */
    if (wait_answer(pg->admin, 30) != 0)
        rc = rv_error_set(err, RV_ERR_IO, -1, -1,
                          "embedded postgres restarted but does not answer on %s", pg->pgdir);
out:
    close(lockfd);
    return rc;
}

void rv_pgembed_detach(rv_pgembed *pg)
{
    if (!pg)
        return;
    if (pg->owner_fd >= 0)
        close(pg->owner_fd);
    free(pg->conninfo);
    free(pg);
}

int rv_pgembed_stop(rv_pgembed *pg, rv_error *err)
{
    int rc = 0;
    if (!pg)
        return 0;
    if (pg->started_here) {
        char pgctl[PATH_MAX], ctllog[PATH_MAX];
        path_join(pgctl, sizeof(pgctl), pg->bindir, "pg_ctl");
        path_join(ctllog, sizeof(ctllog), pg->pgdir, "pg_ctl.log");
        char *argv[] = {pgctl, "stop", "-D", pg->datadir, "-m", "fast", "-w", "-t", "60", NULL};
        int lockfd = lock_home(pg->home);
        int st = run_cmd(pg, argv, ctllog);
        if (lockfd >= 0)
            close(lockfd);
        if (st != 0)
            rc = rv_error_set(err, RV_ERR_IO, -1, -1, "pg_ctl stop -D %s failed (status %d)",
                              pg->datadir, st);
    }
    rv_pgembed_detach(pg);
    return rc;
}

int rv_pgembed_resolve(const char *url, const char *home, char **conninfo, rv_pgembed **embed,
                       rv_error *err)
{
    *conninfo = NULL;
    *embed = NULL;
    if (!url || !*url)
        url = getenv("REVERIE_DATABASE_URL");
    if (url && *url) {
        *conninfo = strdup(url);
        return *conninfo ? 0 : rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    rv_pgembed *pg = NULL;
    int rc = rv_pgembed_start(home, &pg, err);
    if (rc)
        return rc;
    if (!pg)
        return rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "embedded database: no handle");
    *conninfo = strdup(rv_pgembed_conninfo(pg));
    if (!*conninfo) {
        rv_pgembed_stop(pg, NULL);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    }
    *embed = pg;
    return 0;
}
