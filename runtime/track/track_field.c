#include "track/track_field.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/space.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* DIR/NAME as an image that exists, whatever its ending (.nii.gz, .nii, .mif, .mif.gz, .hdr:
 * a bedpostx folder written with --format mif too), malloc'd, or NULL when none does. */
static char *find_image(const char *dir, const char *name)
{
    char *path = dm_volume_find(dir, name);
    if (path && access(path, R_OK) == 0) return path;
    free(path);
    char file[512];
    snprintf(file, sizeof file, "%s.hdr", name);
    path = dm_path_join(dir, file);
    if (path && access(path, R_OK) == 0) return path;
    free(path);
    return NULL;
}

static int read_samples(const char *dir, const char *name, const dm_track_field *f, dm_volume *vol)
{
    char *path = find_image(dir, name);
    if (!path) return dm_set_error("track: %s has no %s.nii.gz", dir, name);
    int rc = dm_volume_read(path, vol);
    if (rc == 0) rc = dm_volume_check_same_grid(vol, path, &f->mask, "nodif_brain_mask");
    if (rc == 0 && vol->nt != f->nsamples)
        rc = dm_set_error("%s: %d samples, but merged_th1samples has %d", path, vol->nt,
                          f->nsamples);
    free(path);
    return rc;
}

int dm_track_field_load(const char *dir, int fsl_frame, dm_track_field *f)
{
    memset(f, 0, sizeof *f);
    char *mask_path = find_image(dir, "nodif_brain_mask");
    if (!mask_path) return dm_set_error("track: %s has no nodif_brain_mask.nii.gz", dir);
    int rc = dm_volume_read(mask_path, &f->mask);
    free(mask_path);
    if (rc != 0) return -1;
    f->nx = f->mask.nx;
    f->ny = f->mask.ny;
    f->nz = f->mask.nz;
    dm_volume_voxel_size(&f->mask, f->vox);
    for (int k = 1; k <= 16; k++) {
        char name[64];
        snprintf(name, sizeof name, "merged_th%dsamples", k);
        char *path = find_image(dir, name);
        if (!path) break;
        free(path);
        f->nfibres = k;
    }
    if (f->nfibres == 0) {
        dm_track_field_free(f);
        return dm_set_error("track: %s has no merged_th1samples.nii.gz (is it a bedpostx folder?)",
                            dir);
    }
    if (f->nfibres > 8) f->nfibres = 8; /* DM_TRACK_MAX_FIBRES */
    size_t nvox = (size_t)f->nx * f->ny * f->nz;
    int flip = fsl_frame && dm_volume_is_neurological(&f->mask);
    for (int k = 0; k < f->nfibres && rc == 0; k++) {
        dm_volume th = {0}, ph = {0}, fr = {0};
        char name[64];
        snprintf(name, sizeof name, "merged_th%dsamples", k + 1);
        if (k == 0) { /* the sample count comes from the first file */
            char *path = find_image(dir, name);
            rc = dm_volume_read(path, &th);
            if (rc == 0) rc = dm_volume_check_same_grid(&th, path, &f->mask, "nodif_brain_mask");
            free(path);
            if (rc == 0) {
                f->nsamples = th.nt;
                size_t n = nvox * f->nsamples * f->nfibres;
                f->dirs = malloc(3 * n * sizeof *f->dirs);
                f->fracs = malloc(n * sizeof *f->fracs);
                if (!f->dirs || !f->fracs)
                    rc = dm_set_error("track: out of memory for the samples");
            }
        } else {
            rc = read_samples(dir, name, f, &th);
        }
        snprintf(name, sizeof name, "merged_ph%dsamples", k + 1);
        if (rc == 0) rc = read_samples(dir, name, f, &ph);
        snprintf(name, sizeof name, "merged_f%dsamples", k + 1);
        if (rc == 0) rc = read_samples(dir, name, f, &fr);
        if (rc == 0) {
            int ns = f->nsamples, nf = f->nfibres;
            for (size_t v = 0; v < nvox; v++)
                for (int s = 0; s < ns; s++) {
                    size_t src = v + (size_t)s * nvox, dst = (v * ns + s) * nf + k;
                    double t = th.data[src], p = ph.data[src], fv = fr.data[src];
                    if (!isfinite(t) || !isfinite(p)) t = p = 0;
                    f->dirs[3 * dst] = (float)(sin(t) * cos(p) * (flip ? -1 : 1));
                    f->dirs[3 * dst + 1] = (float)(sin(t) * sin(p));
                    f->dirs[3 * dst + 2] = (float)cos(t);
                    f->fracs[dst] = isfinite(fv) ? (float)fv : 0.0f;
                }
        }
        dm_volume_free(&th);
        dm_volume_free(&ph);
        dm_volume_free(&fr);
    }
    if (rc == 0) {
        f->brain = malloc(nvox);
        for (size_t v = 0; v < nvox; v++) f->brain[v] = f->mask.data[v] != 0;
    }
    if (rc != 0) dm_track_field_free(f);
    return rc;
}

void dm_track_field_free(dm_track_field *f)
{
    free(f->dirs);
    free(f->fracs);
    free(f->brain);
    dm_volume_free(&f->mask);
    memset(f, 0, sizeof *f);
}
