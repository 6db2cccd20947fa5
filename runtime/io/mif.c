/* MRtrix images: the header's keys (MRtrix's "Images and other data" page), the values of any
 * layout and data type gathered into dimoc's order, and the header of the images dimoc writes. */
#include "io/mif.h"
#include "io/bigalloc.h"
#include "io/gz_blocks.h"
#include "util/error.h"
#include "util/interrupt.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <zlib.h>

#define MAX_AXES 16
/* A header larger than this is no header (a dw_scheme of 10,000 rows is under 1 MiB). */
#define MAX_HEADER ((size_t)16 << 20)

static int ends_with(const char *s, const char *end)
{
    size_t n = strlen(s), m = strlen(end);
    return n >= m && !strcasecmp(s + n - m, end);
}

int dm_mif_is_path(const char *path)
{
    return ends_with(path, ".mif") || ends_with(path, ".mif.gz") || ends_with(path, ".mih");
}

void dm_mif_free(dm_mif_image *img)
{
    if (!img) return;
    free(img->values);
    free(img->dw_scheme);
    free(img->extra);
    memset(img, 0, sizeof *img);
}

/* ---- The stored data types ---- */

typedef enum { T_BIT, T_INT, T_UINT, T_FLOAT } kind;

typedef struct {
    kind k;
    int bytes; /* 0 for Bit */
    int swap;  /* the file's byte order is not the host's */
} stored_type;

static int host_is_little(void)
{
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 1;
}

/* "Int16LE", "UInt8", "Float32", "Bit", ...: 0, or -1 with the error worded. */
static int parse_datatype(const char *path, const char *name, stored_type *t)
{
    char base[32];
    size_t n = strlen(name);
    if (n == 0 || n >= sizeof base) return dm_set_error("%s: datatype '%s' is unknown", path, name);
    memcpy(base, name, n + 1);
    int order = 0; /* 0 native, 1 little, 2 big */
    if (n > 2 && !strcasecmp(base + n - 2, "le")) order = 1;
    if (n > 2 && !strcasecmp(base + n - 2, "be")) order = 2;
    if (order) base[n - 2] = 0;
    if (!strncasecmp(base, "cfloat", 6))
        return dm_set_error("%s: complex data (datatype %s) is not supported; store its "
                            "magnitude or real part (mrcalc IN -abs OUT)",
                            path, name);
    if (!strcasecmp(base, "bit")) {
        if (order) return dm_set_error("%s: datatype '%s' is unknown", path, name);
        *t = (stored_type){T_BIT, 0, 0};
        return 0;
    }
    static const struct {
        const char *name;
        kind k;
        int bytes;
    } types[] = {{"int8", T_INT, 1},     {"uint8", T_UINT, 1},  {"int16", T_INT, 2},
                 {"uint16", T_UINT, 2},  {"int32", T_INT, 4},   {"uint32", T_UINT, 4},
                 {"int64", T_INT, 8},    {"uint64", T_UINT, 8}, {"float32", T_FLOAT, 4},
                 {"float64", T_FLOAT, 8}};
    for (size_t i = 0; i < sizeof types / sizeof types[0]; i++)
        if (!strcasecmp(base, types[i].name)) {
            if (types[i].bytes == 1 && order)
                return dm_set_error("%s: datatype '%s' is unknown", path, name);
            int little = order == 0 ? host_is_little() : order == 1;
            *t = (stored_type){types[i].k, types[i].bytes, little != host_is_little()};
            return 0;
        }
    return dm_set_error("%s: datatype '%s' is unknown (MRtrix's are Bit, Int8, UInt8, "
                        "[U]Int16/32/64 and Float32/64, with LE or BE)",
                        path, name);
}

/* Element e of the stored values as a double. */
static inline double stored_value(const unsigned char *raw, size_t e, const stored_type *t)
{
    if (t->k == T_BIT) return (raw[e >> 3] >> (7 - (e & 7))) & 1; /* most significant bit first */
    unsigned char b[8];
    const unsigned char *p = raw + e * (size_t)t->bytes;
    if (t->swap) {
        for (int i = 0; i < t->bytes; i++) b[i] = p[t->bytes - 1 - i];
    } else {
        memcpy(b, p, (size_t)t->bytes);
    }
    switch (t->k * 16 + t->bytes) {
    case T_INT * 16 + 1: return (double)(int8_t)b[0];
    case T_UINT * 16 + 1: return (double)b[0];
#define AS(type)                                                                                   \
    do {                                                                                           \
        type v;                                                                                    \
        memcpy(&v, b, sizeof v);                                                                   \
        return (double)v;                                                                          \
    } while (0)
    case T_INT * 16 + 2: AS(int16_t);
    case T_UINT * 16 + 2: AS(uint16_t);
    case T_INT * 16 + 4: AS(int32_t);
    case T_UINT * 16 + 4: AS(uint32_t);
    case T_INT * 16 + 8: AS(int64_t);
    case T_UINT * 16 + 8: AS(uint64_t);
    case T_FLOAT * 16 + 4: AS(float);
    case T_FLOAT * 16 + 8: AS(double);
#undef AS
    default: return NAN;
    }
}

/* ---- The header ---- */

typedef struct {
    int ndim;
    long long dim[MAX_AXES];
    double vox[MAX_AXES];
    int nvox_given;
    int layout_sign[MAX_AXES], layout_rank[MAX_AXES];
    int nlayout;
    char datatype[40];
    double transform[12];
    int ntransform;
    double offset, scale;
    char data_file[4096];
    long long data_offset;
    int nfile;
    double *dw;
    int dw_rows, dw_cap;
    char *extra;
    size_t extra_len;
} header;

/* A comma-separated list of numbers (white space allowed around them): count, or -1. */
static int parse_numbers(const char *s, double *out, int max)
{
    int n = 0;
    for (;;) {
        while (isspace((unsigned char)*s)) s++;
        char *end;
        errno = 0;
        double v = strtod(s, &end);
        if (end == s || n == max) return -1;
        out[n++] = v;
        s = end;
        while (isspace((unsigned char)*s)) s++;
        if (!*s) return n;
        if (*s != ',') return -1;
        s++;
    }
}

static int parse_layout(const char *path, const char *s, header *h)
{
    h->nlayout = 0;
    for (;;) {
        while (isspace((unsigned char)*s)) s++;
        if (*s != '+' && *s != '-') break;
        int sign = *s++ == '-' ? -1 : 1;
        if (!isdigit((unsigned char)*s)) break;
        long r = strtol(s, (char **)&s, 10);
        if (r > 1000 || h->nlayout == MAX_AXES) break;
        h->layout_sign[h->nlayout] = sign;
        h->layout_rank[h->nlayout++] = (int)r;
        while (isspace((unsigned char)*s)) s++;
        if (!*s) return 0;
        if (*s++ != ',') break;
    }
    return dm_set_error("%s: layout '%s' is not a list of signed axis ranks (e.g. +0,+1,+2)", path,
                        s);
}

static int keep_extra(header *h, const char *line)
{
    size_t m = strlen(line);
    char *e = realloc(h->extra, h->extra_len + m + 2);
    if (!e) return -1;
    memcpy(e + h->extra_len, line, m);
    e[h->extra_len + m] = '\n';
    e[h->extra_len + m + 1] = 0;
    h->extra = e;
    h->extra_len += m + 1;
    return 0;
}

/* One "key: value" line; `line` is modified. */
static int parse_line(const char *path, char *line, header *h)
{
    char *colon = strchr(line, ':');
    if (!colon) return 0; /* MRtrix ignores what it does not recognise */
    *colon = 0;
    char *key = line, *value = colon + 1;
    while (isspace((unsigned char)*value)) value++;
    size_t vn = strlen(value);
    while (vn && isspace((unsigned char)value[vn - 1])) value[--vn] = 0;
    if (!strcmp(key, "dim")) {
        double d[MAX_AXES + 1];
        int n = parse_numbers(value, d, MAX_AXES + 1);
        if (n < 1 || n > MAX_AXES)
            return dm_set_error("%s: dim '%s' is not 1 to %d sizes", path, value, MAX_AXES);
        for (int i = 0; i < n; i++) {
            if (!(d[i] >= 1 && d[i] <= 1e9) || d[i] != floor(d[i]))
                return dm_set_error("%s: dim '%s': sizes are whole numbers from 1", path, value);
            h->dim[i] = (long long)d[i];
        }
        h->ndim = n;
    } else if (!strcmp(key, "vox")) {
        int n = parse_numbers(value, h->vox, MAX_AXES);
        if (n < 1) return dm_set_error("%s: vox '%s' is not a list of voxel sizes", path, value);
        h->nvox_given = n;
    } else if (!strcmp(key, "layout")) {
        if (parse_layout(path, value, h) != 0) return -1;
    } else if (!strcmp(key, "datatype")) {
        snprintf(h->datatype, sizeof h->datatype, "%s", value);
    } else if (!strcmp(key, "transform")) {
        double t[12];
        int n = parse_numbers(value, t, 12);
        if (n < 1 || h->ntransform + n > 12)
            return dm_set_error("%s: transform '%s' is not rows of the 3x4 matrix", path, value);
        memcpy(h->transform + h->ntransform, t, (size_t)n * sizeof *t);
        h->ntransform += n;
    } else if (!strcmp(key, "scaling")) {
        double s[2];
        if (parse_numbers(value, s, 2) != 2 || !isfinite(s[0]) || !isfinite(s[1]))
            return dm_set_error("%s: scaling '%s' is not 'offset,multiplier'", path, value);
        h->offset = s[0];
        h->scale = s[1];
    } else if (!strcmp(key, "file")) {
        /* "NAME OFFSET": the name may hold spaces, the offset is the last word */
        char *sp = strrchr(value, ' ');
        char *end = NULL;
        long long off = sp ? strtoll(sp + 1, &end, 10) : -1;
        if (!sp || !end || *end || off < 0 || end == sp + 1)
            return dm_set_error("%s: file '%s' is not 'NAME OFFSET'", path, value);
        while (sp > value && isspace((unsigned char)sp[-1])) sp--;
        *sp = 0;
        if (!*value || strlen(value) >= sizeof h->data_file)
            return dm_set_error("%s: file: no data file name", path);
        if (h->nfile++)
            return dm_set_error("%s: the data are split over several files; join them with "
                                "mrconvert first",
                                path);
        strcpy(h->data_file, value);
        h->data_offset = off;
    } else if (!strcmp(key, "dw_scheme")) {
        double r[5];
        int n = parse_numbers(value, r, 5);
        if (n != 4)
            return dm_set_error("%s: dw_scheme row %d '%s' is not 4 numbers (x,y,z,b)", path,
                                h->dw_rows + 1, value);
        if (h->dw_rows == h->dw_cap) {
            int cap = h->dw_cap ? 2 * h->dw_cap : 64;
            double *dw = realloc(h->dw, (size_t)cap * 4 * sizeof *dw);
            if (!dw) return dm_set_error("%s: out of memory reading dw_scheme", path);
            h->dw = dw;
            h->dw_cap = cap;
        }
        memcpy(h->dw + 4 * (size_t)h->dw_rows++, r, 4 * sizeof *r);
    } else {
        *colon = ':';
        if (keep_extra(h, line) != 0) return dm_set_error("%s: out of memory", path);
    }
    return 0;
}

/* The header text (through "END"): a malloc'd NUL-terminated copy in *text, its length in
 * bytes up to and including END's line.  gz: through zlib's stream. */
static int read_header_text(const char *path, int gz, char **text, size_t *text_len)
{
    *text = NULL;
    gzFile g = NULL;
    FILE *f = NULL;
    if (gz)
        g = gzopen(path, "rb");
    else
        f = fopen(path, "rb");
    if (!g && !f) return dm_set_error("%s: cannot open: %s", path, strerror(errno));
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap + 1);
    int rc = buf ? 0 : dm_set_error("%s: out of memory", path);
    size_t end = 0; /* bytes through END's newline, once found */
    while (rc == 0 && !end) {
        if (len == cap) {
            if (cap >= MAX_HEADER) {
                rc = dm_set_error("%s: no END line in the first %zu MiB: not an MRtrix image "
                                  "header",
                                  path, MAX_HEADER >> 20);
                break;
            }
            char *b = realloc(buf, 2 * cap + 1);
            if (!b) {
                rc = dm_set_error("%s: out of memory", path);
                break;
            }
            buf = b;
            cap *= 2;
        }
        size_t want = cap - len, got;
        if (gz) {
            int r = gzread(g, buf + len, (unsigned)want);
            got = r > 0 ? (size_t)r : 0;
        } else {
            got = fread(buf + len, 1, want, f);
        }
        size_t from = len > 4 ? len - 4 : 0;
        len += got;
        buf[len] = 0;
        if (len >= 12 && strncmp(buf, "mrtrix image", 12)) {
            rc = dm_set_error("%s: not an MRtrix image (the first line is not 'mrtrix image')",
                              path);
            break;
        }
        /* END on a line of its own: after a newline, followed by \n or \r\n */
        for (size_t i = from; i + 4 <= len && !end; i++)
            if ((i == 0 || buf[i - 1] == '\n') && !memcmp(buf + i, "END", 3) &&
                (buf[i + 3] == '\n' || (buf[i + 3] == '\r' && i + 4 < len && buf[i + 4] == '\n')))
                end = i + (buf[i + 3] == '\n' ? 4 : 5);
        if (!end && got == 0) {
            rc = len < 12 || strncmp(buf, "mrtrix image", 12)
                     ? dm_set_error("%s: not an MRtrix image (too short or unreadable)", path)
                     : dm_set_error("%s: truncated header (no END line)", path);
        }
    }
    if (g) gzclose(g);
    if (f) fclose(f);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    if (memchr(buf, 0, end)) {
        free(buf);
        return dm_set_error("%s: the header holds a NUL byte: not an MRtrix image header", path);
    }
    buf[end] = 0;
    *text = buf;
    *text_len = end;
    return 0;
}

static int parse_header(const char *path, char *text, header *h)
{
    memset(h, 0, sizeof *h);
    h->scale = 1;
    h->data_offset = -1;
    char *save = NULL;
    int first = 1;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        size_t n = strlen(line);
        if (n && line[n - 1] == '\r') line[--n] = 0;
        if (first) { /* "mrtrix image", checked already */
            first = 0;
            continue;
        }
        if (!strcmp(line, "END")) break;
        if (parse_line(path, line, h) != 0) return -1;
    }
    if (!h->ndim) return dm_set_error("%s: the header has no dim", path);
    if (!h->nvox_given) return dm_set_error("%s: the header has no vox", path);
    if (h->nvox_given != h->ndim)
        return dm_set_error("%s: vox has %d entries but dim has %d", path, h->nvox_given, h->ndim);
    if (!h->nlayout) return dm_set_error("%s: the header has no layout", path);
    if (h->nlayout != h->ndim)
        return dm_set_error("%s: layout has %d entries but dim has %d", path, h->nlayout, h->ndim);
    /* the ranks order the axes: all different */
    for (int i = 0; i < h->ndim; i++)
        for (int j = 0; j < i; j++)
            if (h->layout_rank[i] == h->layout_rank[j])
                return dm_set_error("%s: layout gives axes %d and %d the same rank %d", path, j, i,
                                    h->layout_rank[i]);
    if (!h->datatype[0]) return dm_set_error("%s: the header has no datatype", path);
    if (!h->nfile) return dm_set_error("%s: the header has no file entry", path);
    if (h->ntransform != 0 && h->ntransform != 12)
        return dm_set_error("%s: transform has %d values; it needs the 12 of a 3x4 matrix", path,
                            h->ntransform);
    for (int i = 4; i < h->ndim; i++)
        if (h->dim[i] != 1)
            return dm_set_error("%s: %d dimensions (size %lld along axis %d); dimoc reads up to 4",
                                path, h->ndim, h->dim[i], i);
    for (int i = 0; i < h->ndim && i < 3; i++)
        if (!(h->vox[i] > 0) || !isfinite(h->vox[i]))
            return dm_set_error("%s: voxel size %g along axis %d; sizes are positive", path,
                                h->vox[i], i);
    return 0;
}

static long long file_size(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? (long long)st.st_size : -1;
}

/* The data file named by "file: NAME": "." is the header's own file, else NAME in its folder. */
static char *data_file_path(const char *path, const char *name)
{
    if (!strcmp(name, ".")) return strdup(path);
    if (name[0] == '/') return strdup(name);
    const char *slash = strrchr(path, '/');
    size_t dir = slash ? (size_t)(slash - path + 1) : 0;
    char *p = malloc(dir + strlen(name) + 1);
    if (!p) return NULL;
    memcpy(p, path, dir);
    strcpy(p + dir, name);
    return p;
}

/* The whole uncompressed stream's first `need` bytes of a gzip file, read and inflated. */
static int inflate_file(const char *path, size_t need, unsigned char **out)
{
    *out = NULL;
    long long size = file_size(path);
    if (size <= 0) return dm_set_error("%s: cannot read: %s", path, strerror(errno));
    if ((unsigned long long)size * 1032 < need)
        return dm_set_error("%s: truncated or corrupt compressed file (the header promises %zu "
                            "bytes)",
                            path, need);
    FILE *f = fopen(path, "rb");
    unsigned char *gz = malloc((size_t)size);
    *out = dm_big_alloc(need ? need : 1);
    int ok = f && gz && *out && fread(gz, 1, (size_t)size, f) == (size_t)size;
    if (f) fclose(f);
    if (ok) ok = dm_gz_inflate(gz, (size_t)size, *out, need) == 0;
    free(gz);
    if (!ok) {
        free(*out);
        *out = NULL;
        return dm_set_error("%s: truncated or corrupt compressed file (the header promises %zu "
                            "bytes)",
                            path, need);
    }
    return 0;
}

/* Reads `len` bytes at `offset` of a plain file. */
static int read_plain(const char *path, const char *data_path, long long offset, size_t len,
                      unsigned char **out)
{
    *out = dm_big_alloc(len ? len : 1);
    if (!*out) return dm_set_error("%s: out of memory for %zu bytes of data", path, len);
    FILE *f = fopen(data_path, "rb");
    int ok = f && fseeko(f, (off_t)offset, SEEK_SET) == 0 && fread(*out, 1, len, f) == len;
    if (f) fclose(f);
    if (!ok) {
        free(*out);
        *out = NULL;
        return dm_set_error("%s: cannot read the image data from %s", path, data_path);
    }
    return 0;
}

int dm_mif_read(const char *path, dm_mif_image *img, int values)
{
    memset(img, 0, sizeof *img);
    unsigned char magic[2] = {0, 0};
    FILE *f = fopen(path, "rb");
    if (!f) return dm_set_error("%s: cannot open: %s", path, strerror(errno));
    size_t nmagic = fread(magic, 1, 2, f);
    fclose(f);
    int gz = nmagic == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    char *text;
    size_t text_len = 0;
    if (read_header_text(path, gz, &text, &text_len) != 0) return -1;
    header h;
    int rc = parse_header(path, text, &h);
    free(text);
    stored_type st = {0};
    if (rc == 0) rc = parse_datatype(path, h.datatype, &st);
    if (rc != 0) goto done;

    long long dim[4] = {1, 1, 1, 1};
    for (int i = 0; i < h.ndim && i < 4; i++) dim[i] = h.dim[i];
    /* the axes from the smallest layout magnitude (stored fastest) to the largest */
    int ndim = h.ndim, by_rank[MAX_AXES];
    long long stride[MAX_AXES] = {0};
    for (int i = 0; i < ndim; i++) {
        int j = i;
        for (; j > 0 && h.layout_rank[by_rank[j - 1]] > h.layout_rank[i]; j--)
            by_rank[j] = by_rank[j - 1];
        by_rank[j] = i;
    }
    for (long long r = 0, step = 1; r < ndim; r++) {
        int a = by_rank[r];
        stride[a] = h.layout_sign[a] * step;
        step *= h.dim[a];
    }
    const long long total = dim[0] * dim[1] * dim[2] * dim[3];
    if (total > (long long)(SIZE_MAX / sizeof(double)) / 2 || total > (1LL << 40)) {
        rc = dm_set_error("%s: the header's size (%lld values) is impossible", path, total);
        goto done;
    }
    long long start = 0; /* element of voxel [0 0 0 0]: past the axes stored backwards */
    for (int i = 0; i < ndim; i++)
        if (stride[i] < 0) start += (h.dim[i] - 1) * -stride[i];

    /* The spatial axes in stored order (the ranks differ, so no ties); an axis past ndim has
     * size 1 and stays last */
    int order[3] = {0, 1, 2};
    for (int i = 0; i < 3; i++)
        for (int j = i + 1; j < 3; j++)
            if (order[i] < ndim && order[j] < ndim &&
                llabs(stride[order[i]]) > llabs(stride[order[j]])) {
                int t = order[i];
                order[i] = order[j];
                order[j] = t;
            }

    /* The header's transform (identity when absent): image mm -> world mm */
    double T[3][4] = {{1, 0, 0, 0}, {0, 1, 0, 0}, {0, 0, 1, 0}};
    if (h.ntransform == 12)
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 4; j++) T[i][j] = h.transform[4 * i + j];
    double vox[3];
    for (int i = 0; i < 3; i++) vox[i] = i < ndim ? h.vox[i] : 1.0;
    /* voxel index -> world, in the file's axes, then taken in stored order */
    long long out_stride[4];
    long long base = start;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) img->vox2world[i][j] = (i == j && i == 3);
    for (int i = 0; i < 3; i++) img->vox2world[i][3] = T[i][3];
    int n_out[3];
    for (int k = 0; k < 3; k++) {
        int a = order[k];
        int flip = stride[a] < 0;
        n_out[k] = (int)dim[a];
        out_stride[k] = flip ? -stride[a] : stride[a];
        if (flip) base += (dim[a] - 1) * stride[a];
        img->vox[k] = vox[a];
        for (int i = 0; i < 3; i++) {
            double col = T[i][a] * vox[a];
            img->vox2world[i][k] = flip ? -col : col;
            if (flip) img->vox2world[i][3] += (double)(dim[a] - 1) * col;
        }
    }
    out_stride[3] = stride[3];
    img->vox[3] = ndim > 3 && isfinite(h.vox[3]) && h.vox[3] > 0 ? h.vox[3] : 1.0;
    img->nx = n_out[0];
    img->ny = n_out[1];
    img->nz = n_out[2];
    img->nt = (int)dim[3];
    if (h.dw_rows) {
        img->dw_scheme = h.dw;
        img->dw_rows = h.dw_rows;
        h.dw = NULL;
    }
    img->extra = h.extra;
    h.extra = NULL;

    /* The data's size, checked before anything of that size is allocated */
    size_t nbytes = st.k == T_BIT ? (size_t)((total + 7) / 8) : (size_t)total * (size_t)st.bytes;
    char *dpath = data_file_path(path, h.data_file);
    if (!dpath) {
        rc = dm_set_error("%s: out of memory", path);
        goto done;
    }
    int same_file = !strcmp(h.data_file, ".");
    if (same_file && (size_t)h.data_offset < text_len) {
        rc = dm_set_error("%s: the data offset %lld lies inside the header (%zu bytes)", path,
                          h.data_offset, text_len);
    } else if (gz && !same_file) {
        rc = dm_set_error("%s: a compressed header naming the data file %s; give the .mih and "
                          "its data uncompressed",
                          path, h.data_file);
    } else if (!gz) {
        long long have = file_size(dpath);
        if (have < 0)
            rc = dm_set_error("%s: cannot read the data file %s: %s", path, dpath, strerror(errno));
        else if (have - h.data_offset < (long long)nbytes)
            rc = dm_set_error("%s: truncated: the header needs %lld bytes of data from offset "
                              "%lld but %s has %lld",
                              path, (long long)nbytes, h.data_offset,
                              same_file ? "the file" : dpath, have);
    } else {
        long long have = file_size(dpath);
        if (have < 0 ||
            (unsigned long long)have * 1032 < (unsigned long long)h.data_offset + nbytes)
            rc = dm_set_error("%s: truncated or corrupt compressed file (the header promises %zu "
                              "bytes of data)",
                              path, nbytes);
    }
    if (rc != 0 || !values) {
        free(dpath);
        goto done;
    }

    unsigned char *raw = NULL, *data;
    if (gz) {
        rc = inflate_file(path, (size_t)h.data_offset + nbytes, &raw);
        data = raw ? raw + h.data_offset : NULL;
    } else {
        rc = read_plain(path, dpath, h.data_offset, nbytes, &raw);
        data = raw;
    }
    free(dpath);
    if (rc != 0) goto done;
    img->values = dm_big_alloc((size_t)total * sizeof(double));
    if (!img->values) {
        free(raw);
        rc = dm_set_error("%s: out of memory for %lld values", path, total);
        goto done;
    }
    const int nx = img->nx, ny = img->ny, nz = img->nz, nt = img->nt;
    const double offset = h.offset, scale = h.scale;
    const int scaled = offset != 0 || scale != 1;
    double *out = img->values;
    int stop = 0;
#pragma omp parallel for schedule(dynamic, 1) collapse(2) reduction(| : stop) if (total > 1 << 18)
    for (int t = 0; t < nt; t++)
        for (int z = 0; z < nz; z++) {
            if (stop || (stop = dm_stop_requested())) continue;
            for (int y = 0; y < ny; y++) {
                long long e = base + t * out_stride[3] + z * out_stride[2] + y * out_stride[1];
                double *row = out + (((size_t)t * nz + z) * ny + y) * nx;
                for (int x = 0; x < nx; x++, e += out_stride[0]) {
                    double v = stored_value(data, (size_t)e, &st);
                    row[x] = scaled ? offset + scale * v : v;
                }
            }
        }
    free(raw);
    if (stop) rc = dm_stop_error();

done:
    free(h.dw);
    free(h.extra);
    if (rc != 0) dm_mif_free(img);
    return rc;
}

/* ---- Writing ---- */

char *dm_mif_header(int nx, int ny, int nz, int nt, double vox_t, const double vox2world[4][4],
                    int type, const double *dw_scheme, int dw_rows, size_t *len)
{
    double vox[3];
    for (int j = 0; j < 3; j++) {
        vox[j] = sqrt(vox2world[0][j] * vox2world[0][j] + vox2world[1][j] * vox2world[1][j] +
                      vox2world[2][j] * vox2world[2][j]);
        if (!(vox[j] > 0) || !isfinite(vox[j])) {
            dm_set_error("the voxel-to-world matrix has a degenerate column");
            return NULL;
        }
    }
    const char *dtype = type == DM_MIF_UINT8     ? "UInt8"
                        : type == DM_MIF_UINT32  ? (host_is_little() ? "UInt32LE" : "UInt32BE")
                        : type == DM_MIF_FLOAT64 ? (host_is_little() ? "Float64LE" : "Float64BE")
                                                 : (host_is_little() ? "Float32LE" : "Float32BE");
    size_t cap = 1024 + (dw_rows == nt && dw_scheme ? (size_t)dw_rows * 100 : 0);
    char *s = malloc(cap);
    if (!s) {
        dm_set_error("out of memory");
        return NULL;
    }
    int n = 0;
    if (nt > 1)
        n += snprintf(s + n, cap - n,
                      "mrtrix image\ndim: %d,%d,%d,%d\nvox: %.9g,%.9g,%.9g,%.9g\n"
                      "layout: +0,+1,+2,+3\n",
                      nx, ny, nz, nt, vox[0], vox[1], vox[2], vox_t > 0 ? vox_t : 1.0);
    else
        n += snprintf(s + n, cap - n,
                      "mrtrix image\ndim: %d,%d,%d\nvox: %.9g,%.9g,%.9g\nlayout: +0,+1,+2\n", nx,
                      ny, nz, vox[0], vox[1], vox[2]);
    n += snprintf(s + n, cap - n, "datatype: %s\n", dtype);
    for (int i = 0; i < 3; i++)
        n += snprintf(s + n, cap - n, "transform: %.15g,%.15g,%.15g,%.15g\n",
                      vox2world[i][0] / vox[0], vox2world[i][1] / vox[1], vox2world[i][2] / vox[2],
                      vox2world[i][3]);
    if (dw_scheme && dw_rows == nt)
        for (int r = 0; r < dw_rows; r++)
            n += snprintf(s + n, cap - n, "dw_scheme: %.10g,%.10g,%.10g,%.10g\n", dw_scheme[4 * r],
                          dw_scheme[4 * r + 1], dw_scheme[4 * r + 2], dw_scheme[4 * r + 3]);
    /* "file: . OFFSET" then END; the offset is the header's length rounded up to 16 bytes,
     * zero bytes filling the gap after END */
    size_t body = (size_t)n;
    for (int digits = 1; digits < 20; digits++) {
        size_t off = (body + strlen("file: . \nEND\n") + (size_t)digits + 15) / 16 * 16;
        char num[32];
        if ((int)snprintf(num, sizeof num, "%zu", off) != digits) continue;
        n += snprintf(s + n, cap - n, "file: . %s\nEND\n", num);
        memset(s + n, 0, off - (size_t)n);
        *len = off;
        return s;
    }
    free(s);
    dm_set_error("cannot make an MRtrix header");
    return NULL;
}
