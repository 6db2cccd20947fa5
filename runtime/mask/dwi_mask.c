/* dwi2mask's brain mask (dwi_mask.h): the shells' mean images, their optimal thresholds, and
 * the mask's cleaning through mask_morph.h; `dimoc mask`'s reading and writing. */
#include "mask/dwi_mask.h"

#include "io/formats.h"
#include "mask/mask_morph.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/json.h"
#include "util/outdir.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The threshold's search reproduces MRtrix's double and float roundings operation by operation:
 * no product may be fused into an addition (a build with -march=native would otherwise). */
#if defined(__clang__)
#pragma STDC FP_CONTRACT OFF
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

void dm_shell_mean(const dm_dwi *d, int shell, float *mean)
{
    const size_t nvox = DM_NVOX(&d->data);
    const double count = (double)d->shell_count[shell];
#pragma omp parallel for schedule(static)
    for (size_t v = 0; v < nvox; v++) {
        double sum = 0.0;
        for (int t = 0; t < d->nvol; t++) {
            if (d->shell_of[t] != shell) continue;
            float x = (float)d->data.data[v + (size_t)t * nvox];
            if (x > 0.0f) sum += x;
        }
        mean[v] = (float)(sum / count);
    }
}

/* The finite values of an image and the sums the correlation needs, made in fixed blocks of
 * values whose partial sums are added in block order: the same bits on any number of threads.
 * Each block sums in long double, the whole is rounded to double once. */
enum { SUM_BLOCK = 1 << 15 };

typedef struct threshold_cost {
    const float *value; /* the finite values */
    size_t n;
    size_t nblock;
    size_t *block_count;
    long double *block_sum;
    double mean, stdev; /* of the values */
} threshold_cost;

/* The number and the sum of the values above t. */
static void above(const threshold_cost *c, double t, size_t *count, double *sum)
{
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < c->nblock; b++) {
        size_t end = (b + 1) * SUM_BLOCK < c->n ? (b + 1) * SUM_BLOCK : c->n, k = 0;
        long double s = 0.0L;
        for (size_t i = b * SUM_BLOCK; i < end; i++)
            if (c->value[i] > t) {
                k++;
                s += c->value[i];
            }
        c->block_count[b] = k;
        c->block_sum[b] = s;
    }
    size_t k = 0;
    long double s = 0.0L;
    for (size_t b = 0; b < c->nblock; b++) {
        k += c->block_count[b];
        s += c->block_sum[b];
    }
    *count = k;
    *sum = (double)s;
}

/* Minus the correlation of the image with its mask at threshold t, in MRtrix's operations: the
 * threshold and the cost are single precision, the sums double. */
static float cost_at(const threshold_cost *c, float t)
{
    size_t k;
    double mean_xy;
    above(c, t, &k, &mean_xy);
    const double count = (double)c->n, sum = (double)k;
    mean_xy /= count;
    double covariance = mean_xy - (sum / count) * c->mean;
    double mask_stdev = sqrt((sum - (sum * sum) / count) / count);
    return (float)(-covariance / (c->stdev * mask_stdev));
}

int dm_optimal_threshold(const float *image, size_t n, float *threshold)
{
    threshold_cost c = {0};
    float *value = malloc((n ? n : 1) * sizeof *value);
    if (!value) return dm_set_error("out of memory thresholding an image of %zu voxels", n);
    float lo = INFINITY, hi = -INFINITY;
    for (size_t i = 0; i < n; i++)
        if (isfinite(image[i])) {
            value[c.n++] = image[i];
            if (image[i] < lo) lo = image[i];
            if (image[i] > hi) hi = image[i];
        }
    if (c.n == 0) {
        free(value);
        return dm_set_error("an image without a finite value has no threshold");
    }
    c.value = value;
    c.nblock = (c.n + SUM_BLOCK - 1) / SUM_BLOCK;
    c.block_count = malloc(c.nblock * sizeof *c.block_count);
    c.block_sum = malloc(c.nblock * sizeof *c.block_sum);
    long double *block_sqr = malloc(c.nblock * sizeof *block_sqr);
    if (!c.block_count || !c.block_sum || !block_sqr) {
        free(value);
        free(c.block_count);
        free(c.block_sum);
        free(block_sqr);
        return dm_set_error("out of memory thresholding an image of %zu voxels", n);
    }
#pragma omp parallel for schedule(static)
    for (size_t b = 0; b < c.nblock; b++) {
        size_t end = (b + 1) * SUM_BLOCK < c.n ? (b + 1) * SUM_BLOCK : c.n;
        long double s = 0.0L, s2 = 0.0L;
        for (size_t i = b * SUM_BLOCK; i < end; i++) {
            double x = value[i];
            s += x;
            s2 += x * x; /* exact in double: a float's square */
        }
        c.block_sum[b] = s;
        block_sqr[b] = s2;
    }
    long double s = 0.0L, s2 = 0.0L;
    for (size_t b = 0; b < c.nblock; b++) {
        s += c.block_sum[b];
        s2 += block_sqr[b];
    }
    free(block_sqr);
    const double sum = (double)s, sum_sqr = (double)s2, count = (double)c.n;
    c.mean = sum / count;
    c.stdev = sqrt((sum_sqr - sum * c.mean) / count);

    /* The golden-section search in double over a bracket of float sums, as MRtrix's. */
    const float range = hi - lo, mid = lo + hi;
    double x0 = lo + 0.001 * range, x3 = hi - 0.001 * range, init = 0.5 * mid;
    const double g1 = 0.61803399, g2 = 1 - g1, tolerance = 0.01;
    double x1, x2;
    if (fabs(x3 - init) > fabs(init - x0)) {
        x1 = init;
        x2 = init + g2 * (x3 - init);
    } else {
        x2 = init;
        x1 = init - g2 * (init - x0);
    }
    double f1 = cost_at(&c, (float)x1), f2 = cost_at(&c, (float)x2);
    while (tolerance * (fabs(x1) + fabs(x2)) < fabs(x3 - x0)) {
        if (f2 < f1) {
            x0 = x1;
            x1 = x2;
            x2 = g1 * x1 + g2 * x3;
            f1 = f2;
            f2 = cost_at(&c, (float)x2);
        } else {
            x3 = x2;
            x2 = x1;
            x1 = g1 * x2 + g2 * x0;
            f2 = f1;
            f1 = cost_at(&c, (float)x1);
        }
    }
    *threshold = (float)(f1 < f2 ? x1 : x2);
    free(value);
    free(c.block_count);
    free(c.block_sum);
    return 0;
}

int dm_dwi_mask(const dm_dwi *d, int clean_scale, uint8_t *mask, dm_dwi_mask_report *r)
{
    const dm_grid3 g = {d->data.nx, d->data.ny, d->data.nz};
    const size_t n = DM_GRID3_NVOX(g);
    memset(r, 0, sizeof *r);
    r->nshell = d->nshell;
    float *mean = malloc((n ? n : 1) * sizeof *mean);
    if (!mean) return dm_set_error("%s: out of memory for a mean image", d->data_path);
    memset(mask, 0, n);
    for (int s = 0; s < d->nshell; s++) {
        r->shell_b[s] = d->shell_b[s];
        r->shell_count[s] = d->shell_count[s];
        dm_shell_mean(d, s, mean);
        if (dm_optimal_threshold(mean, n, &r->threshold[s]) != 0) {
            dm_set_error("%s: the shell of b = %g: %s", d->data_path, d->shell_b[s],
                         dm_last_error());
            free(mean);
            return -1;
        }
        const float t = r->threshold[s];
        size_t above_t = 0;
        for (size_t v = 0; v < n; v++)
            if (isfinite(mean[v]) && mean[v] > t) {
                mask[v] = 1;
                above_t++;
            }
        r->shell_voxels[s] = above_t;
    }
    free(mean);

    /* median, the largest component, its holes filled */
    uint8_t *work = malloc(n ? n : 1);
    if (!work) return dm_set_error("%s: out of memory for the mask", d->data_path);
    if (dm_mask_median3(g, mask, work) != 0 || dm_mask_largest_component(g, work, work) != 0 ||
        dm_mask_fill_holes(g, work) != 0) {
        free(work);
        return -1;
    }
    memcpy(mask, work, n);
    free(work);

    if (clean_scale > 0 && (g.nx == 1 || g.ny == 1 || g.nz == 1)) {
        dm_warn("%s: an axis of one voxel (%dx%dx%d): the mask is not cleaned", d->data_path, g.nx,
                g.ny, g.nz);
    } else if (clean_scale > 0) {
        if (dm_mask_clean(g, mask, clean_scale) != 0) return -1;
        r->cleaned = 1;
        /* a voxel whose every measurement is zero or not finite is no brain */
        const size_t nvox = DM_NVOX(&d->data);
#pragma omp parallel for schedule(static)
        for (size_t v = 0; v < n; v++) {
            if (!mask[v]) continue;
            int any = 0;
            for (int t = 0; t < d->nvol && !any; t++) {
                float x = (float)d->data.data[v + (size_t)t * nvox];
                any = isfinite(x) && x != 0.0f;
            }
            mask[v] = (uint8_t)any;
        }
    }
    for (size_t v = 0; v < n; v++) r->voxels += mask[v];
    return 0;
}

/* The mask and, with a provenance record, its sidecar (OUT.provenance.json), put in place
 * together. */
static int write_outputs(const char *out, const dm_volume *like, const double *values,
                         dm_provenance *prov, const dm_dwi_mask_report *r)
{
    char *tmp[2] = {dm_volume_temp_name(out), NULL}, *final[2] = {(char *)out, NULL};
    int n = prov ? 2 : 1, rc = tmp[0] ? 0 : -1;
    if (rc == 0 && prov) {
        final[1] = dm_provenance_sidecar(out);
        tmp[1] = final[1] ? dm_temp_sibling(final[1]) : NULL;
        if (!tmp[1]) rc = dm_set_error("out of memory");
    }
    if (rc == 0) rc = dm_volume_write(tmp[0], like, 1, values, DM_OUT_UINT8);
    if (rc == 0 && prov) {
        dm_provenance_num(prov, DM_PROV_RESULT, "voxels", (double)r->voxels);
        dm_provenance_num(prov, DM_PROV_RESULT, "shells", r->nshell);
        for (int s = 0; s < r->nshell; s++) { /* shell1_b, shell1_threshold, ... */
            char key[64];
            snprintf(key, sizeof key, "shell%d_b", s + 1);
            dm_provenance_num(prov, DM_PROV_RESULT, key, r->shell_b[s]);
            snprintf(key, sizeof key, "shell%d_threshold", s + 1);
            dm_provenance_num(prov, DM_PROV_RESULT, key, (double)r->threshold[s]);
        }
        dm_provenance_str(prov, DM_PROV_RESULT, "cleaned", r->cleaned ? "yes" : "no");
        rc = dm_provenance_write(prov, tmp[1]);
    }
    if (rc == 0) {
        rc = dm_commit_files(tmp, final, n); /* renames them, or removes them */
    } else {
        for (int i = 0; i < n; i++)
            if (tmp[i]) unlink(tmp[i]);
    }
    free(tmp[0]);
    free(tmp[1]);
    free(final[1]);
    return rc;
}

int dm_mask_run(const char *data, const char *bvals, const char *bvecs, const char *grad,
                const char *out, int clean_scale, int threads, dm_provenance *prov,
                dm_dwi_mask_report *r)
{
    if (dm_image_format_of(out) < 0)
        return dm_set_error("%s: the output's name must end in .nii.gz, .nii, .mif or .mif.gz",
                            out);
    dm_volume head = {0};
    if (dm_volume_read_header(data, &head) != 0) return -1;
    int nt = head.nt;
    dm_volume_free(&head);
    if (nt < 2)
        return dm_set_error("%s: a 3D image; a brain mask is made from the 4D diffusion-weighted "
                            "data",
                            data);
#ifdef _OPENMP
    if (threads > 0) omp_set_num_threads(threads);
#else
    (void)threads;
#endif
    dm_dwi d;
    if (dm_dwi_read_grad(&d, data, bvals, bvecs, grad, NULL) != 0) {
        dm_dwi_free(&d);
        return -1;
    }
    int rc = 0;
    uint8_t *mask = NULL;
    double *values = NULL;
    size_t n = DM_NVOX(&d.data);
    if (!d.has_b0) {
        rc = dm_set_error("%s: no b = 0 measurement (every b > %g); the mask needs the b = 0 "
                          "image",
                          bvals  ? bvals
                          : grad ? grad
                                 : data,
                          DM_BZERO_MAX);
        goto done;
    }
    mask = malloc(n ? n : 1);
    values = malloc((n ? n : 1) * sizeof *values);
    if (!mask || !values) {
        rc = dm_set_error("%s: out of memory for the mask", data);
        goto done;
    }
    if ((rc = dm_dwi_mask(&d, clean_scale, mask, r)) != 0) goto done;
    for (size_t v = 0; v < n; v++) values[v] = mask[v];
    rc = write_outputs(out, &d.data, values, prov, r);
done:
    free(mask);
    free(values);
    dm_dwi_free(&d);
    return rc;
}
