/* HTTP layer: what a path maps to. Route matching (rv_route_find, a pure
 * function fuzzed by fuzz_route.c), and for paths no route matches, the
 * static files under web_root: the path check, the index.html fallback for
 * dashboard routes, and MIME types. */
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rv_http_internal.h"

/* ---------------------------------------------------------------- routes */

/* Copies the next segment of *p (up to '/' or end) into seg; returns its
 * length, or (size_t)-1 when longer than cap-1. Advances *p past it. */
static size_t next_segment(const char **p, char *seg, size_t cap)
{
    const char *s = *p;
    size_t n = 0;

    while (s[n] && s[n] != '/')
        n++;
    *p = s + n;
    if (n >= cap)
        return (size_t)-1;
    memcpy(seg, s, n);
    seg[n] = '\0';
    return n;
}

static int match_pattern(const char *pattern, const char *path, rv_route_match *m)
{
    const char *pp = pattern, *up = path;
    char pseg[64], useg[RV_ROUTE_PARAM_MAX];

    m->nparams = 0;
    if (*pp != '/' || *up != '/')
        return 0;
    for (;;) {
        if (*pp == '\0' && *up == '\0')
            return 1;
        if (*pp != '/' || *up != '/')
            return 0;
        pp++;
        up++;
        size_t pl = next_segment(&pp, pseg, sizeof(pseg));
        size_t ul = next_segment(&up, useg, sizeof(useg));
        if (pl == (size_t)-1 || ul == (size_t)-1)
            return 0;
        if (pl >= 2 && pseg[0] == '{' && pseg[pl - 1] == '}') {
            if (ul == 0 || m->nparams >= RV_ROUTE_MAX_PARAMS)
                return 0;
            size_t nl = pl - 2 < sizeof(m->names[0]) - 1 ? pl - 2 : sizeof(m->names[0]) - 1;
            memcpy(m->names[m->nparams], pseg + 1, nl);
            m->names[m->nparams][nl] = '\0';
            memcpy(m->values[m->nparams], useg, ul + 1);
            m->nparams++;
        } else if (pl != ul || memcmp(pseg, useg, pl) != 0) {
            return 0;
        }
    }
}

void rv_route_find(const rv_route *routes, size_t n, const char *method, const char *path,
                   rv_route_match *m)
{
    int path_seen = 0;
    const char *meth = strcmp(method, "HEAD") == 0 ? "GET" : method;

    m->index = -1;
    m->status = 404;
    m->nparams = 0;
    for (size_t i = 0; i < n; i++) {
        rv_route_match tmp;
        if (!match_pattern(routes[i].pattern, path, &tmp))
            continue;
        path_seen = 1;
        if (strcmp(routes[i].method, meth) != 0)
            continue;
        *m = tmp;
        m->index = (int)i;
        m->status = 0;
        return;
    }
    m->nparams = 0;
    m->status = path_seen ? 405 : 404;
}

/* ---------------------------------------------------------- static files */

void rv_http__serve_static(rv_req *r)
{
    const char *root = r->h->cfg.web_root;
    const char *p = r->path;
    char file[4096];
    struct stat st;

    if (!root || (strcmp(r->method, "GET") != 0 && strcmp(r->method, "HEAD") != 0) ||
        strncmp(p, "/v1/", 4) == 0 || strcmp(p, "/v1") == 0) {
        rv_req_error(r, 404, "not_found", NULL, "no such endpoint: %s %s", r->method, p);
        return;
    }
    if (!rv_http_path_safe(p)) {
        rv_req_error(r, 404, "not_found", NULL, "no such file");
        return;
    }
    const char *rel = p + 1;
    if (*rel == '\0' || p[strlen(p) - 1] == '/')
        snprintf(file, sizeof(file), "%s/%sindex.html", root, rel);
    else
        snprintf(file, sizeof(file), "%s/%s", root, rel);
    int fd = open(file, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
        close(fd);
        fd = -1;
    }
    if (fd < 0) {
        /* Dashboard routes ("/traces/abc") fall back to index.html; paths that
         * name a file (with an extension) are a plain 404. */
        const char *last = strrchr(p, '/');
        if (last && strchr(last, '.')) {
            rv_req_error(r, 404, "not_found", NULL, "no such file: %s", p);
            return;
        }
        snprintf(file, sizeof(file), "%s/index.html", root);
        fd = open(file, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
            if (fd >= 0)
                close(fd);
            rv_req_error(r, 404, "not_found", NULL, "no such file: %s", p);
            return;
        }
    }
    rv_req_respond_fd(r, 200, rv_http_mime(file), fd, (uint64_t)st.st_size);
    rv_req_add_header(r, "Cache-Control", "no-cache");
}

const char *rv_http_mime(const char *path)
{
    static const struct {
        const char *ext, *type;
    } types[] = {
        {".html", "text/html; charset=utf-8"},
        {".htm", "text/html; charset=utf-8"},
        {".js", "text/javascript; charset=utf-8"},
        {".mjs", "text/javascript; charset=utf-8"},
        {".css", "text/css; charset=utf-8"},
        {".json", "application/json"},
        {".svg", "image/svg+xml"},
        {".png", "image/png"},
        {".ico", "image/x-icon"},
        {".txt", "text/plain; charset=utf-8"},
        {".map", "application/json"},
        {".wasm", "application/wasm"},
        {".woff2", "font/woff2"},
        {".yaml", "application/yaml"},
    };
    const char *dot = strrchr(path, '.');
    const char *slash = strrchr(path, '/');

    if (!dot || (slash && dot < slash))
        return "application/octet-stream";
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcasecmp(dot, types[i].ext) == 0)
            return types[i].type;
    return "application/octet-stream";
}

int rv_http_path_safe(const char *path)
{
    const char *p = path;

    if (!p || *p != '/' || strlen(p) > 1024)
        return 0;
    while (*p) {
        if (*p == '\\' || (unsigned char)*p < 0x20)
            return 0;
        if (*p == '/') {
            const char *s = p + 1;
            size_t n = strcspn(s, "/");
            /* "..", "." and hidden files never map to disk. */
            if (n > 0 && s[0] == '.')
                return 0;
            if (n == 0 && s[0] == '/')
                return 0;
        }
        p++;
    }
    return 1;
}
