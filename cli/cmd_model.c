/* dimoc check, compile and info: the model designer's commands. */
#include "args.h"
#include "cli.h"
#include "compiler.h"
#include "dimoc.h"
#include "util/error.h"
#include "util/paths.h"
#include "util/fsutil.h"
#include "model/model_info.h"
#include "fit/fit.h"
#include "gpu/gpu_device.h"
#include "fodtrack/fodtrack_gpu.h"
#include "track/track_gpu.h"
#include "csd/csd_gpu.h"
#include "commit/commit_gpu.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const dm_opt no_opts[] = {
    {NULL, NULL, NULL, NULL},
};

static const dm_opt compile_opts[] = {
    {"o", "DIR", "generated/NAME", "folder for model.h and model.meta (created if needed)"},
    {NULL, NULL, NULL, NULL},
};

int dm_help_check(FILE *out)
{
    dm_args_help(out, "dimoc check FILE.model",
                 "Checks a model file: every mistake is printed as file:line:col: error: ...\n"
                 "with the line and a caret, then a count; a clean model prints its summary\n"
                 "(parameters, inputs, outputs).  Exit status 0 when clean, 1 otherwise.\n"
                 "The model language: docs/model-language.md",
                 no_opts);
    return 0;
}

int dm_help_compile(FILE *out)
{
    dm_args_help(out, "dimoc compile FILE.model [-o DIR]",
                 "Checks a model file and writes the code the compiler makes of it: model.h\n"
                 "(the one source both the host compiler and NVRTC build) and model.meta\n"
                 "(docs/metadata.md).  `dimoc fit` compiles models itself; this is for reading\n"
                 "the generated code or shipping it.",
                 compile_opts);
    return 0;
}

int dm_help_info(FILE *out)
{
    dm_args_help(out, "dimoc info [MODEL]",
                 "Without MODEL, lists the shipped models.  With MODEL (a shipped model name or\n"
                 "a .model file), prints its parameters (bounds, initial value, prior), its\n"
                 "per-measurement and per-voxel inputs, its outputs and the work (operations)\n"
                 "of one signal evaluation.",
                 no_opts);
    return 0;
}

/* Parses a model command's options; one positional (optional when `optional`) in *file.
 * 0, or -1 with the error set. */
static int parse_model_args(const char *cmd, const dm_opt *opts, int (*help)(FILE *out), int argc,
                            char **argv, dm_args *a, int optional, const char **file)
{
    if (dm_args_parse(cmd, opts, help, argc, argv, a) != 0) return -1;
    if (a->npositional > 1)
        return dm_set_error("%s: one model at a time ('%s', then '%s') (see 'dimoc help %s')", cmd,
                            a->positional[0], a->positional[1], cmd);
    if (a->npositional == 0 && !optional)
        return dm_set_error("%s: give a FILE.model (see 'dimoc help %s')", cmd, cmd);
    *file = a->npositional ? a->positional[0] : NULL;
    return 0;
}

/* A model's diagnostics on stderr, as the front end prints them. */
static void print_diagnostics(const dimoc_model *m)
{
    const dimoc_error *const *d;
    int n = dimoc_model_diagnostics(m, &d);
    for (int i = 0; i < n; i++) fputs(d[i]->text, stderr);
}

int dm_cmd_check(int argc, char **argv)
{
    dm_args a;
    const char *file;
    if (parse_model_args("check", no_opts, dm_help_check, argc, argv, &a, 0, &file) != 0) {
        dm_args_free(&a);
        return dm_report_error();
    }
    dimoc_model *m = NULL;
    dimoc_status rc = dimoc_model_open_file(file, &m);
    int nerr = 1, nwarn = 0;
    if (m) {
        print_diagnostics(m);
        dimoc_model_problems(m, &nerr, &nwarn);
    } else {
        fputs(dimoc_last_error()->text, stderr); /* the file cannot be read */
    }
    char *summary = rc == DIMOC_OK ? dimoc_model_summary(m) : NULL;
    if (!summary) {
        fprintf(stderr, "%s: %d error%s, %d warning%s\n", file, nerr, nerr == 1 ? "" : "s", nwarn,
                nwarn == 1 ? "" : "s");
        dimoc_model_free(m);
        dm_args_free(&a);
        return 1;
    }
    fputs(summary, stdout);
    dimoc_free(summary);
    dimoc_model_free(m);
    dm_args_free(&a);
    return 0;
}

int dm_cmd_compile(int argc, char **argv)
{
    dm_args a;
    const char *file;
    if (parse_model_args("compile", compile_opts, dm_help_compile, argc, argv, &a, 0, &file) != 0) {
        dm_args_free(&a);
        return dm_report_error();
    }
    dm_model *m = dm_front_file(file, stderr, NULL, NULL);
    if (!m) {
        dm_args_free(&a);
        return 1;
    }
    char dir[512];
    if (dm_arg_given(&a, compile_opts, "o"))
        snprintf(dir, sizeof dir, "%s", dm_arg(&a, compile_opts, "o"));
    else
        snprintf(dir, sizeof dir, "generated/%s", m->name);
    int rc = dm_mkdir_p(dir);
    if (rc != 0) {
        dm_model_free(m);
        dm_args_free(&a);
        return dm_report_error();
    }
    rc = dm_emit_dir(m, dir, stderr);
    if (rc == 0) printf("%s: wrote %s/model.h, model.meta\n", file, dir);
    dm_model_free(m);
    dm_args_free(&a);
    return rc == 0 ? 0 : 1;
}

/* Opens MODEL (a shipped name or a .model file) and describes it; NULL with the model's
 * diagnostics printed and the error set (*m then holds what was made, to free). */
static const dimoc_model_description *open_described(const char *model, dimoc_model **m)
{
    dimoc_status rc = dimoc_model_open(model, m);
    if (*m) print_diagnostics(*m);
    const dimoc_error *e = dimoc_last_error();
    if (rc == DIMOC_E_IO) {
        dm_set_error("%s: %s", e->file, e->message);
        return NULL;
    }
    if (rc != DIMOC_OK) {
        dm_set_error("%s", e->message);
        return NULL;
    }
    const dimoc_model_description *d = dimoc_model_describe(*m);
    if (!d) dm_set_error("%s", dimoc_last_error()->message);
    return d;
}

static void list_models(void)
{
    char **names = NULL;
    int n = 0;
    dimoc_shipped_models(&names, &n);
    printf("shipped models:\n");
    if (n == 0) printf("  (none found beside the program)\n");
    for (int i = 0; i < n; i++) {
        dimoc_model *m = NULL;
        const dimoc_model_description *d = open_described(names[i], &m);
        if (d) printf("  %-22s %s\n", names[i], d->description);
        dimoc_model_free(m);
    }
    dimoc_free_list(names);
}

static void print_bound(double x)
{
    if (isinf(x))
        printf("%s", x > 0 ? "inf" : "-inf");
    else
        printf("%g", x);
}

int dm_cmd_info(int argc, char **argv)
{
    dm_args a;
    const char *name;
    if (parse_model_args("info", no_opts, dm_help_info, argc, argv, &a, 1, &name) != 0) {
        dm_args_free(&a);
        return dm_report_error();
    }
    if (!name) {
        dm_args_free(&a);
        list_models();
        return 0;
    }
    dimoc_model *m = NULL;
    const dimoc_model_description *d = open_described(name, &m);
    dm_args_free(&a);
    if (!d) {
        dimoc_model_free(m);
        return dm_report_error();
    }
    printf("%s: %s\n\n", d->name, d->description);
    printf("parameters (%d):\n", d->nparameters);
    printf("  %-10s %-26s %-12s %-18s %s\n", "name", "bounds", "init", "prior", "");
    for (int k = 0; k < d->nparameters; k++) {
        const dimoc_parameter *x = d->parameters[k];
        printf("  %-10s %c", x->name, x->lower_closed ? '[' : '(');
        print_bound(x->lower);
        printf(", ");
        print_bound(x->upper);
        printf("%c", x->upper_closed ? ']' : ')');
        printf("%*s", 4, "");
        if (*x->start)
            printf("%-12s", x->start);
        else
            printf("%-12g", x->init);
        char prior[64];
        if (!strcmp(x->prior, "gaussian") || !strcmp(x->prior, "gamma"))
            snprintf(prior, sizeof prior, "%s(%g, %g)", x->prior, x->prior_a, x->prior_b);
        else if (!strcmp(x->prior, "ard"))
            snprintf(prior, sizeof prior, "ard(%g)", x->prior_a);
        else
            snprintf(prior, sizeof prior, "%s", x->prior);
        printf(" %-18s %s\n", prior, x->periodic ? "periodic" : "");
    }
    printf("\nper-measurement inputs:\n");
    for (int i = 0; i < d->nmeasures; i++) {
        const dimoc_input *x = d->measures[i];
        printf("  %-10s width %d, from ", x->name, x->width);
        if (!strcmp(x->source, "scheme"))
            printf("--scheme (column %s)\n", x->scheme_column);
        else
            printf("%s\n", !strcmp(x->source, "bvals")   ? "--bvals"
                           : !strcmp(x->source, "bvecs") ? "--bvecs"
                                                         : "--measure NAME=FILE");
    }
    if (d->nvoxel_inputs) printf("\nper-voxel inputs (--voxel NAME=MAP):\n");
    for (int i = 0; i < d->nvoxel_inputs; i++) {
        const dimoc_input *x = d->voxel_inputs[i];
        printf("  %-10s width %d", x->name, x->width);
        if (x->has_default) printf(", default %g", x->default_value);
        printf("\n");
    }
    printf("\noutputs: one map per parameter");
    for (int i = 0; i < d->noutputs; i++)
        printf(", %s (%s)", d->outputs[i]->name, d->outputs[i]->kind_name);
    const dimoc_work *w = &d->work;
    printf(
        "\n\nwork per measurement: signal %ld operations (%ld transcendental), "
        "signal+gradient %ld (%ld);\nonce per voxel and evaluation: %ld (signal), %ld (gradient)\n",
        w->signal, w->signal_transcendental, w->gradient, w->gradient_transcendental, w->prepare,
        w->gradient_prepare);
    dimoc_model_free(m);
    return 0;
}

/* ---- dimoc warm ---- */

static const dm_opt warm_opts[] = {
    {"device", "cpu|gpu|auto", "auto",
     "the fitters of CPU fits (the host compiler's) or of GPU fits (NVRTC's for the GPUs here, "
     "and the host one a GPU fit uses for its outputs); auto: a GPU fit's where a GPU is "
     "usable, else a CPU fit's"},
    {"precision", "LIST", "float,double", "the precisions to compile (comma list)"},
    {"measurements", "M", "105", "the protocol size the GPU's lanes per voxel are chosen for"},
    {"lanes", "N", "auto", "GPU lanes per voxel instead (1, 2, 4, 8, 16 or 32)"},
    {"method", "LIST", "grid; lm; lm,mcmc",
     "the methods a GPU fitter holds, as a fit's --method (a GPU fitter is built for the "
     "methods of its run); by default one fitter for each of the three sets"},
    {"quiet", NULL, NULL, "no line per fitter"},
    {NULL, NULL, NULL, NULL},
};

/* The engines whose GPU programs warm compiles, by the names of their commands. */
static const char *const engine_names[3] = {"track", "csd", "commit"};

static int engine_index(const char *name)
{
    for (int e = 0; e < 3; e++)
        if (!strcmp(name, engine_names[e])) return e;
    return -1;
}

/* The engines' GPU programs (want[0..2]: track, csd, commit) for the GPUs here. */
static int warm_engines(const int want[3], const dm_warm_request *r)
{
    dm_cuda *cu = dm_cuda_open(1, 1);
    dm_gpu_set gs = {0};
    int rc = cu && dm_gpu_select(cu, "all", &gs) == 0 ? 0 : -1;
    const int use_double[2] = {r->real_size[0] != 0, r->real_size[1] != 0};
    if (rc == 0 && want[0]) rc = dm_track_gpu_precompile(cu, gs.arch, r->quiet);
    if (rc == 0 && want[0]) rc = dm_ft_gpu_precompile(cu, gs.arch, use_double, r->quiet);
    if (rc == 0 && want[1]) rc = dm_csd_gpu_precompile(cu, gs.arch, use_double, r->quiet);
    if (rc == 0 && want[2]) rc = dm_commit_gpu_precompile(cu, gs.arch, r->measurements, r->quiet);
    if (cu) dm_cuda_close(cu);
    return rc;
}

int dm_help_warm(FILE *out)
{
    dm_args_help(out, "dimoc warm [MODEL|ENGINE...] [options]",
                 "Compiles the fitters of the models (shipped names or .model files) into the\n"
                 "caches a fit reads ($XDG_CACHE_HOME/dimoc), so that the first fit of each\n"
                 "starts at once.  A fit on the GPU compiles for its lanes per voxel, which it\n"
                 "chooses from the measurement count: warm that count's (--measurements) or give\n"
                 "--lanes.  ENGINE is track, csd or commit: the GPU programs of those commands,\n"
                 "for their defaults (track: on samples, and on FODs each algorithm with and\n"
                 "without ACT, lmax 8; csd: lmax 8, single-shell and multi-tissue; commit: data\n"
                 "of --measurements volumes).\n"
                 "No name: every shipped model and, with a GPU, every engine.  `make install\n"
                 "WARM=1` runs it for the installed program.",
                 warm_opts);
    return 0;
}

int dm_cmd_warm(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("warm", warm_opts, dm_help_warm, argc, argv, &a) != 0)
        return dm_report_error();
    /* the names: models, and the engines' GPU programs */
    char **models = calloc((size_t)a.npositional + 1, sizeof *models);
    int nmodels = 0, engines[3] = {0, 0, 0}, first_engine = -1;
    for (int i = 0; i < a.npositional; i++) {
        const int e = engine_index(a.positional[i]);
        if (e < 0) {
            models[nmodels++] = a.positional[i];
            continue;
        }
        engines[e] = 1;
        if (first_engine < 0 || e < first_engine) first_engine = e;
    }
    dm_warm_request r = {.models = a.npositional ? models : NULL,
                         .nmodels = nmodels,
                         .quiet = dm_arg_given(&a, warm_opts, "quiet")};
    long m = 105, lanes = 0;
    int rc = dm_arg_long(&a, warm_opts, "measurements", 1, 100000, &m);
    if (rc == 0 && dm_arg_given(&a, warm_opts, "lanes")) {
        rc = dm_arg_long(&a, warm_opts, "lanes", 1, 32, &lanes);
        if (rc == 0 && (lanes & (lanes - 1)))
            rc = dm_set_error("--lanes: %ld is not a power of two", lanes);
    }
    const char *prec = dm_arg(&a, warm_opts, "precision");
    for (const char *p = prec; rc == 0 && *p;) {
        size_t n = strcspn(p, ",");
        if (n == 5 && !strncmp(p, "float", 5))
            r.real_size[0] = 4;
        else if (n == 6 && !strncmp(p, "double", 6))
            r.real_size[1] = 8;
        else
            rc = dm_set_error("--precision: '%.*s' is neither float nor double", (int)n, p);
        p += n + (p[n] == ',');
    }
    const char *device = dm_arg(&a, warm_opts, "device");
    if (rc == 0) {
        if (!strcmp(device, "cpu")) {
            r.cpu = 1;
        } else if (!strcmp(device, "gpu") || !strcmp(device, "auto")) {
            r.cpu = 1; /* a GPU fit too loads the host fitter (derived outputs, predictions) */
            rc = dm_gpu_resolve_device(device, "warm", &r.gpu);
        } else {
            rc = dm_set_error("--device: '%s' is none of cpu, gpu, auto", device);
        }
    }
    r.measurements = (int)m;
    r.lanes = (int)lanes;
    if (rc == 0 && dm_arg_given(&a, warm_opts, "method"))
        rc = dm_fit_parse_methods(dm_arg(&a, warm_opts, "method"), &r.methods);
    if (rc == 0 && first_engine >= 0 && !r.gpu)
        rc = dm_set_error("warm: %s has only GPU programs to compile (its CPU code is built into "
                          "dimoc), and %s",
                          engine_names[first_engine],
                          strcmp(device, "cpu") ? "no GPU is usable here" : "--device is cpu");
    if (rc == 0 && (!a.npositional || nmodels)) rc = dm_fit_warm(&r);
    if (rc == 0 && !a.npositional && r.gpu) engines[0] = engines[1] = engines[2] = 1;
    if (rc == 0 && (engines[0] || engines[1] || engines[2])) rc = warm_engines(engines, &r);
    free(models);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
