/* dimoc fit: the command line of the fitting library. */
#include "args.h"
#include "io/formats.h"
#include "io/gradients.h"
#include "cli.h"
#include "util/cmdline.h"
#include "util/error.h"
#include "fit/fit.h"

#include <stdlib.h>
#include <string.h>

static const dm_opt fit_opts[] = {
    {"data", "FILE", NULL,
     "4D diffusion data (NIfTI-1/2, .nii or .nii.gz, or MRtrix .mif/.mif.gz)"},
    {"mask", "FILE", NULL, "3D mask: fit the voxels where it is non-zero (default: every voxel)"},
    {"bvals", "FILE", NULL, "FSL b-values (one row or column; s/mm^2)"},
    {"bvecs", "FILE", NULL, "FSL gradient directions (3 rows or 3 columns)"},
    {"grad", "FILE", NULL, DM_GRAD_HELP},
    {"out", "DIR", NULL, "output folder (created if needed)"},
    {"format", "LIST", NULL, DM_FORMAT_HELP},
    {"method", "LIST", "lm",
     "comma list of grid or dictionary, lm, mcmc, run in that order, each from the last"},
    {"dictionary-penalty", "L1,L2", "0.5,1e-3",
     "--method dictionary: the elastic net's penalties (AMICO's; 0,0: plain NNLS)"},
    {"grid", "NAME=VALUES", NULL, "grid-search values, v1,v2,.. or lo:step:hi" DM_REPEATABLE},
    {"fixed", "NAMES", NULL, "parameters held at their initial values (comma list)" DM_REPEATABLE},
    {"init", "NAME=VALUE|MAP", NULL, "initial value or map of a parameter" DM_REPEATABLE},
    {"init-from", "DIR", NULL, "initialise every parameter that has a map NAME.nii.gz in DIR"},
    {"voxel", "NAME=MAP|VALUE", NULL, "a per-voxel input of the model" DM_REPEATABLE},
    {"measure", "NAME=FILE", NULL,
     "a per-measurement input of the model (one row per volume)" DM_REPEATABLE},
    {"scheme", "FILE", NULL,
     "acquisition scheme: named columns, one row per volume (measure NAME = scheme COLUMN)"},
    {"noise", "MODEL", "gaussian",
     "MCMC noise model: gaussian (variance integrated out) or rician"},
    {"burnin", "N", "1000", "MCMC jumps discarded before sampling"},
    {"jumps", "N", "1250", "MCMC jumps after burn-in"},
    {"sample-every", "N", "25", "keep one MCMC sample every N jumps"},
    {"update-every", "N", "40", "adapt the MCMC proposal widths every N jumps"},
    {"seed", "N", "42", "random seed; with the voxel index it keys each voxel's Philox stream"},
    {"lm-iterations", "N", "200", "Levenberg-Marquardt iteration limit"},
    {"save-samples", NULL, NULL, "write NAME_samples.nii.gz (4D) for every parameter"},
    {"samples-of", "NAMES", NULL,
     "write the samples of these parameters only, as --save-samples does: th1,ph1,f1"},
    {"predicted", NULL, NULL, "write predicted.nii.gz, the model's signal at the estimate"},
    {"ic", NULL, NULL, "write BIC.nii.gz and AIC.nii.gz"},
    {"out-type", "float32|float64", "float32", "data type of the output maps"},
    {"precision", "float|double|auto", "double",
     "floating-point precision of the fitter (auto: float where a GPU runs MCMC, else double)"},
    {"threads", "N", "all cores", "CPU threads"},
    {"device", "cpu|gpu|auto", "auto", "where to fit (auto: a usable GPU, else the CPU)"},
    {"gpus", "all|0,1,..", "all", "GPUs to use; each takes batches from a shared queue"},
    {"gpu-memory", "MB", "70% of free", "cap on the device memory each GPU's batches use"},
    {"lanes", "N", "auto",
     "GPU lanes per voxel: 1, 2, 4, 8, 16 or 32 (auto: from the measurement count)"},
    {"part", "K/N", NULL, "fit only the K-th of N shares of the voxels (`dimoc merge` joins them)"},
    DM_QUIET_OPT,
    {"then", NULL, NULL,
     "start the next stage of a cascade, from this stage's maps as written (see above)"},
    {"stage-options", NULL, NULL,
     "print the options a stage after --then takes, one per line (--NAME [ARG]), and exit"},
    {NULL, NULL, NULL, NULL},
};

/* The options a stage after --then may give; the others (inputs, machine, --part, --quiet)
 * are the first section's and hold for every stage.  --init-from is the previous stage. */
static const char *const stage_opts[] = {
    "out",          "method",        "grid",   "fixed", "init",         "dictionary-penalty",
    "out-type",     "lm-iterations", "burnin", "jumps", "sample-every", "update-every",
    "save-samples", "samples-of",    "predicted", "ic", "noise", "seed",      NULL,
};

const dm_opt *dm_fit_options(void)
{
    return fit_opts;
}

int dm_help_fit(FILE *out)
{
    /* The list of per-stage options is written from stage_opts, the one list of them. */
    char summary[2048], *end = summary + sizeof summary;
    char *w =
        summary +
        snprintf(
            summary, sizeof summary, "%s",
            "Fits MODEL (a shipped model name or a .model file) voxel by voxel.  Writes a map\n"
            "per parameter (the estimate, or the posterior mean after MCMC), NAME_sd after\n"
            "MCMC, the model's derived outputs, status.nii.gz (0 outside the mask, 1 fitted,\n"
            "2 not converged, 3 skipped: NaN/Inf, 4 skipped: all zero, 5 failed, 6 at a\n"
            "bound: LM ended with a parameter within a hair of a bound) and provenance.json.\n"
            "\n"
            "A cascade in one run: ... --out S/a --method grid ... --then --out S/b --method lm\n"
            "[--then ...].  Each stage after --then starts from the previous stage's maps as\n"
            "written (rounded to its --out-type: the maps of the separate command with\n"
            "--init-from S/a, byte for byte), then its own --init.  The inputs are read and the\n"
            "GPUs opened once.  A stage after --then gives only its own options:");
    int col = 65;
    for (int i = 0; stage_opts[i] && w < end; i++) {
        int len = (int)strlen(stage_opts[i]) + 4;
        int wrap = col + len > 88;
        w += snprintf(w, (size_t)(end - w), "%s--%s%s", wrap ? "\n" : " ", stage_opts[i],
                      stage_opts[i + 1] ? "," : ".");
        col = wrap ? len - 1 : col + len;
    }
    if (w < end)
        snprintf(w, (size_t)(end - w), "%s",
                 "\nThose not given take their defaults, not the previous stage's.");
    dm_args_help(out, "dimoc fit MODEL --data FILE --out DIR [options]", summary, fit_opts);
    return 0;
}

/* --stage-options: the per-stage options, one line each, "--NAME" or "--NAME ARG" (read by
 * pipelines/lib/flags.bash to pass a pipeline user's per-stage options to every stage). */
static void print_stage_options(FILE *out)
{
    for (int i = 0; stage_opts[i]; i++) {
        const dm_opt *o = dm_opt_find(fit_opts, stage_opts[i]);
        fprintf(out, "--%s%s%s\n", o->name, o->arg ? " " : "", o->arg ? o->arg : "");
    }
}

/* Whether option `name` may be given after --then. */
static int stage_option(const char *name)
{
    for (int i = 0; stage_opts[i]; i++)
        if (!strcmp(stage_opts[i], name)) return 1;
    return 0;
}

/* A section after --then: only per-stage options.  0, or -1 with the one-line error. */
static int check_stage_section(const dm_args *a)
{
    if (a->npositional > 0)
        return dm_set_error("fit: '%s' after --then: a stage takes no MODEL or other word (see "
                            "'dimoc help fit')",
                            a->positional[0]);
    for (int i = 0; fit_opts[i].name; i++) {
        if (!a->given[i] || stage_option(fit_opts[i].name)) continue;
        if (!strcmp(fit_opts[i].name, "init-from"))
            return dm_set_error("fit: --init-from after --then: a later stage starts from the "
                                "previous stage's maps (see 'dimoc help fit')");
        return dm_set_error("fit: --%s after --then: the inputs and machine options go before "
                            "the first --then and hold for every stage (see 'dimoc help fit')",
                            fit_opts[i].name);
    }
    return 0;
}

/* The per-stage options of a section into r (their defaults where not given). */
static int read_stage_options(const dm_args *a, dm_fit_request *r)
{
    int rc = 0;
    long seed = 42;
    r->out = dm_arg(a, fit_opts, "out");
    r->methods = dm_arg(a, fit_opts, "method");
    r->grid = dm_arg(a, fit_opts, "grid");
    r->dictionary_penalty = dm_arg(a, fit_opts, "dictionary-penalty");
    r->fixed = dm_arg(a, fit_opts, "fixed");
    r->init = dm_arg(a, fit_opts, "init");
    r->noise = dm_arg(a, fit_opts, "noise");
    const char *ot = dm_arg(a, fit_opts, "out-type");
    r->out_float64 = !strcmp(ot, "float64");
    if (!r->out_float64 && strcmp(ot, "float32"))
        rc = dm_set_error("--out-type: '%s' is neither float32 nor float64", ot);
    r->samples_of = dm_arg_given(a, fit_opts, "samples-of") ? dm_arg(a, fit_opts, "samples-of")
                                                             : NULL;
    r->save_samples = dm_arg_given(a, fit_opts, "save-samples") || r->samples_of;
    r->predicted = dm_arg_given(a, fit_opts, "predicted");
    r->ic = dm_arg_given(a, fit_opts, "ic");
    rc |= dm_arg_long(a, fit_opts, "burnin", 0, 100000000, &r->burnin);
    rc |= dm_arg_long(a, fit_opts, "jumps", 1, 100000000, &r->jumps);
    rc |= dm_arg_long(a, fit_opts, "sample-every", 1, 100000000, &r->sample_every);
    rc |= dm_arg_long(a, fit_opts, "update-every", 1, 100000000, &r->update_every);
    rc |= dm_arg_long(a, fit_opts, "lm-iterations", 1, 100000000, &r->lm_iterations);
    rc |= dm_arg_long(a, fit_opts, "seed", 0, 0x7fffffffffffffffL, &seed);
    r->seed = (unsigned long long)seed;
    return rc ? -1 : 0;
}

/* The first section's options: the inputs, the machine, --init-from, and its stage's own. */
static int read_first_section(const dm_args *a, dm_fit_request *r)
{
    int rc = read_stage_options(a, r);
    r->model = a->positional[0];
    r->data = dm_arg(a, fit_opts, "data");
    r->mask = dm_arg(a, fit_opts, "mask");
    r->bvals = dm_arg(a, fit_opts, "bvals");
    r->bvecs = dm_arg(a, fit_opts, "bvecs");
    r->grad = dm_arg(a, fit_opts, "grad");
    r->init_from = dm_arg(a, fit_opts, "init-from");
    r->voxel = dm_arg(a, fit_opts, "voxel");
    r->measure = dm_arg(a, fit_opts, "measure");
    r->scheme = dm_arg(a, fit_opts, "scheme");
    r->precision = dm_arg(a, fit_opts, "precision");
    r->device = dm_arg(a, fit_opts, "device");
    r->gpus = dm_arg(a, fit_opts, "gpus");
    if (dm_arg_given(a, fit_opts, "gpu-memory"))
        rc |= dm_arg_long(a, fit_opts, "gpu-memory", 1, 1L << 30, &r->gpu_memory_mb);
    if (dm_arg_given(a, fit_opts, "lanes")) {
        rc |= dm_arg_long(a, fit_opts, "lanes", 1, 32, &r->lanes);
        if (rc == 0 && (r->lanes & (r->lanes - 1)))
            rc = dm_set_error("--lanes: %ld is not a power of two", r->lanes);
    }
    r->quiet = dm_arg_given(a, fit_opts, "quiet");
    if (dm_arg_given(a, fit_opts, "threads"))
        rc |= dm_arg_long(a, fit_opts, "threads", 1, 4096, &r->threads);
    if (rc == 0) rc = dm_part_parse(dm_arg(a, fit_opts, "part"), &r->part);
    return rc ? -1 : 0;
}

int dm_cmd_fit(int argc, char **argv)
{
    /* Sections split at each --then: the first holds MODEL, the inputs and the machine; each
     * later one a stage's own options, all checked before any work starts. */
    int nstages = 1;
    for (int i = 0; i < argc; i++) nstages += !strcmp(argv[i], "--then");
    dm_args *a = calloc((size_t)nstages, sizeof *a);
    dm_fit_request *r = calloc((size_t)nstages, sizeof *r);
    int parsed = 0, rc = 0, usage = 0;
    for (int s = 0, begin = 0; s < nstages && rc == 0; s++) {
        int end = begin;
        while (end < argc && strcmp(argv[end], "--then")) end++;
        rc = dm_args_parse("fit", fit_opts, dm_help_fit, end - begin, argv + begin, &a[s]);
        parsed += rc == 0;
        begin = end + 1;
    }
    char *cmdline = NULL;
    if (rc == 0 && dm_arg_given(&a[0], fit_opts, "stage-options")) {
        print_stage_options(stdout);
        goto done;
    }
    if (rc == 0 && a[0].npositional != 1) {
        dm_set_error("fit: give exactly one MODEL (see 'dimoc help fit')");
        rc = -1, usage = 1;
    }
    for (int s = 1; s < nstages && rc == 0; s++) {
        rc = check_stage_section(&a[s]);
        usage = rc != 0;
    }
    cmdline = dm_command_line();
    for (int s = 0; s < nstages && rc == 0; s++) {
        dm_fit_request_defaults(&r[s]);
        if (s == 0) {
            rc = read_first_section(&a[0], &r[0]);
        } else {
            /* The inputs and the machine are the first section's; the rest this stage's. */
            r[s] = r[0];
            r[s].init_from = r[s - 1].out;
            dm_fit_request defaults;
            dm_fit_request_defaults(&defaults);
            r[s].burnin = defaults.burnin, r[s].jumps = defaults.jumps;
            r[s].sample_every = defaults.sample_every, r[s].update_every = defaults.update_every;
            r[s].lm_iterations = defaults.lm_iterations, r[s].seed = defaults.seed;
            rc = read_stage_options(&a[s], &r[s]);
        }
        r[s].command_line = cmdline;
    }
    if (rc == 0) rc = dm_fit_run_cascade(r, nstages);
done:
    free(cmdline);
    for (int s = 0; s < parsed; s++) dm_args_free(&a[s]);
    free(a);
    free(r);
    if (rc == 0) return 0;
    dm_report_error();
    return usage ? 2 : 1;
}
