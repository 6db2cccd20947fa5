#include "track_seeds.h"
#include "error.h"
#include "gifti_mesh.h"
#include "textio.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int dm_track_is_image_path(const char *path)
{
    size_t n = strlen(path);
    static const char *endings[] = {".nii", ".nii.gz", ".hdr", ".img", ".img.gz"};
    for (int i = 0; i < 5; i++) {
        size_t m = strlen(endings[i]);
        if (n > m && !strcmp(path + n - m, endings[i])) return 1;
    }
    return 0;
}

static int add_seed(dm_track_seeds *s, long *cap, const double vox[3])
{
    if (s->n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        float *p = realloc(s->pos, 3 * *cap * sizeof *p);
        int *ijk = realloc(s->ijk, 3 * *cap * sizeof *ijk);
        int *sv = realloc(s->svox, *cap * sizeof *sv);
        if (p) s->pos = p;
        if (ijk) s->ijk = ijk;
        if (sv) s->svox = sv;
        if (!p || !ijk || !sv) return dm_set_error("track: out of memory for the seeds");
    }
    double t[3];
    dm_affine_apply(&s->seed2track, vox, t);
    int in = 1, idx[3];
    const int n[3] = {s->ref.nx, s->ref.ny, s->ref.nz};
    for (int a = 0; a < 3; a++) {
        s->pos[3 * s->n + a] = (float)t[a];
        idx[a] = (int)floor(vox[a] + 0.5);
        s->ijk[3 * s->n + a] = idx[a];
        if (idx[a] < 0 || idx[a] >= n[a]) in = 0;
    }
    s->svox[s->n] = in ? (idx[2] * n[1] + idx[1]) * n[0] + idx[0] : -1;
    s->n++;
    return 0;
}

int dm_track_seeds_load(const char *seed, const char *seedref, const char *xfm,
                        const char *diffusion_mask_path, const dm_track_field *f,
                        dm_track_seeds *s)
{
    memset(s, 0, sizeof *s);
    int image = dm_track_is_image_path(seed);
    dm_volume seed_img = {0};
    int rc = 0;
    const char *ref_path = seedref ? seedref : image ? seed : diffusion_mask_path;
    if (image && (rc = dm_volume_read(seed, &seed_img)) != 0) goto done;
    if ((rc = dm_volume_read(ref_path, &s->ref)) != 0) goto done;
    if (image && seedref &&
        (rc = dm_volume_check_same_grid(&seed_img, seed, &s->ref, seedref)) != 0)
        goto done;
    dm_affine_identity(&s->seed2track);
    for (int a = 0; a < 3; a++) s->seed2track.m[a][a] = f->vox[a];
    if (xfm) {
        dm_affine x, fs, fd, fd_inv, scale = s->seed2track;
        if ((rc = dm_affine_read(xfm, &x)) != 0) goto done;
        dm_volume_vox2fsl(&s->ref, &fs);
        dm_volume_vox2fsl(&f->mask, &fd);
        if ((rc = dm_affine_invert(&fd, &fd_inv)) != 0) goto done;
        dm_affine t1 = dm_affine_mul(&x, &fs), t2 = dm_affine_mul(&fd_inv, &t1);
        s->seed2track = dm_affine_mul(&scale, &t2);
    } else if (s->ref.nx != f->nx || s->ref.ny != f->ny || s->ref.nz != f->nz) {
        rc = dm_set_error("track: the seed space (%s, %dx%dx%d) is not the diffusion grid "
                          "(%dx%dx%d): give --xfm", ref_path, s->ref.nx, s->ref.ny, s->ref.nz,
                          f->nx, f->ny, f->nz);
        goto done;
    }
    if ((rc = dm_affine_invert(&s->seed2track, &s->track2seed)) != 0) goto done;
    long cap = 0;
    if (image) {
        for (int k = 0; k < seed_img.nz && rc == 0; k++)
            for (int j = 0; j < seed_img.ny && rc == 0; j++)
                for (int i = 0; i < seed_img.nx && rc == 0; i++) {
                    size_t v = ((size_t)k * seed_img.ny + j) * seed_img.nx + i;
                    double x = seed_img.data[v];
                    if (x != 0 && !isnan(x)) {
                        double vox[3] = {i, j, k};
                        rc = add_seed(s, &cap, vox);
                    }
                }
    } else {
        /* world mm points: the vertices of a GIFTI surface, or the rows of a text file */
        long rows;
        double *xyz;
        if (dm_is_gifti_path(seed)) {
            dm_mesh mesh;
            if ((rc = dm_mesh_read_gifti(seed, 0, &mesh)) != 0) goto done;
            rows = mesh.nv;
            xyz = mesh.xyz;
            free(mesh.tri);
        } else {
            int nrows, cols;
            if ((rc = dm_read_matrix(seed, &nrows, &cols, &xyz)) != 0) goto done;
            if (cols != 3) {
                free(xyz);
                rc = dm_set_error("%s: seed coordinates need 3 columns (x y z in mm), found %d", seed, cols);
                goto done;
            }
            rows = nrows;
        }
        dm_affine v2w, w2v;
        dm_volume_vox2world(&s->ref, &v2w);
        if ((rc = dm_affine_invert(&v2w, &w2v)) == 0)
            for (long r = 0; r < rows && rc == 0; r++) {
                double vox[3];
                dm_affine_apply(&w2v, xyz + 3 * r, vox);
                rc = add_seed(s, &cap, vox);
            }
        free(xyz);
    }
    if (rc == 0 && s->n == 0) rc = dm_set_error("track: %s gives no seed", seed);
done:
    dm_volume_free(&seed_img);
    if (rc != 0) dm_track_seeds_free(s);
    return rc;
}

void dm_track_seeds_free(dm_track_seeds *s)
{
    free(s->pos);
    free(s->ijk);
    free(s->svox);
    dm_volume_free(&s->ref);
    memset(s, 0, sizeof *s);
}
