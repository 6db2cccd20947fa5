/* Constrained spherical deconvolution of one voxel, y (its signal) -> x (the tissues'
 * coefficients: the WM FOD's spherical harmonics, one value per isotropic tissue), with A the
 * forward matrix (x -> signal) and C the FOD on a dense set of directions (and the isotropic
 * tissues themselves), both the same for every voxel.  Two algorithms:
 *
 * Hard constraints (multi-tissue CSD, as MRtrix's msmt_csd):
 *     minimise  |A x - y|^2 + ridge |x|^2   subject to   C x >= 0,
 * solved exactly.  runtime/csd/csd_plan.c prepares G = H^-1 A' (n x m; the unconstrained
 * solution x0 = G y, H = A'A + ridge I), C (k x n) and P = C H^-1 (k x n; row i the change of x
 * per unit multiplier of constraint i).  A voxel costs an (n x m) product and a small
 * active-set loop: Lawson and Hanson's NNLS run on the dual problem.  With multipliers
 * lam >= 0 on the active constraints W,
 *     x = x0 + sum_{i in W} lam_i P_i,   and   C_W x = 0  <=>  Q_WW lam_W = -C_W x0
 * where Q = C H^-1 C' (Q_ij = C_i . P_j, formed only for the rows W needs).  Each outer step adds
 * the most violated constraint; the inner steps move towards the new solution and drop the
 * multipliers that would turn negative, as NNLS does.  The solution of a strictly convex QP is
 * unique, so every order of steps (CPU, GPU, float, double) ends at the same FOD to within
 * rounding.  The Cholesky factor of Q_WW grows by a row per added constraint and is rebuilt
 * when one is dropped.
 *
 * Soft constraints (single-shell CSD, Tournier et al. 2007, as MRtrix's csd):
 *     minimise  |A x - y|^2 + ridge |x|^2 + sum_{i in N} (C_i x)^2,
 * N the directions where the previous iterate is negative (C carries the penalty weight), from
 * a low-degree linear deconvolution (G: n x m), until N repeats.  Each iteration factors
 * H + C_N' C_N (H = A'A + ridge I, n x n) and solves for A' y.
 *
 * The CPU build (runtime/csd/csd_cpu.c) and the GPU build (templates/gpu_csd.cu) both include
 * this file.  Before including: `real` (float or double, as a macro) and DM_FN; without
 * `real` only the outcome codes are read.  Only they are guarded against a second inclusion:
 * the host includes the rest once per precision, renaming its functions and type with
 * #define (runtime/csd/csd_cpu.c). */
#ifndef DIMOC_CSD_SOLVE_H
#define DIMOC_CSD_SOLVE_H

/* Outcome of a voxel (the status map's values). */
enum {
    DM_CSD_OK = 1,         /* solved: every constraint met */
    DM_CSD_MAX_ITER = 2,   /* the iteration limit came first (x is the last iterate) */
    DM_CSD_DEGENERATE = 3, /* a violated constraint depends on the active ones */
    DM_CSD_NONFINITE = 4,  /* the signal holds NaN or Inf: x is 0 */
};

/* Reals of workspace one voxel needs (dm_csd_solve's `work`), and ints (`iwork`). */
#define DM_CSD_WORK(n, k) ((n) * (n) + 4 * (n))
#define DM_CSD_IWORK(n, k) ((n) + 2 * (((k) + 31) / 32))

#endif

#ifdef real

typedef struct dm_csd_problem {
    int n, m, k;    /* unknowns, measurements, constraints */
    int soft;       /* 0: hard constraints; 1: Tournier's penalty iterations */
    const real *G;  /* n x m, row-major: hard H^-1 A'; soft the initial deconvolution */
    const real *C;  /* k x n (soft: times the penalty weight) */
    const real *P;  /* hard: k x n */
    const real *At; /* soft: n x m */
    const real *H;  /* soft: n x n */
    int max_iter;   /* hard: added constraints at most (the outer steps); soft: iterations */
    real tol;       /* a constraint counts as violated below -tol * (largest |C x0|) */
    real pivot_tol; /* a new row of Q_WW with a pivot below pivot_tol * Q_ii is dependent */
} dm_csd_problem;

DM_FN real dm_csd_dot_(const real *a, const real *b, int n)
{
    real s = 0;
    for (int i = 0; i < n; i++) s += a[i] * b[i];
    return s;
}

/* Appends row r of Q_WW (the W's r+1 entries, the last on the diagonal) to the Cholesky factor
 * L (row-major, stride n) of the first r rows; returns the pivot squared, <= 0 when it fails. */
DM_FN real dm_csd_chol_append_(const dm_csd_problem *p, const int *W, int r, real *L)
{
    const int n = p->n;
    const real *Ci = p->C + (long)W[r] * n;
    real *row = L + (long)r * n;
    for (int j = 0; j < r; j++) {
        real s = dm_csd_dot_(Ci, p->P + (long)W[j] * n, n);
        for (int t = 0; t < j; t++) s -= row[t] * L[(long)j * n + t];
        row[j] = s / L[(long)j * n + j];
    }
    real qii = dm_csd_dot_(Ci, p->P + (long)W[r] * n, n);
    real d = qii;
    for (int t = 0; t < r; t++) d -= row[t] * row[t];
    if (!(d > p->pivot_tol * qii)) return 0;
    row[r] = sqrt(d);
    return d;
}

/* z = -(Q_WW)^-1 q_W with L the factor of Q_WW (nw rows). */
DM_FN void dm_csd_chol_solve_(const real *L, int n, int nw, const real *q, real *z)
{
    for (int i = 0; i < nw; i++) {
        real s = -q[i];
        for (int t = 0; t < i; t++) s -= L[(long)i * n + t] * z[t];
        z[i] = s / L[(long)i * n + i];
    }
    for (int i = nw - 1; i >= 0; i--) {
        real s = z[i];
        for (int t = i + 1; t < nw; t++) s -= L[(long)t * n + i] * z[t];
        z[i] = s / L[(long)i * n + i];
    }
}

/* x = x0 + sum_j lam_j P_{W_j}. */
DM_FN void dm_csd_update_x_(const dm_csd_problem *p, const real *x0, const int *W, const real *lam,
                            int nw, real *x)
{
    for (int c = 0; c < p->n; c++) x[c] = x0[c];
    for (int j = 0; j < nw; j++) {
        const real *Pj = p->P + (long)W[j] * p->n;
        for (int c = 0; c < p->n; c++) x[c] += lam[j] * Pj[c];
    }
}

/* The hard-constraint solver (see the top); arguments as dm_csd_solve's. */
DM_FN int dm_csd_solve_hard_(const dm_csd_problem *p, const real *y, long ystride, real *x,
                             real *work, int *iwork, int *iters)
{
    const int n = p->n, k = p->k;
    real *L = work, *x0 = work + (long)n * n, *lam = x0 + n, *z = lam + n, *q = z + n;
    int *W = iwork;
    unsigned *blocked = (unsigned *)(iwork + n); /* one bit per constraint: in W or dependent */
    (void)y;
    (void)ystride;
    for (int w = 0; w < (k + 31) / 32; w++) blocked[w] = 0u;
    real scale = 0;
    for (int i = 0; i < k; i++) {
        real v = dm_csd_dot_(p->C + (long)i * n, x0, n);
        if (v < 0) v = -v;
        if (v > scale) scale = v;
    }
    const real limit = -p->tol * scale;
    int nw = 0, status = DM_CSD_MAX_ITER;
    for (int it = 0; it < p->max_iter; it++) {
        if (iters) *iters = it + 1;
        int worst = -1;
        real vmin = limit;
        for (int i = 0; i < k; i++) {
            if (blocked[i >> 5] & (1u << (i & 31))) continue;
            real v = dm_csd_dot_(p->C + (long)i * n, x, n);
            if (v < vmin) {
                vmin = v;
                worst = i;
            }
        }
        if (worst < 0) {
            status = DM_CSD_OK;
            break;
        }
        blocked[worst >> 5] |= 1u << (worst & 31);
        if (nw == n) { /* as many active constraints as unknowns: nothing can be added */
            status = DM_CSD_DEGENERATE;
            break;
        }
        W[nw] = worst;
        if (dm_csd_chol_append_(p, W, nw, L) <= 0) continue; /* dependent: leave it out */
        q[nw] = dm_csd_dot_(p->C + (long)worst * n, x0, n);
        lam[nw] = 0;
        nw++;
        for (int first = 1;; first = 0) {
            dm_csd_chol_solve_(L, n, nw, q, z);
            int jmin = -1;
            real alpha = 1;
            for (int j = 0; j < nw; j++)
                if (z[j] <= 0) {
                    real a = lam[j] / (lam[j] - z[j]);
                    if (jmin < 0 || a < alpha) {
                        alpha = a;
                        jmin = j;
                    }
                }
            if (jmin < 0) {
                for (int j = 0; j < nw; j++) lam[j] = z[j];
                break;
            }
            /* Step as far as the first multiplier that reaches 0 and drop it (and any other
             * at 0); dropped constraints may be added again later, except the one just added
             * when it cannot enter at all (a violation within rounding): that would cycle. */
            int kept = 0;
            for (int j = 0; j < nw; j++) {
                real l = lam[j] + alpha * (z[j] - lam[j]);
                if (j == jmin || l <= 0) {
                    if (!(first && W[j] == worst)) blocked[W[j] >> 5] &= ~(1u << (W[j] & 31));
                    continue;
                }
                W[kept] = W[j];
                lam[kept] = l;
                q[kept] = q[j];
                kept++;
            }
            nw = 0; /* refactor Q_WW: a principal submatrix of a positive definite one */
            while (nw < kept && dm_csd_chol_append_(p, W, nw, L) > 0) nw++;
            if (nw == 0) break;
        }
        dm_csd_update_x_(p, x0, W, lam, nw, x);
    }
    return status;
}

/* The soft-constraint solver (see the top); arguments as dm_csd_solve's. */
DM_FN int dm_csd_solve_soft_(const dm_csd_problem *p, const real *y, long ystride, real *x,
                             real *work, int *iwork, int *iters)
{
    const int n = p->n, m = p->m, k = p->k, words = (k + 31) / 32;
    real *L = work, *b = work + (long)n * n;
    unsigned *neg = (unsigned *)iwork, *old = neg + words;
    for (int c = 0; c < n; c++) {
        real s = 0;
        for (int j = 0; j < m; j++) s += p->At[(long)c * m + j] * y[(long)j * ystride];
        b[c] = s;
    }
    for (int w = 0; w < words; w++) old[w] = 0u;
    for (int it = 0; it < p->max_iter; it++) {
        if (iters) *iters = it + 1;
        int same = it > 0;
        for (int w = 0; w < words; w++) {
            unsigned bits = 0u;
            for (int i = 32 * w; i < 32 * w + 32 && i < k; i++)
                if (dm_csd_dot_(p->C + (long)i * n, x, n) < 0) bits |= 1u << (i & 31);
            neg[w] = bits;
            same = same && bits == old[w];
            old[w] = bits;
        }
        if (same) return DM_CSD_OK;
        /* L = chol(H + sum over the negative directions of C_i' C_i), lower triangle. */
        for (int r = 0; r < n; r++)
            for (int c = 0; c <= r; c++) L[(long)r * n + c] = p->H[(long)r * n + c];
        for (int i = 0; i < k; i++) {
            if (!(neg[i >> 5] & (1u << (i & 31)))) continue;
            const real *Ci = p->C + (long)i * n;
            for (int r = 0; r < n; r++)
                for (int c = 0; c <= r; c++) L[(long)r * n + c] += Ci[r] * Ci[c];
        }
        for (int j = 0; j < n; j++) {
            real d = L[(long)j * n + j];
            for (int t = 0; t < j; t++) d -= L[(long)j * n + t] * L[(long)j * n + t];
            if (!(d > 0)) return DM_CSD_DEGENERATE;
            d = sqrt(d);
            L[(long)j * n + j] = d;
            for (int r = j + 1; r < n; r++) {
                real s = L[(long)r * n + j];
                for (int t = 0; t < j; t++) s -= L[(long)r * n + t] * L[(long)j * n + t];
                L[(long)r * n + j] = s / d;
            }
        }
        for (int r = 0; r < n; r++) {
            real s = b[r];
            for (int t = 0; t < r; t++) s -= L[(long)r * n + t] * x[t];
            x[r] = s / L[(long)r * n + r];
        }
        for (int r = n - 1; r >= 0; r--) {
            real s = x[r];
            for (int t = r + 1; t < n; t++) s -= L[(long)t * n + r] * x[t];
            x[r] = s / L[(long)r * n + r];
        }
    }
    return DM_CSD_MAX_ITER;
}

/* Solves one voxel: y (m values, `ystride` apart) -> x (n values).  work and iwork hold
 * DM_CSD_WORK and DM_CSD_IWORK entries.  *iters (may be NULL) gets the steps taken.  Returns a
 * DM_CSD_* outcome; x is 0 for a signal with NaN or Inf. */
DM_FN int dm_csd_solve(const dm_csd_problem *p, const real *y, long ystride, real *x, real *work,
                       int *iwork, int *iters)
{
    const int n = p->n, m = p->m;
    real *x0 = work + (long)n * n; /* the starting point, in the hard solver's place for it */
    if (iters) *iters = 0;
    for (int c = 0; c < n; c++) {
        real s = 0;
        for (int j = 0; j < m; j++) s += p->G[(long)c * m + j] * y[(long)j * ystride];
        x0[c] = s;
        x[c] = s;
    }
    for (int c = 0; c < n; c++)
        if (!(x0[c] - x0[c] == 0)) { /* NaN or Inf */
            for (int t = 0; t < n; t++) x[t] = 0;
            return DM_CSD_NONFINITE;
        }
    return p->soft ? dm_csd_solve_soft_(p, y, ystride, x, work, iwork, iters)
                   : dm_csd_solve_hard_(p, y, ystride, x, work, iwork, iters);
}

#endif /* real */
