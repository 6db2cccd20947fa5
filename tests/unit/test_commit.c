/* Independent truths for dimoc commit's pieces (runtime/commit/): the direction table against a
 * brute-force nearest direction; the dictionary's cut of a straight streamline against its
 * exact lengths per voxel; the operator's adjoint against the operator (<A x, v> = <x, A^T v>
 * for random x, v, whatever the segments' order), also with balls in some voxels only and
 * weighted rows (--iso-mask, --confidence-map: A x the weights times the plain A x); and FISTA
 * against a plain projected-gradient solver run to convergence on a small problem (the same
 * minimum of the non-negative least-squares objective). */
#include "check.h"
#include "commit_cylinder_ref.h"
#include "commit/commit_cpu.h"
#include "commit/commit_dict.h"
#include "commit/commit_dirs.h"
#include "commit/commit_kernels.h"
#include "commit/commit_operator.h"
#include "commit/commit_solve.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static double urand(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return (*s >> 8) / 16777216.0;
}

static void random_dir(unsigned *s, double d[3])
{
    double z = 2 * urand(s) - 1, p = 2 * M_PI * urand(s), r = sqrt(1 - z * z);
    d[0] = r * cos(p), d[1] = r * sin(p), d[2] = z;
}

static void test_dirs(void)
{
    dm_commit_dirs d;
    int rc = dm_commit_dirs_make(500, &d);
    unsigned s = 3;
    double worst = 0;
    for (int i = 0; rc == 0 && i < 3000; i++) {
        double u[3];
        random_dir(&s, u);
        const double *a = d.dir + 3 * dm_commit_dirs_index(&d, u);
        double best = 0;
        for (int k = 0; k < d.n; k++) {
            const double *b = d.dir + 3 * k;
            best = fmax(best, fabs(u[0] * b[0] + u[1] * b[1] + u[2] * b[2]));
        }
        double got = fabs(u[0] * a[0] + u[1] * a[1] + u[2] * a[2]);
        worst = fmax(worst, acos(fmin(1, got)) - acos(fmin(1, best)));
    }
    check(rc == 0 && worst * 180 / M_PI < 0.5, "commit-dirs-nearest",
          "chosen direction up to %.3f degrees further than the nearest", worst * 180 / M_PI);
    /* the fast lookup against the definition (atan2 of both angles): random orientations, the
     * bins' edges themselves and a hair either side of them, the axes, signed zeros, tiny and
     * huge lengths */
    long tried = 0, differ = 0;
    const double bpr = 360.0 / M_PI, hair[] = {0, 1e-15, -1e-15, 1e-12, -1e-12, 1e-9, -1e-9};
    for (int i = 0; rc == 0 && i < 200000; i++) {
        double u[3];
        random_dir(&s, u);
        const double scale = i % 3 == 0 ? 1e-300 : i % 3 == 1 ? 1e300 : 1;
        for (int k = 0; k < 3; k++) u[k] *= scale;
        tried++;
        differ += dm_commit_dirs_index(&d, u) != dm_commit_dirs_index_exact(&d, u);
    }
    for (int a = 0; rc == 0 && a <= 181; a++)
        for (int b = -1; b <= 721; b += 3)
            for (int h = 0; h < 7; h++) {
                const double th = (a + 0.5) / bpr + hair[h], ph = (b + 0.5) / bpr - M_PI + hair[h];
                double u[3] = {sin(th) * cos(ph), cos(th), sin(th) * sin(ph)};
                for (int sg = 0; sg < 2; sg++) {
                    if (sg) u[0] = -u[0], u[1] = -u[1], u[2] = -u[2];
                    tried++;
                    differ += dm_commit_dirs_index(&d, u) != dm_commit_dirs_index_exact(&d, u);
                }
            }
    const double z = 0.0, axes[][3] = {{1, 0, 0},
                                       {-1, 0, 0},
                                       {0, 1, 0},
                                       {0, -1, 0},
                                       {0, 0, 1},
                                       {0, 0, -1},
                                       {-1, z, -z},
                                       {-1, -z, z},
                                       {-z, 1, -z},
                                       {1, 1, 1},
                                       {-1, 1e-300, -1e-310}};
    for (int i = 0; rc == 0 && i < (int)(sizeof axes / sizeof axes[0]); i++) {
        tried++;
        differ += dm_commit_dirs_index(&d, axes[i]) != dm_commit_dirs_index_exact(&d, axes[i]);
    }
    check(rc == 0 && differ == 0, "commit-dirs-fast-exact",
          "%ld of %ld orientations take another direction than atan2's bins", differ, tried);
    dm_commit_dirs_free(&d);
}

/* A tractogram of n random polylines inside a grid of g voxels (2 mm, world = 2 x voxel). */
static void random_tracks(unsigned *s, int n, int g, dm_tck *t)
{
    memset(t, 0, sizeof *t);
    t->count = n;
    t->npoints = malloc(n * sizeof *t->npoints);
    t->start = malloc((n + 1) * sizeof *t->start);
    t->xyz = malloc((size_t)n * 40 * 3 * sizeof *t->xyz);
    long at = 0;
    for (int i = 0; i < n; i++) {
        int np = 3 + (int)(urand(s) * 30);
        double p[3], d[3];
        for (int a = 0; a < 3; a++) p[a] = 2 * (0.5 + urand(s) * (g - 1));
        random_dir(s, d);
        t->start[i] = at;
        t->npoints[i] = np;
        for (int k = 0; k < np; k++) {
            for (int a = 0; a < 3; a++) t->xyz[3 * (at + k) + a] = (float)p[a];
            double e[3];
            random_dir(s, e);
            for (int a = 0; a < 3; a++) {
                d[a] = d[a] + 0.3 * e[a];
                p[a] += 0.8 * d[a] / sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
            }
        }
        at += np;
    }
    t->start[n] = at;
}

static dm_commit_grid grid_of(int g)
{
    dm_commit_grid gr = {g, g, g, {{0.5, 0, 0, 0}, {0, 0.5, 0, 0}, {0, 0, 0.5, 0}}, NULL};
    return gr;
}

static void test_straight_cut(void)
{
    /* along x at y = z = 4 mm (voxel 2), from voxel x 1.2 to 5.7: pieces at the faces x.5 */
    float pts[6] = {2.4f, 4, 4, 11.4f, 4, 4};
    long np = 2, start[2] = {0, 2};
    dm_tck t = {.xyz = pts, .npoints = &np, .start = start, .count = 1, .header_count = 1};
    dm_commit_dirs dirs;
    dm_commit_dirs_make(100, &dirs);
    dm_commit_grid g = grid_of(8);
    dm_commit_dict_options o = {.min_seg_len = 1e-3, .max_len = 250, .threads = 1};
    dm_commit_dict d;
    int rc = dm_commit_dict_build(&t, &g, &dirs, &o, &d);
    /* voxel coordinates 1.2 .. 5.7: 0.3, 1, 1, 1, 1, 0.2 voxels in voxels 1..6, x 2 mm */
    const double want[] = {0.6, 2, 2, 2, 2, 0.4};
    double worst = rc == 0 && d.nseg == 6 ? 0 : 1;
    for (long q = 0; worst < 1 && q < d.nseg; q++) {
        long vx = d.vox[d.seg_vox[q]] % 8;
        worst = fmax(worst, fabs(d.seg_len[q] - want[vx - 1]));
    }
    double norm = sqrt(0.36 + 4 * 4 + 0.16);
    check(worst < 1e-5 && fabs(d.length[0] - 9) < 1e-5 && fabs(d.norm[0] - norm) < 1e-5,
          "commit-dict-straight-cut",
          "%ld pieces, largest error %.2g, length %.6f (9), norm %.6f (%.6f)", d.nseg, worst,
          d.length[0], d.norm[0], norm);
    dm_commit_dict_free(&d);
    dm_commit_dirs_free(&dirs);
}

typedef struct {
    dm_commit_dirs dirs;
    dm_commit_dict d;
    dm_commit_kernels k;
    dm_commit_operator A;
    dm_tck t;
    float *peaks;
} problem;

/* nradii > 0: COMMIT's cylinder-zeppelin-ball, that many IC columns per streamline; nperp
 * zeppelins per peak, of d_perp 0.5e-3 - 0.15e-3 k for k = perp0 .. perp0 + nperp - 1 */
static int make_problem_perps(problem *p, int nstr, int g, unsigned seed, int nradii, int nperp,
                              int perp0)
{
    memset(p, 0, sizeof *p);
    unsigned s = seed;
    random_tracks(&s, nstr, g, &p->t);
    dm_commit_dirs_make(300, &p->dirs);
    dm_commit_grid gr = grid_of(g);
    dm_commit_dict_options o = {.min_seg_len = 1e-3, .max_len = 250, .threads = 2};
    if (dm_commit_dict_build(&p->t, &gr, &p->dirs, &o, &p->d) != 0) return -1;
    /* 2 shells of 12 directions and 2 b=0 */
    int ns = 26;
    double b[26], gr3[78], G[26], Delta[26], delta[26];
    for (int i = 0; i < ns; i++) {
        b[i] = i < 2 ? 0 : i < 14 ? 1000 : 2500;
        random_dir(&s, gr3 + 3 * i);
        Delta[i] = 0.03, delta[i] = 0.01;
        G[i] = sqrt(b[i] * 1e6 / (Delta[i] - delta[i] / 3)) / (DM_COMMIT_GAMMA * delta[i]);
    }
    dm_commit_model m = {.d_par = 1.7e-3,
                         .nperp = nperp,
                         .niso = 2,
                         .d_iso = {1.7e-3, 3e-3},
                         .ec_on = 1,
                         .nradii = nradii};
    for (int r = 0; r < nradii; r++) m.radius[r] = (1 + 2 * r) * 1e-6;
    for (int z = 0; z < nperp; z++) m.d_perp[z] = 0.5e-3 - 0.15e-3 * (perp0 + z);
    dm_commit_pulses pulses = {G, Delta, delta};
    if (dm_commit_kernels_make(&m, &p->dirs, ns, b, gr3, &pulses, &p->k) != 0) return -1;
    p->peaks = malloc((size_t)p->d.nvox * 6 * sizeof *p->peaks);
    for (long v = 0; v < p->d.nvox * 6; v++) p->peaks[v] = (float)(urand(&s) - 0.5);
    return dm_commit_operator_build(&p->d, &p->k, &p->dirs, p->peaks, 2, 0.1, 2, &p->A);
}

static int make_problem(problem *p, int nstr, int g, unsigned seed, int nradii)
{
    return make_problem_perps(p, nstr, g, seed, nradii, 1, 0);
}

static void free_problem(problem *p)
{
    dm_commit_operator_free(&p->A);
    dm_commit_kernels_free(&p->k);
    dm_commit_dict_free(&p->d);
    dm_commit_dirs_free(&p->dirs);
    free(p->t.xyz);
    free(p->t.npoints);
    free(p->t.start);
    free(p->peaks);
}

/* <A x, v> = <x, A^T v>, and every column of A^T v by its definition (A e_j . v). */
static void check_adjoint(const dm_commit_operator *A, int rc, const char *name)
{
    long n = A->ncols, m = A->nrows;
    double *x = malloc(n * sizeof *x), *v = malloc(m * sizeof *v), *Ax = malloc(m * sizeof *Ax),
           *g = malloc(n * sizeof *g), *ej = calloc(n, sizeof *ej), *col = malloc(m * sizeof *col),
           *dots = malloc((A->nruns + 1) * A->op.nic * sizeof *dots);
    unsigned s = 5;
    for (long j = 0; j < n; j++) x[j] = urand(&s);
    for (long i = 0; i < m; i++) v[i] = urand(&s) - 0.5;
    dm_commit_cpu_ax(A, x, Ax, dots, 2);
    dm_commit_cpu_aty(A, v, g, dots, 2);
    double lhs = 0, rhs = 0;
    for (long i = 0; i < m; i++) lhs += Ax[i] * v[i];
    for (long j = 0; j < n; j++) rhs += x[j] * g[j];
    double worst = 0;
    for (long j = 0; j < n; j++) {
        ej[j] = 1;
        dm_commit_cpu_ax(A, ej, col, dots, 1);
        ej[j] = 0;
        double cj = 0;
        for (long i = 0; i < m; i++) cj += col[i] * v[i];
        worst = fmax(worst, fabs(cj - g[j]) / fmax(fabs(cj), 1e-3));
    }
    double rel = fabs(lhs - rhs) / fabs(lhs);
    check(rc == 0 && rel < 1e-12 && worst < 1e-12, name,
          "<Ax,v> %.15g, <x,A^T v> %.15g (%.1e); columns by definition: %.1e; %ld columns, %ld "
          "rows, %d IC responses",
          lhs, rhs, rel, worst, n, m, A->op.nic);
    free(x), free(v), free(Ax), free(g), free(ej), free(col), free(dots);
}

static void test_adjoint(int nradii)
{
    problem p;
    int rc = make_problem(&p, 60, 7, 11, nradii);
    check_adjoint(&p.A, rc || p.A.op.nic != (nradii ? nradii : 1),
                  nradii ? "commit-adjoint-cylinders" : "commit-adjoint");
    free_problem(&p);
}

/* Three zeppelins per peak (COMMIT's d_perps): the adjoint holds, the EC columns come d_perp by
 * d_perp (column nf + z ne + e), and the z-th block is the operator of that d_perp alone: A x
 * with x on the IC, the z-th EC block and the balls equals the one-zeppelin operator's A x,
 * bit for bit, with the same scales. */
static void test_zeppelins(void)
{
    enum { NZ = 3 };
    problem p, q[NZ];
    memset(q, 0, sizeof q);
    int rc = make_problem_perps(&p, 60, 7, 11, 0, NZ, 0);
    check_adjoint(&p.A, rc || p.A.op.nec != NZ, "commit-adjoint-zeppelins");
    const long nf = p.A.op.nf, ne = p.A.op.ne, m = p.A.nrows, n = p.A.ncols;
    double *x = malloc(n * sizeof *x), *xq = malloc(n * sizeof *xq), *a = malloc(m * sizeof *a),
           *b = malloc(m * sizeof *b), *dots = malloc((p.A.nruns + 1) * sizeof *dots);
    unsigned s = 9;
    double worst = 0, worst_scale = 0;
    long nq = 0;
    for (int z = 0; z < NZ; z++) {
        rc |= make_problem_perps(&q[z], 60, 7, 11, 0, 1, z);
        nq = q[z].A.ncols;
        if (rc || q[z].A.op.ne != ne || nq != n - (NZ - 1) * ne) {
            rc = -1;
            break;
        }
        for (long j = 0; j < n; j++) x[j] = 0;
        for (long j = 0; j < nq; j++) xq[j] = urand(&s);
        for (long j = 0; j < nf; j++) x[j] = xq[j];
        for (long e = 0; e < ne; e++) {
            x[nf + z * ne + e] = xq[nf + e];
            worst_scale =
                fmax(worst_scale, fabs(p.A.scale[nf + z * ne + e] - q[z].A.scale[nf + e]));
        }
        for (long j = nf + ne; j < nq; j++) x[j + (NZ - 1) * ne] = xq[j];
        dm_commit_cpu_ax(&p.A, x, a, dots, 2);
        dm_commit_cpu_ax(&q[z].A, xq, b, dots, 2);
        for (long i = 0; i < m; i++) worst = fmax(worst, fabs(a[i] - b[i]));
    }
    check(rc == 0 && worst == 0 && worst_scale == 0 && ne > 0, "commit-zeppelins-blocks",
          "%d zeppelins x %ld peaks: A x differs from the one-zeppelin operators' by %.1e, scales "
          "by %.1e; %ld columns (one zeppelin: %ld)",
          NZ, ne, worst, worst_scale, n, nq);
    free(x), free(xq), free(a), free(b), free(dots);
    for (int z = 0; z < NZ; z++) free_problem(&q[z]);
    free_problem(&p);
}

/* Balls in every other voxel (--iso-mask) and every row weighted (--confidence-map): the adjoint
 * still holds, and A x is the row weights times the plain operator's A x with the dropped balls'
 * coefficients 0. */
static void test_weighted_iso_mask(void)
{
    problem p, q;
    int rc = make_problem(&p, 60, 7, 11, 0) | make_problem(&q, 60, 7, 11, 0);
    const long nv = p.A.op.nv, m = p.A.nrows, first = p.A.op.nf + p.A.op.ne;
    unsigned char *on = malloc(nv);
    float *w = malloc(m * sizeof *w);
    unsigned s = 3;
    for (long v = 0; v < nv; v++) on[v] = v % 2 == 0;
    for (long i = 0; i < m; i++) w[i] = (float)(0.2 + urand(&s));
    rc |= dm_commit_operator_iso_mask(&p.A, on);
    p.A.op.row_w = w;
    check_adjoint(&p.A, rc, "commit-adjoint-weighted-iso-mask");
    const long n = p.A.ncols, nq = q.A.ncols;
    double *x = malloc(n * sizeof *x), *xq = calloc(nq, sizeof *xq), *a = malloc(m * sizeof *a),
           *b = malloc(m * sizeof *b), *dots = malloc((p.A.nruns + 1) * sizeof *dots);
    for (long j = 0; j < n; j++) x[j] = urand(&s);
    for (long j = 0; j < first; j++) xq[j] = x[j];
    for (int i = 0; i < p.A.op.niso; i++)
        for (long v = 0; v < nv; v++)
            if (on[v]) xq[first + i * nv + v] = x[first + i * p.A.op.niv + v / 2];
    dm_commit_cpu_ax(&p.A, x, a, dots, 2);
    dm_commit_cpu_ax(&q.A, xq, b, dots, 2);
    double worst = 0, top = 0;
    for (long i = 0; i < m; i++) {
        worst = fmax(worst, fabs(a[i] - (double)w[i] * b[i]));
        top = fmax(top, fabs(a[i]));
    }
    check(rc == 0 && p.A.op.niv == (nv + 1) / 2 && n == nq - p.A.op.niso * (nv - p.A.op.niv) &&
              worst <= 1e-12 * top,
          "commit-weighted-iso-mask-definition",
          "%ld of %ld voxels with balls, %ld columns (plain %ld); A x = w (A_plain x') within %.1e",
          p.A.op.niv, nv, n, nq, worst / top);
    p.A.op.row_w = NULL;
    free(on), free(w), free(x), free(xq), free(a), free(b), free(dots);
    free_problem(&p);
    free_problem(&q);
}

/* FISTA run to convergence on a small problem meets the optimality (KKT) conditions of the
 * non-negative least squares: g = A^T (A x - y) is >= 0 where x_j = 0 and 0 where x_j > 0; with
 * the lasso on every block (lasso: each block's lambda 0.1 of its lambda_max), g_j + lambda_j is
 * (to 1e-4). */
static void test_fista_minimum(int nradii, int lasso)
{
    problem p;
    int rc = make_problem(&p, 12, 4, 17, nradii);
    const dm_commit_operator *A = &p.A;
    long n = A->ncols, m = A->nrows;
    double *y = malloc(m * sizeof *y), *x = calloc(n, sizeof *x), *x0 = calloc(n, sizeof *x0),
           *truth = malloc(n * sizeof *truth), *r = malloc(m * sizeof *r),
           *g = malloc(n * sizeof *g), *dots = malloc((A->nruns + 1) * A->op.nic * sizeof *dots);
    unsigned s = 9;
    for (long j = 0; j < n; j++) truth[j] = urand(&s) < 0.5 ? 0 : urand(&s);
    dm_commit_cpu_ax(A, truth, y, dots, 1);
    for (long i = 0; i < m; i++) y[i] += 0.05 * (urand(&s) - 0.5);
    dm_commit_backend B;
    dm_commit_cpu *c = dm_commit_cpu_open(A, y, 1, &B);
    dm_commit_reg reg = {.nf = (long)A->op.nic * A->op.nf,
                         .ec_end = (long)A->op.nic * A->op.nf + A->op.ne,
                         .ncols = n};
    dm_commit_fista_options o = {.tol_fun = 0,
                                 .tol_x = 0,
                                 .max_iter = 20000,
                                 .reg = lasso ? &reg : NULL,
                                 .lambda_frac = 0.1,
                                 .lambda_ec_frac = 0.1,
                                 .lambda_iso_frac = 0.1};
    dm_commit_fista_result res;
    int frc = dm_commit_fista(&B, x0, &o, x, &res);
    dm_commit_cpu_close(c);
    dm_commit_cpu_ax(A, x, r, dots, 1);
    for (long i = 0; i < m; i++) r[i] -= y[i];
    dm_commit_cpu_aty(A, r, g, dots, 1);
    dm_commit_cpu_aty(A, y, truth, dots, 1); /* the scale: A^T y */
    double scale = 0, worst = 0;
    long active = 0;
    for (long j = 0; j < n; j++) scale = fmax(scale, fabs(truth[j]));
    for (long j = 0; j < n; j++) {
        double gj = g[j] + dm_commit_block_lambda(j, reg.nf, reg.ec_end, res.lambda, res.lambda_ec,
                                                  res.lambda_iso);
        double viol = x[j] > 0 ? fabs(gj) : fmax(0, -gj);
        worst = fmax(worst, viol / scale);
        active += x[j] > 0;
    }
    const char *name =
        lasso ? (nradii ? "commit-fista-kkt-lasso-cylinders" : "commit-fista-kkt-lasso")
              : (nradii ? "commit-fista-kkt-cylinders" : "commit-fista-kkt");
    /* with the lasso FISTA stalls near 1e-5 on this ill-posed operator (two balls and the stick
     * of one diffusivity; 200000 iterations no better); a lambda on a wrong block would leave a
     * violation of its size, about 0.1 */
    check(
        rc == 0 && frc == 0 && worst < (lasso ? 1e-4 : 1e-6) &&
            (!lasso || (res.lambda > 0 && res.lambda_ec > 0 && res.lambda_iso > 0)),
        name,
        "largest violation %.1e of max |A^T y| after %d iterations (%s); %ld of %ld unknowns > 0; "
        "lambdas IC %.3g EC %.3g ISO %.3g",
        worst, res.iterations, res.stopped ? res.stopped : "-", active, n, res.lambda,
        res.lambda_ec, res.lambda_iso);
    free(y), free(x), free(x0), free(truth), free(r), free(g), free(dots);
    free_problem(&p);
}

/* The cylinder responses (commit_kernels.c with mathlib.h's Van Gelderen sum) against numpy and
 * scipy's roots of J1' (commit_cylinder_ref.h, tests/py/cylinder_ref.py): one measurement per
 * reference row, at its angle to the one table direction. */
static void test_cylinder_kernel(void)
{
    enum { N = sizeof commit_cylinder_ref / sizeof commit_cylinder_ref[0] };
    dm_commit_dirs dirs;
    int rc = dm_commit_dirs_make(1, &dirs), nbad = 0;
    double worst = 0;
    for (int i = 0; rc == 0 && i < N; i++) {
        const double *ref = commit_cylinder_ref[i];
        const double *a = dirs.dir, c = ref[4];
        /* a unit vector u perpendicular to the axis a, and g = c a + sqrt(1 - c^2) u */
        double u[3] = {a[1], -a[0], 0}, nu = hypot(u[0], u[1]), g[3];
        for (int j = 0; j < 3; j++) g[j] = c * a[j] + sqrt(1 - c * c) * u[j] / nu;
        double G = ref[1], Delta = ref[2], delta = ref[3], gd = DM_COMMIT_GAMMA * G * delta;
        double b = gd * gd * (Delta - delta / 3) * 1e-6;
        dm_commit_model m = {.d_par = 0.6e-3, .nradii = 1, .radius = {ref[0] * 1e-6}};
        dm_commit_pulses p = {&G, &Delta, &delta};
        dm_commit_kernels k;
        if ((rc = dm_commit_kernels_make(&m, &dirs, 1, &b, g, &p, &k)) != 0) break;
        double v = k.rows[0] * k.ic_norm[0], err = fabs(v - ref[5]) / fmax(ref[5], 1e-3);
        worst = fmax(worst, err);
        nbad += !(err < 1e-6);
        dm_commit_kernels_free(&k);
    }
    check(rc == 0 && nbad == 0, "commit-cylinder-kernel",
          "%d responses (radii 0.01 to 8 um, 3 pulse timings, 4 angles): largest relative error "
          "%.1e (against numpy and scipy's jnp_zeros)",
          N, worst);
    dm_commit_dirs_free(&dirs);
}

int main(void)
{
    test_dirs();
    test_straight_cut();
    test_adjoint(0);
    test_adjoint(3);
    test_zeppelins();
    test_weighted_iso_mask();
    test_fista_minimum(0, 0);
    test_fista_minimum(3, 0);
    test_fista_minimum(0, 1);
    test_fista_minimum(3, 1);
    test_cylinder_kernel();
    return failures != 0;
}
