/* Runtime I/O and utilities: NIfTI volumes, text matrices, bvals/bvecs, gradient schemes,
 * eigen-decomposition, sample summaries, JSON, file helpers, progress, errors. */
#define _GNU_SOURCE
#include "util/linalg.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/progress.h"
#include "simulate/scheme.h"
#include "fit/stats_util.h"
#include "io/gz_blocks.h"
#include "io/textio.h"
#include "io/volume.h"
#include "tractogram/tck.h"

#include <nifti2_io.h>

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <omp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static char dir[512];
#include "check.h"

static char *path_in(const char *name)
{
    static char buf[8][640];
    static int next;
    char *p = buf[next++ % 8];
    snprintf(p, sizeof buf[0], "%s/%s", dir, name);
    return p;
}

static void write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

static int error_has(const char *fragment)
{
    return strstr(dm_last_error(), fragment) != NULL;
}

/* ---- volumes ---- */

/* An oblique geometry: rotation about z by 30 degrees, voxel 1.5 x 2 x 2.5, offset. */
static void make_oblique(dm_volume *v)
{
    nifti_image *g = v->geometry;
    double c = cos(M_PI / 6), s = sin(M_PI / 6);
    double vox[3] = {1.5, 2.0, 2.5};
    nifti_dmat44 m = {{{c * vox[0], -s * vox[1], 0, -10},
                       {s * vox[0], c * vox[1], 0, 20},
                       {0, 0, vox[2], -30},
                       {0, 0, 0, 1}}};
    g->sto_xyz = m;
    g->sto_ijk = nifti_dmat44_inverse(m);
    g->sform_code = NIFTI_XFORM_MNI_152;
    g->qform_code = NIFTI_XFORM_SCANNER_ANAT;
    g->qto_xyz = m;
    nifti_dmat44_to_quatern(m, &g->quatern_b, &g->quatern_c, &g->quatern_d, &g->qoffset_x,
                            &g->qoffset_y, &g->qoffset_z, NULL, NULL, NULL, &g->qfac);
    g->qto_ijk = g->sto_ijk;
    for (int k = 0; k < 3; k++) g->pixdim[k + 1] = vox[k];
    g->dx = vox[0];
    g->dy = vox[1];
    g->dz = vox[2];
    g->xyz_units = NIFTI_UNITS_MM;
    g->time_units = NIFTI_UNITS_SEC;
}

static double max_matrix_diff(nifti_dmat44 a, nifti_dmat44 b)
{
    double d = 0;
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) d = fmax(d, fabs(a.m[i][j] - b.m[i][j]));
    return d;
}

static void test_volume_round_trip(const char *ending)
{
    int nx = 7, ny = 5, nz = 4, nt = 3;
    size_t n = (size_t)nx * ny * nz * nt;
    double *data = malloc(n * sizeof *data);
    for (size_t i = 0; i < n; i++) data[i] = (double)i * 0.25 - 10; /* exact in float32 */
    data[5] = NAN;
    data[6] = INFINITY;
    data[7] = -INFINITY;
    char name[64], name2[64], test[96];
    snprintf(name, sizeof name, "rt_new%s", ending);
    snprintf(name2, sizeof name2, "rt_like%s", ending);

    int rc = dm_volume_write_new(path_in(name), nx, ny, nz, nt, 2.0, data);
    dm_volume ref;
    int rc2 = rc == 0 ? dm_volume_read(path_in(name), &ref) : -1;
    snprintf(test, sizeof test, "volume_write_new_read%s", ending);
    check(rc == 0 && rc2 == 0 && ref.nx == nx && ref.ny == ny && ref.nz == nz && ref.nt == nt, test,
          "%s", dm_last_error());
    if (rc || rc2) return;
    int same = 1;
    for (size_t i = 0; i < n; i++)
        if ((i < 5 || i > 7) && ref.data[i] != data[i]) same = 0;
    snprintf(test, sizeof test, "volume_values_exact%s", ending);
    check(same, test, "values differ after a round trip");
    /* NaN and Inf come back as they are (niftilib's own data reader would make them 0). */
    snprintf(test, sizeof test, "volume_float32_non_finite_kept%s", ending);
    check(isnan(ref.data[5]) && ref.data[6] == INFINITY && ref.data[7] == -INFINITY, test,
          "read back %g %g %g", ref.data[5], ref.data[6], ref.data[7]);

    make_oblique(&ref);
    rc = dm_volume_write(path_in(name2), &ref, nt, data, 0);
    dm_volume back;
    rc2 = rc == 0 ? dm_volume_read(path_in(name2), &back) : -1;
    snprintf(test, sizeof test, "volume_write_like%s", ending);
    check(rc == 0 && rc2 == 0, test, "%s", dm_last_error());
    if (rc || rc2) {
        dm_volume_free(&ref);
        return;
    }
    nifti_image *a = ref.geometry, *b = back.geometry;
    snprintf(test, sizeof test, "volume_geometry_kept%s", ending);
    double ds = max_matrix_diff(a->sto_xyz, b->sto_xyz),
           dq = max_matrix_diff(a->sto_xyz, b->qto_xyz);
    check(b->sform_code == NIFTI_XFORM_MNI_152 && b->qform_code == NIFTI_XFORM_SCANNER_ANAT &&
              ds < 1e-5 && dq < 1e-4 && fabs(b->pixdim[1] - 1.5) < 1e-6 &&
              fabs(b->pixdim[3] - 2.5) < 1e-6 && b->xyz_units == NIFTI_UNITS_MM &&
              b->datatype == DT_FLOAT32 && b->scl_slope == 0 && b->intent_code == 0,
          test, "sform %d qform %d sdiff %g qdiff %g pixdim %g %g units %d type %d", b->sform_code,
          b->qform_code, ds, dq, b->pixdim[1], b->pixdim[3], b->xyz_units, b->datatype);

    /* A 3D uint8 image with the same geometry: rounded and clamped. */
    double mask_vals[140];
    for (int i = 0; i < 140; i++)
        mask_vals[i] = i % 4 == 0 ? 1 : i % 4 == 1 ? 0.6 : i % 4 == 2 ? 300 : -2;
    snprintf(name2, sizeof name2, "mask%s", ending);
    rc = dm_volume_write(path_in(name2), &ref, 1, mask_vals, 1);
    dm_volume m;
    rc2 = rc == 0 ? dm_volume_read(path_in(name2), &m) : -1;
    snprintf(test, sizeof test, "volume_uint8%s", ending);
    check(rc == 0 && rc2 == 0 && m.nt == 1 && ((nifti_image *)m.geometry)->datatype == DT_UINT8 &&
              m.data[0] == 1 && m.data[1] == 1 && m.data[2] == 255 && m.data[3] == 0,
          test, "rc %d/%d %s", rc, rc2, dm_last_error());
    if (rc2 == 0) dm_volume_free(&m);

    /* No temporary files left behind. */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "ls -a %s | grep -c '\\.tmp\\.' > %s/tmpcount", dir, dir);
    int sys = system(cmd);
    (void)sys;
    char *count = dm_read_file(path_in("tmpcount"), NULL);
    snprintf(test, sizeof test, "volume_no_temporaries%s", ending);
    check(count && atoi(count) == 0, test, "%s temporary files left", count ? count : "?");
    free(count);
    dm_volume_free(&back);
    dm_volume_free(&ref);
    free(data);
}

/* Writes an image through niftilib itself (NIfTI-2, or NIfTI-1 with scaling).  With
 * non_finite (float64 only), values 1, 2 and 3 are NaN, +Inf and -Inf. */
static int write_with_niftilib(const char *path, int nifti_type, int datatype, double slope,
                               double inter, int non_finite)
{
    int64_t dims[8] = {3, 4, 3, 2, 1, 1, 1, 1};
    nifti_image *nim = nifti_make_new_nim(dims, datatype, 1);
    if (!nim) return -1;
    for (int i = 0; i < 24; i++) {
        if (datatype == DT_INT16)
            ((short *)nim->data)[i] = (short)(i * 100 - 1000);
        else
            ((double *)nim->data)[i] = i * 1.5;
    }
    if (non_finite && datatype == DT_FLOAT64) {
        ((double *)nim->data)[1] = NAN;
        ((double *)nim->data)[2] = INFINITY;
        ((double *)nim->data)[3] = -INFINITY;
    }
    nim->scl_slope = slope;
    nim->scl_inter = inter;
    if (nifti_set_filenames(nim, path, 0, 1) != 0) return -1;
    nim->nifti_type = nifti_type; /* after the names: nifti_set_filenames resets it */
    nifti_image_write(nim);
    nifti_image_free(nim);
    return 0;
}

/* A NIfTI-2 file from niftilib's own header maker.  (nifti_image_write cannot make one here:
 * with nifti_type NIFTI2_1 it writes the data over the header.) */
static int write_nifti2(const char *path)
{
    int64_t dims[8] = {3, 4, 3, 2, 1, 1, 1, 1};
    nifti_2_header *h = nifti_make_new_n2_header(dims, DT_FLOAT64);
    if (!h) return -1;
    h->vox_offset = sizeof *h + 4;
    h->pixdim[1] = 1.25;
    double data[24];
    for (int i = 0; i < 24; i++) data[i] = i * 1.5;
    FILE *f = fopen(path, "wb");
    char extender[4] = {0};
    int ok = f && fwrite(h, sizeof *h, 1, f) == 1 && fwrite(extender, 4, 1, f) == 1 &&
             fwrite(data, sizeof data, 1, f) == 1;
    if (f) fclose(f);
    free(h);
    return ok ? 0 : -1;
}

static void test_volume_other_inputs(void)
{
    const char *p2 = path_in("nifti2.nii");
    write_nifti2(p2);
    FILE *f = fopen(p2, "rb");
    int sizeof_hdr = 0;
    if (f) {
        if (fread(&sizeof_hdr, 4, 1, f) != 1) sizeof_hdr = -1;
        fclose(f);
    }
    dm_volume v;
    int rc = dm_volume_read(p2, &v);
    int ok = rc == 0 && sizeof_hdr == 540 && v.nx == 4 && v.ny == 3 && v.nz == 2 && v.nt == 1 &&
             ((nifti_image *)v.geometry)->pixdim[1] == 1.25;
    for (int i = 0; ok && i < 24; i++) ok = v.data[i] == i * 1.5;
    check(ok, "volume_read_nifti2", "rc %d sizeof_hdr %d: %s", rc, sizeof_hdr, dm_last_error());
    if (rc == 0) dm_volume_free(&v);

    /* A dimension over 32767 does not fit NIfTI-1: the writer switches to NIfTI-2. */
    int wide = 40000;
    double *line = malloc(wide * sizeof *line);
    for (int i = 0; i < wide; i++) line[i] = i;
    const char *pw = path_in("wide.nii.gz");
    rc = dm_volume_write_new(pw, wide, 1, 1, 1, 1.0, line);
    int rc2 = rc == 0 ? dm_volume_read(pw, &v) : -1;
    ok = rc == 0 && rc2 == 0 && v.nx == wide && v.data[wide - 1] == wide - 1;
    int version = 0;
    if (rc == 0) {
        void *hdr = nifti_read_header(pw, &version, 1);
        free(hdr);
    }
    check(ok && version == 2, "volume_write_nifti2_when_wide", "rc %d/%d version %d: %s", rc, rc2,
          version, dm_last_error());
    if (rc2 == 0) dm_volume_free(&v);
    free(line);

    const char *ps = path_in("scaled_int16.nii.gz");
    write_with_niftilib(ps, NIFTI_FTYPE_NIFTI1_1, DT_INT16, 0.5, 3, 0);
    rc = dm_volume_read(ps, &v);
    ok = rc == 0;
    for (int i = 0; ok && i < 24; i++) ok = v.data[i] == (i * 100 - 1000) * 0.5 + 3;
    check(ok, "volume_read_int16_scaled", "rc %d: %s", rc, dm_last_error());
    if (rc == 0) dm_volume_free(&v);

    /* A .hdr/.img pair, named by its header. */
    const char *ph = path_in("pair.hdr");
    write_with_niftilib(ph, NIFTI_FTYPE_NIFTI1_2, DT_FLOAT64, 0, 0, 0);
    rc = dm_volume_read(ph, &v);
    check(rc == 0 && v.nx == 4 && v.data[23] == 23 * 1.5, "volume_read_hdr_img", "%s",
          dm_last_error());
    if (rc == 0) dm_volume_free(&v);
}

/* A float64 file written by niftilib with NaN, +Inf and -Inf reads back with them in place. */
static void test_volume_float64_non_finite(const char *ending)
{
    char name[64], test[96];
    snprintf(name, sizeof name, "non_finite64%s", ending);
    int nifti_type = strcmp(ending, ".hdr") == 0 ? NIFTI_FTYPE_NIFTI1_2 : NIFTI_FTYPE_NIFTI1_1;
    int wrc = write_with_niftilib(path_in(name), nifti_type, DT_FLOAT64, 0, 0, 1);
    dm_volume v;
    int rc = wrc == 0 ? dm_volume_read(path_in(name), &v) : -1;
    int ok = rc == 0 && isnan(v.data[1]) && v.data[2] == INFINITY && v.data[3] == -INFINITY;
    for (int i = 4; ok && i < 24; i++) ok = v.data[i] == i * 1.5;
    snprintf(test, sizeof test, "volume_float64_non_finite_kept%s", ending);
    check(ok, test, "rc %d/%d: %s%s", wrc, rc, dm_last_error(), rc == 0 ? " (values differ)" : "");
    if (rc == 0) dm_volume_free(&v);
}

static void test_volume_errors(void)
{
    dm_volume v;
    double data[60];
    for (int i = 0; i < 60; i++) data[i] = i;
    dm_volume_write_new(path_in("whole.nii"), 5, 4, 3, 1, 1.0, data);
    dm_volume_write_new(path_in("whole.nii.gz"), 5, 4, 3, 1, 1.0, data);

    check(dm_volume_read(path_in("missing.nii.gz"), &v) != 0 && error_has("missing.nii.gz") &&
              error_has("No such file"),
          "volume_missing_file", "%s", dm_last_error());

    /* Truncated plain file: header whole, data cut. */
    size_t len;
    char *bytes = dm_read_file(path_in("whole.nii"), &len);
    FILE *f = fopen(path_in("cut.nii"), "wb");
    fwrite(bytes, 1, len - 40, f);
    fclose(f);
    check(dm_volume_read(path_in("cut.nii"), &v) != 0 && error_has("cut.nii") &&
              error_has("truncated"),
          "volume_truncated_nii", "%s", dm_last_error());
    f = fopen(path_in("cut_header.nii"), "wb");
    fwrite(bytes, 1, 100, f);
    fclose(f);
    check(dm_volume_read(path_in("cut_header.nii"), &v) != 0 && error_has("cut_header.nii") &&
              error_has("truncated"),
          "volume_truncated_header", "%s", dm_last_error());
    free(bytes);

    /* Truncated compressed file: a 2 MB volume of noise cut in half. */
    size_t big = 64 * 64 * 64;
    double *noise = malloc(big * sizeof *noise);
    srand(7);
    for (size_t i = 0; i < big; i++) noise[i] = rand() / (double)RAND_MAX;
    dm_volume_write_new(path_in("big.nii.gz"), 64, 64, 64, 1, 1.0, noise);
    free(noise);
    bytes = dm_read_file(path_in("big.nii.gz"), &len);
    f = fopen(path_in("cut.nii.gz"), "wb");
    fwrite(bytes, 1, len / 2, f);
    fclose(f);
    free(bytes);
    check(dm_volume_read(path_in("cut.nii.gz"), &v) != 0 && error_has("cut.nii.gz") &&
              error_has("truncated"),
          "volume_truncated_nii_gz", "%s", dm_last_error());

    write_text(path_in("text.nii"), "this is not an image\n");
    check(dm_volume_read(path_in("text.nii"), &v) != 0 && error_has("text.nii"), "volume_not_nifti",
          "%s", dm_last_error());

    /* Five dimensions, written by niftilib. */
    int64_t dims[8] = {5, 2, 2, 2, 2, 2, 1, 1};
    nifti_image *nim = nifti_make_new_nim(dims, DT_FLOAT32, 1);
    nifti_set_filenames(nim, path_in("five.nii"), 0, 1);
    nifti_image_write(nim);
    nifti_image_free(nim);
    check(dm_volume_read(path_in("five.nii"), &v) != 0 && error_has("five.nii") &&
              error_has("at most 4"),
          "volume_5d_rejected", "%s", dm_last_error());

    dm_volume a = {.nx = 5, .ny = 4, .nz = 3}, b = {.nx = 5, .ny = 4, .nz = 2};
    check(dm_volume_check_same_grid(&a, "mask.nii", &b, "dwi.nii") != 0 && error_has("mask.nii") &&
              error_has("5x4x3") && error_has("5x4x2") &&
              dm_volume_check_same_grid(&a, "x", &a, "y") == 0,
          "volume_grid_check", "%s", dm_last_error());

    check(dm_volume_write_new(path_in("bad.img"), 2, 2, 2, 1, 1.0, data) != 0 &&
              error_has(".nii.gz"),
          "volume_write_bad_name", "%s", dm_last_error());
    check(dm_volume_write_new("/nonexistent-dir/x.nii", 2, 2, 2, 1, 1.0, data) != 0 &&
              error_has("/nonexistent-dir/x.nii"),
          "volume_write_unwritable", "%s", dm_last_error());
}

/* ---- text ---- */

static void test_matrix(void)
{
    int r, c;
    double *m = NULL;
    write_text(path_in("m.txt"), "# comment\n1 2 3\n\n4,5 6e0  # trailing\r\n");
    int rc = dm_read_matrix(path_in("m.txt"), &r, &c, &m);
    check(rc == 0 && r == 2 && c == 3 && m[0] == 1 && m[5] == 6, "matrix_read", "%s",
          dm_last_error());
    free(m);

    write_text(path_in("bad_bvals"), "0 1000 1000\n1000 abc 1000\n");
    rc = dm_read_matrix(path_in("bad_bvals"), &r, &c, &m);
    check(rc != 0 && error_has("bad_bvals:2:") && error_has("'abc'"), "matrix_non_numeric", "%s",
          dm_last_error());
    write_text(path_in("ragged"), "1 2 3\n4 5\n");
    rc = dm_read_matrix(path_in("ragged"), &r, &c, &m);
    check(rc != 0 && error_has("ragged:2:"), "matrix_ragged", "%s", dm_last_error());
    write_text(path_in("empty"), "# nothing\n\n");
    rc = dm_read_matrix(path_in("empty"), &r, &c, &m);
    check(rc != 0 && error_has("empty"), "matrix_empty", "%s", dm_last_error());
    write_text(path_in("nanfile"), "1 nan 2\n");
    rc = dm_read_matrix(path_in("nanfile"), &r, &c, &m);
    check(rc != 0 && error_has("nanfile:1:"), "matrix_rejects_nan", "%s", dm_last_error());
}

static void test_bvals_bvecs(void)
{
    double *b, *g;
    int n;
    /* Rows (FSL) and columns give the same directions. */
    write_text(path_in("bvals_row"), "0 1000 2000 1000\n");
    write_text(path_in("bvals_col"), "0\n1000\n2000\n1000\n");
    write_text(path_in("bvecs_rows"), "0 1 0 0.6\n0 0 1 0.8\n0 0 0 0\n");
    write_text(path_in("bvecs_cols"), "0 0 0\n1 0 0\n0 1 0\n0.6 0.8 0\n");
    int rc = dm_read_bvals_bvecs(path_in("bvals_row"), path_in("bvecs_rows"), 4, &b, &g, &n);
    int ok =
        rc == 0 && n == 4 && b[2] == 2000 && g[3] == 1 && g[7] == 1 && g[9] == 0.6 && g[10] == 0.8;
    check(ok, "bvecs_rows", "%s", rc ? dm_last_error() : "wrong values");
    if (rc == 0) {
        free(b);
        free(g);
    }
    rc = dm_read_bvals_bvecs(path_in("bvals_col"), path_in("bvecs_cols"), 0, &b, &g, &n);
    ok = rc == 0 && n == 4 && b[3] == 1000 && g[3] == 1 && g[7] == 1 && g[9] == 0.6;
    check(ok, "bvecs_columns", "%s", rc ? dm_last_error() : "wrong values");
    if (rc == 0) {
        free(b);
        free(g);
    }

    /* 3 volumes and a 3x3 bvecs (not symmetric): read as 3 rows, FSL's layout. */
    write_text(path_in("bvals3"), "1000 1000 1000\n");
    write_text(path_in("bvecs3"), "1 0 0\n0 0.6 0.8\n0 0.8 -0.6\n");
    rc = dm_read_bvals_bvecs(path_in("bvals3"), path_in("bvecs3"), 3, &b, &g, &n);
    /* As rows: volume 0 = (1,0,0), volume 1 = (0,0.6,0.8), volume 2 = (0,0.8,-0.6). */
    ok = rc == 0 && g[0] == 1 && g[3] == 0 && g[4] == 0.6 && g[5] == 0.8 && g[8] == -0.6;
    check(ok, "bvecs_3x3_prefers_rows", "%s", rc ? dm_last_error() : "read as columns");
    if (rc == 0) {
        free(b);
        free(g);
    }

    /* Count mismatches. */
    rc = dm_read_bvals_bvecs(path_in("bvals_row"), path_in("bvecs_rows"), 5, &b, &g, &n);
    check(rc != 0 && error_has("bvals_row") && error_has("4 b-values") && error_has("5 volumes"),
          "bvals_count_mismatch", "%s", dm_last_error());
    write_text(path_in("bvecs_short"), "0 1 0\n0 0 1\n0 0 0\n");
    rc = dm_read_bvals_bvecs(path_in("bvals_row"), path_in("bvecs_short"), 4, &b, &g, &n);
    check(rc != 0 && error_has("bvecs_short: 3 directions but the data has 4 volumes"),
          "bvecs_count_mismatch", "%s", dm_last_error());
    write_text(path_in("bvecs_bad_shape"), "0 1\n0 0\n");
    rc = dm_read_bvals_bvecs(path_in("bvals_row"), path_in("bvecs_bad_shape"), 4, &b, &g, &n);
    check(rc != 0 && error_has("bvecs_bad_shape") && error_has("3 rows or 3 columns"),
          "bvecs_bad_shape", "%s", dm_last_error());

    /* Far-from-unit directions of b>0 are normalised; b=0 ones are left alone. */
    write_text(path_in("bvecs_long"), "0 2 0 0.999\n0 0 0.5 0\n0 0 0 0\n");
    fflush(stderr);
    rc = dm_read_bvals_bvecs(path_in("bvals_row"), path_in("bvecs_long"), 4, &b, &g, &n);
    ok = rc == 0 && g[0] == 0 && fabs(g[3] - 1) < 1e-15 && fabs(g[7] - 1) < 1e-15 && g[9] == 0.999;
    check(ok, "bvecs_normalised", "%s", rc ? dm_last_error() : "not normalised as expected");
    if (rc == 0) {
        free(b);
        free(g);
    }

    write_text(path_in("bvals_neg"), "0 -5 1000 1000\n");
    rc = dm_read_bvals_bvecs(path_in("bvals_neg"), path_in("bvecs_rows"), 4, &b, &g, &n);
    check(rc != 0 && error_has("negative"), "bvals_negative", "%s", dm_last_error());

    /* Write and read back. */
    double wb[3] = {0, 1000, 3000}, wg[9] = {0, 0, 0, 0.6, 0, -0.8, 0.1, 0.2, sqrt(0.95)};
    rc = dm_write_bvals_bvecs(path_in("out.bval"), path_in("out.bvec"), 3, wb, wg);
    int rc2 =
        rc == 0 ? dm_read_bvals_bvecs(path_in("out.bval"), path_in("out.bvec"), 3, &b, &g, &n) : -1;
    ok = rc == 0 && rc2 == 0;
    for (int i = 0; ok && i < 3; i++) ok = b[i] == wb[i];
    for (int i = 0; ok && i < 9; i++) ok = fabs(g[i] - wg[i]) < 1e-14;
    check(ok, "bvals_bvecs_write_read", "%s", dm_last_error());
    if (rc2 == 0) {
        free(b);
        free(g);
    }
    char *text = dm_read_file(path_in("out.bvec"), NULL);
    check(text && strncmp(text, "0 0.6 0.1\n0 0 0.2\n", 18) == 0, "bvecs_written_as_rows",
          "got '%s'", text ? text : "(none)");
    free(text);
}

/* ---- schemes ---- */

static void test_scheme(void)
{
    int n;
    double *b, *g;
    int rc = dm_scheme_make("5x0, 50x1000,30x2000", &n, &b, &g);
    check(rc == 0 && n == 85 && b[0] == 0 && b[4] == 0 && b[5] == 1000 && b[54] == 1000 &&
              b[55] == 2000 && b[84] == 2000,
          "scheme_counts", "%s", dm_last_error());
    if (rc != 0) return;
    int unit = 1, zero_b0 = 1;
    for (int i = 0; i < n; i++) {
        double len =
            sqrt(g[3 * i] * g[3 * i] + g[3 * i + 1] * g[3 * i + 1] + g[3 * i + 2] * g[3 * i + 2]);
        if (b[i] > 0 && fabs(len - 1) > 1e-12) unit = 0;
        if (b[i] == 0 && len != 0) zero_b0 = 0;
    }
    check(unit, "scheme_unit_directions", "a b>0 direction is not unit length");
    check(zero_b0, "scheme_b0_zero_direction", "a b=0 direction is not (0,0,0)");
    /* Smallest angle between axes of the 50-direction shell (v and -v are the same axis). */
    double min_angle = 180;
    for (int i = 5; i < 55; i++)
        for (int j = i + 1; j < 55; j++) {
            double d = fabs(g[3 * i] * g[3 * j] + g[3 * i + 1] * g[3 * j + 1] +
                            g[3 * i + 2] * g[3 * j + 2]);
            double angle = acos(fmin(1, d)) * 180 / M_PI;
            if (angle < min_angle) min_angle = angle;
        }
    check(min_angle > 15, "scheme_spread_50", "minimum angle %.2f degrees", min_angle);
    printf("# 50-direction shell: minimum angle between axes %.2f degrees\n", min_angle);
    /* Deterministic. */
    int n2;
    double *b2, *g2;
    dm_scheme_make("5x0,50x1000,30x2000", &n2, &b2, &g2);
    check(n2 == n && memcmp(g, g2, (size_t)n * 3 * sizeof *g) == 0, "scheme_deterministic",
          "two calls differ");
    free(b2);
    free(g2);
    free(b);
    free(g);

    rc = dm_scheme_make("5x0,fifty", &n, &b, &g);
    check(rc != 0 && error_has("fifty"), "scheme_bad_spec", "%s", dm_last_error());
    rc = dm_scheme_make("10x-5", &n, &b, &g);
    check(rc != 0 && error_has("b-value"), "scheme_negative_b", "%s", dm_last_error());
}

/* ---- eig3 ---- */

static double uniform(double lo, double hi)
{
    return lo + (hi - lo) * (rand() / (double)RAND_MAX);
}

static void test_eig3(void)
{
    srand(12345);
    double worst_residual = 0, worst_ortho = 0;
    int sorted = 1;
    for (int trial = 0; trial < 2000; trial++) {
        double a[3][3];
        double scale = pow(10, uniform(-4, 4));
        for (int i = 0; i < 3; i++)
            for (int j = i; j < 3; j++) a[i][j] = a[j][i] = scale * uniform(-1, 1);
        if (trial % 10 == 0) /* repeated eigenvalues: a multiple of the identity plus a dyad */
            for (int i = 0; i < 3; i++)
                for (int j = 0; j < 3; j++)
                    a[i][j] = (i == j) * scale + (trial % 20 == 0) * scale * (i + 1) * (j + 1);
        double lambda[3], v[3][3];
        dm_eig3_sym(a, lambda, v);
        double norm = fabs(lambda[0]) + fabs(lambda[1]) + fabs(lambda[2]);
        for (int k = 0; k < 3; k++) {
            for (int i = 0; i < 3; i++) {
                double av = a[i][0] * v[k][0] + a[i][1] * v[k][1] + a[i][2] * v[k][2];
                worst_residual = fmax(worst_residual, fabs(av - lambda[k] * v[k][i]) / norm);
            }
            for (int l = 0; l < 3; l++) {
                double d = v[k][0] * v[l][0] + v[k][1] * v[l][1] + v[k][2] * v[l][2];
                worst_ortho = fmax(worst_ortho, fabs(d - (k == l)));
            }
        }
        if (lambda[0] < lambda[1] || lambda[1] < lambda[2]) sorted = 0;
    }
    check(worst_residual < 1e-12, "eig3_residual", "max |Av - lv|/|l| = %g", worst_residual);
    check(worst_ortho < 1e-12, "eig3_orthonormal", "max |v.v - I| = %g", worst_ortho);
    check(sorted, "eig3_descending", "eigenvalues out of order");
    double diag[3][3] = {{1, 0, 0}, {0, 3, 0}, {0, 0, 2}}, lambda[3], v[3][3];
    dm_eig3_sym(diag, lambda, v);
    check(lambda[0] == 3 && lambda[1] == 2 && lambda[2] == 1 && v[0][1] == 1 && v[1][2] == 1,
          "eig3_diagonal", "lambda %g %g %g", lambda[0], lambda[1], lambda[2]);
}

/* ---- sample summaries ---- */

static void test_stats(void)
{
    /* Periodic on [0, 2 pi): samples either side of 0 average to ~0, not pi. */
    double x[6] = {0.1, 6.2, 0.05, 6.25, 0.0, 6.28};
    double mean, sd;
    dm_circular_mean_std(x, 6, 1, 0, 2 * M_PI, &mean, &sd);
    double dist = fmin(mean, 2 * M_PI - mean);
    check(dist < 0.05 && sd > 0.02 && sd < 0.2 && mean >= 0 && mean < 2 * M_PI,
          "circular_mean_wraps", "mean %g std %g", mean, sd);
    /* Tightly clustered samples: the circular std equals the ordinary one closely. */
    double y[5] = {1.00, 1.01, 0.99, 1.02, 0.98}, m2, s2;
    dm_circular_mean_std(y, 5, 1, 0, 2 * M_PI, &mean, &sd);
    dm_mean_std(y, 5, 1, &m2, &s2);
    check(fabs(mean - 1) < 1e-6 && fabs(sd - s2) / s2 < 0.3, "circular_std_small_spread",
          "mean %g circular std %g std %g", mean, sd, s2);
    /* 150 samples (blocks of 64 and a part block through the vector sin and cos): the
     * resultant and its std as summed one value at a time. */
    double z[150], c = 0, s = 0;
    for (int i = 0; i < 150; i++) {
        z[i] = fmod(5.9 + 0.004 * i * i, M_PI);
        c += cos(2 * z[i]), s += sin(2 * z[i]);
    }
    double r = sqrt(c * c + s * s) / 150, want_sd = sqrt(-2 * log(r)) / 2;
    double want_mean = fmod(atan2(s, c) / 2 + M_PI, M_PI);
    dm_circular_mean_std(z, 150, 1, 0, M_PI, &mean, &sd);
    check(fabs(sd - want_sd) < 1e-13 && fabs(mean - want_mean) < 1e-13, "circular_std_blocks",
          "mean %.17g (%.17g) std %.17g (%.17g)", mean, want_mean, sd, want_sd);
    /* Axes: v and -v are the same axis. */
    double axes[4 * 3] = {0, 0, 1, 0, 0, -1, 0.05, 0, 0.99, 0.05, 0, -0.99};
    double axis[3], disp;
    long used = dm_dyadic_mean(axes, 4, 3, axis, &disp);
    check(used == 4 && fabs(fabs(axis[2]) - 1) < 1e-9 && disp >= 0 && disp < 0.01,
          "dyadic_mean_antipodal", "axis %g %g %g dispersion %g", axis[0], axis[1], axis[2], disp);
    /* The closed-form axis against Jacobi's (dm_eig3_sym) on the mean dyadic tensors of random
     * bundles, tight to spread: the same axis (to rounding, where the two largest eigenvalues
     * are apart), sign and dispersion. */
    double worst_axis = 0, worst_disp = 0;
    int sign_differs = 0;
    unsigned seed = 11;
    for (int trial = 0; trial < 20000; trial++) {
        double v[50 * 3], c[3], T[3][3] = {{0}};
        const int n = 1 + trial % 50;
        const double spread = pow(10, -4 + 4 * (double)(trial % 97) / 96);
        for (int k = 0; k < 3; k++) c[k] = rand_r(&seed) / (double)RAND_MAX - 0.5;
        for (int i = 0; i < n; i++) {
            double n2 = 0;
            for (int k = 0; k < 3; k++) {
                const double u = rand_r(&seed) / (double)RAND_MAX - 0.5;
                v[i * 3 + k] = (i % 3 ? 1 : -1) * (c[k] + spread * u);
                n2 += v[i * 3 + k] * v[i * 3 + k];
            }
            for (int a = 0; a < 3; a++)
                for (int b = 0; b < 3; b++) T[a][b] += v[i * 3 + a] * v[i * 3 + b] / n2 / n;
        }
        double lambda[3], vec[3][3];
        dm_eig3_sym((const double(*)[3])T, lambda, vec);
        dm_dyadic_mean(v, n, 3, axis, &disp);
        const double dot = axis[0] * vec[0][0] + axis[1] * vec[0][1] + axis[2] * vec[0][2];
        worst_disp = fmax(worst_disp, fabs(disp - (1 - lambda[0])));
        if (lambda[0] - lambda[1] > 1e-3) {
            worst_axis = fmax(worst_axis, 1 - fabs(dot));
            sign_differs += dot < 0;
        }
    }
    check(worst_axis < 1e-12 && worst_disp < 1e-12 && sign_differs == 0, "dyadic_mean_vs_jacobi",
          "1 - |cos| %.3g, dispersion %.3g, signs differing %d", worst_axis, worst_disp,
          sign_differs);
}

/* A masked map read from floats is the one read from the same values as doubles. */
static void test_masked_floats(void)
{
    const size_t vox[4] = {1, 2, 5, 8};
    const double d[2 * 4] = {0.1, -2.5, 3.25, 1e-3, 7, 8, 9, 10};
    float f[2 * 4];
    for (int i = 0; i < 8; i++) f[i] = (float)d[i];
    const unsigned char keep[10] = {1, 1, 0, 1, 1, 1, 1, 1, 1, 1};
    dm_masked_values md = {.nvox = 10, .vox = vox, .n = 4, .vals = d, .stride = 1,
                           .volume_stride = 4, .keep = keep};
    dm_masked_values mf = md;
    mf.vals = NULL, mf.fvals = f;
    double a[20], b[20];
    dm_masked_values_get(&md, 0, 20, a);
    dm_masked_values_get(&mf, 0, 20, b);
    int same = 1;
    for (int i = 0; i < 20; i++) same &= (float)a[i] == (float)b[i];
    check(same && b[1] == (double)(float)0.1 && b[2] == 0 && b[11] == 7 && b[18] == 10,
          "masked_values_from_floats", "voxel 1 %g, 2 %g, 11 %g, 18 %g", b[1], b[2], b[11], b[18]);
}

/* ---- JSON, files, errors, progress ---- */

static void test_json(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    dm_json j;
    dm_json_begin(&j, f);
    dm_json_str(&j, "name", "a \"quoted\"\\ line\n");
    dm_json_num(&j, "x", 0.5);
    dm_json_num(&j, "nan", NAN);
    dm_json_key_array(&j, "list");
    dm_json_int(&j, NULL, 3);
    dm_json_bool(&j, NULL, 1);
    dm_json_key_object(&j, NULL);
    dm_json_close(&j);
    dm_json_close(&j);
    dm_json_key_object(&j, "empty");
    dm_json_close(&j);
    dm_json_end(&j);
    fclose(f);
    const char *want = "{\n  \"name\": \"a \\\"quoted\\\"\\\\ line\\n\",\n  \"x\": 0.5,\n"
                       "  \"nan\": null,\n  \"list\": [\n    3,\n    true,\n    {}\n  ],\n"
                       "  \"empty\": {}\n}\n";
    check(buf && strcmp(buf, want) == 0, "json_output", "got:\n%s", buf ? buf : "");
    free(buf);
}

static void test_fsutil(void)
{
    const char *deep = path_in("a/b/c");
    check(dm_mkdir_p(deep) == 0 && dm_mkdir_p(deep) == 0, "mkdir_p", "%s", dm_last_error());
    write_text(path_in("plainfile"), "x");
    char sub[700];
    snprintf(sub, sizeof sub, "%s/plainfile/sub", dir);
    check(dm_mkdir_p(sub) != 0 && error_has("plainfile"), "mkdir_p_through_file", "%s",
          dm_last_error());
    const char *p = path_in("a/b/c/atomic.txt");
    int rc = dm_write_file_atomic(p, "hello\n", 6);
    size_t len;
    char *text = rc == 0 ? dm_read_file(p, &len) : NULL;
    check(text && len == 6 && strcmp(text, "hello\n") == 0, "write_atomic_read", "%s",
          dm_last_error());
    free(text);
    char *t = dm_temp_sibling_ext("/x/y/out.nii.gz", ".nii.gz");
    char *t2 = dm_temp_sibling("out.txt");
    check(strncmp(t, "/x/y/.out.tmp.", 14) == 0 && strstr(t, ".nii.gz") &&
              strcmp(t + strlen(t) - 7, ".nii.gz") == 0 && strncmp(t2, ".out.txt.tmp.", 13) == 0,
          "temp_sibling_names", "%s %s", t, t2);
    free(t);
    free(t2);
    char *j1 = dm_path_join("dir/", "f"), *j2 = dm_path_join("dir", "f");
    check(strcmp(j1, "dir/f") == 0 && strcmp(j2, "dir/f") == 0, "path_join", "%s %s", j1, j2);
    free(j1);
    free(j2);
    char *exe = dm_exe_dir();
    check(exe && exe[0] == '/', "exe_dir", "%s", exe ? exe : dm_last_error());
    free(exe);
}

static void test_error(void)
{
    dm_set_error("inner %d", 42);
    dm_set_error("outer: %s", dm_last_error()); /* overlapping argument */
    check(strcmp(dm_last_error(), "outer: inner 42") == 0, "error_nested", "%s", dm_last_error());
}

static void test_progress(void)
{
    /* Force the display on and capture stderr in a file. */
    setenv("DIMOC_PROGRESS", "1", 1);
    fflush(stderr);
    int saved = dup(2);
    int fd = open(path_in("progress.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 2);
    close(fd);
    dm_progress *p = dm_progress_start("fit", 1000, "voxels");
#pragma omp parallel for
    for (int i = 0; i < 1000; i++) {
        usleep(500);
        dm_progress_add(p, 1);
    }
    dm_progress_end(p);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    unsetenv("DIMOC_PROGRESS");
    char *text = dm_read_file(path_in("progress.txt"), NULL);
    check(text && strstr(text, "\rfit: ") && strstr(text, "/1000 voxels") &&
              strstr(text, "fit: 1000 voxels in ") && strstr(text, "vox/s)") &&
              text[strlen(text) - 1] == '\n',
          "progress_lines", "got '%s'", text ? text : "(none)");
    free(text);
    /* Not a terminal and not forced: a start line and a summary line; DIMOC_PROGRESS=0: none. */
    for (int quiet = 0; quiet < 2; quiet++) {
        if (quiet) setenv("DIMOC_PROGRESS", "0", 1);
        fd = open(path_in("progress2.txt"), O_WRONLY | O_CREAT | O_TRUNC, 0644);
        saved = dup(2);
        dup2(fd, 2);
        close(fd);
        p = dm_progress_start("fit", 10, "voxels");
        dm_progress_add(p, 10);
        dm_progress_finish(p, "10 fitted");
        dup2(saved, 2);
        close(saved);
        unsetenv("DIMOC_PROGRESS");
        size_t len = 1;
        text = dm_read_file(path_in("progress2.txt"), &len);
        if (quiet)
            check(text && len == 0, "progress_silent_when_asked", "%zu bytes written", len);
        else
            check(text && !strncmp(text, "fit: 10 voxels\nfit: 10 voxels in ", 33) &&
                      strstr(text, ", 10 fitted\n") && !strchr(text, '\r'),
                  "progress_start_and_summary_when_piped", "got '%s'", text ? text : "(none)");
        free(text);
    }
}

/* Every input the fuzzers found a crash with (tests/fuzz/regressions/) is read without one:
 * NIfTI files (named .nii.gz when the first byte is odd, as fuzz_nifti.c does), text files
 * (bvals up to the first NUL, bvecs after), .tck info text (up to the first NUL). */
static void test_fuzz_regressions(void)
{
    const char *kinds[] = {"nifti", "text", "tck"};
    int files = 0;
    for (int k = 0; k < 3; k++) {
        char folder[300];
        snprintf(folder, sizeof folder, "tests/fuzz/regressions/%s", kinds[k]);
        char cmd[400], name[256];
        snprintf(cmd, sizeof cmd, "ls '%s' 2>/dev/null", folder); /* <dirent.h> clashes with
                                                                     nifti1.h's DT_ names */
        FILE *d = popen(cmd, "r");
        while (d && fscanf(d, "%255s", name) == 1) {
            char *path = dm_path_join(folder, name);
            size_t len = 0;
            char *data = dm_read_file(path, &len);
            free(path);
            if (!data) continue;
            files++;
            size_t n1 = strnlen(data, len);
            if (k == 0) {
                const char *name = path_in(len && (data[0] & 1) ? "fuzz.nii.gz" : "fuzz.nii");
                FILE *f = fopen(name, "wb");
                fwrite(data, 1, len, f);
                fclose(f);
                dm_volume v;
                if (dm_volume_read(name, &v) == 0) dm_volume_free(&v);
            } else if (k == 1) {
                FILE *f = fopen(path_in("fuzz_bvals"), "wb");
                fwrite(data, 1, n1, f);
                fclose(f);
                f = fopen(path_in("fuzz_bvecs"), "wb");
                if (n1 < len) fwrite(data + n1 + 1, 1, len - n1 - 1, f);
                fclose(f);
                double *b, *g;
                int nread;
                if (dm_read_bvals_bvecs(path_in("fuzz_bvals"), path_in("fuzz_bvecs"), 0, &b, &g,
                                        &nread) == 0) {
                    free(b);
                    free(g);
                }
            } else {
                dm_tck_writer *w = dm_tck_open(path_in("fuzz.tck"), n1 < len ? data : "");
                int rc = w ? dm_tck_close(w, 0) : -1;
                char *text = dm_read_file(path_in("fuzz.tck"), NULL);
                const char *first = text ? strstr(text, "\nfile: ") : NULL;
                check(rc == 0 && first && !strstr(first + 1, "\nfile: "),
                      "fuzz-regression-tck-one-file-line", "%s", name);
                free(text);
            }
            free(data);
        }
        if (d) pclose(d);
    }
    check(files > 0, "fuzz-regressions-io", "%d inputs replayed", files);
}

/* The parallel .tck writer (a GPU run's gigabytes, written in shares with gathered pwrites, or
 * from 64 MB on through a shared mapping on all threads) gives the bytes of the
 * streamline-by-streamline writer, also between ordinary appends: n streamlines of 1 to maxpts
 * points. */
static void test_tck_add_many(const char *name, int n, int maxpts)
{
    int *npts = malloc((size_t)n * sizeof *npts);
    size_t *start = malloc((size_t)n * sizeof *start);
    size_t total = 0;
    unsigned st = 5;
    for (int i = 0; i < n; i++) {
        st = st * 1664525u + 1013904223u;
        npts[i] = 1 + (int)(st >> 8) % maxpts;
        total += (size_t)npts[i];
    }
    float *xyz = malloc(3 * total * sizeof *xyz);
    for (size_t k = 0; k < 3 * total; k++) xyz[k] = (float)(k % 1000003) * 0.25f - 7;
    /* the streamlines in scrambled places of the buffer */
    size_t at = 0;
    for (int i = n - 1; i >= 0; i--) {
        start[i] = at;
        at += (size_t)npts[i];
    }
    const char *info = "step_size: 0.5\n";
    dm_tck_writer *a = dm_tck_open(path_in("serial.tck"), info);
    for (int i = 0; i < n; i++) dm_tck_add(a, xyz + 3 * start[i], npts[i]);
    int rc = dm_tck_close(a, n);
    const int m = n / 2;
    dm_tck_writer *b = dm_tck_open(path_in("shares.tck"), info);
    dm_tck_add(b, xyz + 3 * start[0], npts[0]);
    rc |= dm_tck_add_many(b, xyz, start + 1, npts + 1, m, 4);
    dm_tck_add(b, xyz + 3 * start[m + 1], npts[m + 1]);
    rc |= dm_tck_add_many(b, xyz, start + m + 2, npts + m + 2, n - m - 2, 3);
    rc |= dm_tck_close(b, n);
    size_t la = 0, lb = 0;
    char *ta = dm_read_file(path_in("serial.tck"), &la),
         *tb = dm_read_file(path_in("shares.tck"), &lb);
    check(rc == 0 && ta && tb && la == lb && !memcmp(ta, tb, la), name, "rc %d, %zu and %zu bytes",
          rc, la, lb);
    free(ta);
    free(tb);
    free(xyz);
    free(npts);
    free(start);
}

static void copy_bytes(void *ctx, size_t offset, size_t n, unsigned char *out)
{
    memcpy(out, (const unsigned char *)ctx + offset, n);
}

/* Writes len bytes of src to path through the block writer (from memory, or filled); 0 or -1. */
static int gz_write_file(const char *path, const unsigned char *src, size_t len, int filled)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    int rc = filled ? dm_gz_write_filled(f, len, copy_bytes, (void *)src)
                    : dm_gz_write_blocks(f, src, len);
    return fclose(f) != 0 ? -1 : rc;
}

/* The block writer (io/gz_blocks.h): zlib, a reader independent of the writer's deflate, inflates
 * the very bytes written; the members' extra fields give their sizes (the readers' parallel
 * path then agrees too); from memory or filled, on one thread or all, the file is the same; a
 * write that fails is an error with its errno. */
static void test_gz_blocks(void)
{
    const size_t mib = 1 << 20, len = 5 * mib + 12345; /* six members, the last a partial one */
    unsigned char *src = malloc(len), *back = malloc(len + 64);
    srand(11);
    for (size_t i = 0; i < len; i += 4) { /* zeros, noisy floats, then repeated text */
        float v = i < mib ? 0.0f : i < 4 * mib ? 0.5f + (float)rand() / RAND_MAX : (float)(i % 97);
        memcpy(src + i, &v, len - i < 4 ? len - i : 4);
    }
    const char *a = path_in("blocks_a.gz"), *b = path_in("blocks_b.gz"), *c = path_in("blocks_c.gz");
    int rc = gz_write_file(a, src, len, 0);
    omp_set_num_threads(1);
    rc |= gz_write_file(b, src, len, 1);
    omp_set_num_threads(omp_get_num_procs());
    rc |= gz_write_file(c, src, len, 1);
    check(rc == 0, "gz_blocks_written", "%s", strerror(errno));

    gzFile g = gzopen(a, "rb");
    int got = g ? gzread(g, back, (unsigned)(len + 64)) : -1;
    if (g) gzclose(g);
    check(got == (int)len && memcmp(back, src, len) == 0, "gz_blocks_zlib_reads_the_bytes",
          "zlib inflated %d of %zu bytes", got, len);

    size_t la = 0, lb = 0, lc = 0;
    unsigned char *fa = (unsigned char *)dm_read_file(a, &la), *fb = (unsigned char *)dm_read_file(b, &lb),
                  *fc = (unsigned char *)dm_read_file(c, &lc);
    check(fa && fb && fc && la == lb && la == lc && !memcmp(fa, fb, la) && !memcmp(fa, fc, la),
          "gz_blocks_same_file_filled_any_threads", "%zu, %zu, %zu bytes", la, lb, lc);
    /* the members' sizes: walk them and count */
    size_t at = 0, members = 0, bytes = 0;
    while (fa && dm_gz_is_blocked(fa + at, la - at) && at < la) {
        size_t mlen = fa[at + 16] | (size_t)fa[at + 17] << 8 | (size_t)fa[at + 18] << 16 |
                      (size_t)fa[at + 19] << 24;
        bytes += fa[at + 20] | (size_t)fa[at + 21] << 8 | (size_t)fa[at + 22] << 16 |
                 (size_t)fa[at + 23] << 24;
        members++;
        at += mlen;
    }
    check(at == la && members == 6 && bytes == len, "gz_blocks_member_sizes",
          "%zu members of %zu bytes end at %zu of %zu", members, bytes, at, la);
    memset(back, 0, len);
    check(fa && dm_gz_inflate(fa, la, back, len) == 0 && !memcmp(back, src, len),
          "gz_blocks_parallel_inflate", "the members inflated differ");
    free(fa);
    free(fb);
    free(fc);

    FILE *full = fopen("/dev/full", "wb");
    if (full) {
        errno = 0;
        rc = dm_gz_write_blocks(full, src, len);
        check(rc == -1 && errno == ENOSPC, "gz_blocks_full_disk", "rc %d, errno %d", rc, errno);
        fclose(full);
    }
    free(src);
    free(back);
}

/* A member's bytes are a function of its data alone: one error map as dimoc writes it (the
 * file's bytes, tests/data/gz_member), packed with the packer (the deflate's stream state) at
 * 40,000 places spread over the address space, gives the same bytes every time, which inflate
 * to the map.  (ISA-L 2.30's level 1, which the writer used before, gave other bytes for this
 * map at about 2 in 10,000 places of its stream state: this check failed with it.) */
static void test_gz_member_any_place(void)
{
    enum { PLACES = 40000, MAX = 1 << 16 };
    const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
    char path[1024];
    snprintf(path, sizeof path, "%s/tests/data/gz_member/fit_RMSE.nii.gz", root);
    unsigned char *map = malloc(MAX);
    gzFile g = gzopen(path, "rb");
    int got = g && map ? gzread(g, map, MAX) : -1;
    if (g) gzclose(g);
    const size_t n = got > 0 ? (size_t)got : 0;
    const size_t bytes = dm_gz_packer_bytes(), span = (bytes + 4095) / 4096 * 4096 + 4096;
    const size_t cap = dm_gz_member_bound(n);
    unsigned char *first = malloc(cap), *out = malloc(cap), *back = malloc(n + 1);
    dm_gz_packer *own = malloc(bytes);
    const size_t len = n && own && first ? dm_gz_pack_member(own, map, n, first, cap) : 0;
    int inflated = len && dm_gz_inflate(first, len, back, n) == 0 && !memcmp(back, map, n);
    long differ = 0, placed = 0;
    unsigned long long s = 2026;
    for (int k = 0; k < PLACES && len; k++) {
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        uintptr_t at = ((s >> 17) % (0x7e0000000000ULL / 4096)) * 4096 + 0x10000000ULL;
        void *p = mmap((void *)at, span, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
        if (p == MAP_FAILED) continue;
        /* an offset into the page too: malloc's alignment, not only the page's */
        dm_gz_packer *pk = (dm_gz_packer *)((unsigned char *)p + 16 * (k % 200));
        size_t l = dm_gz_pack_member(pk, map, n, out, cap);
        differ += l != len || memcmp(out, first, len) != 0;
        placed++;
        munmap(p, span);
    }
    check(n > 0 && len > 0 && len < n / 2 && inflated, "gz_member_packs_and_inflates",
          "%s: %zu bytes; packed to %zu, inflated to the map: %d", path, n, len, inflated);
    check(placed > PLACES / 2 && differ == 0, "gz_member_same_bytes_anywhere",
          "%ld of %ld places of the packer gave other bytes", differ, placed);
    free(map);
    free(first);
    free(out);
    free(back);
    free(own);
}

int main(void)
{
    const char *root = getenv("TMPROOT");
    snprintf(dir, sizeof dir, "%s/test_io.d", root && *root ? root : "/tmp");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0 || dm_mkdir_p(dir) != 0) {
        printf("FAIL setup: cannot make %s\n", dir);
        return 1;
    }
    test_volume_round_trip(".nii");
    test_volume_round_trip(".nii.gz");
    test_volume_other_inputs();
    test_volume_float64_non_finite(".nii");
    test_volume_float64_non_finite(".nii.gz");
    test_volume_float64_non_finite(".hdr");
    test_volume_errors();
    test_gz_blocks();
    test_gz_member_any_place();
    test_matrix();
    test_bvals_bvecs();
    test_scheme();
    test_eig3();
    test_stats();
    test_masked_floats();
    test_json();
    test_fsutil();
    test_error();
    test_progress();
    test_tck_add_many("tck-parallel-writer-same-bytes", 3000, 200);
    test_tck_add_many("tck-mapped-writer-same-bytes", 60000, 400); /* two calls of 70 MB */
    test_fuzz_regressions();
    return 0;
}
