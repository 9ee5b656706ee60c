#include "http_client.h"

#include <curl/curl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static size_t on_data(char *p, size_t sz, size_t n, void *ud)
{
    tc_resp *r = ud;
    size_t add = sz * n;

    /* Doubling: a realloc per chunk copies the whole body each time, which
     * under ASan (whose realloc always moves) took minutes for 60 MB. */
    if (r->len + add + 1 > r->cap) {
        size_t cap = r->cap ? r->cap * 2 : 4096;
        while (cap < r->len + add + 1)
            cap *= 2;
        char *nb = realloc(r->body, cap);
        if (!nb)
            return 0;
        r->body = nb;
        r->cap = cap;
    }
    memcpy(r->body + r->len, p, add);
    r->len += add;
    r->body[r->len] = '\0';
    return add;
}

typedef struct src {
    const char *p;
    size_t left;
} src;

static size_t on_read(char *buf, size_t sz, size_t n, void *ud)
{
    src *s = ud;
    size_t k = sz * n < s->left ? sz * n : s->left;
    memcpy(buf, s->p, k);
    s->p += k;
    s->left -= k;
    return k;
}

int tc_do(const tc_req *q, tc_resp *out)
{
    CURL *c = curl_easy_init();
    struct curl_slist *hdrs = NULL;
    FILE *f = NULL;
    char line[256];
    src s = {q->body, q->len};
    int rc = -1;

    memset(out, 0, sizeof(*out));
    if (!c)
        return -1;
    curl_easy_setopt(c, CURLOPT_URL, q->url);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, out);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    hdrs = curl_slist_append(hdrs, q->expect_continue ? "Expect: 100-continue" : "Expect:");
    if (q->ctype) {
        snprintf(line, sizeof(line), "Content-Type: %s", q->ctype);
        hdrs = curl_slist_append(hdrs, line);
    }
    for (int i = 0; i < 8 && q->headers[i]; i++)
        hdrs = curl_slist_append(hdrs, q->headers[i]);
    if (q->file) {
        f = fopen(q->file, "rb");
        if (!f)
            goto out;
        fseek(f, 0, SEEK_END);
        long sz = ftell(f);
        fseek(f, 0, SEEK_SET);
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READDATA, f);
        if (q->chunked)
            hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
        else
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)sz);
    } else if (q->body) {
        curl_easy_setopt(c, CURLOPT_POST, 1L);
        curl_easy_setopt(c, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(c, CURLOPT_READDATA, &s);
        if (q->chunked)
            hdrs = curl_slist_append(hdrs, "Transfer-Encoding: chunked");
        else
            curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)q->len);
    }
    if (q->method)
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, q->method);
    if (q->method && strcmp(q->method, "HEAD") == 0)
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, hdrs);
    CURLcode cc = curl_easy_perform(c);
    if (cc == CURLE_OK || cc == CURLE_SEND_ERROR) {
        curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &out->status);
        char *ct = NULL;
        curl_easy_getinfo(c, CURLINFO_CONTENT_TYPE, &ct);
        if (ct)
            snprintf(out->ctype, sizeof(out->ctype), "%s", ct);
        rc = out->status ? 0 : -1;
    }
    if (!out->body) {
        out->body = calloc(1, 1);
        out->len = 0;
    }
out:
    if (rc != 0) {
        /* No status: nothing for the caller to free. */
        free(out->body);
        out->body = NULL;
    }
    if (f)
        fclose(f);
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(c);
    return rc;
}

void tc_resp_free(tc_resp *r)
{
    free(r->body);
    r->body = NULL;
    r->len = r->cap = 0;
}

long tc_get(const char *url, const char *token, tc_resp *out)
{
    char auth[128];
    tc_req q = {0};

    q.url = url;
    if (token) {
        snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
        q.headers[0] = auth;
    }
    if (tc_do(&q, out) != 0)
        return -1;
    return out->status;
}
