#include "track/track_masks.h"
#include "util/error.h"
#include "util/fsutil.h"
#include "track/track_kernel_host.h"

#include <ctype.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int load_on_seed_grid(const char *path, const char *what, const dm_track_seeds *s,
                             dm_volume *v)
{
    if (dm_volume_read(path, v) != 0) return -1;
    int rc = 0;
    if (v->nx != s->ref.nx || v->ny != s->ref.ny || v->nz != s->ref.nz)
        rc = dm_set_error("%s %s is %dx%dx%d, the seed space is %dx%dx%d", what, path, v->nx, v->ny,
                          v->nz, s->ref.nx, s->ref.ny, s->ref.nz);
    else if (v->nt > 1)
        rc = dm_set_error("%s %s: a 4D image (%dx%dx%dx%d); a mask is 3D", what, path, v->nx, v->ny,
                          v->nz, v->nt);
    else
        rc = dm_volume_check_same_space(v, path, &s->ref, "the seed space");
    if (rc != 0) dm_volume_free(v);
    return rc;
}

static int set_flag(const char *path, const char *what, const dm_track_seeds *s, dm_track_masks *m,
                    unsigned char flag)
{
    dm_volume v = {0};
    if (load_on_seed_grid(path, what, s, &v) != 0) return -1;
    if (!m->flags) m->flags = calloc(m->nvox, 1);
    for (size_t i = 0; i < m->nvox; i++)
        if (v.data[i] != 0 && !isnan(v.data[i])) m->flags[i] |= flag;
    dm_volume_free(&v);
    return 0;
}

/* Adds a GIFTI surface with the given bit: world mm (of the seed reference) -> seed voxel ->
 * tracking mm. */
static int add_surface(const char *path, unsigned int bit, const dm_track_seeds *s,
                       dm_track_masks *m)
{
    dm_mesh mesh;
    if (dm_mesh_read_gifti(path, 1, &mesh) != 0) return -1;
    dm_affine v2w, w2v;
    dm_volume_vox2world(&s->ref, &v2w);
    int rc = dm_affine_invert(&v2w, &w2v);
    if (rc == 0) {
        dm_affine world2track = dm_affine_mul(&s->seed2track, &w2v);
        rc = dm_track_surface_add(&m->surfaces, &mesh, bit, &world2track, path);
    }
    dm_mesh_free(&mesh);
    return rc;
}

/* The next free surface bit for a waypoint or target surface, or -1 (error set). */
static int next_surface_bit(dm_track_masks *m, const char *path)
{
    if (m->nsurf_bits >= DM_TRACK_MAX_SURFACES)
        return dm_set_error("%s: at most %d waypoint and target surfaces together", path,
                            DM_TRACK_MAX_SURFACES - DM_TRACK_SURF_FIRST);
    return m->nsurf_bits++;
}

/* Splits a comma-separated list, expanding text files into the image paths they list.
 * Returns the count, or -1. */
static int list_images(const char *spec, char ***out)
{
    char *copy = strdup(spec), *save = NULL;
    char **list = NULL;
    int n = 0, rc = 0;
    for (char *t = strtok_r(copy, ",", &save); t && rc == 0; t = strtok_r(NULL, ",", &save)) {
        if (dm_track_is_image_path(t) || dm_is_gifti_path(t)) {
            list = realloc(list, (n + 1) * sizeof *list);
            list[n++] = strdup(t);
            continue;
        }
        size_t len;
        char *text = dm_read_file(t, &len);
        if (!text) {
            rc = -1;
            break;
        }
        char *save2 = NULL;
        for (char *line = strtok_r(text, "\n", &save2); line; line = strtok_r(NULL, "\n", &save2)) {
            while (isspace((unsigned char)*line)) line++;
            char *end = line + strlen(line);
            while (end > line && isspace((unsigned char)end[-1])) *--end = 0;
            if (!*line || *line == '#') continue;
            list = realloc(list, (n + 1) * sizeof *list);
            list[n++] = strdup(line);
        }
        free(text);
    }
    free(copy);
    if (rc != 0) {
        for (int i = 0; i < n; i++) free(list[i]);
        free(list);
        return -1;
    }
    *out = list;
    return n;
}

static char *target_name(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    char *name = strdup(base);
    static const char *endings[] = {".nii.gz", ".nii", ".hdr", ".img", ".surf.gii", ".gii"};
    for (int i = 0; i < 6; i++) {
        size_t n = strlen(name), m = strlen(endings[i]);
        if (n > m && !strcmp(name + n - m, endings[i])) {
            name[n - m] = 0;
            break;
        }
    }
    return name;
}

/* Column table of a matrix target: every nonzero voxel of the image is a column (NIfTI
 * order); each seed-space voxel maps to the target voxel holding its centre (world mm). */
static int load_matrix_target(const char *path, const dm_track_seeds *s, int **col, long *ncol,
                              int **ijk, dm_volume *keep)
{
    dm_volume t = {0};
    if (dm_volume_read(path, &t) != 0) return -1;
    size_t tn = DM_NVOX(&t);
    int *index = malloc(tn * sizeof *index);
    long n = 0;
    for (size_t v = 0; v < tn; v++) index[v] = t.data[v] != 0 && !isnan(t.data[v]) ? (int)n++ : -1;
    if (n == 0) {
        free(index);
        dm_volume_free(&t);
        return dm_set_error("%s: the target mask is empty", path);
    }
    *ijk = malloc(3 * n * sizeof **ijk);
    for (size_t v = 0; v < tn; v++)
        if (index[v] >= 0) {
            (*ijk)[3 * index[v]] = (int)(v % t.nx);
            (*ijk)[3 * index[v] + 1] = (int)(v / t.nx % t.ny);
            (*ijk)[3 * index[v] + 2] = (int)(v / ((size_t)t.nx * t.ny));
        }
    dm_affine s2w, t2w, w2t;
    dm_volume_vox2world(&s->ref, &s2w);
    dm_volume_vox2world(&t, &t2w);
    if (dm_affine_invert(&t2w, &w2t) != 0) {
        free(index);
        dm_volume_free(&t);
        return -1;
    }
    dm_affine s2t = dm_affine_mul(&w2t, &s2w);
    size_t sn = DM_NVOX(&s->ref);
    *col = malloc(sn * sizeof **col);
    for (size_t v = 0; v < sn; v++) {
        double in[3] = {(double)(v % s->ref.nx), (double)(v / s->ref.nx % s->ref.ny),
                        (double)(v / ((size_t)s->ref.nx * s->ref.ny))},
               out[3];
        dm_affine_apply(&s2t, in, out);
        int i = (int)floor(out[0] + 0.5), j = (int)floor(out[1] + 0.5),
            k = (int)floor(out[2] + 0.5);
        int inside = i >= 0 && j >= 0 && k >= 0 && i < t.nx && j < t.ny && k < t.nz;
        (*col)[v] = inside ? index[((size_t)k * t.ny + j) * t.nx + i] : -1;
    }
    *ncol = n;
    free(index);
    if (keep)
        *keep = t;
    else
        dm_volume_free(&t);
    return 0;
}

int dm_track_masks_load(const dm_track_mask_paths *p, const dm_track_seeds *s, dm_track_masks *m)
{
    memset(m, 0, sizeof *m);
    m->nvox = DM_NVOX(&s->ref);
    m->nsurf_bits = DM_TRACK_SURF_FIRST;
    for (int b = 0; b < DM_TRACK_MAX_SURFACES; b++) m->surf_target[b] = -1;
    int rc = 0;
    if (p->stop && dm_is_gifti_path(p->stop))
        rc = add_surface(p->stop, DM_TRACK_SURF_STOP, s, m);
    else if (p->stop)
        rc = set_flag(p->stop, "--stop", s, m, DM_TRACK_FLAG_STOP);
    if (rc == 0 && p->avoid && dm_is_gifti_path(p->avoid))
        rc = add_surface(p->avoid, DM_TRACK_SURF_AVOID, s, m);
    else if (rc == 0 && p->avoid)
        rc = set_flag(p->avoid, "--avoid", s, m, DM_TRACK_FLAG_AVOID);
    m->waycond_and = !p->waycond || !strcmp(p->waycond, "AND");
    if (rc == 0 && p->waycond && strcmp(p->waycond, "AND") && strcmp(p->waycond, "OR"))
        rc = dm_set_error("track: --waycond must be AND or OR, not '%s'", p->waycond);
    if (rc == 0 && p->waypoints) {
        char **list = NULL;
        int n = list_images(p->waypoints, &list);
        if (n < 0)
            rc = -1;
        else if (n > DM_TRACK_MAX_WAYPOINTS)
            rc = dm_set_error("track: at most %d waypoint masks, %d given", DM_TRACK_MAX_WAYPOINTS,
                              n);
        for (int w = 0; w < n && rc == 0; w++) {
            if (dm_is_gifti_path(list[w])) {
                int bit = next_surface_bit(m, list[w]);
                if (bit < 0 || (rc = add_surface(list[w], 1u << bit, s, m)) != 0) {
                    rc = -1;
                    break;
                }
                m->surf_way[bit] = 1u << w;
                continue;
            }
            if (!m->waybits && !(m->waybits = calloc(m->nvox, sizeof *m->waybits))) {
                rc = dm_set_error("track: out of memory for the waypoints");
                break;
            }
            dm_volume v = {0};
            if ((rc = load_on_seed_grid(list[w], "--waypoints", s, &v)) != 0) break;
            for (size_t i = 0; i < m->nvox; i++)
                if (v.data[i] != 0 && !isnan(v.data[i])) m->waybits[i] |= 1u << w;
            dm_volume_free(&v);
        }
        if (rc == 0) {
            m->nway = n;
            m->waymask = n >= 32 ? 0xffffffffu : (1u << n) - 1;
        }
        for (int w = 0; w < (n > 0 ? n : 0); w++) free(list[w]);
        free(list);
    }
    if (rc == 0 && p->targetmasks) {
        char **list = NULL;
        int n = list_images(p->targetmasks, &list);
        if (n <= 0)
            rc = n < 0 ? -1 : dm_set_error("track: %s lists no target mask", p->targetmasks);
        int *count = rc == 0 ? calloc(m->nvox + 1, sizeof *count) : NULL;
        unsigned char *in = rc == 0 ? calloc((size_t)n * m->nvox, 1) : NULL;
        if (rc == 0) m->target_names = calloc(n, sizeof *m->target_names);
        for (int t = 0; t < n && rc == 0; t++) {
            m->target_names[t] = target_name(list[t]);
            m->ntargets = t + 1;
            if (dm_is_gifti_path(list[t])) {
                int bit = next_surface_bit(m, list[t]);
                if (bit < 0 || (rc = add_surface(list[t], 1u << bit, s, m)) != 0) {
                    rc = -1;
                    break;
                }
                m->surf_target[bit] = t;
                continue;
            }
            dm_volume v = {0};
            if ((rc = load_on_seed_grid(list[t], "--targetmasks", s, &v)) != 0) break;
            for (size_t i = 0; i < m->nvox; i++)
                if (v.data[i] != 0 && !isnan(v.data[i])) {
                    in[(size_t)t * m->nvox + i] = 1;
                    count[i]++;
                }
            dm_volume_free(&v);
        }
        if (rc == 0) { /* compressed rows of target ids per voxel */
            m->target_off = malloc((m->nvox + 1) * sizeof *m->target_off);
            m->target_off[0] = 0;
            for (size_t i = 0; i < m->nvox; i++) m->target_off[i + 1] = m->target_off[i] + count[i];
            m->target_ids = malloc(((size_t)m->target_off[m->nvox] + 1) * sizeof *m->target_ids);
            for (size_t i = 0; i < m->nvox; i++) {
                int k = m->target_off[i];
                for (int t = 0; t < n; t++)
                    if (in[(size_t)t * m->nvox + i]) m->target_ids[k++] = t;
            }
        }
        free(count);
        free(in);
        for (int t = 0; t < (n > 0 ? n : 0); t++) free(list[t]);
        free(list);
    }
    if (rc == 0 && p->matrix1) {
        m->seed_col = malloc(m->nvox * sizeof *m->seed_col);
        for (size_t i = 0; i < m->nvox; i++) m->seed_col[i] = -1;
        for (long k = s->n - 1; k >= 0; k--)
            if (s->svox[k] >= 0) m->seed_col[s->svox[k]] = (int)k;
    }
    if (rc == 0 && p->target2)
        rc = load_matrix_target(p->target2, s, &m->t2_col, &m->n2, &m->t2_ijk, &m->t2_ref);
    if (rc == 0 && p->target3)
        rc = load_matrix_target(p->target3, s, &m->t3_node, &m->n3, &m->t3_ijk, NULL);
    if (rc == 0 && m->surfaces.ntri > 0) rc = dm_track_surface_finish(&m->surfaces);
    if (rc != 0) dm_track_masks_free(m);
    return rc;
}

int dm_track_masks_network(const dm_track_seeds *s, dm_track_masks *m)
{
    if (m->nway > 0)
        return dm_set_error(
            "track: --network takes no --waypoints (the seed masks are its waypoints)");
    if (s->ngroups < 2 || s->ngroups > DM_TRACK_MAX_WAYPOINTS)
        return dm_set_error("track: --network needs --seed to be a text file listing 2 to %d masks "
                            "(%d given)",
                            DM_TRACK_MAX_WAYPOINTS, s->ngroups);
    m->waybits = calloc(m->nvox, sizeof *m->waybits);
    if (!m->waybits) return dm_set_error("track: out of memory for the network masks");
    for (long k = 0; k < s->n; k++)
        if (s->svox[k] >= 0) m->waybits[s->svox[k]] |= 1u << s->group[k];
    m->nway = s->ngroups;
    m->waymask = s->ngroups >= 32 ? 0xffffffffu : (1u << s->ngroups) - 1;
    m->waycond_and = 0;
    return 0;
}

void dm_track_masks_free(dm_track_masks *m)
{
    free(m->flags);
    dm_track_surface_free(&m->surfaces);
    free(m->waybits);
    for (int t = 0; t < m->ntargets; t++) free(m->target_names[t]);
    free(m->target_names);
    free(m->target_off);
    free(m->target_ids);
    free(m->seed_col);
    free(m->t2_col);
    free(m->t3_node);
    free(m->t2_ijk);
    free(m->t3_ijk);
    dm_volume_free(&m->t2_ref);
    memset(m, 0, sizeof *m);
}
