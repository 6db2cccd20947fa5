/* `dimoc dti`'s side of the tensor fit (dti_maps.h): its files (the data, the gradient table,
 * the mask) read into the views the fit takes, and the maps written with FSL's names.  The C
 * API links none of this. */
#include "dti/dti_maps.h"
#include "io/gradients.h"
#include "io/textio.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "util/outdir.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int dm_dti_files_read(dm_dti_files *f, const char *data, const char *bvals, const char *bvecs,
                      const char *grad, const char *mask)
{
    memset(f, 0, sizeof *f);
    if (dm_volume_read(data, &f->data) != 0) return -1;
    if (f->data.nt < 7)
        return dm_set_error("%s: %d volume%s; a tensor fit needs a 4D image of at least 7", data,
                            f->data.nt, f->data.nt == 1 ? "" : "s");
    const dm_grad_files grads = {bvals, bvecs, grad};
    const char *table = NULL;
    if (dm_read_gradients(&grads, &f->data, data, &f->bvals, &f->bvecs, &table) != 0) return -1;
    if (mask && dm_volume_read(mask, &f->mask) != 0) return -1;
    if (mask && f->mask.nt > 1)
        return dm_set_error("%s: a 4D image (%dx%dx%dx%d); a mask is 3D", mask, f->mask.nx,
                            f->mask.ny, f->mask.nz, f->mask.nt);
    if (mask && dm_volume_check_same_space(&f->mask, mask, &f->data, data) != 0) return -1;
    const dm_image_view dv = dm_view_of_volume(&f->data, data);
    const dm_image_view mv = dm_view_of_volume(&f->mask, mask);
    return dm_dti_image_build(&f->im, &dv, mask ? &mv : NULL, f->bvals, f->bvecs,
                              bvecs ? bvecs : table);
}

void dm_dti_files_free(dm_dti_files *f)
{
    dm_dti_image_free(&f->im);
    free(f->bvals);
    free(f->bvecs);
    dm_volume_free(&f->data);
    dm_volume_free(&f->mask);
    memset(f, 0, sizeof *f);
}

int dm_dti_maps_write(const dm_dti_maps *m, const dm_volume *like, const char *dir,
                      const char *prefix, int save_tensor, int save_sse, dm_provenance *prov)
{
    const char *pre = prefix ? prefix : "";
    dm_outdir od;
    if (dm_outdir_begin(&od, dir, *pre ? DM_OUTDIR_MERGE : DM_OUTDIR_REPLACE) != 0) return -1;
    int rc = 0;
    for (int k = 0; k < DM_DTI_NMAPS && rc == 0; k++) {
        if ((k == DM_DTI_MAP_TENSOR && !save_tensor) || (k == DM_DTI_MAP_SSE && !save_sse))
            continue;
        char name[512];
        snprintf(name, sizeof name, "%s%s.nii.gz", pre, dm_dti_map_names[k]);
        char *path = dm_volume_output_path(od.path, name);
        rc = path ? dm_volume_write(path, like, dm_dti_map_volumes[k], m->map[k], DM_OUT_FLOAT32)
                  : dm_set_error("out of memory");
        free(path);
    }
    if (rc == 0) {
        dm_dti_provenance(prov, m);
        char name[512];
        snprintf(name, sizeof name, "%sprovenance.json", pre);
        char *path = dm_path_join(od.path, name);
        rc = dm_provenance_write(prov, path);
        free(path);
    }
    if (rc == 0) return dm_outdir_commit(&od);
    dm_outdir_abort(&od);
    return -1;
}
