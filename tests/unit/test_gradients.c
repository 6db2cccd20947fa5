/* Generated code against itself: for every model in models/ (and one extra model that calls
 * every built-in), generate the C source, compile it as a double-precision shared object,
 * load it, and at random points inside the bounds (and the constraints: fractions summing to at
 * most one), with physically consistent random measurements (delta < Delta for scheme
 * columns), skipping the few signals that over- or underflow there, check
 *   - the split of model_api.h: one dm_signal_prepare per point, then dm_signal_at for
 *     several measurements from the same pre, equals dm_signal exactly, and prepare writes
 *     nothing beyond DM_PRE_WIDTH (likewise the gradient's prepare and _at);
 *   - dm_signal_grad_at's value equals dm_signal's, and its partials agree with central finite
 *     differences of dm_signal (Richardson-extrapolated, step 1e-4 of the parameter's scale)
 *     to a relative error of 1e-6.  The denominator is max(|analytic|, |numeric|,
 *     1e-3 |signal| / scale): a partial that moves the signal by less than a thousandth over
 *     the parameter's own scale is compared in absolute terms (scale = max(|p|, 1% of the
 *     sampled range));
 *   - dm_from_free(dm_to_free(p)) == p (1e-12 relative) and dpdx against finite differences;
 *     a p closer to a bound than dm_to_free's range (model_api.h) comes back moved inward;
 *   - dm_in_bounds, dm_wrap_periodic; the source compiles warning-free (-Wall -Wextra) in
 *     float and double;
 *   - tensors written with 3x3 matrices (dti.model's by sym/quad, the eigen-form by rotation)
 *     give the signal and gradient of their scalar and vector forms (1e-12, 1e-10 relative).
 * Built-ins differentiated numerically (lgamma, the Bingham moments of the NODDI-Bingham
 * models) are accurate to ~1e-10, well inside 1e-6.  The Bingham models come closest
 * (~3e-7): their signal carries ~1e-14 of rounding from the saddle-point 1F1 of matrices with
 * entries ~60, which the finite differences (step 1e-4 of kappa) amplify. */
#include "compiler.h"
#include "all_builtins_model.h"
#include "check.h"
#include "fit/model_api.h"
#include "shipped_models.h"

#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NPOINTS 120
#define MEAS_PER_POINT 3
#define TOL_GRAD 1e-6
#define PRE_SLOTS 512 /* room for any model's pre array, and a guard zone behind it */

typedef double (*signal_fn)(const double *, const double *, const double *);
typedef double (*grad_fn)(const double *, const double *, const double *, double *);
typedef int (*bounds_fn)(const double *);
typedef int (*constraints_fn)(const double *, const double *);
typedef void (*wrap_fn)(double *);
typedef void (*to_free_fn)(const double *, double *);
typedef void (*from_free_fn)(const double *, double *, double *);
typedef void (*prepare_fn)(const double *, const double *, double *);
typedef double (*at_fn)(const double *, const double *, const double *);
typedef double (*grad_at_fn)(const double *, const double *, const double *, double *);
typedef int (*widths_fn)(int);

typedef struct lib {
    void *handle;
    signal_fn signal;
    grad_fn grad;
    bounds_fn in_bounds;
    constraints_fn constraints_ok;
    wrap_fn wrap;
    to_free_fn to_free;
    from_free_fn from_free;
    prepare_fn prepare, grad_prepare;
    at_fn at;
    grad_at_fn grad_at;
    widths_fn widths;
} lib;

/* A check named MODEL-NAME. */
static void check_model(int ok, const char *model, const char *name, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void check_model(int ok, const char *model, const char *name, const char *fmt, ...)
{
    char full[300];
    snprintf(full, sizeof full, "%s-%s", model, name);
    va_list ap;
    va_start(ap, fmt);
    check_va(ok, full, fmt, ap);
    va_end(ap);
}

static unsigned long long rng_state = 0x9e3779b97f4a7c15ULL;
static double uniform(double lo, double hi)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return lo + (hi - lo) * ((double)(rng_state >> 11) / 9007199254740992.0);
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    int ok = fputs(text, f) >= 0;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static const char *harness =
    "#include <math.h>\n"
    "typedef double real;\n"
    "#define DM_FN static inline\n"
    "#include \"maths/mathlib.h\"\n"
    "#include \"model.h\"\n"
    "double h_signal(const double *p, const double *m, const double *v)\n"
    "{ return dm_signal(p, m, v); }\n"
    "double h_grad(const double *p, const double *m, const double *v, double *ds)\n"
    "{ return dm_signal_grad(p, m, v, ds); }\n"
    "int h_in_bounds(const double *p) { return dm_in_bounds(p); }\n"
    "void h_wrap(double *p) { dm_wrap_periodic(p); }\n"
    "void h_to_free(const double *p, double *x) { dm_to_free(p, x); }\n"
    "void h_from_free(const double *x, double *p, double *d) { dm_from_free(x, p, d); }\n"
    "int h_constraints_ok(const double *p, const double *v) { return dm_constraints_ok(p, v); }\n"
    "double h_prior(const double *p, const double *v) { return dm_prior_energy(p, v); }\n"
    "double h_sd(int k, const double *p) { return dm_proposal_sd(k, p); }\n"
    "void h_outputs(const double *p, const double *v, double *o) { dm_outputs(p, v, o); }\n"
    "int h_widths(int i) { int w[6] = {DM_NPARAMS, DM_MEASURE_WIDTH, DM_VOXEL_WIDTH,\n"
    "    DM_OUTPUT_WIDTH, DM_PRE_WIDTH, DM_PREG_WIDTH}; return w[i]; }\n"
    "void h_prepare(const double *p, const double *v, double *pre)\n"
    "{ dm_signal_prepare(p, v, pre); }\n"
    "#if DM_FIX_WIDTH > 0\n"
    "#define EXTEND(m, v) double row[DM_ROW_WIDTH]; dm_row_extend(m, v, row); m = row\n"
    "#else\n"
    "#define EXTEND(m, v) (void)0\n"
    "#endif\n"
    "double h_at(const double *pre, const double *m, const double *v)\n"
    "{ EXTEND(m, v); return dm_signal_at(pre, m, v); }\n"
    "void h_grad_prepare(const double *p, const double *v, double *pre)\n"
    "{ dm_signal_grad_prepare(p, v, pre); }\n"
    "double h_grad_at(const double *pre, const double *m, const double *v, double *ds)\n"
    "{ EXTEND(m, v); return dm_signal_grad_at(pre, m, v, ds); }\n"
    "int h_fix_width(void) { return DM_FIX_WIDTH; }\n";

static const char *float_harness =
    "#include <math.h>\n"
    "typedef float real;\n"
    "#define DM_FN static inline\n"
    "#include \"maths/mathlib.h\"\n"
    "#include \"model.h\"\n"
    "float h_signal(const float *p, const float *m, const float *v, float *ds)\n"
    "{ return dm_signal(p, m, v) + dm_signal_grad(p, m, v, ds); }\n"
    "float h_split(const float *p, const float *m, const float *v, float *ds)\n"
    "{ float pre[DM_PRE_WIDTH], preg[DM_PREG_WIDTH];\n"
    "  dm_signal_prepare(p, v, pre); dm_signal_grad_prepare(p, v, preg);\n"
    "#if DM_FIX_WIDTH > 0\n"
    "  float row[DM_ROW_WIDTH]; dm_row_extend(m, v, row); m = row;\n"
    "#endif\n"
    "  return dm_signal_at(pre, m, v) + dm_signal_grad_at(preg, m, v, ds); }\n";

/* Runs a shell command; 1 when it succeeded and wrote nothing to log. */
static int run_quiet(const char *cmd, const char *log)
{
    if (system(cmd) != 0) return 0;
    struct stat st;
    return stat(log, &st) == 0 && st.st_size == 0;
}

static int build(const char *name, const char *dir, const char *source, lib *L)
{
    char path[1100], cmd[8192], log[1100];
    const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
    snprintf(path, sizeof path, "%s/model.h", dir);
    if (write_text(path, source) != 0) return -1;
    snprintf(path, sizeof path, "%s/harness.c", dir);
    write_text(path, harness);
    snprintf(path, sizeof path, "%s/float_harness.c", dir);
    write_text(path, float_harness);

    snprintf(log, sizeof log, "%s/cc-float.log", dir);
    snprintf(cmd, sizeof cmd,
             "cc -O2 -Wall -Wextra -I'%s/templates' -c -o '%s/float.o' "
             "'%s/float_harness.c' >'%s' 2>&1",
             root, dir, dir, log);
    check_model(run_quiet(cmd, log), name, "float-build-warning-free", "see %s", log);

    snprintf(log, sizeof log, "%s/cc.log", dir);
    snprintf(cmd, sizeof cmd,
             "cc -O2 -Wall -Wextra -shared -fPIC -I'%s/templates' -o "
             "'%s/model.so' '%s/harness.c' -lm >'%s' 2>&1",
             root, dir, dir, log);
    int clean = run_quiet(cmd, log);
    check_model(clean, name, "double-build-warning-free", "compiler output in %s/cc.log", dir);
    snprintf(path, sizeof path, "%s/model.so", dir);
    L->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!L->handle) {
        printf("FAIL %s-load: %s\n", name, dlerror());
        failures++;
        return -1;
    }
    L->signal = (signal_fn)dlsym(L->handle, "h_signal");
    L->grad = (grad_fn)dlsym(L->handle, "h_grad");
    L->in_bounds = (bounds_fn)dlsym(L->handle, "h_in_bounds");
    L->constraints_ok = (constraints_fn)dlsym(L->handle, "h_constraints_ok");
    L->wrap = (wrap_fn)dlsym(L->handle, "h_wrap");
    L->to_free = (to_free_fn)dlsym(L->handle, "h_to_free");
    L->from_free = (from_free_fn)dlsym(L->handle, "h_from_free");
    L->prepare = (prepare_fn)dlsym(L->handle, "h_prepare");
    L->grad_prepare = (prepare_fn)dlsym(L->handle, "h_grad_prepare");
    L->at = (at_fn)dlsym(L->handle, "h_at");
    L->grad_at = (grad_at_fn)dlsym(L->handle, "h_grad_at");
    L->widths = (widths_fn)dlsym(L->handle, "h_widths");
    if (!L->signal || !L->grad || !L->in_bounds || !L->wrap || !L->to_free || !L->from_free ||
        !L->prepare || !L->grad_prepare || !L->at || !L->grad_at || !L->widths) {
        printf("FAIL %s-load: missing symbols\n", name);
        failures++;
        return -1;
    }
    return 0;
}

static double lo_of(const dm_param *p)
{
    return p->has_bounds ? p->lo : -INFINITY;
}
static double hi_of(const dm_param *p)
{
    return p->has_bounds ? p->hi : INFINITY;
}

/* The sampling range: 1% inside finite bounds; 1000 wide beyond a single bound. */
static void sample_range(const dm_param *p, double *lo, double *hi)
{
    double l = lo_of(p), h = hi_of(p);
    if (isfinite(l) && isfinite(h)) {
        *lo = l + 0.01 * (h - l);
        *hi = h - 0.01 * (h - l);
    } else if (isfinite(l)) {
        *lo = l + 0.5;
        *hi = l + 1000;
    } else if (isfinite(h)) {
        *lo = h - 1000;
        *hi = h - 0.5;
    } else {
        *lo = -5;
        *hi = 5;
    }
}

static void random_measurement(const dm_model *m, double *row)
{
    for (int i = 0; i < m->measures.n; i++) {
        const dm_input *in = m->measures.items[i];
        double *c = row + in->column;
        if (in->source && strcmp(in->source, "bvecs") == 0 && in->width == 3) {
            double n;
            do {
                for (int j = 0; j < 3; j++) c[j] = uniform(-1, 1);
                n = sqrt(c[0] * c[0] + c[1] * c[1] + c[2] * c[2]);
            } while (n < 0.1 || n > 1);
            for (int j = 0; j < 3; j++) c[j] /= n;
        } else if (in->source && strcmp(in->source, "bvals") == 0) {
            c[0] = uniform(0, 3000);
        } else if (in->source && strcmp(in->source, "scheme") == 0) {
            /* a pulsed-gradient protocol: G in T/m, delta < Delta in s; any other column an
             * echo time (s) */
            const char *col = in->scheme_column;
            if (strcmp(col, "G") == 0)
                c[0] = uniform(0, 0.3);
            else if (strcmp(col, "delta") == 0)
                c[0] = uniform(0.003, 0.015);
            else if (strcmp(col, "Delta") == 0)
                c[0] = uniform(0.02, 0.05);
            else
                c[0] = uniform(0.05, 0.1);
        } else {
            for (int j = 0; j < in->width; j++) c[j] = uniform(0.01, 0.1); /* an echo time (s) */
        }
    }
}

/* Richardson-extrapolated central difference of f along coordinate k of p. */
static double numeric_partial(const lib *L, double *p, int k, double h, const double *meas,
                              const double *vox)
{
    double p0 = p[k], f[4];
    const double steps[4] = {h, -h, h / 2, -h / 2};
    for (int i = 0; i < 4; i++) {
        p[k] = p0 + steps[i];
        f[i] = L->signal(p, meas, vox);
    }
    p[k] = p0;
    double d1 = (f[0] - f[1]) / (2 * h), d2 = (f[2] - f[3]) / h;
    return (4 * d2 - d1) / 3;
}

/* The first right-hand side of `const real tN = ...;` that appears twice within one
 * function of the generated source, or NULL. */
static const char *repeated_subexpression(const char *src)
{
    static char found[256];
    char *rhs[4096];
    int n = 0;
    const char *dup = NULL;
    for (const char *line = src; line && *line && !dup;
         line = strchr(line, '\n'), line = line ? line + 1 : NULL) {
        if (strncmp(line, "DM_FN", 5) == 0) { /* a new function */
            for (int i = 0; i < n; i++) free(rhs[i]);
            n = 0;
        }
        const char *eq = strstr(line, " = ");
        const char *end = strchr(line, ';');
        const char *nl = strchr(line, '\n');
        if (strncmp(line, "    const ", 10) != 0 || !eq || !end || (nl && end > nl) ||
            strstr(line, " = p[") || strstr(line, " = m[") || strstr(line, " = v["))
            continue;
        size_t len = (size_t)(end - (eq + 3));
        for (int i = 0; i < n && !dup; i++)
            if (strlen(rhs[i]) == len && strncmp(rhs[i], eq + 3, len) == 0) {
                snprintf(found, sizeof found, "%.*s", (int)len, eq + 3);
                dup = found;
            }
        if (n < 4096) {
            rhs[n] = malloc(len + 1);
            memcpy(rhs[n], eq + 3, len);
            rhs[n++][len] = 0;
        }
    }
    for (int i = 0; i < n; i++) free(rhs[i]);
    return dup;
}

/* The per-measurement work of the shipped multi-compartment models, after hoisting: only the
 * exponentials that involve b and a parameter stay in the loop (the angles' sin/cos,
 * sqrt(kappa) and Dawson's integral move to prepare; NODDI's stick integrals J_l(b d_par), l =
 * 0..12, and its ball exp(-b d_iso) read no parameter and become the 8 fixed values of each
 * measurement row). */
static void check_hoisting(const char *name, const dm_flops *f)
{
    static const struct {
        const char *model;
        long signal_transc, gradient_transc;
        int fix_width;
    } expect[] = {{"exp_decay", 1, 1, 0},       {"ball_1_stick", 2, 2, 0},
                  {"ball_2_sticks", 3, 3, 0},   {"ball_3_sticks", 4, 4, 0},
                  {"watson_zeppelin", 1, 1, 0}, {"noddi_watson", 1, 1, 8}};
    for (size_t i = 0; i < sizeof expect / sizeof expect[0]; i++)
        if (strcmp(name, expect[i].model) == 0) {
            int ok = f->signal_transc == expect[i].signal_transc &&
                     f->gradient_transc == expect[i].gradient_transc &&
                     f->fix_width == expect[i].fix_width;
            check_model(ok, name, "hoisted-transcendentals",
                        "per measurement %ld (signal) and %ld (gradient), %d fixed values",
                        f->signal_transc, f->gradient_transc, f->fix_width);
            if (!ok)
                printf("     expected %ld, %ld and %d\n", expect[i].signal_transc,
                       expect[i].gradient_transc, expect[i].fix_width);
        }
}

static void test_model(const char *name, const dm_model *m, const char *tmp)
{
    dm_generated g;
    if (dm_generate(m, &g, stdout) != 0) {
        printf("FAIL %s-generate: dm_generate failed\n", name);
        failures++;
        return;
    }
    printf("PASS %s-generate\n", name);
    char dir[1024];
    snprintf(dir, sizeof dir, "%.700s/%.200s", tmp, name);
    mkdir(dir, 0777);
    lib L;
    if (build(name, dir, g.source, &L) != 0) {
        dm_generated_free(&g);
        return;
    }
    int np = m->params.n;
    double p[64], x[64], q[64], ds[64], dpdx[64], lo[64], hi[64];
    double meas[2048] = {0}, vox[2048] = {0};
    for (int i = 0; i < m->voxels.n; i++)
        for (int j = 0; j < m->voxels.items[i]->width; j++)
            vox[m->voxels.items[i]->column + j] =
                m->voxels.items[i]->has_default ? m->voxels.items[i]->default_value : 1;
    for (int k = 0; k < np; k++) sample_range(m->params.items[k], &lo[k], &hi[k]);

    double worst_grad = 0, worst_value = 0, worst_trip = 0, worst_dpdx = 0;
    int clamp_outward = 0;
    int worst_k = 0, unused_nonzero = 0, out_of_bounds = 0, wrap_bad = 0;
    int split_differs = 0, pre_overrun = 0, overflowed = 0;
    const int pre_width = L.widths(4), preg_width = L.widths(5);
    const double sentinel = 1234.5678;
    double pre[PRE_SLOTS], preg[PRE_SLOTS], ds_whole[64];
    check_model(pre_width >= 1 && preg_width >= 1 && pre_width < PRE_SLOTS &&
                    preg_width < PRE_SLOTS,
                name, "pre-widths", "DM_PRE_WIDTH %d, DM_PREG_WIDTH %d", pre_width, preg_width);
    for (int it = 0; it < NPOINTS; it++) {
        /* a point of the model's domain: inside the bounds (checked below) and, for models
         * with constraints (fractions that sum to at most one), satisfying them */
        for (int tries = 0; tries < 1000; tries++) {
            for (int k = 0; k < np; k++) p[k] = uniform(lo[k], hi[k]);
            if (L.constraints_ok(p, vox)) break;
        }
        if (!L.in_bounds(p)) out_of_bounds++;
        for (int i = 0; i < PRE_SLOTS; i++) pre[i] = preg[i] = sentinel;
        L.prepare(p, vox, pre);
        L.grad_prepare(p, vox, preg);
        for (int i = pre_width; i < PRE_SLOTS; i++) pre_overrun += pre[i] != sentinel;
        for (int i = preg_width; i < PRE_SLOTS; i++) pre_overrun += preg[i] != sentinel;
        /* several measurements from one prepare, as the fitting loops use it */
        for (int j = 0; j < MEAS_PER_POINT; j++) {
            random_measurement(m, meas);
            double s = L.signal(p, meas, vox);
            /* The box of the bounds holds points no tissue has (DKI's exp(-b D + b^2 MD^2 K / 6)
             * overflows for large K and b, underflows for large D): those signals are skipped,
             * and counted. */
            if (!(fabs(s) < 1e150 && fabs(s) > 1e-150)) { /* a model may square it */
                overflowed++;
                continue;
            }
            double s_at = L.at(pre, meas, vox);
            double sg = L.grad_at(preg, meas, vox, ds);
            double sg_whole = L.grad(p, meas, vox, ds_whole);
            split_differs += memcmp(&s, &s_at, sizeof s) != 0;
            split_differs += memcmp(&sg, &sg_whole, sizeof sg) != 0;
            for (int k = 0; k < np; k++)
                split_differs += memcmp(&ds[k], &ds_whole[k], sizeof ds[k]) != 0;
            double ev = fabs(sg - s) / fmax(fabs(s), 1e-300);
            if (!(ev <= worst_value)) worst_value = isnan(ev) ? INFINITY : ev;
            for (int k = 0; k < np; k++) {
                if (!m->params.items[k]->used) {
                    unused_nonzero += ds[k] != 0;
                    continue;
                }
                double scale = fmax(fabs(p[k]), 0.01 * (hi[k] - lo[k]));
                double fd = numeric_partial(&L, p, k, 1e-4 * scale, meas, vox);
                double denom = fmax(fmax(fabs(ds[k]), fabs(fd)), 1e-3 * fabs(s) / scale);
                double e = fabs(ds[k] - fd) / denom;
                if (!(e <= worst_grad)) {
                    worst_grad = isnan(e) ? INFINITY : e;
                    worst_k = k;
                }
            }
        }
        /* the free parametrisation */
        L.to_free(p, x);
        L.from_free(x, q, dpdx);
        for (int k = 0; k < np; k++) {
            double size = fabs(p[k]);
            if (isfinite(lo_of(m->params.items[k])))
                size = fmax(size, fabs(lo_of(m->params.items[k])));
            if (isfinite(hi_of(m->params.items[k])))
                size = fmax(size, fabs(hi_of(m->params.items[k])));
            double e = fabs(q[k] - p[k]) / fmax(size, 1e-300);
            /* A point closer to a bound than dm_to_free's range comes back moved inward. */
            double lo = lo_of(m->params.items[k]), hi = hi_of(m->params.items[k]);
            if (!m->params.items[k]->periodic &&
                (fabs(x[k]) == DM_FREE_ATAN_MAX || x[k] == DM_FREE_EXP_MIN)) {
                double was = fmin(p[k] - lo, hi - p[k]), now = fmin(q[k] - lo, hi - q[k]);
                if (!(now >= was)) clamp_outward++;
                e = 0;
            }
            if (!(e <= worst_trip)) worst_trip = isnan(e) ? INFINITY : e;
            double h = 1e-3 * fmax(fabs(x[k]), 1), x0 = x[k], f[4];
            const double steps[4] = {h, -h, h / 2, -h / 2};
            for (int i = 0; i < 4; i++) {
                x[k] = x0 + steps[i];
                L.from_free(x, q, ds);
                f[i] = q[k];
            }
            x[k] = x0;
            double fd = (4 * (f[2] - f[3]) / h - (f[0] - f[1]) / (2 * h)) / 3;
            e = fabs(dpdx[k] - fd) / fmax(fabs(dpdx[k]), 1e-300);
            if (!(e <= worst_dpdx)) worst_dpdx = isnan(e) ? INFINITY : e;
        }
        /* periodic parameters three periods away wrap back */
        for (int k = 0; k < np; k++) q[k] = p[k];
        for (int k = 0; k < np; k++)
            if (m->params.items[k]->periodic)
                q[k] += 3 * (hi_of(m->params.items[k]) - lo_of(m->params.items[k]));
        L.wrap(q);
        for (int k = 0; k < np; k++)
            if (fabs(q[k] - p[k]) > 1e-9 * fmax(1, fabs(p[k]))) wrap_bad++;
    }
    check_model(split_differs == 0, name, "prepare-then-at-equals-whole", "%d values differ",
                split_differs);
    check_model(pre_overrun == 0, name, "prepare-within-width", "%d slots written beyond",
                pre_overrun);
    check_model(overflowed <= NPOINTS * MEAS_PER_POINT / 4, name, "signals-mostly-in-range",
                "%d of %d signals over- or underflowed", overflowed, NPOINTS * MEAS_PER_POINT);
    check_model(worst_value <= 1e-14, name, "grad-value-equals-signal", "relative difference %.3g",
                worst_value);
    check_model(worst_grad <= TOL_GRAD, name, "gradient-vs-finite-differences",
                "%.3g (worst at parameter %s)", worst_grad,
                np ? m->params.items[worst_k]->name : "-");
    printf("     %s: worst relative gradient error %.3g over %d points\n", name, worst_grad,
           NPOINTS);
    check_model(unused_nonzero == 0, name, "unused-params-zero-partial", "%d nonzero",
                unused_nonzero);
    check_model(out_of_bounds == 0, name, "in-bounds", "%d sampled points reported out of bounds",
                out_of_bounds);
    check_model(worst_trip <= 1e-12, name, "free-roundtrip", "relative error %.3g", worst_trip);
    check_model(clamp_outward == 0, name, "free-clamp-inward",
                "%d points near a bound moved outward by dm_to_free", clamp_outward);
    check_model(worst_dpdx <= 1e-7, name, "dpdx-vs-finite-differences", "relative error %.3g",
                worst_dpdx);
    check_model(wrap_bad == 0, name, "wrap-periodic", "%d values not wrapped back", wrap_bad);

    /* just outside a finite bound is out of bounds */
    int outside_ok = 1;
    for (int k = 0; k < np; k++) {
        const dm_param *par = m->params.items[k];
        if (par->periodic) continue;
        for (int k2 = 0; k2 < np; k2++) p[k2] = (lo[k2] + hi[k2]) / 2;
        if (isfinite(lo_of(par))) {
            p[k] = par->lo_closed ? lo_of(par) - 1e-9 * fmax(1, fabs(lo_of(par))) : lo_of(par);
            outside_ok &= !L.in_bounds(p);
        }
        if (isfinite(hi_of(par))) {
            p[k] = par->hi_closed ? hi_of(par) + 1e-9 * fmax(1, fabs(hi_of(par))) : hi_of(par);
            outside_ok &= !L.in_bounds(p);
        }
    }
    check_model(outside_ok, name, "out-of-bounds-rejected", "a point outside the bounds passed");
    /* value numbering: no function computes the same right-hand side twice */
    const char *dup = repeated_subexpression(g.source);
    check_model(!dup, name, "no-repeated-subexpressions", "%s", dup ? dup : "");
    if (dup) printf("     repeated: %s\n", dup);
    printf("     %s: per measurement: flops signal %ld (%ld transcendental), gradient %ld "
           "(%ld transcendental)\n",
           name, g.flops.signal, g.flops.signal_transc, g.flops.gradient, g.flops.gradient_transc);
    printf("     %s: per voxel: prepare %ld (%ld transcendental), gradient prepare %ld "
           "(%ld transcendental); pre %d, preg %d slots\n",
           name, g.flops.prepare, g.flops.prepare_transc, g.flops.gradient_prepare,
           g.flops.gradient_prepare_transc, pre_width, preg_width);
    check_hoisting(name, &g.flops);
    dlclose(L.handle);
    dm_generated_free(&g);
}

/* A user-written derivative replaces the automatic one: here deliberately a different value,
 * which dm_signal_grad must return as is, while the other partial stays automatic. */
static void test_user_derivative(const char *tmp)
{
    const char *text = "model user_derivative \"a user-written derivative\"\n"
                       "measure b = bvals\n"
                       "param a in (0, 10) init 1\n"
                       "param c in (0, 10) init 1\n"
                       "signal a * exp(-b * c * 1e-3)\n"
                       "derivative a = 42 + c\n";
    const char *name = "user_derivative";
    dm_model *m = dm_front_string("user_derivative.model", text, stdout, NULL, NULL);
    dm_generated g;
    if (!m || dm_generate(m, &g, stdout) != 0) {
        printf("FAIL %s-generate: the model does not compile\n", name);
        failures++;
        dm_model_free(m);
        return;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%.700s/%s", tmp, name);
    mkdir(dir, 0777);
    lib L;
    if (build(name, dir, g.source, &L) == 0) {
        double p[2] = {2, 3}, meas[1] = {1000}, ds[2];
        L.grad(p, meas, NULL, ds);
        double want_c = -2 * exp(-3.0); /* a * exp(-b c / 1000) * (-b / 1000) */
        check_model(ds[0] == 45 && fabs(ds[1] - want_c) <= 1e-15, name, "replaces-automatic",
                    "ds = %.17g, %.17g", ds[0], ds[1]);
        dlclose(L.handle);
    }
    dm_generated_free(&g);
    dm_model_free(m);
}

/* The whole of a text file (malloc'd), or NULL. */
static char *read_text(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *text = NULL;
    size_t n = 0, cap = 0, got;
    char chunk[4096];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (n + got + 1 > cap) {
            cap = 2 * (n + got + 1);
            char *t = realloc(text, cap);
            if (!t) break;
            text = t;
        }
        memcpy(text + n, chunk, got);
        n += got;
    }
    fclose(f);
    if (text) text[n] = '\0';
    return text;
}

/* One model written two ways (3x3 matrices, and scalars and vectors): the same parameters, so
 * at the same random points the generated signals agree to 1e-12 relative in double, and
 * their gradients to 1e-10 (of max(|partial|, 1e-3 |signal|)). */
static void test_matrix_route(const char *name, const char *text_mat, const char *text_ref,
                              const char *tmp)
{
    dm_model *m[2] = {dm_front_string("mat.model", text_mat, stdout, NULL, NULL),
                      dm_front_string("ref.model", text_ref, stdout, NULL, NULL)};
    dm_generated g[2];
    lib L[2];
    int built = 0;
    for (int i = 0; i < 2 && m[i]; i++) {
        if (dm_generate(m[i], &g[i], stdout) != 0) break;
        char dir[1024], label[300];
        snprintf(dir, sizeof dir, "%.700s/%.200s_%d", tmp, name, i);
        snprintf(label, sizeof label, "%.200s-%s", name, i ? "reference" : "matrices");
        mkdir(dir, 0777);
        if (build(label, dir, g[i].source, &L[i]) != 0) {
            dm_generated_free(&g[i]);
            break;
        }
        built++;
    }
    if (built == 2 && m[0]->params.n == m[1]->params.n) {
        int np = m[0]->params.n;
        double p[64], lo[64], hi[64], meas[64] = {0}, vox[64] = {0}, ds[2][64];
        for (int k = 0; k < np; k++) sample_range(m[0]->params.items[k], &lo[k], &hi[k]);
        double worst = 0, worst_grad = 0;
        for (int it = 0; it < 4 * NPOINTS; it++) {
            for (int k = 0; k < np; k++) p[k] = uniform(lo[k], hi[k]);
            random_measurement(m[0], meas);
            double s0 = L[0].grad(p, meas, vox, ds[0]), s1 = L[1].grad(p, meas, vox, ds[1]);
            worst = fmax(worst, fabs(s0 - s1) / fmax(fabs(s1), 1e-300));
            for (int k = 0; k < np; k++)
                worst_grad = fmax(worst_grad, fabs(ds[0][k] - ds[1][k]) /
                                                  fmax(fabs(ds[1][k]), 1e-3 * fabs(s1) + 1e-300));
        }
        check_model(worst <= 1e-12 && worst_grad <= 1e-10, name, "matrix-route-same-signal",
                    "signal %.3g, gradient %.3g relative over %d points", worst, worst_grad,
                    4 * NPOINTS);
        printf("     %s: matrix route against reference: signal %.3g, gradient %.3g relative\n",
               name, worst, worst_grad);
    } else {
        printf("FAIL %s-matrix-route: a model did not compile\n", name);
        failures++;
    }
    for (int i = 0; i < built; i++) {
        dlclose(L[i].handle);
        dm_generated_free(&g[i]);
    }
    dm_model_free(m[0]);
    dm_model_free(m[1]);
}

/* models/dti.model's parameters and signal, and the library's eigen-form tensor, each against
 * the same written with the matrices' built-ins. */
static void test_matrix_routes(const char *root, const char *tmp)
{
    char lib_path[4096], dti_path[4096], head[8192], mat[16384];
    snprintf(lib_path, sizeof lib_path, "%s/models/lib/compartments.model", root);
    snprintf(dti_path, sizeof dti_path, "%s/models/dti.model", root);
    char *dti = read_text(dti_path);
    char *params = dti ? strstr(dti, "param S0") : NULL;
    char *end = params ? strstr(params, "\n\n") : NULL;
    if (!end) {
        printf("FAIL matrix-route: cannot read the parameters of %s\n", dti_path);
        failures++;
        free(dti);
        return;
    }
    snprintf(head, sizeof head,
             "model m \"x\"\nimport \"%s\"\nmeasure g[3] = bvecs\nmeasure b = bvals\n%.*s\n",
             lib_path, (int)(end - params), params);
    snprintf(mat, sizeof mat,
             "%slet L = mat(l11, 0, 0, l21, l22, 0, l31, l32, l33)\n"
             "let D = 1e-3 * mul(L, transpose(L))\n"
             "signal S0 * tensor_sym(D[0][0], D[0][1], D[0][2], D[1][1], D[1][2], D[2][2])\n",
             head);
    test_matrix_route("dti", mat, dti, tmp);
    free(dti);
    snprintf(head, sizeof head,
             "model m \"x\"\nimport \"%s\"\nmeasure g[3] = bvecs\nmeasure b = bvals\n"
             "param S0 in (0, inf) init 1\nparam d1 in (0, 0.01) init 1e-3\n"
             "param d2 in (0, 0.01) init 1e-3\nparam d3 in (0, 0.01) init 1e-3\n"
             "param th in [0, pi] periodic\nparam ph in [0, 2*pi] periodic\n"
             "param psi in [0, pi] periodic\n",
             lib_path);
    char ref[16384];
    snprintf(mat, sizeof mat,
             "%slet R = rotation(th, ph, psi)\n"
             "signal S0 * exp(-b * quad(g, mul(mul(R, diag(d2, d3, d1)), transpose(R))))\n",
             head);
    snprintf(ref, sizeof ref,
             "%ssignal S0 * tensor(d1, d2, d3, dir(th, ph), perp_axis(th, ph, psi))\n", head);
    test_matrix_route("tensor_rotation", mat, ref, tmp);
}

int main(void)
{
    const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
    char tmp[800];
    snprintf(tmp, sizeof tmp, "%.700s/test_gradients.XXXXXX",
             getenv("TMPROOT") ? getenv("TMPROOT") : "/tmp");
    if (!mkdtemp(tmp)) {
        printf("FAIL tmpdir: cannot create %s\n", tmp);
        return 1;
    }
    char models_dir[4096];
    snprintf(models_dir, sizeof models_dir, "%s/models", root);
    char *names[256];
    int n = shipped_models(root, names, 256);
    if (n < 0) {
        printf("FAIL models: cannot open %s\n", models_dir);
        return 1;
    }
    check(n >= 4, "models-found", "%d model files", n);
    /* FNV-1a 64 reference values (the published test vectors) */
    check(dm_hash64("", 0, 0) == 0xcbf29ce484222325ULL &&
              dm_hash64("a", 1, 0) == 0xaf63dc4c8601ec8cULL &&
              dm_hash64("foobar", 6, 0) == 0x85944171f73967e8ULL &&
              dm_hash64("bar", 3, dm_hash64("foo", 3, 0)) == 0x85944171f73967e8ULL,
          "fnv1a-known-values", "a published FNV-1a vector differs");
    for (int i = 0; i < n; i++) {
        char path[8192], name[256];
        snprintf(path, sizeof path, "%s/%s.model", models_dir, names[i]);
        snprintf(name, sizeof name, "%s", names[i]);
        dm_model *m = dm_front_file(path, stdout, NULL, NULL);
        if (!m) {
            printf("FAIL %s-front: the model does not check\n", name);
            failures++;
        } else {
            test_model(name, m, tmp);
            dm_model_free(m);
        }
        free(names[i]);
    }
    dm_model *m = dm_front_string("all_builtins.model", all_builtins_model, stdout, NULL, NULL);
    if (!m) {
        printf("FAIL all_builtins-front: the model does not check\n");
        failures++;
    } else {
        test_model("all_builtins", m, tmp);
        dm_model_free(m);
    }
    /* An invariant condition choosing between per-measurement values: the condition is an
     * int slot of pre[]. */
    m = dm_front_string("invariant_select.model",
                        "model invariant_select \"an invariant condition\"\n"
                        "measure b = bvals\n"
                        "param S0 in (0, inf) init 1\n"
                        "param c in (-2, 2) init 1\n"
                        "signal S0 * (c > 0 ? exp(-b * c * 1e-3) : exp(b * c * 1e-3))\n",
                        stdout, NULL, NULL);
    if (!m) {
        printf("FAIL invariant_select-front: the model does not check\n");
        failures++;
    } else {
        test_model("invariant_select", m, tmp);
        dm_model_free(m);
    }
    test_user_derivative(tmp);
    test_matrix_routes(root, tmp);
    if (!failures) { /* keep the build folders of a failing run for inspection */
        char cmd[1024];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
        if (system(cmd) != 0) printf("     could not remove %s\n", tmp);
    }
    return failures ? 1 : 0;
}
