/* The streaming JSON scanner. See rv_jscan.h. */
#include "util/rv_jscan.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef RV_HAVE_ISAL
#include <isa-l/igzip_lib.h>
#endif

#define WINDOW_BYTES RV_JSCAN_WINDOW
#define RAW_BYTES    ((size_t)1 << 20) /* one read of compressed input */

/* ---------------------------------------------------------------- errors */

int rv_jscan_fail_at(rv_jscan *s, int code, int64_t off, const char *fmt, ...)
{
    char msg[200];
    va_list ap;
    if (s->rc)
        return s->rc;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    s->rc = code;
    if (s->item >= 0)
        rv_error_set(s->err, code, off, s->item, "%s %" PRId64 " at byte %" PRId64 ": %s",
                     s->item_name ? s->item_name : "item", s->item, off, msg);
    else
        rv_error_set(s->err, code, off, -1, "at byte %" PRId64 ": %s", off, msg);
    rv_error_placed(s->err, code);
    return code;
}

#define FAIL(s, code, ...) rv_jscan_fail_at((s), (code), rv_jscan_off(s), __VA_ARGS__)

const char *rv_jscan_show_char(int c, char out[12])
{
    if (c < 0)
        return "end of input";
    if (c >= 0x20 && c < 0x7f)
        snprintf(out, 12, "'%c'", c);
    else
        snprintf(out, 12, "\\x%02x", (unsigned)(c & 0xff));
    return out;
}

int rv_jscan_fail_eof(rv_jscan *s, const char *inside)
{
    if (s->rc)
        return s->rc;
    return FAIL(s, RV_ERR_PARSE, "unexpected end of input inside %s (truncated file?)", inside);
}

int rv_jscan_fail_char(rv_jscan *s, int c, const char *expected)
{
    char tmp[12];
    if (c < 0)
        return rv_jscan_fail_eof(s, expected);
    return FAIL(s, RV_ERR_PARSE, "expected %s, found %s", expected, rv_jscan_show_char(c, tmp));
}

/* ---------------------------------------------------------------- input */

/* Pulls more compressed bytes into zs; 0 at source EOF, 1 when some came, <0 on error. */
static int pull_raw(rv_jscan *s)
{
    if (s->src_eof)
        return 0;
    if (s->mem) {
        size_t n = s->mem_len - s->mem_pos;
        if (n > (1u << 30))
            n = 1u << 30; /* avail_in is a uInt */
        s->zs.next_in = (Bytef *)(s->mem + s->mem_pos);
        s->zs.avail_in = (uInt)n;
        s->mem_pos += n;
        if (s->mem_pos == s->mem_len)
            s->src_eof = 1;
        return n > 0;
    }
    size_t n = fread(s->raw, 1, RAW_BYTES, s->f);
    if (n == 0) {
        if (ferror(s->f))
            return FAIL(s, RV_ERR_IO, "read error on the compressed input");
        s->src_eof = 1;
        return 0;
    }
    s->zs.next_in = s->raw;
    s->zs.avail_in = (uInt)n;
    return 1;
}

/* After a gzip member ends: another member may follow (concatenated gzip). */
static int gz_next_member(rv_jscan *s)
{
    if (s->zs.avail_in == 0) {
        int rc = pull_raw(s);
        if (rc < 0)
            return rc;
        if (rc == 0) {
            s->z_end = 1;
            return 0;
        }
    }
    if (s->zs.next_in[0] != 0x1f)
        return FAIL(s, RV_ERR_PARSE, "garbage after the end of the gzip stream");
#ifdef RV_HAVE_ISAL
    if (s->isal) {
        struct inflate_state *st = s->isal;
        isal_inflate_reset(st);
        st->crc_flag = ISAL_GZIP;
        return 0;
    }
#endif
    if (inflateReset(&s->zs) != Z_OK)
        return FAIL(s, RV_ERR_INTERNAL, "inflateReset failed");
    return 0;
}

#ifdef RV_HAVE_ISAL
/* One igzip call into the empty window (the zlib loop's body for ISA-L):
 * s->end bytes came; a member's end moves on to the next one. */
static int inflate_isal(rv_jscan *s)
{
    struct inflate_state *st = s->isal;
    if (s->zs.avail_in == 0) {
        int rc = pull_raw(s);
        if (rc < 0)
            return rc;
    }
    st->next_in = s->zs.next_in;
    st->avail_in = s->zs.avail_in;
    st->next_out = s->buf;
    st->avail_out = (uint32_t)s->cap;
    int irc = isal_inflate(st);
    s->zs.next_in = st->next_in;
    s->zs.avail_in = st->avail_in;
    s->end = s->cap - st->avail_out;
    if (irc < 0 || irc == ISAL_NEED_DICT)
        return FAIL(s, RV_ERR_PARSE, "corrupt gzip data (igzip error %d)", irc);
    if (st->block_state == ISAL_BLOCK_FINISH)
        return gz_next_member(s);
    /* Input is not held back by igzip: no output from none is the end. */
    if (s->end == 0 && s->zs.avail_in == 0 && s->src_eof)
        return FAIL(s, RV_ERR_PARSE, "truncated gzip stream (compressed data ends early)");
    return 0;
}
#endif

/* Refills the window once everything in it was consumed. Returns 1 when
 * bytes came, 0 at end of input, <0 on error. */
int rv_jscan_refill(rv_jscan *s)
{
    if (s->rc)
        return s->rc;
    if (s->eof)
        return 0;
    s->base += (int64_t)s->end;
    s->pos = s->end = 0;
    if (s->feed) {
        int rc = s->feed(s->feed_ctx, s);
        if (rc == 0)
            s->eof = 1;
        return rc;
    }
    if (!s->gz) {
        size_t n = fread(s->buf, 1, s->cap, s->f);
        if (n == 0) {
            if (ferror(s->f))
                return FAIL(s, RV_ERR_IO, "read error");
            s->eof = 1;
            return 0;
        }
        s->end = n;
    } else {
        while (s->end == 0) {
            if (s->z_end) {
                s->eof = 1;
                return 0;
            }
#ifdef RV_HAVE_ISAL
            if (s->isal) {
                int rc = inflate_isal(s);
                if (rc < 0)
                    return rc;
                continue;
            }
#endif
            if (s->zs.avail_in == 0) {
                int rc = pull_raw(s);
                if (rc < 0)
                    return rc;
                if (rc == 0)
                    return FAIL(s, RV_ERR_PARSE,
                                "truncated gzip stream (compressed data ends early)");
            }
            s->zs.next_out = s->buf;
            s->zs.avail_out = (uInt)s->cap;
            int zrc = inflate(&s->zs, Z_NO_FLUSH);
            s->end = s->cap - s->zs.avail_out;
            if (zrc == Z_STREAM_END) {
                int rc = gz_next_member(s);
                if (rc < 0)
                    return rc;
            } else if (zrc == Z_MEM_ERROR) {
                return FAIL(s, RV_ERR_NOMEM, "out of memory in zlib");
            } else if (zrc == Z_DATA_ERROR || zrc == Z_NEED_DICT || zrc == Z_STREAM_ERROR) {
                return FAIL(s, RV_ERR_PARSE, "corrupt gzip data (%s)",
                            s->zs.msg ? s->zs.msg : "inflate failed");
            }
        }
    }
    if ((uint64_t)s->base + s->end > s->max_input)
        return rv_error_tag(
            s->err, RV_REASON_INPUT_BYTES,
            FAIL(s, RV_ERR_LIMIT, "input is larger than the %zu-byte cap", s->max_input));
    return 1;
}

int rv_jscan_refill_into(rv_jscan *s, unsigned char *dst, size_t *n)
{
    unsigned char *own = s->buf;
    s->buf = dst; /* same capacity: the same windows as a scan would see */
    int rc = rv_jscan_refill(s);
    *n = rc > 0 ? s->end : 0;
    s->buf = own;
    s->pos = s->end;
    return rc;
}

/* A gzip member's ISIZE (its last 4 bytes, little-endian), or 0 when it
 * cannot be the input's size: modulo 4 GiB, it is smaller than the
 * compressed bytes only when it wrapped (or lies). */
static size_t gzip_isize(const unsigned char *tail4, size_t compressed)
{
    size_t v =
        (size_t)tail4[0] | (size_t)tail4[1] << 8 | (size_t)tail4[2] << 16 | (size_t)tail4[3] << 24;
    return v >= compressed ? v : 0;
}

/* What the input says its decompressed size is (rv_jscan.size_hint). A
 * stream that is not a regular file says nothing. */
static size_t size_hint_of(const unsigned char *mem, size_t len, FILE *f, int gz)
{
    if (mem)
        return !gz ? len : len >= 18 ? gzip_isize(mem + len - 4, len) : 0;
    struct stat st;
    int fd = fileno(f);
    if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size < 18)
        return 0;
    if (!gz)
        return (size_t)st.st_size;
    unsigned char tail[4];
    /* pread leaves the stream's offset where it is. */
    if (pread(fd, tail, 4, st.st_size - 4) != 4)
        return 0;
    return gzip_isize(tail, (size_t)st.st_size);
}

int rv_jscan_open(rv_jscan *s, const void *mem, size_t len, FILE *f, size_t max_input,
                  rv_error *err)
{
    unsigned char magic[2];
    size_t nmagic = 0;

    memset(s, 0, sizeof(*s));
    s->err = err;
    s->item = -1;
    s->max_input = max_input;
    rv_buf_init(&s->key, RV_JSCAN_MAX_KEY);

    /* Sniff the gzip magic without losing bytes from a stream. */
    if (mem) {
        nmagic = len < 2 ? len : 2;
        memcpy(magic, mem, nmagic);
    } else {
        nmagic = fread(magic, 1, 2, f);
        if (nmagic < 2 && ferror(f))
            return s->rc = rv_error_set(err, RV_ERR_IO, 0, -1, "read error");
    }
    s->gz = nmagic == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    s->size_hint = size_hint_of(mem, len, f, s->gz);

    if (s->gz) {
#ifdef RV_HAVE_ISAL
        s->isal = malloc(sizeof(struct inflate_state));
        if (!s->isal)
            return s->rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        isal_inflate_init(s->isal);
        ((struct inflate_state *)s->isal)->crc_flag = ISAL_GZIP;
#else
        if (inflateInit2(&s->zs, 15 + 16) != Z_OK)
            return s->rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "zlib init failed");
        s->z_init = 1;
#endif
        s->cap = WINDOW_BYTES;
        s->buf = malloc(s->cap);
        s->own_buf = 1;
        if (mem) {
            s->mem = mem;
            s->mem_len = len;
        } else {
            s->f = f;
            s->raw = malloc(RAW_BYTES);
            if (!s->raw)
                return s->rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            memcpy(s->raw, magic, 2);
            s->zs.next_in = s->raw;
            s->zs.avail_in = 2;
        }
        if (!s->buf)
            return s->rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    } else if (mem) {
        /* Plain memory: scan the caller's bytes in place. */
        s->buf = (unsigned char *)mem;
        s->end = s->cap = len;
        s->eof = 1;
        if (len > s->max_input)
            return s->rc = rv_error_tag(err, RV_REASON_INPUT_BYTES,
                                        rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                                                     "input is larger than the %zu-byte cap",
                                                     s->max_input));
    } else {
        s->f = f;
        s->cap = WINDOW_BYTES;
        s->buf = malloc(s->cap);
        s->own_buf = 1;
        if (!s->buf)
            return s->rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        memcpy(s->buf, magic, nmagic);
        s->end = nmagic;
    }
    return 0;
}

int rv_jscan_open_feed(rv_jscan *s, int (*feed)(void *ctx, rv_jscan *s), void *ctx, rv_error *err)
{
    memset(s, 0, sizeof(*s));
    s->err = err;
    s->item = -1;
    s->max_input = SIZE_MAX; /* the feed's source keeps the cap */
    s->feed = feed;
    s->feed_ctx = ctx;
    rv_buf_init(&s->key, RV_JSCAN_MAX_KEY);
    return 0;
}

int rv_jscan_move(rv_jscan *dst, rv_jscan *src)
{
    memcpy(dst, src, sizeof(*dst));
    if (src->z_init) {
        if (inflateCopy(&dst->zs, &src->zs) != Z_OK) {
            memset(dst, 0, sizeof(*dst));
            return RV_ERR_NOMEM;
        }
        inflateEnd(&src->zs);
    }
    memset(src, 0, sizeof(*src));
    return 0;
}

void rv_jscan_close(rv_jscan *s)
{
    if (!s)
        return;
    if (s->z_init)
        inflateEnd(&s->zs);
    s->z_init = 0;
    if (s->own_buf)
        free(s->buf);
    s->buf = NULL;
    s->own_buf = 0;
    free(s->raw);
    s->raw = NULL;
    free(s->isal);
    s->isal = NULL;
    rv_buf_free(&s->key);
}

/* ---------------------------------------------------------------- scanner */

int rv_jscan_hexval(int c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static int read_hex4(rv_jscan *s, unsigned *out)
{
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        int c = rv_jscan_peek(s);
        int h = rv_jscan_hexval(c);
        if (h < 0)
            return rv_jscan_fail_char(s, c, "4 hex digits after \\u");
        rv_jscan_eat(s);
        v = v * 16 + (unsigned)h;
    }
    *out = v;
    return 0;
}

/* Appends decoded bytes; past b's cap the string is cut (b->err says so)
 * and the scan goes on, so only running out of memory is an error. */
static int put_failed(rv_jscan *s, rv_buf *b)
{
    if (b->err == RV_ERR_LIMIT)
        return 0;
    return FAIL(s, b->err, "out of memory decoding a string");
}

static inline int put(rv_jscan *s, rv_buf *b, const void *p, size_t n)
{
    return rv_buf_add(b, p, n) == 0 ? 0 : put_failed(s, b);
}

static int put_utf8(rv_jscan *s, rv_buf *b, unsigned cp)
{
    char u[4];
    size_t n;
    if (cp < 0x80) {
        u[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        u[0] = (char)(0xc0 | (cp >> 6));
        u[1] = (char)(0x80 | (cp & 0x3f));
        n = 2;
    } else if (cp < 0x10000) {
        u[0] = (char)(0xe0 | (cp >> 12));
        u[1] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[2] = (char)(0x80 | (cp & 0x3f));
        n = 3;
    } else {
        u[0] = (char)(0xf0 | (cp >> 18));
        u[1] = (char)(0x80 | ((cp >> 12) & 0x3f));
        u[2] = (char)(0x80 | ((cp >> 6) & 0x3f));
        u[3] = (char)(0x80 | (cp & 0x3f));
        n = 4;
    }
    return put(s, b, u, n);
}

/* Decodes one escape (the backslash already consumed) into b (may be NULL). */
static int read_escape(rv_jscan *s, rv_buf *b)
{
    int c = rv_jscan_peek(s);
    char ch;
    switch (c) {
    case '"': ch = '"'; break;
    case '\\': ch = '\\'; break;
    case '/': ch = '/'; break;
    case 'b': ch = '\b'; break;
    case 'f': ch = '\f'; break;
    case 'n': ch = '\n'; break;
    case 'r': ch = '\r'; break;
    case 't': ch = '\t'; break;
    case 'u': {
        unsigned cp = 0, lo = 0;
        int rc;
        rv_jscan_eat(s);
        if ((rc = read_hex4(s, &cp)) < 0)
            return rc;
        if (cp >= 0xd800 && cp < 0xdc00 && rv_jscan_peek(s) == '\\') {
            rv_jscan_eat(s);
            if (rv_jscan_peek(s) != 'u') {
                /* A lone high surrogate followed by another escape. */
                if (b && (rc = put_utf8(s, b, 0xfffd)) < 0)
                    return rc;
                return read_escape(s, b);
            }
            rv_jscan_eat(s);
            if ((rc = read_hex4(s, &lo)) < 0)
                return rc;
            if (lo >= 0xdc00 && lo < 0xe000) {
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else {
                if (b && (rc = put_utf8(s, b, 0xfffd)) < 0)
                    return rc;
                cp = (lo >= 0xd800 && lo < 0xe000) ? 0xfffd : lo;
            }
        } else if (cp >= 0xd800 && cp < 0xe000) {
            cp = 0xfffd;
        }
        return b ? put_utf8(s, b, cp) : 0;
    }
    default: return rv_jscan_fail_char(s, c, "a valid escape after '\\'");
    }
    rv_jscan_eat(s);
    return b ? put(s, b, &ch, 1) : 0;
}

/* Length of p[0..n) before the first '"' or '\\' (n when none): keys and
 * ids end within a few bytes, where a byte loop beats two memchr calls. */
static inline size_t scan_short(const unsigned char *p, size_t n)
{
    size_t i = 0;
    while (i < n && p[i] != '"' && p[i] != '\\')
        i++;
    return i;
}

int rv_jscan_string(rv_jscan *s, rv_buf *b)
{
    int rc;
    if (b)
        rv_buf_reset(b);
    for (;;) {
        /* A refill that reports data has a buffer; said for the analyzer. */
        if ((s->pos >= s->end && rv_jscan_refill(s) <= 0) || !s->buf)
            return rv_jscan_fail_eof(s, "a string");
        const unsigned char *p = s->buf + s->pos;
        size_t n = s->end - s->pos;
        const unsigned char *bs = NULL, *q = NULL;
        size_t seg = scan_short(p, n < 32 ? n : 32);
        if (seg < n && p[seg] == '"') {
            q = p + seg;
        } else if (seg < n && p[seg] == '\\') {
            bs = p + seg;
        } else {
            /* Long strings: memchr finds the quote, then any escape before it. */
            q = memchr(p + seg, '"', n - seg);
            size_t end = q ? (size_t)(q - p) : n;
            bs = memchr(p + seg, '\\', end - seg);
            seg = end;
        }
        if (bs) {
            if (b && (rc = put(s, b, p, (size_t)(bs - p))) < 0)
                return rc;
            s->pos += (size_t)(bs - p) + 1;
            if ((rc = read_escape(s, b)) < 0)
                return rc;
            continue;
        }
        if (b && (rc = put(s, b, p, seg)) < 0)
            return rc;
        s->pos += seg;
        if (q) {
            rv_jscan_eat(s);
            return 0;
        }
    }
}

static inline int is_num_char(int c)
{
    return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

/* Validates JSON number grammar over s[0..n). */
int rv_jscan_number_valid(const char *s, size_t n)
{
    size_t i = 0;
    if (i < n && s[i] == '-')
        i++;
    if (i >= n || s[i] < '0' || s[i] > '9')
        return 0;
    if (s[i] == '0')
        i++;
    else
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    if (i < n && s[i] == '.') {
        i++;
        if (i >= n || s[i] < '0' || s[i] > '9')
            return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            i++;
        if (i >= n || s[i] < '0' || s[i] > '9')
            return 0;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
    }
    return i == n;
}

/* Length of the plain number (-?digits(.digits)?, no leading zero) at
 * p[0..n) when it ends before n on a byte that cannot continue a number;
 * 0 for anything else (the general path then decides). One pass both
 * finds the token's end and checks its grammar. */
static size_t plain_number_len(const unsigned char *p, size_t n)
{
    size_t i = 0, d;
    if (i < n && p[i] == '-')
        i++;
    for (d = i; i < n && p[i] >= '0' && p[i] <= '9'; i++)
        ;
    if (i == d || (p[d] == '0' && i - d > 1))
        return 0;
    if (i < n && p[i] == '.') {
        for (d = ++i; i < n && p[i] >= '0' && p[i] <= '9'; i++)
            ;
        if (i == d)
            return 0;
    }
    if (i >= n || is_num_char(p[i]) || i > RV_JSCAN_MAX_NUMBER)
        return 0;
    return i;
}

/* A token longer than RV_JSCAN_MAX_NUMBER is an error: only its first
 * bytes are kept while the rest streams past. */
int rv_jscan_number(rv_jscan *s)
{
    size_t fast = plain_number_len(s->buf + s->pos, s->end - s->pos);
    if (fast) {
        memcpy(s->num, s->buf + s->pos, fast);
        s->num[fast] = '\0';
        s->num_len = fast;
        s->pos += fast;
        return 0;
    }
    int over = 0;
    s->num_len = 0;
    int64_t start = rv_jscan_off(s);
    for (;;) {
        while (s->pos < s->end) {
            unsigned char c = s->buf[s->pos];
            if (!is_num_char(c))
                goto done;
            if (s->num_len < RV_JSCAN_MAX_NUMBER)
                s->num[s->num_len++] = (char)c;
            else
                over = 1;
            rv_jscan_eat(s);
        }
        if (rv_jscan_refill(s) <= 0) {
            if (s->rc)
                return s->rc;
            break;
        }
    }
done:
    s->num[s->num_len] = '\0';
    if (over)
        return rv_jscan_fail_at(s, RV_ERR_LIMIT, start, "number longer than %d characters",
                                RV_JSCAN_MAX_NUMBER);
    if (!rv_jscan_number_valid(s->num, s->num_len))
        return rv_jscan_fail_at(s, RV_ERR_PARSE, start, "malformed number \"%.40s\"", s->num);
    return 0;
}

int rv_jscan_literal(rv_jscan *s, const char *lit)
{
    for (const char *p = lit; *p; p++) {
        int c = rv_jscan_peek(s);
        if (c != (unsigned char)*p)
            return rv_jscan_fail_char(s, c, lit);
        rv_jscan_eat(s);
    }
    return 0;
}

int rv_jscan_skip(rv_jscan *s, int depth)
{
    int c = rv_jscan_ws(s), rc;
    if (depth > RV_JSCAN_MAX_DEPTH)
        return FAIL(s, RV_ERR_LIMIT, "nesting deeper than %d levels", RV_JSCAN_MAX_DEPTH);
    switch (c) {
    case '"': rv_jscan_eat(s); return rv_jscan_string(s, NULL);
    case '{':
        rv_jscan_eat(s);
        c = rv_jscan_ws(s);
        if (c == '}') {
            rv_jscan_eat(s);
            return 0;
        }
        for (;;) {
            if (c != '"')
                return rv_jscan_fail_char(s, c, "a key string");
            rv_jscan_eat(s);
            if ((rc = rv_jscan_string(s, NULL)) < 0)
                return rc;
            c = rv_jscan_ws(s);
            if (c != ':')
                return rv_jscan_fail_char(s, c, "':'");
            rv_jscan_eat(s);
            if ((rc = rv_jscan_skip(s, depth + 1)) < 0)
                return rc;
            c = rv_jscan_ws(s);
            if (c == '}') {
                rv_jscan_eat(s);
                return 0;
            }
            if (c != ',')
                return rv_jscan_fail_char(s, c, "',' or '}'");
            rv_jscan_eat(s);
            c = rv_jscan_ws(s);
        }
    case '[':
        rv_jscan_eat(s);
        c = rv_jscan_ws(s);
        if (c == ']') {
            rv_jscan_eat(s);
            return 0;
        }
        for (;;) {
            if ((rc = rv_jscan_skip(s, depth + 1)) < 0)
                return rc;
            c = rv_jscan_ws(s);
            if (c == ']') {
                rv_jscan_eat(s);
                return 0;
            }
            if (c != ',')
                return rv_jscan_fail_char(s, c, "',' or ']'");
            rv_jscan_eat(s);
        }
    case 't': return rv_jscan_literal(s, "true");
    case 'f': return rv_jscan_literal(s, "false");
    case 'n': return rv_jscan_literal(s, "null");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return rv_jscan_number(s);
        return rv_jscan_fail_char(s, c, "a JSON value");
    }
}

/* After an object's opening quote: the key, then ':'. Returns 1. */
static int read_key(rv_jscan *s)
{
    int rc = rv_jscan_string(s, &s->key);
    if (rc < 0)
        return rc;
    int c = rv_jscan_ws(s);
    if (c != ':')
        return rv_jscan_fail_char(s, c, "':' after a key");
    rv_jscan_eat(s);
    return 1;
}

int rv_jscan_object_first(rv_jscan *s)
{
    int c = rv_jscan_ws(s);
    if (c == '}') {
        rv_jscan_eat(s);
        return 0;
    }
    if (c != '"')
        return rv_jscan_fail_char(s, c, "a key string or '}'");
    rv_jscan_eat(s);
    return read_key(s);
}

int rv_jscan_object_next(rv_jscan *s)
{
    int c = rv_jscan_ws(s);
    if (c == '}') {
        rv_jscan_eat(s);
        return 0;
    }
    if (c != ',')
        return rv_jscan_fail_char(s, c, "',' or '}' in an object");
    rv_jscan_eat(s);
    c = rv_jscan_ws(s);
    if (c != '"')
        return rv_jscan_fail_char(s, c, "a key string");
    rv_jscan_eat(s);
    return read_key(s);
}

int rv_jscan_key_is(const rv_jscan *s, const char *k)
{
    size_t n = strlen(k);
    return !s->key.err && s->key.len == n && memcmp(s->key.p, k, n) == 0;
}

/* ---------------------------------------------------------------- numbers */

/* The common case of rv_jscan_dec_u64 in one pass: digits(.digits)? with
 * at most 18 digits in all, no leading zero, scale <= 3. Sets *mag and
 * returns 1, or returns 0 for the general path (same result, slower). */
/* The digits v, nfrac of them after the point, in units of 10^-scale
 * (scale 0..3): the digits below the unit dropped, rounding half away from
 * zero on the first dropped one, as the general path does. 0 when the
 * result does not fit in 64 bits. */
static int scale_digits(uint64_t v, size_t nfrac, int scale, uint64_t *mag)
{
    static const uint64_t pow10[] = {1, 10, 100, 1000};
    if (nfrac <= (size_t)scale) {
        uint64_t m = pow10[(size_t)scale - nfrac];
        if (v > UINT64_MAX / m)
            return 0;
        *mag = v * m;
        return 1;
    }
    uint64_t div = 1;
    for (size_t k = (size_t)scale; k + 1 < nfrac; k++)
        div *= 10;
    uint64_t q = v / div;
    *mag = q / 10 + (q % 10 >= 5);
    return 1;
}

static int dec_fast(const char *s, size_t n, int scale, uint64_t *mag)
{
    uint64_t v = 0;
    size_t i = 0, ndig = 0, nfrac = 0;
    if (n > 19 || scale < 0 || scale > 3 || (n > 1 && s[0] == '0' && s[1] != '.'))
        return 0;
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++, ndig++)
        v = v * 10 + (uint64_t)(s[i] - '0');
    if (ndig == 0)
        return 0;
    if (i < n && s[i] == '.') {
        for (i++; i < n && s[i] >= '0' && s[i] <= '9'; i++, ndig++, nfrac++)
            v = v * 10 + (uint64_t)(s[i] - '0');
        if (nfrac == 0)
            return 0;
    }
    if (i != n || ndig > 18)
        return 0;
    return scale_digits(v, nfrac, scale, mag);
}

/* The digits run and the conversion of rv_jscan_number and dec_fast in
 * one loop: timestamps are two of every event's numbers. */
int rv_jscan_dec_here(rv_jscan *s, int scale, int64_t *out)
{
    if (!s->buf || scale < 0 || scale > 3)
        return 0;
    const unsigned char *p = s->buf + s->pos, *e = s->buf + s->end, *q = p;
    int neg = q < e && *q == '-';
    q += neg;
    const unsigned char *d0 = q;
    uint64_t v = 0;
    while (q < e && *q >= '0' && *q <= '9' && q - d0 < 19)
        v = v * 10 + (uint64_t)(*q++ - '0');
    size_t nint = (size_t)(q - d0), nfrac = 0;
    if (nint == 0 || (*d0 == '0' && nint > 1))
        return 0;
    if (q < e && *q == '.') {
        const unsigned char *f0 = ++q;
        while (q < e && *q >= '0' && *q <= '9' && nint + (size_t)(q - f0) < 19)
            v = v * 10 + (uint64_t)(*q++ - '0');
        nfrac = (size_t)(q - f0);
        if (nfrac == 0)
            return 0;
    }
    /* Past 19 digits (the loops stop there: 19 always fit in 64 bits, and
     * epoch microseconds with three decimals have 19), an exponent, or a
     * token the window cuts: the general path. */
    if (q >= e || is_num_char(*q))
        return 0;
    uint64_t mag;
    /* Out of range: the general path says so. */
    if (!scale_digits(v, nfrac, scale, &mag) || mag > (uint64_t)INT64_MAX)
        return 0;
    *out = neg ? -(int64_t)mag : (int64_t)mag;
    s->pos += (size_t)(q - p);
    return 1;
}

int rv_jscan_dec_u64(const char *s, size_t n, int scale, uint64_t *mag, int *neg)
{
    while (n && (*s == ' ' || *s == '\t'))
        s++, n--;
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t'))
        n--;
    *neg = 0;
    *mag = 0;
    if (n && (*s == '-' || *s == '+')) {
        *neg = *s == '-';
        s++, n--;
    }
    if (!n)
        return RV_JSCAN_NOT_NUMBER;
    if (dec_fast(s, n, scale, mag))
        return RV_JSCAN_OK;
    /* Hex ("0x1f", used for AMD stream handles) only for plain integers. */
    if (scale == 0 && n > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        uint64_t v = 0;
        for (size_t i = 2; i < n; i++) {
            int h = rv_jscan_hexval((unsigned char)s[i]);
            if (h < 0)
                return RV_JSCAN_NOT_NUMBER;
            if (v > (UINT64_MAX >> 4)) {
                *mag = UINT64_MAX;
                return RV_JSCAN_RANGE;
            }
            v = v * 16 + (uint64_t)h;
        }
        *mag = v;
        return RV_JSCAN_OK;
    }
    if (!rv_jscan_number_valid(s, n))
        return RV_JSCAN_NOT_NUMBER; /* "5." or ".5" style strings too */
    size_t i = 0, int_end, frac_beg = 0, frac_end = 0;
    long exp = 0;
    while (i < n && s[i] >= '0' && s[i] <= '9')
        i++;
    int_end = i;
    if (i < n && s[i] == '.') {
        frac_beg = ++i;
        while (i < n && s[i] >= '0' && s[i] <= '9')
            i++;
        frac_end = i;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        int eneg = 0;
        i++;
        if (s[i] == '+' || s[i] == '-')
            eneg = s[i++] == '-';
        while (i < n) {
            if (exp < 100000)
                exp = exp * 10 + (s[i] - '0');
            i++;
        }
        if (eneg)
            exp = -exp;
    }
    /* Digit k (0-based over integer then fraction digits) has the power
     * int_end - 1 - k + exp + scale in result units. */
    long top = (long)int_end - 1 + exp + scale;
    size_t ndig = int_end + (frac_end - frac_beg);
    uint64_t v = 0;
    int range = 0;
    long p = top;
    for (size_t k = 0; k < ndig; k++, p--) {
        char d = k < int_end ? s[k] : s[frac_beg + (k - int_end)];
        unsigned dv = (unsigned)(d - '0');
        if (p >= 0) {
            if (v > (UINT64_MAX - dv) / 10)
                range = 1;
            else
                v = v * 10 + dv;
        } else {
            if (p == -1 && dv >= 5 && !range) {
                if (v == UINT64_MAX)
                    range = 1;
                else
                    v++;
            }
            break;
        }
    }
    /* Trailing powers when the digits ended above the unit (e.g. "12" us). */
    if (!range && v) {
        for (long q = p; q >= 0; q--) {
            if (v > UINT64_MAX / 10) {
                range = 1;
                break;
            }
            v *= 10;
        }
    }
    if (range) {
        *mag = UINT64_MAX;
        return RV_JSCAN_RANGE;
    }
    *mag = v;
    return RV_JSCAN_OK;
}

int rv_jscan_dec_i64(const char *s, size_t n, int scale, int64_t *out)
{
    uint64_t mag;
    int neg;
    int st = rv_jscan_dec_u64(s, n, scale, &mag, &neg);
    if (st != RV_JSCAN_OK)
        return st;
    if (neg) {
        if (mag > (uint64_t)INT64_MAX + 1)
            return RV_JSCAN_RANGE;
        *out = mag == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)mag;
    } else {
        if (mag > (uint64_t)INT64_MAX)
            return RV_JSCAN_RANGE;
        *out = (int64_t)mag;
    }
    return RV_JSCAN_OK;
}
