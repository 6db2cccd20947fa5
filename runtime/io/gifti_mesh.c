#include "io/gifti_mesh.h"
#include "util/error.h"

#include <fcntl.h>
#include <gifti_io.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int dm_is_gifti_path(const char *path)
{
    size_t n = strlen(path);
    return n > 4 && !strcmp(path + n - 4, ".gii");
}

/* libgiftiio prints its own diagnostics on stderr whatever the verbosity; they are silenced
 * while it reads so that a failure shows as dimoc's one line. */
static gifti_image *read_quietly(const char *path)
{
    gifti_set_verb(0);
    fflush(stderr);
    int saved = dup(STDERR_FILENO), null = open("/dev/null", O_WRONLY);
    if (saved >= 0 && null >= 0) dup2(null, STDERR_FILENO);
    gifti_image *g = gifti_read_image(path, 1);
    fflush(stderr);
    if (saved >= 0 && null >= 0) dup2(saved, STDERR_FILENO);
    if (saved >= 0) close(saved);
    if (null >= 0) close(null);
    return g;
}

/* Value (row, col) of a 2D array of `cols` columns, in either index order. */
static double value_at(const giiDataArray *da, long row, int col)
{
    long rows = da->dims[0];
    long i = da->ind_ord == GIFTI_IND_ORD_COL_MAJOR ? col * rows + row : row * da->dims[1] + col;
    switch (da->datatype) {
    case NIFTI_TYPE_FLOAT32: return ((const float *)da->data)[i];
    case NIFTI_TYPE_FLOAT64: return ((const double *)da->data)[i];
    case NIFTI_TYPE_INT32: return ((const int *)da->data)[i];
    case NIFTI_TYPE_UINT32: return ((const unsigned int *)da->data)[i];
    default: return 0;
    }
}

/* The array of this intent, checked to be n x 3 of a type value_at reads; NULL with an error. */
static const giiDataArray *find_nx3(gifti_image *g, int intent, const char *what, const char *path)
{
    giiDataArray *da = gifti_find_DA(g, intent, 0);
    if (!da) {
        dm_set_error("%s: GIFTI file without a %s array", path, what);
        return NULL;
    }
    int type_ok = da->datatype == NIFTI_TYPE_FLOAT32 || da->datatype == NIFTI_TYPE_FLOAT64 ||
                  da->datatype == NIFTI_TYPE_INT32 || da->datatype == NIFTI_TYPE_UINT32;
    if (da->num_dim != 2 || da->dims[1] != 3 || da->dims[0] < 1 || !da->data || !type_ok) {
        dm_set_error("%s: the GIFTI %s array must be N x 3 numbers (found %d dimensions, %d x %d)",
                     path, what, da->num_dim, da->dims[0], da->num_dim > 1 ? da->dims[1] : 0);
        return NULL;
    }
    return da;
}

int dm_mesh_read_gifti(const char *path, int need_triangles, dm_mesh *m)
{
    memset(m, 0, sizeof *m);
    if (access(path, R_OK) != 0) return dm_set_error("%s: cannot read the GIFTI file", path);
    gifti_image *g = read_quietly(path);
    if (!g) return dm_set_error("%s: not a readable GIFTI file", path);
    int rc = 0;
    const giiDataArray *pts =
        find_nx3(g, NIFTI_INTENT_POINTSET, "vertex (NIFTI_INTENT_POINTSET)", path);
    const giiDataArray *tri = NULL;
    if (!pts) rc = -1;
    if (rc == 0 && (need_triangles || gifti_find_DA(g, NIFTI_INTENT_TRIANGLE, 0))) {
        tri = find_nx3(g, NIFTI_INTENT_TRIANGLE, "triangle (NIFTI_INTENT_TRIANGLE)", path);
        if (!tri)
            rc = -1;
        else if (tri->datatype != NIFTI_TYPE_INT32 && tri->datatype != NIFTI_TYPE_UINT32)
            rc = dm_set_error("%s: GIFTI triangles must be integer vertex indices", path);
    }
    if (rc == 0) {
        m->nv = pts->dims[0];
        m->xyz = malloc(3 * (size_t)m->nv * sizeof *m->xyz);
        if (!m->xyz) rc = dm_set_error("%s: out of memory for the vertices", path);
        for (long v = 0; rc == 0 && v < m->nv; v++)
            for (int a = 0; a < 3; a++) m->xyz[3 * v + a] = value_at(pts, v, a);
    }
    if (rc == 0 && tri) {
        m->nt = tri->dims[0];
        m->tri = malloc(3 * (size_t)m->nt * sizeof *m->tri);
        if (!m->tri) rc = dm_set_error("%s: out of memory for the triangles", path);
        for (long t = 0; rc == 0 && t < m->nt; t++)
            for (int a = 0; a < 3; a++) {
                double idx = value_at(tri, t, a);
                if (idx < 0 || idx >= m->nv) {
                    rc = dm_set_error("%s: triangle %ld names vertex %.0f of %ld", path, t, idx,
                                      m->nv);
                    break;
                }
                m->tri[3 * t + a] = (int)idx;
            }
    }
    gifti_free_image(g);
    if (rc != 0) dm_mesh_free(m);
    return rc;
}

void dm_mesh_free(dm_mesh *m)
{
    free(m->xyz);
    free(m->tri);
    memset(m, 0, sizeof *m);
}
