/* The capped growable buffer. See rv_buf.h. */
#include "util/rv_buf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "util/rv_error.h"

#define FIRST_ALLOC 256

void rv_buf_init(rv_buf *b, size_t max)
{
    b->p = NULL;
    b->len = 0;
    b->alloc = 0;
    b->max = max;
    b->err = 0;
}

void rv_buf_free(rv_buf *b)
{
    if (!b)
        return;
    free(b->p);
    rv_buf_init(b, b->max);
}

static int fail(rv_buf *b, int code)
{
    b->err = code;
    return code;
}

/* Makes alloc hold len + n bytes and the NUL, doubling, never past the cap. */
static int grow(rv_buf *b, size_t n)
{
    /* The NUL's byte sits on top of the cap, so keep max + 1 in range. */
    size_t max = b->max < SIZE_MAX ? b->max : SIZE_MAX - 1;
    if (b->err)
        return b->err;
    if (n > max || b->len > max - n)
        return fail(b, RV_ERR_LIMIT);
    size_t need = b->len + n + 1;
    if (need <= b->alloc)
        return 0;
    size_t top = max + 1;
    size_t a = b->alloc ? b->alloc : FIRST_ALLOC;
    while (a < need)
        a = a > SIZE_MAX / 2 ? SIZE_MAX : a * 2;
    if (a > top)
        a = top;
    char *p = realloc(b->p, a);
    if (!p)
        return fail(b, RV_ERR_NOMEM);
    b->p = p;
    b->alloc = a;
    return 0;
}

int rv_buf__add_slow(rv_buf *b, const void *s, size_t n)
{
    int rc = grow(b, n);
    if (rc)
        return rc;
    if (n)
        memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
    return 0;
}

int rv_buf_adds(rv_buf *b, const char *s)
{
    return rv_buf_add(b, s, strlen(s));
}

int rv_buf_addc(rv_buf *b, int c)
{
    char ch = (char)c;
    return rv_buf_add(b, &ch, 1);
}

int rv_buf_vprintf(rv_buf *b, const char *fmt, va_list ap)
{
    va_list again;
    if (b->err)
        return b->err;
    /* First try the room there is; grow once to the exact size if short. */
    va_copy(again, ap);
    size_t room = rv_buf_room(b);
    int n = vsnprintf(room ? b->p + b->len : NULL, room ? room + 1 : 0, fmt, ap);
    int rc = 0;
    if (n >= 0 && (size_t)n > room) {
        rc = grow(b, (size_t)n);
        if (rc == 0 && vsnprintf(b->p + b->len, (size_t)n + 1, fmt, again) != n)
            n = -1;
    }
    if (rc == 0 && n < 0)
        rc = fail(b, RV_ERR_INTERNAL);
    va_end(again);
    if (rc == 0) {
        b->len += (size_t)n;
        return 0;
    }
    /* A cut-off first try may have written past len: restore the NUL. */
    if (b->p)
        b->p[b->len] = '\0';
    return rc;
}

int rv_buf_printf(rv_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int rc = rv_buf_vprintf(b, fmt, ap);
    va_end(ap);
    return rc;
}

char *rv_buf_reserve(rv_buf *b, size_t n)
{
    if (grow(b, n) != 0)
        return NULL;
    return b->p + b->len;
}

char *rv_buf_take(rv_buf *b, size_t *len)
{
    char *p = b->p;
    size_t n = b->len;
    if (b->err) {
        free(p);
        p = NULL;
        n = 0;
    } else if (!p) {
        p = calloc(1, 1);
    }
    rv_buf_init(b, b->max);
    if (len)
        *len = p ? n : 0;
    return p;
}
