/* COMMIT's linear operator A and its adjoint, one source for host threads
 * (runtime/commit/commit_cpu.c) and the GPU (gpu_commit.cu).
 *
 * A maps the unknowns x to the signal of every voxel that a streamline crosses (nS samples a
 * voxel, row v * nS + s), as three blocks of columns, x = [IC | EC | ISO]:
 *   IC   one column per streamline f: its segments in voxel v (length l, direction index o)
 *        add l x_f R_IC[o] (the stick or cylinder rotated onto the segment);
 *   EC   one column per (voxel, peak): x_e R_EC[o] (the zeppelin along the peak);
 *   ISO  nISO columns per voxel, ordered response by response (column nF + nE + r nV + v):
 *        x R_ISO[r].
 * Each response is a row of nS floats of a lookup table (dm_commit_op.lut_*).
 *
 * Ax is computed a voxel at a time (its segments listed by voxel: no two threads write one
 * row), A^T y a column at a time (IC: the streamline's segments listed by streamline), as the
 * COMMIT-on-GPU thesis lays them out; both sum in double in a fixed order, so the host and the
 * GPU give the same bits.
 *
 * No include guard.  Before including: DM_FN (storage of the functions). */

typedef struct dm_commit_op {
    int ns;   /* samples per voxel */
    int niso; /* isotropic responses per voxel */
    long nv;  /* voxels (rows: nv * ns) */
    long nf;  /* streamlines (IC columns) */
    long ne;  /* EC columns */
    /* IC segments by voxel: those of voxel v are [vox_start[v], vox_start[v + 1]) */
    const long *vox_start;
    const unsigned *vox_str;       /* each segment's streamline */
    const unsigned short *vox_dir; /* its direction (row of lut_ic) */
    const float *vox_len;          /* its length (mm) */
    /* the same segments by streamline: those of streamline f are [str_start[f], str_start[f+1]) */
    const long *str_start;
    const unsigned *str_vox;
    const unsigned short *str_dir;
    const float *str_len;
    /* EC columns by voxel: those of voxel v are [ec_start[v], ec_start[v + 1]) */
    const long *ec_start;
    const unsigned *ec_vox;       /* each EC column's voxel */
    const unsigned short *ec_dir; /* and its peak's direction */
    const float *lut_ic, *lut_ec; /* ndirs x ns */
    const float *lut_iso;         /* niso x ns */
} dm_commit_op;

/* Row block of voxel v of A x: out[0 .. ns). */
DM_FN void dm_commit_ax_voxel(const dm_commit_op *A, const double *x, long v, double *out)
{
    const int ns = A->ns;
    for (int s = 0; s < ns; s++) out[s] = 0;
    for (long k = A->vox_start[v]; k < A->vox_start[v + 1]; k++) {
        const double w = (double)A->vox_len[k] * x[A->vox_str[k]];
        if (w == 0) continue;
        const float *r = A->lut_ic + (long)A->vox_dir[k] * ns;
        for (int s = 0; s < ns; s++) out[s] += w * (double)r[s];
    }
    for (long e = A->ec_start[v]; e < A->ec_start[v + 1]; e++) {
        const double w = x[A->nf + e];
        if (w == 0) continue;
        const float *r = A->lut_ec + (long)A->ec_dir[e] * ns;
        for (int s = 0; s < ns; s++) out[s] += w * (double)r[s];
    }
    for (int i = 0; i < A->niso; i++) {
        const double w = x[A->nf + A->ne + (long)i * A->nv + v];
        if (w == 0) continue;
        const float *r = A->lut_iso + (long)i * ns;
        for (int s = 0; s < ns; s++) out[s] += w * (double)r[s];
    }
}

/* sum_s r[s] y[s] in double. */
DM_FN double dm_commit_dot(const float *r, const double *y, int ns)
{
    double sum = 0;
    for (int s = 0; s < ns; s++) sum += (double)r[s] * y[s];
    return sum;
}

/* Entry j of A^T y (j in IC, EC or ISO columns). */
DM_FN double dm_commit_aty_column(const dm_commit_op *A, const double *y, long j)
{
    const int ns = A->ns;
    if (j < A->nf) {
        double sum = 0;
        for (long k = A->str_start[j]; k < A->str_start[j + 1]; k++)
            sum += (double)A->str_len[k] * dm_commit_dot(A->lut_ic + (long)A->str_dir[k] * ns,
                                                         y + (long)A->str_vox[k] * ns, ns);
        return sum;
    }
    j -= A->nf;
    if (j < A->ne)
        return dm_commit_dot(A->lut_ec + (long)A->ec_dir[j] * ns, y + (long)A->ec_vox[j] * ns, ns);
    j -= A->ne;
    const long i = j / A->nv, v = j % A->nv;
    return dm_commit_dot(A->lut_iso + i * ns, y + v * ns, ns);
}
