/* Constrained spherical deconvolution of one voxel, y (its signal) -> x (the tissues'
 * coefficients: the WM FOD's spherical harmonics, one value per isotropic tissue), with A the
 * forward matrix (x -> signal) and C the FOD on a dense set of directions (and the isotropic
 * tissues themselves), both the same for every voxel.  Two algorithms:
 *
 * Hard constraints (multi-tissue CSD, as MRtrix's msmt_csd):
 *     minimise  |A x - y|^2 + ridge |x|^2   subject to   C x >= 0,
 * solved exactly.  runtime/csd/csd_plan.c prepares G = H^-1 A' (n x m; the unconstrained
 * solution x0 = G y, H = A'A + ridge I), C (k x n) and P = C H^-1 (k x n; row i the change of x
 * per unit multiplier of constraint i); the runs add Q = C H^-1 C' (k x k, Q_ij = C_i . P_j).  A
 * voxel costs an (n x m) product and a small active-set loop: Lawson and Hanson's NNLS run on
 * the dual problem.  With multipliers lam >= 0 on the active constraints W,
 *     x = x0 + sum_{i in W} lam_i P_i,   and   C_W x = 0  <=>  Q_WW lam_W = -C_W x0.
 * Each outer step adds the most violated constraint; the inner steps move towards the new
 * solution and drop the multipliers that would turn negative, as NNLS does.  The solution of a
 * strictly convex QP is unique, so every order of steps (CPU, GPU, float, double) ends at the
 * same FOD to within rounding.  The Cholesky factor of Q_WW grows by a row per added
 * constraint and loses one (a rank-one downdate) per dropped one.  A voxel may start from
 * another's active set (a warm start, see dm_csd_solve): its neighbour's, in runs of
 * DM_CSD_RUN voxels.
 *
 * Soft constraints (single-shell CSD, Tournier et al. 2007, as MRtrix's csd):
 *     minimise  |A x - y|^2 + ridge |x|^2 + sum_{i in N} (C_i x)^2,
 * N the directions where the previous iterate is negative (C carries the penalty weight), from
 * a low-degree linear deconvolution (G: n x m), until N repeats.  Each iteration factors
 * H + C_N' C_N (H = A'A + ridge I, n x n) and solves for A' y.
 *
 * The CPU build (runtime/csd/csd_cpu.c) and the GPU build (templates/csd/gpu_csd.cu) both include
 * this file.  Before including: `real` (float or double, as a macro) and DM_FN; without
 * `real` only the outcome codes are read.  Only they are guarded against a second inclusion:
 * the host includes the rest once per precision, renaming its functions and type with
 * #define (runtime/csd/csd_cpu.c).
 *
 * Lanes.  The hard solver runs on DM_CSD_LANES lanes that share the voxel's workspace: one on
 * the host, a warp of 32 on the GPU (its workspace in shared memory).  The includer of a
 * build with several lanes defines DM_CSD_LANES, DM_CSD_LANE (this lane's number),
 * DM_CSD_SYNC() (every lane's writes to the workspace seen by all) and the reductions
 * dm_csd_lanes_max_, dm_csd_lanes_min_ and dm_csd_lanes_best_ (below).  A loop over
 * independent entries is shared out (DM_CSD_FOR_LANES); every other statement runs on every
 * lane with the same values, and a write to the workspace outside such a loop is made by lane 0
 * (DM_CSD_ONE); between a read of the workspace and a write of the same entries by another
 * lane there is a DM_CSD_SYNC.  Each entry is computed by one lane, and by the same sum in the same order
 * whatever the lanes: the triangular solves go by columns (once t is known, its multiples
 * leave the entries that depend on it), which subtracts from each entry in the order the
 * solve by rows does.  So one lane or 32 give the same bits.
 *
 * DM_CSD_HOST (defined by the CPU build only) selects the host's loops where they differ from
 * the GPU's: products of four rows at once (four independent chains of additions keep a core's
 * pipelines busy where one dot product waits on each addition).  Every sum is the same sum in
 * the same order as the code the GPU runs, so both give the same bits; only the order in which
 * independent sums are computed changes. */
#ifndef DIMOC_CSD_SOLVE_H
#define DIMOC_CSD_SOLVE_H

/* Outcome of a voxel (the status map's values). */
enum {
    DM_CSD_OK = 1,         /* solved: every constraint met */
    DM_CSD_MAX_ITER = 2,   /* the iteration limit came first (x is the last iterate) */
    DM_CSD_DEGENERATE = 3, /* a violated constraint depends on the active ones */
    DM_CSD_NONFINITE = 4,  /* the signal holds NaN or Inf: x is 0 */
};

/* The hard solver's acceptance of a voxel whose active set is full (as many active constraints
 * as unknowns): the largest violation left, relative to the unconstrained solution's largest
 * constraint value. */
#define DM_CSD_FULL_TOL 1e-6

/* Entries of a lower triangle of r rows packed by rows: row r starts there. */
#define DM_CSD_TRI(r) ((r) * ((r) + 1) / 2)
/* Doubles of workspace one voxel needs (dm_csd_solve's `work`), and ints (`iwork`).  The hard
 * solver alone needs DM_CSD_HARD_WORK: the factor of Q_WW, packed, and six vectors. */
#define DM_CSD_WORK(n, k) (2 * (n) * (n) + 6 * (n))
#define DM_CSD_HARD_WORK(n) (DM_CSD_TRI(n) + 6 * (n))
#define DM_CSD_IWORK(n, k) ((n) + 2 * (((k) + 31) / 32))
/* The host's ints: room for the soft solver's list of changed directions as well. */
#define DM_CSD_IWORK_HOST(n, k) (DM_CSD_IWORK(n, k) + (k))
/* Voxels in a run: the hard solver starts each voxel of a run but the first from the active
 * set of the one before it (consecutive voxels of a mask are neighbours along a row).  Both
 * devices cut the voxels into the same runs, from index 0, so that both solve each voxel from
 * the same start: their solutions are the same bits. */
#define DM_CSD_RUN 16
/* The GPU's hard solver, a warp a voxel with its workspace in shared memory: bytes a warp, and
 * warps a block: 1 where it fits in the 48 KB of shared memory a block has without asking, 0
 * where not (the GPU then solves a voxel a thread).  One warp a block packs a multiprocessor's
 * shared memory closest: HCP's 47 unknowns take 11.5 KB a warp, so 18 blocks of one warp fit
 * in an H200's 228 KB where 4 blocks of 4 did (16 warps); the kernel took 2.86 s instead of
 * 2.96 s on an HCP-sized subject (2 warps a block: 2.91 s), the same FODs to the bit. */
#define DM_CSD_WARP_BYTES(n, k) (8 * DM_CSD_HARD_WORK(n) + 4 * DM_CSD_IWORK(n, k))
#define DM_CSD_WARPS(n, k) (DM_CSD_WARP_BYTES(n, k) <= 49152 ? 1 : 0)

#endif

#ifdef real

#ifndef DM_CSD_LANES /* one lane: the reductions are the lane's own values */
#define DM_CSD_LANES 1
#define DM_CSD_LANE 0
#define DM_CSD_SYNC() ((void)0)
#define dm_csd_lanes_max_(v) (v)
#define dm_csd_lanes_min_(v) (v)
#define dm_csd_lanes_best_(score, index) ((void)0)
#endif
/* The entries from..to-1 that this lane computes. */
#define DM_CSD_FOR_LANES(i, from, to)                                                              \
    for (int i = (from) + DM_CSD_LANE; i < (to); i += DM_CSD_LANES)
/* A write to the workspace outside DM_CSD_FOR_LANES: by one lane. */
#define DM_CSD_ONE if (DM_CSD_LANE == 0)

typedef struct dm_csd_problem {
    int n, m, k;     /* unknowns, measurements, constraints */
    int soft;        /* 0: hard constraints; 1: Tournier's penalty iterations */
    const real *G;   /* n x m, row-major: hard H^-1 A'; soft the initial deconvolution */
    const real *C;   /* k x n (soft: times the penalty weight) */
    const real *P;   /* hard: k x n */
    const real *Qd;  /* hard: k, the diagonal of Q = C H^-1 C' */
    const real *At;  /* soft: n x m */
    const real *Hp;  /* soft: H's lower triangle, packed by rows (n (n + 1) / 2) */
    const real *Ct;  /* soft: C' (n x k), for the GPU's sums by entry */
    int max_iter;    /* hard: added constraints at most (the outer steps); soft: iterations */
    real tol;        /* a constraint counts as violated below -tol * (largest |C x0|) */
    real pivot_tol;  /* relative ridge on Q_WW's diagonal */
    const double *Q; /* hard, optional (NULL: computed when needed): k x k, Q[i k + j] the
                      * dm_csd_dotrr_ of C_i and P_j */
} dm_csd_problem;

/* Dot products with four partial sums: independent chains the host compiler can pipeline and
 * pack into SIMD lanes without reassociating (the order is the template's, so the GPU, which
 * runs the same code, sums in the same order). */
DM_FN real dm_csd_dot_(const real *a, const real *b, int n)
{
    real s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += a[i] * b[i];
        s1 += a[i + 1] * b[i + 1];
        s2 += a[i + 2] * b[i + 2];
        s3 += a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

/* The hard solver keeps its state in double whatever `real` is: its solution is x0 plus a sum
 * of multiples of P's rows that largely cancel, and the factor of Q_WW is ill-conditioned when
 * neighbouring directions are active together, so float bookkeeping errs by percents (measured);
 * the matrices stay in `real` (memory traffic). */
DM_FN double dm_csd_dotd_(const real *a, const double *b, int n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * b[i];
        s1 += (double)a[i + 1] * b[i + 1];
        s2 += (double)a[i + 2] * b[i + 2];
        s3 += (double)a[i + 3] * b[i + 3];
    }
    for (; i < n; i++) s0 += (double)a[i] * b[i];
    return (s0 + s1) + (s2 + s3);
}

DM_FN double dm_csd_dotrr_(const real *a, const real *b, int n)
{
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    int i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += (double)a[i] * (double)b[i];
        s1 += (double)a[i + 1] * (double)b[i + 1];
        s2 += (double)a[i + 2] * (double)b[i + 2];
        s3 += (double)a[i + 3] * (double)b[i + 3];
    }
    for (; i < n; i++) s0 += (double)a[i] * (double)b[i];
    return (s0 + s1) + (s2 + s3);
}

#ifdef DM_CSD_HOST
/* The host defines dm_csd_dot4_ and dm_csd_dotd4_ before including this file: four rows
 * a[0..3] with one vector, out[r] dm_csd_dot_(a[r], b, n) and dm_csd_dotd_(a[r], b, n) to the
 * bit; dm_csd_chol_rows4_, four rows of the soft solver's Cholesky below column j; and
 * dm_csd_rank_update_, the soft solver's S += sum of +-C_i' C_i over a list of directions
 * (runtime/csd/csd_host_kernels.h). */

/* Rows c to c + 3 of M y (M: row-major, m columns; y's entries ystride apart), each summed from
 * j = 0 up in `real` as the one-row loops of dm_csd_solve_soft_ sum them. */
DM_FN void dm_csd_matvec4_(const real *M, int m, int c, const real *y, long ystride, real *out)
{
    const real *r0 = M + (long)c * m, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;
    real s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int j = 0; j < m; j++) {
        const real yj = y[(long)j * ystride];
        s0 += r0[j] * yj;
        s1 += r1[j] * yj;
        s2 += r2[j] * yj;
        s3 += r3[j] * yj;
    }
    out[0] = s0;
    out[1] = s1;
    out[2] = s2;
    out[3] = s3;
}

/* The same summed in double, as dm_csd_solve sums x0 = G y. */
DM_FN void dm_csd_matvec4d_(const real *M, int m, int c, const real *y, long ystride, double *out)
{
    const real *r0 = M + (long)c * m, *r1 = r0 + m, *r2 = r1 + m, *r3 = r2 + m;
    double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
    for (int j = 0; j < m; j++) {
        const double yj = y[(long)j * ystride];
        s0 += (double)r0[j] * yj;
        s1 += (double)r1[j] * yj;
        s2 += (double)r2[j] * yj;
        s3 += (double)r3[j] * yj;
    }
    out[0] = s0;
    out[1] = s1;
    out[2] = s2;
    out[3] = s3;
}
#endif

/* The hard solver's workspace: the factor L of Q_WW (lower triangle, packed by rows) and its
 * vectors, n each; W and two bit sets in the ints. */
typedef struct dm_csd_hard_ws {
    double *L, *x0, *xd, *lam, *z, *q, *f;
    int *W;
    unsigned *blocked, *aside;
} dm_csd_hard_ws;

DM_FN dm_csd_hard_ws dm_csd_hard_ws_(int n, int k, double *work, int *iwork)
{
    dm_csd_hard_ws w;
    w.L = work;
    w.x0 = work + DM_CSD_TRI(n);
    w.xd = w.x0 + n;
    w.lam = w.xd + n;
    w.z = w.lam + n;
    w.q = w.z + n;
    w.f = w.q + n;
    w.W = iwork;
    w.blocked = (unsigned *)(iwork + n);
    w.aside = w.blocked + (k + 31) / 32;
    return w;
}

/* Appends row r of Q_WW (the W's r + 1 entries, the last on the diagonal) to the factor L of
 * the first r rows; returns the pivot squared, <= 0 when it fails (then row r is garbage). */
DM_FN double dm_csd_chol_append_(const dm_csd_problem *p, const int *W, int r, double *L)
{
    const int n = p->n;
    double *row = L + DM_CSD_TRI(r);
    const real *Ci = p->C + (long)W[r] * n;
    const double *Qi = p->Q ? p->Q + (long)W[r] * p->k : 0;
    DM_CSD_FOR_LANES(j, 0, r + 1)
    row[j] = Qi ? Qi[W[j]] : dm_csd_dotrr_(Ci, p->P + (long)W[j] * n, n);
    DM_CSD_SYNC();
    /* Q_WW + eps diag(Q_WW) (eps = pivot_tol), as MRtrix's ICLS regularises its active
     * constraints: neighbouring directions active together stay well conditioned. */
    double d = row[r] * (1.0 + (double)p->pivot_tol);
    /* By columns: row[t] is final once the columns before it have left it. */
    for (int t = 0; t < r; t++) {
        const double *Lt = L + DM_CSD_TRI(t);
        const double rt = row[t] / Lt[t];
        d -= rt * rt;
        DM_CSD_FOR_LANES(j, t + 1, r) row[j] -= rt * L[DM_CSD_TRI(j) + t];
        DM_CSD_SYNC();
    }
    DM_CSD_FOR_LANES(t, 0, r) row[t] /= L[DM_CSD_TRI(t) + t];
    if (d > 0) DM_CSD_ONE row[r] = sqrt(d);
    DM_CSD_SYNC();
    return d > 0 ? d : 0;
}

/* Removes row and column j from the factor L (nw rows) of Q_WW: the rows below move up, and
 * the trailing block absorbs what column j held as a rank-one update (Givens-like, O(nw^2)).
 * v: room for nw values. */
DM_FN void dm_csd_chol_delete_(double *L, int nw, int j, double *v)
{
    const int s = nw - 1 - j;
    DM_CSD_FOR_LANES(i, 0, s) v[i] = L[DM_CSD_TRI(j + 1 + i) + j];
    DM_CSD_SYNC();
    for (int r = j; r < nw - 1; r++) { /* row r + 1, less column j, into row r */
        double *dst = L + DM_CSD_TRI(r);
        const double *src = L + DM_CSD_TRI(r + 1);
        DM_CSD_FOR_LANES(c, 0, r + 1) dst[c] = src[c < j ? c : c + 1];
        DM_CSD_SYNC();
    }
    for (int t = 0; t < s; t++) {
        const int K = j + t;
        double *LK = L + DM_CSD_TRI(K);
        const double a = LK[K], vt = v[t], r = sqrt(a * a + vt * vt);
        const double c = r / a, sn = vt / a;
        DM_CSD_SYNC(); /* every lane has read L_KK and v_t */
        DM_CSD_ONE LK[K] = r;
        DM_CSD_FOR_LANES(i, t + 1, s)
        {
            double *lik = L + DM_CSD_TRI(j + i) + K;
            *lik = (*lik + sn * v[i]) / c;
            v[i] = c * v[i] - sn * *lik;
        }
        DM_CSD_SYNC();
    }
}

/* z = -(Q_WW)^-1 q_W with L the factor of Q_WW (nw rows).  The forward half (f = -L^-1 q_W)
 * is kept between calls: rows below *nf are still those of the last call (a row added to W or
 * one removed leaves the rows above it as they were), so only the rows from *nf on are
 * computed. */
DM_FN void dm_csd_chol_solve_(const double *L, int nw, const double *q, double *f, int *nf,
                              double *z)
{
    const int from = *nf;
    DM_CSD_FOR_LANES(i, from, nw)
    { /* the rows above, known: by rows */
        const double *Li = L + DM_CSD_TRI(i);
        double s = -q[i];
        for (int t = 0; t < from; t++) s -= Li[t] * f[t];
        f[i] = s;
    }
    DM_CSD_SYNC();
    for (int t = from; t < nw; t++) { /* the rest by columns */
        const double ft = f[t] / L[DM_CSD_TRI(t) + t];
        DM_CSD_FOR_LANES(i, t + 1, nw) f[i] -= L[DM_CSD_TRI(i) + t] * ft;
        DM_CSD_SYNC();
    }
    DM_CSD_FOR_LANES(t, from, nw) f[t] /= L[DM_CSD_TRI(t) + t];
    *nf = nw;
    DM_CSD_SYNC();
    /* The backward half by columns: once z[t] is known, its multiples of L's row t leave the
     * rows above (L's rows are contiguous: a vector operation on the host, where summing row
     * by row down a column is one chain of dependent subtractions). */
    DM_CSD_FOR_LANES(i, 0, nw) z[i] = f[i];
    DM_CSD_SYNC();
    for (int t = nw - 1; t > 0; t--) {
        const double *Lt = L + DM_CSD_TRI(t);
        const double zt = z[t] / Lt[t];
        DM_CSD_FOR_LANES(i, 0, t) z[i] -= Lt[i] * zt;
        DM_CSD_SYNC();
    }
    DM_CSD_FOR_LANES(t, 0, nw) z[t] /= L[DM_CSD_TRI(t) + t];
    DM_CSD_SYNC();
}

/* The violated constraint whose addition alone would lower the objective most, v^2 / Q_ii
 * (steepest edge, as MRtrix's ICLS normalises its constraints), the first of equals, among
 * those not blocked: its index, or -1 when none is below `limit`.  The quotient is computed
 * only where the product v^2 >= best Q_ii says it may win, with a margin that no rounding
 * crosses: the choice is that of the quotients, whatever the order of the scan. */
#define DM_CSD_BEST_MARGIN (1 - 1e-9)
DM_FN int dm_csd_most_violated_(const dm_csd_problem *p, const double *xd, const unsigned *blocked,
                                double limit)
{
    const int n = p->n, k = p->k;
    int worst = -1;
    double best = 0;
#if defined(DM_CSD_HOST) && DM_CSD_LANES == 1
    int idx[4], cnt = 0;
    for (int i = 0; i <= k; i++) {
        if (i < k) {
            if (blocked[i >> 5] & (1u << (i & 31))) continue;
            idx[cnt++] = i;
            if (cnt < 4) continue;
        } else if (cnt == 0) {
            break;
        }
        const real *rows[4];
        double v4[4];
        for (int t = 0; t < 4; t++) rows[t] = p->C + (long)idx[t < cnt ? t : 0] * n;
        dm_csd_dotd4_(rows, xd, n, v4);
        for (int t = 0; t < cnt; t++) { /* in ascending order, as the single loop below */
            const double v = v4[t];
            if (v < limit && v * v >= best * DM_CSD_BEST_MARGIN * p->Qd[idx[t]]) {
                const double s = v * v / p->Qd[idx[t]];
                if (s > best) {
                    best = s;
                    worst = idx[t];
                }
            }
        }
        cnt = 0;
    }
#else
    DM_CSD_FOR_LANES(i, 0, k)
    {
        if (blocked[i >> 5] & (1u << (i & 31))) continue;
        const double v = dm_csd_dotd_(p->C + (long)i * n, xd, n);
        if (v < limit && v * v >= best * DM_CSD_BEST_MARGIN * p->Qd[i]) {
            const double s = v * v / p->Qd[i];
            if (s > best) {
                best = s;
                worst = i;
            }
        }
    }
    /* Across the lanes: the largest, the first of equals (each lane's is its first). */
    dm_csd_lanes_best_(&best, &worst);
#endif
    return worst;
}

/* xd = x0 + sum_j lam_j P_{W_j}. */
DM_FN void dm_csd_update_x_(const dm_csd_problem *p, const dm_csd_hard_ws *w, int nw)
{
    const int n = p->n;
#if DM_CSD_LANES == 1 /* row by row: P's rows are contiguous (vector operations on the host) */
    for (int c = 0; c < n; c++) w->xd[c] = w->x0[c];
    for (int j = 0; j < nw; j++) {
        const real *Pj = p->P + (long)w->W[j] * n;
        for (int c = 0; c < n; c++) w->xd[c] += w->lam[j] * Pj[c];
    }
#else /* entry by entry, the same sums: a lane's entries of each row at once */
    DM_CSD_FOR_LANES(c, 0, n)
    {
        double s = w->x0[c];
        for (int j = 0; j < nw; j++) s += w->lam[j] * p->P[(long)w->W[j] * n + c];
        w->xd[c] = s;
    }
    DM_CSD_SYNC();
#endif
}

/* Drops entry j of W (and of lam and q) and its row and column of L. */
DM_FN void dm_csd_drop_(dm_csd_hard_ws *w, int nw, int j, int *nf)
{
    dm_csd_chol_delete_(w->L, nw, j, w->z);
    if (*nf > j) *nf = j; /* the forward half's rows from j on have changed */
    DM_CSD_ONE for (int t = j; t < nw - 1; t++)
    {
        w->W[t] = w->W[t + 1];
        w->lam[t] = w->lam[t + 1];
        w->q[t] = w->q[t + 1];
    }
    DM_CSD_SYNC();
}

#define DM_CSD_BIT(set, i) ((set)[(i) >> 5] & (1u << ((i)&31)))
#define DM_CSD_SET(set, i) DM_CSD_ONE(set)[(i) >> 5] |= 1u << ((i)&31)
#define DM_CSD_CLEAR(set, i) DM_CSD_ONE(set)[(i) >> 5] &= ~(1u << ((i)&31))

/* The hard-constraint solver (see the top); w->x0 holds the unconstrained solution.  A warm
 * start: *nactive constraints in W on entry (another voxel's active set; 0 for none); on
 * return W and *nactive are this voxel's. */
DM_FN int dm_csd_solve_hard_(const dm_csd_problem *p, real *x, dm_csd_hard_ws *w, int *iters,
                             int *nactive)
{
    const int n = p->n, k = p->k, words = (k + 31) / 32;
    int *W = w->W;
    double *lam = w->lam, *z = w->z, *q = w->q;
    /* One bit per constraint: `blocked` while in W or set aside (dependent on W, or unable to
     * enter), `aside` for the set-aside ones, which get another chance once W has changed. */
    DM_CSD_FOR_LANES(i, 0, words) w->blocked[i] = w->aside[i] = 0u;
    DM_CSD_FOR_LANES(c, 0, n) w->xd[c] = w->x0[c];
    double scale = 0;
    DM_CSD_FOR_LANES(i, 0, k)
    {
        const double v = fabs(dm_csd_dotd_(p->C + (long)i * n, w->x0, n));
        if (v > scale) scale = v;
    }
    scale = dm_csd_lanes_max_(scale);
    DM_CSD_SYNC();
    const double limit = -(double)p->tol * scale;
    int nw = 0, nf = 0, status = DM_CSD_MAX_ITER;
    /* The warm start: the given constraints, in their order, but those dependent on the ones
     * before them; then, while a multiplier of the solution on them is not positive, the most
     * negative one dropped.  What is left is where Lawson and Hanson's loop stands after some
     * steps: the multipliers positive and optimal on W.  The loop below goes on from there to
     * the one solution (the QP is strictly convex), in fewer steps when W is near the active
     * set of the solution, as a neighbouring voxel's is more often than not. */
    const int nw0 = nactive && *nactive > 0 ? (*nactive < n ? *nactive : n) : 0;
    for (int i = 0; i < nw0; i++) {
        const int c = W[i];
        if (c < 0 || c >= k || DM_CSD_BIT(w->blocked, c)) continue;
        DM_CSD_ONE W[nw] = c;
        DM_CSD_SYNC();
        if (!(dm_csd_chol_append_(p, W, nw, w->L) > 0)) continue;
        const double qc = dm_csd_dotd_(p->C + (long)c * n, w->x0, n);
        DM_CSD_SET(w->blocked, c);
        DM_CSD_ONE q[nw] = qc;
        DM_CSD_SYNC();
        nw++;
    }
    while (nw > 0) {
        dm_csd_chol_solve_(w->L, nw, q, w->f, &nf, z);
        int jmin = -1;
        for (int j = 0; j < nw; j++)
            if (z[j] <= 0 && (jmin < 0 || z[j] < z[jmin])) jmin = j;
        if (jmin < 0) {
            DM_CSD_FOR_LANES(j, 0, nw) lam[j] = z[j];
            DM_CSD_SYNC();
            dm_csd_update_x_(p, w, nw);
            break;
        }
        DM_CSD_CLEAR(w->blocked, W[jmin]);
        DM_CSD_SYNC();
        dm_csd_drop_(w, nw, jmin, &nf);
        nw--;
    }
    for (int it = 0; it < p->max_iter; it++) {
        if (iters) *iters = it + 1;
        const int worst = dm_csd_most_violated_(p, w->xd, w->blocked, limit);
        if (worst < 0) {
            status = DM_CSD_OK;
            break;
        }
        if (nw == n) {
            /* As many active constraints as unknowns: nothing can be added.  A tissue at zero
             * (the WM FOD of a CSF voxel) is pinned by more constraints than it has
             * coefficients, and the regularisation of Q_WW leaves violations of the order of
             * its rounding, which the steps above can only trade for others: within
             * DM_CSD_FULL_TOL of the scale that is the solution (MRtrix's msmt_csd gives the
             * same to 1e-6), beyond it the constraints are degenerate. */
            double least = 0;
            DM_CSD_FOR_LANES(i, 0, k)
            {
                const double v = dm_csd_dotd_(p->C + (long)i * n, w->xd, n);
                if (v < least) least = v;
            }
            least = dm_csd_lanes_min_(least);
            status = least >= -DM_CSD_FULL_TOL * scale ? DM_CSD_OK : DM_CSD_DEGENERATE;
            break;
        }
        DM_CSD_SET(w->blocked, worst);
        DM_CSD_ONE W[nw] = worst;
        DM_CSD_SYNC();
        if (!(dm_csd_chol_append_(p, W, nw, w->L) > 0)) { /* dependent on W: set it aside */
            DM_CSD_SET(w->aside, worst);
            DM_CSD_SYNC();
            continue;
        }
        const double qw = dm_csd_dotd_(p->C + (long)worst * n, w->x0, n);
        DM_CSD_ONE
        {
            q[nw] = qw;
            lam[nw] = 0;
        }
        DM_CSD_SYNC();
        nw++;
        int set_aside = 0;
        for (int first = 1;; first = 0) {
            dm_csd_chol_solve_(w->L, nw, q, w->f, &nf, z);
            int jmin = -1;
            double alpha = 1;
            for (int j = 0; j < nw; j++)
                if (z[j] <= 0) {
                    const double a = lam[j] / (lam[j] - z[j]);
                    if (jmin < 0 || a < alpha) {
                        alpha = a;
                        jmin = j;
                    }
                }
            DM_CSD_SYNC(); /* every lane has read lam before it changes */
            if (jmin < 0) {
                DM_CSD_FOR_LANES(j, 0, nw) lam[j] = z[j];
                DM_CSD_SYNC();
                break;
            }
            /* Step as far as the first multiplier that reaches 0 and drop it (and any other
             * at 0), downdating the factor; dropped constraints may be added again later,
             * except the one just added when it cannot enter at all (a violation within
             * rounding): that would cycle. */
            DM_CSD_FOR_LANES(j, 0, nw) lam[j] = j == jmin ? 0 : lam[j] + alpha * (z[j] - lam[j]);
            DM_CSD_SYNC();
            for (int j = nw - 1; j >= 0; j--) {
                if (lam[j] > 0) continue;
                if (first && W[j] == worst) {
                    DM_CSD_SET(w->aside, worst);
                    set_aside = 1;
                } else {
                    DM_CSD_CLEAR(w->blocked, W[j]);
                }
                DM_CSD_SYNC();
                dm_csd_drop_(w, nw, j, &nf);
                nw--;
            }
            if (nw == 0) break;
        }
        dm_csd_update_x_(p, w, nw);
        if (!set_aside) { /* W changed: retry the set-aside */
            DM_CSD_FOR_LANES(i, 0, words)
            {
                w->blocked[i] &= ~w->aside[i];
                w->aside[i] = 0u;
            }
            DM_CSD_SYNC();
        }
    }
    DM_CSD_FOR_LANES(c, 0, n) x[c] = (real)w->xd[c];
    DM_CSD_SYNC();
    if (nactive) *nactive = nw;
    return status;
}

#if DM_CSD_LANES == 1 /* the soft solver: one lane */
/* The soft-constraint solver (see the top); arguments as dm_csd_solve's. */
DM_FN int dm_csd_solve_soft_(const dm_csd_problem *p, const real *y, long ystride, real *x,
                             double *dwork, int *iwork, int *iters)
{
    const int n = p->n, m = p->m, k = p->k, words = (k + 31) / 32;
    const int np = n * (n + 1) / 2; /* L and S: lower triangles packed by rows */
    real *L = (real *)dwork, *b = L + np, *S = b + n;
    unsigned *neg = (unsigned *)iwork, *was = neg + words;
    for (int w = 0; w < words; w++) neg[w] = was[w] = 0u;
    int c0 = 0;
#ifdef DM_CSD_HOST
    for (; c0 + 4 <= n; c0 += 4) dm_csd_matvec4_(p->At, m, c0, y, ystride, b + c0);
#endif
    for (int c = c0; c < n; c++) {
        real s = 0;
        for (int j = 0; j < m; j++) s += p->At[(long)c * m + j] * y[(long)j * ystride];
        b[c] = s;
    }
    for (int it = 0; it < p->max_iter; it++) {
        if (iters) *iters = it + 1;
        int changed = it == 0;
        for (int w = 0; w < words; w++) {
            unsigned bits = 0u;
            int i = 32 * w;
            const int end = 32 * w + 32 < k ? 32 * w + 32 : k;
#ifdef DM_CSD_HOST
            for (; i + 4 <= end; i += 4) {
                const real *rows[4] = {p->C + (long)i * n, p->C + (long)(i + 1) * n,
                                       p->C + (long)(i + 2) * n, p->C + (long)(i + 3) * n};
                real v4[4];
                dm_csd_dot4_(rows, x, n, v4);
                for (int t = 0; t < 4; t++)
                    if (v4[t] < 0) bits |= 1u << ((i + t) & 31);
            }
#endif
            for (; i < end; i++)
                if (dm_csd_dot_(p->C + (long)i * n, x, n) < 0) bits |= 1u << (i & 31);
            changed |= bits != neg[w];
            neg[w] = bits;
        }
        (void)was;
        if (!changed) return DM_CSD_OK;
            /* L = H + sum over the negative directions of C_i' C_i, then factored in place.  The
         * host keeps that sum (S) from one iteration to the next and adds or subtracts only
         * the directions whose sign changed; the GPU sums every direction with weight 0 or 1,
         * entry by entry, so that the threads of a warp (voxels with different negative sets)
         * run in step.  The two differ only in rounding (the GPU parity test bounds it). */
#ifdef DM_CSD_SUM_BY_ENTRY
        for (int r = 0, rc = 0; r < n; r++)
            for (int c = 0; c <= r; c++, rc++) {
                real acc = p->Hp[rc];
                const real *Cr = p->Ct + (long)r * k, *Cc = p->Ct + (long)c * k;
                for (int w = 0; w < words; w++) {
                    unsigned bits = neg[w];
                    const int end = 32 * w + 32 < k ? 32 * w + 32 : k;
                    for (int i = 32 * w; i < end; i++, bits >>= 1)
                        acc += ((real)(bits & 1u) * Cr[i]) * Cc[i];
                }
                L[rc] = acc;
            }
#elif defined(DM_CSD_HOST)
        /* The same sums, entry by entry in the same order (the directions in ascending
         * order), by dm_csd_rank_update_ from a list of the changed directions: i added, ~i
         * taken out (iwork has DM_CSD_IWORK_HOST ints). */
        if (it == 0)
            for (int rc = 0; rc < np; rc++) S[rc] = p->Hp[rc];
        int nflip = 0, *flip = iwork + 2 * words;
        for (int w = 0; w < words; w++) {
            unsigned flips = neg[w] ^ was[w];
            for (int i = 32 * w; flips; i++, flips >>= 1)
                if (flips & 1u) flip[nflip++] = (neg[w] >> (i & 31)) & 1u ? i : ~i;
            was[w] = neg[w];
        }
        dm_csd_rank_update_(S, n, p->C, flip, nflip);
        for (int rc = 0; rc < np; rc++) L[rc] = S[rc];
#else
        if (it == 0)
            for (int rc = 0; rc < np; rc++) S[rc] = p->Hp[rc];
        for (int w = 0; w < words; w++) {
            unsigned flips = neg[w] ^ was[w];
            for (int i = 32 * w; flips; i++, flips >>= 1) {
                if (!(flips & 1u)) continue;
                const real *Ci = p->C + (long)i * n;
                real sign = (neg[w] >> (i & 31)) & 1u ? (real)1 : (real)-1;
                for (int r = 0; r < n; r++) {
                    real *Sr = S + (long)r * (r + 1) / 2, a = sign * Ci[r];
                    for (int c = 0; c <= r; c++) Sr[c] += a * Ci[c];
                }
            }
            was[w] = neg[w];
        }
        for (int rc = 0; rc < np; rc++) L[rc] = S[rc];
#endif
        /* Cholesky in place (packed rows), then the two triangular solves. */
        for (int j = 0; j < n; j++) {
            real *Lj = L + (long)j * (j + 1) / 2;
            real d = Lj[j] - dm_csd_dot_(Lj, Lj, j);
            if (!(d > 0)) return DM_CSD_DEGENERATE;
            d = sqrt(d);
            Lj[j] = d;
            int r = j + 1;
#ifdef DM_CSD_HOST
            for (; r + 4 <= n; r += 4) {
                real *rows[4] = {L + (long)r * (r + 1) / 2, L + (long)(r + 1) * (r + 2) / 2,
                                 L + (long)(r + 2) * (r + 3) / 2, L + (long)(r + 3) * (r + 4) / 2};
                dm_csd_chol_rows4_(rows, Lj, j, d);
            }
#endif
            for (; r < n; r++) {
                real *Lr = L + (long)r * (r + 1) / 2;
                Lr[j] = (Lr[j] - dm_csd_dot_(Lr, Lj, j)) / d;
            }
        }
        for (int r = 0; r < n; r++) {
            const real *Lr = L + (long)r * (r + 1) / 2;
            x[r] = (b[r] - dm_csd_dot_(Lr, x, r)) / Lr[r];
        }
        for (int r = n - 1; r >= 0; r--) {
            real s = x[r];
            for (int t = r + 1; t < n; t++) s -= L[(long)t * (t + 1) / 2 + r] * x[t];
            x[r] = s / L[(long)r * (r + 1) / 2 + r];
        }
    }
    return DM_CSD_MAX_ITER;
}

#endif

/* Solves one voxel: y (m values, `ystride` apart) -> x (n values).  work and iwork hold
 * DM_CSD_WORK doubles and DM_CSD_IWORK ints (hard constraints: DM_CSD_HARD_WORK doubles).
 * *iters (may be NULL) gets the steps taken.  nactive (may be NULL; hard constraints only): on
 * entry the size of a warm start, the first *nactive ints of iwork (the active set another
 * voxel left there: 0 for none); on return the size of this voxel's, left in iwork for the
 * next.  Returns a DM_CSD_* outcome; x is 0 for a signal with NaN or Inf.  With several lanes
 * (hard constraints only) every lane calls it with the same arguments. */
DM_FN int dm_csd_solve(const dm_csd_problem *p, const real *y, long ystride, real *x, double *work,
                       int *iwork, int *iters, int *nactive)
{
    const int n = p->n, m = p->m;
    dm_csd_hard_ws w = dm_csd_hard_ws_(n, p->k, work, iwork);
    double *x0 = w.x0; /* where the hard solver keeps it */
    if (iters) *iters = 0;
    int c0 = 0;
#if defined(DM_CSD_HOST) && DM_CSD_LANES == 1
    for (; c0 + 4 <= n; c0 += 4) {
        dm_csd_matvec4d_(p->G, m, c0, y, ystride, x0 + c0);
        for (int t = 0; t < 4; t++) x[c0 + t] = (real)x0[c0 + t];
    }
#endif
    DM_CSD_FOR_LANES(c, c0, n)
    {
        double s = 0;
        for (int j = 0; j < m; j++) s += (double)p->G[(long)c * m + j] * y[(long)j * ystride];
        x0[c] = s;
        x[c] = (real)s;
    }
    DM_CSD_SYNC();
    for (int c = 0; c < n; c++)
        if (!(x0[c] - x0[c] == 0)) { /* NaN or Inf */
            DM_CSD_FOR_LANES(t, 0, n) x[t] = 0;
            DM_CSD_SYNC();
            if (nactive) *nactive = 0;
            return DM_CSD_NONFINITE;
        }
#if DM_CSD_LANES == 1
    if (p->soft) {
        if (nactive) *nactive = 0;
        return dm_csd_solve_soft_(p, y, ystride, x, work, iwork, iters);
    }
#endif
    return dm_csd_solve_hard_(p, x, &w, iters, nactive);
}

#endif /* real */
