#include "track/track_seeds.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "io/gifti_mesh.h"
#include "io/textio.h"

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

/* The image paths of a text file listing seed masks (one a line; blank lines and # comments
 * skipped), or 0 when its first entry is not an image path (a coordinate list).  -1: error. */
static int read_mask_list(const char *path, char ***out)
{
    size_t len;
    char *text = dm_read_file(path, &len), *save = NULL;
    if (!text) return -1;
    char **list = NULL;
    int n = 0;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        while (*line == ' ' || *line == '\t') line++;
        char *end = line + strlen(line);
        while (end > line && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) *--end = 0;
        if (!*line || *line == '#') continue;
        if (!dm_track_is_image_path(line)) break;
        char **grown = realloc(list, (n + 1) * sizeof *list);
        if (!grown) break;
        list = grown;
        list[n++] = strdup(line);
    }
    free(text);
    *out = list;
    return n;
}

static int add_seed(dm_track_seeds *s, long *cap, const double vox[3], int group)
{
    if (s->n == *cap) {
        *cap = *cap ? *cap * 2 : 1024;
        float *p = realloc(s->pos, 3 * *cap * sizeof *p);
        int *ijk = realloc(s->ijk, 3 * *cap * sizeof *ijk);
        int *sv = realloc(s->svox, *cap * sizeof *sv);
        int *g = realloc(s->group, *cap * sizeof *g);
        if (p) s->pos = p;
        if (ijk) s->ijk = ijk;
        if (sv) s->svox = sv;
        if (g) s->group = g;
        if (!p || !ijk || !sv || !g) return dm_set_error("track: out of memory for the seeds");
    }
    s->group[s->n] = group;
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

/* A seed at the centre of every nonzero voxel of img, in NIfTI order. */
static int add_mask_seeds(dm_track_seeds *s, long *cap, const dm_volume *img, int group)
{
    int rc = 0;
    for (int k = 0; k < img->nz && rc == 0; k++)
        for (int j = 0; j < img->ny && rc == 0; j++)
            for (int i = 0; i < img->nx && rc == 0; i++) {
                double x = img->data[((size_t)k * img->ny + j) * img->nx + i];
                if (x != 0 && !isnan(x)) {
                    double vox[3] = {i, j, k};
                    rc = add_seed(s, cap, vox, group);
                }
            }
    return rc;
}

int dm_track_seeds_load(const char *seed, const char *seedref, const char *xfm,
                        const char *diffusion_mask_path, const dm_track_field *f, dm_track_seeds *s)
{
    memset(s, 0, sizeof *s);
    int image = dm_track_is_image_path(seed);
    dm_volume seed_img = {0};
    int rc = 0;
    if (!image && !dm_is_gifti_path(seed)) { /* a list of masks, or coordinates */
        int n = read_mask_list(seed, &s->group_paths);
        if (n < 0) return -1;
        s->ngroups = n;
    }
    const char *first = s->ngroups ? s->group_paths[0] : seed;
    const char *ref_path = seedref ? seedref : image || s->ngroups ? first : diffusion_mask_path;
    if (image && (rc = dm_volume_read(seed, &seed_img)) != 0) goto done;
    if ((rc = dm_volume_read(ref_path, &s->ref)) != 0) goto done;
    if (image && seedref &&
        (rc = dm_volume_check_same_space(&seed_img, seed, &s->ref, seedref)) != 0)
        goto done;
    if (image && seed_img.nt > 1) {
        rc = dm_set_error("%s: a 4D image (%dx%dx%dx%d); a seed mask is 3D", seed, seed_img.nx,
                          seed_img.ny, seed_img.nz, seed_img.nt);
        goto done;
    }
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
                          "(%dx%dx%d): give --xfm",
                          ref_path, s->ref.nx, s->ref.ny, s->ref.nz, f->nx, f->ny, f->nz);
        goto done;
    } else if (diffusion_mask_path && (rc = dm_volume_check_same_space(&s->ref, ref_path, &f->mask,
                                                                       diffusion_mask_path)) != 0) {
        goto done; /* the diffusion grid, but placed elsewhere: an --xfm is needed */
    }
    if ((rc = dm_affine_invert(&s->seed2track, &s->track2seed)) != 0) goto done;
    long cap = 0;
    if (image) {
        rc = add_mask_seeds(s, &cap, &seed_img, 0);
    } else if (s->ngroups) {
        for (int g = 0; g < s->ngroups && rc == 0; g++) {
            dm_volume m = {0};
            if ((rc = dm_volume_read(s->group_paths[g], &m)) != 0) break;
            rc = dm_volume_check_same_space(&m, s->group_paths[g], &s->ref, ref_path);
            long before = s->n;
            if (rc == 0) rc = add_mask_seeds(s, &cap, &m, g);
            if (rc == 0 && s->n == before)
                rc = dm_set_error("%s: the seed mask (listed in %s) is empty", s->group_paths[g],
                                  seed);
            dm_volume_free(&m);
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
                rc = dm_set_error("%s: seed coordinates need 3 columns (x y z in mm), found %d",
                                  seed, cols);
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
                rc = add_seed(s, &cap, vox, 0);
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
    free(s->group);
    for (int g = 0; g < s->ngroups; g++) free(s->group_paths[g]);
    free(s->group_paths);
    dm_volume_free(&s->ref);
    memset(s, 0, sizeof *s);
}
