/* The model compiler's front end: the shipped models check cleanly with the right
 * parameters, widths, columns, bounds and priors; expression types; every malformed file of
 * tests/compiler/bad_cases.txt fails at its line and column; hostile inputs (empty, deep,
 * huge, NUL bytes) fail cleanly; every fuzz regression input replays without a crash; 3x3
 * matrices type-check, and their built-ins on constants lower to hand-computed values. */
#include <dirent.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "front/builtins.h"
#include "compiler.h"
#include "compiler.h"

#include "back/lower.h"
#include "check.h"

/* Runs the front end on TEXT; the diagnostics land in *diag (caller frees). */
static dm_model *front(const char *text, char **diag, int *nerr, int *nwarn)
{
    FILE *f = tmpfile();
    dm_model *m = dm_front_string("t.model", text, f, nerr, nwarn);
    long n = ftell(f);
    *diag = calloc((size_t)n + 1, 1);
    rewind(f);
    if (n > 0 && fread(*diag, 1, (size_t)n, f) != (size_t)n) (*diag)[0] = '\0';
    fclose(f);
    return m;
}

static dm_model *front_file(const char *path, char **diag, int *nerr, int *nwarn)
{
    FILE *f = tmpfile();
    dm_model *m = dm_front_file(path, f, nerr, nwarn);
    long n = ftell(f);
    *diag = calloc((size_t)n + 1, 1);
    rewind(f);
    if (n > 0 && fread(*diag, 1, (size_t)n, f) != (size_t)n) (*diag)[0] = '\0';
    fclose(f);
    return m;
}

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p; p = strstr(p + 1, needle)) n++;
    return n;
}

static dm_param *param(dm_model *m, const char *name)
{
    for (int i = 0; i < m->params.n; i++)
        if (!strcmp(m->params.items[i]->name, name)) return m->params.items[i];
    return NULL;
}

static dm_let *let(dm_model *m, const char *name)
{
    for (int i = 0; i < m->lets.n; i++)
        if (!strcmp(m->lets.items[i]->name, name)) return m->lets.items[i];
    return NULL;
}

static void test_builtins_table(void)
{
    int ok = 1;
    for (int i = 0; i < DM_FN_COUNT; i++) {
        ok &= dm_builtins[i].id == (dm_builtin_id)i;
        ok &= dm_builtin_find(dm_builtins[i].name) == &dm_builtins[i];
    }
    check(ok, "builtins-table-indexed-by-id", "a row is out of order or a name repeats");
    const char *near = dm_builtin_nearest("dawsn");
    check(near && !strcmp(near, "dawson"), "builtins-nearest", "dawsn -> %s", near ? near : "-");
    check(dm_builtin_find("dir")->result == DM_T_VEC3 && dm_builtin_find("dot")->nargs == 2 &&
              dm_builtin_find("dot")->arg_types[0] == DM_T_VEC3,
          "builtins-signatures", "dir/dot signatures");
}

static void test_ball_2_sticks(void)
{
    char *diag;
    int ne = -1, nw = -1;
    dm_model *m = front_file("models/ball_2_sticks.model", &diag, &ne, &nw);
    check(m && ne == 0 && nw == 0 && !diag[0], "ball_2_sticks-clean", "%d errors %d warnings: %s",
          ne, nw, diag);
    if (!m) {
        free(diag);
        return;
    }
    check(!strcmp(m->name, "ball_2_sticks") && m->params.n == 8 && m->measures.n == 2 &&
              m->voxels.n == 0 && m->lets.n == 2 && m->constraints.n == 1 && m->outputs.n == 2,
          "ball_2_sticks-counts", "%d params", m->params.n);
    dm_input *g = m->measures.items[0], *b = m->measures.items[1];
    check(m->measure_width == 4 && g->width == 3 && g->column == 0 && !strcmp(g->source, "bvecs") &&
              b->width == 1 && b->column == 3 && !strcmp(b->source, "bvals"),
          "ball_2_sticks-measure-columns", "width %d", m->measure_width);
    dm_param *S0 = param(m, "S0"), *f2 = param(m, "f2"), *th1 = param(m, "th1"),
             *ph2 = param(m, "ph2"), *d = param(m, "d");
    check(S0->lo == 0 && isinf(S0->hi) && !S0->lo_closed && S0->init_source == DM_INIT_B0 &&
              d->hi == 0.01 && d->init_source == DM_INIT_MD && d->init == 0.005 &&
              m->multistart == 3,
          "ball_2_sticks-bounds", "S0 (%g, %g) d init %g", S0->lo, S0->hi, d->init);
    check(th1->lo == 0 && fabs(th1->hi - M_PI) < 1e-15 && th1->lo_closed && th1->hi_closed &&
              th1->periodic && th1->prior.kind == DM_PRIOR_SPHERE &&
              fabs(ph2->hi - 2 * M_PI) < 1e-15 && ph2->periodic &&
              th1->init_source == DM_INIT_THETA && th1->init_axis == 1 &&
              ph2->init_source == DM_INIT_PHI && ph2->init_axis == 2,
          "ball_2_sticks-angles", "th1 [%g, %g]", th1->lo, th1->hi);
    check(f2->prior.kind == DM_PRIOR_ARD && f2->prior.value[0] == 1 && f2->init == 0.1 &&
              param(m, "f1")->prior.kind == DM_PRIOR_NONE,
          "ball_2_sticks-priors", "f2 prior %d (%g)", f2->prior.kind, f2->prior.value[0]);
    int used = 0;
    for (int i = 0; i < m->params.n; i++) used += m->params.items[i]->used;
    check(used == 8 && m->signal->type == DM_T_SCALAR && let(m, "v1")->value->type == DM_T_VEC3,
          "ball_2_sticks-types", "%d params used", used);
    check(m->output_width == 6 && m->outputs.items[0]->kind == DM_OUT_AXIS &&
              m->outputs.items[1]->column == 3 && m->outputs.items[1]->width == 3,
          "ball_2_sticks-outputs", "width %d", m->output_width);
    dm_model_free(m);
    free(diag);
}

static void test_other_models(void)
{
    char *diag;
    int ne, nw;
    dm_model *m = front_file("models/ball_1_stick.model", &diag, &ne, &nw);
    check(m && nw == 0 && m->params.n == 5 && m->output_width == 3 && m->measure_width == 4 &&
              param(m, "f1")->init == 0.4,
          "ball_1_stick", "%s", diag);
    dm_model_free(m);
    free(diag);

    m = front_file("models/exp_decay.model", &diag, &ne, &nw);
    check(m && nw == 0 && m->params.n == 2 && m->measures.n == 1 && m->measure_width == 1 &&
              m->measures.items[0]->source == NULL && param(m, "R")->init == 20 &&
              param(m, "R")->hi == 1000 && param(m, "S0")->init_source == DM_INIT_B0 &&
              m->output_width == 0,
          "exp_decay", "%s", diag);
    dm_model_free(m);
    free(diag);

    m = front_file("models/watson_zeppelin.model", &diag, &ne, &nw);
    int ok = m && nw == 0 && m->params.n == 5 && m->lets.n == 2 && m->output_width == 4;
    if (ok) {
        dm_output *od = m->outputs.items[0], *dy = m->outputs.items[1];
        ok = od->kind == DM_OUT_SCALAR && od->column == 0 && od->width == 1 &&
             dy->kind == DM_OUT_AXIS && dy->column == 1 && param(m, "kappa")->lo == 0.01 &&
             param(m, "kappa")->hi == 64 && let(m, "c2")->value->type == DM_T_SCALAR &&
             let(m, "v")->value->type == DM_T_VEC3;
    }
    check(ok, "watson_zeppelin", "%s", diag);
    dm_model_free(m);
    free(diag);

    /* A function and a block compartment inlined: the signal is their bodies, built-ins
     * only, with the arguments in place; the unused definition stays unused. */
    m = front("model m \"x\"\nmeasure b = bvals\nparam S0\nparam d in (0, 1)\n"
              "function sq(x) = x * x\nfunction unused(y) = y\n"
              "compartment decay(k) {\n let r = sq(k)\n = exp(-b * r)\n}\n"
              "signal S0 * decay(d)\n",
              &diag, &ne, &nw);
    ok = m && ne == 0 && m->definitions.n == 3;
    if (ok) {
        const dm_expr *call = m->signal->b;                                   /* S0 * decay(d) */
        const dm_expr *r = call->kind == DM_E_CALL ? call->args[0]->b : NULL; /* -b * r */
        ok = call->call && strcmp(call->call->name, "decay") == 0 && call->fn &&
             strcmp(call->fn->name, "exp") == 0 && r && r->kind == DM_E_BINARY && r->op == '*' &&
             r->a->kind == DM_E_NAME && strcmp(r->a->name, "d") == 0 &&
             m->definitions.items[0]->used && !m->definitions.items[1]->used &&
             m->definitions.items[2]->used;
    }
    check(ok, "inline-function-compartment", "%s", diag);
    dm_model_free(m);
    free(diag);
}

static const char *typed_model =
    "model typed \"types, defaults, inputs\"\n"
    "measure g[3] = bvecs\n"
    "measure extra[5]\n"
    "voxel T1 = 1.5\n"
    "voxel n[3]\n"
    "voxel w[5]\n"
    "param S0 in (0, inf)\n"
    "param a  in (-inf, 5)   step 0.25\n"
    "param c\n"
    "param f  in [0, 1]      prior gaussian(0.5, 0.1)\n"
    "param k  in (0, 10)     prior gamma(2, 3)  init 2 * pi / pi\n"
    "param u  in (-1, 1)     prior custom(-u^2 / T1)\n"
    "let v   = g * 2 - n / T1\n"
    "let s   = dot(g, cross(n, dir(a, c)))\n"
    "let q   = vec(1, 2, 3)[1] + extra[4] + w[0]\n"
    "let neg = -a^2\n"
    "let pw  = a^c^2\n"
    "let t   = f > 0.5 ? n : vec(0, 0, 1)\n"
    "signal S0 * exp(-s * k * f * u + q + legendre(2, f) + neg + pw) * norm(v) * norm(t)\n"
    "derivative S0 = exp(-s * k * f * u + q + legendre(2, f) + neg + pw) * norm(v) * norm(t)\n"
    "constraint f < 0.9 && !(k > 9) || u == 0\n"
    "output nvec = n * 2\n"
    "output ax axis = t\n"
    "output rate = k / T1\n";

static void test_types_and_defaults(void)
{
    char *diag;
    int ne, nw;
    dm_model *m = front(typed_model, &diag, &ne, &nw);
    check(m && ne == 0 && nw == 0, "typed-model-clean", "%s", diag);
    if (!m) {
        free(diag);
        return;
    }
    check(let(m, "v")->value->type == DM_T_VEC3 && let(m, "s")->value->type == DM_T_SCALAR &&
              let(m, "q")->value->type == DM_T_SCALAR && let(m, "t")->value->type == DM_T_VEC3 &&
              let(m, "t")->value->width == 3,
          "expression-types", "let types");
    dm_expr *neg = let(m, "neg")->value, *pw = let(m, "pw")->value;
    check(neg->kind == DM_E_UNARY && neg->op == '-' && neg->a->kind == DM_E_BINARY &&
              neg->a->op == '^' && pw->op == '^' && pw->b->kind == DM_E_BINARY && pw->b->op == '^',
          "precedence-power", "-a^2 is -(a^2), a^c^2 is a^(c^2)");
    check(param(m, "S0")->init == 1 && param(m, "a")->init == 4 && param(m, "c")->init == 0 &&
              param(m, "f")->init == 0.5 && param(m, "k")->init == 2 && isinf(param(m, "c")->lo) &&
              param(m, "a")->step == 0.25 && param(m, "S0")->step == 0,
          "default-init-and-step", "S0 %g a %g c %g f %g", param(m, "S0")->init,
          param(m, "a")->init, param(m, "c")->init, param(m, "f")->init);
    check(param(m, "f")->prior.kind == DM_PRIOR_GAUSSIAN && param(m, "f")->prior.value[0] == 0.5 &&
              param(m, "f")->prior.value[1] == 0.1 && param(m, "k")->prior.kind == DM_PRIOR_GAMMA &&
              param(m, "k")->prior.value[1] == 3 && param(m, "u")->prior.kind == DM_PRIOR_CUSTOM,
          "prior-values", "f %d k %d u %d", param(m, "f")->prior.kind, param(m, "k")->prior.kind,
          param(m, "u")->prior.kind);
    dm_input *T1 = m->voxels.items[0], *n = m->voxels.items[1], *w = m->voxels.items[2];
    check(m->voxel_width == 9 && T1->column == 0 && T1->default_value == 1.5 && n->column == 1 &&
              isnan(n->default_value) && w->column == 4 && w->width == 5 && m->measure_width == 8 &&
              m->measures.items[1]->column == 3,
          "voxel-columns", "voxel width %d", m->voxel_width);
    check(m->output_width == 7 && m->outputs.items[0]->kind == DM_OUT_VECTOR &&
              m->outputs.items[1]->kind == DM_OUT_AXIS && m->outputs.items[1]->column == 3 &&
              m->outputs.items[2]->column == 6 && m->outputs.items[2]->width == 1,
          "output-kinds-and-columns", "output width %d", m->output_width);
    check(param(m, "S0")->derivative != NULL && param(m, "a")->derivative == NULL,
          "derivative-attached", "S0 derivative missing");
    dm_symbol *pi = dm_model_lookup(m, "pi"), *s0 = dm_model_lookup(m, "S0");
    check(pi && pi->kind == DM_SYM_CONST && fabs(pi->value - M_PI) < 1e-15 && s0 &&
              s0->kind == DM_SYM_PARAM && s0->index == 0,
          "symbols", "pi or S0 not found");
    /* The summary names every parameter and output. */
    FILE *f = tmpfile();
    dm_print_summary(m, f);
    long len = ftell(f);
    char *text = calloc((size_t)len + 1, 1);
    rewind(f);
    check(fread(text, 1, (size_t)len, f) == (size_t)len && strstr(text, "model typed:") &&
              strstr(text, "gaussian(0.5, 0.1)") && strstr(text, "custom(-u^2 / T1)") &&
              strstr(text, "nvec") && strstr(text, "f < 0.9 && !(k > 9) || u == 0"),
          "summary", "%s", text);
    fclose(f);
    free(text);
    dm_model_free(m);
    free(diag);
}

/* Malformed text: fails, with at least one error, and optionally a given message. */
static void expect_failure(const char *name, const char *text, const char *fragment)
{
    char *diag;
    int ne = 0, nw = 0;
    dm_model *m = front(text, &diag, &ne, &nw);
    check(!m && ne > 0 && (!fragment || strstr(diag, fragment)), name, "ne=%d diag: %.300s", ne,
          diag);
    dm_model_free(m);
    free(diag);
}

static char *repeat(const char *prefix, const char *unit, int n, const char *suffix)
{
    size_t lp = strlen(prefix), lu = strlen(unit), ls = strlen(suffix);
    char *s = malloc(lp + lu * (size_t)n + ls + 1);
    memcpy(s, prefix, lp);
    for (int i = 0; i < n; i++) memcpy(s + lp + lu * (size_t)i, unit, lu);
    memcpy(s + lp + lu * (size_t)n, suffix, ls + 1);
    return s;
}

static void test_edge_cases(void)
{
    expect_failure("edge-empty", "", "missing 'model");
    expect_failure("edge-comment-only", "# nothing\n", "missing 'model");
    expect_failure("edge-lone-keyword", "model",
                   "expected a name after 'model', found end of file");
    expect_failure("edge-lone-param", "param", NULL);
    expect_failure("edge-lone-signal", "signal", NULL);

    const char *head = "model m \"x\"\nparam a\nsignal ";
    char *s = repeat(head, "(", 10000, "a");
    char *t = repeat(s, ")", 10000, "\n");
    expect_failure("edge-10000-parentheses", t, "nested too deeply");
    free(s);
    free(t);
    s = repeat(head, "-", 10000, "a\n");
    expect_failure("edge-10000-unary-minus", s, "nested too deeply");
    free(s);
    s = repeat(head, "a+", 100000, "a\n");
    expect_failure("edge-100000-terms", s, "nested too deeply");
    free(s);
    s = repeat(head, "exp(", 250, "a");
    t = repeat(s, ")", 250, "\n");
    expect_failure("edge-250-calls", t, "more than 200 levels");
    free(s);
    free(t);

    expect_failure("edge-huge-number", "model m \"x\"\nparam a in (0, 1e999)\nsignal a\n",
                   "too large");
    char *diag;
    int ne, nw;
    dm_model *m =
        front("model m \"x\"\nparam a in (1e-320, 1e308) init 1e300\nsignal a\n", &diag, &ne, &nw);
    check(m && m->params.items[0]->hi == 1e308 && m->params.items[0]->init == 1e300,
          "edge-large-finite-number", "%s", diag);
    dm_model_free(m);
    free(diag);

    s = repeat("model m \"x\"\nparam ", "a", 100, "\nsignal 1\n");
    expect_failure("edge-long-name", s, "too long");
    free(s);

    /* A NUL byte inside a file: reported where it is, not a silent truncation. */
    const char text[] = "model m \"x\"\nparam a\0 in (0, 1)\nsignal a\n";
    FILE *f = fopen("tests/tmp/nul.model", "wb");
    if (f) {
        fwrite(text, 1, sizeof text - 1, f);
        fclose(f);
    }
    m = front_file("tests/tmp/nul.model", &diag, &ne, &nw);
    check(!m && ne == 1 && strstr(diag, "nul.model:2:8: error: unexpected byte 0x00"),
          "edge-nul-byte", "%s", diag);
    dm_model_free(m);
    free(diag);

    m = front_file("tests/tmp/does-not-exist.model", &diag, &ne, &nw);
    check(!m && ne == 1 && strstr(diag, "does-not-exist.model: error:"), "edge-missing-file", "%s",
          diag);
    dm_model_free(m);
    free(diag);

    /* Binary garbage. */
    char junk[4096];
    unsigned x = 12345;
    for (size_t i = 0; i + 1 < sizeof junk; i++) {
        x = x * 1103515245u + 12345u;
        junk[i] = (char)(1 + (x >> 16) % 255);
    }
    junk[sizeof junk - 1] = '\0';
    expect_failure("edge-random-bytes", junk, NULL);
}

static void test_diagnostic_format(void)
{
    char *diag;
    int ne, nw;
    dm_model *m = front("model m \"x\"\nparam a\n\tsignal a @ 1\n", &diag, &ne, &nw);
    check(!m && strstr(diag, "t.model:3:11: error: unexpected character '@'\n"
                             "    \tsignal a @ 1\n"
                             "    \t         ^\n"),
          "diag-caret-keeps-tabs", "%s", diag);
    free(diag);

    /* 30 mistakes: only the first 20 are printed, then a note. */
    char *s = repeat("model m \"x\"\nparam a\nsignal a\n", "let x = @\n", 30, "");
    m = front(s, &diag, &ne, &nw);
    check(!m && ne >= 20 && count(diag, ": error: ") == 20 && strstr(diag, "too many errors"),
          "diag-error-cap", "%d errors, %d shown", ne, count(diag, ": error: "));
    free(s);
    free(diag);

    /* Errors come out in source order, whatever stage found them. */
    m = front("model m \"x\"\nparam a in (1, 0)\nparam b in (0, 1) init 5\nsignal a * b + zz\n",
              &diag, &ne, &nw);
    char *e1 = strstr(diag, ":2:"), *e2 = strstr(diag, ":3:"), *e3 = strstr(diag, ":4:");
    check(!m && ne == 3 && e1 && e2 && e3 && e1 < e2 && e2 < e3, "diag-sorted", "%s", diag);
    free(diag);

    m = front("model m \"x\"\nparam a\nparam b\nsignal a\n", &diag, &ne, &nw);
    check(m && ne == 0 && nw == 1 && !m->params.items[1]->used && m->params.items[0]->used &&
              strstr(diag, "t.model:3:7: warning: parameter 'b' is not used by the signal"),
          "diag-warning-unused", "%s", diag);
    dm_model_free(m);
    free(diag);

    m = front("model m \"x\"\nparam a init b0\nsignal a\n", &diag, &ne, &nw);
    check(m && m->params.items[0]->init_source == DM_INIT_B0, "init-b0-without-bvals", "%s", diag);
    dm_model_free(m);
    free(diag);
}

/* Every row of bad_cases.txt: one error, at its position, with its message. */
static void test_bad_cases(void)
{
    FILE *f = fopen("tests/compiler/bad_cases.txt", "r");
    if (!f) {
        check(0, "bad-cases", "cannot open tests/compiler/bad_cases.txt");
        return;
    }
    char line[512];
    int rows = 0, bad = 0;
    while (fgets(line, sizeof line, f)) {
        char file[128], frag[384];
        int l, c;
        if (line[0] == '#' || sscanf(line, "%127s %d %d %383[^\n]", file, &l, &c, frag) != 4)
            continue;
        rows++;
        char path[256], prefix[300], *diag;
        snprintf(path, sizeof path, "tests/compiler/bad/%s", file);
        snprintf(prefix, sizeof prefix, "%s:%d:%d: error: ", path, l, c);
        int ne, nw;
        dm_model *m = front_file(path, &diag, &ne, &nw);
        char *at = strstr(diag, prefix);
        char *eol = at ? strchr(at, '\n') : NULL;
        int ok = !m && ne == 1 && at && eol;
        if (ok) {
            *eol = '\0';
            ok = strstr(at, frag) != NULL;
        }
        if (!ok) {
            bad++;
            printf("FAIL bad-case %s: expected %s...%s; got: %s\n", file, prefix, frag, diag);
            failures++;
        }
        dm_model_free(m);
        free(diag);
    }
    fclose(f);
    check(rows >= 30 && bad == 0, "bad-cases", "%d rows, %d failed", rows, bad);
}

/* Inputs that once crashed the fuzzer (and the shipped models, as a seed corpus). */
static void test_fuzz_regressions(void)
{
    const char *dir = "tests/compiler/fuzz-regressions";
    DIR *d = opendir(dir);
    if (!d) {
        check(0, "fuzz-regressions", "cannot open %s", dir);
        return;
    }
    int files = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char path[512], *diag;
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        int ne, nw;
        dm_model *m = front_file(path, &diag, &ne, &nw);
        if (m) {
            FILE *null = fopen("/dev/null", "w");
            dm_print_summary(m, null);
            fclose(null);
        }
        dm_model_free(m);
        free(diag);
        files++;
    }
    closedir(d);
    check(files > 0, "fuzz-regressions", "no files in %s", dir);
}

/* The scanner and parser keep no global state: many runs in a row give the same model. */
static void test_repeated_runs(void)
{
    int ok = 1;
    for (int i = 0; i < 300 && ok; i++) {
        char *diag;
        int ne, nw;
        dm_model *m =
            front(i % 2 ? typed_model : "model m \"x\"\nparam a @\nsignal a\n", &diag, &ne, &nw);
        ok = i % 2 ? m && m->params.n == 6 : !m && ne == 1;
        dm_model_free(m);
        free(diag);
    }
    check(ok, "repeated-runs", "a run differed");
}

/* Bounded sums and the Bessel constants: expansion, constant values, `1..N` without spaces,
 * and the summary's printing, which must read back as the same expression. */
static const char *sum_model =
    "model s \"sums\"\n"
    "measure b = bvals\n"
    "param d in (0, 1) init sum(k in 1..4) 1 / 2^k\n"
    "param r in (0, bessel_j1p_root(1)) init bessel_j0(0) step bessel_sj1p_root(1)\n"
    "let a = (sum(k in 1..3) k * d) * d\n"
    "let c = -sum(k in 1 .. 2) k / d\n"
    "let e = d ^ sum(k in 1..2) k * 2\n"
    "let f = sum(j in 1..3) sum(i in j..3) (i + j) * legendre(i, d)\n"
    "let g = sum(j in 1..3) sum(i in 1..j) i * d\n"
    "signal exp(-b * d) * r + a + c + e + f + g\n";

static char *print_lets(dm_model *m)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    for (int i = 0; i < m->lets.n; i++) {
        fprintf(f, "let %s = ", m->lets.items[i]->name);
        dm_print_expr(m->lets.items[i]->value, f);
        fputc('\n', f);
    }
    fclose(f);
    return text;
}

static void test_sums(void)
{
    char *diag;
    int nerr, nwarn;
    dm_model *m = front(sum_model, &diag, &nerr, &nwarn);
    check(m && nerr == 0, "sum-model-checks", "%d errors: %s", nerr, diag);
    if (!m || nerr) {
        free(diag);
        dm_model_free(m);
        return;
    }
    dm_param *d = param(m, "d"), *r = param(m, "r");
    check(d->init == 0.9375, "sum-constant-init", "%.17g", d->init);
    check(fabs(r->hi - 1.8411837813406593) < 1e-15 && r->init == 1 &&
              fabs(r->step - 2.0815759778181007) < 1e-15,
          "bessel-constants", "hi %.17g init %.17g step %.17g", r->hi, r->init, r->step);
    dm_expr *fe = let(m, "f")->value;
    int inner = 0;
    for (int j = 0; j < fe->nargs; j++) inner += fe->args[j]->nargs;
    check(fe->kind == DM_E_SUM && fe->nargs == 3 && inner == 6, "sum-expansion",
          "%d outer terms, %d inner", fe->nargs, inner);
    dm_expr *ge = let(m, "g")->value;
    inner = 0;
    for (int j = 0; j < ge->nargs; j++) inner += ge->args[j]->nargs; /* the body: i * d */
    check(ge->kind == DM_E_SUM && ge->nargs == 3 && inner == 6, "sum-bound-from-outer-variable",
          "%d outer terms, %d inner", ge->nargs, inner);
    dm_expr *ce = let(m, "c")->value;
    check(ce->kind == DM_E_UNARY && ce->a->kind == DM_E_SUM && ce->a->nargs == 2,
          "sum-spaced-range", "c is not -(sum of 2 terms)");
    /* print, read back, print again: the same text */
    char *first = print_lets(m);
    size_t n = strlen(first) + 256;
    char *again = malloc(n);
    snprintf(again, n,
             "model s \"x\"\nmeasure b = bvals\nparam d in (0, 1) init 0.5\n%s"
             "signal exp(-b * d) + a + c + e + f\n",
             first);
    char *diag2;
    dm_model *m2 = front(again, &diag2, &nerr, &nwarn);
    char *second = m2 && nerr == 0 ? print_lets(m2) : NULL;
    check(second && !strcmp(first, second), "sum-summary-reads-back", "%s\nvs\n%s%s", first,
          second ? second : "", diag2);
    free(second);
    free(diag2);
    dm_model_free(m2);
    free(again);
    free(first);
    free(diag);
    dm_model_free(m);
}

/* 3x3 matrices: A and B constant, so that lowering folds every entry to a number. */
static const char *matrix_model =
    "model mats \"3x3 matrices\"\n"
    "measure g[3] = bvecs\n"
    "measure b = bvals\n"
    "param d in (0, 1) init 0.5\n"
    "function scaled(M, s) = M * s\n"
    "compartment tensor_sym(dxx, dxy, dxz, dyy, dyz, dzz) =\n"
    "    exp(-b * quad(g, sym(dxx, dxy, dxz, dyy, dyz, dzz)))\n"
    "let A = mat(2, 1, 0, 0, 3, 1, 1, 0, 4)\n"
    "let B = sym(1, 2, 3, 4, 5, 6)\n"
    "let v = vec(1, 2, 3)\n"
    "let det_A = det(A)\n"
    "let trace_A = trace(A)\n"
    "let AB12 = mul(A, B)[1][2]\n"
    "let Av = mv(A, v)\n"
    "let vBv = quad(v, B)\n"
    "let At02 = transpose(A)[0][2]\n"
    "let uv21 = outer(v, vec(4, 5, 6))[2][1]\n"
    "let D = diag(7, 8, 9)\n"
    "let ops01 = (A + B * 2 - -A / 2 - scaled(D, 1))[0][1]\n"
    "let row = B[1]\n"
    "let pick = d > 0.5 ? A : B\n"
    "let msum = sum(k in 1..3) D * k\n"
    "let R = rotation(0.7, 1.9, 0.4)\n"
    "let det_R = det(R)\n"
    "let RtR = trace(mul(transpose(R), R))\n"
    "let R02 = R[0][2]\n"
    "let R10 = R[1][0]\n"
    "signal tensor_sym(d, 0, 0, d, 0, d) + det(pick) * 0 + msum[0][0] * 0 + row[0] * 0\n"
    "output a22 = pick[2][2]\n";

/* The values of let NAME lowered (all constants here); its width, or -1. */
static int lowered(dm_model *m, const char *name, double *val)
{
    dm_prog P;
    dm_prog_init(&P, m, NULL);
    int ids[DM_MAX_WIDTH];
    int w = dm_lower_expr(&P, let(m, name)->value, ids);
    for (int i = 0; i < w; i++)
        if (!dm_ir_const_value(&P, ids[i], &val[i])) w = -1;
    dm_prog_free(&P);
    return w;
}

static void test_matrices(void)
{
    char *diag;
    int nerr, nwarn;
    dm_model *m = front(matrix_model, &diag, &nerr, &nwarn);
    check(m && nerr == 0 && nwarn == 0, "matrix-model-checks", "%d errors: %s", nerr, diag);
    free(diag);
    if (!m || nerr) {
        dm_model_free(m);
        return;
    }
    check(let(m, "A")->value->type == DM_T_MAT3 && let(m, "A")->value->width == 9 &&
              let(m, "row")->value->type == DM_T_VEC3 &&
              let(m, "AB12")->value->type == DM_T_SCALAR &&
              let(m, "Av")->value->type == DM_T_VEC3 && let(m, "vBv")->value->type == DM_T_SCALAR &&
              let(m, "pick")->value->type == DM_T_MAT3 && let(m, "msum")->value->type == DM_T_MAT3,
          "matrix-types", "let types");
    double v[DM_MAX_WIDTH];
    /* hand-computed: det A = 2 (3*4 - 1*0) - 1 (0*4 - 1*1) = 25; row 1 of A . column 2 of B =
     * 0*3 + 3*5 + 1*6 = 21; A v = (4, 9, 13); B v = (14, 25, 31), v.Bv = 157 */
    struct {
        const char *name;
        int width, at;
        double want;
    } cases[] = {
        {"det_A", 1, 0, 25}, {"trace_A", 1, 0, 9}, {"AB12", 1, 0, 21}, {"Av", 3, 2, 13},
        {"Av", 3, 0, 4},     {"vBv", 1, 0, 157},   {"At02", 1, 0, 1},  {"uv21", 1, 0, 15},
        {"D", 9, 4, 8},      {"D", 9, 1, 0},       {"B", 9, 7, 5},     {"ops01", 1, 0, 5.5},
        {"row", 3, 2, 5},    {"msum", 9, 8, 54},
    };
    int ok = 1;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int w = lowered(m, cases[i].name, v);
        if (w != cases[i].width || v[cases[i].at] != cases[i].want) {
            printf("     %s: width %d, [%d] = %.17g, want %g\n", cases[i].name, w, cases[i].at,
                   w > cases[i].at ? v[cases[i].at] : NAN, cases[i].want);
            ok = 0;
        }
    }
    check(ok, "matrix-values", "see above");
    /* rotation: orthogonal, det 1, third column dir(theta, phi), first perp_axis(theta, phi,
     * psi) = cos psi e_theta + sin psi e_phi */
    double det_r, rtr, r02, r10;
    int w = lowered(m, "det_R", &det_r) + lowered(m, "RtR", &rtr) + lowered(m, "R02", &r02) +
            lowered(m, "R10", &r10);
    double want10 = cos(0.4) * cos(0.7) * sin(1.9) + sin(0.4) * cos(1.9);
    check(w == 4 && fabs(det_r - 1) < 1e-15 && fabs(rtr - 3) < 1e-15 &&
              fabs(r02 - sin(0.7) * cos(1.9)) < 1e-16 && fabs(r10 - want10) < 1e-16,
          "rotation-values", "det %.17g, trace(R'R) %.17g, R02 %.17g, R10 %.17g vs %.17g", det_r,
          rtr, r02, r10, want10);
    dm_model_free(m);
}

int main(void)
{
    test_builtins_table();
    test_ball_2_sticks();
    test_other_models();
    test_types_and_defaults();
    test_edge_cases();
    test_diagnostic_format();
    test_bad_cases();
    test_fuzz_regressions();
    test_repeated_runs();
    test_sums();
    test_matrices();
    return failures ? 1 : 0;
}
