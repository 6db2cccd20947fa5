/* The mid-slice renderer: RAS reorientation, grey windows from percentiles, panel drawing. */
#include "render/slices.h"
#include "util/error.h"
#include "util/key_sort.h"

#include <math.h>
#include <nifti2_io.h>
#include <stdlib.h>
#include <string.h>

void dm_ras_setup(const dm_volume *vol, dm_ras_view *rv)
{
    const nifti_image *nim = vol->geometry;
    double m[3][3] = {{1, 0, 0}, {0, 1, 0}, {0, 0, 1}};
    const int dims[3] = {vol->nx, vol->ny, vol->nz};
    double sizes[3] = {1, 1, 1};
    if (nim) {
        const nifti_dmat44 *a = nim->sform_code > 0   ? &nim->sto_xyz
                                : nim->qform_code > 0 ? &nim->qto_xyz
                                                      : NULL;
        for (int w = 0; w < 3; w++)
            for (int i = 0; i < 3; i++) m[w][i] = a ? a->m[w][i] : (w == i ? 1 : 0);
        const double d[3] = {nim->dx, nim->dy, nim->dz};
        for (int i = 0; i < 3; i++) sizes[i] = d[i] > 0 && isfinite(d[i]) ? d[i] : 1;
    }
    /* The permutation of voxel axes onto world axes that keeps the most of the matrix on
     * its diagonal (robust to oblique images, where a greedy choice may pick an axis twice). */
    static const int perms[6][3] = {{0, 1, 2}, {0, 2, 1}, {1, 0, 2},
                                    {1, 2, 0}, {2, 0, 1}, {2, 1, 0}};
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

size_t dm_ras_index(const dm_ras_view *rv, const int c[3], int t)
{
    int ijk[3];
    for (int w = 0; w < 3; w++) ijk[rv->axis[w]] = rv->flip[w] ? rv->n[w] - 1 - c[w] : c[w];
    const dm_volume *v = rv->vol;
    return ijk[0] + (size_t)v->nx * (ijk[1] + (size_t)v->ny * (ijk[2] + (size_t)v->nz * t));
}

/* One panel: the slice through world axis `normal` at its middle; `hor`/`ver` the world axes
 * across and down the panel; hor_rev / ver_rev: that axis decreases across / down it. */
typedef struct panel {
    int normal, hor, ver, hor_rev, ver_rev;
    int width, height, x0, y0; /* in pixels, and its place in the picture */
} panel;

/* Percentile p (0..100) of the finite non-zero values of volume t, with linear interpolation
 * between ranks (numpy's default); NAN when there is none. */
static double percentile(const dm_volume *v, int t, double p, int absolute)
{
    size_t nvox = DM_NVOX(v), n = 0;
    double *vals = malloc((nvox ? nvox : 1) * sizeof *vals);
    if (!vals) return NAN;
    for (size_t i = 0; i < nvox; i++) {
        double x = v->data[i + nvox * t];
        if (absolute) x = fabs(x);
        if (isfinite(x) && x != 0) vals[n++] = x;
    }
    double r = NAN;
    if (n) {
        double pos = p / 100 * (double)(n - 1);
        size_t lo = (size_t)floor(pos);
        double below = dm_select_kth(vals, n, lo), above = below; /* O(n), not a sort */
        if (lo + 1 < n) { /* the next rank: the least of those after it */
            above = vals[lo + 1];
            for (size_t i = lo + 2; i < n; i++)
                if (vals[i] < above) above = vals[i];
        }
        r = below + (pos - (double)lo) * (above - below);
    }
    free(vals);
    return r;
}

/* axial: x across (left to right), y down (anterior first); coronal: x across, z down
 * (superior first); sagittal: y across (anterior first), z down (superior first). */
const dm_panel_axes dm_mid_panels[3] = {
    {.normal = 2, .hor = 0, .ver = 1, .hor_rev = 0, .ver_rev = 1},
    {.normal = 1, .hor = 0, .ver = 2, .hor_rev = 0, .ver_rev = 1},
    {.normal = 0, .hor = 1, .ver = 2, .hor_rev = 1, .ver_rev = 1},
};

static unsigned char to_byte(double x)
{
    if (!(x > 0)) return 0; /* also NaN */
    if (x >= 1) return 255;
    return (unsigned char)lround(255 * x);
}

/* The settings with the window and the weight's scale worked out. */
typedef struct source {
    const dm_volume *scalar, *dyads, *weight;
    int volume;
    double lo, hi;       /* grey window */
    double weight_scale; /* weight divided by this, then clamped to [0, 1] */
} source;

static void draw_pixel(const source *src, const dm_ras_view *rv, const int c[3], unsigned char *px)
{
    if (src->scalar) {
        double x = src->scalar->data[dm_ras_index(rv, c, src->volume)];
        if (!isfinite(x))
            px[0] = 0;
        else if (src->hi > src->lo)
            px[0] = to_byte((x - src->lo) / (src->hi - src->lo));
        else
            px[0] = x != 0 ? 255 : 0; /* a constant map: its non-zero voxels white */
        return;
    }
    double w = 1;
    if (src->weight) {
        double x = src->weight->data[dm_ras_index(rv, c, 0)];
        w = isfinite(x) ? fabs(x) / src->weight_scale : 0;
        if (w > 1) w = 1;
    }
    for (int k = 0; k < 3; k++) {
        double x = src->dyads->data[dm_ras_index(rv, c, k)];
        px[k] = isfinite(x) ? to_byte(fabs(x) * w) : 0;
    }
}

static void draw_panel(const source *src, const dm_ras_view *rv, const panel *pn, double pix_mm,
                       dm_picture *pic)
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
            unsigned char *px =
                pic->pixels + ((size_t)(pn->y0 + y) * pic->width + pn->x0 + x) * pic->channels;
            draw_pixel(src, rv, c, px);
        }
    }
}

/* Number of pixels along a world axis: its extent in mm over the pixel size, at least 1. */
static int extent_px(const dm_ras_view *rv, int w, double pix_mm)
{
    long n = lround(rv->n[w] * rv->mm[w] / pix_mm);
    return n < 1 ? 1 : (int)n;
}

static int make_source(const dm_slices_settings *s, source *src)
{
    memset(src, 0, sizeof *src);
    if (s->scalar) {
        if (s->volume < 0 || s->volume >= s->scalar->nt)
            return dm_set_error("render: volume %d of a map of %d", s->volume, s->scalar->nt);
        src->scalar = s->scalar;
        src->volume = s->volume;
        if (s->window) {
            src->lo = s->lo;
            src->hi = s->hi;
        } else {
            src->lo = percentile(s->scalar, s->volume, 1, 0);
            src->hi = percentile(s->scalar, s->volume, 99, 0);
            if (isnan(src->lo)) src->lo = src->hi = 0; /* all zero: draws black */
        }
        return 0;
    }
    if (!s->dyads || s->dyads->nt != 3)
        return dm_set_error("render: a direction map of 3 volumes is needed");
    src->dyads = s->dyads;
    if (s->weight) {
        const dm_volume *w = s->weight, *d = s->dyads;
        if (w->nx != d->nx || w->ny != d->ny || w->nz != d->nz)
            return dm_set_error("render: the weight is not on the grid of the directions");
        src->weight = w;
        src->weight_scale = percentile(w, 0, 99, 1);
        if (!(src->weight_scale > 0)) src->weight_scale = 1; /* all zero: draws black */
    }
    return 0;
}

int dm_render_slices(const dm_slices_settings *s, dm_picture *pic)
{
    memset(pic, 0, sizeof *pic);
    source src;
    if (make_source(s, &src) != 0) return -1;
    dm_ras_view rv;
    dm_ras_setup(src.scalar ? src.scalar : src.dyads, &rv);
    double vmin = fmin(rv.mm[0], fmin(rv.mm[1], rv.mm[2]));
    long zoom = s->zoom;
    if (zoom <= 0) { /* auto: the largest extent near 256 pixels, never below 1 per voxel */
        double largest = 0;
        for (int w = 0; w < 3; w++) largest = fmax(largest, rv.n[w] * rv.mm[w] / vmin);
        zoom = (long)(256 / largest);
        if (zoom < 1) zoom = 1;
    }
    double pix_mm = vmin / (double)zoom;
    panel panels[3];
    for (int i = 0; i < 3; i++)
        panels[i] = (panel){.normal = dm_mid_panels[i].normal,
                            .hor = dm_mid_panels[i].hor,
                            .ver = dm_mid_panels[i].ver,
                            .hor_rev = dm_mid_panels[i].hor_rev,
                            .ver_rev = dm_mid_panels[i].ver_rev};
    const int gap = 4;
    int width = 0, height = 0;
    for (int i = 0; i < 3; i++) {
        panels[i].width = extent_px(&rv, panels[i].hor, pix_mm);
        panels[i].height = extent_px(&rv, panels[i].ver, pix_mm);
        panels[i].x0 = width;
        width += panels[i].width + (i < 2 ? gap : 0);
        if (panels[i].height > height) height = panels[i].height;
    }
    if ((double)width * height > 1e8) /* worded for `dimoc view`, where --zoom sets the size */
        return dm_set_error("view: the picture would be %dx%d pixels; lower --zoom", width, height);
    pic->width = width;
    pic->height = height;
    pic->channels = src.scalar ? 1 : 3;
    pic->pixels = calloc((size_t)width * height * pic->channels, 1);
    if (!pic->pixels) return dm_set_error("out of memory for a %dx%d picture", width, height);
    for (int i = 0; i < 3; i++) {
        panels[i].y0 = (height - panels[i].height) / 2; /* centred vertically */
        draw_panel(&src, &rv, &panels[i], pix_mm, pic);
    }
    return 0;
}

void dm_picture_free(dm_picture *pic)
{
    free(pic->pixels);
    memset(pic, 0, sizeof *pic);
}
