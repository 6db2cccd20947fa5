/* part.json as dm_part_write writes it: one object of strings and whole numbers, with one
 * nested object "files" of name -> merge kind.  The reader accepts any JSON spacing but only
 * this shape. */
#include "cluster/part_manifest.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "cluster/part.h"

#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct reader {
    const char *p, *path;
} reader;

static void skip_space(reader *r)
{
    while (isspace((unsigned char)*r->p)) r->p++;
}

static int expect(reader *r, char c)
{
    skip_space(r);
    if (*r->p != c) return dm_set_error("%s: not a part manifest (expected '%c')", r->path, c);
    r->p++;
    return 0;
}

/* A JSON string (the escapes dm_json writes, and \uXXXX below 0x80); malloc'd or NULL. */
static char *read_string(reader *r)
{
    if (expect(r, '"') != 0) return NULL;
    size_t cap = 64, n = 0;
    char *s = malloc(cap);
    for (; *r->p && *r->p != '"'; r->p++) {
        char c = *r->p;
        if (c == '\\') {
            c = *++r->p;
            if (c == 'n')
                c = '\n';
            else if (c == 't')
                c = '\t';
            else if (c == 'r')
                c = '\r';
            else if (c == 'u') {
                char hex[5] = {0};
                for (int i = 0; i < 4 && r->p[1]; i++) hex[i] = *++r->p;
                c = (char)strtol(hex, NULL, 16);
            } else if (c != '"' && c != '\\' && c != '/')
                break;
        }
        if (n + 2 > cap) s = realloc(s, cap *= 2);
        s[n++] = c;
    }
    if (*r->p != '"') {
        free(s);
        dm_set_error("%s: not a part manifest (a broken string)", r->path);
        return NULL;
    }
    r->p++;
    s[n] = 0;
    return s;
}

static int read_count(reader *r, const char *key, long long *v)
{
    skip_space(r);
    char *end;
    errno = 0;
    *v = strtoll(r->p, &end, 10);
    if (end == r->p || errno || *v < 0)
        return dm_set_error("%s: not a part manifest ('%s' is not a whole number)", r->path, key);
    r->p = end;
    return 0;
}

static int read_files(reader *r, dm_part_manifest *m)
{
    if (expect(r, '{') != 0) return -1;
    int cap = 16;
    m->files = calloc((size_t)cap, sizeof *m->files);
    skip_space(r);
    if (*r->p == '}') return r->p++, 0;
    for (;;) {
        char *name = read_string(r);
        char *kind = name && expect(r, ':') == 0 ? read_string(r) : NULL;
        int how = kind ? dm_part_merge_kind(kind) : 0;
        free(kind);
        if (!how || strchr(name, '/') || !strcmp(name, "..")) {
            free(name);
            return dm_set_error("%s: not a part manifest (a bad entry in \"files\")", r->path);
        }
        if (m->nfiles == cap) m->files = realloc(m->files, (size_t)(cap *= 2) * sizeof *m->files);
        m->files[m->nfiles++] = (dm_part_file){.name = name, .how = how};
        skip_space(r);
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        return expect(r, '}');
    }
}

static int read_members(reader *r, dm_part_manifest *m)
{
    long long version = 0, v;
    if (expect(r, '{') != 0) return -1;
    for (;;) {
        char *key = read_string(r);
        if (!key || expect(r, ':') != 0) return free(key), -1;
        int rc = 0;
        if (!strcmp(key, "command")) {
            free(m->command);
            rc = (m->command = read_string(r)) ? 0 : -1;
        } else if (!strcmp(key, "files")) {
            rc = read_files(r, m);
        } else if ((rc = read_count(r, key, &v)) == 0) {
            if (!strcmp(key, "dimoc_part"))
                version = v;
            else if (!strcmp(key, "part"))
                m->k = (int)v;
            else if (!strcmp(key, "parts"))
                m->n = (int)v;
            else if (!strcmp(key, "nvox"))
                m->nvox = (size_t)v;
            else if (!strcmp(key, "voxel_first"))
                m->voxel_first = (size_t)v;
            else if (!strcmp(key, "voxel_end"))
                m->voxel_end = (size_t)v;
        }
        free(key);
        if (rc != 0) return -1;
        skip_space(r);
        if (*r->p == ',') {
            r->p++;
            continue;
        }
        if (expect(r, '}') != 0) return -1;
        break;
    }
    if (version != 1 || m->n < 1 || m->k < 1 || m->k > m->n || !m->command || !m->files)
        return dm_set_error("%s: not a part manifest of this dimoc (version, part, parts, "
                            "command and files are needed)",
                            r->path);
    return 0;
}

int dm_part_manifest_read(const char *dir, dm_part_manifest *m)
{
    memset(m, 0, sizeof *m);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dm_set_error("%s: no such folder: not the output of a finished --part run (a part "
                            "that failed or was killed leaves none; run it again)",
                            dir);
    char *path = dm_path_join(dir, "part.json");
    size_t len;
    char *text = dm_read_file(path, &len);
    int rc;
    if (!text) {
        rc = dm_set_error("%s: no part.json: not the output of a finished --part run (a part "
                          "that failed or was killed leaves none; run it again)",
                          dir);
    } else {
        reader r = {.p = text, .path = path};
        rc = read_members(&r, m);
    }
    free(text);
    free(path);
    m->dir = strdup(dir);
    if (rc != 0) dm_part_manifest_free(m);
    return rc;
}

void dm_part_manifest_free(dm_part_manifest *m)
{
    for (int i = 0; i < m->nfiles; i++) free(m->files[i].name);
    free(m->files);
    free(m->command);
    free(m->dir);
    memset(m, 0, sizeof *m);
}
