/* The runtime's description of a model (dm_model_info), built from the checked model and its
 * flop counts (dm_model_describe), against the metadata text the compiler writes: for every
 * shipped model, dm_model_load's info equals what generated/<model>/model.meta says, field by
 * field, and its source is generated/<model>/model.h; for two in-memory models that cover the
 * rarer cases (every prior kind, open and closed, one-sided and missing bounds, init b0, step,
 * required and defaulted voxel inputs, inputs from a file, every output kind), the described
 * info equals the one read from dm_generate's metadata text.  The metadata is read by a
 * parser of this test's own, which knows every key of docs/metadata.md and rejects others.
 * The comparison itself must notice a change of any one field, and a model that does not fit
 * dm_model_info (too many inputs, a 64-character name) must be refused. */
#include "compiler.h"
#include "util/fsutil.h"
#include "model/model_info.h"
#include "util/error.h"
#include "all_builtins_model.h"
#include "check.h"
#include "shipped_models.h"

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const edge_model =
    "model edge_cases \"rare cases: a */ in the text, an open upper bound, unbounded\"\n"
    "measure b = bvals\n"
    "measure g[3] = bvecs\n"
    "measure t[2]\n"
    "measure Delta = scheme\n"
    "measure TE = scheme echo_time\n"
    "voxel T2\n"
    "voxel o[3] = -0.25\n"
    "param S0 in (0, inf) init b0\n"
    "param x init 0.5 step 0.01\n"
    "param f in [0, 1) init 0.3 prior uniform\n"
    "param lo in [-1, inf) init 0 step 2.5e-3\n"
    "param th in [0, pi] init 1 periodic prior sphere\n"
    "param ph in [0, 2*pi] init 1 periodic\n"
    "fractions fa, fb init 0.25\n"
    "signal S0 * exp(-b * 1e-3 * (1 + x * x)) * (1 - f + f * dot(g, dir(th, ph))^2)\n"
    "  + lo * t[1] * T2 + o[0] * t[0] + Delta * TE * fb\n"
    "output dir1 axis = dir(th, ph)\n"
    "output vec1 vector = o\n"
    "output sc = f * 2\n";

/* ---- the metadata text, read independently of the runtime ---- */

/* Splits a line at single spaces into at most max fields; the count. */
static int split_fields(char *line, char **field, int max)
{
    int n = 0;
    char *s = line;
    while (n < max) {
        field[n++] = s;
        char *sp = strchr(s, ' ');
        if (!sp) break;
        *sp = 0;
        s = sp + 1;
    }
    return n;
}

/* A number of the format: %.17g, or inf, -inf, nan; 0 when the text is not all number. */
static int number(const char *s, double *v)
{
    char *end;
    *v = strtod(s, &end);
    return *s && !*end;
}

static int integer(const char *s, long *v)
{
    char *end;
    *v = strtol(s, &end, 10);
    return *s && !*end;
}

static int name(char *dst, const char *s)
{
    if (!*s || strlen(s) >= DM_NAME_MAX) return 0;
    strcpy(dst, s);
    return 1;
}

/* A param line's INIT_FROM field: const, b0, md, thetaK, phiK. */
static int start_rule(const char *s, dm_param_info *x)
{
    x->start_axis = 0;
    if (!strcmp(s, "const"))
        x->start = DM_START_CONST;
    else if (!strcmp(s, "b0"))
        x->start = DM_START_B0;
    else if (!strcmp(s, "md"))
        x->start = DM_START_MD;
    else if (!strncmp(s, "theta", 5) && s[5] >= '1' && s[5] <= '3' && !s[6]) {
        x->start = DM_START_THETA;
        x->start_axis = s[5] - '0';
    } else if (!strncmp(s, "phi", 3) && s[3] >= '1' && s[3] <= '3' && !s[4]) {
        x->start = DM_START_PHI;
        x->start_axis = s[3] - '0';
    } else
        return 0;
    return 1;
}

/* One line into *mi; 0 when it is malformed or its key unknown. */
static int parse_line(char *line, dm_model_info *mi)
{
    if (!strcmp(line, "dimoc-meta 3") || !strcmp(line, "end")) return 1;
    if (!strncmp(line, "description ", 12)) {
        snprintf(mi->description, sizeof mi->description, "%.*s", (int)sizeof mi->description - 1,
                 line + 12);
        return 1;
    }
    char *f[16];
    int n = split_fields(line, f, 16);
    long v;
    int ok = 1;
    if (!strcmp(f[0], "model") && n == 2) return name(mi->name, f[1]);
    if ((!strcmp(f[0], "source_hash") || !strcmp(f[0], "code_hash")) && n == 2 &&
        strlen(f[1]) == 16) {
        strcpy(f[0][0] == 's' ? mi->source_hash : mi->code_hash, f[1]);
        return 1;
    }
    static const char *const flop_keys[] = {
        "flops_signal",           "flops_signal_transcendental",
        "flops_gradient",         "flops_gradient_transcendental",
        "flops_prepare",          "flops_prepare_transcendental",
        "flops_gradient_prepare", "flops_gradient_prepare_transcendental"};
    long *flop_fields[] = {&mi->flops_signal,           &mi->flops_signal_transc,
                           &mi->flops_gradient,         &mi->flops_gradient_transc,
                           &mi->flops_prepare,          NULL,
                           &mi->flops_gradient_prepare, NULL};
    for (int i = 0; i < 8; i++)
        if (!strcmp(f[0], flop_keys[i])) {
            if (n != 2 || !integer(f[1], &v)) return 0;
            if (flop_fields[i]) /* the runtime keeps no transcendental count of prepare */
                *flop_fields[i] = v;
            return 1;
        }
    if (!strcmp(f[0], "multistart") && n == 2) {
        ok = integer(f[1], &v);
        mi->multistart = (int)v;
        return ok;
    }
    if (!strcmp(f[0], "fix_width") && n == 2) {
        ok = integer(f[1], &v);
        mi->fix_width = (int)v;
        return ok;
    }
    /* the runtime keeps no count of the fixed part's work */
    if ((!strcmp(f[0], "flops_fix") || !strcmp(f[0], "flops_fix_transcendental")) && n == 2)
        return integer(f[1], &v);
    if (!strcmp(f[0], "measure") && (n == 5 || n == 6) && mi->nmeasures < 16) {
        dm_measure_info *x = &mi->measures[mi->nmeasures++];
        long w = 0, c = 0;
        ok = name(x->name, f[1]) && integer(f[2], &w) && integer(f[4], &c);
        x->width = (int)w;
        x->column = (int)c;
        if (!strcmp(f[3], "bvals"))
            x->source = DM_SRC_BVALS;
        else if (!strcmp(f[3], "bvecs"))
            x->source = DM_SRC_BVECS;
        else if (!strcmp(f[3], "file"))
            x->source = DM_SRC_FILE;
        else if (!strcmp(f[3], "scheme") && n == 6)
            x->source = DM_SRC_SCHEME;
        else
            ok = 0;
        ok &= (n == 6) == (x->source == DM_SRC_SCHEME);
        if (n == 6) ok &= name(x->scheme_column, f[5]);
        mi->measure_width += x->width;
        return ok;
    }
    if (!strcmp(f[0], "voxel") && n == 5 && mi->nvoxels < 16) {
        dm_voxel_info *x = &mi->voxels[mi->nvoxels++];
        long w = 0, c = 0;
        ok = name(x->name, f[1]) && integer(f[2], &w) && number(f[3], &x->default_value) &&
             integer(f[4], &c);
        x->width = (int)w;
        x->column = (int)c;
        mi->voxel_width += x->width;
        return ok;
    }
    if (!strcmp(f[0], "param") && n == 13 && mi->nparams < DM_MAX_PARAMS) {
        dm_param_info *x = &mi->params[mi->nparams++];
        long lc = 0, hc = 0, per = 0;
        ok = name(x->name, f[1]) && number(f[2], &x->lo) && number(f[3], &x->hi) &&
             integer(f[4], &lc) && integer(f[5], &hc) && number(f[6], &x->init) &&
             start_rule(f[7], x) && integer(f[8], &per) && strlen(f[9]) < sizeof x->prior &&
             number(f[10], &x->prior_a) && number(f[11], &x->prior_b) && number(f[12], &x->step);
        if (ok) strcpy(x->prior, f[9]);
        x->lo_closed = (int)lc;
        x->hi_closed = (int)hc;
        x->periodic = (int)per;
        return ok;
    }
    if (!strcmp(f[0], "output") && n == 5 && mi->noutputs < 32) {
        dm_output_info *x = &mi->outputs[mi->noutputs++];
        long w = 0, c = 0;
        ok = name(x->name, f[1]) && integer(f[3], &w) && integer(f[4], &c);
        if (!strcmp(f[2], "scalar"))
            x->kind = DM_OUTK_SCALAR;
        else if (!strcmp(f[2], "vector"))
            x->kind = DM_OUTK_VECTOR;
        else if (!strcmp(f[2], "axis"))
            x->kind = DM_OUTK_AXIS;
        else
            ok = 0;
        x->width = (int)w;
        x->column = (int)c;
        mi->output_width += x->width;
        return ok;
    }
    return 0;
}

/* The metadata text into *mi (source left NULL); 0, or -1 with the bad line in why. */
static int parse_meta(const char *text, dm_model_info *mi, char *why, size_t len)
{
    memset(mi, 0, sizeof *mi);
    if (strncmp(text, "dimoc-meta 3\n", 13) != 0) {
        snprintf(why, len, "no 'dimoc-meta 3' header");
        return -1;
    }
    int saw_end = 0;
    for (const char *p = text; *p;) {
        const char *nl = strchr(p, '\n');
        size_t n = nl ? (size_t)(nl - p) : strlen(p);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)n, p);
        char copy[2048];
        strcpy(copy, line);
        if (saw_end || !parse_line(line, mi)) {
            snprintf(why, len, "%s line '%.200s'", saw_end ? "after end:" : "bad", copy);
            return -1;
        }
        saw_end = !strcmp(copy, "end");
        p = nl ? nl + 1 : p + n;
    }
    if (!saw_end) {
        snprintf(why, len, "no 'end' line");
        return -1;
    }
    return 0;
}

/* ---- the comparison ---- */

static int same_number(double a, double b)
{
    return (isnan(a) && isnan(b)) || (a == b && signbit(a) == signbit(b));
}

#define DIFF(...) (snprintf(why, len, __VA_ARGS__), 1)

/* 0 when a and b describe the same model (source aside), else 1 with the first difference in
 * why. */
static int differ(const dm_model_info *a, const dm_model_info *b, char *why, size_t len)
{
    if (strcmp(a->name, b->name)) return DIFF("name '%s' != '%s'", a->name, b->name);
    if (strcmp(a->description, b->description))
        return DIFF("description '%s' != '%s'", a->description, b->description);
    if (strcmp(a->source_hash, b->source_hash) || strcmp(a->code_hash, b->code_hash))
        return DIFF("hashes %s %s != %s %s", a->source_hash, a->code_hash, b->source_hash,
                    b->code_hash);
    const long fa[] = {a->flops_signal,          a->flops_signal_transc, a->flops_gradient,
                       a->flops_gradient_transc, a->flops_prepare,       a->flops_gradient_prepare};
    const long fb[] = {b->flops_signal,          b->flops_signal_transc, b->flops_gradient,
                       b->flops_gradient_transc, b->flops_prepare,       b->flops_gradient_prepare};
    for (int i = 0; i < 6; i++)
        if (fa[i] != fb[i]) return DIFF("flops count %d: %ld != %ld", i, fa[i], fb[i]);
    if (a->multistart != b->multistart)
        return DIFF("multistart %d != %d", a->multistart, b->multistart);
    if (a->fix_width != b->fix_width) return DIFF("fix_width %d != %d", a->fix_width, b->fix_width);
    if (a->nparams != b->nparams || a->nmeasures != b->nmeasures || a->nvoxels != b->nvoxels ||
        a->noutputs != b->noutputs)
        return DIFF("counts %d %d %d %d != %d %d %d %d", a->nparams, a->nmeasures, a->nvoxels,
                    a->noutputs, b->nparams, b->nmeasures, b->nvoxels, b->noutputs);
    if (a->measure_width != b->measure_width || a->voxel_width != b->voxel_width ||
        a->output_width != b->output_width)
        return DIFF("widths %d %d %d != %d %d %d", a->measure_width, a->voxel_width,
                    a->output_width, b->measure_width, b->voxel_width, b->output_width);
    for (int i = 0; i < a->nmeasures; i++) {
        const dm_measure_info *x = &a->measures[i], *y = &b->measures[i];
        if (strcmp(x->name, y->name) || x->width != y->width || x->column != y->column ||
            x->source != y->source || strcmp(x->scheme_column, y->scheme_column))
            return DIFF("measure %d: %s %d %d %d != %s %d %d %d", i, x->name, x->width, x->column,
                        (int)x->source, y->name, y->width, y->column, (int)y->source);
    }
    for (int i = 0; i < a->nvoxels; i++) {
        const dm_voxel_info *x = &a->voxels[i], *y = &b->voxels[i];
        if (strcmp(x->name, y->name) || x->width != y->width || x->column != y->column ||
            !same_number(x->default_value, y->default_value))
            return DIFF("voxel %d: %s %d %d %.17g != %s %d %d %.17g", i, x->name, x->width,
                        x->column, x->default_value, y->name, y->width, y->column,
                        y->default_value);
    }
    for (int k = 0; k < a->nparams; k++) {
        const dm_param_info *x = &a->params[k], *y = &b->params[k];
        if (strcmp(x->name, y->name) || !same_number(x->lo, y->lo) || !same_number(x->hi, y->hi) ||
            x->lo_closed != y->lo_closed || x->hi_closed != y->hi_closed ||
            !same_number(x->init, y->init) || x->start != y->start ||
            x->start_axis != y->start_axis || x->periodic != y->periodic ||
            strcmp(x->prior, y->prior) || !same_number(x->prior_a, y->prior_a) ||
            !same_number(x->prior_b, y->prior_b) || !same_number(x->step, y->step))
            return DIFF("param %d: %s %.17g %.17g %d %d %.17g %d %d %s %.17g %.17g %.17g != "
                        "%s %.17g %.17g %d %d %.17g %d %d %s %.17g %.17g %.17g",
                        k, x->name, x->lo, x->hi, x->lo_closed, x->hi_closed, x->init,
                        (int)x->start * 10 + x->start_axis, x->periodic, x->prior, x->prior_a,
                        x->prior_b, x->step, y->name, y->lo, y->hi, y->lo_closed, y->hi_closed,
                        y->init, (int)y->start * 10 + y->start_axis, y->periodic, y->prior,
                        y->prior_a, y->prior_b, y->step);
    }
    for (int i = 0; i < a->noutputs; i++) {
        const dm_output_info *x = &a->outputs[i], *y = &b->outputs[i];
        if (strcmp(x->name, y->name) || x->kind != y->kind || x->width != y->width ||
            x->column != y->column)
            return DIFF("output %d: %s %d %d %d != %s %d %d %d", i, x->name, (int)x->kind, x->width,
                        x->column, y->name, (int)y->kind, y->width, y->column);
    }
    return 0;
}

/* ---- the checks ---- */

static void check_shipped(const char *root, const char *model)
{
    char path[4096], test[300], why[1024];
    dm_model_info got, want;
    snprintf(test, sizeof test, "%s-load", model);
    if (dm_model_load(model, &got) != 0) {
        check(0, test, "%s", dm_last_error());
        return;
    }
    check(1, test, "%s", "");
    snprintf(path, sizeof path, "%s/generated/%s/model.meta", root, model);
    char *meta = dm_read_file(path, NULL);
    snprintf(test, sizeof test, "%s-meta", model);
    if (!meta || parse_meta(meta, &want, why, sizeof why) != 0) {
        check(0, test, "%s: %s", path, meta ? why : "cannot read");
    } else {
        snprintf(test, sizeof test, "%s-info-equals-meta", model);
        check(!differ(&got, &want, why, sizeof why), test, "%s", why);
    }
    free(meta);

    snprintf(path, sizeof path, "%s/generated/%s/model.h", root, model);
    char *source = dm_read_file(path, NULL);
    snprintf(test, sizeof test, "%s-source", model);
    char hash[17] = "";
    if (source) snprintf(hash, sizeof hash, "%016llx", dm_hash64(source, strlen(source), 0));
    check(source && got.source && !strcmp(source, got.source) && !strcmp(hash, got.code_hash), test,
          "the loaded source or its code_hash is not %s's", path);
    free(source);
    dm_model_info_free(&got);
}

/* Describes an in-memory model and compares with its metadata text; *out receives the
 * described info. */
static int check_in_memory(const char *label, const char *text, dm_model_info *out)
{
    char test[300], why[1024];
    snprintf(test, sizeof test, "%s-describe", label);
    dm_model *m = dm_front_string(label, text, stdout, NULL, NULL);
    dm_generated g;
    if (!m || dm_generate(m, &g, stdout) != 0) {
        check(0, test, "the model does not compile");
        dm_model_free(m);
        return -1;
    }
    dm_model_info got, want;
    int rc = dm_model_describe(m, &g.flops, g.source, label, &got);
    check(rc == 0 && got.source == NULL, test, "%s", rc ? dm_last_error() : "source set");
    snprintf(test, sizeof test, "%s-info-equals-meta", label);
    if (rc == 0) {
        if (parse_meta(g.meta, &want, why, sizeof why) != 0)
            check(0, test, "metadata: %s", why);
        else
            check(!differ(&got, &want, why, sizeof why), test, "%s", why);
        *out = got;
    }
    dm_generated_free(&g);
    dm_model_free(m);
    return rc;
}

/* The comparison notices a change of any one field. */
static void check_sensitivity(const dm_model_info *base)
{
    char why[1024];
    int missed = 0;
    char missed_list[1024] = "";
    for (int c = 0;; c++) {
        dm_model_info x = *base;
        const char *what = NULL;
        switch (c) {
        case 0:
            what = "name";
            x.name[0] ^= 1;
            break;
        case 1:
            what = "description";
            x.description[1] ^= 1;
            break;
        case 2:
            what = "source_hash";
            x.source_hash[3] ^= 1;
            break;
        case 3:
            what = "code_hash";
            x.code_hash[15] ^= 1;
            break;
        case 4:
            what = "flops_signal";
            x.flops_signal++;
            break;
        case 5:
            what = "flops_signal_transc";
            x.flops_signal_transc++;
            break;
        case 6:
            what = "flops_gradient";
            x.flops_gradient++;
            break;
        case 7:
            what = "flops_gradient_transc";
            x.flops_gradient_transc++;
            break;
        case 8:
            what = "flops_prepare";
            x.flops_prepare++;
            break;
        case 9:
            what = "flops_gradient_prepare";
            x.flops_gradient_prepare++;
            break;
        case 10:
            what = "nparams";
            x.nparams--;
            break;
        case 11:
            what = "measure_width";
            x.measure_width++;
            break;
        case 12:
            what = "voxel_width";
            x.voxel_width++;
            break;
        case 13:
            what = "output_width";
            x.output_width++;
            break;
        case 14:
            what = "measure name";
            x.measures[0].name[0] ^= 1;
            break;
        case 15:
            what = "measure width";
            x.measures[2].width++;
            break;
        case 16:
            what = "measure column";
            x.measures[1].column++;
            break;
        case 17:
            what = "measure source";
            x.measures[0].source = DM_SRC_FILE;
            break;
        case 18:
            what = "voxel name";
            x.voxels[1].name[0] ^= 1;
            break;
        case 19:
            what = "voxel width";
            x.voxels[0].width++;
            break;
        case 20:
            what = "voxel column";
            x.voxels[1].column++;
            break;
        case 21:
            what = "voxel default (required)";
            x.voxels[0].default_value = 0;
            break;
        case 22:
            what = "voxel default";
            x.voxels[1].default_value = nextafter(-0.25, 0);
            break;
        case 23:
            what = "param name";
            x.params[1].name[0] ^= 1;
            break;
        case 24:
            what = "param lo";
            x.params[2].lo = -0.0;
            break;
        case 25:
            what = "param hi";
            x.params[0].hi = 1e308;
            break;
        case 26:
            what = "param lo_closed";
            x.params[2].lo_closed ^= 1;
            break;
        case 27:
            what = "param hi_closed";
            x.params[2].hi_closed ^= 1;
            break;
        case 28:
            what = "param init";
            x.params[1].init = nextafter(0.5, 1);
            break;
        case 29:
            what = "param start rule";
            x.params[0].start = x.params[0].start == DM_START_B0 ? DM_START_CONST : DM_START_B0;
            break;
        case 30:
            what = "param periodic";
            x.params[5].periodic ^= 1;
            break;
        case 31:
            what = "param prior";
            strcpy(x.params[2].prior, "none");
            break;
        case 32:
            what = "param prior_a";
            x.params[4].prior_a = 1e-300;
            break;
        case 33:
            what = "param prior_b";
            x.params[4].prior_b = -1e-300;
            break;
        case 34:
            what = "param step";
            x.params[3].step *= 2;
            break;
        case 35:
            what = "output name";
            x.outputs[2].name[0] ^= 1;
            break;
        case 36:
            what = "output kind";
            x.outputs[0].kind = DM_OUTK_VECTOR;
            break;
        case 37:
            what = "output width";
            x.outputs[2].width = 3;
            break;
        case 38:
            what = "output column";
            x.outputs[1].column--;
            break;
        case 39:
            what = "noutputs";
            x.noutputs--;
            break;
        default: break;
        }
        if (!what) break;
        if (!differ(&x, base, why, sizeof why) || !differ(base, &x, why, sizeof why)) {
            missed++;
            snprintf(missed_list + strlen(missed_list), sizeof missed_list - strlen(missed_list),
                     " %s", what);
        }
    }
    check(missed == 0, "comparison-sees-every-field", "%d changes unnoticed:%s", missed,
          missed_list);
}

/* What does not fit dm_model_info is an error, not a cut or a garbled field. */
static void check_limits(void)
{
    char text[4096], name[80];
    int len = snprintf(text, sizeof text, "model many \"17 voxel inputs\"\nparam a in (0, 1)\n");
    for (int i = 0; i < 17; i++)
        len += snprintf(text + len, sizeof text - (size_t)len, "voxel v%d = 1\n", i);
    snprintf(text + len, sizeof text - (size_t)len, "signal a * v0\n");
    memset(name, 'p', 64);
    name[64] = 0;
    static char long_name[512];
    snprintf(long_name, sizeof long_name,
             "model long \"a 64-character parameter name\"\nparam %s in (0, 1)\nsignal %s\n", name,
             name);
    const char *const texts[2] = {text, long_name};
    const char *const want[2] = {"17 per-voxel inputs", "is too long"};
    for (int i = 0; i < 2; i++) {
        char test[64];
        snprintf(test, sizeof test, "limit-%d", i);
        dm_model *m = dm_front_string(test, texts[i], stdout, NULL, NULL);
        dm_generated g;
        if (!m || dm_generate(m, &g, stdout) != 0) {
            check(0, test, "the model does not compile");
            dm_model_free(m);
            continue;
        }
        dm_model_info mi;
        int rc = dm_model_describe(m, &g.flops, g.source, test, &mi);
        check(rc != 0 && strstr(dm_last_error(), want[i]), test, "rc %d, error '%s'", rc,
              rc ? dm_last_error() : "");
        dm_generated_free(&g);
        dm_model_free(m);
    }
}

int main(void)
{
    const char *root = getenv("ROOT") ? getenv("ROOT") : ".";
    char *names[256];
    int n = shipped_models(root, names, 256);
    if (n < 0) {
        printf("FAIL models: cannot open %s/models\n", root);
        return 1;
    }
    check(n > 0, "models-found", "no .model file in %s/models", root);
    for (int i = 0; i < n; i++) {
        check_shipped(root, names[i]);
        free(names[i]);
    }

    dm_model_info edge, all;
    check_in_memory("all_builtins", all_builtins_model, &all);
    if (check_in_memory("edge_cases", edge_model, &edge) == 0) check_sensitivity(&edge);
    check_limits();
    return failures ? 1 : 0;
}
