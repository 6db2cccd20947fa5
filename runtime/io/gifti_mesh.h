/* Triangle meshes from GIFTI surface files (.surf.gii) through libgiftiio: the vertices of
 * the NIFTI_INTENT_POINTSET array and the triangles of the NIFTI_INTENT_TRIANGLE array.
 * Vertex coordinates are returned as stored (GIFTI pointsets are world/scanner mm); the
 * arrays' coordinate-system matrices are not applied. */
#ifndef DIMOC_GIFTI_MESH_H
#define DIMOC_GIFTI_MESH_H

typedef struct dm_mesh {
    long nv, nt;
    double *xyz; /* 3 per vertex */
    int *tri;    /* 3 vertex indices (0-based) per triangle; NULL when nt is 0 */
} dm_mesh;

/* 1 when path ends in .gii. */
int dm_is_gifti_path(const char *path);
/* Reads the mesh; need_triangles: a file without triangles is an error.  -1 with a one-line
 * dm_last_error() naming the file on any failure. */
int dm_mesh_read_gifti(const char *path, int need_triangles, dm_mesh *m);
void dm_mesh_free(dm_mesh *m);

#endif
