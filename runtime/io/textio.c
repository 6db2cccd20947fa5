/* Numeric text matrices and FSL bvals/bvecs. */
#include "io/textio.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* allow_nan: "nan" tokens are read as NaN (bvecs write them for b=0 volumes). */
/* Text here is printable bytes, tabs and line ends (and UTF-8 in comments); a NUL or another
 * control byte means a binary file (an image given as bvals, say), reported without its bytes. */
static long binary_offset(const char *text, size_t len)
{
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)text[i];
        if (c == 0 || c == 0x7f || (c < 0x20 && !strchr("\t\n\r\f\v", c))) return (long)i;
    }
    return -1;
}

/* skip: lines 1..skip are not read (a header the caller reads). */
static int read_matrix(const char *path, int *rows, int *cols, double **data, int allow_nan,
                       int skip)
{
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return dm_set_error("%s is a directory, not a text file", path);
    size_t len;
    char *text = dm_read_file(path, &len);
    if (!text) return -1;
    long at = binary_offset(text, len);
    if (at >= 0) {
        dm_set_error("%s: not a text file (binary byte 0x%02x at offset %ld)", path,
                     (unsigned char)text[at], at);
        free(text);
        return -1;
    }
    size_t cap = 256, n = 0;
    double *values = malloc(cap * sizeof *values);
    int nrows = 0, ncols = 0, first_row_line = 0, lineno = 0;
    char *line = text;
    int status = values ? 0 : dm_set_error("out of memory reading %s", path);
    while (status == 0 && line && *line) {
        char *next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        char *hash = strchr(line, '#');
        if (hash) *hash = '\0';
        if (lineno <= skip) *line = '\0';
        int in_row = 0;
        char *p = line;
        for (;;) {
            while (isspace((unsigned char)*p) || *p == ',') p++;
            if (!*p) break;
            char *end;
            double v = strtod(p, &end);
            char *tok_end = end;
            while (*tok_end && !isspace((unsigned char)*tok_end) && *tok_end != ',') tok_end++;
            if (end == p || end != tok_end || !(isfinite(v) || (allow_nan && isnan(v)))) {
                int toklen = (int)(tok_end - p);
                status = dm_set_error("%s:%d: '%.*s' is not a number", path, lineno,
                                      toklen > 40 ? 40 : toklen, p);
                break;
            }
            if (n == cap) {
                double *bigger = realloc(values, 2 * cap * sizeof *values);
                if (!bigger) {
                    status = dm_set_error("out of memory reading %s", path);
                    break;
                }
                values = bigger;
                cap *= 2;
            }
            values[n++] = v;
            in_row++;
            p = end;
        }
        if (status == 0 && in_row > 0) {
            if (nrows == 0) {
                ncols = in_row;
                first_row_line = lineno;
            } else if (in_row != ncols) {
                status = dm_set_error("%s:%d: %d values on this line but %d on line %d", path,
                                      lineno, in_row, ncols, first_row_line);
            }
            nrows++;
        }
        line = next;
    }
    free(text);
    if (status == 0 && nrows == 0) status = dm_set_error("%s: no numbers in the file", path);
    if (status != 0) {
        free(values);
        return -1;
    }
    *rows = nrows;
    *cols = ncols;
    *data = values;
    return 0;
}

int dm_read_matrix(const char *path, int *rows, int *cols, double **data)
{
    return read_matrix(path, rows, cols, data, 0, 0);
}

int dm_read_matrix_after(const char *path, int skip, int *rows, int *cols, double **data)
{
    return read_matrix(path, rows, cols, data, 0, skip);
}

/* bvals: one row or one column. */
static int read_bvals(const char *path, int *count, double **b)
{
    int r, c;
    double *m;
    if (dm_read_matrix(path, &r, &c, &m) != 0) return -1;
    if (r != 1 && c != 1) {
        free(m);
        return dm_set_error("%s: expected bvals in one row or one column, found %d rows of %d",
                            path, r, c);
    }
    *count = r * c;
    *b = m;
    return 0;
}

/* bvecs: 3 rows (FSL's layout, preferred when the matrix is 3x3) or 3 columns. */
static int read_bvecs(const char *path, int *count, double **g)
{
    int r, c;
    double *m;
    if (read_matrix(path, &r, &c, &m, 1, 0) != 0) return -1;
    if (r == 3) {
        double *t = malloc((size_t)c * 3 * sizeof *t);
        if (!t) {
            free(m);
            return dm_set_error("out of memory reading %s", path);
        }
        for (int i = 0; i < c; i++)
            for (int k = 0; k < 3; k++) t[3 * i + k] = m[(size_t)k * c + i];
        free(m);
        *count = c;
        *g = t;
        return 0;
    }
    if (c == 3) {
        *count = r;
        *g = m;
        return 0;
    }
    free(m);
    return dm_set_error("%s: expected bvecs as 3 rows or 3 columns, found %d rows of %d", path, r,
                        c);
}

int dm_read_bvals_bvecs(const char *bvals_path, const char *bvecs_path, int nvol, double **b,
                        double **g, int *nread)
{
    double *bv = NULL, *gv = NULL;
    int nb = 0, ng = 0;
    if (read_bvals(bvals_path, &nb, &bv) != 0) return -1;
    if (read_bvecs(bvecs_path, &ng, &gv) != 0) {
        free(bv);
        return -1;
    }
    int status = 0;
    if (nvol > 0 && nb != nvol)
        status = dm_set_error("%s: %d b-values but the data has %d volumes", bvals_path, nb, nvol);
    else if (nvol > 0 && ng != nvol)
        status =
            dm_set_error("%s: %d directions but the data has %d volumes", bvecs_path, ng, nvol);
    else if (ng != nb)
        status = dm_set_error("%s: %d directions but %s has %d b-values", bvecs_path, ng,
                              bvals_path, nb);
    for (int i = 0; status == 0 && i < nb; i++)
        if (bv[i] < 0)
            status = dm_set_error("%s: negative b-value %g (volume %d)", bvals_path, bv[i], i);
    /* Some tools write "nan nan nan" as the direction of a b=0 volume (DIPY's small_64D does):
     * it means "no direction" there, and is an error anywhere else. */
    for (int i = 0; status == 0 && i < nb; i++) {
        double *v = gv + 3 * i;
        if (!isnan(v[0]) && !isnan(v[1]) && !isnan(v[2])) continue;
        if (bv[i] <= 50)
            v[0] = v[1] = v[2] = 0;
        else
            status = dm_set_error("%s: direction of volume %d (b=%g) is not a number", bvecs_path,
                                  i, bv[i]);
    }
    if (status != 0) {
        free(bv);
        free(gv);
        return -1;
    }
    /* Directions of diffusion-weighted volumes must be unit vectors; some scanners and tools
     * write them rounded or scaled.  b=0 directions are left as they are (often 0 0 0). */
    int fixed = 0, first_fixed = -1;
    double first_norm = 0;
    for (int i = 0; i < nb; i++) {
        if (bv[i] <= 0) continue;
        double *v = gv + 3 * i;
        double norm = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        if (norm != 0 && fabs(1 - norm) > 0.01) {
            if (fixed++ == 0) {
                first_fixed = i;
                first_norm = norm;
            }
            for (int k = 0; k < 3; k++) v[k] /= norm;
        }
    }
    if (fixed)
        dm_warn("%s: %d direction%s of b>0 not of unit length (first: volume %d, length %.4g); "
                "normalised",
                bvecs_path, fixed, fixed > 1 ? "s" : "", first_fixed, first_norm);
    *b = bv;
    *g = gv;
    if (nread) *nread = nb;
    return 0;
}

int dm_check_directed(const char *path, int n, const double *b, const double *g)
{
    for (int i = 0; i < n; i++) {
        if (!(b[i] > 10)) continue;
        const double *v = g + 3 * i;
        double len = sqrt(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
        if (!(len > 0.5 && len < 1.5))
            return dm_set_error("%s: direction %d has length %g at b = %g; a diffusion-weighted "
                                "measurement needs a unit direction",
                                path, i + 1, len, b[i]);
    }
    return 0;
}

/* Appends printf output to a growing buffer; returns -1 when out of memory. */
typedef struct {
    char *s;
    size_t len, cap;
} text_buf;

static int append(text_buf *t, const char *fmt, double v)
{
    if (t->cap - t->len < 64) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        char *s = realloc(t->s, cap);
        if (!s) return -1;
        t->s = s;
        t->cap = cap;
    }
    t->len += (size_t)snprintf(t->s + t->len, t->cap - t->len, fmt, v);
    return 0;
}

/* Prints -0 as 0 and keeps 15 significant digits: exact for b-values, tidy for directions. */
static int append_row(text_buf *t, int n, const double *x, int stride)
{
    for (int i = 0; i < n; i++) {
        double v = x[(size_t)i * stride];
        if (v == 0) v = 0;
        if (append(t, i ? " %.15g" : "%.15g", v) != 0) return -1;
    }
    return append(t, "\n", 0);
}

int dm_write_bvals_bvecs(const char *bvals_path, const char *bvecs_path, int n, const double *b,
                         const double *g)
{
    text_buf vals = {0}, vecs = {0};
    int ok = append_row(&vals, n, b, 1) == 0;
    for (int k = 0; ok && k < 3; k++) ok = append_row(&vecs, n, g + k, 3) == 0;
    /* Both written under temporary names, then renamed into place together. */
    char *tmp[2] = {dm_temp_sibling(bvals_path), dm_temp_sibling(bvecs_path)};
    char *final[2] = {(char *)bvals_path, (char *)bvecs_path};
    int status;
    if (!ok || !tmp[0] || !tmp[1])
        status = dm_set_error("out of memory writing %s", bvecs_path);
    else if (dm_write_file_atomic(tmp[0], vals.s, vals.len) != 0 ||
             dm_write_file_atomic(tmp[1], vecs.s, vecs.len) != 0)
        status = dm_set_error("cannot write %s: %s", bvals_path, dm_last_error());
    else
        status = dm_commit_files(tmp, final, 2);
    for (int i = 0; i < 2; i++)
        if (tmp[i]) {
            if (status != 0) unlink(tmp[i]);
            free(tmp[i]);
        }
    free(vals.s);
    free(vecs.s);
    return status;
}
