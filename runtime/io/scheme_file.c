/* Acquisition scheme files with named columns (scheme_file.h). */
#include "io/scheme_file.h"
#include "io/textio.h"
#include "util/error.h"
#include "util/fsutil.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Camino's STEJSKALTANNER columns, in SI units: unit gradient direction, |G| (T/m), pulse
 * separation and duration (s), echo time (s). */
static const char *const camino_names[] = {"gx", "gy", "gz", "G", "Delta", "delta", "TE"};
#define CAMINO_COLS 7

static int is_name(const char *s, size_t n)
{
    if (n == 0 || n >= DM_SCHEME_NAME_MAX || !(isalpha((unsigned char)s[0]) || s[0] == '_'))
        return 0;
    for (size_t i = 1; i < n; i++)
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_')) return 0;
    return 1;
}

static int add_name(const char *path, int line, dm_scheme *s, const char *name, size_t n)
{
    if (!is_name(name, n))
        return dm_set_error("%s:%d: '%.*s' is not a column name (letters, digits and _, not "
                            "beginning with a digit)",
                            path, line, (int)(n > 40 ? 40 : n), name);
    for (int i = 0; i < s->cols; i++)
        if (strlen(s->names[i]) == n && memcmp(s->names[i], name, n) == 0)
            return dm_set_error("%s:%d: column '%.*s' is named twice", path, line, (int)n, name);
    char(*more)[DM_SCHEME_NAME_MAX] = realloc(s->names, (size_t)(s->cols + 1) * sizeof *more);
    if (!more) return dm_set_error("out of memory reading %s", path);
    s->names = more;
    snprintf(s->names[s->cols++], DM_SCHEME_NAME_MAX, "%.*s", (int)n, name);
    return 0;
}

/* The header.  Lines before the first row of numbers are blank, '#' lines or Camino's
 * `VERSION:` line: with a VERSION line, the '#' lines are comments; without one, the first '#'
 * line names the columns.  *header_line: the last line of the header. */
static int read_header(const char *path, const char *text, dm_scheme *s, int *header_line)
{
    const char *p = text, *first_hash = NULL;
    int line = 1, hash_line = 0;
    for (; *p; line++) {
        const char *end = strchr(p, '\n');
        if (!end) end = p + strlen(p);
        const char *q = p;
        while (q < end && isspace((unsigned char)*q)) q++;
        if (q < end && *q != '#') {
            p = q;
            break;
        }
        if (q < end && !first_hash) {
            first_hash = q;
            hash_line = line;
        }
        p = *end ? end + 1 : end;
    }
    const char *end = strchr(p, '\n');
    if (!end) end = p + strlen(p);
    if (strncmp(p, "VERSION:", 8) != 0 && first_hash) { /* the first '#' line is the header */
        p = first_hash;
        line = hash_line;
        end = strchr(p, '\n');
        if (!end) end = p + strlen(p);
    }
    *header_line = line;
    while (p < end && isspace((unsigned char)*p)) p++;
    if (strncmp(p, "VERSION:", 8) == 0) {
        const char *v = p + 8;
        while (v < end && isspace((unsigned char)*v)) v++;
        size_t n = (size_t)(end - v);
        while (n > 0 && isspace((unsigned char)v[n - 1])) n--;
        if (n != 14 || strncmp(v, "STEJSKALTANNER", 14) != 0)
            return dm_set_error("%s:%d: Camino scheme 'VERSION: %.*s' is not supported (only "
                                "VERSION: STEJSKALTANNER)",
                                path, line, (int)(n > 30 ? 30 : n), v);
        for (int i = 0; i < CAMINO_COLS; i++)
            if (add_name(path, line, s, camino_names[i], strlen(camino_names[i])) != 0) return -1;
        return 0;
    }
    if (*p != '#')
        return dm_set_error("%s:%d: a scheme file begins with a header naming its columns, as "
                            "'# gx gy gz b G Delta delta TE', or with Camino's 'VERSION: "
                            "STEJSKALTANNER'",
                            path, line);
    for (p++; p < end;) {
        while (p < end && (isspace((unsigned char)*p) || *p == ',')) p++;
        const char *w = p;
        while (p < end && !isspace((unsigned char)*p) && *p != ',') p++;
        if (p > w && add_name(path, line, s, w, (size_t)(p - w)) != 0) return -1;
    }
    if (s->cols == 0) return dm_set_error("%s:%d: the header names no column", path, line);
    return 0;
}

int dm_scheme_read(const char *path, dm_scheme *s)
{
    memset(s, 0, sizeof *s);
    size_t len;
    char *text = dm_read_file(path, &len);
    if (!text) return -1;
    int header_line = 0;
    int rc = read_header(path, text, s, &header_line);
    free(text);
    int rows = 0, cols = 0;
    if (rc == 0) rc = dm_read_matrix_after(path, header_line, &rows, &cols, &s->values);
    if (rc == 0 && cols != s->cols) {
        char names[512];
        dm_scheme_names(s, names, sizeof names);
        rc = dm_set_error("%s: %d value%s per row, but the header names %d column%s (%s)", path,
                          cols, cols == 1 ? "" : "s", s->cols, s->cols == 1 ? "" : "s", names);
    }
    if (rc != 0) {
        dm_scheme_free(s);
        return -1;
    }
    s->rows = rows;
    return 0;
}

int dm_scheme_column(const dm_scheme *s, const char *name)
{
    for (int i = 0; i < s->cols; i++)
        if (strcmp(s->names[i], name) == 0) return i;
    return -1;
}

void dm_scheme_names(const dm_scheme *s, char *buf, int size)
{
    int n = 0;
    buf[0] = '\0';
    for (int i = 0; i < s->cols && n < size; i++)
        n += snprintf(buf + n, (size_t)(size - n), "%s%s", i ? " " : "", s->names[i]);
}

void dm_scheme_free(dm_scheme *s)
{
    free(s->names);
    free(s->values);
    memset(s, 0, sizeof *s);
}
