/* Fuzzes the request-line side of the HTTP layer: route matching with the
 * real /v1 patterns, the static-file path check, content types and scope
 * lists. Input: "METHOD\nPATH" (anything after a second newline is ignored).
 * Checks invariants, not just "no crash". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "rv_auth.h"
#include "rv_http.h"

static void nop(rv_req *r, void *app)
{
}

/* The patterns of rv_api.c's table (the handlers are not needed here). */
static const rv_route routes[] = {
    {"GET", "/healthz", nop, 0, 0, 0, "a"},
    {"POST", "/v1/traces", nop, 0, 0, 0, "b"},
    {"GET", "/v1/traces", nop, 0, 0, 0, "c"},
    {"GET", "/v1/traces/{id}", nop, 0, 0, 0, "d"},
    {"DELETE", "/v1/traces/{id}", nop, 0, 0, 0, "e"},
    {"GET", "/v1/traces/{id}/original", nop, 0, 0, 0, "f"},
    {"GET", "/v1/traces/{id}/timeline", nop, 0, 0, 0, "g"},
    {"POST", "/v1/traces/{id}/whatif", nop, 0, 0, 0, "h"},
    {"POST", "/v1/fleet/whatif", nop, 0, 0, 0, "i"},
    {"GET", "/v1/jobs/{id}", nop, 0, 0, 0, "j"},
    {"GET", "/v1/platforms/{id}/overheads", nop, 0, 0, 0, "k"},
    {"GET", "/v1/{a}/{b}/{c}/{d}/{e}", nop, 0, 0, 0, "l"},
};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *buf = malloc(size + 1);
    rv_route_match m;

    if (!buf)
        return 0;
    memcpy(buf, data, size);
    buf[size] = '\0';
    char *path = strchr(buf, '\n');
    if (path) {
        *path++ = '\0';
        char *end = strchr(path, '\n');
        if (end)
            *end = '\0';
    } else {
        path = buf;
    }
    rv_route_find(routes, sizeof(routes) / sizeof(routes[0]), buf, path, &m);
    if (m.status == 0) {
        if (m.index < 0 || (size_t)m.index >= sizeof(routes) / sizeof(routes[0]))
            abort();
        if (m.nparams < 0 || m.nparams > RV_ROUTE_MAX_PARAMS)
            abort();
        for (int i = 0; i < m.nparams; i++)
            if (m.values[i][0] == '\0' || strchr(m.values[i], '/'))
                abort();
    } else if (m.status != 404 && m.status != 405) {
        abort();
    }
    if (rv_http_path_safe(path)) {
        /* A safe path never climbs out of the web root. */
        if (strstr(path, "/..") || strstr(path, "/.") || strchr(path, '\\') || path[0] != '/')
            abort();
    }
    (void)rv_http_mime(path);
    char scopes[64];
    unsigned bits = rv_auth_parse_scopes(path);
    rv_auth_scopes_str(bits, scopes, sizeof(scopes));
    if (bits && rv_auth_parse_scopes(scopes) != bits)
        abort();
    free(buf);
    return 0;
}
