/* A streaming JSON scanner over plain or gzip input (gzip is detected by
 * its magic bytes; concatenated members are read as one stream).
 *
 * Decompressed bytes are pulled into one window buffer (256 KiB refills) and
 * scanned by recursive descent that never needs more than the current byte:
 * strings are decoded into capped rv_bufs as they stream past and numbers
 * are copied into a fixed token buffer, so a token may straddle a refill
 * without any compaction. The caller drives it value by value (peek, ws,
 * eat, then string / number / literal / object iteration) and skips, while
 * still validating, whatever it does not use. Memory is the window plus the
 * caller's buffers, whatever the input size.
 *
 * Errors are sticky: the first one is kept in rc and in the caller's
 * rv_error, with the byte offset in the decompressed stream and, while the
 * caller has set item >= 0, the index of the item being read ("event 12 at
 * byte 3456: ..."). The Kineto reader (rv_kineto.c) is the user; see
 * docs/internals/kineto-reader.md. */
#ifndef RV_JSCAN_H
#define RV_JSCAN_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <zlib.h>

#include "util/rv_buf.h"
#include "util/rv_error.h"

#define RV_JSCAN_MAX_DEPTH  64                  /* nesting limit for any value */
#define RV_JSCAN_MAX_KEY    64                  /* longer keys are never ones a caller uses */
#define RV_JSCAN_MAX_NUMBER 1024                /* longest number token */
#define RV_JSCAN_WINDOW     ((size_t)256 << 10) /* one refill of decompressed bytes */

/* What a numeric conversion found (rv_jscan_dec_u64). ABSENT is for the
 * caller's own use: a value that was not there or was null. */
enum { RV_JSCAN_ABSENT = 0, RV_JSCAN_OK, RV_JSCAN_NOT_NUMBER, RV_JSCAN_RANGE };

typedef struct rv_jscan {
    /* Source: a borrowed memory buffer or a FILE, maybe gzip. */
    const unsigned char *mem;
    size_t mem_len, mem_pos;
    FILE *f;
    int gz, z_init, z_end, src_eof;
    z_stream zs;
    unsigned char *raw; /* compressed staging buffer for FILE input */
    void *isal;         /* ISA-L inflate state (owned) when built with it;
                           zs then only stages the compressed input */
    /* Or a feed (rv_jscan_open_feed): windows handed in by the caller. */
    int (*feed)(void *ctx, struct rv_jscan *s);
    void *feed_ctx;

    /* Window of decompressed bytes: buf[pos..end) is unread. */
    unsigned char *buf;
    size_t pos, end, cap;
    int own_buf, eof;
    int64_t base; /* offset of buf[0] in the decompressed stream */
    size_t max_input;
    /* The decompressed size the input announces (a plain input's length,
     * a gzip member's ISIZE), 0 when unknown: a hint to size arrays once,
     * never trusted as a bound. */
    size_t size_hint;

    rv_error *err;         /* borrowed; may be NULL */
    int rc;                /* first error, sticky */
    int64_t item;          /* index of the item being read, -1 outside */
    const char *item_name; /* what an item is called in messages ("event") */

    rv_buf key; /* the current object key; err set when longer than MAX_KEY */
    char num[RV_JSCAN_MAX_NUMBER + 1];
    size_t num_len;
} rv_jscan;

/* Sets s up to read exactly one of mem[0..len) (borrowed; scanned in place
 * when plain) or f (borrowed, read to EOF, not closed), at most max_input
 * decompressed bytes. err (borrowed, may be NULL) receives every later
 * error. Returns 0, or a negative rv_err with err filled; either way
 * rv_jscan_close must follow. */
int rv_jscan_open(rv_jscan *s, const void *mem, size_t len, FILE *f, size_t max_input,
                  rv_error *err);

/* Sets s up to scan windows that feed hands in: called with the window
 * used up (base already moved past it), it points s->buf at the next bytes
 * (borrowed; s->pos, s->end set, s->base may jump) and returns 1, or 0 at
 * the end of input, or a negative rv_err it recorded through
 * rv_jscan_fail_at. The feed owns the input and its caps. Always 0. */
int rv_jscan_open_feed(rv_jscan *s, int (*feed)(void *ctx, rv_jscan *s), void *ctx, rv_error *err);

/* Moves an open scanner from src to dst (whose old contents are dropped,
 * not freed): zlib's state points back at its stream, so it is copied
 * over. src is left closed. 0, or RV_ERR_NOMEM (src then unchanged). */
int rv_jscan_move(rv_jscan *dst, rv_jscan *src);

/* Frees what s holds (not the input). NULL-safe. */
void rv_jscan_close(rv_jscan *s);

/* Offset of the next unread byte in the decompressed stream. */
static inline int64_t rv_jscan_off(const rv_jscan *s)
{
    return s->base + (int64_t)s->pos;
}

/* Internal to the inline readers below: refills an empty window. 1 when
 * bytes came, 0 at end of input, negative on error. */
int rv_jscan_refill(rv_jscan *s);

/* For a caller that takes the bytes rather than scanning them: the next
 * window, read or inflated straight into dst (RV_JSCAN_WINDOW bytes, the
 * caller's) once s's own window is used up, as rv_jscan_refill would
 * fill it; *n bytes came, all consumed. Returns as rv_jscan_refill. */
int rv_jscan_refill_into(rv_jscan *s, unsigned char *dst, size_t *n);

/* The next byte without consuming it, or -1 at end of input / on error. */
static inline int rv_jscan_peek(rv_jscan *s)
{
    if (s->pos < s->end)
        return s->buf[s->pos];
    if (rv_jscan_refill(s) <= 0)
        return -1;
    return s->buf[s->pos];
}

/* Skips whitespace; then as rv_jscan_peek. */
static inline int rv_jscan_ws(rv_jscan *s)
{
    for (;;) {
        while (s->pos < s->end) {
            unsigned char c = s->buf[s->pos];
            if (c != ' ' && c != '\n' && c != '\r' && c != '\t')
                return c;
            s->pos++;
        }
        if (rv_jscan_refill(s) <= 0)
            return -1;
    }
}

/* Consumes the byte that rv_jscan_peek or rv_jscan_ws just returned. */
static inline void rv_jscan_eat(rv_jscan *s)
{
    s->pos++;
}

/* Records an error at byte off (the first one wins) and returns the code
 * kept in s->rc. */
int rv_jscan_fail_at(rv_jscan *s, int code, int64_t off, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* "expected X, found Y" at the current byte (c < 0: end of input). */
int rv_jscan_fail_char(rv_jscan *s, int c, const char *expected);

/* "unexpected end of input inside X (truncated file?)". */
int rv_jscan_fail_eof(rv_jscan *s, const char *inside);

/* c as it reads in a message: "'x'", "\\x0a", or "end of input" for c < 0.
 * Returns out. */
const char *rv_jscan_show_char(int c, char out[12]);

/* Reads a string whose opening quote was consumed, decoding escapes
 * (surrogate pairs joined, lone surrogates as U+FFFD). b (may be NULL:
 * skip) is reset first; a string longer than b's cap leaves b->err set and
 * the scan goes on. 0 or a negative rv_err. */
int rv_jscan_string(rv_jscan *s, rv_buf *b);

/* Reads a number token into s->num (NUL-terminated, s->num_len bytes),
 * checking the JSON grammar. 0 or a negative rv_err. */
int rv_jscan_number(rv_jscan *s);

/* Reads the literal lit ("true", "false", "null"). */
int rv_jscan_literal(rv_jscan *s, const char *lit);

/* Skips any value, validating it; depth is the nesting depth of the value
 * itself (past RV_JSCAN_MAX_DEPTH is RV_ERR_LIMIT). */
int rv_jscan_skip(rv_jscan *s, int depth);

/* Object iteration after its '{' was consumed: each call reads the next key
 * into s->key and its ':' and returns 1, or consumes the '}' and returns 0.
 * The caller consumes each value. Negative on error. */
int rv_jscan_object_first(rv_jscan *s);
int rv_jscan_object_next(rv_jscan *s);

/* Whether the current key is k. */
int rv_jscan_key_is(const rv_jscan *s, const char *k);

/* Whether s[0..n) follows the JSON number grammar. */
int rv_jscan_number_valid(const char *s, size_t n);

/* Value of a hex digit, -1 for other characters. */
int rv_jscan_hexval(int c);

/* Converts the decimal s[0..n) (JSON number grammar; a leading '+' and
 * surrounding blanks allowed, as numbers inside strings have them; "0x.."
 * hex when scale is 0) to an integer in units of 10^-scale, rounding half
 * away from zero below the unit, exactly for any digit count (digits are
 * walked one by one, never through a double). The magnitude goes to *mag
 * (UINT64_MAX on RANGE), the sign to *neg. Returns RV_JSCAN_OK,
 * RV_JSCAN_NOT_NUMBER or RV_JSCAN_RANGE. */
int rv_jscan_dec_u64(const char *s, size_t n, int scale, uint64_t *mag, int *neg);

/* The same as a signed value in int64 range (else RV_JSCAN_RANGE). */
int rv_jscan_dec_i64(const char *s, size_t n, int scale, int64_t *out);

/* The common number at the scanner's position in one pass: a plain
 * -?digits(.digits)? of at most 19 digits that ends inside the window,
 * converted as rv_jscan_dec_i64 would (scale 0..3) and consumed. Returns 1
 * then; 0 with nothing consumed for anything else, which the caller reads
 * the general way (rv_jscan_number, then rv_jscan_dec_i64). */
int rv_jscan_dec_here(rv_jscan *s, int scale, int64_t *out);

#endif
