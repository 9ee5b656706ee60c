/* HTTP layer: answers. The rv_req_respond_* calls and the one error shape
 * ({"error":{"code","message","field"}}, including the mapping of an
 * rv_error to a status), gzip of large text answers, queueing an answer on
 * its connection with the headers every answer carries (nosniff, CORS),
 * and raw JSON errors written straight to a socket for refused and timed
 * out connections. libmicrohttpd's own early refusals (a malformed
 * request line, Content-Length or chunk size, a header block past the
 * connection's memory) keep its status and plain body: it has no
 * supported way to replace them, and they are answered before any
 * handler of ours runs. */
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>
#include <zlib.h>

#include "rv_http_internal.h"
#include "util/rv_round.h"

#define MAX_JSON_ANSWER ((size_t)1 << 30) /* a JSON answer past this is a 503 */

/* ------------------------------------------------------- raw answers */

/* A fresh socket's buffer takes a few hundred bytes, so the one
 * non-blocking send writes all of it in practice. */
void rv_http__raw_error(int fd, unsigned status, const char *code, const char *field,
                        const char *msg, const char *extra_headers)
{
    char body[600], buf[1200];
    const char *reason = MHD_get_reason_phrase_for(status);
    int bn =
        snprintf(body, sizeof(body), "{\"error\":{\"code\":\"%s\",\"message\":\"%s\"%s%s%s}}\n",
                 code, msg, field ? ",\"field\":\"" : "", field ? field : "", field ? "\"" : "");
    if (bn < 0 || (size_t)bn >= sizeof(body))
        return;
    int n = snprintf(buf, sizeof(buf),
                     "HTTP/1.1 %u %s\r\nContent-Type: application/json\r\nContent-Length: "
                     "%d\r\nConnection: close\r\nX-Content-Type-Options: nosniff\r\n%s\r\n%s",
                     status, reason && *reason ? reason : "Error", bn,
                     extra_headers ? extra_headers : "", body);
    if (n > 0 && (size_t)n < sizeof(buf))
        (void)send(fd, buf, (size_t)n, MSG_NOSIGNAL | MSG_DONTWAIT);
}

/* ------------------------------------------------------ queueing */

void rv_http__clear_response(rv_req *r)
{
    free(r->resp_buf);
    r->resp_buf = NULL;
    r->resp_len = 0;
    if (r->resp_fd >= 0)
        close(r->resp_fd);
    r->resp_fd = -1;
}

enum MHD_Result rv_http__queue(rv_req *r)
{
    struct MHD_Response *resp;

    if (!r->has_response)
        rv_req_error(r, 500, "internal", NULL, "the handler produced no response");
    if (r->resp_fd >= 0) {
        resp = MHD_create_response_from_fd64(r->resp_fd_size, r->resp_fd);
        if (resp)
            r->resp_fd = -1; /* MHD closes it */
    } else {
        resp = MHD_create_response_from_buffer(r->resp_len, r->resp_buf, MHD_RESPMEM_MUST_FREE);
        if (resp)
            r->resp_buf = NULL; /* MHD frees it */
    }
    if (!resp)
        return MHD_NO;
    if (r->content_type[0])
        MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    for (int i = 0; i < r->nresp_headers; i++)
        MHD_add_response_header(resp, r->resp_headers[i].key, r->resp_headers[i].value);
    MHD_add_response_header(resp, "X-Content-Type-Options", "nosniff");
    if (r->cors_allow) {
        MHD_add_response_header(resp, "Access-Control-Allow-Origin", r->cors_allow);
        MHD_add_response_header(resp, "Access-Control-Expose-Headers",
                                "Location, Retry-After, Content-Disposition, WWW-Authenticate");
        MHD_add_response_header(resp, "Vary", "Origin");
    }
    enum MHD_Result ret = MHD_queue_response(r->conn, (unsigned)r->status, resp);
    MHD_destroy_response(resp);
    return ret;
}

/* ------------------------------------------------------------ gzip */

/* Whether the client takes gzip: "gzip" in Accept-Encoding, not q=0. */
static int accepts_gzip(const rv_req *r)
{
    const char *ae = rv_req_header(r, "Accept-Encoding");
    const char *g = ae ? strstr(ae, "gzip") : NULL;
    if (!g)
        return 0;
    const char *q = strchr(g, ';');
    const char *comma = strchr(g, ',');
    if (q && (!comma || q < comma)) {
        q++;
        while (*q == ' ')
            q++;
        if (strncmp(q, "q=0", 3) == 0 &&
            (q[3] == '\0' || q[3] == ',' || q[3] == ' ' || strncmp(q + 3, ".0", 2) == 0))
            return 0;
    }
    return 1;
}

/* A JSON or text answer of 1 KiB or more (a timeline of 5 MB becomes
 * ~230 KB). Called where the handler ran, so big answers are compressed on
 * a worker, not on the event loop. On any failure the answer goes out as
 * it is. */
void rv_http__gzip(rv_req *r)
{
    if (!r->has_response || !r->resp_buf || r->resp_len < 1024 || r->resp_len > (1u << 30) ||
        !accepts_gzip(r))
        return;
    if (strncmp(r->content_type, "application/json", 16) != 0 &&
        strncmp(r->content_type, "text/", 5) != 0)
        return;
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return;
    uLong bound = deflateBound(&zs, (uLong)r->resp_len);
    char *out = malloc(bound);
    if (!out) {
        deflateEnd(&zs);
        return;
    }
    zs.next_in = (Bytef *)r->resp_buf;
    zs.avail_in = (uInt)r->resp_len;
    zs.next_out = (Bytef *)out;
    zs.avail_out = (uInt)bound;
    int rc = deflate(&zs, Z_FINISH);
    size_t n = zs.total_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END || n >= r->resp_len) {
        free(out);
        return;
    }
    free(r->resp_buf);
    r->resp_buf = out;
    r->resp_len = n;
    rv_req_add_header(r, "Content-Encoding", "gzip");
    rv_req_add_header(r, "Vary", "Accept-Encoding");
}

/* ------------------------------------------------ answers held */

/* Writes buf to a new unlinked file in dir; its fd, or -1 (errno). */
static int spool_answer(const char *dir, const char *buf, size_t len)
{
    size_t dl = strlen(dir);
    char *path = malloc(dl + 32);
    int fd = -1;

    if (!path)
        return -1;
    snprintf(path, dl + 32, "%s/answer-XXXXXX", dir);
    fd = mkostemp(path, O_CLOEXEC);
    if (fd >= 0)
        unlink(path); /* gone with the last close, even after a crash */
    free(path);
    for (size_t off = 0; fd >= 0 && off < len;) {
        ssize_t w = write(fd, buf + off, len - off);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            close(fd);
            fd = -1;
            errno = e;
            break;
        }
        off += (size_t)w;
    }
    return fd;
}

/* Replaces r's answer with a 503 (its headers go too: they described
 * the answer, such as its Content-Encoding), counted in memory: it is
 * small. */
static void answer_refused(rv_req *r, const char *code, const char *msg)
{
    rv_http *h = r->h;

    for (int i = 0; i < r->nresp_headers; i++) {
        free(r->resp_headers[i].key);
        free(r->resp_headers[i].value);
    }
    r->nresp_headers = 0;
    rv_req_error(r, 503, code, NULL, "%s", msg);
    rv_req_add_header(r, "Retry-After", "2");
    pthread_mutex_lock(&h->mu);
    h->answers_mem += r->resp_len;
    r->held_mem = r->resp_len;
    pthread_mutex_unlock(&h->mu);
}

/* A client that does not read holds its answer until the connection's
 * timeout: in memory that was every byte of it (100 unread 24 MB exports
 * took 1.4 GB). Small answers stay in memory up to a total; the others
 * wait in files, which cost page cache (reclaimable), not the process's
 * memory, up to their own cap. */
void rv_http__bound_answer(rv_req *r)
{
    rv_http *h = r->h;
    const rv_http_config *c = &h->cfg;
    size_t len = r->resp_len;

    if (!r->has_response || !r->resp_buf || len == 0)
        return;
    pthread_mutex_lock(&h->mu);
    int in_memory = len <= c->answer_mem_one && h->answers_mem + len <= c->answer_mem_total;
    int over = !in_memory && h->answers_spooled + len > c->answer_spool_cap;
    if (in_memory) {
        h->answers_mem += len;
        r->held_mem = len;
    } else if (!over) {
        h->answers_spooled += len;
        r->held_spool = len;
    }
    pthread_mutex_unlock(&h->mu);
    if (in_memory)
        return;
    if (over) {
        char msg[160];
        snprintf(msg, sizeof(msg),
                 "the server holds too many large answers for clients still reading them "
                 "(over %llu MiB); retry shortly",
                 (unsigned long long)(c->answer_spool_cap >> 20));
        answer_refused(r, "busy", msg);
        return;
    }
    int fd = spool_answer(c->spool_dir, r->resp_buf, len);
    if (fd < 0) {
        char msg[160];
        snprintf(msg, sizeof(msg), "cannot hold the answer for sending: %s", strerror(errno));
        rv_http__release_answer(r);
        answer_refused(r, "unavailable", msg);
        return;
    }
    free(r->resp_buf);
    r->resp_buf = NULL;
    r->resp_len = 0;
    r->resp_fd = fd;
    r->resp_fd_size = len;
}

void rv_http__release_answer(rv_req *r)
{
    rv_http *h = r->h;

    if (!r->held_mem && !r->held_spool)
        return;
    pthread_mutex_lock(&h->mu);
    h->answers_mem -= r->held_mem;
    h->answers_spooled -= r->held_spool;
    pthread_mutex_unlock(&h->mu);
    r->held_mem = r->held_spool = 0;
}

/* ------------------------------------------------------ responses */

void rv_req_respond_buf(rv_req *r, int status, const char *content_type, char *buf, size_t len)
{
    rv_http__clear_response(r);
    r->status = status;
    r->resp_buf = buf;
    r->resp_len = buf ? len : 0;
    snprintf(r->content_type, sizeof(r->content_type), "%s", content_type ? content_type : "");
    r->has_response = 1;
}

void rv_req_respond_fd(rv_req *r, int status, const char *content_type, int fd, uint64_t size)
{
    rv_http__clear_response(r);
    r->status = status;
    r->resp_fd = fd;
    r->resp_fd_size = size;
    snprintf(r->content_type, sizeof(r->content_type), "%s", content_type ? content_type : "");
    r->has_response = 1;
}

/* json_dump_callback's sink: appends to an rv_buf, failing past its cap. */
static int dump_to_buf(const char *p, size_t n, void *ud)
{
    return rv_buf_add(ud, p, n) == 0 ? 0 : -1;
}

void rv_req_respond_json(rv_req *r, int status, json_t *body)
{
    rv_buf out = RV_BUF_INIT(MAX_JSON_ANSWER);
    if (!body)
        body = json_object();
    /* Every JSON reply's numbers are rounded in one place (rv_round.h). */
    rv_round_json(body);
    int rc =
        body ? json_dump_callback(body, dump_to_buf, &out, JSON_COMPACT | RV_ROUND_DUMP_FLAGS) : -1;
    json_decref(body);
    /* Newline-terminated so that `curl` output ends cleanly in a terminal. */
    size_t n = 0;
    char *s = rc == 0 && rv_buf_addc(&out, '\n') == 0 ? rv_buf_take(&out, &n) : NULL;
    rv_buf_free(&out);
    if (!s) {
        static const char oom[] = "{\"error\":{\"code\":\"unavailable\",\"message\":\"out of "
                                  "memory\"}}";
        char *b = strdup(oom);
        rv_req_respond_buf(r, 503, "application/json", b, b ? sizeof(oom) - 1 : 0);
        return;
    }
    rv_req_respond_buf(r, status, "application/json", s, n);
}

void rv_req_error(rv_req *r, int status, const char *code, const char *field, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    json_t *e = json_pack("{s:s,s:s}", "code", code, "message", msg);
    if (e && field && *field)
        json_object_set_new(e, "field", json_string(field));
    rv_req_respond_json(r, status, e ? json_pack("{s:o}", "error", e) : NULL);
}

void rv_req_error_rv(rv_req *r, const rv_error *e)
{
    int status;
    char where[96] = "";

    switch (e->code) {
    case RV_ERR_PARSE:
    case RV_ERR_INVALID:
    case RV_ERR_UNSUPPORTED: status = 400; break;
    /* A limit the client can fix: the body's size (413), else the field
     * that asks for too much (422). */
    case RV_ERR_LIMIT: status = e->field[0] ? 422 : 413; break;
    case RV_ERR_NOTFOUND: status = 404; break;
    case RV_ERR_FORBIDDEN: status = 403; break;
    /* This request's budget ran out (or memory did): retryable. */
    case RV_ERR_NOMEM:
    case RV_ERR_BUDGET: status = 503; break;
    default: status = 500; break;
    }
    if (e->offset >= 0 && e->event_index >= 0)
        snprintf(where, sizeof(where), " (at byte %lld, event %lld)", (long long)e->offset,
                 (long long)e->event_index);
    else if (e->offset >= 0)
        snprintf(where, sizeof(where), " (at byte %lld)", (long long)e->offset);
    else if (e->event_index >= 0)
        snprintf(where, sizeof(where), " (at event %lld)", (long long)e->event_index);
    const char *msg = e->message[0] ? e->message : rv_err_name(e->code);
    /* The scanner, the tar reader and the snapshot say where themselves. */
    if (e->placed)
        where[0] = '\0';
    /* Internal failures keep their detail in the log, not in the answer. */
    if (status == 500) {
        fprintf(stderr, "reveried: %s %s: %s%s\n", r->method, r->path, msg, where);
        rv_req_error(r, 500, "internal", NULL, "internal error; see the server log");
        return;
    }
    rv_req_error(r, status, rv_err_name(e->code), e->field[0] ? e->field : NULL, "%s%s", msg,
                 where);
}

void rv_req_add_header(rv_req *r, const char *name, const char *value)
{
    if (r->nresp_headers >= RV_HTTP_MAX_RESP_HEADERS)
        return;
    char *k = strdup(name), *v = strdup(value);
    if (!k || !v) {
        free(k);
        free(v);
        return;
    }
    r->resp_headers[r->nresp_headers++] = (rv_http_kv){k, v};
}
