/* The front end's entry points: read the source, parse, check, print diagnostics. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "compiler.h"
#include "front.h"

/* Larger inputs are certainly not model files; refuse them before allocating. */
#define DM_MAX_SOURCE_BYTES (16u << 20)
/* The most files one model may import, directly or not. */
#define DM_MAX_IMPORTS 64

static void set_counts(const dm_diag *d, int *nerrors, int *nwarnings)
{
    if (nerrors) *nerrors = d->nerrors;
    if (nwarnings) *nwarnings = d->nwarnings;
}

/* Reads PATH whole (NUL-terminated, *len bytes); NULL with *why set on failure. */
static char *read_whole(const char *path, size_t *len, const char **why)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *why = strerror(errno);
        return NULL;
    }
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    if (!buf) abort();
    size_t got;
    while ((got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (n > DM_MAX_SOURCE_BYTES) {
            free(buf);
            fclose(f);
            *why = "file too large to be a model (over 16 MiB)";
            return NULL;
        }
        if (n == cap - 1) {
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
        *why = "read error";
        return NULL;
    }
    buf[n] = '\0';
    *len = n;
    return buf;
}

/* Appends a source file to the model's table (text copied into the arena); its index. */
static int add_source(dm_model *m, const char *path, const char *text, size_t len)
{
    dm_source *src = dm_arena_alloc(m, sizeof *src);
    src->path = dm_arena_strdup(m, path);
    char *copy = dm_arena_alloc(m, len + 1);
    memcpy(copy, text, len);
    copy[len] = '\0';
    src->text = copy;
    src->len = len;
    char *real = realpath(path, NULL);
    if (real) {
        src->real = dm_arena_strdup(m, real);
        free(real);
    }
    dm_vec_push(m, m->sources, src);
    return m->sources.n - 1;
}

/* The import's path: as written when absolute or when the importing file has no folder,
 * else relative to that folder. */
static char *import_path(dm_model *m, const dm_import *im)
{
    const char *from = m->sources.items[im->loc.file]->path;
    const char *slash = strrchr(from, '/');
    if (im->path[0] == '/' || !slash) return dm_arena_strdup(m, im->path);
    size_t dir = (size_t)(slash - from) + 1;
    char *path = dm_arena_alloc(m, dir + strlen(im->path) + 1);
    memcpy(path, from, dir);
    strcpy(path + dir, im->path);
    return path;
}

/* Reads and parses every imported file, each once (an import of a file already read, the
 * model's own included, does nothing; so cycles of imports are harmless).  The imports of an
 * imported file are appended to m->imports as it is parsed, so one pass reads them all. */
static void read_imports(dm_model *m, dm_diag *d)
{
    for (int i = 0; i < m->imports.n && !dm_diag_full(d); i++) {
        const dm_import *im = m->imports.items[i];
        const char *path = import_path(m, im);
        char *real = realpath(path, NULL);
        int seen = 0;
        for (int k = 0; real && k < m->sources.n && !seen; k++)
            seen = m->sources.items[k]->real && strcmp(m->sources.items[k]->real, real) == 0;
        free(real);
        if (seen) continue;
        if (m->sources.n > DM_MAX_IMPORTS) {
            dm_error(d, im->loc, "too many imported files (at most %d)", DM_MAX_IMPORTS);
            return;
        }
        const char *why = NULL;
        size_t len = 0;
        char *text = read_whole(path, &len, &why);
        if (!text) {
            if (strcmp(path, im->path) == 0)
                dm_error(d, im->loc, "cannot import \"%s\": %s", im->path, why);
            else
                dm_error(d, im->loc, "cannot import \"%s\": %s (looked for %s)", im->path, why,
                         path);
            continue;
        }
        int file = add_source(m, path, text, len);
        free(text);
        const dm_source *src = m->sources.items[file];
        dm_parse(m, d, src->text, src->len, file);
    }
}

static dm_model *front_bytes(const char *file_name, const char *text, size_t len, FILE *diag_out,
                             int *nerrors, int *nwarnings)
{
    dm_model *m = calloc(1, sizeof *m);
    if (!m) abort();
    add_source(m, file_name ? file_name : "<string>", text, len);
    m->file = m->sources.items[0]->path;
    m->source = m->sources.items[0]->text;

    dm_diag d;
    dm_diag_init(&d, diag_out, m->file, m->source, len);
    d.model = m;
    dm_parse(m, &d, m->source, len, 0);
    read_imports(m, &d);
    if (d.nerrors == 0) dm_check(m, &d);
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
    const char *why = NULL;
    size_t len = 0;
    char *buf = read_whole(path, &len, &why);
    if (!buf) return file_error(path, diag_out, nerrors, nwarnings, why);
    dm_model *m = front_bytes(path, buf, len, diag_out, nerrors, nwarnings);
    free(buf);
    return m;
}
