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
 * Two options, NULL when unused: iso_index restricts the balls to some voxels (COMMIT's
 * filename_iso_mask: voxel v's balls are columns nf + ne + i niv + iso_index[v], none where it is
 * -1); row_w weighs every row (the square roots of COMMIT's confidence map: A becomes
 * diag(row_w) A, so that 0.5 ||A x - y||^2 with y weighted too is COMMIT's
 * 0.5 ||sqrt(W) (A x - y)||^2).
 *
 * The segments are listed by voxel and, within a voxel, in runs of one direction, so that a run
 * touches its response row once:
 *   A x:      each run's weight w_r = sum_{its segments} l x_f (a thread per run), then per
 *             voxel sum_r w_r R[o_r] with its zeppelins and balls;
 *   A^T y:    per voxel, d_r = R[o_r] . y_v once per run (dots[r]) with the voxel's EC and ISO
 *             entries; then per streamline, sum over its segments of l d_run
 *             (dm_commit_aty_streamline).
 * A segment record is read once per product and y_v once per voxel, never once per segment
 * (the memory floor of COMMIT's products: the segment records, x, y and the run values).
 *
 * The host runs a voxel's samples all in one thread (s0 0, ds 1); a GPU warp runs one voxel, lane
 * l taking samples l, l + 32, ..., with DM_COMMIT_WARP_SUM summing the lanes' shares of a dot and
 * DM_COMMIT_LEADER the lane that writes.  A x sums each run's and each sample's terms in the same
 * order on both (the same bits with --fmad=false); the dots of A^T y are summed in another order
 * on the GPU.
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
    /* IC segments by voxel and, within one, by direction, in runs of one direction: voxel v's
     * runs are [run_start[v], run_start[v+1]), run r's segments [run_first[r], run_first[r+1]) */
    const long *run_start, *run_first;
    const unsigned short *run_dir; /* the run's direction (row of lut_ic) */
    const unsigned *seg_str;       /* each segment's streamline (its IC column) */
    const float *seg_len;          /* its length (preconditioned) */
    /* by streamline: streamline f's segments are [str_start[f], str_start[f+1]), each with its
     * run and its length */
    const long *str_start;
    const unsigned *str_run;
    const float *str_len;
    /* EC columns by voxel: voxel v's are [ec_start[v], ec_start[v + 1]) */
    const long *ec_start;
    const unsigned short *ec_dir; /* each EC column's peak direction */
    const float *lut_ic, *lut_ec; /* ndirs x ns */
    const float *lut_iso;         /* niso x ns */
    long niv;                     /* voxels with balls (nv without iso_index) */
    const long *iso_index;        /* nv: a voxel's place among them, -1: none (NULL: v) */
    const float *row_w;           /* nv x ns: each row's weight (NULL: 1) */
} dm_commit_op;

/* The first ISO column of voxel v (its i-th ball: + i niv), -1 when it has none. */
DM_FN long dm_commit_iso_col(const dm_commit_op *A, long v)
{
    const long iv = A->iso_index ? A->iso_index[v] : v;
    return iv < 0 ? -1 : A->nf + A->ne + iv;
}

/* The weight of run r in A x: the sum over its segments of length x x_f, in their order. */
DM_FN double dm_commit_run_weight(const dm_commit_op *A, const double *x, long r)
{
    double w = 0;
    for (long q = A->run_first[r]; q < A->run_first[r + 1]; q++)
        w += (double)A->seg_len[q] * x[A->seg_str[q]];
    return w;
}

/* Samples s0, s0 + ds, ... (K of them, those below ns) of voxel v's rows of A x, into acc[0 .. K),
 * from the runs' weights (dm_commit_run_weight). */
DM_FN void dm_commit_ax_block(const dm_commit_op *A, const double *x, const double *wrun, long v,
                              int s0, int ds, int K, double *acc)
{
    const int ns = A->ns;
    for (int k = 0; k < K; k++) acc[k] = 0;
    for (long r = A->run_start[v]; r < A->run_start[v + 1]; r++) {
        const double w = wrun[r];
        if (w == 0) continue;
        const float *row = A->lut_ic + (long)A->run_dir[r] * ns;
        for (int k = 0; k < K; k++)
            if (s0 + k * ds < ns) acc[k] += w * (double)row[s0 + k * ds];
    }
    for (long e = A->ec_start[v]; e < A->ec_start[v + 1]; e++) {
        const double w = x[A->nf + e];
        if (w == 0) continue;
        const float *row = A->lut_ec + (long)A->ec_dir[e] * ns;
        for (int k = 0; k < K; k++)
            if (s0 + k * ds < ns) acc[k] += w * (double)row[s0 + k * ds];
    }
    const long iso = dm_commit_iso_col(A, v);
    for (int i = 0; i < A->niso && iso >= 0; i++) {
        const double w = x[iso + (long)i * A->niv];
        if (w == 0) continue;
        const float *row = A->lut_iso + (long)i * ns;
        for (int k = 0; k < K; k++)
            if (s0 + k * ds < ns) acc[k] += w * (double)row[s0 + k * ds];
    }
    if (A->row_w)
        for (int k = 0; k < K; k++)
            if (s0 + k * ds < ns) acc[k] *= (double)A->row_w[v * ns + s0 + k * ds];
}

/* r . (w y) over this thread's samples (w NULL: 1), summed over the warp (the whole dot on the
 * host). */
DM_FN double dm_commit_dot(const float *r, const double *yv, const float *wv, int ns, int s0,
                           int ds, int K)
{
    double sum = 0;
    for (int k = 0; k < K; k++)
        if (s0 + k * ds < ns) {
            double t = yv[s0 + k * ds];
            if (wv) t *= (double)wv[s0 + k * ds];
            sum += (double)r[s0 + k * ds] * t;
        }
    return DM_COMMIT_WARP_SUM(sum);
}

/* Voxel v's part of A^T y: the dot of each run's response with y_v (dots[r]), and its EC and ISO
 * entries of g. */
DM_FN void dm_commit_aty_voxel(const dm_commit_op *A, const double *y, long v, int s0, int ds,
                               int K, double *dots, double *g)
{
    const int ns = A->ns;
    const double *yv = y + v * ns;
    const float *wv = A->row_w ? A->row_w + v * ns : 0;
    for (long r = A->run_start[v]; r < A->run_start[v + 1]; r++) {
        const double d = dm_commit_dot(A->lut_ic + (long)A->run_dir[r] * ns, yv, wv, ns, s0, ds, K);
        if (DM_COMMIT_LEADER) dots[r] = d;
    }
    for (long e = A->ec_start[v]; e < A->ec_start[v + 1]; e++) {
        const double d = dm_commit_dot(A->lut_ec + (long)A->ec_dir[e] * ns, yv, wv, ns, s0, ds, K);
        if (DM_COMMIT_LEADER) g[A->nf + e] = d;
    }
    const long iso = dm_commit_iso_col(A, v);
    for (int i = 0; i < A->niso && iso >= 0; i++) {
        const double d = dm_commit_dot(A->lut_iso + (long)i * ns, yv, wv, ns, s0, ds, K);
        if (DM_COMMIT_LEADER) g[iso + (long)i * A->niv] = d;
    }
}

/* Streamline f's entry of A^T y from the dots of its segments' runs. */
DM_FN double dm_commit_aty_streamline(const dm_commit_op *A, const double *dots, long f)
{
    double sum = 0;
    for (long q = A->str_start[f]; q < A->str_start[f + 1]; q++)
        sum += (double)A->str_len[q] * dots[A->str_run[q]];
    return sum;
}

/* The lasso's soft threshold, signed as COMMIT's (a negative entry moves up towards 0): a group
 * lasso after it sees the negative entries' norms as COMMIT's does. */
DM_FN double dm_commit_soft_threshold(double v, double t)
{
    return v > t ? v - t : v < -t ? v + t : 0;
}
