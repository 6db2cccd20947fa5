/* dimoc fit: the command line of the fitting library. */
#include "args.h"
#include "cli.h"
#include "util/cmdline.h"
#include "util/error.h"
#include "fit/fit.h"

#include <stdlib.h>
#include <string.h>

static const dm_opt fit_opts[] = {
    {"data", "FILE", NULL, "4D diffusion data (NIfTI-1/2, .nii or .nii.gz)"},
    {"mask", "FILE", NULL, "3D mask: fit the voxels where it is non-zero (default: every voxel)"},
    {"bvals", "FILE", NULL, "FSL b-values (one row or column; s/mm^2)"},
    {"bvecs", "FILE", NULL, "FSL gradient directions (3 rows or 3 columns)"},
    {"out", "DIR", NULL, "output folder (created if needed)"},
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
    {"predicted", NULL, NULL, "write predicted.nii.gz, the model's signal at the estimate"},
    {"ic", NULL, NULL, "write BIC.nii.gz and AIC.nii.gz"},
    {"out-type", "float32|float64", "float32", "data type of the output maps"},
    {"precision", "float|double", "double", "floating-point precision of the fitter"},
    {"threads", "N", "all cores", "CPU threads"},
    {"device", "cpu|gpu|auto", "auto", "where to fit (auto: a usable GPU, else the CPU)"},
    {"gpus", "all|0,1,..", "all", "GPUs to use; each takes batches from a shared queue"},
    {"gpu-memory", "MB", "70% of free", "cap on the device memory each GPU's batches use"},
    {"lanes", "N", "auto",
     "GPU lanes per voxel: 1, 2, 4, 8, 16 or 32 (auto: from the measurement count)"},
    {"part", "K/N", NULL, "fit only the K-th of N shares of the voxels (`dimoc merge` joins them)"},
    {"quiet", NULL, NULL, "no progress line"},
    {NULL, NULL, NULL, NULL},
};

const dm_opt *dm_fit_options(void)
{
    return fit_opts;
}

int dm_help_fit(FILE *out)
{
    dm_args_help(
        out, "dimoc fit MODEL --data FILE --out DIR [options]",
        "Fits MODEL (a shipped model name or a .model file) voxel by voxel.  Writes a map\n"
        "per parameter (the estimate, or the posterior mean after MCMC), NAME_std after\n"
        "MCMC, the model's derived outputs, status.nii.gz (0 outside the mask, 1 fitted,\n"
        "2 not converged, 3 skipped: NaN/Inf, 4 skipped: all zero, 5 failed, 6 at a\n"
        "bound: LM ended with a parameter within a hair of a bound) and provenance.json.",
        fit_opts);
    return 0;
}

int dm_cmd_fit(int argc, char **argv)
{
    dm_args a;
    if (dm_args_parse("fit", fit_opts, argc, argv, &a) != 0) return dm_report_error();
    if (a.npositional != 1) {
        dm_args_free(&a);
        fprintf(stderr, "dimoc: error: fit: give exactly one MODEL (see 'dimoc help fit')\n");
        return 2;
    }
    dm_fit_request r;
    dm_fit_request_defaults(&r);
    long seed = 42;
    int rc = 0;
    r.model = a.positional[0];
    r.data = dm_arg(&a, fit_opts, "data");
    r.mask = dm_arg(&a, fit_opts, "mask");
    r.bvals = dm_arg(&a, fit_opts, "bvals");
    r.bvecs = dm_arg(&a, fit_opts, "bvecs");
    r.out = dm_arg(&a, fit_opts, "out");
    r.methods = dm_arg(&a, fit_opts, "method");
    r.grid = dm_arg(&a, fit_opts, "grid");
    r.dictionary_penalty = dm_arg(&a, fit_opts, "dictionary-penalty");
    r.fixed = dm_arg(&a, fit_opts, "fixed");
    r.init = dm_arg(&a, fit_opts, "init");
    r.init_from = dm_arg(&a, fit_opts, "init-from");
    r.voxel = dm_arg(&a, fit_opts, "voxel");
    r.measure = dm_arg(&a, fit_opts, "measure");
    r.scheme = dm_arg(&a, fit_opts, "scheme");
    r.noise = dm_arg(&a, fit_opts, "noise");
    r.precision = dm_arg(&a, fit_opts, "precision");
    r.device = dm_arg(&a, fit_opts, "device");
    r.gpus = dm_arg(&a, fit_opts, "gpus");
    const char *ot = dm_arg(&a, fit_opts, "out-type");
    if (!strcmp(ot, "float64"))
        r.out_float64 = 1;
    else if (strcmp(ot, "float32"))
        rc = dm_set_error("--out-type: '%s' is neither float32 nor float64", ot);
    if (dm_arg_given(&a, fit_opts, "gpu-memory"))
        rc |= dm_arg_long(&a, fit_opts, "gpu-memory", 1, 1L << 30, &r.gpu_memory_mb);
    if (dm_arg_given(&a, fit_opts, "lanes")) {
        rc |= dm_arg_long(&a, fit_opts, "lanes", 1, 32, &r.lanes);
        if (rc == 0 && (r.lanes & (r.lanes - 1)))
            rc = dm_set_error("--lanes: %ld is not a power of two", r.lanes);
    }
    r.save_samples = dm_arg_given(&a, fit_opts, "save-samples");
    r.predicted = dm_arg_given(&a, fit_opts, "predicted");
    r.ic = dm_arg_given(&a, fit_opts, "ic");
    r.quiet = dm_arg_given(&a, fit_opts, "quiet");
    rc |= dm_arg_long(&a, fit_opts, "burnin", 0, 100000000, &r.burnin);
    rc |= dm_arg_long(&a, fit_opts, "jumps", 1, 100000000, &r.jumps);
    rc |= dm_arg_long(&a, fit_opts, "sample-every", 1, 100000000, &r.sample_every);
    rc |= dm_arg_long(&a, fit_opts, "update-every", 1, 100000000, &r.update_every);
    rc |= dm_arg_long(&a, fit_opts, "lm-iterations", 1, 100000000, &r.lm_iterations);
    rc |= dm_arg_long(&a, fit_opts, "seed", 0, 0x7fffffffffffffffL, &seed);
    if (dm_arg_given(&a, fit_opts, "threads"))
        rc |= dm_arg_long(&a, fit_opts, "threads", 1, 4096, &r.threads);
    r.seed = (unsigned long long)seed;
    if (rc == 0) rc = dm_part_parse(dm_arg(&a, fit_opts, "part"), &r.part);
    char *cmdline = dm_command_line();
    r.command_line = cmdline;
    if (rc == 0) rc = dm_fit_run(&r);
    free(cmdline);
    dm_args_free(&a);
    return rc == 0 ? 0 : dm_report_error();
}
