#include "util/rv_error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

void rv_error_clear(rv_error *e)
{
    if (!e)
        return;
    memset(e, 0, sizeof(*e));
    e->offset = -1;
    e->event_index = -1;
}

int rv_error_set(rv_error *e, int code, int64_t offset, int64_t event_index, const char *fmt, ...)
{
    if (!e)
        return code;
    va_list ap;
    e->code = code;
    e->offset = offset;
    e->event_index = event_index;
    e->field[0] = '\0';
    e->reason = RV_REASON_NONE;
    e->placed = 0;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return code;
}

int rv_error_field(rv_error *e, int code, const char *field, const char *fmt, ...)
{
    if (!e)
        return code;
    va_list ap;
    e->code = code;
    e->offset = -1;
    e->event_index = -1;
    e->reason = RV_REASON_NONE;
    e->placed = 0;
    snprintf(e->field, sizeof(e->field), "%s", field ? field : "");
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
    return code;
}

int rv_error_tag(rv_error *e, int reason, int code)
{
    if (e)
        e->reason = reason;
    return code;
}

int rv_error_placed(rv_error *e, int code)
{
    if (e)
        e->placed = 1;
    return code;
}

int rv_error_ensure(rv_error *e, int code, const char *what)
{
    if (code < 0 && e && e->code == RV_OK)
        rv_error_set(e, code, -1, -1, "%s failed: %s", what ? what : "the call", rv_err_name(code));
    return code;
}

const char *rv_err_name(int code)
{
    switch (code) {
    case RV_OK: return "ok";
    case RV_ERR_NOMEM: return "out_of_memory";
    case RV_ERR_IO: return "io_error";
    case RV_ERR_PARSE: return "parse_error";
    case RV_ERR_INVALID: return "invalid";
    case RV_ERR_UNSUPPORTED: return "unsupported";
    case RV_ERR_LIMIT: return "limit_exceeded";
    case RV_ERR_NOTFOUND: return "not_found";
    case RV_ERR_BUDGET: return "budget_exceeded";
    case RV_ERR_FORBIDDEN: return "forbidden";
    default: return "internal_error";
    }
}
