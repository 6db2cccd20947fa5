/* Binary mask operations (mask_morph.h): integer work only, OpenMP over slices where a voxel's
 * result depends on its neighbours alone; the connected components are one sequential flood. */
#include "mask/mask_morph.h"

#include "util/error.h"

#include <stdlib.h>
#include <string.h>

/* Box sum of width 3 along one axis (stride `step`, length `len` on that axis), clipped at the
 * ends: out[i] = in[i - step] + in[i] + in[i + step] where those exist. */
static void box3_axis(dm_grid3 g, const uint8_t *in, uint8_t *out, int axis)
{
    size_t step = axis == 0 ? 1 : axis == 1 ? (size_t)g.nx : (size_t)g.nx * g.ny;
    int len = axis == 0 ? g.nx : axis == 1 ? g.ny : g.nz;
#pragma omp parallel for schedule(static)
    for (int z = 0; z < g.nz; z++)
        for (int y = 0; y < g.ny; y++)
            for (int x = 0; x < g.nx; x++) {
                size_t v = ((size_t)z * g.ny + y) * g.nx + x;
                int at = axis == 0 ? x : axis == 1 ? y : z;
                int s = in[v];
                if (at > 0) s += in[v - step];
                if (at < len - 1) s += in[v + step];
                out[v] = (uint8_t)s;
            }
}

int dm_mask_median3(dm_grid3 g, const uint8_t *in, uint8_t *out)
{
    size_t n = DM_GRID3_NVOX(g);
    uint8_t *a = malloc(n ? n : 1), *b = malloc(n ? n : 1);
    if (!a || !b) {
        free(a);
        free(b);
        return dm_set_error("out of memory filtering a %dx%dx%d mask", g.nx, g.ny, g.nz);
    }
    /* the neighbourhood's count of set voxels as three box sums of width 3 */
    for (size_t v = 0; v < n; v++) a[v] = in[v] != 0;
    box3_axis(g, a, b, 0);
    box3_axis(g, b, a, 1);
    box3_axis(g, a, b, 2);
#pragma omp parallel for schedule(static)
    for (int z = 0; z < g.nz; z++)
        for (int y = 0; y < g.ny; y++)
            for (int x = 0; x < g.nx; x++) {
                /* the clipped neighbourhood's size, axis by axis */
                int wx = 1 + (x > 0) + (x < g.nx - 1), wy = 1 + (y > 0) + (y < g.ny - 1),
                    wz = 1 + (z > 0) + (z < g.nz - 1);
                size_t v = ((size_t)z * g.ny + y) * g.nx + x;
                out[v] = 2 * (int)b[v] >= wx * wy * wz;
            }
    free(a);
    free(b);
    return 0;
}

int dm_mask_largest_component(dm_grid3 g, const uint8_t *in, uint8_t *out)
{
    size_t n = DM_GRID3_NVOX(g);
    uint32_t *label = calloc(n ? n : 1, sizeof *label);
    size_t *stack = malloc((n ? n : 1) * sizeof *stack);
    size_t cap = 64, nlabel = 0;
    size_t *size = malloc(cap * sizeof *size);
    if (!label || !stack || !size) {
        free(label);
        free(stack);
        free(size);
        return dm_set_error("out of memory labelling the components of a %dx%dx%d mask", g.nx, g.ny,
                            g.nz);
    }
    const size_t sx = 1, sy = (size_t)g.nx, sz = (size_t)g.nx * g.ny;
    for (size_t seed = 0; seed < n; seed++) {
        if (!in[seed] || label[seed]) continue;
        if (nlabel == cap) {
            size_t *grown = realloc(size, 2 * cap * sizeof *size);
            if (!grown) {
                free(label);
                free(stack);
                free(size);
                return dm_set_error("out of memory labelling the components of a %dx%dx%d mask",
                                    g.nx, g.ny, g.nz);
            }
            size = grown;
            cap *= 2;
        }
        uint32_t id = (uint32_t)++nlabel;
        size_t top = 0, count = 0;
        label[seed] = id;
        stack[top++] = seed;
        while (top) {
            size_t v = stack[--top];
            count++;
            int x = (int)(v % sy), y = (int)(v / sy % g.ny), z = (int)(v / sz);
            size_t nb[6];
            int k = 0;
            if (x > 0) nb[k++] = v - sx;
            if (x < g.nx - 1) nb[k++] = v + sx;
            if (y > 0) nb[k++] = v - sy;
            if (y < g.ny - 1) nb[k++] = v + sy;
            if (z > 0) nb[k++] = v - sz;
            if (z < g.nz - 1) nb[k++] = v + sz;
            for (int i = 0; i < k; i++)
                if (in[nb[i]] && !label[nb[i]]) {
                    label[nb[i]] = id;
                    stack[top++] = nb[i];
                }
        }
        size[nlabel - 1] = count;
    }
    uint32_t best = 0;
    for (size_t l = 0; l < nlabel; l++)
        if (!best || size[l] > size[best - 1]) best = (uint32_t)(l + 1);
#pragma omp parallel for schedule(static)
    for (size_t v = 0; v < n; v++) out[v] = best && label[v] == best;
    free(label);
    free(stack);
    free(size);
    return 0;
}

int dm_mask_fill_holes(dm_grid3 g, uint8_t *mask)
{
    size_t n = DM_GRID3_NVOX(g);
    for (size_t v = 0; v < n; v++) mask[v] = !mask[v];
    if (dm_mask_largest_component(g, mask, mask) != 0) return -1;
    for (size_t v = 0; v < n; v++) mask[v] = !mask[v];
    return 0;
}

/* One pass of erosion (erode = 1) or dilation into out (distinct from in). */
static void morph_pass(dm_grid3 g, const uint8_t *in, uint8_t *out, int erode)
{
    const size_t sy = (size_t)g.nx, sz = (size_t)g.nx * g.ny;
#pragma omp parallel for schedule(static)
    for (int z = 0; z < g.nz; z++)
        for (int y = 0; y < g.ny; y++)
            for (int x = 0; x < g.nx; x++) {
                size_t v = (size_t)z * sz + (size_t)y * sy + (size_t)x;
                uint8_t r;
                if (erode) {
                    r = in[v] && x > 0 && y > 0 && z > 0 && x < g.nx - 1 && y < g.ny - 1 &&
                        z < g.nz - 1 && in[v - 1] && in[v + 1] && in[v - sy] && in[v + sy] &&
                        in[v - sz] && in[v + sz];
                } else {
                    r = in[v] || (x > 0 && in[v - 1]) || (x < g.nx - 1 && in[v + 1]) ||
                        (y > 0 && in[v - sy]) || (y < g.ny - 1 && in[v + sy]) ||
                        (z > 0 && in[v - sz]) || (z < g.nz - 1 && in[v + sz]);
                }
                out[v] = r;
            }
}

static int morph(dm_grid3 g, const uint8_t *in, uint8_t *out, int passes, int erode)
{
    size_t n = DM_GRID3_NVOX(g);
    uint8_t *a = malloc(n ? n : 1), *b = malloc(n ? n : 1);
    if (!a || !b) {
        free(a);
        free(b);
        return dm_set_error("out of memory %s a %dx%dx%d mask", erode ? "eroding" : "dilating",
                            g.nx, g.ny, g.nz);
    }
    memcpy(a, in, n);
    for (int p = 0; p < passes; p++) {
        morph_pass(g, a, b, erode);
        uint8_t *t = a;
        a = b;
        b = t;
    }
    memcpy(out, a, n);
    free(a);
    free(b);
    return 0;
}

int dm_mask_erode(dm_grid3 g, const uint8_t *in, uint8_t *out, int passes)
{
    return morph(g, in, out, passes, 1);
}

int dm_mask_dilate(dm_grid3 g, const uint8_t *in, uint8_t *out, int passes)
{
    return morph(g, in, out, passes, 0);
}

/* One scale s of the cleaning, in place: what s erosions cut off the largest component, grown
 * by s + 1 dilations, is removed.  work: two arrays of the grid's size. */
static int clean_scale(dm_grid3 g, uint8_t *mask, int s, uint8_t *cut, uint8_t *largest)
{
    size_t n = DM_GRID3_NVOX(g);
    if (dm_mask_erode(g, mask, cut, s) != 0 || dm_mask_largest_component(g, cut, largest) != 0)
        return -1;
    for (size_t v = 0; v < n; v++)
        if (largest[v]) cut[v] = 0;
    if (dm_mask_dilate(g, cut, cut, s + 1) != 0) return -1;
    for (size_t v = 0; v < n; v++)
        if (cut[v]) mask[v] = 0;
    return 0;
}

/* The number of erosions that leave some voxel of the mask set (0 for an empty mask). */
static int erosion_depth(dm_grid3 g, const uint8_t *mask, uint8_t *a, uint8_t *b)
{
    size_t n = DM_GRID3_NVOX(g);
    int depth = 0;
    memcpy(a, mask, n);
    for (;;) {
        morph_pass(g, a, b, 1);
        if (!memchr(b, 1, n)) return depth;
        depth++;
        uint8_t *t = a;
        a = b;
        b = t;
    }
}

int dm_mask_clean(dm_grid3 g, uint8_t *mask, int scale)
{
    size_t n = DM_GRID3_NVOX(g);
    uint8_t *prev = malloc(n ? n : 1), *cut = malloc(n ? n : 1), *largest = malloc(n ? n : 1);
    int rc = 0;
    if (!prev || !cut || !largest) {
        rc = dm_set_error("out of memory cleaning a %dx%dx%d mask", g.nx, g.ny, g.nz);
        goto done;
    }
    for (;;) {
        /* a scale beyond the mask's erosion depth erodes it away: nothing is cut there, so
         * the scales start at the depth (the mask only shrinks during a pass) */
        int depth = erosion_depth(g, mask, cut, largest);
        memcpy(prev, mask, n);
        for (int s = scale < depth ? scale : depth; s > 0 && rc == 0; s--)
            rc = clean_scale(g, mask, s, cut, largest);
        if (rc == 0) rc = dm_mask_largest_component(g, mask, mask);
        if (rc != 0 || !memcmp(prev, mask, n)) break;
    }
done:
    free(prev);
    free(cut);
    free(largest);
    return rc;
}
