/* Diagnostics of the front end: "file:line:col: error: message", the source line, and a
 * caret under the column.  Messages are collected while parsing and checking, then printed
 * sorted by file and position, at most DM_MAX_ERRORS errors.  A location's file index picks
 * the model's imported file (dm_model.sources) once dm_diag.model is set; a message may carry
 * notes ("file:line:col: note: ..."), printed after it. */
#ifndef DIMOC_DIAG_H
#define DIMOC_DIAG_H

#include <stddef.h>
#include <stdio.h>
#include "ast.h"

#define DM_MAX_ERRORS 20

typedef struct dm_diag_msg dm_diag_msg;

typedef struct dm_diag {
    FILE *out;
    const char *file;
    const char *source; /* the text the locations of file 0 refer to */
    size_t source_len;
    const struct dm_model *model; /* NULL, or the model whose sources name files 1, 2, ... */
    int nerrors, nwarnings;
    dm_diag_msg *msgs;
    int nmsgs, cap;
} dm_diag;

void dm_diag_init(dm_diag *d, FILE *out, const char *file, const char *source, size_t len);

#if defined(__GNUC__)
#define DM_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define DM_PRINTF(f, a)
#endif

void dm_error(dm_diag *d, dm_loc loc, const char *fmt, ...) DM_PRINTF(3, 4);
void dm_warning(dm_diag *d, dm_loc loc, const char *fmt, ...) DM_PRINTF(3, 4);

/* A note on every message reported since dm_diag_mark() returned MARK (an error inside an
 * inlined definition: where it was called). */
int dm_diag_mark(const dm_diag *d);
void dm_note_since(dm_diag *d, int mark, dm_loc loc, const char *fmt, ...) DM_PRINTF(4, 5);

/* True once DM_MAX_ERRORS errors have been reported: stages may stop early. */
int dm_diag_full(const dm_diag *d);

/* Print the collected messages sorted by position, then release them. */
void dm_diag_flush(dm_diag *d);

#endif
