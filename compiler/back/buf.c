/* The growable text buffer (buf.h). */
#include "buf.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static void buf_reserve(dm_buf *b, size_t extra)
{
    if (b->n + extra + 1 <= b->cap) return;
    size_t cap = b->cap ? b->cap : 4096;
    while (cap < b->n + extra + 1) cap *= 2;
    b->s = realloc(b->s, cap);
    if (!b->s) abort();
    b->cap = cap;
}

void dm_buf_printf(dm_buf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    buf_reserve(b, (size_t)len);
    va_start(ap, fmt);
    vsnprintf(b->s + b->n, (size_t)len + 1, fmt, ap);
    va_end(ap);
    b->n += (size_t)len;
}

void dm_buf_puts(dm_buf *b, const char *s)
{
    dm_buf_printf(b, "%s", s);
}

void dm_buf_number(dm_buf *b, double v)
{
    if (isnan(v)) {
        dm_buf_puts(b, "nan");
        return;
    }
    if (isinf(v)) {
        dm_buf_puts(b, v > 0 ? "inf" : "-inf");
        return;
    }
    char text[40];
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(text, sizeof text, "%.*g", digits, v);
        if (strtod(text, NULL) == v) break;
    }
    dm_buf_puts(b, text);
}
