/* Acquisition scheme files: one row per volume, named columns (docs/fitting.md, --scheme).
 * Two layouts: a header line `# NAME NAME ...` (spaces or commas, as MDT's protocols), or
 * Camino's `VERSION: STEJSKALTANNER` (x y z |G| DELTA delta TE, read as gx gy gz G Delta delta
 * TE). */
#ifndef DIMOC_SCHEME_FILE_H
#define DIMOC_SCHEME_FILE_H

#define DM_SCHEME_NAME_MAX 64

typedef struct dm_scheme {
    int rows, cols;
    char (*names)[DM_SCHEME_NAME_MAX]; /* cols names */
    double *values;                    /* rows x cols, row-major */
} dm_scheme;

/* Reads PATH into *s.  0, or -1 naming the file (and line) of what is wrong: no header, a
 * header name that is not a name or is repeated, a row whose length differs from the header's. */
int dm_scheme_read(const char *path, dm_scheme *s);
/* The index of column NAME, or -1. */
int dm_scheme_column(const dm_scheme *s, const char *name);
/* The column names joined by spaces into buf (cut to size). */
void dm_scheme_names(const dm_scheme *s, char *buf, int size);
void dm_scheme_free(dm_scheme *s);

#endif
