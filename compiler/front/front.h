/* Internal interface between the front-end stages: lexer + parser (parser.y, lexer.l),
 * checker (check.c), driven by front.c. */
#ifndef DIMOC_FRONT_H
#define DIMOC_FRONT_H

#include <stddef.h>
#include "ast.h"
#include "diag.h"

/* Expressions nested deeper than this are rejected by the parser, so that every later
 * stage may recurse over a tree without fear for its stack. */
#define DM_MAX_EXPR_DEPTH 200

/* Longest name (parameters and outputs become file names and C identifiers). */
#define DM_MAX_NAME_LEN 64

/* Widest per-measurement or per-voxel input. */
#define DM_MAX_INPUT_WIDTH 1024
/* The most LM starts a model may ask for (`multistart N`). */
#define DM_MAX_MULTISTART 16

/* State shared by the scanner and the parser of one run. */
typedef struct dm_parse_ctx {
    dm_model *m;
    dm_diag *diag;
    int line, col;       /* scanner position of the next character */
    int nstatements;     /* statements reduced so far ('model' must be the first) */
    char last_token[32]; /* text of the latest token and of the one before, for messages */
    char prev_token[32];
    int bad_char_pending;     /* the scanner skipped a bad character since the last token */
    int token_after_bad_char; /* the latest token follows a skipped bad character */
    int file;                 /* index of the file in m->sources: 0 the model, >0 imported */
    int statement_was_error;  /* the latest statement was a syntax error (skipped) */
} dm_parse_ctx;

/* Parse TEXT (LEN bytes; NUL bytes are reported as invalid characters), the source FILE of M
 * (0 the model file; an imported file may hold only definitions and imports), into M.
 * Returns the number of errors reported. */
int dm_parse(dm_model *m, dm_diag *diag, const char *text, size_t len, int file);

/* Resolve names, compute types, widths, columns and constant values; report semantic
 * errors and warnings.  Returns the number of errors reported. */
int dm_check(dm_model *m, dm_diag *diag);

#endif
