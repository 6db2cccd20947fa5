/* COMMIT's linear operator A and its adjoint, one source for host threads
 * (runtime/commit/commit_cpu.c) and the GPU (gpu_commit.cu).
 *
 * A maps the unknowns x to the signal of every voxel that a streamline crosses (ns samples a
 * voxel, row v * ns + s), as three blocks of columns, x = [IC | EC | ISO]:
 *   IC   one column per streamline f: its segments in voxel v (length l, direction index o)
 *        add l x_f R_IC[o] (the stick rotated onto the segment);
 *   EC   one column per (voxel, peak): x_e R_EC[o] (the zeppelin along the peak);
 *   ISO  niso columns per voxel, ordered response by response (column nf + ne + i nv + v):
 *        x R_ISO[i].
 * Each response is a row of ns floats of a lookup table (lut_*).
 *
 * Both products run voxel by voxel over the segments listed by voxel, and within a voxel by
 * direction, so that a run of segments with one direction touches its response row once:
 *   A x:      sum_o (sum_{segments of direction o} l x_f) R[o] per voxel;
 *   A^T y:    per voxel, d_o = R[o] . y_v once per direction run, written to each segment of
 *             the run (dots[q]) with the voxel's EC and ISO entries of A^T y; then per
 *             streamline, sum over its segments of l dots[q] (dm_commit_aty_streamline).
 * y_v is read once per voxel, never once per segment (the memory floor of COMMIT's products:
 * the segment records, x, y and the dots, not a response row and a signal row per segment).
 *
 * The host runs a voxel's samples all in one thread (s0 0, ds 1); a GPU warp runs one voxel, lane
 * l taking samples l, l + 32, ..., with DM_COMMIT_WARP_SUM summing the lanes' shares of a dot and
 * DM_COMMIT_LEADER the lane that writes.  A x sums each sample's terms in the same order on both
 * (the same bits with --fmad=false); the dots of A^T y are summed in another order on the GPU.
 *
 * No include guard.  Before including: DM_FN (storage of the functions). */

#ifndef DM_COMMIT_WARP_SUM
#define DM_COMMIT_WARP_SUM(v) (v)
#define DM_COMMIT_LEADER 1
#endif

typedef struct dm_commit_op {
    int ns;   /* samples per voxel */
    int niso; /* isotropic responses per voxel */
    long nv;  /* voxels (rows: nv * ns) */
    long nf;  /* streamlines (IC columns) */
    long ne;  /* EC columns */
    /* IC segments by voxel (within one, by direction): voxel v's are [vox_start[v], vox_start[v+1]) */
    const long *vox_start;
    const unsigned *vox_str;       /* each segment's streamline (its IC column) */
    const unsigned short *vox_dir; /* its direction (row of lut_ic) */
    const float *vox_len;          /* its length (preconditioned) */
    /* by streamline: streamline f's segments are [str_start[f], str_start[f+1]), each with its
     * place in the voxel order and its length */
    const long *str_start;
    const unsigned *str_seg;
    const float *str_len;
    /* EC columns by voxel: voxel v's are [ec_start[v], ec_start[v + 1]) */
    const long *ec_start;
    const unsigned short *ec_dir; /* each EC column's peak direction */
    const float *lut_ic, *lut_ec; /* ndirs x ns */
    const float *lut_iso;         /* niso x ns */
} dm_commit_op;

/* Samples s0, s0 + ds, ... (K of them, those below ns) of voxel v's rows of A x, into acc[0 .. K). */
DM_FN void dm_commit_ax_block(const dm_commit_op *A, const double *x, long v, int s0, int ds, int K,
                              double *acc)
{
    const int ns = A->ns;
    for (int k = 0; k < K; k++) acc[k] = 0;
    for (long q = A->vox_start[v], end = A->vox_start[v + 1]; q < end;) {
        const unsigned short o = A->vox_dir[q];
        double w = 0;
        for (; q < end && A->vox_dir[q] == o; q++) w += (double)A->vox_len[q] * x[A->vox_str[q]];
        if (w == 0) continue;
        const float *r = A->lut_ic + (long)o * ns;
        for (int k = 0; k < K; k++)
            if (s0 + k * ds < ns) acc[k] += w * (double)r[s0 + k * ds];
    }
    for (long e = A->ec_start[v]; e < A->ec_start[v + 1]; e++) {
        const double w = x[A->nf + e];
        if (w == 0) continue;
        const float *r = A->lut_ec + (long)A->ec_dir[e] * ns;
        for (int k = 0; k < K; k++)
            if (s0 + k * ds < ns) acc[k] += w * (double)r[s0 + k * ds];
    }
    for (int i = 0; i < A->niso; i++) {
        const double w = x[A->nf + A->ne + (long)i * A->nv + v];
        if (w == 0) continue;
        const float *r = A->lut_iso + (long)i * ns;
        for (int k = 0; k < K; k++)
            if (s0 + k * ds < ns) acc[k] += w * (double)r[s0 + k * ds];
    }
}

/* r . y over this thread's samples, summed over the warp (the whole dot on the host). */
DM_FN double dm_commit_dot(const float *r, const double *yv, int ns, int s0, int ds, int K)
{
    double sum = 0;
    for (int k = 0; k < K; k++)
        if (s0 + k * ds < ns) sum += (double)r[s0 + k * ds] * yv[s0 + k * ds];
    return DM_COMMIT_WARP_SUM(sum);
}

/* Voxel v's part of A^T y: the dot of each IC segment's response with y_v (dots[q], once per
 * direction run), and its EC and ISO entries of g. */
DM_FN void dm_commit_aty_voxel(const dm_commit_op *A, const double *y, long v, int s0, int ds,
                               int K, double *dots, double *g)
{
    const int ns = A->ns;
    const double *yv = y + v * ns;
    for (long q = A->vox_start[v], end = A->vox_start[v + 1]; q < end;) {
        const unsigned short o = A->vox_dir[q];
        const double d = dm_commit_dot(A->lut_ic + (long)o * ns, yv, ns, s0, ds, K);
        for (; q < end && A->vox_dir[q] == o; q++)
            if (DM_COMMIT_LEADER) dots[q] = d;
    }
    for (long e = A->ec_start[v]; e < A->ec_start[v + 1]; e++) {
        const double d = dm_commit_dot(A->lut_ec + (long)A->ec_dir[e] * ns, yv, ns, s0, ds, K);
        if (DM_COMMIT_LEADER) g[A->nf + e] = d;
    }
    for (int i = 0; i < A->niso; i++) {
        const double d = dm_commit_dot(A->lut_iso + (long)i * ns, yv, ns, s0, ds, K);
        if (DM_COMMIT_LEADER) g[A->nf + A->ne + (long)i * A->nv + v] = d;
    }
}

/* Streamline f's entry of A^T y from the dots of its segments. */
DM_FN double dm_commit_aty_streamline(const dm_commit_op *A, const double *dots, long f)
{
    double sum = 0;
    for (long q = A->str_start[f]; q < A->str_start[f + 1]; q++)
        sum += (double)A->str_len[q] * dots[A->str_seg[q]];
    return sum;
}
