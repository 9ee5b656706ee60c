/* The one JSON string writer: a C string in, a JSON string literal out that
 * is always valid JSON and valid UTF-8, into an rv_buf, a FILE or any sink.
 *
 * '"' and '\\' get a backslash; bytes below 0x20 become \u00xx (lowercase
 * hex, as every writer in the tree wrote them); well-formed UTF-8 (RFC 3629:
 * no overlong forms, no surrogates, nothing past U+10FFFF) and 0x7f pass
 * through; each byte that does not begin a well-formed sequence becomes
 * \ufffd, one per byte. The UTF-8 helpers below apply the same rule to text
 * that is kept rather than written (the Kineto reader's string interning). */
#ifndef RV_JSONW_H
#define RV_JSONW_H

#include <stddef.h>
#include <stdio.h>

#include "util/rv_buf.h"

/* Where rv_jsonw_str_sink writes: n bytes at p (borrowed); 0 or a negative
 * rv_err, which stops the write and is returned. */
typedef int (*rv_jsonw_sink)(void *ctx, const char *p, size_t n);

/* Appends s (borrowed) as a JSON string literal, quotes included. 0 or
 * rv_buf_add's error. */
int rv_jsonw_str(rv_buf *b, const char *s);

/* Same for n bytes of s (a NUL among them is written as \u0000). */
int rv_jsonw_strn(rv_buf *b, const char *s, size_t n);

/* Same to a stream: 0, or RV_ERR_IO when the stream reports an error. */
int rv_jsonw_str_file(FILE *f, const char *s);

/* Same to a sink: runs of plain bytes go out in one call each. */
int rv_jsonw_str_sink(rv_jsonw_sink sink, void *ctx, const char *s, size_t n);

/* Length of the well-formed UTF-8 sequence at s[0..n) (1 to 4), 0 when
 * s[0] does not begin one (or n is 0). */
size_t rv_jsonw_utf8_seq(const char *s, size_t n);

/* Length of the longest well-formed UTF-8 prefix of s[0..n): n when all of
 * it is valid. Fast on ASCII. */
size_t rv_jsonw_utf8_valid(const char *s, size_t n);

/* Appends s[0..n) to b with every byte that does not begin a well-formed
 * sequence replaced by U+FFFD (EF BF BD). 0 or rv_buf_add's error. */
int rv_jsonw_utf8_fix(rv_buf *b, const char *s, size_t n);

#endif
