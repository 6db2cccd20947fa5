/* Internal interface between the back end's emitters (emit.c, meta.c): a growable text
 * buffer and the metadata writer. */
#ifndef DIMOC_BACKEND_H
#define DIMOC_BACKEND_H

#include <stddef.h>
#include "compiler.h"
#include "diag.h"

typedef struct dm_buf {
    char *s; /* NUL-terminated */
    size_t n, cap;
} dm_buf;

void dm_buf_printf(dm_buf *b, const char *fmt, ...) DM_PRINTF(2, 3);
void dm_buf_puts(dm_buf *b, const char *s);

/* A number as the metadata and the generated code print it: the shortest of %.15g..%.17g
 * that reads back exactly; inf, -inf and nan spelled so. */
void dm_buf_number(dm_buf *b, double v);

/* The metadata file (docs/metadata.md) of a model whose model.c text is c_source. */
char *dm_meta_text(const dm_model *m, const dm_flops *flops, const char *c_source);

#endif
