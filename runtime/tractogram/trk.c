/* TrackVis .trk files: the reader (whole file, checked) and the streaming writer (points turned
 * into voxel mm on the way); the coordinate rule is nibabel's (see trk.h). */
#define _GNU_SOURCE
#include "tractogram/trk.h"
#include "io/bigalloc.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/interrupt.h"

#include <errno.h>
#include <float.h>
#include <math.h>
#include <omp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum {
    TRK_HEADER = 1000,
    AT_DIM = 6,
    AT_VOXEL_SIZE = 12,
    AT_N_SCALARS = 36,
    AT_N_PROPERTIES = 238,
    AT_PROPERTY_NAME = 240,
    AT_VOX_TO_RAS = 440,
    AT_RESERVED = 504,
    RESERVED_BYTES = 444,
    AT_VOXEL_ORDER = 948,
    AT_N_COUNT = 988,
    AT_VERSION = 992,
    AT_HDR_SIZE = 996,
};

/* The mark that starts the reserved bytes of a file written here: the .tck header's lines
 * follow. */
static const char reserved_mark[] = "dimoc tck header\n";

/* ---- little helpers: values in the file's byte order ---- */

static uint32_t get_u32(const unsigned char *p, int swap)
{
    uint32_t v = (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
    if (swap) v = v >> 24 | (v >> 8 & 0xff00) | (v << 8 & 0xff0000) | v << 24;
    return v;
}
static int32_t get_i32(const unsigned char *p, int swap)
{
    return (int32_t)get_u32(p, swap);
}
static int16_t get_i16(const unsigned char *p, int swap)
{
    uint16_t v = (uint16_t)(p[0] | p[1] << 8);
    if (swap) v = (uint16_t)(v >> 8 | v << 8);
    return (int16_t)v;
}
static float get_f32(const unsigned char *p, int swap)
{
    uint32_t u = get_u32(p, swap);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static void put_u32(unsigned char *p, uint32_t v)
{
    for (int b = 0; b < 4; b++) p[b] = (unsigned char)(v >> (8 * b));
}
static void put_f32(unsigned char *p, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    put_u32(p, u);
}
static void put_i16(unsigned char *p, int v)
{
    p[0] = (unsigned char)(v & 255);
    p[1] = (unsigned char)((v >> 8) & 255);
}

/* ---- orientation (nibabel's io_orientation, axcodes, ornt_transform, inv_ornt_aff) ---- */

static int invert3(const double a[3][3], double inv[3][3])
{
    double det = a[0][0] * (a[1][1] * a[2][2] - a[1][2] * a[2][1]) -
                 a[0][1] * (a[1][0] * a[2][2] - a[1][2] * a[2][0]) +
                 a[0][2] * (a[1][0] * a[2][1] - a[1][1] * a[2][0]);
    if (!(fabs(det) > 1e-300) || !isfinite(det)) return -1;
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            int r1 = (c + 1) % 3, r2 = (c + 2) % 3, c1 = (r + 1) % 3, c2 = (r + 2) % 3;
            inv[r][c] = (a[r1][c1] * a[r2][c2] - a[r1][c2] * a[r2][c1]) / det;
        }
    return 0;
}

/* For each voxel axis, the world axis (0 x, 1 y, 2 z) it runs along and its sign: the
 * orthogonal factor of the column-normalised 3x3 (its polar decomposition, what nibabel has
 * from an SVD), then per column in order the largest entry, that row then left out.  -1 when
 * the matrix is singular. */
static int io_orientation(const double aff[4][4], int axis[3], int sign[3])
{
    double x[3][3];
    for (int c = 0; c < 3; c++) {
        double z = sqrt(aff[0][c] * aff[0][c] + aff[1][c] * aff[1][c] + aff[2][c] * aff[2][c]);
        if (z == 0) z = 1;
        for (int r = 0; r < 3; r++) x[r][c] = aff[r][c] / z;
    }
    for (int it = 0; it < 100; it++) { /* Newton's iteration for the polar factor */
        double inv[3][3], change = 0;
        if (invert3(x, inv) != 0) return -1;
        for (int r = 0; r < 3; r++)
            for (int c = 0; c < 3; c++) {
                double v = 0.5 * (x[r][c] + inv[c][r]);
                change = fmax(change, fabs(v - x[r][c]));
                x[r][c] = v;
            }
        if (change < 1e-15) break;
    }
    for (int c = 0; c < 3; c++) {
        int best = -1;
        for (int r = 0; r < 3; r++)
            if (best < 0 || fabs(x[r][c]) > fabs(x[best][c])) best = r;
        if (!(fabs(x[best][c]) > 1e-12)) return -1;
        axis[c] = best;
        sign[c] = x[best][c] < 0 ? -1 : 1;
        for (int k = 0; k < 3; k++) x[best][k] = 0;
    }
    return 0;
}

static int voxel_order_ornt(const char *order, int axis[3], int sign[3])
{
    static const char pos[] = "RAS", neg[] = "LPI";
    int used = 0;
    for (int k = 0; k < 3; k++) {
        char c = order[k];
        if (c >= 'a' && c <= 'z') c = (char)(c - 'a' + 'A');
        const char *p = c ? strchr(pos, c) : NULL, *n = c ? strchr(neg, c) : NULL;
        if (!p && !n) return -1;
        axis[k] = (int)(p ? p - pos : n - neg);
        sign[k] = p ? 1 : -1;
        if (used & (1 << axis[k])) return -1;
        used |= 1 << axis[k];
    }
    return order[3] == 0 ? 0 : -1;
}

int dm_trk_voxmm_to_world(const double v2r[4][4], const float vs[3], const char *voxel_order,
                          const int dims[3], double out[4][4])
{
    int aa[3], as[3], ha[3], hs[3];
    if (io_orientation(v2r, aa, as) != 0 || voxel_order_ornt(voxel_order, ha, hs) != 0) return -1;
    /* the transform from the header's orientation to the affine's: voxel axis i of the header
     * becomes axis t[i], flipped when the two signs differ; then inv_ornt_aff's matrix M */
    int t[3], f[3];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            if (aa[j] == ha[i]) {
                t[i] = j;
                f[i] = hs[i] == as[j] ? 1 : -1;
            }
    double m[4][4] = {{0}};
    m[3][3] = 1;
    for (int r = 0; r < 3; r++) {
        double c = -(dims[r] - 1) / 2.0;
        m[r][t[r]] = f[r];
        m[r][3] = f[r] * c - c;
    }
    /* inner: p / vs - 0.5 */
    double inner[4][4] = {{0}};
    inner[3][3] = 1;
    for (int k = 0; k < 3; k++) {
        inner[k][k] = 1.0 / vs[k];
        inner[k][3] = -0.5;
    }
    double mi[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            mi[r][c] = 0;
            for (int k = 0; k < 4; k++) mi[r][c] += m[r][k] * inner[k][c];
        }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) {
            out[r][c] = 0;
            for (int k = 0; k < 4; k++) out[r][c] += v2r[r][k] * mi[k][c];
        }
    return 0;
}

/* ---- the reader ---- */

/* The property names: one dps per name ("name" or "name\0N" for N values, nibabel's encoding)
 * when they account for all n values, else one "properties" of n columns. */
static int make_dps(const char *path, const unsigned char *h, int n, long count, dm_tck *t)
{
    if (n == 0) return 0;
    char names[10][21];
    int cols[10], k = 0, sum = 0;
    for (int i = 0; i < 10; i++) {
        const char *raw = (const char *)h + AT_PROPERTY_NAME + 20 * i;
        size_t len = strnlen(raw, 20);
        if (!len) break;
        memcpy(names[k], raw, len);
        names[k][len] = 0;
        cols[k] = 1;
        if (len + 1 < 20 && raw[len + 1]) {
            char digits[21];
            size_t dl = strnlen(raw + len + 1, 20 - len - 1);
            memcpy(digits, raw + len + 1, dl);
            digits[dl] = 0;
            cols[k] = atoi(digits);
            if (cols[k] < 1) cols[k] = 1;
        }
        sum += cols[k++];
    }
    if (sum != n) {
        k = 1;
        snprintf(names[0], sizeof names[0], "properties");
        cols[0] = n;
    }
    t->dps = calloc((size_t)k, sizeof *t->dps);
    if (!t->dps) return dm_set_error("%s: out of memory", path);
    for (int i = 0; i < k; i++) {
        t->dps[i].name = strdup(names[i]);
        t->dps[i].ncols = cols[i];
        t->dps[i].values = malloc((size_t)(count ? count : 1) * (size_t)cols[i] * sizeof(float));
        t->ndps = i + 1;
        if (!t->dps[i].name || !t->dps[i].values) return dm_set_error("%s: out of memory", path);
    }
    return 0;
}

static int read_body(const char *path, FILE *fp, const unsigned char *h, int swap, long long size,
                     dm_tck *t)
{
    const int ns = get_i16(h + AT_N_SCALARS, swap), np = get_i16(h + AT_N_PROPERTIES, swap);
    const long n_count = get_i32(h + AT_N_COUNT, swap);
    if (ns < 0 || np < 0)
        return dm_set_error("%s: the header's n_scalars %d or n_properties %d is negative", path,
                            ns, np);
    if (n_count < 0) return dm_set_error("%s: the header's n_count %ld is negative", path, n_count);
    float vs[3];
    int dims[3];
    for (int k = 0; k < 3; k++) {
        vs[k] = get_f32(h + AT_VOXEL_SIZE + 4 * k, swap);
        dims[k] = get_i16(h + AT_DIM + 2 * k, swap);
        if (!(vs[k] > 0) || !isfinite(vs[k]))
            return dm_set_error("%s: the header's voxel_size %g %g %g is not positive", path,
                                (double)get_f32(h + AT_VOXEL_SIZE, swap),
                                (double)get_f32(h + AT_VOXEL_SIZE + 4, swap),
                                (double)get_f32(h + AT_VOXEL_SIZE + 8, swap));
        if (dims[k] < 0) return dm_set_error("%s: the header's dim is negative", path);
    }
    double v2r[4][4];
    const int version = get_i32(h + AT_VERSION, swap);
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            v2r[r][c] = version == 1 ? r == c : get_f32(h + AT_VOX_TO_RAS + 16 * r + 4 * c, swap);
    if (v2r[3][3] == 0) /* not recorded: nibabel takes the identity */
        for (int r = 0; r < 4; r++)
            for (int c = 0; c < 4; c++) v2r[r][c] = r == c;
    char order[5] = {0};
    memcpy(order, h + AT_VOXEL_ORDER, 4);
    if (!order[0]) strcpy(order, "LPS"); /* TrackVis's default, as nibabel */
    double to_world[4][4];
    int io[3], is[3];
    if (io_orientation(v2r, io, is) != 0)
        return dm_set_error("%s: the header's vox_to_ras has no axis directions (singular)", path);
    if (dm_trk_voxmm_to_world(v2r, vs, order, dims, to_world) != 0)
        return dm_set_error("%s: the header's voxel_order '%.4s' is not three of L/R, A/P, I/S",
                            path, order);
    t->grid.valid = 1;
    memcpy(t->grid.dims, dims, sizeof dims);
    memcpy(t->grid.vox2ras, v2r, sizeof v2r);
    const char *reserved = (const char *)h + AT_RESERVED;
    if (!strncmp(reserved, reserved_mark, strlen(reserved_mark))) {
        size_t len = strnlen(reserved, RESERVED_BYTES) - strlen(reserved_mark);
        t->properties = strndup(reserved + strlen(reserved_mark), len);
    } else {
        t->properties = calloc(1, 1);
    }
    /* the data, whole, into memory; then two walks: count, then convert */
    size_t bytes = (size_t)(size - TRK_HEADER);
    unsigned char *raw = malloc(bytes ? bytes : 1);
    if (!raw || !t->properties) {
        free(raw);
        return dm_set_error("%s: out of memory", path);
    }
    for (size_t done = 0; done < bytes;) {
        size_t want = bytes - done < ((size_t)1 << 26) ? bytes - done : (size_t)1 << 26;
        if (fread(raw + done, 1, want, fp) != want) {
            free(raw);
            return dm_set_error("%s: cannot read the streamlines", path);
        }
        done += want;
        if (dm_stop_requested()) {
            free(raw);
            return dm_stop_error();
        }
    }
    const size_t per_point = 4 * (size_t)(3 + ns), props = 4 * (size_t)np;
    long count = 0;
    size_t points = 0, at = 0;
    int rc = 0;
    while (at < bytes && (n_count == 0 || count < n_count)) {
        if (bytes - at < 4) {
            rc = dm_set_error("%s: truncated: %zu bytes after streamline %ld, not a point count",
                              path, bytes - at, count);
            break;
        }
        long n = get_i32(raw + at, swap);
        if (n < 0) {
            rc = dm_set_error("%s: streamline %ld has a negative point count (%ld)", path,
                              count + 1, n);
            break;
        }
        if ((bytes - at - 4) / per_point < (size_t)n ||
            bytes - at - 4 - per_point * (size_t)n < props) {
            rc = dm_set_error("%s: truncated: streamline %ld of %ld points ends past the end of "
                              "the file",
                              path, count + 1, n);
            break;
        }
        at += 4 + per_point * (size_t)n + props;
        points += (size_t)n;
        count++;
    }
    if (rc == 0 && n_count > 0 && count < n_count)
        rc = dm_set_error("%s: truncated: the header's n_count is %ld but the file holds %ld "
                          "streamlines",
                          path, n_count, count);
    if (rc == 0 && at < bytes)
        rc = dm_set_error("%s: the header's n_count is %ld but %zu bytes follow streamline %ld",
                          path, n_count, bytes - at, count);
    if (rc == 0) {
        t->count = count;
        t->npoints = malloc((size_t)(count ? count : 1) * sizeof *t->npoints);
        t->start = malloc((size_t)(count + 1) * sizeof *t->start);
        t->xyz = dm_big_alloc((points ? points : 1) * 3 * sizeof(float));
        if (!t->npoints || !t->start || !t->xyz) rc = dm_set_error("%s: out of memory", path);
    }
    if (rc == 0) rc = make_dps(path, h, np, count, t);
    at = 0;
    if (rc == 0) t->start[0] = 0;
    for (long s = 0; rc == 0 && s < count; s++) {
        long n = get_i32(raw + at, swap);
        at += 4;
        t->npoints[s] = n;
        t->start[s + 1] = t->start[s] + n;
        for (long i = 0; i < n && rc == 0; i++, at += per_point) {
            double p[3], w[3];
            for (int k = 0; k < 3; k++) p[k] = get_f32(raw + at + 4 * k, swap);
            for (int r = 0; r < 3; r++)
                w[r] = to_world[r][0] * p[0] + to_world[r][1] * p[1] + to_world[r][2] * p[2] +
                       to_world[r][3];
            if (!isfinite(w[0]) || !isfinite(w[1]) || !isfinite(w[2]) || fabs(w[0]) > FLT_MAX ||
                fabs(w[1]) > FLT_MAX || fabs(w[2]) > FLT_MAX)
                rc = dm_set_error("%s: streamline %ld, point %ld is not finite (%g %g %g)", path,
                                  s + 1, i + 1, p[0], p[1], p[2]);
            float *o = t->xyz + 3 * (t->start[s] + i);
            for (int k = 0; k < 3; k++) o[k] = (float)w[k];
        }
        /* the properties, into the dps in name order */
        for (int d = 0, c = 0; rc == 0 && d < t->ndps; d++)
            for (int j = 0; j < t->dps[d].ncols; j++, c++)
                t->dps[d].values[(size_t)s * t->dps[d].ncols + j] = get_f32(raw + at + 4 * c, swap);
        at += props;
    }
    free(raw);
    return rc;
}

int dm_trk_read(const char *path, dm_tck *t, int threads)
{
    (void)threads;
    memset(t, 0, sizeof *t);
    t->header_count = -1;
    FILE *fp = fopen(path, "rb");
    if (!fp) return dm_set_error("cannot open %s: %s", path, strerror(errno));
    struct stat st;
    unsigned char h[TRK_HEADER];
    int rc = 0;
    if (fstat(fileno(fp), &st) != 0 || S_ISDIR(st.st_mode))
        rc = dm_set_error("%s: a folder, not a TrackVis file", path);
    else if (st.st_size < TRK_HEADER || fread(h, 1, TRK_HEADER, fp) != TRK_HEADER)
        rc = dm_set_error("%s: truncated: %lld bytes, less than the 1000 of a TrackVis header",
                          path, (long long)st.st_size);
    else if (memcmp(h, "TRACK", 5))
        rc = dm_set_error("%s: not a TrackVis file (it does not begin with 'TRACK')", path);
    int swap = 0;
    if (rc == 0 && get_i32(h + AT_HDR_SIZE, 0) != TRK_HEADER) {
        swap = 1;
        if (get_i32(h + AT_HDR_SIZE, 1) != TRK_HEADER)
            rc = dm_set_error("%s: the header's hdr_size is %d, not 1000", path,
                              get_i32(h + AT_HDR_SIZE, 0));
    }
    if (rc == 0) {
        int version = get_i32(h + AT_VERSION, swap);
        if (version < 1 || version > 3)
            rc = dm_set_error("%s: TrackVis version %d (1 and 2 are known)", path, version);
    }
    if (rc == 0) rc = read_body(path, fp, h, swap, (long long)st.st_size, t);
    fclose(fp);
    if (rc != 0) {
        dm_tck_free(t);
        t->header_count = -1;
        return -1;
    }
    t->header_count = get_i32(h + AT_N_COUNT, swap) ? t->count : -1;
    return 0;
}

/* ---- the writer ---- */

struct dm_trk_writer {
    FILE *fp;
    char *path, *tmp;
    double from_world[4][4]; /* world mm -> voxel mm */
    long count;
    int nprops;
    float *props; /* count_given x nprops, streamline after streamline */
    long props_count;
    char prop_names[10][20];
    int failed;
};

/* The .tck header's lines that fit, whole, in the reserved bytes: step_size first (what dimoc
 * tdi reads), room kept for count and total_count (dm_trk_close); the rest of them zeros. */
static void put_reserved(unsigned char *h, const char *info)
{
    memset(h + AT_RESERVED, 0, RESERVED_BYTES);
    size_t used = strlen(reserved_mark);
    memcpy(h + AT_RESERVED, reserved_mark, used);
    for (int pass = 0; pass < 2; pass++)
        for (const char *line = info; line && *line;) {
            size_t n = strcspn(line, "\n");
            int step = !strncmp(line, "step_size:", 10);
            if (step == !pass && used + n + 1 < RESERVED_BYTES - 64 && memchr(line, ':', n) &&
                strncmp(line, "count:", 6) && strncmp(line, "total_count:", 12)) {
                memcpy(h + AT_RESERVED + used, line, n);
                h[AT_RESERVED + used + n] = '\n';
                used += n + 1;
            }
            line += n + (line[n] == '\n');
        }
}

/* Appends "count: N\ntotal_count: M\n" to the reserved lines (room was kept). */
static void put_counts(unsigned char *h, long count, unsigned long long total)
{
    size_t used = strnlen((const char *)h + AT_RESERVED, RESERVED_BYTES);
    char counts[80];
    int n = snprintf(counts, sizeof counts, "count: %ld\ntotal_count: %llu\n", count, total);
    if (used + (size_t)n < RESERVED_BYTES) memcpy(h + AT_RESERVED + used, counts, (size_t)n);
}

dm_trk_writer *dm_trk_open(const char *path, const char *info, const dm_tract_grid *grid)
{
    if (!grid || !grid->valid) {
        dm_set_error("%s: a .trk file needs the reference image's grid", path);
        return NULL;
    }
    unsigned char h[TRK_HEADER] = {0};
    memcpy(h, "TRACK", 5);
    float vs[3];
    for (int k = 0; k < 3; k++) {
        const double(*a)[4] = grid->vox2ras;
        vs[k] = (float)sqrt(a[0][k] * a[0][k] + a[1][k] * a[1][k] + a[2][k] * a[2][k]);
        put_i16(h + AT_DIM + 2 * k, grid->dims[k] > 32767 ? 32767 : grid->dims[k]);
        put_f32(h + AT_VOXEL_SIZE + 4 * k, vs[k]);
    }
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++)
            put_f32(h + AT_VOX_TO_RAS + 16 * r + 4 * c, (float)grid->vox2ras[r][c]);
    /* voxel_order: vox_to_ras's own, so that nothing is reordered */
    int axis[3], sign[3];
    double v2r[4][4];
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 4; c++) v2r[r][c] = (float)grid->vox2ras[r][c]; /* as readers see it */
    if (io_orientation(v2r, axis, sign) != 0) {
        dm_set_error("%s: the reference image's voxel -> world matrix is singular", path);
        return NULL;
    }
    char order[4] = {0};
    for (int k = 0; k < 3; k++) order[k] = (sign[k] > 0 ? "RAS" : "LPI")[axis[k]];
    memcpy(h + AT_VOXEL_ORDER, order, 3);
    put_u32(h + AT_VERSION, 2);
    put_u32(h + AT_HDR_SIZE, TRK_HEADER);
    put_reserved(h, info);
    double to_world[4][4];
    dm_trk_writer *w = calloc(1, sizeof *w);
    if (!w || dm_trk_voxmm_to_world(v2r, vs, order, grid->dims, to_world) != 0) {
        free(w);
        dm_set_error("%s: the reference image's voxel -> world matrix is singular", path);
        return NULL;
    }
    double r3[3][3], inv[3][3];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) r3[r][c] = to_world[r][c];
    if (invert3(r3, inv) != 0) {
        free(w);
        dm_set_error("%s: the reference image's voxel -> world matrix is singular", path);
        return NULL;
    }
    for (int r = 0; r < 3; r++) {
        w->from_world[r][3] = 0;
        for (int c = 0; c < 3; c++) {
            w->from_world[r][c] = inv[r][c];
            w->from_world[r][3] -= inv[r][c] * to_world[c][3];
        }
    }
    w->path = strdup(path);
    w->tmp = dm_temp_sibling(path);
    w->fp = w->tmp ? fopen(w->tmp, "w+b") : NULL; /* read back at the end: the header */
    if (!w->fp || fwrite(h, 1, TRK_HEADER, w->fp) != TRK_HEADER) {
        dm_set_error("%s: cannot write: %s", path, strerror(errno));
        if (w->fp) fclose(w->fp);
        if (w->tmp) unlink(w->tmp);
        free(w->path);
        free(w->tmp);
        free(w);
        return NULL;
    }
    setvbuf(w->fp, NULL, _IOFBF, 1 << 22);
    return w;
}

int dm_trk_set_dps(dm_trk_writer *w, const char *name, const float *values, long count)
{
    if (w->count > 0 || (w->nprops && count != w->props_count) || w->nprops == 10)
        return dm_set_error("%s: per-streamline values must be given before the streamlines, "
                            "at most 10, all of one length",
                            w->path);
    if (!*name || strlen(name) > 19)
        return dm_set_error("%s: '%s' cannot name a .trk property (1 to 19 characters)", w->path,
                            name);
    float *p = malloc((size_t)(count ? count : 1) * (size_t)(w->nprops + 1) * sizeof *p);
    if (!p) return dm_set_error("out of memory");
    for (long s = 0; s < count; s++) {
        for (int k = 0; k < w->nprops; k++)
            p[s * (w->nprops + 1) + k] = w->props[s * w->nprops + k];
        p[s * (w->nprops + 1) + w->nprops] = values[s];
    }
    free(w->props);
    w->props = p;
    w->props_count = count;
    strncpy(w->prop_names[w->nprops++], name, 19);
    return 0;
}

/* Streamline s (the count-th added) as the file has it, at out: the count, the points in voxel
 * mm, the properties.  Its bytes. */
static size_t trk_record(const dm_trk_writer *w, long s, const float *xyz, int n,
                         unsigned char *out)
{
    put_u32(out, (uint32_t)n);
    unsigned char *o = out + 4;
    for (int i = 0; i < n; i++, o += 12) {
        const double x = xyz[3 * i], y = xyz[3 * i + 1], z = xyz[3 * i + 2];
        for (int r = 0; r < 3; r++)
            put_f32(o + 4 * r, (float)(w->from_world[r][0] * x + w->from_world[r][1] * y +
                                       w->from_world[r][2] * z + w->from_world[r][3]));
    }
    for (int k = 0; k < w->nprops; k++, o += 4)
        put_f32(o, s < w->props_count ? w->props[s * w->nprops + k] : 0.0f);
    return (size_t)(o - out);
}

void dm_trk_add(dm_trk_writer *w, const float *xyz, int n)
{
    unsigned char small[4 + 12 * 64 + 40];
    size_t need = 4 + 12 * (size_t)n + 4 * (size_t)w->nprops;
    unsigned char *buf = need <= sizeof small ? small : malloc(need);
    if (!buf) {
        w->failed = 1;
        return;
    }
    size_t len = trk_record(w, w->count, xyz, n, buf);
    if (fwrite(buf, 1, len, w->fp) != len) w->failed = 1;
    if (buf != small) free(buf);
    w->count++;
}

int dm_trk_add_many(dm_trk_writer *w, const float *xyz, const size_t *start, const int *npts,
                    long count, int threads)
{
    if (threads <= 1 || count < 64) {
        for (long i = 0; i < count; i++) dm_trk_add(w, xyz + 3 * start[i], npts[i]);
        return w->failed ? -1 : 0;
    }
    /* blocks of about 64 MB, each laid out on all threads and written in one go */
    const size_t extra = 4 + 4 * (size_t)w->nprops;
    size_t *at = malloc((size_t)(count + 1) * sizeof *at);
    if (!at) return w->failed = -1;
    unsigned char *buf = NULL;
    size_t cap = 0;
    for (long a = 0; a < count && !w->failed;) {
        long b = a;
        at[a] = 0;
        while (b < count && (b == a || at[b] < ((size_t)64 << 20))) {
            at[b + 1] = at[b] + extra + 12 * (size_t)npts[b];
            b++;
        }
        if (at[b] > cap) {
            free(buf);
            cap = at[b];
            buf = malloc(cap);
            if (!buf) {
                w->failed = 1;
                break;
            }
        }
#pragma omp parallel for schedule(dynamic, 256) num_threads(threads)
        for (long i = a; i < b; i++)
            trk_record(w, w->count + (i - a), xyz + 3 * start[i], npts[i], buf + at[i]);
        if (fwrite(buf, 1, at[b], w->fp) != at[b]) w->failed = 1;
        w->count += b - a;
        a = b;
    }
    free(buf);
    free(at);
    return w->failed ? -1 : 0;
}

long dm_trk_written(const dm_trk_writer *w)
{
    return w->count;
}

void dm_trk_abort(dm_trk_writer *w)
{
    if (!w) return;
    fclose(w->fp);
    unlink(w->tmp);
    free(w->props);
    free(w->path);
    free(w->tmp);
    free(w);
}

int dm_trk_close(dm_trk_writer *w, unsigned long long total_count)
{
    int rc = 0;
    if (w->nprops && w->props_count != w->count)
        rc = dm_set_error("%s: %ld per-streamline values for %ld streamlines", w->path,
                          w->props_count, w->count);
    if (w->count > 2147483647L)
        rc = dm_set_error("%s: %ld streamlines: more than a .trk's n_count can hold", w->path,
                          w->count);
    /* the tck header's count and total_count go at the end of the reserved lines */
    unsigned char h[TRK_HEADER];
    int bad = w->failed || fflush(w->fp) != 0 || fseek(w->fp, 0, SEEK_SET) != 0 ||
              fread(h, 1, TRK_HEADER, w->fp) != TRK_HEADER;
    if (rc == 0 && !bad) {
        put_u32(h + AT_N_COUNT, (uint32_t)w->count);
        put_i16(h + AT_N_PROPERTIES, w->nprops);
        for (int k = 0; k < w->nprops; k++)
            memcpy(h + AT_PROPERTY_NAME + 20 * k, w->prop_names[k], strnlen(w->prop_names[k], 19));
        put_counts(h, w->count, total_count);
        bad = fseek(w->fp, 0, SEEK_SET) != 0 || fwrite(h, 1, TRK_HEADER, w->fp) != TRK_HEADER;
    }
    if (rc == 0) {
        rc = dm_commit_written(w->fp, bad, w->tmp, w->path);
    } else {
        fclose(w->fp);
        unlink(w->tmp);
    }
    w->fp = NULL;
    free(w->props);
    free(w->path);
    free(w->tmp);
    free(w);
    return rc;
}

int dm_trk_concat(char *const parts[], int n, const char *out, const char *info,
                  unsigned long long total_count)
{
    unsigned char first[TRK_HEADER], h[TRK_HEADER];
    char *tmp = dm_temp_sibling(out);
    FILE *o = tmp ? fopen(tmp, "wb") : NULL;
    if (!o) {
        free(tmp);
        return dm_set_error("cannot write %s: %s", out, strerror(errno));
    }
    long count = 0;
    int rc = fwrite(first, 1, TRK_HEADER, o) == TRK_HEADER ? 0 : -1; /* room for the header */
    char *buf = malloc((size_t)1 << 22);
    if (!buf) rc = dm_set_error("out of memory");
    for (int k = 0; rc == 0 && k < n; k++) {
        FILE *f = fopen(parts[k], "rb");
        if (!f || fread(k ? h : first, 1, TRK_HEADER, f) != TRK_HEADER) {
            rc = dm_set_error("%s: cannot read its header", parts[k]);
        } else if (k > 0 && (memcmp(h, first, AT_RESERVED) ||
                             memcmp(h + AT_VOXEL_ORDER, first + AT_VOXEL_ORDER,
                                    AT_N_COUNT - AT_VOXEL_ORDER) ||
                             memcmp(h + AT_VERSION, first + AT_VERSION, 8))) {
            rc = dm_set_error("%s: its header differs from part 1's: not parts of one run",
                              parts[k]);
        } else {
            const unsigned char *mine = k ? h : first;
            count += get_i32(mine + AT_N_COUNT, get_i32(mine + AT_HDR_SIZE, 0) != TRK_HEADER);
            size_t got;
            while (rc == 0 && (got = fread(buf, 1, (size_t)1 << 22, f)) > 0)
                if (fwrite(buf, 1, got, o) != got) rc = -1;
            if (ferror(f)) rc = dm_set_error("%s: cannot read", parts[k]);
        }
        if (f) fclose(f);
    }
    if (rc == 0 && get_i32(first + AT_HDR_SIZE, 0) != TRK_HEADER)
        rc = dm_set_error("%s: a big-endian header: not written by dimoc", parts[0]);
    if (rc == 0) {
        put_u32(first + AT_N_COUNT, (uint32_t)count);
        put_reserved(first, info);
        put_counts(first, count, total_count);
        if (fseek(o, 0, SEEK_SET) != 0 || fwrite(first, 1, TRK_HEADER, o) != TRK_HEADER) rc = -1;
    }
    free(buf);
    int bad = fclose(o) != 0;
    if (rc == 0 && (bad || rename(tmp, out) != 0)) rc = dm_set_error("cannot write %s", out);
    if (rc != 0) unlink(tmp);
    free(tmp);
    return rc;
}
