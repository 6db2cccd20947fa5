/* The dictionary fit (`--method dictionary`), AMICO's linearisation of a model, for any model:
 *
 *   atoms   for every point of the grid over the gridded parameters (--grid) and every vertex
 *           of the volume fractions' simplex (every fraction 0, or one fraction 1), the
 *           model's signal with the scale parameter (S0) at 1 and every other parameter at the
 *           voxel's start (the orientation held from a tensor fit, --init-from or --fixed).
 *           An atom that does not depend on the grid point (the free-water ball of NODDI) is
 *           kept once.
 *   voxel   the weights x >= 0 of the data on the atoms, in AMICO's three steps (dm_dict_solve:
 *           NNLS, a non-negative elastic net over the atoms on the grid, NNLS on the atoms it
 *           kept; the solver above); then S0 = sum x, each fraction = the share of the
 *           weights of its vertex's atoms, each gridded parameter = the weighted mean of its grid values over
 *           the atoms that depend on the grid (AMICO's ICVF and kappa).
 *
 * The runtime names the candidates (dm_dict_spec); the builder checks them on the signal: the
 * scale is a candidate in which the signal is proportional, the fractions are the candidates
 * in which it is affine, jointly (S(f) = (1 - sum f) S(0) + sum f_i S(e_i) at test points).
 *
 * Speed: the atoms depend on the voxel through its orientation v only (held parameters and
 * voxel inputs the same as the reference voxel's).  When the signal depends on the gradient g
 * only through dot(g, v) and the other columns of the measurement (axially symmetric
 * compartments about v: sticks, zeppelins, Watson, balls), each atom is tabulated once per
 * shell (rows alike but for g) on DM_DICT_TABLE_POINTS values of t = dot(g, v) in [-1, 1], and
 * a voxel's dictionary is interpolated linearly from the tables: M x N lookups instead of M x N
 * signal evaluations.  The symmetry is not assumed but checked: at three orientations the
 * interpolated atoms must match the model's within DM_DICT_TABLE_TOL of the largest atom value,
 * else (and for a voxel whose held parameters differ from the reference) every atom is
 * evaluated directly.  A model without orientation gets one dictionary for all voxels.
 *
 * Host builds only (cpu_fitter.c): double arithmetic, the model's signal in `real`.
 * Before including: fit_common.h. */
#ifndef DIMOC_DICTIONARY_H
#define DIMOC_DICTIONARY_H

#if DM_STAGE_WIDTH > 0
/* A stage program's fitter (model_api.h) has no dictionary: its functions read a voxel row of
 * stage values that the atoms, each of its own parameters, have not.  The runtime fits a
 * dictionary with the model's own fitter; these say so if asked. */
DM_EXPORT void dm_dict_free(void *handle)
{
    (void)handle;
}

DM_EXPORT void *dm_dict_build(const dm_dict_spec *spec, const dm_fit_config *cfg,
                              const double *grid_values, const double *meas, int M,
                              const double *params, const double *vox, dm_dict_report *rep)
{
    (void)spec, (void)cfg, (void)grid_values, (void)meas, (void)M, (void)params, (void)vox;
    memset(rep, 0, sizeof *rep);
    rep->param = rep->scale = -1;
    rep->error = DM_DICT_STAGE;
    return NULL;
}

DM_EXPORT int dm_dict_fit_voxel(const void *handle, const double *y, const double *vox,
                                double *params, double *stats)
{
    (void)handle, (void)y, (void)vox, (void)params, (void)stats;
    return DM_STATUS_FAILED;
}
#else

/* ---- the solver ---- */
/* Non-negative least squares, Lawson and Hanson's active-set algorithm (Solving Least Squares
 * Problems, 1974, ch. 23): min ||A x - y|| subject to x >= 0, for a dense A of M rows and N
 * columns stored row by row (A[m * N + j]).
 *
 * It works on the normal equations: A^T y once, and the Gram column A^T a_j of an atom only
 * when j enters the passive set (the atoms with x_j > 0), so a voxel whose solution holds k
 * atoms costs about (k + 1) M N multiply-adds, never the whole N x N Gram matrix.  The
 * passive set's k x k system is solved by Cholesky; an atom whose column is (numerically) a
 * combination of the passive ones fails the pivot test and is left out for the rest of the
 * solve, which ends the degenerate cycles of nearly parallel atoms (neighbouring grid points).
 *
 * Plain C over double, without the model: the caller gives the workspace (dm_nnls_work_size
 * doubles). */
/* Doubles of workspace for N atoms. */
static size_t dm_nnls_work_size(int N)
{
    return (size_t)N * N + (size_t)N * N + 6 * (size_t)N;
}

/* Cholesky solve of the passive set's normal equations G_PP z = c_P.  gram: N x N, column j
 * filled for every j in the set.  chol: k x k scratch.  0, or -1 when a pivot falls below
 * 1e-12 of its diagonal entry (the set is degenerate). */
static int dm_nnls_solve_passive(const double *gram, const double *c, const int *set, int k, int N,
                                 double *chol, double *z)
{
    for (int i = 0; i < k; i++)
        for (int j = 0; j <= i; j++) {
            double s = gram[(size_t)set[j] * N + set[i]];
            for (int l = 0; l < j; l++) s -= chol[i * k + l] * chol[j * k + l];
            if (i == j) {
                double d = gram[(size_t)set[i] * N + set[i]];
                if (!(s > 1e-12 * d)) return -1;
                chol[i * k + i] = sqrt(s);
            } else {
                chol[i * k + j] = s / chol[j * k + j];
            }
        }
    for (int i = 0; i < k; i++) { /* L u = c, then L^T z = u */
        double s = c[set[i]];
        for (int l = 0; l < i; l++) s -= chol[i * k + l] * z[l];
        z[i] = s / chol[i * k + i];
    }
    for (int i = k - 1; i >= 0; i--) {
        double s = z[i];
        for (int l = i + 1; l < k; l++) s -= chol[l * k + i] * z[l];
        z[i] = s / chol[i * k + i];
    }
    return 0;
}

/* Gram column j: gram[j * N + i] = sum_m A[m, i] A[m, j]. */
static void dm_nnls_gram_column(const double *A, int M, int N, int j, double *gram)
{
    double *col = gram + (size_t)j * N;
    for (int i = 0; i < N; i++) col[i] = 0;
    for (int m = 0; m < M; m++) {
        const double *row = A + (size_t)m * N;
        double a = row[j];
        if (a == 0) continue;
        for (int i = 0; i < N; i++) col[i] += a * row[i];
    }
}

/* x (N) receives the solution; returns the sum of squared residuals ||A x - y||^2.  With l1
 * and l2 (N each, or NULL) it solves the non-negative elastic net instead,
 * min 1/2 ||A x - y||^2 + sum_j (l1_j x_j + l2_j x_j^2 / 2) over x >= 0: the same active-set
 * algorithm, on A^T y - l1 and A^T A + diag(l2). */
static double dm_nnls(const double *A, const double *y, int M, int N, const double *l1,
                      const double *l2, double *x, double *work)
{
    double *gram = work;                 /* N x N, columns filled on demand */
    double *chol = gram + (size_t)N * N; /* up to N x N */
    double *aty = chol + (size_t)N * N;  /* A^T y */
    double *w = aty + N;                 /* the gradient A^T (y - A x) */
    double *z = w + N;                   /* the passive set's unconstrained solution */
    int *set = (int *)(z + N);           /* passive atoms, in entry order (2N ints) */
    unsigned char *state = (unsigned char *)(set + 2 * N); /* 0 free, 1 passive, 2 left out */
    for (int j = 0; j < N; j++) aty[j] = 0, x[j] = 0, state[j] = 0;
    for (int m = 0; m < M; m++) {
        const double *row = A + (size_t)m * N;
        for (int j = 0; j < N; j++) aty[j] += y[m] * row[j];
    }
    double amax = 0;
    for (int j = 0; j < N; j++) amax = fmax(amax, fabs(aty[j]));
    if (l1)
        for (int j = 0; j < N; j++) aty[j] -= l1[j];
    double tol = 1e-11 * amax;
    int k = 0;
    for (int j = 0; j < N; j++) w[j] = aty[j];
    for (int outer = 0; outer < 3 * N; outer++) {
        int best = -1;
        for (int j = 0; j < N; j++)
            if (state[j] == 0 && w[j] > tol && (best < 0 || w[j] > w[best])) best = j;
        if (best < 0) break;
        dm_nnls_gram_column(A, M, N, best, gram);
        if (l2) gram[(size_t)best * N + best] += l2[best];
        set[k++] = best;
        state[best] = 1;
        for (;;) {
            if (dm_nnls_solve_passive(gram, aty, set, k, N, chol, z) != 0) {
                /* The newcomer adds nothing independent: leave it out (x unchanged). */
                state[set[--k]] = 2;
                break;
            }
            double alpha = 1;
            int first = -1; /* the passive weight that reaches 0 first */
            for (int i = 0; i < k; i++)
                if (z[i] <= 0) {
                    double xi = x[set[i]];
                    double a = xi / (xi - z[i]);
                    if (first < 0 || a < alpha) alpha = a, first = i;
                }
            if (first < 0) {
                for (int i = 0; i < k; i++) x[set[i]] = z[i];
                break;
            }
            /* Move toward z until that weight reaches 0; drop it and any other at 0.  The
             * newcomer dropped at once (alpha 0) would be picked again: it is left out. */
            int kept = 0;
            for (int i = 0; i < k; i++) {
                int j = set[i];
                x[j] += alpha * (z[i] - x[j]);
                if (i != first && x[j] > 0) {
                    set[kept++] = j;
                } else {
                    x[j] = 0;
                    state[j] = j == best && alpha == 0 ? 2 : 0;
                }
            }
            k = kept;
            if (k == 0) break;
        }
        for (int j = 0; j < N; j++) { /* w = A^T y - G_P x_P */
            double s = aty[j];
            for (int i = 0; i < k; i++) s -= gram[(size_t)set[i] * N + j] * x[set[i]];
            w[j] = s;
        }
    }
    double sse = 0;
    for (int m = 0; m < M; m++) {
        double r = y[m];
        for (int i = 0; i < k; i++) r -= A[(size_t)m * N + set[i]] * x[set[i]];
        sse += r * r;
    }
    return sse;
}

/* ---- the dictionary ---- */
#define DM_DICT_TABLE_POINTS 1025
#define DM_DICT_TABLE_TOL 1e-4
#define DM_DICT_MAX_SHELLS 256

enum { DM_DICT_DIRECT = 0, DM_DICT_TABLE = 1, DM_DICT_FIXED = 2 };

typedef struct dm_dict {
    int M, N, L;
    int frac[DM_NPARAMS]; /* parameter of fraction i (vertex i + 1) */
    int scale;            /* the scale parameter, or -1 */
    int theta, phi, gcol; /* the orientation and the gradient's column, or -1 */
    unsigned held;        /* parameters the atoms take from the voxel's start */
    unsigned periodic;    /* periodic parameters */
    double ref_params[DM_NPARAMS], ref_vox[DM_VOXEL_SLOTS];
    real *meas;                  /* M rows of DM_MEASURE_WIDTH */
    double *atom_params;         /* N x DM_NPARAMS */
    int *atom_vertex;            /* 0: every fraction 0; i + 1: fraction i at 1 */
    long *atom_point;            /* the grid point of an atom on the grid; -1 for a shared one */
    long npoints;                /* grid points */
    double lambda1, lambda2;     /* the elastic net's penalties (dm_dict_solve) */
    unsigned char *atom_on_grid; /* 1: the atom depends on the grid point */
    int mode;                    /* DM_DICT_DIRECT, _TABLE (tables below) or _FIXED (fixed_A) */
    int nshells, *shell;         /* the shell of each measurement */
    int *shell_row;              /* a measurement of each shell */
    double *table;               /* nshells x DM_DICT_TABLE_POINTS x N */
    double *fixed_A;             /* M x N */
    real *ref_rows; /* with fixed values: the extended rows of ref_vox (a fit's statistics) */
} dm_dict;

/* The model's signal at params (double) for the M measurements, into out[m * stride]. */
static void dm_dict_eval(const double *params, const real *meas, int M, const double *vox,
                         double *out, int stride)
{
    real p[DM_NPARAMS], v[DM_VOXEL_SLOTS], pre[DM_PRE_WIDTH];
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = (real)params[k];
    for (int j = 0; j < DM_VOXEL_SLOTS; j++) v[j] = (real)vox[j];
    dm_signal_prepare(p, v, pre);
    for (int m = 0; m < M; m++) {
        const real *row = meas + (size_t)m * DM_MEASURE_WIDTH;
#if DM_FIX_WIDTH > 0
        real extended[DM_ROW_WIDTH];
        dm_row_extend(row, v, extended);
        row = extended;
#endif
        out[(size_t)m * stride] = (double)dm_signal_at(pre, row, v);
    }
}

static int dm_dict_valid(const double *params, const double *vox)
{
    real p[DM_NPARAMS], v[DM_VOXEL_SLOTS];
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = (real)params[k];
    for (int j = 0; j < DM_VOXEL_SLOTS; j++) v[j] = (real)vox[j];
    return dm_params_valid(p, v);
}

/* Agreement of two signals to round-off of the build's precision. */
static int dm_dict_close(const double *a, const double *b, int n, double scale)
{
    double tol = (sizeof(real) == 4 ? 1e-5 : 1e-9) * (scale > 0 ? scale : 1);
    for (int i = 0; i < n; i++)
        if (!(fabs(a[i] - b[i]) <= tol)) return 0;
    return 1;
}

static double dm_dict_max_abs(const double *a, int n)
{
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fabs(a[i]));
    return m;
}

/* The parameters of grid point `point` (mixed radix, the last gridded parameter fastest) at a
 * vertex of the simplex, from base. */
static void dm_dict_point(const dm_fit_config *cfg, const double *grid_values, const int *gridded,
                          int ngrid, long point, const dm_dict *d, int vertex, const double *base,
                          double *out)
{
    for (int k = 0; k < DM_NPARAMS; k++) out[k] = base[k];
    for (int g = ngrid - 1; g >= 0; g--) {
        int k = gridded[g], n = cfg->grid_count[k];
        out[k] = grid_values[cfg->grid_offset[k] + point % n];
        point /= n;
    }
    if (d->scale >= 0) out[d->scale] = 1;
    for (int i = 0; i < d->L; i++) out[d->frac[i]] = vertex == i + 1;
    real p[DM_NPARAMS];
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = (real)out[k];
    dm_wrap_periodic(p);
    for (int k = 0; k < DM_NPARAMS; k++) out[k] = (double)p[k];
}

/* The scale: the first candidate in which the signal is proportional (S(2 s) = 2 S(s)). */
static int dm_dict_find_scale(const dm_dict *d, unsigned candidates, double *s1, double *s2)
{
    for (int k = 0; k < DM_NPARAMS; k++) {
        if (!(candidates >> k & 1u)) continue;
        double p[DM_NPARAMS];
        for (int j = 0; j < DM_NPARAMS; j++) p[j] = d->ref_params[j];
        p[k] = 1;
        dm_dict_eval(p, d->meas, d->M, d->ref_vox, s1, 1);
        p[k] = 2;
        dm_dict_eval(p, d->meas, d->M, d->ref_vox, s2, 1);
        for (int m = 0; m < d->M; m++) s1[m] *= 2;
        double scale = dm_dict_max_abs(s1, d->M);
        if (scale > 0 && dm_dict_close(s1, s2, d->M, scale)) return k;
    }
    return -1;
}

/* The signal affine in the fractions, jointly, at params p (their values ignored): each
 * fraction alone at 1/2, and all at 1/(L+1), against the vertices' mix.  Returns -1, or the
 * parameter that fails.  work: (L + 3) x M. */
static int dm_dict_check_affine(const dm_dict *d, const double *p, double *work)
{
    int M = d->M, L = d->L;
    double q[DM_NPARAMS], *mix = work + (size_t)(L + 1) * M, *got = mix + M;
    for (int vtx = 0; vtx <= L; vtx++) {
        for (int k = 0; k < DM_NPARAMS; k++) q[k] = p[k];
        for (int i = 0; i < L; i++) q[d->frac[i]] = vtx == i + 1;
        dm_dict_eval(q, d->meas, M, d->ref_vox, work + (size_t)vtx * M, 1);
    }
    double scale = dm_dict_max_abs(work, (L + 1) * M);
    for (int t = 0; t <= L; t++) { /* t < L: fraction t alone; t == L: all of them */
        for (int k = 0; k < DM_NPARAMS; k++) q[k] = p[k];
        double share = t < L ? 0.5 : 1.0 / (L + 1);
        for (int i = 0; i < L; i++) q[d->frac[i]] = t == L || t == i ? share : 0;
        dm_dict_eval(q, d->meas, M, d->ref_vox, got, 1);
        for (int m = 0; m < M; m++) {
            double s = 0, rest = 1;
            for (int i = 0; i < L; i++) {
                s += q[d->frac[i]] * work[(size_t)(i + 1) * M + m];
                rest -= q[d->frac[i]];
            }
            mix[m] = s + rest * work[m];
        }
        if (!dm_dict_close(mix, got, M, scale)) return d->frac[t < L ? t : L - 1];
    }
    return -1;
}

/* The unit vector of (theta, phi), as the model language's dir(). */
static void dm_dict_direction(double th, double ph, double *v)
{
    v[0] = sin(th) * cos(ph);
    v[1] = sin(th) * sin(ph);
    v[2] = cos(th);
}

/* The interpolated dictionary at orientation (th, ph) into A (M x N). */
static void dm_dict_interpolate(const dm_dict *d, double th, double ph, double *A)
{
    const int N = d->N, T = DM_DICT_TABLE_POINTS;
    double v[3];
    dm_dict_direction(th, ph, v);
    for (int m = 0; m < d->M; m++) {
        const real *g = d->meas + (size_t)m * DM_MEASURE_WIDTH + d->gcol;
        double t = g[0] * v[0] + g[1] * v[1] + g[2] * v[2];
        double x = (fmin(fmax(t, -1.0), 1.0) + 1) * 0.5 * (T - 1);
        int i = (int)x;
        if (i > T - 2) i = T - 2;
        double w = x - i;
        const double *lo = d->table + ((size_t)d->shell[m] * T + i) * N, *hi = lo + N;
        double *row = A + (size_t)m * N;
        for (int a = 0; a < N; a++) row[a] = lo[a] + w * (hi[a] - lo[a]);
    }
}

/* The dictionary at a voxel's parameters, evaluated atom by atom, into A (M x N). */
static void dm_dict_direct(const dm_dict *d, const double *params, const double *vox, double *A)
{
    double p[DM_NPARAMS];
    for (int a = 0; a < d->N; a++) {
        for (int k = 0; k < DM_NPARAMS; k++)
            p[k] = d->held >> k & 1u ? params[k] : d->atom_params[(size_t)a * DM_NPARAMS + k];
        dm_dict_eval(p, d->meas, d->M, vox, A + a, d->N);
    }
}

/* Measurements alike but for the gradient direction form a shell.  0, or -1 with too many. */
static int dm_dict_shells(dm_dict *d)
{
    d->shell = malloc(sizeof(int) * d->M);
    d->shell_row = malloc(sizeof(int) * d->M);
    if (!d->shell || !d->shell_row) return -1;
    d->nshells = 0;
    for (int m = 0; m < d->M; m++) {
        const real *row = d->meas + (size_t)m * DM_MEASURE_WIDTH;
        int s = 0;
        for (; s < d->nshells; s++) {
            const real *other = d->meas + (size_t)d->shell_row[s] * DM_MEASURE_WIDTH;
            int same = 1;
            for (int c = 0; c < DM_MEASURE_WIDTH && same; c++)
                if ((c < d->gcol || c >= d->gcol + 3) && row[c] != other[c]) same = 0;
            if (same) break;
        }
        if (s == d->nshells) {
            if (d->nshells == DM_DICT_MAX_SHELLS) return -1;
            d->shell_row[d->nshells++] = m;
        }
        d->shell[m] = s;
    }
    return 0;
}

/* Tabulates every atom per shell along v = z (theta = phi = 0, g = (sqrt(1 - t^2), 0, t)), then
 * checks the interpolation against direct evaluation at three orientations.  1 when the tables
 * hold (mode becomes DM_DICT_TABLE), 0 when they do not. */
static int dm_dict_tabulate(dm_dict *d, double *A, double *B, double *error)
{
    const int N = d->N, T = DM_DICT_TABLE_POINTS;
    *error = INFINITY;
    if (dm_dict_shells(d) != 0) return 0;
    d->table = malloc(sizeof(double) * (size_t)d->nshells * T * N);
    if (!d->table) return 0;
    /* row: 3 spare slots, so that a model without bvecs (gcol < 0: never tabulated) compiles */
    real row[DM_ROW_SLOTS + 3], v[DM_VOXEL_SLOTS], p[DM_NPARAMS], pre[DM_PRE_WIDTH];
    for (int j = 0; j < DM_VOXEL_SLOTS; j++) v[j] = (real)d->ref_vox[j];
    for (int a = 0; a < N; a++) {
        for (int k = 0; k < DM_NPARAMS; k++)
            p[k] = (real)d->atom_params[(size_t)a * DM_NPARAMS + k];
        p[d->theta] = 0;
        p[d->phi] = 0;
        dm_signal_prepare(p, v, pre);
        for (int s = 0; s < d->nshells; s++) {
            for (int c = 0; c < DM_MEASURE_WIDTH; c++)
                row[c] = d->meas[(size_t)d->shell_row[s] * DM_MEASURE_WIDTH + c];
            for (int i = 0; i < T; i++) {
                double t = -1 + 2.0 * i / (T - 1);
                row[d->gcol] = (real)sqrt(fmax(0.0, 1 - t * t));
                row[d->gcol + 1] = 0;
                row[d->gcol + 2] = (real)t;
#if DM_FIX_WIDTH > 0
                dm_signal_fix(row, v, row + DM_MEASURE_WIDTH);
#endif
                d->table[((size_t)s * T + i) * N + a] = (double)dm_signal_at(pre, row, v);
            }
        }
    }
    const double turns[3][2] = {{0, 0}, {1.1, 0.7}, {2.3, 4.4}};
    double worst = 0, scale = 0;
    for (int o = 0; o < 3; o++) {
        double q[DM_NPARAMS];
        for (int k = 0; k < DM_NPARAMS; k++) q[k] = d->ref_params[k];
        q[d->theta] += turns[o][0];
        q[d->phi] += turns[o][1];
        dm_dict_direct(d, q, d->ref_vox, A);
        dm_dict_interpolate(d, q[d->theta], q[d->phi], B);
        for (size_t i = 0; i < (size_t)d->M * N; i++) {
            worst = fmax(worst, fabs(A[i] - B[i]));
            scale = fmax(scale, fabs(A[i]));
        }
    }
    *error = scale > 0 ? worst / scale : worst;
    if (!(*error <= DM_DICT_TABLE_TOL)) {
        free(d->table);
        d->table = NULL;
        return 0;
    }
    d->mode = DM_DICT_TABLE;
    return 1;
}

DM_EXPORT void dm_dict_free(void *handle)
{
    dm_dict *d = handle;
    if (!d) return;
    free(d->meas);
    free(d->atom_params);
    free(d->atom_vertex);
    free(d->atom_on_grid);
    free(d->atom_point);
    free(d->shell);
    free(d->shell_row);
    free(d->table);
    free(d->fixed_A);
    free(d->ref_rows);
    free(d);
}

/* The signal of vertex `vertex` at grid point p against that at the vertex's first valid
 * point (s0 holds its signal, first its parameters), at the reference orientation and at a
 * turned one.  work: 2 M. */
static int dm_dict_same_atom(const dm_dict *d, const double *p, const double *first,
                             const double *s0, double *work)
{
    double *s1 = work, *t0 = work + d->M, turned[DM_NPARAMS];
    dm_dict_eval(p, d->meas, d->M, d->ref_vox, s1, 1);
    if (!dm_dict_close(s0, s1, d->M, dm_dict_max_abs(s0, d->M))) return 0;
    if (d->theta < 0 || d->phi < 0) return 1;
    for (int k = 0; k < DM_NPARAMS; k++) turned[k] = p[k];
    turned[d->theta] += 0.9;
    turned[d->phi] += 1.3;
    dm_dict_eval(turned, d->meas, d->M, d->ref_vox, s1, 1);
    for (int k = 0; k < DM_NPARAMS; k++) turned[k] = first[k];
    turned[d->theta] += 0.9;
    turned[d->phi] += 1.3;
    dm_dict_eval(turned, d->meas, d->M, d->ref_vox, t0, 1);
    return dm_dict_close(t0, s1, d->M, dm_dict_max_abs(t0, d->M));
}

/* Atoms of one vertex: one per valid grid point, or a single one when the vertex's signal does
 * not depend on the grid point.  Appended to d's arrays (capacity cap).  0 or a dm_dict_error.
 * work: 3 M. */
static int dm_dict_vertex_atoms(dm_dict *d, const dm_fit_config *cfg, const double *grid_values,
                                const int *gridded, int ngrid, long points, int vertex, int cap,
                                double *work)
{
    double p[DM_NPARAMS], first[DM_NPARAMS] = {0}, *s0 = work; /* first: read once found */
    int found = 0, on_grid = 0;
    for (long point = 0; point < points && !on_grid; point++) {
        dm_dict_point(cfg, grid_values, gridded, ngrid, point, d, vertex, d->ref_params, p);
        if (!dm_dict_valid(p, d->ref_vox)) continue;
        if (!found) {
            found = 1;
            for (int k = 0; k < DM_NPARAMS; k++) first[k] = p[k];
            dm_dict_eval(p, d->meas, d->M, d->ref_vox, s0, 1);
        } else {
            on_grid = !dm_dict_same_atom(d, p, first, s0, work + d->M);
        }
    }
    for (long point = 0; point < points && found; point++) {
        dm_dict_point(cfg, grid_values, gridded, ngrid, point, d, vertex, d->ref_params, p);
        if (!dm_dict_valid(p, d->ref_vox)) continue;
        if (d->N == cap) return DM_DICT_TOO_MANY;
        for (int k = 0; k < DM_NPARAMS; k++) d->atom_params[(size_t)d->N * DM_NPARAMS + k] = p[k];
        d->atom_vertex[d->N] = vertex;
        d->atom_on_grid[d->N] = (unsigned char)on_grid;
        d->atom_point[d->N] = on_grid ? point : -1;
        d->N++;
        if (!on_grid) break; /* one atom stands for every point */
    }
    return 0;
}

DM_EXPORT void *dm_dict_build(const dm_dict_spec *spec, const dm_fit_config *cfg,
                              const double *grid_values, const double *meas, int M,
                              const double *params, const double *vox, dm_dict_report *rep)
{
    memset(rep, 0, sizeof *rep);
    rep->param = rep->scale = -1;
    dm_dict *d = calloc(1, sizeof *d);
    int gridded[DM_NPARAMS], ngrid = 0;
    long points = 1;
    for (int k = 0; k < DM_NPARAMS; k++)
        if (cfg->grid_count[k] > 0 && !dm_is_fixed(cfg, k)) {
            gridded[ngrid++] = k;
            points *= cfg->grid_count[k];
            if (points > DM_DICT_MAX_ATOMS) points = DM_DICT_MAX_ATOMS + 1;
        }
    double *work = d ? malloc(sizeof(double) * (size_t)M * (DM_NPARAMS + 4)) : NULL;
    if (d) d->meas = malloc(sizeof(real) * (size_t)M * DM_MEASURE_SLOTS);
    if (!d || !work || !d->meas) {
        rep->error = DM_DICT_NO_MEMORY;
        goto fail;
    }
    d->M = M;
    d->theta = spec->theta;
    d->phi = spec->phi;
    d->gcol = spec->g_column;
    d->periodic = spec->periodic_mask;
    d->lambda1 = spec->lambda1;
    d->lambda2 = spec->lambda2;
    for (size_t i = 0; i < (size_t)M * DM_MEASURE_WIDTH; i++) d->meas[i] = (real)meas[i];
    for (int k = 0; k < DM_NPARAMS; k++) d->ref_params[k] = params[k];
    for (int j = 0; j < DM_VOXEL_WIDTH; j++) d->ref_vox[j] = vox[j];
#if DM_FIX_WIDTH > 0
    {
        real v[DM_VOXEL_SLOTS] = {0};
        for (int j = 0; j < DM_VOXEL_WIDTH; j++) v[j] = (real)vox[j];
        d->ref_rows = malloc(sizeof(real) * (size_t)(M > 0 ? M : 1) * DM_ROW_WIDTH);
        if (!d->ref_rows) {
            rep->error = DM_DICT_NO_MEMORY;
            goto fail;
        }
        dm_voxel_rows(d->meas, v, M, d->ref_rows);
    }
#endif

    d->scale = dm_dict_find_scale(d, spec->scale_mask, work, work + M);
    if (d->scale >= 0) d->ref_params[d->scale] = 1;
    rep->scale = d->scale;
    for (int k = 0; k < DM_NPARAMS; k++)
        if ((spec->linear_mask >> k & 1u) && k != d->scale) d->frac[d->L++] = k;
    if (d->L == 0) {
        rep->error = DM_DICT_NO_FRACTION;
        goto fail;
    }
    /* Affine in the fractions at the first and the last grid points (and the reference). */
    for (int at = 0; at < 2; at++) {
        double p[DM_NPARAMS];
        dm_dict_point(cfg, grid_values, gridded, ngrid, at ? points - 1 : 0, d, 0, d->ref_params,
                      p);
        int bad = dm_dict_check_affine(d, p, work);
        if (bad >= 0) {
            rep->error = DM_DICT_NOT_AFFINE;
            rep->param = bad;
            goto fail;
        }
    }
    rep->fractions = d->L;
    d->held = 0;
    for (int k = 0; k < DM_NPARAMS; k++) d->held |= 1u << k;
    for (int g = 0; g < ngrid; g++) d->held &= ~(1u << gridded[g]);
    for (int i = 0; i < d->L; i++) d->held &= ~(1u << d->frac[i]);
    if (d->scale >= 0) d->held &= ~(1u << d->scale);

    int cap = points > DM_DICT_MAX_ATOMS ? DM_DICT_MAX_ATOMS : (int)points * (d->L + 1);
    if (cap > DM_DICT_MAX_ATOMS) cap = DM_DICT_MAX_ATOMS;
    d->atom_params = malloc(sizeof(double) * (size_t)cap * DM_NPARAMS);
    d->atom_vertex = malloc(sizeof(int) * (size_t)cap);
    d->atom_on_grid = malloc((size_t)cap);
    d->atom_point = malloc(sizeof(long) * (size_t)cap);
    d->npoints = points;
    if (!d->atom_params || !d->atom_vertex || !d->atom_on_grid || !d->atom_point) {
        rep->error = DM_DICT_NO_MEMORY;
        goto fail;
    }
    if (points > DM_DICT_MAX_ATOMS) {
        rep->error = DM_DICT_TOO_MANY;
        goto fail;
    }
    for (int vertex = 0; vertex <= d->L; vertex++) {
        int e =
            dm_dict_vertex_atoms(d, cfg, grid_values, gridded, ngrid, points, vertex, cap, work);
        if (e) {
            rep->error = e;
            goto fail;
        }
    }
    if (d->N == 0) {
        rep->error = DM_DICT_NO_ATOM;
        goto fail;
    }
    rep->atoms = d->N;

    double *A = malloc(sizeof(double) * (size_t)M * d->N * 2);
    if (!A) {
        rep->error = DM_DICT_NO_MEMORY;
        goto fail;
    }
    if (d->theta >= 0 && d->phi >= 0) {
        if (d->gcol >= 0 && dm_dict_tabulate(d, A, A + (size_t)M * d->N, &rep->table_error))
            rep->tabulated = 1, rep->shells = d->nshells;
        free(A);
    } else { /* no orientation: one dictionary for every voxel like the reference */
        dm_dict_direct(d, d->ref_params, d->ref_vox, A);
        d->fixed_A = A;
        d->mode = DM_DICT_FIXED;
    }
    free(work);
    return d;
fail:
    free(work);
    dm_dict_free(d);
    return NULL;
}

/* The voxel's held parameters and inputs are the reference's: the tables apply. */
static int dm_dict_like_reference(const dm_dict *d, const double *params, const double *vox)
{
    for (int k = 0; k < DM_NPARAMS; k++)
        if ((d->held >> k & 1u) && k != d->theta && k != d->phi && params[k] != d->ref_params[k])
            return 0;
    for (int j = 0; j < DM_VOXEL_WIDTH; j++)
        if (vox[j] != d->ref_vox[j]) return 0;
    return 1;
}

/* From the weights to the parameters. */
static int dm_dict_estimate(const dm_dict *d, const double *x, double *params)
{
    double total = 0;
    for (int a = 0; a < d->N; a++) total += x[a];
    if (!(total > 0) || !isfinite(total)) return DM_STATUS_FAILED;
    if (d->scale >= 0) params[d->scale] = total;
    for (int i = 0; i < d->L; i++) {
        double s = 0;
        for (int a = 0; a < d->N; a++)
            if (d->atom_vertex[a] == i + 1) s += x[a];
        params[d->frac[i]] = s / total;
    }
    double on_grid = 0;
    int heaviest = -1;
    for (int a = 0; a < d->N; a++)
        if (d->atom_on_grid[a] && x[a] > 0) {
            on_grid += x[a];
            if (heaviest < 0 || x[a] > x[heaviest]) heaviest = a;
        }
    if (on_grid <= 0) return DM_STATUS_FITTED; /* the gridded parameters keep their starts */
    for (int k = 0; k < DM_NPARAMS; k++) {
        if (d->held >> k & 1u || k == d->scale) continue;
        int fraction = 0;
        for (int i = 0; i < d->L; i++) fraction |= d->frac[i] == k;
        if (fraction) continue;
        if (d->periodic >> k & 1u) { /* a mean of angles is no angle: the heaviest atom's */
            params[k] = d->atom_params[(size_t)heaviest * DM_NPARAMS + k];
            continue;
        }
        double s = 0;
        for (int a = 0; a < d->N; a++)
            if (d->atom_on_grid[a]) s += x[a] * d->atom_params[(size_t)a * DM_NPARAMS + k];
        params[k] = s / on_grid;
    }
    return DM_STATUS_FITTED;
}

/* AMICO's three steps (the NODDI model of AMICO 2): the weights of the shared atoms (a
 * vertex that does not depend on the grid: the free-water ball) by NNLS over the whole
 * dictionary; then the atoms on the grid by a non-negative elastic net on the data less the
 * shared atoms' part, which keeps few of them; then NNLS again over those and the shared
 * atoms.  The penalties are the spec's (AMICO's lambda1 = 0.5, lambda2 = 1e-3 by default, on
 * atoms of unit norm and data divided by S0), here scaled to the raw data:
 * l1_j = lambda1 S0 |a_j|, l2_j = lambda2 |a_j|^2, S0 the first step's sum of weights.
 * x: N; work: dm_nnls_work_size(N) + 3 N. */
static void dm_dict_solve(const dm_dict *d, const double *A, const double *y, double *x,
                          double *work)
{
    const int M = d->M, N = d->N;
    double *l1 = work + dm_nnls_work_size(N), *l2 = l1 + N, *keep = l2 + N;
    dm_nnls(A, y, M, N, NULL, NULL, x, work);
    double total = 0;
    for (int a = 0; a < N; a++) total += x[a];
    if (!(total > 0)) return;
    double *rest = malloc(sizeof(double) * (size_t)M * (N + 1));
    if (!rest) return;
    double *sub = rest + M;
    for (int m = 0; m < M; m++) {
        double r = y[m];
        for (int a = 0; a < N; a++)
            if (!d->atom_on_grid[a]) r -= A[(size_t)m * N + a] * x[a];
        rest[m] = r;
    }
    for (int a = 0; a < N; a++) {
        double n2 = 0;
        for (int m = 0; m < M; m++) n2 += A[(size_t)m * N + a] * A[(size_t)m * N + a];
        int on = d->atom_on_grid[a];
        l1[a] = on ? d->lambda1 * total * sqrt(n2) : INFINITY; /* shared: held out */
        l2[a] = on ? d->lambda2 * n2 : 0;
    }
    for (int a = 0; a < N; a++) keep[a] = 0;
    double *x2 = malloc(sizeof(double) * N);
    if (x2) {
        dm_nnls(A, rest, M, N, l1, l2, x2, work);
        for (int a = 0; a < N; a++) keep[a] = !d->atom_on_grid[a] || x2[a] > 0;
    }
    int n = 0;
    int *idx = malloc(sizeof(int) * N);
    if (idx && x2) {
        for (int a = 0; a < N; a++)
            if (keep[a]) idx[n++] = a;
        for (int m = 0; m < M; m++)
            for (int c = 0; c < n; c++) sub[(size_t)m * n + c] = A[(size_t)m * N + idx[c]];
        dm_nnls(sub, y, M, n, NULL, NULL, x2, work);
        for (int a = 0; a < N; a++) x[a] = 0;
        for (int c = 0; c < n; c++) x[idx[c]] = x2[c];
    }
    free(idx);
    free(x2);
    free(rest);
}

DM_EXPORT int dm_dict_fit_voxel(const void *handle, const double *y, const double *vox,
                                double *params, double *stats)
{
    const dm_dict *d = handle;
    const int M = d->M, N = d->N;
    double *A = d->mode == DM_DICT_FIXED ? NULL : malloc(sizeof(double) * (size_t)M * N);
    double *work = malloc(sizeof(double) * (dm_nnls_work_size(N) + 4 * N));
    real *yr = malloc(sizeof(real) * (size_t)M);
    int status = DM_STATUS_FAILED;
    if ((d->mode != DM_DICT_FIXED && !A) || !work || !yr) goto done;
    int like = dm_dict_like_reference(d, params, vox);
    const double *dict = A;
    if (d->mode == DM_DICT_FIXED && like)
        dict = d->fixed_A;
    else if (d->mode == DM_DICT_TABLE && like)
        dm_dict_interpolate(d, params[d->theta], params[d->phi], A);
    else {
        if (!A) A = malloc(sizeof(double) * (size_t)M * N);
        if (!A) goto done;
        dm_dict_direct(d, params, vox, A);
        dict = A;
    }
    double *x = work + dm_nnls_work_size(N) + 3 * N;
    dm_dict_solve(d, dict, y, x, work);
    status = dm_dict_estimate(d, x, params);
    /* The statistics at the estimate, as the other methods report them. */
    real p[DM_NPARAMS], v[DM_VOXEL_SLOTS];
    for (int k = 0; k < DM_NPARAMS; k++) p[k] = (real)params[k];
    for (int j = 0; j < DM_VOXEL_SLOTS; j++) v[j] = (real)vox[j];
    for (int m = 0; m < M; m++) yr[m] = (real)y[m];
    dm_voxel_data data = {M, d->meas, yr, v, NULL, 1};
#if DM_FIX_WIDTH > 0
    /* the reference's rows where the voxel's inputs are the reference's (the fixed values are
     * the costly part of the rows: NODDI's stick integrals) */
    int same_inputs = 1;
    for (int j = 0; j < DM_VOXEL_WIDTH; j++) same_inputs &= vox[j] == d->ref_vox[j];
    real *rows = same_inputs ? NULL : malloc(sizeof(real) * (size_t)M * DM_ROW_WIDTH);
    if (!same_inputs && !rows) {
        status = DM_STATUS_FAILED;
        goto done;
    }
    if (rows) dm_voxel_rows(d->meas, v, M, rows);
    data.meas = rows ? rows : d->ref_rows;
#endif
    real sse = dm_sse(&data, p);
#if DM_FIX_WIDTH > 0
    free(rows);
#endif
    for (int i = 0; i < DM_NSTATS; i++) stats[i] = 0;
    stats[DM_STAT_SSE] = (double)sse;
    stats[DM_STAT_LOGL] = (double)dm_gaussian_loglik(M, sse);
    if (status == DM_STATUS_FITTED && !isfinite(stats[DM_STAT_SSE])) status = DM_STATUS_FAILED;
done:
    free(A);
    free(work);
    free(yr);
    return status;
}

#endif /* DM_STAGE_WIDTH */

#endif
