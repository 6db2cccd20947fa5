/* FOD glyphs on the mid-slices (fod_glyphs.h): per panel, the basis is tabulated once on a
 * grid of in-plane angles and elevations; per voxel, the glyph's outline is its largest
 * projected radius along each angle; cells are then filled pixel by pixel. */
#include "render/fod_glyphs.h"
#include "sphere/sh.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NANGLES 36 /* in-plane angles over half a turn (FODs are even): 5 degrees apart */
#define NELEV 19   /* elevations from -85 to +85 degrees, 0 among them */

int dm_is_sh_count(int n)
{
    int lmax = dm_sh_lmax_for(n);
    return lmax >= 2 && dm_sh_ncoef(lmax) == n;
}

static unsigned char to_byte(double x)
{
    if (!(x > 0)) return 0;
    if (x >= 1) return 255;
    return (unsigned char)lround(255 * x);
}

/* One voxel's glyph: its outline radius and colour along each angle. */
typedef struct glyph {
    float radius[NANGLES];
    unsigned char rgb[NANGLES][3];
} glyph;

/* Fills the glyphs of one panel's voxels (row-major, hor fastest); returns the largest radius
 * (NaN: out of memory). */
static double panel_glyphs(const dm_volume *fod, const dm_ras_view *rv, const dm_panel_axes *pa,
                           int lmax, glyph *out)
{
    const int nc = dm_sh_ncoef(lmax), nh = rv->n[pa->hor], nv = rv->n[pa->ver];
    /* World unit vectors of the panel: right, up, and the normal. */
    double right[3] = {0, 0, 0}, up[3] = {0, 0, 0}, normal[3] = {0, 0, 0};
    right[pa->hor] = pa->hor_rev ? -1 : 1;
    up[pa->ver] = pa->ver_rev ? 1 : -1;
    normal[pa->normal] = 1;
    double *basis = malloc((size_t)NANGLES * NELEV * nc * sizeof *basis);
    double dirs[NANGLES][NELEV][3], cosb[NELEV];
    if (!basis) return NAN;
    for (int a = 0; a < NANGLES; a++)
        for (int e = 0; e < NELEV; e++) {
            double alpha = M_PI * a / NANGLES,
                   beta = (e - NELEV / 2) * (M_PI / 2) / (NELEV / 2 + 0.5);
            cosb[e] = cos(beta);
            for (int k = 0; k < 3; k++)
                dirs[a][e][k] = cos(beta) * (cos(alpha) * right[k] + sin(alpha) * up[k]) +
                                sin(beta) * normal[k];
            dm_sh_basis(lmax, dirs[a][e], basis + ((size_t)a * NELEV + e) * nc);
        }
    double largest = 0;
#pragma omp parallel for schedule(dynamic, 16) reduction(max : largest)
    for (int i = 0; i < nh * nv; i++) {
        int c[3];
        c[pa->normal] = rv->n[pa->normal] / 2;
        c[pa->hor] = pa->hor_rev ? nh - 1 - i % nh : i % nh;
        c[pa->ver] = pa->ver_rev ? nv - 1 - i / nh : i / nh;
        double coef[(DM_SH_LMAX_MAX + 1) * (DM_SH_LMAX_MAX + 2) / 2];
        int finite = 1;
        for (int j = 0; j < nc; j++) {
            coef[j] = fod->data[dm_ras_index(rv, c, j)];
            finite &= isfinite(coef[j]);
        }
        glyph *g = &out[i];
        memset(g, 0, sizeof *g);
        if (!finite) continue;
        for (int a = 0; a < NANGLES; a++) {
            int best = -1;
            double reach = 0;
            for (int e = 0; e < NELEV; e++) {
                const double *Y = basis + ((size_t)a * NELEV + e) * nc;
                double f = 0;
                for (int j = 0; j < nc; j++) f += coef[j] * Y[j];
                if (f * cosb[e] > reach) reach = f * cosb[e], best = e;
            }
            g->radius[a] = (float)reach;
            for (int k = 0; best >= 0 && k < 3; k++) g->rgb[a][k] = to_byte(fabs(dirs[a][best][k]));
            if (reach > largest) largest = reach;
        }
    }
    free(basis);
    return largest;
}

int dm_render_fod_glyphs(const dm_volume *fod, int cell, dm_picture *pic)
{
    memset(pic, 0, sizeof *pic);
    if (!dm_is_sh_count(fod->nt))
        return dm_set_error("render: %d volumes is not an FOD (an SH count: 6, 15, 28, 45, ...)",
                            fod->nt);
    if (cell == 0) cell = DM_GLYPH_CELL_DEFAULT;
    if (cell < 2 || cell > 64)
        return dm_set_error("render: glyph cells of %d pixels (2 to 64)", cell);
    const int lmax = dm_sh_lmax_for(fod->nt);
    dm_ras_view rv;
    dm_ras_setup(fod, &rv);
    const int gap = 4;
    int width = 0, height = 0, x0[3];
    for (int p = 0; p < 3; p++) {
        x0[p] = width;
        width += rv.n[dm_mid_panels[p].hor] * cell + (p < 2 ? gap : 0);
        if (rv.n[dm_mid_panels[p].ver] * cell > height) height = rv.n[dm_mid_panels[p].ver] * cell;
    }
    if ((double)width * height > 1e8)
        return dm_set_error("view: the picture would be %dx%d pixels; lower --zoom", width, height);
    glyph *glyphs[3] = {NULL, NULL, NULL};
    double largest = 0;
    int rc = 0;
    for (int p = 0; p < 3 && rc == 0; p++) {
        const dm_panel_axes *pa = &dm_mid_panels[p];
        glyphs[p] = malloc((size_t)rv.n[pa->hor] * rv.n[pa->ver] * sizeof *glyphs[p]);
        double l = glyphs[p] ? panel_glyphs(fod, &rv, pa, lmax, glyphs[p]) : NAN;
        if (isnan(l)) rc = dm_set_error("out of memory for the glyphs");
        largest = fmax(largest, l);
    }
    pic->width = width;
    pic->height = height;
    pic->channels = 3;
    pic->pixels = rc == 0 ? calloc((size_t)width * height * 3, 1) : NULL;
    if (rc == 0 && !pic->pixels)
        rc = dm_set_error("out of memory for a %dx%d picture", width, height);
    /* Each pixel of a cell: its angle bin and its distance from the centre in half cells (the
     * largest glyph reaches 0.95 of the half cell). */
    int *bin = malloc((size_t)cell * cell * sizeof *bin);
    double *dist = malloc((size_t)cell * cell * sizeof *dist);
    if (rc == 0 && (!bin || !dist)) rc = dm_set_error("out of memory");
    for (int y = 0; rc == 0 && y < cell; y++)
        for (int x = 0; x < cell; x++) {
            double dx = x - (cell - 1) / 2.0, dy = (cell - 1) / 2.0 - y; /* dy: up */
            double alpha = atan2(dy, dx);
            int b = (int)lround(alpha / (M_PI / NANGLES));
            bin[y * cell + x] = ((b % NANGLES) + NANGLES) % NANGLES;
            dist[y * cell + x] = hypot(dx, dy) / (cell / 2.0);
        }
    for (int p = 0; rc == 0 && p < 3; p++) {
        const dm_panel_axes *pa = &dm_mid_panels[p];
        const int nh = rv.n[pa->hor], nv = rv.n[pa->ver], y0 = (height - nv * cell) / 2;
        for (int i = 0; i < nh * nv; i++) {
            const glyph *g = &glyphs[p][i];
            int cx = x0[p] + (i % nh) * cell, cy = y0 + (i / nh) * cell;
            for (int k = 0; k < cell * cell; k++) {
                double r = largest > 0 ? 0.95 * g->radius[bin[k]] / largest : 0;
                if (!(dist[k] <= r) || r <= 0) continue;
                unsigned char *px =
                    pic->pixels + ((size_t)(cy + k / cell) * width + cx + k % cell) * 3;
                memcpy(px, g->rgb[bin[k]], 3);
            }
        }
    }
    free(bin);
    free(dist);
    for (int p = 0; p < 3; p++) free(glyphs[p]);
    if (rc != 0) dm_picture_free(pic);
    return rc;
}
