/* Reading a diffusion-weighted image for CSD (dwi.h): the files; csd_run.c builds the rest. */
#include "csd/dwi.h"

#include "io/gradients.h"
#include "io/space.h"
#include "util/error.h"

#include <stdlib.h>
#include <string.h>

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
    double R[3][3];
    dm_volume_bvec_rotation(&d->data, R);
    int rc = dm_dwi_build(d, g, R, bvals, bvecs);
    free(g);
    return rc;
fail:
    free(g);
    return -1;
}

void dm_dwi_free(dm_dwi *d)
{
    dm_volume_free(&d->data);
    dm_volume_free(&d->mask);
    dm_dwi_release(d);
}
