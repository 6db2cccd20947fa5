/* dimoc view: a quick-look PNG of the three mid-slices of a map (axial, coronal, sagittal,
 * side by side), grey for a scalar map, direction-encoded colour for fibre directions.
 *
 * The volume is first put in RAS order: each voxel axis is matched to the world axis (of the
 * sform, else the qform) it runs closest to, and flipped where it runs against it.  The
 * panels are then drawn in the neurological convention: the subject's left on the left of
 * the axial and coronal panels, anterior at the top of the axial panel, superior at the top
 * of the coronal and sagittal panels, anterior on the left of the sagittal panel.  The
 * mid-slice of an axis of n voxels is n/2 (integer division, in RAS order).  Pixels are
 * square in millimetres: with zoom Z each pixel is (smallest voxel size)/Z mm wide, and every
 * voxel is drawn by nearest neighbour, so anisotropic voxels do not squash the anatomy. */
#include "args.h"
#include "cli.h"
#include "util/error.h"
#include "io/png_write.h"
#include "io/volume.h"

#include <math.h>
#include <nifti2_io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt view_opts[] = {
    {"o", "FILE", NULL, "the PNG to write"},
    {"out", "FILE", NULL, "the same as -o"},
    {"rgb-from", "DYADS", NULL, "colour by direction: a 3-volume map of unit vectors, |x|,|y|,|z| -> R,G,B"},
    {"weight", "MAP", NULL, "with --rgb-from: scale the colours by this map (e.g. FA or f1), "
                            "divided by its 99th percentile of the non-zero voxels"},
    {"volume", "N", "0", "the volume of a 4D scalar map to show"},
    {"window", "LO,HI", NULL, "grey window (default: percentiles 1 and 99 of the non-zero voxels)"},
    {"zoom", "Z", "auto", "pixels per smallest voxel size (auto: the largest panel is about 256 pixels)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_view(FILE *out)
{
    dm_args_help(out, "dimoc view MAP.nii.gz -o PNG | dimoc view --rgb-from DYADS [--weight MAP] -o PNG",
                 "Writes a PNG of the three mid-slices, axial, coronal and sagittal side by side, in\n"
                 "the neurological convention (the subject's left on the left; anterior at the top\n"
                 "of the axial panel and on the left of the sagittal panel; superior at the top),\n"
                 "with voxel sizes respected.  A scalar map is drawn in grey; with --rgb-from the\n"
                 "colour is the direction, |x|,|y|,|z| as red, green, blue, weighted by --weight (a\n"
                 "positional MAP is taken as the weight).  NaN and Inf voxels are black.",
                 view_opts);
    return 0;
}

/* A volume in RAS order: value(r, a, s) for r along world x (left to right), a along y
 * (posterior to anterior), s along z (inferior to superior). */
typedef struct ras_view {
    const dm_volume *vol;
    int axis[3];   /* voxel axis along each world axis */
    int flip[3];   /* 1 where that voxel axis runs against the world axis */
    int n[3];      /* voxels along each world axis */
    double mm[3];  /* voxel size along each world axis */
} ras_view;

static void ras_setup(const dm_volume *vol, ras_view *rv)
{
    const nifti_image *nim = vol->geometry;
    double m[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    const int dims[3] = {vol->nx, vol->ny, vol->nz};
    double sizes[3] = {1, 1, 1};
    if (nim) {
        const nifti_dmat44 *a = nim->sform_code > 0 ? &nim->sto_xyz : nim->qform_code > 0 ? &nim->qto_xyz : NULL;
        for (int w = 0; w < 3; w++)
            for (int i = 0; i < 3; i++)
                m[w][i] = a ? a->m[w][i] : (w == i ? 1 : 0);
        const double d[3] = {nim->dx, nim->dy, nim->dz};
        for (int i = 0; i < 3; i++) sizes[i] = d[i] > 0 && isfinite(d[i]) ? d[i] : 1;
    }
    /* The permutation of voxel axes onto world axes that keeps the most of the matrix on
     * its diagonal (robust to oblique images, where a greedy choice may pick an axis twice). */
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
    int best = 0;
    double best_score = -1;
    for (int p = 0; p < 6; p++) {
        double score = 0;
        for (int w = 0; w < 3; w++) score += fabs(m[w][perms[p][w]]) / (sizes[perms[p][w]]);
        if (score > best_score) {
            best_score = score;
            best = p;
        }
    }
    rv->vol = vol;
    for (int w = 0; w < 3; w++) {
        int i = perms[best][w];
        rv->axis[w] = i;
        rv->flip[w] = m[w][i] < 0;
        rv->n[w] = dims[i];
        rv->mm[w] = sizes[i];
    }
}

/* Index into vol->data of RAS voxel c[3] in volume t. */
static size_t ras_index(const ras_view *rv, const int c[3], int t)
{
    int ijk[3];
    for (int w = 0; w < 3; w++)
        ijk[rv->axis[w]] = rv->flip[w] ? rv->n[w] - 1 - c[w] : c[w];
    const dm_volume *v = rv->vol;
    return ijk[0] + (size_t)v->nx * (ijk[1] + (size_t)v->ny * (ijk[2] + (size_t)v->nz * t));
}

/* One panel: the slice through world axis `normal` at its middle; `hor`/`ver` the world axes
 * across and down the panel; hor_rev / ver_rev: that axis decreases across / down it. */
typedef struct panel {
    int normal, hor, ver, hor_rev, ver_rev;
    int width, height, x0, y0; /* in pixels, and its place in the picture */
} panel;

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentile p (0..100) of the finite non-zero values of volume t, with linear interpolation
 * between ranks (numpy's default); NAN when there is none. */
static double percentile(const dm_volume *v, int t, double p, int absolute)
{
    size_t nvox = DM_NVOX(v), n = 0;
    double *vals = malloc((nvox ? nvox : 1) * sizeof *vals);
    for (size_t i = 0; i < nvox; i++) {
        double x = v->data[i + nvox * t];
        if (absolute) x = fabs(x);
        if (isfinite(x) && x != 0) vals[n++] = x;
    }
    double r = NAN;
    if (n) {
        qsort(vals, n, sizeof *vals, cmp_double);
        double pos = p / 100 * (double)(n - 1);
        size_t lo = (size_t)floor(pos);
        size_t hi = lo + 1 < n ? lo + 1 : lo;
        r = vals[lo] + (pos - (double)lo) * (vals[hi] - vals[lo]);
    }
    free(vals);
    return r;
}

static unsigned char to_byte(double x)
{
    if (!(x > 0)) return 0; /* also NaN */
    if (x >= 1) return 255;
    return (unsigned char)lround(255 * x);
}

/* What is drawn: a grey window over one volume of a scalar map, or colour from a direction
 * map with an optional weight map. */
typedef struct view_source {
    const dm_volume *scalar, *dyads, *weight;
    int volume;
    double lo, hi;       /* grey window */
    double weight_scale; /* weight divided by this, then clamped to [0, 1] */
} view_source;

static void draw_pixel(const view_source *src, const ras_view *rv, const int c[3], unsigned char *px)
{
    if (src->scalar) {
        double x = src->scalar->data[ras_index(rv, c, src->volume)];
        if (!isfinite(x)) px[0] = 0;
        else if (src->hi > src->lo) px[0] = to_byte((x - src->lo) / (src->hi - src->lo));
        else px[0] = x != 0 ? 255 : 0; /* a constant map: its non-zero voxels white */
        return;
    }
    double w = 1;
    if (src->weight) {
        double x = src->weight->data[ras_index(rv, c, 0)];
        w = isfinite(x) ? fabs(x) / src->weight_scale : 0;
        if (w > 1) w = 1;
    }
    for (int k = 0; k < 3; k++) {
        double x = src->dyads->data[ras_index(rv, c, k)];
        px[k] = isfinite(x) ? to_byte(fabs(x) * w) : 0;
    }
}

static void render(const view_source *src, const ras_view *rv, panel *pn, double pix_mm,
                   int channels, unsigned char *img, int img_width)
{
    int c[3];
    c[pn->normal] = rv->n[pn->normal] / 2;
    for (int y = 0; y < pn->height; y++) {
        int iv = (int)floor((y + 0.5) * pix_mm / rv->mm[pn->ver]);
        if (iv >= rv->n[pn->ver]) iv = rv->n[pn->ver] - 1;
        c[pn->ver] = pn->ver_rev ? rv->n[pn->ver] - 1 - iv : iv;
        for (int x = 0; x < pn->width; x++) {
            int ih = (int)floor((x + 0.5) * pix_mm / rv->mm[pn->hor]);
            if (ih >= rv->n[pn->hor]) ih = rv->n[pn->hor] - 1;
            c[pn->hor] = pn->hor_rev ? rv->n[pn->hor] - 1 - ih : ih;
            unsigned char *px = img + ((size_t)(pn->y0 + y) * img_width + pn->x0 + x) * channels;
            draw_pixel(src, rv, c, px);
        }
    }
}

static int parse_window(const char *s, double *lo, double *hi)
{
    char *end;
    *lo = strtod(s, &end);
    if (end == s || *end != ',') return -1;
    const char *s2 = end + 1;
    *hi = strtod(s2, &end);
    if (end == s2 || *end || !isfinite(*lo) || !isfinite(*hi) || *hi <= *lo) return -1;
    return 0;
}

/* Number of pixels along a world axis: its extent in mm over the pixel size, at least 1. */
static int extent_px(const ras_view *rv, int w, double pix_mm)
{
    long n = lround(rv->n[w] * rv->mm[w] / pix_mm);
    return n < 1 ? 1 : (int)n;
}

int dm_cmd_view(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("view", view_opts, argc, argv, &a) != 0) return dm_report_error();
    dm_volume map = {0}, dyads = {0}, weight = {0};
    unsigned char *img = NULL;
    int rc = 0;
    const char *out = dm_arg(&a, view_opts, "o");
    if (!out) out = dm_arg(&a, view_opts, "out");
    const char *rgb = dm_arg(&a, view_opts, "rgb-from");
    const char *wpath = dm_arg(&a, view_opts, "weight");
    const char *mpath = a.npositional > 0 ? a.positional[0] : NULL;
    long volume = 0, zoom = 0;
    const char *zoom_s = dm_arg(&a, view_opts, "zoom");
    view_source src = {0};

    if (!out) {
        rc = dm_set_error("view: -o PNG is required");
        goto done;
    }
    if (a.npositional > 1) {
        rc = dm_set_error("view: one map only (got '%s' and '%s')", a.positional[0], a.positional[1]);
        goto done;
    }
    if (rgb && mpath && wpath) {
        rc = dm_set_error("view: give the weight once, as --weight or as MAP, not both");
        goto done;
    }
    if (!rgb && !mpath) {
        rc = dm_set_error("view: give a MAP to show, or --rgb-from DYADS");
        goto done;
    }
    if (!rgb && wpath) {
        rc = dm_set_error("view: --weight goes with --rgb-from");
        goto done;
    }
    if (rgb && !wpath) wpath = mpath;
    if ((rc = dm_arg_long(&a, view_opts, "volume", 0, 1L << 30, &volume)) != 0) goto done;
    if (strcmp(zoom_s, "auto") != 0 && (rc = dm_arg_long(&a, view_opts, "zoom", 1, 64, &zoom)) != 0)
        goto done;

    const dm_volume *shape;
    if (rgb) {
        if ((rc = dm_volume_read(rgb, &dyads)) != 0) goto done;
        if (dyads.nt != 3) {
            rc = dm_set_error("%s: --rgb-from needs 3 volumes (x, y, z of a direction), it has %d", rgb, dyads.nt);
            goto done;
        }
        if (wpath && ((rc = dm_volume_read(wpath, &weight)) != 0 ||
                      (rc = dm_volume_check_same_grid(&weight, wpath, &dyads, rgb)) != 0))
            goto done;
        src.dyads = &dyads;
        if (wpath) {
            src.weight = &weight;
            src.weight_scale = percentile(&weight, 0, 99, 1);
            if (!(src.weight_scale > 0)) src.weight_scale = 1; /* all zero: draws black */
        }
        shape = &dyads;
    } else {
        if ((rc = dm_volume_read(mpath, &map)) != 0) goto done;
        if (volume >= map.nt) {
            rc = dm_set_error("%s: --volume %ld, but the map has %d volume%s", mpath, volume, map.nt,
                              map.nt == 1 ? "" : "s");
            goto done;
        }
        src.scalar = &map;
        src.volume = (int)volume;
        const char *win = dm_arg(&a, view_opts, "window");
        if (win) {
            if (parse_window(win, &src.lo, &src.hi) != 0) {
                rc = dm_set_error("--window: '%s' is not LO,HI with LO < HI", win);
                goto done;
            }
        } else {
            src.lo = percentile(&map, src.volume, 1, 0);
            src.hi = percentile(&map, src.volume, 99, 0);
            if (isnan(src.lo)) src.lo = src.hi = 0; /* all zero: draws black */
        }
        shape = &map;
    }

    ras_view rv;
    ras_setup(shape, &rv);
    double vmin = fmin(rv.mm[0], fmin(rv.mm[1], rv.mm[2]));
    if (zoom == 0) { /* auto: the largest extent near 256 pixels, never below 1 per voxel */
        double largest = 0;
        for (int w = 0; w < 3; w++) largest = fmax(largest, rv.n[w] * rv.mm[w] / vmin);
        zoom = (long)(256 / largest);
        if (zoom < 1) zoom = 1;
    }
    double pix_mm = vmin / (double)zoom;
    /* axial: x across (left to right), y down (anterior first); coronal: x across, z down
     * (superior first); sagittal: y across (anterior first), z down (superior first). */
    panel panels[3] = {
        {.normal = 2, .hor = 0, .ver = 1, .hor_rev = 0, .ver_rev = 1},
        {.normal = 1, .hor = 0, .ver = 2, .hor_rev = 0, .ver_rev = 1},
        {.normal = 0, .hor = 1, .ver = 2, .hor_rev = 1, .ver_rev = 1},
    };
    const int gap = 4;
    int width = 0, height = 0;
    for (int i = 0; i < 3; i++) {
        panels[i].width = extent_px(&rv, panels[i].hor, pix_mm);
        panels[i].height = extent_px(&rv, panels[i].ver, pix_mm);
        panels[i].x0 = width;
        width += panels[i].width + (i < 2 ? gap : 0);
        if (panels[i].height > height) height = panels[i].height;
    }
    if ((double)width * height > 1e8) {
        rc = dm_set_error("view: the picture would be %dx%d pixels; lower --zoom", width, height);
        goto done;
    }
    int channels = rgb ? 3 : 1;
    img = calloc((size_t)width * height * channels, 1);
    for (int i = 0; i < 3; i++) {
        panels[i].y0 = (height - panels[i].height) / 2; /* centred vertically */
        render(&src, &rv, &panels[i], pix_mm, channels, img, width);
    }
    rc = dm_png_write(out, width, height, channels, img);
done:
    free(img);
    dm_volume_free(&map);
    dm_volume_free(&dyads);
    dm_volume_free(&weight);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
