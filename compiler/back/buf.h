/* A growable text buffer, the one thing the back end's text writers (emit.c, meta.c) share. */
#ifndef DIMOC_BUF_H
#define DIMOC_BUF_H

#include <stddef.h>
#include "front/diag.h" /* DM_PRINTF */

/* Starts empty ({0}); s is NULL until something is written, then NUL-terminated and owned by
 * the writer (free it with free()).  Running out of memory aborts. */
typedef struct dm_buf {
    char *s;
    size_t n, cap;
} dm_buf;

void dm_buf_printf(dm_buf *b, const char *fmt, ...) DM_PRINTF(2, 3);
void dm_buf_puts(dm_buf *b, const char *s);

/* A number as the generated code prints it: the shortest of %.15g..%.17g that reads back
 * exactly; inf, -inf and nan spelled so. */
void dm_buf_number(dm_buf *b, double v);

#endif
