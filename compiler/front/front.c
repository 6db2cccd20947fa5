/* The front end's entry points: read the source, parse, check, print diagnostics. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "front.h"

/* Larger inputs are certainly not model files; refuse them before allocating. */
#define DM_MAX_SOURCE_BYTES (16u << 20)

static void set_counts(const dm_diag *d, int *nerrors, int *nwarnings)
{
    if (nerrors) *nerrors = d->nerrors;
    if (nwarnings) *nwarnings = d->nwarnings;
}

static dm_model *front_bytes(const char *file_name, const char *text, size_t len, FILE *diag_out,
                             int *nerrors, int *nwarnings)
{
    dm_model *m = calloc(1, sizeof *m);
    if (!m) abort();
    m->file = dm_arena_strdup(m, file_name ? file_name : "<string>");
    char *source = dm_arena_alloc(m, len + 1);
    memcpy(source, text, len);
    source[len] = '\0';
    m->source = source;

    dm_diag d;
    dm_diag_init(&d, diag_out, m->file, source, len);
    if (dm_parse(m, &d, source, len) == 0) dm_check(m, &d);
    dm_diag_flush(&d);
    set_counts(&d, nerrors, nwarnings);
    if (d.nerrors > 0) {
        dm_model_free(m);
        return NULL;
    }
    return m;
}

dm_model *dm_front_string(const char *file_name, const char *text, FILE *diag_out, int *nerrors,
                          int *nwarnings)
{
    return front_bytes(file_name, text ? text : "", text ? strlen(text) : 0, diag_out, nerrors,
                       nwarnings);
}

/* A file-level failure (cannot read): one error without a location. */
static dm_model *file_error(const char *path, FILE *diag_out, int *nerrors, int *nwarnings,
                            const char *why)
{
    fprintf(diag_out ? diag_out : stderr, "%s: error: %s\n", path, why);
    if (nerrors) *nerrors = 1;
    if (nwarnings) *nwarnings = 0;
    return NULL;
}

dm_model *dm_front_file(const char *path, FILE *diag_out, int *nerrors, int *nwarnings)
{
    FILE *f = fopen(path, "rb");
    if (!f) return file_error(path, diag_out, nerrors, nwarnings, strerror(errno));
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) abort();
    size_t got;
    while ((got = fread(buf + len, 1, cap - len, f)) > 0) {
        len += got;
        if (len > DM_MAX_SOURCE_BYTES) {
            free(buf);
            fclose(f);
            return file_error(path, diag_out, nerrors, nwarnings,
                              "file too large to be a model (over 16 MiB)");
        }
        if (len == cap) {
            cap *= 2;
            char *bigger = realloc(buf, cap);
            if (!bigger) abort();
            buf = bigger;
        }
    }
    int failed = ferror(f);
    fclose(f);
    if (failed) {
        free(buf);
        return file_error(path, diag_out, nerrors, nwarnings, "read error");
    }
    dm_model *m = front_bytes(path, buf, len, diag_out, nerrors, nwarnings);
    free(buf);
    return m;
}
