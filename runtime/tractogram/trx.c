/* TRX tractograms: the reader (a zip archive through libzip, or a folder: the same members by
 * name) and the writer (positions streamed to a temporary folder as a .tck's points are, the
 * rest at the end, then one archive of stored members).  See trx.h for the layout. */
#define _GNU_SOURCE
#include "tractogram/trx.h"
#include "io/bigalloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"
#include "util/outdir.h"

#include <dirent.h>
#include <errno.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <jansson.h>
#include <zip.h>

/* ---- the members: a zip archive's or a folder's files, by name ---- */

typedef struct trx_member {
    char *name; /* relative, '/'-separated: "dps/weights.float32" */
    unsigned long long size;
    zip_uint64_t index; /* in the archive */
} trx_member;

typedef struct trx_source {
    const char *path;
    zip_t *zip; /* NULL: a folder */
    int n, cap;
    trx_member *m;
} trx_source;

static int add_member(trx_source *s, const char *name, unsigned long long size, zip_uint64_t index)
{
    while (!strncmp(name, "./", 2)) name += 2;
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 32;
        trx_member *m = realloc(s->m, (size_t)cap * sizeof *m);
        if (!m) return dm_set_error("%s: out of memory", s->path);
        s->m = m;
        s->cap = cap;
    }
    s->m[s->n] = (trx_member){strdup(name), size, index};
    if (!s->m[s->n].name) return dm_set_error("%s: out of memory", s->path);
    s->n++;
    return 0;
}

/* A folder's regular files, below `rel` (depth-limited: dpg/GROUP/NAME is the deepest). */
static int list_folder(trx_source *s, const char *rel, int depth)
{
    char *dir = *rel ? dm_path_join(s->path, rel) : strdup(s->path);
    DIR *d = dir ? opendir(dir) : NULL;
    if (!d) {
        int rc =
            dm_set_error("%s: cannot read the folder: %s", dir ? dir : s->path, strerror(errno));
        free(dir);
        return rc;
    }
    int rc = 0;
    struct dirent *e;
    while (rc == 0 && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue; /* ".", "..", hidden files */
        char *name = *rel ? dm_path_join(rel, e->d_name) : strdup(e->d_name);
        char *full = name ? dm_path_join(s->path, name) : NULL;
        struct stat st;
        if (!full) {
            rc = dm_set_error("%s: out of memory", s->path);
        } else if (stat(full, &st) == 0 && S_ISDIR(st.st_mode)) {
            if (depth < 2) rc = list_folder(s, name, depth + 1);
        } else if (stat(full, &st) == 0 && S_ISREG(st.st_mode)) {
            rc = add_member(s, name, (unsigned long long)st.st_size, 0);
        }
        free(name);
        free(full);
    }
    closedir(d);
    free(dir);
    return rc;
}

static void source_close(trx_source *s)
{
    if (s->zip) zip_discard(s->zip);
    for (int i = 0; i < s->n; i++) free(s->m[i].name);
    free(s->m);
    memset(s, 0, sizeof *s);
}

static int source_open(const char *path, trx_source *s)
{
    memset(s, 0, sizeof *s);
    s->path = path;
    struct stat st;
    if (stat(path, &st) != 0) return dm_set_error("cannot open %s: %s", path, strerror(errno));
    if (S_ISDIR(st.st_mode)) return list_folder(s, "", 0);
    int err = 0;
    s->zip = zip_open(path, ZIP_RDONLY, &err);
    if (!s->zip) {
        zip_error_t ze;
        zip_error_init_with_code(&ze, err);
        int rc = dm_set_error("%s: not a TRX file (not a zip archive: %s)", path,
                              zip_error_strerror(&ze));
        zip_error_fini(&ze);
        return rc;
    }
    zip_int64_t n = zip_get_num_entries(s->zip, 0);
    for (zip_int64_t i = 0; i < n; i++) {
        zip_stat_t zs;
        if (zip_stat_index(s->zip, (zip_uint64_t)i, 0, &zs) != 0 || !(zs.valid & ZIP_STAT_NAME) ||
            !(zs.valid & ZIP_STAT_SIZE))
            return dm_set_error("%s: member %lld of the archive cannot be read", path,
                                (long long)i);
        size_t len = strlen(zs.name);
        if (len && zs.name[len - 1] == '/') continue; /* a folder's entry */
        if (add_member(s, zs.name, zs.size, (zip_uint64_t)i) != 0) return -1;
    }
    return 0;
}

/* Member k's bytes into buf (size bytes, its whole size). */
static int member_read(const trx_source *s, const trx_member *m, void *buf)
{
    if (!s->zip) {
        char *full = dm_path_join(s->path, m->name);
        FILE *f = full ? fopen(full, "rb") : NULL;
        int rc = 0;
        if (!f) {
            rc = dm_set_error("%s: cannot open %s: %s", s->path, m->name, strerror(errno));
        } else {
            for (size_t done = 0; rc == 0 && done < m->size;) {
                size_t want = m->size - done < ((size_t)1 << 26) ? m->size - done : (size_t)1 << 26;
                if (fread((char *)buf + done, 1, want, f) != want)
                    rc = dm_set_error("%s: cannot read %s", s->path, m->name);
                done += want;
                if (rc == 0 && dm_stop_requested()) rc = dm_stop_error();
            }
            fclose(f);
        }
        free(full);
        return rc;
    }
    zip_file_t *zf = zip_fopen_index(s->zip, m->index, 0);
    if (!zf)
        return dm_set_error("%s: cannot read %s: %s", s->path, m->name,
                            zip_error_strerror(zip_get_error(s->zip)));
    int rc = 0;
    for (size_t done = 0; rc == 0 && done < m->size;) {
        size_t want = m->size - done < ((size_t)1 << 26) ? m->size - done : (size_t)1 << 26;
        zip_int64_t got = zip_fread(zf, (char *)buf + done, want);
        if (got != (zip_int64_t)want)
            rc = dm_set_error("%s: cannot read %s: %s", s->path, m->name,
                              got < 0 ? zip_error_strerror(zip_file_get_error(zf))
                                      : "the archive ends early");
        done += want;
        if (rc == 0 && dm_stop_requested()) rc = dm_stop_error();
    }
    zip_fclose(zf);
    return rc;
}

/* ---- array names and types ---- */

typedef enum { T_I8, T_I16, T_I32, T_I64, T_U8, T_U16, T_U32, T_U64, T_F16, T_F32, T_F64 } dtype;
static const char *const dtype_names[] = {"int8",    "int16",   "int32",  "int64",
                                          "uint8",   "uint16",  "uint32", "uint64",
                                          "float16", "float32", "float64"};
static const int dtype_bytes[] = {1, 2, 4, 8, 1, 2, 4, 8, 2, 4, 8};

/* "dps/weights.float32" -> folder "dps", base "weights", columns 1, type; "positions.3.float32"
 * -> "", "positions", 3.  0, or -1 (the error set) when the name is not NAME[.N].TYPE. */
typedef struct array_name {
    char folder[256], base[256];
    long cols;
    int type;
} array_name;

static int parse_array_name(const char *path, const char *name, array_name *a)
{
    const char *slash = strrchr(name, '/');
    const char *file = slash ? slash + 1 : name;
    size_t flen = slash ? (size_t)(slash - name) : 0;
    const char *dot1 = strchr(file, '.'), *dot2 = strrchr(file, '.');
    if (flen >= sizeof a->folder || !dot1 || (size_t)(dot1 - file) >= sizeof a->base ||
        dot1 == file)
        return dm_set_error("%s: %s is not NAME[.COLUMNS].TYPE", path, name);
    memcpy(a->folder, name, flen);
    a->folder[flen] = 0;
    memcpy(a->base, file, (size_t)(dot1 - file));
    a->base[dot1 - file] = 0;
    a->cols = 1;
    if (dot2 != dot1) {
        char *end;
        a->cols = strtol(dot1 + 1, &end, 10);
        if (end != dot2 || a->cols < 1 || a->cols > 1 << 20)
            return dm_set_error("%s: %s: '%.*s' is not a number of columns", path, name,
                                (int)(dot2 - dot1 - 1), dot1 + 1);
    }
    const char *ext = dot2 + 1;
    a->type = -1;
    for (int k = 0; k < 11; k++)
        if (!strcmp(ext, dtype_names[k])) a->type = k;
    if (!strcmp(ext, "bit") || !strcmp(ext, "bool")) a->type = T_U8;
    if (a->type < 0) return dm_set_error("%s: %s: unknown type '%s'", path, name, ext);
    return 0;
}

static float half_to_float(uint16_t h)
{
    const int sign = h >> 15, exp = (h >> 10) & 31, frac = h & 1023;
    float v = exp == 0    ? ldexpf((float)frac, -24)
              : exp == 31 ? (frac ? NAN : INFINITY)
                          : ldexpf((float)(frac | 1024), exp - 25);
    return sign ? -v : v;
}

/* Value i of a little-endian array of type t, as a double. */
static double array_value(const unsigned char *raw, size_t i, int t)
{
    const unsigned char *p = raw + i * (size_t)dtype_bytes[t];
    uint64_t u = 0;
    for (int b = dtype_bytes[t] - 1; b >= 0; b--) u = u << 8 | p[b];
    switch (t) {
    case T_I8: return (int8_t)u;
    case T_I16: return (int16_t)u;
    case T_I32: return (int32_t)u;
    case T_I64: return (double)(int64_t)u;
    case T_U8:
    case T_U16:
    case T_U32:
    case T_U64: return (double)u;
    case T_F16: return half_to_float((uint16_t)u);
    case T_F32: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, 4);
        return f;
    }
    default: {
        double d;
        memcpy(&d, &u, 8);
        return d;
    }
    }
}

/* Integer value i (offsets, group indices) exactly: *out, or -1 when negative. */
static int array_index(const unsigned char *raw, size_t i, int t, unsigned long long *out)
{
    const unsigned char *p = raw + i * (size_t)dtype_bytes[t];
    uint64_t u = 0;
    for (int b = dtype_bytes[t] - 1; b >= 0; b--) u = u << 8 | p[b];
    int bits = 8 * dtype_bytes[t];
    if (t <= T_I64 && (u >> (bits - 1)) & 1) return -1; /* a negative signed value */
    *out = u;
    return 0;
}

/* ---- the reader ---- */

static const trx_member *find_member(const trx_source *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->m[i].name, name)) return &s->m[i];
    return NULL;
}

/* A whole member in a malloc'd buffer (NULL with the error set). */
static unsigned char *member_bytes(const trx_source *s, const trx_member *m)
{
    unsigned char *buf = malloc(m->size ? m->size : 1);
    if (!buf) {
        dm_set_error("%s: out of memory for %s (%llu bytes)", s->path, m->name, m->size);
        return NULL;
    }
    if (member_read(s, m, buf) != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* A JSON number that must be a whole number in [0, max]. */
static int header_count(const char *path, const json_t *h, const char *key, double max,
                        unsigned long long *out)
{
    const json_t *v = json_object_get(h, key);
    if (!v) return dm_set_error("%s: header.json has no %s", path, key);
    double x = json_number_value(v);
    if (!json_is_number(v) || !(x >= 0) || x != floor(x) || x > max)
        return dm_set_error("%s: header.json's %s is not a whole number >= 0", path, key);
    *out = (unsigned long long)x;
    return 0;
}

static int read_grid(const char *path, const json_t *h, dm_tract_grid *g)
{
    const json_t *d = json_object_get(h, "DIMENSIONS"), *a = json_object_get(h, "VOXEL_TO_RASMM");
    if (!json_is_array(d) || json_array_size(d) != 3)
        return dm_set_error("%s: header.json's DIMENSIONS is not a list of 3 sizes", path);
    for (size_t k = 0; k < 3; k++) {
        const json_t *v = json_array_get(d, k);
        double x = json_number_value(v);
        if (!json_is_number(v) || !(x >= 0) || x != floor(x) || x > 65535)
            return dm_set_error("%s: header.json's DIMENSIONS is not a list of 3 sizes", path);
        g->dims[k] = (int)x;
    }
    /* 4 rows of 4, or (as some writers make it) 16 numbers */
    int flat = json_is_array(a) && json_array_size(a) == 16;
    int ok = json_is_array(a) && (json_array_size(a) == 4 || flat);
    for (size_t r = 0; ok && r < 4; r++)
        for (size_t c = 0; ok && c < 4; c++) {
            const json_t *row = flat ? NULL : json_array_get(a, r);
            if (!flat && (!json_is_array(row) || json_array_size(row) != 4)) {
                ok = 0;
                break;
            }
            const json_t *v = flat ? json_array_get(a, 4 * r + c) : json_array_get(row, c);
            ok = json_is_number(v) && isfinite(json_number_value(v));
            if (ok) g->vox2ras[r][c] = json_number_value(v);
        }
    if (!ok) return dm_set_error("%s: header.json's VOXEL_TO_RASMM is not a 4x4 matrix", path);
    g->valid = 1;
    return 0;
}

/* header.json's TCK_HEADER object as "key: value" lines (malloc'd); a value of several lines
 * (MRtrix's repeated keys) goes back as one line each. */
static char *properties_of(const json_t *h)
{
    const json_t *p = json_object_get(h, "TCK_HEADER");
    size_t len = 1;
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)p, key, v)
    {
        if (!json_is_string(v)) continue;
        const char *t = json_string_value(v);
        size_t lines = 1;
        for (const char *q = t; *q; q++) lines += *q == '\n';
        len += strlen(t) + lines * (strlen(key) + 3);
    }
    char *s = malloc(len), *o = s;
    if (!s) return NULL;
    *o = 0;
    json_object_foreach((json_t *)p, key, v)
    {
        if (!json_is_string(v)) continue;
        for (const char *t = json_string_value(v);;) {
            size_t n = strcspn(t, "\n");
            o += sprintf(o, "%s: %.*s\n", key, (int)n, t);
            if (!t[n]) break;
            t += n + 1;
        }
    }
    return s;
}

static int read_positions(const trx_source *s, const trx_member *m, const array_name *a,
                          unsigned long long nv, dm_tck *t)
{
    const char *path = s->path;
    if (a->cols != 3 || (a->type != T_F16 && a->type != T_F32 && a->type != T_F64))
        return dm_set_error("%s: %s: positions must be 3 columns of float16, float32 or float64",
                            path, m->name);
    const size_t bytes = (size_t)dtype_bytes[a->type];
    if (m->size % (3 * bytes))
        return dm_set_error("%s: %s holds %llu bytes: not whole points", path, m->name, m->size);
    if (m->size / (3 * bytes) != nv)
        return dm_set_error("%s: header.json's NB_VERTICES is %llu but %s holds %llu vertices",
                            path, nv, m->name, m->size / (3 * bytes));
    t->xyz = dm_big_alloc((nv ? nv : 1) * 3 * sizeof(float));
    if (!t->xyz) return dm_set_error("%s: out of memory for %llu points", path, nv);
    const uint16_t one = 1;
    unsigned char little;
    memcpy(&little, &one, 1);
    int rc = 0;
    if (a->type == T_F32 && little) {
        rc = member_read(s, m, t->xyz);
    } else {
        unsigned char *raw = member_bytes(s, m);
        if (!raw) return -1;
        for (size_t i = 0; i < 3 * nv; i++) {
            double v = array_value(raw, i, a->type);
            if (isfinite(v) && fabs(v) > FLT_MAX) {
                rc = dm_set_error("%s: %s: vertex %zu: coordinate %g is beyond single precision",
                                  path, m->name, i / 3, v);
                break;
            }
            t->xyz[i] = (float)v;
        }
        free(raw);
    }
    for (size_t i = 0; rc == 0 && i < 3 * nv; i++)
        if (!isfinite(t->xyz[i]))
            rc = dm_set_error("%s: %s: vertex %zu is not finite", path, m->name, i / 3);
    return rc;
}

static int read_offsets(const trx_source *s, const trx_member *m, const array_name *a,
                        unsigned long long ns, unsigned long long nv, dm_tck *t)
{
    const char *path = s->path;
    if (a->cols != 1 || a->type < T_I8 || a->type > T_U64)
        return dm_set_error("%s: %s: offsets must be one column of uint32 or uint64", path,
                            m->name);
    const size_t bytes = (size_t)dtype_bytes[a->type];
    unsigned long long n = m->size / bytes;
    if (m->size % bytes || (n != ns + 1 && n != ns))
        return dm_set_error("%s: %s holds %llu values for header.json's NB_STREAMLINES %llu (it "
                            "needs NB_STREAMLINES + 1)",
                            path, m->name, m->size / bytes, ns);
    unsigned char *raw = member_bytes(s, m);
    if (!raw) return -1;
    t->count = (long)ns;
    t->start = malloc((ns + 1) * sizeof *t->start);
    t->npoints = malloc((ns ? ns : 1) * sizeof *t->npoints);
    int rc = 0;
    if (!t->start || !t->npoints) rc = dm_set_error("%s: out of memory", path);
    unsigned long long prev = 0;
    for (unsigned long long i = 0; rc == 0 && i < n; i++) {
        unsigned long long o;
        if (array_index(raw, i, a->type, &o) != 0)
            rc = dm_set_error("%s: %s: offset %llu is negative", path, m->name, i);
        else if (i == 0 && o != 0)
            rc = dm_set_error("%s: %s: the first offset is %llu, not 0", path, m->name, o);
        else if (o < prev)
            rc = dm_set_error("%s: %s: offset %llu (%llu) is below the one before (%llu)", path,
                              m->name, i, o, prev);
        else if (o > nv)
            rc = dm_set_error("%s: %s: streamline %llu runs to vertex %llu, past the %llu "
                              "vertices of the positions",
                              path, m->name, i ? i - 1 : 0, o, nv);
        else
            t->start[i] = (long)o;
        prev = o;
    }
    if (rc == 0 && n == ns + 1 && prev != nv)
        rc = dm_set_error("%s: %s: the last offset is %llu, not NB_VERTICES %llu", path, m->name,
                          prev, nv);
    if (rc == 0 && ns == 0 && n == 1 && nv != 0)
        rc = dm_set_error("%s: no streamlines but NB_VERTICES %llu", path, nv);
    if (rc == 0) t->start[ns] = (long)nv;
    for (unsigned long long i = 0; rc == 0 && i < ns; i++)
        t->npoints[i] = t->start[i + 1] - t->start[i];
    free(raw);
    return rc;
}

static int read_dps(const trx_source *s, const trx_member *m, const array_name *a,
                    unsigned long long ns, dm_tck *t)
{
    const size_t bytes = (size_t)dtype_bytes[a->type];
    if (m->size != ns * (unsigned long long)a->cols * bytes)
        return dm_set_error("%s: %s holds %llu values, not NB_STREAMLINES %llu x %ld", s->path,
                            m->name, m->size / bytes, ns, a->cols);
    dm_tract_values *grown = realloc(t->dps, (size_t)(t->ndps + 1) * sizeof *grown);
    if (!grown) return dm_set_error("%s: out of memory", s->path);
    t->dps = grown;
    dm_tract_values *v = &t->dps[t->ndps];
    v->name = strdup(a->base);
    v->ncols = (int)a->cols;
    const size_t nval = (size_t)ns * (size_t)a->cols;
    v->values = malloc((nval ? nval : 1) * sizeof(float));
    unsigned char *raw = v->name && v->values ? member_bytes(s, m) : NULL;
    if (!raw) {
        free(v->name);
        free(v->values);
        return v->name && v->values ? -1 : dm_set_error("%s: out of memory", s->path);
    }
    for (size_t i = 0; i < ns * (size_t)a->cols; i++)
        v->values[i] = (float)array_value(raw, i, a->type);
    free(raw);
    t->ndps++;
    return 0;
}

static int read_group(const trx_source *s, const trx_member *m, const array_name *a,
                      unsigned long long ns, dm_tck *t)
{
    if (a->cols != 1 || a->type > T_U64)
        return dm_set_error("%s: %s: a group must be one column of integer indices", s->path,
                            m->name);
    const size_t bytes = (size_t)dtype_bytes[a->type];
    if (m->size % bytes)
        return dm_set_error("%s: %s holds %llu bytes: not whole %s values", s->path, m->name,
                            m->size, dtype_names[a->type]);
    dm_tract_group *grown = realloc(t->groups, (size_t)(t->ngroups + 1) * sizeof *grown);
    if (!grown) return dm_set_error("%s: out of memory", s->path);
    t->groups = grown;
    dm_tract_group *g = &t->groups[t->ngroups];
    g->n = (long)(m->size / bytes);
    g->name = strdup(a->base);
    g->index = malloc((size_t)(g->n ? g->n : 1) * sizeof *g->index);
    unsigned char *raw = g->name && g->index ? member_bytes(s, m) : NULL;
    int rc = raw ? 0 : g->name && g->index ? -1 : dm_set_error("%s: out of memory", s->path);
    for (long i = 0; rc == 0 && i < g->n; i++) {
        unsigned long long o;
        if (array_index(raw, (size_t)i, a->type, &o) != 0 || o >= ns)
            rc = dm_set_error("%s: %s: entry %ld (%lld) is not a streamline index (0 to "
                              "NB_STREAMLINES - 1 = %lld)",
                              s->path, m->name, i + 1,
                              array_index(raw, (size_t)i, a->type, &o) != 0 ? -1LL : (long long)o,
                              (long long)ns - 1);
        else
            g->index[i] = (unsigned int)o;
    }
    free(raw);
    if (rc != 0) {
        free(g->name);
        free(g->index);
        return -1;
    }
    t->ngroups++;
    return 0;
}

static int read_source(const trx_source *s, dm_tck *t)
{
    const char *path = s->path;
    const trx_member *hm = find_member(s, "header.json");
    if (!hm) return dm_set_error("%s: not a TRX file: no header.json", path);
    if (hm->size > (1u << 24)) return dm_set_error("%s: header.json is over 16 MiB", path);
    unsigned char *text = member_bytes(s, hm);
    if (!text) return -1;
    json_error_t jerr;
    json_t *h = json_loadb((const char *)text, hm->size, JSON_ALLOW_NUL, &jerr);
    free(text);
    if (!json_is_object(h)) {
        int bad = h == NULL;
        json_decref(h);
        if (bad)
            return dm_set_error("%s: header.json is not JSON (line %d: %s)", path, jerr.line,
                                jerr.text);
        return dm_set_error("%s: header.json is not a JSON object", path);
    }
    unsigned long long ns = 0, nv = 0;
    int rc = header_count(path, h, "NB_STREAMLINES", 2147483647.0, &ns);
    if (rc == 0) rc = header_count(path, h, "NB_VERTICES", 9007199254740992.0, &nv);
    if (rc == 0) rc = read_grid(path, h, &t->grid);
    if (rc == 0) t->properties = properties_of(h);
    json_decref(h);
    if (rc != 0) return -1;
    const trx_member *pos = NULL, *off = NULL;
    array_name pa, oa;
    for (int i = 0; i < s->n; i++) {
        const trx_member *m = &s->m[i];
        array_name a;
        const char *slash = strrchr(m->name, '/');
        const char *file = slash ? slash + 1 : m->name;
        size_t flen = strlen(file);
        if (flen > 5 && !strcmp(file + flen - 5, ".json")) continue; /* header, dps's notes */
        if (!slash && !strncmp(file, "positions.", 10)) {
            if (pos) return dm_set_error("%s: two positions arrays", path);
            if (parse_array_name(path, m->name, &pa) != 0) return -1;
            pos = m;
        } else if (!slash && !strncmp(file, "offsets.", 8)) {
            if (off) return dm_set_error("%s: two offsets arrays", path);
            if (parse_array_name(path, m->name, &oa) != 0) return -1;
            off = m;
        } else if (slash && (!strncmp(m->name, "dps/", 4) || !strncmp(m->name, "groups/", 7)) &&
                   !strchr(m->name + (m->name[0] == 'd' ? 4 : 7), '/')) {
            if (parse_array_name(path, m->name, &a) != 0) return -1;
            if (dm_tck_dps(t, a.base) && !strcmp(a.folder, "dps"))
                return dm_set_error("%s: two dps arrays named %s", path, a.base);
            rc = !strcmp(a.folder, "dps") ? read_dps(s, m, &a, ns, t) : read_group(s, m, &a, ns, t);
            if (rc != 0) return -1;
        }
        /* dpv/, dpg/ and anything else: not used here */
    }
    if (ns > 0 && !off)
        return dm_set_error("%s: no offsets array (offsets.uint32 or .uint64)", path);
    if (nv > 0 && !pos)
        return dm_set_error("%s: no positions array (positions.3.float32, ...)", path);
    if (pos)
        rc = read_positions(s, pos, &pa, nv, t);
    else if (!(t->xyz = dm_big_alloc(3 * sizeof(float))))
        rc = dm_set_error("out of memory");
    if (rc == 0 && off) {
        rc = read_offsets(s, off, &oa, ns, nv, t);
    } else if (rc == 0) { /* no streamlines */
        t->start = calloc(1, sizeof *t->start);
        t->npoints = calloc(1, sizeof *t->npoints);
        if (!t->start || !t->npoints) rc = dm_set_error("out of memory");
    }
    return rc;
}

int dm_trx_read(const char *path, dm_tck *t, int threads)
{
    (void)threads;
    memset(t, 0, sizeof *t);
    t->header_count = -1;
    trx_source s;
    int rc = source_open(path, &s);
    if (rc == 0) rc = read_source(&s, t);
    source_close(&s);
    if (rc != 0) {
        dm_tck_free(t);
        t->header_count = -1;
        return -1;
    }
    t->header_count = t->count;
    return 0;
}

/* ---- the writer ---- */

struct dm_trx_writer {
    char *path, *dir; /* the file; the temporary folder of its members */
    char *info;
    dm_tract_grid grid;
    dm_tck_writer *points;       /* dir/positions.3.float32 */
    unsigned long long *offsets; /* count + 1 */
    long count, cap;
    int ndps;
    dm_tract_values *dps;
    long *dps_count;
    int failed;
};

static int grow_offsets(dm_trx_writer *w, long more)
{
    if (w->count + more + 1 <= w->cap) return 0;
    long cap = w->cap ? w->cap : 4096;
    while (cap < w->count + more + 1) cap *= 2;
    unsigned long long *o = realloc(w->offsets, (size_t)cap * sizeof *o);
    if (!o) return w->failed = -1;
    w->offsets = o;
    w->cap = cap;
    return 0;
}

dm_trx_writer *dm_trx_open(const char *path, const char *info, const dm_tract_grid *grid)
{
    if (!grid || !grid->valid) {
        dm_set_error("%s: a TRX file needs the reference image's grid", path);
        return NULL;
    }
    dm_trx_writer *w = calloc(1, sizeof *w);
    if (!w) {
        dm_set_error("out of memory");
        return NULL;
    }
    w->path = strdup(path);
    w->dir = dm_temp_sibling(path);
    w->info = strdup(info ? info : "");
    w->grid = *grid;
    char *pos = w->dir ? dm_path_join(w->dir, "positions.3.float32") : NULL;
    if (!w->path || !w->dir || !w->info || !pos || grow_offsets(w, 0) != 0) {
        dm_set_error("out of memory");
    } else if (mkdir(w->dir, 0777) != 0) {
        dm_set_error("%s: cannot write: %s", path, strerror(errno));
    } else if ((w->points = dm_tck_open_points(pos))) {
        w->offsets[0] = 0;
        free(pos);
        return w;
    } else {
        rmdir(w->dir);
    }
    free(pos);
    free(w->path);
    free(w->dir);
    free(w->info);
    free(w->offsets);
    free(w);
    return NULL;
}

void dm_trx_add(dm_trx_writer *w, const float *xyz, int n)
{
    if (grow_offsets(w, 1) != 0) return;
    dm_tck_add(w->points, xyz, n);
    w->offsets[w->count + 1] = w->offsets[w->count] + (unsigned long long)n;
    w->count++;
}

int dm_trx_add_many(dm_trx_writer *w, const float *xyz, const size_t *start, const int *npts,
                    long count, int threads)
{
    if (grow_offsets(w, count) != 0) return -1;
    if (dm_tck_add_many(w->points, xyz, start, npts, count, threads) != 0) return w->failed = -1;
    for (long i = 0; i < count; i++)
        w->offsets[w->count + i + 1] = w->offsets[w->count + i] + (unsigned long long)npts[i];
    w->count += count;
    return 0;
}

long dm_trx_written(const dm_trx_writer *w)
{
    return w->count;
}

int dm_trx_set_dps(dm_trx_writer *w, const char *name, const float *values, long count)
{
    if (!*name || strchr(name, '/') || strchr(name, '.'))
        return dm_set_error("%s: '%s' cannot name a dps array", w->path, name);
    dm_tract_values *d = realloc(w->dps, (size_t)(w->ndps + 1) * sizeof *d);
    long *c = realloc(w->dps_count, (size_t)(w->ndps + 1) * sizeof *c);
    if (d) w->dps = d;
    if (c) w->dps_count = c;
    if (!d || !c) return dm_set_error("out of memory");
    dm_tract_values *v = &w->dps[w->ndps];
    v->name = strdup(name);
    v->ncols = 1;
    v->values = malloc((size_t)(count ? count : 1) * sizeof *v->values);
    if (!v->name || !v->values) {
        free(v->name);
        free(v->values);
        return dm_set_error("out of memory");
    }
    memcpy(v->values, values, (size_t)count * sizeof *v->values);
    w->dps_count[w->ndps++] = count;
    return 0;
}

/* Writes n bytes to dir/name (a new file). */
static int write_member(const char *dir, const char *name, const void *data, size_t n)
{
    char *p = dm_path_join(dir, name);
    FILE *f = p ? fopen(p, "wb") : NULL;
    int bad = !f || fwrite(data, 1, n, f) != n;
    if (f) bad |= fclose(f) != 0;
    free(p);
    return bad ? -1 : 0;
}

/* s[0..n) as the inside of a JSON string. */
static void json_chars(FILE *f, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c == '\n')
            fputs("\\n", f);
        else if (c < 32)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
}

/* header.json: the required keys, then TCK_HEADER: the .tck header's key: value lines (a key
 * given twice: its values joined by newlines, as MRtrix reads repeated keys), with count and
 * total_count. */
static int write_header(dm_trx_writer *w, unsigned long long total)
{
    char *p = dm_path_join(w->dir, "header.json");
    FILE *f = p ? fopen(p, "w") : NULL;
    free(p);
    if (!f) return -1;
    fprintf(f, "{\"DIMENSIONS\": [%d, %d, %d], \"VOXEL_TO_RASMM\": [", w->grid.dims[0],
            w->grid.dims[1], w->grid.dims[2]);
    for (int r = 0; r < 4; r++)
        fprintf(f, "%s[%.17g, %.17g, %.17g, %.17g]", r ? ", " : "", w->grid.vox2ras[r][0],
                w->grid.vox2ras[r][1], w->grid.vox2ras[r][2], w->grid.vox2ras[r][3]);
    fprintf(f, "], \"NB_STREAMLINES\": %ld, \"NB_VERTICES\": %llu, \"TCK_HEADER\": {", w->count,
            w->offsets[w->count]);
    /* the info's keys in order of first appearance, each with all its values */
    static const char *const reserved[] = {"count", "total_count", "file", "datatype", NULL};
    int first = 1;
    for (const char *line = w->info; *line;) {
        size_t n = strcspn(line, "\n"), k = strcspn(line, ":\n");
        int seen = 0;
        for (const char *q = w->info; q < line && !seen;) {
            size_t qn = strcspn(q, "\n"), qk = strcspn(q, ":\n");
            seen = qk < qn && qk == k && !strncmp(q, line, k);
            q += qn + (q[qn] == '\n');
        }
        for (int r = 0; reserved[r] && !seen; r++)
            seen = k == strlen(reserved[r]) && !strncmp(line, reserved[r], k);
        if (k < n && k > 0 && !seen) {
            fputs(first ? "\"" : ", \"", f);
            first = 0;
            json_chars(f, line, k);
            fputs("\": \"", f);
            int more = 0;
            for (const char *q = line; *q;) {
                size_t qn = strcspn(q, "\n"), qk = strcspn(q, ":\n");
                if (qk < qn && qk == k && !strncmp(q, line, k)) {
                    const char *v = q + k + 1;
                    while (v < q + qn && *v == ' ') v++;
                    if (more++) fputs("\\n", f);
                    json_chars(f, v, (size_t)(q + qn - v));
                }
                q += qn + (q[qn] == '\n');
            }
            fputc('"', f);
        }
        line += n + (line[n] == '\n');
    }
    fprintf(f, "%s\"count\": \"%ld\", \"total_count\": \"%llu\"}}\n", first ? "" : ", ", w->count,
            total);
    int bad = ferror(f);
    bad |= fclose(f) != 0;
    return bad ? -1 : 0;
}

void dm_trx_abort(dm_trx_writer *w)
{
    if (!w) return;
    if (w->points) dm_tck_abort(w->points);
    dm_remove_tree(w->dir);
    for (int k = 0; k < w->ndps; k++) {
        free(w->dps[k].name);
        free(w->dps[k].values);
    }
    free(w->dps);
    free(w->dps_count);
    free(w->offsets);
    free(w->info);
    free(w->path);
    free(w->dir);
    free(w);
}

/* Member i of the archive, in its order: header.json, positions, offsets (none when there are
 * no streamlines), dps. */
static int member_name(const dm_trx_writer *w, int i, char *name, size_t size)
{
    static const char *const fixed[] = {"header.json", "positions.3.float32", "offsets.uint64"};
    int nfixed = w->count > 0 ? 3 : 1;
    if (i < nfixed) return snprintf(name, size, "%s", fixed[i]), 1;
    if (i - nfixed < w->ndps)
        return snprintf(name, size, "dps/%s.float32", w->dps[i - nfixed].name), 1;
    return 0;
}

/* The archive: every member stored (trx-python maps stored members in place), header.json
 * first. */
static int write_archive(dm_trx_writer *w, const char *zip_path)
{
    int err = 0;
    zip_t *z = zip_open(zip_path, ZIP_CREATE | ZIP_TRUNCATE, &err);
    if (!z) return -1;
    int rc = 0;
    char name[4200];
    for (int i = 0; rc == 0 && member_name(w, i, name, sizeof name); i++) {
        char *file = dm_path_join(w->dir, name);
        zip_source_t *src = file ? zip_source_file(z, file, 0, 0) : NULL;
        zip_int64_t at = src ? zip_file_add(z, name, src, 0) : -1;
        if (at < 0) {
            if (src) zip_source_free(src);
            rc = -1;
        } else if (zip_set_file_compression(z, (zip_uint64_t)at, ZIP_CM_STORE, 0) != 0) {
            rc = -1;
        }
        free(file);
    }
    if (rc == 0 && zip_close(z) == 0) return 0;
    zip_discard(z);
    unlink(zip_path);
    return -1;
}

int dm_trx_close(dm_trx_writer *w, unsigned long long total_count)
{
    int rc = dm_tck_close_points(w->points);
    w->points = NULL;
    if (w->failed) rc = -1;
    for (int k = 0; rc == 0 && k < w->ndps; k++)
        if (w->dps_count[k] != w->count)
            rc = dm_set_error("%s: dps %s has %ld values for %ld streamlines", w->path,
                              w->dps[k].name, w->dps_count[k], w->count);
    if (rc == 0)
        rc = write_member(w->dir, "offsets.uint64", w->offsets,
                          (size_t)(w->count + 1) * sizeof *w->offsets);
    if (rc == 0) rc = write_header(w, total_count);
    char *dps_dir = dm_path_join(w->dir, "dps");
    if (rc == 0 && w->ndps && mkdir(dps_dir, 0777) != 0) rc = -1;
    free(dps_dir);
    for (int k = 0; rc == 0 && k < w->ndps; k++) {
        char name[4200];
        snprintf(name, sizeof name, "dps/%s.float32", w->dps[k].name);
        rc = write_member(w->dir, name, w->dps[k].values, (size_t)w->count * sizeof(float));
    }
    char *tmp = dm_temp_sibling(w->path);
    if (rc == 0 && (!tmp || write_archive(w, tmp) != 0)) rc = -1;
    if (rc == 0 && rename(tmp, w->path) != 0) {
        unlink(tmp);
        rc = -1;
    }
    if (rc != 0) rc = dm_set_error("%s: cannot write", w->path);
    free(tmp);
    dm_trx_abort(w); /* the temporary folder and the rest */
    return rc;
}
