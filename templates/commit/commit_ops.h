/* COMMIT's linear operator A and its adjoint, one source for host threads
 * (runtime/commit/commit_cpu.c) and the GPU (gpu_commit.cu).
 *
 * A maps the unknowns x to the signal of every voxel that a streamline crosses (ns samples a
 * voxel, row v * ns + s), as three blocks of columns, x = [IC | EC | ISO]:
 *   IC   nic columns per streamline f, response by response (column k nf + f, as COMMIT's
 *        radii): its segments in voxel v (length l, direction index o) add l x_(k nf + f)
 *        R_IC_k[o] (the stick, or the cylinder of the k-th radius, rotated onto the segment);
 *   EC   nec columns per (voxel, peak) entry e, one per zeppelin's d_perp, response by response
 *        as COMMIT's (column nic nf + z ne + e): x R_EC_z[o] (the z-th zeppelin along the peak);
 *   ISO  niso columns per voxel, ordered response by response (column nic nf + nec ne + i nv + v):
 *        x R_ISO[i].
 * Each response is a row of one table of rows (lut; commit_kernels.h: IC response c at direction
 * o row c ndirs + o, EC response z row (nic + z) ndirs + o, ball i row (nic + nec) ndirs + i;
 * nsp floats a row, ns of them samples).
 * Two options, NULL when unused: iso_index restricts the balls to some voxels (COMMIT's
 * filename_iso_mask: voxel v's balls are columns nic nf + nec ne + i niv + iso_index[v], none where
 * it is -1); row_w weighs every row (the square roots of COMMIT's confidence map: A becomes
 * diag(row_w) A, so that 0.5 ||A x - y||^2 with y weighted too is COMMIT's
 * 0.5 ||sqrt(W) (A x - y)||^2).
 *
 * The segments are listed by voxel and, within a voxel, in runs of one direction, so that a run
 * touches its response row once:
 *   A x:      each run's weights w_rk = sum_{its segments} l x_(k nf + f) (a pass over the
 *             runs into wrun[r nic + k]), then per voxel sum over its terms (dm_commit_term: the
 *             runs' IC responses, the zeppelins entry by entry, the balls) of the term's weight
 *             times its row;
 *   A^T y:    per voxel, each term's row . y_v (the runs' into dots[r nic + k], the EC and ISO
 *             entries into A^T y); then per streamline, sum over its segments of l d_run,k
 *             (dm_commit_aty_streamline).
 * A segment record is read once per product and y_v once per voxel, never once per segment
 * (the memory floor of COMMIT's products: the segment records, x, y and the run values).
 *
 * The GPU's kernels (gpu_commit.cu) take the same terms in the same order but split a voxel's
 * samples over a warp: the runs' weights are the host's bit for bit (the segments in the order
 * of dm_commit_run_weights, with --fmad=false), the rest rounds apart from the host's in the
 * last bits (fused multiply-adds, A^T y's dots summed in another order).
 *
 * No include guard.  Before including: DM_FN (storage of the functions). */

typedef struct dm_commit_op {
    int ns;   /* samples per voxel */
    int niso; /* isotropic responses per voxel */
    int nic;  /* IC responses per streamline (1, or one per cylinder radius) */
    long nv;  /* voxels (rows: nv * ns) */
    long nf;  /* streamlines (IC columns) */
    long ne;  /* EC entries (voxel, peak): nec ne EC columns */
    int nec;  /* EC responses per entry (one per d_perp; 0 without zeppelins) */
    /* IC segments by voxel and, within one, by direction, in runs of one direction: voxel v's
     * runs are [run_start[v], run_start[v+1]), run r's segments [run_first[r], run_first[r+1]) */
    const long *run_start, *run_first;
    const unsigned short *run_dir; /* the run's direction */
    const unsigned *seg_str;       /* each segment's streamline (its IC column) */
    const float *seg_len;          /* its length (preconditioned) */
    /* by streamline: streamline f's segments are [str_start[f], str_start[f+1]), each with its
     * run and its length */
    const long *str_start;
    const unsigned *str_run;
    const float *str_len;
    /* EC entries by voxel: voxel v's are [ec_start[v], ec_start[v + 1]) */
    const long *ec_start;
    const unsigned short *ec_dir; /* each EC entry's peak direction */
    int ndirs;                    /* the table's directions */
    int nsp;                      /* floats a row of it */
    const float *lut;             /* the responses' rows: ((nic + nec) ndirs + niso) x nsp */
    long niv;                     /* voxels with balls (nv without iso_index) */
    const long *iso_index;        /* nv: a voxel's place among them, -1: none (NULL: v) */
    const float *row_w;           /* nv x ns: each row's weight (NULL: 1) */
    /* IC columns left out of A^T (their entries of A^T r 0, so from 0 they stay 0: COMMIT's
     * IC eval mask of fit(debias=True), the refit on the support; NULL: none) */
    const unsigned char *ic_fixed;
} dm_commit_op;

/* The first ISO column of voxel v (its i-th ball: + i niv), -1 when it has none. */
DM_FN long dm_commit_iso_col(const dm_commit_op *A, long v)
{
    const long iv = A->iso_index ? A->iso_index[v] : v;
    return iv < 0 ? -1 : (long)A->nic * A->nf + (long)A->nec * A->ne + iv;
}

/* The weights of run r in A x, one per IC response k into w[k]: the sum over its segments of
 * length x x_(k nf + f), in their order. */
DM_FN void dm_commit_run_weights(const dm_commit_op *A, const double *x, long r, double *w)
{
    for (int k = 0; k < A->nic; k++) {
        const double *xk = x + (long)k * A->nf;
        double s = 0;
        for (long q = A->run_first[r]; q < A->run_first[r + 1]; q++)
            s += (double)A->seg_len[q] * xk[A->seg_str[q]];
        w[k] = s;
    }
}

/* A voxel's terms, in the order both devices take them: its runs' IC responses (run by run, each
 * run's nic in order), its EC entries' (entry by entry, each entry's nec), its balls. */
typedef struct dm_commit_terms {
    long r0, e0, iso;  /* its first run, first EC entry, first ISO column (-1: none) */
    int nrun, nent, n; /* IC terms, EC terms, all */
} dm_commit_terms;

DM_FN dm_commit_terms dm_commit_terms_of(const dm_commit_op *A, long v)
{
    dm_commit_terms T;
    T.r0 = A->run_start[v];
    T.e0 = A->ec_start[v];
    T.iso = dm_commit_iso_col(A, v);
    T.nrun = (int)(A->run_start[v + 1] - T.r0) * A->nic;
    T.nent = (int)(A->ec_start[v + 1] - T.e0) * A->nec;
    T.n = T.nrun + T.nent + (T.iso >= 0 ? A->niso : 0);
    return T;
}

/* Term u of T: returns its row of lut; *at is its index among the runs' values (r nic + c: the
 * weights in A x, the dots in A^T y) for an IC term (*ic 1), else its column of x. */
DM_FN long dm_commit_term(const dm_commit_op *A, const dm_commit_terms *T, int u, long *at, int *ic)
{
    *ic = u < T->nrun;
    if (*ic) {
        const int j = A->nic == 1 ? u : u / A->nic;
        *at = T->r0 * A->nic + u;
        return (long)(u - j * A->nic) * A->ndirs + A->run_dir[T->r0 + j];
    }
    u -= T->nrun;
    if (u < T->nent) {
        const int j = A->nec == 1 ? u : u / A->nec, z = u - j * A->nec;
        *at = (long)A->nic * A->nf + (long)z * A->ne + T->e0 + j;
        return (long)(A->nic + z) * A->ndirs + A->ec_dir[T->e0 + j];
    }
    u -= T->nent;
    *at = T->iso + (long)u * A->niv;
    return (long)(A->nic + A->nec) * A->ndirs + u;
}

/* Voxel v's rows of A x into acc[0 .. ns), from x and the runs' weights (dm_commit_run_weights):
 * its terms' weights times their rows, in order (a zero weight skipped), then the rows' weights. */
DM_FN void dm_commit_ax_voxel(const dm_commit_op *A, const double *x, const double *wrun, long v,
                              double *acc)
{
    const int ns = A->ns;
    const dm_commit_terms T = dm_commit_terms_of(A, v);
    for (int s = 0; s < ns; s++) acc[s] = 0;
    for (int u = 0; u < T.n; u++) {
        long at;
        int ic;
        const float *row = A->lut + dm_commit_term(A, &T, u, &at, &ic) * A->nsp;
        const double w = ic ? wrun[at] : x[at];
        if (w == 0) continue;
        for (int s = 0; s < ns; s++) acc[s] += w * (double)row[s];
    }
    if (A->row_w)
        for (int s = 0; s < ns; s++) acc[s] *= (double)A->row_w[v * ns + s];
}

/* Voxel v's part of A^T y: each term's row . (row_w y_v), into dots (IC terms) and g (EC and
 * ISO columns). */
DM_FN void dm_commit_aty_voxel(const dm_commit_op *A, const double *y, long v, double *dots,
                               double *g)
{
    const int ns = A->ns;
    const double *yv = y + v * ns;
    const float *wv = A->row_w ? A->row_w + v * ns : 0;
    const dm_commit_terms T = dm_commit_terms_of(A, v);
    for (int u = 0; u < T.n; u++) {
        long at;
        int ic;
        const float *row = A->lut + dm_commit_term(A, &T, u, &at, &ic) * A->nsp;
        double d = 0;
        for (int s = 0; s < ns; s++) d += (double)row[s] * (wv ? yv[s] * (double)wv[s] : yv[s]);
        (ic ? dots : g)[at] = d;
    }
}

/* Streamline f's entries of A^T y (g[k nf + f], one per IC response) from the dots of its
 * segments' runs. */
DM_FN void dm_commit_aty_streamline(const dm_commit_op *A, const double *dots, long f, double *g)
{
    for (int k = 0; k < A->nic; k++) {
        double sum = 0;
        for (long q = A->str_start[f]; q < A->str_start[f + 1]; q++)
            sum += (double)A->str_len[q] * dots[(long)A->str_run[q] * A->nic + k];
        const long j = (long)k * A->nf + f;
        g[j] = A->ic_fixed && A->ic_fixed[j] ? 0.0 : sum;
    }
}

/* The residual at FISTA's extrapolated point x + a (x - prev), from the residuals at x (rx) and
 * prev (rp): A is linear, so no product. */
DM_FN double dm_commit_extrapolate(double rx, double rp, double a)
{
    return rx + a * (rx - rp);
}

/* The lasso's lambda of column j: COMMIT's set_regularisation gives each block its own, IC
 * columns [0, nic_cols), EC [nic_cols, ec_end), ISO [ec_end, ...) (0: no lasso there). */
DM_FN double dm_commit_block_lambda(long j, long nic_cols, long ec_end, double l_ic, double l_ec,
                                    double l_iso)
{
    return j < nic_cols ? l_ic : j < ec_end ? l_ec : l_iso;
}

/* Column j's lasso threshold per unit step: its block's lambda times its weight (COMMIT's
 * coeff_weights; w NULL: 1). */
DM_FN double dm_commit_col_lambda(long j, long nic_cols, long ec_end, double l_ic, double l_ec,
                                  double l_iso, const double *w)
{
    const double l = dm_commit_block_lambda(j, nic_cols, ec_end, l_ic, l_ec, l_iso);
    return w && l != 0 ? l * w[j] : l;
}

/* Column j's value after its block's constraint (COMMIT's non_negativity: x <= 0 set to 0),
 * unless the block is free of it (is_nonnegative False): bit 0 of free_blocks IC, bit 1 EC,
 * bit 2 ISO. */
DM_FN double dm_commit_project(double v, long j, long nic_cols, long ec_end, unsigned free_blocks)
{
    const int b = j < nic_cols ? 0 : j < ec_end ? 1 : 2;
    return v <= 0 && !((free_blocks >> b) & 1u) ? 0.0 : v;
}

/* The lasso's soft threshold, signed as COMMIT's (a negative entry moves up towards 0): a group
 * lasso after it sees the negative entries' norms as COMMIT's does. */
DM_FN double dm_commit_soft_threshold(double v, double t)
{
    return v > t ? v - t : v < -t ? v + t : 0;
}
