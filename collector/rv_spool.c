/* The upload spool. See rv_spool.h. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "rv_spool.h"

#define SPOOL_MAX_FILES 4096
#define SPOOL_MAX_BYTES ((size_t)4 << 30)

const char *rv_spool_dir_from_env(void)
{
    const char *d = getenv("REVERIE_SPOOL_DIR");
    return d && *d ? d : RV_SPOOL_DEFAULT_DIR;
}

static int mkdirs(const char *dir)
{
    char tmp[4096];
    if (snprintf(tmp, sizeof(tmp), "%s", dir) >= (int)sizeof(tmp))
        return -1;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(tmp, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

int rv_spool_write_file(const char *path, const void *data, size_t len, rv_error *err)
{
    char tmp[4200];
    int fd = -1, rc = 0;
    if (snprintf(tmp, sizeof(tmp), "%s.tmp.%d", path, (int)getpid()) >= (int)sizeof(tmp))
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "path too long: %s", path);
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "%s: %s", tmp, strerror(errno));
    const char *p = data;
    size_t left = len;
    while (left) {
        ssize_t n = write(fd, p, left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            rc = rv_error_set(err, RV_ERR_IO, -1, -1, "%s: %s", tmp, strerror(errno));
            goto out;
        }
        p += n;
        left -= (size_t)n;
    }
    /* Durable before visible: the rename publishes a complete file. */
    if (fsync(fd) != 0) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "%s: fsync: %s", tmp, strerror(errno));
        goto out;
    }
    if (close(fd) != 0) {
        fd = -1;
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "%s: close: %s", tmp, strerror(errno));
        goto out;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        rc =
            rv_error_set(err, RV_ERR_IO, -1, -1, "rename %s -> %s: %s", tmp, path, strerror(errno));
        goto out;
    }
out:
    if (fd >= 0)
        close(fd);
    if (rc < 0)
        unlink(tmp);
    return rc;
}

/* Percent-encodes everything but [A-Za-z0-9_-], so '.' separates fields. */
static void encode(const char *s, char *out, size_t cap)
{
    static const char hex[] = "0123456789ABCDEF";
    size_t j = 0;
    for (; *s && j + 4 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
            c == '_' || c == '-') {
            out[j++] = (char)c;
        } else {
            out[j++] = '%';
            out[j++] = hex[c >> 4];
            out[j++] = hex[c & 15];
        }
    }
    out[j] = '\0';
}

static int unhex(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    return -1;
}

int rv_spool_write(const char *dir, const char *job, int rank, const void *data, size_t len,
                   char *path, size_t cap, rv_error *err)
{
    static unsigned seq;
    char ejob[400], host[64] = "host", ehost[200];
    if (mkdirs(dir) != 0)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "spool dir %s: %s", dir, strerror(errno));
    gethostname(host, sizeof(host));
    host[sizeof(host) - 1] = '\0';
    encode(job && *job ? job : "-", ejob, sizeof(ejob));
    encode(host, ehost, sizeof(ehost));
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    int n = snprintf(path, cap, "%s/%s.r%d.%s.%d.%lld%03ld%u.json.gz", dir, ejob,
                     rank < 0 ? -1 : rank, ehost, (int)getpid(), (long long)ts.tv_sec,
                     ts.tv_nsec / 1000000, __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED));
    if (n < 0 || (size_t)n >= cap)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "spool path too long in %s", dir);
    return rv_spool_write_file(path, data, len, err);
}

int rv_spool_parse_name(const char *name, char *job, size_t job_cap, int *rank)
{
    const char *base = strrchr(name, '/');
    base = base ? base + 1 : name;
    const char *dot = strchr(base, '.');
    if (!dot || dot[1] != 'r' || !strstr(base, ".json.gz"))
        return RV_ERR_PARSE;
    size_t j = 0;
    for (const char *p = base; p < dot && j + 1 < job_cap; p++) {
        if (*p == '%' && p + 2 < dot && unhex(p[1]) >= 0 && unhex(p[2]) >= 0) {
            job[j++] = (char)(unhex(p[1]) * 16 + unhex(p[2]));
            p += 2;
        } else {
            job[j++] = *p;
        }
    }
    job[j] = '\0';
    if (strcmp(job, "-") == 0)
        job[0] = '\0';
    char *end;
    long r = strtol(dot + 2, &end, 10);
    if (*end != '.')
        return RV_ERR_PARSE;
    *rank = r < 0 ? -1 : (int)r;
    return 0;
}

typedef struct entry {
    char name[256];
    time_t mtime;
} entry;

static int cmp_entry(const void *a, const void *b)
{
    const entry *x = a, *y = b;
    if (x->mtime != y->mtime)
        return x->mtime < y->mtime ? -1 : 1;
    return strcmp(x->name, y->name);
}

static int ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && strcmp(s + a - b, suffix) == 0;
}

/* "<file>.json.gz.<pid>.claim": is the claiming process gone? */
static int stale_claim(const char *name, char *orig, size_t cap)
{
    if (!ends_with(name, ".claim"))
        return 0;
    size_t n = strlen(name) - 6;
    const char *p = name + n;
    while (p > name && p[-1] >= '0' && p[-1] <= '9')
        p--;
    if (p == name + n || p == name || p[-1] != '.')
        return 0;
    long pid = strtol(p, NULL, 10);
    if (pid <= 0 || (kill((pid_t)pid, 0) == 0 || errno != ESRCH))
        return 0; /* alive (or not ours to judge) */
    size_t olen = (size_t)(p - 1 - name);
    if (olen >= cap)
        return 0;
    memcpy(orig, name, olen);
    orig[olen] = '\0';
    return 1;
}

int rv_spool_send_all(const char *dir, const rv_upload_opts *o, rv_spool_result *res, rv_error *err)
{
    rv_spool_result r = {0};
    entry *ents = NULL;
    size_t n = 0;
    int rc = 0;
    DIR *d = opendir(dir);
    if (res)
        *res = r;
    if (!d)
        return errno == ENOENT
                   ? 0
                   : rv_error_set(err, RV_ERR_IO, -1, -1, "spool dir %s: %s", dir, strerror(errno));
    ents = calloc(SPOOL_MAX_FILES, sizeof(*ents));
    if (!ents) {
        closedir(d);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory listing %s", dir);
    }
    struct dirent *de;
    while ((de = readdir(d)) && n < SPOOL_MAX_FILES) {
        char path[4400], orig[256];
        struct stat st;
        const char *name = de->d_name;
        if (stale_claim(name, orig, sizeof(orig))) {
            char from[4400];
            snprintf(from, sizeof(from), "%s/%s", dir, name);
            snprintf(path, sizeof(path), "%s/%s", dir, orig);
            if (rename(from, path) != 0)
                continue;
            name = orig;
        }
        if (!ends_with(name, ".json.gz") || strlen(name) >= sizeof(ents[0].name))
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, name);
        if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        snprintf(ents[n].name, sizeof(ents[n].name), "%s", name);
        ents[n].mtime = st.st_mtime;
        n++;
    }
    closedir(d);
    qsort(ents, n, sizeof(*ents), cmp_entry);

    for (size_t i = 0; i < n; i++) {
        char path[4400], claim[4500], job[256];
        int rank = -1;
        void *data = NULL;
        size_t len = 0;
        rv_error e;
        snprintf(path, sizeof(path), "%s/%s", dir, ents[i].name);
        snprintf(claim, sizeof(claim), "%s.%d.claim", path, (int)getpid());
        if (rename(path, claim) != 0) {
            r.skipped++; /* another sender took it first */
            continue;
        }
        if (rv_spool_parse_name(ents[i].name, job, sizeof(job), &rank) != 0) {
            job[0] = '\0';
            rank = -1;
        }
        int ur = rv_upload_read_file(claim, SPOOL_MAX_BYTES, &data, &len, &e);
        if (ur == 0)
            ur = rv_upload_post(o, job, rank, data, len, NULL, &e);
        free(data);
        if (ur == 0) {
            unlink(claim);
            r.sent++;
        } else {
            rename(claim, path);
            r.failed++;
            rc = RV_ERR_IO;
            if (err)
                *err = e;
            /* Unreachable or failing server: the rest would only wait too. */
            if (ur == RV_ERR_IO) {
                r.failed += (int)(n - i - 1);
                break;
            }
        }
    }
    free(ents);
    if (res)
        *res = r;
    return rc;
}
