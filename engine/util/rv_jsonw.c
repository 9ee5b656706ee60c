/* The JSON string writer and its UTF-8 checks. See rv_jsonw.h. */
#include "util/rv_jsonw.h"

#include <stdint.h>
#include <string.h>

#include "util/rv_error.h"

static const char replacement[] = "\xef\xbf\xbd"; /* U+FFFD */

size_t rv_jsonw_utf8_seq(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    if (n == 0)
        return 0;
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    /* Lead byte -> length and the range of the second byte (RFC 3629 table). */
    size_t len = 0;
    unsigned lo = 0x80, hi = 0xbf;
    if (c >= 0xc2 && c <= 0xdf) {
        len = 2;
    } else if (c >= 0xe0 && c <= 0xef) {
        len = 3;
        lo = c == 0xe0 ? 0xa0 : 0x80; /* no overlong forms */
        hi = c == 0xed ? 0x9f : 0xbf; /* no surrogates */
    } else if (c >= 0xf0 && c <= 0xf4) {
        len = 4;
        lo = c == 0xf0 ? 0x90 : 0x80;
        hi = c == 0xf4 ? 0x8f : 0xbf; /* at most U+10FFFF */
    }
    if (len == 0 || n < len || p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if ((p[k] & 0xc0) != 0x80)
            return 0;
    return len;
}

size_t rv_jsonw_utf8_valid(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        /* Eight ASCII bytes at a time: names are mostly ASCII. */
        if (n - i >= 8) {
            uint64_t w;
            memcpy(&w, s + i, 8);
            if ((w & 0x8080808080808080ULL) == 0) {
                i += 8;
                continue;
            }
        }
        size_t k = rv_jsonw_utf8_seq(s + i, n - i);
        if (k == 0)
            return i;
        i += k;
    }
    return n;
}

int rv_jsonw_utf8_fix(rv_buf *b, const char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        size_t ok = rv_jsonw_utf8_valid(s + i, n - i);
        int rc = rv_buf_add(b, s + i, ok);
        if (rc == 0 && i + ok < n)
            rc = rv_buf_add(b, replacement, 3);
        if (rc)
            return rc;
        i += ok + 1;
    }
    return 0;
}

int rv_jsonw_str_sink(rv_jsonw_sink sink, void *ctx, const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t run = 0, i = 0;
    int rc;
    char esc[8];
    if ((rc = sink(ctx, "\"", 1)) < 0)
        return rc;
    while (i < n) {
        unsigned c = p[i];
        size_t k = 1;
        const char *out = NULL;
        size_t nout = 0;
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            out = esc;
            nout = 2;
        } else if (c < 0x20) {
            snprintf(esc, sizeof(esc), "\\u%04x", c);
            out = esc;
            nout = 6;
        } else if (c >= 0x80 && (k = rv_jsonw_utf8_seq(s + i, n - i)) == 0) {
            out = "\\ufffd";
            nout = 6;
            k = 1;
        }
        if (!out) {
            i += k; /* plain: stays in the run */
            continue;
        }
        if (i > run && (rc = sink(ctx, s + run, i - run)) < 0)
            return rc;
        if ((rc = sink(ctx, out, nout)) < 0)
            return rc;
        i += k;
        run = i;
    }
    if (i > run && (rc = sink(ctx, s + run, i - run)) < 0)
        return rc;
    return sink(ctx, "\"", 1);
}

static int buf_sink(void *ctx, const char *p, size_t n)
{
    return rv_buf_add(ctx, p, n);
}

static int file_sink(void *ctx, const char *p, size_t n)
{
    return fwrite(p, 1, n, ctx) == n ? 0 : RV_ERR_IO;
}

int rv_jsonw_strn(rv_buf *b, const char *s, size_t n)
{
    return rv_jsonw_str_sink(buf_sink, b, s, n);
}

int rv_jsonw_str(rv_buf *b, const char *s)
{
    return rv_jsonw_str_sink(buf_sink, b, s, strlen(s));
}

int rv_jsonw_str_file(FILE *f, const char *s)
{
    return rv_jsonw_str_sink(file_sink, f, s, strlen(s));
}
