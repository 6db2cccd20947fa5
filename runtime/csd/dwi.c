/* Reading a diffusion-weighted image for CSD (dwi.h). */
#include "csd/dwi.h"

#include "io/gradients.h"
#include "io/space.h"
#include "util/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int dm_shells_group(int n, const double *b, double eps, double *shell_b, int *count, int *shell_of)
{
    int *order = malloc((size_t)(n > 0 ? n : 1) * sizeof *order);
    if (!order) return dm_set_error("out of memory grouping %d b-values", n);
    for (int i = 0; i < n; i++) order[i] = i;
    for (int k = 1; k < n; k++) /* insertion sort by b: stable, and n is a few hundred */
        for (int j = k; j > 0 && b[order[j - 1]] > b[order[j]]; j--) {
            int t = order[j];
            order[j] = order[j - 1];
            order[j - 1] = t;
        }
    int nshell = 0;
    double prev = 0.0;
    for (int k = 0; k < n; k++) {
        int i = order[k];
        int zero = b[i] <= DM_BZERO_MAX;
        int new_shell = nshell == 0 || (!zero && (prev <= DM_BZERO_MAX || b[i] - prev > eps));
        if (new_shell) {
            if (nshell == DM_MAX_SHELLS) {
                free(order);
                return dm_set_error("more than %d shells of b-values", DM_MAX_SHELLS);
            }
            shell_b[nshell] = 0.0;
            count[nshell] = 0;
            nshell++;
        }
        shell_of[i] = nshell - 1;
        shell_b[nshell - 1] += b[i];
        count[nshell - 1]++;
        prev = b[i];
    }
    for (int s = 0; s < nshell; s++) shell_b[s] /= count[s];
    free(order);
    return nshell;
}

int dm_dwi_read(dm_dwi *d, const char *data, const char *bvals, const char *bvecs, const char *mask)
{
    return dm_dwi_read_grad(d, data, bvals, bvecs, NULL, mask);
}

int dm_dwi_read_grad(dm_dwi *d, const char *data, const char *bvals, const char *bvecs,
                     const char *grad, const char *mask)
{
    memset(d, 0, sizeof *d);
    d->data_path = data;
    d->mask_path = mask;
    double *g = NULL;
    if (dm_volume_read(data, &d->data) != 0) return -1;
    if (d->data.nt < 2)
        return dm_set_error("%s: a 3D image; CSD needs the 4D diffusion-weighted data", data);
    const dm_grad_files grads = {bvals, bvecs, grad};
    const char *table = NULL;
    if (dm_read_gradients(&grads, &d->data, data, &d->bval, &g, &table) != 0) return -1;
    d->nvol = d->data.nt;
    if (!bvecs) bvecs = table; /* for messages: the file the table came from */
    if (!bvals) bvals = table;
    if (mask) {
        if (dm_volume_read(mask, &d->mask) != 0) goto fail;
        if (d->mask.nt > 1) {
            dm_set_error("%s: a 4D image; a mask is 3D", mask);
            goto fail;
        }
        if (dm_volume_check_same_space(&d->mask, mask, &d->data, data) != 0) goto fail;
    }
    d->dir = calloc((size_t)d->nvol * 3, sizeof *d->dir);
    d->shell_of = malloc((size_t)d->nvol * sizeof *d->shell_of);
    if (!d->dir || !d->shell_of) {
        dm_set_error("out of memory reading %s", data);
        goto fail;
    }
    double R[3][3];
    dm_volume_bvec_rotation(&d->data, R);
    for (int t = 0; t < d->nvol; t++) {
        if (!isfinite(d->bval[t]) || d->bval[t] < 0) {
            dm_set_error("%s: b-value %d is %g; b-values are finite and >= 0", bvals, t + 1,
                         d->bval[t]);
            goto fail;
        }
        if (d->bval[t] <= DM_BZERO_MAX) continue;
        double n =
            sqrt(g[3 * t] * g[3 * t] + g[3 * t + 1] * g[3 * t + 1] + g[3 * t + 2] * g[3 * t + 2]);
        if (!(n > 0.5 && n < 1.5)) {
            dm_set_error("%s: direction %d has length %g at b = %g; a diffusion-weighted "
                         "measurement needs a unit direction",
                         bvecs, t + 1, n, d->bval[t]);
            goto fail;
        }
        double u[3] = {g[3 * t] / n, g[3 * t + 1] / n, g[3 * t + 2] / n};
        dm_rotate3(R, u, d->dir + 3 * t, 0);
    }
    d->nshell = dm_shells_group(d->nvol, d->bval, 80.0, d->shell_b, d->shell_count, d->shell_of);
    if (d->nshell < 0) {
        dm_set_error("%s: %s", bvals, dm_last_error());
        goto fail;
    }
    d->has_b0 = d->shell_b[0] <= DM_BZERO_MAX;
    if (d->nshell == d->has_b0) {
        dm_set_error("%s: no diffusion-weighted measurements (every b <= %g)", bvals, DM_BZERO_MAX);
        goto fail;
    }
    size_t nall = DM_NVOX(&d->data);
    d->vox = malloc((nall ? nall : 1) * sizeof *d->vox);
    if (!d->vox) {
        dm_set_error("out of memory reading %s", data);
        goto fail;
    }
    for (size_t v = 0; v < nall; v++)
        if (!d->mask.data || (d->mask.data[v] != 0 && !isnan(d->mask.data[v])))
            d->vox[d->nvox++] = v;
    if (d->nvox == 0) {
        dm_set_error("%s: the mask is empty", mask);
        goto fail;
    }
    free(g);
    return 0;
fail:
    free(g);
    return -1;
}

void dm_dwi_free(dm_dwi *d)
{
    dm_volume_free(&d->data);
    dm_volume_free(&d->mask);
    free(d->bval);
    free(d->dir);
    free(d->shell_of);
    free(d->vox);
    memset(d, 0, sizeof *d);
}
