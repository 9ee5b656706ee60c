/* Trace upload over HTTP. See rv_upload.h. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#ifdef RV_HAVE_CURL
#include <curl/curl.h>
#endif

#include "rv_upload.h"

void rv_upload_opts_from_env(rv_upload_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->server = getenv("REVERIE_SERVER");
    o->token = getenv("REVERIE_TOKEN");
    if (o->token && !*o->token)
        o->token = NULL;
    const char *v;
    if ((v = getenv("REVERIE_UPLOAD_ATTEMPTS")) && atoi(v) > 0)
        o->max_attempts = atoi(v) > 100 ? 100 : atoi(v);
    if ((v = getenv("REVERIE_UPLOAD_BACKOFF_MS")) && atoi(v) > 0)
        o->backoff_ms = atoi(v);
    if ((v = getenv("REVERIE_UPLOAD_TIMEOUT_S")) && atol(v) > 0)
        o->timeout_s = atol(v);
}

int rv_upload_read_file(const char *path, size_t max, void **data, size_t *len, rv_error *err)
{
    int rc = 0;
    struct stat st;
    char *buf = NULL;
    FILE *f = fopen(path, "rb");
    *data = NULL;
    *len = 0;
    if (!f)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "%s: %s", path, strerror(errno));
    if (fstat(fileno(f), &st) != 0 || !S_ISREG(st.st_mode)) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "%s: not a regular file", path);
        goto out;
    }
    if ((size_t)st.st_size > max) {
        rc = rv_error_set(err, RV_ERR_LIMIT, -1, -1, "%s: %lld bytes is more than the %zu cap",
                          path, (long long)st.st_size, max);
        goto out;
    }
    buf = malloc((size_t)st.st_size + 1);
    if (!buf) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "%s: out of memory", path);
        goto out;
    }
    if (st.st_size && fread(buf, 1, (size_t)st.st_size, f) != (size_t)st.st_size) {
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "%s: short read", path);
        goto out;
    }
    *data = buf;
    *len = (size_t)st.st_size;
    buf = NULL;
out:
    free(buf);
    fclose(f);
    return rc;
}

#ifndef RV_HAVE_CURL

int rv_upload_available(void)
{
    return 0;
}

int rv_upload_post(const rv_upload_opts *o, const char *job, int rank, const void *data, size_t len,
                   long *status, rv_error *err)
{
    if (status)
        *status = 0;
    return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                        "this build has no libcurl, so it cannot upload");
}

#else

int rv_upload_available(void)
{
    return 1;
}

static size_t discard_body(char *p, size_t size, size_t n, void *ud)
{
    /* Keep the start of the answer for the caller and the error message. */
    char *msg = ud;
    size_t have = strlen(msg), take = size * n;
    if (have < RV_UPLOAD_ANSWER_MAX - 1) {
        size_t k = take < RV_UPLOAD_ANSWER_MAX - 1 - have ? take : RV_UPLOAD_ANSWER_MAX - 1 - have;
        memcpy(msg + have, p, k);
        msg[have + k] = '\0';
    }
    return take;
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static void one_line(char *s)
{
    for (; *s; s++)
        if (*s == '\n' || *s == '\r')
            *s = ' ';
}

int rv_upload_post(const rv_upload_opts *o, const char *job, int rank, const void *data, size_t len,
                   long *status, rv_error *err)
{
    int rc = RV_ERR_IO;
    CURL *c = NULL;
    struct curl_slist *hdr = NULL;
    char *url = NULL, *ejob = NULL, body[RV_UPLOAD_ANSWER_MAX];
    long code = 0;
    int attempts = o->max_attempts > 0 ? o->max_attempts : 5;
    long backoff = o->backoff_ms > 0 ? o->backoff_ms : 500;
    char auth[1024], curlerr[CURL_ERROR_SIZE];

    if (status)
        *status = 0;
    if (o->answer)
        o->answer[0] = '\0';
    if (!o->server || !*o->server)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "no server URL (REVERIE_SERVER)");
    static int global_done;
    if (!global_done) {
        /* Thread-safe in libcurl >= 7.84; the collector calls it from one thread. */
        curl_global_init(CURL_GLOBAL_DEFAULT);
        global_done = 1;
    }
    c = curl_easy_init();
    if (!c)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "curl_easy_init failed");
    ejob = curl_easy_escape(c, job ? job : "", 0);
    size_t ulen = strlen(o->server) + (ejob ? strlen(ejob) : 0) + 64;
    url = malloc(ulen);
    if (!url || !ejob) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory for the URL");
        goto out;
    }
    size_t sl = strlen(o->server);
    while (sl && o->server[sl - 1] == '/')
        sl--;
    int n = snprintf(url, ulen, "%.*s/v1/traces?job=%s", (int)sl, o->server, ejob);
    if (rank >= 0)
        n += snprintf(url + n, ulen - (size_t)n, "&rank=%d", rank);
    if (o->world_size > 0)
        snprintf(url + n, ulen - (size_t)n, "&world_size=%d", o->world_size);

    hdr = curl_slist_append(hdr, "Content-Type: application/json");
    if (len >= 2 && ((const unsigned char *)data)[0] == 0x1f &&
        ((const unsigned char *)data)[1] == 0x8b)
        hdr = curl_slist_append(hdr, "Content-Encoding: gzip");
    hdr = curl_slist_append(hdr, "Expect:"); /* no 100-continue round trip */
    if (o->token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", o->token);
        hdr = curl_slist_append(hdr, auth);
    }
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdr);
    curl_easy_setopt(c, CURLOPT_POST, 1L);
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, data);
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L); /* never touch the job's signals */
    curl_easy_setopt(c, CURLOPT_TIMEOUT, o->timeout_s > 0 ? o->timeout_s : 120L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT,
                     o->connect_timeout_s > 0 ? o->connect_timeout_s : 10L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "reverie-collector/0.1");
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, discard_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, curlerr);

    for (int i = 1; i <= attempts; i++) {
        body[0] = '\0';
        curlerr[0] = '\0';
        code = 0;
        CURLcode cr = curl_easy_perform(c);
        if (cr == CURLE_OK)
            curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
        if (status)
            *status = code;
        if (o->answer)
            memcpy(o->answer, body, strlen(body) + 1);
        if (cr == CURLE_OK && code >= 200 && code < 300) {
            rc = 0;
            goto out;
        }
        /* 4xx other than timeout / too-many-requests will not get better. */
        int permanent = cr == CURLE_OK && code >= 400 && code < 500 && code != 408 && code != 429;
        one_line(body);
        if (cr != CURLE_OK)
            rv_error_set(err, RV_ERR_IO, -1, -1, "POST %s: %s", url,
                         curlerr[0] ? curlerr : curl_easy_strerror(cr));
        else
            rv_error_set(err, permanent ? RV_ERR_INVALID : RV_ERR_IO, -1, -1,
                         "POST %s: HTTP %ld %.160s", url, code, body);
        if (permanent) {
            rc = RV_ERR_INVALID;
            goto out;
        }
        if (i == attempts)
            break;
        if (!o->quiet)
            fprintf(stderr, "%s: upload attempt %d/%d failed (%s); retrying in %ld ms\n",
                    o->prog ? o->prog : "reverie-collector", i, attempts,
                    err ? err->message : "error", backoff);
        sleep_ms(backoff);
        backoff = backoff * 2 > 30000 ? 30000 : backoff * 2;
    }
    rc = RV_ERR_IO;
out:
    curl_slist_free_all(hdr);
    curl_free(ejob);
    free(url);
    curl_easy_cleanup(c);
    return rc;
}

#endif
