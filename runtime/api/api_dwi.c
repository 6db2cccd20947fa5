/* The public API's diffusion-weighted input (include/dimoc.h, dimoc_dwi_input), shared by the
 * tensor fit, response estimation and CSD: the caller's arrays checked and taken as views of
 * the engines (io/space.h), the gradient table in FSL's frame. */
#include "api/api_common.h"
#include "io/gradients.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The view of a caller's 3D or 4D array (read in place) on the grid of v2w. */
static int view_of(const dimoc_array *a, const dm_affine *v2w, const char *name, dm_image_view *v)
{
    memset(v, 0, sizeof *v);
    v->data = a->data;
    v->type = a->dtype == DIMOC_FLOAT32   ? DM_VIEW_F32
              : a->dtype == DIMOC_FLOAT64 ? DM_VIEW_F64
              : a->dtype == DIMOC_UINT8   ? DM_VIEW_U8
                                          : -1;
    v->ndim = a->ndim;
    v->name = name;
    v->v2w = *v2w;
    for (int k = 0; k < 3; k++)
        v->voxel[k] = sqrt(v2w->m[0][k] * v2w->m[0][k] + v2w->m[1][k] * v2w->m[1][k] +
                           v2w->m[2][k] * v2w->m[2][k]);
    if (v->type < 0 || a->ndim < 3 || a->ndim > 4) return -1;
    for (int k = 0; k < a->ndim; k++) {
        v->shape[k] = a->shape[k];
        v->stride[k] = a->strides[k];
        if (a->shape[k] == 0 || a->shape[k] > (1u << 30)) return -1;
    }
    return 0;
}

dimoc_status dm_api_dwi_view(const dimoc_dwi_input *in, const char *name, dm_api_dwi *d)
{
    memset(d, 0, sizeof *d);
    dm_affine_identity(&d->v2w);
    if (in->affine) {
        for (int i = 0; i < 16; i++) {
            if (!isfinite(in->affine[i]))
                return dm_api_fail(DIMOC_E_ARGUMENT, "affine: not finite");
            d->v2w.m[i / 4][i % 4] = in->affine[i];
        }
        dm_affine inv;
        if (dm_affine_invert(&d->v2w, &inv) != 0)
            return dm_api_fail(DIMOC_E_ARGUMENT, "affine: singular");
    }
    const dimoc_array *a = &in->data;
    if (!a->data) return dm_api_fail(DIMOC_E_ARGUMENT, "%s: not given", name);
    if ((a->dtype != DIMOC_FLOAT32 && a->dtype != DIMOC_FLOAT64) || a->ndim != 4 ||
        view_of(a, &d->v2w, name, &d->data) != 0)
        return dm_api_fail(DIMOC_E_ARGUMENT,
                           "%s: expected 4 dimensions (X x Y x Z x volumes) "
                           "of float32 or float64 values",
                           name);
    if (in->mask.data) {
        if (in->mask.ndim != 3 || view_of(&in->mask, &d->v2w, "mask", &d->mask) != 0)
            return dm_api_fail(DIMOC_E_ARGUMENT, "mask: expected 3 dimensions (X x Y x Z) of "
                                                 "uint8, float32 or float64 values");
        for (int k = 0; k < 3; k++)
            if (in->mask.shape[k] != a->shape[k])
                return dm_api_fail(DIMOC_E_ARGUMENT,
                                   "mask: %zux%zux%zu is not the %s's grid "
                                   "(%zux%zux%zu)",
                                   in->mask.shape[0], in->mask.shape[1], in->mask.shape[2], name,
                                   a->shape[0], a->shape[1], a->shape[2]);
    }
    return DIMOC_OK;
}

dimoc_status dm_api_dwi_take(const dimoc_dwi_input *in, dm_api_dwi *d)
{
    dimoc_status rc = dm_api_dwi_view(in, "data", d);
    if (rc != DIMOC_OK) return rc;
    const int M = (int)in->data.shape[3];
    if (in->grad) {
        if (in->bvals || in->bvecs)
            return dm_api_fail(DIMOC_E_ARGUMENT, "grad: given with bvals or bvecs; give one "
                                                 "table");
        if (!in->affine)
            return dm_api_fail(DIMOC_E_ARGUMENT, "grad: an affine (voxel -> world) is needed to "
                                                 "turn the table into the image's frame");
        if (dm_gradients_from_world(in->grad, M, in->affine, "grad", &d->b, &d->g) != 0)
            return dm_api_fail_words(DIMOC_E_ARGUMENT);
        d->table = "grad";
        return DIMOC_OK;
    }
    if (!in->bvals || !in->bvecs)
        return dm_api_fail(DIMOC_E_ARGUMENT,
                           "%s: not given (bvals and bvecs, or grad, give the "
                           "gradient table)",
                           in->bvals ? "bvecs" : "bvals");
    if ((rc = dm_api_check_table(in->bvals, in->bvecs, M)) != DIMOC_OK) return rc;
    d->b = malloc((size_t)M * sizeof *d->b);
    d->g = malloc((size_t)M * 3 * sizeof *d->g);
    if (!d->b || !d->g) return dm_api_fail(DIMOC_E_MEMORY, "out of memory for the table");
    memcpy(d->b, in->bvals, (size_t)M * sizeof *d->b);
    memcpy(d->g, in->bvecs, (size_t)M * 3 * sizeof *d->g);
    d->table = "bvecs";
    return DIMOC_OK;
}

void dm_api_dwi_free(dm_api_dwi *d)
{
    free(d->b);
    free(d->g);
    memset(d, 0, sizeof *d);
}
